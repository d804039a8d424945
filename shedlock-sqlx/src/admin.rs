//! [`LockAdmin`] for the SQL providers.
//!
//! It lists every row with the database's now and frees one acquisition in one conditional
//! `UPDATE`. It also has the DDL and create-table.
//!
//! It is written once over the [`Dialect`]. The statements ([`statements`]) take its spelling: its
//! now, its session pin and hint, its typed `NULL`s and its parameters. The rows are read with its
//! time readers. Whether the table has the `last_fire` column comes from the table layout the
//! provider detected once ([`Schema::has_last_fire`]). The calls themselves, `Provider::admin_list`
//! and `Provider::admin_unlock`, are in the provider's impl, under the bounds it already states.
//!
//! Freeing sets `lock_until` to the database's now and nothing else. The holder, `locked_at`, the
//! token and the recorded fire (`last_fire`) stay. So freeing never re-runs a fire. The `last_fire`
//! column is read when the table has it. It is reported absent when the table does not have it, as
//! in Java ShedLock's table.
//!
//! The job state columns are `last_run_*`, `last_success` and `consecutive_failures`. They are read
//! the same way, where the table has all of them ([`Schema::has_job_state`]). They are read into
//! [`LockEntry::with_state`]. The pause columns (`paused_*`, `last_action*`) likewise, where the
//! table has them ([`Schema::has_pause`]), into [`LockEntry::with_pause`] and
//! [`LockEntry::with_last_action`]; there the unlock also records its actor as the last action.
//! Pause and resume are in [`crate::pause`]. `missing_ddl` reads the table's columns anew. It returns the `ALTER
//! TABLE` statements for what the table lacks ([`missing_columns_ddl`]). For a missing table, it
//! returns the whole DDL.

use shedlock_core::{
    Result,
    admin::LockEntry,
    jobs::{JobState, RunEntry, RunOutcome},
    provider::LockRecord,
};
use sqlx::{ColumnIndex, Decode, Row, Type};

use crate::builder::Settings;
use crate::dialect::{
    Dialect, LAST_FIRE, Map, PAUSE_COLUMNS, STATE_COLUMNS, StateKind, TRIGGER_COLUMNS,
    missing_columns, missing_state_columns,
};
use crate::link::Schema;
use crate::pause::{read_steer, steer_columns};
use crate::provider::{add_columns, add_last_fire};
use crate::trigger::{read_trigger, trigger_columns};

/// The admin statements for one table layout.
pub(crate) struct Statements {
    /// Every row: name, `locked_by`, `locked_at`, `lock_until`, token, `last_fire` and the
    /// database's now.
    ///
    /// Where the table has them, the [`STATE_COLUMNS`] follow. `consecutive_failures` is read as a
    /// 64-bit integer. Then, where the table has them, the [`PAUSE_COLUMNS`], then the
    /// [`TRIGGER_COLUMNS`].
    pub(crate) list: String,
    /// The same for one name (parameter 1).
    pub(crate) entry: String,
    /// Frees the lock if it is still held, recording the actor where the table has the
    /// [`PAUSE_COLUMNS`]. The parameters are 1 name, 2 owner, 3 `locked_at`[, 4 token][, the
    /// actor]; positional, the actor comes first.
    pub(crate) unlock: String,
}

/// The statements for `settings`' table, with or without the token and `last_fire` columns.
pub(crate) fn statements<D: Dialect>(s: &Settings, schema: Schema) -> Statements {
    let table = s.table.quoted(D::QUOTE);
    let c = s.columns.quoted(D::QUOTE);
    let (pre, hint, now) = (D::PIN, D::HINT, D::NOW);
    let tok = if schema.has_token {
        c.fencing_token.clone()
    } else {
        D::NULL_TOKEN.to_owned()
    };
    let fire = if schema.has_last_fire {
        D::QUOTE.quote(LAST_FIRE)
    } else {
        D::NULL_TIME.to_owned()
    };
    let state: String = if schema.has_job_state {
        STATE_COLUMNS
            .iter()
            .map(|(name, kind)| match kind {
                StateKind::Count => format!(", CAST({} AS {})", D::QUOTE.quote(name), D::BIGINT),
                _ => format!(", {}", D::QUOTE.quote(name)),
            })
            .collect()
    } else {
        String::new()
    };
    let steer = if schema.has_pause {
        steer_columns::<D>()
    } else {
        String::new()
    };
    let trigger = if schema.has_trigger {
        trigger_columns::<D>("")
    } else {
        String::new()
    };
    let select = format!(
        "{pre}SELECT {hint} {}, {}, {}, {}, {tok}, {fire}, {now}{state}{steer}{trigger} FROM {table}",
        c.name, c.locked_by, c.locked_at, c.lock_until
    );
    let same_token = if schema.has_token {
        format!(" AND {} = {}", c.fencing_token, D::param(4))
    } else {
        String::new()
    };
    let action = if schema.has_pause {
        let [.., action, by, at] = PAUSE_COLUMNS.map(|(name, _)| D::QUOTE.quote(name));
        let actor = D::param(if schema.has_token { 5 } else { 4 });
        format!(", {action} = 'unlocked', {by} = {actor}, {at} = {now}")
    } else {
        String::new()
    };
    Statements {
        entry: format!("{select} WHERE {} = {}", c.name, D::param(1)),
        list: select,
        unlock: format!(
            "{pre}UPDATE {hint} {table} SET {until} = {now}{action} \
             WHERE {name} = {p1} AND {by} = {p2} AND {at} = {p3}{same_token} AND {until} > {now}",
            until = c.lock_until,
            name = c.name,
            by = c.locked_by,
            at = c.locked_at,
            p1 = D::param(1),
            p2 = D::param(2),
            p3 = D::param(3),
        ),
    }
}

