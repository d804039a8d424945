use shedlock_core::scheduled_lock;

#[scheduled_lock(name = "a", at_most = "0s")]
async fn zero() {}

#[scheduled_lock(name = "b", at_most = "PT0S", at_least = "0s")]
async fn iso_zero() {}

fn main() {}
