//! The latch's shared state and its background task. The task acquires as a follower, renews
//! through [`Lease`] as the leader, steps down and releases.
//!
//! Every transition of the term happens in [`Shared`] under one short, synchronous lock, `core`. So
//! a `resign()` or `close()` racing the task, or a renew reply, resolves one way only. A term that
//! was ended stays ended. Its [`Lease`] is marked lost, and a lost lease ignores later successes.
//!
//! Publishing, to the state watch and the event stream, is the task's alone. It never happens while
//! `core` is held. `resign()`, `close()` and dropping the last handle only end the term under
//! `core`. `is_leader()` and `LeaderTerm::ended` see that at once. The task announces the step-down
//! when it wakes. So user code holding a read guard of the watch while it calls into the latch
//! cannot deadlock with a publish. Such calls are `current_term()`, `resign()` and dropping the
//! latch. And a single publisher keeps states and events in the order of the transitions.

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, broadcast, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until, timeout_at};

use super::config::LeaderLatchConfig;
use super::ownership::{Claim, OwnRows, RunningLatch};
use super::state::{KnownLeader, LeaderEvent, LeaderState, LeaderTerm, StepDownReason};
use crate::admin::election_owner;
use crate::error::Error;
use crate::executor::catch_unwind_future;
use crate::keepalive::{DeadlineCell, Lease, RenewPolicy, timed};
use crate::outage::{Cause, Outage, millis};
use crate::owner::random_u64;
use crate::provider::{LockProvider, LockRecord};

/// How many events a slow [`LeaderEvents`](super::LeaderEvents) consumer may fall behind.
pub(super) const EVENT_BUFFER: usize = 64;

/// Everything the handles, the task and the leader-work helpers share.
pub(super) struct Shared {
    pub(super) config: LeaderLatchConfig,
    pub(super) owner_id: Arc<str>,
    /// What the latch writes to `locked_by`: the owner id with [`ELECTION_MARK`]. Operators' tools
    /// can then tell its rows from task locks.
    ///
    /// [`ELECTION_MARK`]: crate::admin::ELECTION_MARK
    pub(super) row_owner: Arc<str>,
    pub(super) provider: Arc<dyn LockProvider>,
    /// The current term's deadline, lock-free. `is_leader()` reads only this.
    pub(super) leader_until: Arc<DeadlineCell>,
    pub(super) state: watch::Sender<LeaderState>,
    pub(super) events: broadcast::Sender<LeaderEvent>,
    /// The number of the last term fully wound down: work stopped, and row released or given up.
    /// `u64::MAX` once the task has ended.
    pub(super) settled: watch::Sender<u64>,
    pub(super) runtime: tokio::runtime::Handle,
    core: Mutex<Core>,
    wake: Notify,
    active_work: watch::Sender<usize>,
    close_error: Mutex<Option<Error>>,
    /// This latch in the process-wide count of latches per (owner id, election).
    registration: RunningLatch,
}

#[derive(Default)]
struct Core {
    term: Option<LeaderTerm>,
    /// The term the task announced as elected and has not yet announced as ended.
    announced: Option<LeaderTerm>,
    terms: u64,
    closing: bool,
    /// `resign()` was called while leading or acquiring. Start no term until the task has begun the
    /// sit-out.
    hold: bool,
    /// An acquire is in flight: sent, and its reply not yet handled.
    acquiring: bool,
    known_leader: Option<KnownLeader>,
}

impl Shared {
    pub(super) fn new(
        config: LeaderLatchConfig,
        owner_id: String,
        provider: Arc<dyn LockProvider>,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        let registration = RunningLatch::new(&owner_id, config.name());
        Self {
            config,
            row_owner: Arc::from(election_owner(&owner_id)),
            owner_id: Arc::from(owner_id),
            provider,
            leader_until: Arc::new(DeadlineCell::new()),
            state: watch::Sender::new(LeaderState::Starting),
            events: broadcast::Sender::new(EVENT_BUFFER),
            settled: watch::Sender::new(0),
            runtime,
            core: Mutex::new(Core::default()),
            wake: Notify::new(),
            active_work: watch::Sender::new(0),
            close_error: Mutex::new(None),
            registration,
        }
    }

