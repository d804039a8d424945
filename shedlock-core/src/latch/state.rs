//! What a latch publishes: [`LeaderState`], [`LeaderTerm`], [`LeaderEvent`].

use std::fmt;
use std::sync::{Arc, OnceLock};

use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::admin::election_owner_id;
use crate::keepalive::Lease;
use crate::provider::LockRecord;

/// Where a [`LeaderLatch`](crate::LeaderLatch) stands, as published on its
/// [`watch`](crate::LeaderLatch::watch).
///
/// It changes only on transitions and is the last state the latch's background task *published*.
/// The authoritative answer to "may I act as leader now?" is
/// [`LeaderLatch::is_leader`](crate::LeaderLatch::is_leader) or [`LeaderTerm::is_active`], which
/// also check the local deadline and so turn false on time even if that task is starved.
///
/// ```
/// use shedlock_core::{InMemoryLockProvider, LeaderLatch, LeaderLatchConfig, latch::LeaderState};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// let latch = LeaderLatch::start(InMemoryLockProvider::new(), LeaderLatchConfig::new("jobs")?)?;
/// let mut states = latch.watch();
/// let state = states.wait_for(LeaderState::was_leader).await.expect("latch running").clone();
/// if let LeaderState::Leader { term } = &state {
///     println!("leading, term {} with token {:?}", term.number(), term.fencing_token());
/// }
/// latch.close().await?;
/// assert_eq!(*latch.watch().borrow(), LeaderState::Stopped);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaderState {
    /// The latch has started and its store has not answered an attempt yet, so this instance does
    /// not lead and does not know who does. It stays while every attempt fails, because the store
    /// is down or its table is missing. It never comes back after the first answer.
    Starting,
    /// This instance leads, in `term`.
    Leader {
        /// The current term: its fencing token, deadline and end signal.
        term: LeaderTerm,
    },
    /// This instance does not lead: the store answered that another holds the row, or this instance
    /// stepped down. `leader` is the last leader seen, `None` when unknown or when nobody holds the
    /// row. See [`LockProvider::holder`](crate::provider::LockProvider::holder).
    Follower {
        /// The last known leader.
        leader: Option<KnownLeader>,
    },
    /// The latch was closed, or its task ended. It will never lead again, and its row was released.
    Stopped,
}

impl LeaderState {
    /// Whether this state says this instance leads ([`LeaderState::Leader`]), as of when it was
    /// published, not now. A term can end at its deadline before the latch's task publishes the
    /// step-down. To decide whether to act as leader, see [`LeaderState`]. This is for reacting to
    /// transitions, as in `states.wait_for(LeaderState::was_leader)`.
    #[must_use]
    pub fn was_leader(&self) -> bool {
        matches!(self, Self::Leader { .. })
    }

    /// The term, for [`LeaderState::Leader`].
    #[must_use]
    pub fn term(&self) -> Option<&LeaderTerm> {
        match self {
            Self::Leader { term } => Some(term),
            _ => None,
        }
    }
}

/// Another candidate seen holding the election's row.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KnownLeader {
    owner_id: String,
    fencing_token: Option<i64>,
}

impl KnownLeader {
    pub(crate) fn from_record(record: &LockRecord) -> Self {
        Self {
            owner_id: election_owner_id(record.owner()).to_owned(),
            fencing_token: record.fencing_token(),
        }
    }

    /// The leader's owner id: its row's `locked_by` without the
    /// [`ELECTION_MARK`](crate::admin::ELECTION_MARK).
    #[must_use]
    pub fn owner_id(&self) -> &str {
        &self.owner_id
    }

    /// The fencing token of the leader's term, if the store has tokens.
    #[must_use]
    pub fn fencing_token(&self) -> Option<i64> {
        self.fencing_token
    }
}

impl fmt::Display for KnownLeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.owner_id)?;
        if let Some(token) = self.fencing_token {
            write!(f, " (token {token})")?;
        }
        Ok(())
    }
}

/// Why a term ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StepDownReason {
    /// No renew succeeded within `renew_deadline` of the last successful one being sent. The store
    /// was unreachable or too slow, or this process was paused.
    DeadlineExpired,
    /// The store refused a renew, because the row no longer belongs to this term. It expired and
    /// was taken, or was deleted or changed by hand.
    Refused,
    /// [`LeaderLatch::resign`](crate::LeaderLatch::resign) was called.
    Resigned,
    /// [`LeaderLatch::close`](crate::LeaderLatch::close) was called, or every handle was dropped.
    Closed,
}

