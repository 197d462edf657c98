//! The synchronous API: pools, requests, grant guards, errors.
mod common;

use common::*;
use cronoq::{Deadline, Error, Pool, Task};
use std::ffi::CStr;
use std::time::Duration;

#[test]
fn pool_request_grant_and_future_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Pool>();
    send_sync::<cronoq::Request<'static>>();
    send_sync::<cronoq::Grant<'static>>();
    send_sync::<cronoq::Acquire<'static>>();
    send_sync::<Error>();
}

#[test]
fn try_acquire_grants_every_resource_at_once_or_nothing() {
    let pool = pool("db=2,memory_mib=100");
    let req = pool.request_spec("db=1,memory_mib=60").unwrap();
    let first = pool.try_acquire(&req).unwrap();
    assert_eq!((in_use(&pool, "db"), in_use(&pool, "memory_mib")), (1, 60));
    assert_eq!(first.held("db"), 1);
    assert_eq!(first.held("memory_mib"), 60);
    // db has room for a second, memory does not: nothing is taken.
    assert_eq!(pool.try_acquire(&req).unwrap_err(), Error::Busy);
    assert_eq!((in_use(&pool, "db"), in_use(&pool, "memory_mib")), (1, 60));
    drop(first);
    assert_eq!((in_use(&pool, "db"), in_use(&pool, "memory_mib")), (0, 0));
}

#[test]
fn dropping_the_grant_gives_every_unit_back_once() {
    let pool = pool("db=3");
    let mut req = pool.request();
    req.add("db", 3).unwrap();
    for _ in 0..3 {
        let g = pool.acquire(&req, Deadline::NEVER).unwrap();
        assert_eq!(in_use(&pool, "db"), 3);
        drop(g);
        assert_eq!(in_use(&pool, "db"), 0);
    }
    assert_eq!(pool.resource_stats("db").unwrap().grants, 3);
}

#[test]
fn explicit_release_reports_success() {
    let pool = pool("db=1");
    let req = pool.request_spec("db=1").unwrap();
    let g = pool.try_acquire(&req).unwrap();
    assert_eq!(g.release(), Ok(()));
    assert_eq!(in_use(&pool, "db"), 0);
}

#[test]
fn partial_release_returns_units_early_and_drop_returns_the_rest() {
    let pool = pool("db=10,memory_mib=100");
    let req = pool.request_spec("db=4,memory_mib=50").unwrap();
    let mut g = pool.try_acquire(&req).unwrap();
    g.release_part("db", 3).unwrap();
    assert_eq!(g.held("db"), 1);
    assert_eq!(in_use(&pool, "db"), 1);
    // More than held, a resource it does not hold: refused, nothing changes.
    assert_eq!(g.release_part("db", 2), Err(Error::Range));
    assert_eq!(g.release_part("cpu", 1), Err(Error::NotFound));
    assert_eq!(in_use(&pool, "db"), 1);
    drop(g);
    assert_eq!((in_use(&pool, "db"), in_use(&pool, "memory_mib")), (0, 0));
}

#[test]
fn blocking_acquire_times_out_at_its_deadline_holding_nothing() {
    let pool = pool("db=1");
    let req = pool.request_spec("db=1").unwrap();
    let held = pool.try_acquire(&req).unwrap();
    let r = pool.acquire(&req, Deadline::after(Duration::from_millis(20)));
    assert_eq!(r.unwrap_err(), Error::TimedOut);
    let s = pool.resource_stats("db").unwrap();
    assert_eq!((s.in_use, s.timeouts, s.waiting), (1, 1, 0));
    drop(held);
}

#[test]
fn deadline_already_past_tries_once_without_waiting() {
    let pool = pool("db=1");
    let req = pool.request_spec("db=1").unwrap();
    let held = pool.acquire(&req, Deadline::now()).unwrap();
    assert_eq!(pool.acquire(&req, Deadline::now()).unwrap_err(), Error::TimedOut);
    drop(held);
}

