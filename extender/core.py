"""Scheduling decisions: pure functions of (needs, snapshot, limits, now). No I/O, no Flask.

* `filter_nodes` (Algorithm 2): a node passes when one of its GPUs has room
  for the padded estimate of the job on that GPU type and is below its
  collocation limit; the verdict names the best-fit GPU, or says why not.
* `score_nodes` (Eq. 1-2): expected completion on the node's best GPU,
  normalised so the soonest scores 1.
* `reservation_candidates`: the GPUs bind should try, best fit first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from extender import scoring
from extender.model import ClusterSnapshot, GpuState, NodeGpus, NodeState, Verdict

UNKNOWN_TYPE = "unknown"


@dataclass(frozen=True)
class Need:
    """The job on one GPU type: padded memory to reserve and predicted seconds alone."""

    padded_mib: float
    predicted_s: float


@dataclass(frozen=True)
class Limits:
    """Collocation limits per GPU type (paper IV-G); `default` for types not listed."""

    default: int
    per_type: Mapping[str, int]

    def for_node(self, gpus: NodeGpus) -> int:
        limit = self.per_type.get(gpus.gpu_type or UNKNOWN_TYPE, self.default)
        return min(limit, gpus.share_slots) if gpus.share_slots > 0 else limit


def type_of(gpus: NodeGpus) -> str:
    return gpus.gpu_type or UNKNOWN_TYPE


def _label(gpus: NodeGpus) -> str:
    return gpus.gpu_type or gpus.product


def usable_gpus(node: NodeState, need: Need, limit: int) -> list[GpuState]:
    """GPUs that can take the job now, best fit (least free memory left) first."""
    fitting = [g for g in node.gpu_states
               if len(g.jobs) < limit and need.padded_mib <= g.free_mib]  # fmt: skip
    return sorted(fitting, key=lambda g: (g.free_mib - need.padded_mib, g.index))


def node_verdict(node: NodeState, needs: Mapping[str, Need], limits: Limits) -> Verdict:
    gpus = node.gpus
    if gpus is None:
        return Verdict(False, "node unknown to the extender: no GPU layout in the "
                       "request and none from the node watcher yet", unresolvable=True)
    if gpus.problem or gpus.count == 0:
        return Verdict(False, gpus.problem or "node has no GPUs", unresolvable=True)
    need = needs[type_of(gpus)]
    label = _label(gpus)
    if need.padded_mib > gpus.memory_mib:
        return Verdict(False, f"needs {need.padded_mib:.0f} MiB padded, more than "
                       f"the {gpus.memory_mib} MiB of one {label}", unresolvable=True)
    limit = limits.for_node(gpus)
    fitting = usable_gpus(node, need, limit)
    if fitting:
        return Verdict(True, gpu_index=fitting[0].index)
    roomiest = max(node.gpu_states, key=lambda g: (len(g.jobs) < limit, g.free_mib))
    if len(roomiest.jobs) >= limit:
        return Verdict(False, f"collocation limit {limit} reached on every GPU "
                       f"({label})")
    return Verdict(False, f"needs {need.padded_mib:.0f} MiB padded, "
                   f"{roomiest.free_mib:.0f} MiB free on GPU {roomiest.index} ({label})")


def filter_nodes(snapshot: ClusterSnapshot, needs: Mapping[str, Need],
                 limits: Limits) -> dict[str, Verdict]:
    """Verdict per node; idle nodes of one layout are judged once (most of a large cluster)."""
    by_layout: dict[NodeGpus | None, Verdict] = {}
    verdicts = {}
    for name, node in snapshot.nodes.items():
        if node.idle:
            verdict = by_layout.get(node.gpus)
            if verdict is None:
                verdict = by_layout[node.gpus] = node_verdict(node, needs, limits)
        else:
            verdict = node_verdict(node, needs, limits)
        verdicts[name] = verdict
    return verdicts


def node_jct_s(node: NodeState, needs: Mapping[str, Need], limits: Limits, now: float,
               cost: scoring.CostModel) -> float | None:
    """Expected completion on the node's best GPU; None when no GPU can take the job now."""
    if node.gpus is None or node.gpus.count == 0 or node.gpus.problem:
        return None
    need = needs[type_of(node.gpus)]
    fitting = usable_gpus(node, need, limits.for_node(node.gpus))
    if not fitting:
        return None
    return min(cost.cost_s(g, need.predicted_s, now) for g in fitting)


def score_nodes(snapshot: ClusterSnapshot, needs: Mapping[str, Need], limits: Limits,
                cost: scoring.CostModel) -> dict[str, float]:
    """Scores in [0, 1] for the nodes that can take the job (others score 0)."""
    idle_jct: dict[NodeGpus | None, float | None] = {}
    jct: dict[str, float] = {}
    for name, node in snapshot.nodes.items():
        if node.idle:
            if node.gpus not in idle_jct:
                idle_jct[node.gpus] = node_jct_s(node, needs, limits, snapshot.now, cost)
            value = idle_jct[node.gpus]
        else:
            value = node_jct_s(node, needs, limits, snapshot.now, cost)
        if value is not None:
            jct[name] = value
    scores = scoring.normalise(jct)
    return {name: scores.get(name, 0.0) for name in snapshot.nodes}


def reservation_candidates(node: NodeState, need: Need,
                           limits: Limits) -> list[tuple[int, float, int]]:
    """(gpu index, capacity MiB, limit) for every GPU of the node, best fit first.

    The store re-checks room atomically, so a GPU filled meanwhile is skipped there.
    """
    assert node.gpus is not None
    limit = limits.for_node(node.gpus)
    order = usable_gpus(node, need, limit)
    rest = [g for g in node.gpu_states if g not in order]
    return [(g.index, float(g.capacity_mib), limit) for g in (*order, *rest)]
