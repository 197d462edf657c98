//! The asynchronous acquire: outcomes, wake-ups, and cancel-safety of its
//! `Drop` on each side of the race with the library's callback.
mod common;

use common::*;
use cronoq::{Acquire, Deadline, Error, Grant, Pool, Request};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

/// A pool and requests that live for the whole test run, for wakers (which
/// must be 'static) that hold futures borrowing them.
fn leaked(spec: &str, reqs: &[&str]) -> (&'static Pool, Vec<&'static Request<'static>>) {
    let pool: &'static Pool = Box::leak(Box::new(pool(spec)));
    let reqs = reqs.iter().map(|s| &*Box::leak(Box::new(pool.request_spec(s).unwrap()))).collect();
    (pool, reqs)
}

#[test]
fn async_acquire_is_ready_at_first_poll_when_units_are_free() {
    let _w = watchdog("async_acquire_is_ready_at_first_poll_when_units_are_free");
    let pool = pool("db=1");
    let req = pool.request_spec("db=1").unwrap();
    let (waker, _) = counting_waker();
    let mut fut = pool.acquire_async(&req, Deadline::NEVER);
    match poll_with(&mut fut, &waker) {
        Poll::Ready(Ok(g)) => {
            assert_eq!(in_use(&pool, "db"), 1);
            drop(g);
        }
        other => panic!("expected a grant, got {:?}", other.map(|r| r.map(|_| ()))),
    }
    assert_eq!(in_use(&pool, "db"), 0);
}

#[test]
fn async_acquire_waits_and_is_woken_by_a_release() {
    let _w = watchdog("async_acquire_waits_and_is_woken_by_a_release");
    with_waiter(|mut t| {
        assert_eq!(t.woken.count(), 0);
        drop(t.held);
        assert_eq!(t.woken.count(), 1);
        let g = match poll_with(&mut t.fut, &t.waker) {
            Poll::Ready(Ok(g)) => g,
            _ => panic!("expected the grant after the wake"),
        };
        assert_eq!(in_use(t.pool, "db"), 1);
        drop(g);
        assert_eq!(in_use(t.pool, "db"), 0);
    });
}

#[test]
fn async_acquire_runs_on_a_plain_executor() {
    let _w = watchdog("async_acquire_runs_on_a_plain_executor");
    let pool = pool("db=1");
    let req = pool.request_spec("db=1").unwrap();
    let held = pool.try_acquire(&req).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            wait_until("the future waits", || pool.stats().waiting == 1);
            drop(held);
        });
        let g = block_on(pool.acquire_async(&req, Deadline::after(HANG_GUARD))).unwrap();
        assert_eq!(g.held("db"), 1);
    });
    assert_eq!(in_use(&pool, "db"), 0);
}

#[test]
fn dropping_a_waiting_acquire_cancels_it_and_holds_nothing() {
    let _w = watchdog("dropping_a_waiting_acquire_cancels_it_and_holds_nothing");
    with_waiter(|t| {
        drop(t.fut);
        let s = t.pool.resource_stats("db").unwrap();
        assert_eq!((s.waiting, s.cancellations, s.in_use), (0, 1, 1));
        drop(t.held);
        // Nobody was granted the unit the cancelled attempt waited for.
        assert_eq!(in_use(t.pool, "db"), 0);
    });
}

#[test]
fn dropping_an_acquire_whose_grant_won_the_race_releases_it() {
    let _w = watchdog("dropping_an_acquire_whose_grant_won_the_race_releases_it");
    with_waiter(|t| {
        drop(t.held); // the waiter is granted; its callback has run
        assert_eq!(t.woken.count(), 1);
        assert_eq!(in_use(t.pool, "db"), 1);
        drop(t.fut); // never polled again: the cancel finds it granted
        assert_eq!(in_use(t.pool, "db"), 0);
        assert_eq!(t.pool.resource_stats("db").unwrap().cancellations, 0);
    });
}

