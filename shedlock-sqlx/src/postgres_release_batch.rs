//! Postgres's batch of releases that record runs: one statement releases the locks of many runs
//! that ended, each on its own row and by the single `release_run`'s rules (docs/guarantees.md,
//! "Many jobs at one instant").

use sqlx::AssertSqlSafe;
use sqlx::postgres::Postgres;

use crate::builder::ColumnNames;
use crate::dialect::{Attempt, Dialect, Guards, ReleaseRuns, release_run_state};
use crate::link::statement;

use super::postgres::NOW;
use super::postgres_batch::ROW_WAIT_MS;

/// The statements, waiting for held rows (`[0]`) or leaving them out (`[1]`), and the waiting
/// one for a batch of one release (`[2]`): its own text, prepared, as the lone fire claim's
/// (`postgres_batch.rs`).
pub(crate) fn statements(table: &str, cols: &ColumnNames, token: bool) -> [std::sync::Arc<str>; 3] {
    let wait = releases(table, cols, token, false);
    let lone = format!("{wait} /* one release */");
    [wait, releases(table, cols, token, true), lone].map(Into::into)
}

/// $1 names (`text[]`), $2 owners (`text[]`), $3 fencing tokens (`bigint[]`) or, in a table
/// without them, `locked_at`s (`timestamp[]`), $4 `at_least`s (`interval[]`), $5 fires
/// (`timestamp[]`), $6 outcome kinds and $7 error texts (`text[]`). The single `release_run`'s
/// update, for every release at once:
///
/// - `batch_rel` also sets, for this statement alone, the release's durability
///   (`synchronous_commit = off`, as the single release) and how long it waits for a held row
///   ([`ROW_WAIT_MS`]).
/// - `batch_mine` locks, in name order, the rows that are still the releases' acquisitions, so
///   that two statements that lock the same rows never deadlock. With `skip`, a row another
///   transaction holds is left out at once (`SKIP LOCKED`).
/// - `batch_done` writes the locked rows, re-checking the guard on the row as locked.
/// - One row out per release, in their order: whether it released, and whether the statement's
///   snapshot saw the row as the release's acquisition. A release that did not release while its
///   row looked like its own was left out as held (with `skip`), or found its row taken over
///   (without).
///
/// Every configured column is qualified where it is read, so that configured column names cannot
/// meet the releases' own (`rn`, `rb`, …).
fn releases(table: &str, cols: &ColumnNames, token: bool, skip: bool) -> String {
    let (name, until, at, by, tok) = cols.each();
    let (guard, guard_type) = if token {
        (tok, "bigint")
    } else {
        (at, "timestamp")
    };
    let state = release_run_state::<Postgres>(
        cols,
        "t.",
        "batch_rel.rf",
        ["batch_rel.rk"; 3],
        "batch_rel.re",
    );
    let skip = if skip { " SKIP LOCKED" } else { "" };
    let mine = format!("t.{by} = batch_rel.rb AND t.{guard} = batch_rel.rg");
    format!(
        "WITH batch_rel (rn, rb, rg, ra, rf, rk, re, ri) AS (\
         SELECT * FROM unnest($1::text[], $2::text[], $3::{guard_type}[], $4::interval[], \
         $5::timestamp[], $6::text[], $7::text[]) WITH ORDINALITY \
         WHERE set_config('lock_timeout', '{ROW_WAIT_MS}ms', true) IS NOT NULL \
         AND set_config('synchronous_commit', 'off', true) IS NOT NULL), \
         batch_seen (sn) AS (\
         SELECT t.{name} FROM {table} AS t JOIN batch_rel ON t.{name} = batch_rel.rn WHERE {mine}), \
         batch_mine (mn) AS (\
         SELECT t.{name} FROM {table} AS t JOIN batch_rel ON t.{name} = batch_rel.rn WHERE {mine} \
         ORDER BY t.{name} FOR UPDATE OF t{skip}), \
         batch_done (dn) AS (\
         UPDATE {table} AS t SET {until} = GREATEST({NOW}, t.{at} + batch_rel.ra), {state} \
         FROM batch_rel WHERE t.{name} = batch_rel.rn \
         AND t.{name} IN (SELECT mn FROM batch_mine) AND {mine} \
         RETURNING t.{name}) \
         SELECT batch_done.dn IS NOT NULL, batch_seen.sn IS NOT NULL, batch_rel.ri \
         FROM batch_rel LEFT JOIN batch_seen ON batch_seen.sn = batch_rel.rn \
         LEFT JOIN batch_done ON batch_done.dn = batch_rel.rn \
         ORDER BY batch_rel.ri"
    )
}

/// One attempt of a batch: the statement, sent unnamed so that Postgres plans it for its arrays
/// (as the batch of fire claims, `postgres_batch.rs`), and what each release did. A batch of one
/// release, a lone run's, is prepared: a plan for one row is the same for every one.
pub(crate) async fn release_runs<'a>(
    mut at: Attempt<'a, Postgres>,
    args: ReleaseRuns<'a>,
) -> shedlock_core::Result<Vec<Option<bool>>> {
    use sqlx::Row as _;
    let map = at.map;
    let lone = args.names.len() == 1 && !args.skip_held;
    let sql = if lone {
        at.sql.extra.releases[2].clone()
    } else {
        at.sql.extra.releases[usize::from(args.skip_held)].clone()
    };
    let query = sqlx::query(AssertSqlSafe(sql))
        .persistent(lone)
        .bind(args.names)
        .bind(args.owners);
    let query = match args.guards {
        Guards::Tokens(tokens) => query.bind(tokens),
        Guards::Starts(starts) => query.bind(
            starts
                .iter()
                .map(|t| Postgres::time(*t))
                .collect::<Vec<_>>(),
        ),
    };
    let query = query
        .bind(
            args.at_leasts
                .iter()
                .map(|d| Postgres::span(*d))
                .collect::<Vec<_>>(),
        )
        .bind(
            args.fires
                .iter()
                .map(|t| Postgres::time(*t))
                .collect::<Vec<_>>(),
        )
        .bind(args.kinds)
        .bind(args.errors);
    let rows = statement!(at.c, query, map, fetch_all)?;
    if rows.len() != args.names.len() {
        return Err(shedlock_core::Error::backend_message(format!(
            "release runs: the statement answered {} rows for {} releases",
            rows.len(),
            args.names.len()
        )));
    }
    let mut done = Vec::with_capacity(rows.len());
    for (expected, row) in (1_i64..).zip(&rows) {
        let got: i64 = row.try_get(2).map_err(map)?;
        if got != expected {
            return Err(shedlock_core::Error::backend_message(format!(
                "release runs: the statement answered release {got} in place {expected}"
            )));
        }
        let released: bool = row.try_get(0).map_err(map)?;
        let looked_mine: bool = row.try_get(1).map_err(map)?;
        done.push(match (released, looked_mine) {
            (true, _) => Some(true),
            (false, true) if args.skip_held => None,
            (false, _) => Some(false),
        });
    }
    Ok(done)
}
