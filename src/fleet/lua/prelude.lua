#!lua
-- The fleet pool's policy, shared by every operation's script: each
-- script is this prelude followed by the operation's own body (the
-- build joins them). It is the specification (docs/POLICY.md) ("The waiting
-- policy: FIFO with reservation", "Device pools") carried out on state
-- kept in Redis, so that every process that opens a namespace obeys the
-- same rule as one in-process pool. The in-process implementation is
-- src/queue.c and src/device.c; this file follows their structure, and a
-- differential test (tests/fleet/) holds the two to the same outcomes.
--
-- Keys. KEYS[1] is the namespace's prefix, "cq:{<namespace>}:"; every key
-- of the namespace starts with it (one hash tag, so that a Redis Cluster
-- keeps a namespace on one slot). P.."meta" holds the counters, the
-- schema version, and in field head what every call reads: "<schema>
-- <staged> <owed> <audit> <quarantine end>"; P.."r:"..name a resource; P.."d:"..name the devices of a
-- device pool (u<i> thousandths used, w<i> held whole, o<i> online, g<i>
-- grants, p<i> peak) and P.."di:"..name their ids; P.."c:"..name the
-- waiters that claim a resource and P.."b:"..name those blocked on it
-- (sorted sets by arrival, members "<waiter> <mode><amount>"),
-- P.."n:"..name the waiters that name it (scored by what they ask, to find
-- those a shrink makes unsatisfiable); P.."Q" every waiter by arrival and
-- P.."W" their records; P.."S" the sessions by expiry, P.."s:"..sid a
-- session, P.."L:"..sid its leases, P.."w:"..sid its waiters and
-- P.."in:"..sid its inbox of outcomes.
--
-- Invariants kept by every script:
-- - Amounts are integers (budget units, thousandths of a device) below
--   2^41, exact in Lua's doubles.
-- - r.used is the sum of what the leases hold; per device, u<i> likewise.
-- - nc, nb and nw count the members of c:, b: and n:.
-- - At the end of a script no waiter is covered by its blocker, unless
--   the namespace owes work (meta owed = 1): then P.."owed" holds the
--   resources still to walk, and the next script walks them first.
-- - A script checks everything before it writes, so that a refusal
--   changes nothing (scripts have no rollback).

-- Per call (set by begin(), below): the key prefix, the calling session
-- and its secret, the script's share of work, whether this is a retry, the
-- caller's host (for names without one) and the arguments.
local P, SID, SECRET, STEPS, RETRY, HOST, ARGS
local ARG0 = 5 -- the operation's own arguments start after this

local call -- redis.call, which a library may take only once it runs
local BUDGET, DEVICES, CLASS = 1, 2, 3
local MILLI = 1000
local INF = 1 / 0 -- math.huge: a library may not use globals as it loads
local LONE = 1

-- Reply statuses besides the negative error codes of cronoq.h.
local OK, WAITING, OWED, NOSESSION, NONS, UNKNOWN, GRANTED = 0, 1, 2, 3, 4,
  5, 6
local QUARANTINE = 8 -- the namespace grants nothing yet (value: ms left)
local EINVAL, EBUSY, ETIMEDOUT, ECANCELED, ECLOSED, ENEVER, ENOENT, EEXIST,
  EINUSE, ESTATE, ERANGE, EACCES = -1, -3, -4, -5, -6, -7, -8, -9, -10, -11,
  -13, -18

local steps
local function rc(...)
  steps = steps + 1
  return call(...)
end

-- An integer's text. Small ones (counts, amounts, ids) are made once and
-- kept: string.format costs more than most of what a call does with them.
local FMT = {}
local function fmt(n)
  local t = FMT[n]
  if t then return t end
  t = string.format('%d', n)
  if n >= 0 and n < 4096 then FMT[n] = t end
  return t
end

-- The number an argument's text says, the other way round: tonumber()
-- costs about as much as a Redis command, and the texts that recur
-- (amounts, counts, resource ids, the script's share) are a few. Not for
-- texts that never come back, such as fencing tokens: they would fill the
-- memo for nothing.
local NUM, NNUM = {}, 0
local function num(s)
  local n = NUM[s]
  if n then return n end
  n = tonumber(s)
  if n and NNUM < 4096 then NUM[s], NNUM = n, NNUM + 1 end
  return n
end

local NONE = {} -- an empty list that no one writes to, for every call
local function min(a, b) if a < b then return a end return b end
local function max(a, b) if a > b then return a end return b end

local NOW
local function now_ms()
  if NOW == nil then
    local t = call('TIME')
    NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return NOW
end

local SCHEMA = '2'
-- The namespace's head, as fields (see begin()): shared by the calls that
-- read the same head, so read, never written.
local META, STAGED, AUDIT
local HEADS, NHEADS = {}, 0 -- heads seen, parsed (a few: they rarely change)

local function split(s)
  local t = {}
  for x in string.gmatch(s, '%S+') do t[#t + 1] = x end
  return t
end

-- --------------------------------------------------------------------------
-- Resources, cached for the script and written back by finish()
-- --------------------------------------------------------------------------

local RES, RLIST = {}, {}
local STALE = false -- whether the per-call tables may hold a call's state

-- A resource's record, P.."r:"..name: field x holds the counters every
-- decision reads, packed (one read and no conversions: fourteen fields of
-- their own cost four times as much), in the order of RFMT below; fields
-- to, ca, wn, ws and wm hold the waiting statistics, and a device pool's
-- base and host are fields too.
local RFMT = '<dddddddddddddd' -- k uid fl n cap used peak gr nc nb nw on lo nh

local function res_record(k, uid, fl, n, cap, used, peak, gr, nc, nb, nw, on,
                          lo, nh)
  return struct.pack(RFMT, k, uid, fl, n, cap, used, peak, gr, nc, nb, nw, on,
    lo, nh)
end

local function res(name)
  local r = RES[name]
  if r ~= nil then return r or nil end
  local raw = rc('HGET', P .. 'r:' .. name, 'x')
  if not raw then
    RES[name] = false
    return nil
  end
  local k, uid, fl, n, cap, used, peak, gr, nc, nb, nw, on, lo, nh =
    struct.unpack(RFMT, raw)
  -- One constructor: a table grown field by field is rehashed on the way.
  r = {name = name, raw = raw, k = k, uid = uid, fl = fl, n = n, cap = cap,
       used = used, peak = peak, gr = gr, nc = nc, nb = nb, nw = nw, on = on,
       lo = lo, nh = nh, cver = 0, dirty = false}
  RES[name] = r
  return r
end

-- A resource as a caller names it: a name without a host is this host's
-- device pool when there is one ("gpu" is "gpu@<host>").
local function lookup(name)
  if not string.find(name, '@', 1, true) then
    local r = res(name .. '@' .. HOST)
    if r ~= nil and r.k == DEVICES then return r end
  end
  return res(name)
end

-- Put x on `list` (of what finish() writes back) once.
local function listed(x, list)
  if not x.dirty then
    x.dirty = true
    list[#list + 1] = x
  end
end

local function touch(r) listed(r, RLIST) end

-- A counter that is only ever added to (timeouts, cancellations, waits).
local function bump(r, field, by)
  if r.inc == nil then r.inc = {} end
  r.inc[field] = (r.inc[field] or 0) + by
  touch(r)
end

-- Whether a request for `a` units of r is a lone request: larger than the
-- capacity, on a budget with the lone-request allowance.
local function is_lone(r, a)
  return r.k == BUDGET and r.fl % 2 == LONE and a > r.cap
end

-- What an item of mode m and amount a takes of r: a class item one
-- worker; a lone request the whole capacity, and at least one unit, so
-- that on a lone budget of capacity 0 it waits instead of holding nothing.
local function need_of(r, m, a)
  if is_lone(r, a) then return max(r.cap, 1) end
  return a
end

-- Free units: nothing while a lone grant holds the budget (whatever the
-- capacity does meanwhile, whatever it gives back early), else capacity
-- less what is held, never below 0.
local function bfree(r)
  if r.lo > 0 then return 0 end
  local f = r.cap - r.used
  if f < 0 then return 0 end
  return f
end

-- --------------------------------------------------------------------------
-- Device pools
-- --------------------------------------------------------------------------

local DEVS = {}

local function devs(r)
  local d = DEVS[r.name]
  if d ~= nil then return d end
  d = {u = {}, w = {}, o = {}, g = {}, p = {}, changed = {}, ver = 0}
  local flat = rc('HGETALL', P .. 'd:' .. r.name)
  for i = 1, #flat, 2 do
    local f = flat[i]
    d[string.sub(f, 1, 1)][tonumber(string.sub(f, 2))] = tonumber(flat[i + 1])
  end
  DEVS[r.name] = d
  return d
end

local function dev_free(d, i) return MILLI - d.u[i] end

-- Change device i's use by delta thousandths, keeping its peak and the
-- pool's totals.
local function dev_use(r, d, i, delta)
  d.u[i] = d.u[i] + delta
  if d.u[i] > d.p[i] then d.p[i] = d.u[i] end
  d.changed[i] = true
  d.ver = d.ver + 1
  r.used = r.used + delta
  if r.used > r.peak then r.peak = r.used end
  touch(r)
end

-- The online devices, most free first, ties to the lowest index: the order
-- in which claimants reserve.
local function dev_sorted(r, d)
  if d.sorted ~= nil and d.sver == d.ver then return d.sorted end
  local s = {}
  for i = 0, r.n - 1 do
    if d.o[i] == 1 then s[#s + 1] = i end
  end
  table.sort(s, function(a, b)
    local fa, fb = d.u[a], d.u[b]
    if fa ~= fb then return fa < fb end
    return a < b
  end)
  d.sorted, d.sver = s, d.ver
  return s
end

-- Members of the claims and blocked sets: "<waiter> <mode><amount>".
local function member(wid, it) return wid .. ' ' .. it.m .. fmt(it.a) end
local function parse_member(s)
  local wid, m, a = string.match(s, '^(%S+) (%a)(%d+)$')
  return wid, m, tonumber(a)
end

-- The first claimants of r in arrival order, {seq, m, a}; at most `upto`.
-- The list is the caller's to read, not to change.
local function claim_chain(r, upto)
  if r.chain ~= nil and r.chain_ver == r.cver and r.chain_upto >= upto then
    return r.chain
  end
  if r.nc == 0 then return NONE end
  local chain = {}
  if upto > 0 then
    local v = rc('ZRANGE', P .. 'c:' .. r.name, 0, upto - 1, 'WITHSCORES')
    for j = 1, #v, 2 do
      local wid, m, a = parse_member(v[j])
      chain[#chain + 1] = {wid = wid, seq = tonumber(v[j + 1]), m = m, a = a}
    end
  end
  r.chain, r.chain_ver, r.chain_upto = chain, r.cver, upto
  return chain
end

-- How many of the sorted devices claimants older than `seq` reserve:
-- every claimant, in arrival order, reserves from what the older ones
-- left the device with the most free capacity for a fraction and the n
-- devices with the most free capacity for n whole devices. Since the
-- order of the devices does not change during one question, that is a
-- prefix of dev_sorted().
local function dev_reserved_count(r, d, seq)
  local s = dev_sorted(r, d)
  local chain = claim_chain(r, #s)
  local k = 0
  for _, c in ipairs(chain) do
    if c.seq >= seq or k >= #s then break end
    if c.m == 'w' then k = k + c.a else k = k + 1 end
  end
  return min(k, #s), s
end

-- The devices reserved for claimants older than `seq`, as a set.
local function dev_excluded(r, d, seq)
  local k, s = dev_reserved_count(r, d, seq)
  local ex = {}
  for j = 1, k do ex[s[j]] = true end
  return ex
end

-- Where an item would go on the devices not in `ex`: a fraction best fit
-- (the least free capacity that fits, ties to the lowest index), n whole
-- devices the lowest-index entirely free ones. nil when it does not fit.
local function dev_place(r, d, m, a, ex)
  if m == 'f' then
    local best, bf
    for i = 0, r.n - 1 do
      if d.o[i] == 1 and not ex[i] then
        local f = dev_free(d, i)
        if f >= a and (best == nil or f < bf) then best, bf = i, f end
      end
    end
    if best == nil then return nil end
    return {best}
  end
  local out = {}
  for i = 0, r.n - 1 do
    if #out >= a then break end
    if d.o[i] == 1 and not ex[i] and d.u[i] == 0 then out[#out + 1] = i end
  end
  if #out == a and a > 0 then return out end
  return nil
end

local function dev_any_free(r, d)
  for i = 0, r.n - 1 do
    if d.o[i] == 1 and d.u[i] < MILLI then return true end
  end
  return false
end

-- The waiters this script read (by id; false: none) and changed, written
-- back by finish() (see waiting()).
local WAIT, WLIST = {}, {}

-- --------------------------------------------------------------------------
-- Claimants, offers, coverage
-- --------------------------------------------------------------------------

-- The claimant of r: the oldest waiter with a claim on it, or nil.
local function claimant(r)
  local chain = claim_chain(r, 1)
  return chain[1]
end

-- Units of budget or class r offered to a request of arrival `seq`:
-- everything free, less what the claimant withholds when it is older.
local function offer(r, seq)
  local f = bfree(r)
  local c = claimant(r)
  if c ~= nil and c.seq < seq then f = f - min(f, need_of(r, c.m, c.a)) end
  return f
end

local function covered(seq, it)
  -- A quarantined namespace grants nothing: every arrival waits.
  if META[5] ~= '0' then return false end
  local r = res(it.name)
  if r.k == DEVICES then
    local d = devs(r)
    return dev_place(r, d, it.m, it.a, dev_excluded(r, d, seq)) ~= nil
  end
  return need_of(r, it.m, it.a) <= offer(r, seq)
end

-- --------------------------------------------------------------------------
-- Dirty resources: where waiters may have become covered
-- --------------------------------------------------------------------------

-- name -> the arrival after which its blocked waiters must be walked.
local DIRTY, NDIRTY = {}, 0

local function mark(r, after)
  if r.nb == 0 then return end
  local cur = DIRTY[r.name]
  if cur == nil then
    DIRTY[r.name] = after
    NDIRTY = NDIRTY + 1
  elseif after < cur then
    DIRTY[r.name] = after
  end
end

-- --------------------------------------------------------------------------
-- Validation and messages (the same words as the in-process pool)
-- --------------------------------------------------------------------------

local function milli_text(v)
  local whole, frac = math.floor(v / MILLI), v % MILLI
  if frac == 0 then return fmt(whole) end
  local digits = 3
  while frac % 10 == 0 do
    frac = frac / 10
    digits = digits - 1
  end
  return fmt(whole) .. '.' .. string.format('%0' .. digits .. 'd', frac)
end

local function item_text(it)
  if it.m == 'f' then return it.name .. ':' .. milli_text(it.a) end
  return it.name .. ':' .. fmt(it.a)
end

-- 0, or an error code and its message, for one item as the namespace is
-- now.
local function validate_item(it)
  local r = res(it.name)
  if r == nil or r.uid ~= it.uid then
    return ENOENT, 'request names ' .. it.name .. ', which was removed'
  end
  if r.k == DEVICES then
    if it.m == 'w' and it.a > r.on then
      return ENEVER, 'request asks ' .. fmt(it.a) .. ' devices of ' ..
        it.name .. ' but it has ' .. fmt(r.on)
    end
    if it.m == 'f' and r.on == 0 then
      return ENEVER, 'request asks ' .. item_text(it) .. ' but ' .. it.name ..
        ' has no device'
    end
    return 0
  end
  if it.a > r.cap and r.fl % 2 ~= LONE then
    if r.k == CLASS then
      return ENEVER, 'request is of class ' .. it.name ..
        ', whose max_workers is ' .. fmt(r.cap)
    end
    return ENEVER, 'request asks ' .. it.name .. ':' .. fmt(it.a) ..
      ' but its capacity is ' .. fmt(r.cap)
  end
  return 0
end

local function validate(items)
  for _, it in ipairs(items) do
    local code, msg = validate_item(it)
    if code ~= 0 then return code, msg end
  end
  return 0
end

-- Items from the arguments at `at`: a count, then (mode, name, uid,
-- amount) per item, in resource order.
local function parse_items(at)
  local n = num(ARGS[at])
  local items = {}
  for i = 1, n do
    local b = at + (i - 1) * 4
    items[i] = {m = ARGS[b + 1], name = ARGS[b + 2], uid = num(ARGS[b + 3]),
                a = num(ARGS[b + 4])}
  end
  return items, at + 1 + n * 4
end

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

-- --------------------------------------------------------------------------
-- Waiting: queueing, claims, granting, leaving, the sweep
-- --------------------------------------------------------------------------

-- Everything below is defined on first use, by waiting(): an operation
-- that meets no waiter (an uncontended acquire or release) never pays for
-- creating these functions, which every call of a script would otherwise
-- do before its first line of work.
local W
local WMAX = {} -- per call: the longest wait of each resource, once read

local function waiting()
  if W ~= nil then return W end
  -- A waiter's record: "seq sid t claims blocker limit n" and n items
  -- "m name uid a"; claims is a bit mask over the items (1-based bits).
  local function decode_waiter(wid, rec)
    local f = split(rec)
    local w = {wid = wid, seq = tonumber(f[1]), sid = f[2], t = tonumber(f[3]),
               claims = {}, blocker = tonumber(f[5]), limit = tonumber(f[6]),
               items = {}, dirty = false}
    local mask = tonumber(f[4])
    local n = tonumber(f[7])
    for i = 1, n do
      local b = 7 + (i - 1) * 4
      w.items[i] = {m = f[b + 1], name = f[b + 2], uid = tonumber(f[b + 3]),
                    a = tonumber(f[b + 4])}
      if math.floor(mask / 2 ^ (i - 1)) % 2 == 1 then w.claims[i] = true end
    end
    return w
  end

  local function encode_items(items)
    local t = {}
    for i, it in ipairs(items) do
      t[i] = it.m .. ' ' .. it.name .. ' ' .. fmt(it.uid) .. ' ' .. fmt(it.a)
    end
    return table.concat(t, ' ')
  end

  local function encode_waiter(w)
    local mask = 0
    for i, _ in pairs(w.claims) do mask = mask + 2 ^ (i - 1) end
    return fmt(w.seq) .. ' ' .. w.sid .. ' ' .. fmt(w.t) .. ' ' .. fmt(mask) ..
      ' ' .. fmt(w.blocker) .. ' ' .. fmt(w.limit) .. ' ' .. fmt(#w.items) ..
      ' ' .. encode_items(w.items)
  end

  local function waiter(wid)
    local w = WAIT[wid]
    if w ~= nil then return w or nil end
    local rec = rc('HGET', P .. 'W', wid)
    if not rec then
      WAIT[wid] = false
      return nil
    end
    w = decode_waiter(wid, rec)
    WAIT[wid] = w
    return w
  end

  local function wtouch(w) listed(w, WLIST) end

  -- Record that waiter w claims item i. A new claimant may withhold less
  -- than the one before, so the waiters blocked there are walked again.
  local function claim(w, i)
    if w.claims[i] then return end
    local it = w.items[i]
    local r = res(it.name)
    local c = claimant(r)
    rc('ZADD', P .. 'c:' .. r.name, w.seq, member(w.wid, it))
    r.nc = r.nc + 1
    r.cver = r.cver + 1
    touch(r)
    w.claims[i] = true
    wtouch(w)
    if c == nil or w.seq < c.seq then mark(r, w.seq) end
  end

  -- Drop every claim of w. Where it was the claimant what it withheld is
  -- open again; on a device pool every claimant's going moves the
  -- reservations of the younger ones.
  local function drop_claims(w)
    for i = 1, #w.items do
      if w.claims[i] then
        local it = w.items[i]
        local r = res(it.name)
        local c = claimant(r)
        rc('ZREM', P .. 'c:' .. r.name, member(w.wid, it))
        r.nc = r.nc - 1
        r.cver = r.cver + 1
        touch(r)
        w.claims[i] = nil
        if r.k == DEVICES or (c ~= nil and c.wid == w.wid) then
          mark(r, w.seq)
        end
      end
    end
  end

  local function block_on(w, i)
    local r = res(w.items[i].name)
    rc('ZADD', P .. 'b:' .. r.name, w.seq, member(w.wid, w.items[i]))
    r.nb = r.nb + 1
    touch(r)
    w.blocker = i
    wtouch(w)
  end

  local function unblock(w)
    local r = res(w.items[w.blocker].name)
    rc('ZREM', P .. 'b:' .. r.name, member(w.wid, w.items[w.blocker]))
    r.nb = r.nb - 1
    touch(r)
  end

  local function encode_lease(l)
    local t = {}
    for i, it in ipairs(l.items) do
      local d = '-'
      if #it.devs > 0 then d = table.concat(it.devs, ',') end
      t[i] = it.m .. ' ' .. it.name .. ' ' .. fmt(it.uid) .. ' ' ..
        fmt(it.held) .. ' ' .. d
    end
    return fmt(l.fence) .. ' ' .. fmt(l.limit) .. ' ' .. fmt(l.parts) .. ' ' ..
      fmt(#l.items) .. ' ' .. table.concat(t, ' ')
  end

  -- The outcome entry of an existing lease, for a retried acquire.
  local function lease_entry(id, l)
    local t = {}
    for i, it in ipairs(l.items) do
      if it.m == 'f' or it.m == 'w' then
        t[i] = fmt(it.held) .. ':' .. table.concat(it.devs, ',')
      else
        t[i] = fmt(it.held)
      end
    end
    return 'g ' .. id .. ' ' .. fmt(l.fence) .. ' ' .. table.concat(t, ' ')
  end

  -- Claim what w lacks (only the first lack with staged claims); the index
  -- of the first item it lacks, or nil when it is covered everywhere.
  local function claim_lacks(w)
    local first
    for i = 1, #w.items do
      if not covered(w.seq, w.items[i]) then
        if first == nil then
          first = i
        elseif STAGED then
          break
        end
        claim(w, i)
      end
    end
    return first
  end

  -- Take w out of every waiting structure, claims included.
  local function dequeue(w)
    drop_claims(w)
    unblock(w)
    for _, it in ipairs(w.items) do
      local r = res(it.name)
      rc('ZREM', P .. 'n:' .. it.name, w.wid)
      r.nw = r.nw - 1
      touch(r)
    end
    rc('ZREM', P .. 'Q', w.wid)
    rc('HDEL', P .. 'W', w.wid)
    rc('SREM', P .. 'w:' .. w.sid, w.wid)
    WAIT[w.wid] = false
  end

  -- The waiting-time histogram: exact below 8 ms, then eight buckets per
  -- power of two (as the in-process pool keeps it).
  local function hist_index(v)
    if v < 8 then
      if v < 0 then return 0 end
      return v
    end
    local e = 0
    local x = v
    while x >= 2 do
      x = x / 2
      e = e + 1
    end
    if e > 44 then return 8 + 8 * 42 - 1 end
    return 8 + (e - 3) * 8 + math.floor(v / 2 ^ (e - 3)) % 8
  end

  local function wait_add(r, v)
    if v < 0 then v = 0 end
    bump(r, 'wn', 1)
    bump(r, 'ws', v)
    rc('HINCRBY', P .. 'h:' .. r.name, fmt(hist_index(v)), 1)
    local m = WMAX[r.name]
    if m == nil then m = tonumber(rc('HGET', P .. 'r:' .. r.name, 'wm')) or 0 end
    if v > m then
      m = v
      rc('HSET', P .. 'r:' .. r.name, 'wm', fmt(v))
    end
    WMAX[r.name] = m
  end

  local function grant_waiter(w)
    local held, why = take(w.items, w.seq)
    dequeue(w)
    local waited = now_ms() - w.t
    for _, it in ipairs(w.items) do wait_add(res(it.name), waited) end
    rc('HINCRBY', P .. 'meta', 'waited', 1)
    outcome(w.sid, hold(w.sid, w.wid, w.items, held, w.limit, why))
  end

  -- A waiter leaves with `status` (not 0): timed out, cancelled, closed or
  -- never satisfiable.
  local function leave(w, status, msg)
    for _, it in ipairs(w.items) do
      if status == ETIMEDOUT then
        bump(res(it.name), 'to', 1)
      elseif status == ECANCELED then
        bump(res(it.name), 'ca', 1)
      end
    end
    dequeue(w)
    outcome(w.sid, 'x ' .. w.wid .. ' ' .. fmt(status) .. ' ' .. (msg or ''))
  end

  local function examine(w)
    local first = claim_lacks(w)
    if first == nil then
      grant_waiter(w)
    elseif first ~= w.blocker then
      unblock(w)
      block_on(w, first)
    end
  end

  -- Queue a new arrival that did not fit: it claims what it lacks and
  -- blocks on the first.
  local function enqueue(id, items, limit)
    local seq = call('HINCRBY', P .. 'meta', 'seq', 1)
    local w = {wid = id, seq = seq, sid = SID, t = now_ms(), claims = {},
               blocker = 1, limit = limit, items = items, dirty = true}
    WAIT[id] = w
    WLIST[#WLIST + 1] = w
    rc('ZADD', P .. 'Q', seq, id)
    rc('SADD', P .. 'w:' .. SID, id)
    for _, it in ipairs(items) do
      local r = res(it.name)
      local score = it.a
      if it.m == 'f' then score = 0 end
      rc('ZADD', P .. 'n:' .. it.name, score, id)
      r.nw = r.nw + 1
      touch(r)
    end
    local first = claim_lacks(w)
    block_on(w, first or 1)
    return w
  end

  -- What next_candidate() returns when the script has done its share of
  -- work: the walk goes on from where it stopped, in the next script.
  local STOP = {}

  -- The oldest waiter blocked on dirty r, after its walk position, that r
  -- covers now. Waiters passed over are not covered, and stay so for the
  -- rest of the sweep unless r is marked again.
  local function next_candidate(name)
    local r = res(name)
    if r == nil or r.nb == 0 then return nil end
    local d
    if r.k == DEVICES then
      d = devs(r)
      if not dev_any_free(r, d) then return nil end
    elseif bfree(r) == 0 then
      return nil
    end
    local c = claimant(r)
    local cseq = INF
    if c ~= nil then cseq = c.seq end
    local chunk = 16
    while true do
      local v = rc('ZRANGEBYSCORE', P .. 'b:' .. name, '(' .. fmt(DIRTY[name]),
        '+inf', 'WITHSCORES', 'LIMIT', 0, chunk)
      if #v == 0 then return nil end
      for j = 1, #v, 2 do
        local wid, m, a = parse_member(v[j])
        local seq = tonumber(v[j + 1])
        if r.k == DEVICES then
          if dev_place(r, d, m, a, dev_excluded(r, d, seq)) ~= nil then
            return waiter(wid)
          end
          -- Reservations only grow with arrival: once the older claimants
          -- reserve every device with room, no younger waiter fits.
          local k, s = dev_reserved_count(r, d, seq + 0.5)
          local room = false
          for x = k + 1, #s do
            if d.u[s[x]] < MILLI then room = true end
          end
          if not room then return nil end
        else
          local o = offer(r, seq)
          if need_of(r, m, a) <= o then return waiter(wid) end
          -- Past the claimant everyone is offered the same open units.
          if o == 0 and cseq < seq then return nil end
        end
        DIRTY[name] = seq
      end
      if #v < 2 * chunk then return nil end
      if steps >= STEPS then return STOP end
      chunk = chunk * 4
    end
  end

  -- Examine waiters that may now fit, oldest first, until none can or the
  -- script has done its share (then the rest is owed: see finish()). Each
  -- call examines at least one waiter or walks at least one chunk, so that
  -- scripts that each do a little always finish the work between them.
  local function sweep_all()
    local examined = false
    while NDIRTY > 0 do
      if examined and steps >= STEPS then return false end
      local best
      local stopped = false
      for name, _ in pairs(DIRTY) do
        local w = next_candidate(name)
        if w == STOP then
          stopped = true
        elseif w == nil then
          DIRTY[name] = nil
          NDIRTY = NDIRTY - 1
        elseif best == nil or w.seq < best.seq then
          best = w
        end
      end
      -- A walk stopped early may hide an older candidate than best.
      if stopped then return false end
      if best == nil then return true end
      -- Nothing older than best can be covered now: move every walk past
      -- it.
      for name, at in pairs(DIRTY) do
        if at < best.seq then DIRTY[name] = best.seq end
      end
      examine(best)
      examined = true
    end
    return true
  end

  -- Every waiter naming r that can never fit now (a capacity shrank, a
  -- device went offline) leaves with CQ_ENEVER, oldest first.
  local function fail_unsatisfiable(r)
    local lo
    if r.k == DEVICES then
      if r.on == 0 then lo = '-inf' else lo = '(' .. fmt(r.on) end
    elseif r.fl % 2 == LONE then
      return
    else
      lo = '(' .. fmt(r.cap)
    end
    local ids = rc('ZRANGEBYSCORE', P .. 'n:' .. r.name, lo, '+inf')
    local list = {}
    for _, wid in ipairs(ids) do list[#list + 1] = waiter(wid) end
    table.sort(list, function(a, b) return a.seq < b.seq end)
    for _, w in ipairs(list) do
      local _, msg = validate(w.items)
      leave(w, ENEVER, msg)
    end
  end

  -- Continue the work a script before this one left. True when none is
  -- left.
  local function settle()
    if META[3] ~= '1' then return true end
    local flat = rc('HGETALL', P .. 'owed')
    for i = 1, #flat, 2 do
      local name, at = flat[i], tonumber(flat[i + 1])
      local r = res(name)
      if r ~= nil then
        DIRTY[name] = at
        NDIRTY = NDIRTY + 1
      end
    end
    return sweep_all()
  end

  -- End session sid: its waiters leave without an outcome (nobody is left
  -- to hear it), all of them first, so that no sweep can grant one; then
  -- its leases come back, as many as the script's share allows (one at
  -- least); then its keys go. True when it is all done; else the session
  -- stays, expired, and the next heartbeat's reaping goes on. The caller
  -- sweeps.
  local function end_session(sid)
    for _, wid in ipairs(rc('SMEMBERS', P .. 'w:' .. sid)) do
      local w = waiter(wid)
      if w ~= nil then dequeue(w) end
    end
    local leases = rc('HGETALL', P .. 'L:' .. sid)
    for i = 2, #leases, 2 do
      if i > 2 and steps >= STEPS then
        rc('ZADD', P .. 'S', 0, sid)
        return false
      end
      release_lease(decode_lease(leases[i]))
      rc('HDEL', P .. 'L:' .. sid, leases[i - 1])
      audit('r ' .. leases[i - 1])
    end
    rc('DEL', P .. 's:' .. sid, P .. 'L:' .. sid, P .. 'w:' .. sid,
      P .. 'in:' .. sid)
    rc('ZREM', P .. 'S', sid)
    audit('e ' .. sid)
    return true
  end

  W = {waiter = waiter, encode_waiter = encode_waiter, leave = leave,
       enqueue = enqueue, sweep = sweep_all, settle = settle,
       fail_unsatisfiable = fail_unsatisfiable, end_session = end_session,
       lease_entry = lease_entry, encode_lease = encode_lease}
  return W
end

-- The sweep, when something may have let a waiter fit.
local function sweep()
  if NDIRTY == 0 then return true end
  return waiting().sweep()
end

-- Continue the work a script before this one left; true when none is
-- left.
local function settle()
  if META[3] ~= '1' then return true end
  return waiting().settle()
end

-- --------------------------------------------------------------------------
-- The end of every script
-- --------------------------------------------------------------------------

local function write_back()
  for _, r in ipairs(RLIST) do
    local raw = res_record(r.k, r.uid, r.fl, r.n, r.cap, r.used, r.peak, r.gr,
      r.nc, r.nb, r.nw, r.on, r.lo, r.nh)
    if raw ~= r.raw then rc('HSET', P .. 'r:' .. r.name, 'x', raw) end
    if r.inc ~= nil then
      for f, by in pairs(r.inc) do rc('HINCRBY', P .. 'r:' .. r.name, f, by) end
    end
    local d = DEVS[r.name]
    if d ~= nil then
      local args = {}
      for i, _ in pairs(d.changed) do
        args[#args + 1] = 'u' .. i
        args[#args + 1] = fmt(d.u[i])
        args[#args + 1] = 'w' .. i
        args[#args + 1] = fmt(d.w[i])
        args[#args + 1] = 'o' .. i
        args[#args + 1] = fmt(d.o[i])
        args[#args + 1] = 'g' .. i
        args[#args + 1] = fmt(d.g[i])
        args[#args + 1] = 'p' .. i
        args[#args + 1] = fmt(d.p[i])
      end
      if #args > 0 then rc('HSET', P .. 'd:' .. r.name, unpack(args)) end
    end
  end
  for _, w in ipairs(WLIST) do
    if WAIT[w.wid] then rc('HSET', P .. 'W', w.wid, W.encode_waiter(w)) end
  end
end

-- Write everything back, leave what the sweep did not finish owed, wake
-- the sessions that got outcomes, and build the reply: the status, the
-- operation's own values, then the caller's outcomes.
local function finish(status, ...)
  write_back()
  local owed = NDIRTY > 0
  if owed or META[3] == '1' then
    rc('DEL', P .. 'owed')
    if owed then
      local args = {}
      for name, at in pairs(DIRTY) do
        args[#args + 1] = name
        args[#args + 1] = fmt(at)
      end
      rc('HSET', P .. 'owed', unpack(args))
    end
    rc('HSET', P .. 'meta', 'head', META[1] .. ' ' .. META[2] .. ' ' ..
      (owed and '1' or '0') .. ' ' .. META[4] .. ' ' .. META[5])
  end
  -- After the writes, so a refusal here (an ACL without PUBLISH on the
  -- channel) must not fail the call that made them: the wake-up is a hint,
  -- and the outcome waits in the session's inbox for its next heartbeat.
  for sid, list in pairs(PUB) do
    redis.pcall('PUBLISH', P .. 'ch:' .. sid, table.concat(list, '\n'))
  end
  local reply = {status, owed and 1 or 0}
  local extra = {...}
  reply[3] = #extra
  for i = 1, #extra do reply[#reply + 1] = extra[i] end
  for i = 1, #OUT do reply[#reply + 1] = OUT[i] end
  return reply
end

-- The time left of the namespace's quarantine, or 0. Every namespace is
-- created quarantined for its longest TTL (open.lua), unless its creator
-- says it is new: a process of an earlier state the server lost may still
-- hold, until its own deadline, and nothing is granted before every such
-- deadline has passed. Arrivals meanwhile wait (covered() is false).
local function quarantine_left()
  local q = tonumber(META[5] or '0') or 0
  if q == 0 or q <= now_ms() then return 0 end
  return q - now_ms()
end

-- The quarantine is over: the head says so from now on (a new table: the
-- parsed heads are shared, never written), and every waiter that arrived
-- meanwhile is examined by the sweep, oldest first.
local LIFTED -- per call: whether this call lifted a quarantine

local function lift()
  LIFTED = true
  META = {META[1], META[2], META[3], META[4], '0'}
  call('HSET', P .. 'meta', 'head', table.concat(META, ' '))
  for _, name in ipairs(call('ZRANGE', P .. 'order', 0, -1)) do
    local r = res(name)
    if r ~= nil then mark(r, 0) end
  end
end

-- The checks every operation starts with: the namespace exists with this
-- schema, the work owed is done, and a quarantine that has ended is
-- lifted. Returns a reply to give at once, or nil to go on.
local function start()
  if META[1] == nil or META[1] == false then return {NONS, 0, 0} end
  if META[1] ~= SCHEMA then return {NONS, 0, 0} end
  if not settle() then return finish(OWED) end
  if META[5] ~= '0' and quarantine_left() == 0 then
    lift()
    if not sweep() then return finish(OWED) end
  end
  return nil
end

-- --------------------------------------------------------------------------
-- Sessions and their secrets
-- --------------------------------------------------------------------------

-- A session's record keeps, in field k, the SHA1 of a secret that only
-- its process knows, and every call made for the session presents the
-- secret: another client of the namespace can read a session's id and its
-- leases' ids, but cannot release, cancel, extend or end them with the
-- library's own calls. (It can still write the keys themselves: a
-- namespace is one trust domain, and teams that do not trust each other
-- get a namespace and a Redis user each.) The library's state outlives a
-- call, so the digests it made and the sessions it checked are kept: a
-- quick call makes no more reads for them than a call without secrets.
-- Scripts begin afresh every time and check in full.
local DIGEST, NDIGEST = {}, 0 -- secret -> its SHA1 (hex)
local OWNED, NOWNED = {}, 0   -- session -> the secret found in its record
local FORGED = 'the call does not carry its session\'s secret'

local function digest(secret)
  local d = DIGEST[secret]
  if d then return d end
  d = redis.sha1hex(secret)
  if NDIGEST >= 4096 then DIGEST, NDIGEST = {}, 0 end
  DIGEST[secret], NDIGEST = d, NDIGEST + 1
  return d
end

-- Whether session sid's record is there with `secret` (1), is missing (0)
-- or holds another (-1); the stored digest is k when the caller read it.
local function session_of(sid, secret, k)
  if k == nil then k = call('HGET', P .. 's:' .. sid, 'k') end
  if not k then return 0 end
  if k ~= digest(secret) then return -1 end
  if OWNED[sid] ~= secret then
    if NOWNED >= 4096 then OWNED, NOWNED = {}, 0 end
    OWNED[sid], NOWNED = secret, NOWNED + 1
  end
  return 1
end

-- The caller's session must be alive and its own: nil to go on, or the
-- reply. A session is alive while its record is there: open writes it
-- with the session's entry in P.."S", and end_session() deletes the two
-- together (fsck checks that they agree).
local function session_alive()
  local own = session_of(SID, SECRET)
  if own > 0 then return nil end
  if own == 0 then return finish(NOSESSION) end
  return finish(EACCES, FORGED)
end

-- For a call on what the caller's session holds or waits for: refused
-- when the record has another secret. A session that is gone has nothing
-- left to act on, which the call finds out by itself.
local function session_guard()
  if OWNED[SID] == SECRET then return nil end
  if session_of(SID, SECRET) < 0 then return finish(EACCES, FORGED) end
  return nil
end

-- --------------------------------------------------------------------------
-- The uncontended case
-- --------------------------------------------------------------------------

-- As in-process, where src/grant.c takes budgets without the pool's lock
-- while nobody waits, a request of budgets and classes that no waiter
-- claims needs none of the waiting machinery: it fits when each item's
-- free units cover it. quick_try() decides that case and quick_release()
-- gives back a lease of them where nobody is blocked, on the packed records
-- directly, with the writes, audit entries and replies of take(), hold(),
-- release_lease() and finish(): a Lua table or a call of a helper costs
-- here about what a Redis command does, and the general path makes dozens.
-- Anything else returns nil before writing anything, and the general path
-- decides: devices, lone requests, claims, blocked waiters, a request that
-- does not fit, owed work, a quarantine, a retry, a removed resource.

-- After start(), which checked the schema: whether the namespace leaves
-- the call to the quick path (nothing owed, no quarantine, no retry, and
-- no quarantine lifted by this call, whose sweep used the per-call tables).
local function quick_open()
  return META[3] == '0' and META[5] == '0' and not RETRY and not LIFTED
end

-- A quick call is done: it left the per-call tables as begin() found them.
local function quick_done(reply)
  STALE = false
  return reply
end

-- The quick calls' lists of the resources they touch, with the amounts
-- and the unpacked records (a table per slot, filled again): kept from
-- call to call (quick calls do not nest), and read only up to the current
-- call's count.
local QNAMES, QAMOUNTS, QRECS = {}, {}, {}

-- Record fields as struct.unpack() gives them (RFMT's order).
local R_UID, R_CAP, R_USED, R_PEAK, R_GR, R_NC, R_NB, R_LO, R_NH =
  2, 5, 6, 7, 8, 9, 10, 13, 14

-- The unpacked record of budget or class `name`, in QRECS[n + 1], unless
-- it is missing, a device pool, or one of the first n of `names` too (the
-- caller's resources so far, each once).
local function quick_record(name, names, n)
  for j = 1, n do
    if names[j] == name then return nil end
  end
  local raw = call('HGET', P .. 'r:' .. name, 'x')
  if not raw then return nil end
  local v = QRECS[n + 1]
  if not v then
    v = {}
    QRECS[n + 1] = v
  end
  v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12],
    v[13], v[14] = struct.unpack(RFMT, raw)
  if v[1] == DEVICES then return nil end
  return v
end

local function quick_write(name, v)
  call('HSET', P .. 'r:' .. name, 'x', struct.pack(RFMT, unpack(v, 1, 14)))
end

-- A try, or an acquire that fits, of the items at ARGS[at] (see
-- parse_items()) for lease `id` of a live session: its reply, or nil.
local function quick_try(id, limit, at)
  if not quick_open() then return nil end
  local n = num(ARGS[at])
  local names, amounts, recs = QNAMES, QAMOUNTS, QRECS
  for i = 1, n do
    local b = at + (i - 1) * 4
    local name, a = ARGS[b + 2], num(ARGS[b + 4])
    local v = ARGS[b + 1] == 'u' and quick_record(name, names, i - 1)
    if not v or v[R_UID] ~= num(ARGS[b + 3]) or v[R_NC] > 0 or
        v[R_LO] > 0 or a > v[R_CAP] - v[R_USED] then
      return nil
    end
    names[i], amounts[i], recs[i] = name, a, v
  end
  local fence = fmt(call('HINCRBY', P .. 'meta', 'fence', '1'))
  local lease, got, log = fence .. ' ' .. fmt(limit) .. ' 0 ' .. fmt(n), '', ''
  for i = 1, n do
    local v, a = recs[i], fmt(amounts[i])
    if AUDIT then
      log = log .. ' ' .. names[i] .. ' ' .. a .. ' - ' ..
        fmt(v[R_CAP] - v[R_USED]) .. ' 0'
    end
    v[R_USED] = v[R_USED] + amounts[i]
    if v[R_USED] > v[R_PEAK] then v[R_PEAK] = v[R_USED] end
    v[R_GR], v[R_NH] = v[R_GR] + 1, v[R_NH] + 1
    quick_write(names[i], v)
    -- The resource id as the caller wrote it: it equals the record's.
    lease = lease .. ' u ' .. names[i] .. ' ' .. ARGS[at + (i - 1) * 4 + 3] ..
      ' ' .. a .. ' -'
    got = got .. ' ' .. a
  end
  if n == 0 then lease = lease .. ' ' end
  call('HSET', P .. 'L:' .. SID, id, lease)
  if AUDIT then audit('G ' .. id .. ' ' .. fence .. ' ' .. fmt(n) .. log) end
  return quick_done({OK, 0, 1, 'g ' .. id .. ' ' .. fence ..
    (n == 0 and ' ' or got)})
end

-- The release of lease `id`, whose record is `rec`: its reply, or nil.
local function quick_release(id, rec)
  if not quick_open() then return nil end
  local names, helds, recs, n = QNAMES, QAMOUNTS, QRECS, 0
  local _, e = string.find(rec, LEASE_SKIP)
  for m, name, uid, held in string.gmatch(string.sub(rec, e + 1), LEASE_ITEM) do
    local v = m == 'u' and quick_record(name, names, n)
    if not v or v[R_UID] ~= num(uid) or v[R_NB] > 0 then return nil end
    n = n + 1
    names[n], helds[n], recs[n] = name, num(held), v
  end
  for i = 1, n do
    local v = recs[i]
    v[R_USED], v[R_NH] = v[R_USED] - helds[i], v[R_NH] - 1
    quick_write(names[i], v)
  end
  call('HDEL', P .. 'L:' .. SID, id)
  if AUDIT then audit('r ' .. id) end
  return quick_done({OK, 0, 0})
end

-- Every call starts here: the state above is per call, and a script or a
-- function of the library (the two ways link.c runs these) begins afresh.
-- The namespace's meta record is read once for the whole call.
local function begin(keys, args)
  call, P, ARGS = redis.call, keys[1], args
  SID, STEPS, RETRY, HOST = args[1], num(args[2]), args[3] == '1', args[4]
  SECRET = args[5]
  steps, NOW, LIFTED = 0, nil, false
  local head = call('HGET', P .. 'meta', 'head')
  META = head and HEADS[head]
  if not META then
    META = {}
    if head then
      META = {string.match(head, '^(%S+) (%S+) (%S+) (%S+) (%S+)$')}
      if NHEADS < 64 then HEADS[head], NHEADS = META, NHEADS + 1 end
    end
  end
  STAGED, AUDIT = META[2] == '1', META[4] == '1'
  NDIRTY = 0
  -- The per-call tables are made anew only after a call that may have
  -- used them: a quick one (see quick_try()) uses none, and a table costs
  -- more than the test. Within the others, one that stayed empty is kept.
  if STALE then
    local nxt = next
    if nxt(RES) then RES = {} end
    if nxt(RLIST) then RLIST = {} end
    if nxt(DEVS) then DEVS = {} end
    if nxt(WAIT) then WAIT = {} end
    if nxt(WLIST) then WLIST = {} end
    if nxt(DIRTY) then DIRTY = {} end
    if nxt(OUT) then OUT = {} end
    if nxt(PUB) then PUB = {} end
    if nxt(WMAX) then WMAX = {} end
  end
  STALE = true
end
