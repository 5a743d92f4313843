"""Which GPUs have room for a job: memory, collocation slots, and room held for waiting pods. Pure.

Starvation guard: a pod that fit nowhere waits (a `Waiter`); once it has waited
`hold_after_s`, the GPU where it will fit soonest (jobs there played forward)
is held for it. Other jobs go there only if both fit, or if they are gone
before it would fit anyway (within `BACKFILL_SLACK`), so a stream of small
jobs cannot keep a large one out forever: EASY backfilling's reservation
(and Slurm's ``bf_min_age_reserve``), with GPU memory as the resource.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from extender.model import (
    ClusterSnapshot, GpuState, Limits, Need, NodeState, QueuedJob, Waiter, type_of,
)  # fmt: skip
from extender.policies.timeline import wait_until_fits_s

BACKFILL_SLACK = 1.1  # a backfilled job may push the waiter's expected fit back 10 %


@dataclass(frozen=True)
class Hold:
    """A GPU kept for a waiting pod: `padded_mib` of it stays free for that pod, unless a
    job would be gone before the pod fits anyway (`fits_in_s`, played forward at `now`)."""

    uid: str
    padded_mib: float
    fits_in_s: float = 0.0
    now: float = 0.0
    alpha: float = 0.0
    limit: int = 0


Holds = Mapping[tuple[str, int], Hold]  # (node, gpu index) -> the hold on it
NO_HOLDS: Holds = {}


def has_room(gpu: GpuState, need: Need, limit: int, hold: Hold | None) -> bool:
    """The job fits on `gpu` now: memory and a slot, beside the room a hold keeps, or as a
    backfill that leaves before the waiter would fit anyway."""
    if not (len(gpu.jobs) < limit and need.padded_mib <= gpu.free_mib):
        return False
    if hold is None:
        return True
    if len(gpu.jobs) + 1 < limit and need.padded_mib + hold.padded_mib <= gpu.free_mib:
        return True  # fits beside the waiter
    # Backfill: the job may borrow the held room if the waiter would not fit sooner without it.
    job = QueuedJob("backfill", need.padded_mib, need.predicted_s)
    later = GpuState(gpu.node, gpu.index, gpu.capacity_mib, (*gpu.jobs, job))
    return wait_until_fits_s(later, hold.padded_mib, hold.limit, hold.now,
                             hold.alpha) <= hold.fits_in_s * BACKFILL_SLACK


def usable_gpus(node: NodeState, need: Need, limit: int,
                holds: Holds = NO_HOLDS) -> list[GpuState]:
    """GPUs that can take the job now, best fit (least free memory left) first."""
    if holds:
        fitting = [g for g in node.gpu_states
                   if has_room(g, need, limit, holds.get((g.node, g.index)))]  # fmt: skip
    else:  # the common case, spelled out: this runs for every GPU of every request
        fitting = [g for g in node.gpu_states
                   if len(g.jobs) < limit and need.padded_mib <= g.free_mib]  # fmt: skip
    if len(fitting) > 1:
        fitting.sort(key=lambda g: (g.free_mib, g.index))
    return fitting


def held_gpus(snapshot: ClusterSnapshot, limits: Limits, alpha: float, uid: str,
              max_holds: int, after_s: float = 0.0) -> dict[tuple[str, int], Hold]:
    """GPUs held for the waiters older than pod `uid` that have waited `after_s` or more,
    oldest first, one GPU each: the one among the snapshot's nodes where the waiter fits
    soonest (then runs fastest)."""
    holds: dict[tuple[str, int], Hold] = {}
    if not max_holds:
        return holds
    due = [w for w in _ahead_of(snapshot.waiting, uid) if snapshot.now - w.since >= after_s]
    for waiter in due[:max_holds]:
        best: tuple[float, float, tuple[str, int], int, float] | None = None
        for node in snapshot.nodes.values():
            gpus = node.gpus
            if gpus is None or not node.gpu_states or type_of(gpus) not in waiter.needs:
                continue
            mib, seconds = waiter.needs[type_of(gpus)]
            limit = limits.for_node(gpus)
            for gpu in node.gpu_states:
                if (node.name, gpu.index) in holds:
                    continue
                wait = wait_until_fits_s(gpu, mib, limit, snapshot.now, alpha)
                if wait < math.inf and (best is None or (wait, seconds) < best[:2]):
                    best = (wait, seconds, (node.name, gpu.index), limit, mib)
        if best is not None:
            wait, _, gpu_key, limit, mib = best
            holds[gpu_key] = Hold(waiter.uid, mib, wait, snapshot.now, alpha, limit)
    return holds


def held_from(node: NodeState, need: Need, limits: Limits, holds: Holds) -> list[int]:
    """The node's GPUs that a hold keeps from this job (bind must not pick them)."""
    if not holds or node.gpus is None:
        return []
    limit = limits.for_node(node.gpus)
    return [g.index for g in node.gpu_states
            if (hold := holds.get((node.name, g.index))) and not has_room(g, need, limit, hold)]


def _ahead_of(waiting: tuple[Waiter, ...], uid: str) -> list[Waiter]:
    """Waiters served before `uid`: all others, or only the older ones if it waits too."""
    own = next((w.since for w in waiting if w.uid == uid), math.inf)
    return [w for w in waiting if w.uid != uid and w.since <= own]
