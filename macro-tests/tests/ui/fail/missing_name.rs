use shedlock_core::scheduled_lock;

#[scheduled_lock(at_most = "10m")]
async fn report() {}

#[scheduled_lock]
async fn cleanup() {}

fn main() {}
