"""Shared scheduling state in Redis, behind `RedisStore` (the only module that imports redis).

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
                                    expires_at (0 = none), queue
    st:jobs                 zset    every reserved pod UID, scored by reservation time
    st:demand:{uid}         string  JSON: the filter's decoded demand and node layouts,
                                    read by bind (expires after `demand_ttl_s`)
    st:observations         stream  finished runs (model, task, batch, units, gpu_type,
                                    seconds, oom, outcome)
    st:ooms                 set     OOM kills seen, one member per pod/container/restart
    st:waiting              hash    pod UID -> JSON waiter: pod, since, expires_at, needs
                                    ({gpu type: [padded MiB, predicted s]}) for annotated
                                    pods that fit nowhere (removed on bind or release)

Reserved MiB and job counts are never stored as counters: every read and the
reservation itself derive them from the queue members' job hashes, so nothing
can drift. A reservation that bind never confirms carries `expires_at`; Lua
prunes it once expired. Workers keep a `QueueMirror` and read only the queues
changed since their last read (`st:changed`), in the same atomic script. Each public method is one atomic operation (a Lua
script, a transaction or a single command). The Lua scripts touch keys they
build themselves, so this layout needs a single Redis (or one hash slot), not
a Redis Cluster.
"""

from __future__ import annotations


import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

import orjson
import redis

from extender.errors import StoreUnavailable
from extender.model import ClusterSnapshot, JobRecord, NodeGpus, QueuedJob, Waiter
from extender.state.queue_mirror import QueueMirror

NODES_KEY = "st:nodes"
NODES_REV_KEY = "st:nodes:rev"
REV_KEY = "st:rev"
CHANGED_KEY = "st:changed"
EPOCH_KEY = "st:epoch"
JOBS_KEY = "st:jobs"
OBSERVATIONS_KEY = "st:observations"
OOMS_KEY = "st:ooms"
WAITING_KEY = "st:waiting"
OBSERVATIONS_MAXLEN = 100_000


def gpu_key(node: str, index: int) -> str:
    return f"st:gpu:{node}:{index}"


def job_key(uid: str) -> str:
    return f"st:job:{uid}"


def demand_key(uid: str) -> str:
    return f"st:demand:{uid}"


_LIVE = """
local function touch(queue)
  if redis.call('EXISTS', 'st:epoch') == 0 then
    local t = redis.call('TIME')
    redis.call('SET', 'st:epoch', t[1] .. '.' .. t[2])
  end
  redis.call('ZADD', 'st:changed', redis.call('INCR', 'st:rev'), queue)
end
local function live_mib(uid, now)
  local k = 'st:job:' .. uid
  local exp = redis.call('HGET', k, 'expires_at')
  if not exp then return nil end
  exp = tonumber(exp)
  if exp > 0 and exp <= now then return nil end
  return tonumber(redis.call('HGET', k, 'reserved_mib'))
end
"""

_RESERVE = _LIVE + """
local now, ttl, need = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local fields = cjson.decode(ARGV[4])
local uid = fields.uid
local current = redis.call('HGET', KEYS[1], 'queue')
if current then
  local exp = tonumber(redis.call('HGET', KEYS[1], 'expires_at'))
  if exp == 0 or exp > now then
    redis.call('HDEL', 'st:waiting', uid)
    return {'exists', current}
  end
  redis.call('ZREM', current, uid)
  redis.call('DEL', KEYS[1])
  touch(current)
end
local report = {}
for c = 3, #KEYS do
  local base = 5 + (c - 3) * 3
  local index, cap, limit = ARGV[base], tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2])
  local used, count, pruned = 0, 0, false
  for _, other in ipairs(redis.call('ZRANGE', KEYS[c], 0, -1)) do
    local mib = live_mib(other, now)
    if mib then
      used = used + mib
      count = count + 1
    else
      redis.call('ZREM', KEYS[c], other)
      redis.call('ZREM', KEYS[2], other)
      redis.call('DEL', 'st:job:' .. other)
      pruned = true
    end
  end
  if pruned then touch(KEYS[c]) end
  if count < limit and used + need <= cap then
    local expires = 0
    if ttl > 0 then expires = now + ttl end
    for k, v in pairs(fields) do redis.call('HSET', KEYS[1], k, tostring(v)) end
    redis.call('HSET', KEYS[1], 'queue', KEYS[c], 'gpu_index', index,
               'reserved_mib', tostring(need), 'reserved_at', tostring(now),
               'expires_at', tostring(expires), 'state', fields.state or 'reserved')
    redis.call('ZADD', KEYS[c], now, uid)
    redis.call('ZADD', KEYS[2], now, uid)
    touch(KEYS[c])
    redis.call('HDEL', 'st:waiting', uid)
    return {'reserved', KEYS[c]}
  end
  table.insert(report, index .. ':' .. used .. ':' .. count)
end
return {'full', table.concat(report, ',')}
"""