    fn core(&self) -> MutexGuard<'_, Core> {
        // Nothing panics while the lock is held; a poisoned lock holds consistent data.
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn name(&self) -> &str {
        self.config.name()
    }

    fn publish(&self, new: LeaderState) {
        crate::observe::leader(self.name(), matches!(new, LeaderState::Leader { .. }));
        self.state.send_if_modified(|state| {
            if *state == new {
                return false;
            }
            *state = new;
            true
        });
    }

    fn emit(&self, event: LeaderEvent) {
        // No receivers is fine: the stream is opt-in.
        let _ = self.events.send(event);
    }

    pub(super) fn current_term(&self) -> Option<LeaderTerm> {
        self.core().term.clone().filter(LeaderTerm::is_active)
    }

    pub(super) fn is_closing(&self) -> bool {
        self.core().closing
    }

    /// The task is sending an acquire. From now until its reply is handled, `resign()` makes the
    /// instance sit out, because the acquire may win.
    fn acquire_sent(&self) {
        self.core().acquiring = true;
    }

    /// The acquire's reply was handled without starting a term.
    fn acquire_answered(&self) {
        self.core().acquiring = false;
    }

    /// Starts a term for a won acquire, and announces it. If the latch is closing or resigning, it
    /// starts none, and the caller releases the row.
    fn begin_term(&self, record: LockRecord, sent_at: Instant) -> Option<LeaderTerm> {
        let term = {
            let mut core = self.core();
            core.acquiring = false;
            if core.closing || core.hold {
                return None;
            }
            core.terms += 1;
            let lease = Lease::new_mirrored(
                self.provider.clone(),
                self.config.call_timeout(),
                record,
                sent_at,
                self.config.renew_deadline(),
                self.leader_until.clone(),
            );
            let term = LeaderTerm::new(core.terms, self.owner_id.clone(), sent_at, lease);
            core.term = Some(term.clone());
            core.announced = Some(term.clone());
            core.known_leader = None;
            term
        };
        // Published after `core` is released. If a resign or close ended the term in between,
        // the task announces its end right after this (states and events stay in order).
        tracing::info!(
            term = term.number(),
            token = ?term.fencing_token(),
            "became leader"
        );
        self.publish(LeaderState::Leader { term: term.clone() });
        self.emit(LeaderEvent::Elected { term: term.clone() });
        Some(term)
    }

    /// Ends `term` if it is the current one. It marks it lost, so `is_leader()` is false and
    /// [`LeaderTerm::ended`] fires from now on. It never waits on I/O and publishes nothing. The
    /// task announces the step-down. `reason` is for deliberate ends. `None` records a lost lease,
    /// refused or past its deadline.
    pub(super) fn end_term(&self, term: &LeaderTerm, reason: Option<StepDownReason>) -> bool {
        let mut core = self.core();
        self.end_term_locked(&mut core, term, reason)
    }

    fn end_term_locked(
        &self,
        core: &mut Core,
        term: &LeaderTerm,
        reason: Option<StepDownReason>,
    ) -> bool {
        if core.term.as_ref() != Some(term) {
            return false;
        }
        core.term = None;
        let voluntary = reason.is_some_and(StepDownReason::is_voluntary) && term.is_active();
        let wind_down_until = if voluntary {
            (Instant::now() + self.config.shutdown_grace()).min(term.deadline())
        } else {
            Instant::now()
        };
        term.set_wind_down_until(wind_down_until);
        // Deliberately, unless it already ended by itself; either way the lease is now flagged
        // lost, so nothing can revive it.
        if !reason.is_some_and(|reason| term.end(reason)) {
            term.lease().mark_lost();
        }
        true
    }

    /// Announces the end of `term` by log, state and event, if it was announced as elected and not
    /// yet as ended. Only the task calls it, never with `core` held.
    fn announce_step_down(&self, term: &LeaderTerm) {
        {
            let mut core = self.core();
            if core.announced.as_ref() != Some(term) {
                return;
            }
            core.announced = None;
        }
        self.announce_ended(term);
    }

    fn announce_ended(&self, term: &LeaderTerm) {
        let reason = term.end_reason().unwrap_or(StepDownReason::DeadlineExpired);
        if reason.is_voluntary() {
            tracing::info!(term = term.number(), %reason, "stepped down");
        } else {
            tracing::warn!(
                term = term.number(),
                %reason,
                "stepped down: this instance no longer leads"
            );
        }
        self.publish(LeaderState::Follower { leader: None });
        self.emit(LeaderEvent::SteppedDown {
            term: term.clone(),
            reason,
        });
    }

