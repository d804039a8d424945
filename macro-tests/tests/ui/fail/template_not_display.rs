use shedlock_core::scheduled_lock;

#[scheduled_lock(name = "report-{tenants}", at_most = "10m")]
async fn report(tenants: Vec<String>) {}

fn main() {}
