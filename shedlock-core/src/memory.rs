//! [`InMemoryLockProvider`]: locks in this process's memory, on tokio's clock.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::admin::{ActionKind, AdminAction, LockAdmin, LockEntry};
use crate::config::{validate_at_least, validate_at_most, validate_name};
use crate::error::{Error, Result};
use crate::fire::{Fire, FireClaim, fire_decision};
use crate::jobs::{Definition, DefinitionEntry, HistoryPolicy, JobState, RunEntry, RunReport};
use crate::pause::{Pause, PauseFor, validate_actor, validate_reason};
use crate::provider::{LockProvider, LockRecord};
use crate::trigger::{
    PendingTrigger, Trigger, TriggerAnswer, TriggerClaim, TriggerWake, TriggerWaker,
};

/// The most fire claims one batch takes on this store.
const FIRE_BATCH_LIMIT: usize = 256;

/// A [`LockProvider`] in process memory, for tests and single-process services.
///
/// Its clock is tokio's ([`tokio::time::Instant`]), so tests under `tokio::time::pause` control
/// expiry exactly. Record times are the wall time at creation plus tokio time elapsed. Fencing
/// tokens start at 1 and strictly increase per name for the provider's lifetime. It records fires
/// ([`claim_fire`](LockProvider::claim_fire)), job state
/// ([`release_run`](LockProvider::release_run)) and published definitions, and implements
/// [`LockAdmin`] too, all on the same clock. Given a [`HistoryPolicy`]
/// ([`with_history`](Self::with_history)), it keeps the history of runs.
///
/// It coordinates only the tasks of one process. Replicas need a shared store, such as
/// `shedlock-sqlx`.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{InMemoryLockProvider, provider::LockProvider};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// let store = InMemoryLockProvider::new();
/// let first = store.acquire("job", Duration::from_secs(60), "a").await?.expect("free");
/// assert!(store.acquire("job", Duration::from_secs(60), "b").await?.is_none());
/// store.release(&first, Duration::ZERO).await?;
/// let second = store.acquire("job", Duration::from_secs(60), "b").await?.expect("released");
/// assert!(second.fencing_token() > first.fencing_token());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct InMemoryLockProvider {
    origin: (Instant, DateTime<Utc>),
    rows: Mutex<HashMap<String, Row>>,
    history_policy: Option<HistoryPolicy>,
    history: Mutex<HashMap<String, VecDeque<RunEntry>>>,
    /// Published definitions by (job, replica). `expires` is on tokio's clock.
    definitions: Mutex<BTreeMap<(String, String), (DefinitionEntry, Instant)>>,
    /// The schedulers watching for triggers.
    watchers: Mutex<Vec<TriggerWaker>>,
}

#[derive(Debug, Clone)]
struct Row {
    lock_until: Instant,
    locked_at: Instant,
    owner: String,
    token: i64,
    /// The job's recorded fire. It survives release and expiry.
    last_fire: Option<DateTime<Utc>>,
    /// The job's state, recorded by `release_run`. It survives every later acquisition.
    state: JobState,
    /// What operators set: the pause and the last action. They survive every acquisition.
    steer: Steer,
}

/// A row's pause, last operator action and last trigger.
#[derive(Debug, Clone, Default)]
struct Steer {
    pause: Option<Pause>,
    last_action: Option<AdminAction>,
    trigger: Option<Trigger>,
}

impl Default for InMemoryLockProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryLockProvider {
    /// An empty store. Under a paused tokio clock, create it inside the runtime.
    #[must_use]
    pub fn new() -> Self {
        Self::starting_at(Utc::now())
    }

