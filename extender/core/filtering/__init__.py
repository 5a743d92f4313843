"""Filter: which nodes can take the pod now, and what follows from it, as ordered stages.
Pure.

kube-scheduler's framework runs a pod through named plugin stages; a filter decision here
reads the same way (`decide_filter`), each stage a module taking what it needs and
returning its part of the decision:

1. `holds`: the GPUs kept for waiting pods (starvation guard, shorter jobs first);
2. `fit`: a verdict per node (memory, collocation slots, beside the holds; paper
   Algorithm 2) and the nodes that pass;
3. `patience`: whether the pod should pass them up for a much faster GPU that frees
   later, or for one of its own rather than share;
4. `record`: what bind will need (the passing nodes' layouts, the GPUs held from it);
5. `waiter`: a pod no node takes now waits; what its owner and the waiters' are told.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from extender.by_node import refuse_passing
from extender.core.filtering import fit, holds, patience, record, waiter
from extender.core.interference import alphas_for
from extender.core.job import Assessment, NotOurs, PodJob, Refused
from extender.model import Decision, FilterRecord, NodeGpus, Verdict, Waiter
from extender.settings import Settings


@dataclass(frozen=True)
class FilterDecision:
    """Filter's whole answer: a verdict per node, and what to write. `record`: what bind
    will need (annotated pods only); `waiter`: the pod fits nowhere now, record it as
    waiting (or refresh it); `told`: decisions for the pods' owners (this pod waits, a
    GPU is held for another waiting pod)."""

    verdicts: Mapping[str, Verdict]  # a `NodeVerdicts` over many nodes
    record: FilterRecord | None = None
    waiter: Waiter | None = None
    passthrough: bool = False
    told: tuple[Decision, ...] = ()

    def writes_beyond(self, written: FilterRecord | None) -> bool:
        """Whether anything is left to write once `written` went with the read: another
        record, a waiter, decisions told."""
        return self.record is not None and (self.record != written or bool(self.told)
                                            or self.waiter is not None)


def decide_filter(assessment: Assessment, nodes: Mapping[str, NodeGpus | None],
                  settings: Settings) -> FilterDecision:
    """The filter decision for a pod over the request's nodes (layouts: None in names mode)."""
    match assessment:
        case NotOurs():
            return FilterDecision(dict.fromkeys(nodes, Verdict(True)), passthrough=True)
        case Refused(reason):
            return FilterDecision(dict.fromkeys(nodes, Verdict(False, reason, unresolvable=True)))
    assert isinstance(assessment, PodJob)
    job, limits = assessment, settings.collocation
    alphas = alphas_for(job.snapshot, settings)
    held = holds.holds_in_force(job, settings, alphas)
    verdicts, passing = fit.judge(job.snapshot.nodes, job.needs, limits, held)
    better = patience.better_gpu(job, held, alphas, settings) if passing else None
    if better is not None:
        verdicts, passing = refuse_passing(verdicts, better.reason()), []
    for_bind = record.for_bind(job, nodes, verdicts, passing, held, limits)
    waits, told = waiter.waiter_and_told(job, verdicts, passing, held, better, settings)
    return FilterDecision(verdicts, for_bind, waits, told=told)
