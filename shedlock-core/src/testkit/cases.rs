//! The conformance suite's lock cases, one method per case. They cover [`LockProvider::acquire`],
//! [`extend`](LockProvider::extend), [`release`](LockProvider::release) and
//! [`holder`](LockProvider::holder). The fire-claim cases are in `fire.rs`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::{Instant, sleep};

use super::{CaseResult, ConformanceSuite, Step, SuiteReport};
#[cfg(doc)]
use crate::provider::LockProvider;

impl ConformanceSuite {
    /// Runs the lock cases into `report`, in order.
    pub(super) async fn lock_cases(&self, report: &mut SuiteReport) {
        macro_rules! case {
            ($name:ident) => {
                report.record(stringify!($name), self.$name().await);
            };
        }
        case!(lock_created);
        case!(second_acquire_refused);
        case!(names_independent);
        case!(relock_after_release);
        case!(expires_after_at_most);
        case!(at_least_holds_then_ends);
        case!(late_release_frees_at_once);
        case!(release_after_expiry_acts);
        case!(extend_once_and_repeatedly);
        case!(extend_after_release_refused);
        case!(extend_after_expiry_refused);
        case!(late_release_and_extend_spare_new_holder);
        case!(fencing_tokens_increase);
        case!(racing_owners_one_winner);
        case!(concurrent_fuzz_exact_counts);
        case!(long_names_rejected);
        case!(oversized_durations_rejected);
        case!(holder_reports_holder);
    }

    async fn lock_created(&self) -> CaseResult {
        let name = self.name("created");
        let at_most = self.unit * 10;
        let record = self.must_acquire(&name, at_most, "owner-a").await?;
        if record.name() != name || record.owner() != "owner-a" {
            return Err(format!(
                "record does not describe the acquisition: {record}"
            ));
        }
        let length = (record.lock_until() - record.locked_at())
            .to_std()
            .unwrap_or_default();
        let tolerance = Duration::from_millis(5);
        if length + tolerance < at_most || length > at_most + tolerance {
            return Err(format!(
                "lock_until - locked_at = {length:?}, expected {at_most:?}"
            ));
        }
        Ok(())
    }

    async fn second_acquire_refused(&self) -> CaseResult {
        let name = self.name("second");
        self.must_acquire(&name, self.unit * 10, "owner-a")
            .await
            .step("first acquire")?;
        self.must_refuse(&name, "owner-b", "while owner-a holds the lock")
            .await?;
        self.must_refuse(
            &name,
            "owner-a",
            "for the holder itself (locks are not re-entrant in the store)",
        )
        .await
    }

    async fn names_independent(&self) -> CaseResult {
        let (one, two) = (self.name("indep-1"), self.name("indep-2"));
        self.must_acquire(&one, self.unit * 10, "owner-a").await?;
        self.must_acquire(&two, self.unit * 10, "owner-b").await?;
        Ok(())
    }

    async fn relock_after_release(&self) -> CaseResult {
        let name = self.name("relock");
        for round in 0..10 {
            let owner = if round % 2 == 0 { "owner-a" } else { "owner-b" };
            let record = self
                .must_acquire(&name, self.unit * 10, owner)
                .await
                .map_err(|e| format!("round {round}: {e}"))?;
            if !self.release(&record, Duration::ZERO).await? {
                return Err(format!(
                    "round {round}: release of a held lock returned false"
                ));
            }
        }
        Ok(())
    }

    async fn expires_after_at_most(&self) -> CaseResult {
        let name = self.name("expiry");
        let at_most = self.unit * 2;
        let start = Instant::now();
        self.must_acquire(&name, at_most, "owner-a")
            .await
            .step("first acquire")?;
        self.must_refuse_before(&name, "owner-b", "before at_most", start, at_most)
            .await
            .step("acquire by another owner before at_most")?;
        let (_, _) = self
            .acquire_within(&name, "owner-b", self.unit * 20)
            .await
            .step("acquire by another owner after at_most")?;
        let waited = start.elapsed();
        if waited + Duration::from_millis(20) < at_most {
            return Err(format!(
                "the lock freed after {waited:?}, before at_most ({at_most:?})"
            ));
        }
        Ok(())
    }

    async fn at_least_holds_then_ends(&self) -> CaseResult {
        let name = self.name("at-least");
        let at_least = self.unit * 2;
        let start = Instant::now();
        let record = self.must_acquire(&name, self.unit * 10, "owner-a").await?;
        if !self
            .release(&record, at_least)
            .await
            .step("early release")?
        {
            return Err("early release (with at_least) of a held lock returned false".into());
        }
        self.must_refuse_before(
            &name,
            "owner-b",
            "after an early release, before at_least",
            start,
            at_least,
        )
        .await?;
        let (_, _) = self
            .acquire_within(&name, "owner-b", self.unit * 20)
            .await
            .step("acquire by another owner after at_least")?;
        let held = start.elapsed();
        if held + Duration::from_millis(20) < at_least {
            return Err(format!(
                "freed after {held:?}, before at_least ({at_least:?})"
            ));
        }
        if held > at_least + self.unit * 5 {
            return Err(format!(
                "still held {held:?} after an at_least of {at_least:?}"
            ));
        }
        Ok(())
    }

