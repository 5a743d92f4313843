"""The verbs, shared by the kube-scheduler and Volcano routes: orchestration only.

Each verb reads once, asks the estimator once, lets a decision function of
`extender.core` decide, and writes once:

    filter      assess (annotations, one snapshot read, needs per GPU type; in names
                mode the pod's record for bind written in the read's round trip)
                -> core.filtering.decide_filter -> store.record_filter (one write, with
                the decisions a waiting pod is told; names mode: only when the decision
                adds holds, a wait or decisions to the record)
    prioritize  assess (in filter's cycle: filter's, reused) -> core.prioritizing.decide_scores
                (no write); the nodes filter passed are priced once filter has answered
                (`price_ahead`), and prioritize of that very list returns those scores
    bind        (api mode: the pod read from the API server, core.binding.check_live_pod)
                -> store.filter_record -> snapshot of the node (core.binding.trusted_layout)
                -> needs -> core.binding.plan_reservation -> store.reserve -> binder -> confirm
                -> the `reserved` decision logged (the pod's Event, the status page)
    allocate    (Volcano) the same reservation, unconfirmed: the monitor confirms it when
                it sees the pod bound there (`store.confirm_placement`)
    deallocate  (Volcano) store.release_placement: only what allocate made on that node

Pods without ``schedtune.io/model`` never reach Redis or the estimator; with a
cluster, bind learns that from the pod itself, so it binds them with no Redis
access at all. No HTTP and no wire shapes here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from dataclasses import replace

from estimator.errors import EstimatorError, UnknownModel
from estimator.predict import Estimator
from extender.cluster.binders import RECORD_ONLY, BindTarget, PodReader
from extender.core import binding, decisions, filtering, prioritizing, time_bias
from extender.core.annotations import AnnotationError, asks_no_gpu, parse_demand
from extender.core.filtering.holds import SHORT_HOLDS
from extender.wire import gpushare, hami
from extender.core.gpu_table import distinct_layouts
from extender.core.interference import alphas_for
from extender.core.job import Assessment, NotOurs, PodJob, Refused
from extender.errors import Conflict, StoreUnavailable
from extender.filter_cycle import FilterCycle, NodeLayoutsByName
from extender.gang_verbs import Gangs, SizeReader
from extender.model import (
    FilterRecord, JobRecord, Need, NodeGpus, PodDemand, PodInfo, Reservation,
)  # fmt: skip
from extender.registry import ModelRegistry
from extender.settings import Settings
from extender.sizing import Sizer, check_fits_somewhere, unknown_model_reason
from extender.state.store import (
    KUBE_BIND, NO_WAITERS, VOLCANO_ALLOCATE, RedisStore, WaitersRead,
)  # fmt: skip

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, settings: Settings, store: RedisStore, estimator: Estimator,
                 binder: BindTarget = RECORD_ONLY,
                 clock: Callable[[], float] = time.time,
                 group_sizes: SizeReader | None = None) -> None:
        self.settings = settings
        self.store = store
        self.estimator = estimator
        self.sizer = Sizer(estimator, settings.declared_default_s)
        self.registry = ModelRegistry(store, self.sizer)
        self.binder = binder
        self.clock = clock
        # A binder that reads pods (the API server's) lets bind check the pod first.
        self._pods = binder if isinstance(binder, PodReader) else None
        self._cycle: FilterCycle | None = None  # the pod filtered last
        self._cycle_lock = threading.Lock()  # pricing ahead swaps the cycle it priced only
        self.gangs = Gangs(settings, store, self._assess, group_sizes, clock,
                           self.sizer.gradient_mib)

    def filter(self, pod: PodInfo, nodes: NodeLayoutsByName,
               plan_over: NodeLayoutsByName | None = None) -> filtering.FilterDecision:
        """In names mode the record bind reads (the pod's demand) does not depend on the
        decision: it is written in the snapshot's round trip, and again only when the
        decision adds to it (holds, a wait, decisions told). A pod of a gang is placed by
        its gang's plan (`extender.gang_verbs`; `plan_over`: the nodes to plan it over when
        the request names fewer)."""
        if pod.group is not None:
            self._set_cycle(None)
            return self.gangs.filter(pod, nodes, plan_over)
        with_read = not any(nodes.values())
        assessment = self._assess(pod, nodes, record_with_read=with_read)
        decision = filtering.decide_filter(assessment, nodes, self.settings)
        self._set_cycle(FilterCycle(pod.uid, time.monotonic(), nodes, assessment, decision.verdicts))
        written = (FilterRecord(assessment.demand)
                   if with_read and isinstance(assessment, PodJob) else None)
        if decision.writes_beyond(written):
            self.store.record_filter(decision.record, self.settings.demand_ttl_s,
                                     decision.waiter, self.clock(), self.settings.wait_ttl_s,
                                     decision.told, self.settings.decision_repeat_s)
        return decision

    def prioritize(self, pod: PodInfo, nodes: NodeLayoutsByName) -> Mapping[str, float]:
        """Scores in [0, 1]; every node 0 for pass-through or unestimable pods, except a
        pod asking no GPU, scored by what its CPU strands (`_steers`).

        Right after this worker filtered the same pod (kube-scheduler's scheduling cycle:
        filter, then prioritize the nodes that passed), the nodes are priced on what that
        filter read and computed (its snapshot, needs and fits: no round trip, as
        kube-scheduler scores on its cycle's snapshot) when they are among its nodes, else
        read as it read them; a placement made here since, or `prioritize_reuse_s`
        passed, reads them again. The nodes that passed are usually priced already
        (`price_ahead`): those scores are returned as they are."""
        if self._steers(pod):
            snapshot = self.store.snapshot(nodes, self.clock(), waiters=NO_WAITERS)
            return prioritizing.spare_gpu_scores(snapshot, self.settings.collocation,
                                                 pod.cpu_milli)
        cycle = self._cycle
        in_cycle = (cycle is not None and cycle.uid == pod.uid
                    and time.monotonic() - cycle.at <= self.settings.prioritize_reuse_s)
        if in_cycle and cycle is not None and cycle.same_job(pod):
            if (priced := cycle.priced_for(nodes)) is not None:
                return priced
            if cycle.covers(nodes):
                return prioritizing.decide_scores(cycle.assessment, nodes, self.settings)
        return prioritizing.decide_scores(self._assess(pod, nodes, sync=not in_cycle), nodes,
                                          self.settings)

    def _steers(self, pod: PodInfo) -> bool:
        """Whether prioritize scores a pod that is not ours: one asking no device and some
        CPU, under the fragmentation tie-break, is kept off the nodes whose free GPUs its
        CPU would leave short (`prioritizing.spare_gpu_scores`). Filter and bind pass it
        through untouched; kube-scheduler sends such pods only when the extender is
        registered without ``managedResources`` (k8s/scheduler-config.yaml)."""
        return (self.settings.tie_break == "fragmentation" and pod.group is None
                and pod.cpu_milli > 0 and asks_no_gpu(pod))

    def price_ahead(self, pod: PodInfo, passed: NodeLayoutsByName) -> Mapping[str, float] | None:
        """Prioritize's scores of `passed` (the nodes filter just passed `pod`, with the
        layouts filter read), computed once filter has answered and kept with the cycle:
        kube-scheduler runs its own score plugins before it calls prioritize with that
        list, so the pricing is off its path. None (nothing kept) when the pod is not the
        one filtered last, not ours, or passed fewer than two nodes (kube-scheduler
        scores none then), and when `price_ahead` is off or prioritize never reuses
        filter's work (`prioritize_reuse_s` 0)."""
        cycle, settings = self._cycle, self.settings
        if (cycle is None or cycle.uid != pod.uid or cycle.priced is not None
                or not isinstance(cycle.assessment, PodJob) or len(passed) < 2
                or not settings.price_ahead or settings.prioritize_reuse_s <= 0):
            return None
        scores = prioritizing.decide_scores(cycle.assessment, passed, settings,
                                            passed_by=cycle.verdicts)
        with self._cycle_lock:
            if self._cycle is not cycle:  # a placement or another pod since: nothing kept
                return None
            self._cycle = replace(cycle, priced_nodes=passed, priced=scores)
        return scores

    def bind(self, pod: PodInfo, node: str) -> dict[str, str] | None:
        """Reserve on the GPU prioritize costed, create the Binding, confirm. Idempotent per
        (UID, node): a pod reserved or bound on another node is refused.

        With a cluster (a `PodReader` binder) the pod is read first: an unannotated one
        is bound with no Redis access, an annotated one only through its filter record.
        Without one, the filter record alone decides (none: bound as it is).
        Returns the annotations recorded on the pod; None for a pod passed through
        unreserved (not ours: unannotated, or with no cluster, never filtered).
        Raises `Conflict` (no room any more, placed elsewhere, not filtered, not our
        pod), `BindFailed`, `StoreUnavailable`.
        """
        if self._pods is not None:
            live = self._pods.read_pod(pod.namespace, pod.name)
            if binding.check_live_pod(pod, live, node, self.settings.scheduler_name):
                return {}  # bound there already: a retry; the monitor keeps Redis true
            if not live.annotated:
                self.binder.bind(pod.namespace, pod.name, pod.uid, node, {})
                return None
            filtered = self.store.filter_record(pod.uid)
            if filtered is None:
                raise Conflict(f"pod {pod.namespace}/{pod.name} carries schedtune.io/model "
                               "but has no filter record (never filtered, or it expired): "
                               "filter it first")
            binding.check_demand(pod, live, filtered.demand)
            containers = live.container_gpus
        else:
            filtered = self.store.filter_record(pod.uid)
            if filtered is None:  # never filtered as ours: bind it as it is
                self.binder.bind(pod.namespace, pod.name, pod.uid, node, {})
                return None
            containers = ()
        return self._place(pod, node, filtered, KUBE_BIND, self.binder, containers)

    def record_placement(self, pod: PodInfo, node: str) -> dict[str, str]:
        """Reserve for a placement Volcano binds itself (its allocate event), expiring after
        `reservation_ttl_s` unless the monitor sees the pod bound there and confirms it.
        Idempotent per (UID, node); nothing for a pod never filtered as ours."""
        filtered = self.store.filter_record(pod.uid)
        if filtered is None:
            return {}
        return self._place(pod, node, filtered, VOLCANO_ALLOCATE, binder=None)

    def release(self, pod: PodInfo, node: str) -> None:
        """Volcano's deallocate event: drop only what its allocate reserved for the pod on
        `node` and nobody confirmed (a kube-scheduler bind, a placement elsewhere or one
        seen bound stay; the monitor releases those when the pod goes). For a member of a
        gang, Volcano took the gang back (not ready in its session): its plan goes whole."""
        self._set_cycle(None)
        self.store.release_placement(pod.uid, node, VOLCANO_ALLOCATE)
        if pod.group is not None:  # Volcano took its gang back: the plan goes whole
            self.gangs.release(f"{pod.namespace}/{pod.group.name}", "deallocated",
                               only_partial=False)

    def _place(self, pod: PodInfo, node: str, filtered: FilterRecord, source: str,
               binder: BindTarget | None, containers: tuple[int, ...] = ()) -> dict[str, str]:
        """Reserve for the pod on `node`, then bind and confirm; with no `binder` (someone
        else binds) the reservation stays unconfirmed, expiring unless confirmed. Under
        HAMi the annotations also hand the reserved GPUs to the pod's containers
        (`containers`: each one's nvidia.com/gpu) through its device plugin."""
        self._set_cycle(None)  # queues change here: the next prioritize reads them again
        now = self.clock()
        if filtered.gang:
            return self._place_member(pod, node, filtered, source, binder, containers, now)
        snapshot = self.store.snapshot({node: filtered.layouts.get(node)}, now,
                                       vet=binding.trusted_layout, waiters=NO_WAITERS,
                                       floors_of=filtered.demand)
        state = snapshot.nodes[node]
        if state.gpus is None or not state.gpus.count:
            # No layout to plan with (the record keeps passing nodes only, and a Volcano
            # predicate keeps its node only): a retry of a placement made is still fine.
            held = self.store.job(pod.uid)
            if held is None or not binding.holds_live(held, node, now):
                raise binding.unknown_layout(node)
            reservation = Reservation(pod.uid, node, held.gpu_index, new=False,
                                      gpu_indices=held.gpu_indices)
            need = Need(held.reserved_mib, held.predicted_s)
            gpus = None
        else:
            try:
                needs = self._needs(filtered.demand, [state.gpus], snapshot.floors,
                                    snapshot.time_biases)
            except (AnnotationError, EstimatorError) as exc:  # e.g. its model removed since
                raise Conflict(f"pod {pod.namespace}/{pod.name} can no longer be estimated "
                               f"as it was filtered ({exc}): filter it again") from exc
            plan = binding.plan_reservation(pod, filtered.demand, state, needs,
                                            self.settings, now,
                                            frozenset(filtered.held.get(node, ())),
                                            alphas_for(snapshot, self.settings).of(state.gpus))
            reservation = self.store.reserve(plan.record, plan.candidates, now,
                                             self.settings.reservation_ttl_s, source,
                                             plan.need.gpus)
            need, gpus = plan.need, state.gpus
        return self._bind_reserved(pod, reservation, need, gpus, containers, now, source,
                                   binder)

    def _bind_reserved(self, pod: PodInfo, reservation: Reservation, need: Need,
                       gpus: NodeGpus | None, containers: tuple[int, ...], now: float,
                       source: str, binder: BindTarget | None,
                       undo: Callable[[], object] | None = None) -> dict[str, str]:
        """The annotations (the reservation, the node agent's hand-over), the Binding when
        we bind, the confirmation, and the pod told; a new reservation whose bind fails is
        released (and `undo` called)."""
        node = reservation.node
        annotations = binding.pod_annotations(reservation, need, self.settings.signing_key)
        try:
            handover = {} if gpus is None else self._agent_annotations(
                reservation, gpus, need, containers, now)
            annotations.update(handover)
            if reservation.new and handover:  # before the agent can answer: the monitor
                self.store.note_handover(pod.uid, hami.handed_uuids(handover), now)  # checks
            if binder is not None:
                binder.bind(pod.namespace, pod.name, pod.uid, node, annotations)
        except Exception:
            if reservation.new:
                self.store.release_placement(pod.uid, node, source)
                if undo is not None:
                    undo()
            raise
        if binder is not None and not self.store.confirm_bind(reservation, self.clock()):
            log.warning("reservation of %s expired before bind confirmed; monitor reconciles",
                        pod.uid)
        if reservation.new and gpus is not None:
            self.store.tell(decisions.reserved(pod.namespace, pod.name, reservation, gpus, need),
                            self.clock(), self.settings.decision_repeat_s)
        return annotations

    def _place_member(self, pod: PodInfo, node: str, filtered: FilterRecord, source: str,
                      binder: BindTarget | None, containers: tuple[int, ...],
                      now: float) -> dict[str, str]:
        """`_place` for a member of a gang: it takes its slot of the gang's plan; a member
        that fails to bind breaks the plan, which is released whole."""
        demand, gang = filtered.demand, filtered.gang
        record = JobRecord(uid=pod.uid, pod=pod.name, namespace=pod.namespace,
                           model=demand.model, task=demand.task, node=node, gpu_index=-1,
                           reserved_mib=0.0, predicted_s=0.0, state="reserved",
                           reserved_at=now, batch=demand.batch, units=demand.units,
                           cpu_milli=demand.cpu_milli)
        reservation = self.gangs.take(gang, record, now, self.settings.reservation_ttl_s,
                                      source)
        held = self.store.job(pod.uid)
        if held is None:
            raise Conflict(f"pod {pod.namespace}/{pod.name}: its gang's reservation is gone")
        need = Need(held.reserved_mib, held.predicted_s, gpus=len(reservation.gpus))
        return self._bind_reserved(
            pod, reservation, need, self.store.node_layouts().get(node), containers, now,
            source, binder,
            undo=lambda: self.gangs.release(gang, "a member failed to bind", only_partial=False))

    def plan_nodes(self, nodes: NodeLayoutsByName) -> NodeLayoutsByName:
        """Every node the node watcher knows, and `nodes`: what a gang asked about one node
        at a time (Volcano's predicate) is planned over."""
        return {**dict.fromkeys(self.store.node_names()), **nodes}

    def gang_ready(self, namespace: str, name: str) -> bool:
        """Volcano's jobReady: a gang we planned is ready once every member took its slot;
        one we did not plan is not ours to hold back."""
        gang = f"{namespace}/{name}"
        return not self.store.gangs.planned(gang) or self.store.gangs.complete(gang)

    def _agent_annotations(self, reservation: Reservation, gpus: NodeGpus, need: Need,
                           containers: tuple[int, ...], now: float) -> dict[str, str]:
        """What the node agent (`EXTENDER_NODE_AGENT`) reads on the pod to hand it the
        reserved GPUs; nothing without one."""
        if self.settings.node_agent == "hami":
            return binding.hami_annotations(reservation, gpus, need, containers, now)
        if self.settings.node_agent == "volcano":
            return gpushare.bind_annotations(reservation.gpus, now)
        return {}

    def _set_cycle(self, cycle: FilterCycle | None) -> None:
        with self._cycle_lock:
            self._cycle = cycle

    def _assess(self, pod: PodInfo, nodes: NodeLayoutsByName, sync: bool = True,
                record_with_read: bool = False) -> Assessment:
        """Annotations parsed, one snapshot read (`RedisStore.snapshot`'s `sync`; with the
        pod's bare filter record written in it when `record_with_read`, dropped again
        if the pod is refused or the store fails), the estimator asked once."""
        try:
            demand = parse_demand(pod)
        except (AnnotationError, EstimatorError) as exc:
            return Refused(str(exc))
        if demand is None:
            return NotOurs()
        # Its own entry (when it waits), the oldest few and the shortest few: all that
        # holds read, enough of them live still when prioritize reuses this read.
        waiters = WaitersRead(pod.uid, self.settings.hold_for + 1,
                              self.settings.prioritize_reuse_s,
                              SHORT_HOLDS if self.settings.short_first else 0)
        record = FilterRecord(demand) if record_with_read else None
        try:
            snapshot = self.store.snapshot(nodes, self.clock(), sync=sync, waiters=waiters,
                                           record=record,
                                           record_ttl_s=self.settings.demand_ttl_s,
                                           floors_of=demand)
            layouts = distinct_layouts(snapshot.nodes)
            needs = self._needs(demand, layouts, snapshot.floors, snapshot.time_biases)
            check_fits_somewhere(demand, needs, layouts)
            return PodJob(demand, snapshot, needs)
        except (AnnotationError, EstimatorError, StoreUnavailable) as exc:
            if record is not None:  # refused, or an error: no record left (Redis may be down)
                with suppress(StoreUnavailable):
                    self.store.forget_filter(demand.uid)
            if isinstance(exc, StoreUnavailable):
                raise
            return Refused(str(exc))

    def _needs(self, demand: PodDemand, layouts: Iterable[NodeGpus | None],
               floors: Mapping[str, float],
               time_biases: Mapping[str, float] | None = None) -> dict[str, Need]:
        """What the pod needs on each GPU type of `layouts` (`extender.sizing`); a pod that
        declares its memory and no time is timed by its owner's earlier runs; a model's
        predicted time corrected by what observed runs taught (`extender.core.time_bias`,
        `EXTENDER_TIME_LEARN`)."""
        owner_s = None
        if not demand.model and not demand.expected_s and demand.owner:
            owner_s = self.store.owner_seconds(time_bias.owner_key(demand.namespace,
                                                                   demand.owner))
        if demand.model and not self.registry.covers(demand.model):
            raise UnknownModel(unknown_model_reason(
                demand.model, [*self.estimator.models, *self.sizer.transformers]))
        needs = self.sizer.needs(demand, layouts, floors, owner_s)
        if not demand.model or not time_biases or not self.settings.time_learn:
            return needs
        return time_bias.correct(needs, demand.task, demand.model, time_biases, demand.batch,
                                 time_bias.owner_key(demand.namespace, demand.owner))
