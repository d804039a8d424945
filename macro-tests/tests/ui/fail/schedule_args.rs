use shedlock_core::scheduled_lock;

#[scheduled_lock(name = "a", at_most = "1m", cron = "0 3 * * *")]
async fn five_fields() {}

#[scheduled_lock(name = "b", at_most = "1m", cron = "0 61 * * * *")]
async fn bad_minute() {}

#[scheduled_lock(name = "c", at_most = "1m", cron = "0 0 3 * * *", zone = "Europe/Berlln")]
async fn bad_zone() {}

#[scheduled_lock(name = "d", at_most = "1m", every = "1m", zone = "UTC")]
async fn zone_without_cron() {}

#[scheduled_lock(name = "e", at_most = "1m", every = "1m", cron = "0 0 3 * * *")]
async fn two_schedules() {}

#[scheduled_lock(name = "f", at_most = "1m", every = "0s")]
async fn zero_rate() {}

#[scheduled_lock(name = "g", at_most = "1m", every = "1x")]
async fn bad_rate() {}

fn main() {}
