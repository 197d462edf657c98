//! The owned guard: grants of a pool in an `Arc` (`OwnedGrant`), which
//! move into spawned threads and tasks where a borrowing `Grant` cannot,
//! keep their pool alive, and release exactly once wherever they end.
mod common;

use common::*;
use cronoq::{Deadline, Error, OwnedGrant, Pool};
use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{mpsc, Arc};
use std::task::Poll;
use std::thread;

/// What `thread::spawn` and `tokio::spawn` ask of what moves into them.
fn assert_spawnable<T: Send + Sync + 'static>() {}

/// A task on a thread of its own, driven by `block_on`: the same bounds
/// as a runtime's `spawn` (`Send + 'static`), without a runtime.
fn spawn_task<F>(fut: F) -> thread::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    thread::spawn(move || block_on(fut))
}

fn shared(spec: &str) -> Arc<Pool> {
    Arc::new(pool(spec))
}

#[test]
fn owned_grant_and_its_future_are_send_sync_and_static() {
    assert_spawnable::<OwnedGrant>();
    fn assert_send<T: Send>() {}
    assert_send::<cronoq::AcquireOwned<'static>>();
}

#[test]
fn owned_grant_moves_into_a_spawned_thread_and_releases_there() {
    let _w = watchdog("owned_grant_moves_into_a_spawned_thread_and_releases_there");
    let pool = shared("db=2,memory_mib=100");
    let req = pool.request_spec("db=1,memory_mib=60").unwrap();
    let grant = pool.try_acquire_owned(&req).unwrap();
    assert_eq!(in_use(&pool, "db"), 1);
    let worker = thread::spawn(move || {
        assert_eq!((grant.held("db"), grant.held("memory_mib")), (1, 60));
        assert_eq!(in_use(grant.pool(), "memory_mib"), 60);
        drop(grant);
    });
    worker.join().unwrap();
    assert_eq!((in_use(&pool, "db"), in_use(&pool, "memory_mib")), (0, 0));
    // Both units free again: a second try takes them.
    assert_eq!(pool.try_acquire_owned(&req).unwrap().held("db"), 1);
}

#[test]
fn owned_grant_keeps_its_pool_alive_after_every_other_reference_is_gone() {
    let _w = watchdog("owned_grant_keeps_its_pool_alive_after_every_other_reference_is_gone");
    let pool = shared("db=1");
    let grant = {
        let req = pool.request_spec("db=1").unwrap();
        pool.acquire_owned(&req, Deadline::now()).unwrap()
    };
    let weak = Arc::downgrade(&pool);
    drop(pool);
    let worker = thread::spawn(move || {
        assert!(weak.upgrade().is_some(), "the grant keeps the pool");
        assert_eq!(in_use(grant.pool(), "db"), 1);
        assert_eq!(grant.release(), Ok(()));
        // The release ran first, then the last reference went: no pool
        // was destroyed while it held units.
        assert!(weak.upgrade().is_none(), "the pool is gone with its last grant");
    });
    worker.join().unwrap();
}

#[test]
fn owned_grant_is_released_when_the_thread_holding_it_panics() {
    let _w = watchdog("owned_grant_is_released_when_the_thread_holding_it_panics");
    let pool = shared("db=1");
    let req = pool.request_spec("db=1").unwrap();
    let grant = pool.try_acquire_owned(&req).unwrap();
    let worker = thread::spawn(move || {
        let _held = grant;
        panic!("the task failed while it held db");
    });
    assert!(worker.join().is_err());
    assert_eq!(in_use(&pool, "db"), 0);
    assert_eq!(pool.try_acquire_owned(&req).map(|g| g.held("db")), Ok(1));
}

#[test]
fn owned_grant_gives_part_back_like_a_grant() {
    let pool = shared("memory_mib=100");
    let req = pool.request_spec("memory_mib=60").unwrap();
    let mut grant = pool.try_acquire_owned(&req).unwrap();
    grant.release_part("memory_mib", 20).unwrap();
    assert_eq!((grant.held("memory_mib"), in_use(&pool, "memory_mib")), (40, 40));
    assert_eq!(grant.release_part("memory_mib", 41), Err(Error::Range));
    assert_eq!(grant.release_part("nope", 1), Err(Error::NotFound));
    assert_eq!(grant.fencing_token(), None); // an in-process pool issues none
    drop(grant);
    assert_eq!(in_use(&pool, "memory_mib"), 0);
}

