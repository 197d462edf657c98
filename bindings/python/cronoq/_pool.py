"""Pools, requests and grants over libcronoq's C API.

The rules of cronoq.h, and how this module keeps them for its callers:

- A cq_req must stay where it is, unchanged, while an attempt made with it
  waits. A Request owns its storage and is complete once constructed; it
  has no method that changes it. Every Grant keeps its Request alive.
- A cq_grant must stay where it is while it waits or holds units, and one
  grant must not be passed to two calls at once (a release and a release,
  an acquire and an acquire). A Grant owns its storage (taken from the
  pool's spares, storage of grants gone before, when there is one). Its
  token list is its gate: it holds one token, idle or held, which whoever
  starts an attempt or releases takes with ``list.pop()``, atomic under the
  GIL, so of two threads that start an attempt, or release, at the same
  moment, exactly one gets it and the other is refused with InvalidState
  before the library is reached. cq_grant_cancel() is the one call that may
  race with the grant's own calls, as the header allows.
- A callback of cq_grant_submit() runs exactly once, on any thread: inside
  the submit call, inside a release or a cancel on another thread, or on
  the pool's timer thread. One module-level trampoline (alive as long as
  the module, so longer than every pool) finds the waiter by the grant's
  address in ``_waiters``, which keeps the waiter, its Grant and so the
  storage alive until the callback has run.
- Cancel safety. A waiter that gives up (asyncio cancelled its task, or an
  exception such as KeyboardInterrupt interrupted the wait) calls
  ``_Waiter.abandon()``. Under the waiter's lock it either finds the outcome
  already delivered, or cancels; when cq_grant_cancel() returns CQ_ESTATE
  the attempt was decided (granted) on another thread and its callback is
  on its way, so the waiter is marked abandoned and the callback releases
  the grant. Either way a grant that won the race is released exactly once,
  by whoever sees the outcome second.
- Waiting. On threads other than the main one, a wait blocks in
  cq_grant_acquire() with the GIL released, and the library's policy for
  blocked threads applies (running threads may take free units; a waiter
  that has waited long enough is handed them directly). On the main thread
  a wait is a callback wait on a threading.Event instead, because a thread
  blocked in C cannot run signal handlers: there, Ctrl-C (KeyboardInterrupt)
  cancels the wait. asyncio waits are callback waits whose outcome is
  passed to the loop with call_soon_threadsafe().
- Destroying a pool while any call is in progress is undefined behaviour,
  so Pool has no destroy method: close() fails the waiters and refuses new
  attempts, and the C pool is freed when the last Python reference to it
  goes (every Request and Grant holds one, and a thread inside a call holds
  one through its frame).
- Releasing has one path: Grant._release() takes the held token and
  Grant._give_back() makes the one call that returns units
  (cq_grant_release()); an abandoned attempt that won and a grant
  collected while it holds come back through _give_back() too.
- Lost leases (fleet pools). Every fleet pool gets the module-level event
  hook _on_event(); each attempt on a fleet pool writes a fresh key into
  its grant's `data` (the storage's first word) and files the grant under
  it, weakly, in ``_leases``, so that CQ_EVENT_LOST, whose `data` is the
  grant's, finds the attempt it is about and no later one. A held grant
  found not held (a stopped process is told only as it resumes, but is
  not held from its deadline on), and a release answered CQ_ESTATE, count
  as lost too. A lost grant raises LeaseLost from its release (the exit of
  its ``with`` block) and from every call that needs its units.
- A pool belongs to the process that created it. In a child made by fork()
  it refuses every attempt with NotSupported (the child's copy is not
  shared with anyone, so its limits would mean nothing).
"""

from __future__ import annotations

import asyncio
import ctypes
import decimal
import itertools
import math
import numbers
import os
import sys
import threading
import time
import traceback
import warnings
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generator, List, Optional, Tuple, Union

from . import _lib
from ._errors import (
    CronoqError,
    InvalidArgument,
    InvalidState,
    LeaseLost,
    NotSupported,
    OutOfRange,
    WrongPool,
    error,
)

api = _lib.api
_acquire = api.cq_grant_acquire

_EINVAL = -1
_EBUSY = -3
_ETIMEDOUT = -4
_ECANCELED = -5
_ENEVER = -7
_ENOENT = -8
_EINUSE = -10
_ESTATE = -11
_ERANGE = -13
_EPARSE = -16
_EUNAVAILABLE = -17
_EACCES = -18

_main_ident = threading.main_thread().ident

# Bumped in every child made by fork(); a pool remembers the value it was
# made with.
_generation = 0


def _after_fork_in_child() -> None:
    global _generation
    _generation += 1


os.register_at_fork(after_in_child=_after_fork_in_child)

# Amounts of a request: what a dict value may be, and its text.
Amount = Union[int, float, decimal.Decimal, str]
RequestLike = Union["Request", str, Mapping[str, Any]]


def _fail(rc: int, context: str) -> CronoqError:
    return error(rc, "%s: %s" % (context, _lib.strerror(rc)))


def _bytes(text: str, what: str, shown: Optional[str] = None) -> bytes:
    """`text` for C; `shown` is what a message says of it (a URL without its
    password, "***" for a password)."""
    if not isinstance(text, str):
        raise TypeError("%s must be a str, not %s" % (what, type(text).__name__))
    b = text.encode()
    if b"\0" in b:  # a C string would silently end there
        raise InvalidArgument(_EINVAL, "%s %r contains a NUL character"
                              % (what, text if shown is None else shown))
    return b


def _int64(value: Any, what: str) -> int:
    # ctypes would wrap an int beyond 64 bits silently; refuse it here.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__))
    value = int(value)
    if not -(2**63) <= value < 2**63:
        raise OutOfRange(_ERANGE, "%s %d is out of range" % (what, value))
    return value


def _seconds(value: Any, what: str) -> Optional[float]:
    """None, or a number of seconds >= 0 (infinity is None)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s must be a number of seconds or None" % what)
    value = float(value)
    if math.isnan(value) or value < 0:
        raise InvalidArgument(_EINVAL, "%s must be >= 0 seconds, not %r" % (what, value))
    return None if math.isinf(value) else value


def _deadline_ms(timeout: Optional[float]) -> int:
    """The absolute deadline on the library's clock for a wait of `timeout`
    seconds from now, rounded up to the millisecond."""
    if timeout is None:
        return _lib.NEVER
    d = api.cq_now() + math.ceil(timeout * 1000)
    return d if d < _lib.NEVER else _lib.NEVER


def _amount_text(value: Amount, resource: str) -> bytes:
    """The library's text for an amount: "2", "0.5". An integral float is
    written as an integer, so {"db": 2.0} means 2 units and {"gpu": 1.0}
    one whole device; other floats are written exactly as Python shows them
    (0.0005 stays 0.0005 and is refused by the library, never rounded)."""
    if isinstance(value, bool):
        raise TypeError("amount of %r must be a number, not bool" % resource)
    if isinstance(value, numbers.Integral):
        return str(int(value)).encode()
    if isinstance(value, float):
        if not math.isfinite(value):
            raise OutOfRange(_ERANGE, "amount of %r is %r" % (resource, value))
        if value.is_integer():
            return str(int(value)).encode()
        return format(decimal.Decimal(repr(value)), "f").encode()
    if isinstance(value, decimal.Decimal):
        return format(value, "f").encode()
    if isinstance(value, str):
        return _bytes(value, "amount of %r" % resource)
    raise TypeError(
        "amount of %r must be an int, float, Decimal or str, not %s"
        % (resource, type(value).__name__)
    )


def _detect_opts(nvidia_smi: Optional[str], timeout: Optional[float]) -> Optional[Any]:
    if nvidia_smi is None and timeout is None:
        return None
    opts = _lib.DetectOpts()
    if nvidia_smi is not None:
        opts.nvidia_smi = _bytes(nvidia_smi, "nvidia_smi")
    t = _seconds(timeout, "timeout")
    if t is not None:
        opts.timeout_ms = max(1, math.ceil(t * 1000))
    return opts


def _shown_url(url: str) -> str:
    """`url` with its password, if it has one, as "***": for messages. The
    userinfo ends where libcronoq_fleet's URL parser ends it (url.c): a
    password may hold '@' and '/', so at the last '@' of a redis:// URL,
    and of a unix:// URL that does not start with its path at the last '@'
    followed by '/' (else its last '@')."""
    scheme, sep, rest = url.partition("://")
    at = rest.rfind("@")
    if scheme == "unix":
        before_path = rest.rfind("@/")
        at = -1 if rest.startswith("/") else before_path if before_path >= 0 else at
    user, colon, _ = rest[:max(at, 0)].partition(":")
    if not sep or at < 0 or (not colon and not user):
        return url
    # "user:password@" or "password@" (a lone word is the password)
    return "%s://%s@%s" % (scheme, user + ":***" if colon else "***", rest[at + 1:])


def _set_strings(opts: "_lib.FleetOpts", **values: Optional[str]) -> List[bytes]:
    """Set the string fields of cq_fleet_opts that are not None; returns
    the bytes, which the caller keeps alive until the call returns."""
    keep = []
    for field, value in values.items():
        if value is not None:
            keep.append(_bytes(value, field, "***" if field == "password" else None))
            setattr(opts, field, keep[-1])
    return keep


def _set_times(opts: "_lib.FleetOpts", **seconds_of: Optional[float]) -> None:
    """Set the millisecond fields of cq_fleet_opts (field_ms=seconds) that
    are not None."""
    for field, time_s in seconds_of.items():
        seconds = _seconds(time_s, field[:-3])
        if seconds is not None:
            # 0 would mean "the default": the shortest time is 1 ms.
            setattr(opts, field, max(1, math.ceil(seconds * 1000)))


def _fleet_library(context: str) -> Any:
    """The fleet library's functions, or NotSupported saying what was tried."""
    try:
        return _lib.fleet()
    except _lib.FleetMissing as e:
        raise NotSupported(detail="%s: %s" % (context, e)) from None


