//! [`AdminSuite`]: the contract of [`LockAdmin`] as executable checks.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::admin::{LockAdmin, LockEntry};
use crate::fire::{Fire, FireClaim};
use crate::owner::random_u64;
use crate::provider::LockRecord;

type CaseResult = std::result::Result<(), String>;

/// The admin suite: what [`LockAdmin`] promises, checked against a store. Run it next to
/// [`ConformanceSuite`](super::ConformanceSuite) in a store's tests. It panics with the list of
/// failed cases.
///
/// The cases:
///
/// - `list` and `entry` show a held and a free lock exactly as acquired, in name order: holder,
///   `locked_at`, `lock_until`, token, and held by the store's clock;
/// - they show nothing for an unknown name;
/// - `unlock` with the values listed frees the lock and keeps the row's holder, `locked_at` and
///   token, and the next holder's token is greater;
/// - `unlock` refuses, changing nothing, when the lock was taken again since the listing, also by
///   the same owner id, when the owner, `locked_at` or token differ, when the lock is free, or when
///   there is no row;
/// - `force_unlock` frees whoever holds it and returns that acquisition, or `None` for a free or
///   unknown lock;
/// - freeing keeps the recorded fire, so the fire is not claimed again (where the store supports
///   [`claim_fire`](crate::provider::LockProvider::claim_fire));
/// - `ddl` and `create_table` agree: a store with DDL can run its `create_table` again.
///
/// ```
/// use shedlock_core::InMemoryLockProvider;
/// use shedlock_core::testkit::AdminSuite;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// AdminSuite::new(InMemoryLockProvider::new()).run().await;
/// # }
/// ```
///
/// The suite needs no waiting. It takes its locks for a minute and frees them itself. Lock names
/// carry a random prefix, so runs can share a table.
pub struct AdminSuite {
    store: Arc<dyn LockAdmin>,
    prefix: String,
}

impl AdminSuite {
    /// A suite for `store`. An `Arc` of a store works too.
    pub fn new(store: impl LockAdmin) -> Self {
        Self {
            store: Arc::new(store),
            prefix: format!("ad{:08x}", random_u64() & 0xffff_ffff),
        }
    }

    /// Runs every case and panics, naming each failed case and why, if any failed.
    ///
    /// # Panics
    ///
    /// When the store breaks the contract.
    pub async fn run(self) {
        let report = self.report().await;
        assert!(
            report.is_empty(),
            "lock admin conformance failed:\n{report}"
        );
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
        case!(list_and_entry_show_rows_as_acquired);
        case!(unlock_as_listed_frees_and_keeps_the_row);
        case!(unlock_after_retake_by_same_owner_refused);
        case!(unlock_with_other_values_refused);
        case!(unlock_of_free_or_unknown_lock_refused);
        case!(force_unlock_frees_whoever_holds_it);
        case!(freeing_keeps_the_recorded_fire);
        case!(ddl_and_create_table_agree);
        failures
    }

    fn name(&self, case: &str) -> String {
        format!("{}-{case}", self.prefix)
    }

    async fn acquire(&self, name: &str, owner: &str) -> Result<LockRecord, String> {
        self.store
            .acquire(name, Duration::from_mins(1), owner)
            .await
            .map_err(|e| format!("acquire({name:?}, {owner:?}) failed: {e}"))?
            .ok_or_else(|| format!("acquire({name:?}, {owner:?}) was refused on a free lock"))
    }

