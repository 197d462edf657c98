-- release: a lease gives everything back; the waiters that now fit are
-- granted.
-- ARGV: id.
local id = ARGV[ARG0 + 1]
local s = start()
if s then return s end
s = session_guard()
if s then return s end
local rec = call('HGET', P .. 'L:' .. SID, id)
if not rec then return finish(UNKNOWN) end
local quick = quick_release(id, rec)
if quick then return quick end
release_lease(decode_lease(rec))
call('HDEL', P .. 'L:' .. SID, id)
audit('r ' .. id)
sweep()
return finish(OK)
