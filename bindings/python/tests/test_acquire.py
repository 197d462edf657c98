"""Blocking and try acquires: pool.acquire() returns a held grant, as a
semaphore's acquire() does, and lazy_acquire() one that acquires when
entered; release on every path, timeouts and what they say, cancels from
another thread (won and lost), a wait interrupted on the main thread, the
GIL released while a thread blocks, grants dropped while held, fork."""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pytest

import cronoq
from conftest import (CHILD_PYTHONPATH, HANG_GUARD_S, Thread, assert_all_back, join_all,
                      start_parked, wait_until, waiting)


def test_pool_acquire_returns_a_held_grant():
    # The trap: `g = pool.acquire(...)` returned a grant that held nothing
    # ("held after pool.acquire(): False 0") until it was entered.
    pool = cronoq.Pool(budgets={"db": 1})
    g = pool.acquire({"db": 1}, timeout=1)
    assert (g.held, g.units("db")) == (True, 1)
    assert pool.resource("db").in_use == 1
    g.release()
    assert not g.held
    assert_all_back(pool)


def test_a_second_acquire_of_a_one_unit_budget_waits_instead_of_succeeding():
    pool = cronoq.Pool(budgets={"db": 1})
    first = pool.acquire({"db": 1}, timeout=1)
    with pytest.raises(cronoq.Timeout):
        pool.acquire({"db": 1}, timeout=0.05)
    assert pool.resource("db").in_use == 1
    # Released on another thread, the second acquire is granted.
    t = start_parked(pool, lambda: pool.acquire({"db": 1}, timeout=HANG_GUARD_S))
    first.release()
    join_all([t])
    assert t.exc is None and t.result.held
    t.result.release()
    assert_all_back(pool)


def test_entering_a_held_grant_returns_it_and_leaving_releases_it(pool):
    g = pool.acquire({"db": 2}, timeout=1)
    with g as entered:
        assert entered is g and g.held
        assert pool.resource("db").in_use == 2  # entering took nothing more
    assert not g.held
    assert_all_back(pool)


def test_a_held_grant_dropped_without_release_warns_and_releases(pool):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pool.acquire({"db": 5}, timeout=1)  # never entered, never released
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)
            and "without being released" in str(w.message)], [str(w.message) for w in caught]
    assert_all_back(pool)


def test_lazy_acquire_holds_nothing_until_entered_or_waited(pool):
    lazy = pool.lazy_acquire({"db": 3}, timeout=1)
    assert not lazy.held and pool.resource("db").in_use == 0
    with lazy as g:
        assert g is lazy and g.units("db") == 3
    assert not lazy.held
    assert lazy.wait() is lazy and lazy.held
    lazy.release()
    assert_all_back(pool)


def test_a_timeout_names_the_request_its_timeout_and_what_its_resources_hold(pool):
    # The trap: "deadline passed before the request was granted", which
    # named neither the resource nor the seconds.
    holder = pool.try_acquire({"api": 4})
    with pytest.raises(cronoq.Timeout) as e:
        pool.acquire({"api": 1, "db": 2}, timeout=0.05)
    msg = str(e.value)
    assert msg.startswith("request 'api=1,db=2' was not granted within its timeout of 0.05 s"
                          " (waited 0.0"), msg
    assert "api 4 of 4 in use" in msg and "db 0 of 10 in use" in msg, msg
    assert msg.endswith("(CQ_ETIMEDOUT)"), msg
    with pytest.raises(cronoq.Timeout, match=r"request 'api=1' was not granted at once "
                       r"\(timeout=0: one try, no wait\)"):
        pool.acquire("api=1", timeout=0)
    holder.release()
    assert_all_back(pool)


def test_with_releases_the_grant_when_the_block_returns(pool):
    with pool.acquire({"db": 3}) as grant:
        assert grant.held
        assert pool.resource("db").in_use == 3
    assert not grant.held
    assert_all_back(pool)


def test_exception_inside_with_releases_the_grant_and_propagates(pool):
    req = pool.request({"db": 4, "gpu": 0.5})
    with pytest.raises(ZeroDivisionError):
        with pool.acquire(req, timeout=5.0):
            assert pool.resource("db").in_use == 4
            1 / 0
    assert_all_back(pool)
    # and the same request still works afterwards
    with pool.acquire(req):
        pass
    assert_all_back(pool)


