"""A thread pool of 8 workers sharing one pool: capacities are never
exceeded, everyone is granted, and every unit comes back."""

import concurrent.futures
import random
import threading
import time

import cronoq
from conftest import HANG_GUARD_S, assert_all_back


class Ledger:
    """What the workers hold, by their own count, checked on every grant."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.lock = threading.Lock()
        self.used = {name: 0 for name in capacity}
        self.peak = {name: 0 for name in capacity}
        self.violations = []

    def take(self, amounts):
        with self.lock:
            for name, n in amounts.items():
                self.used[name] += n
                self.peak[name] = max(self.peak[name], self.used[name])
                if self.used[name] > self.capacity[name]:
                    self.violations.append((name, self.used[name]))

    def give(self, amounts):
        with self.lock:
            for name, n in amounts.items():
                self.used[name] -= n


def test_eight_worker_threads_never_exceed_capacity_and_return_every_unit():
    capacity = {"db": 3, "api": 5, "memory": 8}
    pool = cronoq.Pool(budgets=capacity)
    rng = random.Random(8)
    shapes = [{"db": 1}, {"api": 2}, {"db": 1, "api": 1}, {"memory": 8},
              {"memory": 3, "api": 1}, {"db": 2, "memory": 2}]
    requests = [(shape, pool.request(shape)) for shape in shapes]
    ledger = Ledger(capacity)
    tasks = [requests[rng.randrange(len(requests))] for _ in range(800)]

    def task(item):
        shape, req = item
        with pool.acquire(req, timeout=HANG_GUARD_S):
            ledger.take(shape)
            time.sleep(0)  # let the others run while it holds
            ledger.give(shape)
        return True

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as ex:
        results = list(ex.map(task, tasks, timeout=HANG_GUARD_S * 2))
    assert results == [True] * len(tasks)
    assert ledger.violations == []
    assert ledger.peak["memory"] == 8  # the whole budget was used at times
    assert_all_back(pool)
    grants = {r.name: r.grants for r in pool.resources()}
    for name in capacity:
        assert grants[name] == sum(1 for shape, _ in tasks if name in shape)


def test_class_caps_the_workers_of_a_task_across_threads():
    pool = cronoq.Pool(classes={"predict": 2}, budgets={"db": 100})
    req = pool.request({"db": 1}, class_="predict")
    ledger = Ledger({"predict": 2})

    def task(_):
        with pool.acquire(req, timeout=HANG_GUARD_S):
            ledger.take({"predict": 1})
            time.sleep(0.0005)
            ledger.give({"predict": 1})

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as ex:
        list(ex.map(task, range(200), timeout=HANG_GUARD_S * 2))
    assert ledger.violations == []
    assert ledger.peak["predict"] == 2
    assert_all_back(pool)
