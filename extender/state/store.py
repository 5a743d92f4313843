"""Shared scheduling state in Redis, behind `RedisStore` (`connection` reaches the server).

Key layout (human readable; every key is built by the helpers below):

    st:nodes                hash    node name -> JSON GPU layout from the node watcher
                                    (product, gpu_type, count, memory_mib, share_slots, problem)
    st:nodes:rev            string  bumped on every layout change (workers cache layouts by it)
    st:gpu:{node}:{index}   zset    the GPU's queue: pod UIDs scored by reservation time
    st:rev                  string  bumped by every change to a queue or a queued job
    st:changed              zset    queue keys scored by the rev of their last change
    st:epoch                string  id of this state, set by the first change; a new one
                                    (Redis wiped) makes every worker re-read all queues
    st:job:{uid}            hash    one reservation: pod, namespace, model, task, node,
                                    gpu_index, reserved_mib, predicted_s, state
                                    (reserved|bound|running), reserved_at, started_at,
                                    expires_at (0 = none), queue, and for a pod on
                                    several GPUs queues and gpus (comma-separated, the
                                    first is queue and gpu_index), source (who reserved:
                                    kube = a kube-scheduler bind, volcano = Volcano's
                                    allocate; absent on adopted placements), grown_mib
                                    (the part of reserved_mib added beside an OOM kill),
                                    device_uuids (the GPUs a node agent was handed) and
                                    handed_over_at (until it answered)
    st:jobs                 zset    every reserved pod UID, scored by reservation time
    st:demand:{uid}         string  JSON: what filter kept for bind (`FilterRecord`: the
                                    decoded demand; the layouts the request carried for
                                    the passing nodes, grouped as [[layout row, [node
                                    names]], ...]; held GPUs; expires after `demand_ttl_s`)
    st:observations         stream  finished runs (model, task, batch, units, gpu_type,
                                    node, gpus, started_at, seconds, predicted_s,
                                    reserved_mib, oom, outcome)
    st:ooms                 set     earlier versions' OOM kills seen (read, never written)
    st:oom:{event}          string  an OOM kill counted, per pod/container/restart (7 days)
    st:waiting              hash    pod UID -> JSON waiter: pod, since, expires_at, needs
                                    ({gpu type: [padded MiB, predicted s]}) for annotated
                                    pods that fit nowhere (removed on bind or release)
    st:waiting:order        zset    the waiting pods' UIDs scored by since (then UID): the
                                    oldest are read without the whole hash
    st:waiting:expiry       zset    the waiting pods' UIDs scored by expires_at: expired
                                    waiters are dropped without the whole hash
    st:waiting:short        zset    the waiting pods' UIDs scored by their shortest
                                    predicted seconds: the shortest are read likewise
    st:waiting:sweep        string  where the next waiter's write goes on sweeping the hash
    st:decisions            stream  decisions told to pods' owners (Events the monitor posts)
                                    and operators (the status page): kind, at, uid, pod,
                                    node, message; capped at about 2,000
    st:told:{once key}      string  a decision already told (expires after
                                    `decision_repeat_s`: a waiting pod is told once)
    st:told-quota:{ns}      string  repeated decisions of a namespace in the log this
                                    minute (at most `TOLD_QUOTA`; expires)
                                    (consumer group `event-posters`: the monitors)
    st:floor:{job}          hash    a job's (model|task|batch) GPU OOM floors: {namespace}|
                                    {GPU type} -> the least MiB that namespace's pods of it
                                    reserve on the type after a kill; {GPU type} -> the same
                                    for everyone, once two namespaces saw kills (only
                                    raised; a filter reads only its pod's job's hash)
    st:floor-jobs           set     the st:floor:{job} keys that hold floors
    st:handovers            zset    pod UIDs handed to a node agent and not answered yet,
                                    scored by when (the monitor checks the overdue ones)
    st:floor-kills:{type}   hash    namespace -> raises,window start,last kill: the GPU OOM
                                    kills of a job type (model|task|batch|GPU type; expires
                                    a window after the last)
    st:interference         hash    GPU type -> the collocation slowdown alpha the monitor
                                    learned from observed runs, and GPU type|runs -> how
                                    many runs it rests on (`extender.core.interference`;
                                    replaced at each refit; a type absent: the configured
                                    alpha)
    st:models               hash    model name -> JSON entry of a model users registered
                                    (`estimator.registered`: features or a transformer
                                    configuration); st:models:rev bumped on every change,
                                    st:models:epoch a token per registry (`model_store`)
    st:owner-runs:{owner}   hash    runs, seconds: the finished runs of a controller's
                                    ({namespace}/{kind}/{name}) declared-memory pods (their
                                    mean times its next pod when that declares no time);
                                    expires 30 days after its last run
    st:owner-runs           hash    earlier versions' {owner}|runs and |seconds of every
                                    owner: read, and folded into the owner's key

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
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import orjson
import redis

from extender.core import gpu_table
from extender.core.interference import AlphaFit
from extender.errors import Conflict, NotReplicated, StoreRefused, StoreUnavailable
from extender.model import (
    ClusterSnapshot, Decision, FilterRecord, JobRecord, NodeGpus, NodeState, PodDemand,
    Reservation, Waiter,
)  # fmt: skip
from extender.state import lua
from extender.state.connection import redis_client
from extender.state.durability import ReplicaWait
from extender.core.time_bias import BIAS_PREFIX
from extender.state.gang_store import GangStore
from extender.state.model_store import ModelStore
from extender.state.records import (
    alphas_from_pairs, as_mapping, time_biases_from_pairs, floors_from_pairs, gpu_list, job_from_mapping, job_from_pairs,
    layout_from_json, layout_from_row, live_waiters, queued_jobs, reading,
)
from extender.state.queue_mirror import QueueMirror

log = logging.getLogger(__name__)

NODES_KEY = "st:nodes"
NODES_REV_KEY = "st:nodes:rev"
REV_KEY = "st:rev"
CHANGED_KEY = "st:changed"
EPOCH_KEY = "st:epoch"
JOBS_KEY = "st:jobs"
OBSERVATIONS_KEY = "st:observations"
OOMS_KEY = "st:ooms"  # earlier versions' set of every OOM kill seen (read, never written)
OOM_SEEN_PREFIX = "st:oom:"  # + the kill's event: counted (expires)
OOM_SEEN_TTL_S = 7 * 86400  # a kill is re-read from its pod's status while the pod lives
WAITING_KEY = "st:waiting"
OBSERVATIONS_MAXLEN = 100_000
DECISIONS_KEY = "st:decisions"
POSTERS_GROUP = "event-posters"  # the monitors' consumer group on the decision log
DECISIONS_MAXLEN = 2_000
# Repeated decisions (waiting, held) one namespace may add to the log per window: a tenth
# of it per minute, under what the Event posters drain (EXTENDER_EVENT_RATE, 5/s).
TOLD_QUOTA, TOLD_QUOTA_WINDOW_S = DECISIONS_MAXLEN // 10, 60
TOLD_QUOTA_PREFIX = "st:told-quota:"  # + namespace: its repeated decisions this window
FLOOR_JOBS_KEY = "st:floor-jobs"
HANDOVERS_KEY = "st:handovers"
INTERFERENCE_KEY = "st:interference"  # GPU type -> learned alpha (the monitor's fit)
OWNER_RUNS_KEY = "st:owner-runs"  # earlier versions' hash of every owner's runs
OWNER_RUNS_PREFIX = "st:owner-runs:"  # + namespace/kind/name: that owner's runs and seconds
OWNER_RUNS_TTL_S = 30 * 86400  # an owner with no finished run for this long is forgotten
LayoutRule = Callable[[NodeGpus | None, NodeGpus | None], NodeGpus | None]
KUBE_BIND = "kube"  # a reservation's source: kube-scheduler's bind verb
VOLCANO_ALLOCATE = "volcano"  # Volcano's allocate event (only its deallocate may drop it)


def gpu_key(node: str, index: int) -> str:
    return f"st:gpu:{node}:{index}"


def node_queue_prefix(node: str) -> str:
    """What every GPU queue key of `node` starts with (node names hold no ':')."""
    return f"st:gpu:{node}:"


def job_key(uid: str) -> str:
    return f"st:job:{uid}"


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


def demand_key(uid: str) -> str:
    return f"st:demand:{uid}"


def _record_payload(record: FilterRecord) -> bytes:
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


def floor_kills_key(job_type: str) -> str:
    return f"st:floor-kills:{job_type}"


def floors_key(model: str, task: str, batch: int) -> str:
    """The floors hash of one job (`FLOORS`: fields per GPU type and namespace)."""
    return f"st:floor:{model}|{task}|{batch}"


def _flat_floors(key: str, pairs: list[str] | dict[str, str]) -> dict[str, float]:
    """A job's floors hash as `job_type` keys (namespace floors prefixed with it)."""
    job = key.removeprefix("st:floor:")
    flat = {}
    for field, mib in as_mapping(pairs).items():
        namespace, _, gpu = field.rpartition("|")
        flat[f"{namespace}|{job}|{gpu}" if namespace else f"{job}|{gpu}"] = mib
    return floors_from_pairs(flat)