def test_base_exceptions_inside_with_release_too(pool):
    class Stop(BaseException):
        pass

    with pytest.raises(Stop):
        with pool.acquire({"api": 4}):
            raise Stop()
    assert_all_back(pool)


def test_release_inside_with_is_not_repeated_on_exit(pool):
    with pool.acquire({"db": 10}) as grant:
        grant.release()
        other = pool.try_acquire({"db": 10})  # the units really came back
    # the exit did not release a second time: other still holds all ten
    assert pool.resource("db").in_use == 10
    other.release()
    assert_all_back(pool)


def test_double_release_is_refused_and_returns_nothing_twice(pool):
    grant = pool.try_acquire({"db": 6})
    grant.release()
    other = pool.try_acquire({"db": 10})
    with pytest.raises(cronoq.InvalidState) as e:
        grant.release()
    assert e.value.code == -11
    assert pool.resource("db").in_use == 10
    other.release()
    assert_all_back(pool)


def test_try_acquire_raises_busy_when_the_units_are_taken(pool):
    holder = pool.try_acquire({"api": 3})
    with pytest.raises(cronoq.Busy) as e:
        pool.try_acquire({"api": 2})
    assert e.value.code == -3 and e.value.name == "EBUSY"
    holder.release()
    assert_all_back(pool)


def test_timeout_raises_timeout_and_leaves_nothing_held_or_waiting(pool):
    holder = pool.try_acquire({"api": 4})
    for timeout in (0, 0.02):
        with pytest.raises(cronoq.Timeout) as e:
            with pool.acquire({"api": 1}, timeout=timeout):
                pytest.fail("granted while all units are held")
        assert isinstance(e.value, TimeoutError)
        assert waiting(pool) == 0
    holder.release()
    assert_all_back(pool)
    assert pool.resource("api").timeouts == 1  # the one that waited


def test_request_larger_than_capacity_raises_never_fits_with_the_library_message(pool):
    with pytest.raises(cronoq.NeverFits) as e:
        with pool.acquire({"db": 12}, timeout=5.0):
            pytest.fail("a never-fitting request was granted")
    assert e.value.code == -7
    assert e.value.detail == "request asks db:12 but its capacity is 10"
    assert "request asks db:12 but its capacity is 10" in str(e.value)
    with pytest.raises(cronoq.NeverFits, match="3 devices of gpu but it has 2"):
        pool.try_acquire({"gpu": 3})
    with pytest.raises(cronoq.NeverFits):
        pool.acquire({"db": 11})
    assert_all_back(pool)


def test_never_fits_is_raised_to_a_waiter_when_a_capacity_shrinks_below_it(pool):
    holder = pool.try_acquire({"db": 10})
    t = start_parked(pool, lambda: pool.acquire({"db": 8}))
    pool.set_capacity("db", 5)
    join_all([t])
    assert isinstance(t.exc, cronoq.NeverFits)
    holder.release()
    assert_all_back(pool)


def test_waiting_thread_is_granted_when_units_come_back(pool):
    holder = pool.try_acquire({"db": 10})
    seen = []

    def work():
        with pool.acquire({"db": 7}, timeout=60) as g:
            seen.append(g.units("db"))

    t = start_parked(pool, work)
    holder.release()
    join_all([t])
    assert t.exc is None and seen == [7]
    assert_all_back(pool)


def test_cancel_from_another_thread_ends_the_wait_with_cancelled(pool):
    holder = pool.try_acquire({"db": 10})
    grant = pool.lazy_acquire({"db": 1})
    t = start_parked(pool, grant.wait)
    assert grant.cancel() is True
    join_all([t])
    assert isinstance(t.exc, cronoq.Cancelled)
    assert not grant.held
    holder.release()
    assert_all_back(pool)
    assert pool.resource("db").cancellations == 1


def test_cancel_that_loses_the_race_leaves_the_grant_to_its_holder(pool):
    holder = pool.try_acquire({"db": 10})
    grant = pool.lazy_acquire({"db": 2})
    entered = threading.Event()
    leave = threading.Event()

    def work():
        with grant:
            entered.set()
            leave.wait(60)

    t = start_parked(pool, work)
    holder.release()  # the waiter wins
    wait_until(entered.is_set, "the waiter to be granted")
    assert grant.cancel() is False  # too late: nothing to cancel
    assert pool.resource("db").in_use == 2
    leave.set()
    join_all([t])
    assert t.exc is None
    assert_all_back(pool)


