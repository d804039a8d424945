use shedlock_core::scheduled_lock;

// Every mistake is reported in one build, and the function stays defined with its new
// signature: the caller below type-checks, so the mistakes do not cascade into other errors.
#[scheduled_lock(
    name = "report-{tenat}",
    at_most = "10 min",
    at_least = "1m",
    timeout = "5s"
)]
async fn report(tenant: &str) -> u32 {
    let _ = tenant;
    7
}

async fn caller() -> Result<(), shedlock_core::Error> {
    let ran: Option<u32> = report("eu").await?;
    let _ = ran;
    Ok(())
}

fn main() {
    drop(caller());
}
