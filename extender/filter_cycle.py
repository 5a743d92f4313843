"""The pod a worker filtered last (kube-scheduler's scheduling cycle as one worker sees it):
prioritize of the same job over the nodes filter passed reuses filter's assessment, and
the scores priced ahead once filter has answered (`Scheduler.price_ahead`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from estimator.errors import EstimatorError
from extender.core.annotations import AnnotationError, parse_demand
from extender.core.job import Assessment, PodJob
from extender.model import NodeGpus, PodInfo, Verdict

NodeLayoutsByName = Mapping[str, NodeGpus | None]  # None: the node watcher's layout


@dataclass(frozen=True)
class FilterCycle:
    """The pod this worker filtered last: when (monotonic), its nodes and its assessment;
    `priced`: prioritize's scores of `priced_nodes` (the nodes that passed), when computed
    ahead (`Scheduler.price_ahead`)."""

    uid: str
    at: float
    nodes: NodeLayoutsByName
    assessment: Assessment
    verdicts: Mapping[str, Verdict] | None = None  # filter's
    priced_nodes: NodeLayoutsByName | None = None
    priced: Mapping[str, float] | None = None

    def same_job(self, pod: PodInfo) -> bool:
        """Whether `pod` parses to the job this filter estimated."""
        job = self.assessment
        try:
            return isinstance(job, PodJob) and parse_demand(pod) == job.demand
        except (AnnotationError, EstimatorError):
            return False

    def covers(self, nodes: NodeLayoutsByName) -> bool:
        """Whether the same job's prioritize over `nodes` can be priced on this filter's
        work: every node among filter's with the same layout."""
        if not nodes.keys() <= self.nodes.keys():
            return False
        if not any(nodes.values()) and not any(self.nodes.values()):  # names mode: no layouts
            return True
        return all(layout == self.nodes[name] for name, layout in nodes.items())

    def priced_for(self, nodes: NodeLayoutsByName) -> Mapping[str, float] | None:
        """The same job's scores priced ahead when they are of these very nodes (names and
        layouts; in names mode, usually the very mapping the passing list was kept as),
        else None."""
        if self.priced is None or not (nodes is self.priced_nodes or nodes == self.priced_nodes):
            return None
        return self.priced
