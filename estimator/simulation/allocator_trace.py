"""Record what a training step or an inference pass asks of the GPU allocator, on the
CPU: every tensor storage's allocation and free, in order, and every convolution
(the calls cuDNN would serve, with a transient workspace), for `estimator.simulation.allocator`
to replay.

Offline only (imports torch; `estimator.simulation.features` calls it). Runs under
`FakeTensorMode`, so nothing is computed or really allocated: a dispatch mode sees
each operator's outputs, a storage is recorded when first seen and a weak-reference
callback records its free when autograd, the optimizer or the loop drops the last
reference, which is when the CUDA caching allocator would get the block back.

The loop is the one the reference data was measured with (PyTorch 1.8, the CIFAR-10
tutorial's shape): per iteration the previous batch is dropped, the next one
allocated, gradients zeroed in place (``zero_grad(set_to_none=False)``, 1.8's
default: gradients stay allocated through the forward pass), forward, loss,
backward, SGD with momentum. Parameters and buffers are allocated first, in module
order, as ``model.cuda()`` does.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

#: Iterations recorded: the first creates gradients and momentum buffers, the
#: second and third repeat the steady state (reserved memory stops growing).
TRACE_ITERATIONS = 3


@dataclass(frozen=True)
class ConvCall:
    """One convolution as cuDNN would run it: ``pass_`` is ``fwd`` (forward) or ``bwd``
    (backward: data and filter gradients); sizes in bytes."""

    pass_: str
    input_bytes: int
    output_bytes: int
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int


#: ("alloc", key, nbytes), ("free", key, 0) or ("conv", ConvCall, 0).
Event = tuple[str, Any, int]


class AllocationTrace(TorchDispatchMode):
    """Records storage allocations, frees and convolutions of every operator run under it."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[Event] = []
        self._live: dict[int, tuple[int, weakref.ref]] = {}
        self._next_key = 0

    def track(self, tensor: torch.Tensor) -> None:
        """Record `tensor`'s storage if it was never seen (views share their base's)."""
        storage = tensor.untyped_storage()
        known = self._live.get(id(storage))
        if known is not None and known[1]() is storage:
            return
        key, self._next_key = self._next_key, self._next_key + 1
        ident = id(storage)

        def freed(_ref: weakref.ref, key: int = key, ident: int = ident) -> None:
            self.events.append(("free", key, 0))
            if self._live.get(ident, (None,))[0] == key:
                del self._live[ident]

        self._live[ident] = (key, weakref.ref(storage, freed))
        self.events.append(("alloc", key, int(storage.nbytes())))

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for value in tree_flatten(out)[0]:
            if isinstance(value, torch.Tensor):
                self.track(value)
        if func is torch.ops.aten.convolution.default:
            self.events.append(("conv", _conv("fwd", args[0], out, args[1], args[3], args[5],
                                              args[8]), 0))
        elif func is torch.ops.aten.convolution_backward.default:
            self.events.append(("conv", _conv("bwd", args[1], args[0], args[2], args[4], args[6],
                                              args[9]), 0))
        return out


def _conv(pass_: str, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, stride: Any,
          dilation: Any, groups: int) -> ConvCall:
    return ConvCall(pass_, x.numel() * x.element_size(), y.numel() * y.element_size(),
                    tuple(int(k) for k in w.shape[2:]), tuple(int(s) for s in stride),
                    tuple(int(d) for d in dilation), int(groups))


def record(model: nn.Module, make_batch: Callable[[], tuple[torch.Tensor, torch.Tensor]],
           task: str, loss: Callable[[Any, torch.Tensor], torch.Tensor],
           iterations: int = TRACE_ITERATIONS) -> list[Event]:
    """The events of `iterations` steps of `task` (``train`` or ``inference``) on a model
    whose parameters are fake tensors; call it inside their `FakeTensorMode`.

    `make_batch` returns (inputs, labels); `loss` maps (model output, labels) to a scalar.
    """
    trace = AllocationTrace()
    for tensor in (*model.parameters(), *model.buffers()):
        trace.track(tensor)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=False)
    model.train(task == "train")
    with trace:
        inputs = labels = None
        for _ in range(iterations):
            inputs = labels = None  # the loader rebinds the loop variables first
            inputs, labels = make_batch()
            if task == "train":
                optimizer.zero_grad(set_to_none=False)
                loss(model(inputs), labels).backward()
                optimizer.step()
            else:
                with torch.no_grad():
                    model(inputs)
        del inputs, labels
    return list(trace.events)