    /// `close()`: step down now, then let the task wind down and stop.
    pub(super) fn request_close(&self) {
        {
            let mut core = self.core();
            if !core.closing {
                core.closing = true;
                if let Some(term) = core.term.clone() {
                    self.end_term_locked(&mut core, &term, Some(StepDownReason::Closed));
                }
            }
        }
        self.wake.notify_one();
    }

    /// `resign()`: step down now. The task releases the row and sits out before trying again. A
    /// follower sits out only if an acquire is in flight, because it may win. Its row is then given
    /// back. Otherwise nothing changes. Returns the term it ended, if any.
    pub(super) fn request_resign(&self) -> Option<LeaderTerm> {
        let ended = {
            let mut core = self.core();
            if core.closing || !(core.term.is_some() || core.acquiring) {
                return None;
            }
            core.hold = true;
            match core.term.clone() {
                Some(term)
                    if self.end_term_locked(&mut core, &term, Some(StepDownReason::Resigned)) =>
                {
                    Some(term)
                }
                _ => None,
            }
        };
        self.wake.notify_one();
        ended
    }

    fn take_hold(&self) -> bool {
        std::mem::take(&mut self.core().hold)
    }

    /// Records the leader seen as a follower. Publishes it if it changed.
    fn follow(&self, leader: Option<KnownLeader>) {
        let changed = {
            let mut core = self.core();
            if core.term.is_some() || core.closing {
                return;
            }
            let changed = core.known_leader != leader;
            if changed {
                core.known_leader.clone_from(&leader);
            }
            changed
        };
        if changed {
            if let Some(leader) = &leader {
                tracing::info!(%leader, "following");
            } else {
                tracing::debug!("no leader seen");
            }
        }
        self.publish(LeaderState::Follower {
            leader: leader.clone(),
        });
        self.emit(LeaderEvent::Following { leader });
    }

    /// The task's last act, also when it panics or is cancelled with its runtime.
    fn finish(&self) {
        let announced = {
            let mut core = self.core();
            core.closing = true;
            if let Some(term) = core.term.clone() {
                self.end_term_locked(&mut core, &term, Some(StepDownReason::Closed));
            }
            core.announced.take()
        };
        self.registration.end();
        if let Some(term) = announced {
            self.announce_ended(&term);
        }
        if std::thread::panicking() {
            tracing::error!(
                "the leader latch's task panicked; this instance no longer takes part in the election"
            );
        } else {
            tracing::info!("leader latch stopped");
        }
        self.publish(LeaderState::Stopped);
        self.emit(LeaderEvent::Stopped);
        self.settled.send_replace(u64::MAX);
    }