#[test]
fn dropping_an_acquire_whose_callback_is_queued_on_another_thread_waits_for_it() {
    let _w =
        watchdog("dropping_an_acquire_whose_callback_is_queued_on_another_thread_waits_for_it");
    // One release on thread X grants A and B; their callbacks queue on X,
    // and A's waker holds X up. B's outcome is decided but its callback has
    // not run when B is dropped here: the drop waits for it, then releases.
    let pool = pool("db=2");
    let all = pool.request_spec("db=2").unwrap();
    let one = pool.request_spec("db=1").unwrap();
    let held = pool.try_acquire(&all).unwrap();
    let entered = Arc::new(AtomicBool::new(false));
    let (go, wait_go) = mpsc::channel::<()>();
    let a_waker = {
        let entered = entered.clone();
        waker_running(move || {
            entered.store(true, Ordering::SeqCst);
            let _ = wait_go.recv_timeout(HANG_GUARD);
        })
    };
    let mut a = pool.acquire_async(&one, Deadline::NEVER);
    assert!(poll_with(&mut a, &a_waker).is_pending());
    let mut b = pool.acquire_async(&one, Deadline::NEVER);
    let (noop, b_woken) = counting_waker();
    assert!(poll_with(&mut b, &noop).is_pending());
    std::thread::scope(|s| {
        s.spawn(move || drop(held));
        wait_until("A's callback runs on the releasing thread", || entered.load(Ordering::SeqCst));
        assert_eq!(b_woken.count(), 0);
        // Let X go on, most likely while the drop below waits (either order
        // must end the same way).
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            go.send(()).unwrap();
        });
        drop(b);
        assert_eq!(in_use(&pool, "db"), 1, "B's grant went back, A's is held");
    });
    match poll_with(&mut a, &noop) {
        Poll::Ready(Ok(g)) => drop(g),
        _ => panic!("A was granted"),
    }
    assert_eq!(in_use(&pool, "db"), 0);
}

#[test]
fn dropped_futures_racing_releases_never_leak_units() {
    let _w = watchdog("dropped_futures_racing_releases_never_leak_units");
    // One thread grants and releases; the other starts attempts and drops
    // them at once, so that drops meet callbacks running on the releasing
    // thread, before, during and after them.
    let pool = pool("db=1");
    let req = pool.request_spec("db=1").unwrap();
    let rounds = 20_000;
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..rounds {
                if let Ok(g) = pool.acquire(&req, Deadline::after(HANG_GUARD)) {
                    drop(g);
                }
            }
        });
        let (waker, _) = counting_waker();
        let mut granted = 0;
        for i in 0..rounds {
            let mut fut = pool.acquire_async(&req, Deadline::NEVER);
            if let Poll::Ready(r) = poll_with(&mut fut, &waker) {
                granted += r.map(|_| 1).unwrap();
            } else if i % 2 == 0 {
                std::thread::yield_now();
            }
            drop(fut);
        }
        assert!(granted <= rounds);
    });
    let s = pool.resource_stats("db").unwrap();
    assert_eq!((s.in_use, s.waiting), (0, 0));
}

/// A waits for `db` with a waker that drops B, which waits too; `held`
/// holds what `held_spec` asks. Releasing it runs A's waker inside the
/// library's callback.
struct ADropsB {
    pool: &'static Pool,
    held: Grant<'static>,
    a: Acquire<'static>,
    b_slot: Arc<Mutex<Option<Acquire<'static>>>>,
    b_woken: Arc<Counter>,
}

fn a_drops_b(spec: &str, held_spec: &str) -> ADropsB {
    let (pool, reqs) = leaked(spec, &[held_spec, "db=1"]);
    let held = pool.try_acquire(reqs[0]).unwrap();
    let b_slot: Arc<Mutex<Option<Acquire<'static>>>> = Arc::new(Mutex::new(None));
    let mut a = pool.acquire_async(reqs[1], Deadline::NEVER);
    let drop_b = {
        let slot = b_slot.clone();
        waker_running(move || drop(slot.lock().unwrap().take()))
    };
    assert!(poll_with(&mut a, &drop_b).is_pending());
    let mut b = pool.acquire_async(reqs[1], Deadline::NEVER);
    let (waker, b_woken) = counting_waker();
    assert!(poll_with(&mut b, &waker).is_pending());
    *b_slot.lock().unwrap() = Some(b);
    ADropsB { pool, held, a, b_slot, b_woken }
}

/// A was granted: take its grant, give it back, and the pool is idle.
fn finish_a(pool: &Pool, mut a: Acquire<'_>) {
    let (noop, _) = counting_waker();
    match poll_with(&mut a, &noop) {
        Poll::Ready(Ok(g)) => drop(g),
        _ => panic!("A was granted"),
    }
    assert_eq!(in_use(pool, "db"), 0);
}

#[test]
fn dropping_a_won_acquire_inside_a_waker_leaves_the_release_to_its_callback() {
    let _w = watchdog("dropping_a_won_acquire_inside_a_waker_leaves_the_release_to_its_callback");
    // One release grants A and B, and their callbacks queue on the
    // releasing thread. A's waker drops B, whose callback has not run yet:
    // B's drop must not wait for it, and B's units come back when it runs,
    // before the release returns.
    let ADropsB { pool, held, a, b_slot, b_woken } = a_drops_b("db=2", "db=2");
    drop(held);
    assert!(b_slot.lock().unwrap().is_none(), "A's waker dropped B");
    assert_eq!(b_woken.count(), 0);
    assert_eq!(in_use(pool, "db"), 1, "B's grant went back, A's is held");
    finish_a(pool, a);
}