@dataclass(frozen=True)
class FloorRaise:
    """A GPU OOM kill's effect: the floors now in force for the killed pod's namespace and
    for everyone, and whether the kill was within its namespace's budget of raises."""

    namespace_mib: float
    everyone_mib: float
    counted: bool


# A master with too few replicas (min-replicas-to-write), one that lost its master link,
# or one still loading its data: the same as down for the verbs (retried).
NOT_WRITABLE = ("NOREPLICAS", "MASTERDOWN", "LOADING", "READONLY")


class RedisStore:
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
        self._raise_floor = client.register_script(lua.RAISE_FLOOR)
        self._raises_reset = client.register_script(lua.RAISES_RESET)
        self._grow_beside = client.register_script(lua.GROW_BESIDE)
        self._owner_run = client.register_script(lua.OWNER_RUN)
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
                               floors=_flat_floors(floor_key, floors) if floor_key else {},
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
            args += [_record_payload(record), record_ttl_s]
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
        Sentinel failover it would keep calling the dead master."""
        pid, client = self._sync_redis
        if client is None or pid != os.getpid():
            client = redis.Redis(connection_pool=self._redis.connection_pool,
                                 single_connection_client=True)
            self._sync_redis = (os.getpid(), client)
        return client

    def raise_floor(self, job_type: str, namespace: str, mib: float, cap_mib: float, now: float,
                    window_s: float, max_raises: int) -> FloorRaise:
        """After a GPU OOM kill of `job_type` in `namespace`: that namespace's pods of the
        type reserve at least `mib` (capped at `cap_mib`) from now on, at most `max_raises`
        times per `window_s`; everyone's floor rises only on kills from two namespaces
        (lua.RAISE_FLOOR). A floor only rises."""
        model, task, batch, gpu = job_type.split("|")
        own, everyone, counted = self._call(
            self._raise_floor, keys=[floors_key(model, task, int(batch)),
                                     floor_kills_key(job_type), FLOOR_JOBS_KEY],
            args=[gpu, namespace, mib, cap_mib, now, window_s, max_raises])
        return FloorRaise(float(own), float(everyone), bool(int(counted)))

    def floor_held(self, job_type: str, namespace: str, now: float) -> bool:
        """A run of `job_type` succeeded in `namespace`: its budget of floor raises for the
        type starts again (`raise_floor`). True when it had spent some."""
        return bool(self._call(self._raises_reset, keys=[floor_kills_key(job_type)],
                               args=[namespace, now]))

    def grow_beside(self, killed: JobRecord, capacity_mib: float | Sequence[float],
                    now: float) -> dict[str, float]:
        """After an OOM kill of `killed` (still reserved): on each of its GPUs, grow the bound
        and running jobs beside it so that they hold the GPU's capacity (`capacity_mib`: one
        for all, or one per GPU of `killed.gpus`) less its reservation (lua.GROW_BESIDE).
        Returns MiB added per grown job's UID."""
        queues = [gpu_key(killed.node, index) for index in killed.gpus]
        capacities = ([capacity_mib] * len(queues) if isinstance(capacity_mib, int | float)
                      else list(capacity_mib))
        pairs = self._call(self._grow_beside, keys=[job_key(killed.uid), *queues],
                           args=[now, *capacities])
        return {str(uid): float(mib) for uid, mib in zip(pairs[::2], pairs[1::2], strict=True)}

    def record_owner_run(self, owner: str, seconds: float) -> None:
        """Count a finished run of `owner`'s pods (namespace/kind/name) and its seconds; an
        owner with no run for `OWNER_RUNS_TTL_S` is forgotten."""
        self._call(self._owner_run, keys=[OWNER_RUNS_PREFIX + owner, OWNER_RUNS_KEY],
                   args=[owner, repr(float(seconds)), OWNER_RUNS_TTL_S])

    def owner_seconds(self, owner: str) -> float | None:
        """The mean seconds of `owner`'s finished runs (None: none yet, or unreadable)."""
        pipe = self._redis.pipeline(transaction=False)
        pipe.hmget(OWNER_RUNS_PREFIX + owner, ["runs", "seconds"])
        pipe.hmget(OWNER_RUNS_KEY, [f"{owner}|runs", f"{owner}|seconds"])  # earlier versions'
        own, old = self._call(pipe.execute)
        runs, seconds = own if own[0] is not None else old
        count, total = reading(runs, 0.0), reading(seconds, 0.0)
        return total / count if count >= 1 and total > 0 else None

    def floors(self) -> dict[str, float]:
        """Every GPU OOM floor, as `job_type` keys (namespace floors prefixed with it): for
        the status page and `schedtune queues`, never on a request's path."""
        keys = sorted(self._call(self._redis.smembers, FLOOR_JOBS_KEY))
        pipe = self._redis.pipeline(transaction=False)
        for key in keys:
            pipe.hgetall(key)
        flat: dict[str, float] = {}
        for key, pairs in zip(keys, self._call(pipe.execute) if keys else (), strict=True):
            flat.update(_flat_floors(key, pairs))
        return flat

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

    def record_oom(self, event: str) -> bool:
        """Count one OOM kill (`event` names pod, container and restart); False if counted
        (in the last `OOM_SEEN_TTL_S`, or in the set earlier versions kept)."""
        if self._call(self._redis.sismember, OOMS_KEY, event):
            return False
        return bool(self._call(self._redis.set, OOM_SEEN_PREFIX + event, "1", nx=True,
                               ex=OOM_SEEN_TTL_S))

    def oom_count(self) -> int:
        """OOM kills counted in the last `OOM_SEEN_TTL_S` (a key scan: for operators and
        tests, never on a request's path), and those earlier versions kept."""
        seen = self._call(lambda: sum(1 for _ in self._redis.scan_iter(OOM_SEEN_PREFIX + "*",
                                                                         count=1000)))
        return seen + int(self._call(self._redis.scard, OOMS_KEY))

    def job(self, uid: str) -> JobRecord | None:
        data = self._call(self._redis.hgetall, job_key(uid))
        return job_from_mapping(data) if data else None

    def job_uids(self) -> list[str]:
        return list(self._call(self._redis.zrange, JOBS_KEY, 0, -1))

    def node_names(self) -> list[str]:
        return sorted(self._call(self._redis.hkeys, NODES_KEY))

    def node_layouts(self) -> dict[str, NodeGpus]:
        """Every layout the node watcher recorded (unreadable entries left out)."""
        return dict(self._layouts(None))

    def put_node(self, name: str, layout: NodeGpus | None) -> None:
        """Record (or with None, forget) a node's GPU layout: the node watcher's write."""
        pipe = self._redis.pipeline(transaction=True)
        if layout is None:
            pipe.hdel(NODES_KEY, name)
        else:
            pipe.hset(NODES_KEY, name, orjson.dumps(asdict(layout)))
        pipe.incr(NODES_REV_KEY)
        self._call(pipe.execute)

    def _layouts(self, rev: str | None) -> dict[str, NodeGpus]:
        """Node layouts, re-read only when `st:nodes:rev` moved since the last read."""
        cached_rev, cached = self._layout_cache
        if rev is not None and rev == cached_rev:
            return cached
        pipe = self._redis.pipeline(transaction=True)
        pipe.get(NODES_REV_KEY)
        pipe.hgetall(NODES_KEY)
        new_rev, raw = self._call(pipe.execute)
        layouts = {}
        for name, value in raw.items():
            layout = layout_from_json(value)
            if layout is not None:
                layouts[name] = layout
        self._layout_cache = (new_rev or "0", layouts)
        return layouts

    def record_filter(self, record: FilterRecord, ttl_s: int, waiter: Waiter | None = None,
                      now: float = 0.0, wait_ttl_s: float = 0.0,
                      decisions: Iterable[Decision] = (), repeat_s: int = 600) -> None:
        """Keep what filter decided for bind (expires after `ttl_s`) and, for a pod that fit
        nowhere, record or refresh it as a waiter until `now + wait_ttl_s` (expired or
        unreadable waiters go), and log its `decisions` (each told once per `repeat_s`):
        one transaction, one round trip."""
        key, payload = demand_key(record.demand.uid), _record_payload(record)
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
            self._wait(keys=[WAITING_KEY], client=pipe, args=[
                waiter.uid, now, orjson.dumps(entry), repr(float(waiter.since)),
                repr(float(expires_at)), repr(waiter.shortest_s)])
        self._tell_all(pipe, decisions, now, repeat_s)
        self._call(pipe.execute)

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
            self._tell(keys=keys, args=[max(1, int(repeat_s)), DECISIONS_MAXLEN,
                                        TOLD_QUOTA, TOLD_QUOTA_WINDOW_S, *fields],
                       client=pipe)
            told += 1
        return told

    def filter_record(self, uid: str) -> FilterRecord | None:
        """What filter kept for the pod (None: never filtered, or expired). An unreadable
        record counts as none."""
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

    def record_observation(self, observation: Mapping[str, Any]) -> None:
        fields = {k: str(v) for k, v in observation.items()}
        self._call(self._redis.xadd, OBSERVATIONS_KEY, fields, maxlen=OBSERVATIONS_MAXLEN)

    def observations(self) -> list[dict[str, str]]:
        return [fields for _, fields in self._call(self._redis.xrange, OBSERVATIONS_KEY)]

    def recent_observations(self, count: int) -> list[dict[str, str]]:
        """The last `count` observations, newest first."""
        return [fields for _, fields in self._call(self._redis.xrevrange, OBSERVATIONS_KEY,
                                                   count=count)]

    def set_alphas(self, fits: Iterable[AlphaFit],
                   biases: Mapping[str, tuple[float, int]] | None = None) -> None:
        """Publish the monitor's collocation slowdowns per GPU type and the time estimate's
        biases (`extender.core.time_bias`), replacing the last fit: every worker's next
        snapshot reads them."""
        mapping = {}
        for fit in fits:
            mapping[fit.gpu_type] = repr(fit.alpha)
            mapping[f"{fit.gpu_type}|runs"] = f"{fit.runs} ({fit.shared_runs} shared)"
        for key, (bias, runs) in (biases or {}).items():
            mapping[f"{BIAS_PREFIX}{key}"] = repr(round(bias, 4))
            mapping[f"{BIAS_PREFIX}{key}|runs"] = str(runs)
        pipe = self._redis.pipeline(transaction=True)
        pipe.delete(INTERFERENCE_KEY)
        if mapping:
            pipe.hset(INTERFERENCE_KEY, mapping=mapping)
        self._call(pipe.execute)

    def learned_alphas(self) -> dict[str, float]:
        """The published collocation slowdowns, GPU type -> alpha (for operators)."""
        return alphas_from_pairs(self._call(self._redis.hgetall, INTERFERENCE_KEY))

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
