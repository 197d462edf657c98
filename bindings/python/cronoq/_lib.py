"""Loading libcronoq and declaring the parts of its C API the binding uses.

The library is found in this order; the first step that applies decides,
and a step that names a library which cannot be loaded is an error, never a
silent fall-through to an older copy elsewhere:

1. ``CRONOQ_LIBRARY``: the path of the shared library itself
   (``/opt/cronoq/lib/libcronoq.so.0.1``).
2. ``CRONOQ_BUILD_DIR``: a CMake build tree of libcronoq; its
   ``libcronoq.so.0.1`` (or ``libcronoq.so``) is loaded. The tests use this.
3. The system loader: ``libcronoq.so.0.1``, the soname of the ABI this
   binding was written for (``LD_LIBRARY_PATH``, then the ``ldconfig``
   cache, then ``/lib`` and ``/usr/lib``), then whatever
   ``ctypes.util.find_library("cronoq")`` reports.

The library's version must be 0.1.x: while libcronoq is 0.x every minor
version may change the ABI. The storage of requests and grants is allocated
with the sizes the library reports (cq_req_size(), cq_grant_size()), never
with constants.

Why ctypes and not cffi: ctypes is in the standard library, so the package
has no dependency and needs no compiler at install time (cffi's ABI mode
would not need one either, but it is one more package to install in every
virtual environment). ctypes also lets the binding choose, per function,
whether the GIL is released: ``CDLL`` functions release it, ``PyDLL``
functions keep it. Calls that may block (a blocking acquire, destroying a
pool, which joins its timer thread, GPU detection, which runs nvidia-smi)
go through ``CDLL``; the short calls on the hot path (try, release, cancel,
submit) keep the GIL, which saves a release and a re-acquire per call and
keeps threads from trading the GIL on every try. That is safe because the
library never calls back into Python while it holds one of its locks, so a
thread that holds the GIL and waits for the pool's lock waits for a thread
that needs no GIL to finish.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from typing import Any
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_int,
    c_int64,
    c_size_t,
    c_uint,
    c_uint32,
    c_uint64,
    c_void_p,
)

# The ABI this binding was written for: SOVERSION 0.MINOR while 0.x.
ABI_MAJOR = 0
ABI_MINOR = 1
SONAME = "libcronoq.so.%d.%d" % (ABI_MAJOR, ABI_MINOR)

NEVER = 2**63 - 1  # CQ_NEVER
DEVICE_MILLI = 1000  # CQ_DEVICE_MILLI
NAME_MAX = 63  # CQ_NAME_MAX
DEVICE_ID_MAX = 95  # CQ_DEVICE_ID_MAX

POOL_STAGED_CLAIMS = 1 << 0
POOL_BACKFILL = 1 << 2
POOL_STRICT_ORDER = 1 << 3
BARGE_MAX_MS = 3600000
BUDGET_LONE = 1 << 0

KIND_BUDGET = 1
KIND_DEVICES = 2
KIND_CLASS = 3


def _candidates() -> list[tuple[str, str]]:
    """The (how, name) pairs to try, in order; see the module docstring."""
    explicit = os.environ.get("CRONOQ_LIBRARY")
    if explicit:
        return [("CRONOQ_LIBRARY", explicit)]
    build = os.environ.get("CRONOQ_BUILD_DIR")
    if build:
        for name in (SONAME, "libcronoq.so"):
            path = os.path.join(build, name)
            if os.path.exists(path):
                return [("CRONOQ_BUILD_DIR", path)]
        return [("CRONOQ_BUILD_DIR", os.path.join(build, SONAME))]
    found = [("system loader", SONAME)]
    other = ctypes.util.find_library("cronoq")
    if other and other != SONAME:
        found.append(("ctypes.util.find_library", other))
    return found


def _load() -> tuple[ctypes.CDLL, str]:
    tried = []
    for how, name in _candidates():
        try:
            return ctypes.CDLL(name), name
        except OSError as e:
            tried.append("%s: %s (%s)" % (how, name, e))
            if how != "system loader" and how != "ctypes.util.find_library":
                break  # an explicit choice never falls through
    raise ImportError(
        "cronoq: libcronoq could not be loaded; tried "
        + "; ".join(tried)
        + ". Set CRONOQ_LIBRARY to the path of libcronoq.so, or install "
        "libcronoq (cmake --install) and run ldconfig."
    )


def _file_of(lib: ctypes.CDLL, name: str, symbol: str = "cq_version_string") -> str:
    """The file the dynamic loader actually opened for the function
    `symbol` of `lib` (dladdr on it), or `name` where that cannot be told.
    Through a library that links libcronoq, libcronoq's own functions are
    found in the libcronoq it uses."""

    class DlInfo(Structure):
        _fields_ = [("dli_fname", c_char_p), ("dli_fbase", c_void_p),
                    ("dli_sname", c_char_p), ("dli_saddr", c_void_p)]

    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [c_void_p, POINTER(DlInfo)]
        info = DlInfo()
        address = ctypes.cast(getattr(lib, symbol), c_void_p)
        if dladdr(address, ctypes.byref(info)) and info.dli_fname:
            return os.path.abspath(info.dli_fname.decode())
    except (AttributeError, OSError):
        pass
    return name


cdll, _name = _load()
#: The file loaded, absolute where the loader can tell.
path = _file_of(cdll, _name)
# The same handle, seen as functions that keep the GIL during the call.
pydll = ctypes.PyDLL(_name, handle=cdll._handle)

# ---------------------------------------------------------------------------
# Version and storage sizes, checked before anything else is used.
# ---------------------------------------------------------------------------

pydll.cq_version_number.restype = c_int
pydll.cq_version_number.argtypes = []
pydll.cq_version_string.restype = c_char_p
pydll.cq_version_string.argtypes = []
version_number = pydll.cq_version_number()
version = pydll.cq_version_string().decode()
if version_number // 1000000 != ABI_MAJOR or version_number // 1000 % 1000 != ABI_MINOR:
    raise ImportError(
        "cronoq: %s is libcronoq %s, but this binding needs %d.%d.x (the ABI "
        "may change with every minor version while the version is 0.x)"
        % (path, version, ABI_MAJOR, ABI_MINOR)
    )

pydll.cq_req_size.restype = c_size_t
pydll.cq_req_size.argtypes = []
pydll.cq_grant_size.restype = c_size_t
pydll.cq_grant_size.argtypes = []
req_size = pydll.cq_req_size()
grant_size = pydll.cq_grant_size()
for _what, _size in (("cq_req", req_size), ("cq_grant", grant_size)):
    # Storage is an array of uint64_t, which gives it the alignment of the
    # struct's widest member (uint64_t and pointers).
    if _size < 16 or _size % 8 != 0:
        raise ImportError("cronoq: %s reports sizeof(%s) = %d" % (path, _what, _size))

# Caller-owned storage of one request and one grant. ctypes keeps the buffer
# where it is for the object's whole life, which the library requires of a
# waiting or held grant and of a request a waiter reads.
ReqStorage = c_uint64 * (req_size // 8)
GrantStorage = c_uint64 * (grant_size // 8)

# ---------------------------------------------------------------------------
# Structs that cross the ABI. tests/test_loading.py compares each size and
# offset with what the C compiler says (the probe program).
# ---------------------------------------------------------------------------


class Allocator(Structure):
    _fields_ = [
        ("alloc", c_void_p),
        ("realloc", c_void_p),
        ("free", c_void_p),
        ("arg", c_void_p),
    ]


# The clock and event hook fields, in this order, of both cq_pool_config
# and cq_fleet_opts.
_HOOK_FIELDS = [
    ("clock", c_void_p),
    ("clock_arg", c_void_p),
    ("data", c_void_p),
    ("on_event", c_void_p),
    ("event_arg", c_void_p),
    ("event_buffer", c_uint32),
]


class PoolConfig(Structure):
    _fields_ = [("flags", c_uint), ("alloc", c_void_p)] + _HOOK_FIELDS + [
        ("barge_ms", c_int64),
        ("reserved_", c_uint64 * 7),
    ]


class PoolStats(Structure):
    _fields_ = [
        ("waiting", c_uint64),
        ("waited_grants", c_uint64),
        ("wakeups", c_uint64),
        ("events_dropped", c_uint64),
        ("overdue", c_uint64),
        ("backfilled", c_uint64),
        ("late_heads", c_uint64),
        ("converted", c_uint64),
        ("reserved_", c_uint64 * 7),
    ]


WAIT_BUCKETS = 28  # CQ_WAIT_BUCKETS


class WaitStats(Structure):
    _fields_ = [
        ("count", c_uint64),
        ("p50_ms", c_int64),
        ("p99_ms", c_int64),
        ("max_ms", c_int64),
        ("sum_ms", c_int64),
        ("below", c_uint64 * WAIT_BUCKETS),
    ]


class ResourceStats(Structure):
    _fields_ = [
        ("name", c_char * (NAME_MAX + 1)),
        ("kind", c_int),
        ("flags", c_uint),
        ("capacity", c_int64),
        ("in_use", c_int64),
        ("withheld", c_int64),
        ("peak", c_int64),
        ("waiting", c_uint64),
        ("grants", c_uint64),
        ("timeouts", c_uint64),
        ("cancellations", c_uint64),
        ("wait", WaitStats),
        ("devices", c_uint32),
        ("online", c_uint32),
        ("reserved_", c_uint64 * 8),
    ]


class DeviceStats(Structure):
    _fields_ = [
        ("id", c_char * (DEVICE_ID_MAX + 1)),
        ("index", c_uint32),
        ("online", c_int),
        ("whole", c_int),
        ("reserved", c_int),
        ("used_milli", c_int64),
        ("peak_milli", c_int64),
        ("grants", c_uint64),
        ("reserved_", c_uint64 * 4),
    ]


class DetectOpts(Structure):
    _fields_ = [
        ("nvidia_smi", c_char_p),
        ("timeout_ms", c_int64),
        ("alloc", c_void_p),
        ("reserved_", c_uint64 * 4),
    ]


class GpuList(Structure):
    _fields_ = [
        ("count", c_size_t),
        ("ids", POINTER(c_char_p)),
        ("source", c_char_p),
        ("error", c_char * 160),
        ("alloc_", Allocator),
        ("cap_", c_size_t),
    ]


class Task(Structure):
    _fields_ = [("name", c_char_p), ("req", c_void_p)]


class FleetOpts(Structure):
    _fields_ = [("flags", c_uint)] + _HOOK_FIELDS + [
        ("fleet_flags", c_uint),
        ("host", c_char_p),
        ("ttl_ms", c_int64),
        ("heartbeat_ms", c_int64),
        ("timeout_ms", c_int64),
        ("script_steps", c_uint32),
        ("username", c_char_p),
        ("password", c_char_p),
        ("max_ttl_ms", c_int64),
        ("reserved_", c_uint64 * 7),
    ]


class FleetStats(Structure):
    _fields_ = [
        ("sessions", c_uint64),
        ("leases_lost", c_uint64),
        ("state_losses", c_uint64),
        ("rollbacks", c_uint64),
        ("reconnects", c_uint64),
        ("unavailable", c_uint64),
        ("deferred", c_uint64),
        ("reconciled", c_uint64),
        ("max_fence", c_uint64),
        ("quarantine_ms", c_int64),
        ("lost_deadline_ms", c_int64),
        ("settings_unchecked", c_uint64),
        ("reserved_", c_uint64 * 4),
    ]


class Event(Structure):
    """cq_event: what the pool's event hook is told."""

    _fields_ = [
        ("type", c_int),
        ("attempt", c_uint64),
        ("data", c_void_p),
        ("resource", c_char_p),
        ("time_ms", c_int64),
        ("wait_ms", c_int64),
        ("reserved_", c_uint64 * 4),
    ]