    async fn late_release_frees_at_once(&self) -> CaseResult {
        let name = self.name("late-release");
        let record = self.must_acquire(&name, self.unit * 10, "owner-a").await?;
        sleep(self.unit).await;
        // at_least has passed already: the lock must be free right after the release.
        if !self
            .release(&record, self.unit / 2)
            .await
            .step("release past at_least")?
        {
            return Err("release past at_least of a held lock returned false".into());
        }
        self.must_acquire(&name, self.unit * 10, "owner-b")
            .await
            .map(drop)
            .map_err(|e| format!("after a release past at_least: {e}"))
    }

    /// The contract's "a release after expiry, while nobody else took the lock, still acts". It
    /// returns `true` and sets `lock_until = max(now, locked_at + at_least)`. With a long
    /// `at_least`, that holds the lock again. That is how the store shows that it wrote the row.
    async fn release_after_expiry_acts(&self) -> CaseResult {
        let (zero, long) = (
            self.name("expired-release"),
            self.name("expired-release-at-least"),
        );
        let start = Instant::now();
        let zero_record = self.must_acquire(&zero, self.unit, "owner-a").await?;
        let long_record = self.must_acquire(&long, self.unit, "owner-a").await?;
        self.wait_expired(&zero_record)
            .await
            .step("waiting for the first lock to expire")?;
        self.wait_expired(&long_record)
            .await
            .step("waiting for the second lock to expire")?;

        if !self
            .release(&zero_record, Duration::ZERO)
            .await
            .step("release after expiry")?
        {
            return Err(
                "a release after expiry, nobody else holding the lock, returned false".into(),
            );
        }
        self.must_acquire(&zero, self.unit * 10, "owner-b")
            .await
            .map_err(|e| format!("after a release after expiry: {e}"))?;

        let at_least = self.unit * 10;
        if !self
            .release(&long_record, at_least)
            .await
            .step("release after expiry with at_least")?
        {
            return Err(
                "a release after expiry with at_least, nobody else holding the lock, returned false"
                    .into(),
            );
        }
        self.must_refuse_before(
            &long,
            "owner-b",
            "after a release after expiry whose locked_at + at_least is still ahead \
             (the release did not write lock_until)",
            start,
            at_least,
        )
        .await
    }

    async fn extend_once_and_repeatedly(&self) -> CaseResult {
        let name = self.name("extend");
        let record = self.must_acquire(&name, self.unit * 3, "owner-a").await?;
        let mut current = record.clone();
        let mut last_extended = Instant::now();
        for round in 0..5 {
            last_extended = Instant::now();
            let Some(extended) = self
                .extend(&current, self.unit * 10)
                .await
                .step(&format!("extend {round}"))?
            else {
                return Err(format!("extend {round} of a held lock was refused"));
            };
            if extended.lock_until() <= current.lock_until() && round == 0 {
                return Err(format!(
                    "extend did not move lock_until ({} -> {})",
                    current.lock_until(),
                    extended.lock_until()
                ));
            }
            if extended.fencing_token() != record.fencing_token()
                || extended.owner() != record.owner()
            {
                return Err(format!(
                    "extend changed the acquisition: {record} -> {extended}"
                ));
            }
            current = extended;
        }
        // Past the original at_most, the extension still holds.
        sleep(self.unit * 4).await;
        self.must_refuse_before(
            &name,
            "owner-b",
            "past the original at_most of an extended lock",
            last_extended,
            self.unit * 10,
        )
        .await?;
        let first = "first release of the acquisition (with the extended record)";
        if !self.release(&current, Duration::ZERO).await.step(first)? {
            return Err(format!("{first} returned false"));
        }
        let second = "second release of the same acquisition (with its original record)";
        if !self.release(&record, Duration::ZERO).await.step(second)? {
            return Err(format!(
                "{second} returned false: a release may be called again and must answer true \
                 while nobody else took the lock (a store that deletes the record on release \
                 fails here)"
            ));
        }
        Ok(())
    }

    async fn extend_after_release_refused(&self) -> CaseResult {
        let name = self.name("extend-released");
        let record = self.must_acquire(&name, self.unit * 10, "owner-a").await?;
        self.release(&record, Duration::ZERO)
            .await
            .step("release")?;
        match self
            .extend(&record, self.unit * 10)
            .await
            .step("extend after release")?
        {
            None => Ok(()),
            Some(r) => Err(format!("extend after release succeeded: {r}")),
        }
    }

