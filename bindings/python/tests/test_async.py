"""asyncio: waits that never block the loop, 100 tasks with cancellations,
a cancel that loses the race, timeouts, never-fit errors, exceptions inside
``async with``, and grants handed over from other threads."""

import asyncio
import random
import threading

import pytest

import cronoq
from conftest import HANG_GUARD_S, assert_all_back, waiting


def run(coro):
    async def guarded():
        return await asyncio.wait_for(coro, HANG_GUARD_S)
    return asyncio.run(guarded())


async def until(predicate, what):
    """Yield to the loop until predicate() holds; bounded by run()'s guard."""
    while not predicate():
        await asyncio.sleep(0.001)


def test_async_with_releases_on_exit_and_on_exception(pool):
    async def main():
        async with pool.acquire_async({"db": 4, "gpu": 0.5}) as grant:
            assert grant.held and pool.resource("db").in_use == 4
            assert grant.cuda_visible() in ("GPU-a", "GPU-b")
        assert_all_back(pool)
        with pytest.raises(KeyError):
            async with pool.acquire_async({"db": 4}):
                raise KeyError("inside")
        assert_all_back(pool)
    run(main())


def test_waiting_task_does_not_block_the_loop_and_is_granted_on_release(pool):
    async def main():
        holder = pool.try_acquire({"db": 10})
        task = asyncio.create_task(pool.acquire_async({"db": 6}).__aenter__())
        await until(lambda: waiting(pool) == 1, "the task to park")
        ticks = 0
        for _ in range(10):  # the loop keeps running other work
            await asyncio.sleep(0)
            ticks += 1
        assert ticks == 10 and not task.done()
        holder.release()
        grant = await task
        assert grant.units("db") == 6
        grant.release()
        assert_all_back(pool)
    run(main())


def test_grant_released_on_another_thread_reaches_the_loop(pool):
    async def main():
        holder = pool.try_acquire({"api": 4})
        task = asyncio.create_task(pool.acquire_async({"api": 4}).__aenter__())
        await until(lambda: waiting(pool) == 1, "the task to park")
        t = threading.Thread(target=holder.release)
        t.start()
        grant = await task  # delivered with call_soon_threadsafe
        t.join(HANG_GUARD_S)
        grant.release()
        assert_all_back(pool)
    run(main())


def test_hundred_async_tasks_with_cancellations_return_every_unit():
    pool = cronoq.Pool(budgets={"api": 5, "db": 3})
    rng = random.Random(100)
    held = {"api": 0, "db": 0}
    peak = {"api": 0, "db": 0}
    finished = []

    async def task(i, shape):
        async with pool.acquire_async(shape):
            for k, n in shape.items():
                held[k] += n
                peak[k] = max(peak[k], held[k])
                assert held[k] <= {"api": 5, "db": 3}[k]
            try:  # a cancel may land here too
                await asyncio.sleep(rng.random() * 0.002)
            finally:
                for k, n in shape.items():
                    held[k] -= n
        finished.append(i)

    async def main():
        shapes = [{"api": 1}, {"api": 2, "db": 1}, {"db": 2}, {"api": 5}]
        tasks = [asyncio.create_task(task(i, shapes[rng.randrange(4)])) for i in range(100)]
        cancelled = set(rng.sample(range(100), 34))
        for i in sorted(cancelled, key=lambda _: rng.random()):
            await asyncio.sleep(rng.random() * 0.001)  # a random moment
            tasks[i].cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for i, r in enumerate(results):
            if isinstance(r, BaseException):
                assert isinstance(r, asyncio.CancelledError), repr(r)
                assert i in cancelled
        assert set(range(100)) - cancelled <= set(finished)
        assert len(finished) + sum(isinstance(r, asyncio.CancelledError)
                                   for r in results) == 100
    run(main())
    assert peak["api"] <= 5 and peak["db"] <= 3
    assert_all_back(pool)


