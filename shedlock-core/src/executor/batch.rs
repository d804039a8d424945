//! Fire claims and releases sent in batches, for a store whose
//! [`fire_batch_limit`](crate::provider::LockProvider::fire_batch_limit) or
//! [`release_batch_limit`](crate::provider::LockProvider::release_batch_limit) is above 1: group
//! commit (docs/guarantees.md, "Many jobs at one instant").
//!
//! A call that finds no batch in flight is sent at once, alone. Calls that come while a batch is
//! in flight wait for it, then go together in the next one, up to the store's limit. So a lone fire
//! waits for nothing, and the fires of one instant take a round trip or two, not one each. Waiting
//! for the other claims of the instant before the first batch was measured worse (BENCHMARKS.md,
//! "With batches of fire claims").
//!
//! [`Batcher`] is the queue and its sending task; a [`BatchKind`] says what is sent:
//! [`Claims`] or [`Releases`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::fire::{Fire, FireClaim};
use crate::jobs::RunReport;
use crate::keepalive::timed;
use crate::provider::{ClaimRequest, LockProvider, LockRecord, ReleaseRequest};

/// One kind of call an executor sends in batches.
#[async_trait]
pub(crate) trait BatchKind: Send + Sync + 'static {
    /// One call, waiting for its batch.
    type Item: Send + Sync + 'static;
    /// The store's answer to one call.
    type Reply: Send + 'static;

    /// The operation, as timeouts name it.
    const OP: &'static str;

    /// The most calls of this kind `provider` takes in one batch.
    fn limit(provider: &dyn LockProvider) -> usize;

    /// The lock `item` acts on. A batch holds one call per lock.
    fn name(item: &Self::Item) -> &str;

    /// What a call of `name` does, in words, for errors.
    fn what(name: &str) -> String;

    /// Sends `items` in one call of the store.
    async fn batch(
        provider: &dyn LockProvider,
        owner: &str,
        items: &[&Self::Item],
    ) -> Result<Vec<Result<Self::Reply>>>;

    /// Sends `item` on its own, after its batch left it undecided ([`Error::is_busy`]).
    async fn alone(
        provider: &dyn LockProvider,
        owner: &str,
        item: &Self::Item,
    ) -> Result<Self::Reply>;

    /// Handles `reply`, whose caller went away before it came.
    fn unwanted(provider: &Arc<dyn LockProvider>, timeout: Duration, reply: Result<Self::Reply>);
}

/// One executor's batches of one kind of call.
pub(crate) struct Batcher<K: BatchKind> {
    provider: Arc<dyn LockProvider>,
    owner: String,
    limit: usize,
    queue: Mutex<Queue<K>>,
}

struct Queue<K: BatchKind> {
    waiting: VecDeque<Waiting<K>>,
    /// A task is sending batches: it takes what waits, until nothing does.
    sending: bool,
}

impl<K: BatchKind> Default for Queue<K> {
    fn default() -> Self {
        Self {
            waiting: VecDeque::new(),
            sending: false,
        }
    }
}

/// One call waiting for its batch.
struct Waiting<K: BatchKind> {
    item: K::Item,
    timeout: Duration,
    answer: oneshot::Sender<Answer<K::Reply>>,
}

/// The store's answer to one call, and when its batch was sent and answered.
pub(crate) struct Answer<R> {
    pub(crate) reply: Result<R>,
    pub(crate) sent: Instant,
    pub(crate) received: Instant,
}

impl<K: BatchKind> Batcher<K> {
    /// The batches of `provider` under `owner`, or `None` when the store has no batch of this
    /// kind.
    pub(crate) fn new(provider: &Arc<dyn LockProvider>, owner: &str) -> Option<Arc<Self>> {
        let limit = K::limit(provider.as_ref());
        (limit > 1).then(|| {
            Arc::new(Self {
                provider: Arc::clone(provider),
                owner: owner.to_owned(),
                limit,
                queue: Mutex::default(),
            })
        })
    }

