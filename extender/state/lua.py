"""The store's Lua scripts: each one atomic operation on the key layout in `store.py`.

They build the keys they touch themselves (``st:job:`` + uid, ``st:epoch``,
...), so the layout needs a single Redis (or one hash slot), not a Redis Cluster.
Reserved MiB and job counts are derived from the queue members' job hashes on
every call, never kept as counters, so nothing can drift.
"""

from typing import Any


def queue_script(pipe: Any, script: Any, keys: list[str], args: list[Any]) -> None:
    """Queue a registered `script` on a pipeline as EVAL with its text. redis-py queues
    EVALSHA and asks SCRIPT EXISTS in a round trip of its own before every such
    pipeline; the text (at most a few KB) costs less than that round trip, and no server
    (a fresh master after a failover, a restarted Redis) can lack it."""
    pipe.eval(script.script, len(keys), *keys, *args)

LIVE = """
local function touch(queue)
  if redis.call('EXISTS', 'st:epoch') == 0 then
    local t = redis.call('TIME')
    redis.call('SET', 'st:epoch', t[1] .. '.' .. t[2])
  end
  redis.call('ZADD', 'st:changed', redis.call('INCR', 'st:rev'), queue)
end
-- Every queue a job hash sits in: 'queues' (a pod on several GPUs) or its one 'queue'.
local function queues_of(key)
  local all = redis.call('HGET', key, 'queues')
  if all then
    local out = {}
    for q in string.gmatch(all, '[^,]+') do out[#out + 1] = q end
    return out
  end
  local one = redis.call('HGET', key, 'queue')
  if one then return {one} end
  return {}
end
-- Drop a job from every queue it sits in, from st:jobs, and its hash.
local function drop(uid)
  for _, q in ipairs(queues_of('st:job:' .. uid)) do
    redis.call('ZREM', q, uid)
    touch(q)
  end
  redis.call('ZREM', 'st:jobs', uid)
  redis.call('DEL', 'st:job:' .. uid)
end
-- A pod no longer waits: its entry, its places in the waiting orders and its expiry go.
local function unwait(uid)
  redis.call('HDEL', 'st:waiting', uid)
  redis.call('ZREM', 'st:waiting:order', uid)
  redis.call('ZREM', 'st:waiting:expiry', uid)
  redis.call('ZREM', 'st:waiting:short', uid)
end
-- Waiters expired by `now` go (at most 256 a call: found by their expiry, never a scan).
local function drop_expired_waiters(now)
  for _, uid in ipairs(redis.call('ZRANGEBYSCORE', 'st:waiting:expiry', '-inf', now,
                                  'LIMIT', 0, 256)) do
    unwait(uid)
  end
end
local function expiry(key)
  local exp = tonumber(redis.call('HGET', key, 'expires_at')) or 0
  if exp ~= exp then return 0 end
  return exp
end
-- What a queue member holds, as the workers' mirrors count it: nil once gone or expired;
-- an unreadable or impossible reservation fills the GPU, an unreadable expiry never expires.
local function held_mib(uid, now, cap)
  local f = redis.call('HMGET', 'st:job:' .. uid, 'reserved_mib', 'expires_at')
  if not f[1] then return nil end
  local exp = tonumber(f[2]) or 0
  if exp ~= exp then exp = 0 end
  if exp > 0 and exp <= now then return nil end
  local mib = tonumber(f[1])
  if not mib or mib ~= mib or mib <= 0 or mib > cap then mib = cap end
  return mib
end
-- Put a job hash on its GPU queues and in st:jobs (a job on several GPUs names them all).
local function enqueue(key, uid, queues, indices, now)
  if #queues > 1 then
    redis.call('HSET', key, 'queues', table.concat(queues, ','),
               'gpus', table.concat(indices, ','))
  end
  for _, queue in ipairs(queues) do
    redis.call('ZADD', queue, now, uid)
    touch(queue)
  end
  redis.call('ZADD', 'st:jobs', now, uid)
end
-- A GPU queue's MiB held and jobs now; members gone or expired leave the queue.
local function occupancy(queue, now, cap)
  local used, count = 0, 0
  for _, other in ipairs(redis.call('ZRANGE', queue, 0, -1)) do
    local mib = held_mib(other, now, cap)
    if mib then
      used = used + mib
      count = count + 1
    else
      drop(other)
    end
  end
  return used, count
end
"""

