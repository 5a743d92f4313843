"""`marginal` (the default): the job's own completion plus the delay it adds to the jobs
already on the GPU. Pure.

The growth of the GPU's total completion time when the job joins, played
forward at the collocation slowdown: what the placement costs the cluster,
not just the job (`shared` counts only the job's own completion).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from extender.model import GpuState
from extender.policies.base import ScoringPolicy
from extender.policies.timeline import marginal_cost_s, remaining_s


@dataclass(frozen=True)
class Marginal(ScoringPolicy):
    name: ClassVar[str] = "marginal"

    def cost_s(self, gpu: GpuState, work_s: float, now: float) -> float:
        return marginal_cost_s(work_s, [remaining_s(j, now) for j in gpu.jobs], self.alpha)
