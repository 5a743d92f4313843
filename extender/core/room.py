"""Which GPUs have room for a job: memory, collocation slots, and room held for waiting pods. Pure.

Starvation guard: a pod that fit nowhere waits (a `Waiter`); once it has waited
`hold_after_s`, the GPU where it will fit soonest (jobs there played forward)
is held for it. Other jobs go there only if both fit, or if they are gone
before it would fit anyway (within `BACKFILL_SLACK`), so a stream of small
jobs cannot keep a large one out forever: EASY backfilling's reservation
(and Slurm's ``bf_min_age_reserve``), with GPU memory as the resource.

Shortest job first (`shorter_by`, off at 0): a waiter predicted to run `shorter_by`
times less than the job being placed is held for in the same way at once, whatever
its age, so a long job does not take the last slot or memory a short one waits for
(swapping the two costs the long job the short one's run and saves the short one the
long one's: Hawk's and Eagle's short-job partitions, per GPU). A job that has itself
waited `hold_after_s` no longer yields to shorter ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from extender.core.gpu_table import GpuTable
from extender.core.interference import Alphas
from extender.core.job import PodJob
from extender.model import (
    ClusterSnapshot, GpuState, Limits, Need, NodeState, QueuedJob, Waiter, type_of,
)  # fmt: skip
from extender.policies.timeline import wait_until_fits_s
from extender.policies.timeline_arrays import remaining_s, waits_until_fit_s
from extender.settings import Settings

BACKFILL_SLACK = 1.1  # a backfilled job may push the waiter's expected fit back 10 %
SHORT_HOLDS = 8  # shorter waiters held for at once (each its own GPU); snapshots read as many
WAITS_KEPT = 64  # waiters' waits kept on a table (`GpuTable.remember`): all a request weighs


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
    shorter: bool = False  # held because the waiter is much shorter, not because it is old


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


def holds_against(job: PodJob, settings: Settings,
                  alphas: Alphas) -> dict[tuple[str, int], Hold]:
    """The holds in force against `job`'s pod, as `settings` configure the guard (filter and
    prioritize see the same)."""
    own_s = min((need.predicted_s for need in job.needs.values()), default=0.0)
    return held_gpus(job.snapshot, settings.collocation, alphas, job.demand.uid,
                     settings.hold_for, settings.hold_after_s, settings.short_first, own_s)


def held_gpus(snapshot: ClusterSnapshot, limits: Limits, alphas: Alphas, uid: str,
              max_holds: int, after_s: float = 0.0, shorter_by: float = 0.0,
              own_s: float = 0.0) -> dict[tuple[str, int], Hold]:
    """GPUs held for the waiters older than pod `uid` that have waited `after_s` or more,
    oldest first: the GPU among the snapshot's nodes where the waiter fits soonest (then
    runs fastest; the first such GPU in node order), or for a waiter on k GPUs of one
    node, the k GPUs of the node where the k-th of them fits soonest. Each GPU is played
    forward at its type's alpha. With `shorter_by`, then likewise for the waiters that
    much shorter than the pod (`own_s`: its shortest predicted seconds; module doc)."""
    holds: dict[tuple[str, int], Hold] = {}
    if not max_holds:
        return holds
    due = [w for w in _ahead_of(snapshot.waiting, uid)
           if snapshot.now - w.since >= after_s][:max_holds]
    aged = len(due)
    if shorter_by:
        due += _shorter_waiters(snapshot, uid, due, shorter_by, own_s, after_s)
    if not due:
        return holds
    table = GpuTable.from_states(snapshot.nodes)
    taken = np.zeros(len(table.gpu_jobs), dtype=bool)
    alpha = np.broadcast_to(alphas.rows(table), len(taken))
    for n, waiter in enumerate(due):
        key = (waiter.uid, tuple(sorted(waiter.needs.items())), limits, alphas, snapshot.now)
        row_mib, row_seconds, row_limit, wait = table.remember(
            "waits", key, lambda: _waits_of(table, waiter, limits, alphas, snapshot.now),
            WAITS_KEPT)
        if taken.any():
            wait = np.where(taken, np.inf, wait)
        if not (wait < math.inf).any():
            continue
        if waiter.members > 1:
            rows_held, soonest = _soonest_members(table, wait, waiter.gpus, waiter.members)
        elif waiter.gpus > 1:
            rows_held, soonest = _soonest_together(table, wait, row_seconds, waiter.gpus)
        else:
            soonest = wait.min()
            tied = wait == soonest
            rows_held = np.flatnonzero(tied & (row_seconds == row_seconds[tied].min()))[:1]
        if not soonest < math.inf:
            continue
        taken[rows_held] = True
        for row in rows_held.tolist():
            node = table.names[int(table.gpu_node[row])]
            holds[node, int(table.gpu_index[row])] = Hold(waiter.uid, float(row_mib[row]),
                                                           float(soonest), snapshot.now,
                                                           float(alpha[row]),
                                                           int(row_limit[row]), n >= aged)
    return holds


def _waits_of(table: GpuTable, waiter: Waiter, limits: Limits, alphas: Alphas,
              now: float) -> tuple[np.ndarray, ...]:
    """Per row of `table`: the waiter's padded MiB, seconds and collocation limit there (NaN,
    NaN, 0 on a GPU type it was not estimated for), and the seconds until it fits there,
    jobs played forward from `now` (inf where it cannot go)."""
    mib = np.full(len(table.layouts), np.nan)
    seconds = np.full(len(table.layouts), np.nan)
    limit = np.zeros(len(table.layouts), dtype=np.int64)
    for i, gpus in enumerate(table.layouts):
        if gpus is not None and type_of(gpus) in waiter.needs:
            mib[i], seconds[i] = waiter.needs[type_of(gpus)]
            limit[i] = limits.for_node(gpus)
    row_mib, row_limit = mib[table.gpu_layout], limit[table.gpu_layout]
    candidate = np.flatnonzero(~np.isnan(row_mib))
    wait = np.full(len(row_mib), np.inf)
    if len(candidate):
        remaining, mib_held = jobs_ahead(table, candidate, now)
        alpha = np.broadcast_to(alphas.rows(table), len(row_mib))
        wait[candidate] = waits_until_fit_s(
            remaining, mib_held, table.gpu_jobs[candidate], table.gpu_free[candidate],
            table.gpu_capacity[candidate], row_mib[candidate], row_limit[candidate],
            alpha[candidate])
    return row_mib, seconds[table.gpu_layout], row_limit, wait


def held_rows(table: GpuTable, holds: Holds) -> list[int]:
    """The rows of `table` that `holds` keeps for waiting pods."""
    return [row for node, index in holds if (row := table.row_of(node, index)) is not None]


def jobs_ahead(table: GpuTable, rows: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
    """The jobs on `rows` of `table`, a row each: seconds of work left alone on the GPU and
    MiB reserved (columns past a row's jobs are padding), as `waits_until_fit_s` reads them."""
    width = int(table.gpu_jobs[rows].max()) if len(rows) else 0
    remaining = remaining_s(table.jobs_matrix(rows, width, table.jobs.predicted_s),
                            table.jobs_matrix(rows, width, table.jobs.started_at), now)
    return remaining, table.jobs_matrix(rows, width, table.jobs.mib)


def _soonest_together(table: GpuTable, wait: np.ndarray, row_seconds: np.ndarray,
                      gpus: int) -> tuple[np.ndarray, float]:
    """For a waiter on `gpus` GPUs of one node: the node whose `gpus` soonest GPUs all fit
    it soonest (then runs fastest; the first such node), those rows and when the last of
    them fits (inf: no node has enough)."""
    ordered = np.lexsort((table.gpu_index, wait, table.gpu_node))  # node, soonest, index
    nodes = table.gpu_node[ordered]
    rank = np.arange(len(ordered)) - np.searchsorted(nodes, nodes, side="left")
    last = ordered[rank == gpus - 1]  # per node with enough GPUs: the gpus-th soonest
    last = last[wait[last] < math.inf]
    if not len(last):
        return last, math.inf
    soonest = wait[last].min()
    tied = last[wait[last] == soonest]
    node = int(table.gpu_node[tied[row_seconds[tied] == row_seconds[tied].min()][0]])
    return ordered[(nodes == node) & (rank < gpus)], float(soonest)


def _soonest_members(table: GpuTable, wait: np.ndarray, gpus: int,
                     members: int) -> tuple[np.ndarray, float]:
    """For a gang of `members` members on `gpus` GPUs of one node each: the member slots
    (per node, its soonest GPUs taken `gpus` at a time) that fit soonest, all their rows
    and when the last of them fits (inf: the nodes have too few slots)."""
    ordered = np.lexsort((table.gpu_index, wait, table.gpu_node))  # node, soonest, index
    nodes = table.gpu_node[ordered]
    rank = np.arange(len(ordered)) - np.searchsorted(nodes, nodes, side="left")
    ends = np.flatnonzero((rank + 1) % gpus == 0)  # a member's last GPU, as positions
    ends = ends[wait[ordered[ends]] < math.inf]
    if len(ends) < members:
        return ends[:0], math.inf
    chosen = ends[np.argsort(wait[ordered[ends]], kind="stable")[:members]]
    positions = (chosen[:, None] - np.arange(gpus)[None, :]).ravel()
    return ordered[positions], float(wait[ordered[chosen]].max())


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


def _shorter_waiters(snapshot: ClusterSnapshot, uid: str, due: list[Waiter], shorter_by: float,
                     own_s: float, after_s: float) -> list[Waiter]:
    """Among the `SHORT_HOLDS` shortest waiters (the ones a request reads), shortest first,
    those predicted to run at least `shorter_by` times less than pod `uid` (`own_s`) and
    not already `due`; none once the pod has waited `after_s` itself."""
    own_since = next((w.since for w in snapshot.waiting if w.uid == uid), math.inf)
    if snapshot.now - own_since >= after_s:
        return []
    held = {w.uid for w in due}
    shortest = sorted(snapshot.waiting, key=lambda w: (w.shortest_s, w.uid))[:SHORT_HOLDS]
    return [w for w in shortest if w.uid != uid and w.uid not in held
            and w.shortest_s * shorter_by <= own_s]
