#!/usr/bin/env python3
"""What the Python binding adds to an uncontended try + release.

Measures, in one run and against the same shared library:
- C: cq_grant_try() + cq_grant_release() of a one-budget request, by the
  probe program (cronoq-py-probe bench), the baseline;
- Python: the same through the binding, three ways a user writes it:
  ``with pool.acquire(req):``, ``pool.try_acquire(req).release()``, and
  ``with grant:`` on one reused Grant; and, to show where the time goes,
  the two ctypes calls alone.
The variants take turns, round after round, so that a busy machine slows
them alike; each round times --ops operations of each. The table gives, in
ns per try + release, the median over the rounds and the fastest round,
and each Python figure minus the C one of the same round (median). Every
round checks that all units came back and that the grants add up.

    bench.py [--probe PATH] [--ops N] [--rounds R] [--quick]

The probe is found with --probe, $CRONOQ_PROBE, or in $CRONOQ_BUILD_DIR
(bindings/python/cronoq-py-probe); the library as the package finds it.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cronoq  # noqa: E402
from cronoq import _lib  # noqa: E402


def find_probe(arg):
    if arg:
        return arg
    if os.environ.get("CRONOQ_PROBE"):
        return os.environ["CRONOQ_PROBE"]
    build = os.environ.get("CRONOQ_BUILD_DIR") or os.path.dirname(cronoq.library_path)
    return os.path.join(build, "bindings", "python", "cronoq-py-probe")


def c_figure(probe, ops):
    out = subprocess.run([probe, "bench", str(ops), "1"], capture_output=True,
                         text=True, timeout=600)
    if out.returncode != 0:
        sys.exit("bench: %s failed: %s" % (probe, out.stderr.strip()))
    key, value = out.stdout.split()
    assert key == "c_try_release_ns"
    return float(value)


def timed(ops, run, pool):
    before = pool.resource("b0").grants
    t0 = time.perf_counter_ns()
    run(ops)
    ns = (time.perf_counter_ns() - t0) / ops
    r = pool.resource("b0")
    if r.in_use != 0 or r.grants - before != ops:
        sys.exit("bench: units or grants do not add up (in use %d)" % r.in_use)
    return ns


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probe")
    ap.add_argument("--ops", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--quick", action="store_true", help="7 rounds of 20,000 ops")
    args = ap.parse_args()
    if args.quick:
        args.ops, args.rounds = 20000, 7

    pool = cronoq.Pool(budgets={"b0": 1 << 20})
    req = pool.request({"b0": 1})
    h, g, r = pool._h, _lib.GrantStorage(), req._r
    c_try, c_release = _lib.api.cq_grant_try, _lib.api.cq_grant_release

    def raw_calls(n):
        for _ in range(n):
            c_try(h, g, r)
            c_release(h, g)

    def with_acquire(n):
        for _ in range(n):
            with pool.acquire(req):
                pass

    def try_release(n):
        for _ in range(n):
            pool.try_acquire(req).release()

    reused = pool.lazy_acquire(req)  # acquires when entered, again and again

    def with_reused(n):
        for _ in range(n):
            with reused:
                pass

    variants = [
        ("with pool.acquire(req):", with_acquire),
        ("pool.try_acquire(req).release()", try_release),
        ("with grant: (one Grant reused)", with_reused),
        ("the two ctypes calls alone", raw_calls),
    ]
    probe = find_probe(args.probe)
    c_ns = []
    py_ns = {name: [] for name, _ in variants}
    added = {name: [] for name, _ in variants}
    for _ in range(args.rounds):
        c = c_figure(probe, args.ops)
        c_ns.append(c)
        for name, run in variants:
            ns = timed(args.ops, run, pool)
            py_ns[name].append(ns)
            added[name].append(ns - c)

    print("uncontended try + release, one-budget request; %d rounds of %d ops"
          % (args.rounds, args.ops))
    print("python %s, libcronoq %s (%s)" % (sys.version.split()[0], cronoq.library_version,
                                            cronoq.library_path))
    print("%-34s %12s %12s %14s" % ("", "median ns", "fastest ns", "added vs C"))
    print("%-34s %12.1f %12.1f %14s" % ("C (cronoq-py-probe)", statistics.median(c_ns),
                                        min(c_ns), "baseline"))
    for name, _ in variants:
        print("%-34s %12.1f %12.1f %+13.1f" % (name, statistics.median(py_ns[name]),
                                               min(py_ns[name]), statistics.median(added[name])))


if __name__ == "__main__":
    main()
