"""The filter's fourth stage, record: what bind will need of this decision. Pure.

kube-scheduler binds in a later request, on one of the nodes filter passed; the record
(written to Redis with filter's answer) keeps the layouts of those nodes and, on each,
the GPUs a hold keeps from this pod, so that bind plans on what filter saw.
"""

from __future__ import annotations

from collections.abc import Mapping

from extender.core.job import PodJob
from extender.core.room import Holds, held_from
from extender.model import FilterRecord, Limits, NodeGpus, Verdict, need_on


def for_bind(job: PodJob, nodes: Mapping[str, NodeGpus | None],
             verdicts: Mapping[str, Verdict], passing: list[str], holds: Holds,
             limits: Limits) -> FilterRecord:
    """The stage: the record of `job`'s filter over the request's `nodes` (layouts: None in
    names mode), given the fit stage's `verdicts` and `passing` nodes."""
    snapshot = job.snapshot
    held_nodes = sorted({node for node, _ in holds}, key=list(snapshot.nodes).index) \
        if holds else []
    held = {}
    for name in held_nodes:
        node = snapshot.nodes[name]
        if verdicts[name].fits and node.gpus is not None:  # a passing node has a layout
            blocked = held_from(node, need_on(job.needs, node.gpus), limits, holds)
            if blocked:
                held[name] = tuple(blocked)
    # Bind comes only to a node that passed: keep no other layout (a large request's record).
    layouts = ({name: gpus for name in passing if (gpus := nodes[name]) is not None}
               if any(nodes.values()) else {})
    return FilterRecord(job.demand, layouts, held)