/// A listed row: name, owner, `locked_at`, `lock_until`, token, `last_fire` and now.
///
/// Where `schema` says the statement read them, the job state follows in columns 7 to 14, then the
/// pause and last action, then the trigger.
pub(crate) fn entry<D: Dialect>(row: &D::Row, map: &Map<'_>, schema: Schema) -> Result<LockEntry>
where
    for<'r> String: Decode<'r, D> + Type<D>,
    for<'r> i64: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
{
    let record = LockRecord::new(
        row.try_get::<String, _>(0).map_err(map)?,
        row.try_get::<String, _>(1).map_err(map)?,
        D::read_time(row, 2, map)?,
        D::read_time(row, 3, map)?,
    )
    .with_fencing_token(row.try_get(4).map_err(map)?);
    let entry = LockEntry::new(
        record,
        D::read_time(row, 6, map)?,
        D::read_opt_time(row, 5, map)?,
    );
    let entry = if schema.has_job_state {
        entry.with_state(job_state::<D>(row, 7, map)?)
    } else {
        entry
    };
    let mut first = 7 + if schema.has_job_state {
        STATE_COLUMNS.len()
    } else {
        0
    };
    let entry = if schema.has_pause {
        let (pause, action) = read_steer::<D>(row, first, map)?;
        first += PAUSE_COLUMNS.len();
        entry.with_pause(pause).with_last_action(action)
    } else {
        entry
    };
    if !schema.has_trigger {
        return Ok(entry);
    }
    Ok(entry.with_trigger(read_trigger::<D>(row, first, map)?))
}

/// The job state in a row's columns `first..first + 8`, in the [`STATE_COLUMNS`]' order.
///
/// The last run is `None` until one was recorded. It is also `None` for an outcome this version
/// does not know. It is also `None` for a run with a `NULL` among its columns, written by another
/// program.
fn job_state<D: Dialect>(row: &D::Row, first: usize, map: &Map<'_>) -> Result<JobState>
where
    for<'r> String: Decode<'r, D> + Type<D>,
    for<'r> i64: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
{
    let name: String = row.try_get(0).map_err(map)?;
    let fire = D::read_opt_time(row, first, map)?;
    let runner: Option<String> = row.try_get(first + 1).map_err(map)?;
    let started = D::read_opt_time(row, first + 2, map)?;
    let ended = D::read_opt_time(row, first + 3, map)?;
    let kind: Option<String> = row.try_get(first + 4).map_err(map)?;
    let error: Option<String> = row.try_get(first + 5).map_err(map)?;
    let last_success = D::read_opt_time(row, first + 6, map)?;
    let failures: Option<i64> = row.try_get(first + 7).map_err(map)?;
    let outcome = kind.and_then(|kind| RunOutcome::from_parts(&kind, error.as_deref()));
    let last_run = match (outcome, fire, runner, started, ended) {
        (Some(outcome), Some(fire), Some(runner), Some(started), Some(ended)) => {
            Some(RunEntry::new(name, fire, runner, started, ended, outcome))
        }
        _ => None,
    };
    let failures = u32::try_from(failures.unwrap_or_default().max(0)).unwrap_or(u32::MAX);
    Ok(JobState::new(last_run, last_success, failures))
}

/// The statements that give `settings`' table what its columns `columns` lack.
///
/// `columns` are as the database describes them. What may be missing is the `last_fire` column, the
/// job state columns and the pause columns. Each gets its own `ALTER TABLE`. For the default names,
/// these are the migrations `0002_last_fire.sql`, `0003_job_state.sql` and `0005_pause.sql`. The list is empty when nothing is
/// missing. Other parts, with tables of their own, append theirs to the list.
pub(crate) fn missing_columns_ddl<D: Dialect>(
    settings: &Settings,
    columns: &[D::TableColumn],
) -> Vec<String> {
    let mut statements = Vec::new();
    if !columns.iter().any(|c| D::is_column(c, LAST_FIRE)) {
        statements.push(add_last_fire::<D>(settings));
    }
    statements.extend(add_columns::<D>(
        settings,
        &missing_state_columns::<D>(columns),
    ));
    statements.extend(add_columns::<D>(
        settings,
        &missing_columns::<D>(columns, &PAUSE_COLUMNS),
    ));
    statements.extend(add_columns::<D>(
        settings,
        &missing_columns::<D>(columns, &TRIGGER_COLUMNS),
    ));
    statements
}

/// Whether `expected` can be matched on this table: it carries a token iff the table has one.
///
/// # Errors
///
/// [`shedlock_core::Error::is_invalid_config`] for a record without the token the table has.
pub(crate) fn check_expected(schema: Schema, expected: &LockRecord) -> Result<Option<i64>> {
    if schema.has_token && expected.fencing_token().is_none() {
        return Err(shedlock_core::Error::invalid_config(format!(
            "unlocking {:?} needs its fencing token: the table has a fencing_token column",
            expected.name()
        )));
    }
    Ok(expected.fencing_token().filter(|_| schema.has_token))
}

/// The `LockAdmin` impl of one provider, on its generic provider.
macro_rules! admin {
    ($provider:ty) => {
        #[async_trait::async_trait]
        impl shedlock_core::admin::LockAdmin for $provider {
            async fn list(&self) -> shedlock_core::Result<Vec<shedlock_core::admin::LockEntry>> {
                self.generic().admin_list("list", None).await
            }

            async fn entry(
                &self,
                name: &str,
            ) -> shedlock_core::Result<Option<shedlock_core::admin::LockEntry>> {
                Ok(self.generic().admin_list("entry", Some(name)).await?.pop())
            }

            async fn unlock(
                &self,
                expected: &shedlock_core::provider::LockRecord,
                actor: &str,
            ) -> shedlock_core::Result<bool> {
                shedlock_core::pause::validate_actor(actor)?;
                self.generic().admin_unlock(expected, actor).await
            }

            async fn pause(
                &self,
                name: &str,
                how_long: shedlock_core::pause::PauseFor,
                reason: Option<&str>,
                actor: &str,
            ) -> shedlock_core::Result<shedlock_core::pause::Pause> {
                self.generic()
                    .admin_pause(name, how_long, reason, actor)
                    .await
            }

            async fn resume(
                &self,
                name: &str,
                actor: &str,
            ) -> shedlock_core::Result<Option<shedlock_core::pause::Pause>> {
                self.generic().admin_resume(name, actor).await
            }

            async fn trigger(
                &self,
                name: &str,
                actor: &str,
                expires_in: ::std::time::Duration,
            ) -> shedlock_core::Result<shedlock_core::trigger::TriggerAnswer> {
                self.generic().admin_trigger(name, actor, expires_in).await
            }

            fn ddl(&self) -> Option<String> {
                Some(<$provider>::ddl(self).to_owned())
            }

            async fn create_table(&self) -> shedlock_core::Result<()> {
                self.create_table_if_not_exists().await
            }

            /// The lock table's missing columns, or its whole DDL.
            ///
            /// Then come the definitions and history tables that are missing. Each of those
            /// statements is on one line. Each statement ends in `;`.
            async fn missing_ddl(&self) -> shedlock_core::Result<Option<String>> {
                let lock_table = self.generic().admin_missing_ddl().await?;
                let job_tables =
                    self.generic()
                        .missing_job_tables()
                        .await?
                        .into_iter()
                        .map(|statement| {
                            let words: Vec<&str> = statement.split_whitespace().collect();
                            format!("{};", words.join(" "))
                        });
                let all: Vec<String> = lock_table.into_iter().chain(job_tables).collect();
                Ok((!all.is_empty()).then(|| all.join("\n")))
            }

            async fn definitions(
                &self,
            ) -> shedlock_core::Result<Vec<shedlock_core::jobs::DefinitionEntry>> {
                self.generic().definitions().await
            }

            async fn history(
                &self,
                lock_name: &str,
                limit: usize,
            ) -> shedlock_core::Result<Vec<shedlock_core::jobs::RunEntry>> {
                self.generic().history(lock_name, limit).await
            }

            async fn forget(&self, job: &str) -> shedlock_core::Result<u64> {
                self.generic().forget(job).await
            }
        }
    };
}

#[cfg(feature = "postgres")]
admin!(crate::PgLockProvider);
#[cfg(feature = "mysql")]
admin!(crate::MySqlLockProvider);
#[cfg(feature = "sqlite")]
admin!(crate::SqliteLockProvider);
