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
//! Lock stores for [`shedlock_core`] on the SQL database your replicas already share.
//!
//! The providers are [`PgLockProvider`] (Postgres), [`MySqlLockProvider`] (MySQL and MariaDB) and
//! [`SqliteLockProvider`] (SQLite, one host). They run on [sqlx](https://docs.rs/sqlx) 0.9 and Java
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
//! - **The database's clock only**, in UTC, read inside the statement that decides. Neither the
//!   application's clock and time zone nor the session's time zone matter.
//! - **Java ShedLock's table** (`shedlock(name, lock_until, locked_at, locked_by)`) works
//!   unchanged, so a Java service using `usingDbTime()` and a Rust service exclude each other on
//!   one table. Our DDL adds `fencing_token BIGINT NOT NULL DEFAULT 0`, without which tokens are
//!   `None`. It also adds a nullable `last_fire` column, where
//!   [`claim_fire`](shedlock_core::provider::LockProvider::claim_fire) records a job's fires.
//!   Without it, `claim_fire` answers
//!   [`Error::is_unsupported`](shedlock_core::Error::is_unsupported) naming the `ALTER TABLE` to
//!   run, and a scheduler falls back to plain locks.
//! - **Fire claims in the database**, on its clock, in the order of
//!   [`FireClaim`](shedlock_core::provider::FireClaim)'s cases, writing nothing unless the fire is
//!   claimed. Fire instants are rounded up to the time columns' precision, microseconds on Postgres
//!   and milliseconds on MySQL and SQLite, so no claim starts before its fire. On Postgres the
//!   fires due at one instant are claimed in batches of up to 1,000, one statement each
//!   ([`claim_fires`](shedlock_core::provider::LockProvider::claim_fires); docs/guarantees.md,
//!   "Many jobs at one instant"); MySQL/MariaDB and SQLite claim one fire per call.
//! - **One statement on the hot path.** A lock held elsewhere costs one statement and writes
//!   nothing. A row missing on first use or deleted by hand is inserted without duplicate-key
//!   errors, even when replicas race.
//! - **No connection is kept** while a lock is held. Each statement runs in autocommit on a pooled
//!   connection given back at once, so one connection serves any number of held locks.
//! - **A deadline on every call**, [`call_timeout`](LockProviderBuilder::call_timeout). A
//!   black-holed database yields an error, never a hang.
//! - **Database restarts cost no failed extend, release or read** when the server is back within
//!   `call_timeout`. An acquire or fire claim whose reply a restart lost fails once instead of
//!   repeating, as its statement may have committed (see [Pools](#pools)).
//! - **Validation up front.** Table and column names must be plain identifiers and are quoted in
//!   SQL. Lock names are checked against the column's length and always bound, never spliced.
//!
//! # Pools
//!
//! A provider built from a URL opens at most
//! [`max_connections`](LockProviderBuilder::max_connections) connections of its own and pays one
//! round trip per statement. Over your own sqlx pool it works the same, at the price of sqlx's
//! return ping. [`ConnectionStats`] reports the open and idle connections. The repository's
//! `docs/sql-stores.md` says how to choose and size them, what a restart or a lost connection
//! costs, and how deadlines work.
//!
//! # Connection poolers
//!
//! A pooler in session mode needs nothing. Behind a pooler in transaction mode, such as
//! `PgBouncer`'s usual setting, sqlx's prepared statements break. Set
//! [`transaction_pooler(true)`](LockProviderBuilder::transaction_pooler), or
//! `?transaction_pooler=true` on a Postgres URL. Each statement then costs four round trips instead
//! of one. The repository's `docs/sql-stores.md`, "Connection poolers", says why, what else it
//! changes and what a pooler needs.
//!
//! # Fencing tokens
//!
//! On Postgres and MySQL/MariaDB, each acquisition sets `fencing_token = GREATEST(fencing_token +
//! 1, now in µs since 1970)`, so tokens strictly increase per name. A row deleted by hand restarts
//! from the database clock in microseconds, above every earlier token unless the clock was set back
//! or the lock was taken more than once per microsecond on average. A Java service's acquisitions
//! leave the token unchanged, so while Java holds the lock,
//! [`holder`](shedlock_core::provider::LockProvider::holder) reports the last token a Rust
//! acquisition set. For SQLite's tokens, see [`SqliteLockProvider`].
//!
//! # Schema
//!
//! `create_table_if_not_exists()` creates the table. The same DDL ships as sqlx-cli migrations in
//! `migrations/{postgres,mysql,sqlite}/`: `0001_shedlock.sql` creates the table,
//! `0002_last_fire.sql` adds `last_fire` to an older or Java ShedLock table,
//! `0003_job_state.sql` adds the job state columns, `0004_jobs_and_history.sql` creates the
//! [job tables](#job-definitions-and-run-history), `0005_pause.sql` adds the
//! [pause columns](#pauses) and `0006_trigger.sql` the [trigger columns](#run-now).
//!
//! Restart the services after running them, as the providers read the table's columns once.
//! [`missing_ddl`](shedlock_core::admin::LockAdmin::missing_ddl) and `shedlock ddl` print the
//! `ALTER TABLE` statements a table still needs, for its configured name. A missing table is
//! reported as [`Error::is_missing_table`](shedlock_core::Error::is_missing_table), one line naming
//! the ways to create it. Columns of the wrong type are reported as
//! [`Error::is_schema`](shedlock_core::Error::is_schema). A `Scheduler` fails to start on either.
//!
//! # Job state
//!
//! Where a table has the job state columns, a scheduler's release records how each run ended in
//! the lock's row, in the release's one statement
//! ([`release_run`](shedlock_core::provider::LockProvider::release_run)). The columns are
//! `last_run_fire`, `last_run_by`, `last_run_started`, `last_run_ended`, `last_run_outcome`,
//! `last_run_error`, `last_success` and `consecutive_failures`. A run starts at the claim's
//! `locked_at` and ends at the database's now. The outcome is `succeeded`, `failed`, `panicked` or
//! `cancelled`, and the error holds at most 1000 characters. `consecutive_failures` is `NOT NULL
//! DEFAULT 0`, so Java ShedLock's `INSERT`s still work.
//!
//! They are counted as [`shedlock_core::jobs`] says. The statement keeps the release's guard, so a
//! run whose lock was taken over writes nothing. It has the release's one round trip and
//! durability, which on Postgres is `synchronous_commit = off`. The names are fixed, like
//! `last_fire`, and no configured column may take them. A table with only some of the columns
//! records nothing: `release_run` answers
//! [`Error::is_unsupported`](shedlock_core::Error::is_unsupported) without a statement, and the
//! scheduler releases plainly. `list` and `entry` carry the
//! [`state`](shedlock_core::admin::LockEntry::state) where the columns exist.
//!
//! # Pauses
//!
//! Where a table has the pause columns, an operator pauses a job's fires across the cluster with
//! [`LockAdmin::pause`](shedlock_core::admin::LockAdmin::pause) (`shedlock pause`), keyed by the
//! lock name, and the fire claim refuses them with
//! [`FireClaim::Paused`](shedlock_core::provider::FireClaim::Paused). The pause lives in the lock's
//! row, so the claim checks it in the statements it already runs, on the database's clock, with no
//! extra round trip: after "too early" and "window passed", before "claimed elsewhere" and "held".
//! A refused fire writes nothing. On MySQL/MariaDB and SQLite the claim's write also refuses a
//! paused row, so a pause committed between its look and its write is honoured. `acquire`,
//! `extend`, `release` and Java ShedLock ignore pauses.
//!
//! The columns are `paused_at`, `paused_until` (`NULL`: until resumed), `paused_by`,
//! `paused_reason`, and the row's last operator action: `last_action` (`paused`, `resumed` or
//! `unlocked`), `last_action_by` and `last_action_at`. Times are typed like `lock_until`, the texts
//! hold 255 characters (the action 16), all nullable. They are in `ddl()` and
//! `create_table_if_not_exists()`, and `0005_pause.sql` adds them to an existing table, Java
//! ShedLock's included. Their names are fixed, like `last_fire`'s. A table with only some of them
//! counts as without them, with a warning.
//!
//! A pause reads the database's now, turns the asked length into an end on that clock (an end not
//! after now is refused, and nothing is written), then sets the pause and the last action in one
//! upsert. A name without a row gets one, free: no owner, `lock_until` and `locked_at` now, the
//! token column's default, so the next acquire takes it with a fresh token. It returns the pause as
//! stored, its end rounded up to the column's precision. A resume clears the pause, recording its
//! actor, and returns it, also one whose end had passed; with no pause it writes nothing. An
//! `unlock` records its actor in the statement that frees the lock. `list` and `entry` carry the
//! [`pause`](shedlock_core::admin::LockEntry::pause) and
//! [`last_action`](shedlock_core::admin::LockEntry::last_action).
//!
//! On a table without the columns, as Java ShedLock's, plain locks, fire claims and unlocks work as
//! before, and `pause` and `resume` answer [`Error::is_schema`](shedlock_core::Error::is_schema)
//! naming the missing columns, the migration and its statements, having written nothing. After
//! adding them, restart the services: a provider reads the table's columns once.
//!
//! # Run now
//!
//! Where a table has the trigger columns, an operator asks for one run of a scheduled job now with
//! [`LockAdmin::trigger`](shedlock_core::admin::LockAdmin::trigger) (`shedlock trigger`), and one
//! replica's scheduler claims and runs it (docs/operating.md, "Run now"). The columns are
//! `trigger_id` (`BIGINT`, a random id per request), `trigger_at` (when it was asked for, by the
//! database's clock: the run's fire), `trigger_expires`, `trigger_by`, `trigger_taken_by` and
//! `trigger_taken_at` (the replica that took it, and when). Times are typed like `lock_until`, the
//! names hold 255 characters, all nullable. They are in `ddl()` and
//! `create_table_if_not_exists()`, and `0006_trigger.sql` adds them to an existing table, Java
//! ShedLock's included. Their names are fixed, and a table with only some of them counts as
//! without them, with a warning.
//!
//! A trigger costs two statements: one read of the database's now and the row, which answers a
//! refusal (the lock held, a pause that holds, another trigger pending) having written nothing,
//! then one `UPDATE` guarded by the same conditions that writes the trigger and, with the pause
//! columns, `triggered` as the last action. A name without a row first gets one, free, as a pause
//! creates it. The scheduler's [`pending_triggers`](shedlock_core::provider::LockProvider::pending_triggers)
//! is one `SELECT` whatever the number of rows (a scan of the lock table, which has one row per
//! lock name). A
//! [`claim_trigger`](shedlock_core::provider::LockProvider::claim_trigger) is one guarded `UPDATE`
//! that takes the lock as an acquire does (owner, `locked_at`, `lock_until`, a new token) and marks
//! the trigger taken, never writing `last_fire` (MySQL/MariaDB reads the new lock with a second
//! statement, as its `UPDATE` returns no rows). On Postgres the `UPDATE` is in a CTE whose
//! statement also returns the row as it saw it, so every answer (claimed, gone, paused, held) is
//! one statement; on MySQL/MariaDB and SQLite one that claims nothing reads the row to say why. A
//! claim is never sent again after a lost reply.
//!
//! On Postgres the trigger's `UPDATE` also calls `pg_notify` in the same statement, so the
//! notification goes out when the trigger commits. The channel is the table's name as configured
//! plus `_trigger` (`shedlock_trigger`, `ops.shedlock_trigger`; a name longer than Postgres's 63
//! bytes becomes `shedlock_trigger_` and a hash of it), the payload the lock's name, a hint only.
//! [`watch_triggers`](shedlock_core::provider::LockProvider::watch_triggers) `LISTEN`s on a
//! connection of its own, made from the provider's connect options (TLS included, within the call
//! timeout), one per scheduler; it ends when the scheduler is gone or the connection fails, and the scheduler then
//! polls and asks for a new one. MySQL/MariaDB and SQLite have no push: schedulers poll.
//!
//! On a table without the columns, as Java ShedLock's, plain locks, fire claims and pauses work as
//! before; `trigger` answers [`Error::is_schema`](shedlock_core::Error::is_schema) naming the
//! missing columns, the migration and its statements, having written nothing, and
//! `pending_triggers` and `claim_trigger` answer the same kind, which a scheduler takes as "not set
//! up" and asks again later. `list` and `entry` carry the row's last
//! [`trigger`](shedlock_core::admin::LockEntry::trigger).
//!
//! # Job definitions and run history
//!
//! Two optional tables, named as the lock table plus `_jobs` and `_history`, hold what the job
//! commands show. `create_table_if_not_exists()` creates both, `0004_jobs_and_history.sql` has
//! their DDL for the default names, and
//! [`missing_ddl`](shedlock_core::admin::LockAdmin::missing_ddl) returns the statements for
//! whichever is missing. As the index on Postgres and SQLite is named with `_history_idx`, the lock
//! table's name may be at most 51 characters on Postgres and 56 on MySQL/MariaDB. Every call that
//! needs the tables refuses a longer one, and so does `build()` when history is on.
//!
//! - `<table>_jobs(job, replica, lock_name, version, spec, published, expires)`, keyed on `(job,
//!   replica)`, holds the definitions each replica
//!   [publishes](shedlock_core::provider::LockProvider::publish_definitions). `published` is the
//!   database's now and `expires` its now plus the ttl. A publish removes every expired entry, of
//!   any replica, in one statement on Postgres. Elsewhere it is a transaction of a `DELETE` and one
//!   multi-row upsert per 100 jobs, four round trips for up to 100 jobs.
//!   [`definitions`](shedlock_core::admin::LockAdmin::definitions) lists the entries not expired,
//!   sorted by job then replica in byte order. [`forget`](shedlock_core::admin::LockAdmin::forget)
//!   deletes a job's entries. Job names and replicas hold 255 characters, versions 32, and lock
//!   names as many as in the lock table.
//! - `<table>_history(id, lock_name, fire, runner, started, ended, outcome, error)`, indexed on
//!   `(lock_name, id)`, holds the runs of scheduled jobs, written and pruned as the builder's
//!   [`history`](LockProviderBuilder::history) policy says. It is off by default.
//!   [`history`](shedlock_core::admin::LockAdmin::history) reads a lock's entries newest first, by
//!   `id`, whatever the policy.
//!
//! Times are kept in UTC as the lock table keeps them, so a fire is read back rounded to the
//! millisecond on MySQL and SQLite. The history is per lock name, not per job, so two jobs sharing
//! a lock share it. Entries of a lock no longer run stay until removed by hand.
//!
//! # Operating locks
//!
//! Every provider implements [`LockAdmin`](shedlock_core::admin::LockAdmin), which the `shedlock`
//! command line tool is built on. `list` and `entry` read the rows with the database's now.
//! `unlock` frees an acquisition in one conditional `UPDATE`, only if the row still has the owner,
//! `locked_at` and token, where the table has one, it was listed with. `force_unlock` frees
//! whoever holds it. Freeing sets `lock_until` to the database's now and, where the table has the
//! [pause columns](#pauses), records the operator as the last action. A `last_fire` column is
//! listed where the table has it. Java ShedLock's four-column table works.
//!
//! # Feature flags
//!
//! - `postgres`, `mysql`, `sqlite`: the providers, none by default.
//! - `tls-rustls`, `tls-rustls-ring-native-roots`: TLS, as sqlx's features of those names. The URL
//!   forms are `sslmode=verify-full&sslrootcert=…` and `ssl-mode=VERIFY_IDENTITY&ssl-ca=…`. The
//!   builder's [`ca_file`](LockProviderBuilder::ca_file),
//!   [`client_cert`](LockProviderBuilder::client_cert), [`username`](LockProviderBuilder::username)
//!   and [`password`](LockProviderBuilder::password) carry what a URL cannot. sqlx's other TLS
//!   features reach this crate's sqlx when your own `sqlx` dependency enables them. The repository
//!   README's "Production connections" gives the forms and errors of every store.
//! - `testing`: [`testing`], database URLs and unique names for tests of your own.
//! - `testcontainers`: `testing`, plus starting Postgres/MariaDB containers when no URL is set. It
//!   needs a Docker engine.
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
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod pause;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod postgres_batch;
#[cfg(feature = "postgres")]
mod postgres_release_batch;
#[cfg(feature = "postgres")]
mod postgres_watch;
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
mod trigger;
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
