//! Which rows a latch may treat as its own, and release, when its acquire is refused.
//!
//! A follower whose acquire is refused reads who holds the row. A row with this latch's owner id
//! *may* be its own leftover, from an earlier term whose release failed or an acquire whose reply
//! never arrived. Releasing it lets the election go on at once instead of waiting out the lease.
//! But the owner id alone proves nothing. Every latch of a process shares it by default, and an id
//! set in `SHEDLOCK_OWNER_ID` or the configuration is shared too. A second latch for the same
//! election that released the live leader's row would make two leaders.
//!
//! # The rule
//!
//! A row is released as this latch's own only when one of these holds:
//!
//! 1. **It is an acquisition this latch received from the store**, whose release did not go
//!    through. It is the last term's record, or an acquire won while stepping down. "Same
//!    acquisition" is what the store itself compares in `release` (see [`same_acquisition`]).
//!    Nobody else can hold that acquisition, so this is proof.
//! 2. **It can only come from an acquire of this latch whose reply was lost.** Such an acquire
//!    timed out or failed, so it may have committed. All of these hold:
//!    - the row carries this latch's owner id;
//!    - such an acquire was sent recently enough for its row to be alive: within
//!      `call_timeout + lease` of now;
//!    - the row is not the one this latch already saw holding the election before it sent that
//!      acquire, because that row predates it;
//!    - **no other running latch in this process uses the same owner id for the same election**, as
//!      the process-wide registry [`RunningLatch`] tells. Otherwise the row could as well be that
//!      latch's won acquire while ours was refused and our reply lost, and a lost reply cannot tell
//!      the two apart. Owner ids are unique per process, see docs/guarantees.md, so no other
//!      process writes this owner id. So the row was written by one of this latch's acquires, and
//!      the lost ones are the only ones it does not know.
//!
//! Any other row with this owner id is treated like anybody else's: followed as the leader, never
//! touched. It may come from another latch of this process with the same id, or from an earlier
//! incarnation of this process that used the same explicit id and crashed. It frees itself at the
//! end of its lease, so the price of not proving ownership is a slower takeover, never two leaders.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::provider::LockRecord;

/// Whether `a` and `b` are the same acquisition of the same row, as a store compares them in
/// `extend` and `release`. That means the same name and owner, and the same fencing token. On a
/// store without tokens, it means the same `locked_at` instead. `lock_until` is ignored, because it
/// moves with every renew.
pub(super) fn same_acquisition(a: &LockRecord, b: &LockRecord) -> bool {
    a.name() == b.name()
        && a.owner() == b.owner()
        && match (a.fencing_token(), b.fencing_token()) {
            (Some(x), Some(y)) => x == y,
            _ => a.locked_at() == b.locked_at(),
        }
}

/// The running latches of this process, by (owner id, election name).
static RUNNING: Mutex<BTreeMap<(String, String), usize>> = Mutex::new(BTreeMap::new());

fn running() -> std::sync::MutexGuard<'static, BTreeMap<(String, String), usize>> {
    // Only counters are changed under the lock; a poisoned map is still consistent.
    RUNNING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One running latch in the process-wide registry. It is counted until [`end`](Self::end) or drop.
pub(super) struct RunningLatch {
    key: (String, String),
    active: AtomicBool,
}

impl RunningLatch {
    pub(super) fn new(owner_id: &str, election: &str) -> Self {
        let key = (owner_id.to_owned(), election.to_owned());
        *running().entry(key.clone()).or_insert(0) += 1;
        Self {
            key,
            active: AtomicBool::new(true),
        }
    }

    /// Whether another running latch of this process uses the same owner id for this election.
    pub(super) fn is_shared(&self) -> bool {
        running().get(&self.key).copied().unwrap_or(0) > 1
    }

    /// The latch stopped, so it no longer counts. Idempotent.
    pub(super) fn end(&self) {
        if self.active.swap(false, Ordering::AcqRel) {
            let mut running = running();
            if let Some(n) = running.get_mut(&self.key) {
                *n -= 1;
                if *n == 0 {
                    running.remove(&self.key);
                }
            }
        }
    }
}

impl Drop for RunningLatch {
    fn drop(&mut self) {
        self.end();
    }
}

/// An acquire whose outcome this latch never learned.
#[derive(Debug, Clone)]
struct LostReply {
    sent_at: Instant,
    /// The holder this latch had last seen when it sent the acquire.
    seen_before: Option<LockRecord>,
}

/// Why a row counts as this latch's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Claim {
    /// An acquisition it received from the store (rule 1).
    Known,
    /// The product of an acquire whose reply was lost (rule 2).
    LostReply,
}

/// What a latch's task knows about rows it may have left behind (see the module docs).
#[derive(Debug, Default)]
pub(super) struct OwnRows {
    /// Its last acquisition whose release did not go through.
    unreleased: Option<LockRecord>,
    /// Its last acquire whose reply was lost.
    lost_reply: Option<LostReply>,
    /// The last holder it read. `None` means free, or not read yet.
    last_seen: Option<LockRecord>,
}

impl OwnRows {
    /// An acquire won and started a term. Any earlier row of ours is gone. The row is ours now,
    /// tracked by the term.
    pub(super) fn won(&mut self) {
        self.unreleased = None;
        self.lost_reply = None;
    }

    /// `record`, ours and received from the store, may still hold the row. Its release failed or
    /// was not attempted.
    pub(super) fn unreleased(&mut self, record: LockRecord) {
        self.unreleased = Some(record);
    }

    /// The row of `record` is known to be released or to belong to someone else now.
    pub(super) fn settled(&mut self, record: &LockRecord) {
        if self
            .unreleased
            .as_ref()
            .is_some_and(|own| same_acquisition(own, record))
        {
            self.unreleased = None;
        }
    }

