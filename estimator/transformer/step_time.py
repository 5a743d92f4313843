"""Analytic time of an LLM job: seconds per training step, seconds per served request.

Training is compute-bound: FLOPs over the GPU's dense 16-bit tensor throughput
(`estimator.transformer.gpus`) times a model FLOPs utilisation (``mfu``, 0.4 by default, what
well-tuned single-GPU fine-tuning reaches; PaLM's paper reports 46 % at scale). Per token,
a forward pass costs 2 x the matmul parameters (LM head included, embeddings not) plus
attention, 2 x q_dim x seq_len per layer for causal decoders (4 x for encoders). A full step
costs 3 forward passes (the backward computes input and weight gradients), LoRA 2 (no
weight gradients for frozen weights), and gradient checkpointing one more (the recompute).
fp32 runs at half the 16-bit rate (TF32 on Ampere and later; optimistic before).

Inference: the prefill of all prompts is compute-bound (``mfu``); each decode step, which
gives every concurrent sequence one token, reads all weights and the KV cache so far, so it
takes the longer of bytes / (bandwidth x ``bandwidth_efficiency``, 0.8) and its FLOPs at
``mfu``. A request's latency is prefill + output_tokens x step; ``seconds_per_request``
amortises it over the concurrent sequences (the throughput view a queue needs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from estimator.catalogue import GpuType
from estimator.errors import InvalidJob
from estimator.transformer.config import LlmWorkload, TransformerConfig
from estimator.transformer.gpus import resolve
from estimator.transformer.memory import kv_cache_bytes, output_tokens, weight_bytes

DEFAULT_MFU = 0.4
DEFAULT_BANDWIDTH_EFFICIENCY = 0.8


@dataclass(frozen=True)
class TimeEstimate:
    """Seconds; training fills ``step_s``, inference the request fields."""

    task: str
    step_s: float = 0.0
    tokens_per_s: float = 0.0
    prefill_s: float = 0.0
    decode_step_s: float = 0.0
    request_latency_s: float = 0.0
    seconds_per_request: float = 0.0

    def as_dict(self) -> dict[str, float | str]:
        return asdict(self)


def forward_flops_per_token(config: TransformerConfig, context: float) -> float:
    """Forward FLOPs for one token attending to ``context`` tokens (average)."""
    attention = (4.0 if config.kind == "encoder" else 2.0) * config.q_dim * context
    return 2.0 * config.matmul_parameters() + config.layers * attention


def _flops_rate(workload: LlmWorkload, tflops: float, mfu: float) -> float:
    if not 0 < mfu <= 1:
        raise InvalidJob(f"mfu must be in (0, 1], got {mfu!r}")
    return tflops * 1e12 * mfu * (0.5 if workload.dtype == "fp32" else 1.0)


def estimate_time(config: TransformerConfig, workload: LlmWorkload, gpu_type: str | GpuType,
                  mfu: float = DEFAULT_MFU,
                  bandwidth_efficiency: float = DEFAULT_BANDWIDTH_EFFICIENCY) -> TimeEstimate:
    """Time of one training step or one request; raises `UnknownGPU`, `InvalidJob`."""
    gpu, spec = resolve(gpu_type)
    rate = _flops_rate(workload, spec.tflops, mfu)
    if workload.task == "train":
        tokens = workload.batch * workload.seq_len
        passes = 3.0 if workload.mode == "full" else 2.0
        passes += 1.0 if workload.gradient_checkpointing else 0.0
        step = passes * tokens * forward_flops_per_token(config, workload.seq_len) / rate
        return TimeEstimate("train", step_s=step, tokens_per_s=tokens / step)
    if not 0 < bandwidth_efficiency <= 1:
        raise InvalidJob(f"bandwidth_efficiency must be in (0, 1], got {bandwidth_efficiency!r}")
    out = output_tokens(config, workload)
    prompt = workload.seq_len - out
    prefill = (workload.concurrent_seqs * prompt
               * forward_flops_per_token(config, prompt) / rate)
    step = 0.0
    if out:
        mean_context = prompt + out / 2.0
        kv_read = kv_cache_bytes(config, workload) * mean_context / workload.seq_len
        read_s = ((weight_bytes(config, workload) + kv_read)
                  / (gpu.mem_bandwidth_gbs * 1e9 * bandwidth_efficiency))
        compute_s = (workload.concurrent_seqs
                     * forward_flops_per_token(config, mean_context) / rate)
        step = max(read_s, compute_s)
    latency = prefill + out * step
    return TimeEstimate("inference", prefill_s=prefill, decode_step_s=step,
                        request_latency_s=latency,
                        seconds_per_request=latency / workload.concurrent_seqs)


def seconds_per_step(config: TransformerConfig, workload: LlmWorkload,
                     gpu_type: str | GpuType, mfu: float = DEFAULT_MFU) -> float:
    """Seconds of one training step (``batch`` sequences); `InvalidJob` for inference."""
    if workload.task != "train":
        raise InvalidJob("seconds_per_step is for training; use seconds_per_request")
    return estimate_time(config, workload, gpu_type, mfu).step_s


def seconds_per_request(config: TransformerConfig, workload: LlmWorkload,
                        gpu_type: str | GpuType, mfu: float = DEFAULT_MFU,
                        bandwidth_efficiency: float = DEFAULT_BANDWIDTH_EFFICIENCY) -> float:
    """Amortised seconds per request served ``concurrent_seqs`` at a time."""
    if workload.task != "inference":
        raise InvalidJob("seconds_per_request is for inference; use seconds_per_step")
    return estimate_time(config, workload, gpu_type, mfu,
                         bandwidth_efficiency).seconds_per_request
