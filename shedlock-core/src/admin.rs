//! For operator tools such as `shedlock-cli`. [`LockAdmin`] lists a store's locks and frees one
//! safely. [`model`] has the JSON they print.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::jobs::{DefinitionEntry, JobState, RunEntry};
use crate::pause::{Pause, PauseFor};
use crate::provider::{LockProvider, LockRecord};
use crate::trigger::{Trigger, TriggerAnswer};

mod action;
pub mod model;
mod unlock;

pub use action::{ActionKind, AdminAction};
pub use unlock::{UnlockRefusal, UnlockRequest, guarded_unlock};

/// One lock row as an operator sees it. It says who holds it, until when, and whether it is held
/// now by the store's clock.
///
/// ```
/// use chrono::{Duration, Utc};
/// use shedlock_core::{admin::LockEntry, provider::LockRecord};
///
/// let now = Utc::now();
/// let record = LockRecord::new("report", "host-a:42:x1", now, now + Duration::seconds(60));
/// let entry = LockEntry::new(record, now, None);
/// assert!(entry.is_held());
/// assert_eq!(entry.remaining(), Some(std::time::Duration::from_secs(60)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockEntry {
    record: LockRecord,
    store_now: DateTime<Utc>,
    last_fire: Option<DateTime<Utc>>,
    state: Option<JobState>,
    pause: Option<Pause>,
    last_action: Option<AdminAction>,
    trigger: Option<Trigger>,
}

impl LockEntry {
    /// An entry for `record`, read when the store's clock said `store_now`. `last_fire` is the
    /// job's recorded fire where the store keeps one.
    #[must_use]
    pub fn new(
        record: LockRecord,
        store_now: DateTime<Utc>,
        last_fire: Option<DateTime<Utc>>,
    ) -> Self {
        Self {
            record,
            store_now,
            last_fire,
            state: None,
            pause: None,
            last_action: None,
            trigger: None,
        }
    }

    /// The same entry with the last trigger its row keeps, see [`trigger`](Self::trigger).
    #[must_use]
    pub fn with_trigger(mut self, trigger: Option<Trigger>) -> Self {
        self.trigger = trigger;
        self
    }

    /// The row's last trigger ("run now"): pending, taken, or expired. `None` where the store keeps
    /// no triggers, or none was asked for.
    #[must_use]
    pub fn trigger(&self) -> Option<&Trigger> {
        self.trigger.as_ref()
    }

    /// The same entry with the pause its row keeps, see [`pause`](Self::pause).
    #[must_use]
    pub fn with_pause(mut self, pause: Option<Pause>) -> Self {
        self.pause = pause;
        self
    }

    /// The same entry with the last operator action its row keeps, see
    /// [`last_action`](Self::last_action).
    #[must_use]
    pub fn with_last_action(mut self, action: Option<AdminAction>) -> Self {
        self.last_action = action;
        self
    }

    /// The pause the row keeps, if any, also one whose end has passed (see
    /// [`is_paused`](Self::is_paused)).
    #[must_use]
    pub fn pause(&self) -> Option<&Pause> {
        self.pause.as_ref()
    }

    /// Whether a fire claimed when the entry was read would have been refused as paused.
    #[must_use]
    pub fn is_paused(&self) -> bool {
        self.pause
            .as_ref()
            .is_some_and(|pause| pause.holds_at(self.store_now))
    }

    /// The last pause, resume or unlock of the row: what, by whom, when. `None` where the store
    /// keeps no actions (a Java ShedLock table without the columns) or none was taken.
    #[must_use]
    pub fn last_action(&self) -> Option<&AdminAction> {
        self.last_action.as_ref()
    }

    /// The same entry with the job state its row keeps, see [`state`](Self::state).
    #[must_use]
    pub fn with_state(mut self, state: JobState) -> Self {
        self.state = Some(state);
        self
    }

    /// The job state the row keeps: the last recorded run, last success and consecutive failures.
    /// `None` where the store does not record job state, such as a Java ShedLock table without the
    /// columns. A default state where it does but no run was recorded yet.
    #[must_use]
    pub fn state(&self) -> Option<&JobState> {
        self.state.as_ref()
    }

    /// The row: name, holder (`locked_by`), `locked_at`, `lock_until` and fencing token. A row
    /// whose lock has ended keeps its last holder.
    #[must_use]
    pub fn record(&self) -> &LockRecord {
        &self.record
    }

    /// The store's clock when the entry was read.
    #[must_use]
    pub fn store_now(&self) -> DateTime<Utc> {
        self.store_now
    }