RESERVE = LIVE + """
-- ARGV: now, ttl, reserved MiB per GPU, fields (JSON), GPUs wanted, then per candidate
-- GPU (KEYS[3..]): index, capacity MiB, collocation limit. All wanted GPUs or none.
local now, ttl, need = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local fields = cjson.decode(ARGV[4])
local want = tonumber(ARGV[5])
local uid = fields.uid
drop_expired_waiters(ARGV[1])  -- binds are frequent: waiters that vanished unreleased go
local current = redis.call('HGET', KEYS[1], 'queue')
if current then
  local exp = expiry(KEYS[1])
  if exp == 0 or exp > now then
    -- Idempotent per (uid, node) only: a live reservation elsewhere is never moved.
    local here = 'st:gpu:' .. fields.node .. ':'
    if string.sub(current, 1, #here) ~= here then return {'elsewhere', current} end
    unwait(uid)
    return {'exists', current, redis.call('HGET', KEYS[1], 'gpus') or ''}
  end
  drop(uid)
end
local report, chosen, indices = {}, {}, {}
for c = 3, #KEYS do
  local base = 6 + (c - 3) * 3
  local index, cap, limit = ARGV[base], tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2])
  local used, count = occupancy(KEYS[c], now, cap)
  if count < limit and used + need <= cap then
    chosen[#chosen + 1] = KEYS[c]
    indices[#indices + 1] = index
    if #chosen == want then break end
  else
    table.insert(report, index .. ':' .. used .. ':' .. count)
  end
end
if #chosen < want then return {'full', table.concat(report, ',')} end
local expires = 0
if ttl > 0 then expires = now + ttl end
for k, v in pairs(fields) do redis.call('HSET', KEYS[1], k, tostring(v)) end
redis.call('HSET', KEYS[1], 'queue', chosen[1], 'gpu_index', indices[1],
           'reserved_mib', tostring(need), 'reserved_at', tostring(now),
           'expires_at', tostring(expires), 'state', fields.state or 'reserved')
enqueue(KEYS[1], uid, chosen, indices, now)
unwait(uid)
return {'reserved', chosen[1], table.concat(indices, ',')}
"""

CHANGES = """
-- ARGV: the rev the mirror has, now, a pod UID ('' : none), how many of the oldest waiters
-- (-1: every one), until when they must be live, how many of the shortest. Waiters: that
-- pod's own entry, then the oldest live ones in order until `want` of them live until
-- then, then the shortest likewise (an entry may come twice); the waiting orders are
-- walked, never the whole hash. ARGV[7]: the floors hash of the job being priced ('' :
-- none), read whole (a few fields). KEYS[2], when given: a filter record written first
-- (ARGV[8] its payload, ARGV[9] its TTL in seconds), in the read's round trip.
if KEYS[2] then redis.call('SET', KEYS[2], ARGV[8], 'EX', ARGV[9]) end
local since, now, want = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4])
local live_until = tonumber(ARGV[5])
local waiting
local function first_live(order, count)
  local start, found = 0, 0
  while found < count do
    local uids = redis.call('ZRANGE', order, start, start + count + 15)
    if #uids == 0 then break end
    for _, uid in ipairs(uids) do
      local exp = tonumber(redis.call('ZSCORE', 'st:waiting:expiry', uid))
      local entry = redis.call('HGET', 'st:waiting', uid)
      if entry and exp and exp > now then
        waiting[#waiting + 1] = entry
        if exp > live_until then found = found + 1 end
        if found >= count then break end
      end
    end
    start = start + #uids
  end
end
if want < 0 then
  waiting = redis.call('HVALS', 'st:waiting')
else
  waiting = {}
  if ARGV[3] ~= '' then
    local own = redis.call('HGET', 'st:waiting', ARGV[3])
    if own then waiting[1] = own end
  end
  first_live('st:waiting:order', want)
  first_live('st:waiting:short', tonumber(ARGV[6]) or 0)
end
local out = {redis.call('GET', 'st:epoch') or '', redis.call('GET', 'st:rev') or '0',
             redis.call('GET', KEYS[1]) or '0', waiting,
             ARGV[7] ~= '' and redis.call('HGETALL', ARGV[7]) or {},
             redis.call('HGETALL', 'st:interference')}
for _, queue in ipairs(redis.call('ZRANGEBYSCORE', 'st:changed', '(' .. since, '+inf')) do
  local rows = {}
  for _, uid in ipairs(redis.call('ZRANGE', queue, 0, -1)) do
    local f = redis.call('HMGET', 'st:job:' .. uid, 'reserved_mib', 'predicted_s',
                         'started_at', 'expires_at', 'cpu_milli')
    if f[1] then
      rows[#rows + 1] = uid
      for i = 1, 5 do rows[#rows + 1] = f[i] or '0' end
    end
  end
  out[#out + 1] = queue
  out[#out + 1] = rows
end
return out
"""

