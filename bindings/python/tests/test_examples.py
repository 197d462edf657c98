"""The examples, the README's program among them, run as a user runs them."""

import os
import subprocess
import sys

from conftest import CHILD_PYTHONPATH, SOURCE_DIR


def run_example(name, **env):
    env = dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH, PYTHONDONTWRITEBYTECODE="1", **env)
    out = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "examples", name)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_quickstart_runs_its_task_once():
    assert run_example("quickstart.py") == ["task runs with one connection and 2 GiB"]


def test_partner_api_example_caps_its_calls_and_gets_every_slot_back():
    lines = run_example("partner_api.py", CRONOQ_NUM_GPUS="1")
    assert lines[0] == "40 calls, at most 4 at a time"
    assert lines[1:5] == ["inference %d on GPU 0" % i for i in range(4)]
    assert lines[5] == "partner-api in use at the end: 0 of 4"
