"""The decision log (a `RedisStore` mixin): decisions told to pods' owners (Events the
monitors post, each by one poster of a consumer group) and to operators (the status page),
a repeated one told once per window and per namespace quota."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import redis

from extender.errors import StoreRefused, StoreUnavailable
from extender.model import Decision
from extender.state.keys import (
    DECISIONS_KEY, DECISIONS_MAXLEN, POSTERS_GROUP, TOLD_QUOTA, TOLD_QUOTA_PREFIX,
    TOLD_QUOTA_WINDOW_S,
)  # fmt: skip
from extender.state.lua import queue_script

log = logging.getLogger("extender.state.store")


class DecisionLog:
    """The decision-log half of `RedisStore` (its client, error translation and scripts)."""

    _redis: redis.Redis
    _call: Callable[..., Any]
    _tell: Any
    _timeout_s: float

    def log_decisions(self, decisions: Iterable[Decision], now: float,
                      repeat_s: int = 600) -> None:
        """Append decisions to the log (each with a once-key told once per `repeat_s`)."""
        pipe = self._redis.pipeline(transaction=False)
        if self._tell_all(pipe, decisions, now, repeat_s):
            self._call(pipe.execute)

    def tell(self, decision: Decision, now: float, repeat_s: int = 600) -> None:
        """`log_decisions` for one decision, best effort: the pod's Event and the status
        page may miss it, but a placement or release already made never fails for it."""
        try:
            self.log_decisions([decision], now, repeat_s)
        except StoreUnavailable:
            log.warning("could not log a decision", extra={"pod_uid": decision.uid})

    def decisions(self, limit: int) -> list[dict[str, str]]:
        """The latest `limit` decisions, newest first, each with its log ``id``."""
        entries = self._call(self._redis.xrevrange, DECISIONS_KEY, count=limit)
        return [{"id": entry_id, **fields} for entry_id, fields in entries]

    def claim_decisions(self, consumer: str, count: int, block_ms: int | None = None,
                        stale_ms: int = 60_000) -> list[tuple[str, dict[str, str]]]:
        """Decisions for one Event poster (`consumer`) of the posters' consumer group, oldest
        first: its own delivered but never acknowledged (a reply lost on the way), then
        those another poster took and never acknowledged for `stale_ms` (it died), else
        new ones (waiting up to `block_ms`, kept under half the socket timeout so an idle
        wait never reads as an outage). Each decision goes to one poster, so monitor
        replicas never post it twice; the group starts at the log's end (no backlog on a
        first start). Acknowledge with `ack_decisions` once posted."""
        try:
            self._call(self._redis.xgroup_create, DECISIONS_KEY, POSTERS_GROUP, id="$",
                       mkstream=True)
        except StoreRefused as exc:
            if "BUSYGROUP" not in str(exc):  # the group exists already: fine
                raise
        own = self._read_group(consumer, "0", count, None)
        if own:
            return own
        _, stale, *_ = self._call(self._redis.xautoclaim, DECISIONS_KEY, POSTERS_GROUP,
                                  consumer, stale_ms, "0-0", count=count)
        if stale:
            return [(entry_id, fields) for entry_id, fields in stale if fields]
        if block_ms is not None:
            block_ms = max(1, min(block_ms, int(self._timeout_s * 500)))
        return self._read_group(consumer, ">", count, block_ms)

    def _read_group(self, consumer: str, after: str, count: int,
                    block_ms: int | None) -> list[tuple[str, dict[str, str]]]:
        read = self._call(self._redis.xreadgroup, POSTERS_GROUP, consumer,
                          {DECISIONS_KEY: after}, count=count, block=block_ms)
        entries = [entry for _, batch in read or () for entry in batch]
        if gone := [entry_id for entry_id, fields in entries if not fields]:
            self.ack_decisions(gone)  # trimmed from the log before it was posted
        return [(entry_id, fields) for entry_id, fields in entries if fields]

    def ack_decisions(self, ids: Iterable[str]) -> None:
        if ids := list(ids):
            self._call(self._redis.xack, DECISIONS_KEY, POSTERS_GROUP, *ids)

    def _tell_all(self, pipe: Any, decisions: Iterable[Decision], now: float,
                  repeat_s: int) -> int:
        told = 0
        for d in decisions:
            keys = [DECISIONS_KEY]
            if d.once_key:
                keys += [f"st:told:{d.once_key}", TOLD_QUOTA_PREFIX + d.pod.partition("/")[0]]
            fields = ["kind", d.kind, "at", f"{now:.3f}", "uid", d.uid, "pod", d.pod,
                      "node", d.node, "message", d.message]
            queue_script(pipe, self._tell, keys, [max(1, int(repeat_s)), DECISIONS_MAXLEN,
                                                  TOLD_QUOTA, TOLD_QUOTA_WINDOW_S, *fields])
            told += 1
        return told
