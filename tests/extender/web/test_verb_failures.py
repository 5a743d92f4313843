"""Every exception the service can raise, through every verb: the answer is always the
verb's contract shape in JSON, never Flask's HTML page (issue #50, item 3).

kube-scheduler's extender (k8s.io/kube-scheduler/extender/v1 types.go) reads a filter's
and a bind's `Error` field; Volcano's extender plugin (pkg/scheduler/plugins/extender)
decodes the verbs' JSON replies. The service's methods are replaced by ones raising each
class in turn: what is walked is the route layer's handling, on a real app and Redis.
"""

from __future__ import annotations

import pytest
import redis

from estimator.errors import EstimatorError
from extender.core.annotations import AnnotationError
from extender.errors import ExtenderError
from extender.wire.volcano import (
    CODE_ERROR, encode_event_request, encode_job_info, encode_predicate_request, encode_prioritize_request,
)  # fmt: skip
from tests.builders import bind_args, filter_args, make_node, make_pod


def _classes(root: type) -> list[type]:
    found, todo = [], [root]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def _all_raised() -> list[type[Exception]]:
    """Every error class of ours and the estimator's, and what a defect raises."""
    import extender.sizing  # noqa: F401  (TooLarge)
    import extender.web.auth  # noqa: F401  (Unauthorized)
    from estimator.user_models.entry import RegistryError  # noqa: F401

    ours = {*_classes(ExtenderError), *_classes(EstimatorError), *_classes(AnnotationError)}
    defects = {RuntimeError, KeyError, ValueError, TypeError, ZeroDivisionError,
               RecursionError, redis.RedisError, AttributeError}
    return sorted(ours | defects, key=lambda c: (c.__module__, c.__name__))


POD = make_pod(model="resnet50", batch=32)
NODE = make_node("n1")
VERBS = {  # path -> (the service method it calls, body)
    "/filter": ("filter", filter_args(POD, [NODE])),
    "/prioritize": ("prioritize", filter_args(POD, [NODE])),
    "/bind": ("bind", bind_args(POD, "n1")),
    "/volcano/predicate": ("filter", encode_predicate_request(POD, NODE)),
    "/volcano/prioritize": ("prioritize", encode_prioritize_request(POD, [NODE])),
    "/volcano/allocate": ("record_placement", encode_event_request(POD, "n1")),
    "/volcano/deallocate": ("release", encode_event_request(POD, "n1")),
    "/volcano/jobReady": ("gang_ready", {"job": encode_job_info("default", "g", 2)}),
}


@pytest.mark.parametrize("error", _all_raised(), ids=lambda c: c.__name__)
@pytest.mark.parametrize("path", list(VERBS))
def test_every_failure_is_answered_in_the_verbs_shape(app, client, path, error) -> None:
    method, body = VERBS[path]

    def fail(*_args, **_kwargs):
        raise error("boom <b>")

    scheduler = app.extensions["schedtune"]
    setattr(scheduler, method, fail)
    answer = client.post(path, json=body)
    assert answer.mimetype == "application/json", answer.data[:120]
    assert answer.status_code in (200, 503) or 400 <= answer.status_code < 500
    text = answer.get_data(as_text=True)
    assert "<html" not in text.lower() and "Traceback" not in text
    payload = answer.get_json()
    said = {"/volcano/predicate": "status", "/volcano/prioritize": "errorMessage"}.get(
        path, "error" if path.startswith("/volcano/") else "Error")
    assert payload[said]
    if path == "/volcano/predicate":
        assert payload["code"] == CODE_ERROR
    if not issubclass(error, ExtenderError | EstimatorError | AnnotationError):
        assert "internal error" in text  # a defect: named as one, its traceback logged
