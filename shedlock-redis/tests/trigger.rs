//! Run now on `RedisLockProvider` against a real Redis (`SHEDLOCK_REDIS_URL`; skipped without it,
//! failing under `SHEDLOCK_REQUIRE_DB=1`): the testkit's `TriggerSuite`, the trigger in the lock's
//! hash and its entry in the triggers index, an index entry healed by asking again, and three
//! schedulers that run each trigger once without recording a fire. Every test has its own key
//! prefix and deletes its own keys at the end; nothing flushes the shared server.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shedlock_core::testkit::TriggerSuite;
use shedlock_core::{
    Job, LockingTaskExecutor, Schedule, Scheduler,
    admin::{ActionKind, LockAdmin},
    provider::LockProvider,
    trigger::{Trigger, TriggerAnswer, TriggerClaim},
};
use shedlock_redis::redis::{self, AsyncCommands as _};
use shedlock_redis::{RedisLockProvider, testing};
use tokio::time::Instant;

const MIN: Duration = Duration::from_mins(1);
const SEC: Duration = Duration::from_secs(1);

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

    /// The triggers index: member → score.
    async fn index(&self) -> Vec<(String, f64)> {
        let mut conn = self.conn.clone();
        conn.zrange_withscores(self.provider.triggers_key(), 0, -1)
            .await
            .expect("ZRANGE")
    }

    async fn requested(&self, name: &str) -> Trigger {
        match self.provider.trigger(name, "ann", MIN).await.unwrap() {
            TriggerAnswer::Requested(trigger) => trigger,
            other => panic!("trigger({name:?}) answered {other:?}"),
        }
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
async fn the_trigger_suite_passes() {
    let Some(f) = Fixture::new("trigger-suite").await else {
        return;
    };
    // The server's clock has µs: a trigger of 200 ms expires quickly.
    TriggerSuite::new(Arc::clone(&f.provider))
        .time_unit(Duration::from_millis(200))
        .run()
        .await;
    f.cleanup().await;
}

/// What the hash and the index hold through a trigger's life: written with its actor, indexed by
/// its expiry, taken by the claim (the lock as acquire takes it, `last_fire` never written), and
/// then gone from the index.
#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn the_trigger_lives_in_the_locks_hash_and_the_index_lists_it_until_taken() {
    let Some(f) = Fixture::new("trigger-hash").await else {
        return;
    };
    let trigger = f.requested("report").await;
    let hash = f.hash("report").await;
    assert_eq!(hash["trigger_id"], trigger.id.to_string());
    assert_eq!(
        hash["trigger_at"],
        trigger.requested_at.timestamp_micros().to_string()
    );
    assert_eq!(
        hash["trigger_expires"],
        trigger.expires.timestamp_micros().to_string()
    );
    assert_eq!(hash["trigger_by"], "ann");
    assert_eq!(hash["last_action"], "triggered");
    assert_eq!(hash["token"], "0", "a missing record is created free");
    assert!(!hash.contains_key("trigger_taken_by"));
    assert!(!hash.contains_key("last_fire"));
    let index = f.index().await;
    assert_eq!(index.len(), 1, "{index:?}");
    assert_eq!(
        index[0].0,
        format!(
            "{}:{}:report",
            trigger.id,
            trigger.requested_at.timestamp_micros()
        )
    );
    #[allow(clippy::cast_precision_loss)]
    let score = trigger.expires.timestamp_micros() as f64;
    assert!((index[0].1 - score).abs() < 1.0, "{index:?}");

    let record = match f
        .provider
        .claim_trigger("report", trigger.id, MIN, "replica-a")
        .await
        .unwrap()
    {
        TriggerClaim::Claimed(record) => record,
        other => panic!("the claim answered {other:?}"),
    };
    let token = record.fencing_token().unwrap();
    assert!(
        token >= record.locked_at().timestamp_micros(),
        "acquire's token rule"
    );
    let hash = f.hash("report").await;
    assert_eq!(hash["trigger_taken_by"], "replica-a");
    assert_eq!(hash["locked_by"], "replica-a");
    assert_eq!(hash["token"], token.to_string());
    assert!(!hash.contains_key("last_fire"), "a trigger records no fire");
    assert!(
        f.index().await.is_empty(),
        "a taken trigger leaves the index"
    );
    assert!(f.provider.pending_triggers().await.unwrap().is_empty());
    let entry = f.provider.entry("report").await.unwrap().unwrap();
    let shown = entry.trigger().unwrap();
    assert_eq!(shown.taken_by.as_deref(), Some("replica-a"));
    assert_eq!(shown.taken_at, Some(record.locked_at()));
    assert_eq!(
        entry.last_action().map(|a| a.kind),
        Some(ActionKind::Triggered)
    );
    let listed = f.provider.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].trigger(), Some(shown));
    f.cleanup().await;
}