WAIT = LIVE + """
-- ARGV: the pod's UID, now, its entry (JSON), since, expires at, its shortest predicted
-- seconds. Waiters expired by now go first (found by their expiry: the work is what
-- expired, never every waiter). Then a few more entries of the hash are looked at, from
-- where the last call stopped: an unreadable or expired one goes (readable as
-- `records.live_waiters` reads it: needs, a finite since, 1..64 GPUs), a live one missing
-- from the orders (written before they existed) joins them, so the whole hash is swept a
-- few entries per call.
local now = tonumber(ARGV[2])
drop_expired_waiters(ARGV[2])
local scan = redis.call('HSCAN', 'st:waiting', redis.call('GET', 'st:waiting:sweep') or '0',
                        'COUNT', 32)
redis.call('SET', 'st:waiting:sweep', scan[1])
for i = 1, #scan[2], 2 do
  local uid, ok, entry = scan[2][i], pcall(cjson.decode, scan[2][i + 1])
  local readable = ok and type(entry) == 'table' and type(entry.needs) == 'table'
      and next(entry.needs) ~= nil
  local since = readable and tonumber(entry.since)
  local expires = readable and tonumber(entry.expires_at)
  local gpus = readable and (entry.gpus == nil and 1 or tonumber(entry.gpus))
  if not since or since ~= since or math.abs(since) == math.huge or not expires
      or expires ~= expires or expires <= now or not gpus or gpus < 1 or gpus > 64
      or gpus % 1 ~= 0 then
    unwait(uid)
  elseif not redis.call('ZSCORE', 'st:waiting:short', uid) then
    local shortest = math.huge
    for _, need in pairs(entry.needs) do
      local seconds = type(need) == 'table' and tonumber(need[2])
      if seconds and seconds < shortest then shortest = seconds end
    end
    redis.call('ZADD', 'st:waiting:order', string.format('%.17g', since), uid)
    redis.call('ZADD', 'st:waiting:expiry', string.format('%.17g', expires), uid)
    redis.call('ZADD', 'st:waiting:short', string.format('%.17g', shortest), uid)
  end
end
redis.call('HSET', 'st:waiting', ARGV[1], ARGV[3])
redis.call('ZADD', 'st:waiting:order', ARGV[4], ARGV[1])
redis.call('ZADD', 'st:waiting:expiry', ARGV[5], ARGV[1])
redis.call('ZADD', 'st:waiting:short', ARGV[6], ARGV[1])
return 1
"""

CONFIRM = LIVE + """
if redis.call('HGET', KEYS[1], 'queue') ~= ARGV[1] then return 0 end
local exp = expiry(KEYS[1])
if exp > 0 and exp <= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'state', 'bound', 'expires_at', '0')
for _, q in ipairs(queues_of(KEYS[1])) do touch(q) end
return 1
"""

RELEASE = LIVE + """
local queue = redis.call('HGET', KEYS[1], 'queue')
if ARGV[2] then
  -- Scoped: only an unconfirmed reservation of that source on that node (ARGV[2] is the
  -- node's queue prefix, ARGV[3] the source).
  if not queue or string.sub(queue, 1, #ARGV[2]) ~= ARGV[2]
      or redis.call('HGET', KEYS[1], 'source') ~= ARGV[3]
      or redis.call('HGET', KEYS[1], 'state') ~= 'reserved' then
    return nil
  end
end
unwait(ARGV[1])
if not queue then return nil end
local record = redis.call('HGETALL', KEYS[1])
drop(ARGV[1])
return record
"""

