"""Adopting a bound pod that has no reservation (Redis lost, or the reservation expired
before bind confirmed it): the reservation the extender signed on the pod when it fits
the node (`extender.core.adoption`), else one estimated for the node's GPU type."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from estimator.errors import EstimatorError
from extender.cluster.pods import PodFacts
from extender.core.adoption import likeliest_gpus, trusted_reservation
from extender.core.annotations import AnnotationError, parse_demand
from extender.metrics import ADOPTION_OVERCOMMITS, ADOPTIONS, ADOPTIONS_UNVERIFIED
from extender.model import (
    GPU, PREDICTED_S, RESERVED_MIB, SIGNATURE, JobRecord, NodeState, PodDemand, PodInfo,
    type_of,
)  # fmt: skip
from extender.registry import ModelRegistry
from extender.settings import Settings
from extender.sizing import Sizer
from extender.state.store import NO_WAITERS, RedisStore

log = logging.getLogger("extender.cluster.monitor")


class Adopter:
    """`warn(facts, reason, message)`: the monitor's Warning event (best effort)."""

    def __init__(self, store: RedisStore, sizer: Sizer | None, registry: ModelRegistry | None,
                 settings: Settings, clock: Callable[[], float],
                 warn: Callable[[PodFacts, str, str], None]) -> None:
        self.store, self.sizer, self.registry = store, sizer, registry
        self.settings, self.clock, self.warn = settings, clock, warn

    def adopt(self, facts: PodFacts) -> None:
        """Record a bound pod that has no reservation: the one signed on it, else one
        estimated on the node's likeliest GPUs; counted, and warned of when it
        over-commits its GPU."""
        demand = self._demand(facts)
        base = None if demand is None else self._base(facts, demand)
        now = self.clock()
        snapshot = self.store.snapshot({facts.node: None}, now, waiters=NO_WAITERS,
                                       floors_of=demand)
        node = snapshot.nodes[facts.node]
        if base is None or node.gpus is None or not node.gpu_states:
            if base is not None:
                log.warning("cannot account a bound pod: node layout unknown",
                            extra={"pod_uid": facts.uid, "node": facts.node})
            ADOPTIONS.labels("failed").inc()
            return
        limit = self.settings.collocation.for_node(node.gpus)
        record, source = self._signed(facts, base, node), "signed"
        if record is None:
            record, source = self._estimated(demand, base, node, limit, snapshot.floors), \
                "estimated"
        if record is None:
            ADOPTIONS.labels("failed").inc()
            return
        status, detail = self.store.adopt(record, float(node.gpus.memory_of(record.gpu_index)),
                                          limit, now)
        ADOPTIONS.labels(status).inc()
        log.info("adopted bound pod", extra={"pod_uid": facts.uid, "pod": facts.name,
                                             "node": facts.node, "status": status,
                                             "source": source})
        if status == "overcommit":  # honest (signed or estimated), so counted in full
            ADOPTION_OVERCOMMITS.inc()
            used, _, jobs = detail.partition(":")
            log.warning("adopted pod over-commits its GPU", extra={
                "pod_uid": facts.uid, "node": facts.node, "gpu": record.gpu_index})
            self.warn(facts, "SchedTuneOvercommit", f"bound to {facts.node} GPU "
                       f"{record.gpu_index}, which already held {used} of "
                       f"{node.gpus.memory_mib} MiB in {jobs} job(s) (limit {limit}); its "
                       f"{record.reserved_mib:.0f} MiB are counted anyway, so nothing more "
                       "goes there until jobs leave")

    def _demand(self, facts: PodFacts) -> PodDemand | None:
        """The bound pod's demand (None: annotations a user must fix)."""
        try:
            demand = parse_demand(PodInfo(facts.uid, facts.name, facts.namespace,
                                          facts.annotations, facts.gpus, facts.owner,
                                          cpu_milli=facts.cpu_milli))
        except AnnotationError as exc:
            log.warning("bound pod with bad annotations", extra={"pod_uid": facts.uid,
                                                                 "detail": str(exc)})
            return None
        assert demand is not None
        return demand

    def _base(self, facts: PodFacts, demand: PodDemand) -> dict[str, Any]:
        """The record's fields every adoption shares."""
        running = facts.running_since > 0
        return {"uid": facts.uid, "pod": facts.name, "namespace": facts.namespace,
                "model": demand.model, "task": demand.task, "node": facts.node,
                "state": "running" if running else "bound",
                "reserved_at": facts.created_at or self.clock(),
                "started_at": facts.running_since, "batch": demand.batch, "units": demand.units,
                "cpu_milli": demand.cpu_milli}

    def _signed(self, facts: PodFacts, base: dict[str, Any], node: NodeState) -> JobRecord | None:
        """The reservation written on the pod at bind time, only if the extender signed it
        for this pod on this node and it fits the node's layout (None: estimate it)."""
        key = self.settings.signing_key
        values = [facts.annotations.get(k) for k in (GPU, RESERVED_MIB, PREDICTED_S, SIGNATURE)]
        if not key or all(v is None for v in values[:3]):
            return None
        reservation = trusted_reservation(key, facts.uid, facts.node, values, node)
        if reservation is None:
            ADOPTIONS_UNVERIFIED.inc()
            log.warning("reservation on the pod is not one the extender signed for this node: "
                        "estimated again", extra={"pod_uid": facts.uid, "node": facts.node})
            return None
        gpus, mib, seconds = reservation
        assert node.gpus is not None
        return JobRecord(**base, gpu_index=gpus[0], reserved_mib=mib, predicted_s=seconds,
                         gpu_type=type_of(node.gpus), gpu_indices=gpus if len(gpus) > 1 else ())

    def _estimated(self, demand: PodDemand | None, base: dict[str, Any], node: NodeState,
                   limit: int, floors: Mapping[str, float]) -> JobRecord | None:
        """The reservation estimated for the node's GPU type, on `likeliest_gpus`."""
        assert node.gpus is not None and demand is not None
        if self.sizer is None:
            log.warning("cannot account a bound pod: no estimator", extra={"pod_uid": demand.uid})
            return None
        try:
            if self.registry is not None and demand.model:
                self.registry.covers(demand.model)  # follow models registered meanwhile
            need = self.sizer.needs(demand, [node.gpus], floors)[type_of(node.gpus)]
        except EstimatorError as exc:
            log.warning("cannot estimate a bound pod", extra={"pod_uid": demand.uid,
                                                              "detail": str(exc)})
            return None
        mib, seconds = need.padded_mib, need.predicted_s
        if not (math.isfinite(mib) and mib > 0 and math.isfinite(seconds) and seconds >= 0):
            return None
        mib = min(round(mib, 1), float(node.gpus.memory_mib))  # it cannot hold more than all
        gpus = tuple(g.index for g in likeliest_gpus(node, mib, limit, demand.gpus))
        return JobRecord(**base, gpu_index=gpus[0], reserved_mib=mib,
                         predicted_s=round(seconds, 3), gpu_type=type_of(node.gpus),
                         gpu_indices=gpus if len(gpus) > 1 else ())
