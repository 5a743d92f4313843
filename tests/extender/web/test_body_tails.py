"""`BodyTails`: a body ending as an earlier one did answers exactly as `parse_body` does."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from extender.errors import BadRequest
from extender.web.body_tails import BodyTails
from extender.web.http_io import MAX_JSON_DEPTH, parse_body

FIXTURES = Path(__file__).resolve().parents[4] / "shared" / "fixtures" / "kube-scheduler"
NAMES_TAIL = b',"Nodes":null,"NodeNames":["gpu-a","gpu-b"]}'


def _outcome(parse, raw: bytes):
    try:
        return "value", parse(raw)
    except BadRequest as exc:
        return "refused", str(exc)


def _pod(name: str) -> bytes:
    return b'{"Pod":{"metadata":{"name":"%s","uid":"u-%s"}}' % (name.encode(), name.encode())


def _deep(levels: int) -> bytes:
    return b'{"a":' * (levels - 1) + b"1" + b"}" * (levels - 1)


# Heads that do not close as an object of their own: each body must still be judged whole.
HOSTILE_HEADS = [
    b'{"Pod":"open string',  # the kept tail would start inside a string
    b'{"Pod":{"metadata":{}',  # ... one level down
    b"{",  # no member before the tail's comma: invalid JSON
    b'{"Pod":{}}',  # closed already: the tail is trailing garbage
    b'{"Pod":1,',  # a dangling comma
    b'{"Pod":' + _deep(MAX_JSON_DEPTH + 1),  # deeper than the bound
    b'[1',  # not an object
    b'{"Pod":"\\',  # an escape cut in half
    b'{"Nodes":"first","Pod":{}',  # the tail's key twice: the last one wins
    b' \n{"Pod":{"x":"\xc3\xa9"}',  # whitespace before, UTF-8 inside
    b'{"Pod":"\xff"',  # invalid UTF-8 in the head
]


@pytest.mark.parametrize("head", HOSTILE_HEADS, ids=lambda head: repr(head[:24]))
def test_a_body_ending_in_a_kept_tail_answers_as_parse_body(head: bytes) -> None:
    tails = BodyTails()
    for name in ("one", "two", "three"):  # the tail kept, then its members parsed
        assert tails.parse(_pod(name) + NAMES_TAIL) == orjson.loads(_pod(name) + NAMES_TAIL)
    raw = head + NAMES_TAIL
    assert _outcome(tails.parse, raw) == _outcome(parse_body, raw)


def test_a_deep_tail_stays_within_the_bound_with_any_head() -> None:
    """The tail's nesting was counted once, from the top level: a shallow head keeps the
    body within the bound, a deeper one is refused."""
    tail = b',"Nodes":' + _deep(MAX_JSON_DEPTH - 1) + b"}"
    tails = BodyTails()
    for name in ("one", "two", "three"):
        raw = _pod(name) + tail
        assert tails.parse(raw) == parse_body(raw)
    for head in (b'{"Pod":' + _deep(MAX_JSON_DEPTH - 1), b'{"Pod":' + _deep(MAX_JSON_DEPTH)):
        assert _outcome(tails.parse, head + tail) == _outcome(parse_body, head + tail)


def test_refused_bodies_leave_no_tail_behind() -> None:
    tails = BodyTails()
    bad = _pod("one") + b',"Nodes":' + _deep(MAX_JSON_DEPTH + 2) + b"}"
    for _ in range(3):
        with pytest.raises(BadRequest, match="levels deep"):
            tails.parse(bad)
    assert not tails._tails


def test_a_few_tails_are_kept_and_long_ones_never() -> None:
    tails = BodyTails(kept=2, max_tail_bytes=64)
    for i in range(5):
        tails.parse(_pod("p") + b',"Nodes":null,"NodeNames":["n%d"]}' % i)
    assert [t.raw for t in tails._tails] == [b',"Nodes":null,"NodeNames":["n%d"]}' % i
                                             for i in (3, 4)]
    long_tail = b',"Nodes":null,"NodeNames":[%s]}' % b",".join(b'"n%d"' % i for i in range(20))
    tails.parse(_pod("p") + long_tail)
    assert all(t.raw != long_tail for t in tails._tails)


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*/*.request.json")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_captured_bodies_with_other_pods_in_front(fixture: Path) -> None:
    """kube-scheduler's own bodies: the same nodes behind another pod each time."""
    body = json.loads(fixture.read_bytes())
    tails = BodyTails()
    for i in range(4):
        if isinstance(body.get("Pod"), dict):
            body["Pod"]["metadata"]["name"] = f"pod-{i}"
        raw = orjson.dumps(body)
        assert tails.parse(raw) == orjson.loads(raw)
    if "Pod" in body:  # a bind body has no tail to keep
        assert tails._tails and tails._tails[-1].members is not None


def test_the_service_answers_a_resent_node_list_as_a_new_one(client, client_with) -> None:
    """Through the verbs: pods in front of the same captured node objects, answered by an
    app that reuses the tail and by one that keeps none, on the same state; the node
    objects come back unchanged however often they were shared."""
    fixture = sorted(FIXTURES.glob("*/filter-full-nodes.request.json"))[-1]
    body = json.loads(fixture.read_bytes())
    fresh = client_with()
    fresh.application.extensions["schedtune.body_tails"] = BodyTails(kept=0)
    sent_items = orjson.loads(orjson.dumps(body["Nodes"]["items"]))
    for i, annotated in enumerate((True, False, True, True, False)):
        pod = body["Pod"]
        pod["metadata"].update(name=f"pod-{i}", uid=f"uid-{i}")
        if not annotated:
            pod["metadata"]["annotations"] = {}
        raw = orjson.dumps(body)
        for verb in ("/filter", "/prioritize"):
            ours = client.post(verb, data=raw, content_type="application/json")
            theirs = fresh.post(verb, data=raw, content_type="application/json")
            assert ours.status_code == theirs.status_code == 200
            assert ours.get_json() == theirs.get_json()
        answer = client.post("/filter", data=raw, content_type="application/json").get_json()
        kept = {n["metadata"]["name"] for n in answer["Nodes"]["items"]}
        assert answer["Nodes"]["items"] == [n for n in sent_items if n["metadata"]["name"] in kept]
        body = json.loads(fixture.read_bytes())
    assert client.application.extensions["schedtune.body_tails"]._tails[-1].members is not None
