//! The conformance suite's fire-claim cases ([`LockProvider::claim_fire`], and in `batch` those of
//! [`LockProvider::claim_fires`](crate::provider::LockProvider::claim_fires)).
//!
//! A store without fire claims answers with the default body, [`Error::is_unsupported`]. It has
//! these cases reported as skipped, not failed. The exception is a suite told to
//! [`require_fire_claims`](ConformanceSuite::require_fire_claims).
//!
//! The cases never read the suite's own clock for a fire. They learn the store's "now" from a claim
//! of a fire a year away. That claim is always [`FireClaim::TooEarly`], which writes nothing. They
//! build their fires around it. So they work on a database whose clock differs from this machine's.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{CaseResult, ConformanceSuite, SuiteReport};
use crate::error::Error;
use crate::fire::{Fire, FireClaim};
use crate::provider::LockRecord;

mod batch;

impl ConformanceSuite {
    /// Runs the fire-claim cases into `report`. Marks them skipped when the store does not support
    /// fire claims.
    pub(super) async fn fire_cases(&self, report: &mut SuiteReport) {
        let cases: [(&'static str, FireCase); 10] = [
            ("fire_claimed_once", |s| Box::pin(s.fire_claimed_once())),
            ("fire_too_early_writes_nothing", |s| {
                Box::pin(s.fire_too_early_writes_nothing())
            }),
            ("fire_window_passed_writes_nothing", |s| {
                Box::pin(s.fire_window_passed_writes_nothing())
            }),
            ("fire_held_writes_nothing", |s| {
                Box::pin(s.fire_held_writes_nothing())
            }),
            ("fire_survives_release_and_expiry", |s| {
                Box::pin(s.fire_survives_release_and_expiry())
            }),
            ("fire_untouched_by_acquire_extend_release", |s| {
                Box::pin(s.fire_untouched_by_acquire_extend_release())
            }),
            ("fire_concurrent_claimers_one_winner", |s| {
                Box::pin(s.fire_concurrent_claimers_one_winner())
            }),
            ("fire_long_names_rejected", |s| {
                Box::pin(s.fire_long_names_rejected())
            }),
            ("fire_batch_answers_each_claim_alone", |s| {
                Box::pin(s.fire_batch_answers_each_claim_alone())
            }),
            ("fire_batches_racing_one_winner_each", |s| {
                Box::pin(s.fire_batches_racing_one_winner_each())
            }),
        ];
        match self.store_now("probe").await {
            Err(e) if e.is_unsupported() && !self.require_fire_claims => {
                let why = "the store does not support claim_fire";
                for (name, _) in cases {
                    report.skip(name, why);
                }
                return;
            }
            Err(e) => {
                report.fail(
                    "fire_probe",
                    format!("claim_fire of a future fire failed: {e}"),
                );
                return;
            }
            Ok(_) => {}
        }
        for (name, case) in cases {
            report.record(name, case(self).await);
        }
    }

    /// The store's clock, from a claim of a fire a year ahead. That claim is always too early and
    /// writes nothing.
    async fn store_now(&self, case: &str) -> Result<DateTime<Utc>, Error> {
        let far = whole_ms(Utc::now() + chrono::Duration::days(365));
        let fire = Fire::new(far, far + chrono::Duration::milliseconds(1))?;
        match self
            .provider
            .claim_fire(&self.name(case), &fire, self.unit, "probe")
            .await?
        {
            FireClaim::TooEarly { now } | FireClaim::WindowPassed { now } => Ok(now),
            other => Err(Error::backend_message(format!(
                "claim_fire of a fire a year ahead answered {other:?}, not TooEarly"
            ))),
        }
    }

    /// A fire whose window `[now - back, now + ahead)` is open by the store's clock.
    async fn open_fire(&self, case: &str, back: u32, ahead: u32) -> Result<Fire, String> {
        let now = self
            .store_now(case)
            .await
            .map_err(|e| format!("reading the store's clock: {e}"))?;
        let at = whole_ms(now - chrono_of(self.unit * back));
        Fire::new(at, at + chrono_of(self.unit * (back + ahead))).map_err(|e| e.to_string())
    }

    async fn claim(&self, name: &str, fire: &Fire, owner: &str) -> Result<FireClaim, String> {
        self.provider
            .claim_fire(name, fire, self.unit * 10, owner)
            .await
            .map_err(|e| format!("claim_fire({name:?}, {fire}, {owner:?}) failed: {e}"))
    }

    async fn must_claim(&self, name: &str, fire: &Fire, owner: &str) -> Result<LockRecord, String> {
        match self.claim(name, fire, owner).await? {
            FireClaim::Claimed(record) => Ok(record),
            other => Err(format!("claim of {fire} by {owner:?} answered {other:?}")),
        }
    }

    async fn fire_claimed_once(&self) -> CaseResult {
        let name = self.name("fire-once");
        let fire = self.open_fire("fire-once", 1, 40).await?;
        let record = self.must_claim(&name, &fire, "owner-a").await?;
        if record.name() != name || record.owner() != "owner-a" {
            return Err(format!("the claim's record is not this claim's: {record}"));
        }
        if record.locked_at() < fire.at() {
            return Err(format!(
                "claimed before the fire's instant by the store's clock: {record}"
            ));
        }
        let length = (record.lock_until() - record.locked_at())
            .to_std()
            .unwrap_or_default();
        let tolerance = Duration::from_millis(5);
        if length + tolerance < self.unit * 10 || length > self.unit * 10 + tolerance {
            return Err(format!("the claim's lock lasts {length:?}, not at_most"));
        }
        // The reply names the claim that holds it, as the store has it, from the same step:
        // what a scheduler whose own reply was lost recognises its claim by.
        match self.claim(&name, &fire, "owner-b").await? {
            FireClaim::ClaimedElsewhere {
                recorded, holder, ..
            } if recorded == fire.at() && holder == record => {}
            FireClaim::ClaimedElsewhere { holder, .. } if holder != record => {
                return Err(format!(
                    "a second claim of the same fire names the holder {holder}, not the claim \
                     {record}"
                ));
            }
            other => return Err(format!("a second claim of the same fire: {other:?}")),
        }
        // The same owner cannot claim it twice either.
        match self.claim(&name, &fire, "owner-a").await? {
            FireClaim::ClaimedElsewhere { .. } => {}
            other => return Err(format!("the claimer's second claim: {other:?}")),
        }
        // A claim takes the lock: a plain acquire is refused.
        self.must_refuse(&name, "owner-b", "while a fire claim holds the lock")
            .await?;
        self.release(&record, Duration::ZERO).await.map(drop)
    }

    async fn fire_too_early_writes_nothing(&self) -> CaseResult {
        let name = self.name("fire-early");
        let now = self
            .store_now("fire-early")
            .await
            .map_err(|e| e.to_string())?;
        let at = whole_ms(now + chrono_of(self.unit * 20));
        let fire = Fire::new(at, at + chrono_of(self.unit * 20)).map_err(|e| e.to_string())?;
        match self.claim(&name, &fire, "owner-a").await? {
            FireClaim::TooEarly { now: told } if told < at => {}
            other => return Err(format!("a claim before F: {other:?}")),
        }
        // Nothing written: the lock is free and an earlier open fire is claimable.
        let open = self.open_fire("fire-early", 1, 10).await?;
        let record = self.must_claim(&name, &open, "owner-a").await?;
        self.release(&record, Duration::ZERO).await.map(drop)
    }

    async fn fire_window_passed_writes_nothing(&self) -> CaseResult {
        let name = self.name("fire-passed");
        let now = self
            .store_now("fire-passed")
            .await
            .map_err(|e| e.to_string())?;
        let at = whole_ms(now - chrono_of(self.unit * 20));
        let fire = Fire::new(at, at + chrono_of(self.unit * 10)).map_err(|e| e.to_string())?;
        match self.claim(&name, &fire, "owner-a").await? {
            FireClaim::WindowPassed { now: told } if told >= fire.next() => {}
            other => return Err(format!("a claim after the window: {other:?}")),
        }
        // Nothing written: a fire between the passed one and now is still claimable.
        let open = self.open_fire("fire-passed", 1, 10).await?;
        let record = self.must_claim(&name, &open, "owner-a").await?;
        self.release(&record, Duration::ZERO).await.map(drop)
    }

    async fn fire_held_writes_nothing(&self) -> CaseResult {
        let name = self.name("fire-held");
        let held = self.must_acquire(&name, self.unit * 10, "plain").await?;
        let fire = self.open_fire("fire-held", 1, 40).await?;
        match self.claim(&name, &fire, "owner-a").await? {
            FireClaim::Held { holder, now } if holder == held && holder.lock_until() > now => {}
            FireClaim::Held { holder, .. } => {
                return Err(format!(
                    "a claim while the lock is held names the holder {holder}, not {held}"
                ));
            }
            other => return Err(format!("a claim while the lock is held: {other:?}")),
        }
        self.release(&held, Duration::ZERO).await?;
        // Held recorded nothing: once free, the same fire is claimed.
        let record = self.must_claim(&name, &fire, "owner-a").await?;
        self.release(&record, Duration::ZERO).await.map(drop)
    }

    async fn fire_survives_release_and_expiry(&self) -> CaseResult {
        let name = self.name("fire-survives");
        let fire = self.open_fire("fire-survives", 2, 60).await?;
        let record = self.must_claim(&name, &fire, "owner-a").await?;
        self.release(&record, Duration::ZERO).await?;
        match self.claim(&name, &fire, "owner-b").await? {
            FireClaim::ClaimedElsewhere { recorded, .. } if recorded == fire.at() => {}
            other => return Err(format!("the fire after its release: {other:?}")),
        }
        // A later fire (F < F2 <= now) is claimable: an older recorded fire does not block it.
        let later = self.open_fire("fire-survives", 1, 60).await?;
        if later.at() <= fire.at() {
            return Err("the store's clock did not advance between two claims".into());
        }
        let second = self
            .provider
            .claim_fire(&name, &later, self.unit, "owner-b")
            .await
            .map_err(|e| format!("claim of a later fire failed: {e}"))?;
        let Some(second) = second.claimed().cloned() else {
            return Err(format!("a later fire after release: {second:?}"));
        };
        // Let it expire without a release: the recorded fire stays.
        self.wait_expired(&second).await?;
        match self.claim(&name, &later, "owner-c").await? {
            FireClaim::ClaimedElsewhere { recorded, .. } if recorded == later.at() => Ok(()),
            other => Err(format!("the fire after its lock expired: {other:?}")),
        }
    }

    async fn fire_untouched_by_acquire_extend_release(&self) -> CaseResult {
        let name = self.name("fire-untouched");
        let fire = self.open_fire("fire-untouched", 1, 60).await?;
        let claimed = self.must_claim(&name, &fire, "owner-a").await?;
        self.release(&claimed, Duration::ZERO).await?;
        let plain = self.must_acquire(&name, self.unit * 10, "plain").await?;
        let extended = self
            .extend(&plain, self.unit * 10)
            .await?
            .ok_or("extend of a held plain lock was refused")?;
        self.release(&extended, Duration::ZERO).await?;
        match self.claim(&name, &fire, "owner-b").await? {
            FireClaim::ClaimedElsewhere { recorded, .. } if recorded == fire.at() => Ok(()),
            other => Err(format!(
                "the recorded fire after a plain acquire, extend and release: {other:?}"
            )),
        }
    }

    async fn fire_concurrent_claimers_one_winner(&self) -> CaseResult {
        let name = self.name("fire-race");
        // Each round's fire is a millisecond after the previous one's (all of them a time unit
        // or so before the store's now, inside one window), so no round waits for the clock.
        let base = self.open_fire("fire-race", 1, 60).await?;
        for round in 0..5 {
            let fire = Fire::new(
                base.at() + chrono::Duration::milliseconds(round),
                base.next(),
            )
            .map_err(|e| e.to_string())?;
            let barrier = Arc::new(tokio::sync::Barrier::new(6));
            let mut racers = Vec::new();
            for i in 0..6 {
                let (provider, barrier, name) =
                    (self.provider.clone(), barrier.clone(), name.clone());
                let at_most = self.unit * 10;
                racers.push(tokio::spawn(async move {
                    barrier.wait().await;
                    provider
                        .claim_fire(&name, &fire, at_most, &format!("racer-{i}"))
                        .await
                }));
            }
            let mut winners = Vec::new();
            for racer in racers {
                match racer.await {
                    Ok(Ok(FireClaim::Claimed(record))) => winners.push(record),
                    Ok(Ok(FireClaim::ClaimedElsewhere { .. } | FireClaim::Held { .. })) => {}
                    Ok(Ok(other)) => return Err(format!("round {round}: a racer got {other:?}")),
                    Ok(Err(e)) => return Err(format!("round {round}: a racer got an error: {e}")),
                    Err(e) => return Err(format!("round {round}: a racer panicked: {e}")),
                }
            }
            if winners.len() != 1 {
                return Err(format!("round {round}: {} winners", winners.len()));
            }
            self.release(&winners[0], Duration::ZERO).await?;
        }
        Ok(())
    }

    async fn fire_long_names_rejected(&self) -> CaseResult {
        let long = "f".repeat(self.provider.max_name_len() + 1);
        let fire = self.open_fire("fire-long", 1, 10).await?;
        match self
            .provider
            .claim_fire(&long, &fire, self.unit, "owner-a")
            .await
        {
            Err(e) if e.is_invalid_config() => Ok(()),
            other => Err(format!("claim_fire with an over-long name: {other:?}")),
        }
    }
}

type FireCase = for<'a> fn(
    &'a ConformanceSuite,
) -> std::pin::Pin<Box<dyn Future<Output = CaseResult> + Send + 'a>>;

fn whole_ms(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(t.timestamp_millis()).unwrap_or(t)
}

fn chrono_of(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}
