-- resolve: what names mean in the namespace. A name without a host is
-- this host's device pool when there is one ("gpu" is "gpu@<host>"),
-- else the namespace's budget or class of that name.
-- ARGV: names. Per name: canonical name, kind (0: none), uid, devices,
-- then that many device ids.
local s = start()
if s then return s end
local out = {}
for i = ARG0 + 1, #ARGV do
  local name = ARGV[i]
  local r = lookup(name)
  if r == nil then
    out[#out + 1] = name
    out[#out + 1] = '0'
    out[#out + 1] = '0'
    out[#out + 1] = '0'
  else
    out[#out + 1] = r.name
    out[#out + 1] = fmt(r.k)
    out[#out + 1] = fmt(r.uid)
    out[#out + 1] = fmt(r.n)
    if r.k == DEVICES and r.n > 0 then
      local ids = call('HGETALL', P .. 'di:' .. r.name)
      local byi = {}
      for j = 1, #ids, 2 do byi[tonumber(string.sub(ids[j], 2)) + 1] = ids[j + 1] end
      for j = 1, r.n do out[#out + 1] = byi[j] end
    end
  end
end
return finish(OK, unpack(out))
