"""Gang replay: distributed trainings (gangs) beside single pods on a mixed cluster; the
simulator and the policies (the workload and its truth: `replay.gang_workload`; the
figures over orders: `replay.gang_report`).

A gang's workers train together: nothing runs until every worker is placed, and the gang
ends with its slowest worker, slowed by the jobs sharing its GPUs (the world's
collocation law) and by its all-reduce across nodes (`GangWorld`).

Policies (`GANG_POLICIES`):

* ``ours``: each gang placed whole by `plan_gang` (heterogeneity-aware: one GPU type
  where one fits it whole, the one that finishes it soonest), its GPUs reserved at the
  extender's padded estimate (`extender.sizing.Sizer`) and shared as the extender shares
  them; a gang that does not fit whole waits whole, holding nothing. Single pods are
  1-member gangs: the cheapest GPU by ours' scoring policy;
* ``gang-blind``: the same, but gangs placed by ``plan_gang(..., blind=True)`` (packed on
  the roomiest nodes, whatever their type): a gang scheduler without our model. Single
  pods as ours, so the gap between the two is the gang placement's alone;
* ``one-at-a-time``: kube-scheduler without gang scheduling: each worker pod placed on
  its own as it comes (whole GPUs, least-allocated node first, type-blind:
  `replay.baselines.WholeGpuPolicy`), holding its GPUs while the rest of its gang waits.
  Pods are tried in submission order, a gang's workers one after the other (the most
  favourable order for it: gangs only interleave through fragmentation).

Deadlock (one-at-a-time): the partially placed gangs are waiting on each other when none
of them could be completed even if every GPU they do not hold were free. Each one is
counted and broken as torchrun's rendezvous would break it: after `RENDEZVOUS_TIMEOUT_S`
the youngest partial gang's workers give up and release their GPUs; its Job creates
them again after the Job controller's back-off.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from extender.core.gang_plan import plan_gang
from extender.model import GpuState, Need, NodeState, PodDemand, QueuedJob
from extender.settings import Settings
from extender.sizing import Sizer
from replay.baselines import WholeGpuPolicy
from replay.engine import (
    BACKOFF_CAP_S,
    BACKOFF_S,
    EPS,
    OOM_AT,
    Choice,
    Outcome,
    Placement,
    SimNode,
    Simulator,
    metrics,
)  # fmt: skip
from replay.gang_workload import NETWORK_GBPS, GangJob, GangWorld, node_layout
from replay.workloads import shuffle_order
from replay.world import SimJob, World

GANG_POLICIES = ("ours", "one-at-a-time", "gang-blind")
RENDEZVOUS_TIMEOUT_S = 600.0  # torchrun's default rendezvous join timeout
EPOCH_T0 = 1_800_000_000.0  # simulated t = 0 as the epoch seconds the extender's core reads


@dataclass(eq=False)
class GangPlacement(Placement):
    """A whole gang running (or, `holding`, one worker waiting for the rest of its gang).
    `members`: (node, GPUs); `compute_s`: each member's compute alone; `comm_s`: the
    gang's all-reduce time; `mib`: true peak per GPU, by node."""

    members: tuple[tuple[str, tuple[int, ...]], ...] = ()
    compute_s: tuple[float, ...] = ()
    comm_s: float = 0.0
    mib: Mapping[str, float] = field(default_factory=dict)
    holding: bool = False

    @property
    def keys(self) -> list[tuple[str, int]]:
        return [(node, g) for node, gpus in self.members for g in gpus]


