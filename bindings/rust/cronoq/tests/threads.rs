//! Threads sharing a pool, a request and grants.
mod common;

use common::*;
use cronoq::{Deadline, Error};
use std::sync::atomic::{AtomicI64, Ordering};

#[test]
fn threads_sharing_one_request_never_exceed_capacity() {
    let _w = watchdog("threads_sharing_one_request_never_exceed_capacity");
    let pool = pool("db=3,memory_mib=1000");
    let req = pool.request_spec("db=1,memory_mib=300").unwrap();
    let holders = AtomicI64::new(0);
    let most = AtomicI64::new(0);
    let (threads, rounds) = (8, 2_000);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..rounds {
                    let g = pool.acquire(&req, Deadline::after(HANG_GUARD)).unwrap();
                    let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                    assert!(now <= 3, "{} holders of 3 units", now);
                    most.fetch_max(now, Ordering::SeqCst);
                    holders.fetch_sub(1, Ordering::SeqCst);
                    drop(g);
                }
            });
        }
    });
    let s = pool.resource_stats("db").unwrap();
    assert_eq!((s.in_use, s.waiting), (0, 0));
    assert_eq!(s.grants, threads * rounds);
    assert_eq!(in_use(&pool, "memory_mib"), 0);
    assert!(most.load(Ordering::SeqCst) >= 1);
}

#[test]
fn try_acquire_from_many_threads_takes_all_or_nothing() {
    let _w = watchdog("try_acquire_from_many_threads_takes_all_or_nothing");
    // Two requests that overlap on both budgets; a partial grant would
    // show as units in use that no holder accounts for.
    let pool = pool("a=5,b=5");
    let ab = pool.request_spec("a=2,b=1").unwrap();
    let ba = pool.request_spec("a=1,b=2").unwrap();
    let (held_a, held_b) = (AtomicI64::new(0), AtomicI64::new(0));
    std::thread::scope(|s| {
        for t in 0..4 {
            let (req, da, db) = if t % 2 == 0 { (&ab, 2, 1) } else { (&ba, 1, 2) };
            let (held_a, held_b) = (&held_a, &held_b);
            let pool = &pool;
            s.spawn(move || {
                for _ in 0..5_000 {
                    match pool.try_acquire(req) {
                        Ok(g) => {
                            let a = held_a.fetch_add(da, Ordering::SeqCst) + da;
                            let b = held_b.fetch_add(db, Ordering::SeqCst) + db;
                            assert!(a <= 5 && b <= 5, "a {} b {}", a, b);
                            held_a.fetch_sub(da, Ordering::SeqCst);
                            held_b.fetch_sub(db, Ordering::SeqCst);
                            drop(g);
                        }
                        Err(e) => assert_eq!(e, Error::Busy),
                    }
                }
            });
        }
    });
    assert_eq!((in_use(&pool, "a"), in_use(&pool, "b")), (0, 0));
}

#[test]
fn blocked_acquire_is_woken_by_a_release_on_another_thread() {
    let _w = watchdog("blocked_acquire_is_woken_by_a_release_on_another_thread");
    let pool = pool("db=1");
    let req = pool.request_spec("db=1").unwrap();
    let held = pool.try_acquire(&req).unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| pool.acquire(&req, Deadline::after(HANG_GUARD)).map(drop));
        wait_until("the thread waits", || pool.stats().waiting == 1);
        drop(held);
        assert_eq!(waiter.join().unwrap(), Ok(()));
    });
    let s = pool.resource_stats("db").unwrap();
    assert_eq!((s.in_use, s.grants, pool.stats().waited_grants), (0, 2, 1));
}

#[test]
fn grant_moved_to_another_thread_is_released_there() {
    let _w = watchdog("grant_moved_to_another_thread_is_released_there");
    let pool = pool("db=2");
    let req = pool.request_spec("db=2").unwrap();
    let g = pool.try_acquire(&req).unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            assert_eq!(g.held("db"), 2);
            drop(g);
        })
        .join()
        .unwrap();
    });
    assert_eq!(in_use(&pool, "db"), 0);
}

#[test]
fn pool_shared_through_an_arc_outlives_its_threads() {
    let _w = watchdog("pool_shared_through_an_arc_outlives_its_threads");
    let pool = std::sync::Arc::new(pool("db=2"));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                let req = pool.request_spec("db=1").unwrap();
                for _ in 0..1_000 {
                    drop(pool.acquire(&req, Deadline::after(HANG_GUARD)).unwrap());
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(pool.resource_stats("db").unwrap().grants, 4_000);
    assert_eq!(in_use(&pool, "db"), 0);
}
