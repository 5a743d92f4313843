"""Pod annotations -> `PodDemand`. Pure. Pods with neither ``schedtune.io/model`` nor
``schedtune.io/gpu-memory`` give None (they pass through untouched).

| annotation                          | values                                 | default                  |
|-------------------------------------|----------------------------------------|--------------------------|
| schedtune.io/model                  | a model name: 1..63 chars of a-z A-Z   | (absent: declared memory |
|                                     | 0-9 . _ -, starting and ending         | or pass through)         |
|                                     | alphanumeric                           |                          |
| schedtune.io/task                   | train, inference                       | train                    |
| schedtune.io/batch-size             | integer 1..4096 (all GPUs together)    | 32 (train), 1 (inference)|
| schedtune.io/epochs                 | integer 1..1000000 (LLMs: steps)       | 1 (train only)           |
| schedtune.io/requests               | integer 1..1000000                     | 1000 (inference only)    |
| schedtune.io/gpu-memory             | MiB per GPU, integer 1..1048576, or    | (none: predicted)        |
|                                     | N% of each GPU's memory, N in 1..100   |                          |
| schedtune.io/expected-seconds       | integer 1..9999999                     | (observed, else default) |
| schedtune.io/seq-len                | tokens, integer 1..1048576             | the model's default      |
| schedtune.io/dtype                  | fp32, bf16, fp16, int8, int4           | bf16                     |
| schedtune.io/train-mode             | full, lora (train only)                | full                     |
| schedtune.io/lora-rank              | integer 1..4096 (train-mode lora)      | 16                       |
| schedtune.io/gradient-checkpointing | true, false (train only)               | false                    |
| schedtune.io/concurrent-seqs        | integer 1..4096 (inference only)       | the batch size           |

The GPUs a pod needs at once come from its containers' ``nvidia.com/gpu`` request
(none or 1: one GPU, shared by memory; k > 1: k GPUs of one node). The transformer
annotations (`TRANSFORMER_KEYS`: seq-len down to concurrent-seqs) apply to transformer
models only: refused here on a pod that names no model, by the sizer on other models.

Every value is bounded before it is converted: a string (Kubernetes annotations are
strings) of at most `MAX_VALUE_CHARS` characters, surrounding spaces ignored; an
integer has at most `MAX_INTEGER_CHARS` ASCII digits. Anything else raises
`AnnotationError`, a refusal the user can read and fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from extender.model import (
    BATCH, CHECKPOINTING, CONCURRENCY, DTYPE, EPOCHS, EXPECTED_S, GPU_MEMORY, LORA_RANK, MODEL,
    REQUESTS, SEQ_LEN, TASK, TRAIN_MODE, PodDemand, PodInfo,
)  # fmt: skip

TASKS = ("train", "inference")
MAX_BATCH = 4096
MAX_UNITS = 1_000_000
DEFAULT_BATCH = {"train": 32, "inference": 1}
DEFAULT_UNITS = {"train": 1, "inference": 1000}
MAX_VALUE_CHARS = 256
MAX_INTEGER_CHARS = 7  # len("1000000"); leading zeros allowed within it
MAX_MODEL_CHARS = 63
MAX_DECLARED_MIB = 1 << 20  # 1 TiB per GPU
MAX_EXPECTED_S = 9_999_999
MAX_SEQ_LEN = 1 << 20
MAX_LORA_RANK = 4096
MAX_CONCURRENCY = 4096
MAX_GPUS = 64  # per pod; more is not a request any node can meet
DTYPES = ("fp32", "bf16", "fp16", "int8", "int4")
TRAIN_MODES = ("full", "lora")
DEFAULT_LORA_RANK = 16
BOOLEANS = {"true": True, "false": False}
TRANSFORMER_KEYS = (SEQ_LEN, DTYPE, TRAIN_MODE, LORA_RANK, CHECKPOINTING, CONCURRENCY)
MODEL_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
SHOWN_CHARS = 40  # of a refused value, in the message


class AnnotationError(ValueError):
    """An annotation a user must fix; the message names it and the accepted values."""


def _refuse(key: str, raw: Any, expected: str) -> AnnotationError:
    shown = repr(raw[:SHOWN_CHARS]) if isinstance(raw, str) else f"a JSON {type(raw).__name__}"
    return AnnotationError(f"{key}={shown} is invalid: expected {expected}")


def _text(annotations: Mapping[str, Any], key: str, expected: str) -> str | None:
    """The annotation's value, stripped; None when absent. Raises `AnnotationError` for a
    value that is not a string of at most `MAX_VALUE_CHARS` characters."""
    raw = annotations.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str) or len(raw) > MAX_VALUE_CHARS:
        raise _refuse(key, raw, expected)
    return raw.strip()


def _choice(annotations: Mapping[str, Any], key: str, choices: tuple[str, ...]) -> str:
    """The annotation's value if it is one of `choices`; "" when absent."""
    expected = f"one of {', '.join(choices)}"
    text = _text(annotations, key, expected)
    if text is None:
        return ""
    if text not in choices:
        raise _refuse(key, annotations[key], expected)
    return text