    /// Whether the lock was held when read: `lock_until > now` by the store's clock.
    #[must_use]
    pub fn is_held(&self) -> bool {
        self.record.lock_until() > self.store_now
    }

    /// How long the lock stays held unless released or extended. `None` when it is free.
    #[must_use]
    pub fn remaining(&self) -> Option<std::time::Duration> {
        (self.record.lock_until() - self.store_now)
            .to_std()
            .ok()
            .filter(|d| !d.is_zero())
    }

    /// Whether a [`LeaderLatch`](crate::LeaderLatch) wrote the row, so its holder carries
    /// [`ELECTION_MARK`]. Freeing it while held risks two leaders.
    ///
    /// ```
    /// use chrono::{Duration, Utc};
    /// use shedlock_core::{admin::LockEntry, provider::LockRecord};
    ///
    /// let now = Utc::now();
    /// let until = now + Duration::seconds(15);
    /// let row = |owner: &str| LockEntry::new(LockRecord::new("e", owner, now, until), now, None);
    /// assert!(row("pod-1:7:a1b2c3#election").is_election());
    /// assert!(!row("pod-1:7:a1b2c3").is_election());
    /// ```
    #[must_use]
    pub fn is_election(&self) -> bool {
        self.record.owner().ends_with(ELECTION_MARK)
    }

    /// The scheduled instant of the last fire claimed for this job, where the store records fires
    /// (see [`LockProvider::claim_fire`]).
    #[must_use]
    pub fn last_fire(&self) -> Option<DateTime<Utc>> {
        self.last_fire
    }
}

impl fmt::Display for LockEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.is_held() { "held" } else { "free" };
        write!(f, "{} ({state})", self.record)
    }
}

/// How often the default [`LockAdmin::force_unlock`] reads and tries again when the lock changed
/// hands between its read and its conditional unlock.
const FORCE_UNLOCK_ATTEMPTS: usize = 5;

/// The mark a [`LeaderLatch`](crate::LeaderLatch) appends to its owner id in the rows it writes, as
/// in `locked_by = "host:42:1a2b3c#election"`. Operators' tools such as `shedlock list` can then
/// tell an election row from a task lock and ask before freeing one. Freeing a row a leader holds
/// makes two leaders possible until the old leader's renew deadline passes.
/// [`LockEntry::is_election`] tests for the mark. Task locks never carry it, unless an owner id set
/// by hand ends with it. Rows written by a latch of shedlock-core 0.1 are not marked.
pub const ELECTION_MARK: &str = "#election";

/// The mark a scheduler appends to its owner id in the rows its trigger claims ("run now") write,
/// as in `locked_by = "host:42:1a2b3c#trigger"`. So a claim of a trigger and a claim of a fire of
/// the same replica are different acquisitions to the code that recognises a claim whose reply was
/// lost (docs/guarantees.md, "Lost replies"), and an operator sees which runs were asked for.
pub const TRIGGER_MARK: &str = "#trigger";

/// The owner id a scheduler with `owner_id` writes in its trigger claims: `owner_id` and
/// [`TRIGGER_MARK`], keeping the id's end if both would not fit in `locked_by`.
#[cfg(feature = "scheduler")]
pub(crate) fn trigger_owner(owner_id: &str) -> String {
    let room = crate::owner::MAX_OWNER_ID_LEN - TRIGGER_MARK.len();
    let len = owner_id.chars().count();
    let kept: String = owner_id.chars().skip(len.saturating_sub(room)).collect();
    format!("{kept}{TRIGGER_MARK}")
}

/// The owner id a latch with `owner_id` writes to its rows.
pub(crate) fn election_owner(owner_id: &str) -> String {
    format!("{owner_id}{ELECTION_MARK}")
}

/// The latch's owner id behind a row's `locked_by`. It is the id without [`ELECTION_MARK`]. A row
/// without the mark gives its owner as it is.
#[must_use]
pub fn election_owner_id(locked_by: &str) -> &str {
    locked_by.strip_suffix(ELECTION_MARK).unwrap_or(locked_by)
}

/// What an operator needs beside [`LockProvider`]: list the locks, free one safely, create the
/// table. Every method has a default body answering [`Error::is_unsupported`], so a custom store
/// keeps compiling. The built-in stores implement them all. `testkit::AdminSuite` (feature
/// `testkit`) checks an implementation.
///
/// Freeing a lock sets its `lock_until` to the store's now and nothing else. The holder's row,
/// token sequence and recorded fire stay, so freeing never makes a fire run again.
#[async_trait]
pub trait LockAdmin: LockProvider {
    /// Every lock row the store has, held or not, sorted by name.
    ///
    /// # Errors
    ///
    /// The store failed, or does not support listing.
    async fn list(&self) -> Result<Vec<LockEntry>> {
        Err(Error::unsupported("list"))
    }

