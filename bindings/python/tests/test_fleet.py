"""Fleet pools from Python: Pool.connect(), grants shared by two pools of one
namespace (two hosts, and two processes), fencing tokens, the quarantine of
a namespace the server creates and the namespace's longest TTL, the errors
of a bad URL, an unreachable server and a request that never fits, an
asyncio wait cancelled on a fleet pool, the pool's fleet_stats(), and the
operator's calls (fleet_load(), fleet_library(), fleet_acl()).

The tests start their own redis-server (a temporary directory, a Unix
socket, no TCP port, nothing on disk) and stop it by its PID. They skip,
saying why, where redis-server or libcronoq_fleet is missing; CI has both.
Their namespaces are new on that server, so they open them with
new_namespace=True, except those that test the quarantine.
"""

import asyncio
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import traceback

import pytest

import cronoq
from conftest import CHILD_PYTHONPATH, HANG_GUARD_S, Thread, join_all, redis_server, wait_until
from cronoq import _lib


@pytest.fixture(scope="module")
def server():
    """A redis-server of this module's own: its URL."""
    with redis_server() as url:
        yield url


@pytest.fixture
def own_server():
    """A redis-server of this test's own, for one that changes the server
    (its library of functions): its URL."""
    with redis_server() as url:
        yield url


_names = itertools.count()


@pytest.fixture
def ns():
    """A namespace no other test uses."""
    return "py-%d-%d" % (os.getpid(), next(_names))


def connect(server, ns, host="hostA", new_namespace=True, **opts):
    """A pool of namespace `ns` on the test's server, which is new there
    unless the test says otherwise: no quarantine."""
    return cronoq.Pool.connect(server, ns, host=host, new_namespace=new_namespace, **opts)


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
    waiter = Thread(lambda: b.acquire("licence=1", timeout=HANG_GUARD_S))
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


def test_a_conflicting_declaration_names_both_and_another_capacity_is_accepted(server, ns):
    """What a resource is (its kind, a budget's lone-request allowance)
    must match the namespace's; its capacity is the namespace's live one,
    which a declaration of another capacity accepts and keeps."""
    a = connect(server, ns)
    a.add_budget("licence", 2)
    b = connect(server, ns, host="hostB")
    b.add_budget("licence", 3)
    b.add_spec("licence=3")
    assert b.resource("licence").capacity == 2
    with pytest.raises(cronoq.NameInUse) as e:
        b.add_class("licence", 3)
    assert "is a budget" in str(e.value) and ns in str(e.value), str(e.value)
    with pytest.raises(cronoq.NameInUse) as e:
        b.add_spec("licence:class=3")
    assert "is a budget" in str(e.value), str(e.value)
    with pytest.raises(cronoq.NameInUse) as e:
        b.add_budget("licence", 2, lone=True)
    assert "lone-request allowance" in str(e.value), str(e.value)
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
    """Tokens are large (the namespace's counter starts from the server's
    clock in microseconds, so that a namespace created again issues tokens
    above the lost state's), exact (below 2**53), and grow with every grant
    whichever pool made it."""
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
    assert all(2**40 < t < 2**53 for t in tokens), tokens
    # Microseconds of the server's clock, which is this machine's.
    assert (time.time() - 3600) * 1e6 < tokens[0] < (time.time() + 3600) * 1e6, tokens
    assert a.fleet_stats().max_fence == tokens[2] and b.fleet_stats().max_fence == tokens[3]
    idle = a.lazy_acquire("licence=1")
    with pytest.raises(cronoq.InvalidState):
        idle.fencing_token


