"""Posts the logged decisions as Events on their pods: a thread of the monitor.

The extender never calls the API server for an Event: it appends each decision to
the log in Redis as it decides (`RedisStore.record_filter`, `log_decisions`), so no
verb waits on one and the extender's account needs no `events` permission. Every
monitor replica runs a poster; they share the log through a Redis consumer group, so
each decision is posted by one of them, and one a dead replica took is taken over
after a minute. Each is posted as a Normal Event, at most `rate` per second in bursts
of `burst` (client-go's event recorder limits the same way).
Over the limit a decision is dropped and counted (the status page still lists it),
never queued without bound.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable

from extender.errors import StoreUnavailable
from extender.metrics import EVENTS
from extender.state.store import RedisStore

log = logging.getLogger(__name__)
REASONS = {"reserved": "SchedTuneReserved", "waiting": "SchedTuneWaiting",
           "held": "SchedTuneGPUHeld", "released": "SchedTuneReleased"}
BATCH = 100
#: post(namespace, pod name, pod uid, reason, message) -> whether the API server took it
Post = Callable[[str, str, str, str, str], bool]


class TokenBucket:
    """`take()` is True at most `rate` times a second, `burst` at once."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens, self.at = float(burst), clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class EventPoster:
    def __init__(self, store: RedisStore, post: Post, rate: float = 5.0, burst: int = 25,
                 clock: Callable[[], float] = time.monotonic, name: str | None = None) -> None:
        self.store, self.post = store, post
        self.bucket = TokenBucket(rate, burst, clock)
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"

    def run_once(self, block_ms: int | None = None) -> int:
        """Post the decisions this poster claims now; returns how many it handled."""
        entries = self.store.claim_decisions(self.name, BATCH, block_ms)
        for _, fields in entries:
            self._post(fields)
        self.store.ack_decisions(entry_id for entry_id, _ in entries)
        return len(entries)

    def run_forever(self, stop: threading.Event, block_ms: int = 1000) -> None:
        while not stop.is_set():
            try:
                self.run_once(block_ms)
            except StoreUnavailable as exc:
                log.warning("event poster: %s", exc)
                stop.wait(1.0)

    def _post(self, fields: dict[str, str]) -> None:
        reason = REASONS.get(fields.get("kind", ""))
        namespace, _, name = fields.get("pod", "").partition("/")
        if reason is None or not namespace or not name:
            return  # a kind posted elsewhere (OOM kills: the monitor warns at once)
        if not self.bucket.take():
            EVENTS.labels(reason, "dropped").inc()
            return
        try:
            posted = self.post(namespace, name, fields.get("uid", ""), reason,
                               fields.get("message", ""))
        except Exception as exc:  # noqa: BLE001  (an event is best effort)
            log.warning("could not post event %s: %s", reason, type(exc).__name__,
                        extra={"pod": fields.get("pod"), "pod_uid": fields.get("uid")})
            posted = False
        EVENTS.labels(reason, "posted" if posted else "failed").inc()
