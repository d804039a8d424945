//! `RedisLockProvider` against a real Redis (`SHEDLOCK_REDIS_URL`; skipped without it, failing
//! under `SHEDLOCK_REQUIRE_DB=1`). Every test has its own key prefix and deletes its own keys at
//! the end; nothing flushes the shared server.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use shedlock_core::testkit::ConformanceSuite;
use shedlock_core::{
    LeaderLatch, LeaderLatchConfig, LockConfig, LockingTaskExecutor,
    admin::LockAdmin,
    provider::{ClaimRequest, Fire, FireClaim, LockProvider},
    scheduled_lock,
};
use shedlock_redis::redis::{self, AsyncCommands as _};
use shedlock_redis::{RedisLockProvider, testing};
use tokio::sync::Barrier;
use tokio::time::Instant;

const MIN: Duration = Duration::from_mins(1);

/// A provider on its own prefix, and a plain connection to look at and clean up its keys.
struct Fixture {
    provider: Arc<RedisLockProvider>,
    prefix: String,
    conn: redis::aio::MultiplexedConnection,
}

impl Fixture {
    async fn new(label: &str) -> Option<Self> {
        let url = testing::redis_url()?;
        Some(Self::with_prefix(&url, testing::unique_prefix(label)).await)
    }

    async fn with_prefix(url: &str, prefix: String) -> Self {
        let provider = RedisLockProvider::builder(url)
            .key_prefix(prefix.clone())
            .connect()
            .await
            .expect("connect to SHEDLOCK_REDIS_URL");
        let conn = redis::Client::open(url)
            .expect("a valid URL")
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        Self {
            provider: Arc::new(provider),
            prefix,
            conn,
        }
    }

    fn key(&self, name: &str) -> Vec<u8> {
        let mut key = self.prefix.as_bytes().to_vec();
        key.extend_from_slice(name.as_bytes());
        key
    }

    async fn hash(&self, name: &str) -> Vec<(String, String)> {
        let mut conn = self.conn.clone();
        let mut fields: Vec<(String, String)> =
            conn.hgetall(self.key(name)).await.expect("HGETALL");
        fields.sort();
        fields
    }