def test_a_grant_held_in_another_process_counts_here(server, ns):
    pool = connect(server, ns)
    pool.add_budget("licence", 1)
    code = """
import sys, cronoq
pool = cronoq.Pool.connect(sys.argv[1], sys.argv[2], host="child", new_namespace=True)
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
        pool.acquire("licence=3", timeout=HANG_GUARD_S)
    assert "licence" in str(e.value), str(e.value)
    # pool.request() refuses it when it is built, as in-process.
    with pytest.raises(cronoq.NeverFits) as e:
        pool.request("licence=3")
    assert "requires licence:3 but the pool only has 2" in str(e.value), str(e.value)
    with pytest.raises(cronoq.UnknownResource):
        pool.request("nosuch=1")


def test_a_namespace_the_server_creates_is_quarantined_for_its_longest_ttl(server, ns):
    """Without new_namespace, a namespace the server has to create grants
    nothing for its longest TTL, since the server cannot tell it from one
    whose state it lost: a try raises Busy saying how long is left (also
    in a pool that says new_namespace once the namespace exists), and
    blocking acquires wait and are granted in arrival order as it ends."""
    times = dict(ttl=1.0, max_ttl=3.0)
    a = connect(server, ns, host="hostA", new_namespace=False, **times)
    b = connect(server, ns, host="hostB", new_namespace=False, **times)
    late = connect(server, ns, host="hostC", new_namespace=True, **times)
    for pool in (a, b, late):
        pool.add_budget("licence", 1)  # declarations are not held back
    for pool in (a, late):
        with pytest.raises(cronoq.Busy) as e:
            pool.try_acquire("licence=1")
        msg = str(e.value)
        assert "is quarantined" in msg and "ms more" in msg and ns in msg, msg
        left = pool.fleet_stats().quarantine_ms
        assert 0 < left <= 3000, left
    first = Thread(lambda: a.acquire("licence=1", timeout=HANG_GUARD_S), name="first")
    first.start()
    wait_until(lambda: a.stats().waiting == 1 or not first.is_alive(), "the first waiter to park")
    second = Thread(lambda: b.acquire("licence=1", timeout=HANG_GUARD_S), name="second")
    second.start()
    # The first to arrive is granted as the quarantine ends; the second
    # cannot be while it holds the licence.
    wait_until(lambda: not first.is_alive() or not second.is_alive(), "a grant")
    assert not first.is_alive() and second.is_alive(), (first.exc, second.exc)
    assert first.exc is None, first.exc
    held = first.result
    assert b.resource("licence").in_use == 1
    held.release()
    join_all([second])
    assert second.exc is None, second.exc
    assert second.result.fencing_token > 2**40
    second.result.release()
    with late.try_acquire("licence=1"):
        pass
    for pool in (a, b, late):
        pool.close()


def test_the_longest_ttl_is_the_namespaces_and_the_same_in_every_process(server, ns):
    """max_ttl is set when the namespace is created: an open with another
    value, or the default where it was set, is refused naming both; so is
    a ttl longer than the longest."""
    a = connect(server, ns, ttl=1.0, max_ttl=2.0)
    a.add_budget("licence", 1)
    for opts, values in (({"max_ttl": 3.0}, ("2000", "3000")),
                         ({}, ("2000", "10000"))):
        with pytest.raises(cronoq.InvalidArgument) as e:
            connect(server, ns, host="hostB", ttl=1.0, **opts)
        msg = str(e.value)
        assert ns in msg and "max_ttl_ms" in msg, msg
        assert all(v in msg for v in values), msg
    b = connect(server, ns, host="hostB", ttl=0.5, max_ttl=2.0)  # a shorter TTL is fine
    b.add_budget("licence", 1)
    with b.try_acquire("licence=1"):
        assert a.resource("licence").in_use == 1
    for opts, values in (({"ttl": 5.0, "max_ttl": 2.0}, ("5000", "2000")),
                         ({"ttl": 20.0}, ("20000", "10000"))):
        with pytest.raises(cronoq.InvalidArgument) as e:
            connect(server, ns + "-x", **opts)
        msg = str(e.value)
        assert "max_ttl_ms" in msg and all(v in msg for v in values), msg
    with pytest.raises(cronoq.InvalidArgument) as e:
        connect(server, ns, max_ttl=-1)
    assert "max_ttl" in str(e.value)
    with pytest.raises(TypeError):
        connect(server, ns, max_ttl="2")


def test_fleet_stats_say_what_the_pool_met(server, ns):
    with connect(server, ns) as pool:
        st = pool.fleet_stats()
        assert isinstance(st, cronoq.FleetStats)
        assert (st.sessions, st.leases_lost, st.state_losses, st.unavailable) == (1, 0, 0, 0)
        assert st.quarantine_ms == 0  # a new namespace
        # The test's server lets the default user read its settings.
        assert st.settings_unchecked is False
        pool.add_budget("licence", 1)
        with pool.acquire("licence=1", timeout=HANG_GUARD_S) as g:
            assert pool.fleet_stats().max_fence == g.fencing_token
    assert cronoq.Pool(budgets={"x": 1}).fleet_stats() is None


def _acl_setuser(sock, user, password, rules):
    reply = _command(sock, "ACL", "SETUSER", user, "reset", "on", ">" + password,
                     *rules.split())
    assert reply == "+OK", reply


def test_an_application_user_with_the_acl_of_fleet_acl_opens_its_namespace(server, ns):
    """fleet_acl() gives the rules an application's user needs: a pool of
    that user opens its namespace and grants. Without +info the user
    cannot read maxmemory-policy: the pool opens all the same, with
    settings_unchecked set."""
    sock = server[len("unix://"):]
    rules = cronoq.fleet_acl(ns)
    assert "~cq:{%s}:*" % ns in rules and "+fcall" in rules, rules
    assert "+function|load" not in rules and "+info" in rules.split(), rules
    cronoq.fleet_load(server)  # the operator's step: the app may not load code
    _acl_setuser(sock, "app", "apppw", rules)
    _acl_setuser(sock, "blind", "blindpw", rules.replace("+info", ""))
    for user, unchecked in (("app", False), ("blind", True)):
        url = "unix://%s:%spw@%s" % (user, user, sock)
        with cronoq.Pool.connect(url, ns, host=user, new_namespace=True) as pool:
            assert pool.fleet_stats().settings_unchecked is unchecked, user
            pool.add_budget("licence", 1)
            with pool.acquire("licence=1", timeout=HANG_GUARD_S) as g:
                assert g.fencing_token > 2**40
        # Another namespace's keys are not the user's.
        with pytest.raises(cronoq.AccessDenied):
            cronoq.Pool.connect(url, ns + "-other", new_namespace=True)
    with pytest.raises(cronoq.InvalidArgument):
        cronoq.fleet_acl("no spaces")
    with pytest.raises(TypeError):
        cronoq.fleet_acl(None)


def test_fleet_load_loads_the_library_once_and_refuses_other_code_of_its_name(own_server, ns):
    """The operator's step: an application user cannot load the library,
    and its pool says what the operator runs; fleet_load() loads it (and
    again, finding it there); other code under the library's name is
    refused, by pools and by fleet_load(), until replace=True."""
    sock = own_server[len("unix://"):]
    name = cronoq.fleet_library()
    assert name.startswith("cronoq_") and len(name) > len("cronoq_"), name
    _acl_setuser(sock, "app", "apppw", cronoq.fleet_acl(ns))
    app = "unix://app:apppw@" + sock
    with pytest.raises(cronoq.AccessDenied) as e:
        cronoq.Pool.connect(app, ns, new_namespace=True)
    assert "apppw" not in str(e.value)
    assert isinstance(cronoq.fleet_load(own_server), str)
    assert isinstance(cronoq.fleet_load(own_server), str)  # already there: fine
    with cronoq.Pool.connect(app, ns, new_namespace=True) as pool:
        pool.add_budget("licence", 1)
        pool.try_acquire("licence=1").release()
    del pool  # freed: no session of it meets the other code below
    other = "#!lua name=%s\nredis.register_function('cq_other', function() return 1 end)" % name
    assert _command(sock, "FUNCTION", "LOAD", "REPLACE", other).startswith("$")
    with pytest.raises(cronoq.NameInUse) as e:
        cronoq.fleet_load(own_server)
    assert repr(own_server) in str(e.value), str(e.value)
    with pytest.raises(cronoq.AccessDenied):
        cronoq.Pool.connect(own_server, ns + "-b", new_namespace=True)
    cronoq.fleet_load(own_server, replace=True)
    with cronoq.Pool.connect(own_server, ns + "-b", new_namespace=True) as pool:
        pool.add_budget("licence", 1)
        pool.try_acquire("licence=1").release()


def test_fleet_load_reports_a_bad_or_unreachable_server_with_its_url(tmp_path):
    try:
        _lib.fleet()
    except _lib.FleetMissing as e:
        pytest.skip("no fleet library: %s" % e)
    with pytest.raises(cronoq.InvalidArgument) as e:
        cronoq.fleet_load("http://example/")
    assert "'http://example/'" in str(e.value), str(e.value)
    url = "unix://op:SECRETPW@%s/nobody.sock" % tmp_path
    with pytest.raises(cronoq.Unavailable) as e:
        cronoq.fleet_load(url, timeout=1.0)
    assert repr("unix://op:***@%s/nobody.sock" % tmp_path) in str(e.value), str(e.value)
    assert "SECRETPW" not in str(e.value)
    with pytest.raises(cronoq.Unavailable) as e:
        cronoq.fleet_load("unix://%s/nobody.sock" % tmp_path, username="op",
                          password="SECRETPW", timeout=1.0)
    assert "SECRETPW" not in str(e.value)


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


def test_urls_are_shown_without_their_password():
    """The binding hides a URL's password where libcronoq_fleet does: the
    userinfo ends at the last '@' of a redis:// URL, and of a unix:// URL
    at the last '@' before its path, so that a password may hold '@' and
    '/', and a path '@'."""
    from cronoq._pool import _shown_url
    for url, shown in [
        ("redis://u:pw@db:6379/0", "redis://u:***@db:6379/0"),
        ("redis://pw@db/0", "redis://***@db/0"),
        ("redis://u:a/b@c@db", "redis://u:***@db"),
        ("unix://u:p@ss@/run/r.sock", "unix://u:***@/run/r.sock"),
        ("unix://u:a/b@/run/r@dis/r.sock", "unix://u:***@/run/r@dis/r.sock"),
        ("unix://pw@relative.sock", "unix://***@relative.sock"),
        ("unix:///run/r@dis.sock", "unix:///run/r@dis.sock"),
        ("redis://db:6379/0", "redis://db:6379/0"),
        ("nonsense", "nonsense"),
    ]:
        assert _shown_url(url) == shown, url


def _command(sock_path, *args):
    """Run one command on the server at `sock_path`: its reply's first line."""
    request = b"*%d\r\n" % len(args) + b"".join(
        b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30.0)
        s.connect(sock_path)
        s.sendall(request)
        return s.recv(4096).split(b"\r\n")[0].decode()


