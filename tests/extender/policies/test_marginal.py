"""`marginal`: own completion plus the delay added to the jobs there, hand-computed."""

import pytest

from extender.model import GpuState
from extender.policies.marginal import Marginal
from tests.extender.states import queued


def test_the_delay_added_to_neighbours_is_charged() -> None:
    gpu = GpuState("n", 0, 24576, (queued("a", 100, 4),))
    # Alone a ends at 4; with us it ends at 6 (+2) and we end at 12: 14.
    assert Marginal(alpha=0.5).cost_s(gpu, 10, 0.0) == pytest.approx(14)
    # A long neighbour: own 600 s at speed 1/1.47 (882 s) plus the 282 s it delays it.
    busy = GpuState("n", 0, 24576, (queued("long", 1000, 3600, started=100),))
    assert Marginal(alpha=0.47).cost_s(busy, 600, 200.0) == pytest.approx(882 + 282)
    assert Marginal(alpha=0.47).cost_s(GpuState("n", 1, 24576), 600, 0.0) == 600
