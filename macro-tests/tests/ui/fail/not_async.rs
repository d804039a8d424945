use shedlock_core::scheduled_lock;

#[scheduled_lock(name = "report", at_most = "10m")]
fn report() {}

fn main() {}
