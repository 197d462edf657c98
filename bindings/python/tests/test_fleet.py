"""Fleet pools from Python: Pool.connect(), grants shared by two pools of one
namespace (two hosts, and two processes), fencing tokens, the errors of a
bad URL, an unreachable server and a request that never fits, and an
asyncio wait cancelled on a fleet pool.

The tests start their own redis-server (a temporary directory, a Unix
socket, no TCP port, nothing on disk) and stop it by its PID. They skip,
saying why, where redis-server or libcronoq_fleet is missing; CI has both.
"""

import asyncio
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

import cronoq
from conftest import CHILD_PYTHONPATH, HANG_GUARD_S, Thread, join_all, wait_until
from cronoq import _lib


def _ping(sock_path):
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            s.connect(sock_path)
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture(scope="module")
def server():
    """A redis-server of this module's own: its URL."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server); "
                    "the fleet tests need it")
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


_names = itertools.count()


@pytest.fixture
def ns():
    """A namespace no other test uses."""
    return "py-%d-%d" % (os.getpid(), next(_names))


def connect(server, ns, host="hostA", **opts):
    return cronoq.Pool.connect(server, ns, host=host, **opts)


def test_connect_opens_a_fleet_pool_that_declares_and_grants(server, ns):
    with connect(server, ns) as pool:
        assert pool.is_fleet and pool.host == "hostA"
        pool.add_spec("licence=2,gpu=2")
        # This host's device pool is "gpu@hostA"; "gpu" names it.
        assert {r.name for r in pool.resources()} == {"licence", "gpu@hostA"}
        with pool.acquire({"licence": 1, "gpu": 0.5}, timeout=HANG_GUARD_S) as g:
            assert g.units("licence") == 1 and g.units("gpu") == 500
            assert pool.resource("licence").in_use == 1
        assert pool.resource("licence").in_use == 0
    assert cronoq.Pool(budgets={"x": 1}).is_fleet is False


def test_two_pools_of_a_namespace_share_its_budgets(server, ns):
    a = connect(server, ns, host="hostA")
    b = connect(server, ns, host="hostB")
    # Both declare the same licence: the second declaration matches.
    a.add_spec("licence=2")
    b.add_spec("licence=2")
    held = [a.try_acquire("licence=1"), b.try_acquire("licence=1")]
    with pytest.raises(cronoq.Busy):
        b.try_acquire("licence=1")
    assert a.resource("licence").in_use == 2
    # A waiter on one pool is granted by a release on the other.
    waiter = Thread(lambda: b.acquire("licence=1", timeout=HANG_GUARD_S).wait())
    waiter.start()
    wait_until(lambda: a.stats().waiting == 1 or not waiter.is_alive(), "b's waiter to park")
    held[0].release()
    join_all([waiter])
    assert waiter.exc is None, waiter.exc
    waiter.result.release()
    held[1].release()
    assert a.resource("licence").in_use == 0 and b.stats().waiting == 0
    a.close()
    b.close()


def test_async_releases_come_before_the_pools_next_call(server, ns):
    with connect(server, ns, async_release=True, audit=True) as pool:
        pool.add_spec("licence=1")
        for _ in range(50):
            pool.try_acquire("licence=1").release()
            # Not waited for, but on the server before this pool's next call.
            assert pool.resource("licence").in_use == 0
        with connect(server, ns, host="hostB") as other:
            # Both flags are kept: the namespace has its audit log.
            other.add_spec("licence=1")
            other.try_acquire("licence=1").release()
            assert other.resource("licence").grants == 51


def test_a_conflicting_declaration_names_both_values(server, ns):
    a = connect(server, ns)
    a.add_budget("licence", 2)
    b = connect(server, ns, host="hostB")
    with pytest.raises(cronoq.NameInUse) as e:
        b.add_budget("licence", 3)
    assert "capacity 2" in str(e.value) and ns in str(e.value), str(e.value)
    with pytest.raises(cronoq.NameInUse) as e:
        b.add_spec("licence=3")
    assert "capacity 2" in str(e.value), str(e.value)
    assert b.resource("licence").capacity == 2


def test_a_request_names_another_hosts_device_pool(server, ns):
    a = connect(server, ns, host="hostA")
    b = connect(server, ns, host="hostB")
    a.add_spec("gpu=1,licence=2")
    b.add_spec("gpu=1,licence=2")
    # From hostA: half of hostB's GPU and the fleet's licence, in one spec.
    with a.acquire("gpu@hostB=0.5,licence=1", timeout=HANG_GUARD_S) as g:
        assert g.units("gpu@hostB") == 500 and g.units("gpu") == 0
        assert b.resource("gpu").in_use == 500  # hostB's own "gpu"
        assert a.resource("gpu").in_use == 0
    with pytest.raises(cronoq.NameInUse) as e:
        a.request("gpu@hostB=0.5,gpu@hostB=1")
    assert "named twice" in str(e.value)
    with pytest.raises(cronoq.UnknownResource) as e:
        a.request("gpu@hostC=0.5")
    assert "gpu@hostC" in str(e.value)


def test_fencing_tokens_grow_with_every_grant_of_the_namespace(server, ns):
    a = connect(server, ns, host="hostA")
    b = connect(server, ns, host="hostB")
    a.add_budget("licence", 2)
    b.add_budget("licence", 2)
    tokens = []
    for pool in (a, b, a, b):
        with pool.acquire("licence=1", timeout=HANG_GUARD_S) as g:
            tokens.append(g.fencing_token)
            assert g.fencing_token == tokens[-1]  # the grant's, not a counter
    assert all(isinstance(t, int) for t in tokens)
    assert tokens == sorted(set(tokens)), tokens
    idle = a.acquire("licence=1")
    with pytest.raises(cronoq.InvalidState):
        idle.fencing_token


def test_a_grant_held_in_another_process_counts_here(server, ns):
    pool = connect(server, ns)
    pool.add_budget("licence", 1)
    code = """
