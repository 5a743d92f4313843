"""What one step asks of a GPU, operation by operation: FLOPs, bytes moved, kernels.

Offline only (torch). The step (`features.run_step`: forward, cross-entropy backward and an
SGD update with momentum, or one inference forward pass) runs on fake tensors under a
dispatch mode that sees every ATen operation the GPU would run. Each is put in one class:

* ``conv``: convolutions and their backward (cuDNN; TF32 tensor cores on Ampere and later
  by PyTorch's default, ``torch.backends.cudnn.allow_tf32``);
* ``mm``: matrix products and fused attention (cuBLAS; FP32 without TF32 by PyTorch's
  default since 1.12, ``torch.backends.cuda.matmul.allow_tf32``);
* ``other``: everything else (element-wise, normalisation, pooling, softmax, the loss, the
  optimizer): memory-bound kernels, priced by the bytes they read and write.

FLOPs come from PyTorch's own counters (`torch.utils.flop_counter`), bytes are the sizes
of every tensor an operation reads and writes, and an operation that only makes a view
or an uninitialised tensor launches no kernel and moves nothing. A batch normalisation in
training reads its input twice, once for the batch's statistics and once to normalise
(its backward: the gradient and the input, to reduce and then to apply), as both PyTorch's
CUDA kernels and cuDNN's spatial mode run it; in eval mode it is one pass. Attention is
traced fused, as on a GPU (`estimator.simulation.attention`). The optimizer runs with
``foreach=True``, as it does on CUDA tensors: one operation per list of tensors.
`estimator.timing` turns these figures into seconds on each GPU type.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry

from estimator.simulation.attention import cuda_attention
from estimator.simulation.features import _fake_copy, example_input, run_step
from estimator.zoo import get_spec

GB = 1e9
aten = torch.ops.aten

_CONV = {aten.convolution, aten._convolution, aten.convolution_backward, aten.cudnn_convolution,
         aten.convolution_overrideable, aten._slow_conv2d_forward}
_BATCH_NORM = {aten.native_batch_norm, aten._native_batch_norm_legit,
               aten._native_batch_norm_legit_functional}
#: Allocations without a kernel (the caching allocator hands out memory as it is).
_NO_KERNEL = {aten.empty, aten.empty_like, aten.empty_strided, aten.new_empty,
              aten.new_empty_strided, aten.lift_fresh, aten.detach, aten.alias}


@dataclass(frozen=True)
class OpCosts:
    """One step of one (model, task, batch): GFLOPs and GB per class, kernels launched."""

    model: str
    task: str
    batch: int
    op_conv_gflops: float
    op_mm_gflops: float
    op_conv_gb: float
    op_mm_gb: float
    op_other_gb: float
    op_kernels: float


class _OpCostMode(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.flops: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        self.kernels = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func._overloadpacket
        if not _launches_a_kernel(func, out):
            return out
        kind = "conv" if packet in _CONV else "mm" if packet in flop_registry else "other"
        if packet in flop_registry:
            self.flops[kind] += flop_registry[packet](*args, **kwargs, out_val=out)
        self.bytes[kind] += _nbytes((args, kwargs, out)) + _second_pass_bytes(func, args, kwargs)
        self.kernels += 1
        return out


def _nbytes(tree: object) -> int:
    return sum(t.numel() * t.element_size() for t in tree_leaves(tree)
               if isinstance(t, torch.Tensor))


def _second_pass_bytes(func, args, kwargs) -> int:
    """What a batch normalisation over the batch reads again after its statistics pass."""
    named = {a.name: v for a, v in zip(func._schema.arguments, args, strict=False)} | kwargs
    if func._overloadpacket in _BATCH_NORM and named.get("training"):
        return _nbytes(named["input"])
    if func._overloadpacket is aten.native_batch_norm_backward and named.get("train"):
        return _nbytes((named["grad_out"], named["input"]))
    return 0


def _launches_a_kernel(func, out) -> bool:  # noqa: ANN001
    """An ATen operation that writes a tensor: not a view, an uninitialised allocation, a
    query of metadata (``prim.device``) nor a profiler mark."""
    if func.namespace != "aten" or func._overloadpacket in _NO_KERNEL:
        return False
    if any(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns):
        return False
    return any(isinstance(t, torch.Tensor) for t in tree_leaves(out))


def op_costs(name: str, task: str, batch: int) -> OpCosts:
    """The operations of one step of the registered model `name` at `batch`."""
    spec = get_spec(name)
    mode = FakeTensorMode()
    model = _fake_copy(spec.build(), mode)
    with mode, cuda_attention():
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=True)
        inputs = example_input(spec, batch)
        labels = torch.randint(0, spec.num_classes, (batch,))
        run_step(model, optimizer, inputs, labels, task)  # momentum buffers exist from now on
        # nn.TransformerEncoder's inference fast path is one fused operation that PyTorch's
        # counters do not price: trace its parts instead (the same FLOPs and bytes).
        fastpath = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            with _OpCostMode() as counted:
                run_step(model, optimizer, inputs, labels, task)
        finally:
            torch.backends.mha.set_fastpath_enabled(fastpath)
    return OpCosts(name, task, batch,
                   op_conv_gflops=counted.flops["conv"] / GB, op_mm_gflops=counted.flops["mm"] / GB,
                   op_conv_gb=counted.bytes["conv"] / GB, op_mm_gb=counted.bytes["mm"] / GB,
                   op_other_gb=counted.bytes["other"] / GB, op_kernels=float(counted.kernels))

