"""Request and response plumbing shared by the route modules: bounded JSON in, orjson out."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import wraps
from typing import Any

import orjson
from flask import Response, current_app, request
from werkzeug.exceptions import RequestEntityTooLarge

from extender.errors import BadRequest, BodyTooLarge
from extender.metrics import REQUEST_SECONDS
from extender.service import Scheduler
from extender.wire.objects import NodeLayouts


def read_json() -> Any:
    """The request body as JSON; `BadRequest` / `BodyTooLarge` otherwise."""
    try:
        raw = request.get_data(cache=False)
    except RequestEntityTooLarge as exc:
        raise BodyTooLarge(f"body larger than {current_app.config['MAX_CONTENT_LENGTH']} bytes") from exc
    if not raw:
        raise BadRequest("empty body: expected a JSON object")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {str(exc)[:120]}") from exc


def respond(payload: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(payload), status=status, mimetype="application/json")


def scheduler() -> Scheduler:
    return current_app.extensions["schedtune"]


def node_layouts() -> NodeLayouts:
    """The app's memory of node versions already parsed (bounded, one per app)."""
    return current_app.extensions["schedtune.node_layouts"]


def timed(verb: str) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    def decorate(view: Callable[..., Response]) -> Callable[..., Response]:
        @wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Response:
            started = time.perf_counter()
            try:
                return view(*args, **kwargs)
            finally:
                REQUEST_SECONDS.labels(verb).observe(time.perf_counter() - started)

        return wrapper

    return decorate