#[test]
fn request_larger_than_capacity_fails_at_once_and_validate_names_it() {
    let pool = pool("db=10,cpu=4");
    let too_big = pool.request_spec("db=12").unwrap();
    let fine = pool.request_spec("cpu=1").unwrap();
    assert_eq!(pool.try_acquire(&too_big).unwrap_err(), Error::Never);
    // Never waits, even without a deadline.
    assert_eq!(pool.acquire(&too_big, Deadline::NEVER).unwrap_err(), Error::Never);
    let tasks =
        [Task { name: "extract", request: &fine }, Task { name: "load", request: &too_big }];
    let problems = pool.validate(&tasks).unwrap_err();
    assert_eq!(problems.len(), 1);
    assert_eq!((problems[0].task, problems[0].error), (1, Error::Never));
    assert!(problems[0].message.contains("load"), "{}", problems[0].message);
    assert!(problems[0].message.contains("db"), "{}", problems[0].message);
    assert_eq!(pool.validate(&tasks[..1]), Ok(()));
}

#[test]
fn failed_request_changes_leave_it_unchanged_and_say_why() {
    let pool = pool("db=10");
    let mut req = pool.request();
    assert_eq!(req.add("warehouse", 1).unwrap_err(), Error::NotFound);
    assert!(req.error().contains("warehouse"), "{}", req.error());
    assert_eq!(req.add("db", 0).unwrap_err(), Error::Range);
    assert!(req.is_empty());
    req.add("db", 1).unwrap();
    assert_eq!(req.add("db", 1).unwrap_err(), Error::Exists);
    assert_eq!(req.len(), 1);
    assert_eq!(req.add(&"x".repeat(64), 1).unwrap_err(), Error::Invalid);
    assert_eq!(req.add("d\0b", 1).unwrap_err(), Error::Invalid);
    assert_eq!(req.parse("db=").unwrap_err(), Error::Parse);
    assert!(req.error().contains("column"), "{}", req.error());
    assert_eq!(req.len(), 1);
}

#[test]
fn spec_errors_carry_the_library_message() {
    let pool = Pool::new().unwrap();
    let e = pool.add_spec("warehouse-db").unwrap_err();
    assert_eq!(e.error, Error::Parse);
    assert!(e.message.contains("column"), "{}", e.message);
    assert!(e.to_string().contains("EPARSE"), "{}", e);
    // All or nothing: the good part of a bad spec is not added either.
    assert!(pool.add_spec("db=1,cpu").is_err());
    assert_eq!(pool.resource_stats("db").unwrap_err(), Error::NotFound);
    let e = pool.request_spec("db=1").unwrap_err();
    assert_eq!(e.error, Error::NotFound);
    assert!(!e.message.is_empty());
}

#[test]
fn request_of_another_pool_is_refused() {
    let a = pool("db=1");
    let b = pool("db=1");
    let req = a.request_spec("db=1").unwrap();
    assert_eq!(b.try_acquire(&req).unwrap_err(), Error::WrongPool);
    assert_eq!(in_use(&b, "db"), 0);
}

#[test]
fn closed_pool_refuses_acquires_and_holders_still_release() {
    let pool = pool("db=2");
    let req = pool.request_spec("db=1").unwrap();
    let held = pool.try_acquire(&req).unwrap();
    pool.close();
    assert_eq!(pool.try_acquire(&req).unwrap_err(), Error::Closed);
    assert_eq!(pool.acquire(&req, Deadline::NEVER).unwrap_err(), Error::Closed);
    assert_eq!(held.release(), Ok(()));
    assert_eq!(in_use(&pool, "db"), 0);
}

#[test]
fn class_caps_the_grants_held_at_once_and_headroom_counts_them() {
    let pool = pool("cpu=8");
    pool.add_class("predict", 2).unwrap();
    let mut req = pool.request();
    req.add("cpu", 1).unwrap().set_class("predict").unwrap();
    assert_eq!(pool.headroom(&req), Ok(2));
    let a = pool.try_acquire(&req).unwrap();
    let b = pool.try_acquire(&req).unwrap();
    assert_eq!(pool.try_acquire(&req).unwrap_err(), Error::Busy);
    assert_eq!(pool.headroom(&req), Ok(0));
    assert_eq!(in_use(&pool, "predict"), 2);
    drop(a);
    assert_eq!(pool.headroom(&req), Ok(1));
    drop(b);
}