    /// An empty store whose wall clock reads `wall` now and advances with tokio's clock. It is for
    /// tests that need known dates, such as a daylight-saving day, or a store clock apart from the
    /// replicas'.
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    /// use shedlock_core::{InMemoryLockProvider, provider::LockProvider};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> shedlock_core::Result<()> {
    /// let start = Utc.with_ymd_and_hms(2026, 3, 29, 0, 0, 0).unwrap();
    /// let store = InMemoryLockProvider::starting_at(start);
    /// tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    /// let record = store.acquire("job", std::time::Duration::from_secs(60), "me").await?.expect("free");
    /// assert_eq!(record.locked_at(), start + chrono::Duration::seconds(5));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn starting_at(wall: DateTime<Utc>) -> Self {
        Self {
            origin: (Instant::now(), wall),
            rows: Mutex::new(HashMap::new()),
            history_policy: None,
            history: Mutex::new(HashMap::new()),
            definitions: Mutex::new(BTreeMap::new()),
            watchers: Mutex::new(Vec::new()),
        }
    }

    /// Keeps the history of runs that [`release_run`](LockProvider::release_run) records, as
    /// `policy` bounds it. Off by default.
    ///
    /// ```
    /// use shedlock_core::{InMemoryLockProvider, jobs::HistoryPolicy};
    ///
    /// let store = InMemoryLockProvider::new().with_history(HistoryPolicy::keep(20));
    /// # let _ = store;
    /// ```
    #[must_use]
    pub fn with_history(mut self, policy: HistoryPolicy) -> Self {
        self.history_policy = Some(policy);
        self
    }

    fn history(&self) -> MutexGuard<'_, HashMap<String, VecDeque<RunEntry>>> {
        self.history.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn definitions(
        &self,
    ) -> MutexGuard<'_, BTreeMap<(String, String), (DefinitionEntry, Instant)>> {
        self.definitions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `run` to the history of its lock and prunes it to the policy.
    fn keep_history(&self, run: &RunEntry, now: DateTime<Utc>) {
        let Some(policy) = self.history_policy else {
            return;
        };
        let mut history = self.history();
        let runs = history.entry(run.lock_name.clone()).or_default();
        runs.push_front(run.clone());
        runs.truncate(usize::try_from(policy.keep).unwrap_or(usize::MAX));
        if let Some(max_age) = policy.max_age {
            // An age beyond chrono's range keeps everything.
            if let Some(oldest) = chrono::Duration::from_std(max_age)
                .ok()
                .and_then(|age| now.checked_sub_signed(age))
            {
                runs.retain(|r| r.ended >= oldest);
            }
        }
    }

    fn entry_of(&self, name: &str, row: &Row, store_now: DateTime<Utc>) -> LockEntry {
        LockEntry::new(self.record(name, row), store_now, row.last_fire)
            .with_state(row.state.clone())
            .with_pause(row.steer.pause.clone())
            .with_last_action(row.steer.last_action.clone())
            .with_trigger(row.steer.trigger.clone())
    }

    fn rows(&self) -> MutexGuard<'_, HashMap<String, Row>> {
        // The map is always left consistent (no panics while it is held), so a poisoned lock
        // carries no broken state.
        self.rows.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wall(&self, at: Instant) -> DateTime<Utc> {
        let (origin, wall) = self.origin;
        let elapsed = at.saturating_duration_since(origin);
        wall + chrono::Duration::from_std(elapsed).unwrap_or(chrono::Duration::MAX)
    }

    fn record(&self, name: &str, row: &Row) -> LockRecord {
        LockRecord::new(
            name,
            row.owner.clone(),
            self.wall(row.locked_at),
            self.wall(row.lock_until),
        )
        .with_fencing_token(Some(row.token))
    }

    /// Whether `row` is the acquisition `record` describes.
    fn same_acquisition(row: &Row, record: &LockRecord) -> bool {
        row.owner == record.owner() && Some(row.token) == record.fencing_token()
    }
}

#[async_trait]
impl LockProvider for InMemoryLockProvider {
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> Result<Option<LockRecord>> {
        validate_name(name, self.max_name_len())?;
        validate_at_most(at_most)?;
        let now = Instant::now();
        let mut rows = self.rows();
        let (token, last_fire, state, steer) = match rows.get(name) {
            Some(row) if row.lock_until > now => return Ok(None),
            Some(row) => (
                row.token + 1,
                row.last_fire,
                row.state.clone(),
                row.steer.clone(),
            ),
            None => (1, None, JobState::default(), Steer::default()),
        };
        let row = Row {
            lock_until: now + at_most,
            locked_at: now,
            owner: owner.to_owned(),
            token,
            last_fire,
            state,
            steer,
        };
        let record = self.record(name, &row);
        rows.insert(name.to_owned(), row);
        Ok(Some(record))
    }

