-- setcap: change the capacity of a budget or the max_workers of a class.
-- Shrinking fails the waiters that can now never fit; either way the
-- waiters there are looked at again.
-- ARGV: name, kind, capacity.
local name, kind, cap = ARGV[ARG0 + 1], tonumber(ARGV[ARG0 + 2]),
  tonumber(ARGV[ARG0 + 3])
local s = start()
if s then return s end
local r = res(name)
if r == nil or r.k ~= kind then return finish(ENOENT) end
if cap ~= r.cap then
  local old = r.cap
  r.cap = cap
  touch(r)
  if cap < old then waiting().fail_unsatisfiable(r) end
  mark(r, 0)
  sweep()
end
return finish(OK)
