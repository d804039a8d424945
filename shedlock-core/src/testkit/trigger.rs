//! [`TriggerSuite`]: the contract of "run now" as executable checks.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::{Instant, sleep};

use crate::admin::{ActionKind, LockAdmin, LockEntry};
use crate::fire::{Fire, FireClaim};
use crate::owner::random_u64;
use crate::pause::PauseFor;
use crate::trigger::{Trigger, TriggerAnswer, TriggerClaim};

type CaseResult = std::result::Result<(), String>;

const ANN: &str = "ann@ops-host";
const MINUTE: Duration = Duration::from_mins(1);

/// The trigger suite: what [`LockAdmin::trigger`], the provider's
/// [`pending_triggers`](crate::provider::LockProvider::pending_triggers),
/// [`claim_trigger`](crate::provider::LockProvider::claim_trigger) and, where the store has one,
/// [`watch_triggers`](crate::provider::LockProvider::watch_triggers) promise, checked against a
/// store. It panics with the list of failed cases.
///
/// The cases:
///
/// - a trigger is written with its actor and listed pending; of two claims exactly one wins, and
///   the entry names the winner; the recorded fire is untouched, so the regular fire still runs;
/// - it is refused, with nothing written, while the lock is held, while the job is paused, and
///   while another trigger of the job is pending;
/// - a claim meeting the lock held, or a pause set since, leaves it pending; a claim of another id
///   is answered gone and writes nothing;
/// - a trigger nobody takes expires: no longer listed, its claim answered gone;
/// - a bad name, actor or expiry: an invalid-configuration error and nothing written;
/// - a store with a push wakes a watcher when a trigger is written.
///
/// ```
/// use shedlock_core::{InMemoryLockProvider, testkit::TriggerSuite};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// TriggerSuite::new(InMemoryLockProvider::new()).run().await;
/// # }
/// ```
///
/// Its waits, for a trigger to expire or a push to arrive, are a few multiples of
/// [`time_unit`](Self::time_unit) (default 1 s), polled with a deadline.
pub struct TriggerSuite {
    store: Arc<dyn LockAdmin>,
    prefix: String,
    unit: Duration,
}

impl TriggerSuite {
    /// A suite for `store`. An `Arc` of a store works too.
    pub fn new(store: impl LockAdmin) -> Self {
        Self {
            store: Arc::new(store),
            prefix: format!("ts{:08x}", random_u64() & 0xffff_ffff),
            unit: Duration::from_secs(1),
        }
    }

    /// The suite's unit of waiting: the trigger it lets expire lasts one unit.
    #[must_use]
    pub fn time_unit(mut self, unit: Duration) -> Self {
        self.unit = unit;
        self
    }

    /// Runs every case and panics, naming each failed case and why, if any failed.
    ///
    /// # Panics
    ///
    /// When the store breaks the contract.
    pub async fn run(self) {
        let report = self.report().await;
        assert!(report.is_empty(), "trigger conformance failed:\n{report}");
    }

    /// Runs every case and returns the failures as text. The text is empty when all passed.
    pub async fn report(&self) -> String {
        let mut failures = String::new();
        macro_rules! case {
            ($name:ident) => {
                if let Err(why) = self.$name().await {
                    let _ = writeln!(failures, "- {}: {why}", stringify!($name));
                }
            };
        }
        case!(one_claim_of_a_trigger_wins_and_the_fire_is_untouched);
        case!(a_trigger_is_refused_while_held_paused_or_pending);
        case!(a_held_or_paused_claim_leaves_it_pending);
        case!(a_trigger_nobody_takes_expires);
        case!(bad_input_is_refused_and_writes_nothing);
        case!(a_push_wakes_a_watcher);
        failures
    }

    fn name(&self, case: &str) -> String {
        format!("{}-{case}", self.prefix)
    }

    async fn trigger(&self, name: &str, expires_in: Duration) -> Result<TriggerAnswer, String> {
        self.store
            .trigger(name, ANN, expires_in)
            .await
            .map_err(|e| format!("trigger({name:?}) failed: {e}"))
    }

    async fn requested(&self, name: &str, expires_in: Duration) -> Result<Trigger, String> {
        match self.trigger(name, expires_in).await? {
            TriggerAnswer::Requested(trigger) => Ok(trigger),
            other => Err(format!(
                "trigger({name:?}) on a free lock answered {other:?}"
            )),
        }
    }

    async fn entry(&self, name: &str) -> Result<LockEntry, String> {
        self.store
            .entry(name)
            .await
            .map_err(|e| format!("entry({name:?}) failed: {e}"))?
            .ok_or_else(|| format!("entry({name:?}) found no row"))
    }

    async fn claim(&self, name: &str, id: i64, owner: &str) -> Result<TriggerClaim, String> {
        self.store
            .claim_trigger(name, id, MINUTE, owner)
            .await
            .map_err(|e| format!("claim_trigger({name:?}, {id}) failed: {e}"))
    }

