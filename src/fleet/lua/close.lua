-- close: every waiter of the caller's session fails with CQ_ECLOSED,
-- oldest first; then the waiters of other sessions that now fit are
-- granted.
local s = start()
if s then return s end
s = session_guard()
if s then return s end
local W = waiting()
local list = {}
for _, wid in ipairs(call('SMEMBERS', P .. 'w:' .. SID)) do
  local w = W.waiter(wid)
  if w ~= nil then list[#list + 1] = w end
end
table.sort(list, function(a, b) return a.seq < b.seq end)
for _, w in ipairs(list) do W.leave(w, ECLOSED) end
sweep()
return finish(OK)