class GangSimulator(Simulator):
    """`Simulator` where a job is a gang: started whole on every member's GPUs (the
    policy places it whole, `policy.whole`, or worker by worker), progressing at its
    slowest member's pace plus its all-reduce; figures `deadlocks` and `partial_gpu_s`."""

    def __init__(self, world: World, nodes: list[SimNode], policy: Any,
                 truth: GangWorld, timeout_s: float = RENDEZVOUS_TIMEOUT_S) -> None:
        super().__init__(world, nodes, policy)
        self.truth = truth
        self.timeout_s = timeout_s
        self.deadlocks = 0
        self.partial_gpu_s = 0.0
        self.held: dict[tuple[int, int], list[GangPlacement]] = {}  # (job, attempt) -> holds
        self.evictions: dict[tuple[int, int], int] = {}
        self.not_before: dict[tuple[int, int], float] = {}  # evicted: back-off until
        self.resolve_at = math.inf  # when the youngest deadlocked gang gives up
        self.jobs: dict[tuple[int, int], GangJob] = {}

    def used_mib(self, node: str, gpu: int) -> float:
        return sum(p.mib.get(node, p.true_mib) for p in self.gpus[node, gpu])  # type: ignore[attr-defined]

    def _schedule(self, pending: list[SimJob], now: float, outcomes: dict[int, Outcome],
                  fresh: set[tuple[int, int]], retry_all: bool) -> list[SimJob]:
        refused: set[tuple] = set()
        tried: list[GangJob] = []
        self.started_now: set[tuple[int, int]] = set()
        for job in pending:
            key = (job.id, job.attempt)
            if job.shape in refused or not (retry_all or key in fresh) \
                    or self.not_before.get(key, -math.inf) > now + EPS:
                continue
            assert isinstance(job, GangJob)
            self.jobs[key] = job
            if not self.policy.whole:
                tried.append(job)
                continue
            self.decisions += 1
            choices = self.policy.place(job, now, self)
            if choices is None:
                refused.add(job.shape)
            else:
                self._start_gang(job, choices, now, outcomes[job.id])
        if not self.policy.whole:
            for _, group in itertools.groupby(tried, key=lambda j: j.arrival_s):
                self._place_workers(list(group), now, outcomes)
            self._check_deadlock(now)
        return [j for j in pending if (j.id, j.attempt) not in self.started_now]

    def _place_workers(self, gangs: list[GangJob], now: float,
                       outcomes: dict[int, Outcome]) -> None:
        """Worker pods of gangs created at one instant, one of each gang in turn (their
        Jobs create them at once, so their pods interleave in the scheduling queue); a
        worker's GPUs held until its gang is whole, then the gang starts."""
        active = list(gangs)
        while active:
            for job in list(active):
                key = (job.id, job.attempt)
                held = self.held.setdefault(key, [])
                self.decisions += 1
                choice = self.policy.place(job, now, self)
                if choice is None:
                    active.remove(job)
                    continue
                hold = GangPlacement(job, choice[0], tuple(choice[1]), now, 0.0, 0.0, 0.0,
                                     0.0, -1.0, members=((choice[0], tuple(choice[1])),),
                                     mib={choice[0]: 0.0}, holding=True)
                for k in hold.keys:
                    self.gpus[k].append(hold)
                held.append(hold)
                if len(held) == job.size:
                    active.remove(job)
                    holds = self.held.pop(key)
                    self._drop(holds)
                    self._start_gang(job, [(h.node, h.gpus) for h in holds], now,
                                     outcomes[job.id])

    def _drop(self, holds: list[GangPlacement]) -> None:
        for hold in holds:
            for k in hold.keys:
                self.gpus[k].remove(hold)
                self._speeds.pop(k, None)

    def _start_gang(self, job: GangJob, choices: list[Choice], now: float,
                    outcome: Outcome) -> None:
        if len(choices) != job.size:
            raise ValueError(f"{self.policy.name} placed {len(choices)} of job {job.id}'s "
                             f"{job.size} workers")
        self.started_now.add((job.id, job.attempt))
        members = tuple((node, tuple(gpus)) for node, gpus in choices)
        taken = [(node, g) for node, gpus in members for g in gpus]
        if len(set(taken)) != len(taken) or any(len(g) != job.gpus for _, g in members):
            raise ValueError(f"{self.policy.name} placed job {job.id} on {members}; each "
                             f"worker needs {job.gpus} distinct GPUs of its own")
        types = {node: self.by_name[node].gpu_type for node, _ in members}
        mib = {node: self.truth.worker_mib(job, t) for node, t in types.items()}
        fits = all(self.used_mib(node, g) + mib[node] <= self.by_name[node].memory_mib
                   for node, g in taken)
        compute = tuple(self.truth.worker_s(job, types[node]) for node, _ in members)
        comm = self.truth.communication(job).seconds(len(types))
        work = max(compute) + comm
        first = members[0]
        placement = GangPlacement(job, first[0], first[1], now, mib[first[0]], work,
                                  self.world.startup_s, work,
                                  fails_at_left=-1.0 if fits else work * (1 - OOM_AT),
                                  members=members, compute_s=compute, comm_s=comm, mib=mib)
        self._admit(placement, now, outcome)

    def _gpu_speeds(self, key: tuple[str, int]) -> dict[int, float]:
        cached = self._speeds.get(key)
        if cached is None:
            sharing = [p for p in self.gpus[key] if not getattr(p, "holding", False)
                       and (p.working or self.world.startup_shares)]
            speeds = self.world.interference.speeds(self.by_name[key[0]].gpu_type,
                                                    [p.job for p in sharing])
            cached = self._speeds[key] = {id(p): s for p, s in zip(sharing, speeds, strict=True)}
        return cached

    def _rates(self) -> dict[int, float]:
        """Start-up at the slowest GPU's speed; work, in seconds of the gang alone, at the
        pace of its slowest member (each member's compute at its slowest GPU's speed)
        plus the all-reduce, which sharing does not slow."""
        rates = {}
        for p in self.running:
            assert isinstance(p, GangPlacement)
            speed = {k: self._gpu_speeds(k).get(id(p), 1.0) for k in p.keys}
            if not p.working:
                rates[id(p)] = min(speed.values(), default=1.0)
                continue
            slowest = max(c / min(speed[node, g] for g in gpus)
                          for (node, gpus), c in zip(p.members, p.compute_s, strict=True))
            rates[id(p)] = p.work_s / (slowest + p.comm_s) if slowest + p.comm_s > 0 else 1.0
        return rates

    def _next_change(self, now: float, rates: dict[int, float]) -> float:
        later = [t for t in self.not_before.values() if t > now + EPS]
        return min(super()._next_change(now, rates), self.resolve_at, *later)

    def _advance(self, now: float, until: float, rates: dict[int, float]) -> None:
        super()._advance(now, until, rates)
        self.partial_gpu_s += (until - now) * sum(len(h.gpus) for hs in self.held.values()
                                                  for h in hs)

    def _settle(self, now: float, outcomes: dict[int, Outcome], queue: list) -> bool:
        ended = super()._settle(now, outcomes, queue)
        if now >= self.resolve_at - EPS:
            self.resolve_at = math.inf
            self._evict_youngest(now)
            ended = True
        if any(abs(t - now) <= EPS for t in self.not_before.values()):
            ended = True  # an evicted gang's workers are created again: try the queue
        return ended

    def _partial(self) -> dict[tuple[int, int], list[GangPlacement]]:
        return {k: hs for k, hs in self.held.items() if hs}

    def _check_deadlock(self, now: float) -> None:
        """Count a deadlock when no partial gang could be completed even if every GPU the
        partial gangs do not hold were free; break it `timeout_s` later."""
        partial = self._partial()
        if not partial or self.resolve_at < math.inf:
            return
        held = {k for hs in partial.values() for h in hs for k in h.keys}
        for key, holds in partial.items():
            job = self.jobs[key]
            room = sum(sum(1 for g in range(n.count) if (n.name, g) not in held) // job.gpus
                       for n in self.nodes if job.may_run_on(n.gpu_type))
            if room >= job.size - len(holds):
                return  # it completes once the jobs running now end: waiting, not stuck
        self.deadlocks += 1
        self.resolve_at = now + self.timeout_s

    def _evict_youngest(self, now: float) -> None:
        partial = self._partial()
        if not partial:
            return
        key = max(partial, key=lambda k: (self.jobs[k].arrival_s, k))
        self._drop(self.held.pop(key))
        n = self.evictions[key] = self.evictions.get(key, 0) + 1
        self.not_before[key] = now + min(BACKOFF_S * 2 ** (n - 1), BACKOFF_CAP_S)


