//! [`Dialect`]: what one database's provider needs beyond the shared machinery of
//! [`Provider`](crate::provider::Provider): its SQL, how it reads and writes times and durations,
//! inspects the lock table, maps errors and pins sessions, and where it needs more than one
//! statement. Each implementation, with the comments on its quirks, lives in `postgres.rs`,
//! `mysql.rs` or `sqlite.rs`.
//!
//! # Statements and their parameters
//!
//! Every dialect builds the four [`Statements`] twice, for a table without and with the
//! fencing-token column. Their parameters are bound in one order: the duration (`at_most` or
//! `at_least`), the lock name, the owner id, and the acquisition's identity, its token or, without
//! tokens, its `locked_at`. `holder` takes the name alone. Acquire returns `locked_at, lock_until,
//! fencing_token`, extend `lock_until`, and holder `locked_by, locked_at, lock_until,
//! fencing_token`. The token is `NULL` without a token column.
//!
//! A fire claim ([`Dialect::claim_fire`]) binds the duration, the name, the owner, then the fire's
//! instant `F` and the next fire's, rounded up by [`fire_time`]. Its statements exist only for
//! tables with [`LAST_FIRE`], each twice: for tables without and with the [`PAUSE_COLUMNS`], where
//! they also refuse, and read, a pause ([`Statements::claim`], [`Statements::look`]). A claim that does not win answers from what the deciding statement
//! saw ([`Seen::Row`]), so it needs no further statement.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use chrono::{DateTime, Utc};
use shedlock_core::{Error, Result, provider::LockRecord};
use sqlx::{Database, Encode, Type};

use crate::builder::{ColumnNames, Settings};
use crate::conns::Options;
use crate::ident::{Quote, Reserved};
use crate::link::{Call, Checkout, Link, Schema, check_name_capacity};

/// Turns a statement's error into ours. The call's name is in it.
pub(crate) type Map<'a> = dyn Fn(sqlx::Error) -> Error + Send + Sync + 'a;

/// The column holding a job's recorded fire, the last claimed `F`, where the table has it.
pub(crate) const LAST_FIRE: &str = "last_fire";

/// The job state columns of
/// [`LockProvider::release_run`](shedlock_core::provider::LockProvider::release_run), with fixed
/// names like [`LAST_FIRE`], in the order of our DDL and `0003_job_state.sql`.
pub(crate) const STATE_COLUMNS: [(&str, StateKind); 8] = [
    ("last_run_fire", StateKind::Time),
    ("last_run_by", StateKind::Runner),
    ("last_run_started", StateKind::Time),
    ("last_run_ended", StateKind::Time),
    ("last_run_outcome", StateKind::Outcome),
    ("last_run_error", StateKind::Error),
    ("last_success", StateKind::Time),
    ("consecutive_failures", StateKind::Count),
];

/// The pause columns of [`LockAdmin::pause`](shedlock_core::admin::LockAdmin::pause), with fixed
/// names like [`LAST_FIRE`], in the order of our DDL and `0005_pause.sql`: the pause (since, until,
/// by whom, why) and the last operator action (what, by whom, when). They are typed like the job
/// state's: times like [`LAST_FIRE`], names and the reason like the runner (`VARCHAR(255)`), the
/// action's word like the outcome (`VARCHAR(16)`).
pub(crate) const PAUSE_COLUMNS: [(&str, StateKind); 7] = [
    ("paused_at", StateKind::Time),
    ("paused_until", StateKind::Time),
    ("paused_by", StateKind::Runner),
    ("paused_reason", StateKind::Runner),
    ("last_action", StateKind::Outcome),
    ("last_action_by", StateKind::Runner),
    ("last_action_at", StateKind::Time),
];

/// The trigger columns of [`LockAdmin::trigger`](shedlock_core::admin::LockAdmin::trigger) ("run
/// now"), with fixed names like [`LAST_FIRE`], in the order of our DDL and `0006_trigger.sql`: the
/// trigger's id, when it was asked for, when it expires, by whom, and which replica took it when.
/// Times are typed like [`LAST_FIRE`], names like the runner (`VARCHAR(255)`), the id `BIGINT`.
pub(crate) const TRIGGER_COLUMNS: [(&str, StateKind); 6] = [
    ("trigger_id", StateKind::Id),
    ("trigger_at", StateKind::Time),
    ("trigger_expires", StateKind::Time),
    ("trigger_by", StateKind::Runner),
    ("trigger_taken_by", StateKind::Runner),
    ("trigger_taken_at", StateKind::Time),
];

