"""`marginal`: the job's own completion plus the delay it adds to the jobs already on the
GPU (the default before `drain`). Pure.

The growth of the GPU's total completion time when the job joins, played
forward at the collocation slowdown: what the placement costs the cluster,
not just the job (`shared` counts only the job's own completion).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from extender.model import GpuState
from extender.policies.base import ScoringPolicy
from extender.policies.timeline import marginal_cost_s, remaining_s
from extender.policies.timeline_arrays import marginal_costs_s


@dataclass(frozen=True)
class Marginal(ScoringPolicy):
    name: ClassVar[str] = "marginal"

    def cost_s(self, gpu: GpuState, work_s: float, now: float) -> float:
        return marginal_cost_s(work_s, [remaining_s(j, now) for j in gpu.jobs], self.alpha)

    def costs_s(self, remaining: np.ndarray, work_s: np.ndarray,
                alpha: float | np.ndarray | None = None,
                jobs: np.ndarray | None = None) -> np.ndarray:
        return marginal_costs_s(remaining, work_s, self.alpha if alpha is None else alpha)
