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
-- twin: src/place.c dev_use()
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
-- twin: src/queue.c reserved_for()
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
-- twin: src/place.c cq__dev_reserve()
local function dev_excluded(r, d, seq)
  local k, s = dev_reserved_count(r, d, seq)
  local ex = {}
  for j = 1, k do ex[s[j]] = true end
  return ex
end

-- Where an item would go on the devices not in `ex`: a fraction best fit
-- (the least free capacity that fits, ties to the lowest index), n whole
-- devices the lowest-index entirely free ones. nil when it does not fit.
-- twin: src/place.c cq__dev_fits()
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