    async fn extend_after_expiry_refused(&self) -> CaseResult {
        let name = self.name("extend-expired");
        let record = self.must_acquire(&name, self.unit, "owner-a").await?;
        self.wait_expired(&record)
            .await
            .step("waiting for expiry")?;
        match self
            .extend(&record, self.unit * 10)
            .await
            .step("extend after expiry")?
        {
            None => Ok(()),
            Some(r) => Err(format!("extend after expiry succeeded: {r}")),
        }
    }

    async fn late_release_and_extend_spare_new_holder(&self) -> CaseResult {
        let name = self.name("late");
        let old = self.must_acquire(&name, self.unit, "owner-a").await?;
        let (new, _) = self
            .acquire_within(&name, "owner-b", self.unit * 20)
            .await
            .step("takeover by another owner after expiry")?;
        if self
            .release(&old, Duration::ZERO)
            .await
            .step("late release by the old holder")?
        {
            return Err("a release after expiry and takeover returned true".into());
        }
        if let Some(r) = self
            .extend(&old, self.unit * 10)
            .await
            .step("late extend by the old holder")?
        {
            return Err(format!("an extend after takeover succeeded: {r}"));
        }
        self.must_refuse(
            &name,
            "owner-c",
            "after the old holder's late release and extend",
        )
        .await?;
        // Same owner id, older acquisition: still not allowed to touch the new lock.
        let (newer_same_owner, _) = {
            self.release(&new, Duration::ZERO)
                .await
                .step("release by the new holder")?;
            let (r, d) = self
                .acquire_within(&name, "owner-a", self.unit * 20)
                .await
                .step("acquire again by the old owner id")?;
            (r, d)
        };
        if self
            .release(&old, Duration::ZERO)
            .await
            .step("stale release by the same owner id")?
        {
            return Err("a stale record of the same owner released its newer acquisition".into());
        }
        self.must_refuse(&name, "owner-c", "after a stale release by the same owner")
            .await?;
        self.release(&newer_same_owner, Duration::ZERO)
            .await
            .map(drop)
            .step("final release")
    }

    async fn fencing_tokens_increase(&self) -> CaseResult {
        let name = self.name("tokens");
        let mut last: Option<i64> = None;
        let mut has_tokens: Option<bool> = None;
        for round in 0..6 {
            let owner = ["owner-a", "owner-b", "owner-c"][round % 3];
            let record = if round == 3 {
                // One handover by expiry rather than release.
                let step = format!("round {round} (a handover by expiry)");
                let r = self
                    .must_acquire(&name, self.unit, owner)
                    .await
                    .step(&step)?;
                self.wait_expired(&r).await.step(&step)?;
                r
            } else {
                let step = format!("round {round}");
                let r = self
                    .must_acquire(&name, self.unit * 10, owner)
                    .await
                    .step(&step)?;
                self.release(&r, Duration::ZERO).await.step(&step)?;
                r
            };
            let token = record.fencing_token();
            match (has_tokens, token) {
                (None, t) => has_tokens = Some(t.is_some()),
                (Some(true), None) | (Some(false), Some(_)) => {
                    return Err("fencing tokens are sometimes present and sometimes not".into());
                }
                _ => {}
            }
            if let (Some(prev), Some(now)) = (last, token)
                && now <= prev
            {
                return Err(format!("token {now} after {prev}: not strictly increasing"));
            }
            last = token;
        }
        Ok(())
    }

    async fn racing_owners_one_winner(&self) -> CaseResult {
        let name = self.name("race");
        for round in 0..10 {
            let barrier = Arc::new(tokio::sync::Barrier::new(4));
            let mut racers = Vec::new();
            for i in 0..4 {
                let provider = self.provider.clone();
                let barrier = barrier.clone();
                let name = name.clone();
                let at_most = self.unit * 10;
                racers.push(tokio::spawn(async move {
                    barrier.wait().await;
                    provider
                        .acquire(&name, at_most, &format!("racer-{i}"))
                        .await
                }));
            }
            let mut winners = Vec::new();
            for racer in racers {
                match racer.await {
                    Ok(Ok(Some(record))) => winners.push(record),
                    Ok(Ok(None)) => {}
                    Ok(Err(e)) => return Err(format!("round {round}: a racer got an error: {e}")),
                    Err(e) => return Err(format!("round {round}: a racer panicked: {e}")),
                }
            }
            if winners.len() != 1 {
                return Err(format!("round {round}: {} winners", winners.len()));
            }
            self.release(&winners[0], Duration::ZERO)
                .await
                .step(&format!("round {round}: release by the winner"))?;
        }
        Ok(())
    }

