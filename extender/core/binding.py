"""Bind: what to reserve for a pod on the node kube-scheduler chose, and where first. Pure.

The GPUs are tried in the order prioritize priced them (the cheapest, then the
best fit: the GPU it scored comes first), leaving out the GPUs filter found
held for a waiting pod with no room beside it. The store re-checks room
atomically, so a GPU filled meanwhile is skipped there.

What bind may believe: the layout it reserves against is the node watcher's
(a request's claim only capped at it, or alone for a node the watcher never
saw: `trusted_layout`); with a cluster, the pod as the API server has it
(`check_live_pod`, `check_demand`), never the request's word alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from extender.core import decisions
from extender.core.annotations import AnnotationError, parse_demand
from extender.core.room import usable_gpus
from extender.core.signing import reservation_signature
from extender.errors import Conflict
from extender.model import (
    GPU,
    GPU_MEMORY,
    MODEL,
    PREDICTED_S,
    RESERVED_MIB,
    SIGNATURE,
    SIZING,
    TIME_CORRECTION,
    JobRecord,
    Limits,
    Need,
    NodeGpus,
    NodeState,
    PodDemand,
    PodInfo,
    Reservation,
    need_on,
    type_of,
)  # fmt: skip
from extender.policies.base import ScoringPolicy
from extender.settings import Settings
from extender.wire import hami


@dataclass(frozen=True)
class ReservationPlan:
    """The reservation to make (`record.gpu_index` is decided by the store) and the GPUs to
    try, as (gpu index, capacity MiB, collocation limit) in preference order."""

    record: JobRecord
    candidates: list[tuple[int, float, int]]
    need: Need


def unknown_layout(node: str) -> Conflict:
    """Bind to a node with no GPU layout for the pod: the filter record keeps only the nodes
    that passed (the node watcher's layouts aside)."""
    return Conflict(f"node {node} has no GPU layout known for this pod: it did not pass the "
                    "pod's filter, or the node is gone; filter the pod again")


def plan_reservation(pod: PodInfo, demand: PodDemand, node: NodeState,
                     needs: Mapping[str, Need], settings: Settings, now: float,
                     avoid: frozenset[int] = frozenset(),
                     alpha: float | None = None) -> ReservationPlan:
    """Raises `Conflict` when the node's GPU layout is unknown. `alpha`: the node's GPU
    type's collocation slowdown (None: the configured one)."""
    if node.gpus is None or node.gpus.count == 0:
        raise unknown_layout(node.name)
    gpu_type = type_of(node.gpus)
    need = need_on(needs, node.gpus)
    record = JobRecord(
        uid=pod.uid, pod=pod.name, namespace=pod.namespace, model=demand.model,
        task=demand.task, node=node.name, gpu_index=-1, reserved_mib=round(need.padded_mib, 1),
        predicted_s=round(need.predicted_s, 3), state="reserved", reserved_at=now,
        gpu_type=gpu_type, batch=demand.batch, units=demand.units,
        time_factor=round(need.time_factor, 4), time_correction=need.time_correction,
        cpu_milli=demand.cpu_milli,
    )  # fmt: skip
    policy = settings.policy if alpha is None else settings.policy.with_alpha(alpha)
    candidates = reservation_candidates(node, need, settings.collocation, policy, now, avoid)
    return ReservationPlan(record, candidates, need)


def holds_live(job: JobRecord, node: str, now: float) -> bool:
    """Whether a stored reservation is on `node` and live (confirmed, or not expired)."""
    return job.node == node and (job.expires_at == 0 or job.expires_at > now)


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
    signed when a key is configured (`extender.core.signing`): its GPUs (comma-separated
    for a pod on several), the MiB reserved on each, the predicted seconds, and in words
    how the MiB were decided."""
    annotations = {GPU: ",".join(map(str, reservation.gpus)),
                   RESERVED_MIB: f"{round(need.padded_mib, 1):.0f}",  # of what was reserved
                   PREDICTED_S: f"{need.predicted_s:.1f}", SIZING: decisions.sizing(need)}
    if need.time_correction:
        annotations[TIME_CORRECTION] = decisions.timing(need)
    if signing_key:
        annotations[SIGNATURE] = reservation_signature(
            signing_key, reservation.uid, reservation.node, annotations[GPU],
            annotations[RESERVED_MIB], annotations[PREDICTED_S])
    return annotations


def hami_annotations(reservation: Reservation, gpus: NodeGpus, need: Need,
                     containers: tuple[int, ...], now: float) -> dict[str, str]:
    """HAMi's allocation annotations (`extender.wire.hami`): the reserved GPUs' UUIDs, each
    capped at the MiB reserved on it, handed to the containers that ask for GPUs (all of
    them to the first container when none asks: `containers` empty or all 0). None for a
    node HAMi never registered (its layout has no UUIDs: no node agent there)."""
    if not gpus.uuids:
        return {}
    if len(gpus.uuids) != gpus.count or any(i >= gpus.count for i in reservation.gpus):
        raise Conflict(f"node {reservation.node} has no HAMi device register for GPUs "
                       f"{list(reservation.gpus)}: its device plugin could not hand them over")
    uuids = [gpus.uuids[i] for i in reservation.gpus]
    asks = containers if sum(containers) else (len(uuids),)
    return hami.bind_annotations(reservation.node, asks, uuids, need.padded_mib, now)


@dataclass(frozen=True)
class LivePod:
    """A pod as the API server has it at bind time. `node_name`: "" while unbound."""

    uid: str
    scheduler_name: str
    node_name: str
    annotations: Mapping[str, str]
    gpus: int = 0  # nvidia.com/gpu its containers request
    owner: str = ""  # kind/name of its controller
    container_gpus: tuple[int, ...] = ()  # nvidia.com/gpu of each of spec.containers

    @property
    def annotated(self) -> bool:
        """Ours to estimate and reserve for (unannotated pods pass through)."""
        return MODEL in self.annotations or GPU_MEMORY in self.annotations


def check_live_pod(pod: PodInfo, live: LivePod, node: str, scheduler_name: str) -> bool:
    """Whether a bind request may go on for the pod the API server has; True when it is
    already bound to `node` (a retried bind: nothing left to do).

    Raises `Conflict` when the UID differs (the pod was replaced since), another
    scheduler owns it, or it is bound to another node.
    """
    where = f"{pod.namespace}/{pod.name}"
    if live.uid != pod.uid:
        raise Conflict(f"pod {where} has uid {live.uid}, not {pod.uid}: refusing to bind it")
    if live.scheduler_name != scheduler_name:
        raise Conflict(f"pod {where} is scheduled by {live.scheduler_name!r}, not "
                       f"{scheduler_name!r}: refusing to bind it")
    if live.node_name and live.node_name != node:
        raise Conflict(f"pod {where} is already bound to {live.node_name}; refusing to bind "
                       f"it to {node}")
    return live.node_name == node


def check_demand(pod: PodInfo, live: LivePod, filtered: PodDemand) -> None:
    """Raises `Conflict` unless the pod's annotations now ask for what filter estimated
    (a filter body's word for a pod is not enough; annotations may also have changed)."""
    try:
        demand = parse_demand(PodInfo(pod.uid, pod.name, pod.namespace, live.annotations,
                                      live.gpus, live.owner, cpu_milli=filtered.cpu_milli))
    except AnnotationError as exc:
        raise Conflict(f"pod {pod.namespace}/{pod.name}: {exc}") from exc
    if demand != filtered:
        raise Conflict(f"pod {pod.namespace}/{pod.name} asks for other than its filter "
                       "record says (annotations changed, or the filter request was not "
                       "this pod's): filter it again")


def trusted_layout(claimed: NodeGpus | None, watched: NodeGpus | None) -> NodeGpus | None:
    """The GPU layout bind may reserve against on a node.

    `claimed`: what a filter request carried for it (full-nodes mode); `watched`:
    the node watcher's (None: never seen). A node the watcher has seen gets its
    product and type, and a claim is capped at it: never more GPUs, MiB per GPU
    or pods per GPU than the watcher saw. Only a node it never saw takes a claim
    as it is (there is nothing to check it against).
    """
    if watched is None or claimed is None or claimed == watched:
        return watched or claimed
    count = min(claimed.count, watched.count)
    if watched.memories:  # a node agent's per-GPU memory: the claim cannot raise any of it
        memories = tuple(min(m, claimed.memory_mib) for m in watched.memories[:count])
        memory, memories = max(memories), memories if len(set(memories)) > 1 else ()
    else:
        memory, memories = min(claimed.memory_mib, watched.memory_mib), ()
    return NodeGpus(watched.product, watched.gpu_type, count, memory,
                    _fewer_slots(claimed.share_slots, watched.share_slots),
                    watched.problem or claimed.problem, watched.uuids[:count], memories)


def _fewer_slots(a: int, b: int) -> int:
    """The tighter of two `share_slots` (0: no slot limit, only memory)."""
    return max(a, b) if 0 in (a, b) else min(a, b)
