"""extender/core/annotations.py: the transformer annotations on a pod that names no model
(declared memory only) are refused, never parsed and then ignored."""

from __future__ import annotations

import pytest

from extender.core import annotations
from extender.core.annotations import AnnotationError, parse_demand
from extender.model import (
    CHECKPOINTING,
    CONCURRENCY,
    DTYPE,
    GPU_MEMORY,
    LORA_RANK,
    MODEL,
    SEQ_LEN,
    TASK,
    TRAIN_MODE,
    PodInfo,
)

# A valid value of each, as a transformer pod of its task would carry it.
VALUES = {SEQ_LEN: ("train", "4096"), DTYPE: ("train", "bf16"), TRAIN_MODE: ("train", "full"),
          LORA_RANK: ("train", "8"), CHECKPOINTING: ("train", "false"),
          CONCURRENCY: ("inference", "4")}


def _pod(**given: str) -> PodInfo:
    return PodInfo("uid-1", "job", "default", given, gpus=1)


def test_every_transformer_key_has_a_case_here() -> None:
    assert set(VALUES) == set(annotations.TRANSFORMER_KEYS)


@pytest.mark.parametrize("key", sorted(VALUES))
def test_a_transformer_annotation_on_a_declared_pod_is_refused(key: str) -> None:
    task, value = VALUES[key]
    extra = {TRAIN_MODE: "lora"} if key == LORA_RANK else {}  # its own rule met
    with pytest.raises(AnnotationError, match="apply to transformer models only") as refused:
        parse_demand(_pod(**{GPU_MEMORY: "30000", TASK: task, key: value, **extra}))
    assert key in str(refused.value) and GPU_MEMORY in str(refused.value)


def test_a_declared_pod_without_them_is_parsed() -> None:
    demand = parse_demand(_pod(**{GPU_MEMORY: "30000"}))
    assert demand is not None and (demand.model, demand.declared_mib) == ("", 30000)


def test_a_transformer_model_with_declared_memory_keeps_them() -> None:
    demand = parse_demand(_pod(**{MODEL: "llama-3.1-8b", GPU_MEMORY: "30000",
                                  SEQ_LEN: "4096", CHECKPOINTING: "true"}))
    assert demand is not None and (demand.seq_len, demand.checkpointing) == (4096, True)


@pytest.mark.parametrize("value, mib, percent", [("30000", 30000, 0), ("47%", 0, 47),
                                                 (" 100% ", 0, 100), ("1 %", 0, 1)])
def test_declared_memory_is_mib_or_a_share_of_each_gpu(value: str, mib: int,
                                                        percent: int) -> None:
    demand = parse_demand(_pod(**{GPU_MEMORY: value}))
    assert demand is not None and (demand.declared_mib, demand.declared_percent) == (mib, percent)


@pytest.mark.parametrize("value", ["%", "0%", "101%", "50%%", "-5%", "½%", "1e2%", "5 0%"])
def test_a_share_that_is_not_1_to_100_percent_is_refused(value: str) -> None:
    with pytest.raises(AnnotationError, match="N% of its memory, N in 1..100"):
        parse_demand(_pod(**{GPU_MEMORY: value}))
