//! A scheduled `#[scheduled_lock]` function registers in one line and runs at each fire, under
//! the fire's lock, on paused time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use shedlock_core::{
    InMemoryLockProvider, LockingTaskExecutor, Scheduler, current_lock, scheduled_lock,
};

static RUNS: AtomicUsize = AtomicUsize::new(0);

#[scheduled_lock(name = "macro-tick", at_most = "10s", every = "1s")]
async fn tick() -> Result<(), std::io::Error> {
    assert_eq!(
        current_lock().expect("under the fire's lock").name(),
        "macro-tick"
    );
    RUNS.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_scheduled_function_registers_in_one_line_and_runs_each_fire() -> shedlock_core::Result<()>
{
    let scheduler = Scheduler::new(LockingTaskExecutor::new(InMemoryLockProvider::new())?);
    scheduler.add(tick_job()?)?;
    scheduler.start().await?;
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    scheduler.shutdown(Duration::from_secs(1)).await;
    let status = scheduler
        .status("macro-tick")
        .expect("registered under the lock name");
    assert!(status.runs >= 5, "{status:?}");
    assert_eq!(RUNS.load(Ordering::SeqCst) as u64, status.runs);
    assert_eq!(status.errors, 0);
    Ok(())
}

/// The job's settings as an application would read them from its configuration.
struct Settings {
    cron: String,
    zone: &'static str,
}

fn settings() -> Settings {
    Settings {
        cron: "*/2 * * * * *".to_owned(),
        zone: "Europe/Berlin",
    }
}

static CONFIGURED_RUNS: AtomicUsize = AtomicUsize::new(0);

/// A schedule from expressions: evaluated when `configured_job()` is called.
#[scheduled_lock(name = "macro-configured", at_most = "10s", cron = settings().cron, zone = settings().zone)]
async fn configured() -> Result<(), std::io::Error> {
    CONFIGURED_RUNS.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_schedule_from_an_expression_is_the_one_the_job_runs_on() -> shedlock_core::Result<()> {
    let job = configured_job()?;
    assert!(
        format!("{job:?}").contains(r#"Schedule(cron "*/2 * * * * *" in Europe/Berlin)"#),
        "{job:?}"
    );
    let scheduler = Scheduler::new(LockingTaskExecutor::new(InMemoryLockProvider::new())?);
    scheduler.add(job)?;
    scheduler.start().await?;
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    let next = scheduler
        .status("macro-configured")
        .and_then(|status| status.next_fire)
        .expect("a next fire while running");
    assert_eq!(next.timestamp() % 2, 0, "every two seconds: {next}");
    scheduler.shutdown(Duration::from_secs(1)).await;
    let status = scheduler.status("macro-configured").expect("registered");
    assert!(status.runs >= 3, "{status:?}");
    assert_eq!(CONFIGURED_RUNS.load(Ordering::SeqCst) as u64, status.runs);
    Ok(())
}

/// A cron expression that is wrong in the configuration.
fn broken_cron() -> &'static str {
    "0 0 25 * * *"
}

#[scheduled_lock(name = "macro-broken", at_most = "10s", cron = broken_cron())]
async fn broken() {}

/// A period that is wrong in the configuration.
const BROKEN_EVERY: Duration = Duration::from_micros(1500);

#[scheduled_lock(name = "macro-broken-rate", at_most = "10s", every = BROKEN_EVERY)]
async fn broken_rate() {}

/// A duration that is wrong in the configuration.
const ZERO: Duration = Duration::ZERO;

#[scheduled_lock(name = "macro-zero", at_most = ZERO)]
async fn zero() {}

#[test]
fn a_bad_schedule_or_duration_from_an_expression_names_the_lock() {
    let err = broken_job().expect_err("hour 25");
    assert!(err.is_invalid_schedule(), "{err}");
    assert_eq!(
        err.to_string(),
        "invalid schedule: lock \"macro-broken\": cron \"0 0 25 * * *\": the hours field \"25\" \
         is out of range 0-23"
    );
    let err = broken_rate_job().expect_err("1.5 ms");
    assert_eq!(
        err.to_string(),
        "invalid schedule: lock \"macro-broken-rate\": the period of a fixed rate (1.5ms) is not \
         a whole number of milliseconds; fire instants are whole milliseconds"
    );
    drop(broken());
    drop(broken_rate());
}

#[tokio::test]
async fn a_bad_duration_expression_names_the_lock() {
    let err = zero().await.expect_err("zero at_most");
    assert_eq!(
        err.to_string(),
        "invalid lock configuration: lock \"macro-zero\": at_most is zero; the lock would expire \
         at once (use at least a few seconds)"
    );
}

/// The compile-time texts (the trybuild case `schedule_errors`) are the run-time ones.
#[test]
fn compile_time_and_run_time_schedule_errors_read_the_same() {
    let stderr = include_str!("../ui/fail/schedule_errors.stderr");
    for (expression, zone) in [
        ("60 0 3 * * *", "UTC"),
        ("0 60 3 * * *", "UTC"),
        ("0 0 25 * * *", "UTC"),
        ("0 0 3 32 * *", "UTC"),
        ("0 0 3 * 13 *", "UTC"),
        ("0 0 3 * * 8", "UTC"),
        ("0 0 three * * *", "UTC"),
        ("0 0 3 * * *", "Europe/Berlln"),
    ] {
        let err = shedlock_core::Schedule::cron_in(expression, zone).expect_err(expression);
        let line = format!("error: {err}\n");
        assert!(stderr.contains(&line), "{line} not in\n{stderr}");
    }
}
