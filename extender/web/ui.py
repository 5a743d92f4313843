"""The read-only status page: GET /ui, a static page (extender/web/ui/: plain HTML, CSS and
JS, nothing fetched from elsewhere) that fetches GET /ui/state.json every 3 s and draws it.

state.json is `extender.status.cluster_status` (the nodes, their GPUs and queues; the
waiting pods and their needs; what `schedtune queues` prints) plus the latest decisions
and the time of the data. It only reads Redis; with Redis down it answers 503 with the
reason, which the page shows. The page builds its DOM from text nodes only, never parsing
data as HTML, and the Content-Security-Policy allows no inline script: pod names, GPU
labels and reasons come from users.

Guarded by the token like the verbs (`auth.install(..., pages=[bp])`).
"""

from __future__ import annotations

import logging

from flask import Blueprint, Response

from extender.errors import ExtenderError
from extender.metrics import ERRORS
from extender.status import cluster_status
from extender.web.http_io import respond, scheduler

DECISIONS_SHOWN = 50
# Scripts and styles from this origin only, nothing inline, never inside another site's
# frame, never sniffed into another type, never cached (the data is seconds old).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}

bp = Blueprint("ui", __name__, static_folder="ui", static_url_path="/ui/static")
log = logging.getLogger(__name__)


@bp.get("/ui")
def page() -> Response:
    return bp.send_static_file("index.html")


@bp.get("/ui/state.json")
def state() -> Response:
    sched = scheduler()
    now = sched.clock()
    status = cluster_status(sched.store, sched.settings.collocation, now)
    return respond({"now": now, **status, "decisions": sched.store.decisions(DECISIONS_SHOWN)})


@bp.after_request
def secure(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response


@bp.errorhandler(ExtenderError)
def ui_error(exc: ExtenderError) -> Response:
    """A refusal (401) or Redis down (503): `{"error": reason}`, which the page shows."""
    ERRORS.labels("ui", type(exc).__name__).inc()
    log.warning("request failed", extra={"verb": "ui", "error": type(exc).__name__,
                                         "detail": str(exc)[:300]})
    return respond({"error": str(exc)}, exc.status)
