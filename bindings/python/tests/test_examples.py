"""The examples, the README's program among them, run as a user runs them."""

import os
import re
import subprocess
import sys

from conftest import CHILD_PYTHONPATH, SOURCE_DIR, redis_server


def run_example(name, *args, **env):
    env = dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH, PYTHONDONTWRITEBYTECODE="1", **env)
    out = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "examples", name), *args],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.splitlines()


def test_quickstart_runs_its_task_once():
    assert run_example("quickstart.py") == ["task runs with one connection and 2 GiB"]


def test_partner_api_example_caps_its_calls_and_gets_every_slot_back():
    lines = run_example("partner_api.py", CRONOQ_NUM_GPUS="1")
    assert lines[0] == "40 calls, at most 4 at a time"
    assert lines[1:5] == ["inference %d on GPU 0" % i for i in range(4)]
    assert lines[5] == "partner-api in use at the end: 0 of 4"


def test_fleet_workers_example_holds_the_shared_limit_across_worker_processes():
    """examples/fleet_workers.py: 4 worker processes, each with its own
    pool on one namespace of a redis-server this test starts, run 12 jobs
    that each need one of 2 licences. From the moments each job reports it
    held its licence, at most 2 held one at once; every job ran once, in a
    worker process (not this one), with a fencing token of its own."""
    with redis_server() as url:
        lines = run_example("fleet_workers.py", url, "example-workers", "--new-namespace")
    jobs = [re.fullmatch(r"job (\d+) pid (\d+) start ([\d.]+) end ([\d.]+) token (\d+)", line)
            for line in lines[:-1]]
    assert all(jobs), lines
    assert sorted(int(m.group(1)) for m in jobs) == list(range(12))
    pids = {int(m.group(2)) for m in jobs}
    assert os.getpid() not in pids
    tokens = [int(m.group(5)) for m in jobs]
    assert len(set(tokens)) == 12
    edges = []
    for m in jobs:
        start, end = float(m.group(3)), float(m.group(4))
        assert start <= end
        edges += [(start, 1), (end, -1)]
    held = peak = 0
    for _, step in sorted(edges):
        held += step
        peak = max(peak, held)
    assert 1 <= peak <= 2, lines
    assert re.fullmatch(r"12 jobs on \d worker processes, at most %d at a time \(limit 2\)"
                        % peak, lines[-1]), lines[-1]
