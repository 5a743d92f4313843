"""The starvation guard: which GPU is held for the oldest waiter, and what still fits there."""

from extender.core.filtering.fit import filter_nodes
from extender.core.filtering.holds import held_gpus
from extender.core.interference import Alphas
from extender.core.prioritizing import score_nodes
from extender.core.room import Hold, held_from
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


def test_a_much_shorter_waiter_keeps_the_last_slot_from_a_long_job() -> None:
    """Shortest job first: a young waiter predicted to run 30 s holds the GPU where it fits
    soonest against a job predicted to run `shorter_by` times longer or more, not against
    a job of its own length, and not against a job that has waited `after_s` itself."""
    now = 1000.0
    busy = node_state("busy", [[queued("a", 4000, 600, started=now - 100)]])  # 1 of 2 slots
    full = node_state("full", [[queued("b", 4000, 900, started=now), queued("c", 4000, 900,
                                                                             started=now)]])
    short = Waiter("s", now - 5, {"RTX-3090": (3000.0, 30.0)}, "ml/s")
    long_pod = Waiter("l", now - 60, {"RTX-3090": (3000.0, 3000.0)}, "ml/l")
    snap = ClusterSnapshot(now=now, nodes={"busy": busy, "full": full},
                           waiting=(long_pod, short))
    long_job = {"RTX-3090": Need(3000, 3000)}

    def holds(uid: str, own_s: float, shorter_by: float = 4.0) -> dict:
        return held_gpus(snap, LIMITS, Alphas(0.47), uid, 1, 900, shorter_by, own_s)

    held = holds("p", 3000.0)
    assert held == {("busy", 0): Hold("s", 3000.0, 0.0, now, 0.47, 2, shorter=True)}
    verdict = filter_nodes(snap.nodes, long_job, LIMITS, held)["busy"]
    assert not verdict.fits and "held for a shorter waiting pod (s, 3000 MiB)" in verdict.reason
    assert filter_nodes(snap.nodes, long_job, LIMITS, holds("p", 3000.0, 0.0))["busy"].fits
    assert holds("p", 100.0) == {}  # 100 s is not 4x 30 s: no hold, the slot is free
    assert filter_nodes(snap.nodes, {"RTX-3090": Need(3000, 100)}, LIMITS, {})["busy"].fits
    # The long pod waits too, older than the short one: it yields until it has waited
    # `after_s` (900 s; here 60 s), then the starvation guard is its own.
    assert holds("l", 3000.0) == held
    assert held_gpus(snap, LIMITS, Alphas(0.47), "l", 1, 60, 4.0, 3000.0) == {}
