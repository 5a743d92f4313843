"""Shared scheduling state in Redis, behind `RedisStore` (the only module that imports redis).

Key layout (human readable; every key is built by the helpers below):

    st:node:{node}          hash    GPU layout from the node watcher: product, gpu_type,
                                    count, memory_mib
    st:gpu:{node}:{index}   zset    the GPU's queue: pod UIDs scored by reservation time
    st:job:{uid}            hash    one reservation: pod, namespace, model, task, node,
                                    gpu_index, reserved_mib, predicted_s, state
                                    (reserved|bound|running), reserved_at, started_at,
                                    expires_at (0 = none), queue
    st:jobs                 zset    every reserved pod UID, scored by reservation time
    st:demand:{uid}         string  JSON: the filter's decoded demand and node layouts,
                                    read by bind (expires after `demand_ttl_s`)
    st:observations         stream  finished runs (model, task, batch, gpu_type, seconds, oom)

Reserved MiB and job counts are never stored as counters: every read and the
reservation itself derive them from the queue members' job hashes, so nothing
can drift. A reservation that bind never confirms carries `expires_at`; Lua
prunes it once expired. Each public method is one atomic operation (a Lua
script or a single command). The Lua scripts touch job keys they build
themselves, so this layout needs a single Redis (or one hash slot), not a
Redis Cluster.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

import orjson
import redis

from extender.errors import StoreUnavailable
from extender.model import ClusterSnapshot, GpuState, JobRecord, NodeGpus, NodeState

JOBS_KEY = "st:jobs"
OBSERVATIONS_KEY = "st:observations"
OBSERVATIONS_MAXLEN = 100_000


def node_key(node: str) -> str:
    return f"st:node:{node}"


def gpu_key(node: str, index: int) -> str:
    return f"st:gpu:{node}:{index}"


def job_key(uid: str) -> str:
    return f"st:job:{uid}"


def demand_key(uid: str) -> str:
    return f"st:demand:{uid}"


_LIVE = """
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
  if exp == 0 or exp > now then return {'exists', current} end
  redis.call('ZREM', current, uid)
  redis.call('DEL', KEYS[1])
end
local report = {}
for c = 3, #KEYS do
  local base = 5 + (c - 3) * 3
  local index, cap, limit = ARGV[base], tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2])
  local used, count = 0, 0
  for _, other in ipairs(redis.call('ZRANGE', KEYS[c], 0, -1)) do
    local mib = live_mib(other, now)
    if mib then
      used = used + mib
      count = count + 1
    else
      redis.call('ZREM', KEYS[c], other)
      redis.call('ZREM', KEYS[2], other)
      redis.call('DEL', 'st:job:' .. other)
    end
  end
  if count < limit and used + need <= cap then
    local expires = 0
    if ttl > 0 then expires = now + ttl end
    for k, v in pairs(fields) do redis.call('HSET', KEYS[1], k, tostring(v)) end
    redis.call('HSET', KEYS[1], 'queue', KEYS[c], 'gpu_index', index,
               'reserved_mib', tostring(need), 'reserved_at', tostring(now),
               'expires_at', tostring(expires), 'state', fields.state or 'reserved')
    redis.call('ZADD', KEYS[c], now, uid)
    redis.call('ZADD', KEYS[2], now, uid)
    return {'reserved', KEYS[c]}
  end
  table.insert(report, index .. ':' .. used .. ':' .. count)
end
return {'full', table.concat(report, ',')}
"""

_SNAPSHOT = _LIVE + """
local now = tonumber(ARGV[1])
local out = {}
for i = 2, #ARGV, 2 do
  local node, count = ARGV[i], tonumber(ARGV[i + 1])
  local layout = redis.call('HGETALL', 'st:node:' .. node)
  if count < 0 then
    count = 0
    for j = 1, #layout, 2 do
      if layout[j] == 'count' then count = tonumber(layout[j + 1]) end
    end
  end
  local gpus = {}
  for g = 0, count - 1 do
    local jobs = {}
    for _, uid in ipairs(redis.call('ZRANGE', 'st:gpu:' .. node .. ':' .. g, 0, -1)) do
      if live_mib(uid, now) then
        table.insert(jobs, redis.call('HGETALL', 'st:job:' .. uid))
      end
    end
    gpus[g + 1] = jobs
  end
  out[#out + 1] = {node, layout, gpus}
end
return cjson.encode(out)
"""

_CONFIRM = """
if redis.call('HGET', KEYS[1], 'queue') ~= ARGV[1] then return 0 end
local exp = tonumber(redis.call('HGET', KEYS[1], 'expires_at'))
if exp > 0 and exp <= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'state', 'bound', 'expires_at', '0')
return 1
"""

_RELEASE = """
local queue = redis.call('HGET', KEYS[1], 'queue')
if not queue then return nil end
local record = redis.call('HGETALL', KEYS[1])
redis.call('ZREM', queue, ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[1])
return record
"""

_MARK_RUNNING = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], 'state') == 'running' then return 1 end
redis.call('HSET', KEYS[1], 'state', 'running', 'started_at', ARGV[1], 'expires_at', '0')
return 1
"""


