"""`idle-first`: `drain` among busy GPUs, `settled` against an idle one. Pure.

Where an idle GPU could take the job now, a place beside running jobs is priced as if the
sharing lasted (`settled`): the job should take the idle GPU, however slower, rather than
stretch the jobs on a fast one; this is where `drain` loses average JCT on a cluster that
keeps up with its arrivals. Where every GPU with room is busy, they are priced as `drain`
prices them (the backlog kept moving: list scheduling for makespan), where `settled`
loses makespan on a saturated cluster. Measured: docs/2026-12-06-sharing-priced-as-lasting.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from extender.policies.base import ScoringPolicy
from extender.policies.drain import Drain
from extender.policies.settled import Settled


@dataclass(frozen=True)
class IdleFirst(Drain):
    name: ClassVar[str] = "idle-first"

    def beside_idle(self, backlog: bool) -> ScoringPolicy:
        return Settled(alpha=self.alpha)
