-- acquire: a try (mode t), or an acquire that waits when it does not fit
-- (mode w). The id is the caller's: a retry with the same id finds the
-- lease or the waiter the first attempt made.
-- ARGV: id, mode, hold limit, then the items (see parse_items()).
-- A quarantined namespace grants nothing: a try is answered QUARANTINE
-- with the time left, an acquire waits in line (covered() is false) and
-- is examined, in arrival order, when the quarantine is lifted.
local id, mode, limit = ARGV[ARG0 + 1], ARGV[ARG0 + 2], num(ARGV[ARG0 + 3])
local s = start()
if s then return s end
s = session_alive()
if s then return s end
local quick = quick_try(id, limit, ARG0 + 4)
if quick then return quick end
if RETRY then
  local rec = call('HGET', P .. 'L:' .. SID, id)
  if rec then return finish(OK, waiting().lease_entry(id, decode_lease(rec))) end
  local w = waiting().waiter(id)
  if w ~= nil then return finish(WAITING, fmt(w.seq), fmt(quarantine_left())) end
end
local q = quarantine_left()
if q > 0 and mode == 't' then return finish(QUARANTINE, fmt(q)) end
local items = parse_items(ARG0 + 4)
local code, msg = validate(items)
if code ~= 0 then return finish(code, msg) end
local fits = true
for _, it in ipairs(items) do
  if not covered(INF, it) then
    fits = false
    break
  end
end
if fits then
  local held, why = take(items, INF)
  return finish(OK, hold(SID, id, items, held, limit, why))
end
if mode == 't' then return finish(EBUSY) end
local w = waiting().enqueue(id, items, limit)
return finish(WAITING, fmt(w.seq), fmt(q))
