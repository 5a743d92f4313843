"""`paper`: the SchedTune paper's Eq. 1-2 as published. Pure.

Expected completion = queue delay (the remaining time of the jobs on the GPU,
summed as if they ran one after another) + the job's own predicted time.
It ignores that collocated jobs run at once, so a short job beside a long one
is charged the long one's whole remaining time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from extender.model import GpuState
from extender.policies.base import ScoringPolicy
from extender.policies.timeline import remaining_s
from extender.policies.timeline_arrays import paper_costs_s


@dataclass(frozen=True)
class Paper(ScoringPolicy):
    name: ClassVar[str] = "paper"

    def cost_s(self, gpu: GpuState, work_s: float, now: float) -> float:
        return sum(remaining_s(job, now) for job in gpu.jobs) + work_s

    def costs_s(self, remaining: np.ndarray, work_s: np.ndarray,
                alpha: float | np.ndarray | None = None,
                jobs: np.ndarray | None = None) -> np.ndarray:
        return paper_costs_s(remaining, work_s)  # sums: no sharing played forward
