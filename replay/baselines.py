"""The schedulers users would pick instead of ours, as small pure policies beside the
simulator (no HTTP, no Redis). Each honours the cluster's collocation limit
(`SimNode.slots`) and places a job needing k GPUs on k distinct GPUs of one node.

* `WholeGpuPolicy("default")`: stock kube-scheduler with ``nvidia.com/gpu: 1`` per pod: no
  sharing, least-allocated node first, blind to GPU type and memory.
* `WholeGpuPolicy("gavel-like", heterogeneity_aware=True)`: whole GPUs, the free GPU type
  with the best throughput for the job (Gavel profiles every job type on every GPU type
  first). It reads the world's run times and memory: an oracle of throughput.
* `DeclaredMemoryPolicy`: GPU sharing as KAI-scheduler or HAMi users run it: each pod
  declares a memory its owner chose (``declared``: the true peak on the cluster's GPU
  types rounded up to a whole GiB; ``declared-fraction``: the smallest of 1/4, 1/2 or 1
  GPU that holds it on the cluster's smallest card, reserved as that fraction of whichever
  GPU it lands on; trace pods: what the trace declares). Reservations are packed
  (best fit, KAI's and HAMi's default binpack), blind to GPU type and run time.
* Every policy keeps a job to the GPU types its node affinity allows (`SimJob.gpu_types`).
* `OraclePolicy`: perfect-knowledge greedy, the upper reference: true memory, true run
  times and the true collocation law; each job goes at once where its completion plus
  the delay it adds to its neighbours is least. Greedy, so not optimal.
"""

from __future__ import annotations

import math

from replay.engine import Choice, Placement, SimNode, Simulator
from replay.world import SimJob

GIB = 1024.0
FRACTIONS = (0.25, 0.5, 1.0)


def _free_gpus(sim: Simulator, node: SimNode) -> list[int]:
    return [i for i in range(node.count) if not sim.gpus[node.name, i]]


class WholeGpuPolicy:
    def __init__(self, name: str, heterogeneity_aware: bool = False) -> None:
        self.name = name
        self.aware = heterogeneity_aware
        self.oracle = heterogeneity_aware

    def answer_key(self, job: SimJob) -> tuple:
        """Blind to what a job runs, the default scheduler reads only how many GPUs it
        needs and where it may run (`engine.answer_key`)."""
        return job.shape if self.aware else (job.gpus, job.gpu_types)

    def place(self, job: SimJob, now: float, sim: Simulator) -> Choice | None:
        best, best_key = None, None
        for node in sim.nodes:
            free = _free_gpus(sim, node) if job.may_run_on(node.gpu_type) else []
            if len(free) < job.gpus:
                continue
            allocated = 1 - len(free) / node.count  # least-allocated spreading
            if self.aware:
                if sim.world.peak_mib(job, node.gpu_type) > node.memory_mib:
                    continue  # no measured throughput: it does not run there
                key = (sim.world.reference_s(job, node.gpu_type), allocated)
            else:
                key = (allocated, 0.0)
            if best_key is None or key < best_key:
                best, best_key = (node.name, tuple(free[:job.gpus])), key
        return best

    def started(self, placement: Placement, now: float) -> None: ...

    def ended(self, placement: Placement, now: float, oom: bool) -> None: ...


class DeclaredMemoryPolicy:
    def __init__(self, name: str, fraction: bool = False) -> None:
        self.name = name
        self.fraction = fraction
        self.oracle = False  # the owner's declaration comes from the truth, the policy never
        self.held: dict[tuple[str, int], dict[tuple[int, int], float]] = {}

    def declared_mib(self, job: SimJob, node: SimNode, sim: Simulator) -> float:
        """What the pod reserves on one GPU of `node`."""
        if job.from_trace:
            return job.declared_mib
        types = {n.gpu_type: n.memory_mib for n in sim.nodes}
        peak = max(sim.world.peak_mib(job, t) for t in types)
        if not self.fraction:
            return math.ceil(peak / GIB) * GIB
        smallest = min(types.values())
        share = next((f for f in FRACTIONS if f * smallest >= peak), 1.0)
        return share * node.memory_mib

    def place(self, job: SimJob, now: float, sim: Simulator) -> Choice | None:
        best, best_left = None, math.inf
        for node in sim.nodes:
            if not job.may_run_on(node.gpu_type):
                continue
            need = self.declared_mib(job, node, sim)
            fits = []
            for i in range(node.count):
                reserved = sum(self.held.get((node.name, i), {}).values())
                left = node.memory_mib - reserved - need
                if left >= 0 and sim.jobs_on(node.name, i) < node.slots:
                    fits.append((left, i))
            if len(fits) < job.gpus:
                continue
            chosen = sorted(fits)[:job.gpus]
            left = sum(f[0] for f in chosen)
            if left < best_left:
                best, best_left = (node.name, tuple(i for _, i in chosen)), left
        if best is not None:
            need = self.declared_mib(job, sim.by_name[best[0]], sim)
            for i in best[1]:
                self.held.setdefault((best[0], i), {})[job.id, job.attempt] = need
        return best

    def started(self, placement: Placement, now: float) -> None: ...

    def ended(self, placement: Placement, now: float, oom: bool) -> None:
        for key in placement.keys:
            self.held.get(key, {}).pop((placement.job.id, placement.job.attempt), None)


class OraclePolicy:
    def __init__(self, name: str = "oracle") -> None:
        self.name = name
        self.oracle = True

    def place(self, job: SimJob, now: float, sim: Simulator) -> Choice | None:
        best, best_cost = None, math.inf
        for node in sim.nodes:
            if not job.may_run_on(node.gpu_type):
                continue
            true_mib = sim.world.peak_mib(job, node.gpu_type)
            costs = []
            for i in range(node.count):
                if sim.jobs_on(node.name, i) >= node.slots \
                        or sim.used_mib(node.name, i) + true_mib > node.memory_mib:
                    continue
                costs.append((self._cost(job, node, i, sim), i))
            if len(costs) < job.gpus:
                continue
            chosen = sorted(costs)[:job.gpus]
            cost = max(c for c, _ in chosen)
            if cost < best_cost - 1e-9:
                best, best_cost = (node.name, tuple(i for _, i in chosen)), cost
        return best

    @staticmethod
    def _cost(job: SimJob, node: SimNode, gpu: int, sim: Simulator) -> float:
        """Seconds until the job ends there, plus the seconds it adds to its neighbours'
        remaining work, by the world's own law."""
        world = sim.world
        there = [p for p in sim.gpus[node.name, gpu] if p.working or world.startup_shares]
        before = world.interference.speeds(node.gpu_type, [p.job for p in there])
        after = world.interference.speeds(node.gpu_type, [*(p.job for p in there), job])
        own = (world.startup_s + world.run_s(job, node.gpu_type)) / after[-1]
        added = sum((p.work_left + p.startup_left) * (1 / a - 1 / b)
                    for p, a, b in zip(there, after, before))
        return own + added

    def started(self, placement: Placement, now: float) -> None: ...

    def ended(self, placement: Placement, now: float, oom: bool) -> None: ...
