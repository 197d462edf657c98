-- remove: a budget, class or device pool, refused while it is held or a
-- waiting request names it.
-- ARGV: name.
local name = ARGV[ARG0 + 1]
local s = start()
if s then return s end
local r = lookup(name)
if r == nil then return finish(ENOENT) end
name = r.name
-- Also while a held grant names it that gave every unit of it back early.
if r.nw > 0 or r.used > 0 or r.nh > 0 then return finish(EINUSE) end
call('DEL', P .. 'r:' .. name, P .. 'd:' .. name, P .. 'di:' .. name,
  P .. 'h:' .. name, P .. 'c:' .. name, P .. 'b:' .. name, P .. 'n:' .. name)
call('ZREM', P .. 'order', name)
if r.k == DEVICES then
  local base = string.match(name, '^(.*)@')
  if call('HINCRBY', P .. 'bases', base, -1) <= 0 then
    call('HDEL', P .. 'bases', base)
  end
end
RES[name] = false
return finish(OK)