#[test]
fn dropping_a_waiting_acquire_inside_a_waker_cancels_it() {
    let _w = watchdog("dropping_a_waiting_acquire_inside_a_waker_cancels_it");
    let ADropsB { pool, held, a, b_slot, .. } = a_drops_b("db=1", "db=1");
    drop(held); // grants A only; B, still waiting, is dropped by A's waker
    assert!(b_slot.lock().unwrap().is_none(), "A's waker dropped B");
    let s = pool.resource_stats("db").unwrap();
    assert_eq!((s.in_use, s.waiting, s.cancellations), (1, 0, 1));
    finish_a(pool, a);
}

#[test]
fn blocking_acquire_inside_a_waker_is_refused_instead_of_hanging() {
    let _w = watchdog("blocking_acquire_inside_a_waker_is_refused_instead_of_hanging");
    let (pool, reqs) = leaked("db=1,cpu=1", &["db=1", "cpu=1"]);
    let (db, cpu) = (reqs[0], reqs[1]);
    let held = pool.try_acquire(db).unwrap();
    let seen: Arc<Mutex<Option<Error>>> = Arc::new(Mutex::new(None));
    let waker = {
        let seen = seen.clone();
        waker_running(move || {
            let r = pool.acquire(cpu, Deadline::NEVER).map(drop);
            *seen.lock().unwrap() = r.err();
        })
    };
    let mut fut = pool.acquire_async(db, Deadline::NEVER);
    assert!(poll_with(&mut fut, &waker).is_pending());
    drop(held);
    assert_eq!(*seen.lock().unwrap(), Some(Error::State));
    assert_eq!(in_use(pool, "cpu"), 0);
    drop(fut);
    assert_eq!(in_use(pool, "db"), 0);
}

#[test]
fn async_acquire_times_out_at_its_deadline() {
    let _w = watchdog("async_acquire_times_out_at_its_deadline");
    let pool = pool("db=1");
    let req = pool.request_spec("db=1").unwrap();
    let held = pool.try_acquire(&req).unwrap();
    let r = block_on(pool.acquire_async(&req, Deadline::after(Duration::from_millis(20))));
    assert_eq!(r.unwrap_err(), Error::TimedOut);
    let s = pool.resource_stats("db").unwrap();
    assert_eq!((s.timeouts, s.waiting, s.in_use), (1, 0, 1));
    drop(held);
}

#[test]
fn async_acquire_fails_when_the_pool_closes() {
    let _w = watchdog("async_acquire_fails_when_the_pool_closes");
    with_waiter(|mut t| {
        t.pool.close();
        assert_eq!(t.woken.count(), 1);
        match poll_with(&mut t.fut, &t.waker) {
            Poll::Ready(Err(e)) => assert_eq!(e, Error::Closed),
            _ => panic!("expected Closed"),
        }
    });
}

#[test]
fn async_acquire_refused_at_submit_resolves_with_the_error() {
    let _w = watchdog("async_acquire_refused_at_submit_resolves_with_the_error");
    let pool = pool("db=1");
    let req = pool.request_spec("db=1").unwrap();
    let mut big = pool.request();
    big.add("db", 2).unwrap();
    assert_eq!(block_on(pool.acquire_async(&big, Deadline::NEVER)).unwrap_err(), Error::Never);
    pool.close();
    assert_eq!(block_on(pool.acquire_async(&req, Deadline::NEVER)).unwrap_err(), Error::Closed);
}

#[test]
fn unpolled_acquire_does_nothing_and_drops_cleanly() {
    let _w = watchdog("unpolled_acquire_does_nothing_and_drops_cleanly");
    let pool = pool("db=1");
    let req = pool.request_spec("db=1").unwrap();
    drop(pool.acquire_async(&req, Deadline::NEVER));
    let s = pool.resource_stats("db").unwrap();
    assert_eq!((s.grants, s.cancellations, s.in_use), (0, 0, 0));
}

#[test]
fn request_cannot_change_while_a_forgotten_attempt_waits() {
    let _w = watchdog("request_cannot_change_while_a_forgotten_attempt_waits");
    let pool = pool("db=1,cpu=1");
    let mut req = pool.request_spec("db=1").unwrap();
    let held = pool.try_acquire(&req).unwrap();
    let (waker, _) = counting_waker();
    let mut fut = pool.acquire_async(&req, Deadline::NEVER);
    assert!(poll_with(&mut fut, &waker).is_pending());
    // Forgetting the future ends its borrow of the request, but the waiter
    // still reads the request's storage.
    std::mem::forget(fut);
    assert_eq!(req.add("cpu", 1).unwrap_err(), Error::InUse);
    assert_eq!(req.len(), 1);
    drop(held); // the forgotten attempt is granted (and stays held)
    req.add("cpu", 1).unwrap();
    assert_eq!(req.len(), 2);
    assert_eq!(in_use(&pool, "db"), 1);
}
