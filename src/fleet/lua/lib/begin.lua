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
