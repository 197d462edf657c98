-- The waiters this script read (by id; false: none) and changed, written
-- back by finish() (see waiting()).
local WAIT, WLIST = {}, {}

-- --------------------------------------------------------------------------
-- Claimants, offers, coverage
-- --------------------------------------------------------------------------

-- The claimant of r: the oldest waiter with a claim on it, or nil.
-- twin: src/queue.c claimant_item()
local function claimant(r)
  local chain = claim_chain(r, 1)
  return chain[1]
end

-- Units of budget or class r offered to a request of arrival `seq`:
-- everything free, less what the claimant withholds when it is older.
-- twin: src/queue.c budget_offer()
local function offer(r, seq)
  local f = bfree(r)
  local c = claimant(r)
  if c ~= nil and c.seq < seq then f = f - min(f, need_of(r, c.m, c.a)) end
  return f
end

-- twin: src/queue.c covered_at()
local function covered(seq, it)
  -- A quarantined namespace grants nothing: every arrival waits.
  if META[5] ~= '0' then return false end
  local r = res(it.name)
  if r.k == DEVICES then
    local d = devs(r)
    return dev_place(r, d, it.m, it.a, dev_excluded(r, d, seq)) ~= nil
  end
  return need_of(r, it.m, it.a) <= offer(r, seq)
end

-- --------------------------------------------------------------------------
-- Dirty resources: where waiters may have become covered
-- --------------------------------------------------------------------------

-- name -> the arrival after which its blocked waiters must be walked.
local DIRTY, NDIRTY = {}, 0

-- twin: src/queue.c mark_dirty()
local function mark(r, after)
  if r.nb == 0 then return end
  local cur = DIRTY[r.name]
  if cur == nil then
    DIRTY[r.name] = after
    NDIRTY = NDIRTY + 1
  elseif after < cur then
    DIRTY[r.name] = after
  end
end

