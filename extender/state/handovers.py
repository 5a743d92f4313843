"""Handovers to node agents (a `RedisStore` mixin): a reservation whose GPUs a node agent
(HAMi's device plugin) was handed, until it answers; the monitor retries or releases the
ones left unanswered too long."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import redis

from extender.state.keys import HANDOVERS_KEY, job_key


class Handovers:
    """The handover half of `RedisStore` (its client and error translation)."""

    _redis: redis.Redis
    _call: Callable[..., Any]

    def note_handover(self, uid: str, uuids: Iterable[str], now: float) -> None:
        """Record on a reservation that a node agent was handed its GPUs at `now` (their
        UUIDs, when it names them), until it answers (`handover_answered`)."""
        pipe = self._redis.pipeline(transaction=True)
        pipe.hset(job_key(uid), mapping={"device_uuids": ",".join(uuids),
                                         "handed_over_at": now})
        pipe.zadd(HANDOVERS_KEY, {uid: now})
        self._call(pipe.execute)

    def handover_answered(self, uid: str) -> None:
        """The node agent answered (or the reservation is gone): nothing left to check."""
        pipe = self._redis.pipeline(transaction=True)
        pipe.hdel(job_key(uid), "handed_over_at")
        pipe.zrem(HANDOVERS_KEY, uid)
        self._call(pipe.execute)

    def overdue_handovers(self, before: float, count: int = 100) -> list[str]:
        """UIDs of reservations handed to a node agent before `before`, still unanswered."""
        return list(self._call(self._redis.zrangebyscore, HANDOVERS_KEY, "-inf", before,
                               start=0, num=count))
