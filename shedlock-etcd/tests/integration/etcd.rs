//! The etcd provider against the etcd at `SHEDLOCK_ETCD_URL` (skipped without it; required
//! under `SHEDLOCK_REQUIRE_DB=1`). Every test uses a key prefix of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use shedlock_core::jobs::{Definition, RunOutcome, RunReport};
use shedlock_core::testkit::ConformanceSuite;
use shedlock_core::{
    LeaderLatch, LeaderLatchConfig, LockConfig, LockingTaskExecutor,
    admin::{ActionKind, LockAdmin},
    pause::PauseFor,
    provider::{Fire, FireClaim, LockProvider, TriggerClaim},
    scheduled_lock,
    trigger::TriggerAnswer,
};
use shedlock_etcd::{EtcdLockProvider, testing};

fn provider(url: &str) -> EtcdLockProvider {
    EtcdLockProvider::builder(url)
        .prefix(testing::unique_prefix())
        .build()
        .expect("a valid URL")
}

/// The suite's unit: etcd leases are whole seconds with a 2 s minimum, and `at_least` is
/// measured in whole seconds left, so the suite's waits need a second as their base.
const UNIT: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn conformance_suite_passes() {
    let Some(url) = testing::etcd_url() else {
        return;
    };
    let start = Instant::now();
    ConformanceSuite::new(provider(&url))
        .time_unit(UNIT)
        .require_fire_claims(true)
        .run()
        .await;
    eprintln!("etcd conformance suite: {:?}", start.elapsed());
}

#[tokio::test]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn odd_names_are_encoded_and_bad_ones_refused() {
    let Some(url) = testing::etcd_url() else {
        return;
    };
    let p = provider(&url);
    let names = [
        "a/b",
        "a%2Fb",
        "../x",
        "a/rec",
        "tenant 42: nightly",
        "名前-ü",
        "%",
    ];
    let mut tokens = Vec::new();
    for name in names {
        let record = p
            .acquire(name, Duration::from_secs(10), "me")
            .await
            .unwrap();
        let record =
            record.unwrap_or_else(|| panic!("{name:?} was refused, as if it shared a key"));
        assert_eq!(record.name(), name);
        assert_eq!(p.holder(name).await.unwrap().unwrap().owner(), "me");
        tokens.push(record.fencing_token());
    }
    let listed: Vec<String> = p
        .list()
        .await
        .unwrap()
        .iter()
        .map(|e| e.record().name().to_owned())
        .collect();
    let mut expected: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    expected.sort();
    assert_eq!(listed, expected, "each name listed once, decoded");

    for (bad, says) in [
        (String::new(), "empty"),
        ("x".repeat(65), "at most 64"),
        (" padded".to_owned(), "white space"),
        ("nul\0".to_owned(), "NUL"),
    ] {
        let e = p
            .acquire(&bad, Duration::from_secs(5), "me")
            .await
            .unwrap_err();
        assert!(
            e.is_invalid_config() && e.to_string().contains(says),
            "{bad:?}: {e}"
        );
    }
    let long = EtcdLockProvider::builder(&url)
        .prefix(testing::unique_prefix())
        .max_name_len(300)
        .build()
        .unwrap();
    assert!(
        long.acquire(&"/".repeat(300), Duration::from_secs(5), "me")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn a_closed_port_fails_clearly_and_a_black_hole_times_out() {
    // A port nobody listens on: refused at once, with the member named.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let p = EtcdLockProvider::new(&format!("etcd://127.0.0.1:{closed}")).unwrap();
    let start = Instant::now();
    let e = p
        .acquire("job", Duration::from_secs(5), "me")
        .await
        .unwrap_err();
    assert!(e.is_backend(), "{e}");
    // One line says it all: no member answered, which one, why.
    let text = e.to_string();
    assert!(
        text.contains("no etcd member answered") && text.contains(&closed.to_string()),
        "{text}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );

    // A listener that accepts and never answers: the call ends at its timeout.
    let hole = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = hole.local_addr().unwrap().port();
    let accepted = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = hole.accept().await {
            held.push(socket);
        }
    });
    let p = EtcdLockProvider::builder(format!("etcd://127.0.0.1:{port}"))
        .call_timeout(Duration::from_millis(700))
        .build()
        .unwrap();
    let start = Instant::now();
    let e = p
        .acquire("job", Duration::from_secs(5), "me")
        .await
        .unwrap_err();
    assert!(e.is_timeout(), "{e}");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(650) && took < Duration::from_secs(3),
        "{took:?}"
    );

    // With a live member after it, the next call goes there.
    if let Some(url) = testing::etcd_url() {
        let live = url
            .trim()
            .trim_start_matches("etcd://")
            .trim_start_matches("http://");
        let p = EtcdLockProvider::builder(format!("etcd://127.0.0.1:{port},{live}"))
            .prefix(testing::unique_prefix())
            .call_timeout(Duration::from_millis(700))
            .build()
            .unwrap();
        let e = p
            .acquire("job", Duration::from_secs(5), "me")
            .await
            .unwrap_err();
        assert!(e.is_timeout(), "{e}");
        assert!(
            p.acquire("job", Duration::from_secs(5), "me")
                .await
                .unwrap()
                .is_some()
        );
    }
    accepted.abort();
}

