//! What the crate linked, and that it loads: prints the library's version
//! and `cronoq::sys::LINKED` (which libcronoq cronoq-sys linked, static or
//! shared, and from where), then uses an in-process pool and, where the
//! fleet library is linked, opens a fleet pool on a server that is not
//! there, which must fail as unreachable (the library ran), not as "not
//! built in". Exits non-zero when something is wrong.
//!
//! Run it: `cargo run --example linked`. The test of an installed library
//! (`bindings/rust/check-installed.sh`) builds it as the `main.rs` of a
//! project of its own against the installed library, and runs it.
use cronoq::{Deadline, Error, FleetOptions, Pool};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("libcronoq {}", cronoq::version());
    println!("linked: {}", cronoq::sys::LINKED);
    let pool = Pool::new()?;
    pool.add_spec("db=2")?;
    let req = pool.request_spec("db=1")?;
    let grant = pool.acquire(&req, Deadline::now())?;
    assert_eq!(pool.resource_stats("db")?.in_use, 1);
    drop(grant);
    println!("in-process pool: ok");
    let url = "unix:///nonexistent/cronoq-linked/redis.sock";
    let opened = Pool::connect(url, "linked", FleetOptions::new().timeout_ms(200));
    match (cronoq::sys::FLEET_LINKED, opened.map(|_| ()).map_err(|e| e.error)) {
        (true, Err(Error::Unavailable)) => println!("fleet pool: linked, no server: ok"),
        (false, Err(Error::NotFound)) => println!("fleet pool: not linked"),
        (linked, got) => {
            return Err(format!("fleet linked {}, but Pool::connect gave {:?}", linked, got).into())
        }
    }
    Ok(())
}