    /// The row of `name`, if there is one. The default body filters [`list`](Self::list).
    ///
    /// # Errors
    ///
    /// The store failed, or does not support listing.
    async fn entry(&self, name: &str) -> Result<Option<LockEntry>> {
        Ok(self
            .list()
            .await?
            .into_iter()
            .find(|e| e.record().name() == name))
    }

    /// Frees the lock iff its row is still exactly `expected`, as a listing showed it, and still
    /// held: the same holder, the same `locked_at` and, where the store has tokens, the same
    /// fencing token. Answers `Ok(true)` if it freed it. Answers `Ok(false)`, having changed
    /// nothing, when the lock was taken again since, even by the same owner id, or is already free.
    /// Where the store keeps actions, the same step records `actor` (see
    /// [`validate_actor`](crate::pause::validate_actor)) as the row's
    /// [`last_action`](LockEntry::last_action).
    ///
    /// # Errors
    ///
    /// The store failed, does not support it, or `actor` is invalid.
    async fn unlock(&self, expected: &LockRecord, actor: &str) -> Result<bool> {
        let _ = (expected, actor);
        Err(Error::unsupported("unlock"))
    }

    /// Frees `name` whoever holds it, and returns the entry it freed. `None` means no row, or the
    /// lock was not held.
    ///
    /// The default body reads the [`entry`](Self::entry) and frees exactly that acquisition with
    /// [`unlock`](Self::unlock), reading again, at most 5 times, if the lock changed hands in
    /// between. So the entry it returns is the acquisition it freed, and a store needs only `entry`
    /// and `unlock`.
    ///
    /// # Errors
    ///
    /// The store failed, does not support it, or the lock changed hands on every attempt.
    async fn force_unlock(&self, name: &str, actor: &str) -> Result<Option<LockEntry>> {
        crate::pause::validate_actor(actor)?;
        for _ in 0..FORCE_UNLOCK_ATTEMPTS {
            let Some(entry) = self.entry(name).await? else {
                return Ok(None);
            };
            if !entry.is_held() {
                return Ok(None);
            }
            if self.unlock(entry.record(), actor).await? {
                return Ok(Some(entry));
            }
        }
        Err(Error::backend_message(format!(
            "force-unlock {name:?}: it changed hands on each of {FORCE_UNLOCK_ATTEMPTS} attempts"
        )))
    }

    /// The statements that create this store's lock table with its configured names, if the store
    /// has a schema.
    fn ddl(&self) -> Option<String> {
        None
    }

    /// Creates the lock table if it does not exist.
    ///
    /// # Errors
    ///
    /// The store failed, or has no table to create.
    async fn create_table(&self) -> Result<()> {
        Err(Error::unsupported("create_table"))
    }

    /// The statements that add what job state, definitions, history, pauses and triggers need and
    /// this store's schema lacks, for an operator to run: columns of the lock table, the
    /// definitions table and the history table. `Ok(None)` when nothing is missing or the store
    /// has no schema. A Java ShedLock table works without them. Only the job commands need them.
    ///
    /// # Errors
    ///
    /// The store failed while looking.
    async fn missing_ddl(&self) -> Result<Option<String>> {
        Ok(None)
    }

    /// The job definitions replicas published that have not expired by the store's clock (see
    /// [`LockProvider::publish_definitions`]). Sorted by job name, then replica.
    ///
    /// # Errors
    ///
    /// The store failed, is not set up for definitions, or does not support them. For a store not
    /// set up, the error says what to create.
    async fn definitions(&self) -> Result<Vec<DefinitionEntry>> {
        Err(Error::unsupported("definitions"))
    }

    /// The newest `limit` runs recorded in the history of the lock `lock_name`, newest first.
    ///
    /// # Errors
    ///
    /// The store failed, has no history table, or does not keep history. For a missing table, the
    /// error says what to create.
    async fn history(&self, lock_name: &str, limit: usize) -> Result<Vec<RunEntry>> {
        let _ = (lock_name, limit);
        Err(Error::unsupported("history"))
    }