    /// Deletes every key under this fixture's prefix (and only those).
    async fn cleanup(self) {
        let mut conn = self.conn.clone();
        let mut pattern = Vec::new();
        for &b in self.prefix.as_bytes() {
            if matches!(b, b'*' | b'?' | b'[' | b']' | b'\\') {
                pattern.push(b'\\');
            }
            pattern.push(b);
        }
        pattern.push(b'*');
        let mut cursor = 0_u64;
        loop {
            let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern.as_slice())
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await
                .expect("SCAN");
            for key in keys {
                let _: () = conn.del(key).await.expect("DEL");
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn passes_the_conformance_suite() {
    let Some(f) = Fixture::new("conformance").await else {
        return;
    };
    ConformanceSuite::new(Arc::clone(&f.provider)).run().await;
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn lock_keys_have_no_ttl_and_survive_release() {
    let Some(f) = Fixture::new("ttl").await else {
        return;
    };
    let record = f
        .provider
        .acquire("job", MIN, "me")
        .await
        .unwrap()
        .expect("free");
    let mut conn = f.conn.clone();
    let ttl: i64 = conn.ttl(f.key("job")).await.unwrap();
    assert_eq!(ttl, -1, "a lock key carries no Redis TTL");
    assert!(f.provider.release(&record, Duration::ZERO).await.unwrap());
    let exists: bool = conn.exists(f.key("job")).await.unwrap();
    assert!(exists, "a release never deletes the record");
    let hash = f.hash("job").await;
    assert!(
        hash.contains(&("locked_by".into(), "me".into())),
        "{hash:?}"
    );
    // A skip writes nothing.
    let again = f
        .provider
        .acquire("job", MIN, "me")
        .await
        .unwrap()
        .expect("free");
    let before = f.hash("job").await;
    assert!(
        f.provider
            .acquire("job", MIN, "other")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        f.hash("job").await,
        before,
        "a refused acquire changed the record"
    );
    assert!(f.provider.release(&again, Duration::ZERO).await.unwrap());
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn tokens_increase_even_when_the_key_is_deleted_by_hand() {
    let Some(f) = Fixture::new("tokens").await else {
        return;
    };
    let mut last = 0;
    for round in 0..5 {
        let record = f
            .provider
            .acquire("job", MIN, "me")
            .await
            .unwrap()
            .expect("free");
        let token = record.fencing_token().expect("Redis has tokens");
        assert!(token > last, "round {round}: {token} after {last}");
        last = token;
        assert!(f.provider.release(&record, Duration::ZERO).await.unwrap());
        if round == 2 {
            let mut conn = f.conn.clone();
            let _: () = conn.del(f.key("job")).await.unwrap();
        }
    }
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn the_executor_and_the_macro_work_over_redis() {
    let Some(f) = Fixture::new("executor").await else {
        return;
    };
    let executor = LockingTaskExecutor::builder(Arc::clone(&f.provider))
        .owner_id("replica-a")
        .build()
        .unwrap();
    let other = LockingTaskExecutor::builder(Arc::clone(&f.provider))
        .owner_id("replica-b")
        .build()
        .unwrap();
    let cfg = LockConfig::builder("report").at_most(MIN).build().unwrap();
    let ran = executor
        .execute(&cfg, async {
            // Held here: the other replica skips.
            let skipped = other.execute(&cfg, async { 1 }).await.unwrap();
            assert!(skipped.is_none(), "ran while replica-a held the lock");
            shedlock_core::current::assert_locked();
            shedlock_core::current_lock()
                .and_then(|lock| lock.fencing_token())
                .expect("a fencing token inside the task")
        })
        .await
        .unwrap();
    assert!(ran.is_some());
    // Released: the other replica runs now.
    assert_eq!(other.execute(&cfg, async { 2 }).await.unwrap(), Some(2));

    #[scheduled_lock(name = "macro-{tenant}", at_most = "1m", executor = executor)]
    async fn job(executor: &LockingTaskExecutor, tenant: &str) -> usize {
        tenant.len()
    }
    assert_eq!(job(&executor, "eu").await.unwrap(), Some(2));
    let held = f
        .provider
        .acquire("macro-us", MIN, "someone")
        .await
        .unwrap()
        .expect("free");
    assert_eq!(job(&executor, "us").await.unwrap(), None, "held elsewhere");
    assert!(f.provider.release(&held, Duration::ZERO).await.unwrap());
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn the_leader_latch_elects_one_and_hands_over_on_close() {
    let Some(f) = Fixture::new("latch").await else {
        return;
    };
    let config = |owner: &str| {
        LeaderLatchConfig::builder("leader")
            .owner_id(owner)
            .lease(Duration::from_secs(3))
            .renew_interval(Duration::from_secs(1))
            .renew_deadline(Duration::from_secs(2))
            .acquire_interval(Duration::from_millis(300))
            .acquire_jitter(Duration::from_millis(50))
            .call_timeout(Duration::from_millis(300))
            .build()
            .unwrap()
    };
    let a = LeaderLatch::start(Arc::clone(&f.provider), config("a")).unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), a.wait_for_leadership())
        .await
        .expect("a leads")
        .expect("running");
    let b = LeaderLatch::start(Arc::clone(&f.provider), config("b")).unwrap();
    // b follows while a renews: a's row stays a's over more than a lease.
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        assert!(!b.is_leader(), "two leaders");
        assert!(a.is_leader(), "the leader lost its term");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let holder = f.provider.holder("leader").await.unwrap().expect("held");
    assert_eq!(shedlock_core::admin::election_owner_id(holder.owner()), "a");
    assert!(
        holder
            .owner()
            .ends_with(shedlock_core::admin::ELECTION_MARK),
        "the latch marks its row"
    );
    let closed_at = Instant::now();
    a.close().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(3), b.wait_for_leadership())
        .await
        .expect("b takes over within an acquire interval or so")
        .expect("running");
    let handover = closed_at.elapsed();
    assert!(
        handover < Duration::from_millis(300 + 50 + 1000),
        "handover took {handover:?}"
    );
    assert!(second.fencing_token() > first.fencing_token());
    b.close().await.unwrap();
    f.cleanup().await;
}

/// The server's now, as a too-early claim reports it.
async fn server_now(f: &Fixture) -> DateTime<Utc> {
    let far = Utc::now() + chrono::Duration::days(3650);
    let fire = Fire::new(far, far + chrono::Duration::days(1)).unwrap();
    match f
        .provider
        .claim_fire("clock", &fire, MIN, "me")
        .await
        .unwrap()
    {
        FireClaim::TooEarly { now } => now,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn claim_fire_meets_every_case_in_order_and_writes_only_when_it_claims() {
    let Some(f) = Fixture::new("fire").await else {
        return;
    };
    let p = &f.provider;
    let now = server_now(&f).await;
    let sec = chrono::Duration::seconds;
    let f1 = Fire::new(now - sec(1), now + sec(60)).unwrap();

    // Too early: F after the server's now. Nothing written.
    let later = Fire::new(now + sec(600), now + sec(1200)).unwrap();
    match p.claim_fire("job", &later, MIN, "a").await.unwrap() {
        FireClaim::TooEarly { now: seen } => assert!(seen >= now),
        other => panic!("{other:?}"),
    }
    assert!(f.hash("job").await.is_empty(), "too early wrote a record");
    // Window passed: next at or before now.
    let past = Fire::new(now - sec(120), now - sec(60)).unwrap();
    assert!(matches!(
        p.claim_fire("job", &past, MIN, "a").await.unwrap(),
        FireClaim::WindowPassed { .. }
    ));
    assert!(
        f.hash("job").await.is_empty(),
        "window passed wrote a record"
    );

    // Held by a plain lock: counted, nothing recorded.
    let plain = p.acquire("job", MIN, "plain").await.unwrap().expect("free");
    let before = f.hash("job").await;
    assert!(matches!(
        p.claim_fire("job", &f1, MIN, "a").await.unwrap(),
        FireClaim::Held { .. }
    ));
    assert_eq!(f.hash("job").await, before, "a held claim wrote");
    assert!(p.release(&plain, Duration::ZERO).await.unwrap());

    // Claimed: F recorded, the lock taken with a new, greater token.
    let claim = p.claim_fire("job", &f1, MIN, "a").await.unwrap();
    let record = claim.claimed().expect("claimed").clone();
    assert_eq!(record.owner(), "a");
    assert!(record.fencing_token() > plain.fencing_token());
    assert_eq!(
        record.lock_until() - record.locked_at(),
        chrono::Duration::from_std(MIN).unwrap()
    );
    let held = p.holder("job").await.unwrap().expect("held after a claim");
    assert_eq!(held, record);
    let entry = p.entry("job").await.unwrap().expect("a record");
    assert_eq!(entry.last_fire(), Some(f1.at()));

    // Claimed elsewhere: while held, after release, after force_unlock.
    let before = f.hash("job").await;
    let elsewhere = |c: FireClaim| match c {
        FireClaim::ClaimedElsewhere { recorded, .. } => assert_eq!(recorded, f1.at()),
        other => panic!("{other:?}"),
    };
    elsewhere(p.claim_fire("job", &f1, MIN, "b").await.unwrap());
    assert_eq!(f.hash("job").await, before, "claimed elsewhere wrote");
    assert!(p.release(&record, Duration::ZERO).await.unwrap());
    elsewhere(p.claim_fire("job", &f1, MIN, "b").await.unwrap());
    // An older fire than the recorded one is claimed elsewhere too.
    let older = Fire::new(f1.at() - sec(30), f1.next()).unwrap();
    elsewhere(p.claim_fire("job", &older, MIN, "b").await.unwrap());
    let relock = p.acquire("job", MIN, "c").await.unwrap().expect("free");
    assert!(p.force_unlock("job", "test").await.unwrap().is_some());
    elsewhere(p.claim_fire("job", &f1, MIN, "b").await.unwrap());
    assert_eq!(
        p.entry("job").await.unwrap().expect("a record").last_fire(),
        Some(f1.at()),
        "the recorded fire survives release and unlock"
    );
    let _ = relock;

    // The next fire is claimed again, by anyone, once the lock is free.
    let f2 = Fire::new(f1.at() + chrono::Duration::milliseconds(500), now + sec(60)).unwrap();
    let second = p.claim_fire("job", &f2, MIN, "b").await.unwrap();
    let second = second.claimed().expect("the next fire");
    assert!(second.fencing_token() > record.fencing_token());
    assert_eq!(
        p.entry("job").await.unwrap().unwrap().last_fire(),
        Some(f2.at())
    );
    // Released with at_least: the lock holds, the fire stays claimed.
    assert!(p.release(second, Duration::from_secs(30)).await.unwrap());
    assert!(p.holder("job").await.unwrap().is_some());
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn concurrent_claimers_of_one_fire_make_exactly_one_claim() {
    let Some(f) = Fixture::new("fire-race").await else {
        return;
    };
    let now = server_now(&f).await;
    for round in 0..10 {
        let at = now - chrono::Duration::seconds(1) + chrono::Duration::milliseconds(round);
        let fire = Fire::new(at, now + chrono::Duration::seconds(60)).unwrap();
        let barrier = Arc::new(Barrier::new(8));
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let (p, barrier) = (Arc::clone(&f.provider), Arc::clone(&barrier));
                tokio::spawn(async move {
                    barrier.wait().await;
                    p.claim_fire("job", &fire, MIN, &format!("replica-{i}"))
                        .await
                })
            })
            .collect();
        let mut claimed = Vec::new();
        for task in tasks {
            match task.await.unwrap().unwrap() {
                FireClaim::Claimed(record) => claimed.push(record),
                FireClaim::ClaimedElsewhere { recorded, .. } => assert_eq!(recorded, at),
                other => panic!("round {round}: {other:?}"),
            }
        }
        assert_eq!(claimed.len(), 1, "round {round}: {claimed:?}");
        assert!(
            f.provider
                .release(&claimed[0], Duration::ZERO)
                .await
                .unwrap()
        );
    }
    f.cleanup().await;
}

/// A batch of fire claims in which some keys hold something else than their lock's record: a
/// hash without a record, a string, another lock's record (overlapping prefixes). Those claims
/// fail alone, with the single claim's error, and their keys are left as they were. The other
/// claims are made, and a name given twice is refused the second time.
#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn a_batch_fails_only_the_claims_whose_key_is_not_their_record() {
    let Some(f) = Fixture::new("fire-batch").await else {
        return;
    };
    let p = &f.provider;
    let mut conn = f.conn.clone();
    let _: () = conn.hset(f.key("hash"), "field", "1").await.unwrap();
    let _: () = conn.set(f.key("string"), "x").await.unwrap();
    let _: () = conn
        .hset(f.key("foreign"), "name", "another lock")
        .await
        .unwrap();
    let now = server_now(&f).await;
    let fire = Fire::new(
        now - chrono::Duration::seconds(1),
        now + chrono::Duration::seconds(60),
    )
    .unwrap();
    let names = ["a", "hash", "b", "string", "foreign", "a", "c"];
    let claims: Vec<ClaimRequest<'_>> = names
        .iter()
        .map(|name| ClaimRequest::new(name, &fire, MIN))
        .collect();
    let answers = p.claim_fires(&claims, "me").await.expect("the batch");
    assert_eq!(answers.len(), names.len());
    for (i, (name, answer)) in names.iter().zip(&answers).enumerate() {
        match (i, answer) {
            (0 | 2 | 6, Ok(FireClaim::Claimed(record))) => {
                assert_eq!((record.name(), record.owner()), (*name, "me"));
                assert_eq!(p.holder(name).await.unwrap().as_ref(), Some(record));
                let entry = p.entry(name).await.unwrap().expect("a record");
                assert_eq!(entry.last_fire(), Some(fire.at()));
            }
            (1 | 3 | 4, Err(error)) => {
                assert!(error.is_invalid_config(), "{name}: {error}");
                let single = p.claim_fire(name, &fire, MIN, "me").await.unwrap_err();
                assert_eq!(error.to_string(), single.to_string(), "{name}");
            }
            (5, Err(error)) => {
                assert!(error.is_invalid_config(), "{error}");
                assert!(error.to_string().contains("twice"), "{error}");
            }
            _ => panic!("{name:?}: {answer:?}"),
        }
    }
    let message = |i: usize| answers[i].as_ref().unwrap_err().to_string();
    assert!(message(1).contains("not a lock record"), "{}", message(1));
    assert!(message(3).contains("not a lock record"), "{}", message(3));
    assert!(message(4).contains("overlaps"), "{}", message(4));
    // The keys that are not records are left as they were.
    assert_eq!(f.hash("hash").await, [("field".into(), "1".into())]);
    assert_eq!(
        f.hash("foreign").await,
        [("name".into(), "another lock".into())]
    );
    let value: String = conn.get(f.key("string")).await.unwrap();
    assert_eq!(value, "x");
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn admin_lists_and_unlocks_only_what_it_was_shown() {
    let Some(url) = testing::redis_url() else {
        return;
    };
    // Glob characters in the prefix: listing must escape them.
    let base = testing::unique_prefix("admin");
    let f = Fixture::with_prefix(&url, format!("{base}g*?[ab]:")).await;
    // Its unescaped pattern would match this provider's keys.
    let neighbour = Fixture::with_prefix(&url, format!("{base}gXYa:")).await;
    let p = &f.provider;
    assert!(p.ddl().is_none());
    p.create_table().await.unwrap();
    assert!(p.list().await.unwrap().is_empty());

    let a = p.acquire("a-held", MIN, "me").await.unwrap().expect("free");
    let b = p.acquire("b-free", MIN, "me").await.unwrap().expect("free");
    assert!(p.release(&b, Duration::ZERO).await.unwrap());
    let odd = "c [x]*?\n✓";
    p.acquire(odd, MIN, "me").await.unwrap().expect("free");
    neighbour
        .provider
        .acquire("other", MIN, "them")
        .await
        .unwrap()
        .expect("free");
    // Keys under the prefix that are not our records are left out.
    let mut conn = f.conn.clone();
    let _: () = conn.set(f.key("plain-string"), "x").await.unwrap();
    let _: () = conn
        .hset(f.key("foreign-hash"), "field", "1")
        .await
        .unwrap();

    let list = p.list().await.unwrap();
    let names: Vec<&str> = list.iter().map(|e| e.record().name()).collect();
    assert_eq!(names, ["a-held", "b-free", odd], "{list:?}");
    assert!(list[0].is_held() && !list[1].is_held() && list[2].is_held());
    assert_eq!(list[0].record(), &a);
    assert_eq!(
        list[1].record().owner(),
        "me",
        "a free row keeps its last holder"
    );

    // entry
    assert_eq!(p.entry("a-held").await.unwrap().unwrap().record(), &a);
    assert!(p.entry("missing").await.unwrap().is_none());

    // unlock refuses what it was not shown: wrong owner, wrong locked_at, wrong token.
    let wrong_owner =
        shedlock_core::provider::LockRecord::new("a-held", "you", a.locked_at(), a.lock_until())
            .with_fencing_token(a.fencing_token());
    assert!(!p.unlock(&wrong_owner, "test").await.unwrap());
    let wrong_token = a
        .clone()
        .with_fencing_token(a.fencing_token().map(|t| t + 1));
    assert!(!p.unlock(&wrong_token, "test").await.unwrap());
    assert!(p.holder("a-held").await.unwrap().is_some());
    // ... and exactly what it was shown, once.
    assert!(p.unlock(&a, "test").await.unwrap());
    assert!(p.holder("a-held").await.unwrap().is_none());
    assert!(!p.unlock(&a, "test").await.unwrap(), "already free");

    // The same owner acquired again: the old listing is stale.
    let again = p.acquire("a-held", MIN, "me").await.unwrap().expect("free");
    assert!(
        !p.unlock(&a, "test").await.unwrap(),
        "stale locked_at and token"
    );
    // force_unlock frees whoever holds it and says what it freed; then the listing is stale.
    let freed = p
        .force_unlock("a-held", "test")
        .await
        .unwrap()
        .expect("was held");
    assert_eq!(freed.record(), &again);
    assert!(freed.is_held());
    assert!(
        p.force_unlock("a-held", "test").await.unwrap().is_none(),
        "not held"
    );
    assert!(
        !p.unlock(&again, "test").await.unwrap(),
        "freed by force_unlock"
    );
    assert!(p.force_unlock("never", "test").await.unwrap().is_none());
    // The record stays, with its holder, and the token sequence goes on.
    let after = p.acquire("a-held", MIN, "me").await.unwrap().expect("free");
    assert!(after.fencing_token() > again.fencing_token());

    neighbour.cleanup().await;
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn odd_names_are_their_own_keys_and_bad_ones_are_refused() {
    let Some(f) = Fixture::new("names").await else {
        return;
    };
    let p = &f.provider;
    for name in [
        "a*b",
        "q?",
        "[x]",
        "back\\slash",
        "line\nbreak",
        "tab\tin",
        "ünï✓",
        "a:b",
    ] {
        let record = p
            .acquire(name, MIN, "me")
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{name:?} free"));
        assert_eq!(record.name(), name);
        assert_eq!(p.holder(name).await.unwrap().as_ref(), Some(&record));
        let mut conn = f.conn.clone();
        let exists: bool = conn.exists(f.key(name)).await.unwrap();
        assert!(exists, "{name:?} is stored under prefix + its bytes");
        assert!(p.release(&record, Duration::ZERO).await.unwrap());
    }
    // "a*b" is not a pattern: "aXb" is another lock.
    assert!(p.acquire("aXb", MIN, "me").await.unwrap().is_some());

    let long = "x".repeat(65);
    for bad in ["", " padded", "nul\0", long.as_str()] {
        let err = p.acquire(bad, MIN, "me").await.unwrap_err();
        assert!(err.is_invalid_config(), "{bad:?}: {err}");
        let err = p.holder(bad).await.unwrap_err();
        assert!(err.is_invalid_config(), "{bad:?}: {err}");
    }
    assert!(
        p.acquire(&"ü".repeat(64), MIN, "me")
            .await
            .unwrap()
            .is_some(),
        "characters, not bytes"
    );
    let err = p.acquire("job", MIN, "").await.unwrap_err();
    assert!(err.is_invalid_config(), "{err}");
    let err = p.acquire("job", Duration::ZERO, "me").await.unwrap_err();
    assert!(err.is_invalid_config(), "{err}");

    // A key under the prefix that is not a lock record: a clear error, never overwritten.
    let mut conn = f.conn.clone();
    let _: () = conn.set(f.key("taken"), "someone else's").await.unwrap();
    let err = p.acquire("taken", MIN, "me").await.unwrap_err();
    assert!(err.is_invalid_config(), "{err}");
    assert!(err.to_string().contains("not a lock record"), "{err}");
    let value: String = conn.get(f.key("taken")).await.unwrap();
    assert_eq!(value, "someone else's");
    let _: () = conn.hset(f.key("hash"), "field", "1").await.unwrap();
    let err = p.acquire("hash", MIN, "me").await.unwrap_err();
    assert!(
        err.is_invalid_config() && err.to_string().contains("not a lock record"),
        "{err}"
    );
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn overlapping_prefixes_never_share_a_lock() {
    let Some(url) = testing::redis_url() else {
        return;
    };
    let base = testing::unique_prefix("overlap");
    let short = Fixture::with_prefix(&url, base.clone()).await;
    let long = Fixture::with_prefix(&url, format!("{base}b:")).await;
    // Both map to the key <base>b:x.
    long.provider
        .acquire("x", MIN, "me")
        .await
        .unwrap()
        .expect("free");
    let err = short.provider.acquire("b:x", MIN, "me").await.unwrap_err();
    assert!(err.is_invalid_config(), "{err}");
    assert!(err.to_string().contains("overlaps"), "{err}");
    assert!(
        short.provider.list().await.unwrap().is_empty(),
        "not its lock"
    );
    assert_eq!(long.provider.list().await.unwrap().len(), 1);
    long.cleanup().await;
    short.cleanup().await;
}

#[tokio::test]
async fn bad_addresses_fail_clearly_and_in_time() {
    // No server needed.
    let err = RedisLockProvider::connect("http://nowhere")
        .await
        .unwrap_err();
    assert!(err.is_invalid_config(), "{err}");
    assert!(err.to_string().contains("redis://"), "{err}");
    let err = RedisLockProvider::builder("redis://127.0.0.1")
        .key_prefix("")
        .build()
        .unwrap_err();
    assert!(err.is_invalid_config(), "{err}");
    let err = RedisLockProvider::builder("redis://127.0.0.1")
        .call_timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert!(err.is_invalid_config(), "{err}");

    // A closed port: refused, reported as such, well within the timeout.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let timeout = Duration::from_secs(3);
    let start = Instant::now();
    let err = RedisLockProvider::builder(format!("redis://:secret@127.0.0.1:{port}").as_str())
        .call_timeout(timeout)
        .connect()
        .await
        .unwrap_err();
    let took = start.elapsed();
    assert!(err.is_backend() || err.is_timeout(), "{err}");
    assert!(took < timeout + Duration::from_millis(500), "took {took:?}");
    let message = format!("{err} {err:?}");
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(!message.contains("secret"), "credentials leaked: {message}");
    let provider = RedisLockProvider::builder(format!("redis://:secret@127.0.0.1:{port}").as_str())
        .build()
        .unwrap();
    assert!(!format!("{provider:?}").contains("secret"));
}

#[test]
fn building_outside_a_runtime_is_an_error_not_a_panic() {
    let err = RedisLockProvider::builder("redis://127.0.0.1")
        .build()
        .unwrap_err();
    assert!(err.is_invalid_config(), "{err}");
    assert!(err.to_string().contains("tokio runtime"), "{err}");
}

/// A measurement, not a check (run with `--ignored --nocapture`): a skipped acquire and an
/// acquire + release cycle against the server's floor, a `PING` on a plain connection.
#[tokio::test]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn measure_skip_and_cycle_against_ping() {
    const N: u32 = 2000;
    let Some(f) = Fixture::new("measure").await else {
        return;
    };
    let mut conn = f.conn.clone();
    let start = Instant::now();
    for _ in 0..N {
        let _: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
    }
    let ping = start.elapsed() / N;
    let held = f
        .provider
        .acquire("held", MIN, "me")
        .await
        .unwrap()
        .unwrap();
    let start = Instant::now();
    for _ in 0..N {
        assert!(
            f.provider
                .acquire("held", MIN, "you")
                .await
                .unwrap()
                .is_none()
        );
    }
    let skip = start.elapsed() / N;
    let start = Instant::now();
    for _ in 0..N {
        let r = f
            .provider
            .acquire("cycle", MIN, "me")
            .await
            .unwrap()
            .unwrap();
        assert!(f.provider.release(&r, Duration::ZERO).await.unwrap());
    }
    let cycle = start.elapsed() / N;
    let ratio = |d: Duration| d.as_secs_f64() / ping.as_secs_f64();
    eprintln!(
        "PING {ping:?}; skip {skip:?} ({:.2}x PING); acquire+release {cycle:?} ({:.2}x PING)",
        ratio(skip),
        ratio(cycle)
    );
    assert!(f.provider.release(&held, Duration::ZERO).await.unwrap());
    f.cleanup().await;
}
