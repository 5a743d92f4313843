"""Pods on k GPUs of one node (`Need.gpus`): filter asks for k GPUs with room, prioritize
prices the slowest of the k cheapest."""

import pytest

from extender.core import gpu_table
from extender.core.filtering.fit import filter_nodes, node_verdict
from extender.core.filtering.holds import held_gpus
from extender.core.interference import Alphas
from extender.core.prioritizing import node_placement, score_nodes
from extender.model import ClusterSnapshot, Limits, Need, Waiter
from extender.policies import make_policy
from extender.policies.base import Placement
from tests.extender.states import node_state, queued

LIMITS = Limits(4, {})


@pytest.fixture(params=["arrays", "node by node"], autouse=True)
def path(request, monkeypatch) -> str:
    monkeypatch.setattr(gpu_table, "ARRAYS_FROM", 0 if request.param == "arrays" else 10**9)
    return request.param


def _need(mib: float, seconds: float, gpus: int) -> dict[str, Need]:
    return {"RTX-3090": Need(mib, seconds, gpus=gpus)}


def test_a_node_passes_with_as_many_gpus_with_room_as_the_pod_needs() -> None:
    # GPU 0: 4576 MiB free, GPU 1 idle, GPU 2: 14576 free, GPU 3 at its collocation limit.
    node = node_state("n", [[queued("a", 20000, 100)], [], [queued("b", 10000, 100)],
                            [queued(f"c{i}", 100, 9) for i in range(4)]])
    assert node_verdict(node, _need(8000, 60, 2), LIMITS).fits
    two = node_verdict(node, _need(8000, 60, 2), LIMITS)
    assert two.gpu_index == 2  # the best fit among the GPUs with room
    three = node_verdict(node, _need(8000, 60, 3), LIMITS)
    assert not three.fits and not three.unresolvable
    assert three.reason == "needs 8000 MiB padded on each of 3 GPUs, 2 of 4 have room (RTX-3090)"
    assert node_verdict(node, _need(4000, 60, 3), LIMITS).fits  # GPU 0 has room for 4000


def test_more_gpus_than_the_node_has_is_unresolvable_and_one_gpu_is_as_before() -> None:
    node = node_state("n", [[], []])
    five = node_verdict(node, _need(1000, 60, 5), LIMITS)
    assert not five.fits and five.unresolvable
    assert five.reason == ("needs 5 GPUs with 1000 MiB padded each, more than the 2 of this "
                           "node (RTX-3090)")
    busy = node_state("b", [[queued("a", 20000, 100)]])
    one = node_verdict(busy, _need(8000, 60, 1), LIMITS)
    assert one.reason == "needs 8000 MiB padded, 4576 MiB free on GPU 0 (RTX-3090)"
    full = node_state("f", [[queued("a", 100, 9), queued("b", 100, 9)]])
    assert node_verdict(full, _need(100, 1, 2), Limits(2, {})).unresolvable  # 2 > 1 GPU
    limit = node_verdict(node_state("g", [[queued("a", 1, 9)], [queued("b", 1, 9)]]),
                         _need(100, 1, 2), Limits(1, {}))
    assert limit.reason == "collocation limit 1 reached on every GPU (RTX-3090)"


@pytest.mark.parametrize("name", ["marginal", "shared", "paper"])
def test_the_price_is_the_slowest_of_the_k_cheapest_gpus(name) -> None:
    policy = make_policy(name, 0.47)
    node = node_state("n", [[queued("long", 4000, 3000, started=100)], [],
                            [queued("short", 4000, 50, started=100)], []])
    now, need = 110.0, Need(2000, 600, gpus=3)
    long_cost = policy.cost_s(node.gpu_states[0], 600, now)
    short_cost = policy.cost_s(node.gpu_states[2], 600, now)
    assert 600 < short_cost < long_cost
    placement = node_placement(node, {"RTX-3090": need}, LIMITS, now, policy)
    # The two idle GPUs and the short job's; memory left summed over the three.
    assert placement == Placement(short_cost, 3 * 24576 - 4000 - 3 * 2000)
    pair = node_placement(node, {"RTX-3090": Need(2000, 600, gpus=2)}, LIMITS, now, policy)
    assert pair == Placement(600, 2 * (24576 - 2000))
    assert node_placement(node, {"RTX-3090": Need(2000, 600, gpus=5)}, LIMITS, now,
                          policy) is None


def test_scores_rank_nodes_by_the_slowest_gpu_a_pod_would_take() -> None:
    policy = make_policy("marginal", 0.47)
    # "pair" has two idle GPUs; "mixed" one idle and one busy; "one" only one GPU.
    pair = node_state("pair", [[], []])
    mixed = node_state("mixed", [[queued("a", 4000, 900, started=1)], []])
    one = node_state("one", [[]])
    snap = ClusterSnapshot(now=10.0, nodes={"mixed": mixed, "pair": pair, "one": one})
    scores = score_nodes(snap, _need(2000, 300, 2), LIMITS, policy)
    assert scores["pair"] == 1.0 and 0 < scores["mixed"] < 1.0 and scores["one"] == 0.0
    verdicts = filter_nodes(snap.nodes, _need(2000, 300, 2), LIMITS)
    assert [v.fits for v in verdicts.values()] == [True, True, False]


def test_a_held_gpu_that_would_make_up_the_count_is_named() -> None:
    now = 1000.0
    node = node_state("n", [[queued("a", 16000, 200, started=now - 100)], []])
    waiting = (Waiter("w", 0.0, {"RTX-3090": (20000.0, 300.0)}),)
    snap = ClusterSnapshot(now=now, nodes={"n": node}, waiting=waiting)
    holds = held_gpus(snap, LIMITS, Alphas(0.47), "p", 1)
    assert list(holds) == [("n", 1)]  # the idle GPU: the waiter fits there now
    verdict = node_verdict(node, _need(5000, 500, 2), LIMITS, holds)  # 5000 + 20000 > 24576
    assert not verdict.fits
    assert verdict.reason.startswith("GPU 1 (RTX-3090) is held for an older waiting pod (w,")
