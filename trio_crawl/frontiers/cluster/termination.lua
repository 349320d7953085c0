#!lua name=tc_shard_termination
--[[
The shard side of the termination protocol across shards
(core/shard_termination.py has the model, docs/termination.md the argument).

Every function works on ONE shard's keys, all of one hash tag, so a cluster
runs it on the one node that owns that slot, atomically. KEYS, always in
this order (frontiers/cluster/termination.py builds them):
  1 q     list: queued URLs
  2 seen  set: every URL this shard ever admitted
  3 lo    hash: leased URL -> the worker that holds it
  4 lx    sorted set: leased URL, scored by its lease's expiry (server ms)
  5 m     hash: 'activity', bumped by every call that can make the shard busy;
          'sealed' once the crawl is declared done

Once the detector says done it seals every shard (tcs_seal): admissions
and leases are refused from then on (error TCDONE), so a worker that wakes
late (frozen past its lease) cannot add work to a crawl declared over.

Idle: q and lo both empty. tcs_open creates a shard's books when the crawl
is created; every other function refuses a shard whose books are gone
(error TCGONE: a FLUSHALL, an eviction, a node restarted empty), so lost
books never read as an idle shard. A lease that expired is reclaimed (queued again,
first in line, with a bump) by the next lease or probe on the shard.
]]

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function books(keys)
  if redis.call('EXISTS', keys[5]) == 0 then
    return redis.error_reply('TCGONE this shard\'s books are gone: ' .. keys[5])
  end
  return nil
end

local function sealed(keys)
  if redis.call('HGET', keys[5], 'sealed') then
    return redis.error_reply('TCDONE the crawl is over: ' .. keys[5])
  end
  return nil
end

local function activity(keys)
  return tonumber(redis.call('HGET', keys[5], 'activity') or '0')
end

local function reclaim(keys)
  local due = redis.call('ZRANGE', keys[4], '-inf', now_ms(), 'BYSCORE')
  if #due == 0 then
    return 0
  end
  for i = #due, 1, -1 do
    redis.call('LPUSH', keys[1], due[i])
  end
  redis.call('ZREM', keys[4], unpack(due))
  redis.call('HDEL', keys[3], unpack(due))
  redis.call('HINCRBY', keys[5], 'activity', 1)
  return #due
end

-- Creates the shard's books (once; again is harmless). -> activity
redis.register_function('tcs_open', function(keys, args)
  redis.call('HSETNX', keys[5], 'activity', 0)
  return activity(keys)
end)

-- ARGV: URLs. Queues those never seen here. -> {admitted, activity}
redis.register_function('tcs_admit', function(keys, args)
  local refused = books(keys) or sealed(keys)
  if refused then
    return refused
  end
  local new = 0
  for _, url in ipairs(args) do
    if redis.call('SADD', keys[2], url) == 1 then
      redis.call('RPUSH', keys[1], url)
      new = new + 1
    end
  end
  if new > 0 then
    redis.call('HINCRBY', keys[5], 'activity', 1)
  end
  return {new, activity(keys)}
end)

-- ARGV: worker, ttl (ms). -> {URL or nil, activity}
redis.register_function('tcs_lease', function(keys, args)
  local refused = books(keys) or sealed(keys)
  if refused then
    return refused
  end
  reclaim(keys)
  local url = redis.call('LPOP', keys[1])
  if not url then
    return {false, activity(keys)}
  end
  redis.call('HSET', keys[3], url, args[1])
  redis.call('ZADD', keys[4], now_ms() + tonumber(args[2]), url)
  return {url, redis.call('HINCRBY', keys[5], 'activity', 1)}
end)

-- ARGV: worker, URL. -> 1, or 0 when the lease is no longer the worker's
redis.register_function('tcs_release', function(keys, args)
  local gone = books(keys)
  if gone then
    return gone
  end
  if redis.call('HGET', keys[3], args[2]) ~= args[1] then
    return 0
  end
  redis.call('HDEL', keys[3], args[2])
  redis.call('ZREM', keys[4], args[2])
  return 1
end)

-- The detector's one call per shard. -> {idle (0/1), activity}
redis.register_function('tcs_probe', function(keys, args)
  local gone = books(keys)
  if gone then
    return gone
  end
  reclaim(keys)
  local idle = redis.call('LLEN', keys[1]) == 0 and redis.call('HLEN', keys[3]) == 0
  return {idle and 1 or 0, activity(keys)}
end)

-- ARGV: the activity the detector's last two passes read. Seals the shard
-- (admit and lease refuse it from now on, error TCDONE) if it is still idle
-- with that counter. -> 1, or 0 (it moved: the verdict must not stand)
redis.register_function('tcs_seal', function(keys, args)
  local gone = books(keys)
  if gone then
    return gone
  end
  local idle = redis.call('LLEN', keys[1]) == 0 and redis.call('HLEN', keys[3]) == 0
  if not idle or activity(keys) ~= tonumber(args[1]) then
    return 0
  end
  redis.call('HSET', keys[5], 'sealed', 1)
  return 1
end)
