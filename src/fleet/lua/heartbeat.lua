-- heartbeat: extend the session, return its inbox after what the caller
-- has seen, and reclaim what expired sessions hold (a share of it: the
-- reply says whether more is left, and the caller comes back at once).
-- ARGV: ack (the last inbox entry seen), extend (0/1), reap (0/1).
-- Values: more to reap (0/1), the inbox's first entry's number, then the
-- entries.
local ack, extend, reap = tonumber(ARGV[ARG0 + 1]), ARGV[ARG0 + 2] == '1',
  ARGV[ARG0 + 3] == '1'
local s = start()
if s then return s end
local sess = call('HMGET', P .. 's:' .. SID, 'ttl', 'ih')
if not sess[1] or not session_alive() then return finish(NOSESSION) end
if extend then
  call('ZADD', P .. 'S', 'XX', now_ms() + tonumber(sess[1]), SID)
end
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
local inbox = call('LRANGE', P .. 'in:' .. SID, 0, -1)
local out = {more, fmt(head)}
for i = 1, #inbox do out[#out + 1] = inbox[i] end
-- The caller's outcomes of this very script are in the inbox too.
OUT = {}
return finish(OK, unpack(out))