/// What a job state, pause or trigger column holds, for its type in our DDL and its check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StateKind {
    /// A nullable time, typed like [`LAST_FIRE`].
    Time,
    /// The runner's owner id, like `locked_by` (nullable).
    Runner,
    /// The outcome's kind (`succeeded`, …), `VARCHAR(16)`.
    Outcome,
    /// A failed run's error text, at most [`MAX_ERROR_LEN`](shedlock_core::jobs::MAX_ERROR_LEN)
    /// characters.
    Error,
    /// `consecutive_failures`: an integer, `NOT NULL DEFAULT 0` so Java's `INSERT`s work.
    Count,
    /// A nullable 64-bit integer: `trigger_id`.
    Id,
}

/// Every column name that this crate fixes, so that it is not configurable. These are [`LAST_FIRE`],
/// the [`STATE_COLUMNS`], the [`PAUSE_COLUMNS`] and the [`TRIGGER_COLUMNS`].
pub(crate) fn fixed_columns() -> impl Iterator<Item = &'static str> {
    std::iter::once(LAST_FIRE).chain(
        STATE_COLUMNS
            .iter()
            .chain(PAUSE_COLUMNS.iter())
            .chain(TRIGGER_COLUMNS.iter())
            .map(|(name, _)| *name),
    )
}

/// The SQL of "the row keeps no pause that holds at `now`" (the database's now) on a table with the
/// [`PAUSE_COLUMNS`]: no pause, or one whose end has come. It is
/// [`Pause::holds_at`](shedlock_core::pause::Pause::holds_at) negated, as the fire claim's
/// decision order wants it.
pub(crate) fn not_paused<D: Dialect>(now: &str) -> String {
    let (at, until) = (
        D::QUOTE.quote(PAUSE_COLUMNS[0].0),
        D::QUOTE.quote(PAUSE_COLUMNS[1].0),
    );
    format!("({at} IS NULL OR {until} <= {now})")
}

/// The columns a fire claim reads of a row's pause, after the row's other columns: `paused_at`,
/// `paused_until`, `paused_by`, each prefixed by `t` (`t.` or empty), with a leading comma; empty
/// without the pause columns.
pub(crate) fn pause_read<D: Dialect>(t: &str, pause: bool) -> String {
    if !pause {
        return String::new();
    }
    let read: Vec<String> = PAUSE_COLUMNS[..3]
        .iter()
        .map(|(name, _)| format!("{t}{}", D::QUOTE.quote(name)))
        .collect();
    format!(", {}", read.join(", "))
}

/// The pause a fire claim read with [`pause_read`] at columns `first..first + 3`: `None` without a
/// pause. Its reason is not read: the claim needs only its times.
pub(crate) fn seen_pause<D: Dialect>(
    row: &D::Row,
    first: usize,
    map: &Map<'_>,
) -> Result<Option<shedlock_core::pause::Pause>>
where
    for<'r> Option<String>: sqlx::Decode<'r, D> + Type<D>,
    usize: sqlx::ColumnIndex<D::Row>,
{
    use sqlx::Row as _;
    let Some(since) = D::read_opt_time(row, first, map)? else {
        return Ok(None);
    };
    let until = D::read_opt_time(row, first + 1, map)?;
    let by: Option<String> = row.try_get(first + 2).map_err(map)?;
    Ok(Some(shedlock_core::pause::Pause::new(
        since,
        until,
        by.unwrap_or_default(),
        None,
    )))
}

/// The SQL of one table layout. On MySQL `acquire` is the conditional `UPDATE`, and the statements
/// in [`Dialect::Extra`] follow it.
pub(crate) struct Statements<X> {
    pub(crate) acquire: std::sync::Arc<str>,
    pub(crate) extend: std::sync::Arc<str>,
    pub(crate) release: std::sync::Arc<str>,
    pub(crate) holder: std::sync::Arc<str>,
    /// A release that records the run, on tables with the [`STATE_COLUMNS`]. It has the release's
    /// guard and `lock_until`, and the job state ([`release_run_state`]).
    pub(crate) release_run: std::sync::Arc<str>,
    /// Claims a fire, on tables with [`LAST_FIRE`], without (`[0]`) and with (`[1]`) the
    /// [`PAUSE_COLUMNS`]: with them it also refuses a paused row. It is the statement that decides
    /// and writes. See [`claim`](Self::claim).
    pub(crate) claims: [std::sync::Arc<str>; 2],
    /// The database's now, the recorded fire and the lock row (`locked_by`, `locked_at`,
    /// `lock_until`, token or `NULL`) of one name, all `NULL` but now without a row, then with the
    /// [`PAUSE_COLUMNS`] (`[1]`) the pause ([`pause_read`]). For the replies of a claim that did
    /// not win. See [`look`](Self::look).
    #[cfg_attr(
        not(any(feature = "mysql", feature = "sqlite")),
        allow(dead_code, reason = "used by MySQL and SQLite")
    )]
    pub(crate) looks: [std::sync::Arc<str>; 2],
    /// The dialect's further statements.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code, reason = "used by MySQL"))]
    pub(crate) extra: X,
}

