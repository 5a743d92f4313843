"""`shared`: the job's own completion beside the jobs there, hand-computed."""

import pytest

from extender.model import GpuState
from extender.policies.shared import Shared
from tests.extender.states import queued


def test_own_completion_counts_only_the_overlap() -> None:
    gpu = GpuState("n", 0, 24576, (queued("a", 100, 4),))
    # Both at speed 1/1.5 until a's 4 s are done (6 s), then 6 s alone: 12 s.
    assert Shared(alpha=0.5).cost_s(gpu, 10, 0.0) == pytest.approx(12)
    # Beside a long job the whole run is at speed 1/1.5.
    long = GpuState("n", 0, 24576, (queued("a", 100, 1000),))
    assert Shared(alpha=0.5).cost_s(long, 10, 0.0) == pytest.approx(15)
    assert Shared(alpha=0.5).cost_s(GpuState("n", 1, 24576), 10, 0.0) == 10
