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
-- twin: src/queue.c item_lone()
local function is_lone(r, a)
  return r.k == BUDGET and r.fl % 2 == LONE and a > r.cap
end

-- What an item of mode m and amount a takes of r: a class item one
-- worker; a lone request the whole capacity, and at least one unit, so
-- that on a lone budget of capacity 0 it waits instead of holding nothing.
-- twin: src/grant.h cq__item_need()
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

