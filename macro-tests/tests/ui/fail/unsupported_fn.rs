use shedlock_core::scheduled_lock;

#[scheduled_lock(name = "a", at_most = "10m")]
const fn constant() {}

#[scheduled_lock(name = "b", at_most = "10m")]
async unsafe fn not_safe() {}

#[scheduled_lock(name = "c", at_most = "10m")]
extern "C" fn foreign() {}

fn main() {}