EVENT_LOST = 10  # CQ_EVENT_LOST: a holder lost its lease (fleet pools)

FLEET_AUDIT = 1 << 0  # CQ_FLEET_AUDIT
FLEET_ASYNC_RELEASE = 1 << 1  # CQ_FLEET_ASYNC_RELEASE
FLEET_NEW_NAMESPACE = 1 << 2  # CQ_FLEET_NEW_NAMESPACE
FLEET_LOAD_REPLACE = 1 << 0  # CQ_FLEET_LOAD_REPLACE (cq_fleet_load()'s flags)
FLEET_ACL_MAX = 512  # what cq_fleet_acl() says is enough


# Callback types. The grant callback is one module-level trampoline (see
# _pool.py), alive as long as the module, so longer than any pool.
GRANT_CB = CFUNCTYPE(None, c_void_p, c_int)
WRITE_FN = CFUNCTYPE(c_int, POINTER(c_char), c_size_t, c_void_p)
PROBLEM_FN = CFUNCTYPE(None, c_size_t, c_int, c_char_p, c_void_p)
# The event hook (cq_event_fn): one module-level trampoline too, set on
# fleet pools only (see _pool.py), where it tells a grant its lease is lost.
EVENT_FN = CFUNCTYPE(None, POINTER(Event), c_void_p)

