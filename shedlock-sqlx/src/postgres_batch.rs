//! Postgres's batch of fire claims: one statement claims the fires of many jobs, each on its own
//! row and by the single claim's rules (docs/guarantees.md, "Many jobs at one instant").

use sqlx::AssertSqlSafe;
use sqlx::postgres::Postgres;

use crate::builder::ColumnNames;
use crate::dialect::{Attempt, ClaimFires, Dialect, LAST_FIRE, Seen, not_paused, pause_read};
use crate::link::statement;
use crate::provider::Provider;

use super::postgres::{NOW, NOW_MICROS};

/// How long a batch's statement waits for a lock's row that another transaction holds, as
/// Postgres's `lock_timeout` for that statement alone. A racing replica's batch holds rows for
/// tens of milliseconds (BENCHMARKS.md, "With batches of fire claims"); a row held longer, as by an
/// operator's open transaction, must not hold up every claim of the batch.
pub(crate) const ROW_WAIT_MS: u32 = 500;

/// The statements of the batch: `[skip][pause]`, waiting for held rows (`skip` 0) or leaving them
/// out (1), without (`pause` 0) and with (1) the pause columns; and `lone[pause]`, the waiting one
/// for a batch of one claim; and the batch of releases (`postgres_release_batch.rs`).
pub(crate) struct Extra {
    claims: [[std::sync::Arc<str>; 2]; 2],
    lone: [std::sync::Arc<str>; 2],
    pub(crate) releases: [std::sync::Arc<str>; 3],
}

impl Extra {
    pub(crate) fn new(table: &str, cols: &ColumnNames, token: bool) -> Self {
        let claims = [false, true]
            .map(|skip| [false, true].map(|pause| claims(table, cols, token, pause, skip)));
        // Its own text: sqlx finds a statement it prepared by its text, also for a query sent
        // unprepared, so a batch of many sent with this text would run on the lone claim's
        // generic plan.
        let lone = [0, 1].map(|pause| format!("{} /* one claim */", claims[0][pause]).into());
        Self {
            claims: claims.map(|by_pause| by_pause.map(Into::into)),
            lone,
            releases: crate::postgres_release_batch::statements(table, cols, token),
        }
    }
}

/// $1 names (`text[]`), $2 fires, $3 next fires (`timestamp[]`), $4 `at_most`s (`interval[]`), $5
/// owner. The single claim's update and insert, for every name at once:
///
/// - `batch_req` also sets the statement's `lock_timeout` ([`ROW_WAIT_MS`]) before any row is
///   locked (the locking step reads its rows first).
/// - `batch_locked` locks, in name order, the rows whose claim is allowed, with the claim's guard
///   in the locking step. Replicas that claim the same names at once so never deadlock, and a row
///   that another claim changed first is re-checked once locked and left out. A losing claim locks
///   and writes nothing. With `skip`, a row another transaction holds is left out at once
///   (`SKIP LOCKED`): its claim is then undecided, as one that met a racing claimer.
/// - `batch_claimed` writes the locked rows, and `batch_created` inserts the missing ones in name
///   order (`ON CONFLICT DO NOTHING`: one inserted concurrently is left to the re-look).
/// - One row out per claim, in the claims' order, as the single claim answers: the database's now,
///   the row as the statement's snapshot saw it, the claim's columns if it won, the pause, and the
///   claim's position last. A claim that did not win while its row looks claimable met a racing
///   claimer: the provider looks at it again in its next statement (`provider/fire_batch.rs`).
///
/// Every configured column of the table is qualified where it is read, so configured column names
/// cannot meet the claims' own (`rn`, `rf`, …), and the steps are named `batch_…`, so that they
/// hide no table of a plain name such as `locked`.
fn claims(table: &str, cols: &ColumnNames, token: bool, pause: bool, skip: bool) -> String {
    let (name, until, at, by, tok) = cols.each();
    let fire = &Postgres::QUOTE.quote(LAST_FIRE);
    let (set_tok, ins_col, ins_val, seen_tok, ret_t, ret_c) = if token {
        (
            format!(", {tok} = GREATEST(t.{tok} + 1, {NOW_MICROS})"),
            format!(", {tok}"),
            format!(", {NOW_MICROS}"),
            format!("t.{tok}"),
            format!("t.{tok}"),
            format!("c.{tok}"),
        )
    } else {
        let null = "NULL::bigint".to_owned();
        (
            String::new(),
            String::new(),
            String::new(),
            null.clone(),
            null.clone(),
            null,
        )
    };
    let (seen_names, out_pause, unpaused) = if pause {
        (
            ", pa, pu, pb",
            ", batch_seen.pa, batch_seen.pu, batch_seen.pb",
            format!(" AND {}", not_paused::<Postgres>(NOW)),
        )
    } else {
        ("", "", String::new())
    };
    let seen_cols = pause_read::<Postgres>("t.", pause);
    let allowed = format!(
        "batch_req.rf <= {NOW} AND {NOW} < batch_req.rx AND t.{until} <= {NOW} \
         AND (t.{fire} IS NULL OR t.{fire} < batch_req.rf){unpaused}"
    );
    let skip = if skip { " SKIP LOCKED" } else { "" };
    format!(
        "WITH batch_req (rn, rf, rx, ra, ri) AS (\
         SELECT * FROM unnest($1::text[], $2::timestamp[], $3::timestamp[], $4::interval[]) \
         WITH ORDINALITY WHERE set_config('lock_timeout', '{ROW_WAIT_MS}ms', true) IS NOT NULL), \
         batch_seen (sn, f, u, b, a, t{seen_names}) AS (\
         SELECT t.{name}, t.{fire}, t.{until}, t.{by}, t.{at}, {seen_tok}{seen_cols} \
         FROM {table} AS t WHERE t.{name} = ANY($1)), \
         batch_locked (ln) AS (\
         SELECT t.{name} FROM {table} AS t JOIN batch_req ON t.{name} = batch_req.rn WHERE {allowed} \
         ORDER BY t.{name} FOR UPDATE OF t{skip}), \
         batch_claimed (wn, wa, wu, wt) AS (\
         UPDATE {table} AS t SET {by} = $5, {at} = {NOW}, {until} = {NOW} + batch_req.ra, \
         {fire} = batch_req.rf{set_tok} \
         FROM batch_req WHERE t.{name} = batch_req.rn AND t.{name} IN (SELECT ln FROM batch_locked) AND {allowed} \
         RETURNING t.{name}, t.{at}, t.{until}, {ret_t}), \
         batch_created (wn, wa, wu, wt) AS (\
         INSERT INTO {table} AS c ({name}, {until}, {at}, {by}, {fire}{ins_col}) \
         SELECT batch_req.rn, {NOW} + batch_req.ra, {NOW}, $5, batch_req.rf{ins_val} FROM batch_req \
         WHERE batch_req.rf <= {NOW} AND {NOW} < batch_req.rx \
         AND NOT EXISTS (SELECT 1 FROM batch_seen WHERE batch_seen.sn = batch_req.rn) \
         ORDER BY batch_req.rn \
         ON CONFLICT ({name}) DO NOTHING \
         RETURNING c.{name}, c.{at}, c.{until}, {ret_c}), \
         batch_won AS (SELECT * FROM batch_claimed UNION ALL SELECT * FROM batch_created) \
         SELECT {NOW}, batch_seen.f, batch_seen.u, batch_seen.b, batch_seen.a, batch_seen.t, batch_won.wa, batch_won.wu, batch_won.wt\
         {out_pause}, batch_req.ri \
         FROM batch_req LEFT JOIN batch_seen ON batch_seen.sn = batch_req.rn LEFT JOIN batch_won ON batch_won.wn = batch_req.rn \
         ORDER BY batch_req.ri"
    )
}

