use shedlock_core::scheduled_lock;

#[scheduled_lock(name = "a", at_most = "10 minutes")]
async fn spaced() {}

#[scheduled_lock(name = "b", at_most = "10")]
async fn unitless() {}

#[scheduled_lock(name = "c", at_most = "1m30h", at_least = "PT")]
async fn out_of_order() {}

#[scheduled_lock(name = "d", at_most = 600)]
async fn not_a_string() {}

// shedlock_core::provider::MAX_DURATION is 365 days.
#[scheduled_lock(name = "e", at_most = "365d", at_least = "366d")]
async fn too_long() {}

#[scheduled_lock(name = "f", at_most)]
async fn no_value() {}

// An expression must be a `Duration`: the error points at it.
const SECONDS: u64 = 600;
#[scheduled_lock(name = "g", at_most = SECONDS)]
async fn not_a_duration() {}

fn main() {}