impl StepDownReason {
    /// Whether this instance chose to step down by resign or close, rather than losing the lease.
    /// Leader-only work then gets [`shutdown_grace`](crate::LeaderLatchConfig::shutdown_grace) to
    /// finish.
    #[must_use]
    pub fn is_voluntary(self) -> bool {
        matches!(self, Self::Resigned | Self::Closed)
    }
}

impl fmt::Display for StepDownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::DeadlineExpired => "no renew succeeded before the renew deadline",
            Self::Refused => "the store refused the renew (the row belongs to someone else now)",
            Self::Resigned => "resigned",
            Self::Closed => "closed",
        })
    }
}

/// One term of leadership: from a successful acquire to the step-down. Clones are cheap and share
/// the term. It is *active* until the local deadline passes without a successful renew, the store
/// refuses a renew, or the latch resigns or closes. [`ended`](Self::ended) is the cancellation
/// signal. Race leader-only work against it.
///
/// Every term has its own [`fencing_token`](Self::fencing_token) when the store has tokens. Send it
/// with writes to systems that can compare, so a leader that paused past its term cannot overwrite
/// the next leader's work:
///
/// ```
/// use shedlock_core::{InMemoryLockProvider, LeaderLatch, LeaderLatchConfig};
///
/// /// A downstream store that accepts a write only with the newest token it has seen.
/// struct Fenced { highest: std::sync::Mutex<i64> }
/// impl Fenced {
///     fn write(&self, token: i64) -> bool {
///         let mut highest = self.highest.lock().unwrap();
///         if token < *highest { return false } // an older term: rejected
///         *highest = token;
///         true
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// let latch = LeaderLatch::start(InMemoryLockProvider::new(), LeaderLatchConfig::new("jobs")?)?;
/// let term = latch.wait_for_leadership().await.expect("latch running");
/// let downstream = Fenced { highest: std::sync::Mutex::new(0) };
/// let token = term.fencing_token().expect("the in-memory store has tokens");
/// tokio::select! {
///     () = term.ended() => { /* lost leadership: stop at once */ }
///     accepted = async { downstream.write(token) } => assert!(accepted),
/// }
/// latch.close().await?;
/// assert!(!term.is_active());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LeaderTerm {
    inner: Arc<TermInner>,
}

struct TermInner {
    number: u64,
    fencing_token: Option<i64>,
    owner_id: Arc<str>,
    started_at: Instant,
    lease: Lease,
    /// Set by whoever ends the term on purpose, by resign or close, before marking the lease lost.
    ended_by: OnceLock<StepDownReason>,
    /// Until when leader-only work may finish after the end. Set when the latch ends the term.
    wind_down_until: OnceLock<Instant>,
}

impl LeaderTerm {
    pub(crate) fn new(number: u64, owner_id: Arc<str>, started_at: Instant, lease: Lease) -> Self {
        Self {
            inner: Arc::new(TermInner {
                number,
                fencing_token: lease.record().fencing_token(),
                owner_id,
                started_at,
                lease,
                ended_by: OnceLock::new(),
                wind_down_until: OnceLock::new(),
            }),
        }
    }

    pub(crate) fn lease(&self) -> &Lease {
        &self.inner.lease
    }

    pub(crate) fn set_wind_down_until(&self, until: Instant) {
        let _ = self.inner.wind_down_until.set(until);
    }

    pub(crate) fn wind_down_until(&self) -> Option<Instant> {
        self.inner.wind_down_until.get().copied()
    }

    /// Ends the term on purpose, unless it already ended. Returns whether this call ended it.
    pub(crate) fn end(&self, reason: StepDownReason) -> bool {
        if self.inner.lease.is_lost() {
            return false;
        }
        let _ = self.inner.ended_by.set(reason);
        self.inner.lease.mark_lost();
        true
    }

    /// This latch's term number: 1 for its first term, then 2, and so on. It is local to this
    /// instance. Unlike the fencing token, it exists on every store.
    #[must_use]
    pub fn number(&self) -> u64 {
        self.inner.number
    }

    /// The term's fencing token, or `None` when the store has none. It is strictly greater than
    /// every earlier term's token of this election, whichever candidate held it.
    #[must_use]
    pub fn fencing_token(&self) -> Option<i64> {
        self.inner.fencing_token
    }

    /// This instance's owner id, as written to `locked_by`.
    #[must_use]
    pub fn owner_id(&self) -> &str {
        &self.inner.owner_id
    }

    /// When the acquire that started the term was sent, on tokio's monotonic clock.
    #[must_use]
    pub fn started_at(&self) -> Instant {
        self.inner.started_at
    }

