"""`KnownNodeObjects`: a body whose node objects were seen before answers exactly as
`parse_body` does, in whatever order the nodes come."""

from __future__ import annotations

import json
import random
from pathlib import Path

import orjson
import pytest

from extender.errors import BadRequest
from extender.web.http_io import MAX_JSON_DEPTH, parse_body
from extender.web.known_nodes import KnownNodeObjects

FIXTURES = Path(__file__).resolve().parents[4] / "shared" / "fixtures" / "kube-scheduler"
NODES = [{"metadata": {"name": f"gpu-{i}", "labels": {"n": str(i)}}, "status": {}}
         for i in range(4)]


def _outcome(parse, raw: bytes):
    try:
        return "value", parse(raw)
    except BadRequest as exc:
        return "refused", str(exc)


def _body(pod_name: str, nodes: list) -> bytes:
    return orjson.dumps({"Pod": {"metadata": {"name": pod_name}},
                         "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None})


def _items_bytes(nodes: list) -> bytes:
    return _body("x", nodes).split(b'"items":', 1)[1][:-len(b'},"NodeNames":null}')]


def _deep(levels: int) -> bytes:
    return b'{"a":' * (levels - 1) + b"1" + b"}" * (levels - 1)


def _learned() -> KnownNodeObjects:
    known = KnownNodeObjects()
    known.parse(_body("first", NODES))
    assert len(known) == len(NODES)
    return known


def test_nodes_seen_before_in_any_order_and_number_are_the_same_value() -> None:
    known, rng = _learned(), random.Random(1)
    for i in range(20):
        nodes = rng.sample(NODES, rng.randrange(len(NODES) + 1))
        raw = _body(f"pod-{i}", nodes)
        assert known.parse(raw) == orjson.loads(raw)


# Heads that do not close as an object of their own: each body must still be judged whole.
HOSTILE_HEADS = [
    b'{"Pod":"open string',  # the node list would start inside a string
    b'{"Pod":{"metadata":{}',  # ... one level down
    b"{",  # no member before the list's comma: invalid JSON
    b'{"Pod":{}}',  # closed already: the list is trailing garbage
    b'{"Pod":1,',  # a dangling comma
    b'{"Pod":' + _deep(MAX_JSON_DEPTH + 1),  # deeper than the bound
    b"[1",  # not an object
    b'{"Pod":"\\',  # an escape cut in half
    b'{"Nodes":"first","Pod":{}',  # the list's key twice: the last one wins
    b' \n{"Pod":{"x":"\xc3\xa9"}',  # whitespace before, UTF-8 inside
    b'{"Pod":"\xff"',  # invalid UTF-8 in the head
]


@pytest.mark.parametrize("head", HOSTILE_HEADS, ids=lambda head: repr(head[:24]))
def test_a_head_that_does_not_close_is_judged_whole(head: bytes) -> None:
    known = _learned()
    raw = head + b',"Nodes":{"metadata":{},"items":' + _items_bytes(NODES[::-1]) + \
        b'},"NodeNames":null}'
    assert _outcome(known.parse, raw) == _outcome(parse_body, raw)


@pytest.mark.parametrize("items", [
    b'[{"metadata":{"name":"gpu-0","labels":{"n":"0"}},"status":{}}],"x":[{"a":2}]',
    b'[{"metadata":{"name":"gpu-0","labels":{"n":"0"}},"status":{}},{"metadata":1]',
    b'[{"metadata":{"name":"gpu-0","labels":{"n":"0"}},"status":{}},{"metadata":1}]',
    b'[{"metadata":{"name":"gpu-0","labels":{"n":"0"}},"status":{"a":' + _deep(70) + b"}}]",
    b"[]",
], ids=["list-closed-early", "cut-item", "unknown-item", "deep-item", "empty"])
def test_node_lists_that_are_not_remembered_objects_are_judged_whole(items: bytes) -> None:
    """Items that merely look like the remembered ones (a list that closes early, an item
    cut short or new, one nested too deep) are parsed whole, and never remembered wrongly."""
    known = _learned()
    raw = b'{"Pod":{},"Nodes":{"metadata":{},"items":' + items + b'},"NodeNames":null}'
    for _ in range(3):  # ... nor learned from the first time
        assert _outcome(known.parse, raw) == _outcome(parse_body, raw)


def test_only_objects_that_are_exactly_their_bytes_are_remembered() -> None:
    """Bytes orjson would not write back the same (spaces, escapes, another key order)
    could be any object: they are never taken for one."""
    known = KnownNodeObjects()
    spaced = (b'{"Pod":{},"Nodes":{"metadata":{},"items":[{"metadata": {"name":"a"}},'
              b'{"metadata":{"name":"\\u0062"}},{"metadata":{"name":"c"}}]},"NodeNames":null}')
    assert known.parse(spaced) == orjson.loads(spaced)
    assert len(known) == 1  # only "c" is written back as it came


def test_refused_bodies_teach_nothing_and_memory_is_bounded() -> None:
    known = KnownNodeObjects(max_bytes=120)
    deep = _body("p", [{"metadata": {"name": "a"}, "x": json.loads(_deep(MAX_JSON_DEPTH))}])
    with pytest.raises(BadRequest, match="levels deep"):
        known.parse(deep)
    assert len(known) == 0
    for i in range(10):
        known.parse(_body("p", [{"metadata": {"name": f"node-{i}"}}]))
        assert known._bytes <= 120


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*/*full-nodes.request.json")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_captured_bodies_with_other_pods_and_orders(fixture: Path) -> None:
    """kube-scheduler's own bytes: the same node objects behind another pod, reordered."""
    raw = fixture.read_bytes()
    body = orjson.loads(raw)
    known = KnownNodeObjects()
    known.parse(raw)
    assert len(known) == len(body["Nodes"]["items"])  # its own bytes are orjson's
    rng = random.Random(2)
    for i in range(4):
        body["Pod"]["metadata"]["name"] = f"pod-{i}"
        rng.shuffle(body["Nodes"]["items"])
        raw = orjson.dumps(body)
        assert known.parse(raw) == orjson.loads(raw)


def test_the_service_answers_a_resent_node_list_as_a_new_one(client, client_with) -> None:
    """Through the verbs: pods in front of the same captured node objects in new orders,
    answered by an app that remembers them and by one that remembers nothing, on the same
    state; the node objects come back unchanged however often they were shared."""
    captured = sorted(FIXTURES.glob("*/filter-full-nodes.request.json"))
    if not captured:
        pytest.skip(f"no filter-full-nodes request captured under {FIXTURES}")
    fixture = captured[-1]
    fresh = client_with()
    fresh.application.extensions["schedtune.known_nodes"] = KnownNodeObjects(max_bytes=0)
    sent_items = orjson.loads(fixture.read_bytes())["Nodes"]["items"]
    rng = random.Random(3)
    for i, annotated in enumerate((True, False, True, True, False)):
        body = json.loads(fixture.read_bytes())
        body["Pod"]["metadata"].update(name=f"pod-{i}", uid=f"uid-{i}")
        if not annotated:
            body["Pod"]["metadata"]["annotations"] = {}
        rng.shuffle(body["Nodes"]["items"])
        raw = orjson.dumps(body)
        for verb in ("/filter", "/prioritize"):
            ours = client.post(verb, data=raw, content_type="application/json")
            theirs = fresh.post(verb, data=raw, content_type="application/json")
            assert ours.status_code == theirs.status_code == 200
            assert ours.get_json() == theirs.get_json()
        answer = client.post("/filter", data=raw, content_type="application/json").get_json()
        kept = {n["metadata"]["name"] for n in answer["Nodes"]["items"]}
        assert sorted(answer["Nodes"]["items"], key=lambda n: n["metadata"]["name"]) == sorted(
            (n for n in sent_items if n["metadata"]["name"] in kept),
            key=lambda n: n["metadata"]["name"])
    assert len(client.application.extensions["schedtune.known_nodes"]) == len(sent_items)
    assert len(fresh.application.extensions["schedtune.known_nodes"]) == 0