#[tokio::test]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn a_dead_first_member_fails_over_to_the_next() {
    let Some(url) = testing::etcd_url() else {
        return;
    };
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let live = url
        .trim()
        .trim_start_matches("etcd://")
        .trim_start_matches("http://");
    let p = EtcdLockProvider::builder(format!("etcd://127.0.0.1:{closed},{live}"))
        .prefix(testing::unique_prefix())
        .build()
        .unwrap();
    let record = p
        .acquire("job", Duration::from_secs(5), "me")
        .await
        .unwrap()
        .unwrap();
    assert!(p.release(&record, Duration::ZERO).await.unwrap());
}

#[tokio::test]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn admin_lists_unlocks_as_listed_and_force_unlocks() {
    let Some(url) = testing::etcd_url() else {
        return;
    };
    let p = provider(&url);
    assert_eq!(p.ddl(), None);
    p.create_table().await.unwrap();
    assert!(p.list().await.unwrap().is_empty());

    let a = p
        .acquire("a", Duration::from_secs(30), "owner-a")
        .await
        .unwrap()
        .unwrap();
    let b = p
        .acquire("b", Duration::from_secs(30), "owner-b")
        .await
        .unwrap()
        .unwrap();
    p.release(&b, Duration::ZERO).await.unwrap();
    let list = p.list().await.unwrap();
    assert_eq!(list.len(), 2);
    assert!(list[0].is_held() && list[0].record().owner() == "owner-a");
    assert_eq!(list[0].record().fencing_token(), a.fencing_token());
    assert_eq!(list[0].record().locked_at(), a.locked_at());
    assert!(!list[1].is_held(), "b was released: {}", list[1]);
    assert_eq!(
        list[1].record().owner(),
        "owner-b",
        "a free lock keeps its last holder"
    );

    // unlock refuses a record that is not exactly the holder's, then frees the exact one.
    let other_owner =
        shedlock_core::provider::LockRecord::new("a", "owner-x", a.locked_at(), a.lock_until())
            .with_fencing_token(a.fencing_token());
    assert!(!p.unlock(&other_owner, "test").await.unwrap());
    let other_time = shedlock_core::provider::LockRecord::new(
        "a",
        "owner-a",
        a.locked_at() + chrono::Duration::milliseconds(1),
        a.lock_until(),
    )
    .with_fencing_token(a.fencing_token());
    assert!(!p.unlock(&other_time, "test").await.unwrap());
    assert!(p.entry("a").await.unwrap().unwrap().is_held());
    assert!(p.unlock(list[0].record(), "test").await.unwrap());
    assert!(!p.entry("a").await.unwrap().unwrap().is_held());
    assert!(
        !p.unlock(list[0].record(), "test").await.unwrap(),
        "already free"
    );

    // A stale listing cannot free the next acquisition, even by the same owner id.
    let again = p
        .acquire("a", Duration::from_secs(30), "owner-a")
        .await
        .unwrap()
        .unwrap();
    assert!(again.fencing_token() > a.fencing_token());
    assert!(!p.unlock(list[0].record(), "test").await.unwrap());

    let freed = p
        .force_unlock("a", "bob")
        .await
        .unwrap()
        .expect("it was held");
    assert_eq!(freed.record().fencing_token(), again.fencing_token());
    let action = p.entry("a").await.unwrap().unwrap().last_action().cloned();
    assert!(
        action.is_some_and(|action| action.kind == ActionKind::Unlocked && action.by == "bob"),
        "force_unlock records its actor"
    );
    assert!(p.force_unlock("a", "test").await.unwrap().is_none());
    assert!(p.force_unlock("never", "test").await.unwrap().is_none());
    assert!(
        p.acquire("a", Duration::from_secs(5), "c")
            .await
            .unwrap()
            .is_some()
    );
    // The freed holder's own release no longer finds its acquisition.
    assert!(!p.release(&again, Duration::ZERO).await.unwrap());
}

