//! Grants and waiting attempts give everything back when a panic unwinds
//! through their owner.
mod common;

use common::*;
use cronoq::Deadline;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

#[test]
fn grant_is_released_when_its_holder_thread_panics() {
    let _w = watchdog("grant_is_released_when_its_holder_thread_panics");
    let pool = Arc::new(pool("db=2,memory_mib=100"));
    let holder = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            let req = pool.request_spec("db=2,memory_mib=100").unwrap();
            let _grant = pool.acquire(&req, Deadline::after(HANG_GUARD)).unwrap();
            assert_eq!(in_use(&pool, "db"), 2);
            panic!("the task failed while holding its units");
        })
    };
    assert!(holder.join().is_err());
    assert_eq!((in_use(&pool, "db"), in_use(&pool, "memory_mib")), (0, 0));
}

#[test]
fn waiting_future_is_cancelled_when_its_task_panics() {
    let _w = watchdog("waiting_future_is_cancelled_when_its_task_panics");
    with_waiter(|t| {
        let (pool, held, fut) = (t.pool, t.held, t.fut);
        let r = catch_unwind(AssertUnwindSafe(move || {
            let _fut = fut;
            panic!("the task failed while its acquire waited");
        }));
        assert!(r.is_err());
        let s = pool.resource_stats("db").unwrap();
        assert_eq!((s.waiting, s.cancellations), (0, 1));
        drop(held);
        assert_eq!(in_use(pool, "db"), 0);
    });
}

#[test]
fn grant_won_by_a_future_is_released_when_its_task_panics_before_polling_it() {
    let _w = watchdog("grant_won_by_a_future_is_released_when_its_task_panics_before_polling_it");
    with_waiter(|t| {
        let (pool, held, fut) = (t.pool, t.held, t.fut);
        let r = catch_unwind(AssertUnwindSafe(move || {
            let _fut = fut;
            drop(held); // the future's attempt is granted
            assert_eq!(in_use(pool, "db"), 1);
            panic!("the task failed before it saw its grant");
        }));
        assert!(r.is_err());
        assert_eq!(in_use(pool, "db"), 0);
    });
}

#[test]
fn grant_from_a_future_is_released_when_the_task_panics_while_holding_it() {
    let _w = watchdog("grant_from_a_future_is_released_when_the_task_panics_while_holding_it");
    let pool = pool("db=1");
    let req = pool.request_spec("db=1").unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _grant = block_on(pool.acquire_async(&req, Deadline::NEVER)).unwrap();
        panic!("the task failed while holding an async grant");
    }));
    assert!(r.is_err());
    assert_eq!(in_use(&pool, "db"), 0);
}
