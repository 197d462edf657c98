"""Pools from specs and declarations, requests from specs and dicts, what a
grant holds, stats and metrics, host-scheduler queries, fleet pools before
they exist, and bad input refused without changing anything."""

import decimal

import pytest

import cronoq
from conftest import assert_all_back


def names_and_capacities(pool):
    return [(r.name, r.kind, r.capacity) for r in pool.resources()]


def test_pool_from_a_resource_spec_declares_every_kind():
    pool = cronoq.Pool("gpu=2,warehouse-db=10,scratch:lone=5,predict:class=2")
    assert names_and_capacities(pool) == [
        ("gpu", "devices", 2000), ("warehouse-db", "budget", 10),
        ("scratch", "budget", 5), ("predict", "class", 2)]
    assert pool.resource("scratch").lone and not pool.resource("warehouse-db").lone


def test_pool_from_declarations_matches_the_same_spec():
    pool = cronoq.Pool(budgets={"warehouse-db": 10, "scratch": 5}, lone=["scratch"],
                       devices={"gpu": 2}, classes={"predict": 2})
    assert names_and_capacities(pool) == names_and_capacities(
        cronoq.Pool("gpu=2,warehouse-db=10,scratch:lone=5,predict:class=2"))
    assert pool.resource("scratch").lone


def test_lone_budget_grants_a_request_larger_than_its_capacity_alone():
    pool = cronoq.Pool(budgets={"scratch": 5}, lone=["scratch"])
    with pool.acquire({"scratch": 8}) as g:
        assert g.units("scratch") == 5  # it holds all of it
    assert_all_back(pool)


def test_spec_and_declarations_combine_and_a_bad_spec_adds_nothing():
    pool = cronoq.Pool("db=3", budgets={"api": 2})
    assert [r.name for r in pool.resources()] == ["db", "api"]
    with pytest.raises(cronoq.ParseError) as e:
        pool.add_spec("x=1,warehouse-db")
    assert "expected '='" in e.value.detail and e.value.code == -16
    assert [r.name for r in pool.resources()] == ["db", "api"]


def test_requests_from_specs_and_dicts_are_the_same_request(pool):
    a = pool.request("gpu=0.5,db=2,class=predict")
    b = pool.request({"gpu": 0.5, "db": 2, "class": "predict"})
    c = pool.request({"gpu": decimal.Decimal("0.5"), "db": 2.0}, class_="predict")
    for req in (a, b, c):
        assert len(req) == 3
        with pool.acquire(req) as g:
            assert g.units("db") == 2 and g.units("gpu") == 500 and g.units("predict") == 1
    assert repr(b) == "Request('gpu=0.5,db=2,class=predict')"
    assert_all_back(pool)


def test_whole_devices_and_fractions_from_dict_amounts(pool):
    with pool.acquire({"gpu": 2}) as g:
        assert g.devices == [0, 1] and g.cuda_visible() == "GPU-a,GPU-b"
    with pool.acquire({"gpu": 1.0}) as g:
        assert g.units("gpu") == 1000 and len(g.devices) == 1
    with pool.acquire({"gpu": 0.25}) as g, pool.acquire({"gpu": 0.75}) as h:
        assert g.devices == h.devices  # best fit: the two fill one device
    assert_all_back(pool)


def test_grant_devices_and_cuda_visible_name_what_it_holds(pool):
    with pool.acquire({"gpu": 1}) as one, pool.acquire({"gpu": 1}) as two:
        assert sorted(one.devices + two.devices) == [0, 1]
        ids = {one.cuda_visible(), two.cuda_visible("gpu")}
        assert ids == {"GPU-a", "GPU-b"}
        assert one.devices_of("gpu") == one.devices
    with pool.acquire({"db": 1}) as cpu_only:
        assert cpu_only.devices == [] and cpu_only.cuda_visible() == ""
        with pytest.raises(cronoq.UnknownResource):
            cpu_only.cuda_visible("gpu")
    assert_all_back(pool)


def test_fencing_token_is_none_on_an_in_process_pool(pool):
    with pool.acquire({"db": 1}) as g:
        assert g.fencing_token is None


