//! Pauses in the lock table's [`PAUSE_COLUMNS`]: [`LockAdmin::pause`] and [`LockAdmin::resume`]
//! (`Provider::admin_pause`, `Provider::admin_resume`), reading a row's pause and last action for
//! the listing ([`read_steer`]), and the error of a table without the columns.
//!
//! A pause reads the database's now first and turns the asked length into its end on that clock,
//! so an end not after now is refused before anything is written. Then one upsert sets the pause
//! and the last action, creating a missing row free (`lock_until` = `locked_at` = now, no owner,
//! the token column's default), so the next acquire takes it with a new token as usual. A resume
//! reads the pause, then clears it with an `UPDATE` guarded by the `paused_at` it read, so a pause
//! set in between is not removed unseen. The fire claim checks the pause itself (see
//! [`not_paused`](crate::dialect::not_paused)); acquire, extend and release ignore it.
//!
//! [`LockAdmin::pause`]: shedlock_core::admin::LockAdmin::pause
//! [`LockAdmin::resume`]: shedlock_core::admin::LockAdmin::resume

use shedlock_core::{
    Error, Result,
    admin::{ActionKind, AdminAction},
    pause::{Pause, PauseFor, validate_actor, validate_reason},
};
use sqlx::{AssertSqlSafe, ColumnIndex, Decode, Encode, Executor, IntoArguments, Row, Type};

use crate::builder::Settings;
use crate::dialect::{Dialect, Map, PAUSE_COLUMNS, fire_time, missing_columns};
use crate::link::{Call, statement};
use crate::provider::{Provider, add_columns};

/// How many times a resume reads the pause again when it changed between its read and its write.
const RESUME_LOOKS: usize = 4;

/// The pause columns, quoted, in the order of [`PAUSE_COLUMNS`].
fn columns<D: Dialect>() -> [String; 7] {
    PAUSE_COLUMNS.map(|(name, _)| D::QUOTE.quote(name))
}

/// The columns `SELECT`ed for a row's pause and last action, in the order of [`PAUSE_COLUMNS`],
/// each after a comma. [`read_steer`] reads them.
pub(crate) fn steer_columns<D: Dialect>() -> String {
    format!(", {}", columns::<D>().join(", "))
}

/// The pause and the last action of a row whose columns `first..first + 7` are
/// [`steer_columns`]. A pause needs its `paused_at`; an action its word (one this version knows),
/// actor and time.
pub(crate) fn read_steer<D: Dialect>(
    row: &D::Row,
    first: usize,
    map: &Map<'_>,
) -> Result<(Option<Pause>, Option<AdminAction>)>
where
    for<'r> String: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
{
    let text = |i: usize| row.try_get::<Option<String>, _>(first + i).map_err(map);
    let pause = match D::read_opt_time(row, first, map)? {
        Some(since) => Some(Pause::new(
            since,
            D::read_opt_time(row, first + 1, map)?,
            text(2)?.unwrap_or_default(),
            text(3)?.as_deref(),
        )),
        None => None,
    };
    let kind = text(4)?.as_deref().and_then(ActionKind::parse);
    let action = match (kind, text(5)?, D::read_opt_time(row, first + 6, map)?) {
        (Some(kind), Some(by), Some(at)) => Some(AdminAction::new(kind, by, at)),
        _ => None,
    };
    Ok((pause, action))
}

/// The statements of pauses for `settings`' table, which has the [`PAUSE_COLUMNS`].
struct Statements {
    /// The database's now.
    now: String,
    /// Sets the pause and the last action, inserting a free row where there is none. Parameters: 1
    /// name, 2 now, 3 until, 4 actor, 5 reason, bound in order of appearance where positional.
    upsert: String,
    /// The pause of one name (parameter 1): `paused_at`, `paused_until`, `paused_by`,
    /// `paused_reason`.
    read: String,
    /// Clears the pause and records the resume. Parameters: 1 actor, 2 name, 3 the `paused_at`
    /// read.
    resume: String,
}