# ---------------------------------------------------------------------------
# Prototypes. (library, name, restype, argtypes); argtypes None leaves the
# call unchecked, for the hot path, whose callers pass only the ctypes
# objects listed in the comment.
# ---------------------------------------------------------------------------

_P = c_void_p
_PROTOTYPES = [
    # errors
    (pydll, "cq_strerror", c_char_p, [c_int]),
    (pydll, "cq_err_name", c_char_p, [c_int]),
    (pydll, "cq_now", c_int64, []),
    # pool
    (cdll, "cq_pool_create", c_int, [POINTER(c_void_p), POINTER(PoolConfig)]),
    (pydll, "cq_pool_close", c_int, [_P]),
    (cdll, "cq_pool_destroy", c_int, [_P]),
    (pydll, "cq_pool_stats_get", c_int, [_P, POINTER(PoolStats)]),
    (pydll, "cq_budget_add_ex", c_int, [_P, c_char_p, c_int64, c_uint]),
    (pydll, "cq_budget_set_capacity", c_int, [_P, c_char_p, c_int64]),
    (pydll, "cq_class_add", c_int, [_P, c_char_p, c_int64]),
    (pydll, "cq_class_set_max", c_int, [_P, c_char_p, c_int64]),
    (pydll, "cq_resource_remove", c_int, [_P, c_char_p]),
    (pydll, "cq_resource_stats_get", c_int, [_P, c_char_p, POINTER(ResourceStats)]),
    (pydll, "cq_pool_snapshot", c_int,
     [_P, POINTER(ResourceStats), c_size_t, POINTER(c_size_t)]),
    (pydll, "cq_devices_add", c_int, [_P, c_char_p, c_size_t, POINTER(c_char_p)]),
    (pydll, "cq_device_stats_get", c_int, [_P, c_char_p, c_uint32, POINTER(DeviceStats)]),
    (pydll, "cq_device_set_online", c_int, [_P, c_char_p, c_uint32, c_int]),
    # detection runs nvidia-smi: the GIL is released
    (cdll, "cq_gpu_detect", c_int, [POINTER(GpuList), POINTER(DetectOpts)]),
    (pydll, "cq_gpu_list_free", None, [POINTER(GpuList)]),
    (cdll, "cq_pool_add_spec", c_int,
     [_P, c_char_p, POINTER(DetectOpts), c_char_p, c_size_t]),
    (pydll, "cq_pool_write_metrics", c_int, [_P, WRITE_FN, c_void_p]),
    # requests
    (pydll, "cq_req_init", c_int, [_P, _P]),
    (pydll, "cq_req_add_str", c_int, [_P, c_char_p, c_char_p]),
    (pydll, "cq_req_set_class", c_int, [_P, c_char_p]),
    (pydll, "cq_req_set_hold_limit", c_int, [_P, c_int64]),
    (pydll, "cq_req_parse", c_int, [_P, c_char_p]),
    (pydll, "cq_req_count", c_size_t, [_P]),
    (pydll, "cq_req_error", c_char_p, [_P]),
    (pydll, "cq_req_headroom", c_int, [_P, _P, POINTER(c_int64)]),
    (pydll, "cq_tasks_validate", c_int, [_P, POINTER(Task), c_size_t, PROBLEM_FN, _P]),
    # grants. Hot path: (pool c_void_p, GrantStorage[, ReqStorage]).
    (pydll, "cq_grant_try", c_int, None),
    (pydll, "cq_grant_release", c_int, None),
    (pydll, "cq_grant_cancel", c_int, None),
    (pydll, "cq_grant_submit", c_int, [_P, _P, _P, c_int64, GRANT_CB]),
    # the one call that blocks: the GIL is released while it waits
    (cdll, "cq_grant_acquire", c_int, [_P, _P, _P, c_int64]),
    (pydll, "cq_grant_release_part", c_int, [_P, _P, c_char_p, c_int64]),
    (pydll, "cq_grant_devices", c_size_t, [_P, c_char_p, POINTER(c_uint32), c_size_t]),
    (pydll, "cq_grant_cuda_visible", c_int, [_P, c_char_p, c_char_p, c_size_t]),
    (pydll, "cq_grant_held", c_int64, [_P, c_char_p]),
    (pydll, "cq_grant_is_held", c_int, [_P]),
    (pydll, "cq_grant_error", c_char_p, [_P]),
]


