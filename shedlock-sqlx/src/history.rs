//! Run history in the `<table>_history` table ([`crate::tables`]), written after a recorded
//! release ([`after_release_run`]) as [`LockProviderBuilder::history`] says.
//! [`LockAdmin::history`](shedlock_core::admin::LockAdmin::history) reads it newest first, whatever
//! the policy.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

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
use crate::tables::{Record, Which, job_table_error, names, run_queries};

/// The builder's history setting, as a provider keeps it: the policy, and what the last write
/// and the last prune met, so that a failing table is logged at `ERROR` once per kind of failure.
#[derive(Debug, Clone)]
pub(crate) struct History {
    pub(crate) policy: HistoryPolicy,
    /// The kind of the last write's failure ([`Failure`]), or [`Failure::NONE`].
    failing: Arc<AtomicU8>,
    /// Whether the last prune failed (its entry written).
    prune_failing: Arc<AtomicBool>,
}

/// Kinds of failure, so that a new kind is logged at `ERROR` again: a write that timed out while
/// the table was being dropped, then the missing table, are two lines, the second the one to act
/// on.
struct Failure;

impl Failure {
    const NONE: u8 = 0;

    fn of(error: &shedlock_core::Error) -> u8 {
        if error.is_missing_table() {
            1
        } else if error.is_timeout() {
            2
        } else {
            3
        }
    }
}

impl History {
    pub(crate) fn new(policy: HistoryPolicy) -> Self {
        Self {
            policy,
            failing: Arc::new(AtomicU8::new(Failure::NONE)),
            prune_failing: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether the last write failed.
    #[cfg(test)]
    pub(crate) fn failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed) != Failure::NONE
    }

    /// Whether the last prune failed.
    #[cfg(test)]
    pub(crate) fn prune_failing(&self) -> bool {
        self.prune_failing.load(Ordering::Relaxed)
    }
}

/// What a history write did when the entry was written.
enum Written {
    /// The entry is written and the lock's older entries pruned.
    Pruned,
    /// The entry is written; the prune failed, and the next write prunes.
    NotPruned(shedlock_core::Error),
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
    let lock = record.name();
    let error = match written {
        Ok(pruned) => {
            if history.failing.swap(Failure::NONE, Ordering::Relaxed) != Failure::NONE {
                tracing::info!(lock, "run history is written again");
            }
            match pruned {
                Written::Pruned => {
                    if history.prune_failing.swap(false, Ordering::Relaxed) {
                        tracing::info!(lock, "run history is pruned again");
                    }
                }
                Written::NotPruned(error) => {
                    let error = &error as &dyn std::error::Error;
                    if history.prune_failing.swap(true, Ordering::Relaxed) {
                        tracing::debug!(lock, error, "run history not pruned");
                    } else {
                        tracing::warn!(
                            lock,
                            error,
                            "run history written, but not pruned: the table keeps older entries \
                             until a write prunes them; further failures are logged at DEBUG \
                             until a prune succeeds"
                        );
                    }
                }
            }
            return;
        }
        Err(error) => error,
    };
    let kind = Failure::of(&error);
    let error = &error as &dyn std::error::Error;
    if history.failing.swap(kind, Ordering::Relaxed) == kind {
        tracing::debug!(lock, error, "run history write failed");
    } else {
        tracing::error!(
            lock,
            error,
            "run history write failed (the release itself succeeded); further failures of \
             this kind are logged at DEBUG until a write succeeds"
        );
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
    /// Inserts the entry and prunes. On Postgres that is one statement, and on SQLite one
    /// transaction (`JobTables::RECORD_IN_ONE_TRANSACTION`). On MySQL the insert and the prune are
    /// calls of their own: the prune is repeated after a lost reply (a `DELETE` may run twice),
    /// and its failure leaves the entry written ([`Written::NotPruned`]).
    async fn write_history(
        &self,
        policy: HistoryPolicy,
        record: &LockRecord,
        run: &RunReport,
    ) -> Result<Written> {
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
        let about = format!("lock {:?}", record.name());
        let what = format!("write the run history of {about}");
        // Not repeated after a lost reply: the entry may have been written.
        let call = &link
            .call("history")
            .about(about.clone())
            .after_lost_reply(AfterLostReply::Fail(what.clone()));
        let target = link.target();
        let written = &|e| job_table_error::<D>(s, target, Which::History, &what, e);
        let apart = D::record(t, args).len() > 1 && !D::RECORD_IN_ONE_TRANSACTION;
        if !apart {
            return link
                .run(call, |mut c| async move {
                    let queries = D::record(t, args);
                    run_queries(&mut c, s.transaction_pooler, queries, written).await
                })
                .await
                .map(|_| Written::Pruned);
        }
        link.run(call, |mut c| async move {
            let Some(insert) = D::record(t, args).into_iter().next() else {
                return Ok(());
            };
            statement!(c, insert, written, execute).map(drop)
        })
        .await?;
        let what = format!("prune the run history of {about} (its entry is written)");
        let pruned = &|e| job_table_error::<D>(s, target, Which::History, &what, e);
        let call = &link.call("history prune").about(about);
        let prune = link.run(call, |mut c| async move {
            for query in D::record(t, args).into_iter().skip(1) {
                statement!(c, query, pruned, execute)?;
            }
            Ok(())
        });
        Ok(match prune.await {
            Ok(()) => Written::Pruned,
            Err(error) => Written::NotPruned(error),
        })
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
