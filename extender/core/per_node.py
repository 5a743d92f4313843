"""Filter's verdict and prioritize's price for one node at a time, for requests naming few
nodes (Volcano's predicate names one per call). Pure.

The same decisions as the array path over a `GpuTable` (`extender.core.fit_rows`,
the filter's fit stage, `prioritizing`), spelled node by node: below `ARRAYS_FROM` nodes a
handful of Python steps cost less than the fixed price of array operations.
Both paths are checked against one recorded decision sequence
(`tests/extender/core/test_recorded_decisions.py` runs it through each).
"""

from __future__ import annotations

from collections.abc import Mapping

from extender.core.room import NO_HOLDS, Hold, Holds, has_room, usable_gpus
from extender.model import Limits, Need, NodeGpus, NodeState, Verdict, need_on
from extender.policies.base import Placement, ScoringPolicy

UNKNOWN_NODE = Verdict(False, "node unknown to the extender: no GPU layout in the request and "
                       "none from the node watcher yet", unresolvable=True)


def layout_verdict(gpus: NodeGpus | None, need: Need | None) -> Verdict | None:
    """The verdict a layout settles alone (no layout, a problem, too small or too few GPUs
    for the job), None when the GPUs on it decide. `need`: None for a layout without one."""
    if gpus is None:
        return UNKNOWN_NODE
    if gpus.problem or gpus.count == 0:
        return Verdict(False, gpus.problem or "node has no GPUs", unresolvable=True)
    if need is None:
        return None
    label = gpus.gpu_type or gpus.product
    if need.padded_mib > gpus.memory_mib:
        return Verdict(False, f"needs {need.padded_mib:.0f} MiB padded, more than "
                       f"the {gpus.memory_mib} MiB of one {label}", unresolvable=True)
    if need.gpus > gpus.count:
        return Verdict(False, f"needs {need.gpus} GPUs with {need.padded_mib:.0f} MiB padded "
                       f"each, more than the {gpus.count} of this node ({label})",
                       unresolvable=True)
    return None


def held_reason(gpu_index: int, label: str, hold: Hold) -> str:
    whom = "a shorter" if hold.shorter else "an older"
    return (f"GPU {gpu_index} ({label}) is held for {whom} waiting pod ({hold.uid}, "
            f"{hold.padded_mib:.0f} MiB); the job does not fit beside it")


def short_reason(need: Need, gpus: NodeGpus, limit: int, with_room: int,
                 roomiest: tuple[float, int] | None) -> str:
    """Why a node with too few GPUs with room fails: the collocation limit on every GPU
    (`roomiest` None), else the memory of the roomiest GPU (free MiB, index) below it."""
    label = gpus.gpu_type or gpus.product
    if roomiest is None:
        return f"collocation limit {limit} reached on every GPU ({label})"
    if need.gpus > 1:
        return (f"needs {need.padded_mib:.0f} MiB padded on each of {need.gpus} GPUs, "
                f"{with_room} of {gpus.count} have room ({label})")
    return (f"needs {need.padded_mib:.0f} MiB padded, {roomiest[0]:.0f} MiB free on GPU "
            f"{roomiest[1]} ({label})")


def node_verdict(node: NodeState, needs: Mapping[str, Need], limits: Limits,
                 holds: Holds = NO_HOLDS) -> Verdict:
    gpus = node.gpus
    settled = layout_verdict(gpus, None if gpus is None or gpus.problem or not gpus.count
                             else need_on(needs, gpus))
    if settled is not None:
        return settled
    assert gpus is not None
    need, limit = need_on(needs, gpus), limits.for_node(gpus)
    fitting = usable_gpus(node, need, limit, holds)
    if len(fitting) >= need.gpus:
        return Verdict(True, gpu_index=fitting[0].index)
    held = [g for g in node.gpu_states if (node.name, g.index) in holds
            and has_room(g, need, limit, None)]  # fmt: skip
    if held and len(fitting) + len(held) >= need.gpus:
        return Verdict(False, held_reason(held[0].index, gpus.gpu_type or gpus.product,
                                          holds[node.name, held[0].index]))
    below = [g for g in node.gpu_states if len(g.jobs) < limit]
    roomiest = max(below, key=lambda g: g.free_mib) if below else None
    return Verdict(False, short_reason(need, gpus, limit, len(fitting), None if roomiest is None
                                       else (roomiest.free_mib, roomiest.index)))


def idle_gpu_fits(node: NodeState, needs: Mapping[str, Need], limits: Limits,
                  holds: Holds = NO_HOLDS) -> bool:
    """Whether a GPU of `node` with no job could take the job now."""
    if node.gpus is None or node.gpus.count == 0 or node.gpus.problem:
        return False
    need = need_on(needs, node.gpus)
    return any(not g.jobs for g in usable_gpus(node, need, limits.for_node(node.gpus), holds))


def node_placement(node: NodeState, needs: Mapping[str, Need], limits: Limits, now: float,
                   policy: ScoringPolicy, holds: Holds = NO_HOLDS) -> Placement | None:
    """The node's price and the memory left on the GPUs bind would reserve (the cheapest,
    best fit among equals; for k GPUs the slowest of the k cheapest). None when the node
    cannot take the job now."""
    if node.gpus is None or node.gpus.count == 0 or node.gpus.problem:
        return None
    need = need_on(needs, node.gpus)
    fitting = usable_gpus(node, need, limits.for_node(node.gpus), holds)
    if len(fitting) < need.gpus or not fitting:
        return None
    if need.gpus == 1:
        cost, gpu = policy.cheapest(fitting, need.predicted_s, now)
        return Placement(cost, gpu.free_mib - need.padded_mib)
    priced = sorted(((need.predicted_s if not g.jobs else policy.cost_s(g, need.predicted_s, now),
                      g.free_mib, g.index, g) for g in fitting), key=lambda p: p[:3])
    taken = priced[:need.gpus]
    return Placement(max(p[0] for p in taken), sum(p[3].free_mib - need.padded_mib
                                                    for p in taken))
