"""Gang placement: GPUs for every member of a distributed training at once. Pure.

A gang of `size` members (each on `Need.gpus` GPUs of one node) is placed whole or
not at all. Its time is data-parallel: each member trains on 1/size of every epoch at
its per-worker batch (the pods' annotations: the job's model, per-worker batch and
epochs), so a member's compute is the job's predicted seconds on that GPU type divided
by `size`, slowed as any job by the jobs sharing its GPUs (the scoring policy's
play-forward); after every step the gradient is all-reduced. Members on one node reduce
over its own links (NVLink or PCIe, counted as free here); across n nodes a ring moves
2 (n - 1) / n of the gradient's bytes over each node's network link, at the
operator-configured `EXTENDER_GANG_NETWORK_GBPS` (the slowest link of the ring; DDP's
overlap of communication with the backward pass is not credited: an upper bound). The
gang finishes with its slowest member, so it is priced at that one.

`plan_gang` places a gang on one GPU type where one fits it whole now (the type that
finishes it soonest, then on fewer nodes), else on the best mixed set; `blind` (the
baseline a gang scheduler without our model gives) packs the members onto the nodes with
the most room, whatever their GPU type.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from extender.core.room import usable_gpus
from extender.model import Limits, Need, NodeState, need_on, type_of
from extender.policies.base import ScoringPolicy

MIB = 1 << 20
SAMPLES_PER_EPOCH = 50_000  # the reference data's epoch: CIFAR-10's training images


@dataclass(frozen=True)
class Communication:
    """What each training step all-reduces across nodes, and how often."""

    grad_mib: float  # the gradient: the model's parameters (fp32 as trained here)
    steps: int  # optimizer steps each member takes over the whole job
    network_gbps: float  # each node's link, Gb/s

    def seconds(self, nodes: int) -> float:
        """All-reduce time of the whole job over `nodes` nodes (0 on one node)."""
        if nodes <= 1 or self.steps <= 0 or self.grad_mib <= 0:
            return 0.0
        per_step = 2 * (nodes - 1) / nodes * self.grad_mib * MIB * 8 / (self.network_gbps * 1e9)
        return self.steps * per_step


NO_COMMUNICATION = Communication(0.0, 0, 1.0)


def training_steps(epochs: int, batch: int, size: int) -> int:
    """Steps each of `size` data-parallel members takes over `epochs` at per-worker `batch`."""
    return math.ceil(epochs * SAMPLES_PER_EPOCH / max(1, batch * size))


@dataclass(frozen=True)
class MemberSlot:
    node: str
    gpus: tuple[int, ...]
    gpu_type: str
    mib: float  # reserved on each of its GPUs
    cost_s: float  # its compute, queued behind and sharing with its GPUs' jobs
    capacities: tuple[float, ...] = ()  # each GPU's MiB (the store re-checks room)
    limit: int = 1  # the node's collocation limit


@dataclass(frozen=True)
class GangPlan:
    """Where each member goes (slot i: the i-th member to be filtered), and what it costs.
    `gpu_type`: the one type of all slots, or "mixed"."""

    slots: tuple[MemberSlot, ...]
    gpu_type: str
    compute_s: float  # its slowest member's
    communication_s: float
    duration_s: float  # what each slot's GPUs are reserved as running (alone)

    @property
    def completion_s(self) -> float:
        return self.compute_s + self.communication_s

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(slot.node for slot in self.slots))


@dataclass(frozen=True)
class _Candidate:
    slot: MemberSlot
    node_members: int  # members its node can take now
    order: int  # the node's place in the request


def plan_gang(size: int, needs: Mapping[str, Need], nodes: Mapping[str, NodeState],
              limits: Limits, policy: ScoringPolicy, alpha_of: Callable[[NodeState], float],
              now: float, communication: Communication = NO_COMMUNICATION,
              blind: bool = False) -> GangPlan | None:
    """GPUs for all `size` members now, or None when the gang does not fit whole."""
    candidates = _candidates(size, needs, nodes, limits, policy, alpha_of, now)
    if len(candidates) < size:
        return None
    if blind:
        ranked = sorted(candidates, key=lambda c: (-c.node_members, c.order, c.slot.gpus))
        return _plan(ranked[:size], size, needs, communication)
    plans = []
    for gpu_type in dict.fromkeys(c.slot.gpu_type for c in candidates):
        of_type = [c for c in candidates if c.slot.gpu_type == gpu_type]
        if len(of_type) >= size:
            plans.append(_plan(_soonest(of_type)[:size], size, needs, communication))
    if plans:
        return min(plans, key=lambda p: (p.completion_s, len(p.nodes)))
    return _plan(_soonest(candidates)[:size], size, needs, communication)


def _soonest(candidates: list[_Candidate]) -> list[_Candidate]:
    """Cheapest first; among equals (idle GPUs all cost the same), the nodes that take the
    most members first, so the gang spans as few nodes as it can."""
    return sorted(candidates, key=lambda c: (c.slot.cost_s, -c.node_members, c.order,
                                             c.slot.gpus))


def _plan(chosen: list[_Candidate], size: int, needs: Mapping[str, Need],
          communication: Communication) -> GangPlan:
    slots = tuple(c.slot for c in chosen)
    types = {slot.gpu_type for slot in slots}
    communication_s = communication.seconds(len({slot.node for slot in slots}))
    alone = max(needs[t].predicted_s for t in types) / size
    return GangPlan(slots, types.pop() if len(types) == 1 else "mixed",
                    max(slot.cost_s for slot in slots), communication_s,
                    alone + communication_s)


def _candidates(size: int, needs: Mapping[str, Need], nodes: Mapping[str, NodeState],
                limits: Limits, policy: ScoringPolicy, alpha_of: Callable[[NodeState], float],
                now: float) -> list[_Candidate]:
    """Every member slot the nodes offer now: per node, its usable GPUs cheapest first, in
    groups of a member's GPUs."""
    out = []
    for order, (name, node) in enumerate(nodes.items()):
        if node.gpus is None or not node.gpus.count or type_of(node.gpus) not in needs:
            continue
        gpu_type = type_of(node.gpus)
        need = need_on(needs, node.gpus)
        work = need.predicted_s / size
        priced = policy.with_alpha(alpha_of(node))
        limit = limits.for_node(node.gpus)
        usable = usable_gpus(node, need, limit)
        costed = sorted((work if not g.jobs else priced.cost_s(g, work, now), g.index,
                         float(g.capacity_mib)) for g in usable)
        members = len(costed) // need.gpus
        for k in range(members):
            group = sorted(costed[k * need.gpus:(k + 1) * need.gpus], key=lambda c: c[1])
            slot = MemberSlot(name, tuple(i for _, i, _ in group), gpu_type, need.padded_mib,
                              max(cost for cost, _, _ in group),
                              tuple(capacity for _, _, capacity in group), limit)
            out.append(_Candidate(slot, members, order))
    return out