/// A pause shows in the listing and in the lock's entry, beside the holder it keeps. A job paused
/// before its first run gets a free entry, with no owner, that its first acquire replaces.
#[tokio::test]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn pauses_are_listed_and_a_job_paused_before_its_first_run_is_free() {
    let Some(url) = testing::etcd_url() else {
        return;
    };
    let p = provider(&url);
    let half_minute = Duration::from_secs(30);
    p.acquire("a", half_minute, "owner-a")
        .await
        .unwrap()
        .unwrap();
    let b = p
        .acquire("b", half_minute, "owner-b")
        .await
        .unwrap()
        .unwrap();
    p.release(&b, Duration::ZERO).await.unwrap();
    p.pause("b", PauseFor::UntilResumed, Some("upstream down"), "ann")
        .await
        .unwrap();
    p.pause("new", PauseFor::UntilResumed, None, "ann")
        .await
        .unwrap();
    let list = p.list().await.unwrap();
    let names: Vec<_> = list.iter().map(|e| e.record().name()).collect();
    assert_eq!(names, ["a", "b", "new"]);
    assert!(!list[0].is_paused() && list[1].is_paused() && list[2].is_paused());
    assert_eq!(
        list[1].record().owner(),
        "owner-b",
        "a pause keeps the last holder"
    );
    assert_eq!(
        list[1].pause().and_then(|pause| pause.reason.as_deref()),
        Some("upstream down")
    );
    assert!(!list[2].is_held() && list[2].record().owner().is_empty());
    let first = p
        .acquire("new", Duration::from_secs(5), "d")
        .await
        .unwrap()
        .expect("a paused, never held lock is free to acquire");
    assert!(first.fencing_token() > list[2].record().fencing_token());
    let entry = p.entry("new").await.unwrap().unwrap();
    assert!(entry.is_held() && entry.is_paused(), "{entry}");

    // A resume answers the pause it removes, also one whose end has passed.
    let short = p
        .pause("b", PauseFor::For(Duration::from_millis(1)), None, "ann")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.entry("b").await.unwrap().unwrap().is_paused() {
        assert!(Instant::now() < deadline, "a 1 ms pause never ended");
        tokio::task::yield_now().await;
    }
    assert_eq!(p.resume("b", "bob").await.unwrap(), Some(short));
    let action = p.entry("b").await.unwrap().unwrap().last_action().cloned();
    assert!(
        action.is_some_and(|action| action.kind == ActionKind::Resumed && action.by == "bob"),
        "the resume's actor is recorded"
    );
}

