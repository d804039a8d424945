//! Run now: an operator's manual fire of a scheduled job, claimed once across replicas.
//!
//! [`LockAdmin::trigger`](crate::admin::LockAdmin::trigger) writes a [`Trigger`] into the job's lock
//! row, refused while the lock is held or the job paused. Every replica's scheduler looks for pending
//! triggers, woken by the store's push where it has one
//! ([`LockProvider::watch_triggers`](crate::provider::LockProvider::watch_triggers)) and otherwise
//! by one read per interval whatever the number of jobs
//! ([`LockProvider::pending_triggers`](crate::provider::LockProvider::pending_triggers)). One replica
//! claims it ([`LockProvider::claim_trigger`](crate::provider::LockProvider::claim_trigger)), in one
//! atomic step that takes the lock as an acquire does and marks the trigger taken, and runs the job
//! once. The claim never writes the recorded fire, so the regular fire of that window still runs. A
//! trigger nobody takes expires. The rules are in docs/operating.md, "Run now".

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::pause::Pause;
use crate::provider::LockRecord;

/// How long a trigger waits for a replica to take it, unless told otherwise.
pub const DEFAULT_TRIGGER_EXPIRY: Duration = Duration::from_mins(1);

/// A trigger as the store keeps it in the job's lock row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trigger {
    /// The trigger's id, unique per request: a claim names it, so a replica never takes a later
    /// trigger for an earlier one.
    pub id: i64,
    /// When it was asked for, by the store's clock. The run's fire is this instant.
    pub requested_at: DateTime<Utc>,
    /// When it expires unless taken, by the store's clock.
    pub expires: DateTime<Utc>,
    /// Who asked.
    pub by: String,
    /// The replica (owner id) that took it, once taken.
    pub taken_by: Option<String>,
    /// When it was taken, by the store's clock.
    pub taken_at: Option<DateTime<Utc>>,
}

impl Trigger {
    /// Whether a replica may still take it at `now`: not taken, not expired.
    #[must_use]
    pub fn is_pending(&self, now: DateTime<Utc>) -> bool {
        self.taken_by.is_none() && now < self.expires
    }

    /// A new trigger id: random, positive, never 0, and below 2^53, so JavaScript, which reads
    /// JSON numbers as doubles, reads it exactly (the dashboard's API sends it as a number).
    #[must_use]
    pub fn new_id() -> i64 {
        let id = crate::owner::random_u64() >> 11;
        i64::try_from(id).unwrap_or(1).max(1)
    }
}

/// What a [`LockAdmin::trigger`](crate::admin::LockAdmin::trigger) did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TriggerAnswer {
    /// The trigger is written and waits for a replica.
    Requested(Trigger),
    /// Refused: the lock is held, by a run or a plain lock user. Nothing written.
    Held(LockRecord),
    /// Refused: the job is paused. Nothing written.
    Paused(Pause),
    /// Refused: a trigger of the job is pending already. Nothing written.
    Pending(Trigger),
}

/// A pending trigger, as [`pending_triggers`](crate::provider::LockProvider::pending_triggers)
/// lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTrigger {
    /// The lock of the job to run.
    pub lock_name: String,
    /// The trigger's id.
    pub id: i64,
    /// When it was asked for: the run's fire.
    pub requested_at: DateTime<Utc>,
    /// When it expires unless taken.
    pub expires: DateTime<Utc>,
}

/// What a [`claim_trigger`](crate::provider::LockProvider::claim_trigger) met. Only
/// [`Claimed`](Self::Claimed) wrote anything.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TriggerClaim {
    /// This replica runs it: the lock is taken and the trigger marked taken by this owner.
    Claimed(LockRecord),
    /// The trigger is not pending any more: taken by another replica, expired, or replaced. The
    /// store's now.
    Gone {
        /// The store's clock when it decided.
        now: DateTime<Utc>,
    },
    /// The trigger waits, but the lock is held. It stays pending until it expires.
    Held {
        /// The store's clock when it decided.
        now: DateTime<Utc>,
        /// Who holds the lock.
        holder: LockRecord,
    },
    /// The trigger waits, but the job was paused since. It stays pending until it expires.
    Paused {
        /// The store's clock when it decided.
        now: DateTime<Utc>,
    },
}

/// Wakes a scheduler's trigger loop when the store pushes word of a new trigger. Each message means
/// "look now"; a store may coalesce them.
#[derive(Debug)]
pub struct TriggerWake(mpsc::Receiver<()>);

/// The store's end of a [`TriggerWake`].
#[derive(Debug, Clone)]
pub struct TriggerWaker(mpsc::Sender<()>);

impl TriggerWake {
    /// A connected pair.
    #[must_use]
    pub fn channel() -> (TriggerWaker, Self) {
        let (tx, rx) = mpsc::channel(1);
        (TriggerWaker(tx), Self(rx))
    }

    /// The next wake. `None` when the store's watch ended, such as a lost connection: the
    /// scheduler then polls, and asks for a new watch.
    pub async fn next(&mut self) -> Option<()> {
        self.0.recv().await
    }
}

impl TriggerWaker {
    /// Wakes the loop. A wake already waiting makes this one redundant. Answers `false` once the
    /// loop is gone, when the store should stop watching.
    #[must_use]
    pub fn wake(&self) -> bool {
        match self.0.try_send(()) {
            Ok(()) | Err(mpsc::error::TrySendError::Full(())) => true,
            Err(mpsc::error::TrySendError::Closed(())) => false,
        }
    }

    /// Whether the loop is gone.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    /// Resolves once the loop is gone, so a store's watch can stop at once.
    pub async fn closed(&self) {
        self.0.closed().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_positive_and_differ() {
        let ids: Vec<i64> = (0..100).map(|_| Trigger::new_id()).collect();
        assert!(
            ids.iter().all(|&id| id > 0 && id < (1 << 53)),
            "positive and exact as a double: {ids:?}"
        );
        assert!(ids.iter().all(|id| *id > 0));
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len());
    }

    #[tokio::test]
    async fn wakes_coalesce_and_a_gone_loop_is_told() {
        let (waker, mut wake) = TriggerWake::channel();
        assert!(waker.wake() && waker.wake(), "a second wake coalesces");
        assert_eq!(wake.next().await, Some(()));
        drop(wake);
        waker.closed().await;
        assert!(!waker.wake());
        assert!(waker.is_closed());
    }
}