def test_a_password_appears_in_no_error_of_connect(server, ns):
    """Whatever makes Pool.connect() fail, a password, in the URL or in
    the options, is in none of what the exception shows: a password the
    server refuses, a socket that is not there, a URL refused (one whose
    password holds '/' too), a NUL byte. The user name and the path are
    still named, so that the message says which pool."""
    sock = server[len("unix://"):]
    assert _command(sock, "ACL", "SETUSER", "cronoq", "on", ">rightpw", "~*", "&*",
                    "+@all") == "+OK"
    nobody = os.path.join(os.path.dirname(sock), "nobody.sock")
    cases = [  # URL, options, what the message names
        ("unix://cronoq:WRONGPW@" + sock, {}, ["cronoq:***@", sock]),
        ("unix://cronoq:WRONGPW@" + nobody, {}, ["cronoq:***@", nobody]),
        ("unix://cronoq:WRONGPW@relative.sock", {}, ["cronoq:***@relative.sock"]),
        ("redis://cronoq:WRO/NGPW@127.0.0.1:1", {}, ["cronoq:***@127.0.0.1:1"]),
        ("unix://cronoq:WRONG\0PW@" + sock, {}, ["cronoq:***@", sock]),
        (server, {"username": "cronoq", "password": "WRONGPW"}, [sock]),
        (server, {"username": "cronoq", "password": "WRO\0NGPW"}, ["password"]),
    ]
    for url, opts, names in cases:
        with pytest.raises(cronoq.CronoqError) as e:
            cronoq.Pool.connect(url, ns, timeout=5.0, **opts)
        shown = "\n".join([str(e.value), repr(e.value), e.value.detail, repr(e.value.args),
                           "".join(traceback.format_exception(
                               e.type, e.value, e.value.__traceback__))])
        assert "NGPW" not in shown, shown
        for name in names:
            assert name in str(e.value), str(e.value)


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


