"""The learning half's Lua scripts: what the monitor learns from finished runs and OOM
kills (a controller's run times, GPU OOM floors, room grown beside a killed job), each
one atomic operation on the keys of `keys.py`, used by `learning_store.py`.
"""

from extender.state.lua import LIVE

OWNER_RUN = """
-- A finished run of a controller's declared-memory pods: KEYS[1] the owner's hash
-- (runs, seconds), expiring ARGV[3] s after its last run; KEYS[2] the one hash earlier
-- versions kept every owner in ('<owner>|runs', '<owner>|seconds'), whose fields of this
-- owner are folded in and dropped. ARGV[1]: the owner, ARGV[2]: the run's seconds.
local old_runs = tonumber(redis.call('HGET', KEYS[2], ARGV[1] .. '|runs'))
local old_seconds = tonumber(redis.call('HGET', KEYS[2], ARGV[1] .. '|seconds'))
if old_runs and old_seconds and old_runs >= 1 and old_seconds >= 0 then
  redis.call('HINCRBY', KEYS[1], 'runs', math.floor(old_runs))
  redis.call('HINCRBYFLOAT', KEYS[1], 'seconds', old_seconds)
end
redis.call('HDEL', KEYS[2], ARGV[1] .. '|runs', ARGV[1] .. '|seconds')
redis.call('HINCRBY', KEYS[1], 'runs', 1)
redis.call('HINCRBYFLOAT', KEYS[1], 'seconds', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""

RAISE_FLOOR = """
-- After a GPU OOM kill of a job (model|task|batch) on a GPU type (ARGV[1]) in a namespace
-- (ARGV[2]): KEYS[1] the job's floors hash (fields '<namespace>|<GPU type>' for that
-- namespace's pods, '<GPU type>' for everyone's), KEYS[2] the kill tally of the job on
-- that GPU type (namespace -> 'raises,since,last kill'), KEYS[3] the set of jobs with
-- floors. The namespace's floor rises to ARGV[3] capped at ARGV[4] (the largest GPU of
-- the type), at most ARGV[7] times per window of ARGV[6] s (ARGV[5]: now). Everyone's
-- floor rises only to the second highest namespace floor among the namespaces with a
-- kill in the window: one namespace alone never raises it. A floor only rises.
-- Returns {namespace floor, everyone's floor, 1 if this kill raised within its budget}.
local gpu, ns = ARGV[1], ARGV[2]
local wanted = math.min(tonumber(ARGV[3]), tonumber(ARGV[4]))
local now, window, most = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local function floor_of(field)
  local v = tonumber(redis.call('HGET', KEYS[1], field)) or 0
  if v ~= v then return 0 end
  return v
end
local raises, since = 0, now
local tally = redis.call('HGET', KEYS[2], ns)
if tally then
  local r, s = string.match(tally, '^(%d+),([%d%.]+),')
  if r and now - tonumber(s) < window then raises, since = tonumber(r), tonumber(s) end
end
local own_field = ns .. '|' .. gpu
local own, counted = floor_of(own_field), 0
if raises < most then
  raises, counted = raises + 1, 1
  if wanted > own then
    own = wanted
    redis.call('HSET', KEYS[1], own_field, tostring(own))
    redis.call('SADD', KEYS[3], KEYS[1])
  end
end
redis.call('HSET', KEYS[2], ns, raises .. ',' .. since .. ',' .. now)
redis.call('EXPIRE', KEYS[2], math.max(1, math.ceil(window)))
local seen = {}
local tallies = redis.call('HGETALL', KEYS[2])
for i = 1, #tallies, 2 do
  local last = tonumber(string.match(tallies[i + 1], ',([%d%.]+)$'))
  if last and now - last < window then seen[#seen + 1] = floor_of(tallies[i] .. '|' .. gpu) end
end
table.sort(seen, function(a, b) return a > b end)
local everyone = floor_of(gpu)
if #seen >= 2 and seen[2] > everyone then
  everyone = seen[2]
  redis.call('HSET', KEYS[1], gpu, tostring(everyone))
end
return {tostring(own), tostring(everyone), counted}
"""

RAISES_RESET = """
-- A run of the job type succeeded in namespace ARGV[1] (KEYS[1]: the type's kill tally;
-- ARGV[2]: now): the namespace's raises in the window start again from 0; its last kill
-- still counts towards everyone's floor. Returns 1 when there was a tally.
local tally = redis.call('HGET', KEYS[1], ARGV[1])
if not tally then return 0 end
local last = string.match(tally, ',([%d%.]+)$') or ARGV[2]
redis.call('HSET', KEYS[1], ARGV[1], '0,' .. ARGV[2] .. ',' .. last)
return 1
"""

GROW_BESIDE = LIVE + """
-- After an OOM kill of the job KEYS[1]: on each of its GPUs (KEYS[2..], capacity MiB in
-- ARGV[2..]), the bound or running jobs beside it grow their reservations, in proportion
-- to them, until they hold the capacity less the killed job's reservation: the kill shows
-- they use more than they reserved unless the killed job itself overran, which no one can
-- tell apart. A job on several GPUs grows on all of them (it holds one reservation per
-- GPU). ARGV[1]: now. Returns uid, MiB added, ... for each job grown.
local now = tonumber(ARGV[1])
local victim = string.sub(KEYS[1], 8)
local added = {}
for c = 2, #KEYS do
  local cap = tonumber(ARGV[c])
  local own = held_mib(victim, now, cap)
  local beside, held = {}, 0
  for _, other in ipairs(redis.call('ZRANGE', KEYS[c], 0, -1)) do
    local state = redis.call('HGET', 'st:job:' .. other, 'state')
    local mib = other ~= victim and (state == 'bound' or state == 'running')
                and held_mib(other, now, cap)
    if mib then
      beside[other] = mib
      held = held + mib
    end
  end
  local short = own and (cap - own - held) or 0
  if short > 0 and held > 0 then
    for other, mib in pairs(beside) do
      local more = math.min(mib + short * mib / held, cap) - mib
      if more > 0 then
        redis.call('HSET', 'st:job:' .. other, 'reserved_mib', tostring(mib + more))
        redis.call('HINCRBYFLOAT', 'st:job:' .. other, 'grown_mib', tostring(more))
        for _, q in ipairs(queues_of('st:job:' .. other)) do touch(q) end
        added[other] = (added[other] or 0) + more
      end
    end
  end
end
local out = {}
for other, more in pairs(added) do
  out[#out + 1] = other
  out[#out + 1] = tostring(more)
end
return out
"""
