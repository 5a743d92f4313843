"""`drain`: when the GPU would be empty again with the job on it. Pure.

The default's price while pods wait (`keeping_up`); the default itself until 2026-12-06.

The jobs on the GPU and the new one played forward at the collocation slowdown
(`timeline.completion_times_s`); the price is when the last of them finishes.

Why this and not the job's own completion (`shared`) or the completion-time sum
of the jobs present (`marginal`): on a busy cluster pods wait, and every slot
and MiB a GPU frees is taken by one of them, so what a placement costs the
queue is how long it keeps the GPU's work going. Giving each job to the machine
that finishes its work soonest is list scheduling for makespan (Graham); it is
also the paper's Eq. 1-2 (the GPU's queue delay plus the job's own time) with
the sharing played forward: at alpha = 1, where sharing gains nothing, the
drain time is exactly the paper's sum of the remaining times plus the job's.
What it charges that `marginal` does not: the backlog already on the GPU, so a
long job is not crowded by a stream of short ones that could drain elsewhere.
The job's own completion is never later than the price, and an idle GPU costs
the job alone (the invariant `ScoringPolicy.cheapest` relies on).

Why it replaced `marginal` as the default: on the paper workload held out by model
(`schedtune replay --workload paper --world lomo --orders 16`), ours' median makespan /
average JCT over the 16 orders were 3588 s / 494 s under `marginal` and 3603 s / 452 s
under `drain`, the paper's policy 3605 s / 455 s; `marginal` crowded long jobs with
short ones (its neighbour delay is alpha times the short job's work: small each time,
paid again for each of them). Neither removes the orders where a long training ends
last on a slow card (README, Replay: what still loses).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from extender.model import GpuState
from extender.policies.base import ScoringPolicy
from extender.policies.timeline import completion_times_s, remaining_s
from extender.policies.timeline_arrays import drain_times_s


@dataclass(frozen=True)
class Drain(ScoringPolicy):
    name: ClassVar[str] = "drain"

    def cost_s(self, gpu: GpuState, work_s: float, now: float) -> float:
        ends = completion_times_s([*(remaining_s(j, now) for j in gpu.jobs), work_s],
                                  self.alpha)
        return ends[-1] if ends else 0.0  # no work left at all: nothing to wait for

    def costs_s(self, remaining: np.ndarray, work_s: np.ndarray,
                alpha: float | np.ndarray | None = None,
                jobs: np.ndarray | None = None) -> np.ndarray:
        return drain_times_s(remaining, work_s, self.alpha if alpha is None else alpha)
