-- query: what host schedulers ask, with the rules of a new arrival (what
-- is withheld or reserved for waiters does not count as free).
-- ARGV: what, then:
--   h items           headroom: copies of the request that fit now
--   v n, n x items    validation of n requests: per item its code, and
--                     the capacity (budgets, classes) or devices online
--   r class           room for one more job: kind, then per budget and
--                     device pool (this host's) name, units, largest, whole
local what = ARGV[ARG0 + 1]
local s = start()
if s then return s end

local function open_units(r) return offer(r, INF) end

local function dev_copies(r, m, a)
  local d = devs(r)
  local ex = dev_excluded(r, d, INF)
  local copies = 0
  for i = 0, r.n - 1 do
    if d.o[i] == 1 and not ex[i] then
      local f = dev_free(d, i)
      if m == 'f' then
        if f >= a then copies = copies + math.floor(f / a) end
      elseif f == MILLI then
        copies = copies + 1
      end
    end
  end
  if m == 'w' then return math.floor(copies / a) end
  return copies
end

if what == 'h' then
  local items = parse_items(ARG0 + 2)
  local code, msg = validate(items)
  if code ~= 0 then return finish(code, msg) end
  local n = -1 -- none: INT64_MAX
  for _, it in ipairs(items) do
    local r = res(it.name)
    local k
    if r.k == DEVICES then
      k = dev_copies(r, it.m, it.a)
    else
      local nd = need_of(r, it.m, it.a)
      if nd > 0 then k = math.floor(open_units(r) / nd) else k = 0 end
    end
    if n < 0 or k < n then n = k end
  end
  return finish(OK, fmt(n))
elseif what == 'v' then
  local out = {}
  local at = ARG0 + 3
  for _ = 1, tonumber(ARGV[ARG0 + 2]) do
    local items
    items, at = parse_items(at)
    for _, it in ipairs(items) do
      local code = validate_item(it)
      local r = res(it.name)
      local bound = 0
      if r ~= nil then
        if r.k == DEVICES then bound = r.on else bound = r.cap end
      end
      out[#out + 1] = fmt(code)
      out[#out + 1] = fmt(bound)
    end
  end
  return finish(OK, unpack(out))
end
-- Room.
local class, host = ARGV[ARG0 + 2], HOST
local cls
if class ~= '' then
  cls = res(class)
  if cls == nil or cls.k ~= CLASS then return finish(ENOENT) end
end
local idle = call('ZCARD', P .. 'Q') == 0
local all_lone, exhausted, limited = true, false, 0
local items = {}
for _, name in ipairs(call('ZRANGE', P .. 'order', 0, -1)) do
  local r = res(name)
  local mine = r.k ~= DEVICES or string.sub(name, -#host - 1) == '@' .. host
  if r.k ~= CLASS and mine then
    limited = limited + 1
    idle = idle and r.used == 0
    all_lone = all_lone and r.k == BUDGET and r.fl % 2 == LONE
    local units, largest, whole = 0, 0, 0
    if r.k == DEVICES then
      local d = devs(r)
      local ex = dev_excluded(r, d, INF)
      for i = 0, r.n - 1 do
        if d.o[i] == 1 and not ex[i] then
          local f = dev_free(d, i)
          units = units + f
          if f > largest then largest = f end
          if f == MILLI then whole = whole + 1 end
        end
      end
    else
      units = open_units(r)
    end
    exhausted = exhausted or units == 0
    items[#items + 1] = name
    items[#items + 1] = fmt(units)
    items[#items + 1] = fmt(largest)
    items[#items + 1] = fmt(whole)
  end
end
local kind
if cls ~= nil and open_units(cls) == 0 then
  kind = 0
elseif limited == 0 then
  kind = 3
elseif idle and all_lone and (cls == nil or cls.used == 0) then
  kind = 2
elseif exhausted then
  kind = 0
else
  kind = 1
end
return finish(OK, fmt(kind), unpack(items))
