-- open: create the namespace if it is new, check that it matches this
-- library and the pool's options if it is not, and open a session.
-- ARGV: schema, staged (0/1), host, pid, ttl_ms, audit (0/1), namespace,
-- the epoch the caller knew ("" when it knew none), the highest fencing
-- token the caller saw.
-- Values: the server's time, the namespace's epoch, its fencing counter
-- before this call raised it to the caller's, the quarantine left (ms).
-- A namespace created again by a caller that knew an older epoch (the
-- server lost its state) is quarantined for the caller's TTL.
local schema, staged, host, pid, ttl, audit_on, ns = ARGV[ARG0 + 1],
  ARGV[ARG0 + 2], ARGV[ARG0 + 3], ARGV[ARG0 + 4], tonumber(ARGV[ARG0 + 5]),
  ARGV[ARG0 + 6], ARGV[ARG0 + 7]
local known, floor = ARGV[ARG0 + 8] or '', tonumber(ARGV[ARG0 + 9] or '0')
-- A namespace of an older layout has no head: its version is the schema
-- field, which a new namespace keeps too, for older libraries to refuse.
local version = META[1] or call('HGET', P .. 'meta', 'schema')
if not version then
  local epoch = fmt(now_ms()) .. '-' .. SID
  local q = '0'
  if known ~= '' then q = fmt(now_ms() + ttl) end
  META = {schema, staged, '0', audit_on, q}
  call('HSET', P .. 'meta', 'schema', schema, 'head', table.concat(META, ' '),
    'seq', '0', 'uid', '0', 'fence', fmt(floor), 'waited', '0', 'epoch', epoch)
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
local s = start()
if s then return s end
-- A counter behind what the caller saw: a failover lost writes. Raised,
-- so that fencing tokens keep growing.
local fence = tonumber(call('HGET', P .. 'meta', 'fence'))
if floor > fence then call('HSET', P .. 'meta', 'fence', fmt(floor)) end
call('DEL', P .. 's:' .. SID, P .. 'L:' .. SID, P .. 'w:' .. SID,
  P .. 'in:' .. SID)
call('HSET', P .. 's:' .. SID, 'host', host, 'pid', pid, 'ttl', fmt(ttl),
  'ih', '1')
call('ZADD', P .. 'S', now_ms() + ttl, SID)
return finish(OK, fmt(now_ms()), call('HGET', P .. 'meta', 'epoch') or '',
  fmt(fence), fmt(quarantine_left()))
