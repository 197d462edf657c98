-- --------------------------------------------------------------------------
-- Leases and outcomes
-- --------------------------------------------------------------------------

local OUT = {} -- outcomes for the calling session, in order
local PUB = {} -- other sessions' outcomes, sent on their channels

-- Tell session `sid` an outcome: its inbox, which its heartbeat fetches,
-- and the reply when it is the caller, else a message on its channel that
-- carries the outcome itself (a message lost costs latency: the inbox has
-- it too).
local function outcome(sid, entry)
  rc('RPUSH', P .. 'in:' .. sid, entry)
  if sid == SID then
    OUT[#OUT + 1] = entry
  else
    local list = PUB[sid]
    if list == nil then
      list = {}
      PUB[sid] = list
    end
    list[#list + 1] = entry
  end
end

-- The audit log (CQ_FLEET_AUDIT), for tests and operators: "G <id>
-- <fence> <n>" and per item "<name> <held> <devices|-> <free> <withheld>"
-- for a grant, where free is what the resource had free before it (for a
-- device pool -1) and withheld what it withheld for claimants older than
-- the grantee (for a device pool the devices they reserved, or -); "r
-- <id>" for a release; "p <id> <name> <amount> <device|-1>" for a part
-- given back early; "e <session>" for a session ended.
local function audit(entry)
  if AUDIT then rc('RPUSH', P .. 'audit', entry) end
end

-- Take what a covered request of arrival `seq` asks. Returns per item
-- {held, devices, lone}, and with the audit log on, what the log says of
-- each item's decision (see audit()).
-- twin: src/queue.c take_units()
local function take(items, seq)
  local held, why = {}, {}
  for i, it in ipairs(items) do
    local r = res(it.name)
    if r.k == DEVICES then
      local d = devs(r)
      local ex = dev_excluded(r, d, seq)
      if AUDIT then
        local rsv = {}
        for x, _ in pairs(ex) do rsv[#rsv + 1] = x end
        table.sort(rsv)
        why[i] = '-1 ' .. (#rsv > 0 and table.concat(rsv, ',') or '-')
      end
      local where = dev_place(r, d, it.m, it.a, ex)
      local each = it.a
      if it.m == 'w' then each = MILLI end
      for _, x in ipairs(where) do
        dev_use(r, d, x, each)
        if it.m == 'w' then d.w[x] = 1 end
        d.g[x] = d.g[x] + 1
      end
      r.gr = r.gr + 1
      held[i] = {each * #where, where}
    else
      if AUDIT then
        local c = claimant(r)
        local wo = 0
        if c ~= nil and c.seq < seq then wo = min(bfree(r), need_of(r, c.m, c.a)) end
        why[i] = fmt(bfree(r)) .. ' ' .. fmt(wo)
      end
      local nd = need_of(r, it.m, it.a)
      local lone = is_lone(r, it.a)
      if lone then r.lo = 1 end
      r.used = r.used + nd
      if r.used > r.peak then r.peak = r.used end
      r.gr = r.gr + 1
      touch(r)
      held[i] = {nd, nil, lone}
    end
    r.nh = r.nh + 1
  end
  return held, why
end

-- Record a lease of session sid; returns the outcome entry, which gives
-- per item "held" or "held:d,d". A lease item's mode is the request's, or
-- 'l' for a lone grant of a budget. `why` is take()'s account of the
-- decision, for the audit log.
-- twin: src/queue.c hold_units()
local function hold(sid, id, items, held, limit, why)
  local fence = fmt(call('HINCRBY', P .. 'meta', 'fence', '1'))
  local rec, got = {}, {}
  for i, it in ipairs(items) do
    local h = held[i]
    local amount, devs_text = fmt(h[1]), '-'
    if h[2] ~= nil then
      devs_text = table.concat(h[2], ',')
      got[i] = amount .. ':' .. devs_text
    else
      got[i] = amount
    end
    local m = it.m
    if h[3] then m = 'l' end
    rec[i] = m .. ' ' .. it.name .. ' ' .. fmt(it.uid) .. ' ' .. amount .. ' ' ..
      devs_text
  end
  rc('HSET', P .. 'L:' .. sid, id, fence .. ' ' .. fmt(limit) .. ' 0 ' ..
    fmt(#items) .. ' ' .. table.concat(rec, ' '))
  if AUDIT then
    local a = {}
    for i, it in ipairs(items) do
      local dv = '-'
      if held[i][2] ~= nil then dv = table.concat(held[i][2], ',') end
      a[i] = it.name .. ' ' .. fmt(held[i][1]) .. ' ' .. dv .. ' ' .. why[i]
    end
    audit('G ' .. id .. ' ' .. fence .. ' ' .. fmt(#items) ..
      (#items > 0 and ' ' or '') .. table.concat(a, ' '))
  end
  return 'g ' .. id .. ' ' .. fence .. ' ' .. table.concat(got, ' ')
end

-- A lease's record: "fence limit parts n" and per item "m name uid held
-- devices", devices "d,d" or "-". The patterns that read it: the head and
-- the items' text, then each item.
local LEASE_HEAD = '^(%S+) (%S+) (%S+) %S+ ?(.*)$'
local LEASE_ITEM = '(%S+) (%S+) (%S+) (%S+) (%S+)'
local LEASE_SKIP = '^%S+ %S+ %S+ %S+' -- the head, where only the items count

local function decode_lease(rec)
  local fence, limit, parts, rest = string.match(rec, LEASE_HEAD)
  local l = {fence = tonumber(fence), limit = tonumber(limit),
             parts = tonumber(parts), items = {}}
  local items = l.items
  for m, name, uid, held, d in string.gmatch(rest, LEASE_ITEM) do
    local it = {m = m, name = name, uid = tonumber(uid), held = tonumber(held),
                devs = {}}
    if d ~= '-' then
      for x in string.gmatch(d, '%d+') do it.devs[#it.devs + 1] = tonumber(x) end
    end
    items[#items + 1] = it
  end
  return l
end

-- Give back `amount` of lease item `it` (on devices: the devices listed,
-- or only device `one`), and mark the resource for the sweep.
-- twin: src/queue.c give_back()
local function give_back(it, amount, one)
  local r = res(it.name)
  if r == nil or r.uid ~= it.uid then return end
  if r.k == DEVICES then
    local d = devs(r)
    if it.m == 'f' then
      if amount > 0 then dev_use(r, d, it.devs[1], -amount) end
    else
      for _, x in ipairs(it.devs) do
        if one == nil or x == one then
          d.w[x] = 0
          dev_use(r, d, x, -MILLI)
        end
      end
    end
  else
    r.used = r.used - amount
    touch(r)
  end
  mark(r, 0)
end

-- A whole lease comes back: its units, its lone bits, its holders.
-- twin: src/queue.c cq__policy_release()
local function release_lease(l)
  for _, it in ipairs(l.items) do
    give_back(it, it.held)
    local r = res(it.name)
    if r ~= nil and r.uid == it.uid then
      if it.m == 'l' then r.lo = 0 end
      r.nh = r.nh - 1
      touch(r)
    end
  end
end

