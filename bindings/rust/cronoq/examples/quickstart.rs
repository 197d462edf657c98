//! The README's program: a pool, a request built once, one attempt that
//! waits up to 5 s, and the units back when the grant goes out of scope.
//! Run it: `cargo run --example quickstart`.
use cronoq::{Deadline, Pool};
use std::time::Duration;

fn run_task() {
    println!("running with a warehouse-db connection and 2 GiB");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pool = Pool::new()?;
    pool.add_spec("warehouse-db=10,memory_mib=24576")?;
    let req = pool.request_spec("warehouse-db=1,memory_mib=2048")?;
    let _grant = pool.acquire(&req, Deadline::after(Duration::from_secs(5)))?;
    run_task();
    Ok(())
}