/// The index is a hint: an entry lost (here deleted by hand) is written again by asking again,
/// which answers `Pending`; a stale entry (here one added by hand) costs one claim answered
/// `Gone`, which removes it.
#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn a_lost_index_entry_is_healed_by_asking_again_and_a_stale_one_by_its_claim() {
    let Some(f) = Fixture::new("trigger-index").await else {
        return;
    };
    let trigger = f.requested("report").await;
    let mut conn = f.conn.clone();
    let _: () = conn.del(f.provider.triggers_key()).await.unwrap();
    assert!(f.provider.pending_triggers().await.unwrap().is_empty());
    match f.provider.trigger("report", "bob", MIN).await.unwrap() {
        TriggerAnswer::Pending(pending) => assert_eq!(pending, trigger),
        other => panic!("a second trigger answered {other:?}"),
    }
    let pending = f.provider.pending_triggers().await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(
        (
            pending[0].lock_name.as_str(),
            pending[0].id,
            pending[0].expires
        ),
        ("report", trigger.id, trigger.expires)
    );

    let stale = format!(
        "{}:{}:other",
        trigger.id + 1,
        trigger.requested_at.timestamp_micros()
    );
    let _: () = conn
        .zadd(
            f.provider.triggers_key(),
            &stale,
            trigger.expires.timestamp_micros(),
        )
        .await
        .unwrap();
    assert_eq!(f.provider.pending_triggers().await.unwrap().len(), 2);
    assert!(matches!(
        f.provider
            .claim_trigger("other", trigger.id + 1, MIN, "replica-a")
            .await
            .unwrap(),
        TriggerClaim::Gone { .. }
    ));
    let pending = f.provider.pending_triggers().await.unwrap();
    assert_eq!(
        pending.len(),
        1,
        "the gone claim removed the stale entry: {pending:?}"
    );
    assert!(
        f.provider.entry("other").await.unwrap().is_none(),
        "a gone claim writes no record"
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

/// Each run: replica, trigger id, fire, and when it started.
type Runs = Arc<Mutex<Vec<(String, Option<i64>, chrono::DateTime<chrono::Utc>, Instant)>>>;

/// Three schedulers over one Redis, each with an hourly job (no fire of its own during the test),
/// started and watching for triggers.
async fn replicas(f: &Fixture, runs: &Runs) -> Vec<Scheduler> {
    let mut schedulers = Vec::new();
    for owner in ["replica-a", "replica-b", "replica-c"] {
        let executor = LockingTaskExecutor::builder(Arc::clone(&f.provider))
            .owner_id(owner)
            .default_at_most(MIN)
            .build()
            .unwrap();
        let scheduler = Scheduler::new(executor);
        let runs = Arc::clone(runs);
        scheduler
            .add(Job::new(
                "report",
                Schedule::every(Duration::from_hours(1)).unwrap(),
                move |run| {
                    let runs = Arc::clone(&runs);
                    let started = Instant::now();
                    async move {
                        runs.lock().unwrap().push((
                            owner.to_owned(),
                            run.trigger(),
                            run.fire().at(),
                            started,
                        ));
                    }
                },
            ))
            .unwrap();
        scheduler.start().await.unwrap();
        schedulers.push(scheduler);
    }
    schedulers
}

/// Three replicas: each trigger runs exactly once, as the trigger's run (its fire is the request
/// time), and the recorded fire is never written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn three_schedulers_run_each_trigger_once_and_record_no_fire() {
    let Some(f) = Fixture::new("trigger-scheduler").await else {
        return;
    };
    let runs = Runs::default();
    let schedulers = replicas(&f, &runs).await;
    for round in 1..=3 {
        let trigger = f.requested("report").await;
        // Finished: the run is recorded as the trigger's, with the lock released.
        let mut finished = false;
        let deadline = Instant::now() + 10 * SEC;
        while !finished {
            assert!(
                Instant::now() < deadline,
                "round {round}: no run within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
            let entry = f.provider.entry("report").await.unwrap().unwrap();
            finished = !entry.is_held()
                && entry
                    .state()
                    .and_then(|s| s.last_run.as_ref())
                    .is_some_and(|run| run.fire == trigger.requested_at);
        }
        let seen = runs.lock().unwrap().clone();
        assert_eq!(seen.len(), round, "each trigger ran once: {seen:?}");
        let (by, id, fire, _) = seen.last().unwrap().clone();
        assert_eq!((id, fire), (Some(trigger.id), trigger.requested_at));
        let entry = f.provider.entry("report").await.unwrap().unwrap();
        let taken = entry.trigger().and_then(|t| t.taken_by.clone()).unwrap();
        assert!(taken.starts_with(&by), "{taken} took it, {by} ran it");
        assert_eq!(entry.last_fire(), None, "a trigger never records a fire");
        assert!(!f.hash("report").await.contains_key("last_fire"));
    }
    for scheduler in &schedulers {
        scheduler.shutdown(SEC).await;
    }
    assert_eq!(runs.lock().unwrap().len(), 3);
    f.cleanup().await;
}

/// Trigger → run start through the push, over ~50 triggers with three replicas: p50 and p99. A
/// measurement, not a check: `cargo test -p shedlock-redis --test trigger -- --ignored
/// --nocapture trigger_latency`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run by hand with --ignored --nocapture"]
async fn trigger_latency() {
    let Some(f) = Fixture::new("trigger-latency").await else {
        return;
    };
    let runs = Runs::default();
    let schedulers = replicas(&f, &runs).await;
    let mut latencies = Vec::new();
    for round in 1..=50 {
        let (asked, trigger) = loop {
            let asked = Instant::now();
            match f.provider.trigger("report", "ann", MIN).await.unwrap() {
                TriggerAnswer::Requested(trigger) => break (asked, trigger),
                // The last run's release is on its way.
                TriggerAnswer::Held(_) => tokio::time::sleep(Duration::from_millis(1)).await,
                other => panic!("trigger answered {other:?}"),
            }
        };
        wait_until("the run", 10 * SEC, || runs.lock().unwrap().len() == round).await;
        let (_, id, _, started) = runs.lock().unwrap().last().unwrap().clone();
        assert_eq!(id, Some(trigger.id));
        latencies.push(started.duration_since(asked));
    }
    latencies.sort();
    let pick = |q: f64| {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let i = ((latencies.len() as f64 - 1.0) * q).round() as usize;
        latencies[i]
    };
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "trigger → run start over {} triggers, 3 replicas: p50 {:?}, p99 {:?}, max {:?}",
            latencies.len(),
            pick(0.5),
            pick(0.99),
            latencies.last().unwrap()
        );
    }
    for scheduler in &schedulers {
        scheduler.shutdown(SEC).await;
    }
    f.cleanup().await;
}