import sys, cronoq
pool = cronoq.Pool.connect(sys.argv[1], sys.argv[2], host="child")
pool.add_budget("licence", 1)
with pool.acquire("licence=1", timeout=60) as g:
    print("held", g.fencing_token, flush=True)
    sys.stdin.readline()
print("released", flush=True)
"""
    env = dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH, PYTHONDONTWRITEBYTECODE="1")
    child = subprocess.Popen([sys.executable, "-c", code, server, ns], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().split()
        assert line[:1] == ["held"], line
        with pytest.raises(cronoq.Busy):
            pool.try_acquire("licence=1")
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "released"
        assert child.wait(timeout=HANG_GUARD_S) == 0
        with pool.acquire("licence=1", timeout=0) as g:
            assert g.fencing_token > int(line[1])
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=HANG_GUARD_S)


def test_a_request_that_never_fits_raises_never_fits(server, ns):
    pool = connect(server, ns)
    pool.add_budget("licence", 2)
    with pytest.raises(cronoq.NeverFits) as e:
        pool.acquire("licence=3", timeout=HANG_GUARD_S).wait()
    assert "licence" in str(e.value), str(e.value)
    with pytest.raises(cronoq.UnknownResource):
        pool.request("nosuch=1")


def test_a_bad_url_is_an_invalid_argument_naming_it(ns):
    try:
        _lib.fleet()
    except _lib.FleetMissing as e:
        pytest.skip("no fleet library: %s" % e)
    for url in ("http://example/", "redis://host:99999/0", "unix://relative.sock"):
        with pytest.raises(cronoq.InvalidArgument) as e:
            cronoq.Pool.connect(url, ns)
        assert repr(url) in str(e.value), str(e.value)
    with pytest.raises(cronoq.InvalidArgument) as e:
        cronoq.Pool.connect("unix:///nowhere.sock", "no spaces")
    assert "namespace" in str(e.value)
    with pytest.raises(TypeError):
        cronoq.Pool.connect(None, ns)


def test_an_unreachable_server_is_reported_with_its_url(tmp_path, ns):
    try:
        _lib.fleet()
    except _lib.FleetMissing as e:
        pytest.skip("no fleet library: %s" % e)
    url = "unix://cronoq:secret@%s/nobody.sock" % tmp_path
    # CQ_EUNAVAILABLE: the server cannot be reached, so nothing was opened.
    with pytest.raises(cronoq.Unavailable) as e:
        cronoq.Pool.connect(url, ns, timeout=1.0)
    assert type(e.value) is cronoq.Unavailable and e.value.code == -17
    shown = "unix://cronoq:***@%s/nobody.sock" % tmp_path
    assert repr(shown) in str(e.value), str(e.value)
    assert "secret" not in str(e.value)


def test_a_missing_fleet_library_raises_not_supported(tmp_path):
    missing = tmp_path / "libcronoq_fleet.so"
    code = ("import cronoq\n"
            "try:\n"
            "    cronoq.Pool.connect('unix:///x.sock', 'ns')\n"
            "except cronoq.NotSupported as e:\n"
            "    print(e)\n")
    env = dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH, PYTHONDONTWRITEBYTECODE="1",
               CRONOQ_FLEET_LIBRARY=str(missing))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "libcronoq_fleet could not be loaded" in out.stdout
    assert "CRONOQ_FLEET_LIBRARY: %s" % missing in out.stdout


def test_cancelling_an_async_acquire_on_a_fleet_pool_leaks_nothing(server, ns):
    a = connect(server, ns, host="hostA")
    b = connect(server, ns, host="hostB")
    a.add_budget("licence", 1)
    b.add_budget("licence", 1)

    # Tries until the licence is free, under a hang guard, letting the loop
    # run between them: a grant that won a race with its cancel is released
    # from the loop after the await returns, so on a loaded machine a single
    # try could come first.
    async def take_async(pool):
        end = time.monotonic() + HANG_GUARD_S
        while True:
            try:
                return pool.try_acquire("licence=1")
            except cronoq.Busy:
                assert time.monotonic() < end, "hang guard: the licence never came back"
                await asyncio.sleep(0.005)

    async def main():
        holder = a.try_acquire("licence=1")
        task = asyncio.ensure_future(b.acquire_async("licence=1", timeout=HANG_GUARD_S))
        end = time.monotonic() + HANG_GUARD_S
        while b.stats().waiting == 0:
            assert time.monotonic() < end, "hang guard: the async waiter never parked"
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        holder.release()
        # The cancelled waiter took nothing: the licence is free for a try.
        with b.try_acquire("licence=1"):
            pass
        # The race: release and cancel at once, many times over; whoever
        # wins, the licence comes back.
        for _ in range(20):
            holder = await take_async(a)
            task = asyncio.ensure_future(b.acquire_async("licence=1", timeout=HANG_GUARD_S))
            await asyncio.sleep(0)
            holder.release()
            task.cancel()
            try:
                (await task).release()
            except asyncio.CancelledError:
                pass

    asyncio.run(main())
    wait_until(lambda: a.resource("licence").in_use == 0, "the licence to come back")
    assert a.stats().waiting == 0
