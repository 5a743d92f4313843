"""LLM jobs (issue #16): the public face of the analytic memory and time model.

    from estimator.transformer import LlmWorkload, estimate_memory, padded_estimate_mib, shipped_config
    config = shipped_config("llama-3.1-8b")
    job = LlmWorkload(task="train", mode="lora", lora_rank=16, seq_len=2048, batch=2,
                      gradient_checkpointing=True)
    estimate_memory(config, job, "A10").total_mib      # MiB, by part in the breakdown
    padded_estimate_mib(config, job, "A10")            # x (1 + the shipped pad)
    seconds_per_step(config, job, "A10")

Shapes and jobs: `estimator.transformer.config`; memory: `estimator.transformer.memory`; time:
`estimator.transformer.step_time`; GPU figures: `estimator.transformer.gpus`; validation against published
measurements and the pad: `estimator.transformer.validation` (offline). No torch anywhere: this is
safe on the request path. The pad is read from ``profiles/llm/pad.json`` (written by
``schedtune llm-memory --write-pad``; a test checks it matches the measurements).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from estimator.catalogue import GpuType
from estimator.errors import ArtefactError
from estimator.transformer.config import (DTYPE_BYTES, LLM_PROFILES_DIR, LlmWorkload, TransformerConfig,
                                  shipped_config, shipped_configs)
from estimator.transformer.memory import (MemoryBreakdown, estimate_memory, lower_bound_mib,
                                  padded_mib)
from estimator.transformer.step_time import (TimeEstimate, estimate_time, seconds_per_request,
                                seconds_per_step)

PAD_FILE = "pad.json"


@lru_cache(maxsize=4)
def _read_pad(path: Path) -> float:
    try:
        pad = json.loads(path.read_text())["pad"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ArtefactError(f"cannot read the LLM pad from {path}: {exc}") from exc
    if isinstance(pad, bool) or not isinstance(pad, int | float) or not 0 <= pad < 10:
        raise ArtefactError(f"LLM pad in {path} must be a fraction in [0, 10), got {pad!r}")
    return float(pad)


def shipped_pad(directory: Path = LLM_PROFILES_DIR) -> float:
    """The pad (fraction) derived from the published measurements."""
    return _read_pad(directory / PAD_FILE)


def padded_estimate_mib(config: TransformerConfig, workload: LlmWorkload,
                        gpu_type: str | GpuType, pad: float | None = None) -> float:
    """What to reserve: `estimate_memory` total x (1 + pad), the shipped pad by default."""
    breakdown = estimate_memory(config, workload, gpu_type)
    return padded_mib(breakdown, shipped_pad() if pad is None else pad)


__all__ = [
    "DTYPE_BYTES", "LlmWorkload", "MemoryBreakdown", "TimeEstimate", "TransformerConfig",
    "estimate_memory", "estimate_time", "lower_bound_mib", "padded_estimate_mib", "padded_mib",
    "seconds_per_request", "seconds_per_step", "shipped_config", "shipped_configs",
    "shipped_pad",
]
