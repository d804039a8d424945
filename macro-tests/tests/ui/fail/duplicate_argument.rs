use shedlock_core::scheduled_lock;

#[scheduled_lock(name = "report", at_most = "10m", name = "again")]
async fn twice() {}

#[scheduled_lock(
    name = "report",
    at_most = "10m",
    keep_alive,
    at_most = "5m",
    keep_alive
)]
async fn thrice() {}

fn main() {}