def _integer(annotations: Mapping[str, Any], key: str, default: int, upper: int) -> int:
    expected = f"an integer in 1..{upper}"
    text = _text(annotations, key, expected)
    if text is None:
        return default
    if not (0 < len(text) <= MAX_INTEGER_CHARS and text.isascii() and text.isdigit()):
        raise _refuse(key, annotations[key], expected)
    value = int(text)
    if not 1 <= value <= upper:
        raise _refuse(key, annotations[key], expected)
    return value


def _model(annotations: Mapping[str, Any]) -> str | None:
    expected = (f"a model name such as resnet50 (1..{MAX_MODEL_CHARS} characters: letters, "
                "digits, '.', '_', '-'; first and last a letter or digit)")
    name = _text(annotations, MODEL, expected)
    if name is not None and not MODEL_NAME.fullmatch(name):
        raise _refuse(MODEL, annotations[MODEL], expected)
    return name


def _declared_memory(annotations: Mapping[str, Any]) -> tuple[int, int]:
    """``schedtune.io/gpu-memory`` as (MiB per GPU, 0) or, written ``N%``, (0, N): that
    share of each GPU's memory (HAMi's ``nvidia.com/gpumem-percentage``, KAI's
    ``gpu-fraction``); (0, 0) when absent."""
    expected = f"MiB per GPU, an integer in 1..{MAX_DECLARED_MIB}, or N% of its memory, N in 1..100"
    text = _text(annotations, GPU_MEMORY, expected)
    if text is None or not text.endswith("%"):
        return _integer(annotations, GPU_MEMORY, 0, MAX_DECLARED_MIB), 0
    digits = text[:-1].strip()
    if not (0 < len(digits) <= 3 and digits.isascii() and digits.isdigit()
            and 1 <= int(digits) <= 100):
        raise _refuse(GPU_MEMORY, annotations[GPU_MEMORY], expected)
    return 0, int(digits)


def asks_no_gpu(pod: PodInfo) -> bool:
    """Whether the pod is not ours (neither ``schedtune.io/model`` nor
    ``schedtune.io/gpu-memory``, valid or not) and asks no device of any kind: only its CPU
    can take GPUs out of reach."""
    return pod.no_devices and MODEL not in pod.annotations \
        and GPU_MEMORY not in pod.annotations


def parse_demand(pod: PodInfo) -> PodDemand | None:
    """The pod's demand from its annotations; None for pods that are not ours (neither
    ``schedtune.io/model`` nor ``schedtune.io/gpu-memory``). Raises `AnnotationError`
    naming the annotation to fix."""
    annotations = pod.annotations
    model = _model(annotations)
    declared, percent = _declared_memory(annotations)
    if model is None and not (declared or percent):
        return None
    task = _choice(annotations, TASK, TASKS) or "train"
    batch = _integer(annotations, BATCH, DEFAULT_BATCH[task], MAX_BATCH)
    units_key = EPOCHS if task == "train" else REQUESTS
    units = _integer(annotations, units_key, DEFAULT_UNITS[task], MAX_UNITS)
    if not 0 <= pod.gpus <= MAX_GPUS:
        raise AnnotationError(f"the pod requests {pod.gpus} nvidia.com/gpu; at most "
                              f"{MAX_GPUS} can be placed on one node")
    train_mode = _choice(annotations, TRAIN_MODE, TRAIN_MODES)
    rank = _integer(annotations, LORA_RANK, 0, MAX_LORA_RANK)
    checkpointing = _choice(annotations, CHECKPOINTING, tuple(BOOLEANS))
    concurrency = _integer(annotations, CONCURRENCY, 0, MAX_CONCURRENCY)
    given = [k for k in TRANSFORMER_KEYS if k in annotations]
    if model is None and given:
        # Only a transformer estimate reads them: declared memory is reserved as it is.
        raise AnnotationError(f"{', '.join(given)} apply to transformer models only; this "
                              f"pod names no {MODEL} and is reserved its declared {GPU_MEMORY}")
    _only_for(task, "train", annotations, (TRAIN_MODE, LORA_RANK, CHECKPOINTING))
    _only_for(task, "inference", annotations, (CONCURRENCY,))
    if rank and train_mode != "lora":
        raise AnnotationError(f"{LORA_RANK} needs {TRAIN_MODE}=lora")
    if train_mode == "lora" and not rank:
        rank = DEFAULT_LORA_RANK
    return PodDemand(
        pod.uid, pod.name, pod.namespace, model or "", task, batch, units,
        declared_mib=declared, declared_percent=percent,
        expected_s=_integer(annotations, EXPECTED_S, 0, MAX_EXPECTED_S),
        gpus=max(1, pod.gpus), owner=pod.owner,
        seq_len=_integer(annotations, SEQ_LEN, 0, MAX_SEQ_LEN),
        dtype=_choice(annotations, DTYPE, DTYPES), train_mode=train_mode, lora_rank=rank,
        checkpointing=BOOLEANS.get(checkpointing, False), concurrency=concurrency,
        transformer_annotations=", ".join(given), cpu_milli=pod.cpu_milli,
    )  # fmt: skip


def _only_for(task: str, wanted: str, annotations: Mapping[str, Any],
              keys: tuple[str, ...]) -> None:
    """Refuse annotations that mean something only for `wanted` tasks."""
    if task != wanted and (given := [k for k in keys if k in annotations]):
        raise AnnotationError(f"{', '.join(given)} apply to {wanted} pods only "
                              f"(this one is {task})")
