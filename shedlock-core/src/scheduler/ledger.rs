//! The claims this process runs. One ledger serves every scheduler of the process. So two job loops
//! sharing an owner id never both run one claim.
//!
//! An owner id is one per process by default. It may be shared on purpose, as with a stable pod
//! name in `SHEDLOCK_OWNER_ID`. Two schedulers of one process with the same job then send claims
//! under one owner id. When their replies are lost, each may find the same committed claim and take
//! it for its own (see docs/guarantees.md, "Lost replies"). So every claim a loop runs is entered
//! here, with its record and its fire. A claim is adopted only if it is not entered yet. To adopt
//! is to run or release a claim as a loop whose reply was lost. A loop whose claim was answered
//! `Claimed` runs it unless another loop adopted it first, because its reply came late. The store
//! says it is its own, and only an adoption can be in the way.
//!
//! Two fresh stores of one process can hand out records that look the same. That happens in tests
//! on paused time, where every claim's `locked_at` is its fire and the first token is 1. Such
//! records only meet here when one of them was adopted.
//!
//! Entries are kept until the fire's window has ended, plus a margin, by this process's monotonic
//! clock. No loop handles a fire after its window. Entries are pruned as new ones come.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::provider::LockRecord;

/// How long an entry outlives its fire's window. It is more than any clock estimate is off.
const MARGIN: Duration = Duration::from_mins(1);

/// One claim: the acquisition and the fire it recorded. The acquisition is the lock, owner,
/// `locked_at` and token.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    lock: String,
    owner: String,
    locked_at: DateTime<Utc>,
    token: Option<i64>,
    fire: DateTime<Utc>,
}

/// How a loop came to run a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Took {
    /// The store answered it `Claimed`.
    Claimed,
    /// A loop whose reply was lost recognised it as its own.
    Adopted,
}

#[derive(Debug, Default)]
struct Ledger {
    taken: HashMap<Key, (Took, Instant)>,
    /// The size after the last pruning. The next prune comes when it has doubled.
    pruned_at: usize,
}

fn ledger() -> std::sync::MutexGuard<'static, Ledger> {
    static LEDGER: OnceLock<Mutex<Ledger>> = OnceLock::new();
    LEDGER
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Enters the claim `record` of the fire at `fire`, answered `Claimed` to the caller. Returns
/// `false` if another job loop of this process adopted it first. That loop runs it. `window_left`
/// is how long the fire's window still lasts.
pub(crate) fn claimed(record: &LockRecord, fire: DateTime<Utc>, window_left: Duration) -> bool {
    let now = Instant::now();
    ledger().take(Took::Claimed, record, fire, now + window_left + MARGIN, now)
}

/// Enters the claim `record` of the fire at `fire` as adopted by the caller, to run it or to
/// release it unrun. Returns `false` if any other job loop of this process entered it first.
pub(crate) fn adopt(record: &LockRecord, fire: DateTime<Utc>, window_left: Duration) -> bool {
    let now = Instant::now();
    ledger().take(Took::Adopted, record, fire, now + window_left + MARGIN, now)
}

impl Ledger {
    fn take(
        &mut self,
        how: Took,
        record: &LockRecord,
        fire: DateTime<Utc>,
        keep_until: Instant,
        now: Instant,
    ) -> bool {
        let key = Key {
            lock: record.name().to_owned(),
            owner: record.owner().to_owned(),
            locked_at: record.locked_at(),
            token: record.fencing_token(),
            fire,
        };
        match (how, self.taken.get(&key)) {
            (Took::Claimed, Some((Took::Adopted, _))) | (Took::Adopted, Some(_)) => return false,
            _ => {}
        }
        if self.taken.len() >= (2 * self.pruned_at).max(64) {
            self.taken.retain(|_, (_, until)| *until > now);
            self.pruned_at = self.taken.len();
        }
        self.taken.insert(key, (how, keep_until));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(owner: &str, token: i64) -> LockRecord {
        let at = DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        LockRecord::new("job", owner, at, at + chrono::Duration::seconds(9))
            .with_fencing_token(Some(token))
    }

    #[test]
    fn a_claim_is_adopted_once_and_never_when_claimed_and_told_apart_by_its_acquisition() {
        let mut ledger = Ledger::default();
        let now = Instant::now();
        let until = now + Duration::from_mins(1);
        let fire = record("pod-0", 4).locked_at();
        let take = |l: &mut Ledger, how, owner, token| {
            l.take(how, &record(owner, token), fire, until, now)
        };
        assert!(take(&mut ledger, Took::Adopted, "pod-0", 4));
        assert!(
            !take(&mut ledger, Took::Adopted, "pod-0", 4),
            "a second loop does not adopt it"
        );
        assert!(
            !take(&mut ledger, Took::Claimed, "pod-0", 4),
            "its late Claimed reply does not run it"
        );
        assert!(
            take(&mut ledger, Took::Claimed, "pod-0", 5),
            "another acquisition is another claim"
        );
        assert!(
            !take(&mut ledger, Took::Adopted, "pod-0", 5),
            "a claim run on its reply is not adopted"
        );
        assert!(
            take(&mut ledger, Took::Claimed, "pod-0", 5),
            "an equal record of a fresh store runs"
        );
        assert!(
            take(&mut ledger, Took::Adopted, "pod-1", 4),
            "another owner's"
        );
    }

    #[test]
    fn entries_are_kept_until_their_time_and_pruned_as_new_ones_come() {
        let mut ledger = Ledger::default();
        let now = Instant::now();
        let fire = record("pod-0", 0).locked_at();
        let soon = now + Duration::from_secs(1);
        for token in 0..65 {
            assert!(ledger.take(Took::Adopted, &record("pod-0", token), fire, soon, now));
        }
        // Before their time nothing is pruned.
        assert_eq!(ledger.taken.len(), 65);
        assert!(!ledger.take(Took::Adopted, &record("pod-0", 3), fire, now, now));
        // After it, the next entries past the threshold prune them.
        let later = now + Duration::from_secs(2);
        for token in 65..130 {
            let until = later + Duration::from_secs(1);
            assert!(ledger.take(Took::Adopted, &record("pod-0", token), fire, until, later));
        }
        assert!(ledger.taken.len() < 130, "pruned: {}", ledger.taken.len());
        assert!(
            ledger.take(Took::Adopted, &record("pod-0", 3), fire, later, later),
            "an old entry is gone"
        );
    }
}
