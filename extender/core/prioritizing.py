"""Prioritize (paper Eq. 1-2): each node priced by its cheapest usable GPU, then scored. Pure.

The price comes from the configured scoring policy (`extender.policies`); the
GPU priced is the one bind will reserve: the cheapest, best fit among equals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from extender.core.job import Assessment, PodJob
from extender.core.room import NO_HOLDS, Holds, held_gpus, usable_gpus
from extender.model import ClusterSnapshot, Limits, Need, NodeGpus, NodeState, type_of
from extender.policies.base import Placement, ScoringPolicy
from extender.settings import Settings


def decide_scores(assessment: Assessment, nodes: Iterable[str],
                  settings: Settings) -> dict[str, float]:
    """Scores in [0, 1] per named node; all 0 for pods not ours or refused."""
    if not isinstance(assessment, PodJob):
        return dict.fromkeys(nodes, 0.0)
    snapshot = assessment.snapshot
    holds = held_gpus(snapshot, settings.collocation, settings.interference_alpha,
                      assessment.demand.uid, settings.hold_for, settings.hold_after_s)
    return score_nodes(snapshot, assessment.needs, settings.collocation, settings.policy, holds)


def score_nodes(snapshot: ClusterSnapshot, needs: Mapping[str, Need], limits: Limits,
                policy: ScoringPolicy, holds: Holds = NO_HOLDS) -> dict[str, float]:
    """Scores in [0, 1] for the nodes that can take the job (others score 0); idle nodes
    of one layout are priced once."""
    held_nodes = {node for node, _ in holds}
    idle: dict[NodeGpus | None, Placement | None] = {}
    placements: dict[str, Placement] = {}
    for name, node in snapshot.nodes.items():
        if node.idle and name not in held_nodes:
            if node.gpus not in idle:
                idle[node.gpus] = node_placement(node, needs, limits, snapshot.now, policy)
            placement = idle[node.gpus]
        else:
            placement = node_placement(node, needs, limits, snapshot.now, policy, holds)
        if placement is not None:
            placements[name] = placement
    scores = policy.scores(placements)
    return {name: scores.get(name, 0.0) for name in snapshot.nodes}


def node_placement(node: NodeState, needs: Mapping[str, Need], limits: Limits, now: float,
                   policy: ScoringPolicy, holds: Holds = NO_HOLDS) -> Placement | None:
    """The node's price and the memory left on the GPU bind would reserve (the cheapest,
    best fit among equals). None when no GPU can take the job now."""
    if node.gpus is None or node.gpus.count == 0 or node.gpus.problem:
        return None
    need = needs[type_of(node.gpus)]
    fitting = usable_gpus(node, need, limits.for_node(node.gpus), holds)
    if not fitting:
        return None
    cost, gpu = policy.cheapest(fitting, need.predicted_s, now)
    return Placement(cost, gpu.free_mib - need.padded_mib)