    async fn extend(&self, record: &LockRecord, at_most: Duration) -> Result<Option<LockRecord>> {
        validate_at_most(at_most)?;
        let now = Instant::now();
        let mut rows = self.rows();
        match rows.get_mut(record.name()) {
            Some(row) if Self::same_acquisition(row, record) && row.lock_until > now => {
                row.lock_until = now + at_most;
                Ok(Some(
                    record.clone().with_lock_until(self.wall(row.lock_until)),
                ))
            }
            _ => Ok(None),
        }
    }

    async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool> {
        validate_at_least(at_least)?;
        let now = Instant::now();
        let mut rows = self.rows();
        match rows.get_mut(record.name()) {
            Some(row) if Self::same_acquisition(row, record) => {
                row.lock_until = now.max(row.locked_at + at_least);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Claims in memory cost no round trip, so a batch is the claims one after the other; the limit
    /// lets a scheduler on this store batch as on a remote one.
    fn fire_batch_limit(&self) -> usize {
        FIRE_BATCH_LIMIT
    }

    /// As [`fire_batch_limit`](Self::fire_batch_limit): a batch of releases is the releases one
    /// after the other, so a scheduler on this store batches them as on a remote one.
    fn release_batch_limit(&self) -> usize {
        FIRE_BATCH_LIMIT
    }

    async fn claim_fire(
        &self,
        name: &str,
        fire: &Fire,
        at_most: Duration,
        owner: &str,
    ) -> Result<FireClaim> {
        validate_name(name, self.max_name_len())?;
        validate_at_most(at_most)?;
        let now = Instant::now();
        let wall_now = self.wall(now);
        let mut rows = self.rows();
        let existing = rows.get(name);
        let recorded = existing.and_then(|row| row.last_fire);
        let seen = existing.map(|row| self.record(name, row));
        let pause = existing.and_then(|row| row.steer.pause.as_ref());
        if let Some(answer) = fire_decision(fire, wall_now, seen.as_ref(), recorded, pause) {
            return Ok(answer);
        }
        let row = Row {
            lock_until: now + at_most,
            locked_at: now,
            owner: owner.to_owned(),
            token: existing.map_or(1, |row| row.token + 1),
            last_fire: Some(fire.at()),
            state: existing.map(|row| row.state.clone()).unwrap_or_default(),
            steer: existing.map(|row| row.steer.clone()).unwrap_or_default(),
        };
        let record = self.record(name, &row);
        rows.insert(name.to_owned(), row);
        Ok(FireClaim::Claimed(record))
    }

    async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
        let now = Instant::now();
        let rows = self.rows();
        Ok(rows
            .get(name)
            .filter(|row| row.lock_until > now)
            .map(|row| self.record(name, row)))
    }

    async fn release_run(
        &self,
        record: &LockRecord,
        at_least: Duration,
        run: &RunReport,
    ) -> Result<bool> {
        validate_at_least(at_least)?;
        let now = Instant::now();
        let wall_now = self.wall(now);
        let entry = {
            let mut rows = self.rows();
            let Some(row) = rows
                .get_mut(record.name())
                .filter(|row| Self::same_acquisition(row, record))
            else {
                return Ok(false);
            };
            row.lock_until = now.max(row.locked_at + at_least);
            // The same runner, start and fire: this acquisition's run, recorded already.
            let recorded = row.state.last_run.as_ref().is_some_and(|last| {
                last.runner == record.owner()
                    && last.started == self.wall(row.locked_at)
                    && last.fire == run.fire
            });
            if recorded {
                // Sent again for the same acquisition: released again, recorded once.
                return Ok(true);
            }
            let entry = RunEntry::new(
                record.name(),
                run.fire,
                record.owner(),
                self.wall(row.locked_at),
                wall_now,
                run.outcome.clone(),
            );
            row.state = std::mem::take(&mut row.state).after(entry.clone());
            entry
        };
        self.keep_history(&entry, wall_now);
        Ok(true)
    }

    async fn pending_triggers(&self) -> Result<Vec<PendingTrigger>> {
        let now = self.wall(Instant::now());
        let rows = self.rows();
        let mut pending: Vec<PendingTrigger> = rows
            .iter()
            .filter_map(|(name, row)| {
                let trigger = row.steer.trigger.as_ref().filter(|t| t.is_pending(now))?;
                Some(PendingTrigger {
                    lock_name: name.clone(),
                    id: trigger.id,
                    requested_at: trigger.requested_at,
                    expires: trigger.expires,
                })
            })
            .collect();
        drop(rows);
        pending.sort_by(|a, b| a.lock_name.cmp(&b.lock_name));
        Ok(pending)
    }

    async fn claim_trigger(
        &self,
        name: &str,
        id: i64,
        at_most: Duration,
        owner: &str,
    ) -> Result<TriggerClaim> {
        validate_name(name, self.max_name_len())?;
        validate_at_most(at_most)?;
        let now = Instant::now();
        let wall_now = self.wall(now);
        let mut rows = self.rows();
        let Some(row) = rows.get_mut(name) else {
            return Ok(TriggerClaim::Gone { now: wall_now });
        };
        let waiting = row
            .steer
            .trigger
            .as_ref()
            .is_some_and(|t| t.id == id && t.is_pending(wall_now));
        if !waiting {
            return Ok(TriggerClaim::Gone { now: wall_now });
        }
        if row
            .steer
            .pause
            .as_ref()
            .is_some_and(|p| p.holds_at(wall_now))
        {
            return Ok(TriggerClaim::Paused { now: wall_now });
        }
        if row.lock_until > now {
            return Ok(TriggerClaim::Held {
                now: wall_now,
                holder: self.record(name, row),
            });
        }
        row.lock_until = now + at_most;
        row.locked_at = now;
        owner.clone_into(&mut row.owner);
        row.token += 1;
        if let Some(trigger) = row.steer.trigger.as_mut() {
            trigger.taken_by = Some(owner.to_owned());
            trigger.taken_at = Some(wall_now);
        }
        let record = self.record(name, row);
        Ok(TriggerClaim::Claimed(record))
    }

    async fn watch_triggers(&self) -> Result<TriggerWake> {
        let (waker, wake) = TriggerWake::channel();
        let mut watchers = self.watchers.lock().unwrap_or_else(PoisonError::into_inner);
        watchers.retain(|w| !w.is_closed());
        watchers.push(waker);
        Ok(wake)
    }

    async fn publish_definitions(
        &self,
        replica: &str,
        version: &str,
        definitions: &[Definition],
        ttl: Duration,
    ) -> Result<()> {
        // A time to live is a duration like `at_most`: above zero, at most `MAX_DURATION`.
        validate_at_most(ttl)?;
        let now = Instant::now();
        let expires = now + ttl;
        let mut entries = self.definitions();
        entries.retain(|_, (_, until)| *until > now);
        for definition in definitions {
            let entry = DefinitionEntry::new(
                definition.clone(),
                replica,
                version,
                self.wall(now),
                self.wall(expires),
            );
            entries.insert(
                (definition.job.clone(), replica.to_owned()),
                (entry, expires),
            );
        }
        Ok(())
    }
}

/// The admin surface on the same rows and clock, freeing as [`LockAdmin`] says with tokio's now.
/// `ddl` is `None` and `create_table` does nothing, because there is no schema.
#[async_trait]
impl LockAdmin for InMemoryLockProvider {
    async fn list(&self) -> Result<Vec<LockEntry>> {
        let now = Instant::now();
        let store_now = self.wall(now);
        let rows = self.rows();
        let mut entries: Vec<LockEntry> = rows
            .iter()
            .map(|(name, row)| self.entry_of(name, row, store_now))
            .collect();
        drop(rows);
        entries.sort_by(|a, b| a.record().name().cmp(b.record().name()));
        Ok(entries)
    }

    async fn entry(&self, name: &str) -> Result<Option<LockEntry>> {
        let now = Instant::now();
        let rows = self.rows();
        Ok(rows
            .get(name)
            .map(|row| self.entry_of(name, row, self.wall(now))))
    }

    async fn unlock(&self, expected: &LockRecord, actor: &str) -> Result<bool> {
        validate_actor(actor)?;
        if expected.fencing_token().is_none() {
            return Err(Error::invalid_config(format!(
                "unlocking {:?} needs its fencing token: this store has tokens",
                expected.name()
            )));
        }
        let now = Instant::now();
        let mut rows = self.rows();
        match rows.get_mut(expected.name()) {
            Some(row)
                if Self::same_acquisition(row, expected)
                    && self.wall(row.locked_at) == expected.locked_at()
                    && row.lock_until > now =>
            {
                row.lock_until = now;
                row.steer.last_action = Some(AdminAction::new(
                    ActionKind::Unlocked,
                    actor,
                    self.wall(now),
                ));
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn create_table(&self) -> Result<()> {
        Ok(())
    }

    async fn definitions(&self) -> Result<Vec<DefinitionEntry>> {
        let now = Instant::now();
        // Sorted by (job, replica): the map's order.
        Ok(self
            .definitions()
            .values()
            .filter(|(_, until)| *until > now)
            .map(|(entry, _)| entry.clone())
            .collect())
    }

    async fn history(&self, lock_name: &str, limit: usize) -> Result<Vec<RunEntry>> {
        Ok(self
            .history()
            .get(lock_name)
            .map(|runs| runs.iter().take(limit).cloned().collect())
            .unwrap_or_default())
    }

    async fn forget(&self, job: &str) -> Result<u64> {
        let mut entries = self.definitions();
        let before = entries.len();
        entries.retain(|(name, _), _| name != job);
        Ok(u64::try_from(before - entries.len()).unwrap_or(u64::MAX))
    }

    async fn pause(
        &self,
        name: &str,
        how_long: PauseFor,
        reason: Option<&str>,
        actor: &str,
    ) -> Result<Pause> {
        validate_name(name, self.max_name_len())?;
        validate_actor(actor)?;
        if let Some(reason) = reason {
            validate_reason(reason)?;
        }
        let now = Instant::now();
        let wall_now = self.wall(now);
        let pause = Pause::new(wall_now, how_long.until(wall_now)?, actor, reason);
        let mut rows = self.rows();
        // A job paused before its first run gets a free row (token 0: its first lock is 1).
        let row = rows.entry(name.to_owned()).or_insert_with(|| Row {
            lock_until: now,
            locked_at: now,
            owner: String::new(),
            token: 0,
            last_fire: None,
            state: JobState::default(),
            steer: Steer::default(),
        });
        row.steer.pause = Some(pause.clone());
        row.steer.last_action = Some(AdminAction::new(ActionKind::Paused, actor, wall_now));
        Ok(pause)
    }

    async fn trigger(
        &self,
        name: &str,
        actor: &str,
        expires_in: Duration,
    ) -> Result<TriggerAnswer> {
        validate_name(name, self.max_name_len())?;
        validate_actor(actor)?;
        validate_at_most(expires_in)?;
        let now = Instant::now();
        let wall_now = self.wall(now);
        let answer = {
            let mut rows = self.rows();
            let row = rows.entry(name.to_owned()).or_insert_with(|| Row {
                lock_until: now,
                locked_at: now,
                owner: String::new(),
                token: 0,
                last_fire: None,
                state: JobState::default(),
                steer: Steer::default(),
            });
            if let Some(pause) = row.steer.pause.as_ref().filter(|p| p.holds_at(wall_now)) {
                return Ok(TriggerAnswer::Paused(pause.clone()));
            }
            if row.lock_until > now {
                return Ok(TriggerAnswer::Held(self.record(name, row)));
            }
            if let Some(pending) = row
                .steer
                .trigger
                .as_ref()
                .filter(|t| t.is_pending(wall_now))
            {
                return Ok(TriggerAnswer::Pending(pending.clone()));
            }
            let expires =
                wall_now + chrono::Duration::from_std(expires_in).unwrap_or(chrono::Duration::MAX);
            let trigger = Trigger {
                id: Trigger::new_id(),
                requested_at: wall_now,
                expires,
                by: actor.to_owned(),
                taken_by: None,
                taken_at: None,
            };
            row.steer.trigger = Some(trigger.clone());
            row.steer.last_action = Some(AdminAction::new(ActionKind::Triggered, actor, wall_now));
            TriggerAnswer::Requested(trigger)
        };
        self.watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(TriggerWaker::wake);
        Ok(answer)
    }

    async fn resume(&self, name: &str, actor: &str) -> Result<Option<Pause>> {
        validate_name(name, self.max_name_len())?;
        validate_actor(actor)?;
        let now = self.wall(Instant::now());
        let mut rows = self.rows();
        let Some(row) = rows.get_mut(name).filter(|row| row.steer.pause.is_some()) else {
            return Ok(None);
        };
        row.steer.last_action = Some(AdminAction::new(ActionKind::Resumed, actor, now));
        Ok(row.steer.pause.take())
    }
}
