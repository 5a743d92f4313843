"""LLM pods through the HTTP verbs: shipped configurations, the transformer annotations,
a registered config.json, and what cannot fit (real Redis; the analytic estimator)."""

from __future__ import annotations

import pytest

from estimator.transformer import LlmWorkload, padded_estimate_mib, shipped_config
from extender.model import (
    CHECKPOINTING, CONCURRENCY, DTYPE, LORA_RANK, RESERVED_MIB, SEQ_LEN, SIZING, TRAIN_MODE,
)  # fmt: skip
from scripts import models
from tests.builders import bind_args, filter_args, make_node, make_pod

A10 = make_node("a10", "NVIDIA-A10", count=1, memory_mib=23028)
L40S = make_node("l40s", "NVIDIA-L40S", count=1, memory_mib=46068)
H100 = make_node("h100", "NVIDIA-H100-80GB-HBM3", count=8, memory_mib=81559)
LORA = {TRAIN_MODE: "lora", LORA_RANK: "16", SEQ_LEN: "2048", CHECKPOINTING: "true"}


def _passed(client, pod, nodes) -> tuple[list[str], dict]:
    out = client.post("/filter", json=filter_args(pod, nodes)).get_json()
    return [n["metadata"]["name"] for n in (out["Nodes"] or {}).get("items", [])], out


def test_a_lora_fine_tune_reserves_the_analytic_estimate(client, binder) -> None:
    pod = make_pod(model="llama-3.1-8b", batch=2, epochs=500, **LORA)
    passed, _ = _passed(client, pod, [A10, L40S])
    # 15 GiB of bf16 weights, adapters, and 6 GiB of fp32 logits for the loss (128k vocabulary):
    # more than an A10's 22.5 GiB once padded.
    assert passed == ["l40s"]
    assert client.post("/bind", json=bind_args(pod, "l40s")).get_json() == {"Error": ""}
    annotations = binder.calls[-1][4]
    job = LlmWorkload(task="train", mode="lora", lora_rank=16, seq_len=2048, batch=2,
                      gradient_checkpointing=True)
    expected = padded_estimate_mib(shipped_config("llama-3.1-8b"), job, "L40S")
    assert float(annotations[RESERVED_MIB]) == pytest.approx(expected, abs=1)
    assert "analytic transformer estimate" in annotations[SIZING]


def test_full_fine_tuning_needs_far_more_than_lora(client) -> None:
    passed, out = _passed(client, make_pod(model="llama-3.1-8b", batch=2, **{SEQ_LEN: "2048"}),
                          [A10, L40S])
    assert passed == []  # weights, gradients, fp32 master weights and AdamW: > 100 GiB
    assert "MiB short" in out["FailedAndUnresolvableNodes"]["l40s"]


def test_serving_grows_with_context_and_concurrent_sequences(client, binder) -> None:
    def reserved(**annotations: str) -> float:
        pod = make_pod(model="llama-3.1-8b", task="inference", batch=1, requests=100,
                       **{DTYPE: "bf16", **annotations})
        assert _passed(client, pod, [H100])[0] == ["h100"]
        assert client.post("/bind", json=bind_args(pod, "h100")).get_json() == {"Error": ""}
        return float(binder.calls[-1][4][RESERVED_MIB])

    small = reserved(**{SEQ_LEN: "4096", CONCURRENCY: "1"})
    assert 15_000 < small < 30_000  # 15 GiB of weights, a little KV cache
    assert reserved(**{SEQ_LEN: "8192", CONCURRENCY: "32"}) > small + 30_000  # 32 x 1 GiB KV
    assert reserved(**{SEQ_LEN: "4096", CONCURRENCY: "1", DTYPE: "int4"}) < small / 2


def test_transformer_annotations_on_other_models_are_refused(client) -> None:
    _, out = _passed(client, make_pod(model="resnet50", **{SEQ_LEN: "512"}), [A10])
    assert "apply to transformer models only" in out["FailedAndUnresolvableNodes"]["a10"]


def test_a_registered_config_json_is_estimated_like_a_shipped_one(client, monkeypatch,
                                                                  redis_url, tmp_path) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "llama", "num_hidden_layers": 16, "hidden_size": 2048, '
                      '"num_attention_heads": 32, "num_key_value_heads": 8, '
                      '"intermediate_size": 8192, "vocab_size": 128256, '
                      '"max_position_embeddings": 131072, "tie_word_embeddings": true}')
    pod = make_pod(model="our-1b", task="inference", requests=10, **{SEQ_LEN: "4096"})
    assert _passed(client, pod, [A10])[0] == []  # not registered yet
    assert models.main(["add", "our-1b", "--transformer-config", str(config), "--no-export"]) == 0
    passed, out = _passed(client, pod, [A10])
    assert passed == ["a10"], out
    shipped = make_pod(model="llama-3.2-1b", task="inference", requests=10, **{SEQ_LEN: "4096"})
    assert _passed(client, shipped, [A10])[0] == ["a10"]  # the same shapes as the shipped 1B
    bad = tmp_path / "bad.json"
    bad.write_text('{"model_type": "llama", "num_hidden_layers": 0}')
    assert models.main(["add", "broken", "--transformer-config", str(bad), "--no-export"]) == 2
