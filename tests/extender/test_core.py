"""Pure decisions: filter verdicts, scores, and the collocation-aware completion model."""

import pytest

from extender.core import decisions as core
from extender.policies import timeline as scoring
from extender.model import ClusterSnapshot, GpuState, NodeGpus, NodeState, QueuedJob, Waiter

LIMITS = core.Limits(default=4, per_type={"RTX-3090": 2})


def _job(uid: str, mib: float, predicted_s: float, started: float = 0) -> QueuedJob:
    return QueuedJob(uid, mib, predicted_s, started)


def _node(name: str, jobs_per_gpu: list[list[QueuedJob]], gpu_type: str = "RTX-3090",
          memory: int = 24576, slots: int = 0) -> NodeState:
    gpus = NodeGpus("p", gpu_type, len(jobs_per_gpu), memory, share_slots=slots)
    return NodeState(name, gpus, tuple(GpuState(name, i, memory, tuple(j))
                                       for i, j in enumerate(jobs_per_gpu)))


def test_best_fit_gpu_and_readable_reasons() -> None:
    node = _node("n", [[_job("a", 20000, 10)], [_job("b", 4000, 10)]])
    need = core.Need(5000, 100)
    verdict = core.node_verdict(node, {"RTX-3090": need}, LIMITS)
    assert verdict.fits and verdict.gpu_index == 1
    full = core.node_verdict(node, {"RTX-3090": core.Need(21000, 1)}, LIMITS)
    assert not full.fits and not full.unresolvable
    assert full.reason == "needs 21000 MiB padded, 20576 MiB free on GPU 1 (RTX-3090)"
    never = core.node_verdict(node, {"RTX-3090": core.Need(30000, 1)}, LIMITS)
    assert never.unresolvable and "more than the 24576 MiB" in never.reason


def test_collocation_limit_per_type_and_time_slicing_slots() -> None:
    node = _node("n", [[_job("a", 100, 1), _job("b", 100, 1)]])
    verdict = core.node_verdict(node, {"RTX-3090": core.Need(100, 1)}, LIMITS)
    assert not verdict.fits and "collocation limit 2" in verdict.reason
    t4 = _node("t", [[_job("a", 100, 1)]], gpu_type="T4", slots=1)  # exclusive GPUs
    assert not core.node_verdict(t4, {"T4": core.Need(100, 1)}, LIMITS).fits


def test_scores_prefer_the_sooner_completion() -> None:
    busy = _node("busy", [[_job("long", 1000, 3600, started=100)]])
    idle = _node("idle", [[]])
    snap = ClusterSnapshot(now=200.0, nodes={"busy": busy, "idle": idle})
    need = {"RTX-3090": core.Need(1000, 600)}
    for mode in ("marginal", "shared"):
        scores = core.score_nodes(snap, need, LIMITS, scoring.CostModel(mode, 0.47))
        assert scores["idle"] == 1.0 and 0 < scores["busy"] < 1.0
    paper = core.score_nodes(snap, need, LIMITS, scoring.CostModel("paper"))
    assert paper["busy"] == pytest.approx(600 / (3500 + 600))  # Eq. 1-2: delay added
    # Marginal: own 600 s at speed 1/1.47 (882 s) plus the 282 s it delays the long job.
    marginal = core.score_nodes(snap, need, LIMITS, scoring.CostModel("marginal", 0.47))
    assert marginal["busy"] == pytest.approx(600 / (882 + 282))


def test_shared_completion_hand_computed() -> None:
    assert scoring.shared_completion_s(10, [], 0.5) == 10
    # Two jobs at speed 1/1.5 until the 4 s job finishes (6 s), then 6 s alone.
    assert scoring.shared_completion_s(10, [4], 0.5) == pytest.approx(12)
    # Processor sharing (alpha 1): a long neighbour halves our speed throughout.
    assert scoring.shared_completion_s(10, [100], 1.0) == pytest.approx(20)
    assert scoring.remaining_s(_job("a", 1, 100, started=50), now=80) == 70
    assert scoring.remaining_s(_job("a", 1, 100), now=80) == 100


def test_marginal_cost_hand_computed() -> None:
    assert scoring.completion_times_s([10, 4], 0.5) == pytest.approx([6, 12])
    assert scoring.marginal_cost_s(10, [], 0.5) == 10
    # Alone the 4 s job ends at 4; with us it ends at 6 (+2) and we end at 12: cost 14.
    assert scoring.marginal_cost_s(10, [4], 0.5) == pytest.approx(14)


