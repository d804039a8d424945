//! Fire claims sent in batches, for a store whose
//! [`fire_batch_limit`](crate::provider::LockProvider::fire_batch_limit) is above 1: group commit
//! (docs/guarantees.md, "Many jobs at one instant").
//!
//! A claim that finds no batch in flight is sent at once, alone. Claims that come while a batch is
//! in flight wait for it, then go together in the next one, up to the store's limit. So a lone fire
//! waits for nothing, and the fires of one instant take a round trip or two, not one each. Waiting
//! for the other claims of the instant before the first batch was measured worse (BENCHMARKS.md,
//! "With batches of fire claims").

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::fire::{Fire, FireClaim};
use crate::keepalive::timed;
use crate::provider::{ClaimRequest, LockProvider};

/// One executor's batches of fire claims.
pub(crate) struct FireBatcher {
    provider: Arc<dyn LockProvider>,
    owner: String,
    limit: usize,
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Waiting>,
    /// A task is sending batches: it takes what waits, until nothing does.
    sending: bool,
}

/// One claim waiting for its batch.
struct Waiting {
    name: String,
    fire: Fire,
    at_most: Duration,
    timeout: Duration,
    answer: oneshot::Sender<Answer>,
}

/// The store's answer to one claim, and when its batch was sent and answered.
pub(crate) struct Answer {
    pub(crate) reply: Result<FireClaim>,
    pub(crate) sent: Instant,
    pub(crate) received: Instant,
}

impl FireBatcher {
    /// The batches of `provider` under `owner`, or `None` when the store has no batch.
    pub(crate) fn new(provider: &Arc<dyn LockProvider>, owner: &str) -> Option<Arc<Self>> {
        let limit = provider.fire_batch_limit();
        (limit > 1).then(|| {
            Arc::new(Self {
                provider: Arc::clone(provider),
                owner: owner.to_owned(),
                limit,
                queue: Mutex::default(),
            })
        })
    }

    /// Claims `fire` of the lock `name` in the next batch. `timeout` bounds the wait for the
    /// batch's answer; a batch is given the longest timeout of its claims.
    pub(crate) async fn claim(
        self: &Arc<Self>,
        name: &str,
        fire: &Fire,
        at_most: Duration,
        timeout: Duration,
    ) -> Answer {
        let (answer, answered) = oneshot::channel();
        let start = {
            let mut queue = self.queue();
            queue.waiting.push_back(Waiting {
                name: name.to_owned(),
                fire: *fire,
                at_most,
                timeout,
                answer,
            });
            !std::mem::replace(&mut queue.sending, true)
        };
        if start {
            // The guard is made before the task, so that a task dropped before it first runs
            // (the runtime shutting down) still clears the flag.
            tokio::spawn(Sending(Arc::clone(self), true).send_all());
        }
        let waited = Instant::now();
        answered.await.unwrap_or_else(|_| Answer {
            // The sending task ended without answering: it panicked in the store's call, or it
            // was dropped with its runtime.
            reply: Err(Error::backend_message(format!(
                "claim a fire of lock {name:?}: the batch it was sent in ended without an answer"
            ))),
            sent: waited,
            received: Instant::now(),
        })
    }

    /// How many claims wait for the next batch.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.queue().waiting.len()
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take_next(&self) -> Vec<Waiting> {
        let mut queue = self.queue();
        let batch = take_batch(&mut queue.waiting, self.limit);
        if batch.is_empty() {
            queue.sending = false;
        }
        batch
    }

    /// Sends one batch and hands each claim its answer.
    async fn send(&self, batch: Vec<Waiting>) {
        // The longest of the claims' timeouts: one claim's short `at_most` does not cut the
        // others' wait. A claim answered after its own `at_most` is released unrun by its guard.
        let timeout = batch
            .iter()
            .map(|w| w.timeout)
            .max()
            .unwrap_or(Duration::ZERO);
        let claims: Vec<ClaimRequest<'_>> = batch
            .iter()
            .map(|w| ClaimRequest::new(&w.name, &w.fire, w.at_most))
            .collect();
        let sent = Instant::now();
        let replies = timed(
            "claim_fire",
            timeout,
            self.provider.claim_fires(&claims, &self.owner),
        )
        .await;
        let received = Instant::now();
        // Only a claim answered on its own can be left undecided: after a whole call's error any
        // claim may have committed, and none is sent again.
        let whole_call_failed = !matches!(&replies, Ok(r) if r.len() == batch.len());
        let replies = match replies {
            Ok(replies) if replies.len() == batch.len() => replies,
            // A store that answers the wrong number of claims breaks the contract; which of them
            // committed is unknown, as after a lost reply.
            Ok(replies) => Error::backend_message(format!(
                "claim fires: the store answered {} of {} claims",
                replies.len(),
                batch.len()
            ))
            .shared(batch.len())
            .into_iter()
            .map(Err)
            .collect(),
            Err(error) => error.shared(batch.len()).into_iter().map(Err).collect(),
        };
        for (waiting, reply) in batch.into_iter().zip(replies) {
            match reply {
                Err(error) if error.is_busy() && !whole_call_failed => {
                    self.send_alone(waiting, &error);
                }
                reply => self.answer(
                    waiting,
                    Answer {
                        reply,
                        sent,
                        received,
                    },
                ),
            }
        }
    }