fn statements<D: Dialect>(s: &Settings) -> Statements {
    let table = s.table.quoted(D::QUOTE);
    let c = s.columns.quoted(D::QUOTE);
    let (pre, hint, now) = (D::PIN, D::HINT, D::NOW);
    let [at, until, by, reason, action, action_by, action_at] = columns::<D>();
    let p = D::param;
    let (name, now_p, until_p, actor_p, reason_p) = (p(1), p(2), p(3), p(4), p(5));
    let insert_cols = format!(
        "{}, {}, {}, {}, {at}, {until}, {by}, {reason}, {action}, {action_by}, {action_at}",
        c.name, c.lock_until, c.locked_at, c.locked_by
    );
    // Positional parameters bind in order of appearance: name, now (3 times), until, actor,
    // reason, actor, now. Numbered ones bind each once.
    let insert_vals = format!(
        "{name}, {now_p}, {now_p}, '', {now_p}, {until_p}, {actor_p}, {reason_p}, 'paused', \
         {actor_p}, {now_p}"
    );
    let set = [&at, &until, &by, &reason, &action, &action_by, &action_at].map(String::as_str);
    Statements {
        now: format!("{pre}SELECT {hint} {now}"),
        upsert: format!(
            "{pre}INSERT {hint} INTO {table} ({insert_cols}) VALUES ({insert_vals}) {}",
            D::upsert(&c.name, &set)
        ),
        read: format!(
            "{pre}SELECT {hint} {at}, {until}, {by}, {reason} FROM {table} WHERE {} = {}",
            c.name,
            p(1)
        ),
        resume: format!(
            "{pre}UPDATE {hint} {table} SET {at} = NULL, {until} = NULL, {by} = NULL, \
             {reason} = NULL, {action} = 'resumed', {action_by} = {}, {action_at} = {now} \
             WHERE {} = {} AND {at} = {}",
            p(1),
            c.name,
            p(2),
            p(3)
        ),
    }
}

