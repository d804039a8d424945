//! Job state, history and definitions of `RedisLockProvider` against a real Redis
//! (`SHEDLOCK_REDIS_URL`; skipped without it, failing under `SHEDLOCK_REQUIRE_DB=1`). Every test
//! has its own key prefix and deletes its own keys at the end; nothing flushes the shared server.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use shedlock_core::testkit::JobStateSuite;
use shedlock_core::{
    admin::LockAdmin,
    jobs::{Definition, HistoryPolicy, JobState, RunOutcome, RunReport},
    provider::{LockProvider, LockRecord},
};
use shedlock_redis::redis::{self, AsyncCommands as _};
use shedlock_redis::{RedisLockProvider, testing};
use tokio::time::Instant;

const MIN: Duration = Duration::from_mins(1);

/// A provider on its own prefix (history as given), and a plain connection to look at and
/// clean up its keys.
struct Fixture {
    provider: Arc<RedisLockProvider>,
    prefix: String,
    url: String,
    conn: redis::aio::MultiplexedConnection,
}

impl Fixture {
    async fn new(label: &str, history: Option<HistoryPolicy>) -> Option<Self> {
        let url = testing::redis_url()?;
        let prefix = testing::unique_prefix(label);
        Some(Self::with_prefix(url, prefix, history).await)
    }

    async fn with_prefix(url: String, prefix: String, history: Option<HistoryPolicy>) -> Self {
        let mut builder = RedisLockProvider::builder(url.as_str()).key_prefix(prefix.clone());
        if let Some(policy) = history {
            builder = builder.history(policy);
        }
        let provider = builder
            .connect()
            .await
            .expect("connect to SHEDLOCK_REDIS_URL");
        let conn = redis::Client::open(url.as_str())
            .expect("a valid URL")
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        Self {
            provider: Arc::new(provider),
            prefix,
            url,
            conn,
        }
    }

    /// Another provider (a replica) on the same prefix.
    async fn replica(&self, history: Option<HistoryPolicy>) -> Self {
        Self::with_prefix(self.url.clone(), self.prefix.clone(), history).await
    }