    /// Sends a claim the store left undecided in its batch (another transaction held its row) on
    /// its own, in a task of its own, so that the row's wait holds up that claim alone.
    fn send_alone(&self, waiting: Waiting, busy: &Error) {
        if waiting.answer.is_closed() {
            // Its caller went away: nothing to claim for.
            return;
        }
        tracing::debug!(
            lock = waiting.name.as_str(),
            error = busy as &dyn std::error::Error,
            "a fire claim left undecided by its batch; claiming it on its own"
        );
        let provider = Arc::clone(&self.provider);
        let owner = self.owner.clone();
        tokio::spawn(async move {
            let sent = Instant::now();
            let reply = timed(
                "claim_fire",
                waiting.timeout,
                provider.claim_fire(&waiting.name, &waiting.fire, waiting.at_most, &owner),
            )
            .await;
            let received = Instant::now();
            let timeout = waiting.timeout;
            deliver(
                &provider,
                timeout,
                waiting,
                Answer {
                    reply,
                    sent,
                    received,
                },
            );
        });
    }

    fn answer(&self, waiting: Waiting, answer: Answer) {
        let timeout = waiting.timeout;
        deliver(&self.provider, timeout, waiting, answer);
    }
}

/// Hands `waiting` its answer. A claim won for a caller that went away is released at once, rather
/// than held, unrun, until its `at_most`; the release waits up to `timeout`.
fn deliver(provider: &Arc<dyn LockProvider>, timeout: Duration, waiting: Waiting, answer: Answer) {
    if let Err(Answer {
        reply: Ok(FireClaim::Claimed(record)),
        ..
    }) = waiting.answer.send(answer)
    {
        tracing::debug!(
            lock = record.name(),
            "a fire claimed for a caller that went away; releasing it unrun"
        );
        let provider = Arc::clone(provider);
        tokio::spawn(async move {
            let _ = timed(
                "release",
                timeout,
                provider.release(&record, Duration::ZERO),
            )
            .await;
        });
    }
}

/// The task that sends batches while claims wait. Its flag says it still owes the queue: when it
/// ends without emptying it, as when its store call panicked or the task was dropped unrun, it
/// clears the sending flag and the claims that wait. They are then answered with an error instead
/// of waiting for a task that is gone.
struct Sending(Arc<FireBatcher>, bool);

impl Sending {
    /// Sends batches until no claim waits.
    async fn send_all(mut self) {
        loop {
            let batch = self.0.take_next();
            if batch.is_empty() {
                self.1 = false;
                return;
            }
            self.0.send(batch).await;
        }
    }
}

impl Drop for Sending {
    fn drop(&mut self) {
        if self.1 {
            let mut queue = self.0.queue();
            queue.sending = false;
            queue.waiting.clear();
        }
    }
}

/// Takes the next batch from `waiting`: the oldest claims, up to `limit`, one per lock name. A
/// second claim of a name waits for a later batch, so one batch never claims a row twice.
fn take_batch(waiting: &mut VecDeque<Waiting>, limit: usize) -> Vec<Waiting> {
    let mut batch: Vec<Waiting> = Vec::with_capacity(waiting.len().min(limit));
    let mut names = std::collections::HashSet::new();
    let mut later = VecDeque::new();
    while let Some(claim) = waiting.pop_front() {
        if claim.answer.is_closed() {
            // Its caller went away before the claim was sent.
            continue;
        }
        if batch.len() == limit {
            later.push_back(claim);
            later.extend(waiting.drain(..));
            break;
        }
        if names.insert(claim.name.clone()) {
            batch.push(claim);
        } else {
            later.push_back(claim);
        }
    }
    *waiting = later;
    batch
}
