"""The gang plans' Lua scripts: each one atomic operation on a plan and its placeholders.

A plan is the hash ``st:gang:<namespace>/<name>``: ``plan`` (its slots as JSON), ``size``,
``expires_at``, ``slot:<i>`` (the member UID that claimed slot i) and ``bound:<i>`` (the
member that took it over at bind or allocate). Each slot not taken yet holds its GPUs
through a placeholder reservation, an ordinary job hash ``st:job:gang:<ns>/<name>/<i>``
queued on those GPUs with the plan's expiry, so every other decision counts its room as
taken and an expired plan frees it by itself (`LIVE`'s ``held_mib``).
"""

from extender.state.lua import LIVE

PLAN_HELPERS = LIVE + """
-- Drop every placeholder of a plan whose member has not taken it, and the plan.
local function release_plan(key, prefix)
  local size = tonumber(redis.call('HGET', key, 'size')) or 0
  local dropped = 0
  for i = 0, size - 1 do
    if not redis.call('HGET', key, 'bound:' .. i) then
      if redis.call('EXISTS', 'st:job:' .. prefix .. i) == 1 then dropped = dropped + 1 end
      drop(prefix .. i)
    end
  end
  redis.call('DEL', key)
  return dropped
end
local function revs()
  return {redis.call('GET', 'st:rev') or '0', redis.call('GET', 'st:nodes:rev') or '0'}
end
"""

CLAIM = PLAN_HELPERS + """
-- KEYS[1]: the plan. ARGV: member UID, now, placeholder UID prefix, the member's job (what
-- it asks for, as text). The member's slot (its own claim, else the first unclaimed one):
-- {'slot', i, plan JSON, new claim 0/1}; {'other', the plan's job}: it asks for another job
-- than the plan was made for (a slot sized for that one);
-- {'full', rev, nodes rev}: every slot claimed by others; {'none', rev, nodes rev}: no live
-- plan (an expired one, or one whose unclaimed placeholder expired, is released whole).
local uid, now, prefix = ARGV[1], tonumber(ARGV[2]), ARGV[3]
if redis.call('EXISTS', KEYS[1]) == 0 then
  local r = revs()
  return {'none', r[1], r[2]}
end
local flat = redis.call('HGETALL', KEYS[1])
local plan = {}
for i = 1, #flat, 2 do plan[flat[i]] = flat[i + 1] end
local size = tonumber(plan.size) or 0
if (tonumber(plan.expires_at) or 0) <= now or size < 1 then
  release_plan(KEYS[1], prefix)
  local r = revs()
  return {'none', r[1], r[2]}
end
if plan.job ~= ARGV[4] then return {'other', plan.job or ''} end
local free = nil
for i = 0, size - 1 do
  local who = plan['slot:' .. i]
  if who == uid then return {'slot', tostring(i), plan.plan, '0'} end
  if not who and not free then free = i end
end
if not free then
  local r = revs()
  return {'full', r[1], r[2]}
end
if not held_mib(prefix .. free, now, 1e15) then  -- its GPUs are free again: replan whole
  release_plan(KEYS[1], prefix)
  local r = revs()
  return {'none', r[1], r[2]}
end
redis.call('HSET', KEYS[1], 'slot:' .. free, uid)
return {'slot', tostring(free), plan.plan, '1'}
"""

RESERVE_PLAN = PLAN_HELPERS + """
-- KEYS[1]: the plan. ARGV[1]: JSON {now, ttl, uid (the member claiming slot 0), job (what
-- every member must ask for), prefix,
-- waiter (the gang's waiter entry, gone once planned), plan (JSON text), slots: [{node,
-- mib, fields, gpus: [[index, capacity MiB, collocation limit], ...]}]}. Every slot's GPUs
-- or none: {'reserved'}; {'full', 'node:gpu:used MiB:jobs'}; {'exists'}: a live plan won.
local a = cjson.decode(ARGV[1])
local now = tonumber(a.now)
if redis.call('EXISTS', KEYS[1]) == 1 then
  if (tonumber(redis.call('HGET', KEYS[1], 'expires_at')) or 0) > now then
    return {'exists'}
  end
  release_plan(KEYS[1], a.prefix)
end
for _, slot in ipairs(a.slots) do
  for _, gpu in ipairs(slot.gpus) do
    local queue = 'st:gpu:' .. slot.node .. ':' .. gpu[1]
    local cap, limit = tonumber(gpu[2]), tonumber(gpu[3])
    local used, count = occupancy(queue, now, cap)
    if count >= limit or used + tonumber(slot.mib) > cap then
      return {'full', slot.node .. ':' .. gpu[1] .. ':' .. used .. ':' .. count}
    end
  end
end
local expires = now + tonumber(a.ttl)
for i, slot in ipairs(a.slots) do
  local uid = a.prefix .. (i - 1)
  local key = 'st:job:' .. uid
  local queues, indices = {}, {}
  for _, gpu in ipairs(slot.gpus) do
    queues[#queues + 1] = 'st:gpu:' .. slot.node .. ':' .. gpu[1]
    indices[#indices + 1] = tostring(gpu[1])
  end
  for k, v in pairs(slot.fields) do redis.call('HSET', key, k, tostring(v)) end
  redis.call('HSET', key, 'uid', uid, 'node', slot.node, 'queue', queues[1],
             'gpu_index', indices[1], 'reserved_mib', tostring(slot.mib),
             'reserved_at', tostring(now), 'expires_at', tostring(expires),
             'state', 'reserved', 'source', 'gang')
  enqueue(key, uid, queues, indices, now)
end
redis.call('HSET', KEYS[1], 'plan', a.plan, 'job', a.job, 'size', tostring(#a.slots),
           'expires_at', tostring(expires), 'created_at', tostring(now), 'slot:0', a.uid)
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(a.ttl)) + 60)
unwait(a.waiter)
return {'reserved'}
"""