    pub(super) fn take_close_error(&self) -> Option<Error> {
        self.close_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    pub(super) fn work_started(self: &Arc<Self>) -> WorkGuard {
        self.active_work.send_modify(|n| *n += 1);
        WorkGuard(self.clone())
    }

    /// Waits until no leader-only work runs, or `until`. Returns whether it is idle.
    async fn wait_work_idle(&self, until: Instant) -> bool {
        let mut active = self.active_work.subscribe();
        timeout_at(until, active.wait_for(|n| *n == 0))
            .await
            .is_ok()
    }

    /// A follower's wait before its next attempt: `acquire_interval` plus random jitter.
    fn follower_wait(&self) -> Duration {
        let jitter = self.config.acquire_jitter();
        let extra = match u64::try_from(jitter.as_nanos()) {
            Ok(0) | Err(_) => Duration::ZERO,
            Ok(max) => Duration::from_nanos(random_u64() % (max + 1)),
        };
        self.config.acquire_interval() + extra
    }

    /// After `resign()`: long enough for every other candidate to have had one attempt.
    fn sit_out(&self) -> Duration {
        2 * self.config.acquire_interval() + self.config.acquire_jitter()
    }
}

/// Counts one running piece of leader-only work.
pub(super) struct WorkGuard(Arc<Shared>);

impl Drop for WorkGuard {
    fn drop(&mut self) {
        self.0.active_work.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Aborts a spawned task when dropped. The renewal loop must not outlive its term's handling.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Publishes `Stopped` however the task ends.
struct ExitGuard(Arc<Shared>);

impl Drop for ExitGuard {
    fn drop(&mut self) {
        self.0.finish();
    }
}

/// The background task of one latch.
pub(super) async fn run(shared: Arc<Shared>) {
    let _exit = ExitGuard(shared.clone());
    Runner {
        shared,
        errors: ErrorStreak::default(),
        holder_supported: true,
        retried_own_row: false,
        own: OwnRows::default(),
    }
    .run()
    .await;
}

struct Runner {
    shared: Arc<Shared>,
    errors: ErrorStreak,
    holder_supported: bool,
    /// The last cycle released this instance's own leftover row and retried at once. The next one
    /// waits its turn whatever it finds. So there is no hot loop on a store that keeps refusing.
    retried_own_row: bool,
    /// What it knows about rows it may have left behind (see [`super::ownership`]).
    own: OwnRows,
}

impl Runner {
    async fn run(&mut self) {
        let mut next = Instant::now();
        loop {
            tokio::select! {
                () = sleep_until(next) => {}
                () = self.shared.wake.notified() => {}
            }
            if self.shared.is_closing() {
                break;
            }
            if self.shared.take_hold() {
                next = Instant::now() + self.shared.sit_out();
                tracing::debug!("resigned; sitting out before trying again");
                continue;
            }
            if Instant::now() < next {
                continue;
            }
            next = self.cycle().await;
        }
    }

    /// One follower attempt, and the whole term if it wins. Returns the next attempt's time.
    async fn cycle(&mut self) -> Instant {
        let shared = self.shared.clone();
        let cfg = &shared.config;
        let sent_at = Instant::now();
        shared.acquire_sent();
        let acquired = timed(
            "acquire",
            cfg.call_timeout(),
            shared
                .provider
                .acquire(cfg.name(), cfg.lease(), &shared.row_owner),
        )
        .await;
        match acquired {
            Ok(Some(record)) => {
                self.errors.recovered();
                // Whatever row of ours there was, it is gone: this acquire found the row free.
                self.own.won();
                match shared.begin_term(record.clone(), sent_at) {
                    Some(term) => self.lead(term).await,
                    None => {
                        // close() or resign() came while the acquire was in flight.
                        self.release_record(record, "acquired while stepping down")
                            .await;
                    }
                }
            }
            Ok(None) => {
                shared.acquire_answered();
                self.errors.recovered();
                let released_own_row = self.observe_holder().await;
                let retry_now = released_own_row && !self.retried_own_row;
                self.retried_own_row = retry_now;
                if retry_now {
                    return Instant::now();
                }
                return Instant::now() + shared.follower_wait();
            }
            Err(error) => {
                shared.acquire_answered();
                // It may have taken the row before failing or timing out.
                self.own.reply_lost(sent_at);
                self.errors.failed(&shared.config, "acquire", &error);
            }
        }
        self.retried_own_row = false;
        Instant::now() + shared.follower_wait()
    }

    /// Leads for one term. It renews through the lease until it is lost or ended. Then it winds
    /// down, letting leader-only work stop, and releases the row once the work has stopped.
    async fn lead(&mut self, term: LeaderTerm) {
        let shared = self.shared.clone();
        let cfg = &shared.config;
        let lease = term.lease().clone();
        let renewal = AbortOnDrop(lease.spawn_renewal(RenewPolicy {
            lease: cfg.lease(),
            renew_every: cfg.renew_interval(),
            retry_every: cfg.acquire_interval(),
            valid_for: cfg.renew_deadline(),
        }));
        let mut renewals = lease.subscribe();
        renewals.borrow_and_update();
        loop {
            tokio::select! {
                biased;
                () = lease.lost() => break,
                changed = renewals.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    renewals.borrow_and_update();
                    if term.is_active() {
                        tracing::debug!(term = term.number(), "renewed");
                        shared.emit(LeaderEvent::Renewed { term: term.clone() });
                    }
                }
            }
        }
        drop(renewal);
        shared.end_term(&term, None);
        shared.announce_step_down(&term);

        // Leader-only work is being stopped by `work_loop`: at once after a lost lease, after
        // up to `shutdown_grace` (never past the term's deadline) after a resign or close. The
        // row goes back only once the work has actually stopped, so the next leader never runs
        // alongside it. Until when that is worth waiting for: the row's own expiry (the last
        // successful acquire or renew was sent at `deadline - renew_deadline`, and holds the row
        // for `lease` from then); later, it has freed itself anyway.
        if term.end_reason() != Some(StepDownReason::Refused) {
            let row_expires = term.deadline() + cfg.lease().saturating_sub(cfg.renew_deadline());
            if shared.wait_work_idle(row_expires).await {
                self.release(term.lease(), "after stepping down").await;
            } else {
                tracing::warn!(
                    term = term.number(),
                    "leader-only work has still not stopped, long after its term ended; the row \
                     is not released, so it expires by itself at the end of the lease"
                );
            }
        }
        shared.settled.send_if_modified(|n| {
            let newer = *n < term.number();
            if newer {
                *n = term.number();
            }
            newer
        });
    }

    /// Releases the row of `lease`, which is ours, so another candidate can take over at its next
    /// attempt. [`Lease::release`] logs the outcome. Returns whether the store released it. A
    /// failure is kept for `close()` to return. The acquisition is then remembered as possibly
    /// still holding the row.
    async fn release(&mut self, lease: &Lease, context: &'static str) -> bool {
        let record = lease.record();
        match lease.release(Duration::ZERO).await {
            Ok(released) => {
                tracing::debug!(token = ?record.fencing_token(), context, released, "release");
                self.own.settled(&record);
                released
            }
            Err(error) => {
                self.own.unreleased(record);
                let shared = &self.shared;
                if shared.is_closing() {
                    *shared
                        .close_error
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(error);
                }
                false
            }
        }
    }

    /// [`release`](Self::release) for a row of ours known only by its record. No term holds a lease
    /// for it.
    async fn release_record(&mut self, record: LockRecord, context: &'static str) -> bool {
        let shared = &self.shared;
        let lease = Lease::new(
            shared.provider.clone(),
            shared.config.call_timeout(),
            record,
            Instant::now(),
            Duration::ZERO,
        );
        self.release(&lease, context).await
    }

    /// After a refused acquire, learns who leads, if the store can say. The row may be provably
    /// this latch's own (the rule is in [`super::ownership`]). It then releases it and returns
    /// `true`, so the election proceeds at once with a new term and token. A row that merely
    /// carries its owner id is followed like anyone else's.
    async fn observe_holder(&mut self) -> bool {
        let shared = self.shared.clone();
        if !self.holder_supported {
            shared.follow(None);
            return false;
        }
        let holder = timed(
            "holder",
            shared.config.call_timeout(),
            shared.provider.holder(shared.name()),
        )
        .await;
        match holder {
            Ok(Some(record)) => {
                let claim = self.own.claim(
                    &record,
                    &shared.row_owner,
                    shared.config.call_timeout() + shared.config.lease(),
                    || shared.registration.is_shared(),
                );
                self.own.saw(Some(&record));
                let Some(claim) = claim else {
                    if record.owner() == &*shared.row_owner {
                        tracing::debug!(
                            token = ?record.fencing_token(),
                            "the row carries this instance's owner id but is not provably its \
                             own (another latch with the same owner id, or an earlier process); \
                             it is left to its holder or to expire"
                        );
                    }
                    shared.follow(Some(KnownLeader::from_record(&record)));
                    return false;
                };
                tracing::info!(
                    token = ?record.fencing_token(),
                    from = match claim {
                        Claim::Known => "an earlier acquisition whose release failed",
                        Claim::LostReply => "an acquire whose reply was lost",
                    },
                    "found this instance's own row; releasing it"
                );
                if self.release_record(record.clone(), "own earlier row").await {
                    self.own.released(claim, &record);
                    return true;
                }
                shared.follow(None);
            }
            Ok(None) => {
                self.own.saw(None);
                shared.follow(None);
            }
            Err(error) if error.is_unsupported() => {
                tracing::debug!(
                    "the store cannot tell who leads; followers will not know the leader"
                );
                self.holder_supported = false;
                shared.follow(None);
            }
            Err(error) => {
                tracing::debug!(
                    error = &error as &dyn std::error::Error,
                    "could not read who leads"
                );
                let known = shared.core().known_leader.clone();
                shared.follow(known);
            }
        }
        false
    }
}

/// Logs store failures once per outage and cause at ERROR, with what to fix. Then it logs them at
/// DEBUG until the store answers again. That is logged at INFO with the count and the length.
#[derive(Default)]
struct ErrorStreak(Outage);

impl ErrorStreak {
    fn failed(&mut self, cfg: &LeaderLatchConfig, operation: &'static str, error: &Error) {
        let Some(cause) = self.0.failed(error) else {
            tracing::debug!(
                error = error as &dyn std::error::Error,
                failures = self.0.failures(),
                operation,
                "lock store still failing"
            );
            return;
        };
        let retry = shedlock_duration::format(cfg.acquire_interval());
        let fix = match cause {
            Cause::MissingTable => "create the lock table (the `error` field says how)".to_owned(),
            Cause::Schema => {
                "fix the lock table's columns (the `error` field says what is wrong)".to_owned()
            }
            Cause::Timeout => format!(
                "check that the database is reachable and not overloaded (no answer within call_timeout = {})",
                shedlock_duration::format(cfg.call_timeout())
            ),
            Cause::InvalidConfig => {
                "check that the election name fits the store's name column".to_owned()
            }
            Cause::Backend => {
                "check that the database is up and reachable and that its credentials are right"
                    .to_owned()
            }
        };
        tracing::error!(
            error = error as &dyn std::error::Error,
            operation,
            "the leader election cannot reach its lock store: {fix}. This instance stays a \
             follower and retries every {retry}; further failures are logged at DEBUG until it \
             recovers"
        );
    }

