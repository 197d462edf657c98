-- stats: snapshots, each taken at one moment.
-- ARGV: what, then its arguments:
--   p                 the pool: waiting, waited grants
--   r bounds names... those resources (18 values each, then `bounds` wait
--                     buckets: see res_stats())
--   a devices bounds  every resource in resource order, and with devices 1
--                     every device of each device pool after its resource;
--                     with devices 2 the same without waiting-time
--                     quantiles, then the pool's figures (for tests)
--   d name index      one device (8 values, see dev_stats())
-- `bounds` is how many bounds of the wait histogram a resource's figures
-- end with (cq_wait_stats.below: CQ_WAIT_BUCKETS, or 0 for none).
local what = ARGV[ARG0 + 1]
local s = start()
if s then return s end

-- The waiting-time histogram that the prelude's wait_add() keeps in
-- P.."h:"..name, read as src/util/hist.c reads the in-process pool's:
-- `b` maps a bucket to its count, `keys` lists the buckets present, in
-- order, and `zeros` counts the grants that did not wait.

-- The smallest value of bucket i (hist_low).
-- twin: src/util/hist.c hist_low()
local function hist_low(i)
  if i < HIST_SUB then return i end
  local shift = math.floor((i - HIST_SUB) / HIST_SUB)
  local sub = (i - HIST_SUB) % HIST_SUB
  return (HIST_SUB + sub) * 2 ^ shift
end

-- The middle of bucket i: what the bucket reports (hist_value).
-- twin: src/util/hist.c hist_value()
local function hist_value(i)
  if i < HIST_SUB then return i end
  return hist_low(i) + math.floor(2 ^ math.floor((i - HIST_SUB) / HIST_SUB) / 2)
end

-- How many waits are below `bound`, plus `zeros` (cq__hist_below): exact,
-- since the bounds asked for are powers of two, where buckets start.
-- twin: src/util/hist.c cq__hist_below()
local function hist_below(b, keys, zeros, bound)
  local n = 0
  if bound > 0 then n = zeros end
  for _, i in ipairs(keys) do
    if hist_low(i) >= bound then break end
    n = n + b[i]
  end
  return n
end

-- The q-quantile of the histogram plus `zeros` more zeros
-- (cq__hist_quantile); `count` is how many waits it holds, `mx` the
-- longest.
-- twin: src/util/hist.c cq__hist_quantile()
local function quantile(b, keys, count, mx, zeros, q)
  local total = count + zeros
  if total == 0 then return 0 end
  local rank = math.floor(q * total)
  if rank < q * total then rank = rank + 1 end
  if rank == 0 then rank = 1 end
  if rank == total then
    if count > 0 then return mx end
    return 0
  end
  local seen = zeros
  if seen >= rank then return 0 end
  for _, i in ipairs(keys) do
    seen = seen + b[i]
    if seen >= rank then return min(hist_value(i), mx) end
  end
  return mx
end

local function withheld(r)
  local c = claimant(r)
  if c == nil then return 0 end
  if r.k == DEVICES then
    local d = devs(r)
    local k, sorted = dev_reserved_count(r, d, INF)
    local sum = 0
    for j = 1, k do sum = sum + dev_free(d, sorted[j]) end
    return sum
  end
  local f = bfree(r)
  if f <= 0 then return 0 end
  return min(need_of(r, c.m, c.a), f)
end

-- A resource's figures: the 18 values of cq_resource_stats that C reads
-- (res_from() in pool.c), then the counts of waits below 2^0 .. 2^(bounds
-- - 1) ms (cq_wait_stats.below), as the in-process pool's res_snapshot()
-- gives them.
local function res_stats(out, r, quantiles, bounds)
  local v = call('HMGET', P .. 'r:' .. r.name, 'to', 'ca', 'wn', 'ws', 'wm')
  local wn, ws, wm = tonumber(v[3]) or 0, tonumber(v[4]) or 0,
    tonumber(v[5]) or 0
  local zeros = 0
  if r.gr > wn then zeros = r.gr - wn end
  local b, keys = {}, {}
  if wn > 0 and (quantiles or bounds > 0) then
    local flat = call('HGETALL', P .. 'h:' .. r.name)
    for i = 1, #flat, 2 do
      local k = tonumber(flat[i])
      b[k] = tonumber(flat[i + 1])
      keys[#keys + 1] = k
    end
    table.sort(keys)
  end
  local p50, p99 = 0, 0
  if quantiles and wn > 0 then
    p50 = quantile(b, keys, wn, wm, zeros, 0.5)
    p99 = quantile(b, keys, wn, wm, zeros, 0.99)
  end
  local cap = r.cap
  if r.k == DEVICES then cap = r.on * MILLI end
  local vals = {r.name, r.k, r.fl, cap, r.used, withheld(r), max(r.peak, r.used),
    r.nw, r.gr, tonumber(v[1]) or 0, tonumber(v[2]) or 0, wn + zeros,
    p50, p99, wm, ws, r.n, r.on}
  for i = 0, bounds - 1 do
    vals[#vals + 1] = hist_below(b, keys, zeros, 2 ^ i)
  end
  for i = 1, #vals do
    if type(vals[i]) == 'number' then vals[i] = fmt(vals[i]) end
    out[#out + 1] = vals[i]
  end
end

local function dev_stats(out, r, index)
  local d = devs(r)
  local k, sorted = dev_reserved_count(r, d, INF)
  local reserved = 0
  for j = 1, k do
    if sorted[j] == index then reserved = 1 end
  end
  local id = call('HGET', P .. 'di:' .. r.name, 'i' .. fmt(index)) or ''
  local vals = {id, index, d.o[index], d.w[index], reserved, d.u[index],
    d.p[index], d.g[index]}
  for i = 1, #vals do
    if type(vals[i]) == 'number' then vals[i] = fmt(vals[i]) end
    out[#out + 1] = vals[i]
  end
end

local out = {}
if what == 'p' then
  out = {fmt(call('ZCARD', P .. 'Q')),
         call('HGET', P .. 'meta', 'waited') or '0'}
elseif what == 'r' then
  local bounds = tonumber(ARGV[ARG0 + 2])
  for i = ARG0 + 3, #ARGV do
    local r = lookup(ARGV[i])
    if r == nil then return finish(ENOENT) end
    res_stats(out, r, true, bounds)
  end
elseif what == 'a' then
  local with_devices = ARGV[ARG0 + 2] ~= '0'
  local for_tests = ARGV[ARG0 + 2] == '2'
  local bounds = tonumber(ARGV[ARG0 + 3])
  for _, name in ipairs(call('ZRANGE', P .. 'order', 0, -1)) do
    local r = res(name)
    res_stats(out, r, not for_tests, bounds)
    if with_devices and r.k == DEVICES then
      for i = 0, r.n - 1 do dev_stats(out, r, i) end
    end
  end
  if for_tests then
    out[#out + 1] = fmt(call('ZCARD', P .. 'Q'))
    out[#out + 1] = call('HGET', P .. 'meta', 'waited') or '0'
  end
elseif what == 'd' then
  local r = lookup(ARGV[ARG0 + 2])
  local index = tonumber(ARGV[ARG0 + 3])
  if r == nil or r.k ~= DEVICES or index >= r.n then return finish(ENOENT) end
  dev_stats(out, r, index)
end
return finish(OK, unpack(out))