class RedisStore:
    """Atomic, named operations on the shared state."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._reserve = client.register_script(_RESERVE)
        self._snapshot = client.register_script(_SNAPSHOT)
        self._confirm = client.register_script(_CONFIRM)
        self._release = client.register_script(_RELEASE)
        self._mark_running = client.register_script(_MARK_RUNNING)

    @classmethod
    def from_url(cls, url: str, timeout_s: float = 1.0) -> RedisStore:
        return cls(redis.Redis.from_url(url, socket_timeout=timeout_s,
                                        socket_connect_timeout=timeout_s, decode_responses=True,
                                        health_check_interval=10))  # fmt: skip

    def ping(self) -> bool:
        return bool(self._call(self._redis.ping))

    def snapshot(self, nodes: Mapping[str, NodeGpus | None], now: float) -> ClusterSnapshot:
        """Queues of the named nodes. A layout of None is read from the node watcher's hash."""
        args: list[Any] = [now]
        for name, layout in nodes.items():
            args += [name, layout.count if layout else -1]
        raw = orjson.loads(self._call(self._snapshot, keys=[], args=args))
        states = {}
        for name, stored_layout, gpu_jobs in raw:
            layout = nodes[name] or _layout_from_hash(stored_layout)
            memory = layout.memory_mib if layout else 0
            gpus = tuple(
                GpuState(name, i, memory, tuple(map(_job_from_pairs, jobs)) if jobs else ())
                for i, jobs in enumerate(gpu_jobs or [])
            )  # fmt: skip
            states[name] = NodeState(name, layout, gpus)
        return ClusterSnapshot(now=now, nodes=states)

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
        args: list[Any] = [now, ttl_s, record.reserved_mib, json.dumps(fields)]
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

    def job(self, uid: str) -> JobRecord | None:
        data = self._call(self._redis.hgetall, job_key(uid))
        return _job_from_mapping(data) if data else None

    def job_uids(self) -> list[str]:
        return list(self._call(self._redis.zrange, JOBS_KEY, 0, -1))

    def node_names(self) -> list[str]:
        names = self._call(lambda: list(self._redis.scan_iter(node_key("*"), count=500)))
        return sorted(n.removeprefix(node_key("")) for n in names)

    def put_node(self, name: str, layout: NodeGpus | None) -> None:
        """Record (or with None, forget) a node's GPU layout: the node watcher's write."""
        if layout is None:
            self._call(self._redis.delete, node_key(name))
            return
        mapping = {k: ("" if v is None else v) for k, v in asdict(layout).items()}
        self._call(self._redis.hset, node_key(name), mapping=mapping)

    def put_demand(self, uid: str, demand: dict[str, Any], ttl_s: int) -> None:
        self._call(self._redis.set, demand_key(uid), json.dumps(demand), ex=ttl_s)

    def demand(self, uid: str) -> dict[str, Any] | None:
        raw = self._call(self._redis.get, demand_key(uid))
        return json.loads(raw) if raw else None

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


def _layout_from_hash(pairs: list[str] | dict[str, str]) -> NodeGpus | None:
    data = _as_mapping(pairs)
    if not data or "count" not in data:
        return None
    return NodeGpus(product=data.get("product", ""), gpu_type=data.get("gpu_type") or None,
                    count=int(data["count"]), memory_mib=int(data.get("memory_mib", 0)),
                    share_slots=int(data.get("share_slots", 1)), problem=data.get("problem", ""))


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
        expires_at=float(data.get("expires_at", 0)),
    )  # fmt: skip
