"""The library's error codes as exception classes.

Every failing call of libcronoq returns a negative code (CQ_ERRNO_MAP in
cronoq.h). The binding raises the class of that code; each instance carries
the code, its name without the CQ_ prefix, the library's message for it and,
where the library gave one, the per-call detail kept on the request or the
grant (``request asks db:12 but its capacity is 10``).

Where a Python built-in exception means the same thing, the class derives
from it as well, so ``except TimeoutError`` and ``except ValueError`` work.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Type

from . import _lib


class CronoqError(Exception):
    """An error from libcronoq, or from the binding on the library's behalf.

    Attributes: ``code`` (the negative CQ_E... value, or None for errors of
    the binding alone), ``name`` (``"ENEVER"``), ``message`` (the library's
    text for the code) and ``detail`` (what this call found, or "").
    """

    code: Optional[int] = None

    def __init__(self, code: Optional[int] = None, detail: str = "") -> None:
        if code is None:
            code = type(self).code
        self.code = code
        self.name = _lib.err_name(code) if code is not None else type(self).__name__
        self.message = _lib.strerror(code) if code is not None else ""
        self.detail = detail
        super().__init__(str(self))

    def __str__(self) -> str:
        text = self.detail or self.message
        return "%s (CQ_%s)" % (text, self.name) if self.code is not None else text

    def __reduce__(self) -> Tuple[Any, ...]:  # picklable, for multiprocessing
        return (_rebuild, (type(self), self.code, self.detail))


def _rebuild(cls: Type["CronoqError"], code: Optional[int], detail: str) -> "CronoqError":
    return cls(code, detail)


class InvalidArgument(CronoqError, ValueError):
    """Invalid argument (NULL, bad name, uninitialised request)."""

    code = -1


class OutOfMemory(CronoqError, MemoryError):
    """Out of memory."""

    code = -2


class Busy(CronoqError):
    """Resources are busy: the request would have to wait (try only). On a
    fleet pool also while its namespace is quarantined (just created by the
    server: see Pool.connect()), the message saying how long is left."""

    code = -3


class Timeout(CronoqError, TimeoutError):
    """The deadline passed before the request was granted."""

    code = -4


class Cancelled(CronoqError):
    """The waiting request was cancelled (Grant.cancel() from another thread).

    An asyncio task that is cancelled while it waits raises
    asyncio.CancelledError, as asyncio requires, not this class.
    """

    code = -5


class Closed(CronoqError):
    """The pool is closed."""

    code = -6


class NeverFits(CronoqError):
    """The request exceeds a capacity and can never be granted."""

    code = -7


class UnknownResource(CronoqError, LookupError):
    """Unknown resource (or one the grant does not hold)."""

    code = -8


class NameInUse(CronoqError, ValueError):
    """The name is already used in the pool, or named by the request."""

    code = -9


class InUse(CronoqError):
    """Refused while units are held or requests wait."""

    code = -10


class InvalidState(CronoqError):
    """The grant is not in a state that allows this (double release, ...)."""

    code = -11


class WrongPool(CronoqError, ValueError):
    """The grant or request belongs to another pool."""

    code = -12


class OutOfRange(CronoqError, ValueError):
    """A value out of range (zero or negative amount, capacity too large)."""

    code = -13


class TooMany(CronoqError, ValueError):
    """Too many items (more than 16 resources in one request)."""

    code = -14


class SystemCallFailed(CronoqError, OSError):
    """A system call failed (thread or condition variable creation)."""

    code = -15


class ParseError(CronoqError, ValueError):
    """Text could not be parsed (a spec, an amount, a detection variable)."""

    code = -16


class Unavailable(CronoqError, ConnectionError):
    """A fleet pool's server cannot be reached, or the session was lost
    while the call was under way; nothing was granted. (A namespace
    quarantined after the server lost its state answers Busy.)"""

    code = -17


class AccessDenied(CronoqError, PermissionError):
    """A fleet pool's server refused this user (a wrong or missing password)
    or a permission (an ACL that does not allow a command or a key)."""

    code = -18


class NotSupported(CronoqError):
    """What this installation cannot do: fleet pools where libcronoq_fleet
    cannot be loaded, or a pool used in a process forked after it was
    created."""

    code = None


class LeaseLost(CronoqError):
    """A fleet pool's grant lost its lease while it was held: this process
    was stopped or cut off from the server longer than its TTL, or the
    server lost the lease (its state, a failover), and the units may have
    been granted to another holder since. Whatever ran under the grant
    after its deadline ran without the licence it stood for.

    Raised when the ``with`` block of the grant ends (its release), by
    release(), and by every call on the grant that needs it held
    (units(), devices, cuda_visible(), release_part(), fencing_token,
    wait()), until it is released; ``grant.lost`` and
    ``grant.lost_event`` say it without raising, and ``Pool.on_lease_lost``
    is called as soon as the process learns it. The library reports the
    loss as CQ_EVENT_LOST; its code is the binding's (None)."""

    code = None


BY_CODE: Dict[int, Type[CronoqError]] = {}
for _cls in (
    InvalidArgument, OutOfMemory, Busy, Timeout, Cancelled, Closed,
    NeverFits, UnknownResource, NameInUse, InUse, InvalidState,
    WrongPool, OutOfRange, TooMany, SystemCallFailed, ParseError,
    Unavailable, AccessDenied,
):
    assert _cls.code is not None
    BY_CODE[_cls.code] = _cls


def error(code: int, detail: str = "") -> CronoqError:
    """The exception for a library code; CronoqError for a code it does not
    know (a newer library)."""
    cls = BY_CODE.get(code)
    if cls is None:
        return CronoqError(code, detail)
    return cls(code, detail)