@pytest.mark.parametrize("mode", ["paper", "shared", "marginal"])
def test_cheapest_is_the_minimum_and_a_gpu_at_the_jobs_own_time_ends_the_search(mode) -> None:
    cost = scoring.CostModel(mode, 0.47)
    busy = GpuState("n", 0, 24576, (_job("a", 100, 50),))
    busier = GpuState("n", 1, 24576, (_job("a", 100, 50), _job("b", 100, 500)))
    idle = GpuState("n", 2, 24576)
    assert cost.cheapest([busier, busy], 100, 0) == (cost.cost_s(busy, 100, 0), busy)
    assert cost.cost_s(busy, 100, 0) > 100
    assert cost.cheapest([busier, idle, busy], 100, 0) == (100, idle)
    assert cost.cost_s(idle, 100, 0) == 100
    # A job past its prediction counts as ending now: its GPU costs the job alone too, and
    # comes first when listed first (best fit).
    overrun = GpuState("n", 3, 24576, (_job("c", 100, 50, started=1),))
    assert cost.cheapest([overrun, idle], 100, 60) == (100, overrun)
    with pytest.raises(ValueError):
        cost.cheapest([], 100, 0)


@pytest.mark.parametrize("mode", ["paper", "shared", "marginal"])
def test_nodes_tied_for_the_soonest_completion_go_to_the_tightest_fit(mode) -> None:
    # Same type, same work left on each: equal completion; "full" would be left with 4576 MiB
    # free, "roomy" with 16576, "slow" is later. Only the tightest fit keeps the top score.
    full = _node("full", [[_job("a", 16000, 100, started=10)]])
    roomy = _node("roomy", [[_job("b", 4000, 100, started=10)]])
    slow = _node("slow", [[_job("c", 4000, 100, started=10), _job("d", 1000, 900, started=10)]])
    snap = ClusterSnapshot(now=10.0, nodes={"roomy": roomy, "full": full, "slow": slow})
    need = {"RTX-3090": core.Need(4000, 60)}
    cost = scoring.CostModel(mode, 0.47)
    scores = core.score_nodes(snap, need, core.Limits(4, {}), cost)
    assert scores["full"] == 1.0
    assert scores["roomy"] == core.TIED_SCORE
    assert scores["slow"] < 1.0 and scores["slow"] == pytest.approx(
        cost.cost_s(full.gpu_states[0], 60, 10) / cost.cost_s(slow.gpu_states[0], 60, 10))
    # No tie, no change: a sooner node keeps its normalised score whatever its fit.
    alone = ClusterSnapshot(now=10.0, nodes={"roomy": roomy, "idle": _node("idle", [[]])})
    assert core.score_nodes(alone, need, core.Limits(4, {}), cost)["idle"] == 1.0


def test_bind_reserves_the_gpu_prioritize_costed_not_the_tightest() -> None:
    # GPU 0 is the best fit but shared with a long job; GPU 1 is idle and costs the job alone.
    node = _node("n", [[_job("a", 16000, 3000, started=5)], []])
    need = core.Need(4000, 600)
    cost = scoring.CostModel("marginal", 0.47)
    assert [g.index for g in core.usable_gpus(node, need, 4)] == [0, 1]
    order = core.reservation_candidates(node, need, core.Limits(4, {}), cost, 10.0)
    assert [index for index, _, _ in order] == [1, 0]
    snap = ClusterSnapshot(now=10.0, nodes={"n": node})
    assert core.node_placement(node, {"RTX-3090": need}, LIMITS, 10.0, cost) == (600, 24576 - 4000)
    # Equal cost keeps best fit: two idle GPUs, the fuller one first.
    pair = _node("p", [[_job("x", 16000, 0, started=1)], []])
    order = core.reservation_candidates(pair, need, core.Limits(4, {}), cost, 10.0)
    assert [index for index, _, _ in order] == [0, 1]
    assert core.score_nodes(snap, {"RTX-3090": need}, LIMITS, cost) == {"n": 1.0}


