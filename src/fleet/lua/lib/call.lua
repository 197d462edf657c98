-- --------------------------------------------------------------------------
-- The end of every script
-- --------------------------------------------------------------------------

local function write_back()
  for _, r in ipairs(RLIST) do
    local raw = res_record(r.k, r.uid, r.fl, r.n, r.cap, r.used, r.peak, r.gr,
      r.nc, r.nb, r.nw, r.on, r.lo, r.nh)
    if raw ~= r.raw then rc('HSET', P .. 'r:' .. r.name, 'x', raw) end
    if r.inc ~= nil then
      for f, by in pairs(r.inc) do rc('HINCRBY', P .. 'r:' .. r.name, f, by) end
    end
    local d = DEVS[r.name]
    if d ~= nil then
      local args = {}
      for i, _ in pairs(d.changed) do
        args[#args + 1] = 'u' .. i
        args[#args + 1] = fmt(d.u[i])
        args[#args + 1] = 'w' .. i
        args[#args + 1] = fmt(d.w[i])
        args[#args + 1] = 'o' .. i
        args[#args + 1] = fmt(d.o[i])
        args[#args + 1] = 'g' .. i
        args[#args + 1] = fmt(d.g[i])
        args[#args + 1] = 'p' .. i
        args[#args + 1] = fmt(d.p[i])
      end
      if #args > 0 then rc('HSET', P .. 'd:' .. r.name, unpack(args)) end
    end
  end
  for _, w in ipairs(WLIST) do
    if WAIT[w.wid] then rc('HSET', P .. 'W', w.wid, W.encode_waiter(w)) end
  end
end

-- Write everything back, leave what the sweep did not finish owed, wake
-- the sessions that got outcomes, and build the reply: the status, the
-- operation's own values, then the caller's outcomes.
local function finish(status, ...)
  write_back()
  local owed = NDIRTY > 0
  if owed or META[3] == '1' then
    rc('DEL', P .. 'owed')
    if owed then
      local args = {}
      for name, at in pairs(DIRTY) do
        args[#args + 1] = name
        args[#args + 1] = fmt(at)
      end
      rc('HSET', P .. 'owed', unpack(args))
    end
    rc('HSET', P .. 'meta', 'head', META[1] .. ' ' .. META[2] .. ' ' ..
      (owed and '1' or '0') .. ' ' .. META[4] .. ' ' .. META[5])
  end
  -- After the writes, so a refusal here (an ACL without PUBLISH on the
  -- channel) must not fail the call that made them: the wake-up is a hint,
  -- and the outcome waits in the session's inbox for its next heartbeat.
  for sid, list in pairs(PUB) do
    redis.pcall('PUBLISH', P .. 'ch:' .. sid, table.concat(list, '\n'))
  end
  local reply = {status, owed and 1 or 0}
  local extra = {...}
  reply[3] = #extra
  for i = 1, #extra do reply[#reply + 1] = extra[i] end
  for i = 1, #OUT do reply[#reply + 1] = OUT[i] end
  return reply
end

-- The time left of the namespace's quarantine, or 0. Every namespace is
-- created quarantined for its longest TTL (open.lua), unless its creator
-- says it is new: a process of an earlier state the server lost may still
-- hold, until its own deadline, and nothing is granted before every such
-- deadline has passed. Arrivals meanwhile wait (covered() is false).
local function quarantine_left()
  local q = tonumber(META[5] or '0') or 0
  if q == 0 or q <= now_ms() then return 0 end
  return q - now_ms()
end

-- The quarantine is over: the head says so from now on (a new table: the
-- parsed heads are shared, never written), and every waiter that arrived
-- meanwhile is examined by the sweep, oldest first.
local LIFTED -- per call: whether this call lifted a quarantine

local function lift()
  LIFTED = true
  META = {META[1], META[2], META[3], META[4], '0'}
  call('HSET', P .. 'meta', 'head', table.concat(META, ' '))
  for _, name in ipairs(call('ZRANGE', P .. 'order', 0, -1)) do
    local r = res(name)
    if r ~= nil then mark(r, 0) end
  end
end

-- The checks every operation starts with: the namespace exists with this
-- schema, the work owed is done, and a quarantine that has ended is
-- lifted. Returns a reply to give at once, or nil to go on.
local function start()
  if META[1] == nil or META[1] == false then return {NONS, 0, 0} end
  if META[1] ~= SCHEMA then return {NONS, 0, 0} end
  if not settle() then return finish(OWED) end
  if META[5] ~= '0' and quarantine_left() == 0 then
    lift()
    if not sweep() then return finish(OWED) end
  end
  return nil
end

-- --------------------------------------------------------------------------
-- Sessions and their secrets
-- --------------------------------------------------------------------------

-- A session's record keeps, in field k, the SHA1 of a secret that only
-- its process knows, and every call made for the session presents the
-- secret: another client of the namespace can read a session's id and its
-- leases' ids, but cannot release, cancel, extend or end them with the
-- library's own calls. (It can still write the keys themselves: a
-- namespace is one trust domain, and teams that do not trust each other
-- get a namespace and a Redis user each.) The library's state outlives a
-- call, so the digests it made and the sessions it checked are kept: a
-- quick call makes no more reads for them than a call without secrets.
-- Scripts begin afresh every time and check in full.
local DIGEST, NDIGEST = {}, 0 -- secret -> its SHA1 (hex)
local OWNED, NOWNED = {}, 0   -- session -> the secret found in its record
local FORGED = 'the call does not carry its session\'s secret'

local function digest(secret)
  local d = DIGEST[secret]
  if d then return d end
  d = redis.sha1hex(secret)
  if NDIGEST >= 4096 then DIGEST, NDIGEST = {}, 0 end
  DIGEST[secret], NDIGEST = d, NDIGEST + 1
  return d
end

-- Whether session sid's record is there with `secret` (1), is missing (0)
-- or holds another (-1); the stored digest is k when the caller read it.
local function session_of(sid, secret, k)
  if k == nil then k = call('HGET', P .. 's:' .. sid, 'k') end
  if not k then return 0 end
  if k ~= digest(secret) then return -1 end
  if OWNED[sid] ~= secret then
    if NOWNED >= 4096 then OWNED, NOWNED = {}, 0 end
    OWNED[sid], NOWNED = secret, NOWNED + 1
  end
  return 1
end

-- The caller's session must be alive and its own: nil to go on, or the
-- reply. A session is alive while its record is there: open writes it
-- with the session's entry in P.."S", and end_session() deletes the two
-- together (fsck checks that they agree).
local function session_alive()
  local own = session_of(SID, SECRET)
  if own > 0 then return nil end
  if own == 0 then return finish(NOSESSION) end
  return finish(EACCES, FORGED)
end

-- For a call on what the caller's session holds or waits for: refused
-- when the record has another secret. A session that is gone has nothing
-- left to act on, which the call finds out by itself.
local function session_guard()
  if OWNED[SID] == SECRET then return nil end
  if session_of(SID, SECRET) < 0 then return finish(EACCES, FORGED) end
  return nil
end

-- Every call starts here: the state above is per call, and a script or a
-- function of the library (the two ways link.c runs these) begins afresh.
-- The namespace's meta record is read once for the whole call.
local function begin(keys, args)
  call, P, ARGS = redis.call, keys[1], args
  SID, STEPS, RETRY, HOST = args[1], num(args[2]), args[3] == '1', args[4]
  SECRET = args[5]
  steps, NOW, LIFTED = 0, nil, false
  local head = call('HGET', P .. 'meta', 'head')
  META = head and HEADS[head]
  if not META then
    META = {}
    if head then
      META = {string.match(head, '^(%S+) (%S+) (%S+) (%S+) (%S+)$')}
      if NHEADS < 64 then HEADS[head], NHEADS = META, NHEADS + 1 end
    end
  end
  STAGED, AUDIT = META[2] == '1', META[4] == '1'
  NDIRTY = 0
  -- The per-call tables are made anew only after a call that may have
  -- used them: a quick one (see quick_try()) uses none, and a table costs
  -- more than the test. Within the others, one that stayed empty is kept.
  if STALE then
    local nxt = next
    if nxt(RES) then RES = {} end
    if nxt(RLIST) then RLIST = {} end
    if nxt(DEVS) then DEVS = {} end
    if nxt(WAIT) then WAIT = {} end
    if nxt(WLIST) then WLIST = {} end
    if nxt(DIRTY) then DIRTY = {} end
    if nxt(OUT) then OUT = {} end
    if nxt(PUB) then PUB = {} end
    if nxt(WMAX) then WMAX = {} end
  end
  STALE = true
end
