"""Shared scheduling state in Redis, behind `RedisStore` (`connection` reaches the server).

The keys are `keys`'s. The class is composed by job: node layouts (`layout_store`),
filter records and waiters (`filter_records`), what the monitor learns
(`learning_store`), the decision log (`decision_log`), handovers to node agents
(`handovers`); gangs and users' models are
sub-stores (`gang_store`, `model_store`).

Reserved MiB and job counts are never stored as counters: every read and the
reservation itself derive them from the queue members' job hashes, so nothing
can drift. A reservation that bind never confirms carries `expires_at`; Lua
prunes it once expired. Workers keep a `QueueMirror` and read only the queues
changed since their last read (`st:changed`), in the same atomic script. Each
public method is one atomic operation (a Lua script from `lua.py`, a
transaction or a single command), named for what it does: reads never write.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any, NamedTuple

import orjson
import redis

from extender.core import gpu_table
from extender.errors import Conflict, NotReplicated, StoreRefused, StoreUnavailable
from extender.model import (
    ClusterSnapshot, FilterRecord, JobRecord, NodeGpus, NodeState, PodDemand, Reservation,
)  # fmt: skip
from extender.state import learning_lua, lua
from extender.state.connection import on_master, redis_client
from extender.state.decision_log import DecisionLog
from extender.state.durability import ReplicaWait
from extender.state.gang_store import GangStore
from extender.state.handovers import Handovers
from extender.state.filter_records import FilterRecords, record_payload
from extender.state.keys import (
    JOBS_KEY, NODES_REV_KEY, demand_key, floors_key, gpu_key, job_key,
    node_queue_prefix,
)  # fmt: skip
from extender.state.layout_store import NodeLayouts
from extender.state.learning_store import LearningRecords, flat_floors
from extender.state.model_store import ModelStore
from extender.state.records import (
    alphas_from_pairs, gpu_list, job_from_mapping, job_from_pairs, live_waiters, queued_jobs,
    time_biases_from_pairs,
)  # fmt: skip
from extender.state.queue_mirror import QueueMirror

log = logging.getLogger(__name__)

LayoutRule = Callable[[NodeGpus | None, NodeGpus | None], NodeGpus | None]
KUBE_BIND = "kube"  # a reservation's source: kube-scheduler's bind verb
VOLCANO_ALLOCATE = "volcano"  # Volcano's allocate event (only its deallocate may drop it)


class WaitersRead(NamedTuple):
    """Which waiters a snapshot reads: pod `pod_uid`'s own entry ('': none), the `oldest`
    live ones (None: every live waiter) and the `shortest` (predicted to run the least
    time), as many of each still live `live_for_s` from now (a snapshot reused that much
    later still holds them)."""

    pod_uid: str = ""
    oldest: int | None = None
    live_for_s: float = 0.0
    shortest: int = 0


EVERY_WAITER = WaitersRead()
NO_WAITERS = WaitersRead(oldest=0)


# A master with too few replicas (min-replicas-to-write), one that lost its master link,
# or one still loading its data: the same as down for the verbs (retried).
NOT_WRITABLE = ("NOREPLICAS", "MASTERDOWN", "LOADING", "READONLY")


class RedisStore(NodeLayouts, FilterRecords, LearningRecords, DecisionLog, Handovers):
    """Atomic, named operations on the shared state."""

    def __init__(self, client: redis.Redis, replicas: int = 0, replica_wait_ms: int = 500
                 ) -> None:
        self._redis = client
        # An acknowledged placement's writes reach this many replicas first (WAIT), and
        # every other one a failover could promote (`durability`).
        self.replicas, self.replica_wait_ms = replicas, replica_wait_ms
        self._replica_wait = ReplicaWait(client, replicas, replica_wait_ms, self._call)
        self._reserve = client.register_script(lua.RESERVE)
        self._changes = client.register_script(lua.CHANGES)
        self._confirm = client.register_script(lua.CONFIRM)
        self._confirm_placement = client.register_script(lua.CONFIRM_PLACEMENT)
        self._release = client.register_script(lua.RELEASE)
        self._mark_running = client.register_script(lua.MARK_RUNNING)
        self._adopt = client.register_script(lua.ADOPT)
        self._wait = client.register_script(lua.WAIT)
        self._tell = client.register_script(lua.TELL)
        self._raise_floor = client.register_script(learning_lua.RAISE_FLOOR)
        self._raises_reset = client.register_script(learning_lua.RAISES_RESET)
        self._grow_beside = client.register_script(learning_lua.GROW_BESIDE)
        self._owner_run = client.register_script(learning_lua.OWNER_RUN)
        self.gangs = GangStore(client, self._call, self._replicated)
        self.models = ModelStore(client, self._call)
        self._layout_cache: tuple[str | None, dict[str, NodeGpus]] = (None, {})
        self._timeout_s = client.connection_pool.connection_kwargs.get("socket_timeout") or 1.0
        self._mirror = QueueMirror()
        self._mirror_lock = threading.Lock()
        self._sync_redis: tuple[int, redis.Redis | None] = (0, None)  # (its process, client)
        # the last sync's reads, and which waiters it read (`WaitersRead`)
        self._synced: tuple[str, list[str], list[str], list[str]] | None = None
        self._synced_waiters: tuple[WaitersRead, str] | None = None  # and the floors' job

    @classmethod
    def from_url(cls, url: str, timeout_s: float = 1.0, replicas: int = 0,
                 replica_wait_ms: int = 500) -> RedisStore:
        # A value that is not UTF-8 (written by hand) reads with U+FFFD in it, so its reader
        # finds it unreadable, as any broken record, instead of failing the whole read.
        return cls(redis_client(url, replicas > 0, socket_timeout=timeout_s,
                                socket_connect_timeout=timeout_s, decode_responses=True,
                                encoding_errors="replace", health_check_interval=10),
                   replicas, replica_wait_ms)

    def ping(self) -> bool:
        return bool(self._call(self._redis.ping))

    def snapshot(self, nodes: Mapping[str, NodeGpus | None], now: float,
                 vet: LayoutRule | None = None, sync: bool = True,
                 waiters: WaitersRead = EVERY_WAITER,
                 record: FilterRecord | None = None, record_ttl_s: int = 0,
                 floors_of: PodDemand | None = None) -> ClusterSnapshot:
        """A frozen read of the named nodes' queues and of the waiters (one round trip while
        node layouts are unchanged). A layout of None is read from the node watcher's hash.

        `vet(claimed, watched)`, when given, decides each node's layout from the one
        named (claimed by a request) and the node watcher's (None: never seen).
        `waiters`: which waiters to read (`WaitersRead`; a request needs only its pod's own
        entry and the oldest few, whatever the number waiting).
        `sync=False` reads this worker's mirror as the last snapshot left it, with no
        round trip (prioritize of the pod that snapshot was read for).
        `record`, when given, is written as `record_filter(record, record_ttl_s)` writes it,
        in the same round trip as the read (a record that does not depend on the decision:
        names mode, before any hold or wait is known); it forces a sync.
        `floors_of`: the job whose GPU OOM floors to read with it (None: none)."""
        floor_key = floors_key(floors_of.model, floors_of.task, floors_of.batch) \
            if floors_of is not None and floors_of.model else ""
        with self._mirror_lock:
            if sync or record is not None or self._synced is None \
                    or self._synced_waiters != (waiters, floor_key):
                self._synced = self._sync_mirror(now, waiters, record, record_ttl_s, floor_key)
                self._synced_waiters = (waiters, floor_key)
            nodes_rev, waiting, floors, alphas = self._synced
            watched = self._layouts(nodes_rev)  # re-read only when the watcher changed one
            mirror = self._mirror
            states: Mapping[str, NodeState]
            if vet is None and len(nodes) >= gpu_table.ARRAYS_FROM and (
                    not any(nodes.values()) or all(layout is None or layout == watched.get(name)
                                                   for name, layout in nodes.items())):
                # Many nodes, with the watcher's layouts: the worker's arrays.
                states = mirror.table(tuple(nodes), watched, now)
            else:
                layouts = {name: vet(layout, watched.get(name)) if vet is not None
                           else layout or watched.get(name) for name, layout in nodes.items()}
                states = {name: mirror.node_state(name, layout, now)
                          for name, layout in layouts.items()}  # fmt: skip
        return ClusterSnapshot(now=now, nodes=states, waiting=live_waiters(waiting, now),
                               floors=flat_floors(floor_key, floors) if floor_key else {},
                               alphas=alphas_from_pairs(alphas),
                               time_biases=time_biases_from_pairs(alphas))

    def _sync_mirror(self, now: float, waiters: WaitersRead, record: FilterRecord | None = None,
                     record_ttl_s: int = 0,
                     floor_key: str = "") -> tuple[str, list[str], list[str], list[str]]:
        """Bring the mirror up to date: one script call returning only what changed (with
        `record` written in the same round trip when given).

        Returns the node layouts' rev, the raw waiters, OOM floors and learned alphas,
        read in the same call."""
        mirror = self._mirror
        read = [now, waiters.pod_uid, -1 if waiters.oldest is None else waiters.oldest,
                now + waiters.live_for_s, waiters.shortest, floor_key]
        keys, args = [NODES_REV_KEY], [mirror.rev, *read]
        if record is not None:
            keys.append(demand_key(record.demand.uid))
            args += [record_payload(record), record_ttl_s]
        epoch, rev, nodes_rev, waiting, floors, alphas, *changed = self._read_changes(keys, args)
        if epoch != mirror.epoch or int(rev) < mirror.rev:
            mirror.reset(epoch)
            _, rev, nodes_rev, waiting, floors, alphas, *changed = self._read_changes(
                [NODES_REV_KEY], [0, *read])
        updates = []
        for queue, rows in zip(changed[::2], changed[1::2], strict=True):
            node, _, index = queue.removeprefix("st:gpu:").rpartition(":")
            if index.isascii() and index.isdigit():  # else no helper built it: not a GPU
                updates.append((node, int(index), queued_jobs(rows)))
        mirror.apply(int(rev), updates)
        return nodes_rev, waiting, floors, alphas

    def _read_changes(self, keys: list[str], args: list[Any]) -> list[Any]:
        """The changes script's reply, on this process's own connection. A connection that
        died while idle (Redis restarted, a proxy's idle timeout) fails its next command
        and is dropped: the call is made once more, on a new one (the script only reads,
        and writes the same record again)."""
        with self._errors_translated():
            try:
                return self._changes(keys=keys, args=args, client=self._sync_client())
            except redis.ConnectionError:  # once more, on a connection the pool makes anew
                self._sync_redis = (0, None)
            try:
                return self._changes(keys=keys, args=args, client=self._sync_client())
            except redis.ConnectionError:
                self._sync_redis = (0, None)
                raise

    def _sync_client(self) -> redis.Redis:
        """This process's own connection for the snapshot's script call, taken from the pool
        once (a worker forked after the store was built takes its own): a request does not
        pay the pool's check of a connection it takes out (a poll of its socket, about
        0.07 ms under gevent). Its lock keeps one command on it at a time. Dropped when
        it fails: redis-py reconnects a held connection to the address it had, so after a
        Sentinel failover it would keep calling the dead master; and dropped once the
        sentinels name another master (`connection.on_master`), as one they replaced may
        live on and answer with its stale state."""
        pid, client = self._sync_redis
        if client is not None and pid == os.getpid() and not on_master(client):
            client.close()  # its connection goes back to the pool, which drops it
            client = None
        if client is None or pid != os.getpid():
            client = redis.Redis(connection_pool=self._redis.connection_pool,
                                 single_connection_client=True)
            self._sync_redis = (os.getpid(), client)
        return client

    def reserve(self, record: JobRecord, candidates: Iterable[tuple[int, float, int]],
                now: float, ttl_s: float, source: str = KUBE_BIND, gpus: int = 1) -> Reservation:
        """Reserve `record.reserved_mib` on each of the first `gpus` candidate GPUs that take
        it (all of them or none), expiring after `ttl_s` unless confirmed (0: never);
        `source` records who asked.

        `candidates`: (gpu index, capacity MiB, collocation limit) in preference
        order. Idempotent per (uid, node): a pod that already holds a live
        reservation on `record.node` keeps it (`new` False). Raises `Conflict`
        when too few candidates have room any more, or when the pod holds a live
        reservation on another node (never moved: one pod, one placement).
        """
        cands = list(candidates)
        keys = [job_key(record.uid), JOBS_KEY, *(gpu_key(record.node, i) for i, _, _ in cands)]
        fields = {k: v for k, v in asdict(record).items()
                  if k not in ("gpu_index", "reserved_mib", "reserved_at", "expires_at",
                               "gpu_indices", "grown_mib")}
        fields["source"] = source
        args: list[Any] = [now, ttl_s, record.reserved_mib, orjson.dumps(fields), gpus]
        for index, capacity, limit in cands:
            args += [index, capacity, limit]
        (status, detail, *held), durable = self._replicated(self._reserve, keys, args)
        if not durable:  # not acknowledged: a failover could lose it
            if status == "reserved":
                self.release_placement(record.uid, record.node, source)
            raise self._not_replicated("the reservation")
        if status == "full":
            which = f"fewer than {gpus} GPUs" if gpus > 1 else "no GPU"
            have = "have" if gpus > 1 else "has"
            raise Conflict(f"{which} on {record.node} {have} room for "
                           f"{record.reserved_mib:.0f} MiB padded any more (gpu:used MiB:jobs "
                           f"{detail}); the pod will be retried")
        node, _, index = str(detail).removeprefix("st:gpu:").rpartition(":")
        if status == "elsewhere":
            raise Conflict(f"pod {record.uid} already holds a reservation on node {node} "
                           f"(GPU {index}); refusing to place it on {record.node} too")
        indices = gpu_list(held[0]) if held and held[0] else ()
        return Reservation(record.uid, node, int(index), new=status == "reserved",
                           gpu_indices=indices if len(indices) > 1 else ())

    def confirm_bind(self, reservation: Reservation, now: float) -> bool:
        """Mark a reservation bound (no expiry); False if it expired or moved meanwhile."""
        queue = gpu_key(reservation.node, reservation.gpu_index)
        confirmed, durable = self._replicated(self._confirm, [job_key(reservation.uid)],
                                              [queue, now])
        if not durable:  # the reservation itself was replicated (`reserve`): it stands
            log.warning("bind's confirmation of %s reached fewer than %d replicas; after a "
                        "failover it expires unless the monitor sees the pod bound",
                        reservation.uid, self.replicas)
        return bool(confirmed)

    def confirm_placement(self, uid: str, node: str, now: float) -> bool:
        """Mark the pod's reservation bound (no expiry) if it is on `node` and live: for the
        monitor, once it sees the pod bound there (Volcano binds the pods it allocated).
        True when it is (or already was) confirmed; False when the pod holds none there
        (none, expired, or on another node)."""
        return bool(self._call(self._confirm_placement, keys=[job_key(uid)],
                               args=[node_queue_prefix(node), now]))

    def mark_running(self, uid: str, started_at: float) -> bool:
        return bool(self._call(self._mark_running, keys=[job_key(uid)], args=[started_at]))

    def release(self, uid: str) -> JobRecord | None:
        """Remove a reservation; returns what was released (None if there was none)."""
        pairs = self._call(self._release, keys=[job_key(uid), JOBS_KEY], args=[uid])
        return job_from_pairs(pairs) if pairs else None

    def release_placement(self, uid: str, node: str, source: str) -> JobRecord | None:
        """Remove the pod's reservation only if `source` made it, on `node`, and it is not
        confirmed yet (Volcano's deallocate: a placement it tentatively allocated and is
        taking back). Anything else stays; returns what was released, else None."""
        pairs = self._call(self._release, keys=[job_key(uid), JOBS_KEY],
                           args=[uid, node_queue_prefix(node), source])
        return job_from_pairs(pairs) if pairs else None

    def adopt(self, record: JobRecord, capacity_mib: float, limit: int,
              now: float) -> tuple[str, str]:
        """Record a placement that already happened (a pod bound to that GPU, Redis lost or
        behind), checking room as `reserve` does against the GPU's `capacity_mib` and
        collocation `limit` (reservations expired at `now` do not count).

        The pod is on that GPU whatever we think, so it is recorded even without room:
        the GPU then shows full and takes nothing more until jobs leave. Returns (status,
        detail): "adopted"; "moved" (it was queued elsewhere); "exists" (already queued
        there: kept as it was, confirmed); "overcommit" (recorded, but the GPU already held
        `detail` = "used MiB:jobs" without it); "invalid" (reserved MiB not a number in
        (0, capacity_mib]: nothing written).
        """
        keys = [job_key(record.uid), JOBS_KEY, *(gpu_key(record.node, i) for i in record.gpus)]
        fields = {k: v for k, v in asdict(record).items()
                  if k not in ("expires_at", "gpu_indices", "grown_mib")}
        if record.gpu_indices:
            fields["gpus"] = ",".join(map(str, record.gpu_indices))
        status, detail = self._call(self._adopt, keys=keys,
                                    args=[orjson.dumps(fields), capacity_mib, limit, now])
        return str(status), str(detail)

    def jobs(self) -> list[JobRecord]:
        """Every reservation (for reconcile and the inspection CLI; not on the request path)."""
        uids = self.job_uids()
        pipe = self._redis.pipeline(transaction=False)
        for uid in uids:
            pipe.hgetall(job_key(uid))
        return [job_from_mapping(d) for d in self._call(pipe.execute) if d.get("uid")]

    def job(self, uid: str) -> JobRecord | None:
        data = self._call(self._redis.hgetall, job_key(uid))
        return job_from_mapping(data) if data else None

    def job_uids(self) -> list[str]:
        return list(self._call(self._redis.zrange, JOBS_KEY, 0, -1))

    def queues(self) -> dict[tuple[str, int], list[str]]:
        """Every GPU queue's members as stored, (node, gpu index) -> pod UIDs in reservation
        order, expired members included (for audits; decisions read `snapshot`)."""
        keys = sorted(self._call(lambda: list(self._redis.scan_iter(match=gpu_key("*", "*")))))
        pipe = self._redis.pipeline(transaction=False)
        for key in keys:
            pipe.zrange(key, 0, -1)
        queues = {}
        for key, members in zip(keys, self._call(pipe.execute), strict=True):
            node, _, index = key.removeprefix("st:gpu:").rpartition(":")
            queues[node, int(index)] = members
        return queues

    def wipe(self) -> int:
        """Delete every key of this store's schema (`st:*`), nothing else in the database:
        a fresh state for a replay run. Returns the number of keys deleted."""
        keys = self._call(lambda: list(self._redis.scan_iter(match="st:*", count=1000)))
        for start in range(0, len(keys), 1000):
            self._call(self._redis.delete, *keys[start:start + 1000])
        return len(keys)

    def _replicated(self, script: Any, keys: list[str], args: list[Any]) -> tuple[Any, bool]:
        """`script`'s reply, and whether its writes reached every replica a failover could
        promote (`durability.ReplicaWait`; always True with no replicas asked for)."""
        return self._replica_wait.write(script, keys, args)

    def _not_replicated(self, what: str) -> NotReplicated:
        return NotReplicated(f"state store: {what} reached fewer than the replicas online "
                             f"(at least {self.replicas}) in {self.replica_wait_ms} ms (a "
                             "replica down, or a failover under way), so a failover could "
                             "lose it; retry")

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        with self._errors_translated():
            return fn(*args, **kwargs)

    @contextmanager
    def _errors_translated(self) -> Iterator[None]:
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"state store unreachable ({exc}); retry") from exc
        except redis.ResponseError as exc:
            if any(code in str(exc) for code in NOT_WRITABLE):  # also inside a script's
                raise NotReplicated(f"state store cannot take writes now ({str(exc)[:200]}): "
                                    "no replica in reach, or a failover under way; retry") \
                    from exc
            raise StoreRefused(f"state store refused the operation ({str(exc)[:200]}); "
                               "retry once an operator has fixed it (a st:* key of another "
                               "type written by hand, Redis out of memory or read-only)") from exc
