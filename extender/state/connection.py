"""One way to reach the state's Redis from a URL (`extender.redis_url`): a single server,
or the master that Redis Sentinel names (redis-py's `Sentinel`), followed across failovers
without a restart (what makes a write durable there: `durability`).
"""

from __future__ import annotations

from typing import Any

import redis
from redis.sentinel import MasterNotFoundError, Sentinel, SentinelManagedConnection

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
    return sentinel.master_for(target.master, db=target.db, password=target.password,
                               **options)