#[tokio::test]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn whole_second_leases_hold_longer_never_shorter() {
    let Some(url) = testing::etcd_url() else {
        return;
    };
    let p = provider(&url);
    for (name, at_most) in [
        ("short", Duration::from_millis(300)),
        ("odd", Duration::from_millis(2200)),
    ] {
        let start = Instant::now();
        p.acquire(name, at_most, "a").await.unwrap().unwrap();
        loop {
            if p.acquire(name, at_most, "b").await.unwrap().is_some() {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{name} never freed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let held = start.elapsed();
        // Rounded up to whole seconds, and at least etcd's minimum TTL.
        let least = at_most.max(shedlock_etcd::ETCD_MIN_TTL);
        assert!(
            held >= least,
            "{name}: freed after {held:?}, asked {at_most:?}"
        );
        // At most a second of rounding, etcd's 500 ms sweep and a second of slack.
        assert!(
            held <= least + Duration::from_millis(2500),
            "{name}: held {held:?}"
        );
    }
}

#[scheduled_lock(name = "report-{tenant}", at_most = "10s", executor = executor)]
async fn report(executor: &LockingTaskExecutor, tenant: u32, runs: &AtomicUsize) -> Option<i64> {
    shedlock_core::current::assert_locked();
    runs.fetch_add(1, Ordering::SeqCst);
    shedlock_core::current_lock().and_then(|l| l.fencing_token())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn executor_and_macro_run_on_etcd() {
    let Some(url) = testing::etcd_url() else {
        return;
    };
    let store: Arc<dyn LockProvider> = Arc::new(provider(&url));
    let a = LockingTaskExecutor::builder(store.clone())
        .owner_id("a")
        .build()
        .unwrap();
    let b = LockingTaskExecutor::builder(store.clone())
        .owner_id("b")
        .build()
        .unwrap();
    let runs = AtomicUsize::new(0);

    // A held lock makes the other replica skip; the token is visible inside the task.
    let cfg = LockConfig::new("job", Duration::from_secs(10)).unwrap();
    let guard = a.try_lock(&cfg).await.unwrap().expect("free");
    assert!(b.execute(&cfg, async { 1 }).await.unwrap().is_none());
    assert!(guard.release().await.unwrap());
    assert_eq!(b.execute(&cfg, async { 2 }).await.unwrap(), Some(2));

    let token = report(&a, 7, &runs).await.unwrap().expect("ran");
    assert!(token.is_some());
    let later = report(&b, 7, &runs)
        .await
        .unwrap()
        .expect("ran after release");
    assert!(later > token, "tokens increase: {later:?} after {token:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 2);

    // Keep-alive extends a lock past its at_most while the task runs.
    let cfg = LockConfig::builder("kept")
        .at_most(Duration::from_secs(2))
        .keep_alive(true)
        .build()
        .unwrap();
    let ran = a
        .execute(&cfg, async {
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(4) {
                assert!(!shedlock_core::current_lock().unwrap().is_lost());
                assert!(
                    store
                        .acquire("kept", Duration::from_secs(5), "b")
                        .await
                        .unwrap()
                        .is_none()
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
        .await
        .unwrap();
    assert!(ran.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn leader_latch_elects_one_and_hands_over_on_close() {
    let Some(url) = testing::etcd_url() else {
        return;
    };
    let store: Arc<dyn LockProvider> = Arc::new(provider(&url));
    let config = |owner: &str| {
        LeaderLatchConfig::builder("leader")
            .owner_id(owner)
            .lease(Duration::from_secs(4))
            .renew_interval(Duration::from_secs(1))
            .renew_deadline(Duration::from_secs(3))
            .acquire_interval(Duration::from_millis(300))
            .call_timeout(Duration::from_millis(300))
            .build()
            .unwrap()
    };
    let one = LeaderLatch::start(store.clone(), config("one")).unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), one.wait_for_leadership())
        .await
        .unwrap()
        .unwrap();
    let two = LeaderLatch::start(store.clone(), config("two")).unwrap();
    // Two follows while one leads, through several renewals (a 4 s lease, renewed each second).
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        assert!(one.is_leader() && !two.is_leader());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    one.close().await.unwrap();
    let start = Instant::now();
    let second = tokio::time::timeout(Duration::from_secs(10), two.wait_for_leadership())
        .await
        .unwrap()
        .unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "handover took {:?}",
        start.elapsed()
    );
    assert!(second.fencing_token() > first.fencing_token());
    two.close().await.unwrap();
}

/// Where a [`recording_proxy`] stops a request: the first request to `path` waits, before it is
/// forwarded, until the test says go.
struct Gate {
    path: &'static str,
    armed: std::sync::atomic::AtomicBool,
    /// Notified when the request to `path` arrived and waits.
    reached: tokio::sync::Notify,
    /// Notify to forward it.
    go: tokio::sync::Notify,
}

impl Gate {
    fn new(path: &'static str) -> Arc<Self> {
        Arc::new(Self {
            path,
            armed: true.into(),
            reached: tokio::sync::Notify::new(),
            go: tokio::sync::Notify::new(),
        })
    }
}

/// A TCP proxy in front of etcd that records the path of every HTTP request through it, and
/// holds the request at `gate`, if any.
async fn recording_proxy(
    upstream: String,
    gate: Option<Arc<Gate>>,
) -> (u16, Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let paths = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = paths.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = tokio::net::TcpStream::connect(&upstream).await.unwrap();
            let (mut client_read, mut client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            let seen = seen.clone();
            let gate = gate.clone();
            tokio::spawn(async move {
                let (mut buf, mut pending) = (vec![0; 16 * 1024], Vec::new());
                while let Ok(n @ 1..) = client_read.read(&mut buf).await {
                    pending.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&pending).into_owned();
                    let mut consumed = 0;
                    let mut hold = false;
                    while let Some(start) = text[consumed..].find("POST ") {
                        let rest = &text[consumed + start + 5..];
                        let Some(end) = rest.find(" HTTP/1.1\r\n") else {
                            break;
                        };
                        let path = &rest[..end];
                        hold |= gate.as_ref().is_some_and(|gate| {
                            gate.path == path && gate.armed.swap(false, Ordering::SeqCst)
                        });
                        seen.lock().unwrap().push(path.to_owned());
                        consumed += start + 5 + end;
                    }
                    pending.drain(..consumed.min(pending.len()));
                    if let Some(gate) = gate.as_ref().filter(|_| hold) {
                        gate.reached.notify_one();
                        gate.go.notified().await;
                    }
                    if server_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
            });
        }
    });
    (port, paths)
}

/// The `host:port` of the first member in an etcd URL.
fn first_member(url: &str) -> String {
    url.trim()
        .trim_start_matches("etcd://")
        .trim_start_matches("http://")
        .split(',')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn round_trips_per_operation_match_the_docs() {
    let Some(url) = testing::etcd_url() else {
        return;
    };
    let upstream = first_member(&url);
    let (port, paths) = recording_proxy(upstream, None).await;
    let p = EtcdLockProvider::builder(format!("etcd://127.0.0.1:{port}"))
        .prefix(testing::unique_prefix())
        .build()
        .unwrap();
    let take = || std::mem::take(&mut *paths.lock().unwrap());
    let (range, grant, txn, revoke, ttl) = (
        "/v3/kv/range",
        "/v3/lease/grant",
        "/v3/kv/txn",
        "/v3/lease/revoke",
        "/v3/lease/timetolive",
    );
    let at_most = Duration::from_secs(10);

    let record = p.acquire("job", at_most, "a").await.unwrap().unwrap();
    assert_eq!(take(), [range, grant, txn], "a won acquire");
    assert!(p.acquire("job", at_most, "b").await.unwrap().is_none());
    assert_eq!(take(), [range], "a skip: one read");
    let record = p.extend(&record, at_most).await.unwrap().unwrap();
    assert_eq!(
        take(),
        [grant, txn],
        "the first extend keeps the first lease"
    );
    let record = p.extend(&record, at_most).await.unwrap().unwrap();
    assert_eq!(
        take(),
        [grant, txn, revoke],
        "a later extend revokes the lease it replaced"
    );
    assert!(p.release(&record, Duration::from_secs(5)).await.unwrap());
    assert_eq!(
        take(),
        [range, ttl, grant, txn, revoke],
        "a release with at_least ahead"
    );
    p.holder("job").await.unwrap();
    assert_eq!(take(), [range], "holder");
    let fresh = p.acquire("other", at_most, "a").await.unwrap().unwrap();
    take();
    assert!(p.release(&fresh, Duration::ZERO).await.unwrap());
    assert_eq!(take(), [txn], "a release without at_least, never extended");

    // Job state rides in the release's transaction; definitions are a grant and a transaction.
    let report = RunReport::new(chrono::Utc::now(), RunOutcome::Failed("x".into()));
    let run = p.acquire("run", at_most, "a").await.unwrap().unwrap();
    take();
    assert!(p.release_run(&run, Duration::ZERO, &report).await.unwrap());
    assert_eq!(take(), [txn], "a recorded release: as a release");
    let run = p.acquire("run", at_most, "a").await.unwrap().unwrap();
    take();
    assert!(
        p.release_run(&run, Duration::from_secs(5), &report)
            .await
            .unwrap()
    );
    assert_eq!(
        take(),
        [range, ttl, grant, txn],
        "a recorded release with at_least ahead: as a release"
    );
    p.list().await.unwrap();
    assert_eq!(take(), [range], "list, with the job state");
    let defs = [Definition::new("run", "run", "{}")];
    p.publish_definitions("a", "1", &defs, at_most)
        .await
        .unwrap();
    assert_eq!(take(), [grant, txn], "publish definitions");
    p.definitions().await.unwrap();
    assert_eq!(take(), [range], "definitions");
    assert_eq!(p.forget("run").await.unwrap(), 1);
    assert_eq!(take(), ["/v3/kv/deleterange"], "forget");

    // A pause is one transaction, and the claim's one read sees it.
    p.pause("job", PauseFor::UntilResumed, None, "ann")
        .await
        .unwrap();
    assert_eq!(take(), [txn], "pause");
    let fire = fire_now();
    let claim = p.claim_fire("job", &fire, at_most, "a").await.unwrap();
    assert!(matches!(claim, FireClaim::Paused { .. }), "{claim:?}");
    assert_eq!(take(), [range], "a paused fire claim: one read, no write");
    assert!(p.resume("job", "ann").await.unwrap().is_some());
    assert_eq!(take(), [txn], "resume");
    assert!(p.resume("job", "ann").await.unwrap().is_none());
    assert_eq!(
        take(),
        [txn],
        "resume without a pause: one transaction, writing nothing"
    );
}

/// A fire whose window holds now: from a second ago, for an hour.
fn fire_now() -> Fire {
    let at = chrono::Utc::now() - chrono::Duration::seconds(1);
    Fire::new(at, at + chrono::Duration::hours(1)).unwrap()
}

/// A pause committed between a claim's read and its transaction fails the transaction, as it
/// compares the pause key's revision as read: the claim looks again and answers `Paused`, having
/// written nothing and left no lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn a_pause_between_a_claims_read_and_its_transaction_is_honoured() {
    let Some(url) = testing::etcd_url() else {
        return;
    };
    // The grant comes between the claim's read and its transaction: hold it there.
    let gate = Gate::new("/v3/lease/grant");
    let (port, paths) = recording_proxy(first_member(&url), Some(gate.clone())).await;
    let prefix = testing::unique_prefix();
    let claimer = EtcdLockProvider::builder(format!("etcd://127.0.0.1:{port}"))
        .prefix(&prefix)
        .build()
        .unwrap();
    let operator = EtcdLockProvider::builder(&url)
        .prefix(&prefix)
        .build()
        .unwrap();
    let fire = fire_now();
    let minute = Duration::from_mins(1);
    let claim = tokio::spawn(async move {
        let answer = claimer.claim_fire("job", &fire, minute, "replica-a").await;
        (answer, claimer)
    });
    gate.reached.notified().await;
    let pause = operator
        .pause("job", PauseFor::UntilResumed, Some("mid-claim"), "ann")
        .await
        .unwrap();
    gate.go.notify_one();
    let (answer, claimer) = claim.await.unwrap();
    match answer.unwrap() {
        FireClaim::Paused { until: None, .. } => {}
        other => panic!("a pause committed mid-claim was answered {other:?}"),
    }
    assert_eq!(
        *paths.lock().unwrap(),
        [
            "/v3/kv/range",
            "/v3/lease/grant",
            "/v3/kv/txn",
            "/v3/lease/revoke",
            "/v3/kv/range"
        ],
        "read, grant, the failed transaction, its lease revoked, the second look"
    );
    let entry = operator.entry("job").await.unwrap().expect("paused");
    assert!(!entry.is_held(), "the claim took nothing: {entry}");
    assert_eq!(entry.pause(), Some(&pause));
    // The fire was not recorded: after a resume it is claimed.
    assert_eq!(operator.resume("job", "ann").await.unwrap(), Some(pause));
    let claim = claimer
        .claim_fire("job", &fire, minute, "replica-a")
        .await
        .unwrap();
    assert!(claim.claimed().is_some(), "{claim:?}");
}

/// A provider behind a [`recording_proxy`] on a prefix of its own, and the proxy's record.
async fn counted(url: &str) -> (EtcdLockProvider, Arc<std::sync::Mutex<Vec<String>>>) {
    let (port, paths) = recording_proxy(first_member(url), None).await;
    let p = EtcdLockProvider::builder(format!("etcd://127.0.0.1:{port}"))
        .prefix(testing::unique_prefix())
        .build()
        .unwrap();
    (p, paths)
}

fn requested(answer: TriggerAnswer) -> shedlock_core::trigger::Trigger {
    match answer {
        TriggerAnswer::Requested(trigger) => trigger,
        other => panic!("a trigger of a free lock answered {other:?}"),
    }
}

/// The scheduler's poll of pending triggers is one range read of their common prefix whatever the
/// number of locks, and `list` shows no pending copy as a lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn pending_triggers_are_one_read_whatever_the_number_of_locks() {
    let Some(url) = testing::etcd_url() else {
        return;
    };
    let (p, paths) = counted(&url).await;
    let take = || std::mem::take(&mut *paths.lock().unwrap());
    let range = "/v3/kv/range";
    let minute = Duration::from_mins(1);

    assert!(p.pending_triggers().await.unwrap().is_empty());
    assert_eq!(take(), [range], "no trigger: one read");
    let first = requested(p.trigger("job-00", "ann", minute).await.unwrap());
    take();
    let pending = p.pending_triggers().await.unwrap();
    assert_eq!(take(), [range], "one lock: one read");
    assert_eq!(
        pending
            .iter()
            .map(|t| (t.lock_name.as_str(), t.id, t.requested_at, t.expires))
            .collect::<Vec<_>>(),
        [("job-00", first.id, first.requested_at, first.expires)]
    );

    // Many locks, most of them without a trigger, some held.
    for i in 0..30 {
        p.acquire(&format!("plain-{i:02}"), minute, "a")
            .await
            .unwrap();
    }
    for i in 1..40 {
        requested(
            p.trigger(&format!("job-{i:02}"), "ann", minute)
                .await
                .unwrap(),
        );
    }
    take();
    let pending = p.pending_triggers().await.unwrap();
    assert_eq!(
        take(),
        [range],
        "40 triggers among 70 locks: still one read"
    );
    let names: Vec<String> = pending.iter().map(|t| t.lock_name.clone()).collect();
    let expected: Vec<String> = (0..40).map(|i| format!("job-{i:02}")).collect();
    assert_eq!(
        names, expected,
        "every pending trigger, sorted by lock name"
    );
    let listed = p.list().await.unwrap();
    assert_eq!(
        listed.len(),
        70,
        "no pending copy is listed as a lock: {listed:?}"
    );
}

/// A trigger is a read, a lease and a transaction, a refused one a read; a claim is an acquire's
/// three, a claim of a trigger gone one read; a claimed trigger is no longer pending and its entry
/// names the replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn triggers_and_their_claims_cost_what_the_docs_say() {
    let Some(url) = testing::etcd_url() else {
        return;
    };
    let (p, paths) = counted(&url).await;
    let take = || std::mem::take(&mut *paths.lock().unwrap());
    let (range, grant, txn) = ("/v3/kv/range", "/v3/lease/grant", "/v3/kv/txn");
    let minute = Duration::from_mins(1);

    let first = requested(p.trigger("job", "ann", minute).await.unwrap());
    assert_eq!(take(), [range, grant, txn], "a trigger");
    match p.trigger("job", "bob", minute).await.unwrap() {
        TriggerAnswer::Pending(pending) => assert_eq!(pending, first),
        other => panic!("a second trigger answered {other:?}"),
    }
    assert_eq!(take(), [range], "a refused trigger: one read, no write");
    p.acquire("plain", minute, "a").await.unwrap().unwrap();
    take();
    match p.trigger("plain", "bob", minute).await.unwrap() {
        TriggerAnswer::Held(holder) => assert_eq!(holder.owner(), "a"),
        other => panic!("a trigger of a held lock answered {other:?}"),
    }
    assert_eq!(
        take(),
        [range],
        "a trigger of a held lock: one read, no write"
    );

    let claim = p
        .claim_trigger("job", first.id, minute, "replica")
        .await
        .unwrap();
    assert!(matches!(claim, TriggerClaim::Claimed(_)), "{claim:?}");
    assert_eq!(take(), [range, grant, txn], "a claim: as an acquire");
    let again = p
        .claim_trigger("job", first.id, minute, "replica")
        .await
        .unwrap();
    assert!(matches!(again, TriggerClaim::Gone { .. }), "{again:?}");
    assert_eq!(take(), [range], "a claim of a taken trigger: one read");
    assert!(p.pending_triggers().await.unwrap().is_empty());
    let entry = p.entry("job").await.unwrap().unwrap();
    let taken = entry.trigger().unwrap();
    assert_eq!(
        (taken.id, taken.taken_by.as_deref()),
        (first.id, Some("replica"))
    );
    assert_eq!(
        entry.last_action().map(|a| a.kind),
        Some(ActionKind::Triggered)
    );
}

/// `watch_triggers` is an etcd watch of the pending triggers' prefix: a trigger wakes it, the
/// locks' own writes and a claim, which deletes the pending copy, do not. Two watchers are both
/// woken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn a_trigger_wakes_every_watcher_and_nothing_else_does() {
    let Some(url) = testing::etcd_url() else {
        return;
    };
    let p = provider(&url);
    let minute = Duration::from_mins(1);
    let quiet = Duration::from_millis(500);
    let mut one = p.watch_triggers().await.unwrap();
    let mut two = p.watch_triggers().await.unwrap();
    let record = p.acquire("plain", minute, "a").await.unwrap().unwrap();
    assert!(p.release(&record, Duration::ZERO).await.unwrap());
    p.pause("paused", PauseFor::UntilResumed, None, "ann")
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(quiet, one.next()).await.is_err(),
        "a lock's writes woke the watcher"
    );
    let TriggerAnswer::Requested(trigger) = p.trigger("job", "ann", minute).await.unwrap() else {
        panic!("the trigger was refused");
    };
    for watch in [&mut one, &mut two] {
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(5), watch.next()).await,
            Ok(Some(())),
            "the trigger woke no watcher"
        );
    }
    let claim = p
        .claim_trigger("job", trigger.id, minute, "replica")
        .await
        .unwrap();
    assert!(matches!(claim, TriggerClaim::Claimed(_)), "{claim:?}");
    assert!(
        tokio::time::timeout(quiet, one.next()).await.is_err(),
        "a claim woke the watcher"
    );
}

