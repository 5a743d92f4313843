"""The scoring-policy interface: what placing a job on a GPU costs, and costs -> scores. Pure.

A policy prices a placement in seconds (lower is better) from the jobs already
on the GPU (`extender.policies.timeline` plays them forward). Prioritize prices
each node by its cheapest usable GPU, and `scores` turns those prices into
[0, 1]: the soonest node 1, the others soonest / own (scale-free), and among
nodes tied for the soonest only the tightest fit keeps 1, so the choice is
ours rather than kube-scheduler's coin toss and the larger holes stay for
larger jobs (as kube-scheduler's MostAllocated or Volcano's binpack).

Adding a policy: one module with a `ScoringPolicy` subclass, one line in the
registry (`extender/policies/__init__.py`), its own tests.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

from extender.model import GpuState

TIED_SCORE = 0.9  # as soon as the best node but a looser fit: below it on every wire's scale


class Placement(NamedTuple):
    """A node's best offer for the job: the price on the GPU bind would reserve, and the
    memory that GPU would have left. (A tuple: one is built per busy node per request.)"""

    cost_s: float
    left_mib: float


@dataclass(frozen=True)
class ScoringPolicy(ABC):
    """Prices placements. `alpha`: the collocation slowdown, speed 1 / (1 + alpha (k - 1)).

    Invariant every policy keeps: an idle GPU costs the job alone (`work_s`), and no
    placement costs less, so `cheapest` may stop at the first GPU that costs that.
    """

    name: ClassVar[str]
    alpha: float = 0.47

    @abstractmethod
    def cost_s(self, gpu: GpuState, work_s: float, now: float) -> float:
        """What placing a job of `work_s` seconds (alone) on `gpu` at `now` costs."""

    def cheapest(self, gpus: Iterable[GpuState], work_s: float,
                 now: float) -> tuple[float, GpuState]:
        """The lowest cost among `gpus` (at least one, best fit first) and the first GPU at
        that cost. The first GPU that costs the job alone (any idle one: most GPUs of a
        large cluster) ends the search."""
        best: tuple[float, GpuState] | None = None
        for gpu in gpus:
            cost = work_s if not gpu.jobs else self.cost_s(gpu, work_s, now)
            if best is None or cost < best[0]:
                best = (cost, gpu)
                if cost <= work_s:
                    break
        if best is None:
            raise ValueError("no GPU to cost")
        return best

    def scores(self, placements: Mapping[str, Placement]) -> dict[str, float]:
        """Scores in [0, 1] for the nodes that can take the job (see the module docstring)."""
        if not placements:
            return {}
        soonest = min(p.cost_s for p in placements.values())
        scores = {name: 1.0 if p.cost_s <= 0 else min(1.0, soonest / p.cost_s)
                  for name, p in placements.items()}  # fmt: skip
        tied = [name for name, p in placements.items() if p.cost_s <= soonest * (1 + 1e-9)]
        if len(tied) > 1:
            keep = min(tied, key=lambda name: placements[name].left_mib)  # first among equals
            for name in tied:
                if name != keep:
                    scores[name] = min(scores[name], TIED_SCORE)
        return scores
