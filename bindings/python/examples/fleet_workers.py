"""Worker processes that share one limit through a fleet pool: a
multiprocessing pool of 4 workers runs 12 jobs, each of which needs one of
2 licences, and at most 2 jobs hold one at a time, whichever processes run
them (and on however many hosts, with the same Redis server).

    python3 fleet_workers.py redis://localhost:6379/0 demo [--new-namespace]

A pool must not be shared across fork(): each worker process opens its own
fleet pool on the same namespace (the pool initializer below), and the
namespace's state on the server is what they share. The workers are
started with the "spawn" method, so that none inherits the parent's pool,
its background thread or its connection.

A namespace new to the server waits out a quarantine (10 s, the default
longest TTL) before its first grant, in case it is a state the server
lost; --new-namespace says that no process ever held in it, which skips
the quarantine: for a demonstration or a test, never for a program that
may be restarted against a server that lost its state.

Each job prints one line, ``job I pid P start S end E token T``: the
moments (time.monotonic(), the same clock in every process of a Linux
machine) when it held its licence, and its grant's fencing token. The last
line says how many jobs held a licence at once, at most.
"""

import argparse
import multiprocessing
import os
import sys
import time
from typing import List, Optional, Tuple

import cronoq

LICENCES = 2
JOBS = 12
WORKERS = 4

# This worker process's own pool, opened by init_worker().
pool: Optional[cronoq.Pool] = None


def init_worker(url: str, namespace: str) -> None:
    global pool
    pool = cronoq.Pool.connect(url, namespace)
    pool.add_spec("licence=%d" % LICENCES)  # the same declaration in every process


def job(i: int) -> Tuple[int, int, float, float, int]:
    assert pool is not None, "init_worker() opens each worker's pool"
    with pool.acquire("licence=1", timeout=60) as grant:
        start = time.monotonic()
        time.sleep(0.1)  # the work that needs the licence
        end = time.monotonic()
        token = grant.fencing_token
    assert token is not None  # a fleet pool's grant has one
    return i, os.getpid(), start, end, token


def most_at_once(spans: List[Tuple[float, float]]) -> int:
    """The largest number of [start, end] spans that overlap."""
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = peak = 0
    for _, step in edges:  # at a tie an end (-1) comes first
        now += step
        peak = max(peak, now)
    return peak


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url", help="redis://host:port/db or unix:///path/redis.sock")
    ap.add_argument("namespace")
    ap.add_argument("--new-namespace", action="store_true",
                    help="no process ever held in the namespace: skip its quarantine")
    args = ap.parse_args()

    # The parent declares the limit (and creates the namespace) first; it
    # takes no licence itself.
    with cronoq.Pool.connect(args.url, args.namespace,
                             new_namespace=args.new_namespace) as parent:
        parent.add_spec("licence=%d" % LICENCES)
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(WORKERS, initializer=init_worker,
                      initargs=(args.url, args.namespace)) as workers:
            results = workers.map(job, range(JOBS), chunksize=1)
        for i, pid, start, end, token in results:
            print("job %d pid %d start %.6f end %.6f token %d" % (i, pid, start, end, token))
        peak = most_at_once([(start, end) for _, _, start, end, _ in results])
        print("%d jobs on %d worker processes, at most %d at a time (limit %d)"
              % (JOBS, len({pid for _, pid, _, _, _ in results}), peak, LICENCES))
        lic = parent.resource("licence")
        assert lic.in_use == 0, "every licence came back"
    return 0 if peak <= LICENCES else 1


if __name__ == "__main__":
    sys.exit(main())