/// Three schedulers on etcd, polling for triggers only every minute: each trigger runs its job
/// once, on one of them, with the trigger's id and instant as the run's, and the lock's entry names
/// the replica that took it. The second runs within seconds of its request, long after the
/// schedulers' first reads, so by the watch's push.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn triggers_run_once_across_three_schedulers_by_the_push() {
    use shedlock_core::scheduler::{Job, Schedule, Scheduler};
    let Some(url) = testing::etcd_url() else {
        return;
    };
    let prefix = testing::unique_prefix();
    let store = || {
        EtcdLockProvider::builder(&url)
            .prefix(&prefix)
            .build()
            .unwrap()
    };
    let runs = Runs::default();
    let mut replicas = Vec::new();
    for owner in ["a", "b", "c"] {
        let executor = LockingTaskExecutor::builder(Arc::new(store()))
            .owner_id(owner)
            .default_at_most(Duration::from_secs(30))
            .build()
            .unwrap();
        let scheduler = Scheduler::new(executor).trigger_poll(Duration::from_mins(1));
        let (log, who) = (runs.clone(), owner.to_owned());
        let hourly = Schedule::every(Duration::from_hours(1)).unwrap();
        scheduler
            .add(Job::new("report", hourly, move |run| {
                let (log, who) = (log.clone(), who.clone());
                async move {
                    log.lock()
                        .unwrap()
                        .push((who, run.trigger(), run.fire().at()));
                }
            }))
            .unwrap();
        scheduler.start().await.unwrap();
        replicas.push(scheduler);
    }
    let operator = store();
    for round in 1..=2 {
        let requested = Instant::now();
        let trigger = run_triggered(&operator, &runs, round).await;
        assert!(
            round == 1 || requested.elapsed() < Duration::from_secs(5),
            "the run took {:?}: no push",
            requested.elapsed()
        );
        assert!(trigger.taken_by.is_some());
    }
    for scheduler in &replicas {
        scheduler.shutdown(Duration::from_secs(1)).await;
    }
}

