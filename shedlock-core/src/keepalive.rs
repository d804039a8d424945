//! Lease maintenance, shared by the executor's keep-alive and the leader latch.
//!
//! A [`Lease`] is one held acquisition plus a **local monotonic deadline**: the instant, on tokio's
//! clock, until which this process may assume it still holds the lock. It is measured from when a
//! successful acquire or extend was *sent*, so it never outlives the store's own `lock_until`. Once
//! it passes with no newer success, the lease is lost, whether or not any background task got to
//! run. [`Lease::is_lost`] compares against the clock itself, so a starved task or a hung store
//! call cannot hide the loss.
//!
//! [`Lease::spawn_renewal`] starts the background loop that extends the lease on a schedule. A
//! lease can mirror its deadline into a [`DeadlineCell`], a lock-free copy that hot paths such as
//! the latch's `is_leader()` read with one atomic load and a clock read.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};
use tracing::Instrument;

use crate::error::{Error, Result};
use crate::jobs::RunReport;
use crate::observe;
use crate::provider::{LockProvider, LockRecord};

/// Runs one store call under `timeout`. A call that does not finish in time is an
/// [`Error::is_timeout`] error. Its future is dropped, which cancels it.
pub(crate) async fn timed<T>(
    operation: &'static str,
    timeout: Duration,
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result,
        Err(_) => Err(Error::timeout(operation, timeout)),
    }
}

/// The observable state of a [`Lease`] (see [`Lease::subscribe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct State {
    deadline: Instant,
    lost: bool,
    /// The store refused an extend. Someone else holds the lock, or the row was removed.
    refused: bool,
}

/// A lock-free copy of one lease's local deadline at a time: an [`AtomicU64`] of nanoseconds since
/// `base`, with 0 for no live lease. A lease attached with [`Lease::new_mirrored`] writes its
/// deadline here on creation, moves it on each successful extend and clears it when it is marked
/// lost. Moves and clears are compare-and-swap against the lease's own last value, so a stale lease
/// can never touch a newer lease's deadline.
#[derive(Debug)]
pub(crate) struct DeadlineCell {
    base: Instant,
    nanos: AtomicU64,
}

impl DeadlineCell {
    pub(crate) fn new() -> Self {
        Self {
            base: Instant::now(),
            nanos: AtomicU64::new(0),
        }
    }

    fn encode(&self, at: Instant) -> u64 {
        let nanos = at.saturating_duration_since(self.base).as_nanos();
        u64::try_from(nanos).unwrap_or(u64::MAX).max(1)
    }

    /// Whether a live deadline is set and not yet reached. Costs one atomic load and a clock read.
    pub(crate) fn is_live(&self) -> bool {
        match self.nanos.load(Ordering::Acquire) {
            0 => false,
            nanos => Instant::now() < self.base + Duration::from_nanos(nanos),
        }
    }

    fn set(&self, at: Instant) {
        self.nanos.store(self.encode(at), Ordering::Release);
    }

