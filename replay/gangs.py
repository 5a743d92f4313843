"""Gang replay: distributed trainings (gangs) beside single pods on a mixed cluster.

A gang is `size` data-parallel workers, each a pod on `gpus` GPUs of one node, that
train together: nothing runs until every worker is placed, and the gang ends with its
slowest worker. The world's truth for a worker (`GangWorld`): the world's seconds for
the job at its per-GPU batch on that GPU type, divided by its GPUs and by `size`
(ideal scaling inside a node, as `extender.sizing` assumes), slowed by the jobs sharing
its GPUs (the world's collocation law); across n > 1 nodes a ring all-reduce moves
2 (n - 1) / n of the gradient (the model's parameters) over each node's link at
`network_gbps` after every step (`extender.core.gang_plan.Communication`). Its memory:
the world's peak at the per-GPU batch, plus the data-parallel buffers
(`extender.sizing`'s gradient bucket and NCCL buffers) when it is distributed.

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

import dataclasses
import itertools
import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from estimator.feature_table import FeatureTable
from estimator.predict import Estimator
from extender.core.gang_plan import Communication, plan_gang, training_steps
from extender.model import GpuState, Need, NodeGpus, NodeState, PodDemand, QueuedJob
from extender.settings import Settings
from extender.sizing import DDP_BUCKETS, NCCL_MIB, Sizer
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
from replay.workloads import generated_workload, shuffle_order
from replay.world import SimJob, World

GANG_CLUSTER = "T4:6x8,A10:4x4,L4:4x8,A100-80GB:2x8"
GANG_POLICIES = ("ours", "one-at-a-time", "gang-blind")
NETWORK_GBPS = 25.0  # each node's link (a 25 GbE NIC), the slowest of the ring
RENDEZVOUS_TIMEOUT_S = 600.0  # torchrun's default rendezvous join timeout
SIZES = (2, 16)  # workers per gang, inclusive
MEMBER_GPUS = (1, 2, 4, 8)
MAX_GANG_GPUS = 32
PER_GPU_BATCHES = (16, 32, 64)
GANG_EPOCHS = (5, 10, 20)
SWEEP_FRACTION = 0.3  # gangs submitted as a sweep: copies of one gang at one instant
SWEEP_COPIES = (2, 3)
EPOCH_T0 = 1_800_000_000.0  # simulated t = 0 as the epoch seconds the extender's core reads
#: Figures of the gang table, medians over the orders; lower is better for each.
GANG_FIGURES = ("deadlocks", "partial_gang_gpu_s", "makespan_s", "avg_jct_s", "gang_avg_jct_s",
                "oom_count", "unscheduled")


@dataclass(frozen=True)
class GangJob(SimJob):
    """A job of `size` workers, each on `gpus` GPUs of one node (size 1: a single pod).
    `batch`: per worker (split over its GPUs); `units`: epochs (train) or requests."""

    size: int = 1

    @property
    def shape(self) -> tuple:
        return (*super().shape, self.size)

    @property
    def per_gpu(self) -> SimJob:
        """One GPU's share of a worker: the same job at the per-GPU batch (its id kept, so
        the world's per-job noise is the job's)."""
        if self.task != "train" or self.gpus == 1:
            return SimJob(self.id, self.arrival_s, self.model, self.task, self.batch,
                          self.units, self.attempt)
        return SimJob(self.id, self.arrival_s, self.model, self.task,
                      math.ceil(self.batch / self.gpus), self.units, self.attempt)

    @property
    def distributed(self) -> bool:
        return self.task == "train" and self.size * self.gpus > 1


def gang_workload(count: int, rate_per_min: float, seed: int, gang_fraction: float,
                  nodes: Sequence[SimNode], train_fraction: float = 0.3,
                  max_gang_gpus: int = MAX_GANG_GPUS,
                  estimator: Estimator | None = None) -> list[GangJob]:
    """`generated_workload`'s jobs, a `gang_fraction` of them turned into gangs (seeded):
    a trainable model, 2-16 workers of 1-8 GPUs (at most `MAX_GANG_GPUS` in all, and no
    more workers than the cluster's nodes could take at once), a per-GPU batch (halved
    until the estimator's padded estimate of a worker fits the cluster's smallest card, as
    an owner sizes a job for the cluster), epochs;
    a `SWEEP_FRACTION` of them submitted as a sweep (2 or 3 copies at one instant, as a
    hyper-parameter search submits them)."""
    rng = random.Random(f"gangs:{seed}")
    table = FeatureTable.load()
    trainable = [m for m in table.models if "train" in table.tasks_for(m)]
    widest = max(n.count for n in nodes)
    sizer = Sizer(estimator or Estimator.load())
    smallest = min(nodes, key=lambda n: n.memory_mib)
    jobs = []
    for job in generated_workload(count, rate_per_min, seed, train_fraction):
        if rng.random() >= gang_fraction:
            jobs.append(GangJob(**dataclasses.asdict(job)))
            continue
        size, gpus = rng.randint(*SIZES), rng.choice(MEMBER_GPUS)
        while gpus > 1 and (size * gpus > max_gang_gpus or gpus > widest):
            gpus //= 2
        size = min(size, max_gang_gpus // gpus, sum(n.count // gpus for n in nodes))
        model, batch = rng.choice(trainable), rng.choice(PER_GPU_BATCHES)
        while batch > min(PER_GPU_BATCHES) and _worker_mib(
                sizer, model, batch * gpus, gpus, smallest) > smallest.memory_mib:
            batch //= 2
        gang = GangJob(job.id, job.arrival_s, model, "train", batch * gpus,
                       rng.choice(GANG_EPOCHS), gpus=gpus, size=size)
        copies = rng.choice(SWEEP_COPIES) if rng.random() < SWEEP_FRACTION else 1
        jobs.extend([gang] * copies)
    return [dataclasses.replace(job, id=i) for i, job in enumerate(jobs)]


def _worker_mib(sizer: Sizer, model: str, batch: int, gpus: int, node: SimNode) -> float:
    demand = PodDemand("", "", "", model, "train", batch, 1, gpus=gpus)
    return sizer.needs(demand, [_layout(node)], {})[node.gpu_type].padded_mib


@dataclass
class GangWorld:
    """The truth of gangs in `world` (see the module docstring)."""

    world: World
    network_gbps: float = NETWORK_GBPS
    _params: dict[str, float] = field(default_factory=dict)

    def params_mib(self, model: str) -> float:
        if model not in self._params:
            table = self.world.estimator.table
            self._params[model] = table.job_features(model, "train", 1).params_mb
        return self._params[model]

    def worker_s(self, job: GangJob, gpu_type: str) -> float:
        """A worker's compute alone on `gpu_type`."""
        return self.world.run_s(job.per_gpu, gpu_type) / (job.gpus * job.size)

    def worker_mib(self, job: GangJob, gpu_type: str) -> float:
        """True peak on each GPU of a worker."""
        mib = self.world.peak_mib(job.per_gpu, gpu_type)
        return mib + (DDP_BUCKETS * self.params_mib(job.model) + NCCL_MIB
                      if job.distributed else 0.0)

    def communication(self, job: GangJob) -> Communication:
        if not job.distributed:
            return Communication(0.0, 0, self.network_gbps)
        return Communication(self.params_mib(job.model),
                             training_steps(job.units, job.batch, job.size), self.network_gbps)


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


