"""chaos/faults.py: every fault falls inside the bind stream, kinds interleaved."""

from __future__ import annotations

from collections import Counter

from chaos.faults import fault_plan


def test_every_fault_falls_inside_the_stream_interleaved() -> None:
    plan = fault_plan(redis_kills=5, replica_kills=3, slow_clients=4)
    assert Counter(kind for _, kind, _ in plan) == {"redis": 5, "replica": 3, "slow_clients": 1}
    shares = [share for share, _, _ in plan]
    assert shares == sorted(shares) and 0 < shares[0] and shares[-1] < 1
    assert [arg for _, kind, arg in plan if kind == "replica"] == [0, 1, 0]
    assert [kind for _, kind, _ in plan][:2] == ["replica", "redis"]
