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

/// The builder's history setting, as a provider keeps it: the policy, and what the writes and
/// prunes since the last success met, so that a failing table is logged at `ERROR` once per kind
/// of failure.
#[derive(Debug, Clone)]
pub(crate) struct History {
    pub(crate) policy: HistoryPolicy,
    /// The kinds of failure ([`failure_kind`]) the writes met since the last one that succeeded.
    failing: Arc<AtomicU8>,
    /// Whether a prune failed (its entry written) since the last one that succeeded.
    prune_failing: Arc<AtomicBool>,
}

/// The kind of a write's failure, one bit each, so that a new kind is logged at `ERROR` again: a
/// write that timed out while the table was being dropped, then the missing table, are two lines,
/// the second the one to act on.
fn failure_kind(error: &shedlock_core::Error) -> u8 {
    if error.is_missing_table() {
        1
    } else if error.is_timeout() {
        2
    } else {
        4
    }
}

impl History {
    pub(crate) fn new(policy: HistoryPolicy) -> Self {
        Self {
            policy,
            failing: Arc::new(AtomicU8::new(0)),
            prune_failing: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Notes a write's failure: whether it is the first of its kind since a write succeeded.
    fn write_failed(&self, error: &shedlock_core::Error) -> bool {
        let kind = failure_kind(error);
        self.failing.fetch_or(kind, Ordering::Relaxed) & kind == 0
    }

    /// Notes a write that succeeded: whether writes had failed.
    fn written(&self) -> bool {
        self.failing.swap(0, Ordering::Relaxed) != 0
    }

    /// Whether a write failed since the last one that succeeded.
    #[cfg(test)]
    pub(crate) fn failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed) != 0
    }

    /// Whether a prune failed since the last one that succeeded.
    #[cfg(test)]
    pub(crate) fn prune_failing(&self) -> bool {
        self.prune_failing.load(Ordering::Relaxed)
    }
}

/// What a history write did when the entry was written.
enum Written {
    /// The entry is written and the lock's older entries pruned.
    Pruned,
    /// The entry is written; the prune failed or ran out of time, and the next write prunes.
    NotPruned(shedlock_core::Error),
}

/// Writes the history entry of a run whose release (`release_run`) just acted on its row, and
/// prunes, as [`LockProviderBuilder::history`] says. It does nothing without a policy and never
/// fails: a failure is logged. The runner is `record.owner()` and the start `record.locked_at()`.
///
/// It gets `budget`, what is left of the release's call timeout, so that the caller's timeout
/// around the whole release never fires because of the history: a write that takes longer is given
/// up and counts as a failure, a prune that takes longer leaves the entry written.
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
    let lock = record.name();
    let written = provider
        .write_history(history.policy, record, run, budget)
        .await;
    let error = match written {
        Ok(pruned) => {
            if history.written() {
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
    let first = history.write_failed(&error);
    let error = &error as &dyn std::error::Error;
    if first {
        tracing::error!(
            lock,
            error,
            "run history write failed (the release itself succeeded); further failures of \
             this kind are logged at DEBUG until a write succeeds"
        );
    } else {
        tracing::debug!(lock, error, "run history write failed");
    }
}

/// The timeout error of a history step that `budget` did not leave time for.
fn out_of_time(
    step: &'static str,
    budget: std::time::Duration,
    record: &LockRecord,
) -> shedlock_core::Error {
    shedlock_core::Error::timeout_with(
        step,
        budget,
        format!(
            "lock {:?}: the release's call timeout left no more time",
            record.name()
        ),
    )
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
    /// Inserts the entry and prunes, within `budget`. On Postgres that is one statement, and on
    /// SQLite one transaction. On MySQL (`JobTables::RECORD_APART`) the insert and the prune are
    /// calls of their own: the prune is repeated after a lost reply (a `DELETE` may run twice),
    /// and its failure, or the budget running out during it, leaves the entry written
    /// ([`Written::NotPruned`]).
    async fn write_history(
        &self,
        policy: HistoryPolicy,
        record: &LockRecord,
        run: &RunReport,
        budget: std::time::Duration,
    ) -> Result<Written> {
        let deadline = tokio::time::Instant::now() + budget;
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
        let write = link.run(call, |mut c| async move {
            let mut queries = D::record(t, args);
            if D::RECORD_APART {
                queries.truncate(1);
            }
            run_queries(&mut c, s.transaction_pooler, queries, written).await
        });
        tokio::time::timeout_at(deadline, write)
            .await
            .unwrap_or_else(|_| Err(out_of_time("write run history", budget, record)))?;
        if !D::RECORD_APART {
            return Ok(Written::Pruned);
        }
        let what = format!("prune the run history of {about} (its entry is written)");
        let pruned = &|e| job_table_error::<D>(s, target, Which::History, &what, e);
        let call = &link.call("history prune").about(about);
        let prune = link.run(call, |mut c| async move {
            for query in D::record(t, args).into_iter().skip(1) {
                statement!(c, query, pruned, execute)?;
            }
            Ok(())
        });
        Ok(match tokio::time::timeout_at(deadline, prune).await {
            Ok(Ok(())) => Written::Pruned,
            Ok(Err(error)) => Written::NotPruned(error),
            Err(_) => Written::NotPruned(out_of_time("prune run history", budget, record)),
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use shedlock_core::Error;
    use shedlock_core::jobs::HistoryPolicy;

    use super::History;

    #[test]
    fn a_write_failure_is_first_once_per_kind_until_a_write_succeeds() {
        let history = History::new(HistoryPolicy::keep(5));
        let missing =
            Error::missing_table("h", "create it", std::io::Error::other("no such table"));
        let timeout = Error::timeout("write run history", Duration::from_secs(1));
        let other = Error::backend_message("write the run history");
        let firsts: Vec<bool> = [&missing, &missing, &timeout, &missing, &timeout, &other]
            .into_iter()
            .map(|e| history.write_failed(e))
            .collect();
        assert_eq!(firsts, [true, false, true, false, false, true]);
        assert!(history.failing());
        assert!(history.written(), "writes had failed");
        assert!(!history.written(), "and no longer");
        assert!(
            history.write_failed(&missing),
            "first again after a success"
        );
    }
}
