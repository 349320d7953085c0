#!lua name=trio_crawl_{V}

local BLOCK = 1e15 -- a host score: saturated, wait for a release
-- Turns ahead (ms): a host's URL is leased up to this long before its start
-- time, with that time (its *turn*), so that the worker holds it and starts
-- it on time instead of asking again once Redis has heard the last start.
local AHEAD = 50
local LOAD = 40 -- seen-set entries per bucket before the next split
local E_URL, E_DEPTH, E_REF, E_HOST, E_STATE, E_OWNER = 1, 2, 3, 4, 5, 6
local E_ATT, E_TRIES, E_REFETCH, E_BUD, E_CHAIN, E_PAYLOAD = 7, 8, 9, 10, 11, 12
-- E_LDEPTH: the depth it had when last leased (what the holder's record says).
local E_LDEPTH = 13
-- E_PARTS: 1 if some of its links came ahead of its finish (``pl:<digest>``).
local E_PARTS = 14
-- A finished page not settled yet (``dn``): URL, depth, referrer, links,
-- and the worker that wrote its record (its corrections go to that worker). A
-- link is {digest, hop} (hop: 1 a link, 0 a redirect), or, for one
-- ``max_depth`` cut off, {digest, hop, url, host, chain, payload}; or, for
-- links a worker sent as known, {digests, hop}: their 8-byte digests end to
-- end in one string (one table for all of a page's known links, not one each).
local D_URL, D_DEPTH, D_REF, D_LINKS, D_OWNER = 1, 2, 3, 4, 5
-- D_MORE: the links that came in parts ahead of the finish (packed lists).
local D_MORE = 6
-- Fields of a depth correction (in a reply, or waiting in ``fx:<owner>``).
local FIX = 4

local COUNTERS = {'unfinished', 'fresh', 'started', 'maxp', 'done', 'low', 'maxd',
  'leased', 'finished', 'refused', 'L', 's', 'n', 'ival', 'plim', 'setup', 'lease',
  'reclaimed', 'dcap', 'nosettle', 'ulow'}

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The time now to the microsecond (TIME moves on during a call): a turn's
-- wait is counted from the end of the call that hands it out.
local function now_exact_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end

-- The error every function answers when the crawl's keys are gone (deleted,
-- FLUSHALL, evicted): a worker must stop, not take an empty crawl for done.
local GONE = 'TCGONE the crawl is not in Redis (its keys were deleted or evicted)'

local function exists(prefix)
  return redis.call('HEXISTS', prefix .. 'm', 'cfg') == 1
end

local function open(prefix)
  local C = {p = prefix, changed = false, done_now = false}
  local vals = redis.call('HMGET', prefix .. 'm', unpack(COUNTERS))
  for i, name in ipairs(COUNTERS) do C[name] = tonumber(vals[i]) or 0 end
  C.now = now_ms()
  C.refused0 = C.refused
  C.fixes = {} -- depth corrections of written records, 4 fields each
  C.udd = {} -- unfinished URLs by depth: changes not written yet
  C.udn = {} -- and the counts read (with those changes)
  C.hosts = {} -- host hashes read this call (``host``), by name
  C.hdirty = {} -- and those changed, written back once by ``flush_hosts``
  -- Keys a call names for most pages, made once a call (a Lua string made
  -- by ``..`` costs as much as a command's lookup): the entries, the seen
  -- set's buckets and the queues (``queue_key``) by their number and name.
  C.ke = prefix .. 'e'
  C.bk = {}
  C.qk = {}
  -- The caller's lease set (``wl:<owner>``) changes once a call, at its
  -- end (``flush_leases``): the digests it leased and those it gave back.
  C.wl_add, C.wl_rem = {}, {}
  -- Entries of pages finished in this call, deleted once at its end
  -- (``flush_gone``): ``load`` finds none for them meanwhile.
  C.gone, C.gone_list = {}, {}
  return C
end

local flush_hosts -- (hosts, below)

-- SADD or SREM ``items`` to ``key`` in pieces (Lua's unpack has a limit).
local function set_all(verb, key, items)
  for i = 1, #items, 1000 do
    redis.call(verb, key, unpack(items, i, math.min(i + 999, #items)))
  end
end

local function flush_leases(C)
  if #C.wl_rem == 0 and #C.wl_add == 0 then return end
  local key = C.p .. 'wl:' .. C.owner
  set_all('SREM', key, C.wl_rem) -- before the adds: one given back and leased again stays
  set_all('SADD', key, C.wl_add)
  C.wl_add, C.wl_rem = {}, {}
end

local function flush_gone(C)
  local ds = {}
  for _, d in ipairs(C.gone_list) do
    if C.gone[d] then ds[#ds + 1] = d end
  end
  for i = 1, #ds, 1000 do
    redis.call('HDEL', C.ke, unpack(ds, i, math.min(i + 999, #ds)))
  end
  C.gone, C.gone_list = {}, {}
end

local function close(C)
  flush_hosts(C)
  flush_leases(C)
  flush_gone(C)
  local args = {}
  for _, name in ipairs(COUNTERS) do
    args[#args + 1] = name
    args[#args + 1] = C[name]
  end
  redis.call('HSET', C.p .. 'm', unpack(args))
  for depth, delta in pairs(C.udd) do
    if delta ~= 0 then redis.call('HINCRBY', C.p .. 'ud', depth, delta) end
  end
end

local function load(C, d)
  if C.gone[d] then return nil end
  local raw = redis.call('HGET', C.ke, d)
  if not raw then return nil end
  return cmsgpack.unpack(raw)
end

local function store(C, d, ent)
  C.gone[d] = nil
  redis.call('HSET', C.ke, d, cmsgpack.pack(ent))
end

-- the seen set: linear hashing over small hashes -----------------------------

local function h32(d)
  local a, b, c, e = string.byte(d, 1, 4)
  return ((a * 256 + b) * 256 + c) * 256 + e
end

local function bucket_key(C, h)
  local m = 2 ^ C.L
  local b = h % m
  if b < C.s then b = h % (2 * m) end
  local memo = C.bk
  if memo then
    local key = memo[b]
    if not key then
      key = C.p .. 'S' .. string.format('%d', b)
      memo[b] = key
    end
    return key
  end
  return C.p .. 'S' .. string.format('%d', b)
end

local function split(C)
  local m = 2 ^ C.L
  local old = C.p .. 'S' .. string.format('%d', C.s)
  local new = C.p .. 'S' .. string.format('%d', C.s + m)
  local moving, pairs_ = {}, {}
  local all = redis.call('HGETALL', old)
  for k = 1, #all, 2 do
    local f = all[k]
    if h32(f) % (2 * m) ~= C.s then
      moving[#moving + 1] = f
      pairs_[#pairs_ + 1] = f
      pairs_[#pairs_ + 1] = all[k + 1]
    end
  end
  if #moving > 0 then
    redis.call('HSET', new, unpack(pairs_))
    redis.call('HDEL', old, unpack(moving))
  end
  C.s = C.s + 1
  if C.s >= m then
    C.L = C.L + 1
    C.s = 0
  end
end

-- The seen set keeps each URL's depth, the lowest Redis gave it (``lower``
-- keeps it so): a link to a known URL found at that depth or deeper changes
-- nothing, and this one read says so, without loading the URL's entry or
-- finished record (most links of a crawl lead to known URLs, and with
-- several workers many come in full: each worker sends each URL once).

-- The depth URL ``d`` has in the seen set: false if not seen, -1 if seen
-- with no depth stored (a crawl begun by an older library).
local function seen_depth(C, d)
  local at = redis.call('HGET', bucket_key(C, h32(d)), d)
  if not at then return false end
  return tonumber(at) or -1
end

-- Add URL ``d`` found at ``depth``: true if it is new, otherwise its depth
-- in the seen set (``seen_depth``). A new URL costs one command, a known
-- one two (an HGET where there were two lookups of its entry and record).
local function seen_add(C, d, depth)
  local key = bucket_key(C, h32(d))
  if redis.call('HSETNX', key, d, depth) == 0 then
    return tonumber(redis.call('HGET', key, d)) or -1
  end
  C.n = C.n + 1
  if C.n > LOAD * (2 ^ C.L + C.s) then split(C) end
  return true
end

-- URL ``d`` is now ``depth`` links away (``lower``).
local function seen_lower(C, d, depth)
  redis.call('HSET', bucket_key(C, h32(d)), d, depth)
end

-- depth ------------------------------------------------------------------
-- Nothing is held back for the sake of depth: URLs are taken shallowest
-- first, whatever is still unfinished above them. Unfinished URLs are
-- counted per depth only to know the lowest depth still unfinished (``low``):
-- a finished page at most that deep is *settled* (no shorter path to it can
-- turn up: every path still to be found starts from an unfinished page) and
-- forgets its links (core/frontier.py rule 7).

-- The counts (``ud``) are read at most once a call and written back by
-- ``close`` (a call moves hundreds of URLs: two commands a URL saved).
local function count_depth(C, depth, delta)
  C.udd[depth] = (C.udd[depth] or 0) + delta
  local n = C.udn[depth]
  if n ~= nil then C.udn[depth] = n + delta end
  if delta > 0 then
    if depth < C.low then C.low = depth end
    if depth > C.maxd then C.maxd = depth end
  end
end

local function unfinished_at(C, depth)
  local n = C.udn[depth]
  if n == nil then
    n = (tonumber(redis.call('HGET', C.p .. 'ud', depth)) or 0) + (C.udd[depth] or 0)
    C.udn[depth] = n
  end
  return n
end

local function advance_low(C)
  while C.low <= C.maxd do
    if unfinished_at(C, C.low) > 0 then return end
    C.low = C.low + 1
  end
end

-- Beyond ``max_depth`` (``dcap`` is max_depth + 1; 0: no limit).
local function beyond(C, depth)
  return C.dcap > 0 and depth >= C.dcap
end

local function is_settled(C, depth)
  return C.nosettle == 0 and depth <= C.low
end

-- A record's correction goes to the worker that wrote the record: that
-- worker's corrections of a page come after its record and after each
-- other, in the order Redis made them. Had the worker whose call found the
-- shorter path written it, two corrections of one page from two workers
-- could reach the consumer in either order (two replies, two sockets). One
-- for another live worker waits in ``fx:<owner>`` for that worker's next
-- sync, counted as unfinished (the crawl is not done before it is written);
-- one for a worker gone (or the caller's own) comes in this reply. The
-- worker that writes it, which writes the page's next ones too.
local function correct(C, url, depth, ref, previous, owner)
  local f = C.fixes
  if owner and owner ~= '' and owner ~= C.owner
      and redis.call('ZSCORE', C.p .. 'w', owner) then
    redis.call('RPUSH', C.p .. 'fx:' .. owner, url, depth, ref or '', previous)
    C.unfinished = C.unfinished + 1
    C.changed = true -- an idle owner is woken to write it
    return owner
  end
  f[#f + 1] = url
  f[#f + 1] = depth
  f[#f + 1] = ref or ''
  f[#f + 1] = previous
  return C.owner
end

-- Corrections waiting in ``key`` come in this reply, before any this call
-- makes (they were made first).
local function take_fixes(C, key)
  local items = redis.call('LRANGE', key, 0, -1)
  if #items == 0 then return end
  redis.call('DEL', key)
  local f = C.fixes
  for _, x in ipairs(items) do f[#f + 1] = x end
  C.unfinished = C.unfinished - #items / FIX
end

local function keep_done(C, d, rec)
  local depth = rec[D_DEPTH]
  redis.call('HSET', C.p .. 'dn', d, cmsgpack.pack(rec))
  redis.call('SADD', C.p .. 'u:' .. depth, d)
  if depth < C.ulow then C.ulow = depth end
end

-- Finished pages no shorter path can reach any more forget their links.
local function settle(C)
  if C.nosettle == 1 then return end
  while C.ulow <= math.min(C.low, C.maxd) do
    local key = C.p .. 'u:' .. C.ulow
    while true do
      local ds = redis.call('SPOP', key, 1000)
      if #ds == 0 then break end
      redis.call('HDEL', C.p .. 'dn', unpack(ds))
    end
    C.ulow = C.ulow + 1
  end
end

-- hosts ------------------------------------------------------------------

-- A host's hash is read once a call and written back once, at its end
-- (``flush_hosts``): a call finishes and leases hundreds of a host's URLs,
-- and each used to cost an HMGET and an HSET. ``H.lim`` follows ``ok`` and
-- ``cd`` (``host_limit``, again when they change).
local function host_limit(C, H)
  if (C.setup == 1 and H.ok == 0) or H.cd > 0 then
    -- one request until its robots.txt has been read; one at a time with a
    -- Crawl-delay (the delay counts from the end of the previous request)
    H.lim = 1
  elseif C.plim > 0 then
    H.lim = C.plim
  else
    H.lim = 0
  end
end

local function host(C, name)
  local H = C.hosts[name]
  if H then return H end
  local v = redis.call('HMGET', C.p .. 'h:' .. name, 'next', 'iv', 'infl', 'ok', 'cd')
  H = {name = name, next = tonumber(v[1]) or 0, iv = tonumber(v[2]) or C.ival,
    infl = tonumber(v[3]) or 0, ok = tonumber(v[4]) or 0, cd = tonumber(v[5]) or 0}
  host_limit(C, H)
  C.hosts[name] = H
  return H
end

-- Saturated: as many requests in flight (leased) as allowed.
local function saturated(H)
  return H.lim > 0 and H.infl >= H.lim
end

local function host_score(H)
  if saturated(H) then return BLOCK end
  return H.next
end

local function save_host(C, H)
  C.hdirty[H.name] = H
end

flush_hosts = function(C)
  for name, H in pairs(C.hdirty) do
    redis.call('HSET', C.p .. 'h:' .. name, 'next', H.next, 'iv', H.iv, 'infl', H.infl,
      'ok', H.ok, 'cd', H.cd)
  end
  C.hdirty = {}
end

-- Give the host its true score in every ready set it is in (XX: only there).
local function rescore(C, H, opened)
  local score = host_score(H)
  for dd = C.low, C.maxd do
    redis.call('ZADD', C.p .. 'r:' .. dd, 'XX', score, H.name)
  end
  if opened then C.changed = true end
end

local function is_fresh(ent)
  return ent[E_BUD] == 0 and ent[E_TRIES] == 0 and ent[E_REFETCH] == 0
end

-- RPUSH a long list in pieces (Lua's unpack has a limit).
local function push_all(key, items)
  for i = 1, #items, 1000 do
    redis.call('RPUSH', key, unpack(items, i, math.min(i + 999, #items)))
  end
end

local function release_host(C, name, d)
  local H = host(C, name)
  local was = saturated(H)
  H.infl = math.max(H.infl - 1, 0)
  if H.cd > 0 then
    -- The request has ended (this call runs after its finish was sent, so
    -- no sooner than the response): the next starts a Crawl-delay later,
    -- as the server sees it, whatever came late on the way.
    H.next = math.max(H.next, C.now + H.cd)
  end
  save_host(C, H)
  if was or H.cd > 0 then rescore(C, H, true) end
end

-- @budgets (budgets.lua: seen_admit, the seen set under the host budgets)

-- admission --------------------------------------------------------------

local function queue_key(C, depth, hostname)
  local by_host = C.qk[depth]
  if not by_host then
    by_host = {}
    C.qk[depth] = by_host
  end
  local q = by_host[hostname]
  if not q then
    q = C.p .. 'q:' .. depth .. ':' .. hostname
    by_host[hostname] = q
  end
  return q
end

local function enqueue_fresh(C, d, depth, hostname, front)
  local q = queue_key(C, depth, hostname)
  local n
  if front then
    n = redis.call('LPUSH', q, d)
  else
    n = redis.call('RPUSH', q, d)
  end
  -- A queue that held URLs already has its host in the ready set (take_fresh
  -- removes a host only once its queue is empty): no lookup of the host.
  if n == 1 then
    redis.call('ZADD', C.p .. 'r:' .. depth, 'NX', host_score(host(C, hostname)), hostname)
  end
  C.changed = true
end

local function admit_new(C, d, url, hostname, depth, ref, chain, payload)
  store(C, d, {url, depth, ref, hostname, 'q', '', 0, 0, 0, 0, chain, payload, depth})
  count_depth(C, depth, 1)
  C.unfinished = C.unfinished + 1
  C.fresh = C.fresh + 1
  enqueue_fresh(C, d, depth, hostname, false)
end

-- A shorter path: URL ``d`` is ``depth`` links away, through ``ref``. Lower
-- it and pass the decrease on through the links of finished pages, each
-- written record getting a correction, for the worker that wrote it
-- (shallowest paths first, so that a page is lowered once per call as a rule).
local function lower_one(C, dd, nd, via, work)
  local ent = load(C, dd)
  if ent then
    if nd < ent[E_DEPTH] then
      -- Unfinished: it moves. Queued fresh: to the shorter depth's queue
      -- (the old list keeps a stale copy, skipped when taken: its depth
      -- differs). Leased: its finish corrects the record and moves its
      -- links. Queued again or deferred: handed out at the new depth.
      count_depth(C, ent[E_DEPTH], -1)
      count_depth(C, nd, 1)
      ent[E_DEPTH] = nd
      ent[E_REF] = via
      store(C, dd, ent)
      seen_lower(C, dd, nd)
      if ent[E_STATE] == 'q' and is_fresh(ent) then
        enqueue_fresh(C, dd, nd, ent[E_HOST], false)
      end
    end
  else
    local raw = redis.call('HGET', C.p .. 'dn', dd)
    local rec = raw and cmsgpack.unpack(raw)
    if rec and nd < rec[D_DEPTH] then
      rec[D_OWNER] = correct(C, rec[D_URL], nd, via, rec[D_DEPTH], rec[D_OWNER])
      redis.call('SREM', C.p .. 'u:' .. rec[D_DEPTH], dd)
      seen_lower(C, dd, nd)
      rec[D_DEPTH] = nd
      rec[D_REF] = via
      if is_settled(C, nd) then
        redis.call('HDEL', C.p .. 'dn', dd)
      else
        keep_done(C, dd, rec)
      end
      local lists = {rec[D_LINKS]}
      for _, blob in ipairs(rec[D_MORE] or {}) do lists[#lists + 1] = cmsgpack.unpack(blob) end
      for _, list in ipairs(lists) do
        for _, link in ipairs(list) do
          local cd = nd + link[2]
          if not beyond(C, cd) then
            local s = link[1]
            if link[3] then
              local was_seen = seen_admit(C, s, link[4], cd)
              if was_seen == true then
                -- cut off by max_depth before, within reach now
                admit_new(C, s, link[3], link[4], cd, rec[D_URL], link[5], link[6])
              elseif was_seen then
                work[#work + 1] = {s, cd, rec[D_URL], was_seen}
              end
            else
              for j = 1, #s, 8 do work[#work + 1] = {string.sub(s, j, j + 7), cd, rec[D_URL]} end
            end
          end
        end
      end
    end
  end
end

-- ``at``: ``d``'s depth in the seen set, if read already.
local function lower(C, d, depth, ref, at)
  local work = {{d, depth, ref, at}}
  local k = 1
  while k <= #work do
    local item = work[k]
    k = k + 1
    local dd, nd = item[1], item[2]
    local seen = item[4]
    if seen == nil then seen = seen_depth(C, dd) end
    -- Not seen (refused by a host budget), or no shorter path: nothing changes.
    if seen and (seen < 0 or nd < seen) then lower_one(C, dd, nd, item[3], work) end
  end
end

-- Admit one URL found at ``depth``: new, or a shorter path to a known one.
local function admit(C, d, url, hostname, depth, ref, chain, payload)
  -- true: new; nil: over a host budget, refused; else its depth in the seen set
  local at = seen_admit(C, d, hostname, depth)
  if at == true then
    admit_new(C, d, url, hostname, depth, ref, chain, payload)
  elseif at and (at < 0 or depth < at) then
    lower(C, d, depth, ref, at)
  end
end

-- Read ``n`` admissions (7 fields each) from ``args`` at ``i``; return the next index.
local function admit_many(C, args, i, n)
  for _ = 1, n do
    admit(C, args[i], args[i + 1], args[i + 2], tonumber(args[i + 3]), args[i + 4],
      args[i + 5], args[i + 6])
    i = i + 7
  end
  return i
end

-- leases -----------------------------------------------------------------

local function valid_lease(C, d, token)
  local ent = load(C, d)
  if ent and ent[E_STATE] == 'l' and ent[E_OWNER] == C.owner and ent[E_ATT] == token then
    return ent
  end
  return nil
end

local function unlease(C, d, ent)
  if ent[E_OWNER] == C.owner then
    C.wl_rem[#C.wl_rem + 1] = d
  else
    redis.call('SREM', C.p .. 'wl:' .. ent[E_OWNER], d)
  end
  C.leased = C.leased - 1
  release_host(C, ent[E_HOST], d)
end

local function queue_again(C, d, ent)
  ent[E_STATE] = 'q'
  ent[E_OWNER] = ''
  store(C, d, ent)
  redis.call('RPUSH', C.p .. 'again', d)
  C.changed = true
end

-- A worker's leases go back to the queue: it died, or was replaced.
local function reclaim(C, owner)
  if owner == C.owner then flush_leases(C) end
  local key = C.p .. 'wl:' .. owner
  for _, d in ipairs(redis.call('SMEMBERS', key)) do
    local ent = load(C, d)
    if ent and ent[E_STATE] == 'l' and ent[E_OWNER] == owner then
      C.leased = C.leased - 1
      C.reclaimed = C.reclaimed + 1
      release_host(C, ent[E_HOST], d)
      ent[E_REFETCH] = 1 -- the server may have seen it: its record will say so
      ent[E_TRIES] = 0
      queue_again(C, d, ent)
    end
  end
  redis.call('DEL', key)
  redis.call('ZREM', C.p .. 'w', owner)
  -- Its corrections still waiting: any worker's next sync writes them.
  local fx = C.p .. 'fx:' .. owner
  if redis.call('EXISTS', fx) == 1 then
    push_all(C.p .. 'fx', redis.call('LRANGE', fx, 0, -1))
    redis.call('DEL', fx)
    C.changed = true
  end
end

local function reclaim_expired(C)
  for _, owner in ipairs(redis.call('ZRANGEBYSCORE', C.p .. 'w', '-inf', C.now)) do
    reclaim(C, owner)
  end
end

-- A page is done. Its record (written before this call) says the depth it
-- was leased at; a shorter path found meanwhile lowered it: a correction,
-- and its links move down as much. Links beyond max_depth are only kept.
-- Read a page's links from ``args`` at ``i`` (``n`` admissions, then the
-- known links: count, depth, digests) into ``links``; return the next index.
local function page_links(C, ent, n, args, i, links)
  local was, depth = ent[E_LDEPTH] or ent[E_DEPTH], ent[E_DEPTH]
  for _ = 1, n do
    local cd, url, hostname, ref, chain, payload =
      args[i], args[i + 1], args[i + 2], args[i + 4], args[i + 5], args[i + 6]
    local hop = tonumber(args[i + 3]) - was
    local child_depth = depth + hop
    if beyond(C, child_depth) then
      links[#links + 1] = {cd, hop, url, hostname, chain, payload}
    else
      admit(C, cd, url, hostname, child_depth, ref, chain, payload)
      links[#links + 1] = {cd, hop}
    end
    i = i + 7
  end
  -- Known links: this worker's earlier calls admitted them at ``kdepth`` or
  -- lower, so they are only kept (as they came: their digests end to end),
  -- unless this page was lowered since it was leased (then they may be
  -- lowered too).
  local kdepth, known = tonumber(args[i]), args[i + 1]
  if #known > 0 then
    local hop = kdepth - was
    local child_depth = depth + hop
    if depth < was and not beyond(C, child_depth) then
      for j = 1, #known, 8 do lower(C, string.sub(known, j, j + 7), child_depth, ent[E_URL]) end
    end
    links[#links + 1] = {known, hop}
  end
  return i + 2
end

-- The index after a page's links at ``i`` (``n`` admissions), unread.
local function skip_links(args, i, n)
  return i + 7 * n + 2
end

-- Part of a leased page's links, ahead of its finish (a page with more
-- links than one call should carry): admitted now, kept for the finish.
local function part(C, d, token, n, args, i)
  local ent = valid_lease(C, d, token)
  if not ent then
    C.refused = C.refused + 1
    return skip_links(args, i, n) -- a stale lease: the retaker sends them
  end
  local links = {}
  i = page_links(C, ent, n, args, i, links)
  if #links > 0 then
    redis.call('RPUSH', C.p .. 'pl:' .. d, cmsgpack.pack(links))
    if ent[E_PARTS] ~= 1 then
      ent[E_PARTS] = 1
      store(C, d, ent)
    end
  end
  return i
end

-- A page is done. Its record (written before this call) says the depth it
-- was leased at; a shorter path found meanwhile lowered it: a correction,
-- and its links move down as much. Links beyond max_depth are only kept.
local function finish(C, d, token, started, children, args, i)
  local ent = valid_lease(C, d, token)
  if not ent then
    C.refused = C.refused + 1
    return skip_links(args, i, children) -- a stale lease: its children come with the retaker
  end
  local was, depth = ent[E_LDEPTH] or ent[E_DEPTH], ent[E_DEPTH]
  if depth < was then correct(C, ent[E_URL], depth, ent[E_REF], was, C.owner) end
  local links = {}
  i = page_links(C, ent, children, args, i, links)
  local more = nil
  if ent[E_PARTS] == 1 then
    more = redis.call('LRANGE', C.p .. 'pl:' .. d, 0, -1)
    redis.call('DEL', C.p .. 'pl:' .. d)
  end
  C.gone[d] = true
  C.gone_list[#C.gone_list + 1] = d
  unlease(C, d, ent)
  count_depth(C, depth, -1)
  advance_low(C)
  if not is_settled(C, depth) then
    keep_done(C, d, {ent[E_URL], depth, ent[E_REF], links, C.owner, more})
  end
  C.unfinished = C.unfinished - 1
  C.finished = C.finished + 1
  if started == 0 and ent[E_BUD] == 1 and ent[E_TRIES] == 0 and ent[E_REFETCH] == 0 then
    C.started = C.started - 1 -- never fetched (robots.txt): the page budget gets it back
    C.changed = true
  end
  return i
end

-- ``missed``: 1 if the worker gives the URL back because its rate's turn
-- passed before it could start it (``turns.py``), counted crawl-wide for
-- ``status`` (``m.missed``; a release refused or sent again counts nothing).
local function release(C, d, token, started, missed)
  local ent = valid_lease(C, d, token)
  if not ent then
    C.refused = C.refused + 1
    return
  end
  if missed == 1 then redis.call('HINCRBY', C.p .. 'm', 'missed', 1) end
  unlease(C, d, ent)
  if started == 0 and ent[E_BUD] == 1 and ent[E_TRIES] == 0 and ent[E_REFETCH] == 0 then
    -- Taken but never fetched: fresh again, budget refunded, back in its place.
    C.started = C.started - 1
    C.fresh = C.fresh + 1
    ent[E_BUD] = 0
    ent[E_STATE] = 'q'
    ent[E_OWNER] = ''
    store(C, d, ent)
    enqueue_fresh(C, d, ent[E_DEPTH], ent[E_HOST], true)
    return
  end
  if started == 1 then ent[E_REFETCH] = 1 end
  queue_again(C, d, ent)
end

local function defer(C, d, token, delay, tries)
  local ent = valid_lease(C, d, token)
  if not ent then
    C.refused = C.refused + 1
    return
  end
  unlease(C, d, ent)
  ent[E_STATE] = 'd'
  ent[E_OWNER] = ''
  ent[E_TRIES] = tries
  store(C, d, ent)
  redis.call('ZADD', C.p .. 'dl', C.now + delay, d)
  C.changed = true
end

local function crawl_delay(C, hostname, delay)
  local H = host(C, hostname)
  local was = H.lim
  H.cd = math.floor(delay + 0.5)
  H.next = math.max(H.next, C.now + H.cd)
  H.ok = 1
  save_host(C, H)
  host_limit(C, H)
  if H.lim ~= was then rescore(C, H, true) end
  C.changed = true
end

-- taking -----------------------------------------------------------------

local function budget_spent(C)
  return C.maxp >= 0 and C.started >= C.maxp
end

local function lease(C, d, ent, H, out)
  if is_fresh(ent) then
    ent[E_BUD] = 1
    C.started = C.started + 1
    C.fresh = C.fresh - 1
  end
  ent[E_STATE] = 'l'
  ent[E_OWNER] = C.owner
  ent[E_ATT] = ent[E_ATT] + 1
  ent[E_LDEPTH] = ent[E_DEPTH]
  if ent[E_PARTS] == 1 then -- parts of an earlier lease's links: its retaker sends them all
    redis.call('DEL', C.p .. 'pl:' .. d)
    ent[E_PARTS] = 0
  end
  store(C, d, ent)
  C.wl_add[#C.wl_add + 1] = d
  C.leased = C.leased + 1
  H.infl = H.infl + 1
  -- The URL's turn: its host's next start time, or now. The next turn is
  -- ``iv`` later (a Crawl-delay: at least the delay, and the delay after the
  -- end of this request once Redis hears of it, ``release_host``).
  local slot = math.max(H.next, C.now)
  local turn = ''
  if H.iv > 0 and H.cd == 0 then
    turn = slot -- 'r': a rate's turn, started on time or given back
  elseif H.cd > 0 or slot > C.now then
    turn = -slot -- 'w': a time to wait for only (one request at a time)
  end
  if H.iv > 0 or H.cd > 0 then H.next = slot + math.max(H.iv, H.cd) end
  local n = #out
  out[n + 1] = d
  out[n + 2] = ent[E_URL]
  out[n + 3] = ent[E_DEPTH]
  out[n + 4] = ent[E_REF]
  out[n + 5] = ent[E_CHAIN]
  out[n + 6] = ent[E_PAYLOAD]
  out[n + 7] = ent[E_TRIES]
  out[n + 8] = ent[E_REFETCH]
  out[n + 9] = ent[E_ATT]
  out[n + 10] = turn -- made relative by turn_waits at the end of the call
end

-- A host's URL may be leased: its next turn comes within ``AHEAD``.
local function may_start(H, now)
  return H.next <= now + AHEAD and not saturated(H)
end

-- The turns of the URLs taken in ``out``, relative to now (the end of the
-- call, so that no worker counts its wait from before Redis gave it): 'r'
-- and the microseconds until a rate's turn, 'w' and those until a time to
-- wait for only, '' to start at once.
local function turn_waits(out)
  if #out == 0 then return end
  local now = now_exact_ms()
  for n = 10, #out, 10 do
    local slot = out[n]
    if slot ~= '' then
      local kind = 'r'
      if slot < 0 then
        kind = 'w'
        slot = -slot
      end
      out[n] = kind .. string.format('%d', math.max(0, math.ceil((slot - now) * 1000)))
    end
  end
end

local function move_due(C)
  local key = C.p .. 'dl'
  for _, d in ipairs(redis.call('ZRANGEBYSCORE', key, '-inf', C.now)) do
    redis.call('ZREM', key, d)
    local ent = load(C, d)
    if ent and ent[E_STATE] == 'd' then queue_again(C, d, ent) end
  end
end

-- Retries and reclaimed URLs first: they waited once already.
local function take_again(C, want, out)
  local key = C.p .. 'again'
  local items = redis.call('LRANGE', key, 0, -1)
  if #items == 0 then return end
  local keep, hosts = {}, {}
  for _, d in ipairs(items) do
    local ent = load(C, d)
    if ent and ent[E_STATE] == 'q' then
      local H = hosts[ent[E_HOST]] or host(C, ent[E_HOST])
      hosts[ent[E_HOST]] = H
      if #out < want * 10 and may_start(H, C.now) then
        lease(C, d, ent, H, out)
      else
        keep[#keep + 1] = d
      end
    end
  end
  for _, H in pairs(hosts) do save_host(C, H) end
  redis.call('DEL', key)
  push_all(key, keep)
  for _, H in pairs(hosts) do rescore(C, H, false) end
end

local function take_fresh(C, depth, want, out)
  local rkey = C.p .. 'r:' .. depth
  while #out < want * 10 and not budget_spent(C) do
    local ready = redis.call('ZRANGEBYSCORE', rkey, '-inf', C.now + AHEAD, 'LIMIT', 0, 16)
    if #ready == 0 then return end
    for _, hostname in ipairs(ready) do
      local H = host(C, hostname)
      local q = queue_key(C, depth, hostname)
      while #out < want * 10 and may_start(H, C.now) and not budget_spent(C) do
        -- As many as may be leased now, in one LPOP: a host spaced by turns
        -- one at a time (each moves its next start), others up to the room
        -- left by its concurrency and the page budget. (A stale copy, of a
        -- URL lowered to a shallower queue, is dropped and leaves room.)
        local n = want - #out / 10
        if H.iv > 0 or H.cd > 0 then n = 1 end
        if H.lim > 0 then n = math.min(n, H.lim - H.infl) end
        if C.maxp >= 0 then n = math.min(n, C.maxp - C.started) end
        local ds = redis.call('LPOP', q, n)
        if not ds then break end
        for _, d in ipairs(ds) do
          local ent = load(C, d)
          if ent and ent[E_STATE] == 'q' and ent[E_DEPTH] == depth and is_fresh(ent) then
            lease(C, d, ent, H, out)
          end
        end
      end
      save_host(C, H)
      if redis.call('LLEN', q) == 0 then
        redis.call('ZREM', rkey, hostname)
      else
        redis.call('ZADD', rkey, host_score(H), hostname)
      end
      if #out >= want * 10 or budget_spent(C) then return end
    end
  end
end

local function first_score(key)
  local r = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if #r == 0 then return nil end
  return tonumber(r[2])
end

-- When something may be takeable without any other change: the earliest due
-- retry, or the earliest host slot at any depth (``AHEAD`` before it).
local function next_due(C)
  local best = first_score(C.p .. 'dl')
  local function consider(t)
    if t and t < BLOCK and (not best or t - AHEAD < best) then best = t - AHEAD end
  end
  if not budget_spent(C) then
    for dd = C.low, C.maxd do consider(first_score(C.p .. 'r:' .. dd)) end
  end
  for _, d in ipairs(redis.call('LRANGE', C.p .. 'again', 0, -1)) do
    local ent = load(C, d)
    if ent then
      local H = host(C, ent[E_HOST])
      if not saturated(H) then consider(H.next) end
    end
  end
  if not best then return -1 end
  return math.max(math.ceil(best - C.now), 0)
end

local function check_done(C)
  if C.done == 1 then return end
  if C.unfinished == 0 or (budget_spent(C) and C.unfinished == C.fresh) then
    C.done = 1
    C.done_now = true
  end
end

local function wake(C)
  local idle = C.p .. 'idle'
  if C.done_now then
    redis.call('XADD', C.p .. 'wake', 'MAXLEN', '~', 1000, '*', 'd', '1')
    redis.call('DEL', idle)
  elseif C.changed and redis.call('SCARD', idle) > 0 then
    redis.call('XADD', C.p .. 'wake', 'MAXLEN', '~', 1000, '*', 'w', '1')
    redis.call('DEL', idle)
  end
end

local function counters(C)
  return {C.done, C.unfinished, C.fresh, C.leased, C.started, C.finished, C.n}
end

-- the functions ------------------------------------------------------------

-- hello(prefix; name, lease_ms, may_create, cfg_json, maxp, ival, plim, setup,
-- max_depth, settle, n_start, start...): create the crawl (admitting the start URLs) or join it;
-- register a worker. A worker joining again (may_create 0) never re-creates
-- a crawl whose keys are gone. ``known``: a worker of this name joined before.
local function hello(keys, args)
  local C = open(keys[1])
  local created = 0
  local cfg = redis.call('HGET', C.p .. 'm', 'cfg')
  if not cfg then
    if args[3] ~= '1' then return redis.error_reply(GONE) end
    created = 1
    cfg = args[4]
    redis.call('HSET', C.p .. 'm', 'cfg', cfg)
    C.maxp = tonumber(args[5])
    C.ival = tonumber(args[6])
    C.plim = tonumber(args[7])
    C.setup = tonumber(args[8])
    C.dcap = tonumber(args[9]) + 1
    if args[10] == '1' then C.nosettle = 0 else C.nosettle = 1 end
    C.L = 4
    C.s = 0
    budget_create(C, cfg)
    admit_many(C, args, 12, tonumber(args[11]))
  end
  C.lease = tonumber(args[2])
  reclaim_expired(C)
  local name = args[1]
  -- Whether a worker of this name joined this crawl before. One that did
  -- not, but whose output holds records, holds those of a crawl Redis lost.
  local known = 0
  if redis.call('SADD', C.p .. 'wn', name) == 0 then known = 1 end
  local gen = redis.call('HINCRBY', C.p .. 'm', 'wgen', 1)
  -- An earlier run of this worker (same name): its leases come back now.
  for _, owner in ipairs(redis.call('ZRANGE', C.p .. 'w', 0, -1)) do
    if string.sub(owner, 1, #name + 1) == name .. '#' then reclaim(C, owner) end
  end
  C.owner = name .. '#' .. gen
  redis.call('ZADD', C.p .. 'w', C.now + C.lease, C.owner)
  check_done(C)
  wake(C)
  close(C)
  local last = redis.call('XREVRANGE', C.p .. 'wake', '+', '-', 'COUNT', 1)
  local last_id = '0-0'
  if #last > 0 then last_id = last[1][1] end
  return {created, cfg, C.owner, last_id, counters(C), known}
end

-- sync(prefix; owner, want, floor, ops...): apply a worker's batch of moves,
-- then take up to ``want`` URLs (no more than a fair share of what is queued
-- among the live workers, but ``floor`` if there is that much).
-- Ops: F d token started n children... | P d token n children...
-- | R d token started missed
-- | D d token delay_ms tries | A n children... | C host delay_ms
local function sync(keys, args)
  if not exists(keys[1]) then return redis.error_reply(GONE) end
  local C = open(keys[1])
  C.owner = args[1]
  take_fixes(C, C.p .. 'fx:' .. C.owner)
  take_fixes(C, C.p .. 'fx')
  local want = tonumber(args[2])
  local floor = tonumber(args[3])
  local i = 4
  while i <= #args do
    local op = args[i]
    if op == 'F' then
      i = finish(C, args[i + 1], tonumber(args[i + 2]), tonumber(args[i + 3]),
        tonumber(args[i + 4]), args, i + 5)
    elseif op == 'P' then
      i = part(C, args[i + 1], tonumber(args[i + 2]), tonumber(args[i + 3]), args, i + 4)
    elseif op == 'R' then
      release(C, args[i + 1], tonumber(args[i + 2]), tonumber(args[i + 3]),
        tonumber(args[i + 4]))
      i = i + 5
    elseif op == 'D' then
      defer(C, args[i + 1], tonumber(args[i + 2]), tonumber(args[i + 3]), tonumber(args[i + 4]))
      i = i + 5
    elseif op == 'A' then
      i = admit_many(C, args, i + 2, tonumber(args[i + 1]))
    elseif op == 'C' then
      crawl_delay(C, args[i + 1], tonumber(args[i + 2]))
      i = i + 3
    else
      return redis.error_reply('trio_crawl: unknown op ' .. tostring(op))
    end
  end
  reclaim_expired(C)
  -- Alive only if still registered after the reclaim: a lease to a worker
  -- no longer in ``w`` would never be reclaimed.
  local alive = redis.call('ZSCORE', C.p .. 'w', C.owner)
  move_due(C)
  advance_low(C)
  settle(C)
  check_done(C)
  local out = {}
  local due = -1
  if want > 1 then
    local live = redis.call('ZCOUNT', C.p .. 'w', C.now, '+inf')
    if live > 1 then
      -- A fair share of what is queued; while other workers wait for work,
      -- not even ``floor`` more (they are woken to take the rest).
      local queued = C.fresh + redis.call('LLEN', C.p .. 'again')
      local share = math.ceil(queued / live)
      local waiting = redis.call('SCARD', C.p .. 'idle')
        - redis.call('SISMEMBER', C.p .. 'idle', C.owner)
      if waiting > 0 then
        want = math.min(want, math.max(1, share))
      else
        want = math.min(want, math.max(floor, share))
      end
    end
  end
  if alive and C.done == 0 and want > 0 then
    take_again(C, want, out)
    if not budget_spent(C) then
      -- Shallowest first, but no depth waits for another (no depth gate).
      for dd = C.low, C.maxd do
        if #out >= want * 10 or budget_spent(C) then break end
        take_fresh(C, dd, want, out)
      end
    end
  end
  check_done(C)
  wake(C)
  local idle = 0
  if alive and C.done == 0 and #out < want * 10 then
    redis.call('SADD', C.p .. 'idle', C.owner)
    idle = 1
    due = next_due(C)
  end
  close(C)
  turn_waits(out)
  local a = 1
  if not alive then a = 0 end
  return {a, due, counters(C), out, idle, C.refused - C.refused0, C.fixes, C.over_budget or 0}
end

-- renew(prefix; owner, lease_ms): the heartbeat. 0 if this worker's leases
-- were reclaimed (it was taken for dead). Reclaims dead workers' leases.
local function renew(keys, args)
  if not exists(keys[1]) then return redis.error_reply(GONE) end
  local C = open(keys[1])
  local owner = args[1]
  local alive = redis.call('ZSCORE', C.p .. 'w', owner)
  if alive then redis.call('ZADD', C.p .. 'w', C.now + tonumber(args[2]), owner) end
  reclaim_expired(C)
  check_done(C)
  wake(C)
  close(C)
  local a = 1
  if not alive then a = 0 end
  return {a, counters(C)}
end

-- bye(prefix; owner): a worker leaves; whatever it still holds goes back.
local function bye(keys, args)
  if not exists(keys[1]) then return redis.error_reply(GONE) end
  local C = open(keys[1])
  reclaim(C, args[1])
  redis.call('SREM', C.p .. 'idle', args[1])
  check_done(C)
  wake(C)
  close(C)
  return counters(C)
end

-- turn(prefix; host): a request that is not a URL of the crawl (a rendered
-- page's script, stylesheet or fetch(), made through the crawl) takes its
-- host's next turn as a leased URL does: the reply is the microseconds to
-- wait before it starts. With a Crawl-delay, the turns that follow are the
-- delay later (Redis does not hear when such a request ends).
local function turn(keys, args)
  if not exists(keys[1]) then return redis.error_reply(GONE) end
  local C = open(keys[1])
  local H = host(C, args[1])
  if H.iv == 0 and H.cd == 0 then return 0 end -- not spaced: at once
  local slot = math.max(H.next, C.now)
  H.next = slot + math.max(H.iv, H.cd)
  save_host(C, H)
  flush_hosts(C)
  rescore(C, H, false)
  return math.max(0, math.ceil((slot - now_exact_ms()) * 1000))
end

-- status(prefix): counters for --status (read-only).
local function status(keys, args)
  local p = keys[1]
  local vals = redis.call('HMGET', p .. 'm', unpack(COUNTERS))
  local out = {}
  for i, name in ipairs(COUNTERS) do
    out[#out + 1] = name
    out[#out + 1] = tostring(vals[i] or '')
  end
  out[#out + 1] = 'cfg'
  out[#out + 1] = redis.call('HGET', p .. 'm', 'cfg') or ''
  out[#out + 1] = 'delayed'
  out[#out + 1] = tostring(redis.call('ZCARD', p .. 'dl'))
  out[#out + 1] = 'again'
  out[#out + 1] = tostring(redis.call('LLEN', p .. 'again'))
  out[#out + 1] = 'workers'
  out[#out + 1] = tostring(redis.call('ZCOUNT', p .. 'w', now_ms(), '+inf'))
  out[#out + 1] = 'missed'
  out[#out + 1] = redis.call('HGET', p .. 'm', 'missed') or ''
  budget_status(p, out)
  return out
end

-- check(prefix): a read-only consistency check (the tests call it after every
-- crawl): recompute the counters from the keys and look for a URL in two
-- places, or in none. The list of what disagrees; empty when all agree.
local function check(keys, args)
  local p = keys[1]
  local problems = {}
  local function bad(what) problems[#problems + 1] = what end
  if not exists(p) then return {'the crawl is not in Redis'} end
  local vals = redis.call('HMGET', p .. 'm', unpack(COUNTERS))
  local C = {p = p}
  for i, name in ipairs(COUNTERS) do C[name] = tonumber(vals[i]) or 0 end
  -- The seen set's depth of an unfinished or kept URL is its depth (a crawl
  -- begun by an older library stored none: '').
  local function seen_agrees(d, url, depth)
    local at = redis.call('HGET', bucket_key(C, h32(d)), d)
    if not at then
      bad(url .. ': not in the seen set')
    elseif at ~= '' and tonumber(at) ~= depth then
      bad(url .. ': at depth ' .. depth .. ', but at ' .. at .. ' in the seen set')
    end
  end
  local lists = {}
  local function in_list(key, d)
    local set = lists[key]
    if not set then
      set = {}
      for _, x in ipairs(redis.call('LRANGE', key, 0, -1)) do set[x] = true end
      lists[key] = set
    end
    return set[d] == true
  end
  local deferred = {}
  for _, d in ipairs(redis.call('ZRANGE', p .. 'dl', 0, -1)) do deferred[d] = true end
  local live = {}
  for _, owner in ipairs(redis.call('ZRANGE', p .. 'w', 0, -1)) do live[owner] = true end
  local total, leased, fresh, n_deferred = 0, 0, 0, 0
  local by_depth, infl, owners = {}, {}, {}
  local all = redis.call('HGETALL', p .. 'e')
  for i = 1, #all, 2 do
    local d, ent = all[i], cmsgpack.unpack(all[i + 1])
    local url, state, depth, hostname = ent[E_URL], ent[E_STATE], ent[E_DEPTH], ent[E_HOST]
    total = total + 1
    by_depth[depth] = (by_depth[depth] or 0) + 1
    seen_agrees(d, url, depth)
    if state ~= 'd' and deferred[d] then bad(url .. ': deferred, and ' .. state) end
    if state == 'l' then
      leased = leased + 1
      infl[hostname] = (infl[hostname] or 0) + 1
      owners[ent[E_OWNER]] = (owners[ent[E_OWNER]] or 0) + 1
      if not live[ent[E_OWNER]] then bad(url .. ': leased to ' .. ent[E_OWNER] .. ', not a live worker') end
      if redis.call('SISMEMBER', p .. 'wl:' .. ent[E_OWNER], d) == 0 then
        bad(url .. ': leased, but not in the lease set of ' .. ent[E_OWNER])
      end
    elseif state == 'd' then
      n_deferred = n_deferred + 1
      if not deferred[d] then bad(url .. ': deferred, but not in dl') end
    elseif state == 'q' and is_fresh(ent) then
      fresh = fresh + 1
      if not in_list(p .. 'q:' .. depth .. ':' .. hostname, d) then
        bad(url .. ': queued, but in no queue of its depth and host')
      elseif not redis.call('ZSCORE', p .. 'r:' .. depth, hostname) then
        bad(url .. ': queued, but its host is not ready at depth ' .. depth)
      end
    elseif state == 'q' then
      if not in_list(p .. 'again', d) then bad(url .. ': queued again, but not in again') end
    else
      bad(url .. ': unknown state ' .. tostring(state))
    end
  end
  local waiting_fixes = redis.call('LLEN', p .. 'fx')
  for owner, _ in pairs(live) do waiting_fixes = waiting_fixes + redis.call('LLEN', p .. 'fx:' .. owner) end
  total = total + waiting_fixes / FIX
  local function same(name, counted, stored)
    if counted ~= stored then
      bad(name .. ': counted ' .. counted .. ', stored ' .. stored)
    end
  end
  same('unfinished', total, C.unfinished)
  same('leased', leased, C.leased)
  same('fresh', fresh, C.fresh)
  same('deferred', n_deferred, redis.call('ZCARD', p .. 'dl'))
  local ud = redis.call('HGETALL', p .. 'ud')
  for i = 1, #ud, 2 do
    local depth = tonumber(ud[i])
    same('unfinished at depth ' .. depth, by_depth[depth] or 0, tonumber(ud[i + 1]))
    by_depth[depth] = nil
  end
  for depth, n in pairs(by_depth) do same('unfinished at depth ' .. depth, n, 0) end
  for owner, _ in pairs(live) do
    same('lease set of ' .. owner, owners[owner] or 0, redis.call('SCARD', p .. 'wl:' .. owner))
  end
  for hostname, n in pairs(infl) do
    same('in flight at ' .. hostname, n,
      tonumber(redis.call('HGET', p .. 'h:' .. hostname, 'infl')) or 0)
  end
  -- A finished page kept for corrections is not also unfinished, and its
  -- depth's set lists it.
  local kept = redis.call('HGETALL', p .. 'dn')
  for i = 1, #kept, 2 do
    local d, rec = kept[i], cmsgpack.unpack(kept[i + 1])
    if redis.call('HEXISTS', p .. 'e', d) == 1 then bad(rec[D_URL] .. ': finished, and unfinished') end
    seen_agrees(d, rec[D_URL], rec[D_DEPTH])
    if redis.call('SISMEMBER', p .. 'u:' .. rec[D_DEPTH], d) == 0 then
      bad(rec[D_URL] .. ': kept at depth ' .. rec[D_DEPTH] .. ', but not in its set')
    end
  end
  local seen = 0
  for b = 0, 2 ^ C.L + C.s - 1 do
    seen = seen + redis.call('HLEN', p .. 'S' .. string.format('%d', b))
  end
  same('seen', seen, C.n)
  if C.done == 1 and not (total == 0 or (budget_spent(C) and total == fresh)) then
    bad('marked done with ' .. total .. ' URLs unfinished')
  elseif C.done == 0 and total == 0 and C.finished > 0 then
    bad('nothing unfinished, but not marked done')
  end
  budget_problems(p, C.n, bad)
  return problems
end

redis.register_function('tc_hello_{V}', hello)
redis.register_function('tc_sync_{V}', sync)
redis.register_function('tc_renew_{V}', renew)
redis.register_function('tc_bye_{V}', bye)
redis.register_function('tc_turn_{V}', turn)
redis.register_function{function_name = 'tc_status_{V}', callback = status,
  flags = {'no-writes'}}
redis.register_function{function_name = 'tc_check_{V}', callback = check,
  flags = {'no-writes'}}
