//! A lock store of your own: implement [`LockProvider`] on an in-house service, then prove it
//! with the conformance suite. `cargo run -p shedlock-examples --example custom_store` (takes a few seconds).
//!
//! The "in-house service" here is a versioned key-value store with compare-and-set, the shape of
//! etcd, Consul or a table with a version column. A lock is one key; every change is a
//! compare-and-set against the version just read, so two replicas racing for a free lock cannot
//! both win. The service has its own clock and the provider only ever uses that one (contract
//! rule 1: replicas' clocks never matter).
//!
//! In your crate, run the suite from a test (`shedlock-core`'s `testkit` feature):
//!
//! ```ignore
//! #[tokio::test]
//! async fn kv_store_conforms() {
//!     ConformanceSuite::new(KvLockProvider::new(KvService::connect())).run().await;
//! }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shedlock_core::testkit::ConformanceSuite;
use shedlock_core::{
    Error, LockConfig, LockingTaskExecutor, Result,
    provider::{LockProvider, LockRecord, validate_at_least, validate_at_most, validate_name},
};
use tokio::time::Instant;

/// The in-house service: keys with a version that changes on every write, compare-and-set, and
/// the service's own clock.
#[derive(Debug)]
struct KvService {
    entries: Mutex<HashMap<String, Versioned>>,
    /// The service clock: wall time at start plus monotonic time since.
    started_wall: DateTime<Utc>,
    started: Instant,
}

#[derive(Debug, Clone)]
struct Versioned {
    version: u64,
    value: LockValue,
}

/// What the store keeps per lock: the four columns of ShedLock's table plus a fencing token.
#[derive(Debug, Clone)]
struct LockValue {
    owner: String,
    locked_at: DateTime<Utc>,
    lock_until: DateTime<Utc>,
    token: i64,
}

impl KvService {
    fn connect() -> Arc<Self> {
        Arc::new(Self {
            entries: Mutex::new(HashMap::new()),
            started_wall: Utc::now(),
            started: Instant::now(),
        })
    }

    /// The service's clock.
    fn now(&self) -> DateTime<Utc> {
        let elapsed = chrono::Duration::from_std(self.started.elapsed()).unwrap_or_default();
        self.started_wall + elapsed
    }

    /// The current value and its version (0 = absent).
    async fn get(&self, key: &str) -> (u64, Option<LockValue>) {
        tokio::task::yield_now().await; // a network round trip, in real life
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .get(key)
            .map_or((0, None), |v| (v.version, Some(v.value.clone())))
    }

    /// Writes `value` iff the key is still at `version`; `false` if someone wrote in between.
    async fn compare_and_set(&self, key: &str, version: u64, value: LockValue) -> bool {
        tokio::task::yield_now().await;
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let current = entries.get(key).map_or(0, |v| v.version);
        if current != version {
            return false;
        }
        entries.insert(
            key.to_owned(),
            Versioned {
                version: version + 1,
                value,
            },
        );
        true
    }
}

/// The [`LockProvider`] on the service: each operation reads, decides with the service's clock,
/// and writes with compare-and-set, retrying when it lost a race.
#[derive(Debug)]
struct KvLockProvider {
    kv: Arc<KvService>,
}

fn until(now: DateTime<Utc>, duration: Duration) -> Result<DateTime<Utc>> {
    chrono::Duration::from_std(duration)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .ok_or_else(|| Error::backend_message(format!("{duration:?} is out of the store's range")))
}

/// Whether the stored lock is the acquisition `record` describes (same owner, same token).
fn is_ours(value: &LockValue, record: &LockRecord) -> bool {
    value.owner == record.owner() && Some(value.token) == record.fencing_token()
}

#[async_trait]
impl LockProvider for KvLockProvider {
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> Result<Option<LockRecord>> {
        // Bad names and durations are configuration errors, found before the store is asked.
        validate_name(name, self.max_name_len())?;
        validate_at_most(at_most)?;
        loop {
            let (version, current) = self.kv.get(name).await;
            let now = self.kv.now();
            if current.as_ref().is_some_and(|c| c.lock_until > now) {
                return Ok(None); // held: a skip, not an error
            }
            let value = LockValue {
                owner: owner.to_owned(),
                locked_at: now,
                lock_until: until(now, at_most)?,
                token: current.map_or(1, |c| c.token + 1),
            };
            if self.kv.compare_and_set(name, version, value.clone()).await {
                return Ok(Some(
                    LockRecord::new(name, owner, value.locked_at, value.lock_until)
                        .with_fencing_token(Some(value.token)),
                ));
            }
            // Someone wrote in between: look again (they probably hold it now).
        }
    }

    async fn extend(&self, record: &LockRecord, at_most: Duration) -> Result<Option<LockRecord>> {
        validate_at_most(at_most)?;
        loop {
            let (version, current) = self.kv.get(record.name()).await;
            let now = self.kv.now();
            let Some(mut value) = current.filter(|c| is_ours(c, record) && c.lock_until > now)
            else {
                return Ok(None);
            };
            value.lock_until = until(now, at_most)?;
            if self
                .kv
                .compare_and_set(record.name(), version, value.clone())
                .await
            {
                return Ok(Some(record.clone().with_lock_until(value.lock_until)));
            }
        }
    }

    async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool> {
        validate_at_least(at_least)?;
        loop {
            let (version, current) = self.kv.get(record.name()).await;
            let now = self.kv.now();
            let Some(mut value) = current.filter(|c| is_ours(c, record)) else {
                return Ok(false);
            };
            value.lock_until = now.max(until(value.locked_at, at_least)?);
            if self.kv.compare_and_set(record.name(), version, value).await {
                return Ok(true);
            }
        }
    }

    async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
        let (_, current) = self.kv.get(name).await;
        let now = self.kv.now();
        Ok(current.filter(|c| c.lock_until > now).map(|c| {
            LockRecord::new(name, c.owner, c.locked_at, c.lock_until)
                .with_fencing_token(Some(c.token))
        }))
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let kv = KvService::connect();

    // 1. The contract, checked: panics with the list of failed cases if the store breaks it.
    println!("running the conformance suite on KvLockProvider (a few seconds)...");
    ConformanceSuite::new(KvLockProvider { kv: kv.clone() })
        .run()
        .await;
    println!("KvLockProvider conforms");

    // 2. Then use it like any store.
    let executor = LockingTaskExecutor::new(KvLockProvider { kv })?;
    let cfg = LockConfig::builder("nightly-report")
        .at_most(Duration::from_mins(1))
        .at_least(Duration::from_secs(5))
        .build()?;
    let first = executor.execute(&cfg, async { "report written" }).await?;
    println!("first run: {first:?}");
    // at_least keeps the lock 5 s: a second replica firing now skips.
    let second = executor
        .execute(&cfg, async { "report written again" })
        .await?;
    println!("second run: {second:?} (skipped: at_least holds the lock)");
    assert!(first.is_some() && second.is_none());
    Ok(())
}
