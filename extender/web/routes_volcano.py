"""Volcano extender-plugin verbs under /volcano: predicate, prioritize, allocate, deallocate,
jobReady."""

from __future__ import annotations

import logging

from flask import Blueprint, Response, request
from werkzeug.exceptions import HTTPException

from extender.wire import volcano as wire_volcano
from extender.errors import ExtenderError
from extender.web.http_io import answer_defect, node_layouts, read_json, respond, scheduler, timed
from extender.metrics import ERRORS, count_filter

bp = Blueprint("volcano", __name__, url_prefix="/volcano")
log = logging.getLogger(__name__)


@bp.post("/predicate")
@timed("volcano_predicate")
def predicate() -> Response:
    pod, nodes = wire_volcano.decode_predicate(read_json(), node_layouts())
    plan_over = scheduler().plan_nodes(nodes) if pod.group is not None else None
    decision = scheduler().filter(pod, nodes, plan_over)
    count_filter("volcano_predicate", decision)
    (verdict,) = decision.verdicts.values()
    return respond(wire_volcano.encode_predicate(verdict))


@bp.post("/prioritize")
@timed("volcano_prioritize")
def prioritize() -> Response:
    pod, nodes = wire_volcano.decode_prioritize(read_json(), node_layouts())
    return respond(wire_volcano.encode_prioritize(scheduler().prioritize(pod, nodes)))


@bp.post("/allocate")
@timed("volcano_allocate")
def allocate() -> Response:
    """Volcano placed the task (and binds it itself): hold its reservation until the monitor
    sees the pod bound there (else it expires). Another node for the same task: refused."""
    args = wire_volcano.decode_event(read_json())
    scheduler().record_placement(args.pod, args.node_name)
    return respond({})


@bp.post("/deallocate")
@timed("volcano_deallocate")
def deallocate() -> Response:
    """Volcano took the task back: drop what its allocate reserved on that node, nothing else."""
    args = wire_volcano.decode_event(read_json())
    scheduler().release(args.pod, args.node_name)
    return respond({})


@bp.post("/jobReady")
@timed("volcano_job_ready")
def job_ready() -> Response:
    """Whether a gang we planned may start: every member allocated its slot (a job we did
    not plan is not held back)."""
    namespace, name = wire_volcano.decode_job(read_json())
    return respond(wire_volcano.encode_job_ready(scheduler().gang_ready(namespace, name)))


@bp.errorhandler(ExtenderError)
def contract_error(exc: ExtenderError) -> Response:
    verb = (request.endpoint or "").rsplit(".", 1)[-1]
    ERRORS.labels(f"volcano_{verb}", type(exc).__name__).inc()
    log.warning("request failed", extra={"verb": f"volcano_{verb}",
                                         "error": type(exc).__name__, "detail": str(exc)[:300]})
    status = exc.status if 400 <= exc.status < 500 and not exc.retriable else 200
    if verb == "predicate":
        return respond(wire_volcano.encode_predicate_error(str(exc)), status)
    if verb == "prioritize":
        return respond(wire_volcano.encode_prioritize({}, str(exc)), status)
    return respond({"error": str(exc)}, status if status != 200 else 503)


@bp.errorhandler(Exception)
def defect(exc: Exception) -> Response | HTTPException:
    return answer_defect(exc, contract_error)
