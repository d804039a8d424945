//! The three-replica demo: `cargo run --example cluster`.
//!
//! With no arguments it creates a SQLite file in a temporary directory (no server needed),
//! starts three replica processes of this very program, each running two `#[scheduled_lock]` jobs
//! every second, and shows, tick by tick, which replica ran each job and which skipped it. It
//! ends with a line starting `summary:`, whose `overlaps=` counts the times two replicas ran one
//! job at once, from the replicas' own run records (timed by the database's clock): it is 0.
//!
//! ```text
//! cargo run --example cluster                                   # SQLite, 10 s
//! cargo run --example cluster -- --seconds 20 --kill-after 5    # kill a replica mid-run
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run --example cluster
//! cargo run --example cluster -- --database-url mysql://root@127.0.0.1:3306/test
//! cargo run --example cluster -- --help
//! ```
//!
//! The two jobs are ordinary `async fn`s under `#[scheduled_lock]`; they live in
//! `tests/src/demo.rs` because the test suite's `replica` binary runs the same code:
//!
//! ```ignore
//! #[scheduled_lock(name = "{prefix}report", at_most = "3s", at_least = "500ms", executor = ctx.executor())]
//! pub async fn report(prefix: &str, ctx: &RunContext, tick: u64) -> Result<Outcome, BoxError> {
//!     ctx.work(&report_spec(), tick).await
//! }
//! ```
//!
//! `report` is short and holds its lock at least 500 ms, so replicas whose timers fire a little
//! apart do not each run the tick; `sync` sometimes runs longer than its one-second tick, and the
//! next tick is then skipped everywhere (never queued). Kill a replica (`kill -9 <pid>`, the pids
//! are printed, or `--kill-after N`) and watch the others carry on: a lock the dead replica held
//! frees itself at its `at_most` (3 s).

use std::process::ExitCode;

fn main() -> ExitCode {
    // `cluster` when run without a command; the replicas are this program with `run`.
    shedlock_tests::cli::main("cluster")
}
