//! The conformance suite's cases of batches of fire claims
//! ([`LockProvider::claim_fires`](crate::provider::LockProvider::claim_fires)). They run with the
//! fire cases, on every store that claims fires, whether it batches or loops `claim_fire` with the
//! default body.

use std::sync::Arc;
use std::time::Duration;

use super::super::{CaseResult, ConformanceSuite};
use super::{chrono_of, whole_ms};
use crate::fire::{Fire, FireClaim};
use crate::provider::ClaimRequest;

impl ConformanceSuite {
    /// One batch of claims that meet every answer: each is answered as its single claim would be,
    /// in the batch's order, one claim's failure fails it alone, and nothing is written but the
    /// winning claims.
    pub(super) async fn fire_batch_answers_each_claim_alone(&self) -> CaseResult {
        let case = "batch-each";
        let name = |what: &str| self.name(&format!("{case}-{what}"));
        let (new, free, held, taken, early, passed) = (
            name("new"),
            name("free"),
            name("held"),
            name("taken"),
            name("early"),
            name("passed"),
        );
        let long = "b".repeat(self.provider.max_name_len() + 1);
        let open = self.open_fire(case, 1, 40).await?;
        // `free` has an expired row, `held` a plain lock, `taken` this fire claimed and released.
        let record = self.must_acquire(&free, self.unit * 10, "plain").await?;
        self.release(&record, Duration::ZERO).await?;
        let holder = self.must_acquire(&held, self.unit * 10, "plain").await?;
        let first = self.must_claim(&taken, &open, "first").await?;
        self.release(&first, Duration::ZERO).await?;
        let now = self.store_now(case).await.map_err(|e| e.to_string())?;
        let at = whole_ms(now + chrono_of(self.unit * 20));
        let future = Fire::new(at, at + chrono_of(self.unit * 20)).map_err(|e| e.to_string())?;
        let at = whole_ms(now - chrono_of(self.unit * 20));
        let past = Fire::new(at, at + chrono_of(self.unit * 10)).map_err(|e| e.to_string())?;
        let at_most = self.unit * 10;
        let claims = [
            ClaimRequest::new(&new, &open, at_most),
            ClaimRequest::new(&held, &open, at_most),
            ClaimRequest::new(&long, &open, at_most),
            ClaimRequest::new(&taken, &open, at_most),
            ClaimRequest::new(&early, &future, at_most),
            ClaimRequest::new(&passed, &past, at_most),
            ClaimRequest::new(&free, &open, at_most),
        ];
        let answers = self
            .provider
            .claim_fires(&claims, "owner-b")
            .await
            .map_err(|e| format!("claim_fires failed as a whole: {e}"))?;
        if answers.len() != claims.len() {
            return Err(format!(
                "{} answers to {} claims",
                answers.len(),
                claims.len()
            ));
        }
        let mut won = Vec::new();
        for (claim, answer) in claims.iter().zip(&answers) {
            let what = claim.name;
            let fits = match answer {
                Ok(FireClaim::Claimed(record)) if what == new || what == free => {
                    if record.name() != what || record.owner() != "owner-b" {
                        return Err(format!("{what:?} was claimed as {record}"));
                    }
                    won.push(record.clone());
                    true
                }
                Ok(FireClaim::Held { holder: seen, .. }) => what == held && *seen == holder,
                Err(error) => what == long && error.is_invalid_config(),
                Ok(FireClaim::ClaimedElsewhere {
                    recorded,
                    holder: seen,
                    ..
                }) => {
                    // The holder as released: `lock_until` moved, the acquisition did not.
                    what == taken
                        && *recorded == open.at()
                        && seen.owner() == first.owner()
                        && seen.locked_at() == first.locked_at()
                        && seen.fencing_token() == first.fencing_token()
                }
                Ok(FireClaim::TooEarly { .. }) => what == early,
                Ok(FireClaim::WindowPassed { .. }) => what == passed,
                Ok(_) => false,
            };
            if !fits {
                return Err(format!(
                    "the claim of {what:?} in a batch answered {answer:?}"
                ));
            }
        }
        self.batch_wrote_only_its_winners(&held, &holder, [&early, &passed], &open)
            .await?;
        // A second batch of the same fires claims none of them again.
        let again = self
            .provider
            .claim_fires(&claims[..1], "owner-c")
            .await
            .map_err(|e| format!("a second batch failed: {e}"))?;
        if !matches!(again.as_slice(), [Ok(FireClaim::ClaimedElsewhere { .. })]) {
            return Err(format!(
                "a second batch of a claimed fire answered {again:?}"
            ));
        }
        self.release(&holder, Duration::ZERO).await?;
        for record in won {
            self.release(&record, Duration::ZERO).await?;
        }
        Ok(())
    }

