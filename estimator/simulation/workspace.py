"""Device memory of a recorded step: the caching allocator's reserved peak, with and
without cuDNN convolution workspaces.

Pure Python (no torch): the events come from `estimator.simulation.allocator_trace`, the rules
from `estimator.simulation.allocator`.

A cuDNN convolution may take a transient workspace from the caching allocator, freed
when the call returns (PyTorch 1.8 to 2.x, ``torch.backends.cudnn.benchmark`` off:
the algorithm is the first of cuDNN's heuristic list whose workspace can be
allocated). Its size depends on the algorithm, which depends on the GPU
architecture, the cuDNN version and the shape; it is not knowable offline. The
transform-based algorithms (Winograd non-fused, FFT and FFT tiling), which are the
ones that take large workspaces, apply to stride-1, ungrouped convolutions with a
kernel larger than 1x1, and their buffers are transforms of the input and output:
Winograd non-fused F(4x4, 3x3) holds 36/16 = 2.25 x the input and 2.25 x the output.
So the estimate is an ensemble: a workspace of ``fraction x (input + output bytes)``
per such call, for each fraction in `WORKSPACE_FRACTIONS` and each placement in
`PLACEMENTS` (backward calls only, or forward and backward), plus no workspace at
all; each scenario is replayed through the allocator. A transient buffer changes the
reserved peak only when no cached block holds it, and it may also be reused by later
tensors (the peak can even fall), which is why it is replayed rather than added.

* ``workspace_mb``: mean over the scenarios of (reserved - reserved without workspace);
* ``workspace_max_mb``: the largest of them (the worst plausible choice).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import count

from estimator.simulation.allocator import MIB, AllocatorRules, CachingAllocator

WORKSPACE_FRACTIONS = (0.25, 0.5, 1.0, 1.5)
PLACEMENTS: tuple[tuple[str, ...], ...] = (("bwd",), ("fwd", "bwd"))


@dataclass(frozen=True)
class DeviceMemory:
    """Simulated device memory of one job (MiB): tensors' peak after block rounding,
    the allocator's reserved peak without workspaces, what workspaces add (mean and
    largest over the scenarios), and the largest single tensor."""

    allocated_mb: float
    reserved_mb: float
    workspace_mb: float
    workspace_max_mb: float
    largest_alloc_mb: float


def takes_workspace(call: object) -> bool:
    """Whether a convolution call is one a transform-based algorithm could serve."""
    kernel, stride = getattr(call, "kernel"), getattr(call, "stride")
    return (getattr(call, "groups") == 1 and any(k > 1 for k in kernel)
            and all(s == 1 for s in stride))


def workspace_bytes(call: object, fraction: float) -> int:
    return int(fraction * (getattr(call, "input_bytes") + getattr(call, "output_bytes")))


def replay_with_workspace(events: Sequence[tuple[str, object, int]], fraction: float,
                          passes: Iterable[str], rules: AllocatorRules | None = None
                          ) -> CachingAllocator:
    """Replay `events`; each convolution call of `passes` that `takes_workspace` allocates
    and frees ``fraction x (input + output)`` bytes right after its outputs."""
    allocator = CachingAllocator(rules or AllocatorRules())
    passes = frozenset(passes)
    scratch = count()
    for kind, key, nbytes in events:
        if kind == "alloc":
            allocator.malloc(key, nbytes)
        elif kind == "free":
            allocator.free(key)
        elif kind == "conv":
            if fraction > 0 and getattr(key, "pass_") in passes and takes_workspace(key):
                ws = ("workspace", next(scratch))
                allocator.malloc(ws, workspace_bytes(key, fraction))
                allocator.free(ws)
        else:
            raise ValueError(f"unknown event kind {kind!r}")
    return allocator


def device_memory(events: Sequence[tuple[str, object, int]],
                  rules: AllocatorRules | None = None) -> DeviceMemory:
    """Replay the trace without workspaces and under every workspace scenario."""
    plain = replay_with_workspace(events, 0.0, (), rules)
    extra = [replay_with_workspace(events, f, p, rules).peak_reserved - plain.peak_reserved
             for f in WORKSPACE_FRACTIONS for p in PLACEMENTS]
    scenarios = [0, *extra]
    largest = max((n for kind, _, n in events if kind == "alloc"), default=0)
    return DeviceMemory(
        allocated_mb=plain.peak_allocated / MIB,
        reserved_mb=plain.peak_reserved / MIB,
        workspace_mb=sum(scenarios) / len(scenarios) / MIB,
        workspace_max_mb=max(scenarios) / MIB,
        largest_alloc_mb=largest / MIB,
    )
