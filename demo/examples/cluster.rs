//! The three-replica demo: `cargo run --example cluster`.
//!
//! With no arguments it creates a SQLite file in a temporary directory (no server needed),
//! starts three replica processes of this very program, each running two jobs every second on
//! a `shedlock_core::Scheduler`, and shows, fire by fire, which replica ran each job and which
//! skipped it. It ends with a line starting `summary:`: `overlaps=` counts the times two
//! replicas ran one job at once, from the replicas' own run records (timed by the database's
//! clock), and `fires_run_twice=` the fires (job and scheduled instant) that more than one
//! replica ran; both are 0. `missed=` counts the fires a replica reported missed (their window
//! passed before it could claim them) that no replica ran.
//!
//! ```text
//! cargo run --example cluster                                   # SQLite, 10 s
//! cargo run --example cluster -- --seconds 20 --kill-after 5    # kill a replica mid-run
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run --example cluster --features postgres
//! cargo run --example cluster --features mysql -- --database-url mysql://root@127.0.0.1:3306/test
//! cargo run --example cluster --features redis -- --database-url redis://127.0.0.1:6379
//! cargo run --example cluster --features etcd -- --database-url etcd://127.0.0.1:2379
//! cargo run --example cluster -- --help
//! ```
//!
//! Only SQLite is built by default (one database driver for the first run); `postgres`, `mysql`,
//! `redis` and `etcd` are features of this package, and a URL whose feature is off is refused
//! with an error naming it.
//!
//! With a `redis://` or `etcd://` store the run log is a SQLite file in the demo's temporary
//! directory, so the replicas must share one host (they do: the demo starts them).
//!
//! The replicas have no timer of their own: each job is a `shedlock_core::Job` registered with
//! `Job::new` (a closure: the body needs the replica's run log and the fire it runs, and its lock
//! name carries `--prefix`; `#[scheduled_lock(every = ...)]` schedules only functions without
//! arguments). The code is in `demo/src/replica.rs` and `demo/src/demo.rs`, because the test
//! suite's `replica` binary runs the same program:
//!
//! ```ignore
//! Job::new(spec.name.clone(), Schedule::every(spec.every)?, move |run| {
//!     let (spec, ctx) = (spec.clone(), ctx.clone());
//!     async move { ctx.work(&spec, run.fire(), run.trigger()).await.map(drop) }
//! })
//! .lock_name(format!("{prefix}{}", spec.name))
//! .at_most(spec.at_most)
//! ```
//!
//! At each fire every replica asks the store to claim it; one runs it, the others are told it
//! was claimed elsewhere. A store that records fires (in-memory, Redis, and the SQL stores with
//! the `last_fire` column of our DDL) decides on its own clock; etcd, which has none, decides on
//! the claiming replica's clock; on a store that records no fires the scheduler falls back to
//! plain locks and `at_least`, with a warning at start. `sync`
//! sometimes runs longer than its one-second period, and the next fire is then counted held
//! and skipped everywhere (never queued). Kill a replica (`kill -9 <pid>`, the pids are
//! printed, or `--kill-after N`) and watch the others carry on: a lock the dead replica held
//! frees itself at its `at_most` (3 s); the fire it was running is not run again.

use std::process::ExitCode;

fn main() -> ExitCode {
    // `cluster` when run without a command; the replicas are this program with `run`.
    shedlock_demo::cli::main("cluster")
}
