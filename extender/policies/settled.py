"""`settled`: the job's run and its neighbours' delay, as if the sharing lasted. Pure.

A job placed beside k running jobs is priced as if all of them kept sharing the GPU for
the rest of their runs: its own seconds at speed 1 / (1 + alpha k), plus alpha times the
seconds of work its neighbours have left (each is slowed by that much). Played forward
(`drain`, `marginal`), sharing ends when the shorter job ends, so a placement beside a
job that is predicted to end soon looks almost free; when that job runs longer than
predicted, or the next arrivals join it, the sharing lasts and every job on the GPU
finishes late (processor sharing: k equal jobs all end at k times the run, where a queue
would end them at 1, 2, .. k runs). The oracle baseline prices placements this way.

A job that ran past its prediction (no work left by it) still shares the GPU: it counts
among the k, with no delay charged for it (how long it has left is unknown).

Not the default: ahead of `drain` where the cluster keeps up with its arrivals (the 4x
generated world at 10 jobs a minute: average JCT 983 s against the default scheduler's
1,334, where `drain` is behind it), 8.5 % behind it on makespan in the saturated 80-GPU
world (docs/2026-12-06-sharing-priced-as-lasting.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from extender.model import GpuState
from extender.policies.base import ScoringPolicy
from extender.policies.timeline import remaining_s


@dataclass(frozen=True)
class Settled(ScoringPolicy):
    name: ClassVar[str] = "settled"

    def cost_s(self, gpu: GpuState, work_s: float, now: float) -> float:
        left = [r for r in (remaining_s(j, now) for j in gpu.jobs) if r > 0]
        return work_s * (1 + self.alpha * len(gpu.jobs)) + self.alpha * sum(left)

    def costs_s(self, remaining: np.ndarray, work_s: np.ndarray,
                alpha: float | np.ndarray | None = None,
                jobs: np.ndarray | None = None) -> np.ndarray:
        a = self.alpha if alpha is None else alpha
        left = np.where(remaining > 0, remaining, 0.0)
        company = (left > 0).sum(axis=1) if jobs is None else jobs
        return work_s * (1 + a * company) + a * left.sum(axis=1)
