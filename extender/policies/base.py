"""The scoring-policy interface: what placing a job on a GPU costs, and costs -> scores. Pure.

A policy prices a placement in seconds (lower is better) from the jobs already
on the GPU (`extender.policies.timeline` plays them forward). Prioritize prices
each node by its cheapest usable GPU, and `scores` turns those prices into
[0, 1]: the soonest node 1, the others soonest / own (scale-free), and among
nodes tied for the soonest only the tightest fit keeps 1, so the choice is
ours rather than kube-scheduler's coin toss and the larger holes stay for
larger jobs (as kube-scheduler's MostAllocated or Volcano's binpack). Nodes
alike in all of that keep 1 together: kube-scheduler picks one of them at random
(the first in node order instead piles every such job onto the same few nodes;
under FGD's protocol on openb that left twice the GPUs unallocated: docs/).

Prioritize prices thousands of GPUs per request, so a policy also prices them
at once (`costs_s`: one row per GPU, its jobs' remaining seconds as columns), and
`score_array` scores nodes as arrays; each gives exactly what the per-GPU and
per-node methods give.

Adding a policy: one module with a `ScoringPolicy` subclass, one line in the
registry (`extender/policies/__init__.py`), its own tests. Its `cost_s` may read
only the remaining seconds of the jobs on the GPU (what `costs_s` hands it), or it
overrides `costs_s` too.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import ClassVar, NamedTuple

import numpy as np

from extender.model import GpuState, QueuedJob

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

    def beside_idle(self, backlog: bool) -> ScoringPolicy:
        """The policy that prices busy GPUs while an idle GPU could take the job; `backlog`:
        pods are waiting (this one, unless a policy says otherwise: `idle_first`,
        `keeping_up`)."""
        return self

    def with_alpha(self, alpha: float) -> ScoringPolicy:
        """This policy at another collocation slowdown (the GPU type's learned one)."""
        return self if alpha == self.alpha else replace(self, alpha=alpha)

    def costs_s(self, remaining: np.ndarray, work_s: np.ndarray,
                alpha: float | np.ndarray | None = None,
                jobs: np.ndarray | None = None) -> np.ndarray:
        """`cost_s` for many GPUs: row i is a GPU whose jobs have `remaining[i]` seconds of
        work left (queue order; 0 pads a shorter row), priced for a job of `work_s[i]` at
        `alpha` (one per row, or one for all; None: the policy's own); `jobs[i]`: how
        many jobs it holds, those past their prediction included (None: those with work
        left).

        This default asks `cost_s` GPU by GPU; the registered policies override it with
        the same arithmetic in numpy (`extender.policies.timeline_arrays`)."""
        alphas = np.broadcast_to(self.alpha if alpha is None else alpha, len(remaining))
        costs = np.empty(len(remaining))
        for i, (row, work) in enumerate(zip(remaining.tolist(), work_s.tolist(), strict=True)):
            queued = [QueuedJob("", 0.0, left) for left in row if left > 0]
            if jobs is not None:  # those past their prediction: present, no work left
                queued += [QueuedJob("", 0.0, 0.0, 1.0)] * (int(jobs[i]) - len(queued))
            costs[i] = self.with_alpha(float(alphas[i])).cost_s(
                GpuState("", 0, 0, tuple(queued)), work, 0.0)
        return costs

    def scores(self, placements: Mapping[str, Placement]) -> dict[str, float]:
        """Scores in [0, 1] for the nodes that can take the job (see the module docstring);
        `score_array` gives the same for many nodes at once."""
        if not placements:
            return {}
        soonest = min(p.cost_s for p in placements.values())
        scores = {name: 1.0 if p.cost_s <= 0 else min(1.0, soonest / p.cost_s)
                  for name, p in placements.items()}  # fmt: skip
        tied = [name for name, p in placements.items() if p.cost_s <= soonest * (1 + 1e-9)]
        if len(tied) > 1:
            tightest = min(placements[name].left_mib for name in tied)
            for name in tied:
                if placements[name].left_mib != tightest:
                    scores[name] = min(scores[name], TIED_SCORE)
        return scores

    def score_array(self, cost_s: np.ndarray, left_mib: np.ndarray,
                    ties: np.ndarray | None = None) -> np.ndarray:
        """`scores` of placements given as arrays (nodes in order), the same values: the
        soonest 1, the others soonest / own, and among the nodes tied for the soonest only
        the tightest fits keep their score, the others at most `TIED_SCORE`. `ties`: a
        value per node that decides among the tied before the fit does (lowest wins)."""
        if not len(cost_s):
            return np.zeros(0)
        soonest = float(cost_s.min())
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = soonest / cost_s
        ratio = np.where(ratio < 1.0, ratio, 1.0)  # min(1.0, x), as Python's min takes it
        scores = np.where(cost_s <= 0, 1.0, ratio)
        tied = np.flatnonzero(cost_s <= soonest * (1 + 1e-9))
        if len(tied) > 1:
            left = left_mib[tied]
            first = np.ones(len(tied), dtype=bool)
            if ties is not None:
                rounded = np.round(ties[tied], 6)
                first = rounded == rounded.min()
            kept = tied[first & (left == left[first].min())]
            keep_scores = scores[kept]
            scores[tied] = np.where(scores[tied] < TIED_SCORE, scores[tied], TIED_SCORE)
            scores[kept] = keep_scores
        return scores
