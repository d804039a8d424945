//! The root paths of the items that moved to `provider`, `admin`, `current`, `latch`, `owner`
//! and `scheduler` still resolve, as hidden aliases, until the next release.

#[allow(unused_imports)]
use shedlock_core::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_NAME_LEN, ELECTION_MARK, Fire, FireClaim, KnownLeader,
    LeaderEvent, LeaderEvents, LeaderLatchConfigBuilder, LeaderState, LeaderTerm, LockAdmin,
    LockEntry, LockHandle, LockProvider, LockRecord, MAX_DURATION, MAX_OWNER_ID_LEN, OWNER_ID_ENV,
    StepDownReason, assert_locked, async_trait, chrono, default_owner_id, election_owner_id,
    fire_decision, is_locked, set_lock_assertions, validate_at_least, validate_at_most,
    validate_name, without_lock_assertions,
};
#[cfg(feature = "scheduler")]
#[allow(unused_imports)]
use shedlock_core::{JobOutput, JobStatus, LastRun, OnHeld, RunOutcome};

#[test]
fn the_old_root_paths_name_the_moved_items() {
    assert_eq!(MAX_DURATION, shedlock_core::provider::MAX_DURATION);
    assert_eq!(ELECTION_MARK, shedlock_core::admin::ELECTION_MARK);
    assert_eq!(OWNER_ID_ENV, shedlock_core::owner::OWNER_ID_ENV);
    let _: Option<shedlock_core::current::LockHandle> = None::<LockHandle>;
    let _: Option<shedlock_core::provider::LockRecord> = None::<LockRecord>;
}
