//! Pauses of `RedisLockProvider` against a real Redis (`SHEDLOCK_REDIS_URL`; skipped without it,
//! failing under `SHEDLOCK_REQUIRE_DB=1`): the fire claim refuses a paused job's fire in its one
//! script, `pause`/`resume` keep the pause in the lock's hash, every pause, resume and unlock
//! records its actor, and schedulers count a paused job's fires and run them again after a resume. Every test has its own key prefix and deletes its own keys at the end;
//! nothing flushes the shared server.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use shedlock_core::testkit::PauseSuite;
use shedlock_core::{
    Job, LockingTaskExecutor, Schedule, Scheduler,
    admin::{ActionKind, LockAdmin},
    pause::{Pause, PauseFor},
    provider::{Fire, FireClaim, LockProvider},
};
use shedlock_redis::redis::{self, AsyncCommands as _};
use shedlock_redis::{RedisLockProvider, testing};
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
        let prefix = testing::unique_prefix(label);
        let provider = RedisLockProvider::builder(url.as_str())
            .key_prefix(prefix.clone())
            .connect()
            .await
            .expect("connect to SHEDLOCK_REDIS_URL");
        let conn = redis::Client::open(url.as_str())
            .expect("a valid URL")
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        Some(Self {
            provider: Arc::new(provider),
            prefix,
            conn,
        })
    }

    async fn hash(&self, name: &str) -> BTreeMap<String, String> {
        let mut conn = self.conn.clone();
        conn.hgetall(self.provider.key(name))
            .await
            .expect("HGETALL")
    }

    async fn now(&self) -> DateTime<Utc> {
        let mut conn = self.conn.clone();
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
        DateTime::from_timestamp_micros(secs * 1_000_000 + micros).unwrap()
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

fn sec(n: i64) -> chrono::Duration {
    chrono::Duration::seconds(n)
}

/// A fire whose window holds the server's `now` for a minute.
fn fire_at(at: DateTime<Utc>, now: DateTime<Utc>) -> Fire {
    Fire::new(at, now + sec(60)).unwrap()
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn passes_the_pause_suite() {
    let Some(f) = Fixture::new("pause-suite").await else {
        return;
    };
    // The server's clock has µs: a pause of 2 × 200 ms is waited out quickly.
    PauseSuite::new(Arc::clone(&f.provider))
        .time_unit(Duration::from_millis(200))
        .run()
        .await;
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn a_paused_fire_is_answered_paused_and_writes_nothing() {
    let Some(f) = Fixture::new("pause-fire").await else {
        return;
    };
    let p = &f.provider;
    let now = f.now().await;
    let f1 = fire_at(now - sec(10), now);
    let first = p.claim_fire("job", &f1, MIN, "a").await.unwrap();
    let first = first.claimed().expect("claimed").clone();
    assert!(p.release(&first, Duration::ZERO).await.unwrap());

    let before_pause = f.now().await;
    let pause = p
        .pause(
            "job",
            PauseFor::UntilResumed,
            Some("upstream down"),
            "ann@ops",
        )
        .await
        .unwrap();
    let after_pause = f.now().await;
    assert!(before_pause <= pause.since && pause.since <= after_pause);
    assert_eq!(pause.until, None);
    assert_eq!(pause.by, "ann@ops");
    assert_eq!(pause.reason.as_deref(), Some("upstream down"));

    // The next fire is refused while paused, by any replica, and nothing is written.
    let f2 = fire_at(now - sec(5), now);
    let before = f.hash("job").await;
    for owner in ["a", "b"] {
        match p.claim_fire("job", &f2, MIN, owner).await.unwrap() {
            FireClaim::Paused { now: seen, until } => {
                assert!(seen >= pause.since);
                assert_eq!(until, None);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(f.hash("job").await, before, "a paused claim wrote");
    let entry = p.entry("job").await.unwrap().expect("a record");
    assert_eq!(entry.last_fire(), Some(f1.at()), "the recorded fire stays");
    assert_eq!(entry.pause(), Some(&pause));
    assert!(entry.is_paused());
    assert!(!entry.is_held());
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn paused_wins_over_claimed_elsewhere_and_held_but_not_over_the_window() {
    let Some(f) = Fixture::new("pause-order").await else {
        return;
    };
    let p = &f.provider;
    let now = f.now().await;
    let f1 = fire_at(now - sec(10), now);

    // Claimed elsewhere (and held): the claim of f1 holds the lock and records f1.
    let claim = p.claim_fire("job", &f1, MIN, "a").await.unwrap();
    let record = claim.claimed().expect("claimed").clone();
    assert!(matches!(
        p.claim_fire("job", &f1, MIN, "b").await.unwrap(),
        FireClaim::ClaimedElsewhere { .. }
    ));
    let until = now + sec(3600);
    let pause = p
        .pause("job", PauseFor::Until(until), None, "ann")
        .await
        .unwrap();
    assert_eq!(pause.until, Some(until));
    let before = f.hash("job").await;
    match p.claim_fire("job", &f1, MIN, "b").await.unwrap() {
        FireClaim::Paused { until: seen, .. } => assert_eq!(seen, Some(until)),
        other => panic!("over claimed elsewhere: {other:?}"),
    }
    assert_eq!(f.hash("job").await, before, "a paused claim wrote");

    // Held by a plain lock, with an older recorded fire: paused too.
    assert!(p.release(&record, Duration::ZERO).await.unwrap());
    let plain = p.acquire("job", MIN, "plain").await.unwrap().expect("free");
    let before = f.hash("job").await;
    let f2 = fire_at(now - sec(5), now);
    assert!(matches!(
        p.claim_fire("job", &f2, MIN, "b").await.unwrap(),
        FireClaim::Paused { .. }
    ));
    // The window's checks come first: too early and window passed are answered as ever.
    let later = Fire::new(now + sec(600), now + sec(1200)).unwrap();
    assert!(matches!(
        p.claim_fire("job", &later, MIN, "b").await.unwrap(),
        FireClaim::TooEarly { .. }
    ));
    let past = Fire::new(now - sec(120), now - sec(60)).unwrap();
    assert!(matches!(
        p.claim_fire("job", &past, MIN, "b").await.unwrap(),
        FireClaim::WindowPassed { .. }
    ));
    assert_eq!(f.hash("job").await, before, "a refused claim wrote");
    assert_eq!(
        p.entry("job").await.unwrap().unwrap().last_fire(),
        Some(f1.at()),
        "no paused claim recorded a fire"
    );
    assert!(p.release(&plain, Duration::ZERO).await.unwrap());
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn acquire_extend_and_release_ignore_a_pause() {
    let Some(f) = Fixture::new("pause-acquire").await else {
        return;
    };
    let p = &f.provider;
    let first = p.acquire("job", MIN, "a").await.unwrap().expect("free");
    assert!(p.release(&first, Duration::ZERO).await.unwrap());
    p.pause("job", PauseFor::UntilResumed, None, "ann")
        .await
        .unwrap();
    let record = p
        .acquire("job", MIN, "a")
        .await
        .unwrap()
        .expect("paused, yet free");
    assert!(record.fencing_token() > first.fencing_token());
    assert!(p.acquire("job", MIN, "b").await.unwrap().is_none(), "held");
    assert!(p.extend(&record, MIN).await.unwrap().is_some());
    assert!(p.release(&record, Duration::ZERO).await.unwrap());
    let entry = p.entry("job").await.unwrap().unwrap();
    assert!(entry.is_paused(), "a lock's cycle keeps the pause");
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn resume_lets_the_next_claim_claim_and_a_second_resume_writes_nothing() {
    let Some(f) = Fixture::new("pause-resume").await else {
        return;
    };
    let p = &f.provider;
    let now = f.now().await;
    let fire = fire_at(now - sec(1), now);
    let pause = p
        .pause("job", PauseFor::For(MIN), Some("deploy"), "ann")
        .await
        .unwrap();
    assert_eq!(pause.until, Some(pause.since + sec(60)));
    assert!(matches!(
        p.claim_fire("job", &fire, MIN, "a").await.unwrap(),
        FireClaim::Paused { .. }
    ));
    let removed = p.resume("job", "bob").await.unwrap();
    assert_eq!(removed, Some(pause));
    let hash = f.hash("job").await;
    assert!(
        !hash.keys().any(|field| field.starts_with("paused_")),
        "{hash:?}"
    );
    let entry = p.entry("job").await.unwrap().unwrap();
    assert!(entry.pause().is_none() && !entry.is_paused());
    let claim = p.claim_fire("job", &fire, MIN, "a").await.unwrap();
    let claimed = claim.claimed().expect("resumed: claimed");
    assert_eq!(claimed.owner(), "a");

    // Nothing to resume: Ok(None), nothing written; nor for a name without a record.
    let before = f.hash("job").await;
    assert_eq!(p.resume("job", "carol").await.unwrap(), None);
    assert_eq!(f.hash("job").await, before);
    assert_eq!(p.resume("never", "carol").await.unwrap(), None);
    assert!(f.hash("never").await.is_empty());
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn a_short_pause_ends_by_itself_and_resume_still_returns_it() {
    let Some(f) = Fixture::new("pause-short").await else {
        return;
    };
    let p = &f.provider;
    let now = f.now().await;
    let fire = fire_at(now - sec(1), now);
    let pause = p
        .pause(
            "job",
            PauseFor::For(Duration::from_millis(300)),
            None,
            "ann",
        )
        .await
        .unwrap();
    let until = pause.until.expect("an end");
    assert_eq!(until - pause.since, chrono::Duration::milliseconds(300));
    // Polled until the server's clock passes the end; the claim before it is refused.
    let deadline = Instant::now() + Duration::from_secs(10);
    let claimed = loop {
        match p.claim_fire("job", &fire, MIN, "a").await.unwrap() {
            FireClaim::Paused { now, until: seen } => {
                assert!(now < until, "refused at {now}, after the end {until}");
                assert_eq!(seen, Some(until));
            }
            FireClaim::Claimed(record) => break record,
            other => panic!("{other:?}"),
        }
        assert!(Instant::now() < deadline, "the pause did not end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(claimed.locked_at() >= until, "claimed at {claimed}");
    let entry = p.entry("job").await.unwrap().unwrap();
    assert_eq!(
        entry.pause(),
        Some(&pause),
        "an ended pause stays until resumed"
    );
    assert!(!entry.is_paused());
    assert_eq!(p.resume("job", "bob").await.unwrap(), Some(pause));
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn pausing_a_name_without_a_record_creates_a_free_lock() {
    let Some(f) = Fixture::new("pause-new").await else {
        return;
    };
    let p = &f.provider;
    assert!(p.entry("job").await.unwrap().is_none());
    let before = f.now().await;
    let pause = p
        .pause("job", PauseFor::UntilResumed, None, "ann")
        .await
        .unwrap();
    let entry = p.entry("job").await.unwrap().expect("created");
    assert!(!entry.is_held(), "created free");
    assert!(entry.is_paused());
    assert_eq!(entry.pause(), Some(&pause));
    assert_eq!(entry.last_fire(), None);
    assert_eq!(entry.record().fencing_token(), Some(0));
    let listed = p.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].record(), entry.record());
    assert_eq!(listed[0].pause(), Some(&pause));
    assert_eq!(p.holder("job").await.unwrap(), None);
    // The first acquisition takes a fresh token by the crate's rule: the server's µs.
    let record = p.acquire("job", MIN, "a").await.unwrap().expect("free");
    assert!(record.fencing_token() >= Some(before.timestamp_micros()));
    // Pausing a record again replaces the pause, its end and reason with it.
    let again = p
        .pause("job", PauseFor::For(MIN), Some("why"), "bob")
        .await
        .unwrap();
    let replaced = p
        .pause("job", PauseFor::UntilResumed, None, "carol")
        .await
        .unwrap();
    assert_ne!(again, replaced);
    let hash = f.hash("job").await;
    assert!(!hash.contains_key("paused_until") && !hash.contains_key("paused_reason"));
    assert_eq!(
        p.entry("job").await.unwrap().unwrap().pause(),
        Some(&replaced)
    );
    assert_eq!(
        p.holder("job").await.unwrap(),
        Some(record),
        "the lock stays"
    );
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn bad_pauses_are_refused_clearly_and_write_nothing() {
    let Some(f) = Fixture::new("pause-bad").await else {
        return;
    };
    let p = &f.provider;
    let now = f.now().await;
    // An end in the past, or the server's now as read before the call: refused on the server's
    // clock, which is at or after it when the script runs.
    for end in [now, now - sec(1), now - sec(3600)] {
        let err = p
            .pause("job", PauseFor::Until(end), None, "ann")
            .await
            .unwrap_err();
        assert!(err.is_invalid_config(), "{err}");
        assert!(err.to_string().contains("must end in the future"), "{err}");
    }
    assert!(
        f.hash("job").await.is_empty(),
        "a refused pause created a record"
    );
    // ... and on a record there, which stays as it was.
    p.pause("job", PauseFor::UntilResumed, Some("first"), "ann")
        .await
        .unwrap();
    let before = f.hash("job").await;
    let err = p
        .pause("job", PauseFor::Until(now - sec(1)), None, "bob")
        .await
        .unwrap_err();
    assert!(err.is_invalid_config(), "{err}");
    let long = "x".repeat(65);
    let bad: [(&str, PauseFor, Option<&str>, &str); 7] = [
        (&long, PauseFor::UntilResumed, None, "ann"),
        (" job", PauseFor::UntilResumed, None, "ann"),
        ("job", PauseFor::UntilResumed, None, ""),
        ("job", PauseFor::UntilResumed, None, "evil\u{1b}[2J"),
        ("job", PauseFor::UntilResumed, Some("a\nb"), "ann"),
        ("job", PauseFor::For(Duration::ZERO), None, "ann"),
        (
            "job",
            PauseFor::For(Duration::from_hours(400 * 24)),
            None,
            "ann",
        ),
    ];
    for (name, how_long, reason, actor) in bad {
        let err = p.pause(name, how_long, reason, actor).await.unwrap_err();
        assert!(err.is_invalid_config(), "{name:?} {how_long:?}: {err}");
    }
    for actor in ["", " ", "a\rb"] {
        let err = p.resume("job", actor).await.unwrap_err();
        assert!(err.is_invalid_config(), "{err}");
        let err = p.force_unlock("job", actor).await.unwrap_err();
        assert!(err.is_invalid_config(), "{err}");
    }
    assert!(
        p.resume(&long, "ann")
            .await
            .unwrap_err()
            .is_invalid_config()
    );
    assert_eq!(f.hash("job").await, before, "a refused call wrote");
    assert!(f.hash(&long).await.is_empty());
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn the_last_action_names_who_paused_resumed_and_unlocked() {
    let Some(f) = Fixture::new("pause-actor").await else {
        return;
    };
    let p = &f.provider;
    let action = |name: &'static str| async move {
        p.entry(name)
            .await
            .unwrap()
            .expect("a record")
            .last_action()
            .cloned()
    };
    let record = p.acquire("job", MIN, "a").await.unwrap().expect("free");
    assert_eq!(action("job").await, None, "no action yet");

    let pause = p
        .pause("job", PauseFor::UntilResumed, None, "ann@ops")
        .await
        .unwrap();
    let paused = action("job").await.expect("recorded");
    assert_eq!(
        (paused.kind, paused.by.as_str()),
        (ActionKind::Paused, "ann@ops")
    );
    assert_eq!(paused.at, pause.since);

    let before = f.now().await;
    p.resume("job", "bob@ops").await.unwrap().expect("paused");
    let after = f.now().await;
    let resumed = action("job").await.expect("recorded");
    assert_eq!(
        (resumed.kind, resumed.by.as_str()),
        (ActionKind::Resumed, "bob@ops")
    );
    assert!(before <= resumed.at && resumed.at <= after);

    // An unlock that frees nothing records nothing.
    let stale = record
        .clone()
        .with_fencing_token(record.fencing_token().map(|t| t + 1));
    assert!(!p.unlock(&stale, "eve").await.unwrap());
    assert_eq!(action("job").await, Some(resumed));
    assert!(p.unlock(&record, "carol@ops").await.unwrap());
    let unlocked = action("job").await.expect("recorded");
    assert_eq!(
        (unlocked.kind, unlocked.by.as_str()),
        (ActionKind::Unlocked, "carol@ops")
    );
    let entry = p.entry("job").await.unwrap().unwrap();
    assert_eq!(
        entry.record().lock_until(),
        unlocked.at,
        "freed at that instant"
    );

    // force_unlock records its actor; not held, it writes nothing.
    p.acquire("job", MIN, "a").await.unwrap().expect("free");
    let freed = p
        .force_unlock("job", "dave@ops")
        .await
        .unwrap()
        .expect("held");
    assert_eq!(freed.last_action(), Some(&unlocked), "the entry as it was");
    let forced = action("job").await.expect("recorded");
    assert_eq!(
        (forced.kind, forced.by.as_str()),
        (ActionKind::Unlocked, "dave@ops")
    );
    assert!(p.force_unlock("job", "eve").await.unwrap().is_none());
    assert_eq!(action("job").await, Some(forced.clone()));

    // list shows the same.
    let listed = p.list().await.unwrap();
    assert_eq!(listed[0].last_action(), Some(&forced));
    assert_eq!(listed[0].pause(), None);
    f.cleanup().await;
}

/// A last action a newer version wrote, with a word this version does not know, is left out; the
/// pause beside it reads as ever. A pause whose time is not a number makes the claim fail, saying
/// so, rather than pause or run the fire.
#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn unknown_actions_are_left_out_and_a_garbled_pause_is_an_error() {
    let Some(f) = Fixture::new("pause-unknown").await else {
        return;
    };
    let p = &f.provider;
    p.pause("job", PauseFor::For(MIN), Some("r"), "ann")
        .await
        .unwrap();
    let mut conn = f.conn.clone();
    let _: () = conn
        .hset(p.key("job"), "last_action", "triggered-by-v9")
        .await
        .unwrap();
    let entry = p.entry("job").await.unwrap().unwrap();
    assert_eq!(entry.last_action(), None);
    let kept: &Pause = entry.pause().expect("the pause reads as ever");
    assert_eq!(kept.reason.as_deref(), Some("r"));

    let _: () = conn.hset(p.key("job"), "paused_at", "soon").await.unwrap();
    let now = f.now().await;
    let err = p
        .claim_fire("job", &fire_at(now - sec(1), now), MIN, "a")
        .await
        .unwrap_err();
    let cause = std::error::Error::source(&err).map(ToString::to_string);
    assert!(err.is_backend(), "{err}");
    assert!(
        cause.as_deref().is_some_and(|c| c.contains("not a number")),
        "{err}: {cause:?}"
    );
    f.cleanup().await;
}

/// Polls `done` every 20 ms until it holds, failing after `within`.
async fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The scheduler over Redis: two replicas count a paused job's fires `paused` and run none; after
/// the resume its fires run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn schedulers_count_a_paused_jobs_fires_and_run_them_again_after_resume() {
    let Some(f) = Fixture::new("pause-scheduler").await else {
        return;
    };
    f.provider
        .pause("tick", PauseFor::UntilResumed, Some("maintenance"), "ann")
        .await
        .unwrap();
    let runs = Arc::new(AtomicU64::new(0));
    let schedulers: Vec<Scheduler> = ["replica-a", "replica-b"]
        .into_iter()
        .map(|owner| {
            let executor = LockingTaskExecutor::builder(Arc::clone(&f.provider))
                .owner_id(owner)
                .default_at_most(MIN)
                .build()
                .unwrap();
            let scheduler = Scheduler::new(executor);
            let runs = Arc::clone(&runs);
            let schedule = Schedule::every(Duration::from_millis(300)).unwrap();
            scheduler
                .add(Job::new("tick", schedule, move |_run| {
                    let runs = Arc::clone(&runs);
                    async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                    }
                }))
                .unwrap();
            scheduler
        })
        .collect();
    for scheduler in &schedulers {
        scheduler.start().await.unwrap();
    }
    let paused = || {
        schedulers
            .iter()
            .map(|s| s.status("tick").map_or(0, |status| status.paused))
            .collect::<Vec<_>>()
    };
    wait_until(
        "each replica counts paused fires",
        Duration::from_secs(10),
        || paused().iter().all(|&n| n >= 2),
    )
    .await;
    assert_eq!(runs.load(Ordering::SeqCst), 0, "a paused job ran");
    assert!(
        f.provider.resume("tick", "bob").await.unwrap().is_some(),
        "the pause was there"
    );
    wait_until("runs after the resume", Duration::from_secs(10), || {
        runs.load(Ordering::SeqCst) >= 2
    })
    .await;
    for scheduler in &schedulers {
        scheduler.shutdown(Duration::from_secs(1)).await;
    }
    f.cleanup().await;
}
