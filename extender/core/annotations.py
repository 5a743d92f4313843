"""Pod annotations -> `PodDemand`. Pure. Pods without ``schedtune.io/model`` give None.

| annotation                | values                 | default                       |
|---------------------------|------------------------|-------------------------------|
| schedtune.io/model        | a registered model     | (absent: pod passes through)  |
| schedtune.io/task         | train, inference       | train                         |
| schedtune.io/batch-size   | integer 1..4096        | 32 (train), 1 (inference)     |
| schedtune.io/epochs       | integer 1..1000000     | 1 (train only)                |
| schedtune.io/requests     | integer 1..1000000     | 1000 (inference only)         |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.model import BATCH, EPOCHS, MODEL, REQUESTS, TASK, PodDemand, PodInfo

TASKS = ("train", "inference")
MAX_BATCH = 4096
MAX_UNITS = 1_000_000
DEFAULT_BATCH = {"train": 32, "inference": 1}
DEFAULT_UNITS = {"train": 1, "inference": 1000}
MAX_VALUE_CHARS = 256


class AnnotationError(ValueError):
    """An annotation a user must fix; the message names it and the accepted values."""


def _integer(annotations: Mapping[str, Any], key: str, default: int, upper: int) -> int:
    raw = annotations.get(key)
    if raw is None:
        return default
    text = str(raw).strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= upper:
        raise AnnotationError(f"{key}={str(raw)[:40]!r} is invalid: expected an integer "
                              f"in 1..{upper}")
    return int(text)


def parse_demand(pod: PodInfo) -> PodDemand | None:
    """The pod's demand from its annotations; None for pods without ``schedtune.io/model``.
    Raises `AnnotationError` naming the annotation to fix."""
    annotations = pod.annotations
    model = annotations.get(MODEL)
    if model is None:
        return None
    if not isinstance(model, str) or not model.strip() or len(model) > MAX_VALUE_CHARS:
        raise AnnotationError(f"{MODEL} must be a model name such as resnet50")
    task = annotations.get(TASK, "train")
    if task not in TASKS:
        raise AnnotationError(f"{TASK}={str(task)[:40]!r} is invalid: expected one of "
                              f"{', '.join(TASKS)}")
    batch = _integer(annotations, BATCH, DEFAULT_BATCH[task], MAX_BATCH)
    units_key = EPOCHS if task == "train" else REQUESTS
    units = _integer(annotations, units_key, DEFAULT_UNITS[task], MAX_UNITS)
    return PodDemand(pod.uid, pod.name, pod.namespace, model.strip(), task, batch, units)