/// One attempt of a batch: the statement, sent unnamed so that Postgres plans it for its arrays
/// each time (a prepared statement's generic plan of it costs about 10× more on the server,
/// BENCHMARKS.md "The same, prepared, and the read-first path"), and what each claim found. A
/// batch of one claim, a replica's lone claim, is prepared: a plan for one row is the same for
/// every one.
pub(crate) async fn claim_fires<'a>(
    mut at: Attempt<'a, Postgres>,
    args: ClaimFires<'a>,
) -> shedlock_core::Result<Vec<Seen>> {
    use sqlx::Row as _;
    let map = at.map;
    let layout = usize::from(args.schema.has_pause);
    let lone = args.names.len() == 1 && !args.skip_held;
    let sql = if lone {
        at.sql.extra.lone[layout].clone()
    } else {
        at.sql.extra.claims[usize::from(args.skip_held)][layout].clone()
    };
    let query = sqlx::query(AssertSqlSafe(sql))
        .persistent(lone)
        .bind(args.names)
        .bind(
            args.ats
                .iter()
                .map(|t| Postgres::time(*t))
                .collect::<Vec<_>>(),
        )
        .bind(
            args.nexts
                .iter()
                .map(|t| Postgres::time(*t))
                .collect::<Vec<_>>(),
        )
        .bind(
            args.at_mosts
                .iter()
                .map(|d| Postgres::span(*d))
                .collect::<Vec<_>>(),
        )
        .bind(args.owner);
    let rows = statement!(at.c, query, map, fetch_all)?;
    let pause = args.schema.has_pause.then_some(9);
    let position = if args.schema.has_pause { 12 } else { 9 };
    if rows.len() != args.names.len() {
        return Err(shedlock_core::Error::backend_message(format!(
            "claim fires: the statement answered {} rows for {} claims",
            rows.len(),
            args.names.len()
        )));
    }
    let mut seen = Vec::with_capacity(rows.len());
    for (expected, (row, name)) in (1_i64..).zip(rows.iter().zip(args.names)) {
        let got: i64 = row.try_get(position).map_err(map)?;
        if got != expected {
            return Err(shedlock_core::Error::backend_message(format!(
                "claim fires: the statement answered claim {got} in place {expected}"
            )));
        }
        seen.push(if Postgres::read_opt_time(row, 6, map)?.is_some() {
            Seen::Won(Provider::<Postgres>::returned_record(
                row, 6, name, args.owner, map,
            )?)
        } else {
            Provider::<Postgres>::seen_row(row, name, map, pause)?
        });
    }
    Ok(seen)
}
