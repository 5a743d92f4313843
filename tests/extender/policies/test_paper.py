"""`paper`: Eq. 1-2 as published, queue delay summed, hand-computed."""

import pytest

from extender.model import GpuState
from extender.policies.paper import Paper
from tests.extender.states import queued


def test_queue_delay_is_the_sum_of_the_remaining_times_plus_the_job() -> None:
    gpu = GpuState("n", 0, 24576, (queued("a", 100, 3600, started=100), queued("b", 100, 50)))
    # a: 3500 s left at t=200; b reserved, not started: 50 s. Collocation is ignored.
    assert Paper(alpha=0.47).cost_s(gpu, 600, 200.0) == pytest.approx(3500 + 50 + 600)
    assert Paper(alpha=0.0).cost_s(gpu, 600, 200.0) == Paper(alpha=5.0).cost_s(gpu, 600, 200.0)
    assert Paper().cost_s(GpuState("n", 1, 24576), 600, 200.0) == 600
