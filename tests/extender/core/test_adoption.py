"""What the monitor may adopt, and whom a release lets in: pure."""

from __future__ import annotations

import pytest

from extender.core.adoption import likeliest_gpus, trusted_reservation, waiters_that_fit
from extender.core.signing import reservation_signature
from extender.model import Limits, Waiter
from tests.extender.states import node_state, queued

KEY = b"0123456789abcdef-key"
NODE = node_state("gpu-a", [[queued("a", 20_000, 600)], []], slots=4)  # 2 x 24576 MiB


def _values(gpu: str, mib: str, seconds: str, uid: str = "u", node: str = "gpu-a") -> list:
    return [gpu, mib, seconds, reservation_signature(KEY, uid, node, gpu, mib, seconds)]


def test_signed_values_in_range_are_trusted() -> None:
    assert trusted_reservation(KEY, "u", "gpu-a", _values("1", "9736", "161.0"), NODE) == (
        (1,), 9736.0, 161.0)
    assert trusted_reservation(KEY, "u", "gpu-a", _values("0", "24576", "0"), NODE) == (
        (0,), 24576.0, 0.0)
    assert trusted_reservation(KEY, "u", "gpu-a", _values("1,0", "9736", "5"), NODE) == (
        (1, 0), 9736.0, 5.0)  # a pod on both GPUs, as bind wrote it


@pytest.mark.parametrize("values", [
    _values("2", "1000", "1"), _values("0", "24577", "1"), _values("0", "0", "1"),
    _values("0", "nan", "1"), _values("0", "inf", "1"), _values("0", "1000", "nan"),
    _values("0", "1000", "-1"), _values("0", "1000", "inf"), _values("-0", "1000", "1"),
    _values("1" * 20, "1000", "1"), _values("٠", "1000", "1"), _values("0", "1" * 65, "1"),
    _values("0", "1000", "1", uid="other"), _values("0", "1000", "1", node="gpu-b"),
    ["0", "1000", "1", None], ["0", "1000", "1", "0" * 64], [0, 1000, 1, "x"],
    _values("1,1", "1000", "1"), _values("0,2", "1000", "1"), _values("0,", "1000", "1"),
    _values(",0", "1000", "1"), _values("0;1", "1000", "1"),
])
def test_anything_else_is_not(values: list) -> None:
    assert trusted_reservation(KEY, "u", "gpu-a", values, NODE) is None


def test_an_estimate_goes_to_the_roomiest_gpu_with_room_else_the_roomiest() -> None:
    def likeliest(node, mib, limit, count=1):
        return [g.index for g in likeliest_gpus(node, mib, limit, count)]

    assert likeliest(NODE, 4000, 4) == [1]
    full = node_state("n", [[queued("a", 20_000, 9)], [queued("b", 22_000, 9)]], slots=4)
    assert likeliest(full, 8000, 4) == [0]  # nowhere: the roomiest (over-commit)
    assert likeliest(full, 4000, 4) == [0]
    assert likeliest(full, 2000, 1) == [0]  # no slot anywhere
    assert likeliest(full, 3000, 4, count=2) == [0, 1]  # a two-GPU pod: both, roomiest first
    three = node_state("n", [[queued("a", 20_000, 9)], [], [queued("b", 1000, 9)]], slots=4)
    assert likeliest(three, 8000, 4, count=2) == [1, 2]  # those with room first


def test_the_waiters_that_fit_together_oldest_first() -> None:
    waiting = [Waiter("w0", 1, {"RTX-3090": (3000.0, 60.0)}, "ml/w0"),
               Waiter("w1", 2, {"RTX-3090": (2000.0, 60.0)}, "ml/w1"),
               Waiter("w2", 3, {"T4": (10.0, 60.0)}, "ml/w2"),
               Waiter("w3", 4, {"RTX-3090": (100.0, 60.0)}, ""),  # no pod to update
               Waiter("w4", 5, {"RTX-3090": (500.0, 60.0)}, "ml/w4")]
    names = [w.uid for w in waiters_that_fit(NODE, 0, waiting, Limits(4, {}))]
    assert names == ["w0", "w4"]  # 4576 free: w0, then w1 no longer fits, w4 does
    assert [w.uid for w in waiters_that_fit(NODE, 0, waiting, Limits(2, {}))] == ["w0"]
    assert waiters_that_fit(NODE, 2, waiting, Limits(4, {})) == []
    assert waiters_that_fit(NODE, -1, waiting, Limits(4, {})) == []