    async fn release(&self, record: &LockRecord) -> CaseResult {
        match self.store.release(record, Duration::ZERO).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!("release({record}) returned false")),
            Err(e) => Err(format!("release({record}) failed: {e}")),
        }
    }

    async fn entry(&self, name: &str) -> Result<Option<LockEntry>, String> {
        self.store
            .entry(name)
            .await
            .map_err(|e| format!("entry({name:?}) failed: {e}"))
    }

    async fn must_entry(&self, name: &str) -> Result<LockEntry, String> {
        self.entry(name)
            .await?
            .ok_or_else(|| format!("entry({name:?}) found no row"))
    }

    async fn unlock(&self, expected: &LockRecord) -> Result<bool, String> {
        self.store
            .unlock(expected, "admin-suite")
            .await
            .map_err(|e| format!("unlock({expected}) failed: {e}"))
    }

    /// Whether `name` is held, asked the way a replica would, by another owner's acquire.
    async fn still_held(&self, name: &str, why: &str) -> CaseResult {
        match self
            .store
            .acquire(name, Duration::from_mins(1), "admin-suite-probe")
            .await
        {
            Ok(None) => Ok(()),
            Ok(Some(r)) => Err(format!("the lock was free {why} ({r})")),
            Err(e) => Err(format!("acquire({name:?}) failed: {e}")),
        }
    }

    /// `entry` shows exactly `record`'s acquisition. When `extended`, `lock_until` is not compared.
    fn same(entry: &LockEntry, record: &LockRecord) -> CaseResult {
        let row = entry.record();
        if row.name() == record.name()
            && row.owner() == record.owner()
            && row.locked_at() == record.locked_at()
            && row.fencing_token() == record.fencing_token()
        {
            Ok(())
        } else {
            Err(format!("listed {row}, acquired {record}"))
        }
    }

    async fn list_and_entry_show_rows_as_acquired(&self) -> CaseResult {
        let (held, free) = (self.name("list-1-held"), self.name("list-2-free"));
        let held_record = self.acquire(&held, "owner-a").await?;
        let free_record = self.acquire(&free, "owner-b").await?;
        self.release(&free_record).await?;
        let listed: Vec<LockEntry> = self
            .store
            .list()
            .await
            .map_err(|e| format!("list failed: {e}"))?
            .into_iter()
            .filter(|e| e.record().name().starts_with(&self.prefix))
            .collect();
        let names: Vec<&str> = listed.iter().map(|e| e.record().name()).collect();
        let pos = |n: &str| names.iter().position(|x| *x == n);
        let (Some(h), Some(f)) = (pos(&held), pos(&free)) else {
            return Err(format!("list is missing a row: {names:?}"));
        };
        if h > f {
            return Err(format!("list is not in name order: {names:?}"));
        }
        let (held_entry, free_entry) = (&listed[h], &listed[f]);
        Self::same(held_entry, &held_record)?;
        Self::same(free_entry, &free_record)?;
        if held_entry.record().lock_until() != held_record.lock_until() {
            return Err(format!(
                "listed lock_until {} but acquired {}",
                held_entry.record().lock_until(),
                held_record.lock_until()
            ));
        }
        if !held_entry.is_held() || free_entry.is_held() {
            return Err(format!(
                "held/free wrong: {held_entry} and {free_entry} (store now {})",
                held_entry.store_now()
            ));
        }
        match held_entry.remaining() {
            Some(left) if left <= Duration::from_mins(1) => {}
            other => return Err(format!("a 1 min lock has {other:?} left")),
        }
        if free_entry.remaining().is_some() {
            return Err(format!("a free lock has time left: {free_entry}"));
        }
        let entry = self.must_entry(&held).await?;
        Self::same(&entry, &held_record)?;
        if !entry.is_held() {
            return Err(format!("entry of a held lock says free: {entry}"));
        }
        if let Some(e) = self.entry(&self.name("list-unknown")).await? {
            return Err(format!("entry of a never-used name: {e}"));
        }
        self.release(&held_record).await
    }

    async fn unlock_as_listed_frees_and_keeps_the_row(&self) -> CaseResult {
        let name = self.name("unlock");
        let record = self.acquire(&name, "owner-a").await?;
        let listed = self.must_entry(&name).await?;
        if !self.unlock(listed.record()).await? {
            return Err("unlock with the listed values was refused".into());
        }
        let after = self.must_entry(&name).await?;
        if after.is_held() {
            return Err(format!("still held after unlock: {after}"));
        }
        Self::same(&after, &record).map_err(|e| format!("unlock changed the row: {e}"))?;
        if after.record().lock_until() > after.store_now() {
            return Err(format!("lock_until after unlock is in the future: {after}"));
        }
        let next = self.acquire(&name, "owner-b").await?;
        if let (Some(old), Some(new)) = (record.fencing_token(), next.fencing_token())
            && new <= old
        {
            return Err(format!("token {new} after unlock, {old} before"));
        }
        self.release(&next).await
    }

    async fn unlock_after_retake_by_same_owner_refused(&self) -> CaseResult {
        let name = self.name("retaken");
        let first = self.acquire(&name, "owner-a").await?;
        let listed = self.must_entry(&name).await?;
        // The same owner takes it again; on a store without tokens, until the new acquisition
        // has its own locked_at (the store's clock moved on).
        let mut second;
        let mut rounds = 0;
        self.release(&first).await?;
        loop {
            second = self.acquire(&name, "owner-a").await?;
            if second.locked_at() != first.locked_at()
                || second.fencing_token() != first.fencing_token()
            {
                break;
            }
            rounds += 1;
            if rounds > 1000 {
                return Err("the store's clock did not move in 1000 acquisitions".into());
            }
            tokio::task::yield_now().await;
            self.release(&second).await?;
        }
        if self.unlock(listed.record()).await? {
            return Err(
                "an unlock with stale values freed a newer acquisition of the same owner".into(),
            );
        }
        self.still_held(&name, "after a refused stale unlock")
            .await?;
        let now = self.must_entry(&name).await?;
        Self::same(&now, &second).map_err(|e| format!("a refused unlock changed the row: {e}"))?;
        self.release(&second).await
    }

    async fn unlock_with_other_values_refused(&self) -> CaseResult {
        let name = self.name("mismatch");
        let record = self.acquire(&name, "owner-a").await?;
        let second = chrono::Duration::seconds(1);
        let wrong = |owner: &str, at: DateTime<Utc>, token: Option<i64>| {
            LockRecord::new(&name, owner, at, record.lock_until()).with_fencing_token(token)
        };
        let mut variants = vec![
            (
                "another owner",
                wrong("owner-b", record.locked_at(), record.fencing_token()),
            ),
            (
                "a later locked_at",
                wrong(
                    "owner-a",
                    record.locked_at() + second,
                    record.fencing_token(),
                ),
            ),
            (
                "an earlier locked_at",
                wrong(
                    "owner-a",
                    record.locked_at() - second,
                    record.fencing_token(),
                ),
            ),
        ];
        if let Some(token) = record.fencing_token() {
            variants.push((
                "another token",
                wrong("owner-a", record.locked_at(), Some(token - 1)),
            ));
            variants.push(("no token", wrong("owner-a", record.locked_at(), None)));
        }
        for (what, expected) in variants {
            match self.store.unlock(&expected, "admin-suite").await {
                Ok(false) => {}
                // A record without the token the store has may be rejected as bad input.
                Err(e) if expected.fencing_token().is_none() && e.is_invalid_config() => {}
                Ok(true) => return Err(format!("unlock with {what} freed the lock")),
                Err(e) => return Err(format!("unlock with {what} failed: {e}")),
            }
            self.still_held(&name, &format!("after an unlock with {what}"))
                .await?;
        }
        self.release(&record).await
    }

    async fn unlock_of_free_or_unknown_lock_refused(&self) -> CaseResult {
        let name = self.name("free");
        let record = self.acquire(&name, "owner-a").await?;
        self.release(&record).await?;
        let listed = self.must_entry(&name).await?;
        if self.unlock(listed.record()).await? {
            return Err("unlock of a free lock returned true".into());
        }
        let unknown = self.name("never-used");
        let now = Utc::now();
        let ghost = LockRecord::new(&unknown, "owner-a", now, now)
            .with_fencing_token(record.fencing_token());
        if self.unlock(&ghost).await? {
            return Err("unlock of a name without a row returned true".into());
        }
        if let Some(e) = self
            .store
            .force_unlock(&unknown, "admin-suite")
            .await
            .map_err(|e| format!("force_unlock of an unknown name failed: {e}"))?
        {
            return Err(format!("force_unlock of an unknown name freed {e}"));
        }
        if self.entry(&unknown).await?.is_some() {
            return Err("unlock created a row".into());
        }
        Ok(())
    }

    async fn force_unlock_frees_whoever_holds_it(&self) -> CaseResult {
        let name = self.name("force");
        let record = self.acquire(&name, "owner-a").await?;
        let freed = self
            .store
            .force_unlock(&name, "admin-suite")
            .await
            .map_err(|e| format!("force_unlock failed: {e}"))?
            .ok_or("force_unlock of a held lock freed nothing")?;
        Self::same(&freed, &record).map_err(|e| format!("force_unlock returned {e}"))?;
        if !freed.is_held() {
            return Err(format!("the freed entry says it was not held: {freed}"));
        }
        let after = self.must_entry(&name).await?;
        if after.is_held() {
            return Err(format!("still held after force_unlock: {after}"));
        }
        Self::same(&after, &record).map_err(|e| format!("force_unlock changed the row: {e}"))?;
        match self.store.force_unlock(&name, "admin-suite").await {
            Ok(None) => {}
            Ok(Some(e)) => return Err(format!("force_unlock of a free lock freed {e}")),
            Err(e) => return Err(format!("force_unlock of a free lock failed: {e}")),
        }
        let next = self.acquire(&name, "owner-b").await?;
        self.release(&next).await
    }

    async fn freeing_keeps_the_recorded_fire(&self) -> CaseResult {
        let name = self.name("fire");
        // A window around any plausible store clock, in whole milliseconds.
        let base = DateTime::from_timestamp_millis(Utc::now().timestamp_millis())
            .ok_or("the local clock is out of range")?;
        let fire = Fire::new(
            base - chrono::Duration::hours(1),
            base + chrono::Duration::hours(1),
        )
        .map_err(|e| format!("a valid fire was rejected: {e}"))?;
        let at_most = Duration::from_mins(1);
        let claim = match self
            .store
            .claim_fire(&name, &fire, at_most, "owner-a")
            .await
        {
            Err(e) if e.is_unsupported() => return Ok(()),
            Err(e) => return Err(format!("claim_fire failed: {e}")),
            Ok(claim) => claim,
        };
        let FireClaim::Claimed(record) = claim else {
            return Err(format!(
                "the first claim of a fire was not claimed: {claim:?}"
            ));
        };
        let listed = self.must_entry(&name).await?;
        if listed.last_fire() != Some(fire.at()) {
            return Err(format!(
                "entry reports last_fire {:?}, the claimed fire is {}",
                listed.last_fire(),
                fire.at()
            ));
        }
        self.store
            .force_unlock(&name, "admin-suite")
            .await
            .map_err(|e| format!("force_unlock failed: {e}"))?
            .ok_or("force_unlock of a claimed fire's lock freed nothing")?;
        let after = self.must_entry(&name).await?;
        if after.last_fire() != Some(fire.at()) || after.is_held() {
            return Err(format!(
                "after force_unlock: held {}, last_fire {:?} (expected {})",
                after.is_held(),
                after.last_fire(),
                fire.at()
            ));
        }
        match self
            .store
            .claim_fire(&name, &fire, at_most, "owner-b")
            .await
        {
            Ok(FireClaim::Claimed(r)) => Err(format!(
                "the fire ran again after an unlock: {r} (first {record})"
            )),
            Ok(_) => Ok(()),
            Err(e) => Err(format!("the second claim_fire failed: {e}")),
        }
    }

    async fn ddl_and_create_table_agree(&self) -> CaseResult {
        let ddl = self.store.ddl();
        if ddl.as_deref().is_some_and(|d| d.trim().is_empty()) {
            return Err("ddl() is an empty statement".into());
        }
        match self.store.create_table().await {
            Ok(()) => Ok(()),
            Err(e) if e.is_unsupported() && ddl.is_none() => Ok(()),
            Err(e) => Err(format!(
                "create_table on an existing table failed (ddl: {ddl:?}): {e}"
            )),
        }
    }
}
