"""A GPU played forward: completion times under the collocation slowdown, hand-computed."""

import pytest

from extender.model import GpuState
from extender.policies.timeline import (
    completion_times_s, marginal_cost_s, remaining_s, shared_completion_s, wait_until_fits_s,
)  # fmt: skip
from tests.extender.states import queued


def test_shared_completion_hand_computed() -> None:
    assert shared_completion_s(10, [], 0.5) == 10
    # Two jobs at speed 1/1.5 until the 4 s job finishes (6 s), then 6 s alone.
    assert shared_completion_s(10, [4], 0.5) == pytest.approx(12)
    # Processor sharing (alpha 1): a long neighbour halves our speed throughout.
    assert shared_completion_s(10, [100], 1.0) == pytest.approx(20)
    assert remaining_s(queued("a", 1, 100, started=50), now=80) == 70
    assert remaining_s(queued("a", 1, 100), now=80) == 100


def test_marginal_cost_hand_computed() -> None:
    assert completion_times_s([10, 4], 0.5) == pytest.approx([6, 12])
    assert marginal_cost_s(10, [], 0.5) == 10
    # Alone the 4 s job ends at 4; with us it ends at 6 (+2) and we end at 12: cost 14.
    assert marginal_cost_s(10, [4], 0.5) == pytest.approx(14)


def test_wait_until_fits_hand_computed() -> None:
    gpu = GpuState("n", 0, 24576, (queued("a", 10000, 100, started=50), queued("b", 10000, 30)))
    now = 60.0
    assert wait_until_fits_s(gpu, 4000, 4, now, 0.5) == 0  # 4576 MiB free now
    # b (30 s left) and a (90 s left) share at speed 1/1.5: b ends at 45 s, freeing 14576.
    assert wait_until_fits_s(gpu, 14000, 4, now, 0.5) == pytest.approx(45)
    # a then runs alone: 60 s left at 45 s, ends at 105 s; the card is empty.
    assert wait_until_fits_s(gpu, 20000, 4, now, 0.5) == pytest.approx(105)
    assert wait_until_fits_s(gpu, 4000, 2, now, 0.5) == pytest.approx(45)  # slots
    assert wait_until_fits_s(gpu, 30000, 4, now, 0.5) == float("inf")