impl<X> Statements<X> {
    /// The fire claim for `schema`'s table: with the pause condition where it has the columns.
    pub(crate) fn claim(&self, schema: Schema) -> &std::sync::Arc<str> {
        &self.claims[usize::from(schema.has_pause)]
    }

    /// The look of a fire claim for `schema`'s table: with the pause where it has the columns.
    #[cfg_attr(
        not(any(feature = "mysql", feature = "sqlite")),
        allow(dead_code, reason = "used by MySQL and SQLite")
    )]
    pub(crate) fn look(&self, schema: Schema) -> &std::sync::Arc<str> {
        &self.looks[usize::from(schema.has_pause)]
    }
}

/// One attempt of a call: the statements of the table's layout, a connection with its call's
/// deadline, and how its errors are mapped.
pub(crate) struct Attempt<'a, D: Dialect> {
    pub(crate) sql: &'a Statements<D::Extra>,
    pub(crate) c: Checkout<'a, D>,
    pub(crate) map: &'a Map<'a>,
}

/// The arguments of an extend. `token` is [`Schema::record_token`]'s.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Extend<'a> {
    pub(crate) record: &'a LockRecord,
    pub(crate) token: Option<i64>,
    pub(crate) at_most: Duration,
}

/// The arguments of an acquire.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Acquire<'a> {
    pub(crate) name: &'a str,
    pub(crate) at_most: Duration,
    pub(crate) owner: &'a str,
    #[cfg_attr(not(feature = "mysql"), allow(dead_code, reason = "used by MySQL"))]
    pub(crate) schema: Schema,
}

/// The arguments of a fire claim: the fire's instants as the columns hold them. [`fire_time`]
/// rounds them up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClaimFire<'a> {
    /// The claim's acquire: the name, `at_most`, the owner and the table's layout.
    pub(crate) lock: Acquire<'a>,
    pub(crate) at: DateTime<Utc>,
    pub(crate) next: DateTime<Utc>,
}

/// The arguments of a batch of fire claims, one entry per claim in each slice, of distinct names:
/// the fires' instants as the columns hold them ([`fire_time`]) and each claim's `at_most`.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(
    not(feature = "postgres"),
    allow(dead_code, reason = "read by Postgres's batch statement")
)]
pub(crate) struct ClaimFires<'a> {
    pub(crate) names: &'a [&'a str],
    pub(crate) ats: &'a [DateTime<Utc>],
    pub(crate) nexts: &'a [DateTime<Utc>],
    pub(crate) at_mosts: &'a [Duration],
    pub(crate) owner: &'a str,
    pub(crate) schema: Schema,
    /// Rows held by another transaction are left out at once (and their claims undecided), not
    /// waited for.
    pub(crate) skip_held: bool,
}

/// The arguments of one statement of a batch of releases that record runs
/// ([`Dialect::release_runs`]), one entry per release in each slice.
#[derive(Clone, Copy)]
#[cfg_attr(
    not(feature = "postgres"),
    allow(dead_code, reason = "read by Postgres's batch statement")
)]
pub(crate) struct ReleaseRuns<'a> {
    pub(crate) names: &'a [&'a str],
    pub(crate) owners: &'a [&'a str],
    pub(crate) guards: Guards<'a>,
    pub(crate) at_leasts: &'a [Duration],
    /// The runs' fires, as the rows store them.
    pub(crate) fires: &'a [DateTime<Utc>],
    pub(crate) kinds: &'a [&'a str],
    pub(crate) errors: &'a [Option<&'a str>],
    /// Rows held by another transaction are left out at once (and their releases undecided), not
    /// waited for.
    pub(crate) skip_held: bool,
}