    /// The local deadline. The term ends at this instant unless a renew succeeds first. Every
    /// successful renew moves it forward, to the renew's send time + `renew_deadline`.
    #[must_use]
    pub fn deadline(&self) -> Instant {
        self.inner.lease.deadline()
    }

    /// The row as last confirmed by the store.
    #[must_use]
    pub fn record(&self) -> LockRecord {
        self.inner.lease.record()
    }

    /// Whether the term is still running: not stepped down, and its deadline not reached. It is
    /// checked against the clock on every call. So it turns false on time even if no task runs.
    #[must_use]
    pub fn is_active(&self) -> bool {
        !self.inner.lease.is_lost()
    }

    /// Resolves when the term ends, or at once if it has. It is the cancellation signal for
    /// leader-only work. It fires exactly at the local deadline if no renew succeeded, even while a
    /// renew call hangs.
    pub async fn ended(&self) {
        self.inner.lease.lost().await;
    }

    /// Why the term ended, or `None` while it is active.
    #[must_use]
    pub fn end_reason(&self) -> Option<StepDownReason> {
        if let Some(reason) = self.inner.ended_by.get() {
            return Some(*reason);
        }
        if self.inner.lease.was_refused() {
            Some(StepDownReason::Refused)
        } else if self.inner.lease.is_lost() {
            Some(StepDownReason::DeadlineExpired)
        } else {
            None
        }
    }
}

impl PartialEq for LeaderTerm {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for LeaderTerm {}

impl fmt::Debug for LeaderTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderTerm")
            .field("number", &self.inner.number)
            .field("fencing_token", &self.inner.fencing_token)
            .field("owner_id", &self.inner.owner_id)
            .field("active", &self.is_active())
            .finish_non_exhaustive()
    }
}

/// One event of a latch's opt-in event stream, see
/// [`LeaderLatch::events`](crate::LeaderLatch::events). The per-cycle events are the heartbeat
/// pattern's "leadership event every cycle". A cycle that fails on a store error publishes nothing,
/// because the state did not change.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaderEvent {
    /// This instance won the row: a new term began.
    Elected {
        /// The new term.
        term: LeaderTerm,
    },
    /// The leader renewed its lease. One event per successful renew.
    Renewed {
        /// The current term.
        term: LeaderTerm,
    },
    /// The term ended.
    SteppedDown {
        /// The term that ended.
        term: LeaderTerm,
        /// Why.
        reason: StepDownReason,
    },
    /// A follower cycle: the row is held elsewhere. One event per attempt.
    Following {
        /// The leader seen, when the store can tell.
        leader: Option<KnownLeader>,
    },
    /// The latch stopped. No more events follow.
    Stopped,
}

/// The receiving end of [`LeaderLatch::events`](crate::LeaderLatch::events).
///
/// Events are kept in a bounded buffer. A consumer that falls behind misses the oldest ones,
/// counted by [`missed`](Self::missed). It never slows the latch down.
#[derive(Debug)]
pub struct LeaderEvents {
    rx: broadcast::Receiver<LeaderEvent>,
    missed: u64,
    done: bool,
}

impl LeaderEvents {
    pub(crate) fn new(rx: broadcast::Receiver<LeaderEvent>) -> Self {
        Self {
            rx,
            missed: 0,
            done: false,
        }
    }

    /// The next event. `None` after [`LeaderEvent::Stopped`] has been received, or once the latch
    /// is gone. Skips events this consumer was too slow to receive.
    pub async fn recv(&mut self) -> Option<LeaderEvent> {
        while !self.done {
            match self.rx.recv().await {
                Ok(event) => {
                    self.done = event == LeaderEvent::Stopped;
                    return Some(event);
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::debug!(missed = n, "leader event consumer fell behind");
                    self.missed += n;
                }
                Err(broadcast::error::RecvError::Closed) => self.done = true,
            }
        }
        None
    }

    /// The next event if one is waiting, without waiting. `None` if there is none now.
    pub fn try_recv(&mut self) -> Option<LeaderEvent> {
        while !self.done {
            match self.rx.try_recv() {
                Ok(event) => {
                    self.done = event == LeaderEvent::Stopped;
                    return Some(event);
                }
                Err(broadcast::error::TryRecvError::Lagged(n)) => self.missed += n,
                Err(_) => return None,
            }
        }
        None
    }

    /// How many events this consumer missed because it fell behind.
    #[must_use]
    pub fn missed(&self) -> u64 {
        self.missed
    }
}
