"""What a pod needs on each GPU type: memory to reserve per GPU and seconds alone.

One place for every kind of demand, used by the verbs and by the monitor's
adoption alike:

* a model (built-in, or registered by users: `extender.registry`) -> the
  estimator's padded prediction on each type; for a pod on k GPUs (data
  parallel) the per-replica batch ceil(batch / k) plus the all-reduce buffers
  (`DDP_BUCKETS`: a gradient-sized copy, and `NCCL_MIB` per GPU) and ideal
  scaling of the time (communication time is not modelled);
* a transformer (the shipped LLM configurations, or a registered config) ->
  the analytic estimate of `estimator.transformer` for the pod's sequence length, dtype,
  training mode and concurrency (`llm_workload`), padded by the pad measured on
  published figures; units are training steps or requests;
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

from estimator import transformer
from estimator.catalogue import CATALOGUE
from estimator.errors import EstimatorError, InvalidJob
from estimator.feature_table import close_names
from estimator.transformer import LlmWorkload, TransformerConfig, shipped_configs, shipped_pad
from estimator.predict import Estimator, GpuEstimate, Job
from extender.core import oom
from extender.core.annotations import DEFAULT_LORA_RANK
from extender.model import UNKNOWN_TYPE, Need, NodeGpus, PodDemand, percent_of, type_of

MIB = 2**20
NCCL_MIB = 256.0  # NCCL's communicator buffers and streams per GPU (data-parallel pods)
DDP_BUCKETS = 1.0  # gradient-sized all-reduce buckets, as a multiple of the parameters


class TooLarge(EstimatorError):
    """The job fits on no GPU type among the nodes asked about."""


class Sizer:
    """`transformers`: the configurations estimated analytically (the shipped LLMs; the
    model registry adds the registered ones)."""

    def __init__(self, estimator: Estimator, declared_default_s: float = 3600.0) -> None:
        self.estimator = estimator
        self.declared_default_s = declared_default_s
        self.shipped = shipped_configs()
        self.transformers: Mapping[str, TransformerConfig] = self.shipped

    def needs(self, demand: PodDemand, layouts: Iterable[NodeGpus | None],
              floors: Mapping[str, float], owner_s: float | None = None) -> dict[str, Need]:
        """Need per GPU type of `layouts` (nodes without a usable layout are skipped).
        `owner_s`: the observed seconds of the pod owner's earlier runs, if any. Raises
        `EstimatorError` (unknown model, bad job, `TooLarge`)."""
        memory = largest_memory(layouts)  # a share of the largest never falls short
        if demand.model in self.transformers:
            needs = self._transformer(demand, self.transformers[demand.model], sorted(memory))
        elif demand.model:
            _check_not_transformer_job(demand)
            needs = self._predicted(demand, sorted(memory))
        else:
            seconds = demand.expected_s or owner_s or self.declared_default_s
            needs = {t: Need(declared_mib(demand, memory[t]), float(seconds), seen=True)
                     for t in memory}
        needs = {t: _declared(n, declared_mib(demand, memory[t]), demand.declared_percent)
                 for t, n in needs.items()}
        needs = oom.apply_floors(demand, needs, floors) if demand.model else needs
        return {t: n if n.gpus == demand.gpus else replace(n, gpus=demand.gpus)
                for t, n in needs.items()}

    def _predicted(self, demand: PodDemand, types: list[str]) -> dict[str, Need]:
        replicas = demand.gpus
        job = Job(demand.model, demand.task, math.ceil(demand.batch / replicas), demand.units)
        known = [t for t in types if t != UNKNOWN_TYPE]
        estimates = self.estimator.estimate(job, gpus=known)
        if UNKNOWN_TYPE in types:
            estimates = {**estimates, UNKNOWN_TYPE: self.estimator.estimate_unknown(job)}
        extra = self._replica_buffers(demand) if replicas > 1 else 0.0
        return {t: _need(e, extra, replicas) for t, e in estimates.items()}

    def _transformer(self, demand: PodDemand, config: TransformerConfig,
                     types: list[str]) -> dict[str, Need]:
        workload, pad = llm_workload(demand, config), shipped_pad()
        extra = NCCL_MIB if demand.gpus > 1 else 0.0  # full data parallel: buckets below
        if demand.gpus > 1 and demand.task == "train":
            extra += DDP_BUCKETS * config.parameters() * 2 / MIB  # 16-bit gradient buckets
        needs = {}
        for gpu in types:
            names = list(CATALOGUE) if gpu == UNKNOWN_TYPE else [gpu]
            mib = max(transformer.padded_mib(transformer.estimate_memory(config, workload, g), pad)
                      for g in names)
            times = [transformer.estimate_time(config, workload, g) for g in names]
            if demand.task == "train":
                seconds = max(t.step_s for t in times) * demand.units / demand.gpus
            else:
                seconds = max(t.seconds_per_request for t in times) * demand.units
            padded = mib + extra * (1.0 + pad)
            needs[gpu] = Need(padded, seconds, pad, seen=gpu != UNKNOWN_TYPE,
                              family_seen=False, estimate_mib=padded, basis="transformer")
        return needs

    def gradient_mib(self, demand: PodDemand) -> float:
        """MiB a data-parallel training step all-reduces (the model's parameters as the
        feature table has them); 0 when the table does not know the model."""
        try:
            return float(self.estimator.table.job_features(demand.model, demand.task, 1).params_mb)
        except (KeyError, ValueError, EstimatorError):
            return 0.0

    def _replica_buffers(self, demand: PodDemand) -> float:
        """MiB a data-parallel replica holds beyond its share of the batch."""
        if demand.task != "train":
            return NCCL_MIB
        params = self.estimator.table.job_features(demand.model, demand.task, 1).params_mb
        return DDP_BUCKETS * params + NCCL_MIB


DEFAULT_SEQ_LEN = 2048


def llm_workload(demand: PodDemand, config: TransformerConfig) -> LlmWorkload:
    """The pod's transformer job: per-replica batch; `DEFAULT_SEQ_LEN` tokens (at most the
    model's context) unless annotated; bf16; full fine-tuning; serving `concurrency`
    sequences at once (default: the batch size)."""
    seq_len = demand.seq_len or min(DEFAULT_SEQ_LEN, config.max_position)
    common = {"task": demand.task, "dtype": demand.dtype or "bf16", "seq_len": seq_len}
    if demand.task == "train":
        return LlmWorkload(**common, batch=math.ceil(demand.batch / demand.gpus),
                           mode=demand.train_mode or "full",
                           lora_rank=demand.lora_rank or DEFAULT_LORA_RANK,
                           gradient_checkpointing=demand.checkpointing)
    return LlmWorkload(**common, concurrent_seqs=demand.concurrency or demand.batch)


def _check_not_transformer_job(demand: PodDemand) -> None:
    """Transformer annotations on a model estimated by the regressors: refused, not ignored,
    whatever their value (gradient-checkpointing=false and the defaults too)."""
    if demand.transformer_annotations:
        raise InvalidJob(f"{demand.transformer_annotations} apply to transformer models only; "
                         f"{demand.model} is estimated from its measured features at its batch "
                         "size")


def _need(estimate: GpuEstimate, extra_mib: float, replicas: int) -> Need:
    padded = estimate.padded_mib + extra_mib * (1.0 + estimate.pad)
    return Need(padded, estimate.predicted_s / replicas, estimate.pad,
                estimate.seen_in_training, family_seen=estimate.family_seen,
                estimate_mib=padded)


def declared_mib(demand: PodDemand, gpu_mib: int) -> float:
    """The MiB the pod declares on a GPU of `gpu_mib`: as declared, or its percentage of
    the GPU's memory (`percent_of`); 0 when it declares nothing."""
    if demand.declared_percent:
        return percent_of(demand.declared_percent, gpu_mib)
    return float(demand.declared_mib)


