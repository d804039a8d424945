use shedlock_core::{LockingTaskExecutor, scheduled_lock};

#[scheduled_lock(name = "report-{tenant}", at_most = "1m", every = "1m")]
async fn with_arguments(tenant: &str) {
    let _ = tenant;
}

struct Service {
    locks: LockingTaskExecutor,
}

impl Service {
    #[scheduled_lock(name = "sync", at_most = "1m", every = "1m", executor = self.locks)]
    async fn with_self(&self) {}
}

fn main() {}
