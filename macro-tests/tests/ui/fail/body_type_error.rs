use shedlock_core::scheduled_lock;

// Type errors in the body point at the user's code, against the declared return type.
#[scheduled_lock(name = "report", at_most = "10m")]
async fn report() -> u32 {
    "not a number"
}

#[scheduled_lock(name = "early", at_most = "10m")]
async fn early(flag: bool) -> u32 {
    if flag {
        return "early";
    }
    1
}

fn main() {}
