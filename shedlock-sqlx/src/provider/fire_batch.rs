//! Batches of fire claims (see
//! [`LockProvider::claim_fires`](shedlock_core::provider::LockProvider::claim_fires)), written once
//! over a [`Dialect`] whose [`FIRE_BATCH`](Dialect::FIRE_BATCH) is above 1 (docs/guarantees.md,
//! "Many jobs at one instant").

use std::time::Duration;

use chrono::{DateTime, Utc};
use shedlock_core::{
    Error, Result,
    provider::{ClaimRequest, Fire, FireClaim, check_claims, fire_decision},
};
use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Type};

use super::Provider;
use crate::dialect::{ClaimFires, Dialect, Map, Seen, fire_time};
use crate::link::{AfterLostReply, Call, Schema, checkout_lost};

/// How many statements a batch is sent in before what remains goes claim by claim.
const LOOKS: usize = 3;

/// The answers of a batch so far, one per claim: `None` until answered.
type Answers = Vec<Option<Result<FireClaim>>>;

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
    /// Claims several fires. The claims of valid input go in one statement per
    /// [`Dialect::FIRE_BATCH`] claims, each decided as [`claim_fire`](Self::claim_fire) decides
    /// one. A claim whose row another claimer changed while the statement ran goes in the next
    /// statement, whose fresh look answers it. What remains after [`LOOKS`] statements, and every
    /// claim of a statement the database refused with an error (it committed nothing), is sent
    /// claim by claim. A name given twice is refused the second time.
    pub(crate) async fn claim_fires(
        &self,
        claims: &[ClaimRequest<'_>],
        owner: &str,
    ) -> Result<Vec<Result<FireClaim>>> {
        let mut answers: Answers = check_claims(claims, |name| self.inner.link.check_name(name))
            .into_iter()
            .map(|refused| refused.map(Err))
            .collect();
        // Each fire as its row stores it, rounded up to the columns' precision, checked before
        // any statement: a fire that rounds to nothing is refused alone, never after a commit.
        let stored: Vec<Option<Fire>> = claims
            .iter()
            .zip(answers.iter_mut())
            .map(|(claim, answer)| {
                if answer.is_some() {
                    return None;
                }
                let fire = claim.fire;
                match Fire::new(
                    fire_time(fire.at(), D::TIME_PRECISION_MICROS),
                    fire_time(fire.next(), D::TIME_PRECISION_MICROS),
                ) {
                    Ok(stored) => Some(stored),
                    Err(error) => {
                        *answer = Some(Err(error));
                        None
                    }
                }
            })
            .collect();
        // The claims of statements the database refused: they go claim by claim.
        let mut alone: Vec<usize> = Vec::new();
        let unanswered = |answers: &Answers, alone: &[usize]| -> Vec<usize> {
            (0..claims.len())
                .filter(|&i| answers[i].is_none() && !alone.contains(&i))
                .collect()
        };
        let mut pending = unanswered(&answers, &alone);
        // A lone claim goes in the batch's statement too, so that a row another transaction holds
        // bounds its wait as it bounds a batch's: the executor's next batch waits for it.
        if D::FIRE_BATCH > 1 && !pending.is_empty() {
            let (call, what) = self.batch_call(claims, &pending);
            let schema = self.schema(&call).await?;
            if !schema.has_last_fire {
                return Err(self.no_last_fire());
            }
            schema.check_owner(owner)?;
            // Not repeated after a lost reply, as a single claim (see `claim_fire`).
            let call = &call.after_lost_reply(AfterLostReply::Fail(what.clone()));
            let map = &self.mapper(what);
            let mut decided = false;
            // Once a statement waited too long for a held row, the looks leave held rows out.
            let mut skip_held = false;
            for look in 0..LOOKS {
                // A second look at one claim is a claim on its own, unless rows are held.
                if pending.is_empty() || (look > 0 && pending.len() < 2 && !skip_held) {
                    break;
                }
                for chunk in pending.chunks(D::FIRE_BATCH) {
                    let batch = Batch {
                        claims,
                        stored: &stored,
                        chunk,
                        owner,
                        schema,
                    };
                    match self
                        .claim_batch(call, map, batch, &mut skip_held, &mut answers)
                        .await
                    {
                        Ok(true) => decided = true,
                        Ok(false) => alone.extend_from_slice(chunk),
                        Err(error) if !decided => return Err(error),
                        Err(error) => return Ok(fail_open(answers, error, "claim fires")),
                    }
                }
                pending = unanswered(&answers, &alone);
                if !pending.is_empty() {
                    tracing::debug!(
                        claims = pending.len(),
                        "lock rows changed during a batch of fire claims; looking again"
                    );
                }
            }
            if skip_held {
                // Still held after every look: each goes on its own, sent by the executor, so
                // that its wait holds up no other claim.
                for i in pending.drain(..) {
                    answers[i] = Some(Err(busy(claims[i].name)));
                }
            }
        }
        pending.extend_from_slice(&alone);
        for i in pending {
            let claim = &claims[i];
            answers[i] = Some(
                self.claim_fire(claim.name, claim.fire, claim.at_most, owner)
                    .await,
            );
        }
        Ok(finished(answers, "claim fires"))
    }

    /// The call of the claims `pending` of `claims`, and what it does in words. A lone claim's
    /// call reads as `claim_fire`'s: its lost reply says its lock may be held.
    fn batch_call(&self, claims: &[ClaimRequest<'_>], pending: &[usize]) -> (Call, String) {
        match pending {
            [one] => {
                let name = claims[*one].name;
                let call = self
                    .inner
                    .link
                    .call("claim_fire")
                    .about(format!("lock {name:?}"));
                (call, format!("claim a fire of lock {name:?}"))
            }
            _ => (
                self.inner
                    .link
                    .call("claim_fires")
                    .about(format!("{} fire claims", pending.len())),
                format!("claim the fires of {} locks", pending.len()),
            ),
        }
    }

    /// One statement of `batch`'s claims. It answers those it decided, and leaves unanswered
    /// those whose row changed under it. `Ok(false)`: the database refused the statement, which
    /// so committed nothing, and none is answered.
    ///
    /// A statement that waited too long for a row another transaction holds (the dialect's bound,
    /// such as Postgres's `lock_timeout`) committed nothing. It is sent once more leaving held rows
    /// out, and `skip_held` is set, so that the further looks leave them out too. The claims still
    /// undecided after the last look are answered [`Error::busy`] by the caller: the executor sends
    /// each on its own, so that one held row holds up its own claim and not the batch's.
    async fn claim_batch(
        &self,
        call: &Call,
        map: &Map<'_>,
        batch: Batch<'_, '_>,
        skip_held: &mut bool,
        answers: &mut Answers,
    ) -> Result<bool> {
        let Batch {
            claims,
            stored,
            chunk,
            owner,
            schema,
        } = batch;
        let names: Vec<&str> = chunk.iter().map(|&i| claims[i].name).collect();
        let fires: Vec<Fire> = chunk.iter().filter_map(|&i| stored[i]).collect();
        if fires.len() != chunk.len() {
            return Err(Error::backend_message(
                "claim fires: a claim without its stored fire was sent",
            ));
        }
        let ats: Vec<DateTime<Utc>> = fires.iter().map(Fire::at).collect();
        let nexts: Vec<DateTime<Utc>> = fires.iter().map(Fire::next).collect();
        let at_mosts: Vec<Duration> = chunk.iter().map(|&i| claims[i].at_most).collect();
        let mut args = ClaimFires {
            names: &names,
            ats: &ats,
            nexts: &nexts,
            at_mosts: &at_mosts,
            owner,
            schema,
            skip_held: *skip_held,
        };
        let sent = send_bounded("fire claims", chunk.len(), *skip_held, |skip| {
            args.skip_held = skip;
            self.attempts(call, map, schema, move |at| D::claim_fires(at, args))
        })
        .await?;
        let seen = match sent {
            Sent::Answered(seen, skipped) => {
                *skip_held |= skipped;
                seen
            }
            // It waited again without the held rows (an insert of a missing row waited for
            // another transaction's insert): its claims stay open.
            Sent::WaitedAgain => {
                *skip_held = true;
                return Ok(true);
            }
            Sent::Refused(skipped) => {
                *skip_held |= skipped;
                return Ok(false);
            }
        };
        for ((&i, seen), fire) in chunk.iter().zip(seen).zip(&fires) {
            let decided = match seen {
                Seen::Won(record) => Some(FireClaim::Claimed(record)),
                Seen::Row {
                    now,
                    recorded,
                    holder,
                    pause,
                } => fire_decision(fire, now, holder.as_ref(), recorded, pause.as_ref()),
                Seen::Changed => None,
            };
            // Undecided (changed under the statement, or left out as held): looked at again.
            answers[i] = decided.map(Ok);
        }
        Ok(true)
    }
}

/// The claims of one statement: their places `chunk` in `claims` and `stored` (their fires as the
/// rows store them), under `owner`, on a table of `schema`'s layout.
#[derive(Clone, Copy)]
struct Batch<'a, 'c> {
    claims: &'a [ClaimRequest<'c>],
    stored: &'a [Option<Fire>],
    chunk: &'a [usize],
    owner: &'a str,
    schema: Schema,
}