class _Api:
    """The library's functions as attributes: api.cq_grant_try(...)."""

    def __getattr__(self, name: str) -> Any:  # only for names never set
        raise AttributeError("libcronoq function %s is not declared in _lib.py" % name)


api = _Api()
for _lib, _name, _res, _args in _PROTOTYPES:
    _fn = getattr(_lib, _name)
    _fn.restype = _res
    if _args is not None:
        _fn.argtypes = _args
    setattr(api, _name, _fn)


# The same functions without the GIL, for pools whose every call may wait
# for a server (fleet pools): a round trip with the GIL held would stall
# every other thread of the interpreter for its whole length.
api_nogil = _Api()
for _lib, _name, _res, _args in _PROTOTYPES:
    _fn = getattr(cdll, _name) if _lib is pydll else getattr(api, _name)
    _fn.restype = _res
    if _args is not None:
        _fn.argtypes = _args
    setattr(api_nogil, _name, _fn)

# ---------------------------------------------------------------------------
# libcronoq_fleet, loaded on first use (Pool.connect()). Its search order,
# the first step that applies deciding, as for libcronoq:
#
# 1. CRONOQ_FLEET_LIBRARY: the path of the fleet library itself.
# 2. CRONOQ_BUILD_DIR: the build tree's src/fleet/libcronoq_fleet.so.0.1
#    (absent where the tree was configured without hiredis).
# 3. Beside the libcronoq that was loaded (an installation puts both in
#    one directory).
# 4. The system loader: libcronoq_fleet.so.0.1, then
#    ctypes.util.find_library("cronoq_fleet").
#
# Whatever is found must use the libcronoq this module loaded: a fleet
# library linked with another copy would hand the binding pools of a
# library it does not talk to.
# ---------------------------------------------------------------------------

