"""The wire's passes over thousands of nodes (names checked at once, answers encoded at C
speed) answer exactly as one node at a time would."""

from __future__ import annotations

import math
import random

import orjson
import pytest

from extender.errors import BadRequest
from extender.model import PodInfo, Verdict
from extender.wire import kube, objects
from extender.wire.kube import ExtenderArgs, decode_args, encode_filter, encode_priorities
from extender.wire.objects import NodeLayouts, require_name, require_names
from tests.builders import make_pod


def _valid(value: object) -> bool:
    try:
        require_name(value, "x")
        return True
    except BadRequest:
        return False


@pytest.mark.parametrize("alphabet", ["ab0-.\nA_", "a-.\n", "z9-.", "a-", "a.\u00e9"])
def test_names_checked_together_are_refused_exactly_when_one_would_be(alphabet) -> None:
    rng = random.Random(alphabet)
    for _ in range(3000):
        values: list[object] = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
                                for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.05:
            values.append(rng.choice([None, 7, "a" * 253, "a" * 254]))
        want = all(_valid(v) for v in values)
        try:
            require_names(values, "NodeNames[]")
            got = True
        except BadRequest as exc:
            got = False
            first_bad = next(v for v in values if not _valid(v))
            with pytest.raises(BadRequest) as single:
                require_name(first_bad, "NodeNames[]")
            assert str(exc) == str(single.value)  # the same words, naming the first bad one
        assert got == want, values


def test_a_large_request_decodes_to_its_names_in_order_without_duplicates() -> None:
    names = [f"gpu-node-{i}" for i in range(3000)] + ["gpu-node-7"]
    args = decode_args({"Pod": make_pod(), "NodeNames": names})
    assert list(args.nodes) == names[:-1] and set(args.nodes.values()) == {None}
    with pytest.raises(BadRequest, match=r"NodeNames\[\] must be a DNS-1123 subdomain"):
        decode_args({"Pod": make_pod(), "NodeNames": [*names[:10], "Bad_Name"]})


def test_a_list_of_names_checked_before_is_not_checked_again_and_cannot_be_changed() -> None:
    layouts = NodeLayouts()
    names = [f"gpu-node-{i}" for i in range(2000)]
    first = decode_args({"Pod": make_pod(), "NodeNames": list(names)}, layouts)
    with pytest.raises(TypeError):  # shared by the requests that name the list: read-only
        first.nodes["gpu-node-0"] = None  # type: ignore[index]
    again = decode_args({"Pod": make_pod(), "NodeNames": list(names)}, layouts)
    assert again.nodes is first.nodes
    assert list(again.nodes) == names and set(again.nodes.values()) == {None}
    for bad in ([*names[:-1], "Bad_Name"], [*names[:-1], 7], names[:5] + [None]):
        with pytest.raises(BadRequest, match=r"NodeNames\[\] must be"):
            decode_args({"Pod": make_pod(), "NodeNames": bad}, layouts)
    assert list(decode_args({"Pod": make_pod(), "NodeNames": names[:3]}, layouts).nodes) \
        == names[:3]


@pytest.fixture
def checked(monkeypatch) -> list[int]:
    """The length of every name list `require_names` checks, in order."""
    lengths: list[int] = []
    real = objects.require_names
    monkeypatch.setattr(objects, "require_names",
                        lambda values, what: lengths.append(len(values)) or real(values, what))
    return lengths


def test_a_name_is_checked_once_whatever_list_or_order_names_it(checked) -> None:
    """kube-scheduler names the same nodes pod after pod, in a new order each time, and the
    part that passed to prioritize: a name is checked once; a list naming one not seen is
    checked whole, a bad list is refused every time, and past `max_entries` names the
    memory starts again."""
    layouts = NodeLayouts(max_entries=600)
    names = [f"gpu-node-{i}" for i in range(500)]
    for _ in range(2):
        for named in (names, names[::2], names[:7], names[100:], names[::-1]):
            assert list(decode_args({"Pod": make_pod(), "NodeNames": list(named)},
                                    layouts).nodes) == named
    assert checked == [500]
    more = [*names[:3], "gpu-node-new"]
    assert list(layouts.names(more, "NodeNames[]")) == more and checked == [500, 4]
    for _ in range(2):
        with pytest.raises(BadRequest, match=r"NodeNames\[\] must be"):
            layouts.names([*names[:-2], "Bad_Name"], "NodeNames[]")
    assert checked == [500, 4, 499, 499]
    layouts.names([f"other-{i}" for i in range(200)], "NodeNames[]")  # 701 names: forgotten
    assert list(layouts.names(names[:10], "NodeNames[]")) == names[:10]
    assert checked == [500, 4, 499, 499, 200, 10]