/// What one batch statement came to under the bound on a held row's wait.
pub(super) enum Sent<T> {
    /// Answered; `true` if it was sent leaving held rows out.
    Answered(T, bool),
    /// It waited too long again while leaving held rows out: it committed nothing.
    WaitedAgain,
    /// The database refused it with an error: it committed nothing. `true` if it was sent
    /// leaving held rows out.
    Refused(bool),
}

/// Sends one statement of a batch of `what` (`fire claims`) carrying `calls` calls,
/// `send(skip_held)`, first with `skip_held`. A statement that waited too long for a row another
/// transaction holds (the dialect's bound, such as Postgres's `lock_timeout`) committed nothing,
/// and is sent once more leaving held rows out. Errors other than a wait or a refusal are
/// returned.
pub(super) async fn send_bounded<T, F, Fut>(
    what: &str,
    calls: usize,
    mut skip_held: bool,
    mut send: F,
) -> Result<Sent<T>>
where
    F: FnMut(bool) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    loop {
        match send(skip_held).await {
            Ok(answer) => return Ok(Sent::Answered(answer, skip_held)),
            Err(error) if waited_too_long(&error) && !skip_held => {
                tracing::debug!(
                    error = &error as &dyn std::error::Error,
                    calls,
                    "a row of a batch of {what} was held by another transaction; sending the \
                     batch again without the held rows"
                );
                skip_held = true;
            }
            Err(error) if waited_too_long(&error) => return Ok(Sent::WaitedAgain),
            Err(error) if refused(&error) => {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    calls,
                    "the database refused a batch of {what}; sending them one by one"
                );
                return Ok(Sent::Refused(skip_held));
            }
            Err(error) => return Err(error),
        }
    }
}