# A holder in a process of its own: it takes the licence, tells the test its
# fencing token, and reads a line (the test stops it meanwhile, past its
# TTL, and resumes it); then it reports, as one JSON line, what its grant
# said inside and after the block.
_STOPPED_HOLDER = """
import json, sys, time, cronoq
url, ns = sys.argv[1], sys.argv[2]
pool = cronoq.Pool.connect(url, ns, host="child", ttl=1.0, heartbeat=0.1)
pool.add_budget("licence", 1)
told = []
pool.on_lease_lost = lambda grant: told.append(grant.request)
report = {}
try:
    with pool.acquire("licence=1", timeout=60) as g:
        print("held", g.fencing_token, flush=True)
        sys.stdin.readline()
        report["lost_inside"] = g.lost
        try:
            g.units("licence")
            report["units_inside"] = "no error"
        except cronoq.LeaseLost:
            report["units_inside"] = "LeaseLost"
    report["leaving"] = "no error"
except cronoq.LeaseLost as e:
    report["leaving"] = type(e).__name__
    report["message"] = str(e)
    report["is_cronoq_error"] = isinstance(e, cronoq.CronoqError)
report["lost"] = g.lost
report["lost_event"] = g.lost_event.wait(30)
report["held"] = g.held
end = time.monotonic() + 30
while not told and time.monotonic() < end:  # the hook may run on another thread
    time.sleep(0.01)
report["told"] = [repr(r) for r in told]
report["leases_lost"] = pool.fleet_stats().leases_lost
print(json.dumps(report), flush=True)
"""


