"""Attention traced as CUDA runs it. Offline only (torch).

On a GPU, `torch.nn.functional.scaled_dot_product_attention` (which
`nn.MultiheadAttention` and so `nn.TransformerEncoderLayer` call) runs as one fused kernel,
flash or memory-efficient attention, also with dropout, which those kernels apply inside
(a seed and an offset, no mask): the scores matrix is never written to memory nor kept for
the backward, only the output and one log-sum-exp per row. On the CPU the same call with
dropout takes the math path (`bmm`, softmax, dropout, `bmm`) and the fake-tensor trace
keeps a batch x heads x sequence x sequence matrix per layer that no GPU allocates: a
BERT-base training step at batch 32 was simulated 1.3 GiB heavier than the H200 held.

`cuda_attention()` makes the traced step run the CPU's fused kernel instead (dropout
dropped: it changes no size), and this module registers that kernel's FLOPs with PyTorch's
counter (the formula of CUDA's fused kernels), which knows only the CUDA ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils import flop_counter

aten = torch.ops.aten

_CPU_FUSED = {aten._scaled_dot_product_flash_attention_for_cpu: flop_counter.sdpa_flop,
              aten._scaled_dot_product_flash_attention_for_cpu_backward:
                  flop_counter.sdpa_backward_flop}
for _op, _formula in _CPU_FUSED.items():
    if _op not in flop_counter.flop_registry:
        # The formulas as PyTorch registered them: already taking tensors, not shapes.
        flop_counter.register_flop_formula(_op, get_raw=True)(_formula)

_math_attention = F.scaled_dot_product_attention


def _fused_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                     is_causal=False, scale=None, enable_gqa=False):
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return _math_attention(query, key, value, attn_mask=attn_mask, dropout_p=0.0,
                                   is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
    except RuntimeError:  # a mask or shape the CPU's kernel does not take: as before
        return _math_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                               is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)


@contextlib.contextmanager
def cuda_attention() -> Iterator[None]:
    """Within it, scaled-dot-product attention runs fused, as on a GPU."""
    F.scaled_dot_product_attention = _fused_attention
    try:
        yield
    finally:
        F.scaled_dot_product_attention = _math_attention