/// What names each acquisition of a batch of releases, with its owner: its fencing token where the
/// table has the column, else its `locked_at`.
#[derive(Clone, Copy)]
#[cfg_attr(
    not(feature = "postgres"),
    allow(dead_code, reason = "read by Postgres's batch statement")
)]
pub(crate) enum Guards<'a> {
    Tokens(&'a [i64]),
    Starts(&'a [DateTime<Utc>]),
}

/// What one attempt of a fire claim found.
#[derive(Debug)]
pub(crate) enum Seen {
    /// It claimed the fire.
    Won(LockRecord),
    /// It did not claim: the database's now and the row as it saw it in the step that decided,
    /// `None`s without a row.
    Row {
        now: DateTime<Utc>,
        /// The job's recorded fire.
        recorded: Option<DateTime<Utc>>,
        /// The lock as the row has it. `lock_until` may be past, and the token is `None` without
        /// a token column.
        holder: Option<LockRecord>,
        /// The pause the row keeps, also one whose end has passed. `None` without the
        /// [`PAUSE_COLUMNS`].
        pause: Option<shedlock_core::pause::Pause>,
    },
    /// Its look and its claim disagreed: another call changed the row in between. Look again.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code, reason = "used by MySQL"))]
    Changed,
}

/// The lock row (`locked_by`, `locked_at`, `lock_until`, token) a look or a claim statement
/// returned, as a record of `name`. All `NULL`, without a row, gives `None`.
///
/// # Errors
///
/// Some of the three lock columns `NULL` and others not, in a table written by another program.
pub(crate) fn seen_holder(
    name: &str,
    owner: Option<String>,
    locked_at: Option<DateTime<Utc>>,
    lock_until: Option<DateTime<Utc>>,
    token: Option<i64>,
) -> Result<Option<LockRecord>> {
    match (owner, locked_at, lock_until) {
        (Some(owner), Some(locked_at), Some(lock_until)) => Ok(Some(
            LockRecord::new(name, owner, locked_at, lock_until).with_fencing_token(token),
        )),
        (None, None, None) => Ok(None),
        _ => Err(Error::backend_message(format!(
            "claim a fire of lock {name:?}: its row has NULL in locked_by, locked_at or \
             lock_until"
        ))),
    }
}

/// The `SET` list of a recorded release beyond `lock_until`: the last run and the counts of
/// [`JobState::after`]. The runner is the row's `locked_by`, the start its `locked_at`, and the end
/// the database's now. `kind` is bound three times, once per use where parameters are positional.
/// The failures saturate at `INT`'s maximum. `row` qualifies the row's columns where they are
/// read (`""`, or `"t."` in a statement that also reads a batch's columns).
///
/// [`JobState::after`]: shedlock_core::jobs::JobState::after
pub(crate) fn release_run_state<D: Dialect>(
    cols: &ColumnNames,
    row: &str,
    fire: &str,
    kind: [&str; 3],
    error: &str,
) -> String {
    let q = |name: &str| D::QUOTE.quote(name);
    let [
        run_fire,
        run_by,
        started,
        ended,
        outcome,
        run_error,
        success,
        failures,
    ] = STATE_COLUMNS.map(|(name, _)| q(name));
    let (by, at, now) = (
        format!("{row}{}", cols.locked_by),
        format!("{row}{}", cols.locked_at),
        D::NOW,
    );
    let [r_fire, r_by, r_started, r_success, r_failures] =
        [&run_fire, &run_by, &started, &success, &failures].map(|c| format!("{row}{c}"));
    let inc =
        format!("CASE WHEN {r_failures} < 2147483647 THEN {r_failures} + 1 ELSE {r_failures} END");
    // This acquisition's run is recorded already (a release sent again after a lost reply): the
    // same runner, start and fire. The counts then stay. They read the last run's columns
    // before those change: MySQL assigns left to right, so the counts come first.
    let [k1, k2, k3] = kind;
    let again = format!("{r_by} = {by} AND {r_started} = {at} AND {r_fire} = {fire}");
    format!(
        "{success} = CASE WHEN {again} THEN {r_success} \
         ELSE CASE {k2} WHEN 'succeeded' THEN {now} ELSE {r_success} END END, \
         {failures} = CASE WHEN {again} THEN {r_failures} \
         ELSE CASE {k3} WHEN 'succeeded' THEN 0 WHEN 'failed' THEN {inc} \
         WHEN 'panicked' THEN {inc} ELSE {r_failures} END END, \
         {run_fire} = {fire}, {run_by} = {by}, {started} = {at}, {ended} = {now}, \
         {outcome} = {k1}, {run_error} = {error}"
    )
}

/// `t` rounded up to whole `precision_micros`, so a fire is stored as its column holds it and no
/// claim starts before `F`.
pub(crate) fn fire_time(t: DateTime<Utc>, precision_micros: i64) -> DateTime<Utc> {
    let step = precision_micros.max(1) * 1_000;
    let nanos = t
        .timestamp_nanos_opt()
        .map_or(0, |n| (step - n.rem_euclid(step)) % step);
    t + chrono::Duration::nanoseconds(nanos)
}

/// What an error of the database says about the lock table.
#[derive(Debug)]
pub(crate) enum Fault {
    /// The table does not exist.
    MissingTable,
    /// A column is missing or unusable, in the database's words.
    Columns(String),
}

/// A column the statements use, by what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Name,
    LockedBy,
    LockUntil,
    LockedAt,
    FencingToken,
    LastFire,
    /// A job state or pause column.
    State(StateKind),
}

