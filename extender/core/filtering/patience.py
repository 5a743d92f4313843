"""The filter's third stage, patience: a pod that fits now may still be better off waiting,
for a much faster GPU that frees later (this module), or for a GPU of its own rather
than share (`extender.core.filtering.sharing`). Pure.

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from extender.core.filtering.never_waited_for import RETRY_S, of_unknown_make, overran
from extender.core.filtering.sharing import OwnGpuSoon, own_gpu_soon
from extender.core.fit_rows import Fit, fit_rows
from extender.core.gpu_table import GpuTable
from extender.core.interference import Alphas
from extender.core.job import PodJob
from extender.core.room import NO_HOLDS, Holds, held_rows, jobs_ahead
from extender.model import type_of
from extender.policies.timeline_arrays import (
    left_after_s,
    shared_completions_s,
    waits_until_fit_s,
)
from extender.settings import Settings


def better_gpu(job: PodJob, holds: Holds, alphas: Alphas,
               settings: Settings) -> FasterLater | OwnGpuSoon | None:
    """The stage: a GPU the pod should wait for though it fits now, or None. A much faster
    one (`faster_later`, while it has waited less than EXTENDER_HOLD_AFTER_S), else one of
    its own rather than share (`sharing.own_gpu_soon`, with no bound: a long job that gives
    up waiting shares at the worst time, having paid the wait too). Off without the
    starvation guard (EXTENDER_HOLD_FOR=0: no pod waits)."""
    if not settings.hold_for:
        return None
    snapshot = job.snapshot
    faster_s = settings.hold_after_s - (snapshot.now - job.waiting_since) \
        if settings.wait_for_faster else 0.0
    if faster_s <= 0 and not settings.share_if_pays:
        return None
    table = GpuTable.from_states(snapshot.nodes)
    fit = fit_rows(table, job.needs, settings.collocation, holds)
    if faster_s > 0 and (found := faster_later(table, fit, alphas, snapshot.now,
                                               settings.wait_for_faster, faster_s,
                                               holds)) is not None:
        return found
    return own_gpu_soon(table, fit, alphas, snapshot.now, holds=holds) \
        if settings.share_if_pays else None


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
