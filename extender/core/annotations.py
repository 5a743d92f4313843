"""Pod annotations -> `PodDemand`. Pure. Pods without ``schedtune.io/model`` give None.

| annotation                | values                                   | default                    |
|---------------------------|------------------------------------------|----------------------------|
| schedtune.io/model        | a model name: 1..63 chars of a-z A-Z 0-9 | (absent: pod passes        |
|                           | . _ -, starting and ending alphanumeric  | through)                   |
| schedtune.io/task         | train, inference                         | train                      |
| schedtune.io/batch-size   | integer 1..4096                          | 32 (train), 1 (inference)  |
| schedtune.io/epochs       | integer 1..1000000                       | 1 (train only)             |
| schedtune.io/requests     | integer 1..1000000                       | 1000 (inference only)      |

Every value is bounded before it is converted: a string (Kubernetes annotations are
strings) of at most `MAX_VALUE_CHARS` characters, surrounding spaces ignored; an
integer has at most `MAX_INTEGER_CHARS` ASCII digits. Anything else raises
`AnnotationError`, a refusal the user can read and fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from extender.model import BATCH, EPOCHS, MODEL, REQUESTS, TASK, PodDemand, PodInfo

TASKS = ("train", "inference")
MAX_BATCH = 4096
MAX_UNITS = 1_000_000
DEFAULT_BATCH = {"train": 32, "inference": 1}
DEFAULT_UNITS = {"train": 1, "inference": 1000}
MAX_VALUE_CHARS = 256
MAX_INTEGER_CHARS = 7  # len("1000000"); leading zeros allowed within it
MAX_MODEL_CHARS = 63
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


def parse_demand(pod: PodInfo) -> PodDemand | None:
    """The pod's demand from its annotations; None for pods without ``schedtune.io/model``.
    Raises `AnnotationError` naming the annotation to fix."""
    annotations = pod.annotations
    model = _model(annotations)
    if model is None:
        return None
    task = _text(annotations, TASK, f"one of {', '.join(TASKS)}")
    task = "train" if task is None else task
    if task not in TASKS:
        raise _refuse(TASK, annotations[TASK], f"one of {', '.join(TASKS)}")
    batch = _integer(annotations, BATCH, DEFAULT_BATCH[task], MAX_BATCH)
    units_key = EPOCHS if task == "train" else REQUESTS
    units = _integer(annotations, units_key, DEFAULT_UNITS[task], MAX_UNITS)
    return PodDemand(pod.uid, pod.name, pod.namespace, model, task, batch, units)
