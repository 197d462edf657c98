//! A tokio service whose tasks share one fleet pool.
//!
//!   cargo run --offline -- URL NAMESPACE JOBS [new]      (in this directory)
//!
//! As in `examples/fleet_share.c`, every process that opens NAMESPACE on
//! the Redis server at URL shares `licence=2`: at most two jobs hold a seat
//! at once across all of them, granted in arrival order. Here one process
//! runs JOBS jobs on a tokio runtime. The pool is opened once and shared by
//! its tasks as an `Arc<Pool>`; WORKERS tasks each build their request once
//! and run every WORKERS-th job:
//!
//! 1. wait for a seat without holding a thread (`acquire_owned_async`: the
//!    library's background thread wakes the task);
//! 2. hold it across an `.await` (the job's I/O);
//! 3. move the seat, an `OwnedGrant`, into `spawn_blocking` with the job's
//!    CPU part; it goes back when that closure ends, on the blocking
//!    thread. A `Grant` borrows its pool, so it could not move there (the
//!    closure must be `'static`), nor into `tokio::spawn`.
//!
//! Every call that reaches the server may wait for it (up to the pool's
//! timeout, 5 s by default), so opening the pool and releasing seats run
//! on blocking threads; an acquire only sends the attempt. `new` says that
//! no process used the namespace before, so the server grants at once (else
//! a namespace the server creates waits out a quarantine, its longest TTL:
//! see docs/FLEET-POOLS.md). Run several of these against one server to
//! see the seats shared between processes.
//!
//! It prints each job and a summary, and fails if a task held more seats
//! than there are or two grants had the same fencing token.
use cronoq::{Deadline, FleetOptions, Pool};
use std::collections::HashSet;
use std::error::Error;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SPEC: &str = "licence=2";
const SEATS: usize = 2;
const WORKERS: usize = 4;

/// What the tasks observe, to check the rule held.
#[derive(Default)]
struct Seen {
    holding: AtomicUsize,
    most: AtomicUsize,
    tokens: Mutex<HashSet<u64>>,
}

type Failure = Box<dyn Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().collect();
    let new = args.len() == 5 && args[4] == "new";
    if !(args.len() == 4 || new) {
        eprintln!("usage: {} URL NAMESPACE JOBS [new]", args[0]);
        std::process::exit(2);
    }
    let jobs: usize = args[3].parse()?;
    let (url, namespace) = (args[1].clone(), args[2].clone());
    let pool: Arc<Pool> = tokio::task::spawn_blocking(move || -> Result<_, Failure> {
        let pool = Pool::connect(&url, &namespace, FleetOptions::new().new_namespace(new))?;
        pool.add_spec(SPEC)?; // every process declares what it uses
        Ok(Arc::new(pool))
    })
    .await??;

    let seen = Arc::new(Seen::default());
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| tokio::spawn(worker(pool.clone(), seen.clone(), (w..jobs).step_by(WORKERS))))
        .collect();
    for w in workers {
        w.await??;
    }

    let stats = pool.fleet_stats().expect("a fleet pool");
    let tokens = seen.tokens.lock().unwrap().len();
    println!(
        "{} jobs done by {} tasks sharing one pool; at most {} of {} seats held at once here; \
         {} distinct fencing tokens; leases lost: {}",
        jobs,
        WORKERS,
        seen.most.load(Ordering::SeqCst),
        SEATS,
        tokens,
        stats.leases_lost
    );
    if tokens != jobs {
        return Err(format!("{} fencing tokens for {} grants", tokens, jobs).into());
    }
    // The last reference: dropping it ends the session on the server.
    tokio::task::spawn_blocking(move || drop(pool)).await?;
    Ok(())
}

/// One task: the request built once, then its share of the jobs.
async fn worker(
    pool: Arc<Pool>,
    seen: Arc<Seen>,
    jobs: impl Iterator<Item = usize>,
) -> Result<(), Failure> {
    let seat = pool.request_spec("licence=1")?;
    for job in jobs {
        // 1. Wait for a seat; the task sleeps, no thread does.
        let grant =
            pool.acquire_owned_async(&seat, Deadline::after(Duration::from_secs(60))).await?;
        let now = seen.holding.fetch_add(1, Ordering::SeqCst) + 1;
        seen.most.fetch_max(now, Ordering::SeqCst);
        if now > SEATS {
            return Err(format!("{} seats held at once, of {}", now, SEATS).into());
        }
        let token = grant.fencing_token().expect("a fleet grant has a fencing token");
        seen.tokens.lock().unwrap().insert(token);
        println!("job {:3}: a seat, fencing token {}", job, token);

        // 2. The job's I/O, holding the seat across the await.
        tokio::time::sleep(Duration::from_millis(10)).await;

        // 3. Its CPU part on a blocking thread, which the seat moves to.
        let seen = seen.clone();
        tokio::task::spawn_blocking(move || {
            std::thread::sleep(Duration::from_millis(5)); // the work
            seen.holding.fetch_sub(1, Ordering::SeqCst);
            drop(grant); // the seat goes back to the fleet
        })
        .await?;
    }
    Ok(())
}
