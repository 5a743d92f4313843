"""The verbs, shared by the kube-scheduler and Volcano routes: read the snapshot, ask the
estimator, call the pure core, write through the store. No HTTP and no wire shapes here.

Pods without ``schedtune.io/model`` never reach Redis or the estimator. A pod
whose annotations or model cannot be estimated gets every node refused as
unresolvable, with a reason naming what to fix.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from estimator.errors import EstimatorError
from estimator.predict import Estimator, Job
from extender.core import decisions as core
from extender.policies import timeline as scoring
from extender.core.annotations import AnnotationError, parse_demand
from extender.errors import Conflict
from extender.model import (
    GPU, PREDICTED_S, RESERVED_MIB, ClusterSnapshot, JobRecord, NodeGpus, PodDemand, PodInfo,
    Verdict, Waiter,
)  # fmt: skip
from extender.settings import Settings
from extender.state.store import RedisStore

log = logging.getLogger(__name__)


class BindTarget(Protocol):
    def bind(self, namespace: str, name: str, uid: str, node: str,
             annotations: Mapping[str, str]) -> None: ...


@dataclass(frozen=True)
class FilterOutcome:
    verdicts: dict[str, Verdict]
    passthrough: bool = False


class Scheduler:
    def __init__(self, settings: Settings, store: RedisStore, estimator: Estimator,
                 binder: BindTarget | None, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.store = store
        self.estimator = estimator
        self.binder = binder
        self.clock = clock
        self.cost = scoring.CostModel(settings.scoring, settings.interference_alpha)

    def filter(self, pod: PodInfo, nodes: Mapping[str, NodeGpus | None]) -> FilterOutcome:
        try:
            demand = parse_demand(pod.uid, pod.name, pod.namespace, pod.annotations)
        except AnnotationError as exc:
            return FilterOutcome(_refuse_all(nodes, str(exc)))
        if demand is None:
            return FilterOutcome(dict.fromkeys(nodes, Verdict(True)), passthrough=True)
        try:
            self.estimator.estimate(_job(demand), gpus=())  # an unknown model stops here
        except EstimatorError as exc:
            return FilterOutcome(_refuse_all(nodes, str(exc)))
        # Bind gets no node objects: keep the layouts that came in the request (full mode);
        # in names mode they are in the store already. Written with the snapshot's read.
        record = {"demand": asdict(demand),
                  "layouts": {n: gpus.as_row() for n, gpus in nodes.items() if gpus is not None}}
        ttl_s = self.settings.demand_ttl_s
        snapshot = self.store.snapshot(nodes, self.clock(), (pod.uid, record, ttl_s))
        needs = self._needs(demand, snapshot.nodes.values())
        limits = self.settings.collocation
        holds = self._holds(snapshot, pod.uid)
        verdicts = core.filter_nodes(snapshot, needs, limits, holds)
        passing = [n for n, v in verdicts.items() if v.fits]
        if not passing and not all(v.unresolvable for v in verdicts.values()):
            self._wait(pod, snapshot, needs)
        if holds:  # `held`: GPUs of passing nodes that bind must leave alone
            held = {}
            for name in passing:
                node = snapshot.nodes[name]
                if blocked := core.held_from(node, needs[core.type_of(node.gpus)], limits, holds):
                    held[name] = blocked
            if held:
                self.store.put_demand(pod.uid, {**record, "held": held}, ttl_s)
        return FilterOutcome(verdicts)

    def _holds(self, snapshot: ClusterSnapshot,
               uid: str) -> dict[tuple[str, int], core.Hold]:
        if not snapshot.waiting or not self.settings.hold_for:
            return {}
        return core.held_gpus(snapshot, self.settings.collocation,
                              self.settings.interference_alpha, uid, self.settings.hold_for,
                              self.settings.hold_after_s)

    def _wait(self, pod: PodInfo, snapshot: ClusterSnapshot,
              needs: Mapping[str, core.Need]) -> None:
        """Record a pod that fits nowhere now, keeping when it was first refused."""
        if not self.settings.hold_for:
            return
        since = next((w.since for w in snapshot.waiting if w.uid == pod.uid), snapshot.now)
        waiter = Waiter(pod.uid, since, {t: (n.padded_mib, n.predicted_s) for t, n in needs.items()},
                        f"{pod.namespace}/{pod.name}")
        self.store.put_waiter(waiter, snapshot.now, snapshot.now + self.settings.wait_ttl_s)

    def prioritize(self, pod: PodInfo, nodes: Mapping[str, NodeGpus | None]) -> dict[str, float]:
        """Scores in [0, 1]; every node 0 for pass-through or unestimable pods."""
        try:
            demand = parse_demand(pod.uid, pod.name, pod.namespace, pod.annotations)
        except AnnotationError:
            return dict.fromkeys(nodes, 0.0)
        if demand is None:
            return dict.fromkeys(nodes, 0.0)
        snapshot = self.store.snapshot(nodes, self.clock())
        try:
            needs = self._needs(demand, snapshot.nodes.values())
        except EstimatorError:
            return dict.fromkeys(nodes, 0.0)
        return core.score_nodes(snapshot, needs, self.settings.collocation, self.cost,
                                self._holds(snapshot, pod.uid))

    def bind(self, uid: str, name: str, namespace: str, node: str) -> dict[str, str]:
        """Reserve on the GPU prioritize costed, create the Binding, confirm. Idempotent per UID.

        Returns the annotations recorded on the pod (empty for pass-through pods).
        Raises `Conflict` (no room any more), `BindFailed`, `StoreUnavailable`.
        """
        return self._place(uid, name, namespace, node, create_binding=True)

    def record_placement(self, uid: str, name: str, namespace: str, node: str) -> dict[str, str]:
        """Reserve for a placement another component binds (Volcano's allocate event)."""
        return self._place(uid, name, namespace, node, create_binding=False)

    def _place(self, uid: str, name: str, namespace: str, node: str,
               create_binding: bool) -> dict[str, str]:
        binder = self.binder if create_binding else None
        stored = self.store.demand(uid)
        if stored is None:
            if binder is not None:
                binder.bind(namespace, name, uid, node, {})
            return {}
        demand = PodDemand(**stored["demand"])
        layout = NodeGpus(*stored["layouts"][node]) if node in stored.get("layouts", {}) else None
        now = self.clock()
        snapshot = self.store.snapshot({node: layout}, now)
        state = snapshot.nodes[node]
        if state.gpus is None or state.gpus.count == 0:
            raise Conflict(f"node {node} has no known GPU layout; filter it first")
        need = self._needs(demand, [state])[core.type_of(state.gpus)]
        record = JobRecord(
            uid=uid, pod=name, namespace=namespace, model=demand.model, task=demand.task,
            node=node, gpu_index=-1, reserved_mib=round(need.padded_mib, 1),
            predicted_s=round(need.predicted_s, 3), state="reserved", reserved_at=now,
            gpu_type=core.type_of(state.gpus), batch=demand.batch, units=demand.units,
        )  # fmt: skip
        candidates = core.reservation_candidates(
            state, need, self.settings.collocation, self.cost, now,
            frozenset(stored.get("held", {}).get(node, ())))
        status, detail = self.store.reserve(record, candidates, now,
                                            self.settings.reservation_ttl_s)
        if status == "full":
            raise Conflict(f"no GPU on {node} has room for {need.padded_mib:.0f} MiB padded "
                           f"any more (gpu:used MiB:jobs {detail}); the pod will be retried")
        gpu_index = detail.rsplit(":", 1)[-1]
        annotations = {GPU: gpu_index, RESERVED_MIB: f"{need.padded_mib:.0f}",
                       PREDICTED_S: f"{need.predicted_s:.1f}"}
        try:
            if binder is not None:
                binder.bind(namespace, name, uid, node, annotations)
        except Exception:
            if status == "reserved":
                self.store.release(uid)
            raise
        if not self.store.confirm_bind(uid, detail, self.clock()):
            log.warning("reservation of %s expired before bind confirmed; monitor reconciles", uid)
        return annotations

    def _needs(self, demand: PodDemand, nodes: Any) -> dict[str, core.Need]:
        types = {core.type_of(n.gpus) for n in nodes if n.gpus is not None and n.gpus.count}
        job = _job(demand)
        known = sorted(t for t in types if t != core.UNKNOWN_TYPE)
        needs = {t: core.Need(e.padded_mib, e.predicted_s)
                 for t, e in self.estimator.estimate(job, gpus=known).items()}  # fmt: skip
        if core.UNKNOWN_TYPE in types:
            fallback = self.estimator.estimate_unknown(job)
            needs[core.UNKNOWN_TYPE] = core.Need(fallback.padded_mib, fallback.predicted_s)
        return needs


def _job(demand: PodDemand) -> Job:
    return Job(demand.model, demand.task, demand.batch, demand.units)


def _refuse_all(nodes: Mapping[str, Any], reason: str) -> dict[str, Verdict]:
    return dict.fromkeys(nodes, Verdict(False, reason, unresolvable=True))

