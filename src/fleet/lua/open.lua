-- open: create the namespace if it is new, check that it matches this
-- library and the pool's options if it is not, and open a session.
-- ARGV: schema, staged (0/1), host, pid, ttl_ms, audit (0/1), namespace.
local schema, staged, host, pid, ttl, audit_on, ns = ARGV[ARG0 + 1],
  ARGV[ARG0 + 2], ARGV[ARG0 + 3], ARGV[ARG0 + 4], tonumber(ARGV[ARG0 + 5]),
  ARGV[ARG0 + 6], ARGV[ARG0 + 7]
if not META[1] then
  call('HSET', P .. 'meta', 'schema', schema, 'staged', staged, 'seq', '0',
    'uid', '0', 'fence', '0', 'owed', '0', 'waited', '0', 'audit', audit_on)
  META = {schema, staged, '0', audit_on}
elseif META[1] ~= schema then
  return {EINVAL, 0, 1, 'namespace "' .. ns .. '" has schema version ' ..
    META[1] .. ' but this library uses version ' .. schema}
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
call('DEL', P .. 's:' .. SID, P .. 'L:' .. SID, P .. 'w:' .. SID,
  P .. 'in:' .. SID)
call('HSET', P .. 's:' .. SID, 'host', host, 'pid', pid, 'ttl', fmt(ttl),
  'ih', '1')
call('ZADD', P .. 'S', now_ms() + ttl, SID)
return finish(OK, fmt(now_ms()))
