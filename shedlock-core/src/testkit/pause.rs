//! [`PauseSuite`]: the contract of pauses and operators' actions as executable checks.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::{Instant, sleep};

use crate::admin::{ActionKind, LockAdmin, LockEntry};
use crate::fire::{Fire, FireClaim};
use crate::owner::random_u64;
use crate::pause::{Pause, PauseFor};

type CaseResult = std::result::Result<(), String>;

/// The operator's actor in the suite's pauses.
const ANN: &str = "ann@ops-host";
/// Another operator.
const BOB: &str = "bob <on-call>";

/// The pause suite: what [`LockAdmin::pause`], [`LockAdmin::resume`] and the fire claim's
/// [`FireClaim::Paused`] promise, and that [`LockAdmin::unlock`] records its actor, checked against
/// a store. Run it next to [`AdminSuite`](super::AdminSuite) in the tests of a store that keeps
/// pauses. It panics with the list of failed cases.
///
/// The cases:
///
/// - a paused job's fire is answered `Paused` and writes nothing: the row, its holder and its
///   recorded fire stay; the entry shows the pause and its last action, with the actor;
/// - `Paused` comes after "window passed" and before "claimed elsewhere" and "held";
/// - `acquire` ignores a pause, and a run in progress keeps, extends and releases its lock;
/// - a resume returns the pause, records its actor, and the next fire is claimed; a resume with no
///   pause writes nothing;
/// - a pause for a length ends by itself, on the store's clock; a new pause replaces the last;
/// - a pause of a name without a row creates a free row;
/// - an end not in the future, a name over the store's limit, a bad actor or reason: an
///   invalid-configuration error and nothing written; a name with quotes works;
/// - an unlock records its actor.
///
/// ```
/// use shedlock_core::{InMemoryLockProvider, testkit::PauseSuite};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// PauseSuite::new(InMemoryLockProvider::new()).run().await;
/// # }
/// ```
///
/// Its one wait, for a pause to end, is a few multiples of [`time_unit`](Self::time_unit) (default
/// 1 s), polled with a deadline. Names carry a random prefix, so runs can share a table.
pub struct PauseSuite {
    store: Arc<dyn LockAdmin>,
    prefix: String,
    unit: Duration,
}

impl PauseSuite {
    /// A suite for `store`. An `Arc` of a store works too.
    pub fn new(store: impl LockAdmin) -> Self {
        Self {
            store: Arc::new(store),
            prefix: format!("ps{:08x}", random_u64() & 0xffff_ffff),
            unit: Duration::from_secs(1),
        }
    }

