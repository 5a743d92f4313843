"""What one step asks of a GPU, traced on fake tensors with real PyTorch on the CPU."""

import pytest

from estimator.feature_table import FeatureTable
from estimator.simulation.op_costs import op_costs


def test_an_inference_pass_counts_the_flops_of_pytorchs_own_counter() -> None:
    costs = op_costs("alexnet", "inference", 8)
    cached = FeatureTable.load().job_features("alexnet", "inference", 8)
    assert costs.op_conv_gflops + costs.op_mm_gflops == pytest.approx(cached.sim_gflops, rel=1e-3)
    assert costs.op_conv_gflops > costs.op_mm_gflops > 0
    # 5 convolutions, 7 ReLUs, 3 max-pools, the average pool and 3 linear layers; flatten is
    # a view and dropout does nothing in eval mode: neither launches a kernel.
    assert costs.op_kernels == 19


def test_a_training_step_costs_about_three_forward_passes() -> None:
    forward, step = op_costs("resnet18", "inference", 8), op_costs("resnet18", "train", 8)
    assert step.op_conv_gflops == pytest.approx(3 * forward.op_conv_gflops, rel=0.05)
    assert step.op_other_gb > 2 * forward.op_other_gb  # normalisation backward, the optimizer
    assert step.op_kernels > 2 * forward.op_kernels


def test_a_transformer_inference_pass_is_priced_beyond_pytorchs_fused_fast_path() -> None:
    costs = op_costs("bert_small", "inference", 8)
    assert costs.op_mm_gflops > 1.0 and costs.op_conv_gflops == 0.0


def test_a_batch_norm_reads_its_input_twice_in_training_and_once_in_eval() -> None:
    """Statistics over the batch first, then the normalisation: two passes over the input
    forward and two over the gradient and the input backward (PyTorch's CUDA kernels and
    cuDNN's spatial mode); eval mode normalises with the running statistics in one."""
    import torch
    from torch import nn

    from estimator.simulation.op_costs import _OpCostMode

    norm, x = nn.BatchNorm2d(4), torch.randn(8, 4, 16, 16, requires_grad=True)
    size = x.numel() * x.element_size()
    with _OpCostMode() as forward:
        y = norm.train()(x)
    gradient = torch.ones_like(y)
    with _OpCostMode() as backward:
        torch.autograd.grad(y, (x,), gradient)
    with torch.no_grad(), _OpCostMode() as evaluated:
        norm.eval()(x)
    assert 3 * size <= forward.bytes["other"] < 3.1 * size  # in twice, out once
    assert 5 * size <= backward.bytes["other"] < 5.1 * size  # grad and input twice, out once
    assert 2 * size <= evaluated.bytes["other"] < 2.1 * size
