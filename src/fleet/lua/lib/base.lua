#!lua
-- The fleet pool's policy, shared by every operation's script: each
-- script is this library (the modules of src/fleet/lua/lib/, this one
-- first, joined by the build) followed by the operation's own body. It is
-- the specification (docs/POLICY.md) ("The waiting policy: FIFO with
-- reservation", "Device pools") carried out on state kept in Redis, so
-- that every process that opens a namespace obeys the same rule as one
-- in-process pool. The in-process implementation is src/queue.c, with
-- placement in src/place.c; a Lua function that carries out one of their
-- functions names it ("-- twin: src/queue.c examine()", see
-- src/fleet/lua/README.md), and a differential test (tests/fleet/) holds
-- the two to the same outcomes.
--
-- Keys. KEYS[1] is the namespace's prefix, "cq:{<namespace>}:"; every key
-- of the namespace starts with it (one hash tag, so that a Redis Cluster
-- keeps a namespace on one slot). P.."meta" holds the counters, the
-- schema version, and in field head what every call reads: "<schema>
-- <staged> <owed> <audit> <quarantine end>"; P.."r:"..name a resource; P.."d:"..name the devices of a
-- device pool (u<i> thousandths used, w<i> held whole, o<i> online, g<i>
-- grants, p<i> peak) and P.."di:"..name their ids; P.."c:"..name the
-- waiters that claim a resource and P.."b:"..name those blocked on it
-- (sorted sets by arrival, members "<waiter> <mode><amount>"),
-- P.."n:"..name the waiters that name it (scored by what they ask, to find
-- those a shrink makes unsatisfiable); P.."Q" every waiter by arrival and
-- P.."W" their records; P.."S" the sessions by expiry, P.."s:"..sid a
-- session, P.."L:"..sid its leases, P.."w:"..sid its waiters and
-- P.."in:"..sid its inbox of outcomes.
--
-- Invariants kept by every script:
-- - Amounts are integers (budget units, thousandths of a device) below
--   2^41, exact in Lua's doubles.
-- - r.used is the sum of what the leases hold; per device, u<i> likewise.
-- - nc, nb and nw count the members of c:, b: and n:.
-- - At the end of a script no waiter is covered by its blocker, unless
--   the namespace owes work (meta owed = 1): then P.."owed" holds the
--   resources still to walk, and the next script walks them first.
-- - A script checks everything before it writes, so that a refusal
--   changes nothing (scripts have no rollback).

-- Per call (set by begin(), below): the key prefix, the calling session
-- and its secret, the script's share of work, whether this is a retry, the
-- caller's host (for names without one) and the arguments.
local P, SID, SECRET, STEPS, RETRY, HOST, ARGS
local ARG0 = 5 -- the operation's own arguments start after this

local call -- redis.call, which a library may take only once it runs
local INF = 1 / 0 -- math.huge: a library may not use globals as it loads
-- The error codes, reply statuses, kinds, SCHEMA, MILLI and the
-- histogram's layout are generated from the C headers (consts.lua, joined
-- right after this module: see src/fleet/lua_consts.c).

local steps
local function rc(...)
  steps = steps + 1
  return call(...)
end

-- An integer's text. Small ones (counts, amounts, ids) are made once and
-- kept: string.format costs more than most of what a call does with them.
local FMT = {}
local function fmt(n)
  local t = FMT[n]
  if t then return t end
  t = string.format('%d', n)
  if n >= 0 and n < 4096 then FMT[n] = t end
  return t
end

-- The number an argument's text says, the other way round: tonumber()
-- costs about as much as a Redis command, and the texts that recur
-- (amounts, counts, resource ids, the script's share) are a few. Not for
-- texts that never come back, such as fencing tokens: they would fill the
-- memo for nothing.
local NUM, NNUM = {}, 0
local function num(s)
  local n = NUM[s]
  if n then return n end
  n = tonumber(s)
  if n and NNUM < 4096 then NUM[s], NNUM = n, NNUM + 1 end
  return n
end

local NONE = {} -- an empty list that no one writes to, for every call
local function min(a, b) if a < b then return a end return b end
local function max(a, b) if a > b then return a end return b end

local NOW
local function now_ms()
  if NOW == nil then
    local t = call('TIME')
    NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return NOW
end

-- The namespace's head, as fields (see begin()): shared by the calls that
-- read the same head, so read, never written.
local META, STAGED, AUDIT
local HEADS, NHEADS = {}, 0 -- heads seen, parsed (a few: they rarely change)

local function split(s)
  local t = {}
  for x in string.gmatch(s, '%S+') do t[#t + 1] = x end
  return t
end

