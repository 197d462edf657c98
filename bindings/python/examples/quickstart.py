"""The README's program, in Python: one task attempt around which the units
of two budgets are acquired, and released whatever the outcome."""

import cronoq


def run_task():
    print("task runs with one connection and 2 GiB")


pool = cronoq.Pool("warehouse-db=10,memory_mib=24576")
req = pool.request("warehouse-db=1,memory_mib=2048")  # built once, reused
with pool.acquire(req, timeout=5.0):
    run_task()  # released on every path, exceptions included