    async fn is_listed(&self, name: &str, id: i64) -> Result<bool, String> {
        let pending = self
            .store
            .pending_triggers()
            .await
            .map_err(|e| format!("pending_triggers failed: {e}"))?;
        Ok(pending.iter().any(|p| p.lock_name == name && p.id == id))
    }

    fn fire_around(now: DateTime<Utc>) -> Result<Fire, String> {
        let at = DateTime::from_timestamp(now.timestamp() - 1, 0).unwrap_or(now);
        Fire::new(at, at + chrono::Duration::hours(1)).map_err(|e| e.to_string())
    }

    async fn one_claim_of_a_trigger_wins_and_the_fire_is_untouched(&self) -> CaseResult {
        let name = self.name("once");
        // A fire claimed and released first: its record must survive the trigger's run.
        let fire = Self::fire_around(Utc::now())?;
        let claimed = self
            .store
            .claim_fire(&name, &fire, MINUTE, "scheduler")
            .await
            .map_err(|e| format!("claim_fire failed: {e}"))?;
        let record = claimed
            .claimed()
            .ok_or_else(|| format!("the fire on a new name was answered {claimed:?}"))?
            .clone();
        self.store
            .release(&record, Duration::ZERO)
            .await
            .map_err(|e| format!("release failed: {e}"))?;
        let trigger = self.requested(&name, MINUTE).await?;
        if trigger.by != ANN
            || trigger.taken_by.is_some()
            || trigger.expires <= trigger.requested_at
        {
            return Err(format!("the trigger reads {trigger:?}"));
        }
        let entry = self.entry(&name).await?;
        if entry.trigger() != Some(&trigger) {
            return Err(format!(
                "the entry shows {:?}, expected {trigger:?}",
                entry.trigger()
            ));
        }
        if entry.last_action().map(|a| (a.kind, a.by.as_str()))
            != Some((ActionKind::Triggered, ANN))
        {
            return Err(format!("the last action reads {:?}", entry.last_action()));
        }
        if !self.is_listed(&name, trigger.id).await? {
            return Err("the new trigger is not listed pending".into());
        }
        let (a, b) = tokio::join!(
            self.claim(&name, trigger.id, "replica-a"),
            self.claim(&name, trigger.id, "replica-b")
        );
        let (a, b) = (a?, b?);
        let winner = match (&a, &b) {
            (TriggerClaim::Claimed(r), TriggerClaim::Gone { .. } | TriggerClaim::Held { .. })
            | (TriggerClaim::Gone { .. } | TriggerClaim::Held { .. }, TriggerClaim::Claimed(r)) => {
                r.clone()
            }
            _ => {
                return Err(format!(
                    "two claims of one trigger answered {a:?} and {b:?}"
                ));
            }
        };
        let after = self.entry(&name).await?;
        let taken = after.trigger().and_then(|t| t.taken_by.as_deref());
        if taken != Some(winner.owner()) || !after.is_held() {
            return Err(format!(
                "after the claim the trigger reads {:?}, held {}; the winner was {}",
                after.trigger(),
                after.is_held(),
                winner.owner()
            ));
        }
        if after.last_fire() != entry.last_fire() || after.last_fire().is_none() {
            return Err(format!(
                "the trigger's claim changed the recorded fire: {:?} became {:?}",
                entry.last_fire(),
                after.last_fire()
            ));
        }
        if self.is_listed(&name, trigger.id).await? {
            return Err("a taken trigger is still listed pending".into());
        }
        self.store
            .release(&winner, Duration::ZERO)
            .await
            .map_err(|e| format!("release failed: {e}"))?;
        match self
            .store
            .claim_fire(&name, &fire, MINUTE, "scheduler")
            .await
        {
            Ok(FireClaim::ClaimedElsewhere { recorded, .. }) if recorded == fire.at() => Ok(()),
            other => Err(format!(
                "the fire claimed before the trigger was answered {other:?} after it"
            )),
        }
    }

    async fn a_trigger_is_refused_while_held_paused_or_pending(&self) -> CaseResult {
        let name = self.name("refused");
        let record = self
            .store
            .acquire(&name, MINUTE, "running-pod")
            .await
            .map_err(|e| format!("acquire failed: {e}"))?
            .ok_or("acquire was refused on a free lock")?;
        match self.trigger(&name, MINUTE).await? {
            TriggerAnswer::Held(holder) if holder.owner() == "running-pod" => {}
            other => return Err(format!("a trigger while held answered {other:?}")),
        }
        if let Some(trigger) = self.entry(&name).await?.trigger() {
            return Err(format!("a refused trigger was written: {trigger:?}"));
        }
        self.store
            .release(&record, Duration::ZERO)
            .await
            .map_err(|e| format!("release failed: {e}"))?;
        self.store
            .pause(&name, PauseFor::UntilResumed, None, ANN)
            .await
            .map_err(|e| format!("pause failed: {e}"))?;
        match self.trigger(&name, MINUTE).await? {
            TriggerAnswer::Paused(pause) if pause.by == ANN => {}
            other => return Err(format!("a trigger of a paused job answered {other:?}")),
        }
        self.store
            .resume(&name, ANN)
            .await
            .map_err(|e| format!("resume failed: {e}"))?;
        let first = self.requested(&name, MINUTE).await?;
        match self.trigger(&name, MINUTE).await? {
            TriggerAnswer::Pending(pending) if pending == first => Ok(()),
            other => Err(format!(
                "a second trigger while one is pending answered {other:?}"
            )),
        }
    }

