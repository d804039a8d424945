//! `#[scheduled_lock]` at run time, over `InMemoryLockProvider`, in one test binary: the lock's
//! lifecycle across three replicas, what the body sees, every supported function shape
//! (`in_memory`), and a scheduled function (`scheduled`). The same replica scenarios run over
//! SQLite in `tests/tests/e2e/macro_sqlite.rs`.

mod common;

mod in_memory;
mod scheduled;
