"""Attention traced as a GPU runs it: fused, never holding the scores matrix."""

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from estimator.feature_table import FeatureTable
from estimator.simulation import features
from estimator.simulation.attention import cuda_attention
from estimator.simulation.op_costs import op_costs

SEQ = 48  # a length no other dimension of the layer has


class _Shapes(TorchDispatchMode):
    """Every tensor shape an operation returns."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor):
                self.shapes.append(tuple(t.shape))
        return out


def _training_step_shapes() -> list[tuple[int, ...]]:
    # nn.TransformerEncoderLayer's default dropout (0.1) reaches the attention call.
    layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True).train()
    x = torch.randn(2, SEQ, 64)
    with _Shapes() as seen:
        layer(x).sum().backward()
    return seen.shapes


def test_the_cpu_takes_the_math_path_with_dropout_and_holds_the_scores() -> None:
    assert any(s[-2:] == (SEQ, SEQ) for s in _training_step_shapes())


def test_traced_as_a_gpu_runs_it_attention_writes_no_scores_matrix() -> None:
    math_attention = torch.nn.functional.scaled_dot_product_attention
    with cuda_attention():
        shapes = _training_step_shapes()
    assert not any(s[-2:] == (SEQ, SEQ) for s in shapes)
    assert torch.nn.functional.scaled_dot_product_attention is math_attention  # put back


def test_the_fused_kernel_counts_the_flops_of_the_math_path() -> None:
    layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).train()
    x = torch.randn(2, SEQ, 64)
    counted = []
    for fused in (False, True):
        with FlopCounterMode(display=False) as flops:
            if fused:
                with cuda_attention():
                    layer(x).sum().backward()
            else:
                with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
                    layer(x).sum().backward()
        counted.append(flops.get_total_flops())
    # Not counted, the fused kernel would lose all six products; its backward recomputes
    # the scores (a seventh), as CUDA's flash kernel does.
    assert counted[0] <= counted[1] <= 1.05 * counted[0]


def test_bert_training_is_simulated_without_the_scores_and_cached_so() -> None:
    (step,) = features.simulate_device("bert_small", "train", [8])
    cached = FeatureTable.load().job_features("bert_small", "train", 8)
    assert step.sim_device_mb == pytest.approx(cached.sim_device_mb, abs=1e-3)
    costs = op_costs("bert_small", "train", 8)
    assert costs.op_kernels == pytest.approx(cached.op_kernels)
    assert costs.op_mm_gflops == pytest.approx(cached.op_mm_gflops, rel=1e-6)
