use shedlock_core::scheduled_lock;

struct Service {
    locks: String,
}

impl Service {
    #[scheduled_lock(name = "report", at_most = "10m", executor = self.locks)]
    async fn report(&self) {}
}

#[scheduled_lock(name = "report", at_most = "10m", executor = 42)]
async fn report() {}

fn main() {}