def _layout(node: SimNode) -> NodeGpus:
    return NodeGpus(node.product, node.gpu_type, node.count, node.memory_mib,
                    share_slots=node.slots)


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
        self.layouts = {name: _layout(n) for name, n in self.nodes.items()}
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


def medians(per_order: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per policy, each of `GANG_FIGURES`: its median over the orders."""
    out: dict[str, dict[str, float | None]] = {}
    for policy in (per_order[0]["policies"] if per_order else {}):
        out[policy] = {}
        for figure in GANG_FIGURES:
            values = [o["policies"][policy][figure] for o in per_order
                      if o["policies"][policy].get(figure) is not None]
            out[policy][figure] = round(statistics.median(values), 1) if values else None
    return out


def gains(policies: Mapping[str, Mapping[str, Any]], reference: str = "ours",
          against: str = "gang-blind") -> dict[str, float | None]:
    """How much lower `reference`'s median is than `against`'s, in % of `against`'s."""
    out: dict[str, float | None] = {}
    if reference not in policies or against not in policies:
        return out
    for figure in ("makespan_s", "avg_jct_s", "gang_avg_jct_s"):
        mine, theirs = policies[reference].get(figure), policies[against].get(figure)
        out[figure] = round(100 * (1 - mine / theirs), 1) if mine is not None and theirs \
            else None
    return out


def render(report: Mapping[str, Any]) -> str:
    """The gang table as the CLI prints it without --json."""
    lines = [(f"workload {report['workload']}: {report['jobs']} jobs ({report['gangs']} gangs) "
              f"on {report['cluster']['gpus']} GPUs ({', '.join(report['cluster']['types'])}); "
              f"network {report['network_gbps']:g} Gb/s"),
             f"world: {report['world']}", f"collocation law: {report['interference']}",
             f"medians over {report['orders']} order(s)", "",
             (f"{'policy':>14} {'deadlocks':>9} {'partial GPU-s':>13} {'makespan':>9} "
              f"{'avg JCT':>8} {'gang JCT':>9} {'OOM':>4} {'unsched':>7}")]
    for name, r in report["policies"].items():
        lines.append(f"{name:>14} {r['deadlocks'] or 0:>9.0f} {r['partial_gang_gpu_s'] or 0:>13.0f} "
                     f"{r['makespan_s'] or 0:>9.0f} {r['avg_jct_s'] or 0:>8.0f} "
                     f"{r['gang_avg_jct_s'] or 0:>9.0f} {r['oom_count'] or 0:>4.0f} "
                     f"{r['unscheduled'] or 0:>7.0f}")
    gain = report.get("ours_vs_gang_blind_pct") or {}
    if gain:
        lines.append("")
        lines.append("ours vs gang-blind (lower by): " + ", ".join(
            f"{k.removesuffix('_s')} {v:+.1f} %" for k, v in gain.items() if v is not None))
    return "\n".join(lines)
