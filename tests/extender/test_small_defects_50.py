"""Issue #50 item 7 through the HTTP verbs (real Redis): the transformer annotations are
refused wherever no transformer estimate reads them (a pod that names no model, a model
the regressors estimate), whatever their value; an unknown model name is answered with
the name it may have meant.
"""

from __future__ import annotations

import pytest

from extender.model import (
    CHECKPOINTING,
    CONCURRENCY,
    DTYPE,
    GPU_MEMORY,
    LORA_RANK,
    SEQ_LEN,
    TRAIN_MODE,
)
from tests.builders import filter_args, make_node, make_pod

A10 = make_node("a10", "NVIDIA-A10", count=1, memory_mib=23028)
# Each at its default value (what the estimator would assume anyway), with its task.
AT_DEFAULT = [
    ("train", {SEQ_LEN: "2048"}),
    ("train", {DTYPE: "bf16"}),
    ("train", {TRAIN_MODE: "full"}),
    ("train", {TRAIN_MODE: "lora", LORA_RANK: "16"}),
    ("train", {CHECKPOINTING: "false"}),
    ("inference", {CONCURRENCY: "1"}),
]


def _refusal(client, pod: dict) -> str:
    out = client.post("/filter", json=filter_args(pod, [A10])).get_json()
    assert out["Nodes"]["items"] == [], out
    return out["FailedAndUnresolvableNodes"]["a10"]


def _pod(model: str | None, task: str, **annotations: str) -> dict:
    return make_pod(model=model, task=task, **annotations)


@pytest.mark.parametrize("task, given", AT_DEFAULT)
def test_transformer_annotations_on_a_declared_pod_are_refused(client, task, given) -> None:
    reason = _refusal(client, _pod(None, task, **{GPU_MEMORY: "8000", **given}))
    assert "apply to transformer models only" in reason and GPU_MEMORY in reason


@pytest.mark.parametrize("task, given", AT_DEFAULT)
def test_transformer_annotations_on_a_cnn_are_refused_whatever_their_value(
        client, task, given) -> None:
    reason = _refusal(client, _pod("resnet50", task, **given))
    assert "apply to transformer models only" in reason


def test_the_same_annotations_on_a_transformer_model_are_accepted(client) -> None:
    pod = _pod("qwen2.5-0.5b", "train", batch=1, **{
        SEQ_LEN: "512", DTYPE: "bf16", TRAIN_MODE: "full", CHECKPOINTING: "false"})
    out = client.post("/filter", json=filter_args(pod, [A10])).get_json()
    assert out["Error"] == "" and not out["FailedAndUnresolvableNodes"], out


def test_a_model_name_wrong_in_case_is_answered_with_the_right_one(client) -> None:
    assert "did you mean resnet50?" in _refusal(client, _pod("ResNet50", "train"))
