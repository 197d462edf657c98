-- declare: add a budget, class or device pool, or accept a declaration
-- of one the namespace has. What a resource is must match (its kind, a
-- budget's lone-request allowance, a device pool's devices): a conflict
-- fails naming both. Its capacity is the namespace's: a declaration of
-- another capacity is accepted, and the live one stays (a capacity is
-- changed with setcap, and outlives the processes that declared it).
-- Values: the resource's uid, and its capacity (devices: their count).
-- ARGV: kind, name, capacity (devices: count), flags, namespace, then for
-- device pools the base name, the host and the ids (separated by spaces).
local kind, name, cap, flags, ns = tonumber(ARGV[ARG0 + 1]), ARGV[ARG0 + 2],
  tonumber(ARGV[ARG0 + 3]), tonumber(ARGV[ARG0 + 4]), ARGV[ARG0 + 5]
local s = start()
if s then return s end
local idlist = {}
if kind == DEVICES then idlist = split(ARGV[ARG0 + 8]) end
local kinds = {'a budget', 'a device pool', 'a class'}
local where = ' in namespace "' .. ns .. '"'
local r = res(name)
if r ~= nil then
  if r.k ~= kind then
    return finish(EEXIST, '"' .. name .. '" is ' .. kinds[r.k] .. where ..
      ', not ' .. kinds[kind])
  end
  if kind == DEVICES then
    local ids = call('HGETALL', P .. 'di:' .. name)
    local have = {}
    for i = 1, #ids, 2 do have[tonumber(string.sub(ids[i], 2)) + 1] = ids[i + 1] end
    local want = {}
    for i = 1, cap do want[i] = idlist[i] end
    if r.n ~= cap or table.concat(have, ',') ~= table.concat(want, ',') then
      return finish(EEXIST, 'device pool "' .. name .. '" has ' .. fmt(r.n) ..
        ' devices (' .. table.concat(have, ',') .. ')' .. where ..
        ', not ' .. fmt(cap) .. ' (' .. table.concat(want, ',') .. ')')
    end
    return finish(OK, fmt(r.uid))
  end
  if r.fl ~= flags then
    local function lone(f) if f % 2 == LONE then return 'with' end return 'without' end
    return finish(EEXIST, 'budget "' .. name .. '" is ' .. lone(r.fl) ..
      ' the lone-request allowance' .. where .. ', not ' .. lone(flags))
  end
  return finish(OK, fmt(r.uid), fmt(r.cap))
end
if kind ~= DEVICES then
  local hosts = call('HGET', P .. 'bases', name)
  if hosts and tonumber(hosts) > 0 then
    return finish(EEXIST, '"' .. name .. '" names per-host device pools (' ..
      name .. '@<host>)' .. where .. ', not ' .. kinds[kind])
  end
else
  local base = ARGV[ARG0 + 6]
  local other = res(base)
  if other ~= nil then
    return finish(EEXIST, '"' .. base .. '" is ' .. kinds[other.k] .. where ..
      ', so it cannot name device pools ' .. base .. '@<host>')
  end
end
local uid = call('HINCRBY', P .. 'meta', 'uid', 1)
local rank = uid + 2 ^ 32
if kind == DEVICES then rank = uid end
local n = kind == DEVICES and cap or 0
call('HSET', P .. 'r:' .. name, 'x', res_record(kind, uid, flags, n,
  kind == DEVICES and cap * MILLI or cap, 0, 0, 0, 0, 0, 0, n, 0, 0),
  'to', '0', 'ca', '0', 'wn', '0', 'ws', '0', 'wm', '0')
call('ZADD', P .. 'order', rank, name)
if kind == DEVICES then
  call('HSET', P .. 'r:' .. name, 'base', ARGV[ARG0 + 6], 'host',
    ARGV[ARG0 + 7])
  local f, ids = {}, {}
  for i = 0, cap - 1 do
    local x = fmt(i)
    for _, kv in ipairs({{'u', '0'}, {'w', '0'}, {'o', '1'}, {'g', '0'},
                         {'p', '0'}}) do
      f[#f + 1] = kv[1] .. x
      f[#f + 1] = kv[2]
    end
    ids[#ids + 1] = 'i' .. x
    ids[#ids + 1] = idlist[i + 1]
    if #f >= 500 then
      call('HSET', P .. 'd:' .. name, unpack(f))
      f = {}
    end
    if #ids >= 500 then
      call('HSET', P .. 'di:' .. name, unpack(ids))
      ids = {}
    end
  end
  if #f > 0 then call('HSET', P .. 'd:' .. name, unpack(f)) end
  if #ids > 0 then call('HSET', P .. 'di:' .. name, unpack(ids)) end
  call('HINCRBY', P .. 'bases', ARGV[ARG0 + 6], 1)
end
return finish(OK, fmt(uid))