def test_connect_checks_its_arguments_before_connecting():
    # tests/test_fleet.py connects to a server of its own; these never
    # reach one.
    with pytest.raises(TypeError):
        cronoq.Pool.connect(None, "jobs")
    with pytest.raises(TypeError):
        cronoq.Pool.connect("unix:///nowhere.sock", "jobs", ttl_ms=10)
    with pytest.raises(cronoq.InvalidArgument):
        cronoq.Pool.connect("unix:///nowhere.sock", "jobs\0")


def test_bad_requests_raise_the_library_s_message_and_change_nothing(pool):
    cases = [
        ({"nope": 1}, cronoq.UnknownResource, None),
        ({"db": 0}, cronoq.OutOfRange, None),
        ({"db": -2}, cronoq.OutOfRange, None),
        ({"db": 1.5}, cronoq.ParseError, "request asks db:1.5: not a number"),
        ({"gpu": 0.0005}, cronoq.OutOfRange, None),
        ({"gpu": 1.5}, cronoq.OutOfRange, "not a valid amount of a device pool"),
        ("gpu", cronoq.ParseError, "request spec: expected '=' after \"gpu\" at column 4"),
        ({"class": "nope"}, cronoq.UnknownResource, None),
    ]
    for spec, cls, message in cases:
        with pytest.raises(cls) as e:
            pool.request(spec)
        assert e.value.code == cls.code
        if message:
            assert message in str(e.value)
    with pytest.raises(cronoq.TooMany):
        many = cronoq.Pool(budgets={"r%d" % i: 1 for i in range(17)})
        many.request({"r%d" % i: 1 for i in range(17)})
    for bad in (True, None, [1], float("nan")):
        with pytest.raises((TypeError, cronoq.OutOfRange)):
            pool.request({"db": bad})
    with pytest.raises(cronoq.InvalidArgument):
        pool.request({"db\0x": 1})  # a C string would end at the NUL
    assert_all_back(pool)


def test_a_request_larger_than_a_capacity_is_refused_when_built():
    # The trap: pool.request({"cpu": 5}) on a capacity of 4 was accepted,
    # and failed only at the first acquire.
    pool = cronoq.Pool("cpu=4,gpu=2,scratch:lone=5,predict:class=2")
    with pytest.raises(cronoq.NeverFits) as e:
        pool.request({"cpu": 5})
    assert e.value.code == -7
    assert str(e.value) == ("request {'cpu': 5} can never be granted: it requires cpu:5 "
                            "but the pool only has 4 (CQ_ENEVER)")
    with pytest.raises(cronoq.NeverFits, match="requires gpu:3 but the pool only has 2"):
        pool.request("gpu=3,cpu=1")
    with pytest.raises(cronoq.NeverFits, match="requires gpu:3 .*; it requires cpu:9"):
        cronoq.Request(pool, {"cpu": 9, "gpu": 3})
    pool.set_capacity("cpu", 8)  # capacities change: what fits now is made
    pool.request({"cpu": 5})
    pool.request({"scratch": 8})  # a lone budget takes more than its capacity
    pool.set_class_max("predict", 0)
    with pytest.raises(cronoq.NeverFits, match="class predict, whose max_workers is 0"):
        pool.request({"cpu": 1}, class_="predict")
    # validate() and headroom() still answer for such requests.
    assert pool.validate({"big": {"cpu": 9}}) == ['task "big" requires cpu:9 but the pool '
                                                  'only has 8']
    with pytest.raises(cronoq.NeverFits):
        pool.headroom({"cpu": 9})


def test_pool_repr_shows_devices_as_devices():
    # The trap: <Pool gpu=2000, ...> for two devices (thousandths).
    pool = cronoq.Pool("gpu=2,tpu:devices=1,db=10,scratch:lone=5,predict:class=2")
    assert repr(pool) == ("<Pool gpu=2 devices, tpu=1 device, db=10, scratch:lone=5, "
                          "predict:class=2>")
    pool.set_device_online("gpu", 1, False)
    assert repr(pool).startswith("<Pool gpu=2 devices, 1 online, tpu=1 device,")
    pool.close()
    assert repr(pool).endswith(" closed>")


