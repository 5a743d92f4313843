"""The LLM memory and time model (estimator.transformer*): shapes, parameter counts, how each part
of the estimate moves with the workload, the floor it never goes under, and bad input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from estimator.catalogue import CATALOGUE
from estimator.errors import InvalidJob, UnknownGPU, UnknownModel
from estimator.transformer import (LlmWorkload, TransformerConfig, estimate_memory, estimate_time,
                           lower_bound_mib, padded_estimate_mib, seconds_per_request,
                           seconds_per_step, shipped_config, shipped_configs, shipped_pad)
from estimator.transformer.config import LLM_PROFILES_DIR, MODEL_NAME
from estimator.transformer.gpus import LLM_GPU_SPECS
from estimator.transformer.memory import (MIB, kv_cache_bytes, layer_activation_bytes, lora_parameters,
                                  weight_bytes)

CONFIGS = json.loads((LLM_PROFILES_DIR / "configs.json").read_text())["models"]
L8B = shipped_config("llama-3.1-8b")
GIB = 1024.0


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_parameter_count_matches_the_published_one(name: str) -> None:
    entry = CONFIGS[name]
    published = entry["published_parameters"]
    assert abs(shipped_config(name).parameters() / published - 1) < 0.02, name
    assert MODEL_NAME.fullmatch(name)
    assert entry["source"].startswith("https://huggingface.co/")
    assert entry["source"].endswith("config.json")
    assert entry["parameters_source"].startswith("https://")


def test_exact_counts_of_well_known_models() -> None:
    # Counts the model code itself reports (torchtune/PEFT/LitGPT logs, Hub metadata).
    assert L8B.parameters() == 8_030_261_248
    assert shipped_config("llama-2-7b").parameters() == 6_738_415_616
    assert shipped_config("llama-3.2-3b").parameters() == 3_212_749_824
    assert shipped_config("qwen2.5-0.5b").parameters() == 494_032_768  # q/k/v biases, tied
    assert shipped_config("gemma-2-2b").parameters() == 2_614_341_888  # four norms a layer
    assert shipped_config("bert-base").parameters() == 109_482_240  # biases, pooler, positions


def test_lora_parameters_match_what_the_libraries_report() -> None:
    # PEFT's results file reports 9,175,040 trainable for Llama-3.2-3B rank 32 on q and v;
    # torchtune's and LitGPT's Llama 2 7B rank 8 on q and v print 4,194,304.
    three = LlmWorkload(mode="lora", lora_rank=32, lora_targets=("q", "v"))
    assert lora_parameters(shipped_config("llama-3.2-3b"), three) == 9_175_040
    seven = LlmWorkload(mode="lora", lora_rank=8, lora_targets="qv")
    assert lora_parameters(shipped_config("llama-2-7b"), seven) == 4_194_304


def test_hugging_face_keys_and_ours_build_the_same_config() -> None:
    ours = TransformerConfig.from_mapping({
        "kind": "decoder", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
        "intermediate": 14336, "vocab": 128256, "max_position": 131072})
    assert ours == L8B
    hf = TransformerConfig.from_mapping({**CONFIGS["llama-3.1-8b"]["config"],
                                         "rope_theta": 500000.0, "bos_token_id": 1})
    assert hf == L8B  # unrelated config.json keys are ignored


@pytest.mark.parametrize("change, message", [
    ({"num_hidden_layers": 0}, "layers must be an integer"),
    ({"hidden_size": -4096}, "hidden must be an integer"),
    ({"num_attention_heads": 12}, "multiple of kv_heads"),
    ({"num_attention_heads": 24, "num_key_value_heads": 8}, "not divisible by heads"),
    ({"vocab_size": "128256"}, "vocab must be an integer"),
    ({"tie_word_embeddings": "no"}, "tied_embeddings must be true or false"),
    ({"num_hidden_layers": True}, "layers must be an integer"),
    ({"layers": 31}, "contradicts num_hidden_layers"),
    ({"model_type": "mamba"}, "lacks ['kind']"),
])
def test_bad_configs_raise_clear_errors(change: dict, message: str) -> None:
    with pytest.raises(InvalidJob, match=message.replace("[", r"\[").replace("]", r"\]")):
        TransformerConfig.from_mapping({**CONFIGS["llama-3.1-8b"]["config"], **change})


def test_our_own_keys_are_checked_strictly() -> None:
    with pytest.raises(InvalidJob, match="unknown config fields"):
        TransformerConfig.from_mapping({"kind": "decoder", "layerz": 2})
    with pytest.raises(InvalidJob, match="lacks"):
        TransformerConfig.from_mapping({"kind": "decoder", "layers": 2})
    with pytest.raises(InvalidJob, match="kind must be one of"):
        TransformerConfig(kind="seq2seq", layers=1, hidden=8, heads=2, kv_heads=2,
                          intermediate=8, vocab=8, max_position=8)
    with pytest.raises(UnknownModel, match="llama-3.1-8b"):
        shipped_config("llama-9")


@pytest.mark.parametrize("fields, message", [
    ({"dtype": "fp64"}, "dtype must be one of"),
    ({"task": "serve"}, "task must be one of"),
    ({"seq_len": 0}, "seq_len must be an integer"),
    ({"batch": 2.0}, "batch must be an integer"),
    ({"lora_targets": ("q", "qq")}, "lora_targets must name"),
    ({"lora_targets": "everything"}, "lora_targets must be one of"),
    ({"mode": "full", "dtype": "int4"}, "full fine-tuning needs"),
    ({"task": "inference", "seq_len": 128, "output_tokens": 128}, "output_tokens"),
    ({"task": "inference", "gradient_checkpointing": True}, "training only"),
    ({"kv_dtype": "int4"}, "kv_dtype must be one of"),
    ({"gradient_checkpointing": 1}, "true or false"),
])
def test_bad_workloads_raise_clear_errors(fields: dict, message: str) -> None:
    with pytest.raises(InvalidJob, match=message):
        LlmWorkload(**fields)
    with pytest.raises(InvalidJob, match="unknown workload fields"):
        LlmWorkload.from_mapping({"seqlen": 5})


def test_every_catalogue_gpu_has_llm_figures_and_unknown_ones_raise() -> None:
    assert set(LLM_GPU_SPECS) == set(CATALOGUE)
    with pytest.raises(UnknownGPU):
        estimate_memory(L8B, LlmWorkload(), "RTX-9999")


def serving(**kw) -> LlmWorkload:
    return LlmWorkload(task="inference", **{"seq_len": 4096, "concurrent_seqs": 4, **kw})


def test_kv_cache_is_linear_in_length_and_concurrency_and_exact() -> None:
    kv = estimate_memory(L8B, serving(), "A100-80GB").kv_cache
    assert kv == pytest.approx(32 * 2 * 8 * 128 * 2 * 4096 * 4 / MIB)  # 128 KiB a token
    assert estimate_memory(L8B, serving(seq_len=8192), "A100-80GB").kv_cache == \
        pytest.approx(2 * kv)
    assert estimate_memory(L8B, serving(concurrent_seqs=12), "A100-80GB").kv_cache == \
        pytest.approx(3 * kv)
    assert estimate_memory(L8B, serving(kv_dtype="fp8"), "A100-80GB").kv_cache == \
        pytest.approx(kv / 2)


def test_grouped_query_attention_shrinks_the_kv_cache() -> None:
    mha = TransformerConfig(**{**L8B.__dict__, "kv_heads": 32})
    assert kv_cache_bytes(mha, serving()) == pytest.approx(4 * kv_cache_bytes(L8B, serving()))
    assert mha.parameters() > L8B.parameters()


def test_encoders_have_no_kv_cache_and_no_vocabulary_logits() -> None:
    bert = shipped_config("bert-large")
    assert estimate_memory(bert, serving(seq_len=512), "T4").kv_cache == 0
    train = estimate_memory(bert, LlmWorkload(seq_len=512, batch=32), "T4")
    assert train.logits == 0 and train.activations > 0


def test_checkpointing_lowers_activations_and_the_total() -> None:
    job = LlmWorkload(mode="lora", seq_len=4096, batch=2)
    plain = estimate_memory(L8B, job, "A100-80GB")
    ckpt = estimate_memory(L8B, job.with_(gradient_checkpointing=True), "A100-80GB")
    assert ckpt.activations < plain.activations / 5
    assert ckpt.total_mib < plain.total_mib


def test_lora_has_almost_no_gradients_or_optimizer_state() -> None:
    full = estimate_memory(L8B, LlmWorkload(gradient_checkpointing=True), "H100-80GB")
    lora = estimate_memory(L8B, LlmWorkload(mode="lora", gradient_checkpointing=True),
                           "H100-80GB")
    assert lora.gradients + lora.optimizer + lora.master_weights < 0.01 * (
        full.gradients + full.optimizer + full.master_weights)
    assert full.optimizer > 2 * full.weights  # fp32 moments of bf16 weights


def test_mixed_precision_keeps_fp32_master_weights_and_moments() -> None:
    n = L8B.parameters()
    job = LlmWorkload(seq_len=128, gradient_checkpointing=True)
    mixed = lower_bound_mib(L8B, job) * MIB
    pure = lower_bound_mib(L8B, job.with_(master_weights=False)) * MIB
    assert mixed == pytest.approx(16 * n)  # ZeRO: 2 + 2 + 4 + 8 bytes a parameter
    assert pure == pytest.approx(8 * n)
    assert lower_bound_mib(L8B, job.with_(dtype="fp32")) * MIB == pytest.approx(16 * n)


def test_int4_weights_are_about_a_quarter_of_bf16() -> None:
    bf16, int4 = weight_bytes(L8B, serving()), weight_bytes(L8B, serving(dtype="int4"))
    rest = 2.0 * (L8B.parameters() - L8B.layers * L8B.layer_parameters())  # bf16 either way
    rest += 2.0 * L8B.layers * (L8B.layer_parameters() - sum(
        i * o for i, o in L8B.linear_shapes().values()))
    assert (int4 - rest) / (bf16 - rest) == pytest.approx(4.5 / 16)  # 4 bits + block scales
    assert 0.25 < int4 / bf16 < 0.4  # embeddings and LM head stay in bf16
    int8 = weight_bytes(L8B, serving(dtype="int8"))
    assert int4 < int8 < 0.6 * bf16


def test_eager_attention_adds_the_quadratic_term() -> None:
    job = LlmWorkload(mode="lora", seq_len=2048)
    per_token = layer_activation_bytes(L8B, job.with_(attention="eager"))
    assert per_token - layer_activation_bytes(L8B, job) == pytest.approx(32 * 2048 * (4 + 2))
    flash = estimate_memory(L8B, job, "A100-80GB")
    eager = estimate_memory(L8B, job.with_(attention="eager"), "A100-80GB")
    added = (eager.activations - flash.activations) * MIB
    assert added >= L8B.layers * 2048 * 32 * 2048 * (4 + 2)


def test_chunked_loss_halves_the_logits() -> None:
    job = LlmWorkload(mode="lora", seq_len=2048, gradient_checkpointing=True)
    one = estimate_memory(L8B, job, "L40S").logits
    assert one == pytest.approx(2048 * 128256 * 12 / MIB)
    assert estimate_memory(L8B, job.with_(loss_chunks=8), "L40S").logits == pytest.approx(one / 2)


def test_the_peak_moment_is_the_largest_one() -> None:
    ckpt = estimate_memory(L8B, LlmWorkload(gradient_checkpointing=True), "H100-80GB")
    assert ckpt.phase == "optimizer step"  # all gradients plus AdamW's temporaries
    assert ckpt.gradients == pytest.approx(2 * L8B.parameters() / MIB)
    fused = estimate_memory(L8B, LlmWorkload(gradient_checkpointing=True,
                                             optimizer="adamw-fused"), "H100-80GB")
    assert fused.total_mib < ckpt.total_mib
    small = estimate_memory(shipped_config("qwen2.5-0.5b"),
                            LlmWorkload(mode="lora", seq_len=4096, gradient_checkpointing=True),
                            "L4")
    assert small.phase == "loss" and small.logits > small.weights  # big vocabulary


def test_parts_add_up() -> None:
    b = estimate_memory(L8B, serving(), "L4")
    parts = (b.weights + b.gradients + b.optimizer + b.master_weights + b.activations
             + b.logits + b.kv_cache + b.workspace)
    assert b.tensors_mib == pytest.approx(parts)
    assert b.total_mib == pytest.approx(parts + b.cuda_context)
    assert b.as_dict()["total_mib"] == b.total_mib


workloads = st.builds(
    LlmWorkload,
    task=st.sampled_from(("train", "inference")),
    dtype=st.sampled_from(("fp32", "bf16", "fp16")),
    seq_len=st.integers(16, 8192), batch=st.integers(1, 8),
    mode=st.sampled_from(("full", "lora")), lora_rank=st.integers(1, 256),
    lora_targets=st.sampled_from(("all-linear", "attention", "qv", ("down",))),
    lora_dropout=st.booleans(), adapter_fp32=st.booleans(),
    optimizer=st.sampled_from(("adamw", "adamw-fused", "adamw-8bit", "sgd")),
    master_weights=st.booleans(), loss_chunks=st.integers(1, 16),
    attention=st.sampled_from(("flash", "eager")), concurrent_seqs=st.integers(1, 64),
)


@settings(max_examples=150, deadline=None)
@given(workloads, st.sampled_from(sorted(CONFIGS)), st.booleans(),
       st.sampled_from(sorted(CATALOGUE)))
def test_never_below_the_first_principles_floor(job, name, ckpt, gpu) -> None:
    if job.task == "train":
        job = job.with_(gradient_checkpointing=ckpt)
    config = shipped_config(name)
    b = estimate_memory(config, job, gpu)
    floor = lower_bound_mib(config, job)
    assert b.tensors_mib >= floor > 0
    assert b.tensors_mib >= weight_bytes(config, job) / MIB
    if job.task == "inference":
        assert b.kv_cache == pytest.approx(kv_cache_bytes(config, job) / MIB)


def test_quantised_lora_is_never_below_its_floor_either() -> None:
    for dtype in ("int4", "int8", "fp8"):
        job = LlmWorkload(mode="lora", dtype=dtype, seq_len=1024)
        assert estimate_memory(L8B, job, "T4").tensors_mib > lower_bound_mib(L8B, job)


def test_training_time_follows_the_flop_count() -> None:
    job = LlmWorkload(seq_len=2048, batch=4)
    full = seconds_per_step(L8B, job, "A100-80GB")
    tokens = 2048 * 4
    flops = 3 * tokens * (2 * L8B.matmul_parameters() + 32 * 2 * 4096 * 2048)
    assert full == pytest.approx(flops / (312e12 * 0.4))
    assert seconds_per_step(L8B, job.with_(gradient_checkpointing=True), "A100-80GB") == \
        pytest.approx(full * 4 / 3)
    assert seconds_per_step(L8B, job.with_(mode="lora"), "A100-80GB") == pytest.approx(full * 2 / 3)
    assert seconds_per_step(L8B, job, "H100-80GB") < full < seconds_per_step(L8B, job, "A10")
    with pytest.raises(InvalidJob, match="for training"):
        seconds_per_step(L8B, serving(), "A10")
    with pytest.raises(InvalidJob, match="mfu"):
        estimate_time(L8B, job, "A10", mfu=0)


def test_decoding_is_bound_by_memory_bandwidth() -> None:
    job = serving(seq_len=1024, output_tokens=512, concurrent_seqs=1)
    t = estimate_time(L8B, job, "A100-80GB")
    weights_s = weight_bytes(L8B, job) / (2039e9 * 0.8)
    assert t.decode_step_s >= weights_s and t.decode_step_s < 1.1 * weights_s
    assert t.request_latency_s == pytest.approx(t.prefill_s + 512 * t.decode_step_s)
    batched = estimate_time(L8B, job.with_(concurrent_seqs=16), "A100-80GB")
    assert batched.seconds_per_request < t.seconds_per_request  # weights read once per step
    assert seconds_per_request(L8B, job, "A100-80GB") == t.seconds_per_request
    with pytest.raises(InvalidJob, match="for inference"):
        seconds_per_request(L8B, LlmWorkload(), "A10")


def test_padded_estimate_uses_the_shipped_pad() -> None:
    job = LlmWorkload(mode="lora", gradient_checkpointing=True)
    total = estimate_memory(L8B, job, "L40S").total_mib
    assert padded_estimate_mib(L8B, job, "L40S") == pytest.approx(total * (1 + shipped_pad()))
    assert padded_estimate_mib(L8B, job, "L40S", pad=0) == pytest.approx(total)
    with pytest.raises(ValueError, match="pad"):
        padded_estimate_mib(L8B, job, "L40S", pad=-0.1)
    assert set(shipped_configs()) == set(CONFIGS)