    fn recovered(&mut self) {
        if let Some((failures, lasted)) = self.0.recovered() {
            tracing::info!(
                failures,
                outage_ms = millis(lasted),
                "the lock store answers again"
            );
        }
    }
}

/// The leader-only work helper. It runs `work` once per term until the latch stops. It cancels the
/// work when the term ends, after a grace for resign or close.
pub(super) async fn work_loop<F, Fut>(shared: Arc<Shared>, mut work: F)
where
    F: FnMut(LeaderTerm) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut states = shared.state.subscribe();
    while let Some(term) = wait_for_leadership(&mut states).await {
        let guard = shared.work_started();
        if !term.is_active() {
            continue;
        }
        tracing::debug!(term = term.number(), "starting leader-only work");
        let outcome = {
            let mut run = pin!(catch_unwind_future(work(term.clone())));
            let finished = tokio::select! {
                biased;
                outcome = &mut run => Some(outcome),
                () = term.ended() => None,
            };
            if finished.is_some() {
                finished
            } else {
                // Ended on purpose: the work may finish within the grace; otherwise, or when the
                // lease was lost, it is dropped (cancelled) right here.
                let voluntary = term.end_reason().is_some_and(StepDownReason::is_voluntary);
                match term.wind_down_until() {
                    Some(until) if voluntary => {
                        let finished = timeout_at(until, &mut run).await.ok();
                        if finished.is_none() {
                            tracing::warn!(
                                term = term.number(),
                                "leader-only work did not stop within shutdown_grace (or before \
                                 the term's deadline); it is cancelled now"
                            );
                        }
                        finished
                    }
                    _ => None,
                }
            }
        };
        match outcome {
            Some(Ok(())) => tracing::debug!(term = term.number(), "leader-only work finished"),
            Some(Err(_)) => tracing::error!(
                term = term.number(),
                "leader-only work panicked; it runs again in the next term"
            ),
            None => tracing::debug!(
                term = term.number(),
                "leader-only work cancelled: the term ended"
            ),
        }
        drop(guard);
        term.ended().await;
    }
}

/// Waits on a state receiver until a live term is published. `None` once the latch stopped.
pub(super) async fn wait_for_leadership(
    states: &mut watch::Receiver<LeaderState>,
) -> Option<LeaderTerm> {
    loop {
        let state = states.borrow_and_update().clone();
        match state {
            LeaderState::Leader { term } if term.is_active() => return Some(term),
            LeaderState::Stopped => return None,
            _ => {}
        }
        states.changed().await.ok()?;
    }
}
