"""Model features from real PyTorch on the CPU: the paper's torchinfo recipe and a
simulated peak from FakeTensor memory tracking.

Offline only: this is one of the two modules allowed to import torch (with
`estimator.zoo`). The request path reads the cached results through
`estimator.feature_table`.

* `summarize(name)` follows the paper (section IV-D): a torchinfo summary at
  batch 1; activations are the sum of every leaf layer's output elements x
  4 bytes (one forward pass), parameters and input as torchinfo reports them.
  Per-sample figures are multiplied by the batch size by the caller.
* `simulate_peaks(name, task, batches)` runs two iterations of a training step
  (forward, cross-entropy backward, SGD with momentum) or of an inference
  forward pass on fake CPU tensors under `MemTracker`, which reports the peak
  per category without allocating or computing anything real; and it records
  the same loop's allocations and frees (`estimator.simulation.allocator_trace`) and
  replays them through a model of PyTorch's CUDA caching allocator, with and
  without cuDNN workspaces (`estimator.simulation.workspace`): what the GPU would hold,
  less the CUDA context, which the regressors learn per GPU type.
  `simulate_device` computes only the second part (cheap: no MemTracker).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import torch
import torchinfo
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker
from torch.utils.flop_counter import FlopCounterMode

from estimator.simulation import allocator_trace
from estimator.simulation.attention import cuda_attention
from estimator.simulation.workspace import DeviceMemory, device_memory
from estimator.zoo import ModelSpec, get_spec

MIB = 2**20
TASKS = ("train", "inference")
SIM_ITERATIONS = 2


@dataclass(frozen=True)
class ModelSummary:
    """Per-model torchinfo figures at batch 1 (MiB unless named otherwise)."""

    model: str
    family: str
    params_mb: float
    buffers_mb: float
    activations_mb_per_sample: float
    input_mb_per_sample: float
    fwd_bwd_mb_per_sample: float
    mult_adds_g_per_sample: float


@dataclass(frozen=True)
class SimulatedPeak:
    """Peak bytes seen by MemTracker for one (model, task, batch), in MiB, the
    floating-point operations of one step (forward + backward for training), and
    the replayed device memory (`estimator.simulation.workspace.DeviceMemory`, MiB;
    ``sim_device_mb`` = reserved + workspace, what the allocator would hold; NaN
    when not computed)."""

    model: str
    task: str
    batch: int
    sim_peak_mb: float
    sim_params_mb: float
    sim_grads_mb: float
    sim_activations_mb: float
    sim_temp_mb: float
    sim_optimizer_mb: float
    sim_gflops: float
    sim_allocated_mb: float = math.nan
    sim_reserved_mb: float = math.nan
    sim_workspace_mb: float = math.nan
    sim_workspace_max_mb: float = math.nan
    sim_largest_alloc_mb: float = math.nan
    sim_device_mb: float = math.nan


@dataclass(frozen=True)
class SimulatedDevice:
    """The replayed device memory of one (model, task, batch), MiB (the columns of
    `SimulatedPeak` from ``sim_allocated_mb`` on)."""

    model: str
    task: str
    batch: int
    sim_allocated_mb: float
    sim_reserved_mb: float
    sim_workspace_mb: float
    sim_workspace_max_mb: float
    sim_largest_alloc_mb: float
    sim_device_mb: float


def example_input(spec: ModelSpec, batch: int) -> torch.Tensor:
    """A batch of the model's input (random images or token ids), on the CPU."""
    if spec.input_kind == "text":
        return torch.randint(0, spec.vocab, (batch, spec.seq_len))
    return torch.randn(batch, *spec.input_shape)


def summarize(name: str) -> ModelSummary:
    """The paper's torchinfo recipe for one registered model (batch 1, CPU)."""
    spec = get_spec(name)
    model = spec.build().eval()
    sample = example_input(spec, 1)
    with torch.no_grad():
        stats = torchinfo.summary(model, input_data=[sample], verbose=0, device="cpu")
    leaf_elements = sum(
        math.prod(layer.output_size) for layer in stats.summary_list
        if layer.is_leaf_layer and layer.output_size
    )  # fmt: skip
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    buffer_bytes = sum(b.numel() * b.element_size() for b in model.buffers())
    return ModelSummary(
        model=name,
        family=spec.family,
        params_mb=param_bytes / MIB,
        buffers_mb=buffer_bytes / MIB,
        activations_mb_per_sample=leaf_elements * 4 / MIB,
        input_mb_per_sample=sample.numel() * sample.element_size() / MIB,
        fwd_bwd_mb_per_sample=stats.total_output_bytes / MIB,
        mult_adds_g_per_sample=stats.total_mult_adds / 1e9,
    )