    /// The suite's unit of waiting: the pause it lets end lasts two units. Use the store's
    /// resolution or more.
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
        assert!(report.is_empty(), "pause conformance failed:\n{report}");
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
        case!(a_paused_fire_is_refused_and_writes_nothing);
        case!(paused_comes_after_the_window_and_before_the_recorded_fire);
        case!(plain_locks_and_runs_in_progress_ignore_a_pause);
        case!(a_resume_lets_the_next_fire_run);
        case!(a_pause_for_a_length_ends_by_itself);
        case!(a_new_pause_replaces_the_last);
        case!(bad_input_is_refused_and_writes_nothing);
        case!(an_unlock_records_its_actor);
        failures
    }

    fn name(&self, case: &str) -> String {
        format!("{}-{case}", self.prefix)
    }

    async fn pause(
        &self,
        name: &str,
        how_long: PauseFor,
        reason: Option<&str>,
        actor: &str,
    ) -> Result<Pause, String> {
        self.store
            .pause(name, how_long, reason, actor)
            .await
            .map_err(|e| format!("pause({name:?}, {how_long:?}) failed: {e}"))
    }

    async fn entry(&self, name: &str) -> Result<LockEntry, String> {
        self.store
            .entry(name)
            .await
            .map_err(|e| format!("entry({name:?}) failed: {e}"))?
            .ok_or_else(|| format!("entry({name:?}) found no row"))
    }

    async fn claim(&self, name: &str, fire: &Fire, owner: &str) -> Result<FireClaim, String> {
        self.store
            .claim_fire(name, fire, Duration::from_mins(1), owner)
            .await
            .map_err(|e| format!("claim_fire({name:?}, {fire}) failed: {e}"))
    }

    /// A fire whose window holds the store's `now`: from a second before it, for an hour, in whole
    /// seconds, which every store keeps exactly.
    fn fire_around(now: DateTime<Utc>) -> Result<Fire, String> {
        let at = DateTime::from_timestamp(now.timestamp() - 1, 0).unwrap_or(now);
        Fire::new(at, at + chrono::Duration::hours(1)).map_err(|e| e.to_string())
    }

    /// The parts of a row a refused claim must leave alone.
    fn unchanged(before: &LockEntry, after: &LockEntry, what: &str) -> CaseResult {
        if before.record() != after.record() || before.last_fire() != after.last_fire() {
            return Err(format!(
                "{what} changed the row: {} (last fire {:?}) became {} (last fire {:?})",
                before.record(),
                before.last_fire(),
                after.record(),
                after.last_fire()
            ));
        }
        Ok(())
    }

    fn expect_action(entry: &LockEntry, kind: ActionKind, by: &str, what: &str) -> CaseResult {
        match entry.last_action() {
            Some(action) if action.kind == kind && action.by == by => {
                if action.at > entry.store_now() {
                    return Err(format!(
                        "{what}: the action's time {} is after the store's now {}",
                        action.at,
                        entry.store_now()
                    ));
                }
                Ok(())
            }
            other => Err(format!(
                "{what}: the last action reads {other:?}, expected {kind} by {by:?}"
            )),
        }
    }

    async fn a_paused_fire_is_refused_and_writes_nothing(&self) -> CaseResult {
        let name = self.name("refused");
        let pause = self
            .pause(&name, PauseFor::UntilResumed, Some("it's \"down\""), ANN)
            .await?;
        if pause.until.is_some()
            || pause.by != ANN
            || pause.reason.as_deref() != Some("it's \"down\"")
        {
            return Err(format!("pause returned {pause:?}"));
        }
        let before = self.entry(&name).await?;
        if !before.is_paused() || before.pause() != Some(&pause) {
            return Err(format!(
                "the entry shows the pause {:?}, expected {pause:?} holding",
                before.pause()
            ));
        }
        if before.is_held() {
            return Err(format!("a pause took the lock: {}", before.record()));
        }
        Self::expect_action(&before, ActionKind::Paused, ANN, "after pause")?;
        let fire = Self::fire_around(pause.since)?;
        match self.claim(&name, &fire, "replica-a").await? {
            FireClaim::Paused { until: None, .. } => {}
            other => return Err(format!("a paused job's fire was answered {other:?}")),
        }
        let after = self.entry(&name).await?;
        Self::unchanged(&before, &after, "a paused fire's claim")
    }

    async fn paused_comes_after_the_window_and_before_the_recorded_fire(&self) -> CaseResult {
        let name = self.name("order");
        // Claim a fire, so the fire is recorded and the lock held, then pause.
        let since = self
            .pause(&name, PauseFor::UntilResumed, None, ANN)
            .await?
            .since;
        self.store
            .resume(&name, ANN)
            .await
            .map_err(|e| format!("resume failed: {e}"))?;
        let fire = Self::fire_around(since)?;
        let claimed = self.claim(&name, &fire, "replica-a").await?;
        if claimed.claimed().is_none() {
            return Err(format!(
                "the first claim after a resume was answered {claimed:?}"
            ));
        }
        self.pause(&name, PauseFor::UntilResumed, None, BOB).await?;
        match self.claim(&name, &fire, "replica-b").await? {
            FireClaim::Paused { .. } => {}
            other => {
                return Err(format!(
                    "a claimed and held fire of a paused job was answered {other:?}, expected \
                     Paused (it comes before ClaimedElsewhere and Held)"
                ));
            }
        }
        let passed = Fire::new(
            fire.at() - chrono::Duration::hours(2),
            fire.at() - chrono::Duration::hours(1),
        )
        .map_err(|e| e.to_string())?;
        match self.claim(&name, &passed, "replica-b").await? {
            FireClaim::WindowPassed { .. } => Ok(()),
            other => Err(format!(
                "a passed window of a paused job was answered {other:?}, expected WindowPassed"
            )),
        }
    }

    async fn plain_locks_and_runs_in_progress_ignore_a_pause(&self) -> CaseResult {
        let name = self.name("plain");
        self.pause(&name, PauseFor::UntilResumed, None, ANN).await?;
        let record = self
            .store
            .acquire(&name, Duration::from_mins(1), "plain-user")
            .await
            .map_err(|e| format!("acquire of a paused lock failed: {e}"))?
            .ok_or(
                "acquire was refused on a free lock of a paused job: plain locks ignore pauses",
            )?;
        // A run in progress when the pause came: it keeps its lock.
        self.pause(&name, PauseFor::UntilResumed, Some("again"), BOB)
            .await?;
        let extended = self
            .store
            .extend(&record, Duration::from_mins(2))
            .await
            .map_err(|e| format!("extend under a pause failed: {e}"))?;
        if extended.is_none() {
            return Err("a pause ended a run in progress: extend answered None".into());
        }
        match self.store.release(&record, Duration::ZERO).await {
            Ok(true) => Ok(()),
            other => Err(format!("release under a pause answered {other:?}")),
        }
    }

    async fn a_resume_lets_the_next_fire_run(&self) -> CaseResult {
        let name = self.name("resume");
        let pause = self
            .pause(&name, PauseFor::UntilResumed, Some("why"), ANN)
            .await?;
        let resumed = self
            .store
            .resume(&name, BOB)
            .await
            .map_err(|e| format!("resume failed: {e}"))?;
        if resumed.as_ref() != Some(&pause) {
            return Err(format!("resume returned {resumed:?}, expected {pause:?}"));
        }
        let entry = self.entry(&name).await?;
        if entry.pause().is_some() {
            return Err(format!("after resume the entry shows {:?}", entry.pause()));
        }
        Self::expect_action(&entry, ActionKind::Resumed, BOB, "after resume")?;
        let fire = Self::fire_around(pause.since)?;
        let claim = self.claim(&name, &fire, "replica-a").await?;
        if claim.claimed().is_none() {
            return Err(format!("the fire after a resume was answered {claim:?}"));
        }
        // Nothing to resume: nothing written, the last action stays Bob's.
        match self.store.resume(&name, ANN).await {
            Ok(None) => {}
            other => return Err(format!("a resume without a pause answered {other:?}")),
        }
        let entry = self.entry(&name).await?;
        Self::expect_action(
            &entry,
            ActionKind::Resumed,
            BOB,
            "after a resume with no pause",
        )
    }

    async fn a_pause_for_a_length_ends_by_itself(&self) -> CaseResult {
        let name = self.name("ends");
        let length = self.unit * 2;
        let pause = self.pause(&name, PauseFor::For(length), None, ANN).await?;
        let Some(until) = pause.until else {
            return Err(format!("a pause for {length:?} has no end: {pause:?}"));
        };
        let lasts = (until - pause.since).to_std().unwrap_or_default();
        if lasts.abs_diff(length) > Duration::from_millis(10) {
            return Err(format!(
                "a pause for {length:?} lasts {lasts:?} ({} to {until})",
                pause.since
            ));
        }
        let fire = Self::fire_around(pause.since)?;
        match self.claim(&name, &fire, "replica-a").await? {
            FireClaim::Paused { until: Some(u), .. } if u == until => {}
            other => {
                return Err(format!(
                    "a fire inside the pause was answered {other:?}, expected Paused until {until}"
                ));
            }
        }
        let deadline = Instant::now() + self.unit * 10;
        loop {
            match self.claim(&name, &fire, "replica-a").await? {
                FireClaim::Claimed(_) => return Ok(()),
                FireClaim::Paused { .. } if Instant::now() < deadline => {
                    sleep(self.unit / 10).await;
                }
                other => {
                    return Err(format!(
                        "{:?} after the pause's end the fire was answered {other:?}",
                        self.unit * 10
                    ));
                }
            }
        }
    }

    async fn a_new_pause_replaces_the_last(&self) -> CaseResult {
        let name = self.name("replace");
        self.pause(&name, PauseFor::UntilResumed, Some("first"), ANN)
            .await?;
        let second = self
            .pause(&name, PauseFor::For(Duration::from_hours(1)), None, BOB)
            .await?;
        let entry = self.entry(&name).await?;
        if entry.pause() != Some(&second) || second.until.is_none() || second.reason.is_some() {
            return Err(format!(
                "after a second pause the entry shows {:?}, expected {second:?}",
                entry.pause()
            ));
        }
        Self::expect_action(&entry, ActionKind::Paused, BOB, "after a second pause")
    }

    async fn bad_input_is_refused_and_writes_nothing(&self) -> CaseResult {
        let name = self.name("bad");
        let too_long: String = std::iter::once(name.clone())
            .chain(std::iter::repeat_n(
                "x".to_owned(),
                self.store.max_name_len(),
            ))
            .collect();
        let past = Utc::now() - chrono::Duration::days(1);
        let cases: [(&str, &str, PauseFor, Option<&str>, &str); 5] = [
            (
                "an end in the past",
                &name,
                PauseFor::Until(past),
                None,
                ANN,
            ),
            (
                "a zero length",
                &name,
                PauseFor::For(Duration::ZERO),
                None,
                ANN,
            ),
            (
                "a name over the limit",
                &too_long,
                PauseFor::UntilResumed,
                None,
                ANN,
            ),
            ("an empty actor", &name, PauseFor::UntilResumed, None, ""),
            (
                "a reason with a newline",
                &name,
                PauseFor::UntilResumed,
                Some("a\nb"),
                ANN,
            ),
        ];
        for (what, target, how_long, reason, actor) in cases {
            match self.store.pause(target, how_long, reason, actor).await {
                Err(e) if e.is_invalid_config() => {}
                other => {
                    return Err(format!(
                        "{what}: pause answered {other:?}, expected an invalid-configuration error"
                    ));
                }
            }
        }
        for target in [&name, &too_long] {
            if let Ok(Some(row)) = self.store.entry(target).await {
                return Err(format!("a refused pause wrote a row: {row}"));
            }
        }
        // Quotes are data: the name is bound, never spliced.
        let quoted = format!("{}'\"; --", self.name("quote"));
        let pause = self
            .pause(&quoted, PauseFor::UntilResumed, None, ANN)
            .await?;
        let entry = self.entry(&quoted).await?;
        if entry.pause() != Some(&pause) {
            return Err(format!("{quoted:?} reads back {:?}", entry.pause()));
        }
        Ok(())
    }

    async fn an_unlock_records_its_actor(&self) -> CaseResult {
        let name = self.name("unlock");
        self.store
            .acquire(&name, Duration::from_mins(1), "stuck-pod")
            .await
            .map_err(|e| format!("acquire failed: {e}"))?
            .ok_or("acquire was refused on a free lock")?;
        let listed = self.entry(&name).await?;
        match self.store.unlock(listed.record(), BOB).await {
            Ok(true) => {}
            other => {
                return Err(format!(
                    "unlock of the listed acquisition answered {other:?}"
                ));
            }
        }
        let entry = self.entry(&name).await?;
        Self::expect_action(&entry, ActionKind::Unlocked, BOB, "after unlock")?;
        match self.store.unlock(listed.record(), "").await {
            Err(e) if e.is_invalid_config() => Ok(()),
            other => Err(format!("an unlock with an empty actor answered {other:?}")),
        }
    }
}
