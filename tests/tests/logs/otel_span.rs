//! The scheduler's span of a fire, `shedlock_job`, exported through `tracing-opentelemetry` into
//! the OpenTelemetry SDK's in-memory exporter: its attributes carry OpenTelemetry's names for
//! scheduled work (README.md, "OpenTelemetry").

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use opentelemetry::trace::{Status, TracerProvider as _};
use opentelemetry::{Key, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use shedlock_core::{InMemoryLockProvider, Job, LockingTaskExecutor, Schedule, Scheduler};
use tracing_subscriber::layer::SubscriberExt;

const SEC: Duration = Duration::from_secs(1);
const CRON: &str = "*/5 * * * * *";

/// The fires a replica's body saw, by job.
type Ran = Arc<Mutex<Vec<(&'static str, DateTime<Utc>)>>>;

/// The crash job's body after it noted its fire. A function returning `()`, so that the body's
/// future has an output `Job::new` takes.
fn panics(fire: DateTime<Utc>) {
    panic!("the crash job panics at {fire}");
}

fn replica(store: &Arc<InMemoryLockProvider>, owner: &str, ran: &Ran) -> Scheduler {
    let executor = LockingTaskExecutor::builder(store.clone())
        .owner_id(owner)
        .default_at_most(30 * SEC)
        .build()
        .expect("an executor");
    let scheduler = Scheduler::new(executor);
    let seen = ran.clone();
    let report = Job::new(
        "report",
        Schedule::cron(CRON).expect("a cron expression"),
        move |run| {
            let seen = seen.clone();
            async move {
                let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
                seen.push(("report", run.fire().at()));
            }
        },
    );
    let seen = ran.clone();
    let sync = Job::new(
        "sync",
        Schedule::every(3 * SEC).expect("a period"),
        move |run| {
            let seen = seen.clone();
            async move {
                let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
                seen.push(("sync", run.fire().at()));
                Err::<(), _>("disk full")
            }
        },
    );
    let seen = ran.clone();
    let crash = Job::new(
        "crash",
        Schedule::every(4 * SEC).expect("a period"),
        move |run| {
            let seen = seen.clone();
            async move {
                let fire = run.fire().at();
                seen.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(("crash", fire));
                panics(fire);
            }
        },
    );
    scheduler.add(report).expect("the report job");
    scheduler.add(sync).expect("the sync job");
    scheduler.add(crash).expect("the crash job");
    scheduler
}

fn attribute(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == Key::from(key.to_owned()))
        .map(|kv| kv.value.clone())
}

fn text(span: &SpanData, key: &str) -> Option<String> {
    attribute(span, key).map(|value| value.as_str().into_owned())
}

/// Two replicas over one in-memory store run a cron job that succeeds, a fixed-rate job that fails
/// and one that panics, for 10 s of paused time from one second past the whole minute `minute` (Unix seconds).
/// Returns the fires the bodies saw, sorted, and the spans exported meanwhile.
async fn two_replicas_for_ten_seconds(
    minute: i64,
) -> (Vec<(&'static str, DateTime<Utc>)>, Vec<SpanData>) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("shedlock-tests"));
    let subscriber = tracing_subscriber::registry().with(layer);
    let guard = tracing::subscriber::set_default(subscriber);

    let start = DateTime::from_timestamp(minute + 1, 0).expect("a time");
    let store = Arc::new(InMemoryLockProvider::starting_at(start));
    let ran = Ran::default();
    let (a, b) = (replica(&store, "a", &ran), replica(&store, "b", &ran));
    a.start().await.expect("a starts");
    b.start().await.expect("b starts");
    tokio::time::sleep(10 * SEC).await;
    a.shutdown(SEC).await;
    b.shutdown(SEC).await;
    drop(guard);

    let mut ran = ran.lock().unwrap_or_else(PoisonError::into_inner).clone();
    ran.sort();
    let spans = exporter.get_finished_spans().expect("the exported spans");
    provider.shutdown().expect("the tracer provider shuts down");
    (ran, spans)
}

/// Checks the span of `job`'s fire at `time` (`faas.time`) on the replica that ran it. Returns its
/// fencing token.
fn check_run(job: &str, time: &str, run: &SpanData) -> i64 {
    let fire: DateTime<Utc> = time.parse().expect("faas.time is RFC 3339");
    assert_eq!(text(run, "fire"), Some(fire.to_string()), "the old `fire`");
    if job == "report" {
        assert_eq!(text(run, "faas.cron").as_deref(), Some(CRON));
        assert_eq!(
            text(run, "shedlock.schedule").as_deref(),
            Some(r#"cron "*/5 * * * * *" in UTC"#)
        );
        assert_eq!(text(run, "shedlock.outcome").as_deref(), Some("succeeded"));
        assert_eq!(run.status, Status::Unset);
        return token(job, time, run);
    }
    assert_eq!(attribute(run, "faas.cron"), None, "a fixed rate is no cron");
    if job == "sync" {
        assert_eq!(text(run, "shedlock.schedule").as_deref(), Some("every 3s"));
        assert_eq!(text(run, "shedlock.outcome").as_deref(), Some("failed"));
        assert_eq!(run.status, Status::error("disk full"));
    } else {
        assert_eq!(text(run, "shedlock.schedule").as_deref(), Some("every 4s"));
        assert_eq!(text(run, "shedlock.outcome").as_deref(), Some("panicked"));
        assert_eq!(run.status, Status::error("the run panicked"));
    }
    token(job, time, run)
}

fn token(job: &str, time: &str, run: &SpanData) -> i64 {
    match attribute(run, "shedlock.fencing_token") {
        Some(Value::I64(token)) => token,
        other => panic!("{job} at {time}: a fencing token, not {other:?}"),
    }
}

/// Checks the span of `job`'s fire at `time` on the replica that did not run it: no outcome, no
/// token, no error. Returns whether it found the fire claimed elsewhere (else held).
fn check_not_run(job: &str, time: &str, other: &SpanData) -> bool {
    let claim = text(other, "shedlock.claim");
    assert!(
        matches!(claim.as_deref(), Some("claimed_elsewhere" | "held")),
        "{job} at {time}: {claim:?}"
    );
    assert_eq!(attribute(other, "shedlock.outcome"), None, "not run here");
    assert_eq!(attribute(other, "shedlock.fencing_token"), None);
    assert_eq!(other.status, Status::Unset);
    claim.as_deref() == Some("claimed_elsewhere")
}

/// Every fire opens a span on each replica: one runs it, the other finds it claimed. The one that
/// ran it says how the run ended.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_fires_span_carries_opentelemetry_attributes() {
    let minute = Utc::now().timestamp() / 60 * 60;
    let (ran, spans) = two_replicas_for_ten_seconds(minute).await;
    let at = |secs: i64| DateTime::from_timestamp(minute + secs, 0).expect("a time");
    assert_eq!(
        ran,
        [
            ("crash", at(4)),
            ("crash", at(8)),
            ("report", at(5)),
            ("report", at(10)),
            ("sync", at(3)),
            ("sync", at(6)),
            ("sync", at(9)),
        ],
        "each fire ran once"
    );

    let fires: Vec<&SpanData> = spans.iter().filter(|s| s.name == "shedlock_job").collect();
    // Each job's spans by fire instant (`faas.time`), the claimed one and the others.
    let mut by_fire: BTreeMap<(String, String), Vec<&SpanData>> = BTreeMap::new();
    for span in &fires {
        let job = text(span, "job").expect("job");
        let time = text(span, "faas.time").expect("faas.time");
        assert_eq!(text(span, "faas.trigger").as_deref(), Some("timer"));
        assert_eq!(
            text(span, "target").as_deref(),
            Some("shedlock_core::scheduler::job_loop"),
            "the span's target from before OpenTelemetry"
        );
        by_fire.entry((job, time)).or_default().push(span);
    }
    let expected: Vec<(String, String)> = ran
        .iter()
        .map(|(job, fire)| {
            let time = fire.to_rfc3339_opts(SecondsFormat::AutoSi, true);
            ((*job).to_owned(), time)
        })
        .collect();
    assert_eq!(
        by_fire.keys().cloned().collect::<Vec<_>>(),
        expected,
        "one span per replica for each fire that ran, and no other: {fires:#?}"
    );
    assert_eq!(fires.len(), 2 * expected.len(), "{fires:#?}");

    let mut elsewhere = 0;
    let mut tokens: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for ((job, time), spans) in &by_fire {
        let (claimed, others): (Vec<_>, Vec<_>) = spans
            .iter()
            .partition(|s| text(s, "shedlock.claim").as_deref() == Some("claimed"));
        assert_eq!(claimed.len(), 1, "{job} at {time} ran once: {spans:#?}");
        tokens
            .entry(job)
            .or_default()
            .push(check_run(job, time, claimed[0]));
        for other in others {
            elsewhere += usize::from(check_not_run(job, time, other));
        }
    }
    assert!(elsewhere > 0, "a replica found a fire claimed elsewhere");
    for (job, of_job) in tokens {
        assert!(
            of_job.is_sorted_by(|a, b| a < b),
            "{job}'s tokens increase with its fires: {of_job:?}"
        );
    }
}

/// `execute_fire` opens the same span for the fire it is given: with no schedule, so no
/// `faas.cron`; on a panicking task, the claim is recorded before the run and the status is the
/// panic's.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn execute_fire_opens_the_same_span() {
    use shedlock_core::LockConfig;
    use shedlock_core::provider::Fire;

    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("shedlock-tests"));
    let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

    let start = Utc::now();
    let store = Arc::new(InMemoryLockProvider::starting_at(start));
    let executor = LockingTaskExecutor::builder(store.clone())
        .owner_id("a")
        .build()
        .expect("an executor");
    let other = LockingTaskExecutor::builder(store)
        .owner_id("b")
        .build()
        .expect("an executor");
    let cfg = LockConfig::new("tick", 30 * SEC).expect("a config");
    let fire = Fire::new(start, start + chrono::Duration::seconds(10)).expect("a fire");
    let ran = executor
        .execute_fire(&cfg, &fire, async { Err::<(), _>("no route") })
        .await
        .expect("claimed");
    assert!(ran.output().is_some_and(|r| r.is_err()));
    let not = other
        .execute_fire(&cfg, &fire, async {})
        .await
        .expect("answered");
    assert!(not.output().is_none());
    let next_fire = Fire::new(
        start + chrono::Duration::seconds(10),
        start + chrono::Duration::seconds(20),
    )
    .expect("a fire");
    tokio::time::sleep(10 * SEC).await;
    let crashed = {
        let executor = executor.clone();
        let cfg = cfg.clone();
        tokio::spawn(async move {
            executor
                .execute_fire(&cfg, &next_fire, async { panics(next_fire.at()) })
                .await
        })
    };
    assert!(crashed.await.is_err_and(|e| e.is_panic()));
    drop(guard);

    let spans = exporter.get_finished_spans().expect("the exported spans");
    provider.shutdown().expect("the tracer provider shuts down");
    let fires: Vec<&SpanData> = spans.iter().filter(|s| s.name == "shedlock_job").collect();
    assert_eq!(fires.len(), 3, "{fires:?}");
    let time = |at: DateTime<Utc>| at.to_rfc3339_opts(SecondsFormat::AutoSi, true);
    for span in &fires {
        assert_eq!(text(span, "job").as_deref(), Some("tick"));
        assert_eq!(text(span, "faas.trigger").as_deref(), Some("timer"));
        assert_eq!(attribute(span, "faas.cron"), None, "no schedule is known");
        assert_eq!(attribute(span, "shedlock.schedule"), None);
    }
    let claims: Vec<_> = fires
        .iter()
        .map(|s| {
            (
                text(s, "faas.time").unwrap_or_default(),
                text(s, "shedlock.claim").unwrap_or_default(),
                text(s, "shedlock.outcome"),
            )
        })
        .collect();
    let first = time(fire.at());
    let second = time(next_fire.at());
    for expected in [
        (
            first.clone(),
            "claimed".to_owned(),
            Some("failed".to_owned()),
        ),
        (first, "claimed_elsewhere".to_owned(), None),
        (second, "claimed".to_owned(), Some("panicked".to_owned())),
    ] {
        assert!(claims.contains(&expected), "{expected:?} not in {claims:?}");
    }
}
