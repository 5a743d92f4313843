"""The Flask app factory, served by `schedtune serve`, i.e.
`gunicorn -c extender/web/gunicorn.conf.py 'extender.web.app:create_app()'`.

gunicorn's master builds the app before it listens (settings validated once,
the estimator's artefacts loaded read-only and every profiled job predicted up
front, a Redis client) and its workers fork with it; all mutable state lives in
Redis. No app object exists at import time.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from flask import Flask, Response

from estimator.predict import Estimator
from extender import logs, metrics
from extender.web import auth
from extender.web import routes_kube
from extender.web import routes_volcano
from extender.web import ui
from extender.redis_url import display
from extender.state.embedded_redis import open_store
from extender.errors import StoreUnavailable
from extender.web.known_nodes import KnownNodeObjects
from extender.web.ahead import PricedAhead
from extender.web.http_io import respond
from extender.cluster.binders import RECORD_ONLY, BindTarget
from extender.gang_verbs import SizeReader
from extender.service import Scheduler
from extender.settings import Settings
from extender.wire.objects import NodeLayouts

log = logging.getLogger(__name__)
READY_LISTS = 20  # unusable registry entries /readyz names (it counts them all)


def create_app(settings: Settings | None = None, binder: BindTarget | None = None,
               clock: Callable[[], float] | None = None,
               estimator: Estimator | None = None) -> Flask:
    """Build the app. `binder`, `clock` and `estimator` are injected by tests and replay."""
    settings = settings or Settings.from_env(os.environ)
    logs.configure(settings.log_level)
    store = open_store(settings, start_embedded=True)
    estimator = estimator or Estimator.load(settings.models_dir, design=settings.estimator_design)
    estimator.warm()
    binder = binder or _binder(settings)
    scheduler = Scheduler(settings, store, estimator, binder, **({"clock": clock} if clock else {}),
                          group_sizes=_group_sizes(binder))
    try:  # models registered at run time, warmed before any request
        scheduler.registry.sync()
    except StoreUnavailable as exc:  # a request follows the registry then
        log.warning("model registry not read at start", extra={"error": str(exc)[:300]})
    state = metrics.StateCollector(store, settings.collocation,
                                   **({"clock": clock} if clock else {}))

    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.extensions["schedtune"] = scheduler
    app.extensions["schedtune.node_layouts"] = NodeLayouts()
    app.extensions["schedtune.known_nodes"] = KnownNodeObjects()
    app.extensions["schedtune.priced_ahead"] = PricedAhead()
    app.register_blueprint(routes_kube.bp)
    app.register_blueprint(routes_volcano.bp)
    app.register_blueprint(ui.bp)
    auth.install(app, settings.auth_token, routes_kube.bp, routes_volcano.bp, pages=[ui.bp])

    @app.get("/healthz")
    def healthz() -> Response:
        return respond({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        try:
            store.ping()
        except StoreUnavailable as exc:
            return respond({"status": "unavailable", "redis": str(exc)}, 503)
        registry = scheduler.registry
        return respond({"status": "ready", "models": len(estimator.models),
                        "registry": {"revision": registry.revision,
                                     "registered": len(registry.models),
                                     "unusable": len(registry.unusable),
                                     "skipped": {k[:63]: why[:200] for k, why in sorted(
                                         registry.unusable.items())[:READY_LISTS]}}})

    @app.get("/metrics")
    def metrics_view() -> Response:
        body, content_type = metrics.render([state])
        return Response(body, mimetype=content_type.split(";")[0])

    log.info("app built", extra={"redis": display(settings.store_url),
                                 "bind_mode": settings.bind_mode,
                                 "client_auth": auth.describe(settings),
                                 "design": settings.estimator_design})
    return app


def _group_sizes(binder: BindTarget) -> SizeReader | None:
    """PodGroups are read where the API server is (the cluster's Binder): a gang's size."""
    if binder is RECORD_ONLY:
        return None
    from extender.cluster import kube  # noqa: PLC0415

    return kube.PodGroupSizes().size if isinstance(binder, kube.Binder) else None


def _binder(settings: Settings) -> BindTarget:
    """The API server's Binder in `api` mode with a cluster configured; else record only."""
    if settings.bind_mode == "record":
        return RECORD_ONLY
    from extender.cluster import kube  # noqa: PLC0415  (slow to import; only when binding)

    if not kube.load_config(settings.kubeconfig):
        log.warning("no cluster configuration: bind verbs reserve without creating Bindings")
        return RECORD_ONLY
    return kube.Binder()
