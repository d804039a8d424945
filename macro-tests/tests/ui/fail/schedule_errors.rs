use shedlock_core::scheduled_lock;

// Each cron field out of range, a token no field takes and an unknown zone: the words are the
// ones `Schedule::cron_in` gives at run time (`behaviour/scheduled.rs` compares them).

#[scheduled_lock(name = "a", at_most = "1m", cron = "60 0 3 * * *")]
async fn seconds() {}

#[scheduled_lock(name = "b", at_most = "1m", cron = "0 60 3 * * *")]
async fn minutes() {}

#[scheduled_lock(name = "c", at_most = "1m", cron = "0 0 25 * * *")]
async fn hours() {}

#[scheduled_lock(name = "d", at_most = "1m", cron = "0 0 3 32 * *")]
async fn day_of_month() {}

#[scheduled_lock(name = "e", at_most = "1m", cron = "0 0 3 * 13 *")]
async fn month() {}

#[scheduled_lock(name = "f", at_most = "1m", cron = "0 0 3 * * 8")]
async fn day_of_week() {}

#[scheduled_lock(name = "g", at_most = "1m", cron = "0 0 three * * *")]
async fn token() {}

#[scheduled_lock(name = "h", at_most = "1m", cron = "0 0 3 * * *", zone = "Europe/Berlln")]
async fn zone() {}

// An expression of the wrong type is the compiler's to report, on the expression.
const HOUR: u32 = 3;

#[scheduled_lock(name = "i", at_most = "1m", cron = HOUR)]
async fn not_a_string() {}

fn main() {}