/// One database's SQL and quirks, implemented on sqlx's database type.
pub(crate) trait Dialect:
    Database + sqlx::database::HasStatementCache + crate::tables::JobTables + Sized
{
    /// The names the database keeps for itself.
    const RESERVED: Reserved;
    /// How it quotes identifiers.
    const QUOTE: Quote;
    /// The public provider's name, for messages (`PgLockProvider`).
    const PROVIDER: &'static str;
    /// The folder of its migration files under `migrations/`.
    const MIGRATIONS: &'static str;
    /// The database's name in messages (`Postgres`).
    const DATABASE: &'static str;
    /// The URL schemes its provider takes, lowercase (`postgres`, `postgresql`).
    const SCHEMES: &'static [&'static str];
    /// The form of its URLs, for the message about one that does not parse.
    const URL_FORM: &'static str;
    /// Whether a plain path (no scheme) names a database, as for SQLite files.
    const PLAIN_PATHS: bool = false;
    /// The URL parameters that name TLS files (`sslrootcert`, …), and what each holds. They are
    /// checked to be readable when the URL is parsed, so a wrong path is named there.
    const TLS_FILES: &'static [(&'static str, &'static str)] = &[];
    /// Runs before `create_table_if_not_exists`'s `CREATE TABLE IF NOT EXISTS`, in the same
    /// transaction: Postgres's silences the notice a table that exists meanwhile gets.
    const BEFORE_CREATE: &'static str = "";

    /// The options with the builder's TLS files and credentials applied. A CA file turns on
    /// verifying the server's certificate and host name, leaving options that already verify as
    /// they are. A database without TLS, as SQLite, refuses it (`Error::is_invalid_config`).
    fn connect_settings(
        options: Options<Self>,
        settings: &crate::connect::ConnectSettings,
    ) -> Result<Options<Self>>;

    /// Statements beyond the four, where the database needs them.
    type Extra: Send + Sync;
    /// How a duration is bound.
    type Span: for<'q> Encode<'q, Self> + Type<Self> + Send;
    /// How a `locked_at` is bound to recognise an acquisition on a table without tokens.
    type Time: for<'q> Encode<'q, Self> + Type<Self> + Send + Clone;
    /// One column of the lock table as the database describes it.
    type TableColumn: Send;

    /// The statements for `table` and `cols` (quoted), without or with the token column.
    fn statements(table: &str, cols: &ColumnNames, token: bool) -> Statements<Self::Extra>;

    /// The type and constraints of the time columns in our DDL.
    const TIME_COLUMN: &'static str;
    /// The type and constraints of the token column in our DDL.
    const TOKEN_COLUMN: &'static str;
    /// The type of the [`LAST_FIRE`] column in our DDL. It is nullable, for no fire recorded yet.
    const LAST_FIRE_COLUMN: &'static str;
    /// The type of a nullable text column of at most `len` characters in our DDL, for the job
    /// state's runner, outcome and error text.
    fn text_column(len: usize) -> String {
        format!("VARCHAR({len}) NULL")
    }
    /// The type of the nullable 64-bit `trigger_id` column in our DDL.
    const ID_COLUMN: &'static str = "BIGINT NULL";
    /// The type of the `consecutive_failures` column in our DDL.
    const COUNT_COLUMN: &'static str = "INT NOT NULL DEFAULT 0";
    /// The integer type `CAST(… AS …)` takes for a 64-bit integer, to read any integer column as
    /// `i64`.
    const BIGINT: &'static str = "BIGINT";
    /// Whether the statements' parameters are positional (`?`, MySQL): bound in the order they
    /// appear, once per use. Otherwise they are numbered (`$1`, `?1`) and bound once.
    const POSITIONAL: bool = false;
    /// The precision of the time columns, in microseconds. Fires are rounded up to it.
    const TIME_PRECISION_MICROS: i64;
    /// What follows the column list of our DDL.
    const TABLE_OPTIONS: &'static str = "";

    /// The database's "now" in UTC, as the statements read it.
    const NOW: &'static str;
    /// What precedes a statement to pin its session, such as MySQL's time zone. Usually nothing.
    const PIN: &'static str = "";
    /// What follows `SELECT` / `UPDATE`, such as MySQL's optimizer hint. It is usually nothing.
    const HINT: &'static str = "";
    /// A `NULL` of the token's type.
    const NULL_TOKEN: &'static str;
    /// A `NULL` of a time column's type.
    const NULL_TIME: &'static str;
    /// The `n`th parameter (1-based) of a statement written for any dialect.
    fn param(n: usize) -> String;

    /// What follows an `INSERT` of a lock row so that, where the row of its name (the quoted key
    /// column `key`) exists, it updates the quoted columns `set` to the inserted values instead.
    fn upsert(key: &str, set: &[&str]) -> String {
        let set: Vec<String> = set.iter().map(|c| format!("{c} = excluded.{c}")).collect();
        format!("ON CONFLICT ({key}) DO UPDATE SET {}", set.join(", "))
    }

    /// The database's now plus the duration bound at `param` (as [`span`](Self::span) binds it),
    /// as acquire computes `lock_until`.
    fn now_plus(param: &str) -> String;

    /// A new fencing token in a plain `UPDATE` of the row, from its token column `tok`, by the
    /// rule acquire follows.
    fn next_token(tok: &str) -> String;

    /// Whether an `UPDATE` can return its row (`RETURNING`).
    const UPDATE_RETURNING: bool = true;

    /// Whether a trigger's write sends a push, as [`notify_trigger`](Self::notify_trigger) makes
    /// it.
    const NOTIFIES: bool = false;

    /// The trigger's guarded `update` made to also send the push of a new trigger with the name
    /// column `name` as payload on the channel bound at `channel`, answering the number of rows
    /// written. `None` where the database has no push.
    fn notify_trigger(update: &str, name: &str, channel: &str) -> Option<String> {
        let _ = (update, name, channel);
        None
    }

    /// Whether a trigger claim's statement also reports the row it saw, as
    /// [`claim_seeing`](Self::claim_seeing) makes it.
    const CLAIM_SEES: bool = false;

    /// The trigger claim's guarded `update` (with `RETURNING locked_at, lock_until, token`) made
    /// to also answer the row as `look` (a statement of one row) sees it, in one statement: one
    /// row, the three returned columns `NULL` unless it claimed, then `look`'s. `None` where the
    /// database cannot (a claim that claimed nothing then reads the row with a second statement).
    fn claim_seeing(update: &str, look: &str) -> Option<String> {
        let _ = (update, look);
        None
    }

    /// A push of new triggers on `channel`, see
    /// [`LockProvider::watch_triggers`](shedlock_core::provider::LockProvider::watch_triggers).
    /// By default there is none.
    fn watch_triggers(
        link: &Link<Self>,
        channel: String,
    ) -> impl Future<Output = Result<shedlock_core::provider::TriggerWake>> + Send {
        let _ = (link, channel);
        std::future::ready(Err(Error::unsupported("watch_triggers")))
    }

    /// A duration as the statements take it.
    fn span(d: Duration) -> Self::Span;

    /// A `locked_at` as the statements take it.
    fn time(t: DateTime<Utc>) -> Self::Time;

    /// Reads a time column of a returned row.
    ///
    /// # Errors
    ///
    /// The column could not be read or holds no time.
    fn read_time(row: &Self::Row, index: usize, map: &Map<'_>) -> Result<DateTime<Utc>>;

    /// Reads a time column that may be `NULL`.
    ///
    /// # Errors
    ///
    /// The column could not be read or holds no time.
    fn read_opt_time(row: &Self::Row, index: usize, map: &Map<'_>)
    -> Result<Option<DateTime<Utc>>>;

    /// How many rows a statement changed, or matched where the database counts so.
    fn rows_affected(result: &Self::QueryResult) -> u64;

    /// Where `options` connect, for messages (`Postgres at db:5432/app`): never the password.
    fn target(options: &Options<Self>) -> String;

    /// Whether the database `options` name lives only while a connection to it is open, as an
    /// in-memory SQLite database does. The provider's own connections then keep one open for it.
    fn keeps_anchor(options: &Options<Self>) -> bool {
        let _ = options;
        false
    }

    /// The database's own session settings, run on each connection the provider opens and on each
    /// of a `pool_options()` pool's. By default there are none.
    fn setup(
        conn: &mut Self::Connection,
    ) -> Pin<Box<dyn Future<Output = sqlx::Result<()>> + Send + '_>> {
        let _ = conn;
        Box::pin(std::future::ready(Ok(())))
    }

    /// What `error` says about the lock table, if anything.
    fn classify(error: &sqlx::Error) -> Option<Fault>;

    /// Reads the table's columns and whether the name column is alone in a unique index. `None` if
    /// the table does not exist.
    fn detect<'a>(
        link: &'a Link<Self>,
        call: &'a Call,
        map: &'a Map<'a>,
    ) -> impl Future<Output = Result<Option<(Vec<Self::TableColumn>, bool)>>> + Send + 'a;

    /// Whether the database reports `column` under the configured `name`.
    fn is_column(column: &Self::TableColumn, name: &str) -> bool;

    /// The column's length in characters, where the database enforces one.
    fn column_len(column: &Self::TableColumn) -> Option<usize>;

    /// What is wrong with `column`, configured as `name`, for `role`, if anything.
    fn column_problem(column: &Self::TableColumn, role: Role, name: &str) -> Option<String>;

    /// One attempt of an acquire.
    fn acquire<'a>(
        at: Attempt<'a, Self>,
        args: Acquire<'a>,
    ) -> impl Future<Output = Result<Option<LockRecord>>> + Send + 'a;

    /// One attempt of an extend.
    fn extend<'a>(
        at: Attempt<'a, Self>,
        args: Extend<'a>,
    ) -> impl Future<Output = Result<Option<LockRecord>>> + Send + 'a;

    /// One attempt of a fire claim, on a table with [`LAST_FIRE`].
    fn claim_fire<'a>(
        at: Attempt<'a, Self>,
        args: ClaimFire<'a>,
    ) -> impl Future<Output = Result<Seen>> + Send + 'a;

    /// The most fire claims one [`claim_fires`](Self::claim_fires) statement takes: 1, the
    /// default, where the dialect has no batch statement.
    const FIRE_BATCH: usize = 1;

    /// One attempt of a batch of fire claims, on a table with [`LAST_FIRE`], in one statement:
    /// what each claim found, in their order, as [`claim_fire`](Self::claim_fire) answers one.
    /// Only asked where [`FIRE_BATCH`](Self::FIRE_BATCH) is above 1.
    fn claim_fires<'a>(
        at: Attempt<'a, Self>,
        args: ClaimFires<'a>,
    ) -> impl Future<Output = Result<Vec<Seen>>> + Send + 'a {
        let _ = (at, args);
        std::future::ready(Err(Error::unsupported("claim_fires")))
    }

    /// One attempt of a batch of releases that record runs, on a table with the job state columns,
    /// in one statement: for each, in their order, whether it released (`Some(true)`), found the
    /// row no longer this acquisition's (`Some(false)`), or left it out as held by another
    /// transaction (`None`, only with `skip_held`). Only asked where
    /// [`FIRE_BATCH`](Self::FIRE_BATCH) is above 1.
    fn release_runs<'a>(
        at: Attempt<'a, Self>,
        args: ReleaseRuns<'a>,
    ) -> impl Future<Output = Result<Vec<Option<bool>>>> + Send + 'a {
        let _ = (at, args);
        std::future::ready(Err(Error::unsupported("release_runs")))
    }
}

