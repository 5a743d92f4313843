"""The starvation guard: which GPU is held for the oldest waiter, and what still fits there."""

from extender.core.filtering import filter_nodes
from extender.core.prioritizing import score_nodes
from extender.core.interference import Alphas
from extender.core.room import Hold, held_from, held_gpus
from extender.model import ClusterSnapshot, Need, Waiter
from extender.policies.marginal import Marginal
from tests.extender.states import LIMITS, node_state, queued


def _waiting_cluster(now: float, since: float) -> ClusterSnapshot:
    """The big card is busy for 100 s more, the small one for 500 s; a 20 GB job waits."""
    big = node_state("big", [[queued("a", 16000, 200, started=now - 100)]])
    small = node_state("small", [[queued("b", 20000, 900, started=now - 400)]], memory=32768)
    waiter = Waiter("w", since, {"RTX-3090": (20000.0, 300.0)})
    return ClusterSnapshot(now=now, nodes={"big": big, "small": small}, waiting=(waiter,))


def test_the_oldest_waiter_holds_the_gpu_where_it_fits_soonest() -> None:
    snap = _waiting_cluster(now=1000.0, since=600.0)
    holds = held_gpus(snap, LIMITS, Alphas(0.47), uid="p", max_holds=1, after_s=300)
    # The big card frees in 100 s (a: 100 s left, alone); the other card in 500 s.
    assert holds == {("big", 0): Hold("w", 20000.0, 100.0, 1000.0, 0.47, 2)}
    # Too young to hold; and a waiter never holds against itself or an older pod.
    assert held_gpus(snap, LIMITS, Alphas(0.47), "p", 1, after_s=500) == {}
    assert held_gpus(snap, LIMITS, Alphas(0.47), "w", 1, after_s=0) == {}
    assert held_gpus(snap, LIMITS, Alphas(0.47), "p", 0, after_s=0) == {}


def test_a_held_gpu_takes_only_jobs_that_fit_beside_the_waiter() -> None:
    snap = _waiting_cluster(now=1000.0, since=600.0)
    holds = held_gpus(snap, LIMITS, Alphas(0.47), "p", 1, after_s=300)
    small_job = {"RTX-3090": Need(4000, 50)}  # fits the 8576 MiB free on big
    tiny_job = {"RTX-3090": Need(500, 50)}  # 500 + 20000 > 8576 free: not beside it
    free = filter_nodes(snap.nodes, small_job, LIMITS)
    assert free["big"].fits
    held = filter_nodes(snap.nodes, small_job, LIMITS, holds)
    assert not held["big"].fits and not held["big"].unresolvable
    assert "held for an older waiting pod (w, 20000 MiB)" in held["big"].reason
    assert held["small"].fits  # 12768 free there, and no hold
    assert held_from(snap.nodes["big"], small_job["RTX-3090"], LIMITS, holds) == [0]
    # Backfill: 10 s of work beside a (speed 1/1.47) ends at 14.7 s and pushes a's end to
    # 104.7 s, within 10 % of the 100 s the waiter waits anyway; 50 s of work would push
    # it to 123.5 s.
    quick = {"RTX-3090": Need(4000, 10)}
    assert filter_nodes(snap.nodes, quick, LIMITS, holds)["big"].fits
    scores = score_nodes(snap, tiny_job, LIMITS, Marginal(), holds)
    assert scores["big"] == 0 and scores["small"] == 1.0
    # An empty held card still has room beside the waiter for a small job.
    empty = ClusterSnapshot(now=1000.0, nodes={"big": node_state("big", [[]])},
                            waiting=snap.waiting)
    holds = held_gpus(empty, LIMITS, Alphas(0.47), "p", 1, after_s=300)
    assert filter_nodes(empty.nodes, small_job, LIMITS, holds)["big"].fits
    assert not filter_nodes(empty.nodes, {"RTX-3090": Need(5000, 1)}, LIMITS, holds)["big"].fits


def test_a_waiter_on_several_gpus_holds_them_together_where_the_last_fits_soonest() -> None:
    """A 2-GPU waiter: `quick` has one GPU free in 50 s but its second only in 900 s;
    `steady` frees both within 300 s; `lone` frees its only GPU at once but has one."""
    now = 1000.0
    quick = node_state("quick", [[queued("a", 20000, 50, started=now)],
                                 [queued("b", 20000, 900, started=now)]])
    steady = node_state("steady", [[queued("c", 20000, 200, started=now)],
                                   [queued("d", 20000, 300, started=now)]])
    lone = node_state("lone", [[]])
    waiter = Waiter("w", 100.0, {"RTX-3090": (20000.0, 300.0)}, "ml/w", gpus=2)
    snap = ClusterSnapshot(now=now, nodes={"quick": quick, "steady": steady, "lone": lone},
                           waiting=(waiter,))
    holds = held_gpus(snap, LIMITS, Alphas(0.47), "p", max_holds=1, after_s=0)
    assert sorted(holds) == [("steady", 0), ("steady", 1)]
    assert {h.fits_in_s for h in holds.values()} == {300.0}  # when the second one frees
    # One GPU a 2-GPU waiter holds alone keeps nothing: a node with fewer GPUs is never held.
    assert held_gpus(ClusterSnapshot(now, {"lone": lone}, (waiter,)), LIMITS, Alphas(0.47), "p",
                     1) == {}
    # The same waiter on one GPU holds the single soonest GPU (lone, free now).
    single = waiter._replace(gpus=1)
    held = held_gpus(ClusterSnapshot(now, snap.nodes, (single,)), LIMITS, Alphas(0.47), "p", 1)
    assert list(held) == [("lone", 0)]
