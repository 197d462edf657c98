"""Every library error code has its exception class, carrying the code, the
library's name and message for it, and the per-call detail."""

import pickle

import pytest

import cronoq
from cronoq import _errors, _lib


def library_codes():
    """Walk the library's table (cq_err_name) until it says UNKNOWN."""
    codes = []
    code = -1
    while _lib.err_name(code) != "UNKNOWN":
        codes.append(code)
        code -= 1
    return codes


def test_every_library_error_code_has_its_exception_class():
    codes = library_codes()
    assert len(codes) == 18
    assert sorted(_errors.BY_CODE) == sorted(codes)
    for code in codes:
        exc = _errors.error(code, "")
        assert type(exc).code == code == exc.code
        assert exc.name == _lib.err_name(code)
        assert exc.message == _lib.strerror(code)
        assert str(exc) == "%s (CQ_%s)" % (exc.message, exc.name)
        assert isinstance(exc, cronoq.CronoqError)
        assert getattr(cronoq, type(exc).__name__) is type(exc)


def test_the_issue_s_classes_are_the_library_s_codes():
    assert (cronoq.NeverFits.code, cronoq.Busy.code, cronoq.Timeout.code,
            cronoq.Closed.code, cronoq.Cancelled.code) == (-7, -3, -4, -6, -5)


def test_an_unknown_code_is_a_plain_cronoq_error():
    exc = _errors.error(-99, "from a newer library")
    assert type(exc) is cronoq.CronoqError
    assert exc.code == -99 and exc.name == "UNKNOWN"
    assert str(exc) == "from a newer library (CQ_UNKNOWN)"


def test_errors_derive_from_the_builtin_that_means_the_same():
    assert issubclass(cronoq.Timeout, TimeoutError)
    assert issubclass(cronoq.InvalidArgument, ValueError)
    assert issubclass(cronoq.ParseError, ValueError)
    assert issubclass(cronoq.OutOfMemory, MemoryError)
    assert issubclass(cronoq.UnknownResource, LookupError)
    assert issubclass(cronoq.Unavailable, ConnectionError)
    assert issubclass(cronoq.AccessDenied, PermissionError)


def test_a_refused_user_or_permission_is_access_denied():
    """CQ_EACCES (-18): a fleet pool's server refused the credentials or a
    permission; its class is exported, raised for the code, and named."""
    exc = _errors.error(-18, "fleet pool ns: the server refused user cronoq")
    assert type(exc) is cronoq.AccessDenied
    assert exc.code == cronoq.AccessDenied.code == -18
    assert exc.name == "EACCES"
    assert str(exc) == "fleet pool ns: the server refused user cronoq (CQ_EACCES)"
    assert "AccessDenied" in cronoq.__all__
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is cronoq.AccessDenied and str(back) == str(exc)


def test_errors_survive_pickling_for_multiprocessing():
    pool = cronoq.Pool(budgets={"db": 10})
    with pytest.raises(cronoq.NeverFits) as e:
        pool.try_acquire({"db": 12})
    back = pickle.loads(pickle.dumps(e.value))
    assert type(back) is cronoq.NeverFits
    assert (back.code, back.detail, str(back)) == (e.value.code, e.value.detail, str(e.value))


def test_lease_lost_is_an_exported_cronoq_error_that_survives_pickling():
    assert issubclass(cronoq.LeaseLost, cronoq.CronoqError)
    assert "LeaseLost" in cronoq.__all__ and cronoq.LeaseLost.code is None
    exc = cronoq.LeaseLost(detail="the lease of a grant of request 'licence=1' was lost")
    assert str(exc) == "the lease of a grant of request 'licence=1' was lost"
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is cronoq.LeaseLost and str(back) == str(exc)


def test_every_class_a_docstring_names_exists():
    """The docstrings name no stale class: every CamelCase name in the
    public API's docstrings (Pool.connect()'s list of errors among them)
    is one of cronoq's, a built-in or asyncio's; and Pool.connect() names
    the classes of the codes cq_fleet_open() returns."""
    import asyncio
    import builtins
    import inspect
    import re

    def docs():
        for name in cronoq.__all__:
            obj = getattr(cronoq, name)
            yield name, inspect.getdoc(obj) or ""
            if inspect.isclass(obj):
                for attr, value in vars(obj).items():
                    value = value.fget if isinstance(value, property) else value
                    if not attr.startswith("_") or attr in ("__init__", "__enter__"):
                        yield "%s.%s" % (name, attr), inspect.getdoc(value) or ""

    unknown = set()
    for where, doc in docs():
        for word in re.findall(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b", doc):
            if not any(hasattr(m, word) for m in (cronoq, builtins, asyncio)):
                unknown.add((where, word))
    assert unknown == set()
    connect_doc = inspect.getdoc(cronoq.Pool.connect)
    for cls in (cronoq.NotSupported, cronoq.InvalidArgument, cronoq.Unavailable,
                cronoq.AccessDenied, cronoq.OutOfMemory, cronoq.NameInUse, cronoq.LeaseLost):
        assert cls.__name__ in connect_doc, cls