    /// An acquire sent at `sent_at` failed or timed out. It may have taken the row.
    pub(super) fn reply_lost(&mut self, sent_at: Instant) {
        self.lost_reply = Some(LostReply {
            sent_at,
            seen_before: self.last_seen.clone(),
        });
    }

    /// Records the holder just read.
    pub(super) fn saw(&mut self, holder: Option<&LockRecord>) {
        self.last_seen = holder.cloned();
    }

    /// Whether `row`, which refused this latch's acquire, is provably its own (see the module
    /// docs). `alive_for` is `call_timeout + lease`. That is how long after its send a lost
    /// acquire's row can still hold the election. `shared_owner` is [`RunningLatch::is_shared`].
    pub(super) fn claim(
        &self,
        row: &LockRecord,
        owner_id: &str,
        alive_for: Duration,
        shared_owner: impl FnOnce() -> bool,
    ) -> Option<Claim> {
        if self
            .unreleased
            .as_ref()
            .is_some_and(|own| same_acquisition(own, row))
        {
            return Some(Claim::Known);
        }
        let lost = self.lost_reply.as_ref()?;
        let plausible = row.owner() == owner_id
            && lost.sent_at.elapsed() < alive_for
            && !lost
                .seen_before
                .as_ref()
                .is_some_and(|before| same_acquisition(before, row));
        (plausible && !shared_owner()).then_some(Claim::LostReply)
    }

    /// A claimed row was released. It no longer needs explaining.
    pub(super) fn released(&mut self, claim: Claim, row: &LockRecord) {
        match claim {
            Claim::Known => self.settled(row),
            Claim::LostReply => self.lost_reply = None,
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;

    const ALIVE: Duration = Duration::from_secs(17);

    fn row(owner: &str, at: i64, token: Option<i64>) -> LockRecord {
        let at = Utc.timestamp_opt(1_700_000_000 + at, 0).unwrap();
        LockRecord::new("election", owner, at, at + chrono::Duration::seconds(15))
            .with_fencing_token(token)
    }

    #[test]
    fn same_acquisition_compares_tokens_else_locked_at() {
        assert!(same_acquisition(
            &row("a", 0, Some(1)),
            &row("a", 5, Some(1))
        ));
        assert!(!same_acquisition(
            &row("a", 0, Some(1)),
            &row("a", 0, Some(2))
        ));
        assert!(!same_acquisition(
            &row("a", 0, Some(1)),
            &row("b", 0, Some(1))
        ));
        assert!(same_acquisition(&row("a", 0, None), &row("a", 0, None)));
        assert!(!same_acquisition(&row("a", 0, None), &row("a", 1, None)));
        let extended = row("a", 0, Some(3)).with_lock_until(Utc::now());
        assert!(same_acquisition(&row("a", 0, Some(3)), &extended));
    }

    #[tokio::test(start_paused = true)]
    async fn a_known_acquisition_is_claimed_whoever_else_uses_the_id() {
        let mut own = OwnRows::default();
        own.unreleased(row("a", 0, Some(4)));
        let shared = || true;
        assert_eq!(
            own.claim(&row("a", 0, Some(4)), "a", ALIVE, shared),
            Some(Claim::Known)
        );
        // Same owner id, another acquisition: not ours.
        assert_eq!(own.claim(&row("a", 9, Some(5)), "a", ALIVE, || false), None);
        own.settled(&row("a", 0, Some(4)));
        assert_eq!(own.claim(&row("a", 0, Some(4)), "a", ALIVE, shared), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_reply_explains_only_a_fresh_unseen_row_of_an_unshared_id() {
        let mut own = OwnRows::default();
        let candidate = row("a", 2, Some(7));
        assert_eq!(
            own.claim(&candidate, "a", ALIVE, || false),
            None,
            "nothing lost"
        );
        own.saw(Some(&row("a", 0, Some(6))));
        own.reply_lost(Instant::now());
        assert_eq!(
            own.claim(&candidate, "a", ALIVE, || false),
            Some(Claim::LostReply)
        );
        assert_eq!(
            own.claim(&candidate, "a", ALIVE, || true),
            None,
            "id shared"
        );
        assert_eq!(own.claim(&row("b", 2, Some(7)), "a", ALIVE, || false), None);
        assert_eq!(
            own.claim(&row("a", 0, Some(6)), "a", ALIVE, || false),
            None,
            "the row seen before the acquire predates it"
        );
        tokio::time::advance(ALIVE).await;
        assert_eq!(own.claim(&candidate, "a", ALIVE, || false), None, "too old");
        own.reply_lost(Instant::now());
        own.released(Claim::LostReply, &candidate);
        assert_eq!(own.claim(&candidate, "a", ALIVE, || false), None);
        own.reply_lost(Instant::now());
        own.won();
        assert_eq!(own.claim(&candidate, "a", ALIVE, || false), None);
    }

    #[test]
    fn the_registry_counts_running_latches_per_owner_and_election() {
        let a = RunningLatch::new("registry-test-owner", "e1");
        assert!(!a.is_shared());
        let b = RunningLatch::new("registry-test-owner", "e1");
        let other = RunningLatch::new("registry-test-owner", "e2");
        assert!(a.is_shared() && b.is_shared() && !other.is_shared());
        b.end();
        b.end();
        assert!(!a.is_shared());
        drop(b);
        assert!(!a.is_shared());
        let c = RunningLatch::new("registry-test-owner", "e1");
        assert!(a.is_shared());
        drop(c);
        assert!(!a.is_shared());
    }
}
