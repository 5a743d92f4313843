"""kube-scheduler verbs: POST /filter, /prioritize, /bind. Decode -> service -> encode."""

from __future__ import annotations

import logging
from functools import partial

from flask import Blueprint, Response, request
from werkzeug.exceptions import HTTPException

from extender.wire import kube as wire_kube
from extender.errors import ExtenderError
from extender.web.ahead import after_filter
from extender.web.http_io import (
    answer_defect, known_nodes, node_layouts, priced_ahead, read_json, respond, respond_encoded, scheduler,
    timed,
)  # fmt: skip
from extender.metrics import BINDS, ERRORS
from extender.model import PodInfo

bp = Blueprint("kube", __name__)
log = logging.getLogger(__name__)


@bp.post("/filter")
@timed("filter")
def filter_nodes() -> Response:
    args = wire_kube.decode_args(read_json(known_nodes().parse), node_layouts())
    decision = scheduler().filter(args.pod, args.nodes)
    answer = wire_kube.encode_filter(args, decision.verdicts)
    response = respond(answer)
    response.call_on_close(partial(after_filter, scheduler(), node_layouts(), priced_ahead(),
                                   args, decision, answer))
    return response


@bp.post("/prioritize")
@timed("prioritize")
def prioritize() -> Response:
    args = wire_kube.decode_args(read_json(known_nodes().parse), node_layouts())
    scores = scheduler().prioritize(args.pod, args.nodes)
    return respond_encoded(priced_ahead().body_for(scores)
                           or wire_kube.encode_priorities_json(scores))


@bp.post("/bind")
@timed("bind")
def bind() -> Response:
    args = wire_kube.decode_binding(read_json())
    placed = scheduler().bind(PodInfo(args.pod_uid, args.pod_name, args.pod_namespace),
                              args.node)
    BINDS.labels("bound" if placed is not None else "passed_through").inc()
    log.info("bound", extra={"pod_uid": args.pod_uid, "namespace": args.pod_namespace,
                             "pod": args.pod_name, "node": args.node})
    return respond(wire_kube.encode_bind())


@bp.errorhandler(ExtenderError)
def contract_error(exc: ExtenderError) -> Response:
    """Bad input -> its 4xx with the verb's shape; other failures -> 200 with `Error` set,
    which kube-scheduler reports on the pod and retries."""
    verb = (request.endpoint or "").rsplit(".", 1)[-1]
    ERRORS.labels(verb, type(exc).__name__).inc()
    log.warning("request failed", extra={"verb": verb, "error": type(exc).__name__,
                                         "detail": str(exc)[:300]})
    status = exc.status if 400 <= exc.status < 500 and not exc.retriable else 200
    if verb == "bind":
        BINDS.labels("error").inc()
        return respond(wire_kube.encode_bind(str(exc)), status)
    if verb == "prioritize":
        return respond({"Error": str(exc)}, status if status != 200 else 503)
    return respond(wire_kube.encode_filter_error(str(exc)), status)


@bp.errorhandler(Exception)
def defect(exc: Exception) -> Response | HTTPException:
    return answer_defect(exc, contract_error)