def test_cancel_before_any_attempt_does_nothing(pool):
    grant = pool.lazy_acquire({"db": 1})
    assert grant.cancel() is False
    with grant:
        assert grant.held
    assert_all_back(pool)


def test_a_grant_in_use_refuses_a_second_attempt(pool):
    grant = pool.lazy_acquire({"db": 1})
    with grant:
        with pytest.raises(cronoq.InvalidState):
            grant.wait()
        assert pool.resource("db").in_use == 1
    with grant:  # reusable once released
        pass
    assert_all_back(pool)


def test_close_wakes_waiters_with_closed_and_refuses_new_attempts(pool):
    holder = pool.try_acquire({"db": 10})
    t = start_parked(pool, lambda: pool.acquire({"db": 1}))
    pool.close()
    join_all([t])
    assert isinstance(t.exc, cronoq.Closed)
    with pytest.raises(cronoq.Closed):
        pool.try_acquire({"db": 1})
    holder.release()  # holders still release
    assert_all_back(pool)


class Interrupt(Exception):
    pass


def _raise_interrupt(signum, frame):
    raise Interrupt()


def test_exception_while_the_main_thread_waits_cancels_the_wait(pool):
    # A thread blocked in C cannot run a signal handler, so the main thread
    # waits on an event instead, and KeyboardInterrupt (here: an exception
    # from a SIGUSR1 handler) ends the wait.
    assert threading.current_thread() is threading.main_thread()
    holder = pool.try_acquire({"db": 10})
    forced = []
    main = threading.main_thread().ident

    def interrupter():
        wait_until(lambda: waiting(pool) == 1, "the main thread to park")
        signal.pthread_kill(main, signal.SIGUSR1)  # at the main thread itself
        # Had the handler no chance to run (the main thread blocked in C),
        # free the main thread after the guard: a failure, not a hang.
        end = time.monotonic() + HANG_GUARD_S
        while waiting(pool) and time.monotonic() < end:
            time.sleep(0.001)
        if waiting(pool):
            forced.append(True)
            holder.release()

    old = signal.signal(signal.SIGUSR1, _raise_interrupt)
    try:
        t = Thread(interrupter, name="interrupter")
        t.start()
        with pytest.raises(Interrupt):
            with pool.acquire({"db": 1}):
                pytest.fail("granted while all units are held")
        join_all([t])
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert forced == []
    assert waiting(pool) == 0
    assert pool.resource("db").in_use == 10
    holder.release()
    assert_all_back(pool)


def test_main_thread_wait_with_timeout_and_grant(pool):
    holder = pool.try_acquire({"db": 10})
    t = Thread(lambda: (wait_until(lambda: waiting(pool) == 1, "park"), holder.release()),
               name="releaser")
    t.start()
    with pool.acquire({"db": 9}, timeout=60) as g:
        assert g.units("db") == 9
    join_all([t])
    with pytest.raises(cronoq.Timeout):
        hold = pool.try_acquire({"db": 10})
        try:
            pool.acquire({"db": 1}, timeout=0.01)
        finally:
            hold.release()
    assert_all_back(pool)


def test_gil_is_released_while_a_thread_blocks():
    # If the blocked thread kept the GIL, the main thread could never run
    # the release that unblocks it: the child would hang until the guard.
    script = textwrap.dedent("""
        import threading, time, cronoq
        pool = cronoq.Pool(budgets={"db": 1})
        holder = pool.try_acquire({"db": 1})
        done = []
        def work():
            with pool.acquire({"db": 1}):
                done.append(True)
        t = threading.Thread(target=work)
        t.start()
        spins = 0
        while pool.stats().waiting == 0:   # Python code, running meanwhile
            spins += 1
            time.sleep(0.001)
        for i in range(100000):            # pure bytecode, no sleep
            spins += 1
        holder.release()
        t.join(60)
        assert done == [True], done
        print("ok", spins)
    """)
    env = dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")


def test_dropping_a_held_grant_releases_it_with_a_resource_warning(pool):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pool.try_acquire({"db": 5})  # dropped at once
        gc.collect()
    assert pool.resource("db").in_use == 0
    assert any(issubclass(w.category, ResourceWarning) for w in caught)
    assert_all_back(pool)


