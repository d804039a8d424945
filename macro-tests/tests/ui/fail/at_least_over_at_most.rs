use shedlock_core::scheduled_lock;

#[scheduled_lock(name = "a", at_most = "10s", at_least = "1m")]
async fn at_least_last() {}

#[scheduled_lock(name = "b", at_least = "1h", at_most = "PT30M")]
async fn at_most_last() {}

fn main() {}