def fleet_library() -> str:
    """The name of this library's functions on a Redis server,
    ``cronoq_<version>`` (cq_fleet_library()): what an operator finds in
    ``FUNCTION LIST``. Raises NotSupported without libcronoq_fleet."""
    return _fleet_library("fleet_library()").cq_fleet_library().decode()


def fleet_load(
    url: str,
    replace: bool = False,
    *,
    username: Optional[str] = None,
    password: Optional[str] = None,
    timeout: Optional[float] = None,
) -> str:
    """The operator's step (cq_fleet_load(), as ``cronoq load URL``): connect
    to the Redis server at `url` as an operator's user and load this
    library's functions, which every fleet pool then runs. Once per
    server, and again after it lost its functions (a restart without
    persistence, FUNCTION FLUSH); application users need no right to load
    code. `replace` loads over a library of the same name whose code is
    not this library's. It also checks the server's maxmemory-policy.
    `username`, `password` (when the URL has none) and `timeout` (seconds,
    5 by default) are as for Pool.connect(). The GIL is released.

    Returns the library's message, saying what it did ("loaded", or
    already there). Raises NameInUse (a library of this name with other
    code is there: load again with replace=True), AccessDenied (the server
    refused the user, or its FUNCTION LOAD), InvalidArgument (a bad URL,
    or a maxmemory-policy that evicts), Unavailable (not reached) or
    NotSupported (no libcronoq_fleet); each message names the URL, its
    password hidden.
    """
    url_b = _bytes(url, "url", _shown_url(url) if isinstance(url, str) else None)
    shown = _shown_url(url)
    fleet = _fleet_library("fleet_load(%r)" % shown)
    opts = _lib.FleetOpts()
    keep = _set_strings(opts, username=username, password=password)
    _set_times(opts, timeout_ms=timeout)
    flags = _lib.FLEET_LOAD_REPLACE if replace else 0
    rc = fleet.cq_fleet_load(url_b, ctypes.byref(opts), flags)
    del keep  # alive until the call returned
    detail = fleet.cq_fleet_error().decode().replace(url, shown)
    if rc != 0:
        raise error(rc, "fleet_load(%r): %s" % (shown, detail or _lib.strerror(rc)))
    return detail


def fleet_acl(namespace: str) -> str:
    """The ACL rules a Redis user of fleet namespace `namespace` needs, and
    nothing more (cq_fleet_acl(), as ``cronoq acl``): for ``ACL SETUSER
    <user> on ><password> <rules>``; a database other than 0 needs
    ``+select`` too. Raises InvalidArgument for a bad namespace and
    NotSupported without libcronoq_fleet."""
    ns_b = _bytes(namespace, "namespace")
    fleet = _fleet_library("fleet_acl(%r)" % namespace)
    size = _lib.FLEET_ACL_MAX
    while True:
        buf = ctypes.create_string_buffer(size)
        rc = fleet.cq_fleet_acl(ns_b, buf, size)
        if rc == 0:
            return buf.value.decode()
        if rc == _ERANGE and size < 65536:
            size *= 4
            continue
        raise _fail(rc, "fleet_acl(%r)" % namespace)


def _no_device(name: str, index: int) -> CronoqError:
    return error(_ENOENT, "device pool %r has no device %d" % (name, index))


def _forked(pool: "Pool") -> NotSupported:
    return NotSupported(
        detail="this pool was created in process %d, before a fork; a pool "
        "belongs to the process that created it: create one in each worker "
        "process (or, once they exist, share a fleet pool with Pool.connect())"
        % pool._pid
    )


# ---------------------------------------------------------------------------
# Snapshots
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolStats:
    """A consistent snapshot of the pool as a whole (cq_pool_stats)."""

    waiting: int  #: requests waiting now
    waited_grants: int  #: grants to requests that had to wait, ever
    wakeups: int  #: blocked threads woken: one per outcome, or to try again
    events_dropped: int  #: events the hook fell too far behind for
    overdue: int  #: grants that outlived their hold limit, ever
    backfilled: int  #: grants made by backfill, ever
    late_heads: int  #: oldest waiters granted after their shadow time, ever
    converted: int  #: blocking acquires that outwaited the barging window


@dataclass(frozen=True)
class FleetStats:
    """What this process's fleet pool met (cq_fleet_stats), for monitoring
    its failures; no round trip. The counters are also in metrics(), as
    cronoq_fleet_<name>_total."""

    sessions: int  #: sessions opened: 1, and one more per loss
    leases_lost: int  #: leases this process lost (its grants then hold nothing)
    state_losses: int  #: times the namespace was found recreated by the server
    rollbacks: int  #: failovers detected (a lease missing, a counter behind)
    reconnects: int  #: connections made again after one broke
    unavailable: int  #: calls that failed with Unavailable
    deferred: int  #: releases applied later by a heartbeat
    reconciled: int  #: leases and waiters of lost replies, ended by a heartbeat
    max_fence: int  #: the highest fencing token this process saw
    quarantine_ms: int  #: the namespace's quarantine left, as last seen
    lost_deadline_ms: int  #: the local deadline of the last session lost; 0 if none
    #: True when the server's maxmemory-policy could not be read at open
    #: (the user's ACL allows neither CONFIG GET nor INFO): an operator
    #: checks it (``cronoq load`` does)
    settings_unchecked: bool


@dataclass(frozen=True)
class WaitStats:
    """Waiting times of the requests granted on a resource."""

    count: int  #: grants measured: every grant, 0 ms when at once
    p50_ms: int  #: median, from a histogram (within 1/8 of the value)
    p99_ms: int  #: 99th percentile, likewise
    max_ms: int  #: exact
    sum_ms: int  #: of all the waits: sum_ms / count is the mean


@dataclass(frozen=True)
class ResourceStats:
    """A consistent snapshot of one resource (cq_resource_stats). For a
    device pool the amounts are thousandths of a device over all its
    devices; for a class they count workers."""

    name: str
    kind: str  #: "budget", "devices" or "class"
    lone: bool  #: the lone-request allowance is on
    capacity: int
    in_use: int  #: held by grants
    withheld: int  #: free, but set aside (device pools: on reserved devices)
    peak: int  #: highest in_use seen
    waiting: int  #: waiting requests that name it
    grants: int  #: grants that included it, ever
    timeouts: int  #: waiters that named it and timed out, ever
    cancellations: int  #: waiters that named it and were cancelled
    wait: WaitStats
    devices: int  #: device pools: devices
    online: int  #: device pools: of which online


@dataclass(frozen=True)
class DeviceStats:
    """A snapshot of one device of a device pool (cq_device_stats)."""

    id: str  #: physical id or UUID
    index: int  #: position in the pool, 0-based
    online: bool  #: takes new work
    whole: bool  #: held whole by one grant
    reserved: bool  #: reserved by a waiter
    used_milli: int  #: thousandths held
    peak_milli: int  #: highest used_milli seen
    grants: int  #: grants placed on this device, ever


@dataclass(frozen=True)
class GpuList:
    """What GPU detection found: the device ids, and where they came from
    ("CRONOQ_NUM_GPUS", "CUDA_VISIBLE_DEVICES", "nvidia-smi" or "none")."""

    ids: Tuple[str, ...]
    source: str


_KINDS = {_lib.KIND_BUDGET: "budget", _lib.KIND_DEVICES: "devices", _lib.KIND_CLASS: "class"}


def _resource_stats(s: "_lib.ResourceStats") -> ResourceStats:
    w = s.wait
    return ResourceStats(
        name=s.name.decode(),
        kind=_KINDS.get(s.kind, str(s.kind)),
        lone=bool(s.flags & _lib.BUDGET_LONE),
        capacity=s.capacity,
        in_use=s.in_use,
        withheld=s.withheld,
        peak=s.peak,
        waiting=s.waiting,
        grants=s.grants,
        timeouts=s.timeouts,
        cancellations=s.cancellations,
        wait=WaitStats(w.count, w.p50_ms, w.p99_ms, w.max_ms, w.sum_ms),
        devices=s.devices,
        online=s.online,
    )


def detect_gpus(nvidia_smi: Optional[str] = None, timeout: Optional[float] = None) -> GpuList:
    """Find this machine's GPUs, first match wins:

    1. CRONOQ_NUM_GPUS, an explicit count: ids "0".."n-1";
    2. CUDA_VISIBLE_DEVICES: its comma-separated entries, indices or UUIDs,
       become the ids (an empty value means no GPUs);
    3. the output of ``nvidia-smi -L``, run with a timeout (5 s unless
       `timeout` says otherwise): the GPUs' UUIDs.

    No GPU found is an empty list; a missing, failing or hung nvidia-smi
    means no GPUs, not an error. `nvidia_smi` is the command to run (default:
    $CRONOQ_NVIDIA_SMI, else "nvidia-smi" in PATH). Raises ParseError for an
    unparsable variable or output, naming it. The GIL is released while
    detection runs.
    """
    out = _lib.GpuList()
    opts = _detect_opts(nvidia_smi, timeout)
    rc = api.cq_gpu_detect(ctypes.byref(out), ctypes.byref(opts) if opts else None)
    try:
        if rc != 0:
            raise error(rc, out.error.decode() or "GPU detection: %s" % _lib.strerror(rc))
        ids = tuple(out.ids[i].decode() for i in range(out.count))
        return GpuList(ids=ids, source=out.source.decode() if out.source else "none")
    finally:
        api.cq_gpu_list_free(ctypes.byref(out))


