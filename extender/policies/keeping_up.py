"""`keeping-up` (the default): `idle-first` while the cluster keeps up with its arrivals,
`drain` once pods wait. Pure.

The two prices are right in different clusters (docs/2026-12-06-sharing-priced-as-lasting.md).
Where the cluster keeps up, a job should take an idle GPU, however slower, rather than
stretch the jobs on a fast one (`settled`'s price beside an idle GPU): `drain` loses
average JCT there. Where pods wait, every GPU that frees is taken by one of them, so what
a placement costs is how long it keeps its GPU's work going (`drain`: list scheduling
for makespan); pricing sharing as lasting there sends jobs to an idle slow card they
then hold for long. Which one holds is read per decision from the queue itself: a pod
waiting (a `Waiter`: it fit nowhere, or waits for a better GPU) means the cluster is
not keeping up.

Why the default (docs/2026-12-06-keeping-up.md, 8 orders each): the one pricing ahead of
the default scheduler and of declared on both medians in the 80-GPU world of today's GPUs
and in the 4x one (where `drain` lost average JCT by 38 %), and ahead of the paper's
policy on both medians in the paper's eight worlds (where `idle-first` lost two). It
costs 3-7 % of makespan against `drain` where pods queue most (the saturated 80-GPU
world, perturbed 2, 4 and 5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from extender.policies.base import ScoringPolicy
from extender.policies.idle_first import IdleFirst


@dataclass(frozen=True)
class KeepingUp(IdleFirst):
    name: ClassVar[str] = "keeping-up"

    def beside_idle(self, backlog: bool) -> ScoringPolicy:
        return self if backlog else super().beside_idle(backlog)