def test_the_part_filter_passed_is_taken_as_checked_and_only_that_list(checked) -> None:
    """kube-scheduler sends prioritize the names filter passed, in the order filter answered:
    that list is not checked again; a list that differs from it is, and the list given
    to `passed` changing afterwards changes nothing kept."""
    layouts = NodeLayouts()
    names = [f"gpu-node-{i}" for i in range(300)]
    layouts.names(list(names), "NodeNames[]")
    answered = names[::3]
    layouts.passed(answered)
    assert list(layouts.names(list(answered), "NodeNames[]")) == answered
    assert checked == [300]
    answered.append("Bad_Name")  # the caller's list, changed after the fact
    with pytest.raises(BadRequest, match=r"NodeNames\[\] must be"):
        layouts.names(list(answered), "NodeNames[]")
    assert list(layouts.names(names[::3], "NodeNames[]")) == names[::3]
    assert checked == [300, 101]


def test_answers_encode_as_node_by_node() -> None:
    rng = random.Random(5)
    names = [f"n{i}" for i in range(2000)]
    kinds = [Verdict(True, gpu_index=0), Verdict(True, gpu_index=3),
             Verdict(False, "needs 9000 MiB padded, 100 MiB free on GPU 0 (T4)"),
             Verdict(False, "node has no GPUs", unresolvable=True)]
    args = ExtenderArgs(PodInfo("u", "p", "ns"), dict.fromkeys(names), None)
    for weights in ([1, 1, 0, 0], [5, 1, 2, 1]):
        verdicts = {n: rng.choices(kinds, weights)[0] for n in names}
        assert encode_filter(args, verdicts) == {
            "Nodes": None, "NodeNames": [n for n in names if verdicts[n].fits],
            "FailedNodes": {n: v.reason for n, v in verdicts.items()
                            if not v.fits and not v.unresolvable},
            "FailedAndUnresolvableNodes": {n: v.reason for n, v in verdicts.items()
                                           if not v.fits and v.unresolvable},
            "Error": ""}
    scores = {n: rng.choice([0.0, 1.0, 0.05, 0.15, 0.25, 0.35, 0.95, -1.0, 2.0, math.nan,
                             rng.random()]) for n in names}
    assert encode_priorities(scores) == [
        {"Host": n, "Score": int(round(10 * min(1.0, max(0.0, s))))} for n, s in scores.items()]


def test_priorities_are_written_as_orjson_writes_them(monkeypatch) -> None:
    """The joined bytes equal the list encoded by orjson: every score, NaN, out of range,
    names that need escaping, no names, and when the remembered hosts start again."""
    rng = random.Random(3)
    monkeypatch.setattr(kube, "_MAX_HOST_HEADS", 50)
    monkeypatch.setattr(kube, "_HOST_HEADS", {})
    names = [f"node-{i}" for i in range(120)] + ['odd"name', "back\\slash", "\u00e9"]
    cases = [{}, {"only": 1.0}, dict.fromkeys(names, 0.0)]
    cases += [{n: rng.choice([0.0, 1.0, 0.05, 0.15, 0.95, -1.0, 2.0, math.nan, math.inf,
                              rng.random()]) for n in rng.sample(names, k)} for k in (1, 60, 123)]
    for scores in cases * 2:  # the second time from remembered heads
        assert kube.encode_priorities_json(scores) == orjson.dumps(encode_priorities(scores))
    assert len(kube._HOST_HEADS) <= 50
