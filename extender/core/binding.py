"""Bind: what to reserve for a pod on the node kube-scheduler chose, and where first. Pure.

The GPUs are tried in the order prioritize priced them (the cheapest, then the
best fit: the GPU it scored comes first), leaving out the GPUs filter found
held for a waiting pod with no room beside it. The store re-checks room
atomically, so a GPU filled meanwhile is skipped there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from extender.core.room import usable_gpus
from extender.core.signing import reservation_signature
from extender.errors import Conflict
from extender.model import (
    GPU,
    PREDICTED_S,
    RESERVED_MIB,
    SIGNATURE,
    JobRecord,
    Limits,
    Need,
    NodeState,
    PodDemand,
    PodInfo,
    Reservation,
    type_of,
)  # fmt: skip
from extender.policies.base import ScoringPolicy
from extender.settings import Settings


@dataclass(frozen=True)
class ReservationPlan:
    """The reservation to make (`record.gpu_index` is decided by the store) and the GPUs to
    try, as (gpu index, capacity MiB, collocation limit) in preference order."""

    record: JobRecord
    candidates: list[tuple[int, float, int]]
    need: Need


def plan_reservation(pod: PodInfo, demand: PodDemand, node: NodeState,
                     needs: Mapping[str, Need], settings: Settings, now: float,
                     avoid: frozenset[int] = frozenset()) -> ReservationPlan:
    """Raises `Conflict` when the node's GPU layout is unknown."""
    if node.gpus is None or node.gpus.count == 0:
        raise Conflict(f"node {node.name} has no known GPU layout; filter it first")
    gpu_type = type_of(node.gpus)
    need = needs[gpu_type]
    record = JobRecord(
        uid=pod.uid, pod=pod.name, namespace=pod.namespace, model=demand.model,
        task=demand.task, node=node.name, gpu_index=-1, reserved_mib=round(need.padded_mib, 1),
        predicted_s=round(need.predicted_s, 3), state="reserved", reserved_at=now,
        gpu_type=gpu_type, batch=demand.batch, units=demand.units,
    )  # fmt: skip
    candidates = reservation_candidates(node, need, settings.collocation, settings.policy, now,
                                        avoid)
    return ReservationPlan(record, candidates, need)


def reservation_candidates(node: NodeState, need: Need, limits: Limits, policy: ScoringPolicy,
                           now: float, avoid: frozenset[int] = frozenset()
                           ) -> list[tuple[int, float, int]]:
    """(gpu index, capacity MiB, limit) for the node's GPUs: the usable ones cheapest first
    (stable: best fit among equals), then the others; `avoid` left out."""
    assert node.gpus is not None
    limit = limits.for_node(node.gpus)
    order = usable_gpus(node, need, limit)
    order.sort(key=lambda g: policy.cost_s(g, need.predicted_s, now))
    rest = [g for g in node.gpu_states if g not in order]
    return [(g.index, float(g.capacity_mib), limit) for g in (*order, *rest)
            if g.index not in avoid]


def pod_annotations(reservation: Reservation, need: Need,
                    signing_key: bytes | None = None) -> dict[str, str]:
    """The reservation written on the pod at bind time (the monitor rebuilds Redis from it),
    signed when a key is configured (`extender.core.signing`)."""
    annotations = {GPU: str(reservation.gpu_index), RESERVED_MIB: f"{need.padded_mib:.0f}",
                   PREDICTED_S: f"{need.predicted_s:.1f}"}
    if signing_key:
        annotations[SIGNATURE] = reservation_signature(
            signing_key, reservation.uid, reservation.node, annotations[GPU],
            annotations[RESERVED_MIB], annotations[PREDICTED_S])
    return annotations
