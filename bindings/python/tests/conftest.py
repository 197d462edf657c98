"""Shared helpers of the Python binding's tests.

The tests import the package from this source tree (bindings/python), or
with CRONOQ_TEST_INSTALLED=1 the installed one, and the package finds the
library as it always does: ctest sets CRONOQ_BUILD_DIR to the build tree.
With CRONOQ_REQUIRE_PYTHON=1 (CI) a skipped test fails, except those marked
optional (real GPUs). Every wait in a test is bounded by wait_until() or a
join with a timeout: a hang guard that fails the test, never a check of how
fast something was.
"""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTALLED = bool(os.environ.get("CRONOQ_TEST_INSTALLED"))
if not INSTALLED:
    sys.path.insert(0, SOURCE_DIR)
# PYTHONPATH for child interpreters, so that they import the same package.
CHILD_PYTHONPATH = "" if INSTALLED else SOURCE_DIR

import pytest  # noqa: E402

import cronoq  # noqa: E402

if INSTALLED and cronoq.__file__.startswith(SOURCE_DIR + os.sep):
    raise RuntimeError("CRONOQ_TEST_INSTALLED, but cronoq comes from %s" % cronoq.__file__)


def pytest_configure(config):
    config.addinivalue_line("markers", "optional: may skip even where skips fail")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and os.environ.get("CRONOQ_REQUIRE_PYTHON")
            and item.get_closest_marker("optional") is None):
        report.outcome = "failed"
        report.longrepr = "skipped, but CRONOQ_REQUIRE_PYTHON is set: %s" % (report.longrepr,)

HANG_GUARD_S = 60.0


def wait_until(predicate, what, timeout=HANG_GUARD_S):
    """Poll until predicate() is true; fail the test after `timeout` s."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            pytest.fail("hang guard: still waiting for %s after %.0f s" % (what, timeout))
        time.sleep(0.001)


def join_all(threads, timeout=HANG_GUARD_S):
    end = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    alive = [t.name for t in threads if t.is_alive()]
    if alive:
        pytest.fail("hang guard: threads still running: %s" % alive)


def assert_all_back(pool):
    """Every unit of every resource is back and nothing waits."""
    assert pool.stats().waiting == 0
    for r in pool.resources():
        assert r.in_use == 0, "%s still has %d in use" % (r.name, r.in_use)
        assert r.waiting == 0, "%s still has %d waiting" % (r.name, r.waiting)


def waiting(pool):
    return pool.stats().waiting


class Thread(threading.Thread):
    """A thread that keeps the exception its target raised, or its result."""

    def __init__(self, target, *args, name=None):
        super().__init__(name=name, daemon=True)
        self._target_fn = target
        self._args = args
        self.result = None
        self.exc = None

    def run(self):
        try:
            self.result = self._target_fn(*self._args)
        except BaseException as e:  # noqa: B902 - kept for the test to check
            self.exc = e


@pytest.fixture
def pool():
    p = cronoq.Pool(budgets={"db": 10, "api": 4}, devices={"gpu": ["GPU-a", "GPU-b"]},
                    classes={"predict": 2})
    yield p
    p.close()


def start_parked(pool, target, name="waiter"):
    """Start a thread running target() and return it once its request
    waits in the pool (one more waiter than before)."""
    before = waiting(pool)
    t = Thread(target, name=name)
    t.start()
    wait_until(lambda: waiting(pool) > before or not t.is_alive(), "%s to park" % name)
    assert t.is_alive(), "%s ended instead of waiting: %r" % (name, t.exc)
    return t


def _ping(sock_path):
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            s.connect(sock_path)
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextlib.contextmanager
def redis_server():
    """Run a redis-server of the caller's own (a temporary directory, a Unix
    socket, no TCP port, nothing on disk), stopped by its PID: its URL.
    Skips where redis-server or libcronoq_fleet is missing."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server); "
                    "the fleet tests need it")
    from cronoq import _lib

    try:
        _lib.fleet()
    except _lib.FleetMissing as e:
        pytest.skip("no fleet library: %s" % e)
    tmp = tempfile.mkdtemp(prefix="cronoq-py-redis-")
    sock = os.path.join(tmp, "redis.sock")
    log = open(os.path.join(tmp, "redis.log"), "w")
    proc = subprocess.Popen(
        [exe, "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no",
         "--dir", tmp, "--maxmemory-policy", "noeviction", "--loglevel", "warning"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 30
        while not _ping(sock):
            if proc.poll() is not None:
                pytest.fail("redis-server exited at start (see %s/redis.log)" % tmp)
            if time.monotonic() > end:
                pytest.fail("redis-server did not answer PING within 30 s")
            time.sleep(0.01)
        yield "unix://" + sock
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
