-- open: create the namespace if it is missing, check that it matches this
-- library and the pool's options if it is not, and open a session.
-- ARGV: schema, staged (0/1), host, pid, ttl_ms, audit (0/1), namespace,
-- the epoch the caller knew ("" when it knew none), the highest fencing
-- token the caller saw, the longest TTL of the namespace's processes
-- (max_ttl_ms), new (1: the caller says that no process ever held in the
-- namespace, so that one it creates needs no quarantine).
-- Values: the server's time, the namespace's epoch, its fencing counter
-- before this call raised it to the caller's, the quarantine left (ms).
--
-- A namespace is created quarantined for its max_ttl_ms: the server may
-- have lost an earlier state of it (a restart without persistence, a
-- flush), whose holders believe they hold until their own deadlines, and
-- no deadline is further than max_ttl_ms from the loss. The caller's "new"
-- is taken only from one that knew no earlier epoch. Fencing tokens start
-- from the server's clock in microseconds, so that those of a namespace
-- created again are greater than every token of the state that was lost
-- (which made fewer grants than the microseconds it lived).
local schema, staged, host, pid, ttl, audit_on, ns = ARGV[ARG0 + 1],
  ARGV[ARG0 + 2], ARGV[ARG0 + 3], ARGV[ARG0 + 4], tonumber(ARGV[ARG0 + 5]),
  ARGV[ARG0 + 6], ARGV[ARG0 + 7]
local known, floor = ARGV[ARG0 + 8] or '', tonumber(ARGV[ARG0 + 9] or '0')
local max_ttl, new = tonumber(ARGV[ARG0 + 10]), ARGV[ARG0 + 11] == '1'
-- A namespace of an older layout has no head: its version is the schema
-- field, which a new namespace keeps too, for older libraries to refuse.
local version = META[1] or call('HGET', P .. 'meta', 'schema')
if not version then
  local t = call('TIME')
  local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local epoch = fmt(now_ms()) .. '-' .. SID
  local q = '0'
  if known ~= '' or not new then q = fmt(now_ms() + max_ttl) end
  META = {schema, staged, '0', audit_on, q}
  call('HSET', P .. 'meta', 'schema', schema, 'head', table.concat(META, ' '),
    'seq', '0', 'uid', '0', 'fence', fmt(max(floor, now_us)), 'waited', '0',
    'epoch', epoch, 'maxttl', fmt(max_ttl))
elseif version ~= schema then
  return {EINVAL, 0, 1, 'namespace "' .. ns .. '" has schema version ' ..
    version .. ' but this library uses version ' .. schema}
end
local function claims_text(v)
  if v == '1' then return 'staged claims' end
  return 'claims all at once'
end
if META[2] ~= staged then
  return {EINVAL, 0, 1, 'namespace "' .. ns .. '" ' .. claims_text(META[2]) ..
    ' (CQ_POOL_STAGED_CLAIMS), but this pool was opened with ' ..
    claims_text(staged)}
end
-- The longest TTL is the namespace's, the same in every process: a process
-- that created it again with a shorter one would quarantine too briefly.
-- A namespace made before it was kept takes the first opener's.
local have = tonumber(call('HGET', P .. 'meta', 'maxttl') or '')
if have == nil then
  call('HSET', P .. 'meta', 'maxttl', fmt(max_ttl))
elseif have ~= max_ttl then
  return {EINVAL, 0, 1, 'namespace "' .. ns .. '" has max_ttl_ms ' ..
    fmt(have) .. ', not ' .. fmt(max_ttl) .. ': every process of a ' ..
    'namespace sets the same (cq_fleet_opts.max_ttl_ms)'}
end
local s = start()
if s then return s end
-- Session ids are random: one in use is not the caller's to take over.
if call('EXISTS', P .. 's:' .. SID) == 1 then
  return finish(EACCES, 'session ' .. SID .. ' is in use')
end
-- A counter behind what the caller saw: a failover lost writes. Raised,
-- so that fencing tokens keep growing.
local fence = tonumber(call('HGET', P .. 'meta', 'fence'))
if floor > fence then call('HSET', P .. 'meta', 'fence', fmt(floor)) end
call('DEL', P .. 'L:' .. SID, P .. 'w:' .. SID, P .. 'in:' .. SID)
call('HSET', P .. 's:' .. SID, 'host', host, 'pid', pid, 'ttl', fmt(ttl),
  'ih', '1', 'k', digest(SECRET))
call('ZADD', P .. 'S', now_ms() + ttl, SID)
return finish(OK, fmt(now_ms()), call('HGET', P .. 'meta', 'epoch') or '',
  fmt(fence), fmt(quarantine_left()))