/// Checks the columns of the lock table against what the statements need. `unique` says whether the
/// name column is alone in a unique index.
pub(crate) fn check_columns<D: Dialect>(
    s: &Settings,
    columns: &[D::TableColumn],
    unique: bool,
) -> Result<Schema> {
    let cols = &s.columns;
    let find = |name: &str| columns.iter().find(|c| D::is_column(c, name));
    let mut problems = Vec::new();
    let mut name_max = None;
    let mut owner_max = None;
    for (role, name) in [
        (Role::Name, &cols.name),
        (Role::LockedBy, &cols.locked_by),
        (Role::LockUntil, &cols.lock_until),
        (Role::LockedAt, &cols.locked_at),
    ] {
        let Some(column) = find(name) else {
            problems.push(format!("column {name} is missing"));
            continue;
        };
        problems.extend(D::column_problem(column, role, name));
        match role {
            Role::Name => {
                if !unique {
                    problems.push(format!(
                        "column {name} is not the primary key (nor alone in a unique index)"
                    ));
                }
                name_max = D::column_len(column);
            }
            Role::LockedBy => owner_max = D::column_len(column),
            _ => {}
        }
    }
    let has_token = match find(&cols.fencing_token) {
        None => false,
        Some(column) => match D::column_problem(column, Role::FencingToken, &cols.fencing_token) {
            None => true,
            Some(problem) => {
                problems.push(problem);
                false
            }
        },
    };
    let has_last_fire = match find(LAST_FIRE) {
        None => false,
        Some(column) => match D::column_problem(column, Role::LastFire, LAST_FIRE) {
            None => true,
            Some(problem) => {
                problems.push(problem);
                false
            }
        },
    };
    let has_job_state = job_state_columns::<D>(s, columns, &mut problems);
    let has_pause = pause_columns::<D>(s, columns, &mut problems);
    let has_trigger = trigger_columns::<D>(s, columns, &mut problems);
    if !problems.is_empty() {
        return Err(Error::schema(
            format!(
                "{}: {}; see the DDL of {}::ddl()",
                s.table,
                problems.join("; "),
                D::PROVIDER
            ),
            None,
        ));
    }
    check_name_capacity(s, name_max)?;
    tracing::debug!(table = %s.table, has_token, has_last_fire, has_job_state, has_pause, has_trigger, "lock table checked");
    Ok(Schema {
        has_token,
        has_last_fire,
        has_job_state,
        has_pause,
        has_trigger,
        owner_max,
    })
}

