-- --------------------------------------------------------------------------
-- Waiting: queueing, claims, granting, leaving, the sweep
-- --------------------------------------------------------------------------

-- Everything below is defined on first use, by waiting(): an operation
-- that meets no waiter (an uncontended acquire or release) never pays for
-- creating these functions, which every call of a script would otherwise
-- do before its first line of work.
local W
local WMAX = {} -- per call: the longest wait of each resource, once read

local function waiting()
  if W ~= nil then return W end
  -- A waiter's record: "seq sid t claims blocker limit n" and n items
  -- "m name uid a"; claims is a bit mask over the items (1-based bits).
  local function decode_waiter(wid, rec)
    local f = split(rec)
    local w = {wid = wid, seq = tonumber(f[1]), sid = f[2], t = tonumber(f[3]),
               claims = {}, blocker = tonumber(f[5]), limit = tonumber(f[6]),
               items = {}, dirty = false}
    local mask = tonumber(f[4])
    local n = tonumber(f[7])
    for i = 1, n do
      local b = 7 + (i - 1) * 4
      w.items[i] = {m = f[b + 1], name = f[b + 2], uid = tonumber(f[b + 3]),
                    a = tonumber(f[b + 4])}
      if math.floor(mask / 2 ^ (i - 1)) % 2 == 1 then w.claims[i] = true end
    end
    return w
  end

  local function encode_items(items)
    local t = {}
    for i, it in ipairs(items) do
      t[i] = it.m .. ' ' .. it.name .. ' ' .. fmt(it.uid) .. ' ' .. fmt(it.a)
    end
    return table.concat(t, ' ')
  end

  local function encode_waiter(w)
    local mask = 0
    for i, _ in pairs(w.claims) do mask = mask + 2 ^ (i - 1) end
    return fmt(w.seq) .. ' ' .. w.sid .. ' ' .. fmt(w.t) .. ' ' .. fmt(mask) ..
      ' ' .. fmt(w.blocker) .. ' ' .. fmt(w.limit) .. ' ' .. fmt(#w.items) ..
      ' ' .. encode_items(w.items)
  end

  local function waiter(wid)
    local w = WAIT[wid]
    if w ~= nil then return w or nil end
    local rec = rc('HGET', P .. 'W', wid)
    if not rec then
      WAIT[wid] = false
      return nil
    end
    w = decode_waiter(wid, rec)
    WAIT[wid] = w
    return w
  end

  local function wtouch(w) listed(w, WLIST) end

  -- Record that waiter w claims item i. A new claimant may withhold less
  -- than the one before, so the waiters blocked there are walked again.
  -- twin: src/queue.c claim()
  local function claim(w, i)
    if w.claims[i] then return end
    local it = w.items[i]
    local r = res(it.name)
    local c = claimant(r)
    rc('ZADD', P .. 'c:' .. r.name, w.seq, member(w.wid, it))
    r.nc = r.nc + 1
    r.cver = r.cver + 1
    touch(r)
    w.claims[i] = true
    wtouch(w)
    if c == nil or w.seq < c.seq then mark(r, w.seq) end
  end

  -- Drop every claim of w. Where it was the claimant what it withheld is
  -- open again; on a device pool every claimant's going moves the
  -- reservations of the younger ones.
  -- twin: src/queue.c drop_claims()
  local function drop_claims(w)
    for i = 1, #w.items do
      if w.claims[i] then
        local it = w.items[i]
        local r = res(it.name)
        local c = claimant(r)
        rc('ZREM', P .. 'c:' .. r.name, member(w.wid, it))
        r.nc = r.nc - 1
        r.cver = r.cver + 1
        touch(r)
        w.claims[i] = nil
        if r.k == DEVICES or (c ~= nil and c.wid == w.wid) then
          mark(r, w.seq)
        end
      end
    end
  end

  -- twin: src/queue.c block_on()
  local function block_on(w, i)
    local r = res(w.items[i].name)
    rc('ZADD', P .. 'b:' .. r.name, w.seq, member(w.wid, w.items[i]))
    r.nb = r.nb + 1
    touch(r)
    w.blocker = i
    wtouch(w)
  end

  -- twin: src/queue.c unblock()
  local function unblock(w)
    local r = res(w.items[w.blocker].name)
    rc('ZREM', P .. 'b:' .. r.name, member(w.wid, w.items[w.blocker]))
    r.nb = r.nb - 1
    touch(r)
  end

  local function encode_lease(l)
    local t = {}
    for i, it in ipairs(l.items) do
      local d = '-'
      if #it.devs > 0 then d = table.concat(it.devs, ',') end
      t[i] = it.m .. ' ' .. it.name .. ' ' .. fmt(it.uid) .. ' ' ..
        fmt(it.held) .. ' ' .. d
    end
    return fmt(l.fence) .. ' ' .. fmt(l.limit) .. ' ' .. fmt(l.parts) .. ' ' ..
      fmt(#l.items) .. ' ' .. table.concat(t, ' ')
  end

  -- The outcome entry of an existing lease, for a retried acquire.
  local function lease_entry(id, l)
    local t = {}
    for i, it in ipairs(l.items) do
      if it.m == 'f' or it.m == 'w' then
        t[i] = fmt(it.held) .. ':' .. table.concat(it.devs, ',')
      else
        t[i] = fmt(it.held)
      end
    end
    return 'g ' .. id .. ' ' .. fmt(l.fence) .. ' ' .. table.concat(t, ' ')
  end

  -- Claim what w lacks (only the first lack with staged claims); the index
  -- of the first item it lacks, or nil when it is covered everywhere.
  -- twin: src/queue.c claim_lacks()
  local function claim_lacks(w)
    local first
    for i = 1, #w.items do
      if not covered(w.seq, w.items[i]) then
        if first == nil then
          first = i
        elseif STAGED then
          break
        end
        claim(w, i)
      end
    end
    return first
  end

  -- Take w out of every waiting structure, claims included.
  -- twin: src/queue.c dequeue()
  local function dequeue(w)
    drop_claims(w)
    unblock(w)
    for _, it in ipairs(w.items) do
      local r = res(it.name)
      rc('ZREM', P .. 'n:' .. it.name, w.wid)
      r.nw = r.nw - 1
      touch(r)
    end
    rc('ZREM', P .. 'Q', w.wid)
    rc('HDEL', P .. 'W', w.wid)
    rc('SREM', P .. 'w:' .. w.sid, w.wid)
    WAIT[w.wid] = false
  end

  -- The waiting-time histogram: exact below HIST_SUB ms, then HIST_SUB
  -- buckets per power of two (as the in-process pool keeps it).
  -- twin: src/util/hist.c hist_index()
  local function hist_index(v)
    if v < HIST_SUB then
      if v < 0 then return 0 end
      return v
    end
    local e = 0
    local x = v
    while x >= 2 do
      x = x / 2
      e = e + 1
    end
    if e > HIST_TOP_EXP then return HIST_BUCKETS - 1 end
    local shift = e - HIST_SUB_BITS
    return HIST_SUB + shift * HIST_SUB + math.floor(v / 2 ^ shift) % HIST_SUB
  end

  -- twin: src/util/hist.c cq__hist_add()
  local function wait_add(r, v)
    if v < 0 then v = 0 end
    bump(r, 'wn', 1)
    bump(r, 'ws', v)
    rc('HINCRBY', P .. 'h:' .. r.name, fmt(hist_index(v)), 1)
    local m = WMAX[r.name]
    if m == nil then m = tonumber(rc('HGET', P .. 'r:' .. r.name, 'wm')) or 0 end
    if v > m then
      m = v
      rc('HSET', P .. 'r:' .. r.name, 'wm', fmt(v))
    end
    WMAX[r.name] = m
  end

  -- twin: src/queue.c grant_waiter()
  local function grant_waiter(w)
    local held, why = take(w.items, w.seq)
    dequeue(w)
    local waited = now_ms() - w.t
    for _, it in ipairs(w.items) do wait_add(res(it.name), waited) end
    rc('HINCRBY', P .. 'meta', 'waited', 1)
    outcome(w.sid, hold(w.sid, w.wid, w.items, held, w.limit, why))
  end

  -- A waiter leaves with `status` (not 0): timed out, cancelled, closed or
  -- never satisfiable.
  -- twin: src/queue.c leave()
  local function leave(w, status, msg)
    for _, it in ipairs(w.items) do
      if status == ETIMEDOUT then
        bump(res(it.name), 'to', 1)
      elseif status == ECANCELED then
        bump(res(it.name), 'ca', 1)
      end
    end
    dequeue(w)
    outcome(w.sid, 'x ' .. w.wid .. ' ' .. fmt(status) .. ' ' .. (msg or ''))
  end

  -- twin: src/queue.c examine()
  local function examine(w)
    local first = claim_lacks(w)
    if first == nil then
      grant_waiter(w)
    elseif first ~= w.blocker then
      unblock(w)
      block_on(w, first)
    end
  end

  -- Queue a new arrival that did not fit: it claims what it lacks and
  -- blocks on the first.
  -- twin: src/queue.c start_waiting()
  local function enqueue(id, items, limit)
    local seq = call('HINCRBY', P .. 'meta', 'seq', 1)
    local w = {wid = id, seq = seq, sid = SID, t = now_ms(), claims = {},
               blocker = 1, limit = limit, items = items, dirty = true}
    WAIT[id] = w
    WLIST[#WLIST + 1] = w
    rc('ZADD', P .. 'Q', seq, id)
    rc('SADD', P .. 'w:' .. SID, id)
    for _, it in ipairs(items) do
      local r = res(it.name)
      local score = it.a
      if it.m == 'f' then score = 0 end
      rc('ZADD', P .. 'n:' .. it.name, score, id)
      r.nw = r.nw + 1
      touch(r)
    end
    local first = claim_lacks(w)
    block_on(w, first or 1)
    return w
  end

  -- What next_candidate() returns when the script has done its share of
  -- work: the walk goes on from where it stopped, in the next script.
  local STOP = {}

  -- The oldest waiter blocked on dirty r, after its walk position, that r
  -- covers now. Waiters passed over are not covered, and stay so for the
  -- rest of the sweep unless r is marked again.
  -- twin: src/queue.c next_candidate()
  local function next_candidate(name)
    local r = res(name)
    if r == nil or r.nb == 0 then return nil end
    local d
    if r.k == DEVICES then
      d = devs(r)
      if not dev_any_free(r, d) then return nil end
    elseif bfree(r) == 0 then
      return nil
    end
    local c = claimant(r)
    local cseq = INF
    if c ~= nil then cseq = c.seq end
    local chunk = 16
    while true do
      local v = rc('ZRANGEBYSCORE', P .. 'b:' .. name, '(' .. fmt(DIRTY[name]),
        '+inf', 'WITHSCORES', 'LIMIT', 0, chunk)
      if #v == 0 then return nil end
      for j = 1, #v, 2 do
        local wid, m, a = parse_member(v[j])
        local seq = tonumber(v[j + 1])
        if r.k == DEVICES then
          if dev_place(r, d, m, a, dev_excluded(r, d, seq)) ~= nil then
            return waiter(wid)
          end
          -- Reservations only grow with arrival: once the older claimants
          -- reserve every device with room, no younger waiter fits.
          local k, s = dev_reserved_count(r, d, seq + 0.5)
          local room = false
          for x = k + 1, #s do
            if d.u[s[x]] < MILLI then room = true end
          end
          if not room then return nil end
        else
          local o = offer(r, seq)
          if need_of(r, m, a) <= o then return waiter(wid) end
          -- Past the claimant everyone is offered the same open units.
          if o == 0 and cseq < seq then return nil end
        end
        DIRTY[name] = seq
      end
      if #v < 2 * chunk then return nil end
      if steps >= STEPS then return STOP end
      chunk = chunk * 4
    end
  end

  -- Examine waiters that may now fit, oldest first, until none can or the
  -- script has done its share (then the rest is owed: see finish()). Each
  -- call examines at least one waiter or walks at least one chunk, so that
  -- scripts that each do a little always finish the work between them.
  -- twin: src/queue.c sweep()
  local function sweep_all()
    local examined = false
    while NDIRTY > 0 do
      if examined and steps >= STEPS then return false end
      local best
      local stopped = false
      for name, _ in pairs(DIRTY) do
        local w = next_candidate(name)
        if w == STOP then
          stopped = true
        elseif w == nil then
          DIRTY[name] = nil
          NDIRTY = NDIRTY - 1
        elseif best == nil or w.seq < best.seq then
          best = w
        end
      end
      -- A walk stopped early may hide an older candidate than best.
      if stopped then return false end
      if best == nil then return true end
      -- Nothing older than best can be covered now: move every walk past
      -- it.
      for name, at in pairs(DIRTY) do
        if at < best.seq then DIRTY[name] = best.seq end
      end
      examine(best)
      examined = true
    end
    return true
  end

  -- Every waiter naming r that can never fit now (a capacity shrank, a
  -- device went offline) leaves with CQ_ENEVER, oldest first.
  -- twin: src/queue.c fail_unsatisfiable()
  local function fail_unsatisfiable(r)
    local lo
    if r.k == DEVICES then
      if r.on == 0 then lo = '-inf' else lo = '(' .. fmt(r.on) end
    elseif r.fl % 2 == LONE then
      return
    else
      lo = '(' .. fmt(r.cap)
    end
    local ids = rc('ZRANGEBYSCORE', P .. 'n:' .. r.name, lo, '+inf')
    local list = {}
    for _, wid in ipairs(ids) do list[#list + 1] = waiter(wid) end
    table.sort(list, function(a, b) return a.seq < b.seq end)
    for _, w in ipairs(list) do
      local _, msg = validate(w.items)
      leave(w, ENEVER, msg)
    end
  end

  -- Continue the work a script before this one left. True when none is
  -- left.
  local function settle()
    if META[3] ~= '1' then return true end
    local flat = rc('HGETALL', P .. 'owed')
    for i = 1, #flat, 2 do
      local name, at = flat[i], tonumber(flat[i + 1])
      local r = res(name)
      if r ~= nil then
        DIRTY[name] = at
        NDIRTY = NDIRTY + 1
      end
    end
    return sweep_all()
  end

  -- End session sid: its waiters leave without an outcome (nobody is left
  -- to hear it), all of them first, so that no sweep can grant one; then
  -- its leases come back, as many as the script's share allows (one at
  -- least); then its keys go. True when it is all done; else the session
  -- stays, expired, and the next heartbeat's reaping goes on. The caller
  -- sweeps.
  local function end_session(sid)
    for _, wid in ipairs(rc('SMEMBERS', P .. 'w:' .. sid)) do
      local w = waiter(wid)
      if w ~= nil then dequeue(w) end
    end
    local leases = rc('HGETALL', P .. 'L:' .. sid)
    for i = 2, #leases, 2 do
      if i > 2 and steps >= STEPS then
        rc('ZADD', P .. 'S', 0, sid)
        return false
      end
      release_lease(decode_lease(leases[i]))
      rc('HDEL', P .. 'L:' .. sid, leases[i - 1])
      audit('r ' .. leases[i - 1])
    end
    rc('DEL', P .. 's:' .. sid, P .. 'L:' .. sid, P .. 'w:' .. sid,
      P .. 'in:' .. sid)
    rc('ZREM', P .. 'S', sid)
    audit('e ' .. sid)
    return true
  end

  W = {waiter = waiter, encode_waiter = encode_waiter, leave = leave,
       enqueue = enqueue, sweep = sweep_all, settle = settle,
       fail_unsatisfiable = fail_unsatisfiable, end_session = end_session,
       lease_entry = lease_entry, encode_lease = encode_lease}
  return W
end

-- The sweep, when something may have let a waiter fit.
local function sweep()
  if NDIRTY == 0 then return true end
  return waiting().sweep()
end

-- Continue the work a script before this one left; true when none is
-- left.
local function settle()
  if META[3] ~= '1' then return true end
  return waiting().settle()
end

