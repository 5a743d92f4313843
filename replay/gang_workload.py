"""The gang workload and its truth: distributed trainings (gangs) beside single pods, and
what a gang's workers take on each GPU type (`GangWorld`).

A gang is `size` data-parallel workers, each a pod on `gpus` GPUs of one node. The
world's truth for a worker: the world's seconds for the job at its per-GPU batch on that
GPU type, divided by its GPUs and by `size` (ideal scaling inside a node, as
`extender.sizing` assumes); across n > 1 nodes a ring all-reduce moves 2 (n - 1) / n of
the gradient (the model's parameters) over each node's link at `network_gbps` after every
step (`extender.core.gang_plan.Communication`). Its memory: the world's peak at the
per-GPU batch, plus the data-parallel buffers (`extender.sizing`'s gradient bucket and
NCCL buffers) when it is distributed.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from estimator.feature_table import FeatureTable
from estimator.predict import Estimator
from extender.core.gang_plan import Communication, training_steps
from extender.model import NodeGpus, PodDemand
from extender.sizing import DDP_BUCKETS, NCCL_MIB, Sizer
from replay.engine import SimNode
from replay.workloads import generated_workload
from replay.world import SimJob, World

GANG_CLUSTER = "T4:6x8,A10:4x4,L4:4x8,A100-80GB:2x8"
NETWORK_GBPS = 25.0  # each node's link (a 25 GbE NIC), the slowest of the ring
SIZES = (2, 16)  # workers per gang, inclusive
MEMBER_GPUS = (1, 2, 4, 8)
MAX_GANG_GPUS = 32
PER_GPU_BATCHES = (16, 32, 64)
GANG_EPOCHS = (5, 10, 20)
SWEEP_FRACTION = 0.3  # gangs submitted as a sweep: copies of one gang at one instant
SWEEP_COPIES = (2, 3)


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
    return sizer.needs(demand, [node_layout(node)], {})[node.gpu_type].padded_mib


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


def node_layout(node: SimNode) -> NodeGpus:
    return NodeGpus(node.product, node.gpu_type, node.count, node.memory_mib,
                    share_slots=node.slots)
