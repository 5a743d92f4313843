"""Analytic peak GPU memory of an LLM job, by named part (MiB), and its first-principles floor.

The model, for PyTorch eager execution as Hugging Face, torchtune and LitGPT run it:

* **Weights**: parameters in their storage dtype. int8/int4/fp8 quantise the layers' linear
  weights only (bitsandbytes and torchao keep embeddings, norms and the LM head in bf16).
  LoRA adapters are counted here too.
* **Gradients, optimizer, master weights** (training): full fine-tuning with
  ``master_weights`` follows ZeRO's mixed-precision accounting (16-bit weights and
  gradients, fp32 master copy, fp32 AdamW moments: 16 bytes per parameter); pure 16-bit
  training keeps all four in the weights' dtype (8 bytes); fp32 keeps them in fp32.
  LoRA trains only the adapters (fp32 with ``adapter_fp32``). AdamW keeps two moments;
  8-bit AdamW one byte each; SGD none. PyTorch's default (foreach) AdamW allocates one
  moment-sized temporary during the step; the fused and 8-bit kernels do not.
* **Activations** (training): the tensors autograd saves per layer and token, listed
  tensor by tensor in `layer_activation_bytes` (the residual stream's fp32 copy inside
  each RMSNorm/LayerNorm, the inputs of trainable linears, q/k/v and output of attention
  with grouped K/V expanded to all heads as HF, torchtune and LitGPT do before SDPA, the
  gated MLP's gate/up/activation outputs). This is Korthikanti et al. 2022 ("Reducing
  Activation Recomputation in Large Transformer Models", sbh(34 + 5as/h)) made exact for
  GQA, gated MLPs, fp32 norms and frozen weights. Flash/SDPA attention (the default) keeps
  no s x s scores, so the 5as/h term vanishes; ``attention='eager'`` adds it back
  (fp32 softmax plus its 16-bit copy). Frozen linears keep no input, except quantised ones:
  bitsandbytes' 4- and 8-bit matmuls keep it (QLoRA). Gradient checkpointing keeps each
  layer's input and recomputes one layer at a time.
* **Logits** (training, decoders): cross-entropy over the vocabulary in fp32: the saved
  log-softmax plus, while its backward runs, the incoming and outgoing gradients, i.e.
  12 bytes per token and vocabulary entry (6 with an 8-chunk loss). For small models with
  big vocabularies this is often the peak.
* **KV cache** (inference): 2 x layers x kv_heads x head_dim x seq_len x concurrent_seqs.
* **Activations** (inference): one layer's working set for the prefill tokens (no grad),
  plus fp32 logits, softmax and log-probs for the last position of each sequence.
* **Workspace, CUDA context**: per GPU type, `estimator.transformer.gpus`; with quantised weights
  the workspace also holds the largest linear dequantised to bf16 (bitsandbytes and
  torchao matmuls dequantise one weight at a time).

The peak is the largest of four moments of a training step: the loss (all activations and
the logits buffers), the top of the backward pass (all activations, one layer's gradient
buffers, the LM head's gradient), the end of the backward (all gradients, one layer's
buffers) and the optimizer step (all gradients and the optimizer's temporaries).
`MemoryBreakdown.phase` names it; the parts are what is live then.

Not modelled (each lowers real memory, so the estimate errs high): torch.compile's fusions,
fused linear-cross-entropy kernels, activation offloading, CUDA-graph pools of serving
engines (these raise it: the pad covers them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from estimator.catalogue import GpuType
from estimator.transformer.config import DTYPE_BYTES, QUANTISED, LlmWorkload, TransformerConfig
from estimator.transformer.gpus import resolve

MIB = 2**20
SERVING_PREFILL_TOKENS = 8192
INFERENCE_LOGIT_BYTES = 12.0  # fp32 logits, softmax probabilities, log-probabilities


@dataclass(frozen=True)
class MemoryBreakdown:
    """Live memory at the peak moment of a job, MiB per part; `phase` names the moment."""

    weights: float
    gradients: float
    optimizer: float
    master_weights: float
    activations: float
    logits: float
    kv_cache: float
    workspace: float
    cuda_context: float
    phase: str

    @property
    def total_mib(self) -> float:
        return self.tensors_mib + self.cuda_context

    @property
    def tensors_mib(self) -> float:
        """What PyTorch's caching allocator holds (``memory_allocated``): all but the
        CUDA context."""
        return (self.weights + self.gradients + self.optimizer + self.master_weights
                + self.activations + self.logits + self.kv_cache + self.workspace)

    def as_dict(self) -> dict[str, float | str]:
        out: dict[str, float | str] = asdict(self)
        out["tensors_mib"] = self.tensors_mib
        out["total_mib"] = self.total_mib
        return out


def _linear_weights(config: TransformerConfig) -> int:
    return config.layers * sum(i * o for i, o in config.linear_shapes().values())


def lora_parameters(config: TransformerConfig, workload: LlmWorkload) -> int:
    """Adapter parameters: rank x (in + out) per targeted linear and layer."""
    shapes = config.linear_shapes()
    per_layer = sum(workload.lora_rank * (i + o) for t, (i, o) in shapes.items()
                    if t in workload.targets)
    return config.layers * per_layer


def weight_bytes(config: TransformerConfig, workload: LlmWorkload) -> float:
    """Base weights in storage (quantised linears, bf16 elsewhere), adapters excluded."""
    params = config.parameters()
    if workload.dtype in QUANTISED:
        linear = _linear_weights(config)
        return linear * DTYPE_BYTES[workload.dtype] + (params - linear) * 2.0
    return params * DTYPE_BYTES[workload.dtype]


def dequantised_buffer_bytes(config: TransformerConfig, workload: LlmWorkload) -> float:
    """The largest quantised linear weight dequantised to bf16 for its matmul (0 unless
    the weights are quantised)."""
    if workload.dtype not in QUANTISED:
        return 0.0
    return 2.0 * max(i * o for i, o in config.linear_shapes().values())


@dataclass(frozen=True)
class _TrainState:
    weights: float
    gradients: float
    optimizer: float
    master: float
    optimizer_temp: float
    head_gradient: float


def _train_state(config: TransformerConfig, wl: LlmWorkload) -> _TrainState:
    weights = weight_bytes(config, wl)
    if wl.mode == "lora":
        trainable = lora_parameters(config, wl)
        state = grad = 4.0 if wl.adapter_fp32 else wl.compute_bytes
        weights += trainable * state
        master = 0.0
        head = 0.0
    else:
        trainable = config.parameters()
        grad = DTYPE_BYTES[wl.dtype]
        mixed = wl.master_weights and wl.dtype in ("bf16", "fp16")
        state = 4.0 if mixed or wl.dtype == "fp32" else grad
        master = trainable * 4.0 if mixed else 0.0
        head = config.vocab * config.hidden * grad if config.kind == "decoder" else 0.0
    moments = {"adamw": 2 * state, "adamw-fused": 2 * state, "adamw-8bit": 2.0,
               "sgd": 0.0}[wl.optimizer]
    temp = trainable * state if wl.optimizer == "adamw" else 0.0
    if master:
        temp += trainable * 4.0  # 16-bit gradients upcast for the fp32 update
    return _TrainState(weights, trainable * grad, trainable * moments, master, temp, head)


def _saved_inputs(width: int, group: set[str], wl: LlmWorkload, config_linears: set[str],
                  already_saved: bool) -> float:
    """Bytes per token saved for the linears of ``group`` reading one tensor of ``width``.

    The 16-bit tensor itself is kept when a linear's weight gradient needs it (full
    fine-tuning, or a LoRA adapter sharing it) or when a frozen linear is quantised
    (bitsandbytes' 4- and 8-bit matmuls keep their input for the backward pass). LoRA
    adapters in fp32, or with dropout, keep their own copy each (plus a one-byte mask).
    ``already_saved``: another op keeps the tensor anyway (SDPA keeps its output).
    """
    c = wl.compute_bytes
    present = group & config_linears
    if wl.mode == "full":
        return 0.0 if already_saved else c * width
    targeted = present & set(wl.targets)
    own_copies = wl.adapter_fp32 or wl.lora_dropout
    adapter = 4.0 if wl.adapter_fp32 else c
    shared = (bool(targeted) and not own_copies) or (wl.dtype in ("int8", "int4")
                                                     and bool(present - targeted))
    out = c * width if shared and not already_saved else 0.0
    if own_copies:
        out += len(targeted) * width * (adapter + (1.0 if wl.lora_dropout else 0.0))
    return out + len(targeted) * wl.lora_rank * adapter  # lora_A outputs, kept for lora_B


def layer_activation_bytes(config: TransformerConfig, wl: LlmWorkload) -> float:
    """Bytes autograd saves per token in one layer during training (see module doc)."""
    c, h, f = wl.compute_bytes, config.hidden, config.intermediate
    q, heads = config.q_dim, config.heads
    full = wl.mode == "full"
    eager = wl.attention == "eager"
    # Norms: the fp32 copy of the residual stream (RMSNorm upcasts; autocast runs
    # LayerNorm in fp32), and the normalised input of the weight when it is trainable.
    out = 2 * (4.0 * h + (c * h if full else 0.0))
    # Attention: q, K and V expanded to all heads, and the output (SDPA saves it).
    out += c * 4 * q
    if eager:  # materialised scores: fp32 softmax and its 16-bit copy for A @ V
        out += heads * wl.seq_len * (4.0 + c)
        if config.kind == "encoder":  # attention-probability dropout: mask and output
            out += heads * wl.seq_len * (1.0 + c)
    # MLP internals: gate output (activation input), activation and up outputs (product).
    out += c * (3 * f if config.mlp == "gated" else f)
    # Inputs kept for the linears: q/k/v read the first norm's output, o the attention
    # output, gate/up the second norm's output, down the MLP's product.
    linears = set(config.linear_shapes())
    out += _saved_inputs(h, {"q", "k", "v"}, wl, linears, False)
    out += _saved_inputs(q, {"o"}, wl, linears, not eager)
    out += _saved_inputs(h, {"gate", "up"}, wl, linears, False)
    out += _saved_inputs(f, {"down"}, wl, linears, False)
    if config.kind == "encoder":
        out += 2.0 * h  # hidden-dropout masks after attention and MLP
    return out


def _inference_layer_bytes(config: TransformerConfig, wl: LlmWorkload) -> float:
    """One layer's live tensors per token in a no-grad forward pass."""
    c, h, f = wl.compute_bytes, config.hidden, config.intermediate
    mlp = 3 * f if config.mlp == "gated" else 2 * f
    return 4.0 * h + c * (2 * h + 2 * config.q_dim + 2 * config.kv_dim + mlp)


def kv_cache_bytes(config: TransformerConfig, wl: LlmWorkload) -> float:
    """Keys and values of every layer for ``seq_len`` tokens of ``concurrent_seqs``."""
    if config.kind == "encoder":
        return 0.0
    per_token = 2 * config.layers * config.kv_dim * wl.kv_bytes
    return per_token * wl.seq_len * wl.concurrent_seqs


def output_tokens(config: TransformerConfig, wl: LlmWorkload) -> int:
    if config.kind == "encoder":
        return 0
    return wl.seq_len // 2 if wl.output_tokens is None else wl.output_tokens


def prefill_tokens(config: TransformerConfig, wl: LlmWorkload) -> int:
    """Tokens in the largest forward pass of an inference job."""
    prompts = (wl.seq_len - output_tokens(config, wl)) * wl.concurrent_seqs
    if wl.prefill_tokens is not None:
        return min(wl.prefill_tokens, prompts)
    if config.kind == "encoder":
        return prompts
    return min(prompts, SERVING_PREFILL_TOKENS)


def _inference(config: TransformerConfig, wl: LlmWorkload) -> dict[str, float]:
    tokens = prefill_tokens(config, wl)
    acts = tokens * _inference_layer_bytes(config, wl)
    if wl.attention == "eager":
        prompt = wl.seq_len - output_tokens(config, wl)
        acts += config.heads * tokens * prompt * (4.0 + wl.compute_bytes)
    logits = 0.0
    if config.kind == "decoder":
        logits = wl.concurrent_seqs * config.vocab * INFERENCE_LOGIT_BYTES
    return {"weights": weight_bytes(config, wl), "activations": acts, "logits": logits,
            "kv_cache": kv_cache_bytes(config, wl)}


def _loss_bytes(config: TransformerConfig, wl: LlmWorkload, tokens: int) -> float:
    if config.kind == "encoder":
        return 0.0  # a classification head's logits are negligible
    return tokens * config.vocab * max(6.0, 4.0 + 8.0 / wl.loss_chunks)


def _training(config: TransformerConfig, wl: LlmWorkload) -> tuple[str, dict[str, float]]:
    tokens = wl.batch * wl.seq_len
    s = _train_state(config, wl)
    layer = layer_activation_bytes(config, wl) * tokens
    final_norm = tokens * config.hidden * (4.0 + (2 * wl.compute_bytes if wl.mode == "full"
                                                  else 0.0))
    if wl.gradient_checkpointing:
        stored = config.layers * tokens * config.hidden * wl.compute_bytes + final_norm
    else:
        stored = config.layers * layer + final_norm
    base = {"weights": s.weights, "optimizer": s.optimizer, "master_weights": s.master}
    phases = {
        "loss": {**base, "activations": stored, "logits": _loss_bytes(config, wl, tokens)},
        "backward": {**base, "activations": stored + layer, "gradients": s.head_gradient},
        "backward end": {**base, "activations": layer, "gradients": s.gradients},
        "optimizer step": {**base, "gradients": s.gradients,
                           "optimizer": s.optimizer + s.optimizer_temp},
    }
    return max(phases.items(), key=lambda kv: sum(kv[1].values()))


def estimate_memory(config: TransformerConfig, workload: LlmWorkload,
                    gpu_type: str | GpuType) -> MemoryBreakdown:
    """Peak memory of ``workload`` on ``config`` on one GPU of ``gpu_type``, MiB by part.

    Raises `UnknownGPU` for a type outside the catalogue.
    """
    _, spec = resolve(gpu_type)
    workspace = spec.workspace_mib + dequantised_buffer_bytes(config, workload) / MIB
    if workload.task == "inference":
        phase, parts = "inference", _inference(config, workload)
    else:
        phase, parts = _training(config, workload)
    mib = {k: v / MIB for k, v in parts.items()}
    return MemoryBreakdown(
        weights=mib.get("weights", 0.0), gradients=mib.get("gradients", 0.0),
        optimizer=mib.get("optimizer", 0.0), master_weights=mib.get("master_weights", 0.0),
        activations=mib.get("activations", 0.0), logits=mib.get("logits", 0.0),
        kv_cache=mib.get("kv_cache", 0.0), workspace=workspace,
        cuda_context=spec.context_mib, phase=phase)


def lower_bound_mib(config: TransformerConfig, workload: LlmWorkload) -> float:
    """What must exist at once whatever the implementation, MiB: the weights, and for
    training every trainable parameter's gradient, optimizer state and master copy; for
    inference the KV cache. No activations, context or workspace."""
    if workload.task == "inference":
        return (weight_bytes(config, workload) + kv_cache_bytes(config, workload)) / MIB
    s = _train_state(config, workload)
    return (s.weights + s.gradients + s.optimizer + s.master) / MIB


def padded_mib(breakdown: MemoryBreakdown, pad: float) -> float:
    """The reservation: total x (1 + pad); ``pad`` is a fraction (0.1 = 10 %)."""
    if not pad >= 0:
        raise ValueError(f"pad must be a fraction >= 0, got {pad!r}")
    return breakdown.total_mib * (1.0 + pad)
