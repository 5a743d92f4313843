"""Transformer shapes and LLM job descriptions: validated, frozen, no arithmetic on memory.

`TransformerConfig` is an architecture (layers, widths, heads, vocabulary and the few
choices that change the parameter count: gated or classic MLP, RMSNorm or LayerNorm,
biases, learned positions). `TransformerConfig.from_mapping` reads our own field names or a
Hugging Face ``config.json`` (``num_hidden_layers``, ``hidden_size``, ...), so users can
register their own model. `LlmWorkload` is what a job does with it (train or serve, dtype,
sequence length, LoRA, checkpointing, concurrency). `shipped_configs` loads the published
configurations in ``profiles/llm/configs.json``.

Pure Python: no torch, no numpy. Bad input raises `InvalidJob` naming the field and what is
accepted; an unknown shipped model raises `UnknownModel`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from estimator.errors import DataMissing, InvalidJob, UnknownModel

LLM_PROFILES_DIR = Path(__file__).resolve().parents[2] / "profiles" / "llm"
CONFIGS_FILE = "configs.json"
MODEL_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")

#: Bytes per element. int4 weights carry one fp32 scale per 64-weight block (NF4/GPTQ-style,
#: 4 + 32/64 bits); int8 weights one fp32 scale per output row, negligible.
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5625}
WEIGHT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
QUANTISED = ("fp8", "int8", "int4")  # storage only: matmuls run in bf16
KV_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8")
TASKS = ("train", "inference")
MODES = ("full", "lora")
OPTIMIZERS = ("adamw", "adamw-fused", "adamw-8bit", "sgd")
ATTENTION = ("flash", "eager")
LINEARS = ("q", "k", "v", "o", "gate", "up", "down")
LORA_TARGET_SETS = {"all-linear": LINEARS, "attention": ("q", "k", "v", "o"), "qv": ("q", "v")}
MAX_DIM = 2**24  # far above any published width; catches unit mistakes and overflow
MAX_TOKENS = 2**22

_DECODER_TYPES = {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text",
                  "phi3", "olmo2", "granite"}
_ENCODER_TYPES = {"bert", "roberta", "xlm-roberta", "camembert", "electra"}
#: Our field name -> the Hugging Face config.json key that means the same.
_HF_KEYS = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
            "kv_heads": "num_key_value_heads", "intermediate": "intermediate_size",
            "vocab": "vocab_size", "tied_embeddings": "tie_word_embeddings",
            "max_position": "max_position_embeddings", "head_dim": "head_dim",
            "type_vocab": "type_vocab_size"}


def _int(name: str, value: Any, low: int = 1, high: int = MAX_DIM) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidJob(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    return value


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidJob(f"{name} must be true or false, got {value!r}")
    return value


def _choice(name: str, value: Any, accepted: tuple[str, ...]) -> str:
    if value not in accepted:
        raise InvalidJob(f"{name} must be one of {', '.join(accepted)}; got {value!r}")
    return value


@dataclass(frozen=True)
class TransformerConfig:
    """A dense transformer's shape. Widths are elements, not bytes.

    Invariants (checked in `__post_init__`): every size positive; ``heads`` divisible by
    ``kv_heads`` (grouped-query attention); ``hidden`` divisible by ``heads`` unless
    ``head_dim`` is given. Encoders (BERT-style) count no LM head; decoders count one unless
    ``tied_embeddings``.
    """

    kind: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    max_position: int
    tied_embeddings: bool = False
    head_dim: int = 0  # 0: hidden // heads
    mlp: str = "gated"  # gated: gate, up, down (SwiGLU/GeGLU); classic: up, down
    norm: str = "rms"  # rms: a weight; layer: weight and bias
    norms_per_layer: int = 2  # Gemma 2 has 4 (pre and post attention and feed-forward)
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    learned_positions: bool = False
    type_vocab: int = 0
    pooler: bool = False

    def __post_init__(self) -> None:
        _choice("kind", self.kind, ("decoder", "encoder"))
        for name in ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab",
                     "max_position"):
            _int(name, getattr(self, name))
        _int("head_dim", self.head_dim, 0)
        _int("type_vocab", self.type_vocab, 0)
        _int("norms_per_layer", self.norms_per_layer, 1, 8)
        _choice("mlp", self.mlp, ("gated", "classic"))
        _choice("norm", self.norm, ("rms", "layer"))
        for name in ("tied_embeddings", "qkv_bias", "o_bias", "mlp_bias", "learned_positions",
                     "pooler"):
            _bool(name, getattr(self, name))
        if self.kv_heads > self.heads or self.heads % self.kv_heads:
            raise InvalidJob(f"heads ({self.heads}) must be a multiple of kv_heads "
                             f"({self.kv_heads})")
        if not self.head_dim and self.hidden % self.heads:
            raise InvalidJob(f"hidden ({self.hidden}) is not divisible by heads ({self.heads});"
                             " give head_dim explicitly")

    @property
    def dim_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        """Width of the query projection (heads x head_dim)."""
        return self.heads * self.dim_head

    @property
    def kv_dim(self) -> int:
        """Width of each of the key and value projections (kv_heads x head_dim)."""
        return self.kv_heads * self.dim_head

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each projection in one layer, by `LINEARS` name."""
        h, f = self.hidden, self.intermediate
        shapes = {"q": (h, self.q_dim), "k": (h, self.kv_dim), "v": (h, self.kv_dim),
                  "o": (self.q_dim, h), "up": (h, f), "down": (f, h)}
        if self.mlp == "gated":
            shapes["gate"] = (h, f)
        return shapes

    def embedding_parameters(self) -> int:
        """Token, position and token-type embeddings (lookups, not matmuls)."""
        positions = self.max_position if self.learned_positions else 0
        return (self.vocab + positions + self.type_vocab) * self.hidden

    def layer_parameters(self) -> int:
        h = self.hidden
        weights = sum(i * o for i, o in self.linear_shapes().values())
        biases = (self.q_dim + 2 * self.kv_dim) * self.qkv_bias + h * self.o_bias
        if self.mlp_bias:
            biases += h + self.intermediate * (2 if self.mlp == "gated" else 1)
        norm = h if self.norm == "rms" else 2 * h
        return weights + biases + self.norms_per_layer * norm

    def parameters(self) -> int:
        """Exact parameter count: embeddings, layers, final or embedding norm, pooler, head."""
        norm = self.hidden if self.norm == "rms" else 2 * self.hidden
        total = self.embedding_parameters() + self.layers * self.layer_parameters() + norm
        if self.pooler:
            total += self.hidden * self.hidden + self.hidden
        if self.kind == "decoder" and not self.tied_embeddings:
            total += self.vocab * self.hidden
        return total

    def matmul_parameters(self) -> int:
        """Parameters used in matrix products per token (FLOPs = 2 x this): the LM head
        counts once even when tied; embedding lookups do not count."""
        head = self.vocab * self.hidden if self.kind == "decoder" else 0
        return self.layers * sum(i * o for i, o in self.linear_shapes().values()) + head

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> TransformerConfig:
        """Build from our field names or a Hugging Face ``config.json``.

        A mapping with ``model_type`` or ``architectures`` is read as a Hugging Face config:
        unrelated keys (rope, eps, ids) are ignored and the architecture's conventions are
        filled in (Qwen2: q/k/v biases; Gemma 2: four norms per layer; BERT/RoBERTa: biases,
        LayerNorm, learned positions, pooler). Otherwise every key must be a field.
        Raises `InvalidJob` naming the field.
        """
        if not isinstance(data, Mapping):
            raise InvalidJob(f"a model config must be a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        hf = "model_type" in data or "architectures" in data
        if not hf and (unknown := sorted(set(data) - known)):
            raise InvalidJob(f"unknown config fields {unknown}; accepted: {sorted(known)}")
        values: dict[str, Any] = dict(_hf_defaults(data)) if hf else {}
        for name in known:
            ours, theirs = data.get(name), data.get(_HF_KEYS.get(name, ""))
            if ours is not None and theirs is not None and ours != theirs:
                raise InvalidJob(f"{name}={ours!r} contradicts {_HF_KEYS[name]}={theirs!r}")
            if (value := ours if ours is not None else theirs) is not None:
                values[name] = value
        if "kv_heads" not in values and "heads" in values:
            values["kv_heads"] = values["heads"]  # no GQA key: multi-head attention
        missing = [n for n in ("kind", "layers", "hidden", "heads", "intermediate", "vocab",
                               "max_position") if n not in values]
        if missing:
            raise InvalidJob(f"model config lacks {missing} (Hugging Face keys: "
                             f"{[_HF_KEYS.get(m, m) for m in missing]})")
        if values.get("head_dim") is None:
            values["head_dim"] = 0
        return cls(**values)


def read_json(path: Path) -> Any:
    """The value of a UTF-8 JSON file; `InvalidJob` says why it cannot be read as one."""
    try:
        return json.loads(Path(path).read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidJob(f"{path} is not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    except ValueError as exc:
        raise InvalidJob(f"{path} is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise InvalidJob(f"{path} is nested too deeply to read") from exc


def _hf_defaults(data: Mapping[str, Any]) -> dict[str, Any]:
    model_type = data.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise InvalidJob(f"model_type must be a string, got {model_type!r:.60}")
    if model_type in _ENCODER_TYPES:
        return {"kind": "encoder", "mlp": "classic", "norm": "layer", "qkv_bias": True,
                "o_bias": True, "mlp_bias": True, "learned_positions": True, "pooler": True,
                "type_vocab": data.get("type_vocab_size", 2), "tied_embeddings": True}
    if model_type in _DECODER_TYPES:
        bias = data.get("attention_bias", False)
        out = {"kind": "decoder", "mlp": "gated", "norm": "rms", "qkv_bias": bias,
               "o_bias": bias, "mlp_bias": data.get("mlp_bias", False)}
        if model_type == "qwen2":
            out["qkv_bias"] = True  # Qwen2 hard-codes biases on q, k and v (not o)
        if model_type in ("gemma2", "gemma3_text"):
            out["norms_per_layer"] = 4
        if model_type.startswith("gemma"):
            out["tied_embeddings"] = data.get("tie_word_embeddings", True)
        return out
    return {}  # unknown type: the mapping must say kind, mlp, norm itself


@dataclass(frozen=True)
class LlmWorkload:
    """What a job does with a model. Sizes are tokens and sequences, never bytes.

    * ``task``: ``train`` (``batch`` sequences of ``seq_len`` per step) or ``inference``
      (``concurrent_seqs`` sequences, each holding ``seq_len`` tokens of KV cache, prompt
      plus ``output_tokens`` generated; ``output_tokens`` None: half of ``seq_len``).
    * ``dtype``: weight storage. int8/int4/fp8 weights compute in bf16 (QLoRA, bitsandbytes).
    * ``mode`` (train): ``full`` or ``lora`` with ``lora_rank`` on ``lora_targets``
      (``all-linear`` by default: q, k, v, o, gate, up, down; or ``attention``, ``qv``, or a
      tuple of names). ``adapter_fp32``: adapters, their inputs and optimizer state in fp32
      (PEFT's default); False keeps them in the compute dtype (torchtune, LitGPT).
    * ``master_weights`` (full, bf16/fp16): fp32 master copy and fp32 AdamW moments (ZeRO's
      16 bytes per parameter); False is pure 16-bit training (optimizer state in bf16).
    * ``loss_chunks``: cross-entropy computed in that many chunks (torchtune's chunked loss).
    * ``prefill_tokens`` (inference): tokens in one forward pass; None: all prompts at once,
      capped at 8192 (a serving engine's batched-token budget, vLLM's and TGI's order).
    """

    task: str = "train"
    dtype: str = "bf16"
    seq_len: int = 2048
    batch: int = 1
    mode: str = "full"
    lora_rank: int = 16
    lora_targets: str | tuple[str, ...] = "all-linear"
    lora_dropout: bool = False
    adapter_fp32: bool = True
    gradient_checkpointing: bool = False
    optimizer: str = "adamw"
    master_weights: bool = True
    loss_chunks: int = 1
    attention: str = "flash"
    concurrent_seqs: int = 1
    output_tokens: int | None = None
    kv_dtype: str | None = None
    prefill_tokens: int | None = None

    def __post_init__(self) -> None:
        _choice("task", self.task, TASKS)
        _choice("dtype", self.dtype, WEIGHT_DTYPES)
        _int("seq_len", self.seq_len, 1, MAX_TOKENS)
        _int("batch", self.batch, 1, 4096)
        _choice("mode", self.mode, MODES)
        _int("lora_rank", self.lora_rank, 1, 65536)
        targets = self.lora_targets
        if isinstance(targets, str):
            if targets not in LORA_TARGET_SETS:
                raise InvalidJob(f"lora_targets must be one of {sorted(LORA_TARGET_SETS)} or "
                                 f"a list of {', '.join(LINEARS)}; got {targets!r}")
        elif (not isinstance(targets, tuple) or not targets
              or any(t not in LINEARS for t in targets) or len(set(targets)) != len(targets)):
            raise InvalidJob(f"lora_targets must name distinct linears among "
                             f"{', '.join(LINEARS)}; got {targets!r}")
        for name in ("lora_dropout", "adapter_fp32", "gradient_checkpointing", "master_weights"):
            _bool(name, getattr(self, name))
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        _int("loss_chunks", self.loss_chunks, 1, 4096)
        _choice("attention", self.attention, ATTENTION)
        _int("concurrent_seqs", self.concurrent_seqs, 1, 65536)
        if self.output_tokens is not None:
            _int("output_tokens", self.output_tokens, 0, MAX_TOKENS)
            if self.task == "inference" and self.output_tokens >= self.seq_len:
                raise InvalidJob(f"output_tokens ({self.output_tokens}) must be below seq_len "
                                 f"({self.seq_len}): the prompt needs at least one token")
        if self.kv_dtype is not None:
            _choice("kv_dtype", self.kv_dtype, KV_DTYPES)
        if self.prefill_tokens is not None:
            _int("prefill_tokens", self.prefill_tokens, 1, MAX_TOKENS)
        if self.task == "train" and self.mode == "full" and self.dtype in QUANTISED:
            raise InvalidJob(f"full fine-tuning needs fp32, bf16 or fp16 weights, not "
                             f"{self.dtype}; quantised weights train with mode='lora' (QLoRA)")
        if self.task == "inference" and self.gradient_checkpointing:
            raise InvalidJob("gradient_checkpointing applies to training only")

    @property
    def compute_bytes(self) -> float:
        """Bytes per activation element: fp32 runs in fp32, everything else in 16 bits."""
        return 4.0 if self.dtype == "fp32" else 2.0

    @property
    def targets(self) -> tuple[str, ...]:
        t = self.lora_targets
        return LORA_TARGET_SETS[t] if isinstance(t, str) else t

    @property
    def kv_bytes(self) -> float:
        return DTYPE_BYTES[self.kv_dtype] if self.kv_dtype else self.compute_bytes

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> LlmWorkload:
        """Build from a mapping of field names (lists accepted for ``lora_targets``)."""
        known = {f.name for f in fields(cls)}
        if not isinstance(data, Mapping):
            raise InvalidJob(f"a workload must be a mapping, got {type(data).__name__}")
        if unknown := sorted(set(data) - known):
            raise InvalidJob(f"unknown workload fields {unknown}; accepted: {sorted(known)}")
        values = dict(data)
        if isinstance(values.get("lora_targets"), list):
            values["lora_targets"] = tuple(values["lora_targets"])
        return cls(**values)

    def with_(self, **changes: Any) -> LlmWorkload:
        """A copy with fields changed (validated again)."""
        return replace(self, **changes)


@lru_cache(maxsize=4)
def _load_configs(path: Path) -> dict[str, TransformerConfig]:
    try:
        entries = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise DataMissing(f"no LLM configurations at {path}") from exc
    out = {}
    for name, entry in entries["models"].items():
        if not MODEL_NAME.fullmatch(name):
            raise InvalidJob(f"model name {name!r} in {path} does not match {MODEL_NAME.pattern}")
        try:
            out[name] = TransformerConfig.from_mapping(entry["config"])
        except InvalidJob as exc:
            raise InvalidJob(f"{path}: {name}: {exc}") from exc
    return out


def shipped_configs(directory: Path = LLM_PROFILES_DIR) -> dict[str, TransformerConfig]:
    """The published configurations shipped in ``profiles/llm/configs.json``, by name."""
    return dict(_load_configs(directory / CONFIGS_FILE))


def shipped_config(name: str, directory: Path = LLM_PROFILES_DIR) -> TransformerConfig:
    """One shipped configuration; `UnknownModel` lists the names."""
    configs = _load_configs(directory / CONFIGS_FILE)
    if name not in configs:
        raise UnknownModel(f"unknown LLM {name!r}; shipped: {', '.join(sorted(configs))}")
    return configs[name]
