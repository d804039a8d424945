// A build without some providers documents the links to them as links to docs.rs, where every
// feature is on.
#![cfg_attr(
    not(feature = "postgres"),
    doc = "[`PgLockProvider`]: https://docs.rs/shedlock-sqlx/latest/shedlock_sqlx/struct.PgLockProvider.html"
)]
#![cfg_attr(
    not(feature = "mysql"),
    doc = "[`MySqlLockProvider`]: https://docs.rs/shedlock-sqlx/latest/shedlock_sqlx/struct.MySqlLockProvider.html"
)]
#![cfg_attr(
    not(feature = "sqlite"),
    doc = "[`SqliteLockProvider`]: https://docs.rs/shedlock-sqlx/latest/shedlock_sqlx/struct.SqliteLockProvider.html"
)]
#![cfg_attr(
    not(feature = "testing"),
    doc = "[`testing`]: https://docs.rs/shedlock-sqlx/latest/shedlock_sqlx/testing/"
)]
//! Lock stores for [`shedlock_core`] on the SQL database your replicas already share:
//! [`PgLockProvider`] (Postgres), [`MySqlLockProvider`] (MySQL and MariaDB) and
//! [`SqliteLockProvider`] (SQLite, one host), on [sqlx](https://docs.rs/sqlx) 0.9 and Java
//! ShedLock's table.
//!
//! ```no_run
//! # #[cfg(feature = "postgres")] mod example {
//! use std::time::Duration;
//! use shedlock_core::{LockConfig, LockingTaskExecutor};
//! use shedlock_sqlx::PgLockProvider;
//!
//! # async fn example() -> shedlock_core::Result<()> {
//! // Connections of its own: one round trip per lock statement.
//! let provider = PgLockProvider::connect("postgres://app@db/app").await?;
//! provider.create_table_if_not_exists().await?; // or run migrations/postgres/0001_shedlock.sql
//! let executor = LockingTaskExecutor::new(provider)?;
//! let cfg = LockConfig::builder("nightly-report")
//!     .at_most(Duration::from_secs(600))
//!     .at_least(Duration::from_secs(30))
//!     .build()?;
//! let ran = executor.execute(&cfg, async { /* the job */ }).await?;
//! if ran.is_none() {
//!     // another replica holds the lock: skipped
//! }
//! # Ok(()) }
//! # }
//! ```
//!
//! # What every provider guarantees
//!
//! - **The database's clock only**, in UTC, read inside the statement that decides: the
//!   application's clock and time zone, and the session's time zone, never matter.
//! - **Java ShedLock's table** (`shedlock(name, lock_until, locked_at, locked_by)`) works
//!   unchanged, so a Java service using ShedLock with `usingDbTime()` and a Rust service exclude
//!   each other on one table. Our DDL adds `fencing_token BIGINT NOT NULL DEFAULT 0`; without
//!   that column everything works and tokens are `None`. It also adds a nullable `last_fire`
//!   column, where [`claim_fire`](shedlock_core::provider::LockProvider::claim_fire) records a
//!   scheduled job's fires; without it `claim_fire` answers
//!   [`Error::is_unsupported`](shedlock_core::Error::is_unsupported) (naming the `ALTER TABLE` to
//!   run) and a scheduler falls back to plain locks.
//! - **Fire claims in the database**, on its clock, in the order of
//!   [`FireClaim`](shedlock_core::provider::FireClaim)'s cases: nothing is written unless the fire
//!   is claimed, a missing row is inserted, and racing replicas get no duplicate-key errors. Fire
//!   instants are rounded up to the time columns' precision (microseconds on Postgres, milliseconds
//!   on MySQL and SQLite), so no claim starts before its fire.
//! - **One statement on the hot path**: a lock held elsewhere costs one statement and writes
//!   nothing; a missing row (first use, or deleted by hand) is inserted without duplicate-key
//!   errors.
//! - **No connection is kept** while a lock is held: each statement runs in autocommit on a
//!   pooled connection given back at once, so one connection serves any number of held locks.
//! - **A deadline on every call**, [`call_timeout`](LockProviderBuilder::call_timeout): a
//!   black-holed database yields an error, never a hang.
//! - **Database restarts cost no failed extend, release or read** when the server is back
//!   within `call_timeout`. An acquire or fire claim whose reply a restart lost fails once
//!   instead of repeating, since its statement may have committed ([Pools](#pools)).
//! - **Validation up front**: table and column names must be plain identifiers (quoted in SQL),
//!   lock names are checked against the column's length and always bound, never spliced.
//!
//! # Pools
//!
//! A provider built from a URL opens connections of its own, at most
//! [`max_connections`](LockProviderBuilder::max_connections), and pays one round trip per
//! statement; over your own sqlx pool it works the same at the price of sqlx's return ping.
//! [`ConnectionStats`] reports the open and idle connections. How to choose and size them,
//! what a restart or a lost connection costs, and how deadlines work: the repository's
//! `docs/sql-stores.md`.
//!
//! # Connection poolers
//!
//! A pooler in session mode needs nothing. Behind a pooler in transaction mode, such as
//! `PgBouncer`'s usual setting, sqlx's prepared statements break: set
//! [`transaction_pooler(true)`](LockProviderBuilder::transaction_pooler), or
//! `?transaction_pooler=true` on a Postgres URL. Each statement then costs four round trips
//! instead of one. Why, what else it changes, and what a pooler needs: the repository's
//! `docs/sql-stores.md`, "Connection poolers".
//!
//! # Fencing tokens
//!
//! On Postgres and MySQL/MariaDB, each acquisition sets `fencing_token = GREATEST(fencing_token +
//! 1, now in µs since 1970)`, so tokens strictly increase per name. Deleting a row by hand does
//! not restart the sequence: the recreated row starts from the database clock in microseconds,
//! above every earlier token unless the clock was set back or the lock was taken more than once
//! per microsecond on average. A Java service's acquisitions carry no token and leave it
//! unchanged, so [`holder`](shedlock_core::provider::LockProvider::holder) reports the last token a Rust
//! acquisition set while Java holds the lock. SQLite's tokens: [`SqliteLockProvider`].
//!
//! # Schema
//!
//! `create_table_if_not_exists()` creates the table; the same DDL ships as sqlx-cli migrations
//! in `migrations/{postgres,mysql,sqlite}/`: `0001_shedlock.sql` creates the table,
//! `0002_last_fire.sql` adds the `last_fire` column to a table made before it (or by Java
//! ShedLock), `0003_job_state.sql` the job state columns; restart the services after running
//! them, as the providers read the table's columns once.
//! [`missing_ddl`](shedlock_core::admin::LockAdmin::missing_ddl) (and `shedlock ddl`) prints the
//! `ALTER TABLE` statements a table still needs, for its configured name. A missing table is reported as
//! [`Error::is_missing_table`](shedlock_core::Error::is_missing_table), one line naming the
//! ways to create it (`ddl()` has the statement); columns of the wrong type as
//! [`Error::is_schema`](shedlock_core::Error::is_schema). A `Scheduler` fails to start on
//! either.
//!
//! # Job state
//!
//! Where the table has the job state columns (our DDL, or `0003_job_state.sql`), a scheduler's
//! release records how each run ended in the lock's row, in the release's one statement
//! ([`release_run`](shedlock_core::provider::LockProvider::release_run)): `last_run_fire`,
//! `last_run_by`, `last_run_started` (the claim's `locked_at`), `last_run_ended` (the database's
//! now), `last_run_outcome` (`succeeded`, `failed`, `panicked`, `cancelled`), `last_run_error`
//! (a failed run's text, at most 1000 characters), `last_success` and `consecutive_failures`
//! (`NOT NULL DEFAULT 0`, so Java ShedLock's `INSERT`s still work), counted as
//! [`shedlock_core::jobs`] says. The statement keeps the release's guard, so a run whose lock
//! was taken over writes nothing; it costs the release's one round trip, and has its durability
//! (on Postgres `synchronous_commit = off`). The names are fixed, like `last_fire`: no configured
//! column may take them. A table with none of the columns, or only some, records nothing:
//! `release_run` answers [`Error::is_unsupported`](shedlock_core::Error::is_unsupported) without
//! a statement and the scheduler releases plainly. `list` and `entry` carry the state
//! ([`LockEntry::state`](shedlock_core::admin::LockEntry::state)) where the columns exist.
//!
//! # Job definitions and run history
//!
//! Two more tables, named from the lock table, hold what the job commands show; the lock table
//! works without them. `create_table_if_not_exists()` creates both (when missing), and
//! `0004_jobs_and_history.sql` has their DDL for the default names;
//! [`missing_ddl`](shedlock_core::admin::LockAdmin::missing_ddl) returns the statements for
//! whichever is missing. Their names are the lock table's plus `_jobs` and `_history` (plus
//! `_history_idx` for the index on Postgres and SQLite), so the lock table's name may be at
//! most 51 characters on Postgres (63 per name) and 56 on MySQL/MariaDB (64); a longer one is
//! refused with an error saying so by every call that needs them (and by `build()` when history
//! is on).
//!
//! - `<table>_jobs(job, replica, lock_name, version, spec, published, expires)`, primary key
//!   `(job, replica)`: the job definitions each replica publishes
//!   ([`publish_definitions`](shedlock_core::provider::LockProvider::publish_definitions)):
//!   `published` is the database's now, `expires` its now plus the ttl. A publish removes every
//!   expired entry, any replica's, in the same step: one statement on Postgres (one round trip),
//!   a transaction elsewhere (`BEGIN`, a `DELETE`, one multi-row upsert per 100 jobs, `COMMIT`:
//!   four round trips for up to 100 jobs). [`definitions`](shedlock_core::admin::LockAdmin::definitions)
//!   lists the entries that have not expired, sorted by job then replica (byte order), and
//!   [`forget`](shedlock_core::admin::LockAdmin::forget) deletes a job's entries. Job names and
//!   replicas (owner ids) hold 255 characters, versions 32, lock names as the lock table's.
//! - `<table>_history(id, lock_name, fire, runner, started, ended, outcome, error)`, indexed on
//!   `(lock_name, id)`: the runs of scheduled jobs, written only when the builder was given a
//!   [`history`](LockProviderBuilder::history) policy (off by default). The release of a run's
//!   lock then writes the entry (the runner is the lock's owner, `started` its `locked_at`,
//!   `ended` the database's now, the error text capped at 1,000 characters) and removes the
//!   lock's entries beyond the newest `keep` and those older than `max_age`: one statement on
//!   Postgres, a transaction of two (four round trips) elsewhere. A failed write never fails
//!   the release: it is logged at `ERROR` once, then at `DEBUG` until a write succeeds.
//!   [`history`](shedlock_core::admin::LockAdmin::history) reads a lock's entries newest first
//!   (by `id`), whatever the policy.
//!
//! Times are kept as the lock table keeps them (UTC; milliseconds on MySQL and SQLite, so a
//! fire is read back rounded to the millisecond there). A missing table is reported as
//! [`Error::is_missing_table`](shedlock_core::Error::is_missing_table) naming the `CREATE
//! TABLE` to run. What these tables cannot do: the history is per lock name, not per job (two
//! jobs sharing a lock share it), and entries of a lock no longer run stay until removed by
//! hand.
//!
//! # Operating locks
//!
//! Every provider implements [`LockAdmin`](shedlock_core::admin::LockAdmin) (the `shedlock` command
//! line tool is built on it): `list` and `entry` read the rows with the database's now,
//! `unlock` frees an acquisition only if the row still has the owner, `locked_at` and (where
//! the table has one) token it was listed with, in one conditional `UPDATE`, and `force_unlock`
//! frees whoever holds it. Freeing sets `lock_until` to the database's now and nothing else. A
//! `last_fire` column is listed where the table has it (found with the rest of the table's
//! layout, once); Java ShedLock's four-column table works.
//!
//! # Feature flags
//!
//! - `postgres`, `mysql`, `sqlite`: the providers (none by default).
//! - `tls-rustls`, `tls-rustls-ring-native-roots`: TLS, as sqlx's features of those names
//!   (`sslmode=verify-full&sslrootcert=…`, `ssl-mode=VERIFY_IDENTITY&ssl-ca=…`); the builder's
//!   [`ca_file`](LockProviderBuilder::ca_file), [`client_cert`](LockProviderBuilder::client_cert),
//!   [`username`](LockProviderBuilder::username) and [`password`](LockProviderBuilder::password)
//!   carry what a URL cannot. sqlx's other TLS features reach this crate's sqlx when your own
//!   `sqlx` dependency enables them. The forms and errors of every store: the repository
//!   README's "Production connections".
//! - `testing`: [`testing`], database URLs and unique names for tests of your own.
//! - `testcontainers`: `testing`, plus starting Postgres/MariaDB containers when no URL is set
//!   (needs a Docker engine).
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod admin;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod builder;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod cause;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod connect;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod conns;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod definitions;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod dialect;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod history;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod ident;
#[cfg(all(test, feature = "testing"))]
mod job_tables_tests;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod link;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod provider;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod provider_types;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod tables;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod url;

#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub use builder::{DEFAULT_TABLE, LockProviderBuilder};
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub use conns::ConnectionStats;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub use link::DEFAULT_POOL_SIZE;
#[cfg(feature = "mysql")]
pub use mysql::MySqlLockProvider;
#[cfg(feature = "postgres")]
pub use postgres::PgLockProvider;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteLockProvider;
/// The sqlx this crate is built on (0.9), for building pools of the right version.
pub use sqlx;
