"""Discrete-event simulation of a GPU cluster under one placement policy, and its figures.

Jobs arrive, wait until the policy places them on a GPU, hold their true peak
memory from placement, start working after the world's start-up overhead, and
progress at the collocation speed of the GPU they share; a job whose true peak
does not fit beside the jobs already there fails with OOM after 30 % of its run.
Pending jobs are tried in arrival order when they arrive and again whenever a
job ends (as kube-scheduler requeues unschedulable pods on cluster events); in
one round, a job shape that was refused is not asked again (nothing frees
memory within a round).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from replay.world import SimJob, World

OOM_AT = 0.3
EPS = 1e-9


@dataclass(frozen=True)
class SimNode:
    name: str
    gpu_type: str
    product: str  # the nvidia.com/gpu.product label GFD would write
    count: int
    memory_mib: int


@dataclass
class Placement:
    job: SimJob
    node: str
    gpu: int
    placed_s: float
    true_mib: float
    work_s: float  # seconds of work alone on this GPU
    work_left: float
    fails_at_left: float  # OOM: work left when it fails (< 0: never)
    working: bool = False


class Policy(Protocol):
    name: str

    def place(self, job: SimJob, now: float, sim: Simulator) -> tuple[str, int] | None: ...

    def started(self, placement: Placement, now: float) -> None: ...

    def ended(self, placement: Placement, now: float, oom: bool) -> None: ...


@dataclass
class Outcome:
    job: SimJob
    placed_s: float | None = None
    ended_s: float | None = None
    oom: bool = False
    node: str = ""
    gpu: int = -1


@dataclass
class Simulator:
    world: World
    nodes: list[SimNode]
    policy: Policy
    gpus: dict[tuple[str, int], list[Placement]] = field(default_factory=dict)
    decisions: int = 0
    memory_area: float = 0.0  # integral of min(used, capacity) over time, MiB x s
    timeline: list[tuple[float, float]] = field(default_factory=list)  # (t, memory in use)
    on_end: Callable[[], None] = lambda: None  # progress hook, called as each job ends

    def __post_init__(self) -> None:
        self.by_name = {n.name: n for n in self.nodes}
        self.gpus = {(n.name, i): [] for n in self.nodes for i in range(n.count)}
        self.capacity_mib = sum(n.memory_mib * n.count for n in self.nodes)

    def run(self, jobs: Iterable[SimJob]) -> list[Outcome]:
        arrivals = sorted(jobs, key=lambda j: (j.arrival_s, j.id))
        outcomes = {j.id: Outcome(j) for j in arrivals}
        pending: list[SimJob] = []
        now, i = (arrivals[0].arrival_s if arrivals else 0.0), 0
        self.start_s = now
        retry_all = False
        while True:
            while i < len(arrivals) and arrivals[i].arrival_s <= now + EPS:
                pending.append(arrivals[i])
                i += 1
            pending = self._schedule(pending, now, outcomes, retry_all)
            retry_all = False
            next_arrival = arrivals[i].arrival_s if i < len(arrivals) else math.inf
            next_event = min(next_arrival, self._next_change(now))
            if next_event == math.inf:
                break
            self._advance(now, next_event)
            now = next_event
            retry_all = self._settle(now, outcomes)
        self.end_s = now
        return list(outcomes.values())

    def used_mib(self, node: str, gpu: int) -> float:
        """True memory held on a GPU (what the world knows; policies must not peek)."""
        return sum(p.true_mib for p in self.gpus[node, gpu])

    def _schedule(self, pending: list[SimJob], now: float, outcomes: dict[int, Outcome],
                  retry_all: bool) -> list[SimJob]:
        refused: set[tuple[str, str, int, int]] = set()
        left = []
        for job in pending:
            shape = (job.model, job.task, job.batch, job.units)
            if shape in refused or not (retry_all or abs(job.arrival_s - now) <= EPS):
                left.append(job)  # nothing freed since it was refused: not asked again
                continue
            self.decisions += 1
            choice = self.policy.place(job, now, self)
            if choice is None:
                refused.add(shape)
                left.append(job)
                continue
            self._start(job, choice, now, outcomes[job.id])
        return left

    def _start(self, job: SimJob, choice: tuple[str, int], now: float, outcome: Outcome) -> None:
        node = self.by_name[choice[0]]
        true_mib = self.world.peak_mib(job, node.gpu_type)
        fits = self.used_mib(*choice) + true_mib <= node.memory_mib
        work = self.world.run_s(job, node.gpu_type)
        placement = Placement(job, node.name, choice[1], now, true_mib, work, work,
                              fails_at_left=-1.0 if fits else work * (1 - OOM_AT))
        self.gpus[choice].append(placement)
        outcome.placed_s, outcome.node, outcome.gpu = now, node.name, choice[1]
        self._record(now)

    def _working(self, key: tuple[str, int]) -> int:
        return sum(1 for p in self.gpus[key] if p.working)

    def _next_change(self, now: float) -> float:
        best = math.inf
        for key, placements in self.gpus.items():
            speed = self.world.speed(self._working(key))
            for p in placements:
                if not p.working:
                    best = min(best, p.placed_s + self.world.startup_s)
                else:
                    target = max(p.fails_at_left, 0.0)
                    best = min(best, now + (p.work_left - target) / speed)
        return best

    def _advance(self, now: float, until: float) -> None:
        for key, placements in self.gpus.items():
            speed = self.world.speed(self._working(key))
            for p in placements:
                if p.working:
                    p.work_left -= (until - now) * speed
            node = self.by_name[key[0]]
            self.memory_area += (until - now) * min(node.memory_mib, self.used_mib(*key))

    def _settle(self, now: float, outcomes: dict[int, Outcome]) -> bool:
        """Start jobs whose overhead elapsed, end jobs whose work is done. True if any ended."""
        ended = False
        for key, placements in self.gpus.items():
            for p in list(placements):
                if not p.working and p.placed_s + self.world.startup_s <= now + EPS:
                    p.working = True
                    self.policy.started(p, now)
                elif p.working and p.work_left <= max(p.fails_at_left, 0.0) + 1e-6:
                    oom = p.fails_at_left >= 0
                    placements.remove(p)
                    outcome = outcomes[p.job.id]
                    outcome.ended_s, outcome.oom = now, oom
                    self.policy.ended(p, now, oom)
                    self.on_end()
                    ended = True
        if ended:
            self._record(now)
        return ended

    def _record(self, now: float) -> None:
        in_use = sum(min(self.by_name[k[0]].memory_mib, self.used_mib(*k)) for k in self.gpus)
        self.timeline.append((now, in_use))


def metrics(sim: Simulator, outcomes: list[Outcome]) -> dict:
    """The replay's figures. JCT and queueing over jobs that ran to completion (OOMs are
    counted apart); makespan from the first arrival to the last job's end."""
    done = [o for o in outcomes if o.ended_s is not None and not o.oom]
    placed = [o for o in outcomes if o.placed_s is not None]
    jcts = sorted(o.ended_s - o.job.arrival_s for o in done)
    span = max((o.ended_s for o in outcomes if o.ended_s is not None), default=sim.start_s)
    makespan = span - sim.start_s
    return {
        "makespan_s": round(makespan, 1),
        "avg_jct_s": round(sum(jcts) / len(jcts), 1) if jcts else None,
        "p95_jct_s": round(jcts[min(len(jcts) - 1, int(0.95 * len(jcts)))], 1) if jcts else None,
        "avg_queue_s": round(sum(o.placed_s - o.job.arrival_s for o in placed) / len(placed), 1)
        if placed else None,
        "mem_util": round(sim.memory_area / (sim.capacity_mib * makespan), 4) if makespan else 0.0,
        "oom_count": sum(o.oom for o in outcomes),
        "unscheduled": sum(o.placed_s is None for o in outcomes),
    }