    /// After a batch: the held lock is still its holder's, and the names whose claims were too
    /// early or too late are free for an open fire.
    async fn batch_wrote_only_its_winners(
        &self,
        held: &str,
        holder: &crate::provider::LockRecord,
        refused: [&str; 2],
        open: &Fire,
    ) -> CaseResult {
        match self.provider.holder(held).await {
            Ok(seen) if seen.as_ref() != Some(holder) => {
                return Err(format!(
                    "the batch changed a held lock: its holder is {seen:?}"
                ));
            }
            Err(e) if !e.is_unsupported() => return Err(format!("reading the holder: {e}")),
            _ => {}
        }
        for name in refused {
            let record = self.must_claim(name, open, "owner-a").await?;
            self.release(&record, Duration::ZERO).await?;
        }
        Ok(())
    }

    /// Three batches of the same fires, half of them on existing rows, in three orders, sent at
    /// once as three replicas send them: each fire has one winner, and no batch fails (SQL stores
    /// lock rows in one order, so the batches cannot deadlock each other). A claim answered
    /// [`Error::busy`](crate::Error::busy) is then claimed on its own, as the executor does.
    pub(super) async fn fire_batches_racing_one_winner_each(&self) -> CaseResult {
        const JOBS: usize = 24;
        let case = "batch-race";
        let names: Vec<String> = (0..JOBS)
            .map(|i| self.name(&format!("{case}-{i}")))
            .collect();
        // Every other name has a row, free: its claims lock and update it, the others insert.
        for name in names.iter().step_by(2) {
            let record = self.must_acquire(name, self.unit * 10, "plain").await?;
            self.release(&record, Duration::ZERO).await?;
        }
        let fire = self.open_fire(case, 1, 60).await?;
        let at_most = self.unit * 10;
        let barrier = Arc::new(tokio::sync::Barrier::new(3));
        let mut racers = Vec::new();
        for racer in 0..3_usize {
            let mut order = names.clone();
            match racer {
                1 => order.reverse(),
                2 => order.rotate_left(JOBS / 3),
                _ => {}
            }
            let (provider, barrier) = (self.provider.clone(), barrier.clone());
            racers.push(tokio::spawn(async move {
                let claims: Vec<ClaimRequest<'_>> = order
                    .iter()
                    .map(|name| ClaimRequest::new(name, &fire, at_most))
                    .collect();
                barrier.wait().await;
                let owner = format!("racer-{racer}");
                let answers = provider.claim_fires(&claims, &owner).await?;
                let mut decided = Vec::with_capacity(answers.len());
                for (name, answer) in order.iter().zip(answers) {
                    // A claim the batch left undecided, its row held by a racer for longer than
                    // the store waits, is claimed on its own, as the executor does.
                    let answer = match answer {
                        Err(e) if e.is_busy() => {
                            provider.claim_fire(name, &fire, at_most, &owner).await
                        }
                        answer => answer,
                    };
                    decided.push((name.clone(), answer));
                }
                Ok::<_, crate::Error>(decided)
            }));
        }
        let mut winners: std::collections::HashMap<String, Vec<crate::provider::LockRecord>> =
            std::collections::HashMap::new();
        for racer in racers {
            let answers = match racer.await {
                Ok(Ok(answers)) => answers,
                Ok(Err(e)) => return Err(format!("a racing batch failed as a whole: {e}")),
                Err(e) => return Err(format!("a racing batch panicked: {e}")),
            };
            for (name, answer) in answers {
                match answer {
                    Ok(FireClaim::Claimed(record)) => winners.entry(name).or_default().push(record),
                    Ok(FireClaim::ClaimedElsewhere { .. } | FireClaim::Held { .. }) => {}
                    other => return Err(format!("a racing claim of {name:?} answered {other:?}")),
                }
            }
        }
        for name in &names {
            match winners.get(name).map(Vec::as_slice) {
                Some([record]) => self.release(record, Duration::ZERO).await.map(drop)?,
                other => return Err(format!("{name:?} had the winners {other:?}")),
            }
        }
        Ok(())
    }
}
