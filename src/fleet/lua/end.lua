-- end: end a session (the caller's own, or one it lost earlier): its
-- leases come back and its waiters leave (what the script's share leaves
-- undone, the reaping of expired sessions finishes). The caller presents
-- the session's secret: a session already gone has nothing left to end.
-- ARGV: the session to end, its secret.
local sid, secret = ARGV[ARG0 + 1], ARGV[ARG0 + 2] or ''
local s = start()
if s then return s end
local own = session_of(sid, secret)
if own < 0 then return finish(EACCES, FORGED) end
if own > 0 then
  waiting().end_session(sid)
  sweep()
end
return finish(OK)