def test_a_holder_stopped_past_its_ttl_raises_lease_lost_on_leaving_the_block(server, ns):
    """The trap: a holder stopped past its TTL inside ``with
    pool.acquire(req) as g:`` saw ``g.held = False`` and left the block
    without an error, its critical section run without the licence. Here
    the holder is a child process, stopped with SIGSTOP until this process
    is granted the licence (the server ended the child's session), then
    resumed: leaving its block raises LeaseLost, and its grant's flag, its
    Event and the pool's on_lease_lost hook all say so."""
    # This process's own TTL is longer, so that a loaded machine cannot
    # make it lose its session too; its heartbeats reclaim the child's.
    pool = connect(server, ns, ttl=5.0, heartbeat=0.2)
    pool.add_budget("licence", 1)
    env = dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH, PYTHONDONTWRITEBYTECODE="1")
    child = subprocess.Popen([sys.executable, "-c", _STOPPED_HOLDER, server, ns], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().split()
        assert line[:1] == ["held"], (line, child.stderr.read() if child.poll() else "")
        os.kill(child.pid, signal.SIGSTOP)
        try:
            # Past the child's TTL its session ends on the server, and the
            # licence it still believes it holds is granted here.
            with pool.acquire("licence=1", timeout=HANG_GUARD_S) as g:
                assert g.fencing_token > int(line[1])
        finally:
            os.kill(child.pid, signal.SIGCONT)
        out, err = child.communicate("\n", timeout=HANG_GUARD_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=HANG_GUARD_S)
    assert child.returncode == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert report["leaving"] == "LeaseLost", report
    assert report["is_cronoq_error"] is True
    assert "lease" in report["message"] and "licence=1" in report["message"], report
    assert report["lost_inside"] is True and report["units_inside"] == "LeaseLost", report
    assert (report["lost"], report["lost_event"], report["held"]) == (True, True, False), report
    assert report["told"] == ["Request('licence=1')"], report
    assert report["leases_lost"] == 1, report
    assert pool.resource("licence").in_use == 0
