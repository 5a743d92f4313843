"""The verbs, shared by the kube-scheduler and Volcano routes: orchestration only.

Each verb reads once, asks the estimator once, lets a decision function of
`extender.core` decide, and writes once:

    filter      assess (annotations, one snapshot read, needs per GPU type)
                -> core.filtering.decide_filter -> store.record_filter (one write)
    prioritize  assess -> core.prioritizing.decide_scores (no write)
    bind        store.filter_record -> snapshot of the node -> needs
                -> core.binding.plan_reservation -> store.reserve -> binder -> confirm

Pods without ``schedtune.io/model`` never reach Redis or the estimator. No HTTP
and no wire shapes here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping

from estimator.errors import EstimatorError
from estimator.predict import Estimator, Job
from extender.cluster.binders import RECORD_ONLY, BindTarget
from extender.core import binding, filtering, prioritizing
from extender.core.annotations import AnnotationError, parse_demand
from extender.core.job import Assessment, NotOurs, PodJob, Refused
from extender.model import (
    UNKNOWN_TYPE, Need, NodeGpus, NodeState, PodDemand, PodInfo, type_of,
)  # fmt: skip
from extender.settings import Settings
from extender.state.store import RedisStore

log = logging.getLogger(__name__)
NodeLayoutsByName = Mapping[str, NodeGpus | None]  # None: the node watcher's layout


class Scheduler:
    def __init__(self, settings: Settings, store: RedisStore, estimator: Estimator,
                 binder: BindTarget = RECORD_ONLY,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.store = store
        self.estimator = estimator
        self.binder = binder
        self.clock = clock

    def filter(self, pod: PodInfo, nodes: NodeLayoutsByName) -> filtering.FilterDecision:
        decision = filtering.decide_filter(self._assess(pod, nodes), nodes, self.settings)
        if decision.record is not None:
            self.store.record_filter(decision.record, self.settings.demand_ttl_s,
                                     decision.waiter, self.clock(), self.settings.wait_ttl_s)
        return decision

    def prioritize(self, pod: PodInfo, nodes: NodeLayoutsByName) -> dict[str, float]:
        """Scores in [0, 1]; every node 0 for pass-through or unestimable pods."""
        return prioritizing.decide_scores(self._assess(pod, nodes), nodes, self.settings)

    def bind(self, pod: PodInfo, node: str) -> dict[str, str]:
        """Reserve on the GPU prioritize costed, create the Binding, confirm. Idempotent per UID.

        Returns the annotations recorded on the pod (empty for pass-through pods).
        Raises `Conflict` (no room any more), `BindFailed`, `StoreUnavailable`.
        """
        return self._place(pod, node, self.binder)

    def record_placement(self, pod: PodInfo, node: str) -> dict[str, str]:
        """Reserve for a placement another component binds (Volcano's allocate event)."""
        return self._place(pod, node, RECORD_ONLY)

    def release(self, pod: PodInfo) -> None:
        """Drop the pod's reservation (Volcano's deallocate event)."""
        self.store.release(pod.uid)

    def _place(self, pod: PodInfo, node: str, binder: BindTarget) -> dict[str, str]:
        filtered = self.store.filter_record(pod.uid)
        if filtered is None:  # never filtered as ours: bind it as it is
            binder.bind(pod.namespace, pod.name, pod.uid, node, {})
            return {}
        now = self.clock()
        state = self.store.snapshot({node: filtered.layouts.get(node)}, now).nodes[node]
        plan = binding.plan_reservation(pod, filtered.demand, state,
                                        self._needs(filtered.demand, [state]), self.settings,
                                        now, frozenset(filtered.held.get(node, ())))
        reservation = self.store.reserve(plan.record, plan.candidates, now,
                                         self.settings.reservation_ttl_s)
        annotations = binding.pod_annotations(reservation, plan.need, self.settings.signing_key)
        try:
            binder.bind(pod.namespace, pod.name, pod.uid, node, annotations)
        except Exception:
            if reservation.new:
                self.store.release(pod.uid)
            raise
        if not self.store.confirm_bind(reservation, self.clock()):
            log.warning("reservation of %s expired before bind confirmed; monitor reconciles",
                        pod.uid)
        return annotations

    def _assess(self, pod: PodInfo, nodes: NodeLayoutsByName) -> Assessment:
        """Annotations parsed, one snapshot read, the estimator asked once."""
        try:
            demand = parse_demand(pod)
            if demand is None:
                return NotOurs()
            snapshot = self.store.snapshot(nodes, self.clock())
            return PodJob(demand, snapshot, self._needs(demand, snapshot.nodes.values()))
        except (AnnotationError, EstimatorError) as exc:
            return Refused(str(exc))

    def _needs(self, demand: PodDemand, nodes: Iterable[NodeState]) -> dict[str, Need]:
        """Padded memory and predicted time of the job on each GPU type of `nodes`."""
        types = {type_of(n.gpus) for n in nodes if n.gpus is not None and n.gpus.count}
        job = Job(demand.model, demand.task, demand.batch, demand.units)
        known = sorted(t for t in types - {UNKNOWN_TYPE})
        estimates = self.estimator.estimate(job, gpus=known)
        if UNKNOWN_TYPE in types:
            estimates = {**estimates, UNKNOWN_TYPE: self.estimator.estimate_unknown(job)}
        return {t: Need(e.padded_mib, e.predicted_s) for t, e in estimates.items()}
