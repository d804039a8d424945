use shedlock_core::scheduled_lock;

#[scheduled_lock(nmae = "report", at_most = "10m")]
async fn typo() {}

#[scheduled_lock(name = "report", lock_at_most_for = "10m", retries = 3)]
async fn unknown() {}

#[scheduled_lock(name = "report", at_most = "10m", shedlock::executor = x)]
async fn path() {}

fn main() {}
