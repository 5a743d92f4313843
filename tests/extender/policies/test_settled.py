"""`settled`: the job's run and its neighbours' delay as if the sharing lasted,
hand-computed (on arrays: tests/extender/core/test_arrays_exact.py)."""

import pytest

from extender.model import GpuState
from extender.policies.drain import Drain
from extender.policies.marginal import Marginal
from extender.policies.settled import Settled
from tests.extender.states import queued


def test_the_sharing_is_priced_for_the_whole_run() -> None:
    gpu = GpuState("n", 0, 24576, (queued("a", 100, 4),))
    # Our 10 s at speed 1/1.5 (15 s) plus a's 4 s slowed by half (2 s): 17 s, where
    # `marginal` charges 14 (a ends after 6 s and we run alone) and `drain` 12.
    assert Settled(alpha=0.5).cost_s(gpu, 10, 0.0) == pytest.approx(17)
    assert Marginal(alpha=0.5).cost_s(gpu, 10, 0.0) == pytest.approx(14)
    two = GpuState("n", 0, 24576, (queued("a", 100, 4), queued("b", 100, 20)))
    # Beside two: 10 x (1 + 2 x 0.5) = 20 s, and 0.5 x (4 + 20) = 12 s of delay to them.
    assert Settled(alpha=0.5).cost_s(two, 10, 0.0) == pytest.approx(32)
    assert Settled(alpha=0.5).cost_s(GpuState("n", 1, 24576), 10, 0.0) == 10


def test_a_fast_gpu_shared_loses_to_an_idle_one_that_drain_would_pass_over() -> None:
    """The light-load case it was made for: an A100-like GPU running a job with 2000 s
    left, against an idle GPU three times slower. `drain` shares (the GPU empties after
    2,910 s, before the 3,000 s alone there); `settled` charges 1,910 s for our run and
    1,820 s of delay to the neighbour, and takes the idle GPU."""
    busy = GpuState("n", 0, 81920, (queued("k", 100, 2000),))
    fast_s, slow_s = 1000.0, 3000.0
    assert Drain(alpha=0.91).cost_s(busy, fast_s, 0.0) < slow_s
    assert Settled(alpha=0.91).cost_s(busy, fast_s, 0.0) > slow_s


def test_a_job_past_its_prediction_still_shares_the_gpu() -> None:
    """It has no work left by its prediction, but it runs: the job beside it is slowed."""
    overran = GpuState("n", 0, 24576, (queued("late", 100, 600, started=1.0),))
    assert Settled(alpha=0.5).cost_s(overran, 10, 5000.0) == pytest.approx(15)
    assert Drain(alpha=0.5).cost_s(overran, 10, 5000.0) == pytest.approx(10)