# ---------------------------------------------------------------------------
# Waiting on a callback
# ---------------------------------------------------------------------------

_waiters: Dict[int, "_Waiter"] = {}


@_lib.GRANT_CB
def _trampoline(grant_address: int, status: int) -> None:
    waiter = _waiters.pop(grant_address, None)
    if waiter is not None:
        waiter.deliver(status)


class _Waiter:
    """One callback attempt of a Grant, from submit until its outcome is
    consumed. ``status`` is None until the callback has run; ``abandoned``
    says the waiting side has gone, and ``ended`` that the side which saw
    the outcome second has ended the attempt (released it if it won), which
    happens once."""

    __slots__ = ("grant", "lock", "status", "abandoned", "ended")

    def __init__(self, grant: "Grant") -> None:
        self.grant = grant
        # Re-entrant: a cancel made under the lock may run the callback
        # on this very thread before it returns.
        self.lock = threading.RLock()
        self.status: Optional[int] = None
        self.abandoned = False
        self.ended = False

    def submit(self, deadline_ms: int) -> int:
        g = self.grant
        key = ctypes.addressof(g._g)
        _waiters[key] = self
        rc = g._pool._api.cq_grant_submit(g._pool._h, g._g, g._req._r, deadline_ms, _trampoline)
        if rc < 0:  # the callback will never run
            _waiters.pop(key, None)
        return rc

    def notify(self) -> bool:
        """Tell the waiting side; False when nobody can be told."""
        raise NotImplementedError

    def deliver(self, status: int) -> None:
        """The callback: runs exactly once, on any thread."""
        with self.lock:
            self.status = status
            if not self.abandoned and self.notify():
                return  # the waiting side consumes it, or abandons it later
            self.ended = True
        self.grant._end_abandoned(status)

    def abandon(self) -> None:
        """The waiting side gives up. Afterwards nothing of this attempt is
        held, or it will be released as soon as its callback runs."""
        with self.lock:
            if self.status is None:
                g = self.grant
                g._pool._c_cancel(g._pool._h, g._g)
                if self.status is None:
                    # Decided on another thread (CQ_ESTATE), or cancelled
                    # with the callback queued behind the one this thread
                    # runs: the callback ends the attempt.
                    self.abandoned = True
                    return
            if self.ended:  # nobody could be told, so the callback ended it
                return
            self.ended = True
            status = self.status
        self.grant._end_abandoned(status)


class _ThreadWaiter(_Waiter):
    __slots__ = ("event",)

    def __init__(self, grant: "Grant") -> None:
        super().__init__(grant)
        self.event = threading.Event()

    def notify(self) -> bool:
        self.event.set()
        return True


