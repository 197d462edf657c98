"""cronoq: multi-resource admission control, for Python.

A binding of libcronoq, the C library. A pool holds named resources:
budgets of integer units (database connections, a licence, a partner API's
concurrency cap, memory), device pools (GPUs shared in exact fractions or
taken whole) and classes (worker caps). A request names several resources
and is granted all at once or not at all; a request that does not fit waits
in a FIFO queue with reservation, so nothing starves::

    import cronoq

    pool = cronoq.Pool("gpu=auto,warehouse-db=10")
    req = pool.request({"gpu": 0.5, "warehouse-db": 1})   # built once, reused
    with pool.acquire(req, timeout=5.0) as grant:         # waits, then holds
        os.environ["CUDA_VISIBLE_DEVICES"] = grant.cuda_visible()
        run_task()                                        # released on every path

    grant = pool.acquire(req, timeout=5.0)                # held, as a semaphore's
    grant.release()

    async with pool.acquire_async(req) as grant:          # on asyncio
        await run_task_async()

Pool.connect(url, namespace) opens a fleet pool, shared through a Redis
server by every process that opens the namespace; a grant that loses its
lease there raises LeaseLost as its ``with`` block ends.

The shared library is found through CRONOQ_LIBRARY (its path), then
CRONOQ_BUILD_DIR (a CMake build tree), then the system loader
(libcronoq.so.0.1); see cronoq._lib. Errors are the exception classes of
this module, each carrying the library's code and message.
"""

from __future__ import annotations

from . import _lib
from ._errors import (
    AccessDenied,
    Busy,
    Cancelled,
    Closed,
    CronoqError,
    InUse,
    InvalidArgument,
    InvalidState,
    LeaseLost,
    NameInUse,
    NeverFits,
    NotSupported,
    OutOfMemory,
    OutOfRange,
    ParseError,
    SystemCallFailed,
    Timeout,
    TooMany,
    Unavailable,
    UnknownResource,
    WrongPool,
)
from ._pool import (
    AsyncAcquire,
    DeviceStats,
    FleetStats,
    GpuList,
    Grant,
    Pool,
    PoolStats,
    Request,
    ResourceStats,
    WaitStats,
    detect_gpus,
    fleet_acl,
    fleet_library,
    fleet_load,
)

__version__ = "0.1.0"

#: The path (or name) of the shared library that was loaded.
library_path: str = _lib.path
#: Its version, "MAJOR.MINOR.PATCH".
library_version: str = _lib.version

__all__ = [
    "AccessDenied", "AsyncAcquire", "Busy", "Cancelled", "Closed", "CronoqError",
    "DeviceStats", "FleetStats", "GpuList", "Grant", "InUse", "InvalidArgument",
    "InvalidState", "LeaseLost", "NameInUse", "NeverFits", "NotSupported",
    "OutOfMemory", "OutOfRange", "ParseError", "Pool", "PoolStats", "Request",
    "ResourceStats", "SystemCallFailed", "Timeout", "TooMany", "Unavailable",
    "UnknownResource", "WaitStats", "WrongPool", "detect_gpus", "fleet_acl",
    "fleet_library", "fleet_load", "library_path", "library_version",
]