/// Whether the table has all of the job state columns, each of a fitting type. A column of the
/// wrong type is a problem, like `last_fire`'s. Some but not all present counts as none, with a
/// warning naming the missing ones.
fn job_state_columns<D: Dialect>(
    s: &Settings,
    columns: &[D::TableColumn],
    problems: &mut Vec<String>,
) -> bool {
    // The longest outcome kind (`succeeded`, `cancelled`) and a capped error text.
    let needed = |kind| match kind {
        StateKind::Outcome => 9,
        StateKind::Error => shedlock_core::jobs::MAX_ERROR_LEN,
        _ => 0,
    };
    column_set::<D>(
        s,
        columns,
        &ColumnSet {
            columns: &STATE_COLUMNS,
            what: "job state",
            migration: "0003_job_state.sql",
            needed: &needed,
        },
        problems,
    )
}

/// Whether the table has all of the [`PAUSE_COLUMNS`], each of a fitting type, as
/// [`job_state_columns`] checks those.
fn pause_columns<D: Dialect>(
    s: &Settings,
    columns: &[D::TableColumn],
    problems: &mut Vec<String>,
) -> bool {
    // An operator's name and a reason of 255 characters, and the longest action (`triggered`).
    let needed = |kind| match kind {
        StateKind::Outcome => 9,
        StateKind::Runner => 255,
        _ => 0,
    };
    column_set::<D>(
        s,
        columns,
        &ColumnSet {
            columns: &PAUSE_COLUMNS,
            what: "pause",
            migration: "0005_pause.sql",
            needed: &needed,
        },
        problems,
    )
}

