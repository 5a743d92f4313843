"""Share only where it pays (`extender.core.filtering.sharing`, EXTENDER_SHARE_IF_PAYS): a job that
fits now only beside running jobs waits for a GPU of its own when that costs less than
sharing costs it and its neighbours. Worked by hand at alpha 1 (the configured alpha with
priors off: sharing k jobs runs each at 1/k)."""

from __future__ import annotations

import pytest

from extender.core.filtering import decide_filter
from extender.core.job import PodJob
from extender.model import ClusterSnapshot, Need, PodDemand, Waiter
from extender.settings import Settings
from tests.extender.states import LIMITS, node_state, queued

NOW = 1000.0
DEMAND = PodDemand("p", "train", "ml", "resnet152", "train", 8, 1)


def _cluster(shared_left_s: float, busy_left_s: float, nodes: int = 1) -> dict:
    """`nodes` 3090s each running one job with `shared_left_s` left and room beside it,
    and one 3090 whose 20 GB job (`busy_left_s` left) leaves no room until it ends."""
    shared = {f"shared-{i}": node_state(f"shared-{i}", [[queued(f"s{i}", 2000, shared_left_s + 100,
                                                                 started=NOW - 100)]])
              for i in range(nodes)}
    busy = node_state("busy", [[queued("b", 20000, busy_left_s + 100, started=NOW - 100)]])
    return {**shared, "busy": busy}


def _filter(nodes: dict, work_s: float, on: bool = True, waiting: tuple = (), **settings):
    needs = {"RTX-3090": Need(6000, work_s)}
    job = PodJob(DEMAND, ClusterSnapshot(NOW, nodes, waiting), needs)
    return decide_filter(job, dict.fromkeys(nodes), Settings(
        collocation=LIMITS, wait_for_faster=0, share_if_pays=on, hold_after_s=900,
        interference_alpha=1.0, interference_priors=False, **settings))


@pytest.mark.parametrize("nodes", [1, 40])  # node by node, and over arrays
def test_a_long_job_waits_for_a_gpu_of_its_own_rather_than_share(nodes) -> None:
    # Beside the 1000 s job at alpha 1: the 2000 s job ends at 3000 s, and delays its
    # neighbour by 1000 s: 4000 s. Its own GPU: the busy one's job ends in 100 s, the
    # retry 10 s later, 2000 s alone: 2110 s.
    decision = _filter(_cluster(1000, 100, nodes), 2000)
    refused = decision.verdicts["shared-0"]
    assert not refused.fits and not refused.unresolvable
    assert refused.reason == ("waiting for a GPU of its own: done in ~2110 s on GPU 0 "
                              "(RTX-3090) of busy once its jobs end (in ~100 s), against "
                              "~4000 s that sharing a GPU now would cost it and its "
                              "neighbours")
    assert not any(v.fits for v in decision.verdicts.values())
    assert decision.waiter is not None and decision.record.layouts == {}
    assert _filter(_cluster(1000, 100, nodes), 2000, on=False).verdicts["shared-0"].fits


def test_a_short_job_shares_when_its_own_gpu_is_far() -> None:
    # 100 s beside the 1000 s job: 200 s + 100 s of delay = 300 s; its own GPU in
    # 500 + 10 + 100 = 610 s.
    assert _filter(_cluster(1000, 500), 100).verdicts["shared-0"].fits
    # The trade is strict: here sharing costs 300 s, and a GPU free in 190 s costs 300 s.
    assert _filter(_cluster(1000, 190), 100).verdicts["shared-0"].fits
    assert not _filter(_cluster(1000, 189), 100).verdicts["shared-0"].fits


def test_an_idle_gpu_overrun_jobs_and_patience_end_the_wait() -> None:
    nodes = _cluster(1000, 100)
    nodes["idle"] = node_state("idle", [[]])
    assert _filter(nodes, 2000).verdicts["shared-0"].fits  # prioritize weighs the idle GPU
    # The busy GPU's job overran (when it ends is unknown); the shared GPU's own job ends
    # too late (100,000 s) to be worth waiting for.
    assert _filter(_cluster(100_000, -50), 2000).verdicts["shared-0"].fits
    # No patience bound: however long it waited, it waits while a GPU of its own is due
    # (a long job that gives up shares at the worst time); once that GPU's job overruns
    # its prediction, it is no longer waited for.
    waited = (Waiter("p", NOW - 100_000, {}),)
    assert not _filter(_cluster(100_000, 100), 2000, waiting=waited).verdicts["shared-0"].fits
    assert _filter(_cluster(100_000, -1), 2000, waiting=waited).verdicts["shared-0"].fits
    assert _filter(_cluster(1000, 100), 2000, hold_for=0).verdicts["shared-0"].fits


def test_a_gpu_held_for_another_waiting_pod_is_not_waited_for() -> None:
    # A pod that fits nowhere (23 GB) and has waited past EXTENDER_HOLD_AFTER_S holds the
    # busy GPU, the one that frees soonest for it: ours shares instead of waiting for it.
    older = Waiter("old", NOW - 1000, {"RTX-3090": (23000.0, 500.0)}, "ml/old")
    decision = _filter(_cluster(100_000, 100), 2000, waiting=(older,))
    assert any(d.kind == "held" and d.uid == "old" for d in decision.told)
    assert decision.verdicts["shared-0"].fits