TAKE = PLAN_HELPERS + """
-- KEYS[1]: the plan. ARGV: member UID, node, now, TTL of its reservation (0: none), its
-- fields (JSON), placeholder prefix, source. The member takes over its slot's placeholder
-- (its GPUs, MiB and predicted seconds): {'reserved', queue, gpus}; a retry: {'exists',
-- queue, gpus}; {'elsewhere', node}: its slot is on another node; {'none'}: no live slot.
local uid, node, now, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local fields, prefix = cjson.decode(ARGV[5]), ARGV[6]
local flat = redis.call('HGETALL', KEYS[1])
local plan = {}
for i = 1, #flat, 2 do plan[flat[i]] = flat[i + 1] end
local size = tonumber(plan.size) or 0
local mine = nil
for i = 0, size - 1 do
  if plan['slot:' .. i] == uid then mine = i end
end
if not mine then return {'none'} end
local key = 'st:job:' .. uid
if plan['bound:' .. mine] == uid then
  return {'exists', redis.call('HGET', key, 'queue') or '', redis.call('HGET', key, 'gpus') or ''}
end
local slots = cjson.decode(plan.plan).slots
if slots[mine + 1].node ~= node then return {'elsewhere', slots[mine + 1].node} end
local placeholder = prefix .. mine
if (tonumber(plan.expires_at) or 0) <= now or not held_mib(placeholder, now, 1e15) then
  return {'none'}
end
local from = 'st:job:' .. placeholder
local kept = redis.call('HMGET', from, 'queue', 'queues', 'gpus', 'gpu_index', 'reserved_mib',
                        'predicted_s', 'gpu_type')
local queues = queues_of(from)
redis.call('DEL', key)
for k, v in pairs(fields) do redis.call('HSET', key, k, tostring(v)) end
local expires = 0
if ttl > 0 then expires = now + ttl end
redis.call('HSET', key, 'uid', uid, 'node', node, 'queue', kept[1], 'gpu_index', kept[4],
           'reserved_mib', kept[5], 'predicted_s', kept[6], 'gpu_type', kept[7],
           'reserved_at', tostring(now), 'expires_at', tostring(expires),
           'state', 'reserved', 'gang', KEYS[1])
if kept[2] then redis.call('HSET', key, 'queues', kept[2], 'gpus', kept[3]) end
for _, queue in ipairs(queues) do
  redis.call('ZREM', queue, placeholder)
  redis.call('ZADD', queue, now, uid)
  touch(queue)
end
redis.call('ZREM', 'st:jobs', placeholder)
redis.call('ZADD', 'st:jobs', now, uid)
redis.call('DEL', from)
redis.call('HSET', KEYS[1], 'bound:' .. mine, uid)
return {'reserved', kept[1], kept[3] or ''}
"""

RELEASE_PLAN = PLAN_HELPERS + """
-- KEYS[1]: the plan. ARGV: placeholder prefix, '1' to leave a plan every member took (a
-- whole gang: nothing partial to release). Returns placeholders dropped (-1: left whole).
if ARGV[2] == '1' then
  local size = tonumber(redis.call('HGET', KEYS[1], 'size')) or 0
  local taken = 0
  for i = 0, size - 1 do
    if redis.call('HGET', KEYS[1], 'bound:' .. i) then taken = taken + 1 end
  end
  if size > 0 and taken == size then return -1 end
end
return release_plan(KEYS[1], ARGV[1])
"""
