"""The verbs for a pod of a gang: filter plans the whole gang once, bind takes the pod's slot.

    filter  the member's slot in the gang's live plan (one Lua call: `GangStore.claim`):
            only the slot's node passes. No plan: the gang's size (its PodGroup), one
            snapshot, the needs, `core.gang_plan.plan_gang` over the request's nodes (Volcano
            asks one node at a time: over every node the node watcher knows), then every
            member's GPUs reserved in one Lua call (`GangStore.reserve`). A gang that fits
            nowhere waits as one waiter; its refusal is kept per state revision, so the
            retries of an infeasible gang (the in-tree plugin's retry loop) cost one Redis
            call each while nothing changed.
    bind    the member takes over its slot's placeholder (`GangStore.take`).
    release a plan that loses a member, or whose members do not all bind in time, goes whole.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from estimator.errors import EstimatorError
from extender.core import decisions
from extender.core.annotations import AnnotationError, parse_demand
from extender.core.filtering import FilterDecision, decide_filter
from extender.core.gang_plan import (
    NO_COMMUNICATION,
    Communication,
    GangPlan,
    plan_gang,
    training_steps,
)  # fmt: skip
from extender.core.interference import alphas_for
from extender.core.job import Assessment, PodJob
from extender.errors import Conflict
from extender.filter_cycle import NodeLayoutsByName
from extender.model import (
    Decision,
    FilterRecord,
    GroupRef,
    JobRecord,
    PodDemand,
    PodInfo,
    Reservation,
    Verdict,
    Waiter,
)  # fmt: skip
from extender.settings import Settings
from extender.state.gang_store import GangView, waiter_uid
from extender.state.store import RedisStore

log = logging.getLogger(__name__)
Assess = Callable[[PodInfo, NodeLayoutsByName], Assessment]
SizeReader = Callable[[str, str, str], int]  # (kind, namespace, name) -> members


def gang_name(pod: PodInfo) -> str:
    assert pod.group is not None
    return f"{pod.namespace}/{pod.group.name}"


class Gangs:
    def __init__(self, settings: Settings, store: RedisStore, assess: Assess,
                 sizes: SizeReader | None, clock: Callable[[], float],
                 params_mib: Callable[[PodDemand], float]) -> None:
        self.settings = settings
        self.store = store
        self._assess = assess
        self._sizes = sizes
        self._clock = clock
        self._params_mib = params_mib
        self._refusals: dict[str, tuple[tuple[str, str], frozenset[str], str]] = {}
        self._lock = threading.Lock()

    def filter(self, pod: PodInfo, nodes: NodeLayoutsByName,
               plan_over: NodeLayoutsByName | None = None) -> FilterDecision:
        """`plan_over`: the nodes to plan the gang over when the request names only some of
        them (Volcano's predicate: one node); None: the request's nodes."""
        try:
            demand = parse_demand(pod)
        except (AnnotationError, EstimatorError) as exc:
            return _refused(nodes, str(exc), unresolvable=True)
        if demand is None:  # a member without our annotations: the gang scheduler's alone
            return FilterDecision(dict.fromkeys(nodes, Verdict(True)), passthrough=True)
        gang, now = gang_name(pod), self._clock()
        view = self.store.gangs.claim(gang, demand, now)
        if view.status == "slot":
            return self._on_slot(gang, view, demand, nodes, plan_over is None)
        if view.status == "other":
            assert view.plan is not None
            return _refused(nodes, f"gang {gang}: its members must run the same job (the same "
                                   "schedtune.io annotations and nvidia.com/gpu); this pod asks "
                                   f"for another than the plan was made for: {view.plan['job']}",
                            unresolvable=True)
        if view.status == "full":
            return _refused(nodes, f"gang {gang}: every member slot of its plan is taken by "
                                   "other pods; this pod is not one of its members")
        with self._lock:
            kept = self._refusals.get(gang)
        if kept is not None and kept[0] == view.revision and kept[1] == frozenset(nodes):
            return _refused(nodes, kept[2])  # nothing changed since it was refused
        try:
            size = self._size(pod.group, pod.namespace)
        except (LookupError, ValueError) as exc:
            return _refused(nodes, f"gang {gang}: {exc}")
        assessment = self._assess(pod, plan_over if plan_over is not None else nodes)
        if not isinstance(assessment, PodJob):
            return decide_filter(assessment, nodes, self.settings)
        alphas = alphas_for(assessment.snapshot, self.settings)
        plan = plan_gang(size, assessment.needs, assessment.snapshot.nodes,
                         self.settings.collocation, self.settings.policy,
                         lambda node: alphas.of(node.gpus), now,
                         self._communication(demand, size))
        if plan is None:
            return self._waits(gang, size, assessment, nodes, view.revision)
        try:
            planned = self.store.gangs.reserve(gang, plan, demand, now,
                                               self.settings.gang_plan_ttl_s)
        except Conflict as exc:  # a GPU filled meanwhile: the next try plans again
            return _refused(nodes, str(exc))
        if planned is None:  # another worker planned it first: take a slot of that one
            view = self.store.gangs.claim(gang, demand, now)
            if view.status != "slot":
                return _refused(nodes, f"gang {gang}: planned by another request; retried")
            return self._on_slot(gang, view, demand, nodes, plan_over is None)
        self.store.tell(_planned(gang, plan, demand), now, self.settings.decision_repeat_s)
        return self._on_slot(gang, planned, demand, nodes, plan_over is None)

    def take(self, gang: str, record: JobRecord, now: float, ttl_s: float,
             source: str) -> Reservation:
        """Bind's (or allocate's) reservation for a member: its slot's GPUs. Raises
        `Conflict` when it holds no live slot there (the plan expired or was released)."""
        reservation = self.store.gangs.take(gang, record, now, ttl_s, source)
        if reservation is None:
            raise Conflict(f"pod {record.namespace}/{record.pod} holds no slot of a live plan "
                           f"of its gang {gang} (the plan expired or was released): filter "
                           "it again")
        return reservation

    def release(self, gang: str, why: str, only_partial: bool = True) -> int:
        dropped = self.store.gangs.release(gang, only_partial)
        if dropped > 0:
            log.info("gang plan released", extra={"gang": gang, "why": why,
                                                  "placeholders": dropped})
        return dropped

    def _on_slot(self, gang: str, view: GangView, demand: PodDemand, nodes: NodeLayoutsByName,
                 whole_request: bool) -> FilterDecision:
        slot = view.member_slot()
        assert slot is not None
        # What bind reads: the pod's demand, and that a plan placed it.
        self.store.record_filter(FilterRecord(demand, gang=gang), self.settings.demand_ttl_s)
        if whole_request and nodes and slot.node not in nodes:
            if slot.node not in self.store.node_names():  # the node is gone: plan anew
                self.release(gang, f"node {slot.node} gone", only_partial=False)
                return _refused(nodes, f"gang {gang}: its planned node {slot.node} is gone; "
                                       "the gang is planned again")
            # Left out of this request (kube-scheduler's percentageOfNodesToScore sample, or
            # its own filters): the plan stands until it expires; the member is retried.
            return _refused(nodes, f"gang {gang}: this member is planned on {slot.node}, "
                                   "which this request does not offer")
        said = f"gang {gang}: this member is planned on {slot.node} (GPU {list(slot.gpus)})"
        verdicts = {name: Verdict(True, gpu_index=slot.gpus[0]) if name == slot.node
                    else Verdict(False, said) for name in nodes}
        return FilterDecision(verdicts, FilterRecord(demand, gang=gang))

    def _waits(self, gang: str, size: int, job: PodJob, nodes: NodeLayoutsByName,
               revision: tuple[str, str]) -> FilterDecision:
        snapshot, demand = job.snapshot, job.demand
        uid = waiter_uid(gang)
        since = next((w.since for w in snapshot.waiting if w.uid == uid), snapshot.now)
        per_type = {t: (n.padded_mib, n.predicted_s / size) for t, n in job.needs.items()}
        waiter = Waiter(uid, since, per_type, f"{demand.namespace}/{demand.name}", demand.gpus,
                        size) if self.settings.hold_for else None
        reason = (f"gang {gang}: its {size} members ({demand.gpus} GPU each) do not all fit "
                  "now on the nodes offered; the gang waits whole, nothing reserved")
        told = (decisions.waiting(waiter, reason),) if waiter is not None else ()
        self.store.record_filter(FilterRecord(demand, gang=gang), self.settings.demand_ttl_s,
                                 waiter, snapshot.now, self.settings.wait_ttl_s, told,
                                 self.settings.decision_repeat_s)
        with self._lock:
            if len(self._refusals) > 4096:
                self._refusals.clear()
            self._refusals[gang] = (revision, frozenset(nodes), reason)
        return _refused(nodes, reason)

    def _size(self, group: GroupRef | None, namespace: str) -> int:
        assert group is not None
        if group.size:
            return group.size
        if self._sizes is None:
            raise LookupError(f"its size is in a PodGroup ({group.kind}), and this extender "
                              "has no cluster access to read it")
        return self._sizes(group.kind, namespace, group.name)

    def _communication(self, demand: PodDemand, size: int) -> Communication:
        if demand.task != "train" or size < 2:
            return NO_COMMUNICATION
        return Communication(self._params_mib(demand),
                             training_steps(demand.units, demand.batch, size),
                             self.settings.gang_network_gbps)


def _refused(nodes: NodeLayoutsByName, reason: str, unresolvable: bool = False) -> FilterDecision:
    return FilterDecision(dict.fromkeys(nodes, Verdict(False, reason, unresolvable=unresolvable)))


def _planned(gang: str, plan: GangPlan, demand: PodDemand) -> Decision:
    where = ", ".join(f"{s.node}:{','.join(map(str, s.gpus))}" for s in plan.slots)
    return Decision("gang-planned", demand.uid, f"{demand.namespace}/{demand.name}", (
        f"gang {gang}: {len(plan.slots)} members planned on {plan.gpu_type} ({where}); "
        f"predicted {plan.compute_s:.0f} s compute + {plan.communication_s:.0f} s all-reduce "
        f"over {len(plan.nodes)} node(s)"), plan.slots[0].node)