    /// Removes the definitions of `job` that every replica published. Returns how many it removed.
    /// A replica that still runs the job publishes it again at its next heartbeat.
    ///
    /// # Errors
    ///
    /// The store failed, is not set up for definitions, or does not support them.
    async fn forget(&self, job: &str) -> Result<u64> {
        let _ = job;
        Err(Error::unsupported("forget"))
    }

    /// Pauses the fires of the lock `name` for `how_long`, recording `actor` and `reason`, and
    /// returns the pause as stored, its times by the store's clock. A pause already there is
    /// replaced. A missing row is created, free, so a job can be paused before its first run.
    ///
    /// Only fire claims honour it ([`FireClaim::Paused`](crate::provider::FireClaim::Paused)):
    /// `acquire`, `execute` and elections ignore it. A run in progress continues. See
    /// [`pause`](crate::pause) for the rules.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] for a bad name, actor or reason, or an end not after the
    /// store's now, with nothing written. [`Error::is_schema`] for a table without the pause
    /// columns, saying what to add. The store failed, or does not support pauses.
    async fn pause(
        &self,
        name: &str,
        how_long: PauseFor,
        reason: Option<&str>,
        actor: &str,
    ) -> Result<Pause> {
        let _ = (name, how_long, reason, actor);
        Err(Error::unsupported("pause"))
    }

    /// Ends the pause of the lock `name`, recording `actor`, and returns the pause it removed, also
    /// one whose end had passed. `Ok(None)` when there was none, and nothing was written. The next
    /// fire is claimed as usual.
    ///
    /// # Errors
    ///
    /// As [`pause`](Self::pause).
    async fn resume(&self, name: &str, actor: &str) -> Result<Option<Pause>> {
        let _ = (name, actor);
        Err(Error::unsupported("resume"))
    }

    /// Asks for one manual run of the job whose lock is `name` ("run now"), recording `actor`. The
    /// trigger gets a new id and expires `expires_in` after the store's now unless a replica takes
    /// it. It is refused, with nothing written, while the lock is held, while the job is paused, and
    /// while another trigger of it is pending. A missing row is created, free. See
    /// [`trigger`](crate::trigger) for the rules.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] for a bad name or actor, or an expiry of zero or above
    /// [`MAX_DURATION`](crate::provider::MAX_DURATION), with nothing written.
    /// [`Error::is_schema`] for a table without the trigger columns, saying what to add. The store
    /// failed, or does not support triggers.
    async fn trigger(
        &self,
        name: &str,
        actor: &str,
        expires_in: Duration,
    ) -> Result<TriggerAnswer> {
        let _ = (name, actor, expires_in);
        Err(Error::unsupported("trigger"))
    }
}

/// An `Arc` of an admin store is an admin store.
#[async_trait]
impl<P: LockAdmin + ?Sized> LockAdmin for Arc<P> {
    async fn list(&self) -> Result<Vec<LockEntry>> {
        (**self).list().await
    }

    async fn entry(&self, name: &str) -> Result<Option<LockEntry>> {
        (**self).entry(name).await
    }

    async fn unlock(&self, expected: &LockRecord, actor: &str) -> Result<bool> {
        (**self).unlock(expected, actor).await
    }

    async fn force_unlock(&self, name: &str, actor: &str) -> Result<Option<LockEntry>> {
        (**self).force_unlock(name, actor).await
    }

    fn ddl(&self) -> Option<String> {
        (**self).ddl()
    }

    async fn create_table(&self) -> Result<()> {
        (**self).create_table().await
    }

    async fn missing_ddl(&self) -> Result<Option<String>> {
        (**self).missing_ddl().await
    }

    async fn definitions(&self) -> Result<Vec<DefinitionEntry>> {
        (**self).definitions().await
    }

    async fn history(&self, lock_name: &str, limit: usize) -> Result<Vec<RunEntry>> {
        (**self).history(lock_name, limit).await
    }

    async fn forget(&self, job: &str) -> Result<u64> {
        (**self).forget(job).await
    }

    async fn pause(
        &self,
        name: &str,
        how_long: PauseFor,
        reason: Option<&str>,
        actor: &str,
    ) -> Result<Pause> {
        (**self).pause(name, how_long, reason, actor).await
    }

    async fn resume(&self, name: &str, actor: &str) -> Result<Option<Pause>> {
        (**self).resume(name, actor).await
    }

    async fn trigger(
        &self,
        name: &str,
        actor: &str,
        expires_in: Duration,
    ) -> Result<TriggerAnswer> {
        (**self).trigger(name, actor, expires_in).await
    }
}
