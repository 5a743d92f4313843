"""Request and response plumbing shared by the route modules: bounded JSON in, orjson out.

A body is refused before it is parsed when it is larger than `MAX_CONTENT_LENGTH`
(413) or nests deeper than `MAX_JSON_DEPTH` (400): Kubernetes objects nest about
12 levels, and nothing deeper may reach the decoders, `repr` (Python's recursion
limit) or the echo of full node objects (orjson's encoder stops at 254 levels).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
from flask import Response, current_app, request
from gunicorn.http.errors import ParseException
from werkzeug.exceptions import ClientDisconnected, HTTPException, RequestEntityTooLarge

from extender.errors import BadRequest, BodyTooLarge, ExtenderError, InternalError
from extender.metrics import REQUEST_SECONDS
from extender.service import Scheduler
from extender.wire.objects import NodeLayouts

if TYPE_CHECKING:
    from extender.web.ahead import PricedAhead
    from extender.web.known_nodes import KnownNodeObjects

log = logging.getLogger(__name__)
MAX_JSON_DEPTH = 64  # arrays and objects inside each other; real requests reach 12
_STRUCTURE = b'"[]{}'
_OTHER_BYTES = bytes(range(256)).translate(None, _STRUCTURE)
_QUOTE = ord('"')
_STEP = np.zeros(256, np.int8)  # +1 opens a container, -1 closes one
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1


def json_depth(raw: bytes) -> int:
    """How deep arrays and objects nest in the JSON text `raw` (0: a scalar), brackets inside
    strings not counted. Linear and in C (bytes methods, numpy): about 1 ms per MB.

    Invalid JSON gives some number; the parser refuses it afterwards."""
    return _depth(_structure(raw))


def _structure(raw: bytes) -> bytes:
    """The quotes and brackets of `raw` that decide its nesting: escaped quotes dropped, and
    every two adjacent quotes (an empty string's, or one string's close and the next's
    open), which leaves each bracket behind an unchanged count of quotes, so whether it
    is inside a string (an odd count) stays as it was. What is left is mostly brackets."""
    if raw.find(b"\\") >= 0:  # escapes (one byte searched: memchr, not a substring scan):
        if b"\\\\" in raw:  # drop escaped backslashes, then the escaped quotes
            raw = raw.replace(b"\\\\", b"")
        raw = raw.replace(b'\\"', b"")
    return raw.translate(None, _OTHER_BYTES).replace(b'""', b"")


def _depth(structure: bytes) -> int:
    if not structure:
        return 0
    codes = np.frombuffer(structure, np.uint8)
    steps = _STEP[codes]
    steps[(np.cumsum(codes == _QUOTE, dtype=np.int32) & 1).astype(bool)] = 0  # in strings
    return int(np.cumsum(steps, dtype=np.int32).max())  # a body is far below 2**31 bytes


def read_json(parse: Callable[[bytes], Any] | None = None) -> Any:
    """The request body as JSON (by `parse`: `parse_body` or one that answers as it does);
    `BodyTooLarge` past `MAX_CONTENT_LENGTH`, `BadRequest` for a body that cannot be read
    (a broken chunked encoding, a client gone), an empty body, nesting deeper than
    `MAX_JSON_DEPTH` or invalid JSON.

    A chunked body (no Content-Length) is read up to the limit and no further (Werkzeug
    stops there without a word), so one that reaches the limit is refused: it cannot be
    told from a longer one."""
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    try:
        raw = request.get_data(cache=False)
    except RequestEntityTooLarge as exc:
        raise BodyTooLarge(f"body larger than {limit} bytes") from exc
    except (OSError, ValueError, ClientDisconnected, ParseException) as exc:
        # gunicorn's own errors (a bad chunk size, a chunk's missing CRLF) reach us as they
        # are; Werkzeug reports a failed read as the client gone, the cause says why.
        cause = (exc.__context__ or exc) if isinstance(exc, ClientDisconnected) else exc
        raise BadRequest(f"body could not be read: {str(cause)[:120] or type(cause).__name__}"
                         ) from exc
    if request.content_length is None and limit is not None and len(raw) >= limit:
        raise BodyTooLarge(f"body larger than {limit} bytes")
    return (parse or parse_body)(raw)


def parse_body(raw: bytes) -> Any:
    """JSON text as a value; `BadRequest` for an empty body, nesting deeper than
    `MAX_JSON_DEPTH` or invalid JSON."""
    if not raw:
        raise BadRequest("empty body: expected a JSON object")
    # Nesting needs an opening bracket per level: with few brackets, no depth scan.
    structure = _structure(raw)
    if structure.count(b"[") + structure.count(b"{") > MAX_JSON_DEPTH and (
            depth := _depth(structure)) > MAX_JSON_DEPTH:
        raise BadRequest(f"body nests {depth} levels deep: at most {MAX_JSON_DEPTH} accepted")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {str(exc)[:120]}") from exc


def respond(payload: Any, status: int = 200) -> Response:
    return respond_encoded(orjson.dumps(payload), status)


def respond_encoded(body: bytes, status: int = 200) -> Response:
    """A body already encoded as JSON."""
    return Response(body, status=status, mimetype="application/json")


def scheduler() -> Scheduler:
    return current_app.extensions["schedtune"]


def known_nodes() -> KnownNodeObjects:
    """The app's memory of node objects already parsed in full-nodes bodies (one per app)."""
    return current_app.extensions["schedtune.known_nodes"]


def node_layouts() -> NodeLayouts:
    """The app's memory of node versions already parsed (bounded, one per app)."""
    return current_app.extensions["schedtune.node_layouts"]


def priced_ahead() -> PricedAhead:
    """The app's last prioritize answer encoded ahead (one per app)."""
    return current_app.extensions["schedtune.priced_ahead"]


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


def answer_defect(exc: Exception, answer: Callable[[ExtenderError], Response]
                  ) -> Response | HTTPException:
    """A blueprint's handler of exceptions no `ExtenderError` handler took: HTTP errors as
    Flask renders them, anything else logged with its traceback and answered by
    `answer` (the verb's contract shape) as a retriable `InternalError`, never Flask's
    HTML 500 page."""
    if isinstance(exc, HTTPException):
        return exc
    log.error("request failed on an unexpected error", exc_info=exc,
              extra={"endpoint": request.endpoint, "error": type(exc).__name__})
    return answer(InternalError(f"internal error ({type(exc).__name__}); the extender's "
                                "log holds its traceback"))