/// Whether the table has all of the [`TRIGGER_COLUMNS`], each of a fitting type, as
/// [`job_state_columns`] checks those.
fn trigger_columns<D: Dialect>(
    s: &Settings,
    columns: &[D::TableColumn],
    problems: &mut Vec<String>,
) -> bool {
    // An operator's name and a replica's owner id of 255 characters.
    let needed = |kind| match kind {
        StateKind::Runner => 255,
        _ => 0,
    };
    column_set::<D>(
        s,
        columns,
        &ColumnSet {
            columns: &TRIGGER_COLUMNS,
            what: "trigger",
            migration: "0006_trigger.sql",
            needed: &needed,
        },
        problems,
    )
}

/// A set of columns with fixed names that a feature needs all of.
struct ColumnSet<'a> {
    columns: &'a [(&'static str, StateKind)],
    /// The feature, for the warning (`job state`).
    what: &'static str,
    /// The migration that adds them.
    migration: &'static str,
    /// The least length a text column of a kind must hold.
    needed: &'a dyn Fn(StateKind) -> usize,
}

/// Whether the table has all of `set`'s columns, each of a fitting type. A column of the wrong type
/// is a problem. Some but not all present counts as none, with a warning naming the missing ones.
fn column_set<D: Dialect>(
    s: &Settings,
    columns: &[D::TableColumn],
    set: &ColumnSet<'_>,
    problems: &mut Vec<String>,
) -> bool {
    let missing = missing_columns::<D>(columns, set.columns);
    if missing.len() == set.columns.len() {
        return false;
    }
    if !missing.is_empty() {
        tracing::warn!(
            table = %s.table,
            missing = ?missing,
            "the lock table has some {} columns but not all, so it counts as without them; \
             add the others (see migration {}, or `shedlock ddl`'s missing part)",
            set.what,
            set.migration,
        );
        return false;
    }
    let before = problems.len();
    for &(name, kind) in set.columns {
        if let Some(column) = columns.iter().find(|c| D::is_column(c, name)) {
            problems.extend(D::column_problem(column, Role::State(kind), name));
            let needed = (set.needed)(kind);
            if let Some(len) = D::column_len(column).filter(|len| *len < needed) {
                problems.push(format!(
                    "column {name} holds {len} characters; it needs {needed}"
                ));
            }
        }
    }
    problems.len() == before
}

/// The job state columns `columns` lacks, in the order of [`STATE_COLUMNS`].
pub(crate) fn missing_state_columns<D: Dialect>(
    columns: &[D::TableColumn],
) -> Vec<(&'static str, StateKind)> {
    missing_columns::<D>(columns, &STATE_COLUMNS)
}

/// The columns of `set` that `columns` lacks, in `set`'s order.
pub(crate) fn missing_columns<D: Dialect>(
    columns: &[D::TableColumn],
    set: &[(&'static str, StateKind)],
) -> Vec<(&'static str, StateKind)> {
    set.iter()
        .copied()
        .filter(|(name, _)| !columns.iter().any(|c| D::is_column(c, name)))
        .collect()
}

/// A job state column's type in our DDL.
pub(crate) fn state_column_type<D: Dialect>(kind: StateKind) -> String {
    match kind {
        StateKind::Time => D::LAST_FIRE_COLUMN.to_owned(),
        StateKind::Runner => D::text_column(255),
        StateKind::Outcome => D::text_column(16),
        StateKind::Error => D::text_column(shedlock_core::jobs::MAX_ERROR_LEN),
        StateKind::Count => D::COUNT_COLUMN.to_owned(),
        StateKind::Id => D::ID_COLUMN.to_owned(),
    }
}
