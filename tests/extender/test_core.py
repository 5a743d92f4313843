"""Pure decisions: filter verdicts, scores, and the collocation-aware completion model."""

import pytest

from extender import core, scoring
from extender.model import ClusterSnapshot, GpuState, NodeGpus, NodeState, QueuedJob

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