_CHANGES = """
local since = ARGV[1]
if KEYS[2] then redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3]) end
local out = {redis.call('GET', 'st:epoch') or '', redis.call('GET', 'st:rev') or '0',
             redis.call('GET', KEYS[1]) or '0', redis.call('HVALS', 'st:waiting')}
for _, queue in ipairs(redis.call('ZRANGEBYSCORE', 'st:changed', '(' .. since, '+inf')) do
  local rows = {}
  for _, uid in ipairs(redis.call('ZRANGE', queue, 0, -1)) do
    local f = redis.call('HMGET', 'st:job:' .. uid, 'reserved_mib', 'predicted_s',
                         'started_at', 'expires_at')
    if f[1] then
      rows[#rows + 1] = uid
      for i = 1, 4 do rows[#rows + 1] = f[i] or '0' end
    end
  end
  out[#out + 1] = queue
  out[#out + 1] = rows
end
return out
"""

_WAIT = """
local now = tonumber(ARGV[2])
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local ok, entry = pcall(cjson.decode, all[i + 1])
  if not ok or type(entry) ~= 'table' or (tonumber(entry.expires_at) or 0) <= now then
    redis.call('HDEL', KEYS[1], all[i])
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""

_CONFIRM = _LIVE + """
if redis.call('HGET', KEYS[1], 'queue') ~= ARGV[1] then return 0 end
local exp = tonumber(redis.call('HGET', KEYS[1], 'expires_at'))
if exp > 0 and exp <= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'state', 'bound', 'expires_at', '0')
touch(ARGV[1])
return 1
"""

_RELEASE = _LIVE + """
redis.call('HDEL', 'st:waiting', ARGV[1])
local queue = redis.call('HGET', KEYS[1], 'queue')
if not queue then return nil end
local record = redis.call('HGETALL', KEYS[1])
redis.call('ZREM', queue, ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[1])
touch(queue)
return record
"""

_MARK_RUNNING = _LIVE + """
local queue = redis.call('HGET', KEYS[1], 'queue')
if not queue then return 0 end
if redis.call('HGET', KEYS[1], 'state') == 'running' then return 1 end
redis.call('HSET', KEYS[1], 'state', 'running', 'started_at', ARGV[1], 'expires_at', '0')
touch(queue)
return 1
"""


_ADOPT = _LIVE + """
local fields = cjson.decode(ARGV[1])
redis.call('HDEL', 'st:waiting', fields.uid)
local current = redis.call('HGET', KEYS[1], 'queue')
if current == KEYS[3] then
  if tonumber(redis.call('HGET', KEYS[1], 'expires_at')) > 0 then
    redis.call('HSET', KEYS[1], 'state', fields.state, 'expires_at', '0')
    touch(current)
  end
  return 'exists'
end
if current then
  redis.call('ZREM', current, fields.uid)
  touch(current)
