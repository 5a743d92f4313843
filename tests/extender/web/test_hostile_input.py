"""Hostile bodies through the app: deep nesting, oversized numbers and names. Each one gets
the verb's contract-valid 4xx (or its contract answer), never a 500, and leaves Redis as it was."""

from __future__ import annotations

import io
import json

import pytest
from gunicorn.http.errors import InvalidChunkSize
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.web.http_io import MAX_JSON_DEPTH, json_depth
from tests.builders import bind_args, filter_args, make_node, make_pod, volcano_node, volcano_task
from tests.extender.web.test_adversarial import redis_state

# The body that killed a worker with SIGSEGV in orjson 3.8.3 (360 KB).
DEEP_OBJECTS = '{"a":' * 60000 + "1" + "}" * 60000
ERROR_SHAPES = {  # verb -> the keys of its error answer
    "/filter": {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"},
    "/prioritize": {"Error"},
    "/bind": {"Error"},
    "/volcano/predicate": {"status", "code"},
    "/volcano/prioritize": {"nodeScore", "errorMessage"},
    "/volcano/allocate": {"error"},
    "/volcano/deallocate": {"error"},
}
ERROR_TEXT_KEY = {"/filter": "Error", "/prioritize": "Error", "/bind": "Error",
                  "/volcano/predicate": "status", "/volcano/prioritize": "errorMessage",
                  "/volcano/allocate": "error", "/volcano/deallocate": "error"}


def _nested(depth: int, leaf: object = 1) -> object:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def _tree_depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_tree_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_tree_depth, value), default=0)
    return 0


def _refused_with_shape(client, redis_client, verb: str, raw: bytes | str,
                        needle: str) -> None:  # noqa: ANN001
    before = redis_state(redis_client)
    response = client.post(verb, data=raw, content_type="application/json")
    assert response.status_code == 400, (verb, response.data[:200])
    payload = response.get_json()
    assert set(payload) == ERROR_SHAPES[verb]
    assert needle in payload[ERROR_TEXT_KEY[verb]]
    assert redis_state(redis_client) == before


@pytest.mark.parametrize("verb", sorted(ERROR_SHAPES))
def test_deep_nesting_is_a_400_of_the_verbs_shape(client, redis_client, verb) -> None:
    _refused_with_shape(client, redis_client, verb, DEEP_OBJECTS, "nests 60000 levels deep")
    _refused_with_shape(client, redis_client, verb, "[" * 100_000 + "]" * 100_000,
                        "at most 64 accepted")


def test_nesting_up_to_the_bound_is_decoded(client, redis_client) -> None:
    node = make_node("gpu-node-0")
    pod = make_pod()
    within = filter_args(pod, [node])
    # ExtenderArgs, Nodes, items, the node, its status: 5 levels around the junk field.
    within["Nodes"]["items"][0]["status"]["junk"] = _nested(MAX_JSON_DEPTH - 5)
    assert json_depth(json.dumps(within).encode()) == MAX_JSON_DEPTH
    response = client.post("/filter", json=within)
    assert response.status_code == 200 and response.get_json()["Error"] == ""
    echoed = response.get_json()["Nodes"]["items"][0]["status"]["junk"]  # orjson re-encodes it
    assert _tree_depth(echoed) == MAX_JSON_DEPTH - 5
    beyond = json.loads(json.dumps(within))
    beyond["Nodes"]["items"][0]["status"]["junk"] = _nested(MAX_JSON_DEPTH - 4)
    _refused_with_shape(client, redis_client, "/filter", json.dumps(beyond), "nests 65 levels")


def test_brackets_and_escapes_inside_strings_do_not_count(client) -> None:
    pod = make_pod(**{"example.com/note": "[[[{{{" * 100 + '\\"[[[\\\\' + "]" * 50})
    body = filter_args(pod, [make_node("gpu-node-0")])
    response = client.post("/filter", json=body)
    assert response.status_code == 200 and response.get_json()["Error"] == ""


json_documents = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(alphabet='[]{}"\\ab\n', max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(alphabet='[]{}"\\k', max_size=4), inner,
                                            max_size=3)),
    max_leaves=30)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(document=json_documents)
def test_json_depth_counts_containers_not_string_contents(document) -> None:
    assert json_depth(json.dumps(document).encode()) == _tree_depth(document)


@pytest.mark.parametrize(("annotation", "pod_args"), [
    ("schedtune.io/batch-size", {"batch": "0" * 5000 + "32"}),  # int() raises past 4300 digits
    ("schedtune.io/epochs", {"epochs": "9" * 40}),
    ("schedtune.io/batch-size", {"batch": _nested(MAX_JSON_DEPTH - 8)}),
    ("schedtune.io/model", {"model": "x" * 100_000}),
    ("schedtune.io/model", {"model": "../../etc"}),
    ("schedtune.io/task", {"task": ["train"]}),
])
def test_oversized_annotations_are_readable_refusals(client, redis_client, annotation,
                                                     pod_args) -> None:
    before = redis_state(redis_client)
    body = filter_args(make_pod(**pod_args), [make_node("gpu-node-0")])
    response = client.post("/filter", json=body)
    assert response.status_code == 200, response.data[:200]
    reason = response.get_json()["FailedAndUnresolvableNodes"]["gpu-node-0"]
    assert annotation in reason and len(reason) < 400
    assert redis_state(redis_client) == before