def test_request_of_another_pool_is_refused(pool):
    other = cronoq.Pool(budgets={"db": 10})
    req = other.request({"db": 1})
    with pytest.raises(cronoq.WrongPool):
        pool.acquire(req)
    with pytest.raises(cronoq.WrongPool):
        pool.try_acquire(req)


def test_bad_timeouts_are_refused_before_anything_happens(pool):
    for bad in (-1, float("nan")):
        with pytest.raises(cronoq.InvalidArgument):
            pool.acquire({"db": 1}, timeout=bad)
    with pytest.raises(TypeError):
        pool.acquire({"db": 1}, timeout="5")
    with pool.acquire({"db": 1}, timeout=float("inf")):
        pass
    assert_all_back(pool)


def test_pool_inherited_through_fork_refuses_attempts_in_the_child(pool):
    holder = pool.try_acquire({"db": 1})
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        code = 1
        try:
            pool.try_acquire({"db": 1})
        except cronoq.NotSupported as e:
            code = 0 if "before a fork" in str(e) else 2
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert pool.resource("db").in_use == 1  # the parent's pool is untouched
    holder.release()
    assert_all_back(pool)


def _inside_a_callback(pool, fn):
    """Run fn() inside a grant callback on this thread: callbacks that the
    library triggers meanwhile are queued behind this one, which lets a test
    put an outcome between a decision and its delivery."""
    from cronoq import _lib

    ran = []

    @_lib.GRANT_CB
    def outer(grant, status):
        ran.append(status)
        fn()

    storage = _lib.GrantStorage()
    req = pool.request({"api": 1})
    assert _lib.api.cq_grant_submit(pool._h, storage, req._r, _lib.NEVER, outer) == 0
    assert ran == [0]  # it fit at once, so it ran inside the submit
    assert _lib.api.cq_grant_release(pool._h, storage) == 0


def _park(pool, spec):
    """Start a callback wait on a new grant the way the main thread does."""
    from cronoq import _lib, _pool

    grant = pool.lazy_acquire(spec)
    grant._tok.pop()  # the attempt's token, as Grant.__enter__ takes it
    waiter = _pool._ThreadWaiter(grant)
    assert waiter.submit(_lib.NEVER) == 0
    return grant, waiter


def test_abandoned_wait_that_won_meanwhile_is_released_by_its_callback(pool):
    holder = pool.try_acquire({"db": 10})
    grant, waiter = _park(pool, {"db": 3})
    seen = {}

    def race():
        holder.release()  # grants the waiter; its callback is queued
        seen["granted"] = grant.held
        waiter.abandon()  # the cancel loses (CQ_ESTATE), nothing delivered
        seen["abandoned"] = waiter.abandoned

    _inside_a_callback(pool, race)
    assert seen == {"granted": True, "abandoned": True}
    assert not grant.held  # released when its callback ran
    assert_all_back(pool)
    with grant:  # and the grant is idle again
        pass
    assert_all_back(pool)


def test_abandoned_wait_cancelled_with_its_callback_queued_ends_idle(pool):
    holder = pool.try_acquire({"db": 10})
    grant, waiter = _park(pool, {"db": 3})

    def race():
        waiter.abandon()  # the cancel wins, its callback queued

    _inside_a_callback(pool, race)
    assert waiter.abandoned and waiter.status == -5
    assert waiting(pool) == 0
    holder.release()
    assert_all_back(pool)
    with grant:
        pass
    assert_all_back(pool)


def test_abandoned_wait_that_was_delivered_but_not_consumed_is_released(pool):
    holder = pool.try_acquire({"db": 10})
    grant, waiter = _park(pool, {"db": 3})
    holder.release()  # delivered at once on this thread: the event is set
    assert waiter.status == 0 and waiter.event.is_set()
    waiter.abandon()  # as if an exception came before the waiter looked
    assert not grant.held
    assert_all_back(pool)


def test_an_error_carries_only_its_own_attempt_s_detail(pool):
    grant = pool.lazy_acquire({"db": 11})
    with pytest.raises(cronoq.NeverFits, match="capacity is 10"):
        grant.wait()
    pool.close()
    with pytest.raises(cronoq.Closed) as e:
        grant.wait()  # the same storage, whose message the close leaves alone
    assert "capacity" not in str(e.value)
    assert str(e.value) == "pool is closed (CQ_ECLOSED)"
