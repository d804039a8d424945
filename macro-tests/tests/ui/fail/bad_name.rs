use shedlock_core::scheduled_lock;

#[scheduled_lock(name = "", at_most = "10m")]
async fn empty() {}

#[scheduled_lock(
    name = "a-lock-name-much-longer-than-the-sixty-four-characters-a-table-holds",
    at_most = "10m"
)]
async fn too_long() {}

#[scheduled_lock(
    name = "the-fixed-part-alone-is-already-longer-than-sixty-four-characters-{id}",
    at_most = "10m"
)]
async fn too_long_template(id: u32) {
    let _ = id;
}

#[scheduled_lock(name = " padded ", at_most = "10m")]
async fn padded() {}

const NAME: &str = "report";

#[scheduled_lock(name = NAME, at_most = "10m")]
async fn not_a_literal() {}

fn main() {}