/// Answers each call of `answers` still open with a copy of `error`, the error of a statement
/// after earlier ones answered the others (they keep their answers), as after a lost reply; and
/// returns them all, as [`finished`].
pub(super) fn fail_open<T>(
    mut answers: Vec<Option<Result<T>>>,
    error: Error,
    what: &str,
) -> Vec<Result<T>> {
    let open: Vec<usize> = (0..answers.len())
        .filter(|&i| answers[i].is_none())
        .collect();
    for (i, error) in open.iter().zip(error.shared(open.len())) {
        answers[*i] = Some(Err(error));
    }
    finished(answers, what)
}

/// The answers of a batch, each call's own: every call of `what` (`claim fires`) is answered by
/// now.
pub(super) fn finished<T>(answers: Vec<Option<Result<T>>>, what: &str) -> Vec<Result<T>> {
    answers
        .into_iter()
        .map(|answer| {
            answer.unwrap_or_else(|| {
                Err(Error::backend_message(format!(
                    "{what}: a call of the batch was not sent"
                )))
            })
        })
        .collect()
}

/// The answer to a batched claim that its statement left undecided because its row was held.
fn busy(name: &str) -> Error {
    Error::busy(format!(
        "claim a fire of lock {name:?}: its row was held by another transaction through each \
         statement of its batch"
    ))
}

/// Whether `error` says that a statement waited too long for a lock another transaction holds
/// (Postgres's `lock_not_available`, 55P03). The statement then committed nothing.
fn waited_too_long(error: &Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(sqlx::Error::Database(db)) = crate::cause::sqlx_error(cause) {
            return db.code().as_deref() == Some("55P03");
        }
        source = cause.source();
    }
    false
}

/// Whether the database answered `error` to a statement, which so committed nothing: not a lost
/// connection, a timeout, or a table set up wrong.
fn refused(error: &Error) -> bool {
    if error.is_missing_table() || error.is_schema() {
        return false;
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(sqlx_error) = crate::cause::sqlx_error(cause) {
            return matches!(sqlx_error, sqlx::Error::Database(_)) && !checkout_lost(sqlx_error);
        }
        source = cause.source();
    }
    false
}
