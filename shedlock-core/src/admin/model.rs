// Without the `scheduler` feature the link goes to docs.rs, where every feature is on.
#![cfg_attr(
    not(feature = "scheduler"),
    doc = "[`JobStatus`]: https://docs.rs/shedlock-core/latest/shedlock_core/scheduler/struct.JobStatus.html"
)]
#![cfg_attr(
    feature = "scheduler",
    doc = "[`JobStatus`]: crate::scheduler::JobStatus"
)]
//! The JSON that operator tools print, as serde types: the `shedlock` CLI's `--json` output
//! ([`LockView`] for `list` and `show`, [`LeaderView`] for `leader`). A scheduler's `/status`
//! uses [`JobStatus`], which serialises the same way.
//!
//! This is where the shape is documented: each field below is a key, in this order. Times are
//! RFC 3339 in UTC with every digit the store keeps (`2026-12-01T21:38:47.748002Z`), so a printed
//! time passed back to `shedlock unlock --locked-at` matches the stored one exactly. A value
//! that is unknown or does not apply is `null`.
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use shedlock_core::admin::{LockEntry, model::LockView};
//! use shedlock_core::provider::LockRecord;
//!
//! let at = |s: i64| Utc.timestamp_opt(1_764_625_127 + s, 748_002_000).unwrap();
//! let record = LockRecord::new("nightly-report", "pod-7:1:3fa2c1", at(0), at(591))
//!     .with_fencing_token(Some(1_764_621_062_123_456));
//! let entry = LockEntry::new(record, at(59), None);
//! assert_eq!(
//!     serde_json::to_string_pretty(&LockView::from(&entry))?,
//!     r#"{
//!   "name": "nightly-report",
//!   "state": "held",
//!   "held": true,
//!   "election": false,
//!   "holder": "pod-7:1:3fa2c1",
//!   "locked_at": "2025-12-01T21:38:47.748002Z",
//!   "lock_until": "2025-12-01T21:48:38.748002Z",
//!   "remaining_ms": 532000,
//!   "fencing_token": 1764621062123456,
//!   "last_fire": null,
//!   "store_now": "2025-12-01T21:39:46.748002Z"
//! }"#
//! );
//! # Ok::<(), serde_json::Error>(())
//! ```

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{LockEntry, election_owner_id};

/// A lock's state word: `"held"`, `"free"`, or `"leader"` for a held election row (a
/// [`LeaderLatch`](crate::LeaderLatch)'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LockState {
    /// Not held by the store's clock.
    Free,
    /// Held.
    Held,
    /// A held election row.
    Leader,
}

impl LockState {
    /// The state of `entry` when it was read.
    #[must_use]
    pub fn of(entry: &LockEntry) -> Self {
        match (entry.is_held(), entry.is_election()) {
            (false, _) => Self::Free,
            (true, false) => Self::Held,
            (true, true) => Self::Leader,
        }
    }

    /// The word, as in the JSON: `"free"`, `"held"` or `"leader"`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Free => "free",
            Self::Held => "held",
            Self::Leader => "leader",
        }
    }
}

/// One lock, as `shedlock show NAME --json` prints it (and `list --json`, an array of them):
/// every field of the table and of `show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LockView {
    /// The lock's name.
    pub name: String,
    /// Its state when read.
    pub state: LockState,
    /// Whether it was held: `lock_until` after the store's now.
    pub held: bool,
    /// Whether a leader latch wrote the row ([`LockEntry::is_election`]).
    pub election: bool,
    /// The holder's owner id (`locked_by`), kept after the lock ends.
    pub holder: String,
    /// When the holder took it, by the store's clock.
    pub locked_at: DateTime<Utc>,
    /// Until when it is held unless released or extended.
    pub lock_until: DateTime<Utc>,
    /// How long it stays held, in milliseconds; `null` when free.
    pub remaining_ms: Option<u64>,
    /// The acquisition's fencing token; `null` on a table without tokens.
    pub fencing_token: Option<i64>,
    /// The last fire a scheduler recorded on the row; `null` if none.
    pub last_fire: Option<DateTime<Utc>>,
    /// The store's clock when the row was read.
    pub store_now: DateTime<Utc>,
}

impl From<&LockEntry> for LockView {
    fn from(entry: &LockEntry) -> Self {
        let r = entry.record();
        Self {
            name: r.name().to_owned(),
            state: LockState::of(entry),
            held: entry.is_held(),
            election: entry.is_election(),
            holder: r.owner().to_owned(),
            locked_at: r.locked_at(),
            lock_until: r.lock_until(),
            remaining_ms: entry.remaining().map(millis),
            fencing_token: r.fencing_token(),
            last_fire: entry.last_fire(),
            store_now: entry.store_now(),
        }
    }
}

/// An election, as `shedlock leader NAME --json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LeaderView {
    /// The election's name (its row's).
    pub name: String,
    /// The leader's owner id, without the election mark; `null` when the lease has ended.
    pub leader: Option<String>,
    /// The row's holder as stored (with the mark), kept after the lease ends.
    pub holder: String,
    /// Whether a leader latch wrote the row; `false` means it may be a task lock.
    pub election: bool,
    /// The term's fencing token; `null` on a table without tokens.
    pub fencing_token: Option<i64>,
    /// When the term began, by the store's clock.
    pub since: DateTime<Utc>,
    /// Until when the lease holds unless renewed.
    pub lease_until: DateTime<Utc>,
    /// How long the lease has left, in milliseconds; `null` when it has ended.
    pub lease_left_ms: Option<u64>,
    /// The store's clock when the row was read.
    pub store_now: DateTime<Utc>,
}

impl From<&LockEntry> for LeaderView {
    fn from(entry: &LockEntry) -> Self {
        let r = entry.record();
        Self {
            name: r.name().to_owned(),
            leader: entry
                .is_held()
                .then(|| election_owner_id(r.owner()).to_owned()),
            holder: r.owner().to_owned(),
            election: entry.is_election(),
            fencing_token: r.fencing_token(),
            since: r.locked_at(),
            lease_until: r.lock_until(),
            lease_left_ms: entry.remaining().map(millis),
            store_now: entry.store_now(),
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::provider::LockRecord;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_764_620_000 + secs, 123_456_000)
            .single()
            .expect("a valid time")
    }

    #[test]
    fn a_leader_view_names_the_leader_only_while_the_lease_holds() {
        let record = LockRecord::new("scheduler", "pod-2:1:cc#election", at(0), at(15));
        let held = LeaderView::from(&LockEntry::new(record.clone(), at(2), None));
        assert_eq!(
            serde_json::to_string(&held).expect("serialises"),
            r#"{"name":"scheduler","leader":"pod-2:1:cc","holder":"pod-2:1:cc#election","election":true,"fencing_token":null,"since":"2025-12-01T20:13:20.123456Z","lease_until":"2025-12-01T20:13:35.123456Z","lease_left_ms":13000,"store_now":"2025-12-01T20:13:22.123456Z"}"#
        );
        let ended = LeaderView::from(&LockEntry::new(record.clone(), at(20), None));
        assert_eq!((ended.leader, ended.lease_left_ms), (None, None));
        let view = LockView::from(&LockEntry::new(record, at(2), Some(at(-60))));
        assert_eq!(view.state, LockState::Leader);
        assert_eq!(view.last_fire, Some(at(-60)));
        let text = serde_json::to_string(&view).expect("serialises");
        assert!(text.contains(r#""state":"leader""#), "{text}");
        assert_eq!(
            serde_json::from_str::<LockView>(&text).expect("reads back"),
            view
        );
    }
}