CONFIRM_PLACEMENT = LIVE + """
local queue = redis.call('HGET', KEYS[1], 'queue')
if not queue or string.sub(queue, 1, #ARGV[1]) ~= ARGV[1] then return 0 end
local exp = expiry(KEYS[1])
if exp == 0 then return 1 end
if exp <= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'state', 'bound', 'expires_at', '0')
for _, q in ipairs(queues_of(KEYS[1])) do touch(q) end
return 1
"""

MARK_RUNNING = LIVE + """
local queue = redis.call('HGET', KEYS[1], 'queue')
if not queue then return 0 end
if redis.call('HGET', KEYS[1], 'state') == 'running' then return 1 end
redis.call('HSET', KEYS[1], 'state', 'running', 'started_at', ARGV[1], 'expires_at', '0')
for _, q in ipairs(queues_of(KEYS[1])) do touch(q) end
return 1
"""


ADOPT = LIVE + """
-- ARGV: the record (JSON), the GPU's capacity MiB, its collocation limit, now.
-- KEYS[3..]: the queues of the GPUs the pod runs on (one, or several for a multi-GPU pod).
local fields = cjson.decode(ARGV[1])
local cap, limit = tonumber(ARGV[2]), tonumber(ARGV[3])
local need = tonumber(fields.reserved_mib)
if not need or need ~= need or need <= 0 or need > cap or not tonumber(fields.reserved_at) then
  return {'invalid', ''}
end
unwait(fields.uid)
local current = redis.call('HGET', KEYS[1], 'queue')
if current == KEYS[3] then
  if expiry(KEYS[1]) > 0 then
    redis.call('HSET', KEYS[1], 'state', fields.state, 'expires_at', '0')
    for _, q in ipairs(queues_of(KEYS[1])) do touch(q) end
  end
  return {'exists', ''}
end
-- What the GPUs hold without this pod.
local now = tonumber(ARGV[4])
local status, detail = 'adopted', ''
if current then
  for _, q in ipairs(queues_of(KEYS[1])) do
    redis.call('ZREM', q, fields.uid)
    touch(q)
  end
  status = 'moved'
end
for c = 3, #KEYS do
  local used, count = 0, 0
  for _, other in ipairs(redis.call('ZRANGE', KEYS[c], 0, -1)) do
    local mib = other ~= fields.uid and held_mib(other, now, cap)
    if mib then used, count = used + mib, count + 1 end
  end
  if count >= limit or used + need > cap then
    status, detail = 'overcommit', used .. ':' .. count
  elseif c == 3 and status ~= 'overcommit' then
    detail = used .. ':' .. count
  end
end
redis.call('DEL', KEYS[1])
for k, v in pairs(fields) do redis.call('HSET', KEYS[1], k, tostring(v)) end
redis.call('HSET', KEYS[1], 'queue', KEYS[3], 'expires_at', '0')
if #KEYS > 3 then
  local queues = {}
  for c = 3, #KEYS do queues[#queues + 1] = KEYS[c] end
  redis.call('HSET', KEYS[1], 'queues', table.concat(queues, ','))
end
for c = 3, #KEYS do
  redis.call('ZADD', KEYS[c], tonumber(fields.reserved_at), fields.uid)
  touch(KEYS[c])
end
redis.call('ZADD', KEYS[2], tonumber(fields.reserved_at), fields.uid)
return {status, detail}
"""

TELL = """
-- A decision appended to the log (KEYS[1], capped at about ARGV[2] entries). A decision
-- told again while it holds (KEYS[2], its once-key, given) is appended at most once per
-- ARGV[1] seconds, and at most ARGV[3] such decisions of one namespace per ARGV[4]
-- seconds (KEYS[3] counts them): one namespace's waiting pods never crowd the log and
-- trim another's decisions before they are posted; one over the quota is told on a
-- later request. ARGV[5..]: fields.
if KEYS[2] then
  if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
  local told = redis.call('INCR', KEYS[3])
  if told == 1 then redis.call('EXPIRE', KEYS[3], ARGV[4]) end
  if told > tonumber(ARGV[3]) then return 0 end
  redis.call('SET', KEYS[2], '1', 'EX', ARGV[1])
end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 5))
return 1
"""