    async fn hash(&self, name: &str) -> std::collections::BTreeMap<String, String> {
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

fn fire(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap()
}

fn report(secs: i64, outcome: RunOutcome) -> RunReport {
    RunReport::new(fire(secs), outcome)
}

/// Acquires `name` as `owner` and releases it with a run of `fire(secs)` that ended `outcome`.
async fn run(
    p: &RedisLockProvider,
    name: &str,
    owner: &str,
    secs: i64,
    outcome: RunOutcome,
) -> LockRecord {
    let record = p.acquire(name, MIN, owner).await.unwrap().expect("free");
    assert!(
        p.release_run(&record, Duration::ZERO, &report(secs, outcome))
            .await
            .unwrap()
    );
    record
}

async fn state(p: &RedisLockProvider, name: &str) -> JobState {
    p.entry(name)
        .await
        .unwrap()
        .expect("a record")
        .state()
        .expect("Redis records job state")
        .clone()
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn release_run_records_the_state_and_counts_per_the_table() {
    let Some(f) = Fixture::new("state", None).await else {
        return;
    };
    let p = &f.provider;
    // A lock with no recorded run has the default state.
    let first = p.acquire("job", MIN, "pod-1").await.unwrap().expect("free");
    assert_eq!(state(p, "job").await, JobState::default());

    let before = f.now().await;
    let at_least = Duration::from_secs(30);
    assert!(
        p.release_run(
            &first,
            at_least,
            &report(1, RunOutcome::Failed("boom \"x\" ✓".into()))
        )
        .await
        .unwrap()
    );
    let after = f.now().await;
    let entry = p.entry("job").await.unwrap().unwrap();
    // The release part: at_least applied, as the plain release does.
    assert_eq!(
        entry.record().lock_until(),
        first.locked_at() + chrono::Duration::seconds(30)
    );
    let s = entry.state().unwrap();
    let last = s.last_run.as_ref().expect("recorded");
    assert_eq!(last.lock_name, "job");
    assert_eq!(last.fire, fire(1));
    assert_eq!(last.runner, "pod-1");
    assert_eq!(last.started, first.locked_at());
    assert!(before <= last.ended && last.ended <= after, "{last:?}");
    assert_eq!(last.outcome, RunOutcome::Failed("boom \"x\" ✓".into()));
    assert_eq!((s.consecutive_failures, s.last_success), (1, None));
    // Held until at_least ends; freed by hand, the state stays.
    assert!(p.holder("job").await.unwrap().is_some());
    assert_eq!(
        p.force_unlock("job", "test")
            .await
            .unwrap()
            .unwrap()
            .state(),
        Some(s)
    );

    run(p, "job", "pod-2", 2, RunOutcome::Panicked).await;
    let s = state(p, "job").await;
    assert_eq!(s.consecutive_failures, 2);
    assert_eq!(s.last_run.as_ref().unwrap().outcome, RunOutcome::Panicked);
    assert_eq!(s.last_run.as_ref().unwrap().runner, "pod-2");

    // Cancelled: neither a failure nor a success.
    run(p, "job", "pod-1", 3, RunOutcome::Cancelled).await;
    let s = state(p, "job").await;
    assert_eq!((s.consecutive_failures, s.last_success), (2, None));
    assert_eq!(s.last_run.as_ref().unwrap().outcome, RunOutcome::Cancelled);
    assert_eq!(s.last_run.as_ref().unwrap().fire, fire(3));

    let ok = run(p, "job", "pod-1", 4, RunOutcome::Succeeded).await;
    let s = state(p, "job").await;
    let last = s.last_run.clone().unwrap();
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(s.last_success, Some(last.ended));
    assert_eq!(
        (last.outcome, last.started),
        (RunOutcome::Succeeded, ok.locked_at())
    );

    run(p, "job", "pod-1", 5, RunOutcome::Failed("again".into())).await;
    let s = state(p, "job").await;
    assert_eq!(s.consecutive_failures, 1);
    assert_eq!(s.last_success, Some(last.ended), "kept from the success");

    // list() shows the same state; the fields live in the lock's hash.
    let listed = p.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state(), Some(&s));
    let hash = f.hash("job").await;
    assert_eq!(hash["last_run_outcome"], "failed");
    assert_eq!(hash["last_run_error"], "again");
    assert_eq!(hash["consecutive_failures"], "1");
    assert_eq!(hash["last_run_runner"], "pod-1");
    // History is off by default: no history key.
    let mut conn = f.conn.clone();
    let exists: bool = conn.exists(p.history_key("job")).await.unwrap();
    assert!(!exists);
    assert!(p.history("job", 10).await.unwrap().is_empty());
    // An error text longer than the cap is cut.
    run(p, "job", "pod-1", 6, RunOutcome::Failed("e".repeat(5000))).await;
    let s = state(p, "job").await;
    let text = s.last_run.unwrap().outcome.error().unwrap().to_owned();
    assert_eq!(text.chars().count(), shedlock_core::jobs::MAX_ERROR_LEN);
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn a_lost_lock_records_nothing_and_a_repeat_records_once() {
    let Some(f) = Fixture::new("lost", Some(HistoryPolicy::keep(10))).await else {
        return;
    };
    let p = &f.provider;
    let old = p.acquire("job", MIN, "pod-1").await.unwrap().expect("free");
    p.force_unlock("job", "test")
        .await
        .unwrap()
        .expect("was held");
    let new = p.acquire("job", MIN, "pod-2").await.unwrap().expect("free");
    let before = f.hash("job").await;
    assert!(
        !p.release_run(
            &old,
            Duration::ZERO,
            &report(1, RunOutcome::Failed("late".into()))
        )
        .await
        .unwrap()
    );
    assert_eq!(f.hash("job").await, before, "nothing written");
    assert_eq!(state(p, "job").await, JobState::default());
    assert!(p.history("job", 10).await.unwrap().is_empty());
    assert_eq!(p.holder("job").await.unwrap().as_ref(), Some(&new));

    // The same release sent twice (a lost reply): released both times, recorded once.
    let outcome = RunOutcome::Failed("x".into());
    for _ in 0..2 {
        assert!(
            p.release_run(&new, Duration::ZERO, &report(2, outcome.clone()))
                .await
                .unwrap()
        );
    }
    assert_eq!(state(p, "job").await.consecutive_failures, 1);
    assert_eq!(p.history("job", 10).await.unwrap().len(), 1);
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn history_keeps_the_newest_runs_newest_first() {
    let Some(f) = Fixture::new("history", Some(HistoryPolicy::keep(3))).await else {
        return;
    };
    let p = &f.provider;
    let mut records = Vec::new();
    for i in 0..9 {
        let outcome = if i % 2 == 0 {
            RunOutcome::Succeeded
        } else {
            RunOutcome::Failed(format!("run {i}"))
        };
        records.push(run(p, "job", &format!("pod-{i}"), i, outcome).await);
    }
    let mut conn = f.conn.clone();
    let len: usize = conn.llen(p.history_key("job")).await.unwrap();
    assert_eq!(len, 3, "trimmed to keep");
    let runs = p.history("job", 100).await.unwrap();
    let fires: Vec<_> = runs.iter().map(|r| r.fire).collect();
    assert_eq!(fires, [fire(8), fire(7), fire(6)]);
    assert_eq!(runs[0].outcome, RunOutcome::Succeeded);
    assert_eq!(runs[1].outcome, RunOutcome::Failed("run 7".into()));
    assert_eq!(runs[1].runner, "pod-7");
    assert_eq!(runs[1].started, records[7].locked_at());
    assert_eq!(runs[1].lock_name, "job");
    assert!(runs[0].ended >= runs[1].ended && runs[1].ended >= runs[1].started);
    // The newest entry is the job state's last run.
    assert_eq!(state(p, "job").await.last_run.as_ref(), Some(&runs[0]));
    // limit
    let two = p.history("job", 2).await.unwrap();
    assert_eq!(two, runs[..2]);
    assert!(p.history("job", 0).await.unwrap().is_empty());
    // Readable by a provider that does not write history.
    let reader = f.replica(None).await;
    assert_eq!(reader.provider.history("job", 100).await.unwrap(), runs);
    assert!(p.history("other", 5).await.unwrap().is_empty());
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn history_drops_runs_older_than_max_age() {
    let policy = HistoryPolicy::keep(100).max_age(Duration::from_hours(1));
    let Some(f) = Fixture::new("max-age", Some(policy)).await else {
        return;
    };
    let p = &f.provider;
    run(p, "job", "pod", 1, RunOutcome::Succeeded).await;
    // Older runs at the tail, as an earlier write left them: two past max_age, one within.
    let now_us = f.now().await.timestamp_micros();
    let hour_us = 3_600_000_000_i64;
    let entry = |ended: i64| {
        format!(
            r#"{{"fire":1,"runner":"old","started":{ended},"ended":{ended},"outcome":"succeeded"}}"#
        )
    };
    let key = p.history_key("job");
    let mut conn = f.conn.clone();
    let _: () = conn.rpush(&key, entry(now_us - hour_us / 2)).await.unwrap();
    let _: () = conn.rpush(&key, entry(now_us - 2 * hour_us)).await.unwrap();
    let _: () = conn.rpush(&key, entry(now_us - 3 * hour_us)).await.unwrap();
    assert_eq!(p.history("job", 10).await.unwrap().len(), 4);

    run(p, "job", "pod", 2, RunOutcome::Succeeded).await;
    let runs = p.history("job", 10).await.unwrap();
    let runners: Vec<&str> = runs.iter().map(|r| r.runner.as_str()).collect();
    assert_eq!(
        runners,
        ["pod", "pod", "old"],
        "the two past max_age are gone"
    );
    assert_eq!(runs[0].fire, fire(2));
    f.cleanup().await;
}

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn warnings(&self) -> usize {
        let bytes = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("run history"))
            .count()
    }
}

#[tokio::test(flavor = "current_thread")]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn a_history_that_cannot_be_written_never_fails_the_release() {
    let Some(f) = Fixture::new("wrongtype", Some(HistoryPolicy::keep(5))).await else {
        return;
    };
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let p = &f.provider;
    let key = p.history_key("job");
    let mut conn = f.conn.clone();
    let _: () = conn.set(&key, "not a list").await.unwrap();
    for i in 0..3 {
        run(p, "job", "pod", i, RunOutcome::Panicked).await;
        assert!(p.holder("job").await.unwrap().is_none(), "released");
    }
    assert_eq!(
        state(p, "job").await.consecutive_failures,
        3,
        "state recorded"
    );
    let value: String = conn.get(&key).await.unwrap();
    assert_eq!(value, "not a list", "left alone");
    assert_eq!(captured.warnings(), 1, "logged once");
    assert!(p.history("job", 5).await.is_err(), "reading it is an error");

    // Once the key is usable again, history is written (and a later failure is logged again).
    let _: () = conn.del(&key).await.unwrap();
    run(p, "job", "pod", 10, RunOutcome::Succeeded).await;
    assert_eq!(p.history("job", 5).await.unwrap().len(), 1);
    let _: () = conn.del(&key).await.unwrap();
    let _: () = conn.hset(&key, "f", "v").await.unwrap();
    run(p, "job", "pod", 11, RunOutcome::Succeeded).await;
    assert_eq!(captured.warnings(), 2);
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn definitions_are_published_listed_expired_and_forgotten() {
    let Some(a) = Fixture::new("defs", None).await else {
        return;
    };
    let b = a.replica(None).await;
    let spec = r#"{"every":"1m","note":"it's \"quoted\" {✓}"}"#;
    let hostile = "it's \"q\" {x} ✓";
    let defs = [
        Definition::new("report", "report-lock", spec),
        Definition::new(hostile, "{}", "{}"),
    ];
    let before = a.now().await;
    a.provider
        .publish_definitions("pod-a", "0.1.0", &defs, MIN)
        .await
        .unwrap();
    // pod-b runs another version whose "report" disagrees: both are listed.
    let newer = Definition::new("report", "report-lock-2", r#"{"every":"5m"}"#);
    b.provider
        .publish_definitions("pod-b", "0.2.0", std::slice::from_ref(&newer), MIN)
        .await
        .unwrap();
    let after = a.now().await;
    let listed = b.provider.definitions().await.unwrap();
    let keys: Vec<(&str, &str)> = listed
        .iter()
        .map(|e| (e.definition.job.as_str(), e.replica.as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            ("it's \"q\" {x} ✓", "pod-a"),
            ("report", "pod-a"),
            ("report", "pod-b")
        ]
    );
    assert_eq!(listed[0].definition, defs[1]);
    assert_eq!(listed[1].definition, defs[0]);
    assert_eq!(listed[2].definition, newer);
    assert_eq!(
        (listed[1].version.as_str(), listed[2].version.as_str()),
        ("0.1.0", "0.2.0")
    );
    for e in &listed {
        assert!(before <= e.published && e.published <= after, "{e:?}");
        assert_eq!(e.expires - e.published, chrono::Duration::minutes(1));
    }

    // A replica that stops publishing: its entry expires, and the next publish removes it.
    let c = a.replica(None).await;
    c.provider
        .publish_definitions(
            "pod-c",
            "0.1.0",
            &[Definition::new("short", "short", "{}")],
            Duration::from_millis(300),
        )
        .await
        .unwrap();
    assert!(
        c.provider
            .definitions()
            .await
            .unwrap()
            .iter()
            .any(|e| e.replica == "pod-c")
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while c
        .provider
        .definitions()
        .await
        .unwrap()
        .iter()
        .any(|e| e.replica == "pod-c")
    {
        assert!(Instant::now() < deadline, "pod-c's entry did not expire");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut conn = a.conn.clone();
    let fields: usize = conn.hlen(a.provider.definitions_key()).await.unwrap();
    assert_eq!(fields, 4, "expired, not yet removed");
    a.provider
        .publish_definitions("pod-a", "0.1.0", &defs, MIN)
        .await
        .unwrap();
    let fields: usize = conn.hlen(a.provider.definitions_key()).await.unwrap();
    assert_eq!(fields, 3, "removed by the next publish");

    // Definitions and history keys are not locks.
    assert!(a.provider.list().await.unwrap().is_empty());
    c.cleanup().await;
    b.cleanup().await;
    a.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn forget_removes_every_replicas_entries_of_exactly_that_job() {
    let Some(a) = Fixture::new("forget", None).await else {
        return;
    };
    let b = a.replica(None).await;
    let hostile = "it's \"q\" {x} ✓";
    let defs = [
        Definition::new("report", "report-lock", "{}"),
        Definition::new(hostile, "{}", "{}"),
    ];
    a.provider
        .publish_definitions("pod-a", "0.1.0", &defs, MIN)
        .await
        .unwrap();
    b.provider
        .publish_definitions("pod-b", "0.1.0", &defs[..1], MIN)
        .await
        .unwrap();
    // forget: every replica's entries of exactly that job.
    assert_eq!(
        a.provider.forget("repo").await.unwrap(),
        0,
        "a prefix is not the job"
    );
    assert_eq!(a.provider.forget("report").await.unwrap(), 2);
    assert_eq!(a.provider.forget("report").await.unwrap(), 0);
    let left: Vec<String> = a
        .provider
        .definitions()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.definition.job)
        .collect();
    assert_eq!(left, [hostile]);
    // Jobs whose names could be confused by a separator stay apart.
    a.provider
        .publish_definitions("x", "v", &[Definition::new("a", "l", "{}")], MIN)
        .await
        .unwrap();
    a.provider
        .publish_definitions("r", "v", &[Definition::new("a\0x", "l", "{}")], MIN)
        .await
        .unwrap();
    assert_eq!(a.provider.forget("a").await.unwrap(), 1);
    assert!(
        a.provider
            .definitions()
            .await
            .unwrap()
            .iter()
            .any(|e| e.definition.job == "a\0x")
    );

    // Bad arguments are refused before Redis is asked.
    let err = a
        .provider
        .publish_definitions("", "v", &defs, MIN)
        .await
        .unwrap_err();
    assert!(err.is_invalid_config(), "{err}");
    let err = a
        .provider
        .publish_definitions("pod", "v", &defs, Duration::ZERO)
        .await
        .unwrap_err();
    assert!(err.is_invalid_config(), "{err}");
    assert_eq!(a.provider.missing_ddl().await.unwrap(), None);
    b.cleanup().await;
    a.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn hostile_names_record_state_and_history_and_list_shows_only_locks() {
    let Some(f) = Fixture::new("hostile", Some(HistoryPolicy::keep(2))).await else {
        return;
    };
    let p = &f.provider;
    let names = [
        "it's \"q\"",
        "{tag}",
        "}{",
        "a{b",
        "{}x",
        "ü✓{}",
        "x}",
        "a\0b",
    ];
    for name in &names[..names.len() - 1] {
        run(
            p,
            name,
            "pod",
            1,
            RunOutcome::Failed(format!("{name} failed")),
        )
        .await;
        run(p, name, "pod", 2, RunOutcome::Succeeded).await;
        run(
            p,
            name,
            "pod",
            3,
            RunOutcome::Failed(format!("{name} failed")),
        )
        .await;
        let runs = p.history(name, 10).await.unwrap();
        assert_eq!(runs.len(), 2, "{name:?}");
        assert_eq!(
            runs[0].outcome,
            RunOutcome::Failed(format!("{name} failed"))
        );
        assert_eq!(runs[0].lock_name, *name);
        assert_eq!(runs[1].fire, fire(2));
        let s = state(p, name).await;
        assert_eq!(s.consecutive_failures, 1, "{name:?}");
        assert!(s.last_success.is_some());
    }
    let err = p.history("a\0b", 1).await.unwrap_err();
    assert!(err.is_invalid_config(), "{err}");
    p.publish_definitions("pod", "v", &[Definition::new("j", "l", "{}")], MIN)
        .await
        .unwrap();
    let listed = p.list().await.unwrap();
    let mut expected: Vec<&str> = names[..names.len() - 1].to_vec();
    expected.sort_unstable();
    let got: Vec<&str> = listed.iter().map(|e| e.record().name()).collect();
    assert_eq!(got, expected, "history and definitions keys are not listed");
    assert!(
        listed
            .iter()
            .all(|e| e.state().is_some_and(|s| s.last_run.is_some()))
    );
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn passes_the_job_state_suite() {
    let Some(f) = Fixture::new("job-suite", None).await else {
        return;
    };
    JobStateSuite::new(Arc::clone(&f.provider)).run().await;
    f.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn passes_the_job_state_suite_with_history() {
    let Some(f) = Fixture::new("job-suite-h", Some(HistoryPolicy::keep(4))).await else {
        return;
    };
    JobStateSuite::new(Arc::clone(&f.provider))
        .with_history(4)
        .run()
        .await;
    f.cleanup().await;
}

#[tokio::test]
async fn builder_refuses_a_nul_in_the_prefix_and_an_empty_history() {
    let err = RedisLockProvider::builder("redis://127.0.0.1")
        .key_prefix("a\0b:")
        .build()
        .unwrap_err();
    assert!(err.is_invalid_config(), "{err}");
    let mut policy = HistoryPolicy::keep(1);
    policy.keep = 0;
    let err = RedisLockProvider::builder("redis://127.0.0.1")
        .history(policy)
        .build()
        .unwrap_err();
    assert!(err.is_invalid_config(), "{err}");
}
