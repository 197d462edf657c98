-- end: end a session (the caller's own, or one it lost earlier): its
-- leases come back and its waiters leave (what the script's share leaves
-- undone, the reaping of expired sessions finishes).
-- ARGV: the session to end.
local sid = ARGV[ARG0 + 1]
local s = start()
if s then return s end
waiting().end_session(sid)
sweep()
return finish(OK)
