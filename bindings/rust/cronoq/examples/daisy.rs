//! daisy's `ResourceAllocator` on cronoq.
//!
//! daisy gives its runner a global budget (`{"cpu": 32, "gpu": 8}`); each
//! task declares `requires`, what one of its workers consumes, and a
//! `max_workers` cap. Its allocator offers `validate` (at startup, every
//! task fits the budget on its own), `try_allocate` (one more worker for a
//! task, if the budget allows) and `release` (a worker ended).
//!
//! On cronoq the budget is a set of budgets, each task's `max_workers` a
//! class, and its `requires` one request built at startup, of that class.
//! `try_allocate` is a try that returns the grant; `release` is dropping
//! it, so a worker that ends by an error or a panic gives its units back
//! too. What daisy counted by hand (`used`, `alive`) the pool keeps, under
//! the same all-or-nothing rule, for any number of threads. Unlike daisy's
//! counters, a try never overtakes a worker that waits for the same units
//! (a dispatcher may also wait: `pool.acquire` or `acquire_async`).
//!
//! Run it: `cargo run --example daisy` (also run by `cargo test`).
use cronoq::{Error, Grant, Pool, Problem, Request, Task};
use std::collections::HashMap;

/// What a daisy task declares.
struct TaskSpec {
    task_id: &'static str,
    requires: &'static [(&'static str, i64)],
    max_workers: i64,
}

struct ResourceAllocator<'p> {
    pool: &'p Pool,
    tasks: Vec<(&'static str, Request<'p>)>,
    index: HashMap<&'static str, usize>,
    /// Requirements that could not even be written as a request (a
    /// resource missing from the budget), found at startup.
    unknown: Vec<Problem>,
}

/// Classes share the pool's namespace with budgets; a prefix keeps a task
/// named like a resource ("gpu") apart from it.
fn class_of(task_id: &str) -> String {
    format!("task.{}", task_id)
}

impl<'p> ResourceAllocator<'p> {
    fn new(pool: &'p Pool, budget: &[(&str, i64)], specs: &[TaskSpec]) -> Result<Self, Error> {
        for (name, capacity) in budget {
            pool.add_budget(name, *capacity)?;
        }
        let mut tasks = Vec::new();
        let mut unknown = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            pool.add_class(&class_of(spec.task_id), spec.max_workers)?;
            let mut req = pool.request();
            req.set_class(&class_of(spec.task_id))?;
            // daisy skips amounts <= 0; cronoq refuses them, so skip too.
            for (resource, amount) in spec.requires.iter().filter(|(_, v)| *v > 0) {
                if let Err(error) = req.add(resource, *amount) {
                    unknown.push(Problem {
                        task: i,
                        error,
                        message: format!("task {:?}: {}", spec.task_id, req.error()),
                    });
                }
            }
            tasks.push((spec.task_id, req));
        }
        let index = tasks.iter().enumerate().map(|(i, (id, _))| (*id, i)).collect();
        Ok(ResourceAllocator { pool, tasks, index, unknown })
    }

    /// Every task fits on its own, or every problem, each naming the task
    /// and the resource.
    fn validate(&self) -> Result<(), Vec<Problem>> {
        let tasks: Vec<Task<'_>> =
            self.tasks.iter().map(|(name, request)| Task { name, request }).collect();
        let mut problems = self.unknown.clone();
        if let Err(more) = self.pool.validate(&tasks) {
            problems.extend(more);
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// One more worker of `task_id`: its grant, or `None` when the budget
    /// or the task's cap does not allow it now.
    fn try_allocate(&self, task_id: &str) -> Option<Grant<'p>> {
        let (_, req) = &self.tasks[self.index[task_id]];
        match self.pool.try_acquire(req) {
            Ok(grant) => Some(grant),
            Err(Error::Busy) => None,
            Err(e) => panic!("task {:?} cannot run: {} (validate at startup)", task_id, e),
        }
    }

    /// A worker ended: its units go back. (Dropping the grant does the
    /// same; this is daisy's name for it.)
    fn release(&self, grant: Grant<'p>) {
        drop(grant);
    }

    /// Workers of `task_id` alive now.
    fn alive(&self, task_id: &str) -> i64 {
        self.pool.resource_stats(&class_of(task_id)).map_or(0, |s| s.in_use)
    }

    /// How many more workers of `task_id` could start right now.
    fn headroom(&self, task_id: &str) -> i64 {
        let (_, req) = &self.tasks[self.index[task_id]];
        self.pool.headroom(req).unwrap_or(0)
    }

    fn used(&self, resource: &str) -> i64 {
        self.pool.resource_stats(resource).map_or(0, |s| s.in_use)
    }
}

/// Spawns workers until the budget says no, and reports what happened.
fn run() -> Vec<String> {
    let mut log = Vec::new();
    let pool = Pool::new().expect("pool");
    let specs = [
        TaskSpec { task_id: "predict", requires: &[("gpu", 1), ("cpu", 4)], max_workers: 4 },
        TaskSpec { task_id: "extract", requires: &[("cpu", 1)], max_workers: 32 },
        TaskSpec { task_id: "greedy", requires: &[("cpu", 64)], max_workers: 1 },
        TaskSpec { task_id: "render", requires: &[("tpu", 1)], max_workers: 1 },
    ];
    let alloc = ResourceAllocator::new(&pool, &[("cpu", 32), ("gpu", 8)], &specs).expect("setup");

    let problems = alloc.validate().unwrap_err();
    for p in &problems {
        log.push(format!("invalid: {}", p.message));
    }
    assert_eq!(problems.len(), 2, "greedy and render cannot run");

    let mut workers = Vec::new();
    while let Some(g) = alloc.try_allocate("predict") {
        workers.push(g);
    }
    log.push(format!(
        "predict: {} workers (max_workers 4), cpu {} / 32, gpu {} / 8",
        alloc.alive("predict"),
        alloc.used("cpu"),
        alloc.used("gpu")
    ));
    assert_eq!(alloc.alive("predict"), 4);
    let room = alloc.headroom("extract");
    let mut extract = Vec::new();
    while let Some(g) = alloc.try_allocate("extract") {
        extract.push(g);
    }
    log.push(format!(
        "extract: headroom {}, started {}, cpu {} / 32",
        room,
        extract.len(),
        alloc.used("cpu")
    ));
    assert_eq!((room, extract.len()), (16, 16));

    // A predict worker ends: its gpu and 4 cpus go back, all at once.
    alloc.release(workers.pop().unwrap());
    log.push(format!(
        "after one predict worker ended: extract headroom {}, predict headroom {}",
        alloc.headroom("extract"),
        alloc.headroom("predict")
    ));
    assert_eq!((alloc.headroom("extract"), alloc.headroom("predict")), (4, 1));

    drop(workers);
    drop(extract);
    assert_eq!((alloc.used("cpu"), alloc.used("gpu")), (0, 0));
    log
}

fn main() {
    for line in run() {
        println!("{}", line);
    }
}

#[test]
fn daisy_allocator_maps_onto_budgets_classes_and_requests() {
    let log = run();
    assert!(log.iter().any(|l| l.contains("greedy") && l.contains("cpu")), "{:?}", log);
    assert!(log.iter().any(|l| l.contains("render") && l.contains("tpu")), "{:?}", log);
}