BAD_NAMES = [
    ("/filter", lambda b: b["Pod"]["metadata"].update(name="Job_1"), "Pod.metadata.name"),
    ("/filter", lambda b: b["Pod"]["metadata"].update(namespace="a.b"), "Pod.metadata.namespace"),
    ("/filter", lambda b: b["Pod"]["metadata"].update(uid="u:1"), "Pod.metadata.uid"),
    ("/filter", lambda b: b["Pod"]["metadata"].update(uid="u" * 129), "Pod.metadata.uid"),
    ("/filter", lambda b: b["Nodes"]["items"][0]["metadata"].update(name="n" * 254),
     "metadata.name"),
    ("/bind", lambda b: b.update(Node="st:gpu:x"), "Node"),
    ("/bind", lambda b: b.update(PodUID="*"), "PodUID"),
    ("/bind", lambda b: b.update(PodNamespace="-ns"), "PodNamespace"),
    ("/volcano/allocate", lambda b: b["task"].update(NodeName="Node 1"), "task.NodeName"),
    ("/volcano/deallocate", lambda b: b["task"].update(NodeName=["n1"]), "task.NodeName"),
]


@pytest.mark.parametrize(("verb", "spoil", "field"), BAD_NAMES)
def test_names_breaking_kubernetes_rules_are_refused_before_any_state(client, redis_client, verb,
                                                                      spoil, field) -> None:
    pod = make_pod(uid="3b813596-dd97-4bef-a2bd-216a429259f7")
    node = make_node("gpu-node-0")
    assert client.post("/filter", json=filter_args(pod, [node])).status_code == 200
    body = {"/filter": filter_args(pod, [node]), "/bind": bind_args(pod, "gpu-node-0"),
            "/volcano/allocate": {"task": volcano_task(pod, "gpu-node-0"),
                                  "node": volcano_node(node)},
            "/volcano/deallocate": {"task": volcano_task(pod, "gpu-node-0")}}[verb]
    spoil(body)
    _refused_with_shape(client, redis_client, verb, json.dumps(body), field)


class _BrokenChunks(io.BytesIO):
    """A chunked body as gunicorn reads it when the client breaks the encoding."""

    def read(self, *_: object) -> bytes:
        raise InvalidChunkSize(b"zz")

    readline = readinto = read


def _chunked(client, verb: str, stream: object):  # noqa: ANN001, ANN202
    """POST `stream` with no Content-Length, as a server that de-chunks (gunicorn) hands it."""
    return client.post(verb, input_stream=stream, content_type="application/json",
                       headers={"Transfer-Encoding": "chunked"},
                       environ_overrides={"wsgi.input_terminated": True})


@pytest.mark.parametrize("verb", sorted(ERROR_SHAPES))
def test_a_broken_chunked_body_is_a_400_of_the_verbs_shape(client, redis_client, verb) -> None:
    before = redis_state(redis_client)
    response = _chunked(client, verb, _BrokenChunks())
    assert response.status_code == 400, response.data[:200]
    payload = response.get_json()
    assert set(payload) == ERROR_SHAPES[verb]
    assert "body could not be read: Invalid chunk size: b'zz'" in payload[ERROR_TEXT_KEY[verb]]
    assert redis_state(redis_client) == before


@pytest.mark.parametrize("verb", sorted(ERROR_SHAPES))
def test_a_chunked_body_past_the_limit_is_a_413_not_cut_short(app, client, redis_client,
                                                              verb) -> None:
    """Werkzeug stops reading a chunked body at the limit: what it read may be valid JSON
    (here the whole request, padded), and must still be refused, never answered."""
    app.config["MAX_CONTENT_LENGTH"] = 4096
    body = json.dumps(filter_args(make_pod(), [make_node("n1")])).encode()
    before = redis_state(redis_client)
    response = _chunked(client, verb, io.BytesIO(body + b" " * 8192))
    assert response.status_code == 413, response.data[:200]
    payload = response.get_json()
    assert set(payload) == ERROR_SHAPES[verb]
    assert "larger than 4096 bytes" in payload[ERROR_TEXT_KEY[verb]]
    assert redis_state(redis_client) == before
    if verb == "/filter":  # below the limit, the same chunked body is answered
        answered = _chunked(client, verb, io.BytesIO(body))
        assert answered.status_code == 200 and answered.get_json()["Error"] == ""


@pytest.mark.parametrize("verb", ["/filter", "/prioritize"])
def test_two_node_objects_of_one_name_are_refused_not_echoed(client, redis_client,
                                                             verb) -> None:
    """Which object would filter judge and which would it echo as passing? Neither: 400.
    (The pod needs 30000 MiB: only the A100 object of the two could take it.)"""
    pod = make_pod(model=None, **{"schedtune.io/gpu-memory": "30000"})
    nodes = [make_node("gpu-node-0"), make_node("gpu-node-0", "NVIDIA-A100-SXM4-40GB"),
             make_node("gpu-node-1")]
    before = redis_state(redis_client)
    response = client.post(verb, json=filter_args(pod, nodes))
    assert response.status_code == 400
    assert "Nodes.items names node 'gpu-node-0' more than once" in response.get_json()["Error"]
    assert redis_state(redis_client) == before
    answered = client.post(verb, json=filter_args(pod, nodes[1:]))  # each name once: judged
    assert answered.status_code == 200
