"""Cancels, timeouts and task cancellations at random moments, from threads
and from an asyncio loop at once: capacities hold at every observed point,
and at the end every unit is back, nothing waits, and no callback is left
undelivered. The seed is printed; CRONOQ_FUZZ_SEED replays a run and
CRONOQ_FUZZ_ROUNDS makes it longer."""

import asyncio
import os
import random
import threading
import time

import cronoq
from cronoq import _pool
from conftest import HANG_GUARD_S, Thread, assert_all_back, join_all

CAPACITY = {"a": 3, "b": 2, "gpu": 2000}  # gpu: two devices, in thousandths
SHAPES = [{"a": 1}, {"a": 2, "b": 1}, {"b": 2}, {"a": 3}, {"gpu": 0.5},
          {"gpu": 1, "a": 1}, {"gpu": 2}, {"gpu": 0.25, "b": 1}]


class Ledger:
    def __init__(self):
        self.lock = threading.Lock()
        self.used = dict.fromkeys(CAPACITY, 0)
        self.violations = []
        self.granted = 0

    def hold(self, grant):
        with self.lock:
            self.granted += 1
            for name in CAPACITY:
                self.used[name] += grant.units(name)
                if self.used[name] > CAPACITY[name]:
                    self.violations.append(dict(self.used))

    def drop(self, grant):
        with self.lock:
            for name in CAPACITY:
                self.used[name] -= grant.units(name)


def test_random_cancels_and_timeouts_return_every_unit():
    seed = int(os.environ.get("CRONOQ_FUZZ_SEED", str(random.SystemRandom().randrange(1 << 32))))
    rounds = int(os.environ.get("CRONOQ_FUZZ_ROUNDS", "600"))
    print("fuzz seed", seed, "rounds", rounds)
    pool = cronoq.Pool(budgets={"a": 3, "b": 2}, devices={"gpu": 2})
    requests = [pool.request(s) for s in SHAPES]
    ledger = Ledger()
    in_flight = []  # grants that may be waiting, for the canceller
    in_flight_lock = threading.Lock()
    stop = threading.Event()
    errors = []

    def worker(k):
        rng = random.Random(seed * 31 + k)
        for _ in range(rounds):
            req = rng.choice(requests)
            timeout = rng.choice([None, None, 0, 0.001, 0.003])
            # Made before it waits, so that the canceller can cancel the wait.
            grant = pool.lazy_acquire(req, timeout=timeout if timeout is not None
                                      else HANG_GUARD_S)
            with in_flight_lock:
                in_flight.append(grant)
            try:
                with grant:
                    ledger.hold(grant)
                    try:
                        if rng.random() < 0.5:
                            time.sleep(rng.random() * 0.0005)
                    finally:
                        ledger.drop(grant)
            except (cronoq.Timeout, cronoq.Cancelled):
                pass
            except BaseException as e:  # noqa: B902
                errors.append(repr(e))
            finally:
                with in_flight_lock:
                    in_flight.remove(grant)

    def canceller():
        rng = random.Random(seed + 7)
        while not stop.is_set():
            with in_flight_lock:
                victim = rng.choice(in_flight) if in_flight else None
            if victim is not None:
                victim.cancel()
            time.sleep(rng.random() * 0.0003)

    async def one_task(rng, req):
        for _ in range(5):
            try:
                async with pool.acquire_async(req, timeout=rng.choice([None, 0.002])) as grant:
                    ledger.hold(grant)
                    try:  # a cancel may land in the body too
                        await asyncio.sleep(rng.random() * 0.0005)
                    finally:
                        ledger.drop(grant)
            except cronoq.Timeout:
                pass

    async def tasks_main():
        # Batches of tasks, half of each cancelled at random moments, while
        # the worker threads release units that the tasks wait for.
        rng = random.Random(seed + 11)
        for batch in range(max(2, rounds // 15)):
            tasks = [asyncio.create_task(one_task(random.Random(seed + batch * 100 + i),
                                                  rng.choice(requests)))
                     for i in range(20)]
            for t in rng.sample(tasks, len(tasks) // 2):
                await asyncio.sleep(rng.random() * 0.0005)
                t.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            for r in results:
                if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
                    errors.append(repr(r))

    def loop_thread():
        asyncio.run(asyncio.wait_for(tasks_main(), HANG_GUARD_S))

    workers = [Thread(worker, k, name="worker-%d" % k) for k in range(6)]
    others = [Thread(loop_thread, name="asyncio")]
    cancel_thread = Thread(canceller, name="canceller")
    for t in workers + others + [cancel_thread]:
        t.start()
    join_all(workers + others, timeout=HANG_GUARD_S * 2)
    stop.set()
    join_all([cancel_thread])
    for t in workers + others + [cancel_thread]:
        assert t.exc is None, "%s: %r" % (t.name, t.exc)
    assert errors == []
    assert ledger.violations == []
    assert ledger.granted > 0
    assert_all_back(pool)
    assert not [w for w in _pool._waiters.values() if w.grant._pool is pool]
    for r in pool.resources():
        assert r.peak <= CAPACITY[r.name]