#[test]
fn device_grants_name_their_devices_for_cuda() {
    let pool = Pool::new().unwrap();
    pool.add_devices_with_ids("gpu", &["GPU-aa", "GPU-bb", "GPU-cc"]).unwrap();
    let mut half = pool.request();
    half.add_fraction("gpu", 500).unwrap();
    let mut two = pool.request();
    two.add_devices("gpu", 2).unwrap();
    let h = pool.try_acquire(&half).unwrap();
    assert_eq!(h.devices(None), vec![0]);
    assert_eq!(h.cuda_visible(Some("gpu")).unwrap(), "GPU-aa");
    let mut w = pool.try_acquire(&two).unwrap();
    assert_eq!(w.devices(Some("gpu")), vec![1, 2]);
    assert_eq!(w.cuda_visible(None).unwrap(), "GPU-bb,GPU-cc");
    w.release_device("gpu", 1, 1000).unwrap();
    assert_eq!(w.devices(None), vec![2]);
    assert_eq!(in_use(&pool, "gpu"), 1500);
    drop((h, w));
    assert_eq!(in_use(&pool, "gpu"), 0);
}

#[test]
fn every_c_error_code_maps_to_its_variant_and_back() {
    let mut seen = std::collections::HashSet::new();
    for code in cronoq::sys::CQ_ERRNO_MIN..0 {
        let e = Error::from_code(code);
        assert!(!matches!(e, Error::Unknown(_)), "code {} has no variant", code);
        assert!(seen.insert(e), "two codes map to {:?}", e);
        assert_eq!(e.code(), code);
        let name = unsafe { CStr::from_ptr(cronoq::sys::cq_err_name(code)) };
        assert_eq!(e.name(), name.to_str().unwrap());
        let msg = unsafe { CStr::from_ptr(cronoq::sys::cq_strerror(code)) };
        assert_eq!(e.to_string(), msg.to_str().unwrap());
    }
    // The last code the header added: a fleet pool's server refused the
    // user or a permission.
    assert_eq!(Error::from_code(cronoq::sys::CQ_EACCES), Error::AccessDenied);
    assert_eq!(Error::AccessDenied.code(), -18);
    assert_eq!(Error::AccessDenied.name(), "EACCES");
    assert_eq!(cronoq::sys::CQ_ERRNO_MIN, cronoq::sys::CQ_EACCES);
    let unknown = Error::from_code(-99);
    assert_eq!(unknown, Error::Unknown(-99));
    assert_eq!(unknown.code(), -99);
    assert_eq!(unknown.name(), "UNKNOWN");
    let boxed: Box<dyn std::error::Error> = Box::new(Error::Busy);
    assert!(!boxed.to_string().is_empty());
}

#[test]
fn metrics_name_each_resource() {
    let pool = pool("db=4");
    let req = pool.request_spec("db=1").unwrap();
    let g = pool.try_acquire(&req).unwrap();
    let text = pool.metrics().unwrap();
    assert!(text.contains("cronoq_in_use{resource=\"db\"} 1"), "{}", text);
    drop(g);
}

#[test]
fn in_process_grants_have_no_fencing_token() {
    let pool = pool("db=1");
    let req = pool.request_spec("db=1").unwrap();
    assert_eq!(pool.try_acquire(&req).unwrap().fencing_token(), None);
}

#[test]
fn grant_storage_is_reused_after_release() {
    let pool = pool("db=2");
    let req = pool.request_spec("db=1").unwrap();
    let first = pool.try_acquire(&req).unwrap();
    let at = first.as_ptr();
    drop(first);
    let again = pool.try_acquire(&req).unwrap();
    assert_eq!(again.as_ptr(), at);
    // Two held at once never share storage.
    let other = pool.try_acquire(&req).unwrap();
    assert_ne!(other.as_ptr(), again.as_ptr());
}

#[test]
fn forgotten_grant_keeps_its_units_and_the_pool_is_leaked_not_freed() {
    let pool = pool("db=1");
    let req = pool.request_spec("db=1").unwrap();
    std::mem::forget(pool.try_acquire(&req).unwrap());
    assert_eq!(in_use(&pool, "db"), 1);
    assert_eq!(pool.try_acquire(&req).unwrap_err(), Error::Busy);
    drop(req);
    drop(pool); // destroy is refused (CQ_EINUSE): closed and leaked
}

#[test]
fn deadlines_round_up_to_a_millisecond() {
    let before = cronoq::now_ms();
    let d = Deadline::after(Duration::from_micros(1));
    assert!(d.as_ms() > before);
    assert_eq!(Deadline::after(Duration::MAX), Deadline::NEVER);
    assert_eq!(Deadline::at_ms(42).as_ms(), 42);
}