    fn replace(&self, old: Instant, new: Instant) {
        let _ = self.nanos.compare_exchange(
            self.encode(old),
            self.encode(new),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    fn clear(&self, old: Instant) {
        let _ =
            self.nanos
                .compare_exchange(self.encode(old), 0, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// What a scheduler has said about recording its runs, so each thing is said once: a store that
/// does not record them, and a recording that fails (until one succeeds again).
#[derive(Debug, Default)]
pub(crate) struct RecordingLog {
    failing: AtomicBool,
    unsupported: AtomicBool,
}

/// One held acquisition and its local deadline. Cheap to clone, because the state is shared.
#[derive(Clone)]
pub(crate) struct Lease {
    shared: Arc<Shared>,
}

struct Shared {
    provider: Arc<dyn LockProvider>,
    call_timeout: Duration,
    record: Mutex<LockRecord>,
    state: watch::Sender<State>,
    mirror: Option<Arc<DeadlineCell>>,
    /// The `at_most` renewals send: the policy's lease, then that of the last explicit extend.
    lease_len: Mutex<Duration>,
    /// Extends run one at a time. So the last one applied is the last one sent, and the local
    /// deadline can follow it exactly, earlier or later.
    extend_gate: tokio::sync::Mutex<()>,
    /// The outcome of the release that succeeded, if one did. A lease is released once, however
    /// many callers ask: its guard, a background drop and the executor's drain. A caller that comes
    /// while another's release is in flight waits for it. A failed release may be tried again.
    released: tokio::sync::Mutex<Option<bool>>,
    /// How a scheduler's run under this lock ended, for its release to record, see
    /// [`LockProvider::release_run`]. It is set to cancelled when the run starts, which is what a
    /// release by the drain records, and set again when the run ends.
    run: Mutex<Option<(RunReport, Arc<RecordingLog>)>>,
    /// The executor's batches of releases, where the store takes them: a release that records a
    /// run goes in the next batch ([`Lease::batch_releases`]).
    #[cfg(feature = "scheduler")]
    releases:
        std::sync::OnceLock<Arc<crate::executor::batch::Batcher<crate::executor::batch::Releases>>>,
}

/// How a [`Lease`] is renewed in the background.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RenewPolicy {
    /// The `at_most` (lease length) sent with each extend, until an explicit extend changes it.
    pub(crate) lease: Duration,
    /// Time from a successful extend's send to the next extend. At most half the validity.
    pub(crate) renew_every: Duration,
    /// After a failed extend, try again this soon.
    pub(crate) retry_every: Duration,
    /// How long a success keeps the lease valid locally, from its send time. At most `lease`.
    pub(crate) valid_for: Duration,
}

impl RenewPolicy {
    /// How much shorter the local validity is than the lease. It is kept when an explicit extend
    /// changes the lease's length.
    fn margin(self) -> Duration {
        self.lease.saturating_sub(self.valid_for)
    }
}

impl Lease {
    /// A lease for `record`, acquired by a call sent at `sent_at`, valid locally for `valid_for`.
    pub(crate) fn new(
        provider: Arc<dyn LockProvider>,
        call_timeout: Duration,
        record: LockRecord,
        sent_at: Instant,
        valid_for: Duration,
    ) -> Self {
        Self::build(provider, call_timeout, record, sent_at, valid_for, None)
    }

    /// [`new`](Self::new), mirroring the deadline into `mirror`. It overwrites `mirror` now.
    pub(crate) fn new_mirrored(
        provider: Arc<dyn LockProvider>,
        call_timeout: Duration,
        record: LockRecord,
        sent_at: Instant,
        valid_for: Duration,
        mirror: Arc<DeadlineCell>,
    ) -> Self {
        mirror.set(sent_at + valid_for);
        Self::build(
            provider,
            call_timeout,
            record,
            sent_at,
            valid_for,
            Some(mirror),
        )
    }

    fn build(
        provider: Arc<dyn LockProvider>,
        call_timeout: Duration,
        record: LockRecord,
        sent_at: Instant,
        valid_for: Duration,
        mirror: Option<Arc<DeadlineCell>>,
    ) -> Self {
        let (state, _) = watch::channel(State {
            deadline: sent_at + valid_for,
            lost: false,
            refused: false,
        });
        Self {
            shared: Arc::new(Shared {
                provider,
                call_timeout,
                record: Mutex::new(record),
                state,
                mirror,
                lease_len: Mutex::new(valid_for),
                extend_gate: tokio::sync::Mutex::new(()),
                released: tokio::sync::Mutex::new(None),
                run: Mutex::new(None),
                #[cfg(feature = "scheduler")]
                releases: std::sync::OnceLock::new(),
            }),
        }
    }

    /// The current record. Its `lock_until` moves with each extend.
    pub(crate) fn record(&self) -> LockRecord {
        self.shared
            .record
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn lease_len(&self) -> Duration {
        *self
            .shared
            .lease_len
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn set_lease_len(&self, at_most: Duration) {
        *self
            .shared
            .lease_len
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = at_most;
    }

    pub(crate) fn provider(&self) -> &Arc<dyn LockProvider> {
        &self.shared.provider
    }

    /// The local deadline, after which the lease counts as lost.
    pub(crate) fn deadline(&self) -> Instant {
        self.shared.state.borrow().deadline
    }

    /// Lost: refused by the store, given up, or past the local deadline.
    pub(crate) fn is_lost(&self) -> bool {
        let state = *self.shared.state.borrow();
        state.lost || Instant::now() >= state.deadline
    }

    /// Whether the store refused an extend of this lease. A deadline passing or a local step-down
    /// does not count.
    pub(crate) fn was_refused(&self) -> bool {
        self.shared.state.borrow().refused
    }

    /// A receiver that sees every change: each successful extend, which moves the deadline, and the
    /// moment the lease is marked lost, but not the deadline passing alone.
    pub(crate) fn subscribe(&self) -> watch::Receiver<State> {
        self.shared.state.subscribe()
    }

    /// Marks the lease lost now, on a refused extend, a step-down or a release. Never waits on I/O.
    pub(crate) fn mark_lost(&self) {
        self.mark_lost_with(false);
    }

    fn mark_lost_with(&self, refused: bool) {
        let mirror = self.shared.mirror.as_deref();
        self.shared.state.send_if_modified(|s| {
            if s.lost {
                return false;
            }
            s.lost = true;
            s.refused = refused;
            if let Some(mirror) = mirror {
                mirror.clear(s.deadline);
            }
            true
        });
    }

    /// Resolves once the lease is lost. Resolves at once if it already is.
    pub(crate) async fn lost(&self) {
        let mut rx = self.shared.state.subscribe();
        loop {
            let state = *rx.borrow_and_update();
            if state.lost || Instant::now() >= state.deadline {
                return;
            }
            tokio::select! {
                changed = rx.changed() => {
                    if changed.is_err() {
                        // Unreachable while `self` holds the sender; wait out the deadline anyway.
                        sleep_until(state.deadline).await;
                    }
                }
                () = sleep_until(state.deadline) => {}
            }
        }
    }

    /// Extends the lock to `now + at_most` by the store clock, valid locally until its send time +
    /// `at_most`, and makes keep-alive renewals send `at_most` too. Answers `Ok(false)`, and the
    /// lease is lost, when the store refused or the lease had already run out. An error leaves the
    /// deadline where it was. Only executor locks use it, since the latch's loop renews its leases.
    pub(crate) async fn extend(&self, at_most: Duration) -> Result<bool> {
        self.extend_once(at_most, at_most).await
    }

    /// One extend, serialised with any other. It sends `at_most`. A success makes the lease valid
    /// until its send time + `valid_for`, whether that is later or earlier than before.
    ///
    /// This is the one place extensions are observed, explicit or by renewal. A success is logged
    /// at DEBUG and counted (`shedlock_extended_total`). A failure is counted as an `extend` error.
    async fn extend_once(&self, at_most: Duration, valid_for: Duration) -> Result<bool> {
        let _one_at_a_time = self.shared.extend_gate.lock().await;
        if self.is_lost() {
            return Ok(false);
        }
        let record = self.record();
        let name = record.name();
        let sent_at = Instant::now();
        let extended = timed(
            "extend",
            self.shared.call_timeout,
            self.shared.provider.extend(&record, at_most),
        )
        .await
        .inspect_err(|_| observe::error(name, "extend"))?;
        let applied = self.apply_extend(extended, sent_at, at_most, valid_for);
        if applied {
            tracing::debug!(lock = name, "lock extended");
            observe::extended(name);
        }
        Ok(applied)
    }

    fn apply_extend(
        &self,
        extended: Option<LockRecord>,
        sent_at: Instant,
        at_most: Duration,
        valid_for: Duration,
    ) -> bool {
        let name = self.record().name().to_owned();
        let Some(updated) = extended else {
            if self.shared.state.borrow().lost {
                // Already given up (a local step-down raced this call): nothing new to report.
                return false;
            }
            tracing::warn!(lock = %name, "lock lost: the store refused to extend it");
            observe::lost(&name);
            self.mark_lost_with(true);
            return false;
        };
        let deadline = sent_at + valid_for;
        let mirror = self.shared.mirror.as_deref();
        let mut applied = false;
        self.shared.state.send_if_modified(|s| {
            if s.lost {
                return false;
            }
            if Instant::now() >= s.deadline {
                // Expiry is final: a reply that comes back after the deadline does not revive a
                // lease its holder has already been told it lost.
                s.lost = true;
                if let Some(mirror) = mirror {
                    mirror.clear(s.deadline);
                }
                return true;
            }
            if let Some(mirror) = mirror {
                mirror.replace(s.deadline, deadline);
            }
            s.deadline = deadline;
            applied = true;
            true
        });
        if !applied {
            return false;
        }
        *self
            .shared
            .record
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = updated;
        self.set_lease_len(at_most);
        !self.is_lost()
    }

    /// Ends this acquisition: `lock_until = max(now, locked_at + at_least)` in the store. The lease
    /// is lost locally whatever the outcome, which is logged, and a failure counted. Once released,
    /// later calls answer the same without asking the store again, and a call made while another is
    /// in flight waits for it. It waits for an extension in flight to finish, so none can land
    /// after it and undo it.
    pub(crate) async fn release(&self, at_least: Duration) -> Result<bool> {
        let mut released = self.shared.released.lock().await;
        if let Some(outcome) = *released {
            return Ok(outcome);
        }
        let result = {
            let _no_extend_in_flight = self.shared.extend_gate.lock().await;
            self.release_once(at_least).await
        };
        if let Ok(outcome) = result {
            *released = Some(outcome);
        }
        result
    }

    /// Sets how the run under this lock ended, for the release to record. `failing` is the caller's
    /// flag of a failed recording, so a failure is logged once per scheduler until a record
    /// succeeds again.
    #[cfg_attr(
        not(feature = "scheduler"),
        allow(dead_code, reason = "used by the scheduler")
    )]
    pub(crate) fn set_run(&self, report: RunReport, log: &Arc<RecordingLog>) {
        *self
            .shared
            .run
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((report, log.clone()));
    }

    /// Sends this lease's release that records its run in `batcher`'s next batch, rather than on
    /// its own. Set once, when the lease is made.
    #[cfg(feature = "scheduler")]
    pub(crate) fn batch_releases(
        &self,
        batcher: &Arc<crate::executor::batch::Batcher<crate::executor::batch::Releases>>,
    ) {
        let _ = self.shared.releases.set(Arc::clone(batcher));
    }

    /// The store's `release_run` of `record`, in the executor's next batch of releases where the
    /// store takes them, within `timeout`.
    async fn send_release_run(
        &self,
        record: &LockRecord,
        at_least: Duration,
        run: &RunReport,
        timeout: Duration,
    ) -> Result<bool> {
        // The whole wait, in the queue behind a batch in flight too, is bounded by the call
        // timeout, so a release still takes at most two of them with its fallback. A release
        // not yet sent when it runs out is left out of its batch.
        #[cfg(feature = "scheduler")]
        if let Some(batcher) = self.shared.releases.get() {
            // Boxed: the queue's future would otherwise grow every guard's.
            return timed(
                "release",
                timeout,
                Box::pin(batcher.release(record, at_least, run, timeout)),
            )
            .await;
        }
        timed(
            "release",
            timeout,
            self.shared.provider.release_run(record, at_least, run),
        )
        .await
    }

    async fn release_once(&self, at_least: Duration) -> Result<bool> {
        let record = self.record();
        let name = record.name();
        let run = self
            .shared
            .run
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let result = match run {
            Some((run, log)) => self.release_recorded(&record, at_least, &run, &log).await,
            None => {
                timed(
                    "release",
                    self.shared.call_timeout,
                    self.shared.provider.release(&record, at_least),
                )
                .await
            }
        };
        self.mark_lost();
        match &result {
            Ok(true) => tracing::debug!(lock = name, "lock released"),
            Ok(false) => {
                tracing::warn!(
                    lock = name,
                    "lock was already taken over by another holder at release"
                );
            }
            Err(error) => {
                tracing::error!(
                    lock = name,
                    error = error as &dyn std::error::Error,
                    "failed to release lock; it stays held until its at_most"
                );
                observe::release_failed(name);
                observe::error(name, "release");
            }
        }
        result
    }

    /// The release that records `run`, see [`LockProvider::release_run`]. It falls back to the
    /// plain release when the store cannot record, which it says without a round trip, or recording
    /// failed. A failure is logged once until a record succeeds again.
    async fn release_recorded(
        &self,
        record: &LockRecord,
        at_least: Duration,
        run: &RunReport,
        log: &RecordingLog,
    ) -> Result<bool> {
        let timeout = self.shared.call_timeout;
        let recorded = self.send_release_run(record, at_least, run, timeout).await;
        match recorded {
            Ok(acted) => {
                if log.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(lock = record.name(), "runs are recorded again");
                }
                return Ok(acted);
            }
            Err(error) if error.is_unsupported() => {
                if !log.unsupported.swap(true, Ordering::Relaxed) {
                    tracing::info!(
                        lock = record.name(),
                        error = &error as &dyn std::error::Error,
                        "the store does not record how runs end; operators' tools will not \
                         show this job's last run (said once)"
                    );
                }
            }
            Err(error) => {
                let released = timed(
                    "release",
                    timeout,
                    self.shared.provider.release(record, at_least),
                )
                .await;
                // Said only when the plain release worked: when it failed too, the store is down
                // and the release's own error says so.
                if released.is_ok() {
                    if log.failing.swap(true, Ordering::Relaxed) {
                        tracing::debug!(
                            lock = record.name(),
                            error = &error as &dyn std::error::Error,
                            "run not recorded; released without it"
                        );
                    } else {
                        tracing::error!(
                            lock = record.name(),
                            error = &error as &dyn std::error::Error,
                            "the store could not record how the run ended; the lock was released \
                             without it (logged once until a record succeeds again)"
                        );
                    }
                }
                return released;
            }
        }
        timed(
            "release",
            timeout,
            self.shared.provider.release(record, at_least),
        )
        .await
    }

    /// Starts the background renewal loop, in the caller's tracing span. It stops when the lease is
    /// lost or when the returned handle is aborted. The lease is lost when refused, or when no
    /// success comes before the deadline.
    pub(crate) fn spawn_renewal(&self, policy: RenewPolicy) -> JoinHandle<()> {
        self.set_lease_len(policy.lease);
        let lease = self.clone();
        tokio::spawn(
            lease
                .renew_loop(policy)
                .instrument(tracing::Span::current()),
        )
    }

    /// When the next renewal is due: half the current validity after the last success was sent.
    /// That half is at most `renew_every`.
    fn next_renewal(&self, policy: RenewPolicy) -> Instant {
        let valid_for = self.lease_len().saturating_sub(policy.margin());
        let sent_at = self
            .deadline()
            .checked_sub(valid_for)
            .unwrap_or_else(Instant::now);
        sent_at + policy.renew_every.min(valid_for / 2)
    }

    async fn renew_loop(self, policy: RenewPolicy) {
        let name = self.record().name().to_owned();
        let mut changes = self.subscribe();
        let mut next = self.next_renewal(policy);
        loop {
            let deadline = changes.borrow_and_update().deadline;
            tokio::select! {
                biased;
                () = sleep_until(deadline) => {}
                update = changes.changed() => {
                    if update.is_err() || self.is_lost() {
                        break;
                    }
                    // Extended (by us or explicitly): reschedule from the new deadline.
                    next = self.next_renewal(policy);
                    continue;
                }
                () = sleep_until(next) => {}
            }
            if self.is_lost() {
                break;
            }
            let at_most = self.lease_len();
            let valid_for = at_most.saturating_sub(policy.margin());
            let outcome = tokio::select! {
                biased;
                // A hung call cannot keep the lease alive past its deadline.
                () = sleep_until(deadline) => None,
                outcome = self.extend_once(at_most, valid_for) => Some(outcome),
            };
            // Successes and failures are logged and counted by `extend_once`.
            match outcome {
                Some(Ok(true)) => next = self.next_renewal(policy),
                Some(Ok(false)) | None => {}
                Some(Err(error)) => {
                    let error = &error as &dyn std::error::Error;
                    tracing::warn!(lock = %name, error, "failed to extend lock; retrying");
                    next = Instant::now() + policy.retry_every;
                }
            }
            if self.is_lost() {
                break;
            }
        }
        if self.is_lost() && !self.shared.state.borrow().lost {
            tracing::warn!(lock = %name, "lock lost: no extension succeeded before its deadline");
            observe::lost(&name);
            self.mark_lost();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InMemoryLockProvider;

    const SEC: Duration = Duration::from_secs(1);

    async fn lease(at_most: Duration) -> (Arc<dyn LockProvider>, Lease) {
        let provider: Arc<dyn LockProvider> = Arc::new(InMemoryLockProvider::new());
        let sent = Instant::now();
        let record = provider
            .acquire("job", at_most, "me")
            .await
            .expect("acquire")
            .expect("free");
        let lease = Lease::new(provider.clone(), SEC, record, sent, at_most);
        (provider, lease)
    }

    #[tokio::test(start_paused = true)]
    async fn without_renewal_the_lease_is_lost_at_its_deadline() {
        let (_, lease) = lease(10 * SEC).await;
        let start = Instant::now();
        assert!(!lease.is_lost());
        lease.lost().await;
        assert_eq!(start.elapsed(), 10 * SEC);
        assert!(lease.is_lost());
    }

    #[tokio::test(start_paused = true)]
    async fn renewal_keeps_it_alive_and_moves_the_store_row() {
        let (provider, lease) = lease(10 * SEC).await;
        let handle = lease.spawn_renewal(RenewPolicy {
            lease: 10 * SEC,
            renew_every: 5 * SEC,
            retry_every: SEC,
            valid_for: 10 * SEC,
        });
        tokio::time::sleep(60 * SEC).await;
        assert!(!lease.is_lost());
        assert!(
            provider
                .acquire("job", SEC, "other")
                .await
                .expect("ok")
                .is_none()
        );
        handle.abort();
        lease.lost().await;
        assert!(
            provider
                .acquire("job", SEC, "other")
                .await
                .expect("ok")
                .is_some()
        );
    }

    /// An explicit extend (`LockHandle::extend`) is logged and counted exactly as a background
    /// renewal is. One path, `extend_once`, observes both.
    #[tokio::test(start_paused = true)]
    async fn explicit_extends_are_logged_and_counted_like_renewals() {
        let logs = crate::test_observe::Logs::default();
        let _logs = logs.install();
        #[cfg(feature = "metrics")]
        let counters = crate::test_observe::Counters::default();
        #[cfg(feature = "metrics")]
        let _counters = metrics::set_default_local_recorder(&counters);
        let extended = || logs.count(tracing::Level::DEBUG, "lock extended");

        let (provider, lease) = lease(10 * SEC).await;
        assert!(lease.extend(20 * SEC).await.expect("extend works"));
        assert_eq!(extended(), 1, "the explicit extend is logged");
        #[cfg(feature = "metrics")]
        assert_eq!(counters.get("shedlock_extended_total", "job"), 1);

        // Background renewals, for comparison: every 5 s from 15 s (half of 10 s before the
        // explicit extension's deadline at 20 s).
        let renewal = lease.spawn_renewal(RenewPolicy {
            lease: 10 * SEC,
            renew_every: 5 * SEC,
            retry_every: SEC,
            valid_for: 10 * SEC,
        });
        tokio::time::sleep(30 * SEC).await;
        renewal.abort();
        let renewals = extended() - 1;
        assert!(renewals >= 3, "renewals are logged ({renewals})");
        #[cfg(feature = "metrics")]
        assert_eq!(
            counters.get("shedlock_extended_total", "job"),
            1 + renewals as u64,
            "every logged extension is counted, explicit or not"
        );

        // A refused explicit extend is not an extension.
        provider
            .release(&lease.record(), Duration::ZERO)
            .await
            .expect("release");
        provider
            .acquire("job", 10 * SEC, "thief")
            .await
            .expect("ok")
            .expect("free");
        assert!(!lease.extend(20 * SEC).await.expect("no error"));
        assert_eq!(extended(), 1 + renewals);
        #[cfg(feature = "metrics")]
        assert_eq!(
            counters.get("shedlock_extended_total", "job"),
            1 + renewals as u64
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_extend_is_lost_at_once() {
        let (provider, lease) = lease(10 * SEC).await;
        provider
            .release(&lease.record(), Duration::ZERO)
            .await
            .expect("release");
        provider
            .acquire("job", 10 * SEC, "thief")
            .await
            .expect("ok")
            .expect("free");
        assert!(!lease.extend(10 * SEC).await.expect("no error"));
        assert!(lease.is_lost());
        // Lost stays lost.
        assert!(!lease.extend(10 * SEC).await.expect("no error"));
    }
}