FLEET_SONAME = "libcronoq_fleet.so.%d.%d" % (ABI_MAJOR, ABI_MINOR)


class FleetMissing(Exception):
    """The fleet library cannot be loaded; the message says what was tried."""


def _fleet_candidates() -> list[tuple[str, str]]:
    explicit = os.environ.get("CRONOQ_FLEET_LIBRARY")
    if explicit:
        return [("CRONOQ_FLEET_LIBRARY", explicit)]
    build = os.environ.get("CRONOQ_BUILD_DIR")
    if build:
        here = os.path.join(build, "src", "fleet")
        for name in (FLEET_SONAME, "libcronoq_fleet.so"):
            if os.path.exists(os.path.join(here, name)):
                return [("CRONOQ_BUILD_DIR", os.path.join(here, name))]
        return [("CRONOQ_BUILD_DIR", os.path.join(here, FLEET_SONAME))]
    found = []
    beside = os.path.join(os.path.dirname(path), FLEET_SONAME)
    if os.path.isabs(path) and os.path.exists(beside):
        found.append(("beside %s" % os.path.basename(path), beside))
    found.append(("system loader", FLEET_SONAME))
    other = ctypes.util.find_library("cronoq_fleet")
    if other and other != FLEET_SONAME:
        found.append(("ctypes.util.find_library", other))
    return found


