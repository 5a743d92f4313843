"""Filter (paper Algorithm 2): which nodes can take the pod now, and why not. Pure.

A node passes when one of its GPUs has room for the padded estimate of the job
on that GPU type, below its collocation limit and beside the room held for
older waiting pods (`extender.core.room`). The verdict names the best-fit GPU,
or says why not in words `kubectl describe` users read. A pod that fits
nowhere (and could fit somewhere once jobs end) becomes a waiter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from extender.core import decisions
from extender.core.job import Assessment, NotOurs, PodJob, Refused
from extender.core.room import NO_HOLDS, Holds, has_room, held_from, held_gpus, usable_gpus
from extender.model import (
    Decision, FilterRecord, Limits, Need, NodeGpus, NodeState, Verdict, Waiter, type_of,
)  # fmt: skip
from extender.settings import Settings


@dataclass(frozen=True)
class FilterDecision:
    """Filter's whole answer: a verdict per node, and what to write. `record`: what bind
    will need (annotated pods only); `waiter`: the pod fits nowhere now, record it as
    waiting (or refresh it); `told`: decisions for the pods' owners (this pod waits, a
    GPU is held for an older waiting pod)."""

    verdicts: dict[str, Verdict]
    record: FilterRecord | None = None
    waiter: Waiter | None = None
    passthrough: bool = False
    told: tuple[Decision, ...] = ()


def decide_filter(assessment: Assessment, nodes: Mapping[str, NodeGpus | None],
                  settings: Settings) -> FilterDecision:
    """The filter decision for a pod over the request's nodes (layouts: None in names mode)."""
    match assessment:
        case NotOurs():
            return FilterDecision(dict.fromkeys(nodes, Verdict(True)), passthrough=True)
        case Refused(reason):
            return FilterDecision(dict.fromkeys(nodes, Verdict(False, reason, unresolvable=True)))
    assert isinstance(assessment, PodJob)
    snapshot, needs, pod = assessment.snapshot, assessment.needs, assessment.demand
    limits = settings.collocation
    holds = held_gpus(snapshot, limits, settings.interference_alpha, pod.uid, settings.hold_for,
                      settings.hold_after_s)
    verdicts = filter_nodes(snapshot.nodes, needs, limits, holds)
    passing = [name for name, verdict in verdicts.items() if verdict.fits]
    held = {name: tuple(blocked) for name in passing if holds
            and (blocked := held_from(snapshot.nodes[name], _need(snapshot.nodes[name], needs),
                                      limits, holds))}  # fmt: skip
    # Bind comes only to a node that passed: keep no other layout (a large request's record).
    layouts = {name: gpus for name in passing if (gpus := nodes[name]) is not None}
    waits = settings.hold_for and not passing and not all(v.unresolvable for v in verdicts.values())
    waiter = None
    if waits:
        since = next((w.since for w in snapshot.waiting if w.uid == pod.uid), snapshot.now)
        per_type = {t: (n.padded_mib, n.predicted_s) for t, n in needs.items()}
        waiter = Waiter(pod.uid, since, per_type, f"{pod.namespace}/{pod.name}")
    told = decisions.holds_told(holds, snapshot.waiting,
                                {name: node.gpus for name, node in snapshot.nodes.items()})
    if waiter is not None:
        told += (decisions.waiting(waiter),)
    return FilterDecision(verdicts, FilterRecord(pod, layouts, held), waiter, told=told)


def filter_nodes(nodes: Mapping[str, NodeState], needs: Mapping[str, Need], limits: Limits,
                 holds: Holds = NO_HOLDS) -> dict[str, Verdict]:
    """Verdict per node; idle nodes of one layout are judged once (most of a large cluster)."""
    held_nodes = {node for node, _ in holds}
    by_layout: dict[NodeGpus | None, Verdict] = {}
    verdicts = {}
    for name, node in nodes.items():
        if node.idle and name not in held_nodes:
            verdict = by_layout.get(node.gpus)
            if verdict is None:
                verdict = by_layout[node.gpus] = node_verdict(node, needs, limits)
        else:
            verdict = node_verdict(node, needs, limits, holds)
        verdicts[name] = verdict
    return verdicts


def node_verdict(node: NodeState, needs: Mapping[str, Need], limits: Limits,
                 holds: Holds = NO_HOLDS) -> Verdict:
    gpus = node.gpus
    if gpus is None:
        return Verdict(False, "node unknown to the extender: no GPU layout in the "
                       "request and none from the node watcher yet", unresolvable=True)
    if gpus.problem or gpus.count == 0:
        return Verdict(False, gpus.problem or "node has no GPUs", unresolvable=True)
    need = needs[type_of(gpus)]
    label = gpus.gpu_type or gpus.product
    if need.padded_mib > gpus.memory_mib:
        return Verdict(False, f"needs {need.padded_mib:.0f} MiB padded, more than "
                       f"the {gpus.memory_mib} MiB of one {label}", unresolvable=True)
    limit = limits.for_node(gpus)
    fitting = usable_gpus(node, need, limit, holds)
    if fitting:
        return Verdict(True, gpu_index=fitting[0].index)
    held = [g for g in node.gpu_states if (node.name, g.index) in holds
            and has_room(g, need, limit, None)]  # fmt: skip
    if held:
        hold = holds[node.name, held[0].index]
        return Verdict(False, f"GPU {held[0].index} ({label}) is held for an older waiting pod "
                       f"({hold.uid}, {hold.padded_mib:.0f} MiB); the job does not fit beside it")
    roomiest = max(node.gpu_states, key=lambda g: (len(g.jobs) < limit, g.free_mib))
    if len(roomiest.jobs) >= limit:
        return Verdict(False, f"collocation limit {limit} reached on every GPU ({label})")
    return Verdict(False, f"needs {need.padded_mib:.0f} MiB padded, "
                   f"{roomiest.free_mib:.0f} MiB free on GPU {roomiest.index} ({label})")


def _need(node: NodeState, needs: Mapping[str, Need]) -> Need:
    assert node.gpus is not None  # a passing node has a layout
    return needs[type_of(node.gpus)]
