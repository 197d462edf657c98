-- online: take a device offline (it takes no new work; its holders keep
-- it) or bring it back.
-- ARGV: name, index, online (0/1).
local name, index, on = ARGV[ARG0 + 1], tonumber(ARGV[ARG0 + 2]),
  tonumber(ARGV[ARG0 + 3])
local s = start()
if s then return s end
local r = lookup(name)
if r == nil or r.k ~= DEVICES or index >= r.n then return finish(ENOENT) end
local d = devs(r)
if d.o[index] ~= on then
  d.o[index] = on
  d.changed[index] = true
  d.ver = d.ver + 1
  if on == 1 then r.on = r.on + 1 else r.on = r.on - 1 end
  r.cap = r.on * MILLI
  touch(r)
  if on == 0 then waiting().fail_unsatisfiable(r) end
  mark(r, 0)
  sweep()
end
return finish(OK)