type Runs = Arc<std::sync::Mutex<Vec<(String, Option<i64>, chrono::DateTime<chrono::Utc>)>>>;

/// Triggers "report", waits until its run is recorded, checks it ran once more, as the trigger's,
/// on the replica the entry names, and answers the trigger as taken.
async fn run_triggered(
    operator: &EtcdLockProvider,
    runs: &Runs,
    round: usize,
) -> shedlock_core::trigger::Trigger {
    let deadline = Instant::now() + Duration::from_secs(10);
    let trigger = requested(
        operator
            .trigger("report", "ann", Duration::from_mins(1))
            .await
            .unwrap(),
    );
    let taken = loop {
        let entry = operator.entry("report").await.unwrap().unwrap();
        let recorded = entry
            .state()
            .and_then(|s| s.last_run.clone())
            .is_some_and(|run| run.fire == trigger.requested_at);
        if recorded && !entry.is_held() {
            break entry.trigger().cloned().unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "the trigger did not run: {entry}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let seen = runs.lock().unwrap().clone();
    assert_eq!(seen.len(), round, "each trigger ran once: {seen:?}");
    let (by, id, fire) = seen[round - 1].clone();
    assert_eq!((id, fire), (Some(trigger.id), trigger.requested_at));
    let owner = taken.taken_by.clone().unwrap_or_default();
    assert!(owner.starts_with(&by), "{owner} took it, {by} ran it");
    taken
}

/// Where a [`cutting_proxy`] loses a reply: once armed, the next request to `path` reaches etcd and
/// its reply is dropped, the client's connection closed.
struct Cut {
    path: &'static str,
    armed: std::sync::atomic::AtomicBool,
    done: AtomicUsize,
}

/// A TCP proxy in front of etcd that loses the reply [`Cut`] aims at.
async fn cutting_proxy(upstream: String, cut: Arc<Cut>) -> u16 {
    use std::sync::atomic::AtomicBool;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = tokio::net::TcpStream::connect(&upstream).await.unwrap();
            let (mut client_read, mut client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            // Set before the request is forwarded, so its reply is never relayed. HTTP/1.1
            // requests on one connection are sequential: the reply pending then is its own.
            let cut_here = Arc::new(AtomicBool::new(false));
            let (request_cut, request_cutter) = (cut_here.clone(), cut.clone());
            tokio::spawn(async move {
                let mut buf = vec![0; 16 * 1024];
                while let Ok(n @ 1..) = client_read.read(&mut buf).await {
                    let text = String::from_utf8_lossy(&buf[..n]);
                    if text.contains(&format!("POST {} ", request_cutter.path))
                        && request_cutter.armed.swap(false, Ordering::SeqCst)
                    {
                        request_cut.store(true, Ordering::SeqCst);
                    }
                    if server_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
            let cut = cut.clone();
            tokio::spawn(async move {
                let mut buf = vec![0; 16 * 1024];
                while let Ok(n @ 1..) = server_read.read(&mut buf).await {
                    if cut_here.load(Ordering::SeqCst) {
                        cut.done.fetch_add(1, Ordering::SeqCst);
                        let _ = client_write.shutdown().await;
                        return;
                    }
                    if client_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

/// A trigger, and a trigger claim, whose reply is lost fail saying so and are not sent to the
/// second member (a repeat would answer `Pending` or `Gone` for its own effect): both had been
/// applied, as the entry shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn a_trigger_and_a_claim_whose_replies_are_lost_fail_and_are_not_sent_again() {
    let Some(url) = testing::etcd_url() else {
        return;
    };
    let cut = Arc::new(Cut {
        path: "/v3/kv/txn",
        armed: false.into(),
        done: AtomicUsize::new(0),
    });
    let first = cutting_proxy(first_member(&url), cut.clone()).await;
    let (second, paths) = recording_proxy(first_member(&url), None).await;
    let prefix = testing::unique_prefix();
    let p = EtcdLockProvider::builder(format!("etcd://127.0.0.1:{first},127.0.0.1:{second}"))
        .prefix(&prefix)
        .build()
        .unwrap();
    let operator = EtcdLockProvider::builder(&url)
        .prefix(&prefix)
        .build()
        .unwrap();
    let minute = Duration::from_mins(1);

    cut.armed.store(true, Ordering::SeqCst);
    let error = p
        .trigger("job", "ann", minute)
        .await
        .expect_err("a trigger whose reply was lost fails");
    assert_eq!(cut.done.load(Ordering::SeqCst), 1, "the reply was cut");
    let text = error.to_string();
    assert!(
        text.contains("reply was lost") && text.contains("the trigger may be written"),
        "{text}"
    );
    let trigger = operator
        .entry("job")
        .await
        .unwrap()
        .and_then(|entry| entry.trigger().cloned())
        .expect("the lost trigger was written");
    assert_eq!(trigger.by, "ann");
    assert!(trigger.taken_by.is_none());

    cut.armed.store(true, Ordering::SeqCst);
    let error = p
        .claim_trigger("job", trigger.id, minute, "replica-a")
        .await
        .expect_err("a claim whose reply was lost fails");
    assert_eq!(cut.done.load(Ordering::SeqCst), 2, "the reply was cut");
    let text = error.to_string();
    assert!(
        text.contains("reply was lost") && text.contains("may be held by this owner"),
        "{text}"
    );
    let holder = operator.holder("job").await.unwrap().expect("held");
    assert_eq!(holder.owner(), "replica-a", "the lost claim was applied");
    let entry = operator.entry("job").await.unwrap().unwrap();
    assert_eq!(
        entry.trigger().and_then(|t| t.taken_by.as_deref()),
        Some("replica-a")
    );
    assert!(
        !paths
            .lock()
            .unwrap()
            .iter()
            .any(|path| path == "/v3/kv/txn"),
        "a transaction was sent again to the second member: {:?}",
        paths.lock().unwrap()
    );
}