class PlanPolicy:
    """Gangs placed whole by `plan_gang` over the reservations this policy made (its
    ledger: the extender's store, in short); `blind`: the type-blind gang baseline."""

    whole = True

    def __init__(self, name: str, nodes: Sequence[SimNode], settings: Settings,
                 truth: GangWorld, blind: bool = False, node_order: Sequence[str] = ()) -> None:
        self.name = name
        self.oracle = False
        self.blind = blind
        self.settings = settings
        self.scoring = settings.policy
        self.truth = truth
        self.sizer = Sizer(truth.world.estimator)
        by_name = {n.name: n for n in nodes}
        self.nodes = {name: by_name[name] for name in node_order or by_name}
        self.layouts = {name: node_layout(n) for name, n in self.nodes.items()}
        self.ledger: dict[tuple[str, int], dict[str, QueuedJob]] = {}
        self.states: dict[str, NodeState] = {}
        self._needs: dict[tuple, dict[str, Need]] = {}

    def needs(self, job: GangJob) -> dict[str, Need]:
        """What the extender would reserve for each worker, per GPU type."""
        if job.shape not in self._needs:
            demand = PodDemand(f"{job.id}", f"job-{job.id}", "replay", job.model, job.task,
                               job.batch, job.units, gpus=job.gpus)
            self._needs[job.shape] = self.sizer.needs(demand, self.layouts.values(), {})
        return self._needs[job.shape]

    def node_states(self) -> dict[str, NodeState]:
        for name, node in self.nodes.items():
            if name not in self.states:
                gpus = tuple(GpuState(name, g, node.memory_mib,
                                      tuple(self.ledger.get((name, g), {}).values()))
                             for g in range(node.count))
                self.states[name] = NodeState(name, self.layouts[name], gpus)
        return self.states

    def place(self, job: GangJob, now: float, sim: Simulator) -> list[Choice] | None:
        needs = {t: n for t, n in self.needs(job).items()
                 if job.may_run_on(t)}
        plan = plan_gang(job.size, needs, self.node_states(), self.settings.collocation,
                         self.scoring, lambda _: self.scoring.alpha, EPOCH_T0 + now,
                         self.truth.communication(job), blind=self.blind and job.size > 1)
        if plan is None:
            return None
        uid = f"{job.id}-{job.attempt}"
        for slot in plan.slots:
            for g in slot.gpus:
                self.ledger.setdefault((slot.node, g), {})[uid] = QueuedJob(
                    uid, slot.mib, plan.duration_s)
            self.states.pop(slot.node, None)
        return [(slot.node, slot.gpus) for slot in plan.slots]

    def _update(self, placement: Placement, started_at: float | None) -> None:
        uid = f"{placement.job.id}-{placement.job.attempt}"
        for key in placement.keys:
            jobs = self.ledger.get(key, {})
            if uid in jobs:
                if started_at is None:
                    del jobs[uid]
                else:
                    jobs[uid] = jobs[uid]._replace(started_at=started_at)
            self.states.pop(key[0], None)

    def started(self, placement: Placement, now: float) -> None:
        self._update(placement, EPOCH_T0 + now)

    def ended(self, placement: Placement, now: float, oom: bool) -> None:
        self._update(placement, None)


