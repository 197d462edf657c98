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

-- twin: src/request.c cq__item_text()
local function item_text(it)
  if it.m == 'f' then return it.name .. ':' .. milli_text(it.a) end
  return it.name .. ':' .. fmt(it.a)
end

-- 0, or an error code and its message, for one item as the namespace is
-- now.
-- twin: src/validate.c cq__validate_item()
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

-- twin: src/validate.c cq__validate()
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