def test_bad_declarations_are_refused_and_change_nothing(pool):
    before = names_and_capacities(pool)
    with pytest.raises(cronoq.NameInUse):
        pool.add_budget("db", 5)
    with pytest.raises(cronoq.OutOfRange):
        pool.add_budget("big", 2**40)
    with pytest.raises(cronoq.OutOfRange):
        pool.add_budget("huge", 2**64 + 10)  # not wrapped to 10
    with pytest.raises(cronoq.InvalidArgument):
        pool.add_budget("bad name", 5)
    with pytest.raises(TypeError):
        pool.add_budget("x", 2.5)
    with pytest.raises(cronoq.InvalidArgument):
        pool.add_devices("tpu", ["0", "0"])
    with pytest.raises(cronoq.InvalidArgument):
        cronoq.Pool(budgets={"a": 1}, lone=["b"])
    assert names_and_capacities(pool) == before


def test_capacity_changes_grant_waiters_and_removal_refuses_while_held(pool):
    holder = pool.try_acquire({"db": 10})
    with pytest.raises(cronoq.Busy):
        pool.try_acquire({"db": 1})
    pool.set_capacity("db", 12)
    with pool.try_acquire({"db": 2}):
        pass
    with pytest.raises(cronoq.InUse):
        pool.remove("db")
    holder.release()
    req = pool.request({"db": 1})
    pool.remove("db")
    with pytest.raises(cronoq.UnknownResource):
        pool.try_acquire(req)
    pool.set_class_max("predict", 1)
    assert pool.resource("predict").capacity == 1
    assert_all_back(pool)


def test_device_offline_takes_no_new_work(pool):
    pool.set_device_online("gpu", 0, False)
    assert not pool.device("gpu", 0).online
    with pool.acquire({"gpu": 0.5}) as g:
        assert g.devices == [1]
    with pytest.raises(cronoq.NeverFits):
        pool.try_acquire({"gpu": 2})
    pool.set_device_online("gpu", 0)
    with pytest.raises(cronoq.UnknownResource):
        pool.device("gpu", 7)
    assert_all_back(pool)


def test_stats_resources_and_device_snapshots_report_what_is_held(pool):
    with pool.acquire({"db": 4, "gpu": 0.5}):
        db = pool.resource("db")
        assert (db.kind, db.capacity, db.in_use, db.grants) == ("budget", 10, 4, 1)
        gpu = pool.resource("gpu")
        assert (gpu.kind, gpu.in_use, gpu.devices, gpu.online) == ("devices", 500, 2, 2)
        used = [pool.device("gpu", i).used_milli for i in range(2)]
        assert sorted(used) == [0, 500]
        assert {r.name for r in pool.resources()} == {"gpu", "db", "api", "predict"}
    stats = pool.stats()
    assert stats.waiting == 0 and stats.waited_grants == 0
    assert pool.resource("db").wait.count == 1
    assert pool.resource("db").peak == 4


def test_metrics_are_prometheus_text_with_the_resource_labels(pool):
    with pool.acquire({"db": 3}):
        text = pool.metrics()
    assert "# TYPE cronoq_pool_waiting gauge" in text
    lines = [line for line in text.splitlines() if 'resource="db"' in line]
    assert lines, text
    assert any(line.startswith("cronoq_") for line in lines)
    assert text.endswith("\n")


def test_headroom_and_validate_answer_for_host_schedulers(pool):
    assert pool.headroom({"db": 3}) == 3
    assert pool.headroom({"gpu": 0.5}) == 4
    assert pool.headroom({}) == 2**63 - 1
    with pytest.raises(cronoq.NeverFits):
        pool.headroom({"db": 11})
    problems = pool.validate({"load": {"db": 1}, "train": {"gpu": 3, "db": 20}})
    assert len(problems) == 2
    assert all(p.startswith('task "train"') for p in problems)
    assert pool.validate({"load": "db=1"}) == []


def test_closed_pool_is_a_context_manager_and_refuses_attempts():
    with cronoq.Pool(budgets={"db": 1}) as pool:
        assert not pool.closed
    assert pool.closed
    with pytest.raises(cronoq.Closed):
        pool.try_acquire({"db": 1})
