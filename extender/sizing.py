"""What a pod needs on each GPU type: memory to reserve per GPU and seconds alone.

One place for every kind of demand, used by the verbs and by the monitor's
adoption alike:

* a model (built-in, or registered by users: `extender.registry`) -> the
  estimator's padded prediction on each type; for a pod on k GPUs (data
  parallel) the per-replica batch ceil(batch / k) plus the all-reduce buffers
  (`DDP_BUCKETS`: a gradient-sized copy, and `NCCL_MIB` per GPU) and ideal
  scaling of the time (communication time is not modelled);
* a declared pod (``schedtune.io/gpu-memory``, no model) -> the declared MiB per
  GPU, no pad; seconds from ``schedtune.io/expected-seconds``, else the observed
  runs of the same owner, else `Settings.declared_default_s`;
* both -> the larger of declared and padded prediction (`Need.declared_mib` says
  what was declared, so the pod is told which one won);
* then the floor an OOM kill of the same job set (`extender.core.oom`).

A job that fits no GPU type of a request is refused with one reason that says by
how much it misses the largest (`check_fits_somewhere`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace

from estimator.errors import EstimatorError
from estimator.predict import Estimator, GpuEstimate, Job
from extender.core import oom
from extender.model import UNKNOWN_TYPE, Need, NodeGpus, PodDemand, type_of

NCCL_MIB = 256.0  # NCCL's communicator buffers and streams per GPU (data-parallel pods)
DDP_BUCKETS = 1.0  # gradient-sized all-reduce buckets, as a multiple of the parameters


class TooLarge(EstimatorError):
    """The job fits on no GPU type among the nodes asked about."""


class Sizer:
    def __init__(self, estimator: Estimator, declared_default_s: float = 3600.0) -> None:
        self.estimator = estimator
        self.declared_default_s = declared_default_s

    def needs(self, demand: PodDemand, layouts: Iterable[NodeGpus | None],
              floors: Mapping[str, float], owner_s: float | None = None) -> dict[str, Need]:
        """Need per GPU type of `layouts` (nodes without a usable layout are skipped).
        `owner_s`: the observed seconds of the pod owner's earlier runs, if any. Raises
        `EstimatorError` (unknown model, bad job, `TooLarge`)."""
        memory = {type_of(g): g.memory_mib for g in layouts if g is not None and g.count}
        if demand.model:
            needs = self._predicted(demand, sorted(memory))
        else:
            seconds = demand.expected_s or owner_s or self.declared_default_s
            needs = {t: Need(float(demand.declared_mib), float(seconds), seen=True)
                     for t in memory}
        needs = {t: _declared(n, demand) for t, n in needs.items()}
        needs = oom.apply_floors(demand, needs, floors) if demand.model else needs
        return {t: replace(n, gpus=demand.gpus) for t, n in needs.items()}

    def _predicted(self, demand: PodDemand, types: list[str]) -> dict[str, Need]:
        replicas = demand.gpus
        job = Job(demand.model, demand.task, math.ceil(demand.batch / replicas), demand.units)
        known = [t for t in types if t != UNKNOWN_TYPE]
        estimates = self.estimator.estimate(job, gpus=known)
        if UNKNOWN_TYPE in types:
            estimates = {**estimates, UNKNOWN_TYPE: self.estimator.estimate_unknown(job)}
        extra = self._replica_buffers(demand) if replicas > 1 else 0.0
        return {t: _need(e, extra, replicas) for t, e in estimates.items()}

    def _replica_buffers(self, demand: PodDemand) -> float:
        """MiB a data-parallel replica holds beyond its share of the batch."""
        if demand.task != "train":
            return NCCL_MIB
        params = self.estimator.table.job_features(demand.model, demand.task, 1).params_mb
        return DDP_BUCKETS * params + NCCL_MIB


def _need(estimate: GpuEstimate, extra_mib: float, replicas: int) -> Need:
    padded = estimate.padded_mib + extra_mib * (1.0 + estimate.pad)
    return Need(padded, estimate.predicted_s / replicas, estimate.pad,
                estimate.seen_in_training, family_seen=estimate.family_seen,
                estimate_mib=padded)


def _declared(need: Need, demand: PodDemand) -> Need:
    """The larger of what the pod declares and what was predicted."""
    if not demand.declared_mib:
        return need
    return replace(need, padded_mib=max(need.padded_mib, float(demand.declared_mib)),
                   declared_mib=float(demand.declared_mib))


def check_fits_somewhere(demand: PodDemand, needs: Mapping[str, Need],
                         layouts: Iterable[NodeGpus | None]) -> None:
    """Raises `TooLarge` when the job fits on no GPU type of `layouts`, saying by how much it
    misses the largest (nothing to say when no node has a usable layout)."""
    memory: dict[str, int] = {}
    for g in layouts:
        if g is not None and g.count:
            memory[type_of(g)] = max(memory.get(type_of(g), 0), g.memory_mib)
    if not memory or any(n.padded_mib <= memory[t] for t, n in needs.items() if t in memory):
        return
    largest = max(needs, key=lambda t: (memory[t], t))
    need, size = needs[largest], memory[largest]
    what = demand.model or "the declared memory"
    per_gpu = f" per GPU ({demand.gpus} GPUs)" if demand.gpus > 1 else ""
    padded = "" if need.declared_mib >= need.padded_mib else " padded"
    raise TooLarge(f"{what} needs {need.padded_mib:.0f} MiB{padded}{per_gpu}, more than the "
                   f"{size} MiB of the largest GPU among these nodes ({largest}): "
                   f"{need.padded_mib - size:.0f} MiB short")


def unknown_model_reason(model: str) -> str:
    return (f"unknown model {model!r}: register it (schedtune models add {model} with "
            "--torchvision ARCH, --entry-point package.module:factory --input SPEC, or "
            "--transformer-config config.json) or declare the GPU memory the pod needs "
            "(schedtune.io/gpu-memory: MiB per GPU)")
