//! Run history in the `<table>_history` table ([`crate::tables`]), written after a recorded
//! release ([`after_release_run`]) as [`LockProviderBuilder::history`] says.
//! [`LockAdmin::history`](shedlock_core::admin::LockAdmin::history) reads it newest first, whatever
//! the policy.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use shedlock_core::{
    Result,
    jobs::{HistoryPolicy, RunEntry, RunOutcome, RunReport},
    provider::LockRecord,
};
use sqlx::{AssertSqlSafe, ColumnIndex, Decode, Encode, Executor, IntoArguments, Row, Type};

#[cfg(doc)]
use crate::LockProviderBuilder;
use crate::dialect::Dialect;
use crate::link::{AfterLostReply, statement};
use crate::provider::Provider;
use crate::tables::{Record, Which, job_table_error, names};

/// The builder's history setting, as a provider keeps it: the policy, and whether the last write
/// failed, so a failing table is logged at `ERROR` once.
#[derive(Debug, Clone)]
pub(crate) struct History {
    pub(crate) policy: HistoryPolicy,
    failing: Arc<AtomicBool>,
}

impl History {
    pub(crate) fn new(policy: HistoryPolicy) -> Self {
        Self {
            policy,
            failing: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether the last write failed.
    #[cfg(test)]
    pub(crate) fn failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }
}

/// Writes the history entry of a run whose release (`release_run`) just acted on its row, and
/// prunes, as [`LockProviderBuilder::history`] says. It does nothing without a policy and never
/// fails: a failure is logged. The runner is `record.owner()` and the start `record.locked_at()`.
///
/// It gets `budget`, what is left of the release's call timeout, so that the caller's timeout
/// around the whole release never fires because of the history: a write that takes longer is given
/// up and counts as a failure.
pub(crate) async fn after_release_run<D: Dialect>(
    provider: &Provider<D>,
    record: &LockRecord,
    run: &RunReport,
    budget: std::time::Duration,
) where
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> Option<&'q str>: Encode<'q, D> + Type<D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'r> String: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
    D::Arguments: IntoArguments<D>,
{
    let Some(history) = &provider.link().settings.history else {
        return;
    };
    let written = tokio::time::timeout(budget, provider.write_history(history.policy, record, run))
        .await
        .unwrap_or_else(|_| {
            Err(shedlock_core::Error::timeout_with(
                "write run history",
                budget,
                format!(
                    "lock {:?}: the release's call timeout left no more time",
                    record.name()
                ),
            ))
        });
    match written {
        Ok(()) => {
            if history.failing.swap(false, Ordering::Relaxed) {
                tracing::info!(lock = record.name(), "run history is written again");
            }
        }
        Err(error) => {
            if history.failing.swap(true, Ordering::Relaxed) {
                tracing::debug!(
                    lock = record.name(),
                    error = &error as &dyn std::error::Error,
                    "run history write failed"
                );
            } else {
                tracing::error!(
                    lock = record.name(),
                    error = &error as &dyn std::error::Error,
                    "run history write failed (the release itself succeeded); further failures \
                     are logged at DEBUG until a write succeeds"
                );
            }
        }
    }
}

impl<D: Dialect> Provider<D>
where
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> Option<&'q str>: Encode<'q, D> + Type<D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'r> String: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
    D::Arguments: IntoArguments<D>,
{
    /// Inserts the entry and prunes: one statement on Postgres; elsewhere the insert, then the
    /// prune, each a statement of its own. Not one transaction: on MySQL the insert's locks held
    /// while the prune reads the lock's entries deadlocked with another job's write of the same
    /// instant (`tables::portable::record`). A prune that fails leaves the entry written and
    /// says so; the next write prunes.
    async fn write_history(
        &self,
        policy: HistoryPolicy,
        record: &LockRecord,
        run: &RunReport,
    ) -> Result<()> {
        let link = self.link();
        let s = &link.settings;
        let t = &names::<D>(s)?;
        let args = &Record {
            lock_name: record.name(),
            fire: run.fire,
            runner: record.owner(),
            started: record.locked_at(),
            outcome: run.outcome.kind(),
            error: run.outcome.error(),
            keep: policy.keep.max(1),
            max_age: policy.max_age,
        };
        let what = format!("write the run history of lock {:?}", record.name());
        // Not repeated after a lost reply: the entry may have been written.
        let call = &link
            .call("history")
            .about(format!("lock {:?}", record.name()))
            .after_lost_reply(AfterLostReply::Fail(what.clone()));
        let target = link.target();
        let written = &|e| job_table_error::<D>(s, target, Which::History, &what, e);
        let pruned = &|e| {
            job_table_error::<D>(
                s,
                target,
                Which::History,
                &format!(
                    "prune the run history of lock {:?} (its entry was written)",
                    record.name()
                ),
                e,
            )
        };
        link.run(call, |mut c| async move {
            for (i, query) in D::record(t, args).into_iter().enumerate() {
                if i == 0 {
                    statement!(c, query, written, execute)?;
                } else {
                    statement!(c, query, pruned, execute)?;
                }
            }
            Ok(())
        })
        .await
    }

    /// The newest `limit` entries of `lock_name`, newest first.
    pub(crate) async fn history(&self, lock_name: &str, limit: usize) -> Result<Vec<RunEntry>> {
        let link = self.link();
        let s = &link.settings;
        let t = names::<D>(s)?;
        link.check_name(lock_name)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let sql = format!(
            "{}SELECT {} lock_name, fire, runner, started, ended, outcome, error FROM {} \
             WHERE lock_name = {} ORDER BY id DESC LIMIT {}",
            D::PIN,
            D::HINT,
            t.history,
            D::param(1),
            D::param(2),
        );
        let sql = &sql;
        let call = &link.call("history").about(format!("lock {lock_name:?}"));
        let target = link.target();
        let map = &|e| job_table_error::<D>(s, target, Which::History, "read the run history", e);
        link.run(call, |mut c| async move {
            let query = sqlx::query(AssertSqlSafe(sql.clone()))
                .bind(lock_name)
                .bind(limit);
            let rows = statement!(c, query, map, fetch_all)?;
            rows.iter()
                .map(|row| {
                    let kind: String = row.try_get(5).map_err(map)?;
                    let error: Option<String> = row.try_get(6).map_err(map)?;
                    let outcome =
                        RunOutcome::from_parts(&kind, error.as_deref()).ok_or_else(|| {
                            shedlock_core::Error::schema(
                                format!(
                                    "the run history of lock {lock_name:?} holds the outcome \
                                     {kind:?}, which this version does not know"
                                ),
                                None,
                            )
                        })?;
                    Ok(RunEntry::new(
                        row.try_get::<String, _>(0).map_err(map)?,
                        D::read_time(row, 1, map)?,
                        row.try_get::<String, _>(2).map_err(map)?,
                        D::read_time(row, 3, map)?,
                        D::read_time(row, 4, map)?,
                        outcome,
                    ))
                })
                .collect()
        })
        .await
    }
}
