"""gunicorn settings: `gunicorn -c extender/web/gunicorn.conf.py 'extender.web.app:create_app()'`.

Reads the same EXTENDER_* variables as the app (extender/settings.py).

Worker model: gevent. A connection costs a greenlet, not a thread or a process, so
slow or idle clients (a request line, then a header every few seconds) cannot starve
the verbs or /healthz: a worker holds up to `worker_connections` of them while it
serves the others. Handling a request is CPU work around Redis calls, so a worker
still runs one request at a time and `workers` sets the parallelism. The monkey
patch comes first, before this file or the app creates a lock or a socket: a lock
made before it would block the whole worker while its holder waits for Redis.

Start-up: the master starts what every worker shares (the multi-process metrics
directory and, when REDIS_URL is unset, the embedded redis-server), then builds the
app (estimator loaded and warmed) *before* it opens the listening socket; workers
fork with the app built. So a starting replica refuses connections until it can
answer them at once, and never accepts one it leaves hanging.

Ready: "extender ready" is logged by `when_ready`, once the master listens; a master that
cannot listen (the address in use) exits non-zero without claiming it.

Shut-down: the master stops what it started, and removes the metrics directory if it
made one (PROMETHEUS_MULTIPROC_DIR unset); a directory someone configured stays. It does
so on every exit of the master, not only gunicorn's `on_exit`: a failure to bind or to
build the app exits without calling it, so the same clean-up runs at interpreter exit
too (in the master only: the forked workers inherit the registration).
"""

from gevent import monkey

monkey.patch_all()

import atexit  # noqa: E402
import gc  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import ssl  # noqa: E402
import tempfile  # noqa: E402

from extender.settings import Settings  # noqa: E402

_settings = Settings.from_env(os.environ)
_embedded = []
_children = []
_made_dirs = []  # directories on_starting created, so on_exit removes those and no others
log = logging.getLogger("extender.web.gunicorn")

bind = _settings.bind_address
workers = _settings.workers
worker_class = "gevent"
worker_connections = _settings.worker_connections  # open connections per worker, slow ones too
timeout = 30
graceful_timeout = 10
keepalive = 5  # s an idle kept-alive connection stays open (kube-scheduler reuses them)
limit_request_line = 4094  # bytes; gunicorn's defaults, stated: bounds before parsing
limit_request_fields = 100
limit_request_field_size = 8190
accesslog = None
control_socket_disable = True  # gunicorn's runtime control socket (~/.gunicorn): not served
if _settings.tls_cert_file:
    certfile, keyfile = _settings.tls_cert_file, _settings.tls_key_file
if _settings.tls_client_ca_file:  # mutual TLS: no client certificate, no connection
    cert_reqs, ca_certs = ssl.CERT_REQUIRED, _settings.tls_client_ca_file


def on_starting(server):  # noqa: ANN001
    """In the master, before it listens: shared services, then the app itself."""
    atexit.register(_stop_shared, os.getpid())
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        metrics_dir = tempfile.mkdtemp(prefix="schedtune-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
        _made_dirs.append(metrics_dir)
    if _settings.embedded_redis_dir is not None:  # workers find it at settings.store_url
        from extender.state.embedded_redis import EmbeddedRedis

        redis = EmbeddedRedis(_settings.embedded_redis_dir)
        redis.start()
        _embedded.append(redis)
    server.app.wsgi()  # what preload_app does, after the services the app needs are up
    gc.collect()
    gc.freeze()  # the app's objects stay in pages the workers share after fork


def when_ready(server):  # noqa: ANN001
    """In the master, once it listens (workers not forked yet)."""
    from extender.cluster.node_watch import start_in_background

    watcher = start_in_background(_settings)
    if watcher is not None:
        _children.append(watcher)
    log.info("extender ready", extra={"listening": ",".join(map(str, server.LISTENERS))})


def post_worker_init(worker):  # noqa: ANN001, ARG001
    # The app's ~150k long-lived objects (sklearn, numpy, the estimator) would otherwise be
    # re-scanned by every full collection: a 40 ms pause on a request now and then.
    gc.collect()
    gc.freeze()


def child_exit(server, worker):  # noqa: ANN001, ARG001
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):  # noqa: ANN001, ARG001
    _stop_shared(os.getpid())


def _stop_shared(master_pid: int) -> None:
    """Stop what the master started and remove what it made, once (on_exit, then atexit)."""
    if os.getpid() != master_pid:
        return  # a worker exiting: the master's services are not its to stop
    while _children:
        child = _children.pop()
        child.terminate()
        child.wait(timeout=10)
    while _embedded:
        _embedded.pop().stop()
    while _made_dirs:
        shutil.rmtree(_made_dirs.pop(), ignore_errors=True)
