"""Filter's decision: verdicts with readable reasons, and what it asks the store to keep."""

import pytest

from extender.core.filtering import decide_filter
from extender.core.filtering.fit import node_verdict
from extender.core.job import NotOurs, PodJob, Refused
from extender.model import ClusterSnapshot, Need, PodDemand, Waiter
from extender.settings import Settings
from tests.extender.states import LIMITS, node_state, queued

DEMAND = PodDemand("p", "train", "ml", "resnet50", "train", 32, 1)
SETTINGS = Settings(collocation=LIMITS, hold_after_s=300)


def test_best_fit_gpu_and_readable_reasons() -> None:
    node = node_state("n", [[queued("a", 20000, 10)], [queued("b", 4000, 10)]])
    verdict = node_verdict(node, {"RTX-3090": Need(5000, 100)}, LIMITS)
    assert verdict.fits and verdict.gpu_index == 1
    full = node_verdict(node, {"RTX-3090": Need(21000, 1)}, LIMITS)
    assert not full.fits and not full.unresolvable
    assert full.reason == "needs 21000 MiB padded, 20576 MiB free on GPU 1 (RTX-3090)"
    never = node_verdict(node, {"RTX-3090": Need(30000, 1)}, LIMITS)
    assert never.unresolvable and "more than the 24576 MiB" in never.reason


def test_collocation_limit_per_type_and_time_slicing_slots() -> None:
    node = node_state("n", [[queued("a", 100, 1), queued("b", 100, 1)]])
    verdict = node_verdict(node, {"RTX-3090": Need(100, 1)}, LIMITS)
    assert not verdict.fits and "collocation limit 2" in verdict.reason
    t4 = node_state("t", [[queued("a", 100, 1)]], gpu_type="T4", slots=1)  # exclusive GPUs
    assert not node_verdict(t4, {"T4": Need(100, 1)}, LIMITS).fits


def test_pods_not_ours_pass_and_refused_pods_fail_everywhere_writing_nothing() -> None:
    nodes = {"a": None, "b": None}
    passthrough = decide_filter(NotOurs(), nodes, SETTINGS)
    assert passthrough.passthrough and all(v.fits for v in passthrough.verdicts.values())
    assert passthrough.record is None and passthrough.waiter is None
    refused = decide_filter(Refused("schedtune.io/task='x' is invalid"), nodes, SETTINGS)
    assert set(refused.verdicts) == {"a", "b"} and refused.record is None
    assert all(not v.fits and v.unresolvable and "task" in v.reason
               for v in refused.verdicts.values())


def test_a_fitting_pod_keeps_its_demand_and_the_requests_layouts_for_bind() -> None:
    node = node_state("n", [[]])
    job = PodJob(DEMAND, ClusterSnapshot(now=10.0, nodes={"n": node, "m": node}),
                 {"RTX-3090": Need(5000, 100)})
    decision = decide_filter(job, {"n": node.gpus, "m": None}, SETTINGS)
    assert decision.verdicts["n"].fits and decision.waiter is None
    assert decision.record.demand == DEMAND
    assert decision.record.layouts == {"n": node.gpus}  # names-mode nodes: the watcher's
    assert decision.record.held == {}


def test_a_pod_that_fits_nowhere_waits_and_keeps_when_it_first_waited() -> None:
    busy = node_state("n", [[queued("a", 20000, 100)]])
    snap = ClusterSnapshot(now=50.0, nodes={"n": busy})
    job = PodJob(DEMAND, snap, {"RTX-3090": Need(8000, 100)})
    decision = decide_filter(job, {"n": None}, SETTINGS)
    assert not decision.verdicts["n"].fits
    assert decision.waiter == Waiter("p", 50.0, {"RTX-3090": (8000, 100)}, "ml/train")
    again = PodJob(DEMAND, ClusterSnapshot(50.0, {"n": busy}, (Waiter("p", 20.0, {}),)),
                   job.needs)
    assert decide_filter(again, {"n": None}, SETTINGS).waiter.since == 20.0
    # Too big for any card: no point waiting; and with holds off nobody waits.
    huge = PodJob(DEMAND, snap, {"RTX-3090": Need(30000, 100)})
    assert decide_filter(huge, {"n": None}, SETTINGS).waiter is None
    off = Settings(collocation=LIMITS, hold_for=0)
    assert decide_filter(job, {"n": None}, off).waiter is None


@pytest.mark.parametrize("own_since, held", [(None, {"big": (0,)}), (100.0, {})])
def test_held_gpus_of_passing_nodes_are_kept_for_bind(own_since, held) -> None:
    # GPU 0 frees first (100 s) and is held for the old waiter w; the pod fits only on GPU 1
    # (14576 MiB free), so bind must leave GPU 0 alone. A pod older than w (it waits too,
    # since 100) is not held back by w.
    now = 1000.0
    big = node_state("big", [[queued("a", 16000, 200, started=now - 100)],
                             [queued("b", 10000, 900, started=now - 10)]], memory=24576)
    waiting = [Waiter("w", 600.0, {"RTX-3090": (20000.0, 300.0)})]
    if own_since is not None:
        waiting.append(Waiter("p", own_since, {"RTX-3090": (4000.0, 50.0)}))
    snap = ClusterSnapshot(now=now, nodes={"big": big}, waiting=tuple(waiting))
    job = PodJob(DEMAND, snap, {"RTX-3090": Need(4000, 50)})
    decision = decide_filter(job, {"big": None}, Settings(hold_after_s=300))
    assert decision.verdicts["big"].fits
    assert dict(decision.record.held) == held
