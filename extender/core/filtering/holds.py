"""The filter's first stage, holds: the GPUs kept for waiting pods, which this pod may take
only beside them or as a backfill (`extender.core.room.has_room`). Pure; prioritize
prices against the same holds.

Starvation guard: a pod that fit nowhere waits (a `Waiter`); once it has waited
`hold_after_s`, the GPU where it will fit soonest (jobs there played forward)
is held for it, so a stream of small jobs cannot keep a large one out forever:
EASY backfilling's reservation (and Slurm's ``bf_min_age_reserve``).

Shortest job first (`shorter_by`, off at 0): a waiter predicted to run `shorter_by`
times less than the job being placed is held for in the same way at once, whatever
its age, so a long job does not take the last slot or memory a short one waits for
(swapping the two costs the long job the short one's run and saves the short one the
long one's: Hawk's and Eagle's short-job partitions, per GPU). A job that has itself
waited `hold_after_s` no longer yields to shorter ones.

A waiter held for because it is much shorter may fit now on a GPU it refuses, waiting
for a faster one (`extender.core.filtering.patience`); its hold is dropped
(`holds_in_force`), not kept on the card it refuses (which the guard would otherwise
keep from other pods for nothing), nor moved to the card it waits for (which keeps that
card from longer jobs for a request its own retry takes anyway: replayed, it cost
average JCT and gained nothing).
"""

from __future__ import annotations

import math

import numpy as np

from extender.core.filtering.patience import faster_later
from extender.core.fit_rows import fit_rows
from extender.core.gpu_table import GpuTable
from extender.core.interference import Alphas
from extender.core.job import PodJob
from extender.core.room import NO_HOLDS, Hold, Holds, jobs_ahead
from extender.model import ClusterSnapshot, Limits, Need, Waiter, type_of
from extender.policies.timeline_arrays import waits_until_fit_s
from extender.settings import Settings

SHORT_HOLDS = 8  # shorter waiters held for at once (each its own GPU); snapshots read as many
WAITS_KEPT = 64  # waiters' waits kept on a table (`GpuTable.remember`): all a request weighs


def holds_in_force(job: PodJob, settings: Settings, alphas: Alphas) -> Holds:
    """The stage: the holds against `job`'s pod (`holds_against`) but those for patient
    waiters (module docstring). Filter and prioritize see the same."""
    holds = holds_against(job, settings, alphas)
    if not settings.wait_for_faster:
        return holds
    return patient_holds(holds, job.snapshot, settings.collocation, alphas,
                         settings.wait_for_faster, settings.hold_after_s)


def patient_holds(holds: Holds, snapshot: ClusterSnapshot, limits: Limits, alphas: Alphas,
                  margin: float, patient_for_s: float) -> Holds:
    """`holds` without those for a shorter waiter that fits now where it is held, and
    would wait for a faster GPU (`faster_later` at `margin`, as its own filter decides
    while it has waited less than `patient_for_s`)."""
    patient = [(gpu, hold) for gpu, hold in holds.items() if hold.shorter and hold.fits_in_s <= 0]
    if not patient:
        return holds
    waiters = {waiter.uid: waiter for waiter in snapshot.waiting}
    table = GpuTable.from_states(snapshot.nodes)
    kept = dict(holds)
    for gpu, hold in patient:
        waiter = waiters.get(hold.uid)
        if waiter is None or waiter.gpus > 1:
            continue
        fit = fit_rows(table, _WaiterNeeds(waiter), limits, NO_HOLDS)
        others = {key: other for key, other in kept.items() if other.uid != waiter.uid}
        if faster_later(table, fit, alphas, snapshot.now, margin,
                        patient_for_s - (snapshot.now - waiter.since), others) is not None:
            del kept[gpu]
    return kept


class _WaiterNeeds(dict[str, Need]):
    """A waiter's needs per GPU type as its filter estimated them; a type it was never
    estimated for (not among its request's nodes) cannot take it."""

    def __init__(self, waiter: Waiter) -> None:
        super().__init__({gpu_type: Need(mib, seconds)
                          for gpu_type, (mib, seconds) in waiter.needs.items()})

    def __missing__(self, gpu_type: str) -> Need:
        return _NEVER


_NEVER = Need(math.inf, math.inf)


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
