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