    /// Sends `item`, a call on the lock `name`, in the next batch. `timeout` bounds the wait for
    /// the batch's answer; a batch is given the longest timeout of its calls.
    async fn call(
        self: &Arc<Self>,
        name: &str,
        item: K::Item,
        timeout: Duration,
    ) -> Answer<K::Reply> {
        let (answer, answered) = oneshot::channel();
        let start = {
            let mut queue = self.queue();
            queue.waiting.push_back(Waiting {
                item,
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
                "{}: the batch it was sent in ended without an answer",
                K::what(name)
            ))),
            sent: waited,
            received: Instant::now(),
        })
    }

    /// How many calls wait for the next batch.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.queue().waiting.len()
    }

    fn queue(&self) -> MutexGuard<'_, Queue<K>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take_next(&self) -> Vec<Waiting<K>> {
        let mut queue = self.queue();
        let batch = take_batch(&mut queue.waiting, self.limit);
        if batch.is_empty() {
            queue.sending = false;
        }
        batch
    }

    /// Sends one batch and hands each call its answer.
    async fn send(&self, batch: Vec<Waiting<K>>) {
        // The longest of the calls' timeouts: one claim's short `at_most` does not cut the
        // others' wait. A claim answered after its own `at_most` is released unrun by its guard.
        let timeout = batch
            .iter()
            .map(|w| w.timeout)
            .max()
            .unwrap_or(Duration::ZERO);
        let items: Vec<&K::Item> = batch.iter().map(|w| &w.item).collect();
        let sent = Instant::now();
        let replies = timed(
            K::OP,
            timeout,
            K::batch(self.provider.as_ref(), &self.owner, &items),
        )
        .await;
        let received = Instant::now();
        // Only a call answered on its own can be left undecided: after a whole call's error any
        // call may have committed, and none is sent again here.
        let whole_call_failed = !matches!(&replies, Ok(r) if r.len() == batch.len());
        let replies = match replies {
            Ok(replies) if replies.len() == batch.len() => replies,
            // A store that answers the wrong number of calls breaks the contract; which of them
            // committed is unknown, as after a lost reply.
            Ok(replies) => Error::backend_message(format!(
                "{}: the store answered {} of {} calls of a batch",
                K::OP,
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
                reply => deliver(
                    &self.provider,
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

    /// Sends a call the store left undecided in its batch (another transaction held its row) on
    /// its own, in a task of its own, so that the row's wait holds up that call alone.
    fn send_alone(&self, waiting: Waiting<K>, busy: &Error) {
        if waiting.answer.is_closed() {
            // Its caller went away: nothing to send it for.
            return;
        }
        tracing::debug!(
            lock = K::name(&waiting.item),
            error = busy as &dyn std::error::Error,
            "a call left undecided by its batch; sending it on its own"
        );
        let provider = Arc::clone(&self.provider);
        let owner = self.owner.clone();
        tokio::spawn(async move {
            let sent = Instant::now();
            let reply = timed(
                K::OP,
                waiting.timeout,
                K::alone(provider.as_ref(), &owner, &waiting.item),
            )
            .await;
            let received = Instant::now();
            deliver(
                &provider,
                waiting,
                Answer {
                    reply,
                    sent,
                    received,
                },
            );
        });
    }
}

/// Hands `waiting` its answer. An answer whose caller went away goes to [`BatchKind::unwanted`],
/// which waits up to the call's timeout.
fn deliver<K: BatchKind>(
    provider: &Arc<dyn LockProvider>,
    waiting: Waiting<K>,
    answer: Answer<K::Reply>,
) {
    if let Err(answer) = waiting.answer.send(answer) {
        K::unwanted(provider, waiting.timeout, answer.reply);
    }
}

/// The task that sends batches while calls wait. Its flag says it still owes the queue: when it
/// ends without emptying it, as when its store call panicked or the task was dropped unrun, it
/// clears the sending flag and the calls that wait. They are then answered with an error instead
/// of waiting for a task that is gone.
struct Sending<K: BatchKind>(Arc<Batcher<K>>, bool);

impl<K: BatchKind> Sending<K> {
    /// Sends batches until no call waits.
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

impl<K: BatchKind> Drop for Sending<K> {
    fn drop(&mut self) {
        if self.1 {
            let mut queue = self.0.queue();
            queue.sending = false;
            queue.waiting.clear();
        }
    }
}

/// Takes the next batch from `waiting`: the oldest calls, up to `limit`, one per lock name. A
/// second call of a name waits for a later batch, so one batch never acts on a row twice.
fn take_batch<K: BatchKind>(waiting: &mut VecDeque<Waiting<K>>, limit: usize) -> Vec<Waiting<K>> {
    let mut batch: Vec<Waiting<K>> = Vec::with_capacity(waiting.len().min(limit));
    let mut names = std::collections::HashSet::new();
    let mut later = VecDeque::new();
    while let Some(call) = waiting.pop_front() {
        if call.answer.is_closed() {
            // Its caller went away before the call was sent.
            continue;
        }
        if batch.len() == limit {
            later.push_back(call);
            later.extend(waiting.drain(..));
            break;
        }
        if names.insert(K::name(&call.item).to_owned()) {
            batch.push(call);
        } else {
            later.push_back(call);
        }
    }
    *waiting = later;
    batch
}

/// Fire claims ([`LockProvider::claim_fires`]).
pub(crate) struct Claims;

/// One fire claim: the arguments of [`LockProvider::claim_fire`] but the owner.
pub(crate) struct Claim {
    name: String,
    fire: Fire,
    at_most: Duration,
}

#[async_trait]
impl BatchKind for Claims {
    type Item = Claim;
    type Reply = FireClaim;

    const OP: &'static str = "claim_fire";

    fn limit(provider: &dyn LockProvider) -> usize {
        provider.fire_batch_limit()
    }

    fn name(item: &Claim) -> &str {
        &item.name
    }

    fn what(name: &str) -> String {
        format!("claim a fire of lock {name:?}")
    }

    async fn batch(
        provider: &dyn LockProvider,
        owner: &str,
        items: &[&Claim],
    ) -> Result<Vec<Result<FireClaim>>> {
        let claims: Vec<ClaimRequest<'_>> = items
            .iter()
            .map(|c| ClaimRequest::new(&c.name, &c.fire, c.at_most))
            .collect();
        provider.claim_fires(&claims, owner).await
    }

    async fn alone(provider: &dyn LockProvider, owner: &str, item: &Claim) -> Result<FireClaim> {
        provider
            .claim_fire(&item.name, &item.fire, item.at_most, owner)
            .await
    }

    /// A claim won for a caller that went away is released at once, rather than held, unrun,
    /// until its `at_most`.
    fn unwanted(provider: &Arc<dyn LockProvider>, timeout: Duration, reply: Result<FireClaim>) {
        if let Ok(FireClaim::Claimed(record)) = reply {
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
}

impl Batcher<Claims> {
    /// Claims `fire` of the lock `name` in the next batch, held for `at_most` if it wins.
    pub(crate) async fn claim(
        self: &Arc<Self>,
        name: &str,
        fire: &Fire,
        at_most: Duration,
        timeout: Duration,
    ) -> Answer<FireClaim> {
        let claim = Claim {
            name: name.to_owned(),
            fire: *fire,
            at_most,
        };
        self.call(name, claim, timeout).await
    }
}

/// Releases that record the run ([`LockProvider::release_runs`]).
pub(crate) struct Releases;

/// One release: the arguments of [`LockProvider::release_run`].
pub(crate) struct Release {
    record: LockRecord,
    at_least: Duration,
    run: RunReport,
}

#[async_trait]
impl BatchKind for Releases {
    type Item = Release;
    type Reply = bool;

    const OP: &'static str = "release";

    fn limit(provider: &dyn LockProvider) -> usize {
        provider.release_batch_limit()
    }

    fn name(item: &Release) -> &str {
        item.record.name()
    }

    fn what(name: &str) -> String {
        format!("release lock {name:?}")
    }

    async fn batch(
        provider: &dyn LockProvider,
        _owner: &str,
        items: &[&Release],
    ) -> Result<Vec<Result<bool>>> {
        let releases: Vec<ReleaseRequest<'_>> = items
            .iter()
            .map(|r| ReleaseRequest::new(&r.record, r.at_least, &r.run))
            .collect();
        provider.release_runs(&releases).await
    }

    async fn alone(provider: &dyn LockProvider, _owner: &str, item: &Release) -> Result<bool> {
        provider
            .release_run(&item.record, item.at_least, &item.run)
            .await
    }

    /// A release is the same whoever waits for it: nothing is left to do.
    fn unwanted(_provider: &Arc<dyn LockProvider>, _timeout: Duration, _reply: Result<bool>) {}
}

impl Batcher<Releases> {
    /// Releases `record` and records `run` in the next batch, as
    /// [`LockProvider::release_run`] does.
    pub(crate) async fn release(
        self: &Arc<Self>,
        record: &LockRecord,
        at_least: Duration,
        run: &RunReport,
        timeout: Duration,
    ) -> Result<bool> {
        let release = Release {
            record: record.clone(),
            at_least,
            run: run.clone(),
        };
        self.call(record.name(), release, timeout).await.reply
    }
}
