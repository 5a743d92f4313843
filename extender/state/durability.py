"""What makes an acknowledged write survive the master's death: WAIT until every replica
a failover could promote holds it.

Sentinel promotes the replica it last saw furthest ahead (from an INFO up to 10 s old), so
a write only some replicas hold can be lost. Waited for: every replica the master lists,
still syncing or streaming, but one silent for more than ACK_LAG_S (hung: the sentinels
find it down too, and do not promote it); and, for LEFT_MEMORY_S, every replica that left
the list. A replica leaves when it dies or when Sentinel promotes it (it drops its master
link at once): a master being replaced while still alive (declared down while busy) would
otherwise acknowledge writes only the replicas left behind hold, which they drop when
they resync from the promoted one. And every replica the sentinels could promote that the
master does not list yet (one reconfigured after a failover, still connecting): it holds
none of the master's writes, so while one exists nothing is acknowledged; nor while the
sentinels name another master, or one of them finds this one down (it is being, or may
at once be, replaced: it keeps its connections, and its replicas, until they
reconfigure it).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable

import redis

from extender.state.connection import FailoverView, failover_view
from extender.state.lua import queue_script

ACK_LAG_S = 2  # a replica acknowledges every second; one silent longer is not waited for
LEFT_MEMORY_S = 10.0  # a replica gone from the list is waited for (refusing) this long
REFRESH_S = 1.0  # how stale the master's replication view may be


@dataclass(frozen=True)
class Replication:
    """A master's INFO replication, as WAIT needs it: whose stream (`replid`: a promoted
    replica starts a new one), which replicas are listed, how many WAIT waits for."""

    replid: str
    waited_for: int
    addresses: frozenset[tuple[str, int]] = frozenset()
    run_id: str = ""  # the server's own (INFO server)

    @property
    def listed(self) -> int:
        return len(self.addresses)


def replication(client: redis.Redis) -> Replication:
    """INFO replication of the server `client` reaches; no replicas from a non-master."""
    pipe = client.pipeline(transaction=False)
    pipe.info("replication")
    pipe.info("server")
    info, server = pipe.execute()
    return replication_of(info, str(server.get("run_id", "")))


def replication_of(info: dict[str, Any], run_id: str = "") -> Replication:
    """`replication` from INFO replication as redis-py parses it (slaveN: a dict of ip,
    port, state, offset, lag)."""
    if info.get("role") != "master":
        return Replication(str(info.get("master_replid", "")), 0, run_id=run_id)
    listed = [value for key, value in info.items()
              if key.startswith("slave") and key[5:].isdigit() and isinstance(value, dict)]
    waited_for = sum(1 for value in listed if value.get("state") != "online"
                     or int(value.get("lag", 0)) <= ACK_LAG_S)
    return Replication(str(info.get("master_replid", "")), waited_for,
                       frozenset((str(value.get("ip")), int(value.get("port", 0)))
                                 for value in listed), run_id)


def unlisted(view: Replication, sentinels: FailoverView | None,
             counted: frozenset[tuple[str, int]] = frozenset()) -> int:
    """How many replicas a failover could promote that do not hold the master's writes:
    those the sentinels could promote that it does not list (but those `counted`
    already), or one more than it lists
    (no write is acknowledged) while they name another master (of another run id) or
    one of them finds this one down: a master still serving may be replaced at once."""
    if sentinels is None:
        return 0
    replaced = sentinels.master_runid and view.run_id and sentinels.master_runid != view.run_id
    if replaced or sentinels.master_doubted:
        return view.listed + 1
    return len(sentinels.promotable - view.addresses - counted)


def replicated(client: redis.Redis, script: Any, keys: list[str], args: list[Any],
               replicas: int, wait_ms: int) -> tuple[Any, int, Replication | None]:
    """`script`'s reply, how many replicas acknowledged its writes (and so every write
    before them: replication is one ordered stream) within `wait_ms`, and the master's
    replication view right after (None when not asked): WAIT and INFO on the same
    connection, in the same round trip. Asks nothing of replicas when `replicas` is 0."""
    if not replicas:
        return script(keys=keys, args=args), 0, None
    pipe = client.pipeline(transaction=False)
    queue_script(pipe, script, keys, args)
    pipe.wait(replicas, wait_ms)
    pipe.info("replication")
    reply, acknowledged, info = pipe.execute()
    return reply, int(acknowledged), replication_of(info)


class ReplicaWait:
    """How many replicas a durable write waits for (at least `minimum`), from the master's
    replication view and the sentinels' (`connection.failover_view`), read at most
    once per REFRESH_S through `call` (the store's error translation); and again after
    each write, from the master's list read in its round trip: a replica promoted away
    since the last read (gone from the list, or still one the sentinels could promote)
    refuses the write it did not acknowledge, not up to REFRESH_S later."""

    def __init__(self, client: redis.Redis, minimum: int, wait_ms: int,
                 call: Callable[..., Any]) -> None:
        self._redis, self.minimum, self.wait_ms, self._call = client, minimum, wait_ms, call
        self._read_at = -REFRESH_S
        self._view = Replication("", 0)
        self._sentinels: FailoverView | None = None  # what they could fail over to
        self._stream = ""  # the replid the replicas below were listed under
        self._last_listed: dict[tuple[str, int], float] = {}  # replica -> when last listed

    def write(self, script: Any, keys: list[str], args: list[Any]) -> tuple[Any, bool]:
        """`script`'s reply, and whether its writes reached every replica waited for in
        time (always True when `minimum` is 0: no replicas asked for)."""
        if not self.minimum:
            return self._call(script, keys=keys, args=args), True
        wanted = self.wanted()
        reply, acknowledged, after = self._call(replicated, self._redis, script, keys, args,
                                                wanted, self.wait_ms)
        if after is not None and after.replid == self._view.replid:  # the same master
            self._view = dataclasses.replace(after, run_id=self._view.run_id)
            wanted = max(wanted, self._wanted_now(time.monotonic()))
        elif after is not None:  # another master since the last read: read it again
            wanted = acknowledged + 1
        if acknowledged < wanted:
            self._read_at = -REFRESH_S  # a replica gone, or a new master: read it again
        return reply, acknowledged >= wanted

    def wanted(self) -> int:
        now = time.monotonic()
        if now - self._read_at >= REFRESH_S:
            self._view, self._read_at = self._call(replication, self._redis), now
            self._sentinels = failover_view(self._redis)
        return self._wanted_now(now)

    def _wanted_now(self, now: float) -> int:
        """Every replica listed now that acknowledges, plus every one that left the list
        within LEFT_MEMORY_S (by address: one joining as another leaves hides nothing),
        plus those the sentinels could promote that the master does not list."""
        view = self._view
        if view.replid != self._stream:  # another master, or this one promoted: anew
            self._stream, self._last_listed = view.replid, {}
        self._last_listed.update(dict.fromkeys(view.addresses, now))
        self._last_listed = {address: seen for address, seen in self._last_listed.items()
                             if now - seen <= LEFT_MEMORY_S}
        left = frozenset(self._last_listed) - view.addresses
        return max(self.minimum, view.waited_for + len(left)
                   + unlisted(view, self._sentinels, left))