class OneAtATimePolicy(WholeGpuPolicy):
    """kube-scheduler without gang scheduling: one worker at a time, whole GPUs,
    least-allocated node first (held GPUs are taken)."""

    whole = False

    def __init__(self, name: str = "one-at-a-time") -> None:
        super().__init__(name)


def make_gang_policy(name: str, nodes: Sequence[SimNode], settings: Settings,
                     truth: GangWorld, node_order: Sequence[str] = ()) -> Any:
    if name == "one-at-a-time":
        return OneAtATimePolicy(name)
    if name in ("ours", "gang-blind"):
        return PlanPolicy(name, nodes, settings, truth, blind=name == "gang-blind",
                          node_order=node_order)
    raise ValueError(f"unknown gang policy {name!r}; accepted: {', '.join(GANG_POLICIES)}")


def run_gang_policy(name: str, world: World, nodes: list[SimNode], jobs: list[GangJob],
                    settings: Settings, network_gbps: float = NETWORK_GBPS,
                    node_order: Sequence[str] = ()) -> dict[str, Any]:
    """One policy's figures over `jobs`: `metrics`' plus `deadlocks`, `partial_gang_gpu_s`
    and the average JCT of the gangs alone (`gang_avg_jct_s`)."""
    truth = GangWorld(world, network_gbps)
    by_name = {n.name: n for n in nodes}
    ordered = [by_name[n] for n in node_order or by_name]
    sim = GangSimulator(world, ordered, make_gang_policy(name, nodes, settings, truth,
                                                         node_order), truth)
    outcomes = sim.run(jobs)
    result = metrics(sim, outcomes)
    gangs = [o.ended_s - o.job.arrival_s for o in outcomes
             if o.completed and getattr(o.job, "size", 1) > 1]
    result.update(deadlocks=sim.deadlocks, partial_gang_gpu_s=round(sim.partial_gpu_s, 1),
                  gang_avg_jct_s=round(sum(gangs) / len(gangs), 1) if gangs else None,
                  gangs=sum(getattr(j, "size", 1) > 1 for j in jobs),
                  decisions=sim.decisions)
    return result


def node_order(nodes: Sequence[SimNode], seed: int) -> list[str]:
    """The order the policies see the nodes in: seeded, as a scheduler's node list means
    nothing (the same for every policy of one order)."""
    names = [n.name for n in nodes]
    random.Random(f"nodes:{seed}").shuffle(names)
    return names


def run_gang_orders(jobs: list[GangJob], nodes: list[SimNode], world: World,
                    settings: Settings, orders: int, network_gbps: float = NETWORK_GBPS,
                    policies: Sequence[str] = GANG_POLICIES,
                    progress: Any = lambda _: None) -> list[dict[str, Any]]:
    """Each order's figures per policy: order i is `shuffle_order(jobs, i)` (0 orders: the
    jobs as generated, once), its nodes in `node_order(nodes, i)`."""
    per_order = []
    for i in range(1, orders + 1) if orders else [0]:
        order_jobs = shuffle_order(jobs, i) if i else jobs
        names = node_order(nodes, i)
        done = {"order": i, "policies": {
            p: run_gang_policy(p, world, nodes, order_jobs, settings, network_gbps, names)
            for p in policies}}
        per_order.append(done)
        progress(done)
    return per_order