def simulate_peaks(name: str, task: str, batches: Iterable[int]) -> list[SimulatedPeak]:
    """Simulated peak memory of a training step or an inference pass, per batch size.

    The model is built once with real (random) weights and its parameters and
    buffers are copied into a fresh fake mode per batch: building modules inside
    the fake mode breaks on initialisers that read values (trunc_normal_) and on
    `nn.MultiheadAttention`.
    """
    spec, real_model, batches = _prepare(name, task, batches)
    peaks = []
    for batch in batches:
        tracked = _simulate_one(spec, real_model, task, batch)
        device = _device_one(spec, real_model, task, batch)
        peaks.append(SimulatedPeak(**{**asdict(tracked), **_device_columns(device)}))
    return peaks


def simulate_device(name: str, task: str, batches: Iterable[int]) -> list[SimulatedDevice]:
    """Only the replayed device memory per batch (seconds, where `simulate_peaks` takes
    up to a minute per DenseNet batch)."""
    spec, real_model, batches = _prepare(name, task, batches)
    return [SimulatedDevice(name, task, b, **_device_columns(_device_one(spec, real_model, task, b)))
            for b in batches]


def _prepare(name: str, task: str, batches: Iterable[int]) -> tuple[ModelSpec, nn.Module, list[int]]:
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")
    batches = list(batches)
    for batch in batches:
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
    spec = get_spec(name)
    return spec, spec.build(), batches


def _device_one(spec: ModelSpec, real_model: nn.Module, task: str, batch: int) -> DeviceMemory:
    mode = FakeTensorMode()
    model = _fake_copy(real_model, mode)
    with mode, cuda_attention():
        def make_batch() -> tuple[torch.Tensor, torch.Tensor]:
            return example_input(spec, batch), torch.randint(0, spec.num_classes, (batch,))

        def loss(output: object, labels: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.cross_entropy(_logits(output), labels)

        events = allocator_trace.record(model, make_batch, task, loss)
    return device_memory(events)


def _device_columns(device: DeviceMemory) -> dict[str, float]:
    return {"sim_allocated_mb": device.allocated_mb, "sim_reserved_mb": device.reserved_mb,
            "sim_workspace_mb": device.workspace_mb,
            "sim_workspace_max_mb": device.workspace_max_mb,
            "sim_largest_alloc_mb": device.largest_alloc_mb,
            "sim_device_mb": device.reserved_mb + device.workspace_mb}


def _simulate_one(spec: ModelSpec, real_model: nn.Module, task: str, batch: int) -> SimulatedPeak:
    mode = FakeTensorMode()
    model = _fake_copy(real_model, mode)
    with mode, cuda_attention():
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        inputs = example_input(spec, batch)
        labels = torch.randint(0, spec.num_classes, (batch,))
        tracker = MemTracker()
        tracker.track_external(model, optimizer)
        with tracker:
            for _ in range(SIM_ITERATIONS):
                tracker.reset_mod_stats()
                run_step(model, optimizer, inputs, labels, task)
        peak = next(iter(tracker.get_tracker_snapshot("peak").values()))
        with FlopCounterMode(display=False) as flops:
            run_step(model, optimizer, inputs, labels, task)
    by_kind = {str(kind).rsplit(".", 1)[-1]: nbytes / MIB for kind, nbytes in peak.items()}
    return SimulatedPeak(
        model=spec.name,
        task=task,
        batch=batch,
        sim_peak_mb=by_kind["Total"],
        sim_params_mb=by_kind.get("PARAM", 0.0) + by_kind.get("BUFFER", 0.0),
        sim_grads_mb=by_kind.get("GRAD", 0.0),
        sim_activations_mb=by_kind.get("ACT", 0.0),
        sim_temp_mb=by_kind.get("TEMP", 0.0),
        sim_optimizer_mb=by_kind.get("OPT", 0.0),
        sim_gflops=flops.get_total_flops() / 1e9,
    )


def run_step(model: nn.Module, optimizer: torch.optim.Optimizer, inputs: torch.Tensor,
          labels: torch.Tensor, task: str) -> None:
    """One training step (forward, backward, SGD update) or one inference pass."""
    if task == "train":
        model.train()
        loss = torch.nn.functional.cross_entropy(_logits(model(inputs)), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    else:
        model.eval()
        with torch.no_grad():
            model(inputs)


def _fake_copy(model: nn.Module, mode: FakeTensorMode) -> nn.Module:
    """A deep copy of `model` whose parameters and buffers are fake tensors of `mode`."""
    fake = copy.deepcopy(model)
    for module in fake.modules():
        for key, param in module._parameters.items():
            if param is not None:
                module._parameters[key] = nn.Parameter(
                    mode.from_tensor(param.detach()), requires_grad=param.requires_grad
                )
        for key, buffer in module._buffers.items():
            if buffer is not None:
                module._buffers[key] = mode.from_tensor(buffer)
    return fake


def _logits(output: object) -> torch.Tensor:
    """Classification logits from models that return auxiliary outputs too."""
    return output if isinstance(output, torch.Tensor) else output.logits  # type: ignore[attr-defined]
