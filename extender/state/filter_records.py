"""What filter keeps for bind, and the pods waiting for room (a `RedisStore` mixin): a
filter record per pod (its demand, the layouts its request carried, held GPUs, its gang),
a waiter per annotated pod that fit nowhere."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson
import redis

from extender.model import Decision, FilterRecord, PodDemand, Waiter
from extender.state.connection import check_master_now
from extender.state.keys import WAITING_KEY, demand_key
from extender.state.lua import queue_script
from extender.state.records import layout_from_row, live_waiters


def record_payload(record: FilterRecord) -> bytes:
    """A filter record as stored (`RedisStore.filter_record` reads it back)."""
    groups: dict[tuple[Any, ...], list[str]] = {}  # most nodes share a few layouts
    for name, layout in record.layouts.items():
        groups.setdefault(layout.as_row(), []).append(name)
    stored: dict[str, Any] = {"demand": record.demand,  # orjson writes the dataclass
                              "groups": [[row, names] for row, names in groups.items()]}
    if record.held:
        stored["held"] = {n: list(indices) for n, indices in record.held.items()}
    if record.gang:
        stored["gang"] = record.gang
    return orjson.dumps(stored)


class FilterRecords:
    """The filter-record half of `RedisStore` (its client, error translation, scripts, and
    the decision log's `_tell_all` for a waiter's decisions)."""

    _redis: redis.Redis
    _call: Callable[..., Any]
    _wait: Any
    _tell_all: Callable[..., int]

    def record_filter(self, record: FilterRecord, ttl_s: int, waiter: Waiter | None = None,
                      now: float = 0.0, wait_ttl_s: float = 0.0,
                      decisions: Iterable[Decision] = (), repeat_s: int = 600) -> None:
        """Keep what filter decided for bind (expires after `ttl_s`) and, for a pod that fit
        nowhere, record or refresh it as a waiter until `now + wait_ttl_s` (expired or
        unreadable waiters go), and log its `decisions` (each told once per `repeat_s`):
        one transaction, one round trip."""
        key, payload = demand_key(record.demand.uid), record_payload(record)
        if waiter is None and not decisions:  # the common case: one command, no transaction
            self._call(self._redis.set, key, payload, ex=ttl_s)
            return
        pipe = self._redis.pipeline(transaction=True)
        pipe.set(key, payload, ex=ttl_s)
        if waiter is not None:
            expires_at = now + wait_ttl_s
            entry = {"uid": waiter.uid, "pod": waiter.pod, "since": waiter.since,
                     "expires_at": expires_at, "needs": waiter.needs, "gpus": waiter.gpus,
                     "members": waiter.members}
            queue_script(pipe, self._wait, [WAITING_KEY], [
                waiter.uid, now, orjson.dumps(entry), repr(float(waiter.since)),
                repr(float(expires_at)), repr(waiter.shortest_s)])
        self._tell_all(pipe, decisions, now, repeat_s)
        self._call(pipe.execute)

    def filter_record(self, uid: str) -> FilterRecord | None:
        """What filter kept for the pod (None: never filtered, or expired). An unreadable
        record counts as none. None lets bind pass a pod through unreserved, so under
        Sentinel it is read again once the sentinels are asked which master it is: a
        connection kept to a master they replaced would answer none for every record
        written since."""
        raw = self._call(self._redis.get, demand_key(uid))
        if not raw and self._call(check_master_now, self._redis):
            raw = self._call(self._redis.get, demand_key(uid))
        if not raw:
            return None
        try:
            stored = orjson.loads(raw)
            return FilterRecord(
                PodDemand(**stored["demand"]),
                {n: layout_from_row(row) for row, names in stored.get("groups", ()) for n in names},
                {n: tuple(int(i) for i in held) for n, held in stored.get("held", {}).items()},
                str(stored.get("gang") or ""))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            return None

    def forget_filter(self, uid: str) -> None:
        """Drop the pod's filter record (written with the read, then the pod was refused)."""
        self._call(self._redis.delete, demand_key(uid))

    def waiters(self, now: float) -> tuple[Waiter, ...]:
        """Live waiters, oldest first (for inspection; requests get them in the snapshot)."""
        return live_waiters(self._call(self._redis.hvals, WAITING_KEY), now)
