"""cuDNN workspaces replayed through the allocator: when they change the reserved peak."""

import pytest

from estimator.simulation.allocator import MIB
from estimator.simulation.allocator_trace import ConvCall
from estimator.simulation.workspace import (
    PLACEMENTS, WORKSPACE_FRACTIONS, device_memory, replay_with_workspace, takes_workspace,
)


def _conv(pass_="bwd", mib=100, kernel=(3, 3), stride=(1, 1), groups=1) -> ConvCall:
    return ConvCall(pass_, mib * MIB, mib * MIB, kernel, stride, (1, 1), groups)


def test_only_stride_one_ungrouped_spatial_convolutions_take_a_workspace() -> None:
    assert takes_workspace(_conv())
    assert not takes_workspace(_conv(kernel=(1, 1)))  # a GEMM, no transform
    assert not takes_workspace(_conv(stride=(2, 2)))
    assert not takes_workspace(_conv(groups=32))  # depthwise kernels


def test_a_workspace_larger_than_any_cached_block_adds_a_segment() -> None:
    events = [("alloc", "act", 100 * MIB), ("conv", _conv(mib=100), 0), ("free", "act", 0)]
    plain = replay_with_workspace(events, 0.0, ())
    assert plain.peak_reserved == 100 * MIB
    with_ws = replay_with_workspace(events, 1.0, ("bwd",))  # 200 MiB transient
    assert with_ws.peak_reserved == 300 * MIB
    assert with_ws.allocated == 0  # freed as soon as the call returns
    forward_only = replay_with_workspace(events, 1.0, ("fwd",))
    assert forward_only.peak_reserved == 100 * MIB  # the call was a backward one


def test_a_workspace_that_fits_a_cached_block_costs_nothing() -> None:
    events = [("alloc", "old", 400 * MIB), ("free", "old", 0),
              ("alloc", "act", 100 * MIB), ("conv", _conv(mib=100), 0)]
    # The activation is split off the cached 400 MiB block; the 200 MiB workspace fits
    # the remaining 300 MiB.
    assert replay_with_workspace(events, 1.0, ("bwd",)).peak_reserved == 400 * MIB
    assert replay_with_workspace(events, 0.0, ()).peak_reserved == 400 * MIB


def test_device_memory_averages_the_scenarios() -> None:
    events = [("alloc", "act", 100 * MIB), ("conv", _conv(mib=100), 0), ("free", "act", 0)]
    mem = device_memory(events)
    scenarios = 1 + len(WORKSPACE_FRACTIONS) * len(PLACEMENTS)
    # Every scenario with a workspace adds fraction x 200 MiB (rounded up to 2 MiB).
    added = [2 * -(-int(f * 200) // 2) for f in WORKSPACE_FRACTIONS for _ in PLACEMENTS]
    assert mem.reserved_mb == 100 and mem.allocated_mb == 100
    assert mem.workspace_mb == pytest.approx(sum(added) / scenarios)
    assert mem.workspace_max_mb == max(added) and mem.largest_alloc_mb == 100
    assert device_memory([("alloc", 1, MIB)]).workspace_mb == 0.0
    with pytest.raises(ValueError, match="event"):
        device_memory([("poke", 1, 1)])
