"""Discrete-event simulation of a GPU cluster under one placement policy, and its figures.

Jobs arrive, wait until the policy places them on GPUs, hold their true peak memory
from placement, start working after the world's start-up overhead, and progress at
the speed the world's collocation law gives them on the GPU they share (a job on
several GPUs at its slowest one). With `World.startup_shares` a starting job counts
as sharing its GPU and its start-up is slowed like work; without it, start-up takes
wall-clock time and slows nobody.

A job whose true peak does not fit beside the jobs already on its GPU is OOM-killed
after 30 % of its run. Its Job then creates a new pod (same job, `attempt` + 1) after
the Job controller's back-off (10 s, doubled each time), up to `retry_limit` times;
after that it has failed. JCT counts from the first arrival, so wasted runs cost.

Pending jobs are tried in submission order when they are submitted and again whenever
a job ends (as kube-scheduler requeues unschedulable pods on cluster events); in one
round, a job whose answer key was refused is not asked again (nothing frees memory
within a round): its shape, unless the policy says which of a job's fields its answer
reads (`answer_key`).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from replay.world import SimJob, World

OOM_AT = 0.3
EPS = 1e-9
RETRY_LIMIT = 3
BACKOFF_S = 10.0
BACKOFF_CAP_S = 360.0
Choice = tuple[str, tuple[int, ...]]  # node, GPU indices on it


@dataclass(frozen=True)
class SimNode:
    name: str
    gpu_type: str
    product: str  # the nvidia.com/gpu.product label GFD would write
    count: int
    memory_mib: int
    slots: int = 4  # pods one GPU may hold (time-slicing replicas: the collocation limit)
    cpu: str = "32"  # its allocatable CPU, a Kubernetes quantity


@dataclass(eq=False)
class Placement:
    job: SimJob
    node: str
    gpus: tuple[int, ...]
    placed_s: float
    true_mib: float  # per GPU
    work_s: float  # seconds of work alone on this GPU type
    startup_left: float
    work_left: float
    fails_at_left: float  # OOM: work left when it is killed (< 0: never)
    working: bool = False

    @property
    def keys(self) -> list[tuple[str, int]]:
        return [(self.node, g) for g in self.gpus]


class Policy(Protocol):
    name: str

    def place(self, job: SimJob, now: float, sim: Simulator) -> Choice | None: ...

    def started(self, placement: Placement, now: float) -> None: ...

    def ended(self, placement: Placement, now: float, oom: bool) -> None: ...


def answer_key(policy: Policy, job: SimJob) -> tuple:
    """Jobs of one key get the same answer from `policy` at one instant: the job's shape,
    or fewer of its fields where the policy reads fewer (its own ``answer_key``)."""
    own = getattr(policy, "answer_key", None)
    return own(job) if own is not None else job.shape


@dataclass
class Outcome:
    job: SimJob
    placed_s: float | None = None  # first placement
    ended_s: float | None = None  # completion, or the last kill of a job that gave up
    ooms: int = 0
    failed: bool = False
    on_arrival: bool = False  # first attempt placed at the instant it arrived
    node: str = ""  # where the last attempt ran
    gpus: tuple[int, ...] = ()
    last_placed_s: float | None = None  # the last attempt's placement

    @property
    def completed(self) -> bool:
        return self.ended_s is not None and not self.failed


@dataclass
class Simulator:
    world: World
    nodes: list[SimNode]
    policy: Policy
    retry_limit: int = RETRY_LIMIT
    decisions: int = 0
    memory_area: float = 0.0  # integral of min(used, capacity) over time, MiB x s
    busy_area: float = 0.0  # integral of GPUs holding at least one job, GPU x s
    timeline: list[tuple[float, float]] = field(default_factory=list)  # (t, memory in use)
    kills: list[dict] = field(default_factory=list)  # one entry per OOM kill
    on_end: Callable[[], None] = lambda: None  # progress hook, called as each job ends

    def __post_init__(self) -> None:
        self.by_name = {n.name: n for n in self.nodes}
        self.gpus: dict[tuple[str, int], list[Placement]] = {
            (n.name, i): [] for n in self.nodes for i in range(n.count)}
        self.capacity_mib = sum(n.memory_mib * n.count for n in self.nodes)
        self.gpu_count = sum(n.count for n in self.nodes)
        self.running: list[Placement] = []
        self._speeds: dict[tuple[str, int], dict[int, float]] = {}  # per GPU, by id(placement)

    def run(self, jobs: Iterable[SimJob]) -> list[Outcome]:
        arrivals = sorted(jobs, key=lambda j: (j.arrival_s, j.id))
        outcomes = {j.id: Outcome(j) for j in arrivals}
        queue = [(j.arrival_s, n, j) for n, j in enumerate(arrivals)]
        heapq.heapify(queue)
        self._seq = len(queue)
        pending: list[SimJob] = []
        now = arrivals[0].arrival_s if arrivals else 0.0
        self.start_s = now
        retry_all = False
        while True:
            fresh = set()
            while queue and queue[0][0] <= now + EPS:
                job = heapq.heappop(queue)[2]
                pending.append(job)
                fresh.add((job.id, job.attempt))
            pending = self._schedule(pending, now, outcomes, fresh, retry_all)
            rates = self._rates()
            next_event = min(queue[0][0] if queue else math.inf, self._next_change(now, rates))
            if next_event == math.inf:
                break
            self._advance(now, next_event, rates)
            now = next_event
            retry_all = self._settle(now, outcomes, queue)
        self.end_s = now
        return list(outcomes.values())

    def used_mib(self, node: str, gpu: int) -> float:
        """True memory held on a GPU (what the world knows; only oracles may read it)."""
        return sum(p.true_mib for p in self.gpus[node, gpu])

    def jobs_on(self, node: str, gpu: int) -> int:
        """Pods on a GPU (what any scheduler sees)."""
        return len(self.gpus[node, gpu])

    def _schedule(self, pending: list[SimJob], now: float, outcomes: dict[int, Outcome],
                  fresh: set[tuple[int, int]], retry_all: bool) -> list[SimJob]:
        refused: set[tuple] = set()
        left = []
        for job in pending:
            key = answer_key(self.policy, job)
            if key in refused or not (retry_all or (job.id, job.attempt) in fresh):
                left.append(job)  # nothing freed since it was refused: not asked again
                continue
            self.decisions += 1
            choice = self.policy.place(job, now, self)
            if choice is None:
                refused.add(key)
                left.append(job)
                continue
            self._start(job, choice, now, outcomes[job.id])
        return left

    def _start(self, job: SimJob, choice: Choice, now: float, outcome: Outcome) -> None:
        node = self.by_name[choice[0]]
        gpus = tuple(choice[1])
        if len(gpus) != job.gpus or len(set(gpus)) != len(gpus):
            raise ValueError(f"{self.policy.name} placed job {job.id} on GPUs {gpus} of "
                             f"{node.name}; it needs {job.gpus} distinct GPUs")
        true_mib = self.world.peak_mib(job, node.gpu_type)
        fits = all(self.used_mib(node.name, g) + true_mib <= node.memory_mib for g in gpus)
        work = self.world.run_s(job, node.gpu_type)
        placement = Placement(job, node.name, gpus, now, true_mib, work, self.world.startup_s,
                              work, fails_at_left=-1.0 if fits else work * (1 - OOM_AT))
        self._admit(placement, now, outcome)

    def _admit(self, placement: Placement, now: float, outcome: Outcome) -> None:
        """A placement made: on its GPUs, running (after start-up), and in the job's outcome."""
        job = placement.job
        placement.working = self.world.startup_s <= 0
        for key in placement.keys:
            self.gpus[key].append(placement)
            self._speeds.pop(key, None)
        self.running.append(placement)
        if outcome.placed_s is None:
            outcome.placed_s = now
            outcome.on_arrival = job.attempt == 0 and abs(now - job.arrival_s) <= EPS
        outcome.node, outcome.gpus, outcome.last_placed_s = placement.node, placement.gpus, now
        self._record(now)
        if placement.working:
            self.policy.started(placement, now)

    def _gpu_speeds(self, key: tuple[str, int]) -> dict[int, float]:
        cached = self._speeds.get(key)
        if cached is None:
            sharing = [p for p in self.gpus[key] if p.working or self.world.startup_shares]
            speeds = self.world.interference.speeds(self.by_name[key[0]].gpu_type,
                                                    [p.job for p in sharing])
            cached = self._speeds[key] = {id(p): s for p, s in zip(sharing, speeds, strict=True)}
        return cached

    def _rates(self) -> dict[int, float]:
        """Each running placement's speed: its slowest GPU's; 1 for a start-up that shares
        nothing."""
        rates = {}
        for p in self.running:
            rates[id(p)] = min((self._gpu_speeds(k).get(id(p), 1.0) for k in p.keys),
                               default=1.0)
        return rates

    def _next_change(self, now: float, rates: dict[int, float]) -> float:
        best = math.inf
        for p in self.running:
            speed = rates[id(p)]
            if not p.working:
                best = min(best, now + p.startup_left / speed)
            else:
                best = min(best, now + (p.work_left - max(p.fails_at_left, 0.0)) / speed)
        return best

    def _advance(self, now: float, until: float, rates: dict[int, float]) -> None:
        dt = until - now
        for p in self.running:
            if p.working:
                p.work_left -= dt * rates[id(p)]
            else:
                p.startup_left -= dt * rates[id(p)]
        for key in {k for p in self.running for k in p.keys}:
            node = self.by_name[key[0]]
            self.memory_area += dt * min(node.memory_mib, self.used_mib(*key))
            self.busy_area += dt

    def _settle(self, now: float, outcomes: dict[int, Outcome], queue: list) -> bool:
        """Start jobs whose start-up elapsed, end jobs whose work is done (an OOM kill
        resubmits the job after its back-off). True if any ended."""
        ended = False
        for p in list(self.running):
            if not p.working and p.startup_left <= 1e-6:
                p.working = True
                for key in p.keys:
                    self._speeds.pop(key, None)
                self.policy.started(p, now)
            elif p.working and p.work_left <= max(p.fails_at_left, 0.0) + 1e-6:
                self._end(p, now, outcomes[p.job.id], queue)
                ended = True
        if ended:
            self._record(now)
        return ended

    def _end(self, p: Placement, now: float, outcome: Outcome, queue: list) -> None:
        oom = p.fails_at_left >= 0
        self.running.remove(p)
        for key in p.keys:
            self.gpus[key].remove(p)
            self._speeds.pop(key, None)
        self.policy.ended(p, now, oom)
        if not oom:
            outcome.ended_s = now
            self.on_end()
            return
        outcome.ooms += 1
        self.kills.append({"job": p.job.id, "attempt": p.job.attempt, "model": p.job.model,
                           "task": p.job.task, "batch": p.job.batch, "node": p.node,
                           "gpu_type": self.by_name[p.node].gpu_type,
                           "true_mib": round(p.true_mib, 1), "at_s": round(now, 1)})
        if p.job.attempt < self.retry_limit:
            delay = min(BACKOFF_S * 2 ** p.job.attempt, BACKOFF_CAP_S)
            retry = dataclasses.replace(p.job, attempt=p.job.attempt + 1)
            heapq.heappush(queue, (now + delay, self._seq, retry))
            self._seq += 1
        else:
            outcome.failed, outcome.ended_s = True, now
            self.on_end()

    def _record(self, now: float) -> None:
        in_use = sum(min(self.by_name[k[0]].memory_mib, self.used_mib(*k))
                     for k in {k for p in self.running for k in p.keys})
        self.timeline.append((now, in_use))


