"""The patience stage's second rule, share only where it pays: a job that fits now only
beside running jobs waits for a GPU of its own when that would cost less. Pure.

Sharing a GPU starts a job at once but slows it and its neighbours (speed 1 / (1 + alpha
(k - 1)) with k jobs); on today's cards alpha is 0.5-0.95, so two jobs together do at
most a third more work than one alone, and a long job committed to a busy slow card
crawls there while faster cards free and take later arrivals. Waiting a little for a
card of one's own is late binding: it decides where the job runs once the cluster knows
more (the jobs ahead ended, their true lengths with them).

With `EXTENDER_SHARE_IF_PAYS` on, when no idle GPU has room for the job and it fits only
beside running jobs, filter prices each shared placement at what it costs everyone: the
job's completion there plus the delay it adds to the jobs already there (`marginal`),
played forward at the GPU type's collocation slowdown. Against it: each busy GPU that
the job could have to itself, at the seconds until its jobs end (predicted, played
forward), plus kube-scheduler's retry back-off (`never_waited_for.RETRY_S`), plus the job's run
there alone. When the best such GPU costs less than the best shared placement, the pod
waits as a pod that fits nowhere does and decides again when a GPU frees; short jobs,
whose sharing costs little, still share. The guards are patience's (`never_waited_for`): never a GPU whose
job overran its prediction (when it ends is unknown), one held for another waiting pod,
one of an unknown make, or one that would not free within `patience_s` (the pod then
takes what fits anyway); multi-GPU pods are not held back. Filter sets no such bound:
a long job that gave up after the hold's 900 s paid the wait and the sharing both
(replayed on the generated world, seed 10: 28,192 s with the 900 s, 20,878 s without a
bound; bounded by the job's own run instead, orders 1-3 ended 1,300-4,400 s later than
with this rule off; docs/2026-12-02-todays-gpus-8-orders.md). Its waits end by themselves: a GPU whose jobs
overran their prediction is no longer waited for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from extender.core.filtering.never_waited_for import RETRY_S, of_unknown_make, overran
from extender.core.fit_rows import Fit
from extender.core.gpu_table import GpuTable
from extender.core.interference import Alphas
from extender.core.room import NO_HOLDS, Holds, held_rows, jobs_ahead
from extender.model import type_of
from extender.policies.timeline_arrays import drain_times_s, marginal_costs_s


@dataclass(frozen=True)
class OwnGpuSoon:
    """The GPU worth waiting for: the job's own in `free_in_s`, done `done_in_s` from now,
    against `shared_s` for the best placement beside running jobs (its completion plus
    its neighbours' delay)."""

    node: str
    gpu_index: int
    gpu_type: str
    free_in_s: float
    done_in_s: float
    shared_s: float

    def reason(self) -> str:
        return (f"waiting for a GPU of its own: done in ~{self.done_in_s:.0f} s on GPU "
                f"{self.gpu_index} ({self.gpu_type}) of {self.node} once its jobs end (in "
                f"~{self.free_in_s:.0f} s), against ~{self.shared_s:.0f} s that sharing a "
                "GPU now would cost it and its neighbours")


def own_gpu_soon(table: GpuTable, fit: Fit, alphas: Alphas, now: float,
                 patience_s: float = math.inf, holds: Holds = NO_HOLDS) -> OwnGpuSoon | None:
    """The GPU the job should wait for (module docstring), or None: take what fits now."""
    if not fit.room.any() or (fit.gpus > 1).any():
        return None
    unknown = of_unknown_make(table)
    if (fit.room & (unknown | (table.gpu_jobs == 0))).any():
        return None  # an idle GPU takes it now (prioritize weighs it against sharing)
    alpha = np.broadcast_to(alphas.rows(table), len(fit.room))
    shared = np.flatnonzero(fit.room)
    remaining, _ = jobs_ahead(table, shared, now)
    shared_s = float(marginal_costs_s(remaining, fit.work_s[shared], alpha[shared]).min())
    candidate = (~unknown & (table.gpu_jobs > 0) & (fit.padded_mib <= table.gpu_capacity)
                 & (fit.limit >= 1) & (fit.work_s + RETRY_S < shared_s))
    candidate[held_rows(table, holds)] = False
    busy = np.flatnonzero(candidate)
    if not len(busy):
        return None
    remaining, _ = jobs_ahead(table, busy, now)
    free_in = drain_times_s(remaining, np.zeros(len(busy)), alpha[busy])
    free_in[overran(table, busy, remaining)] = np.inf  # when an overrun ends is unknown
    free_in[free_in + RETRY_S > patience_s] = np.inf  # it would take what fits before then
    done = free_in + RETRY_S + fit.work_s[busy]
    best = int(np.argmin(done))  # the first among equals, in node and GPU order
    if not done[best] < shared_s:
        return None
    row = int(busy[best])
    layout = table.layouts[int(table.gpu_layout[row])]
    assert layout is not None  # a row with a finite need has a usable layout
    return OwnGpuSoon(table.names[int(table.gpu_node[row])], int(table.gpu_index[row]),
                      type_of(layout), float(free_in[best]), float(done[best]), shared_s)
