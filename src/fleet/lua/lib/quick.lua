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
-- twin: src/budget.c cq__budget_fast_take()
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
-- twin: src/budget.c cq__budget_fast_give()
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