def metrics(sim: Simulator, outcomes: list[Outcome]) -> dict:
    """The replay's figures. JCT and queueing over jobs that completed (from their first
    arrival, wasted runs included); makespan from the first arrival to the last end.
    `oom_count`: OOM kills; `retries`: pods created again after one; `failed`: jobs killed
    more often than the retry limit allows; `placed_on_arrival`: share of jobs placed the
    instant they arrived; `gpu_busy`: time-averaged share of GPUs holding a job."""
    done = [o for o in outcomes if o.completed]
    placed = [o for o in outcomes if o.placed_s is not None]
    jcts = sorted(o.ended_s - o.job.arrival_s for o in done)  # type: ignore[operator]
    span = max((o.ended_s for o in outcomes if o.ended_s is not None), default=sim.start_s)
    makespan = span - sim.start_s
    per_type: dict[tuple, int] = {}
    for kill in sim.kills:
        key = (kill["model"], kill["task"], kill["batch"], kill["gpu_type"])
        per_type[key] = per_type.get(key, 0) + 1
    return {
        "makespan_s": round(makespan, 1),
        "avg_jct_s": round(sum(jcts) / len(jcts), 1) if jcts else None,
        "p95_jct_s": round(jcts[min(len(jcts) - 1, int(0.95 * len(jcts)))], 1) if jcts else None,
        "avg_queue_s": round(sum(o.placed_s - o.job.arrival_s for o in placed) / len(placed), 1)  # type: ignore[operator]
        if placed else None,
        "mem_util": round(sim.memory_area / (sim.capacity_mib * makespan), 4) if makespan else 0.0,
        "gpu_busy": round(sim.busy_area / (sim.gpu_count * makespan), 4) if makespan else 0.0,
        "placed_on_arrival": round(sum(o.on_arrival for o in outcomes) / len(outcomes), 4)
        if outcomes else None,
        "oom_count": len(sim.kills),
        "oom_max_per_type": max(per_type.values(), default=0),
        "retries": sum(min(o.ooms, sim.retry_limit) for o in outcomes),
        "failed": sum(o.failed for o in outcomes),
        "unscheduled": sum(o.placed_s is None for o in outcomes),
    }
