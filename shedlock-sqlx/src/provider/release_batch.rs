//! Batches of releases that record runs (see
//! [`LockProvider::release_runs`](shedlock_core::provider::LockProvider::release_runs)), written
//! once over a [`Dialect`] whose [`FIRE_BATCH`](Dialect::FIRE_BATCH) is above 1
//! (docs/guarantees.md, "Many jobs at one instant").

use std::time::Duration;

use chrono::{DateTime, Utc};
use shedlock_core::{
    Error, Result,
    provider::{ReleaseRequest, validate_at_least},
};
use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Type};

use super::Provider;
use super::fire_batch::{Sent, fail_open, finished, send_bounded};
use crate::dialect::{Dialect, Guards, ReleaseRuns, fire_time};
use crate::link::{Call, Schema};

/// The answers of a batch so far, one per release: `None` until answered.
type Answers = Vec<Option<Result<bool>>>;

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
    /// How many releases [`release_runs`](Self::release_runs) takes in one call. A provider that
    /// writes a history entry per run releases one by one, each writing its own entry
    /// (`LockProviderBuilder::history`).
    pub(crate) fn release_batch_limit(&self) -> usize {
        if self.inner.link.settings.history.is_some() {
            1
        } else {
            D::FIRE_BATCH
        }
    }

    /// Releases several runs' locks and records the runs. Those of valid input go in one
    /// statement per [`Dialect::FIRE_BATCH`] releases, each decided as
    /// [`release_run`](Self::release_run) decides one; a lone release too, so that a row another
    /// transaction holds bounds its wait as it bounds a batch's (the executor's next batch waits
    /// for it). A statement that waited too long for a held row goes once more leaving held rows
    /// out, and their releases are answered [`Error::busy`], having written nothing. A statement
    /// the database refused with an error (it committed nothing) goes release by release. A name
    /// this store refuses, as `release_run` refuses it, and a name given twice, the second time,
    /// are answered with an error alone. A provider that writes a run history releases one
    /// by one through `release_run`, which writes each entry.
    pub(crate) async fn release_runs(
        &self,
        releases: &[ReleaseRequest<'_>],
    ) -> Result<Vec<Result<bool>>> {
        let mut names = std::collections::HashSet::with_capacity(releases.len());
        let mut answers: Answers = releases
            .iter()
            .map(|r| {
                let name = r.record.name();
                let refused = self.inner.link.check_name(name).err();
                let refused = refused.or_else(|| validate_at_least(r.at_least).err());
                let refused = refused.or_else(|| {
                    (!names.insert(name)).then(|| {
                        Error::invalid_config(format!(
                            "the lock {name:?} is released twice in one batch of releases"
                        ))
                    })
                });
                refused.map(Err)
            })
            .collect();
        let mut pending: Vec<usize> = (0..releases.len())
            .filter(|&i| answers[i].is_none())
            .collect();
        if self.release_batch_limit() > 1 && !pending.is_empty() {
            let call = match pending.as_slice() {
                // A lone release's call reads as `release_run`'s.
                [one] => self
                    .inner
                    .link
                    .call("release_run")
                    .about(format!("lock {:?}", releases[*one].record.name())),
                _ => self
                    .inner
                    .link
                    .call("release_runs")
                    .about(format!("{} releases", pending.len())),
            };
            let schema = self.schema(&call).await?;
            if !schema.has_job_state {
                return Err(self.no_job_state());
            }
            let mut tokens = vec![None; releases.len()];
            for &i in &pending {
                match schema.record_token(releases[i].record) {
                    Ok(token) => tokens[i] = token,
                    Err(error) => answers[i] = Some(Err(error)),
                }
            }
            pending.retain(|&i| answers[i].is_none());
            let mut alone = Vec::new();
            let what = match pending.as_slice() {
                [one] => format!(
                    "release lock {:?} recording its run",
                    releases[*one].record.name()
                ),
                _ => format!("release the locks of {} runs", pending.len()),
            };
            let map = &self.mapper(what);
            let mut decided = false;
            for chunk in pending.chunks(D::FIRE_BATCH) {
                let batch = Batch {
                    releases,
                    tokens: &tokens,
                    chunk,
                    schema,
                };
                match self.release_batch(&call, map, batch, &mut answers).await {
                    Ok(true) => decided = true,
                    Ok(false) => alone.extend_from_slice(chunk),
                    Err(error) if !decided => return Err(error),
                    Err(error) => return Ok(fail_open(answers, error, "release runs")),
                }
            }
            pending = alone;
        }
        for i in pending {
            let r = &releases[i];
            answers[i] = Some(self.release_run(r.record, r.at_least, r.run).await);
        }
        Ok(finished(answers, "release runs"))
    }

    /// One batch's statement. It answers each release of `batch`; `Ok(false)`: the database
    /// refused the statement, which so committed nothing, and none is answered.
    async fn release_batch(
        &self,
        call: &Call,
        map: &crate::dialect::Map<'_>,
        batch: Batch<'_, '_>,
        answers: &mut Answers,
    ) -> Result<bool> {
        let Batch {
            releases,
            tokens,
            chunk,
            schema,
        } = batch;
        let names: Vec<&str> = chunk.iter().map(|&i| releases[i].record.name()).collect();
        let owners: Vec<&str> = chunk.iter().map(|&i| releases[i].record.owner()).collect();
        let token_list: Vec<i64> = chunk.iter().filter_map(|&i| tokens[i]).collect();
        let starts: Vec<DateTime<Utc>> = chunk
            .iter()
            .map(|&i| releases[i].record.locked_at())
            .collect();
        let at_leasts: Vec<Duration> = chunk.iter().map(|&i| releases[i].at_least).collect();
        let fires: Vec<DateTime<Utc>> = chunk
            .iter()
            .map(|&i| fire_time(releases[i].run.fire, D::TIME_PRECISION_MICROS))
            .collect();
        let outcomes: Vec<_> = chunk
            .iter()
            .map(|&i| releases[i].run.outcome.clone().capped())
            .collect();
        let kinds: Vec<&str> = outcomes
            .iter()
            .map(shedlock_core::RunOutcome::kind)
            .collect();
        let errors: Vec<Option<&str>> = outcomes.iter().map(|o| o.error()).collect();
        let guards = if schema.has_token {
            if token_list.len() != chunk.len() {
                return Err(Error::backend_message(
                    "release runs: a release without its fencing token was sent",
                ));
            }
            Guards::Tokens(&token_list)
        } else {
            Guards::Starts(&starts)
        };
        let mut args = ReleaseRuns {
            names: &names,
            owners: &owners,
            guards,
            at_leasts: &at_leasts,
            fires: &fires,
            kinds: &kinds,
            errors: &errors,
            skip_held: false,
        };
        let sent = send_bounded("releases", chunk.len(), false, |skip| {
            args.skip_held = skip;
            self.attempts(call, map, schema, move |at| D::release_runs(at, args))
        })
        .await?;
        let done = match sent {
            Sent::Answered(done, _) => done,
            // It waited again without the held rows: each release goes on its own.
            Sent::WaitedAgain => chunk.iter().map(|_| None).collect(),
            Sent::Refused(_) => return Ok(false),
        };
        for (&i, done) in chunk.iter().zip(done) {
            answers[i] = Some(done.ok_or_else(|| busy(releases[i].record.name())));
        }
        Ok(true)
    }
}

/// The releases of one statement: their places `chunk` in `releases` and `tokens` (their fencing
/// tokens, where the table has them), on a table of `schema`'s layout.
#[derive(Clone, Copy)]
struct Batch<'a, 'c> {
    releases: &'a [ReleaseRequest<'c>],
    tokens: &'a [Option<i64>],
    chunk: &'a [usize],
    schema: Schema,
}

/// The answer to a batched release that its statement left out because its row was held.
fn busy(name: &str) -> Error {
    Error::busy(format!(
        "release lock {name:?}: its row was held by another transaction through its batch's \
         statements"
    ))
}