#[test]
fn owned_grants_acquired_on_workers_and_released_on_another_thread_never_exceed_capacity() {
    let _w = watchdog(
        "owned_grants_acquired_on_workers_and_released_on_another_thread_never_exceed_capacity",
    );
    // Workers acquire and hand each grant to one releaser thread, as a
    // dispatcher hands work to a pool of its own.
    let pool = shared("db=3");
    let holders = Arc::new(AtomicI64::new(0));
    let (to_releaser, grants) = mpsc::channel::<OwnedGrant>();
    let releaser = {
        let holders = holders.clone();
        thread::spawn(move || {
            let mut n = 0u64;
            for grant in grants {
                assert_eq!(grant.held("db"), 1);
                holders.fetch_sub(1, Ordering::SeqCst);
                drop(grant);
                n += 1;
            }
            n
        })
    };
    let (threads, rounds) = (4, 500);
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (pool, holders, to_releaser) = (pool.clone(), holders.clone(), to_releaser.clone());
            thread::spawn(move || {
                let req = pool.request_spec("db=1").unwrap();
                for _ in 0..rounds {
                    let grant = pool.acquire_owned(&req, Deadline::after(HANG_GUARD)).unwrap();
                    let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                    assert!(now <= 3, "{} holders of 3 units", now);
                    to_releaser.send(grant).unwrap();
                }
            })
        })
        .collect();
    drop(to_releaser);
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(releaser.join().unwrap(), threads * rounds);
    let s = pool.resource_stats("db").unwrap();
    assert_eq!((s.in_use, s.waiting, s.grants), (0, 0, threads * rounds));
}

#[test]
fn owned_async_acquire_waits_in_one_task_and_its_grant_ends_in_another() {
    let _w = watchdog("owned_async_acquire_waits_in_one_task_and_its_grant_ends_in_another");
    let pool = shared("db=1");
    let holder = pool.try_acquire_owned(&pool.request_spec("db=1").unwrap()).unwrap();
    let waiter = {
        let pool = pool.clone();
        spawn_task(async move {
            let req = pool.request_spec("db=1").unwrap();
            pool.acquire_owned_async(&req, Deadline::after(HANG_GUARD)).await
        })
    };
    wait_until("the task waits", || pool.stats().waiting == 1);
    // Another task ends the holder's grant; the waiter is granted.
    spawn_task(async move { drop(holder) }).join().unwrap();
    let grant = waiter.join().unwrap().expect("granted once the holder released");
    assert_eq!(grant.held("db"), 1);
    let last = spawn_task(async move {
        let pool = grant.pool().clone();
        let in_use_then = in_use(&pool, "db");
        drop(grant);
        (in_use_then, in_use(&pool, "db"))
    });
    assert_eq!(last.join().unwrap(), (1, 0));
}

#[test]
fn dropping_a_waiting_owned_acquire_cancels_it_and_holds_nothing() {
    let _w = watchdog("dropping_a_waiting_owned_acquire_cancels_it_and_holds_nothing");
    let pool = shared("db=1");
    let req = pool.request_spec("db=1").unwrap();
    let holder = pool.try_acquire_owned(&req).unwrap();
    let (waker, _) = counting_waker();
    let mut fut = pool.acquire_owned_async(&req, Deadline::NEVER);
    assert!(poll_with(&mut fut, &waker).is_pending());
    drop(fut);
    let s = pool.resource_stats("db").unwrap();
    assert_eq!((s.waiting, s.cancellations, s.in_use), (0, 1, 1));
    drop(holder);
    assert_eq!(in_use(&pool, "db"), 0);
    let mut again = pool.acquire_owned_async(&req, Deadline::now());
    match poll_with(&mut again, &waker) {
        Poll::Ready(Ok(g)) => assert_eq!(g.held("db"), 1),
        _ => panic!("expected a grant at the first poll"),
    }
}