def test_cancelled_task_whose_grant_already_won_releases_it(pool):
    # The grant is delivered to the loop, then the task is cancelled before
    # it runs: the waiter sees the outcome under its lock and releases.
    async def main():
        holder = pool.try_acquire({"db": 10})
        task = asyncio.create_task(pool.acquire_async({"db": 3}).__aenter__())
        await until(lambda: waiting(pool) == 1, "the task to park")
        holder.release()  # grants the task's attempt on this thread
        assert pool.resource("db").in_use == 3
        task.cancel()  # before the task has seen its grant
        with pytest.raises(asyncio.CancelledError):
            await task
        assert_all_back(pool)
    run(main())


def test_cancelled_task_while_waiting_leaves_the_queue(pool):
    async def main():
        holder = pool.try_acquire({"db": 10})
        task = asyncio.create_task(pool.acquire_async({"db": 3}).__aenter__())
        await until(lambda: waiting(pool) == 1, "the task to park")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert waiting(pool) == 0
        holder.release()
        assert_all_back(pool)
        assert pool.resource("db").cancellations == 1
    run(main())


def test_async_timeout_never_fits_and_closed_raise_their_classes(pool):
    async def main():
        holder = pool.try_acquire({"db": 10})
        with pytest.raises(cronoq.Timeout):
            async with pool.acquire_async({"db": 1}, timeout=0.02):
                pytest.fail("granted while all units are held")
        with pytest.raises(cronoq.Timeout):
            await pool.acquire_async({"db": 1}, timeout=0)
        with pytest.raises(cronoq.NeverFits, match="request asks db:11 but its capacity is 10"):
            await pool.acquire_async({"db": 11})
        waiter = asyncio.create_task(pool.acquire_async({"db": 1}).__aenter__())
        await until(lambda: waiting(pool) == 1, "the task to park")
        pool.close()
        with pytest.raises(cronoq.Closed):
            await waiter
        holder.release()
        assert_all_back(pool)
    run(main())


def test_asyncio_wait_for_timeout_cancels_the_wait(pool):
    async def main():
        holder = pool.try_acquire({"api": 4})
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(pool.acquire_async({"api": 1}).__aenter__(), 0.02)
        assert waiting(pool) == 0
        holder.release()
        assert_all_back(pool)
    run(main())


def test_grant_delivered_to_a_closed_loop_is_released_once(pool):
    holder = pool.try_acquire({"db": 10})
    loop = asyncio.new_event_loop()
    submitted = asyncio.Event()
    acquire = pool.acquire_async({"db": 2})

    async def park():
        # start the wait, then let the loop stop while it is pending
        loop.call_soon(submitted.set)
        await acquire.__aenter__()

    task = loop.create_task(park())
    loop.run_until_complete(submitted.wait())
    assert waiting(pool) == 1
    loop.close()  # nobody will run the task any more (it stays pending)
    holder.release()  # the grant's callback finds the loop closed: released
    assert_all_back(pool)
    other = pool.try_acquire({"db": 10})
    # The abandoned coroutine is closed at last: its wait must not end the
    # attempt a second time.
    task.get_coro().close()
    assert pool.resource("db").in_use == 10
    assert repr(acquire._grant).startswith("<Grant idle")
    other.release()
    assert_all_back(pool)


def test_an_awaited_acquire_async_is_held_and_async_with_releases_it(pool):
    async def main():
        grant = await pool.acquire_async({"db": 3}, timeout=1)
        assert grant.held and pool.resource("db").in_use == 3
        async with grant as entered:  # entered as it is
            assert entered is grant and pool.resource("db").in_use == 3
        assert not grant.held
        lazy = pool.lazy_acquire({"db": 2}, timeout=1)
        async with lazy:  # a lazy grant acquires on the loop
            assert lazy.units("db") == 2
        assert_all_back(pool)
    run(main())


def test_an_async_timeout_names_the_request_and_its_timeout(pool):
    async def main():
        holder = pool.try_acquire({"api": 4})
        with pytest.raises(cronoq.Timeout, match=r"request 'api=2' was not granted within its "
                           r"timeout of 0.02 s \(waited 0\.0\d\d s\).*api 4 of 4 in use"):
            await pool.acquire_async({"api": 2}, timeout=0.02)
        holder.release()
        assert_all_back(pool)
    run(main())