class _LoopWaiter(_Waiter):
    __slots__ = ("loop", "fut", "loop_thread")

    def __init__(self, grant: "Grant", loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(grant)
        self.loop = loop
        self.fut = loop.create_future()
        self.loop_thread = threading.get_ident()

    def notify(self) -> bool:
        try:
            if threading.get_ident() == self.loop_thread:
                self.loop.call_soon(self._resolve)
            else:
                self.loop.call_soon_threadsafe(self._resolve)
        except RuntimeError:  # the loop is closed: nobody will consume it
            return False
        return True

    def _resolve(self) -> None:
        if not self.fut.done():  # a cancelled task cancelled its future
            self.fut.set_result(self.status)


# ---------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------


class Request:
    """A set of (resource, amount) pairs for one pool, granted all at once or
    not at all. Built once and reused for any number of attempts, also by
    several threads at once.

    `spec` is a request spec, ``"gpu=0.5,warehouse-db=1,class=predict"``
    (blanks around items and ``=`` allowed), or a dict,
    ``{"gpu": 0.5, "warehouse-db": 1}``: units of a budget as an int, and
    for a device pool a fraction of one device (0.5) or whole devices (2).
    The key "class" (or `class_`) gives the request a class: each grant of
    it counts as one worker of the class. `hold_limit` (seconds) declares
    that every grant of it is released within that time; backfill pools let
    such requests use capacity withheld for an older waiter.

    A request that can never be granted, because an amount exceeds its
    resource's capacity now (and the budget has no lone-request allowance),
    is refused here with NeverFits, the message naming the resource, the
    amount and the capacity: ``request 'cpu=5' can never be granted:
    it requires cpu:5 but the pool only has 4``. Every acquire checks
    again, since capacities can change (a request built before a capacity
    shrank fails then with NeverFits). A request cannot be changed once
    made: make another. Raises UnknownResource, OutOfRange, NameInUse (a
    resource named twice), TooMany, ParseError or InvalidArgument with the
    library's message, e.g. ``request spec: expected '=' after "gpu" at
    column 4``.
    """

    __slots__ = ("_pool", "_r", "_text", "__weakref__")

    def __init__(
        self,
        pool: "Pool",
        spec: Union[str, Mapping[str, Any], None] = None,
        *,
        class_: Optional[str] = None,
        hold_limit: Optional[float] = None,
    ) -> None:
        if not isinstance(pool, Pool):
            raise TypeError("Request needs a Pool, not %s" % type(pool).__name__)
        self._make(pool, spec, class_, hold_limit)
        self._check_fits(spec)

    @classmethod
    def _unchecked(cls, pool: "Pool", spec: Union[str, Mapping[str, Any], None]) -> "Request":
        """A request made on the way to an acquire (or headroom(),
        validate()), which reports a request that never fits itself."""
        r = cls.__new__(cls)
        r._make(pool, spec, None, None)
        return r

    def _make(
        self,
        pool: "Pool",
        spec: Union[str, Mapping[str, Any], None],
        class_: Optional[str],
        hold_limit: Optional[float],
    ) -> None:
        pool._check_process()
        self._pool = pool
        r = self._r = _lib.ReqStorage()
        rc = pool._api.cq_req_init(r, pool._h)
        if rc != 0:
            raise _fail(rc, "request")
        if isinstance(spec, str):
            self._text = spec
            rc = pool._api.cq_req_parse(r, _bytes(spec, "request spec"))
            if rc != 0:
                raise self._error(rc)
        elif isinstance(spec, Mapping):
            parts = []
            for resource, amount in spec.items():
                if resource == "class":
                    if class_ is not None and class_ != amount:
                        raise InvalidArgument(
                            _EINVAL, "request names two classes: %r and %r" % (amount, class_)
                        )
                    class_ = amount
                    continue
                text = _amount_text(amount, resource)
                rc = pool._api.cq_req_add_str(r, _bytes(resource, "resource name"), text)
                if rc != 0:
                    raise self._error(rc)
                parts.append("%s=%s" % (resource, text.decode()))
            if class_ is not None:
                parts.append("class=%s" % class_)
            self._text = ",".join(parts)
        elif spec is None:
            self._text = "class=%s" % class_ if class_ is not None else ""
        else:
            raise TypeError("a request spec is a str or a dict, not %s" % type(spec).__name__)
        if class_ is not None:
            if isinstance(spec, str):
                self._text += ",class=%s" % class_ if self._text else "class=%s" % class_
            rc = pool._api.cq_req_set_class(r, _bytes(class_, "class name"))
            if rc != 0:
                raise self._error(rc)
        limit = _seconds(hold_limit, "hold_limit")
        if limit is not None:
            rc = pool._api.cq_req_set_hold_limit(r, math.ceil(limit * 1000))
            if rc != 0:
                raise self._error(rc)

    def _check_fits(self, spec: Any) -> None:
        """NeverFits now, rather than at the first acquire, for a request
        that exceeds a capacity. The library decides (cq_req_headroom()
        answers CQ_ENEVER) and words it (cq_tasks_validate(), whose
        messages say `task "<name>" requires db:12 but the pool only has
        10`, one per resource). Any other answer (a fleet pool's server out
        of reach) is left to the acquire to report."""
        pool = self._pool
        copies = ctypes.c_int64()
        if pool._api.cq_req_headroom(pool._h, self._r, ctypes.byref(copies)) != _ENEVER:
            return
        prefix = 'task "request" '
        found = [p[len(prefix):] if p.startswith(prefix) else p
                 for p in pool._problems([(b"request", self)])]
        raise error(_ENEVER, "request %r can never be granted: it %s"
                    % (spec, "; it ".join(found) or "exceeds a capacity"))

    def _items(self) -> List[Tuple[str, str]]:
        """(resource, amount) of each item of the request's text, the class
        as ("class", name): for messages."""
        items = []
        for item in self._text.split(","):
            name, _, amount = item.partition("=")
            if name.strip():
                items.append((name.strip(), amount.strip()))
        return items

    def _error(self, rc: int) -> CronoqError:
        return error(rc, api.cq_req_error(self._r).decode())

    @property
    def pool(self) -> "Pool":
        """The pool the request was made for."""
        return self._pool

    def __len__(self) -> int:
        """Number of resources the request names (its class included)."""
        return api.cq_req_count(self._r)

    def __repr__(self) -> str:
        return "Request(%r)" % self._text


# ---------------------------------------------------------------------------
# Grants
# ---------------------------------------------------------------------------


_IDLE = 0  # Grant._tok: no attempt under way
_HELD = 1  # Grant._tok: units held
_IDLE_TOKEN = [_IDLE]
_HELD_TOKEN = [_HELD]
_DETAILED = (_ENEVER, _ENOENT)  # outcomes whose detail the grant holds
# A fleet pool's grant also explains a try refused by a quarantine (Busy,
# with the time left) and the server's failures; its message is cleared at
# the start of every attempt, so it is never an earlier attempt's.
_DETAILED_FLEET = _DETAILED + (_EBUSY, _EUNAVAILABLE, _EACCES)


def _in_use() -> InvalidState:
    return InvalidState(_ESTATE, "this grant is in use: its attempt waits or holds units")


def _not_held() -> InvalidState:
    return InvalidState(_ESTATE, "this grant holds nothing: released already, or never granted")


# ---------------------------------------------------------------------------
# Leases of fleet pools
# ---------------------------------------------------------------------------


class _Lease:
    """What a fleet pool's grant knows of the lease of its current attempt:
    the key its storage's `data` carries into the library's events, whether
    the lease was lost, the library's words for why, and the Event a holder
    may wait on (made when first asked for)."""

    __slots__ = ("key", "lost", "why", "event")

    def __init__(self, key: int) -> None:
        self.key = key
        self.lost = False
        self.why = ""
        self.event: Optional[threading.Event] = None


# key -> the Grant whose current attempt has that key. Weak, so that a held
# grant that is dropped is still collected (and released by __del__).
_leases: "weakref.WeakValueDictionary[int, Grant]" = weakref.WeakValueDictionary()
_lease_keys = itertools.count(1)
_lost_lock = threading.Lock()


@_lib.EVENT_FN
def _on_event(event: Any, arg: Any) -> None:
    """The event hook of every fleet pool (module-level, so it outlives
    them): CQ_EVENT_LOST tells the grant whose key its `data` carries. The
    library calls it with none of its locks held, on whichever thread
    delivers (its background thread, or one that used the pool)."""
    ev = event.contents
    if ev.type == _lib.EVENT_LOST and ev.data:
        grant = _leases.get(ev.data)
        if grant is not None:
            grant._mark_lost(ev.data)


class Grant:
    """One attempt at a request and, once granted, the units it holds.

    Pool.acquire() waits and returns a held Grant; so do Pool.try_acquire()
    (without waiting) and ``await pool.acquire_async()``. A held grant is a
    context manager whose exit releases it, on every path, exceptions
    included; entering it returns it as it is::

        with pool.acquire({"db": 1}, timeout=5.0) as grant:
            run_task()

        grant = pool.acquire({"db": 1}, timeout=5.0)   # held from here
        try:
            run_task()
        finally:
            grant.release()

    Pool.lazy_acquire() returns one that holds nothing yet: entering it (or
    wait()) acquires, with the timeout given there, and another thread may
    cancel() its wait. Releasing returns every unit at once, exactly once;
    a grant can be used for another attempt once released or finished. A
    held grant that is garbage-collected without being released (dropped
    without ``with`` or release()) gives its units back, with a
    ResourceWarning.

    On a fleet pool a held grant can lose its lease (this process stopped
    or cut off from the server longer than its TTL): ``lost`` and
    ``lost_event`` say so, Pool.on_lease_lost is called, and leaving the
    ``with`` block, release() and the calls that need the units raise
    LeaseLost. A loss is never silent.
    """

    # _tok is the gate: one token, _IDLE or _HELD, taken with list.pop()
    # (atomic under the GIL) by whoever starts an attempt or releases, and
    # put back when that ends. It is empty while an attempt is under way.
    # _lease is None on an in-process pool (and before a fleet pool's first
    # attempt).
    __slots__ = ("_pool", "_req", "_g", "_timeout", "_tok", "_lease", "__weakref__")

    def __init__(self, pool: "Pool", req: Request, timeout: Optional[float] = None) -> None:
        self._pool = pool
        self._req = req
        spare = pool._spare
        try:  # storage of grants gone before, idle, of this pool
            self._g = spare.pop() if spare else _lib.GrantStorage()
        except IndexError:  # another thread took the last one meanwhile
            self._g = _lib.GrantStorage()
        self._timeout = timeout
        self._tok = [_IDLE]
        self._lease: Optional[_Lease] = None

    # -- the attempt --------------------------------------------------------

    def _start(self) -> int:
        """Start an attempt with a try: 0 when the grant now holds units
        (granted at once, or held already), else the try's code, the attempt
        still under way. InvalidState while another attempt is under way."""
        pool = self._pool
        if pool._gen != _generation:
            raise _forked(pool)
        tok = self._tok
        try:
            if tok.pop() != _IDLE:
                tok.append(_HELD)
                return 0
        except IndexError:
            raise _in_use() from None
        if pool._fleet is not None:
            self._watch()
        rc = pool._c_try(pool._h, self._g, self._req._r)
        if rc == 0:
            tok.append(_HELD)
        return rc

    def __enter__(self) -> "Grant":
        """Enter a held grant as it is (from acquire(), try_acquire(), wait()
        or an await); acquire an idle one (from lazy_acquire(), or released
        before), waiting up to the timeout it was made with. Either way the
        exit releases it. Raises LeaseLost for a held grant whose lease was
        lost (fleet pools), which it leaves idle."""
        if self._tok != _HELD_TOKEN:
            rc = self._start()
            if rc != 0:
                return self._wait(rc)
        if self._lease is not None and self._is_lost():
            self._release()  # raises LeaseLost
        return self

    def wait(self) -> "Grant":
        """Acquire an idle grant without a ``with`` block: wait (up to the
        timeout it was made with) until granted, and return it, which the
        caller must release(). Raises Timeout, Cancelled, Closed, NeverFits,
        ..., InvalidState when the grant's attempt is under way or holds, and
        LeaseLost when it held and lost its lease."""
        if self._tok == _HELD_TOKEN:
            self._check_lease()
            raise _in_use()
        return self.__enter__()

    def _wait(self, rc: int) -> "Grant":
        """After a try that returned `rc`: wait if it was busy, else fail."""
        waited = 0.0
        if rc == _EBUSY:
            pool = self._pool
            timeout = self._timeout
            if timeout == 0:
                rc = _ETIMEDOUT  # a deadline already past: one attempt
            else:
                t0 = time.monotonic()
                if threading.get_ident() != _main_ident:
                    rc = _acquire(pool._h, self._g, self._req._r,
                                  _deadline_ms(timeout))  # no GIL
                else:
                    rc = self._wait_on_event(_deadline_ms(timeout))
                if rc == 0:
                    self._tok.append(_HELD)
                    return self
                waited = time.monotonic() - t0
        raise self._end_failed(rc, waited)

    def _end_failed(self, rc: int, waited: float = 0.0) -> CronoqError:
        # An in-process pool writes the grant's message for two outcomes
        # only, and after any other it may still hold an earlier attempt's;
        # a fleet pool's (cleared as each attempt starts) for more.
        detailed = _DETAILED if self._pool._fleet is None else _DETAILED_FLEET
        if rc == _ETIMEDOUT:
            detail = self._timed_out(waited)
        else:
            detail = api.cq_grant_error(self._g).decode() if rc in detailed else ""
        self._to_idle()
        return error(rc, detail)

    def _timed_out(self, waited: float) -> str:
        """What a Timeout says: the request, how long it waited, and (on an
        in-process pool, where it costs no round trip) what its resources
        hold now."""
        timeout = self._timeout
        if timeout == 0:
            how = "was not granted at once (timeout=0: one try, no wait)"
        elif timeout is None:  # no deadline of ours: the library's own
            how = "was not granted (waited %.3f s)" % waited
        else:
            how = "was not granted within its timeout of %g s (waited %.3f s)" % (
                timeout, waited)
        return "request %r %s: %s%s" % (self._req._text, how, _lib.strerror(_ETIMEDOUT),
                                        self._pool._usage(self._req))

    def _end_abandoned(self, status: int) -> None:
        """End an attempt whose waiting side has gone: release it if it won."""
        if status == 0:
            self._give_back(tell=False)
        self._to_idle()

    def _to_idle(self) -> None:
        """The attempt is over and nothing is held: the token goes back."""
        lease = self._lease
        if lease is not None:
            _leases.pop(lease.key, None)
        self._tok.append(_IDLE)

    def _wait_on_event(self, deadline_ms: int) -> int:
        waiter = _ThreadWaiter(self)
        rc = waiter.submit(deadline_ms)
        if rc < 0:
            return rc
        try:
            waiter.event.wait()  # interruptible by signals, GIL released
        except BaseException:
            waiter.abandon()
            raise
        return waiter.status  # type: ignore[return-value]

    async def _enter_async(self) -> "Grant":
        rc = self._start()
        if rc == 0:
            if self._lease is not None and self._is_lost():
                self._release()  # raises LeaseLost
            return self
        waited = 0.0
        if rc == _EBUSY:
            if self._timeout == 0:
                rc = _ETIMEDOUT
            else:
                try:
                    waiter = _LoopWaiter(self, asyncio.get_running_loop())
                except BaseException:
                    self._to_idle()
                    raise
                t0 = time.monotonic()
                rc = waiter.submit(_deadline_ms(self._timeout))
                if rc == 0:
                    try:
                        rc = await waiter.fut
                    except BaseException:  # the task was cancelled
                        waiter.abandon()
                        raise
                waited = time.monotonic() - t0
            if rc == 0:
                self._tok.append(_HELD)
                return self
        raise self._end_failed(rc, waited)

    async def __aenter__(self) -> "Grant":
        """``async with`` a grant: as ``with``, waiting on the loop."""
        return await self._enter_async()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._release()

    def cancel(self) -> bool:
        """Cancel the attempt under way, from any thread. Returns True when it
        cancelled a wait: the waiting side raises Cancelled and nothing is
        held. Returns False when there was no wait to cancel: no attempt
        under way, or it was granted first (the cancel lost the race; the
        holder keeps the grant and releases it as usual), or it failed."""
        pool = self._pool
        tok = self._tok
        while not tok:  # an attempt (or a release) is under way
            if pool._c_cancel(pool._h, self._g) == 0:
                return True
            # CQ_ESTATE: the attempt is not in the queue (yet, or any more:
            # it is trying, entering, or its outcome is being recorded on
            # another thread); each of these soon ends.
            time.sleep(0.0002)
        return False

    # -- releasing: one path ------------------------------------------------

    def release(self) -> None:
        """Release the held grant: every unit returns to the pool at once, and
        the waiters that now fit are granted. Raises InvalidState when it
        holds nothing (released already, or never granted), and LeaseLost
        when its lease was lost (fleet pools): the grant is idle afterwards
        either way."""
        if self._release() is False:
            raise _not_held()

    def _release(self, *exc_info: Any) -> Optional[bool]:
        """Every release goes through here (release(), and as __exit__ the
        exit of ``with``; that of ``async with``): take the held token, give
        the units back, put an idle token back. Returns None, or False when
        the grant held nothing, never a true value: as __exit__, that would
        swallow the block's exception. Raises LeaseLost when the lease was
        lost, the grant then idle; and, where a fleet pool could not release
        (its server out of reach with nowhere to defer the release to), the
        library's error, the grant still held for a release again."""
        tok = self._tok
        try:
            if tok.pop() != _HELD:
                tok.append(_IDLE)
                return False
        except IndexError:  # an attempt (or another release) is under way
            return False
        rc = self._give_back()
        if rc == 0:
            tok.append(_IDLE)
            return None
        if rc == _ESTATE and self._lease is not None:
            tok.append(_IDLE)
            raise self._lost_error()
        tok.append(_HELD)
        raise error(rc, api.cq_grant_error(self._g).decode())

    __exit__ = _release

    def _give_back(self, tell: bool = True) -> int:
        """cq_grant_release(), the one call that returns a grant's units: 0,
        or CQ_ESTATE for a fleet pool's grant whose lease was lost (marked
        lost here, and told to Pool.on_lease_lost where `tell`). A forked
        child's copy of a pool is left alone."""
        pool = self._pool
        if pool._gen != _generation:
            return 0
        rc: int = pool._c_release(pool._h, self._g)
        lease = self._lease
        if lease is not None and rc in (0, _ESTATE):  # else it still holds
            _leases.pop(lease.key, None)
            if rc == _ESTATE:
                self._mark_lost(lease.key, tell)
        return rc

    def release_part(self, resource: str, amount: int) -> None:
        """Return `amount` units of budget `resource` early; the grant keeps
        the rest. Raises UnknownResource (it holds no such budget),
        OutOfRange (amount not in 1..held), InvalidState (not held) or
        LeaseLost."""
        if self._tok != _HELD_TOKEN:
            raise _not_held()
        self._check_lease()
        rc = self._pool._api.cq_grant_release_part(
            self._pool._h, self._g, _bytes(resource, "resource name"), _int64(amount, "amount")
        )
        if rc == _ESTATE and self._lease is not None:
            self._mark_lost(self._lease.key)
            raise self._lost_error()
        if rc != 0:
            raise _fail(rc, "release_part(%r, %d)" % (resource, amount))

    def __del__(self) -> None:
        try:
            pool = self._pool
            if pool._gen != _generation:
                return
            tok = self._tok
            if tok == _IDLE_TOKEN:
                spare = pool._spare
                if len(spare) < 64:
                    spare.append(self._g)
                return
            # A backstop, not the way to release: a grant that holds units
            # and that nobody can release any more gives them back. The
            # token is gone from the moment an attempt starts until the
            # outcome is recorded, so an exception anywhere in between
            # (KeyboardInterrupt) is covered too. A fleet pool's grant whose
            # lease was lost is released too (CQ_ESTATE), so that its
            # storage leaves the pool before it is freed.
            held = api.cq_grant_is_held(self._g)
            if held or tok == _HELD_TOKEN:
                if self._give_back(tell=False) == 0 and held:
                    warnings.warn(
                        "cronoq: a grant holding units (%r) was garbage-collected "
                        "without being released; its units are released now (use "
                        "`with pool.acquire(...)`, or release())" % self._req,
                        ResourceWarning,
                        stacklevel=2,
                    )
        except Exception:  # a half-made grant, or interpreter shutdown
            pass

    # -- the lease of a fleet pool's grant ----------------------------------

    def _watch(self) -> None:
        """A new attempt on a fleet pool: a new lease record, found by the
        key that the grant's `data` carries into the library's events."""
        old = self._lease
        if old is not None:
            _leases.pop(old.key, None)
        key = next(_lease_keys)
        self._g[0] = key  # cq_grant.data, the grant storage's first word
        self._lease = _Lease(key)
        _leases[key] = self

    def _is_lost(self) -> bool:
        """Whether the held grant's lease is lost (self._lease is set). The
        library's event may not have come yet (a process that was stopped
        is told as it resumes), but a held grant past its deadline is
        already not held: that counts, and is marked here."""
        lease = self._lease
        assert lease is not None
        if (not lease.lost and self._tok == _HELD_TOKEN
                and not api.cq_grant_is_held(self._g)):
            self._mark_lost(lease.key)
        return lease.lost

    def _mark_lost(self, key: int, tell: bool = True) -> None:
        """The lease of attempt `key` is lost: record why, set the event, and
        call Pool.on_lease_lost, once per attempt. Any thread; the library's
        event hook calls it with no lock of the library held."""
        lease = self._lease
        if lease is None or lease.key != key:
            return  # an event of an attempt gone before
        why = api.cq_grant_error(self._g).decode()
        with _lost_lock:
            if lease.lost:
                return
            lease.why = why
            lease.lost = True
            event = lease.event
        if event is not None:
            event.set()
        callback = self._pool.on_lease_lost
        if tell and callback is not None:
            try:
                callback(self)
            except Exception:  # the holder's release must still end
                sys.stderr.write("cronoq: Pool.on_lease_lost raised, ignored:\n")
                traceback.print_exc()

    def _check_lease(self) -> None:
        if self._lease is not None and self._is_lost():
            raise self._lost_error()

    def _lost_error(self) -> LeaseLost:
        lease = self._lease
        why = lease.why if lease is not None and lease.why else (
            "this process was stopped or cut off from the server past its deadline")
        return LeaseLost(detail="the lease of a grant of request %r was lost while it was "
                         "held (%s): what ran under it since ran without its units, which "
                         "another holder may have now" % (self._req._text, why))

    @property
    def lost(self) -> bool:
        """Whether this fleet pool's grant lost its lease while it held (the
        current attempt's); stays True after the release that raised
        LeaseLost, until the grant's next attempt. Always False on an
        in-process pool."""
        return self._lease is not None and self._is_lost()

    @property
    def lost_event(self) -> threading.Event:
        """A threading.Event set when this grant's lease is lost (its current
        attempt's), for a holder that waits on it (``lost_event.wait(t)``)
        or checks it without a call into the library. Never set on an
        in-process pool."""
        lease = self._lease
        if lease is None:
            return threading.Event()
        with _lost_lock:
            if lease.event is None:
                lease.event = threading.Event()
                if lease.lost:
                    lease.event.set()
            return lease.event

    # -- what it holds ------------------------------------------------------

    @property
    def pool(self) -> "Pool":
        return self._pool

    @property
    def request(self) -> Request:
        return self._req

    @property
    def held(self) -> bool:
        """Whether the grant holds units now (False once its lease is lost)."""
        return bool(api.cq_grant_is_held(self._g))

    def units(self, resource: str) -> int:
        """Units of `resource` the grant holds now (thousandths of a device
        for a device pool); 0 if none or not held. LeaseLost if lost."""
        self._check_lease()
        return api.cq_grant_held(self._g, _bytes(resource, "resource name"))

    def devices_of(self, resource: Optional[str] = None) -> List[int]:
        """Indices of the devices the grant holds on device pool `resource`
        (None: the first device pool it names), lowest first. LeaseLost if
        lost."""
        self._check_lease()
        name = None if resource is None else _bytes(resource, "resource name")
        cap = 16
        while True:
            buf = (ctypes.c_uint32 * cap)()
            n = api.cq_grant_devices(self._g, name, buf, cap)
            if n <= cap:
                return list(buf[:n])
            cap = n

    @property
    def devices(self) -> List[int]:
        """Indices of the devices the grant holds on the first device pool it
        names, lowest first; [] if none."""
        return self.devices_of(None)

    def cuda_visible(self, resource: Optional[str] = None) -> str:
        """The value of CUDA_VISIBLE_DEVICES for the devices the grant holds
        on `resource` (None: the first device pool it names): their ids,
        comma separated, as the pool was created with. With resource None a
        grant that holds no device gives "", which hides every GPU; a named
        pool it holds nothing on raises UnknownResource. LeaseLost if
        lost."""
        self._check_lease()
        name = None if resource is None else _bytes(resource, "resource name")
        size = 256
        while True:
            buf = ctypes.create_string_buffer(size)
            rc = api.cq_grant_cuda_visible(self._g, name, buf, size)
            if rc == 0:
                return buf.value.decode()
            if rc == _ERANGE:
                size *= 4
                continue
            if rc == _ENOENT and resource is None:
                return ""
            raise _fail(rc, "cuda_visible(%r)" % resource)

    @property
    def fencing_token(self) -> Optional[int]:
        """The fencing token of a held grant of a fleet pool
        (cq_fleet_grant_fence()): a number that grows with every grant in
        the namespace, across losses of the server's state too, for a
        downstream system to refuse a holder older than the last one it
        saw. It is large (the namespace's counter starts from the server's
        clock in microseconds) and below 2**53, so that it is exact in a
        float or a JSON number too. None on an in-process pool, which needs
        none; InvalidState on a fleet pool's grant that holds nothing, and
        LeaseLost on one whose lease was lost."""
        self._check_lease()
        return self._pool._fencing_token(self)

    def __repr__(self) -> str:
        tok = self._tok
        state = "held" if tok == _HELD_TOKEN else "idle" if tok == _IDLE_TOKEN else "busy"
        if state == "held" and self._lease is not None and self._lease.lost:
            state = "lost"
        return "<Grant %s %r>" % (state, self._req)


class AsyncAcquire:
    """What Pool.acquire_async() returns: ``async with`` it, or await it.

    ``async with pool.acquire_async(req) as grant:`` waits without blocking
    the loop and releases on exit, exceptions and cancellation included.
    ``grant = await pool.acquire_async(req)`` gives a held Grant, as
    Pool.acquire() does, which the caller releases (or enters with ``with``
    or ``async with``). Cancelling the task cancels the wait; a grant that
    won the race meanwhile is released, never leaked.
    """

    __slots__ = ("_grant",)

    def __init__(self, grant: Grant) -> None:
        self._grant = grant

    async def __aenter__(self) -> Grant:
        return await self._grant._enter_async()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._grant._release()

    def __await__(self) -> Generator[Any, None, Grant]:
        return self._grant._enter_async().__await__()


# ---------------------------------------------------------------------------
# Pools
# ---------------------------------------------------------------------------


class Pool:
    """A pool of named resources: budgets of integer units, device pools
    (N devices, each shared in exact fractions or taken whole) and classes
    (worker caps). Thread-safe: any thread may acquire, release or cancel.

    From a resource spec, from declarations, or both (the spec first)::

        Pool("gpu=auto,warehouse-db=10,memory_mib=24576,predict:class=2")
        Pool(budgets={"warehouse-db": 10}, devices={"gpu": 4},
             classes={"predict": 2})

    `devices` maps a name to a count, to a list of device ids (as
    CUDA_VISIBLE_DEVICES should name them) or to "auto" (GPU detection).
    `lone` names budgets that allow a request larger than the capacity
    when nothing else holds them. `staged_claims`, `backfill` and
    `strict_order` are the pool options of cronoq.h (CQ_POOL_STAGED_CLAIMS,
    CQ_POOL_BACKFILL, CQ_POOL_STRICT_ORDER); `barge_ms` is the barging
    window of blocking acquires (0: the default, 10 ms): for that long a
    blocking acquire may be overtaken, then it claims its place.
    `nvidia_smi` and `detect_timeout` are passed to GPU detection.

    As a context manager the pool is closed on exit. The C pool is freed
    when the last reference to it (the pool, or a Request or Grant made
    for it) goes.

    ``on_lease_lost`` (fleet pools): None, or a function called with a
    Grant whose lease was lost while it held, once per grant, as soon as
    this process learns it: from the library's event hook (on its
    background thread, or on a thread that used the pool), or on the
    holder's own thread when one of its calls finds it first. It must not
    block, nor release the grant (leave that to its holder, whose ``with``
    block raises LeaseLost); what it raises is printed to stderr and
    otherwise ignored.
    """

    _h: Optional[ctypes.c_void_p]
    on_lease_lost: Optional[Callable[[Grant], Any]]

    def __init__(
        self,
        spec: Optional[str] = None,
        *,
        budgets: Optional[Mapping[str, int]] = None,
        classes: Optional[Mapping[str, int]] = None,
        devices: Optional[Mapping[str, Union[int, Sequence[str], str]]] = None,
        lone: Sequence[str] = (),
        staged_claims: bool = False,
        backfill: bool = False,
        strict_order: bool = False,
        barge_ms: int = 0,
        nvidia_smi: Optional[str] = None,
        detect_timeout: Optional[float] = None,
    ) -> None:
        self._setup(api, None)
        cfg = _lib.PoolConfig()
        cfg.flags = (
            (_lib.POOL_STAGED_CLAIMS if staged_claims else 0)
            | (_lib.POOL_BACKFILL if backfill else 0)
            | (_lib.POOL_STRICT_ORDER if strict_order else 0)
        )
        cfg.barge_ms = barge_ms
        h = ctypes.c_void_p()
        rc = api.cq_pool_create(ctypes.byref(h), ctypes.byref(cfg))
        if rc != 0:
            raise self._failed(rc, "pool")
        self._h = h
        lone_names = set(lone)
        unknown = lone_names - set(budgets or ())
        if unknown:
            raise InvalidArgument(
                _EINVAL, "lone names %s, which budgets does not declare" % sorted(unknown)
            )
        if spec is not None:
            self.add_spec(spec, nvidia_smi=nvidia_smi, detect_timeout=detect_timeout)
        for name, decl in (devices or {}).items():
            if decl == "auto":
                found = detect_gpus(nvidia_smi, detect_timeout)
                self.add_devices(name, list(found.ids))
            else:
                self.add_devices(name, decl)
        for name, capacity in (budgets or {}).items():
            self.add_budget(name, capacity, lone=name in lone_names)
        for name, max_workers in (classes or {}).items():
            self.add_class(name, max_workers)

    def _setup(self, calls: Any, fleet: Any) -> None:
        """The fields every pool has, before its C pool exists. `calls` are
        the library's functions this pool uses: those that keep the GIL for
        an in-process pool (its calls are short), those that release it for
        a fleet pool (each may wait for the server)."""
        self._h = None
        self._gen = _generation
        self._pid = os.getpid()
        self._closed = False
        self._spare: List[Any] = []  # idle grant storage, for new grants
        self._api = calls
        self._c_try = calls.cq_grant_try
        self._c_release = calls.cq_grant_release
        self._c_cancel = calls.cq_grant_cancel
        self._fleet = fleet  # the fleet library's functions, or None
        self.on_lease_lost = None

    def _failed(self, rc: int, context: str) -> CronoqError:
        """The exception for a failed call on this pool; a fleet pool adds
        its own detail (the values that conflict, why the server cannot
        be reached), kept per thread by the library."""
        if self._fleet is not None:
            detail = self._fleet.cq_fleet_error().decode()
            if detail:
                return error(rc, "%s: %s" % (context, detail))
        return _fail(rc, context)

    @classmethod
    def connect(
        cls,
        url: str,
        namespace: str,
        *,
        host: Optional[str] = None,
        ttl: Optional[float] = None,
        heartbeat: Optional[float] = None,
        timeout: Optional[float] = None,
        username: Optional[str] = None,
        password: Optional[str] = None,
        max_ttl: Optional[float] = None,
        new_namespace: bool = False,
        staged_claims: bool = False,
        audit: bool = False,
        async_release: bool = False,
    ) -> "Pool":
        """Open a fleet pool: a pool whose state lives in a Redis server
        (``redis://[user[:password]@]host[:port][/db]`` or
        ``unix:///path/redis.sock[?db=N]``), shared by every process that
        opens the same `namespace`, under the same rules as an in-process
        pool; see cronoq_fleet.h. Every process declares what it uses
        (``pool.add_spec("licence=2,gpu=auto")``): a declaration of a
        resource the namespace has is accepted when what it is matches (its
        kind, a budget's lone-request allowance, a device pool's devices),
        the namespace keeping its live capacity; a conflicting one raises
        NameInUse (the add_*() calls and add_spec()) naming both. Device
        pools are this host's (``gpu``); another host's is named in full
        (``gpu@hostB``). Grants carry a fencing_token, and a grant whose
        lease is lost (this process stopped or cut off longer than `ttl`)
        raises LeaseLost as its ``with`` block ends (see Grant and
        on_lease_lost). fleet_stats() says what the pool met, for
        monitoring.

        Options (None: the library's default): `host`, this host's name in
        device pool names ($CRONOQ_HOST, else the host name up to its first
        dot); `ttl`, the session's TTL in seconds (10), after which a
        process that stopped loses what it held; `heartbeat`, seconds
        between heartbeats (3, at most a third of the TTL); `timeout`,
        seconds for one call to reach the server (5); `username` and
        `password` for AUTH when the URL has none; `max_ttl`, the
        namespace's longest TTL in seconds (10), the same in every process
        of the namespace and at least `ttl`; `new_namespace`, that no
        process ever held in this namespace on this server (see below);
        `staged_claims`, the namespace's claims option (must match it);
        `audit`, an audit log in the namespace (for tests and operators);
        `async_release`, releases that do not wait for the server's reply
        while this process has no waiter (a round trip less per grant; a
        process told of the release at once may still find the units
        held).

        A namespace the server has to create (the first time, or again
        after it lost its state: a restart without persistence, a flush)
        is quarantined for its longest TTL, so that every holder of a lost
        state has passed its deadline first: meanwhile try_acquire()
        raises Busy, its message saying how long is left, and acquires
        wait and are granted in arrival order as it ends. With
        ``new_namespace=True`` a namespace this call creates grants at
        once: for tests and for a namespace named afresh for each
        deployment, never for a program that may be restarted against a
        server that lost its state. It is ignored where the namespace
        exists.

        Raises (each class is cronoq's, and the library's code is named):
        NotSupported when libcronoq_fleet cannot be loaded (see cronoq._lib
        for where it is looked for); InvalidArgument (CQ_EINVAL) for a bad
        URL, namespace or option (a `max_ttl` other than the namespace's,
        or a `ttl` longer than it, the message naming both values; a
        namespace of the other claims option; a server whose
        maxmemory-policy evicts); Unavailable (CQ_EUNAVAILABLE) when the
        server cannot be reached within `timeout`; AccessDenied
        (CQ_EACCES) when it refuses the user, its password or a permission,
        or runs functions that are not this library's (see fleet_load());
        OutOfMemory (CQ_ENOMEM) when the server is out of memory. Each
        message names the URL, its password hidden, and no message shows
        the `password` option. The GIL is released during every call on a
        fleet pool.
        """
        url_b = _bytes(url, "url", _shown_url(url) if isinstance(url, str) else None)
        ns_b = _bytes(namespace, "namespace")
        fleet = _fleet_library("Pool.connect(%r, %r)" % (_shown_url(url), namespace))
        opts = _lib.FleetOpts()
        opts.flags = _lib.POOL_STAGED_CLAIMS if staged_claims else 0
        opts.fleet_flags = ((_lib.FLEET_AUDIT if audit else 0)
                            | (_lib.FLEET_ASYNC_RELEASE if async_release else 0)
                            | (_lib.FLEET_NEW_NAMESPACE if new_namespace else 0))
        keep = _set_strings(opts, host=host, username=username, password=password)
        _set_times(opts, ttl_ms=ttl, heartbeat_ms=heartbeat, timeout_ms=timeout,
                   max_ttl_ms=max_ttl)
        # The event hook tells a grant that its lease was lost (LeaseLost).
        opts.on_event = ctypes.cast(_on_event, ctypes.c_void_p).value
        pool = cls.__new__(cls)
        pool._setup(_lib.api_nogil, fleet)
        h = ctypes.c_void_p()
        rc = fleet.cq_fleet_open(ctypes.byref(h), url_b, ns_b, ctypes.byref(opts))
        if rc != 0:
            detail = fleet.cq_fleet_error().decode() or _lib.strerror(rc)
            shown = _shown_url(url)
            raise error(rc, "Pool.connect(%r, %r): %s"
                        % (shown, namespace, detail.replace(url, shown)))
        del keep  # alive until the call returned
        pool._h = h
        return pool

    @property
    def is_fleet(self) -> bool:
        """Whether this is a fleet pool (made by Pool.connect())."""
        return self._fleet is not None

    @property
    def host(self) -> Optional[str]:
        """A fleet pool's host name, as device pool names carry it
        ("gpu@<host>"); None for an in-process pool."""
        if self._fleet is None:
            return None
        return self._fleet.cq_fleet_host(self._h).decode()

    def fleet_stats(self) -> Optional[FleetStats]:
        """What this process's fleet pool met, for monitoring its failures
        (cq_fleet_stats_get(), without a round trip; None for an in-process
        pool): `leases_lost` (grants that lost their lease: each raised
        LeaseLost to its holder), `sessions` (1, and one more per session
        lost), `reconnects`, `unavailable` (calls that raised Unavailable),
        `state_losses` and `rollbacks` (the server lost state, or failed
        over), `deferred` and `reconciled` releases, `max_fence`,
        `quarantine_ms` left, `lost_deadline_ms`, and `settings_unchecked`
        (the server's maxmemory-policy could not be read: an operator
        checks it). Counters only grow: alert on their rate. metrics()
        exports them as cronoq_fleet_<name>_total."""
        if self._fleet is None:
            return None
        s = _lib.FleetStats()
        rc = self._fleet.cq_fleet_stats_get(self._h, ctypes.byref(s))
        if rc != 0:
            raise _fail(rc, "fleet_stats")
        return FleetStats(
            sessions=s.sessions, leases_lost=s.leases_lost, state_losses=s.state_losses,
            rollbacks=s.rollbacks, reconnects=s.reconnects, unavailable=s.unavailable,
            deferred=s.deferred, reconciled=s.reconciled, max_fence=s.max_fence,
            quarantine_ms=s.quarantine_ms, lost_deadline_ms=s.lost_deadline_ms,
            settings_unchecked=bool(s.settings_unchecked))

    def _fencing_token(self, grant: Grant) -> Optional[int]:
        if self._fleet is None:
            return None  # an in-process pool has no fencing tokens
        fence = ctypes.c_uint64()
        rc = self._fleet.cq_fleet_grant_fence(grant._g, ctypes.byref(fence))
        if rc == _ESTATE:
            raise _not_held()
        if rc != 0:
            raise _fail(rc, "fencing_token")
        return fence.value

    # -- lifetime -------------------------------------------------------------

    def _check_process(self) -> None:
        if self._gen != _generation:
            raise _forked(self)

    def close(self) -> None:
        """Close the pool: every waiting request fails with Closed, and every
        later acquire too. Holders keep their grants and still release them.
        Idempotent. Thread-safe."""
        self._check_process()
        self._closed = True
        self._api.cq_pool_close(self._h)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._gen == _generation:
            self.close()

    def __del__(self) -> None:
        h = getattr(self, "_h", None)
        if h is None or self._gen != _generation:
            return  # never made, or a forked child's copy: leave it alone
        try:
            rc = api.cq_pool_destroy(h)
            if rc == _ESTATE:
                # The last reference went in a grant callback on the pool's
                # own timer thread, which cannot join itself: another thread
                # destroys the pool once the callback has returned.
                threading.Thread(target=api.cq_pool_destroy, args=(h,), daemon=True).start()
            elif rc == _EINUSE:
                # Only in garbage cycles, where a grant's finalizer may run
                # after the pool's: leave the pool rather than free what a
                # grant still points into.
                warnings.warn("cronoq: a pool freed with grants still held is left allocated",
                              ResourceWarning)
        except Exception:  # interpreter shutdown
            pass

    # -- resources ------------------------------------------------------------

    def add_spec(
        self, spec: str, *, nvidia_smi: Optional[str] = None, detect_timeout: Optional[float] = None
    ) -> None:
        """Declare resources from one string:
        ``gpu=auto,warehouse-db=10,memory_mib=24576,license=3``.
        ``gpu=auto`` adds a device pool from GPU detection, ``gpu=4`` one of 4
        devices; another device pool is ``tpu:devices=8``; ``name:lone=N``
        is a budget with the lone-request allowance; ``name:class=N`` a class
        of N workers; other names are budgets. All or nothing: on failure
        nothing is added and ParseError (or NameInUse, OutOfRange, TooMany)
        says what and where."""
        self._check_process()
        err = ctypes.create_string_buffer(256)
        opts = _detect_opts(nvidia_smi, detect_timeout)
        rc = self._api.cq_pool_add_spec(
            self._h, _bytes(spec, "resource spec"), ctypes.byref(opts) if opts else None, err, 256
        )
        if rc != 0:
            detail = err.value.decode() or "resource spec %r: %s" % (spec, _lib.strerror(rc))
            raise error(rc, detail)

    def add_budget(self, name: str, capacity: int, *, lone: bool = False) -> None:
        """Add a budget: a named resource of `capacity` interchangeable units.
        A name is 1 to 63 bytes of letters, digits and "_-./", unique in the
        pool. `lone`: a request for more than the capacity is granted when
        nothing else holds the budget, and then holds all of it."""
        self._check_process()
        rc = self._api.cq_budget_add_ex(
            self._h, _bytes(name, "budget name"), _int64(capacity, "capacity"),
            _lib.BUDGET_LONE if lone else 0,
        )
        if rc != 0:
            raise self._failed(rc, "budget %r = %d" % (name, capacity))

    def add_class(self, name: str, max_workers: int) -> None:
        """Add a class: a concurrency cap. A request of the class is granted
        only while fewer than `max_workers` grants of it are held."""
        self._check_process()
        rc = self._api.cq_class_add(self._h, _bytes(name, "class name"),
                              _int64(max_workers, "max_workers"))
        if rc != 0:
            raise self._failed(rc, "class %r = %d" % (name, max_workers))

    def add_devices(self, name: str, devices: Union[int, Sequence[str]]) -> None:
        """Add a device pool: `devices` is a count (ids "0".."n-1") or the
        devices' ids, as CUDA_VISIBLE_DEVICES should name them."""
        self._check_process()
        if isinstance(devices, str):
            raise TypeError("devices is a count or a list of ids, not a str")
        if isinstance(devices, Sequence):
            encoded = [_bytes(i, "device id") for i in devices]
            ids = (ctypes.c_char_p * max(1, len(encoded)))(*encoded)
            rc = self._api.cq_devices_add(self._h, _bytes(name, "device pool name"), len(encoded), ids)
            what = "device pool %r = %r" % (name, list(devices))
        else:
            count = _int64(devices, "device count")
            if count < 0:
                raise OutOfRange(_ERANGE, "device pool %r: count %d is negative" % (name, count))
            rc = self._api.cq_devices_add(self._h, _bytes(name, "device pool name"), count, None)
            what = "device pool %r = %d" % (name, count)
        if rc != 0:
            raise self._failed(rc, what)

    def set_capacity(self, name: str, capacity: int) -> None:
        """Change a budget's capacity while it is in use. Growing grants the
        waiters that now fit; shrinking takes nothing from holders, and
        waiters that can now never fit fail with NeverFits."""
        self._check_process()
        rc = self._api.cq_budget_set_capacity(self._h, _bytes(name, "budget name"),
                                        _int64(capacity, "capacity"))
        if rc != 0:
            raise self._failed(rc, "set_capacity(%r, %d)" % (name, capacity))

    def set_class_max(self, name: str, max_workers: int) -> None:
        """Change a class's max_workers, with the rules of set_capacity()."""
        self._check_process()
        rc = self._api.cq_class_set_max(self._h, _bytes(name, "class name"),
                                  _int64(max_workers, "max_workers"))
        if rc != 0:
            raise self._failed(rc, "set_class_max(%r, %d)" % (name, max_workers))

    def remove(self, name: str) -> None:
        """Remove a budget, class or device pool. Refused with InUse while a
        grant holds it or a waiting request names it; requests made with it
        fail with UnknownResource from then on."""
        self._check_process()
        rc = self._api.cq_resource_remove(self._h, _bytes(name, "resource name"))
        if rc != 0:
            raise self._failed(rc, "remove(%r)" % name)

    def set_device_online(self, name: str, index: int, online: bool = True) -> None:
        """Take device `index` of pool `name` offline (it takes no new work;
        holders keep it) or bring it back online."""
        self._check_process()
        index = _int64(index, "device index")
        if not 0 <= index < 2**32:
            raise _no_device(name, index)
        rc = self._api.cq_device_set_online(self._h, _bytes(name, "device pool name"), index,
                                      1 if online else 0)
        if rc != 0:
            raise self._failed(rc, "set_device_online(%r, %d)" % (name, index))

    # -- acquiring ------------------------------------------------------------

    def request(
        self,
        spec: Union[str, Mapping[str, Any], None] = None,
        *,
        class_: Optional[str] = None,
        hold_limit: Optional[float] = None,
    ) -> Request:
        """Make a Request for this pool; see Request."""
        return Request(self, spec, class_=class_, hold_limit=hold_limit)

    def _request_of(self, req: RequestLike) -> Request:
        if isinstance(req, Request):
            if req._pool is not self:
                raise WrongPool(-12, "the request was made for another pool")
            return req
        return Request._unchecked(self, req)

    def acquire(self, req: RequestLike, timeout: Optional[float] = None) -> Grant:
        """Acquire `req` (a Request, a spec or a dict), as
        threading.Semaphore.acquire() does: wait until every unit is granted
        at once, and return the held Grant. `timeout` is in seconds (None:
        no limit; 0: one attempt without waiting). The grant is a context
        manager whose exit releases it, on every path::

            with pool.acquire(req, timeout=5.0) as grant:
                run_task()

        Without ``with``, the caller releases it (grant.release()); a held
        grant dropped unreleased is released with a ResourceWarning. Raises
        Timeout (naming the request, its timeout and what its resources
        hold), NeverFits (with the library's message, e.g. ``request asks
        db:12 but its capacity is 10``), Closed, UnknownResource, and on a
        fleet pool Unavailable or Busy (a quarantine, with timeout=0).
        KeyboardInterrupt on the main thread cancels the wait. The GIL is
        released while it waits. To cancel a wait from another thread, make
        the grant first with lazy_acquire()."""
        r = req if isinstance(req, Request) and req._pool is self else self._request_of(req)
        if timeout is not None:
            timeout = _seconds(timeout, "timeout")
        grant = Grant(self, r, timeout)
        rc = grant._start()
        return grant if rc == 0 else grant._wait(rc)

    def lazy_acquire(self, req: RequestLike, timeout: Optional[float] = None) -> Grant:
        """A Grant for `req` that holds nothing yet: entering it (``with``,
        ``async with``) or its wait() acquires, waiting up to `timeout`
        seconds, and the exit releases. For a wait that another thread may
        cancel (grant.cancel()), and for one grant entered again and again
        (its storage reused). Raises what acquire() raises, when entered."""
        r = req if isinstance(req, Request) and req._pool is self else self._request_of(req)
        if timeout is not None:
            timeout = _seconds(timeout, "timeout")
        return Grant(self, r, timeout)

    def try_acquire(self, req: RequestLike) -> Grant:
        """Acquire without waiting: a held Grant, which the caller releases
        (or uses with ``with``), or Busy when the units are not free or are
        withheld for an older waiter (a try never overtakes a waiter)."""
        grant = Grant(self, self._request_of(req), 0)
        rc = grant._start()
        if rc != 0:
            raise grant._end_failed(rc)
        return grant

    def acquire_async(self, req: RequestLike, timeout: Optional[float] = None) -> AsyncAcquire:
        """The asyncio form of acquire(): ``async with
        pool.acquire_async(req) as grant:``, or ``await`` it for a held
        Grant. The wait is a callback of the library, passed to the running
        loop with call_soon_threadsafe(); the loop never blocks. Cancelling
        the task cancels the wait, and a grant that won the race is
        released."""
        return AsyncAcquire(Grant(self, self._request_of(req), _seconds(timeout, "timeout")))

    # -- for host schedulers --------------------------------------------------

    def headroom(self, req: RequestLike) -> int:
        """How many more copies of `req` could be granted right now, one after
        another, counting class caps and what is withheld or reserved for
        waiters (2**63 - 1 for an empty request). Raises NeverFits when it
        can never fit."""
        r = self._request_of(req)
        copies = ctypes.c_int64()
        rc = self._api.cq_req_headroom(self._h, r._r, ctypes.byref(copies))
        if rc != 0:
            raise error(rc, api.cq_req_error(r._r).decode() or _lib.strerror(rc))
        return copies.value

    def validate(self, tasks: Mapping[str, RequestLike]) -> List[str]:
        """Startup validation of a set of tasks (name -> request): the list of
        every problem found, each naming the task and the resource, e.g.
        ``task "predict" requires gpu:8 but the pool only has 1``; empty
        when every task can run."""
        return self._problems([(_bytes(name, "task name"), self._request_of(r))
                               for name, r in tasks.items()])

    def _problems(self, tasks: Sequence[Tuple[bytes, Request]]) -> List[str]:
        """cq_tasks_validate()'s messages for (name, request) pairs."""
        arr = (_lib.Task * max(1, len(tasks)))()
        for i, (name, r) in enumerate(tasks):
            arr[i].name = name
            arr[i].req = ctypes.addressof(r._r)
        problems: List[str] = []

        @_lib.PROBLEM_FN
        def collect(task: int, err: int, message: bytes, arg: Any) -> None:
            problems.append(message.decode())

        rc = self._api.cq_tasks_validate(self._h, arr, len(tasks), collect, None)
        if rc == _EINVAL:
            raise self._failed(rc, "validate")
        return problems

    # -- stats ----------------------------------------------------------------

    def stats(self) -> PoolStats:
        """A consistent snapshot of the pool as a whole."""
        s = _lib.PoolStats()
        rc = self._api.cq_pool_stats_get(self._h, ctypes.byref(s))
        if rc != 0:
            raise self._failed(rc, "stats")
        return PoolStats(s.waiting, s.waited_grants, s.wakeups, s.events_dropped,
                         s.overdue, s.backfilled, s.late_heads, s.converted)

    def resource(self, name: str) -> ResourceStats:
        """A consistent snapshot of resource `name`."""
        s = _lib.ResourceStats()
        rc = self._api.cq_resource_stats_get(self._h, _bytes(name, "resource name"), ctypes.byref(s))
        if rc != 0:
            raise self._failed(rc, "resource(%r)" % name)
        return _resource_stats(s)

    def resources(self) -> List[ResourceStats]:
        """A snapshot of every resource, in resource order, all taken at one
        moment."""
        cap = 16
        while True:
            arr = (_lib.ResourceStats * cap)()
            count = ctypes.c_size_t()
            rc = self._api.cq_pool_snapshot(self._h, arr, cap, ctypes.byref(count))
            if rc != 0:
                raise self._failed(rc, "resources")
            if count.value <= cap:
                return [_resource_stats(arr[i]) for i in range(count.value)]
            cap = count.value

    def device(self, name: str, index: int) -> DeviceStats:
        """A snapshot of device `index` of device pool `name`."""
        index = _int64(index, "device index")
        if not 0 <= index < 2**32:
            raise _no_device(name, index)
        s = _lib.DeviceStats()
        rc = self._api.cq_device_stats_get(self._h, _bytes(name, "device pool name"), index,
                                     ctypes.byref(s))
        if rc != 0:
            raise self._failed(rc, "device(%r, %d)" % (name, index))
        return DeviceStats(s.id.decode(), s.index, bool(s.online), bool(s.whole),
                           bool(s.reserved), s.used_milli, s.peak_milli, s.grants)

    def metrics(self) -> str:
        """A snapshot of the whole pool in the Prometheus text exposition
        format (0.0.4): metric names prefixed ``cronoq_``, labels
        ``resource``, ``device`` and ``class``."""
        chunks: List[bytes] = []

        @_lib.WRITE_FN
        def write(text: Any, length: int, arg: Any) -> int:
            chunks.append(ctypes.string_at(text, length))
            return 0

        rc = self._api.cq_pool_write_metrics(self._h, write, None)
        if rc != 0:
            raise self._failed(rc, "metrics")
        return b"".join(chunks).decode()

    def _usage(self, req: Request) -> str:
        """What the resources of `req` hold now, for a Timeout's message:
        "; now: db 10 of 10 in use (2 waiting)". Empty on a fleet pool,
        where each snapshot would be a round trip to a server that may be
        out of reach."""
        if self._fleet is not None:
            return ""
        parts = []
        for name, amount in req._items():
            try:
                r = self.resource(amount if name == "class" else name)
            except CronoqError:
                continue
            if r.kind == "devices":
                text = "%s %g of %d devices in use" % (r.name, r.in_use / _lib.DEVICE_MILLI,
                                                      r.online)
            elif r.kind == "class":
                text = "class %s %d of %d workers" % (r.name, r.in_use, r.capacity)
            else:
                text = "%s %d of %d in use" % (r.name, r.in_use, r.capacity)
            parts.append(text + (" (%d waiting)" % r.waiting if r.waiting else ""))
        return "; now: " + ", ".join(parts) if parts else ""

    def __repr__(self) -> str:
        def shown(r: ResourceStats) -> str:
            if r.kind == "devices":  # devices as devices, not thousandths
                online = "" if r.online == r.devices else ", %d online" % r.online
                return "%s=%d device%s%s" % (r.name, r.devices, "" if r.devices == 1 else "s",
                                             online)
            if r.kind == "class":
                return "%s:class=%d" % (r.name, r.capacity)
            return "%s%s=%d" % (r.name, ":lone" if r.lone else "", r.capacity)

        names = ", ".join(shown(r) for r in self.resources())
        return "<Pool %s%s>" % (names, " closed" if self._closed else "")


