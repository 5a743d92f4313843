"""`shared`: the job's own completion, sharing the GPU at the collocation slowdown. Pure.

Eq. 1-2 played forward: the jobs on the GPU and the new one run at once, each
at speed 1 / (1 + alpha (k - 1)), so a short job beside a long one is charged
only for the overlap. What the job costs its neighbours is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from extender.model import GpuState
from extender.policies.base import ScoringPolicy
from extender.policies.timeline import remaining_s, shared_completion_s
from extender.policies.timeline_arrays import shared_completions_s


@dataclass(frozen=True)
class Shared(ScoringPolicy):
    name: ClassVar[str] = "shared"

    def cost_s(self, gpu: GpuState, work_s: float, now: float) -> float:
        return shared_completion_s(work_s, [remaining_s(j, now) for j in gpu.jobs], self.alpha)

    def costs_s(self, remaining: np.ndarray, work_s: np.ndarray,
                alpha: float | np.ndarray | None = None,
                jobs: np.ndarray | None = None) -> np.ndarray:
        return shared_completions_s(remaining, work_s, self.alpha if alpha is None else alpha)