impl<D: Dialect> Provider<D>
where
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> Option<&'q str>: Encode<'q, D> + Type<D>,
    for<'q> Option<D::Time>: Encode<'q, D> + Type<D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'r> String: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
    D::Arguments: IntoArguments<D>,
{
    /// Pauses the fires of `name` (see the module's docs): the database's now, then one upsert.
    /// Returns the pause as stored.
    pub(crate) async fn admin_pause(
        &self,
        name: &str,
        how_long: PauseFor,
        reason: Option<&str>,
        actor: &str,
    ) -> Result<Pause> {
        let link = self.link();
        link.check_name(name)?;
        validate_actor(actor)?;
        if let Some(reason) = reason {
            validate_reason(reason)?;
        }
        let call = &link.call("pause").about(format!("lock {name:?}"));
        self.check_pause_columns(call).await?;
        let sql = &statements::<D>(&link.settings);
        let what = format!("pause lock {name:?}");
        let map = &|e| self.map_error(e, &what);
        link.run(call, |mut c| async move {
            let now = {
                let query = sqlx::query(AssertSqlSafe(sql.now.clone()));
                let row = statement!(c, query, map, fetch_one)?;
                D::read_time(&row, 0, map)?
            };
            // As the column keeps it: rounded up to its precision, so still after now.
            let until = how_long
                .until(now)?
                .map(|until| fire_time(until, D::TIME_PRECISION_MICROS));
            let (t_now, t_until) = (D::time(now), until.map(D::time));
            let query = sqlx::query(AssertSqlSafe(sql.upsert.clone())).bind(name);
            let query = if D::POSITIONAL {
                query
                    .bind(t_now.clone())
                    .bind(t_now.clone())
                    .bind(t_now.clone())
                    .bind(t_until)
                    .bind(actor)
                    .bind(reason)
                    .bind(actor)
                    .bind(t_now)
            } else {
                query.bind(t_now).bind(t_until).bind(actor).bind(reason)
            };
            statement!(c, query, map, execute)?;
            Ok(Pause::new(now, until, actor, reason))
        })
        .await
    }

    /// Ends the pause of `name` (see the module's docs). Returns the pause it removed; `None`,
    /// having written nothing, when there was none.
    pub(crate) async fn admin_resume(&self, name: &str, actor: &str) -> Result<Option<Pause>> {
        let link = self.link();
        link.check_name(name)?;
        validate_actor(actor)?;
        let call = &link.call("resume").about(format!("lock {name:?}"));
        self.check_pause_columns(call).await?;
        let sql = &statements::<D>(&link.settings);
        let what = format!("resume lock {name:?}");
        let map = &|e| self.map_error(e, &what);
        for _ in 0..RESUME_LOOKS {
            let resumed = link
                .run(call, |mut c| async move {
                    let query = sqlx::query(AssertSqlSafe(sql.read.clone())).bind(name);
                    let Some(row) = statement!(c, query, map, fetch_optional)? else {
                        return Ok(Some(None));
                    };
                    let Some(since) = D::read_opt_time(&row, 0, map)? else {
                        return Ok(Some(None));
                    };
                    let until = D::read_opt_time(&row, 1, map)?;
                    let by: Option<String> = row.try_get(2).map_err(map)?;
                    let reason: Option<String> = row.try_get(3).map_err(map)?;
                    let query = sqlx::query(AssertSqlSafe(sql.resume.clone()))
                        .bind(actor)
                        .bind(name)
                        .bind(D::time(since));
                    let done = statement!(c, query, map, execute)?;
                    Ok((D::rows_affected(&done) == 1).then(|| {
                        Some(Pause::new(
                            since,
                            until,
                            by.unwrap_or_default(),
                            reason.as_deref(),
                        ))
                    }))
                })
                .await?;
            if let Some(resumed) = resumed {
                return Ok(resumed);
            }
            tracing::debug!(name, "the pause changed during a resume; reading it again");
        }
        Err(Error::backend_message(format!(
            "resume lock {name:?}: the pause changed under each of {RESUME_LOOKS} attempts"
        )))
    }

    /// `Ok` where the table has the [`PAUSE_COLUMNS`]. Otherwise a schema error naming the
    /// columns it lacks, read anew, and the migration that adds them.
    async fn check_pause_columns(&self, call: &Call) -> Result<()> {
        let schema = self.schema(call).await?;
        if schema.has_pause && !schema.has_last_fire {
            // Without `last_fire` the schedulers fall back to plain locks, which never look at a
            // pause: one would be accepted and ignored (docs/operating.md, "Pause, resume").
            return Err(Error::schema(
                format!(
                    "the lock table {} has the pause columns but not last_fire, so schedulers                      use plain locks there and would ignore a pause; add it with the migration                      migrations/{}/0002_last_fire.sql of shedlock-sqlx and restart the service.                      Nothing was written",
                    self.link().settings.table,
                    D::MIGRATIONS
                ),
                None,
            ));
        }
        if schema.has_pause {
            return Ok(());
        }
        let link = self.link();
        let s = &link.settings;
        let look = &|e| self.map_error(e, "read the lock table's columns");
        let missing = match D::detect(link, call, look).await? {
            Some((columns, _)) => missing_columns::<D>(&columns, &PAUSE_COLUMNS),
            None => PAUSE_COLUMNS.to_vec(),
        };
        let names: Vec<&str> = missing.iter().map(|(name, _)| *name).collect();
        let message = if missing.is_empty() {
            format!(
                "the lock table {} has the pause columns now, but this provider read its \
                 columns before they were added; restart the service",
                s.table
            )
        } else {
            format!(
                "the lock table {} cannot keep pauses: it lacks the column(s) {} (Java \
                 ShedLock's table has none of them); add them with the migration \
                 migrations/{}/0005_pause.sql of shedlock-sqlx, i.e. run: {}; and restart the \
                 service. Nothing was written",
                s.table,
                names.join(", "),
                D::MIGRATIONS,
                add_columns::<D>(s, &missing).join("; "),
            )
        };
        Err(Error::schema(message, None))
    }
}
