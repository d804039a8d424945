use shedlock_core::scheduled_lock;

#[scheduled_lock(name = "report-{tenat}", at_most = "10m")]
async fn typo(tenant: &str, day: u32) {
    let _ = (tenant, day);
}

#[scheduled_lock(name = "report-{tenant}", at_most = "10m")]
async fn no_arguments() {}

#[scheduled_lock(name = "report-{tenant:?}-{}-{0}", at_most = "10m")]
async fn not_placeholders(tenant: &str) {
    let _ = tenant;
}

#[scheduled_lock(name = "report-{tenant", at_most = "10m")]
async fn unclosed(tenant: &str) {
    let _ = tenant;
}

struct Service;

impl Service {
    #[scheduled_lock(name = "report-{self}", at_most = "10m")]
    async fn method(&self) {}
}

fn main() {}