_FLEET_PROTOTYPES = [
    # opening connects, loads the scripts and starts a thread
    ("cq_fleet_open", c_int, [POINTER(c_void_p), c_char_p, c_char_p, POINTER(FleetOpts)]),
    ("cq_fleet_is_fleet", c_int, [_P]),
    ("cq_fleet_host", c_char_p, [_P]),
    ("cq_fleet_grant_fence", c_int, [_P, POINTER(c_uint64)]),
    ("cq_fleet_stats_get", c_int, [_P, POINTER(FleetStats)]),
    ("cq_fleet_error", c_char_p, []),
    # the operator's step: connects to the server
    ("cq_fleet_load", c_int, [c_char_p, POINTER(FleetOpts), c_uint]),
    ("cq_fleet_library", c_char_p, []),
    ("cq_fleet_acl", c_int, [c_char_p, c_char_p, c_size_t]),
]
_fleet: Any = None
#: The fleet library's file once loaded (absolute where the loader can
#: tell), else None.
fleet_path: Any = None
_fleet_lock = threading.Lock()


def fleet() -> Any:
    """The fleet library's functions as attributes, loaded once; raises
    FleetMissing with what was tried."""
    global _fleet, fleet_path
    with _fleet_lock:
        if _fleet is not None:
            return _fleet
        tried = []
        for how, name in _fleet_candidates():
            try:
                lib = ctypes.CDLL(name)
            except OSError as e:
                tried.append("%s: %s (%s)" % (how, name, e))
                if how in ("CRONOQ_FLEET_LIBRARY", "CRONOQ_BUILD_DIR"):
                    break  # an explicit choice never falls through
                continue
            core = _file_of(lib, name)
            if os.path.isabs(path) and os.path.isabs(core) and \
                    os.path.realpath(core) != os.path.realpath(path):
                raise FleetMissing(
                    "%s (%s) uses %s, but this module loaded %s; point "
                    "CRONOQ_FLEET_LIBRARY at the fleet library of the same "
                    "installation" % (name, how, core, path))
            fns = _Api()
            for fname, res, args in _FLEET_PROTOTYPES:
                fn = getattr(lib, fname)
                fn.restype = res
                fn.argtypes = args
                setattr(fns, fname, fn)
            _fleet = fns
            fleet_path = _file_of(lib, name, "cq_fleet_open")
            return fns
        raise FleetMissing(
            "libcronoq_fleet could not be loaded; tried " + "; ".join(tried)
            + ". Fleet pools need libcronoq built with hiredis (libhiredis-dev; "
            "CMake option CRONOQ_WITH_FLEET) and installed beside libcronoq, or "
            "CRONOQ_FLEET_LIBRARY set to its path")


def strerror(code: int) -> str:
    return api.cq_strerror(code).decode()


def err_name(code: int) -> str:
    return api.cq_err_name(code).decode()