end
redis.call('DEL', KEYS[1])
for k, v in pairs(fields) do redis.call('HSET', KEYS[1], k, tostring(v)) end
redis.call('HSET', KEYS[1], 'queue', KEYS[3], 'expires_at', '0')
redis.call('ZADD', KEYS[3], tonumber(fields.reserved_at), fields.uid)
redis.call('ZADD', KEYS[2], tonumber(fields.reserved_at), fields.uid)
touch(KEYS[3])
if current then return 'moved' end
return 'adopted'
"""


class RedisStore:
    """Atomic, named operations on the shared state."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._reserve = client.register_script(_RESERVE)
        self._changes = client.register_script(_CHANGES)
        self._confirm = client.register_script(_CONFIRM)
        self._release = client.register_script(_RELEASE)
        self._mark_running = client.register_script(_MARK_RUNNING)
        self._adopt = client.register_script(_ADOPT)
        self._wait = client.register_script(_WAIT)
        self._layout_cache: tuple[str | None, dict[str, NodeGpus]] = (None, {})
        self._mirror = QueueMirror()
        self._mirror_lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, timeout_s: float = 1.0) -> RedisStore:
        return cls(redis.Redis.from_url(url, socket_timeout=timeout_s,
                                        socket_connect_timeout=timeout_s, decode_responses=True,
                                        health_check_interval=10))  # fmt: skip

    def ping(self) -> bool:
        return bool(self._call(self._redis.ping))

    def snapshot(self, nodes: Mapping[str, NodeGpus | None], now: float,
                 demand: tuple[str, dict[str, Any], int] | None = None) -> ClusterSnapshot:
        """Queues of the named nodes. A layout of None is read from the node watcher's hash.

        `demand`: (uid, record, ttl) to `put_demand` in the same call (filter's one round trip).
        """
        with self._mirror_lock:
            nodes_rev, waiting = self._sync_mirror(demand)
            watched = self._layouts(nodes_rev) if None in nodes.values() else {}
            mirror = self._mirror
            states = {name: mirror.node_state(name, layout or watched.get(name), now)
                      for name, layout in nodes.items()}  # fmt: skip
        return ClusterSnapshot(now=now, nodes=states, waiting=_live_waiters(waiting, now))

    def _sync_mirror(self, demand: tuple[str, dict[str, Any], int] | None = None
                     ) -> tuple[str, list[str]]:
        """Bring the mirror up to date: one script call returning only what changed.

        Returns the node layouts' rev and the raw waiters, read in the same call."""
        mirror = self._mirror
        keys, args = [NODES_REV_KEY], [mirror.rev]
        if demand is not None:
            uid, record, ttl_s = demand
            keys.append(demand_key(uid))
            args += [orjson.dumps(record), ttl_s]
        epoch, rev, nodes_rev, waiting, *changed = self._call(self._changes, keys=keys, args=args)
        if epoch != mirror.epoch or int(rev) < mirror.rev:
            mirror.reset(epoch)
            _, rev, nodes_rev, waiting, *changed = self._call(
                self._changes, keys=[NODES_REV_KEY], args=[0])
        updates = []
        for queue, rows in zip(changed[::2], changed[1::2], strict=True):
            node, _, index = queue.removeprefix("st:gpu:").rpartition(":")
            jobs = tuple(QueuedJob(rows[i], float(rows[i + 1]), float(rows[i + 2]),
                                   float(rows[i + 3]), float(rows[i + 4]))
                         for i in range(0, len(rows), 5))  # fmt: skip
            updates.append((node, int(index), jobs))
        mirror.apply(int(rev), updates)
        return nodes_rev, waiting

    def reserve(self, record: JobRecord, candidates: Iterable[tuple[int, float, int]],
                now: float, ttl_s: float) -> tuple[str, str]:
        """Reserve `record.reserved_mib` on the first candidate GPU that takes it.

        `candidates`: (gpu index, capacity MiB, collocation limit) in preference
        order. Returns ("reserved", queue key), ("exists", queue key) when the
        pod already holds a reservation (idempotent), or ("full", report).
        """
        cands = list(candidates)
        keys = [job_key(record.uid), JOBS_KEY, *(gpu_key(record.node, i) for i, _, _ in cands)]
        fields = {k: v for k, v in asdict(record).items()
                  if k not in ("gpu_index", "reserved_mib", "reserved_at", "expires_at")}
        args: list[Any] = [now, ttl_s, record.reserved_mib, orjson.dumps(fields)]
        for index, capacity, limit in cands:
            args += [index, capacity, limit]
        status, detail = self._call(self._reserve, keys=keys, args=args)
        return str(status), str(detail)

    def confirm_bind(self, uid: str, queue: str, now: float) -> bool:
        """Mark a reservation bound (no expiry); False if it expired or moved meanwhile."""
        return bool(self._call(self._confirm, keys=[job_key(uid)], args=[queue, now]))

    def mark_running(self, uid: str, started_at: float) -> bool:
        return bool(self._call(self._mark_running, keys=[job_key(uid)], args=[started_at]))

    def release(self, uid: str) -> JobRecord | None:
        """Remove a reservation; returns what was released (None if there was none)."""
        pairs = self._call(self._release, keys=[job_key(uid), JOBS_KEY], args=[uid])
        return _job_from_pairs(pairs) if pairs else None

    def adopt(self, record: JobRecord) -> str:
        """Record a placement that already happened (a pod bound and annotated, Redis lost
        or behind): no capacity check, since the pod is on that GPU whatever we think.
        Returns "adopted", "moved" (it was queued elsewhere) or "exists"."""
        keys = [job_key(record.uid), JOBS_KEY, gpu_key(record.node, record.gpu_index)]
        fields = {k: v for k, v in asdict(record).items() if k != "expires_at"}
        return str(self._call(self._adopt, keys=keys, args=[orjson.dumps(fields)]))

    def jobs(self) -> list[JobRecord]:
        """Every reservation (for reconcile and the inspection CLI; not on the request path)."""
        uids = self.job_uids()
        pipe = self._redis.pipeline(transaction=False)
        for uid in uids:
            pipe.hgetall(job_key(uid))
        return [_job_from_mapping(d) for d in self._call(pipe.execute) if d.get("uid")]

    def record_oom(self, event: str) -> bool:
        """Count one OOM kill (`event` names pod, container and restart); False if counted."""
        return bool(self._call(self._redis.sadd, OOMS_KEY, event))

    def oom_count(self) -> int:
        return int(self._call(self._redis.scard, OOMS_KEY))

    def job(self, uid: str) -> JobRecord | None:
        data = self._call(self._redis.hgetall, job_key(uid))
        return _job_from_mapping(data) if data else None

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
            layout = _layout_from_json(value)
            if layout is not None:
                layouts[name] = layout
        self._layout_cache = (new_rev or "0", layouts)
        return layouts

    def put_waiter(self, waiter: Waiter, now: float, expires_at: float) -> None:
        """Record (or refresh) a pod that fit nowhere; expired or unreadable waiters go."""
        entry = {"uid": waiter.uid, "pod": waiter.pod, "since": waiter.since,
                 "expires_at": expires_at, "needs": waiter.needs}
        self._call(self._wait, keys=[WAITING_KEY], args=[waiter.uid, now, orjson.dumps(entry)])

    def waiters(self, now: float) -> tuple[Waiter, ...]:
        """Live waiters, oldest first (for inspection; requests get them in the snapshot)."""
        return _live_waiters(self._call(self._redis.hvals, WAITING_KEY), now)

    def put_demand(self, uid: str, demand: dict[str, Any], ttl_s: int) -> None:
        self._call(self._redis.set, demand_key(uid), orjson.dumps(demand), ex=ttl_s)

    def demand(self, uid: str) -> dict[str, Any] | None:
        raw = self._call(self._redis.get, demand_key(uid))
        return orjson.loads(raw) if raw else None

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

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"state store unreachable ({exc}); retry") from exc


