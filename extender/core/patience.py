"""Waiting for a faster GPU: a job passes up the GPUs it fits on now when one that frees
later would finish it much sooner. Pure.

Placing each job on the best GPU free now is greedy: in a mixed cluster it puts a long
job on a slow card minutes before a fast one frees, and the job ends hours later than
it would have there (the trade heterogeneity-aware schedulers such as Gavel and Sia
weigh by throughput; this is its online form). With `margin` (`EXTENDER_WAIT_FOR_FASTER`),
filter refuses the nodes that fit now when the job's soonest predicted completion on
them (sharing with each GPU's jobs, played forward) is more than `margin` times its
soonest completion on a GPU that cannot take it yet: the seconds until it fits, played
forward, plus kube-scheduler's retry back-off (`RETRY_S`) and its run there beside the
jobs still on it then. The pod waits as a pod that fits nowhere does, and decides
again at each retry on fresh state; one that has waited `EXTENDER_HOLD_AFTER_S` takes
what fits, so only a GPU that would take it before then is waited for. Never waited
for: a GPU running a job past its predicted end (when it ends is unknown), one held
for another waiting pod, one of a make the catalogue does not know; pods on several
GPUs are not held back.

The starvation guard's holds follow the same rule (`holds_in_force`): a waiter held for
because it is much shorter (`EXTENDER_SHORT_FIRST`) may fit now on a GPU it refuses,
waiting for a faster one; its hold is dropped, not kept on the card it refuses (which
the guard would otherwise keep from other pods for nothing), nor moved to the card it
waits for (which keeps that card from longer jobs for a request its own retry takes
anyway: replayed, it cost average JCT and gained nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from extender.core.fit import Fit, fit_rows
from extender.core.gpu_table import GpuTable
from extender.core.interference import Alphas
from extender.core.job import PodJob
from extender.core.room import NO_HOLDS, Holds, held_rows, holds_against, jobs_ahead
from extender.model import UNKNOWN_TYPE, ClusterSnapshot, Limits, Need, Waiter, type_of
from extender.policies.timeline_arrays import (
    left_after_s, shared_completions_s, waits_until_fit_s,
)
from extender.settings import Settings

#: Seconds a refused pod may take to come back once the GPU frees: kube-scheduler's
#: podMaxBackoffSeconds (default 10). Short jobs are never worth the round trip.
RETRY_S = 10.0


@dataclass(frozen=True)
class FasterLater:
    """The GPU worth waiting for: where the job would be done in `done_in_s` (it fits in
    `fits_in_s`), against `here_s` on the best GPU that can take it now."""

    node: str
    gpu_index: int
    gpu_type: str
    fits_in_s: float
    done_in_s: float
    here_s: float
    row: int = -1  # in the table it was found in

    def reason(self) -> str:
        return (f"waiting for a faster GPU: done in ~{self.done_in_s:.0f} s on GPU "
                f"{self.gpu_index} ({self.gpu_type}) of {self.node} once it frees (in "
                f"~{self.fits_in_s:.0f} s), against ~{self.here_s:.0f} s on the best GPU "
                f"free now")


def faster_later(table: GpuTable, fit: Fit, alphas: Alphas, now: float, margin: float,
                 patience_s: float = math.inf, holds: Holds = NO_HOLDS) -> FasterLater | None:
    """The GPU the job should wait for (module docstring), None when the best GPU free now
    is within `margin` of it, when nothing fits now, or for a multi-GPU job.

    Never waited for: a GPU that would not take the job within `patience_s` (how long it
    may still wait before it takes what fits), one `holds` keeps for another waiting pod,
    and one of a make the catalogue does not know (its seconds there are the worst known
    type's, not a prediction); and no job waits while such a GPU could take it now."""
    if not fit.room.any() or (fit.gpus > 1).any():
        return None
    unknown = of_unknown_make(table)
    if (fit.room & unknown).any():
        return None
    idle = fit.room & (table.gpu_jobs == 0)
    here_s = float(fit.work_s[idle].min()) if idle.any() else np.inf  # alone: its run
    candidate = (~fit.room & ~unknown & (table.gpu_jobs > 0) & np.isfinite(fit.padded_mib)
                 & ((fit.work_s + RETRY_S) * margin < here_s))
    if not candidate.any():  # a busy GPU free now can only lower here_s: none ever will be
        return None
    alpha = np.broadcast_to(alphas.rows(table), len(fit.room))
    shared = np.flatnonzero(fit.room & (table.gpu_jobs > 0) & (fit.work_s < here_s))
    if len(shared):  # sharing only slows the job: only GPUs faster alone can do better
        remaining, _ = jobs_ahead(table, shared, now)
        here_s = min(here_s, float(shared_completions_s(remaining, fit.work_s[shared],
                                                        alpha[shared]).min()))
        candidate &= (fit.work_s + RETRY_S) * margin < here_s
    candidate[held_rows(table, holds)] = False
    later = np.flatnonzero(candidate)
    if not len(later):
        return None
    remaining, mib = jobs_ahead(table, later, now)
    wait = waits_until_fit_s(remaining, mib, table.gpu_jobs[later], table.gpu_free[later],
                             table.gpu_capacity[later], fit.padded_mib[later],
                             fit.limit[later], alpha[later])
    wait[overran(table, later, remaining)] = np.inf  # when an overrun ends is unknown
    wait[wait + RETRY_S > patience_s] = np.inf  # it would take what fits before then
    work = fit.work_s[later]
    done = wait + RETRY_S + shared_completions_s(left_after_s(remaining, wait, alpha[later]),
                                                 work, alpha[later])
    best = int(np.argmin(done))  # the first among equals, in node and GPU order
    if not here_s > margin * done[best]:
        return None
    row = int(later[best])
    layout = table.layouts[int(table.gpu_layout[row])]
    assert layout is not None  # a row with a finite need has a usable layout
    return FasterLater(table.names[int(table.gpu_node[row])], int(table.gpu_index[row]),
                       type_of(layout), float(wait[best]), float(done[best]), here_s, row)


def of_unknown_make(table: GpuTable) -> np.ndarray:
    """Per row of `table`: a GPU of a make the catalogue does not know (its seconds there
    are the worst known type's, not a prediction)."""
    return np.array([g is not None and type_of(g) == UNKNOWN_TYPE for g in table.layouts],
                    dtype=bool)[table.gpu_layout]


def overran(table: GpuTable, rows: np.ndarray, remaining: np.ndarray) -> np.ndarray:
    """Per row of `rows` (`remaining`: their jobs, `room.jobs_ahead`): a job there ran past
    its predicted end, so when the GPU frees is unknown."""
    jobs = np.arange(remaining.shape[1])[None, :] < table.gpu_jobs[rows][:, None]
    return (jobs & (remaining <= 0)).any(axis=1)


def holds_in_force(job: PodJob, settings: Settings, alphas: Alphas) -> Holds:
    """The holds against `job`'s pod (`room.holds_against`) but those for patient waiters
    (module docstring). Filter and prioritize see the same."""
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