    async fn a_held_or_paused_claim_leaves_it_pending(&self) -> CaseResult {
        let name = self.name("pending");
        let trigger = self.requested(&name, MINUTE).await?;
        let plain = self
            .store
            .acquire(&name, MINUTE, "plain-user")
            .await
            .map_err(|e| format!("acquire failed: {e}"))?
            .ok_or("acquire was refused on a free lock")?;
        match self.claim(&name, trigger.id, "replica-a").await? {
            TriggerClaim::Held { holder, .. } if holder.owner() == "plain-user" => {}
            other => return Err(format!("a claim while held answered {other:?}")),
        }
        self.store
            .release(&plain, Duration::ZERO)
            .await
            .map_err(|e| format!("release failed: {e}"))?;
        match self.claim(&name, trigger.id + 1, "replica-a").await? {
            TriggerClaim::Gone { .. } => {}
            other => return Err(format!("a claim of another id answered {other:?}")),
        }
        self.store
            .pause(&name, PauseFor::UntilResumed, None, ANN)
            .await
            .map_err(|e| format!("pause failed: {e}"))?;
        match self.claim(&name, trigger.id, "replica-a").await? {
            TriggerClaim::Paused { .. } => {}
            other => return Err(format!("a claim after a pause answered {other:?}")),
        }
        self.store
            .resume(&name, ANN)
            .await
            .map_err(|e| format!("resume failed: {e}"))?;
        if !self.is_listed(&name, trigger.id).await? {
            return Err(
                "a trigger whose claims met the lock held or a pause is not pending".into(),
            );
        }
        match self.claim(&name, trigger.id, "replica-a").await? {
            TriggerClaim::Claimed(_) => Ok(()),
            other => Err(format!("the claim once free answered {other:?}")),
        }
    }

    async fn a_trigger_nobody_takes_expires(&self) -> CaseResult {
        let name = self.name("expires");
        let trigger = self.requested(&name, self.unit).await?;
        let deadline = Instant::now() + self.unit * 10;
        while self.is_listed(&name, trigger.id).await? {
            if Instant::now() > deadline {
                return Err(format!(
                    "a trigger expiring after {:?} is still pending {:?} later",
                    self.unit,
                    self.unit * 10
                ));
            }
            sleep(self.unit / 10).await;
        }
        match self.claim(&name, trigger.id, "replica-a").await? {
            TriggerClaim::Gone { .. } => {}
            other => {
                return Err(format!(
                    "the claim of an expired trigger answered {other:?}"
                ));
            }
        }
        let again = self.requested(&name, MINUTE).await?;
        if again.id == trigger.id {
            return Err("a new trigger reused the expired one's id".into());
        }
        Ok(())
    }

    async fn bad_input_is_refused_and_writes_nothing(&self) -> CaseResult {
        let name = self.name("bad");
        let too_long: String = std::iter::once(name.clone())
            .chain(std::iter::repeat_n(
                "x".to_owned(),
                self.store.max_name_len(),
            ))
            .collect();
        let cases: [(&str, &str, &str, Duration); 3] = [
            ("an empty actor", &name, "", MINUTE),
            ("a zero expiry", &name, ANN, Duration::ZERO),
            ("a name over the limit", &too_long, ANN, MINUTE),
        ];
        for (what, target, actor, expires_in) in cases {
            match self.store.trigger(target, actor, expires_in).await {
                Err(e) if e.is_invalid_config() => {}
                other => {
                    return Err(format!(
                        "{what}: trigger answered {other:?}, expected an invalid-configuration error"
                    ));
                }
            }
        }
        for target in [&name, &too_long] {
            if let Ok(Some(row)) = self.store.entry(target).await {
                return Err(format!("a refused trigger wrote a row: {row}"));
            }
        }
        Ok(())
    }

    async fn a_push_wakes_a_watcher(&self) -> CaseResult {
        let mut watch = match self.store.watch_triggers().await {
            Ok(watch) => watch,
            Err(e) if e.is_unsupported() => return Ok(()),
            Err(e) => return Err(format!("watch_triggers failed: {e}")),
        };
        let name = self.name("push");
        self.requested(&name, MINUTE).await?;
        match tokio::time::timeout(self.unit * 5, watch.next()).await {
            Ok(Some(())) => Ok(()),
            Ok(None) => Err("the watch ended instead of waking".into()),
            Err(_) => Err(format!("no wake within {:?} of a trigger", self.unit * 5)),
        }
    }
}