def _live_waiters(raw: list[str], now: float) -> tuple[Waiter, ...]:
    """Decoded waiters not yet expired, oldest first (a bad entry is skipped, not fatal)."""
    waiters = []
    for item in raw:
        try:
            entry = orjson.loads(item)
            if float(entry["expires_at"]) <= now:
                continue
            needs = {str(t): (float(m), float(s)) for t, (m, s) in entry["needs"].items()}
            waiters.append(Waiter(str(entry["uid"]), float(entry["since"]), needs,
                                  str(entry.get("pod", ""))))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            continue
    return tuple(sorted(waiters, key=lambda w: (w.since, w.uid)))


def _layout_from_json(raw: str) -> NodeGpus | None:
    try:
        return NodeGpus(**orjson.loads(raw))
    except (ValueError, TypeError):
        return None


def _as_mapping(pairs: list[str] | dict[str, str]) -> dict[str, str]:
    if isinstance(pairs, dict):
        return pairs
    return dict(zip(pairs[::2], pairs[1::2], strict=True))


def _job_from_pairs(pairs: list[str]) -> JobRecord:
    return _job_from_mapping(_as_mapping(pairs))


def _job_from_mapping(data: Mapping[str, str]) -> JobRecord:
    return JobRecord(
        uid=data["uid"], pod=data.get("pod", ""), namespace=data.get("namespace", ""),
        model=data.get("model", ""), task=data.get("task", ""), node=data.get("node", ""),
        gpu_index=int(data.get("gpu_index", 0)), reserved_mib=float(data.get("reserved_mib", 0)),
        predicted_s=float(data.get("predicted_s", 0)), state=data.get("state", "reserved"),
        reserved_at=float(data.get("reserved_at", 0)), started_at=float(data.get("started_at", 0)),
        expires_at=float(data.get("expires_at", 0)), gpu_type=data.get("gpu_type", ""),
        batch=int(data.get("batch", 0)), units=int(data.get("units", 0)),
    )  # fmt: skip