def test_wait_until_fits_hand_computed() -> None:
    gpu = GpuState("n", 0, 24576, (_job("a", 10000, 100, started=50), _job("b", 10000, 30)))
    now = 60.0
    assert scoring.wait_until_fits_s(gpu, 4000, 4, now, 0.5) == 0  # 4576 MiB free now
    # b (30 s left) and a (90 s left) share at speed 1/1.5: b ends at 45 s, freeing 14576.
    assert scoring.wait_until_fits_s(gpu, 14000, 4, now, 0.5) == pytest.approx(45)
    # a then runs alone: 60 s left at 45 s, ends at 105 s; the card is empty.
    assert scoring.wait_until_fits_s(gpu, 20000, 4, now, 0.5) == pytest.approx(105)
    assert scoring.wait_until_fits_s(gpu, 4000, 2, now, 0.5) == pytest.approx(45)  # slots
    assert scoring.wait_until_fits_s(gpu, 30000, 4, now, 0.5) == float("inf")


def _waiting_cluster(now: float, since: float) -> ClusterSnapshot:
    """The big card is busy for 100 s more, the small one for 500 s; a 20 GB job waits."""
    big = _node("big", [[_job("a", 16000, 200, started=now - 100)]])
    small = _node("small", [[_job("b", 20000, 900, started=now - 400)]], memory=32768)
    waiter = Waiter("w", since, {"RTX-3090": (20000.0, 300.0)})
    return ClusterSnapshot(now=now, nodes={"big": big, "small": small}, waiting=(waiter,))


def test_the_oldest_waiter_holds_the_gpu_where_it_fits_soonest() -> None:
    snap = _waiting_cluster(now=1000.0, since=600.0)
    holds = core.held_gpus(snap, LIMITS, 0.47, uid="p", max_holds=1, after_s=300)
    # The big card frees in 100 s (a: 100 s left, alone); the other card in 500 s.
    assert holds == {("big", 0): core.Hold("w", 20000.0, 100.0, 1000.0, 0.47, 2)}
    # Too young to hold; and a waiter never holds against itself or an older pod.
    assert core.held_gpus(snap, LIMITS, 0.47, "p", 1, after_s=500) == {}
    assert core.held_gpus(snap, LIMITS, 0.47, "w", 1, after_s=0) == {}
    assert core.held_gpus(snap, LIMITS, 0.47, "p", 0, after_s=0) == {}


def test_a_held_gpu_takes_only_jobs_that_fit_beside_the_waiter() -> None:
    snap = _waiting_cluster(now=1000.0, since=600.0)
    holds = core.held_gpus(snap, LIMITS, 0.47, "p", 1, after_s=300)
    small_job = {"RTX-3090": core.Need(4000, 50)}  # fits the 8576 MiB free on big
    tiny_job = {"RTX-3090": core.Need(500, 50)}  # 500 + 20000 > 8576 free: not beside it
    free = core.filter_nodes(snap, small_job, LIMITS)
    assert free["big"].fits
    held = core.filter_nodes(snap, small_job, LIMITS, holds)
    assert not held["big"].fits and not held["big"].unresolvable
    assert "held for an older waiting pod (w, 20000 MiB)" in held["big"].reason
    assert held["small"].fits  # 12768 free there, and no hold
    assert core.held_from(snap.nodes["big"], small_job["RTX-3090"], LIMITS, holds) == [0]
    # Backfill: 10 s of work beside a (speed 1/1.47) ends at 14.7 s and pushes a's end to
    # 104.7 s, within 10 % of the 100 s the waiter waits anyway; 50 s of work would push
    # it to 123.5 s.
    quick = {"RTX-3090": core.Need(4000, 10)}
    assert core.filter_nodes(snap, quick, LIMITS, holds)["big"].fits
    scores = core.score_nodes(snap, tiny_job, LIMITS, scoring.CostModel(), holds)
    assert scores["big"] == 0 and scores["small"] == 1.0
    # An empty held card still has room beside the waiter for a small job.
    empty = ClusterSnapshot(now=1000.0, nodes={"big": _node("big", [[]])},
                            waiting=snap.waiting)
    holds = core.held_gpus(empty, LIMITS, 0.47, "p", 1, after_s=300)
    assert core.filter_nodes(empty, small_job, LIMITS, holds)["big"].fits
    assert not core.filter_nodes(empty, {"RTX-3090": core.Need(5000, 1)}, LIMITS,
                                 holds)["big"].fits