def _declared(need: Need, declared: float, percent: int = 0) -> Need:
    """The larger of what the pod declares and what was predicted (`percent`: declared as
    that share of a GPU's memory: `Need.on` takes it of each node's card)."""
    if not declared:
        return need
    return replace(need, padded_mib=max(need.padded_mib, declared), declared_mib=declared,
                   declared_percent=percent)


def largest_memory(layouts: Iterable[NodeGpus | None]) -> dict[str, int]:
    """Per GPU type among `layouts` with GPUs, the MiB of its largest card."""
    memory: dict[str, int] = {}
    for g in layouts:
        if g is not None and g.count:
            memory[type_of(g)] = max(memory.get(type_of(g), 0), g.memory_mib)
    return memory


def check_fits_somewhere(demand: PodDemand, needs: Mapping[str, Need],
                         layouts: Iterable[NodeGpus | None]) -> None:
    """Raises `TooLarge` when the job fits on no GPU type of `layouts`, saying by how much it
    misses the largest (nothing to say when no node has a usable layout)."""
    memory = largest_memory(layouts)
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


def unknown_model_reason(model: str, known: Iterable[str] = ()) -> str:
    """Why `model` is refused, with the `known` names it may have meant first."""
    like = close_names(model, known)
    hint = f"did you mean {', '.join(like)}? Else " if like else ""
    return (f"unknown model {model!r}: {hint}register it (schedtune models add {model} with "
            "--torchvision ARCH, --entry-point package.module:factory --input SPEC, or "
            "--transformer-config config.json) or declare the GPU memory the pod needs "
            "(schedtune.io/gpu-memory: MiB per GPU)")
