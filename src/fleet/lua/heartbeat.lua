-- heartbeat: extend the session, return its inbox after what the caller
-- has seen, and reclaim what expired sessions hold (a share of it: the
-- reply says whether more is left, and the caller comes back at once).
-- It also returns what the server has for the session, so that the caller
-- finds leases a failover lost, and leases and waiters whose replies it
-- never got.
-- ARGV: ack (the last inbox entry seen), extend (0/1), reap (0/1), the
-- highest fencing token the caller saw.
-- Values: more to reap (0/1), the inbox's first entry's number, the
-- fencing counter (before this call raised it to the caller's), the
-- namespace's epoch, the quarantine left (ms), the number of leases and
-- their ids, the number of waiters and their ids, then the inbox's
-- entries.
local ack, extend, reap = tonumber(ARGV[ARG0 + 1]), ARGV[ARG0 + 2] == '1',
  ARGV[ARG0 + 3] == '1'
local floor = tonumber(ARGV[ARG0 + 4] or '0')
local s = start()
if s then return s end
local sess = call('HMGET', P .. 's:' .. SID, 'ttl', 'ih', 'k')
local own = session_of(SID, SECRET, sess[3] or false)
if own == 0 or not sess[1] then return finish(NOSESSION) end
if own < 0 then return finish(EACCES, FORGED) end
if extend then
  call('ZADD', P .. 'S', 'XX', now_ms() + tonumber(sess[1]), SID)
end
local fence = tonumber(call('HGET', P .. 'meta', 'fence'))
if floor > fence then call('HSET', P .. 'meta', 'fence', fmt(floor)) end
-- Entries up to `ack` were seen: drop them.
local head = tonumber(sess[2])
if ack >= head then
  call('LTRIM', P .. 'in:' .. SID, ack - head + 1, -1)
  head = ack + 1
  call('HSET', P .. 's:' .. SID, 'ih', fmt(head))
end
local more = '0'
if reap then
  local dead = call('ZRANGEBYSCORE', P .. 'S', '-inf', '(' .. fmt(now_ms()),
    'LIMIT', 0, 8)
  for i, sid in ipairs(dead) do
    if steps >= STEPS or not waiting().end_session(sid) then
      more = '1'
      break
    end
    if i == #dead and #dead == 8 then more = '1' end
  end
  sweep()
end
local out = {more, fmt(head), fmt(fence),
             call('HGET', P .. 'meta', 'epoch') or '', fmt(quarantine_left())}
local leases = call('HKEYS', P .. 'L:' .. SID)
out[#out + 1] = fmt(#leases)
for i = 1, #leases do out[#out + 1] = leases[i] end
local waiters = call('SMEMBERS', P .. 'w:' .. SID)
out[#out + 1] = fmt(#waiters)
for i = 1, #waiters do out[#out + 1] = waiters[i] end
local inbox = call('LRANGE', P .. 'in:' .. SID, 0, -1)
for i = 1, #inbox do out[#out + 1] = inbox[i] end
-- The caller's outcomes of this very script are in the inbox too.
OUT = {}
return finish(OK, unpack(out))
