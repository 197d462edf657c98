-- fsck: check the namespace's invariants (for tests and operators): in
-- use is what the leases hold, on every budget, class and device, and
-- within capacity unless a capacity shrank below it; the counters match
-- their sets; every blocked waiter claims its blocker; no waiter is
-- covered by its blocker while no work is owed. Returns the problems
-- found, one line each.
local s = start()
if s then return s end
local problems = {}
local function bad(msg) problems[#problems + 1] = msg end
local held, dheld = {}, {}
-- A session is alive while its record is (see session_alive()): the
-- record and the entry in P.."S" come and go together.
local pattern = string.gsub(P, '([%*%?%[%]\\])', '\\%1') .. 's:*'
local cursor = '0'
repeat
  local page = call('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)
  cursor = page[1]
  for _, key in ipairs(page[2]) do
    local sid = string.sub(key, #P + 3)
    if not call('ZSCORE', P .. 'S', sid) then
      bad('session ' .. sid .. ' has a record but no entry in the sessions')
    end
  end
until cursor == '0'
for _, sid in ipairs(call('ZRANGE', P .. 'S', 0, -1)) do
  if call('EXISTS', P .. 's:' .. sid) == 0 then
    bad('session ' .. sid .. ' has no record')
  end
  local leases = call('HGETALL', P .. 'L:' .. sid)
  for i = 2, #leases, 2 do
    for _, it in ipairs(decode_lease(leases[i]).items) do
      held[it.name] = (held[it.name] or 0) + it.held
      if it.m == 'f' or it.m == 'w' then
        dheld[it.name] = dheld[it.name] or {}
        for _, x in ipairs(it.devs) do
          local each = it.held
          if it.m == 'w' then each = MILLI end
          dheld[it.name][x] = (dheld[it.name][x] or 0) + each
        end
      end
    end
  end
end
for _, name in ipairs(call('ZRANGE', P .. 'order', 0, -1)) do
  local r = res(name)
  if r.used ~= (held[name] or 0) then
    bad(name .. ': in use ' .. fmt(r.used) .. ' but the leases hold ' ..
      fmt(held[name] or 0))
  end
  if r.nc ~= call('ZCARD', P .. 'c:' .. name) or
      r.nb ~= call('ZCARD', P .. 'b:' .. name) or
      r.nw ~= call('ZCARD', P .. 'n:' .. name) then
    bad(name .. ': counters differ from their sets')
  end
  if r.k == DEVICES then
    local d = devs(r)
    for i = 0, r.n - 1 do
      local want = (dheld[name] or {})[i] or 0
      if d.u[i] ~= want then
        bad(name .. '/' .. fmt(i) .. ': in use ' .. fmt(d.u[i]) ..
          ' but the leases hold ' .. fmt(want))
      end
      if d.u[i] > MILLI then bad(name .. '/' .. fmt(i) .. ': over one device') end
    end
  elseif r.used > r.cap and ARGV[ARG0 + 1] ~= "nocap" then
    bad(name .. ': in use ' .. fmt(r.used) .. ' above capacity ' .. fmt(r.cap))
  end
  for _, m in ipairs(call('ZRANGE', P .. 'b:' .. name, 0, -1)) do
    if not call('ZSCORE', P .. 'c:' .. name, m) then
      bad(name .. ': blocked waiter ' .. m .. ' does not claim it')
    end
    local wid = parse_member(m)
    local w = waiting().waiter(wid)
    if w == nil then
      bad(name .. ': blocked waiter ' .. wid .. ' has no record')
    elseif META[3] ~= '1' and covered(w.seq, w.items[w.blocker]) then
      bad(name .. ': waiter ' .. wid .. ' is covered by its blocker at rest')
    end
  end
end
return finish(OK, unpack(problems))
