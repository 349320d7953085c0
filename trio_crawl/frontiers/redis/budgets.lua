-- host budgets -------------------------------------------------------------
-- max_pages_per_host and max_hosts, counted inside Redis (``budgets.py`` has
-- the rules; ``lua.py`` splices this file into ``functions.lua`` where it says
-- ``@budgets``, after the seen set). Every count moves in the call that adds
-- the URL to the seen set, so the counts and the seen set never disagree,
-- whichever worker admits, whenever one is killed.
-- ``b``: hash pph (max_pages_per_host; 0: none), mh (max_hosts; 0: none),
-- hosts (hosts counted). ``hb``: hash host -> URLs of it admitted.

-- The crawl's budgets, read once per call (false: the crawl has none).
local function budget_of(C)
  local B = C.budget
  if B == nil then
    local v = redis.call('HMGET', C.p .. 'b', 'pph', 'mh', 'hosts')
    local pph, mh = tonumber(v[1]) or 0, tonumber(v[2]) or 0
    if pph == 0 and mh == 0 then
      B = false
    else
      B = {pph = pph, mh = mh, hosts = tonumber(v[3]) or 0, pages = {}, force = false}
    end
    C.budget = B
  end
  return B
end

-- ``hello`` creating the crawl: the budgets from its settings (JSON); the
-- start URLs it admits next are counted whatever the budgets (``force``).
local function budget_create(C, cfg)
  local s = cjson.decode(cfg)
  local pph, mh = s.max_pages_per_host, s.max_hosts
  if type(pph) ~= 'number' then pph = 0 end
  if type(mh) ~= 'number' then mh = 0 end
  if pph == 0 and mh == 0 then
    C.budget = false
    return
  end
  redis.call('HSET', C.p .. 'b', 'pph', pph, 'mh', mh, 'hosts', 0)
  C.budget = {pph = pph, mh = mh, hosts = 0, pages = {}, force = true}
end

-- URLs of ``hostname`` counted (false: the host has none yet).
local function budget_pages(C, B, hostname)
  local pages = B.pages[hostname]
  if pages == nil then
    pages = tonumber(redis.call('HGET', C.p .. 'hb', hostname)) or false
    B.pages[hostname] = pages
  end
  return pages
end

local function budget_count(C, B, hostname, pages)
  if not pages then
    B.hosts = B.hosts + 1
    redis.call('HINCRBY', C.p .. 'b', 'hosts', 1)
    pages = 0
  end
  B.pages[hostname] = pages + 1
  redis.call('HINCRBY', C.p .. 'hb', hostname, 1)
end

-- HostBudget.fits: one more URL of a host with ``pages`` counted (false: a
-- host not counted yet) among ``B.hosts`` hosts.
local function budget_fits(B, pages)
  if not pages then return B.mh == 0 or B.hosts < B.mh end
  return B.pph == 0 or pages < B.pph
end

-- ``seen_add`` under the budgets: true if URL ``d`` (found at ``depth``) is
-- new and admitted (counted), its depth in the seen set if it is known, nil
-- if it is new and over budget: refused and not remembered, as in memory (it
-- stays refused: counts only grow).
local function seen_admit(C, d, hostname, depth)
  local B = budget_of(C)
  if not B then return seen_add(C, d, depth) end
  -- The count first (read once per call): a URL that fits needs no more
  -- than ``seen_add``; only one over budget is looked up (known or new).
  if not B.force and not budget_fits(B, budget_pages(C, B, hostname)) then
    local at = seen_depth(C, d)
    if at then return at end
    C.over_budget = (C.over_budget or 0) + 1
    return nil
  end
  local new = seen_add(C, d, depth)
  if new ~= true then return new end
  budget_count(C, B, hostname, budget_pages(C, B, hostname))
  return true
end

-- ``fits(digest, host)``, read-only: what a redirect's target is now: 2 if
-- the crawl knows it (in the seen set), 1 if it is new and fits the budgets
-- (or the crawl has none), 0 if they refuse it. A worker asks at once, so
-- that its redirect says SEEN or BUDGET as the memory frontier's does; the
-- admission itself still goes with the page's finish, which decides (and
-- counts) for good. The seen set is asked first: a known target is never
-- refused, and a new one costs the budgets' reads only in a crawl with them.
local function target_now(keys, args)
  local p = keys[1]
  if not exists(p) then return redis.error_reply(GONE) end
  local C = open(p)
  if redis.call('HEXISTS', bucket_key(C, h32(args[1])), args[1]) == 1 then return 2 end
  local B = budget_of(C)
  if not B or budget_fits(B, budget_pages(C, B, args[2])) then return 1 end
  return 0
end
redis.register_function{function_name = 'tc_fits_{V}', callback = target_now,
  flags = {'no-writes'}}

-- For ``status``: the hosts counted (``bhosts``), in a crawl with budgets.
local function budget_status(p, out)
  local hosts = redis.call('HGET', p .. 'b', 'hosts')
  if hosts then
    out[#out + 1] = 'bhosts'
    out[#out + 1] = hosts
  end
end

-- For ``check``: every URL of the seen set counted by its host, once.
local function budget_problems(p, seen, bad)
  local v = redis.call('HMGET', p .. 'b', 'pph', 'mh', 'hosts')
  if (tonumber(v[1]) or 0) == 0 and (tonumber(v[2]) or 0) == 0 then return end
  local counts = redis.call('HVALS', p .. 'hb')
  local total = 0
  for _, n in ipairs(counts) do total = total + tonumber(n) end
  if total ~= seen then
    bad('host budgets: counted ' .. total .. ' URLs, seen ' .. seen)
  end
  if #counts ~= (tonumber(v[3]) or 0) then
    bad('host budgets: ' .. #counts .. ' hosts counted, stored ' .. tostring(v[3]))
  end
end