    async fn concurrent_fuzz_exact_counts(&self) -> CaseResult {
        let names = [self.name("fuzz-0"), self.name("fuzz-1")];
        let counters: Arc<[Mutex<u64>; 2]> = Arc::new([Mutex::new(0), Mutex::new(0)]);
        let mut tasks = Vec::new();
        for task in 0..8 {
            let provider = self.provider.clone();
            let counters = counters.clone();
            let slot = task % 2;
            let name = names[slot].clone();
            let runs = self.fuzz_runs;
            let at_most = self.unit * 20;
            let deadline = Instant::now() + Duration::from_mins(2);
            tasks.push(tokio::spawn(async move {
                let owner = format!("fuzz-{task}");
                let mut done = 0;
                while done < runs {
                    if Instant::now() > deadline {
                        return Err(format!("task {task} finished only {done} runs in time"));
                    }
                    let record = match provider.acquire(&name, at_most, &owner).await {
                        Ok(Some(record)) => record,
                        Ok(None) => {
                            tokio::task::yield_now().await;
                            continue;
                        }
                        Err(e) => return Err(format!("task {task}: acquire failed: {e}")),
                    };
                    let seen = *counters[slot]
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    tokio::task::yield_now().await;
                    *counters[slot]
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = seen + 1;
                    match provider.release(&record, Duration::ZERO).await {
                        Ok(true) => {}
                        Ok(false) => return Err(format!("task {task}: lost its lock mid-run")),
                        Err(e) => return Err(format!("task {task}: release failed: {e}")),
                    }
                    done += 1;
                }
                Ok(())
            }));
        }
        for task in tasks {
            task.await
                .map_err(|e| format!("a fuzz task panicked: {e}"))??;
        }
        let expected = 4 * self.fuzz_runs as u64;
        for (slot, counter) in counters.iter().enumerate() {
            let count = *counter.lock().unwrap_or_else(PoisonError::into_inner);
            if count != expected {
                return Err(format!(
                    "name {slot}: counter {count}, expected {expected} (lost updates)"
                ));
            }
        }
        Ok(())
    }

    async fn long_names_rejected(&self) -> CaseResult {
        let limit = self.provider.max_name_len();
        let name = format!("{}-{}", self.prefix, "n".repeat(limit));
        match self.provider.acquire(&name, self.unit, "owner-a").await {
            Err(e) if e.is_invalid_config() => Ok(()),
            Err(e) => Err(format!(
                "a {}-character name gave a non-validation error: {e}",
                name.chars().count()
            )),
            Ok(_) => Err(format!("a name over max_name_len ({limit}) was accepted")),
        }
    }

    async fn oversized_durations_rejected(&self) -> CaseResult {
        let name = self.name("durations");
        let too_long = crate::provider::MAX_DURATION + Duration::from_secs(1);
        for at_most in [Duration::ZERO, too_long, Duration::MAX] {
            match self.provider.acquire(&name, at_most, "owner-a").await {
                Err(e) if e.is_invalid_config() => {}
                other => return Err(format!("acquire with at_most {at_most:?}: {other:?}")),
            }
        }
        let record = self.must_acquire(&name, self.unit * 10, "owner-a").await?;
        match self.provider.extend(&record, Duration::MAX).await {
            Err(e) if e.is_invalid_config() => {}
            other => return Err(format!("extend with at_most Duration::MAX: {other:?}")),
        }
        match self.provider.release(&record, Duration::MAX).await {
            Err(e) if e.is_invalid_config() => {}
            other => return Err(format!("release with at_least Duration::MAX: {other:?}")),
        }
        // The rejected calls changed nothing: the lock is still held, and releases normally.
        self.must_refuse(&name, "owner-b", "after rejected extend and release")
            .await?;
        if self
            .release(&record, Duration::ZERO)
            .await
            .step("release after the rejected calls")?
        {
            Ok(())
        } else {
            Err("the lock was not released after the rejected calls".into())
        }
    }

    async fn holder_reports_holder(&self) -> CaseResult {
        let name = self.name("holder");
        match self.provider.holder(&name).await {
            Err(e) if e.is_unsupported() => return Ok(()),
            Err(e) => return Err(format!("holder failed: {e}")),
            Ok(Some(r)) => return Err(format!("holder of a never-used name: {r}")),
            Ok(None) => {}
        }
        let record = self.must_acquire(&name, self.unit * 10, "owner-a").await?;
        match self.provider.holder(&name).await {
            Ok(Some(h))
                if h.owner() == "owner-a" && h.fencing_token() == record.fencing_token() => {}
            other => return Err(format!("holder of a held lock: {other:?}")),
        }
        self.release(&record, Duration::ZERO)
            .await
            .step("release")?;
        match self.provider.holder(&name).await {
            Ok(None) => Ok(()),
            other => Err(format!("holder of a released lock: {other:?}")),
        }
    }
}
