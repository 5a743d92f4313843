"""One way to reach the state's Redis from a URL (`extender.redis_url`): a single server,
or the master that Redis Sentinel names (redis-py's `Sentinel`), followed across failovers
without a restart (what makes a write durable there: `durability`).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import redis
from redis.sentinel import (
    MasterNotFoundError, Sentinel, SentinelConnectionPool, SentinelManagedConnection,
)

from extender.redis_url import SENTINEL_SCHEME, parse_sentinel_url


class NewestConfigSentinel(Sentinel):
    """redis-py's Sentinel client, asking every sentinel instead of taking the first
    answer: the master of the newest configuration (the highest config-epoch: a failover
    raises it, and Sentinel itself lets the newest win). The first answer can come from a
    sentinel not told of a failover yet, naming the old master come back with its old
    data. None while the newest names the master a failover is replacing (its leader
    says failover_in_progress), or names two."""

    def discover_master(self, service_name: str) -> tuple[str, int]:
        named: dict[int, set[tuple[str, int]]] = {}
        replacing: set[tuple[str, int]] = set()
        for sentinel in self.sentinels:
            try:
                state = sentinel.sentinel_masters().get(service_name)
            except (redis.ConnectionError, redis.TimeoutError):
                continue
            if not state:
                continue
            address = (state["ip"], state["port"])
            if "failover_in_progress" in state["flags"].split(","):
                replacing.add(address)
            elif self.check_master_state(state, service_name):
                named.setdefault(state["config-epoch"], set()).add(address)
        if not named:
            raise MasterNotFoundError(f"no sentinel names a master for {service_name!r}")
        newest = named[max(named)]
        if len(newest) > 1 or newest & replacing:
            raise MasterNotFoundError(f"{service_name!r}: a failover is under way")
        return next(iter(newest))

    def failover_view(self, service_name: str) -> FailoverView:
        """What the sentinels of the newest configuration would fail over to now: their
        master's run id, whether they could replace it (as many of them as the quorum find
        it down, or one says it is replacing it), and every replica they could promote:
        known to them as a replica of it, not down (`_promotable`), of a priority
        above 0 (what Sentinel's choice of a replica starts from), reporting the replica
        role. A reconfigured replica is known to them before the new master lists it. One
        still reporting the master role (an old master back, before they make it a
        replica, 8 s or more) reports no replication offset, so Sentinel, choosing the
        replica furthest ahead, takes it only when no replica is in reach."""
        views: dict[int, FailoverView] = {}
        for sentinel in self.sentinels:
            try:
                master = sentinel.sentinel_masters().get(service_name)
                replicas = sentinel.sentinel_slaves(service_name) if master else []
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                continue
            if not master:
                continue
            named = (master["ip"], master["port"])
            flags = set(str(master.get("flags", "")).split(","))
            seen = views.get(master["config-epoch"], FailoverView(
                master.get("runid", ""), quorum=int(master.get("quorum", 1))))
            views[master["config-epoch"]] = dataclasses.replace(
                seen, promotable=seen.promotable | {
                    (replica["ip"], replica["port"]) for replica in replicas
                    if _promotable(replica) and (replica["ip"], replica["port"]) != named},
                finding_down=seen.finding_down + ("s_down" in flags),
                replacing=seen.replacing or bool(flags & {"o_down", "failover_in_progress"}))
        return views[max(views)] if views else FailoverView("")


@dataclass(frozen=True)
class FailoverView:
    """The newest configuration's master (its run id), how many of its sentinels find it
    down (of the `quorum` a failover needs) or are replacing it, and the replicas they
    could promote."""

    master_runid: str
    promotable: frozenset[tuple[str, int]] = frozenset()
    finding_down: int = 0
    quorum: int = 1
    replacing: bool = False

    @property
    def master_doubted(self) -> bool:
        """The sentinels could replace the master before the next look at them."""
        return self.replacing or self.finding_down >= self.quorum


def _promotable(replica: dict[str, Any]) -> bool:
    """Disconnected counts: just after a failover the sentinels' links to every replica
    are new, and each reads disconnected until it connects (up to a second), when it
    may be promoted; a dead one is found down (s_down) after down-after."""
    flags = set(str(replica.get("flags", "")).split(","))
    return (not flags & {"s_down", "o_down"}
            and int(replica.get("slave-priority", 1)) > 0
            and replica.get("role-reported", "slave") == "slave")


class MasterWithReplicaConnection(SentinelManagedConnection):
    """A connection to the server the sentinels name as master, kept only if the server
    says it is a master streaming to a replica. While the sentinels promote a replica they
    still name the old master, and one restarted meanwhile (with its old data, until they
    make it a replica) takes no write (min-replicas-to-write) but answers every read:
    decisions read from it would be taken on a stale state."""

    def on_connect_check_health(self, check_health: bool = True) -> None:
        super().on_connect_check_health(check_health=check_health)
        self.send_command("ROLE")
        role, _, replicas = self.read_response()[:3]
        role = role.decode() if isinstance(role, bytes) else role
        if role != "master" or not replicas:
            raise redis.ConnectionError(f"{self.host}:{self.port} is not a master with a "
                                        f"replica (role {role}); the sentinels are asked again")


MASTER_CHECK_S = 1.0  # how stale the pool's idea of the master may be


class MasterCheckedPool(SentinelConnectionPool):
    """redis-py's pool of connections to the Sentinel master, asking the sentinels again
    which master it is at most once per MASTER_CHECK_S before it hands out a connection
    (redis-py asks only when a connection is made): one kept to a master they replaced,
    still a master on its own, would read its stale state for as long as it lives. A
    master changed drops the idle connections (redis-py's own `get_master_address`).
    While a failover is under way no connection is handed out (a retriable
    ConnectionError: `MasterNotFoundError`), and the sentinels are asked at every call."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._checked_at = -MASTER_CHECK_S

    def check_master(self, now: bool = False) -> tuple[str, int]:
        """The master's address, the sentinels asked if the last look is MASTER_CHECK_S
        old (or `now`). Raises `MasterNotFoundError` while a failover is under way."""
        if now or time.monotonic() - self._checked_at >= MASTER_CHECK_S:
            self._checked_at = -MASTER_CHECK_S  # asked again next time, should this fail
            self.proxy.get_master_address()
            self._checked_at = time.monotonic()
        return self.master_address

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        self.check_master()
        return super().get_connection(*args, **kwargs)


def check_master_now(client: redis.Redis) -> bool:
    """For a client of a Sentinel master, ask the sentinels now which master it is, so
    that its next command goes there (idle connections to another are dropped), and say
    True; False for a client of one Redis. Raises redis.ConnectionError while a failover
    is under way."""
    pool = client.connection_pool
    if isinstance(pool, MasterCheckedPool):
        pool.check_master(now=True)
        return True
    return False


def on_master(client: redis.Redis) -> bool:
    """Whether a single-connection `client`'s connection is to the master the sentinels
    name (asked at most once per MASTER_CHECK_S); always for one Redis, or none made yet."""
    pool, held = client.connection_pool, client.connection
    if not isinstance(pool, MasterCheckedPool) or held is None or not held.is_connected:
        return True
    return (held.host, held.port) == pool.check_master()


def failover_view(client: redis.Redis) -> FailoverView | None:
    """`NewestConfigSentinel.failover_view` of the master `client` follows; None for a
    client of one Redis (no Sentinel to fail over)."""
    pool = client.connection_pool
    manager = getattr(pool, "sentinel_manager", None)
    if not isinstance(manager, NewestConfigSentinel):
        return None
    return manager.failover_view(pool.service_name)


def redis_client(url: str, master_with_replica: bool = False, **options: Any) -> redis.Redis:
    """A client of the server `url` names; for a Sentinel URL, of its current master: a
    connection (re)made after a failover goes to the new master, and one to a master
    demoted since fails (READONLY), to be retried (`options`: redis-py's keyword
    arguments for the data connections, e.g. socket_timeout). `master_with_replica`: a
    Sentinel master is used only while it has a replica (`MasterWithReplicaConnection`)."""
    if not url.startswith(f"{SENTINEL_SCHEME}://"):
        return redis.Redis.from_url(url, **options)
    target = parse_sentinel_url(url)
    timeouts = {k: v for k, v in options.items()
                if k in ("socket_timeout", "socket_connect_timeout")}
    sentinel = NewestConfigSentinel(list(target.addresses),
                        sentinel_kwargs={**timeouts, "password": target.sentinel_password})
    if master_with_replica:
        options["connection_class"] = MasterWithReplicaConnection
    return sentinel.master_for(target.master, connection_pool_class=MasterCheckedPool,
                               db=target.db, password=target.password, **options)
