-- abort: end waiting attempts of the caller's session with a status
-- (timed out, cancelled, closed). All leave first, then one sweep, as the
-- in-process pool expires its due waiters. Per id: "a" (it left), the
-- lease entry (it was granted first) or "u" (unknown: it already left).
-- ARGV: status, then ids.
local status = tonumber(ARGV[ARG0 + 1])
local s = start()
if s then return s end
s = session_guard()
if s then return s end
local W = waiting()
local results = {}
for i = ARG0 + 2, #ARGV do
  local id = ARGV[i]
  local w = W.waiter(id)
  if w ~= nil and w.sid == SID then
    W.leave(w, status)
    results[#results + 1] = 'a'
  else
    local rec = call('HGET', P .. 'L:' .. SID, id)
    if rec then
      results[#results + 1] = W.lease_entry(id, decode_lease(rec))
    else
      results[#results + 1] = 'u'
    end
  end
end
sweep()
return finish(OK, unpack(results))
