-- part: give part of a lease back early: units of a budget (kind u), or
-- thousandths of a fraction, or one whole device (kind d). The caller
-- numbers its parts of a lease, so that a retry is applied once.
-- ARGV: id, part number, kind, resource, amount (u) or device index and
-- thousandths (d).
local id, part, kind, name = ARGV[ARG0 + 1], tonumber(ARGV[ARG0 + 2]),
  ARGV[ARG0 + 3], ARGV[ARG0 + 4]
local s = start()
if s then return s end
s = session_guard()
if s then return s end
local rec = call('HGET', P .. 'L:' .. SID, id)
if not rec then return finish(UNKNOWN) end
local l = decode_lease(rec)
if l.parts >= part then return finish(OK) end
local it
for _, x in ipairs(l.items) do
  if x.name == name then it = x end
end
if it == nil then return finish(ENOENT) end
if kind == 'u' then
  local amount = tonumber(ARGV[ARG0 + 5])
  if it.m == 'f' or it.m == 'w' then return finish(EINVAL) end
  if amount <= 0 or amount > it.held then return finish(ERANGE) end
  give_back(it, amount)
  it.held = it.held - amount
  audit('p ' .. id .. ' ' .. name .. ' ' .. fmt(amount) .. ' -1')
else
  local index, milli = tonumber(ARGV[ARG0 + 5]), tonumber(ARGV[ARG0 + 6])
  if it.m ~= 'f' and it.m ~= 'w' then return finish(ENOENT) end
  if it.m == 'f' then
    if it.devs[1] ~= index or it.held == 0 then return finish(ENOENT) end
    if milli <= 0 or milli > it.held then return finish(ERANGE) end
    give_back(it, milli)
    it.held = it.held - milli
    audit('p ' .. id .. ' ' .. name .. ' ' .. fmt(milli) .. ' ' .. fmt(index))
  else
    local at
    for j, x in ipairs(it.devs) do
      if x == index then at = j end
    end
    if at == nil then return finish(ENOENT) end
    if milli ~= MILLI then return finish(ERANGE) end
    give_back(it, MILLI, index)
    table.remove(it.devs, at)
    audit('p ' .. id .. ' ' .. name .. ' ' .. fmt(MILLI) .. ' ' .. fmt(index))
    it.held = it.held - MILLI
  end
end
l.parts = part
call('HSET', P .. 'L:' .. SID, id, waiting().encode_lease(l))
sweep()
return finish(OK)
