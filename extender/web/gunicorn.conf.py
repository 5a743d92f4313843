"""gunicorn settings: `gunicorn -c extender/web/gunicorn.conf.py 'extender.web.app:create_app()'`.

Reads the same EXTENDER_* variables as the app (extender/settings.py). The master
starts what every worker shares: the multi-process metrics directory and, when
REDIS_URL is unset, the embedded redis-server (AOF under EXTENDER_STATE_DIR).
"""

import gc
import os
import ssl
import tempfile

from extender.settings import Settings

_settings = Settings.from_env(os.environ)
_embedded = []
_children = []

bind = _settings.bind_address
workers = _settings.workers
timeout = 30
graceful_timeout = 10
accesslog = None
if _settings.tls_cert_file:
    certfile, keyfile = _settings.tls_cert_file, _settings.tls_key_file
if _settings.tls_client_ca_file:  # mutual TLS: no client certificate, no connection
    cert_reqs, ca_certs = ssl.CERT_REQUIRED, _settings.tls_client_ca_file


def on_starting(server):  # noqa: ANN001, ARG001
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="schedtune-metrics-"))
    if _settings.embedded_redis_dir is not None:  # workers find it at settings.store_url
        from extender.state.embedded_redis import EmbeddedRedis

        redis = EmbeddedRedis(_settings.embedded_redis_dir)
        redis.start()
        _embedded.append(redis)


def when_ready(server):  # noqa: ANN001, ARG001
    from extender.cluster.node_watch import start_in_background

    watcher = start_in_background(_settings)
    if watcher is not None:
        _children.append(watcher)


def post_worker_init(worker):  # noqa: ANN001, ARG001
    # The app's ~150k long-lived objects (sklearn, numpy, the estimator) would otherwise be
    # re-scanned by every full collection: a 40 ms pause on a request now and then.
    gc.collect()
    gc.freeze()


def child_exit(server, worker):  # noqa: ANN001, ARG001
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):  # noqa: ANN001, ARG001
    for child in _children:
        child.terminate()
        child.wait(timeout=10)
    for redis in _embedded:
        redis.stop()
