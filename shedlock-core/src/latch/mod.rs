//! Leader election over a [`LockProvider`]: [`LeaderLatch`], its config, states and events.

mod config;
mod ownership;
mod state;
mod task;
#[cfg(test)]
mod tests;

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

pub use config::{LeaderLatchConfig, LeaderLatchConfigBuilder};
pub use state::{KnownLeader, LeaderEvent, LeaderEvents, LeaderState, LeaderTerm, StepDownReason};

use crate::admin::ELECTION_MARK;
use crate::config::validate_name;
use crate::error::{Error, Result};
use crate::owner::{MAX_OWNER_ID_LEN, default_owner_id};
use crate::provider::LockProvider;
use task::Shared;

/// One candidate in a leader election. At most one candidate per election name leads at a time. A
/// lock row in the store the replicas already share decides which one.
///
/// Each replica starts a latch for the same election name. While it is a *follower*, a background
/// task tries to take the row every `acquire_interval`. The one that gets it *leads* and renews the
/// row every `renew_interval`. [`is_leader`](Self::is_leader) answers from memory. Changes are
/// published on a [`watch`](Self::watch) and, opt-in, as a stream of [`events`](Self::events), one
/// per cycle. The "leader selection with a heartbeat" pattern is this latch, with heartbeat = renew
/// and threshold = lease.
///
/// ```
/// use shedlock_core::{InMemoryLockProvider, LeaderLatch, LeaderLatchConfig};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// let store = InMemoryLockProvider::new(); // in production: a shedlock-sqlx provider
/// let latch = LeaderLatch::start(store, LeaderLatchConfig::new("scheduler")?)?;
///
/// // Leader-only work, once per term, cancelled when the term ends:
/// latch.spawn_leader_work(|term| async move {
///     println!("leading (token {:?})", term.fencing_token());
///     term.ended().await; // a real job would loop over its work here
/// });
///
/// // Or ask, before each run of a job:
/// let term = latch.wait_for_leadership().await.expect("latch running");
/// assert!(latch.is_leader() && term.is_active());
///
/// latch.close().await?; // steps down, lets the work finish, releases the row
/// # Ok(()) }
/// ```
///
/// # Lease, renew interval, renew deadline
///
/// The leader holds the row for a `lease` on the store's clock and renews it every
/// `renew_interval`. It also keeps a **local deadline** on its own monotonic clock: the send time
/// of its last successful acquire or renew plus `renew_deadline`. At that instant it stops being
/// leader, whatever its background task is doing, because [`is_leader`](Self::is_leader) compares
/// the deadline with the clock on every call, and [`LeaderTerm::ended`] fires. As `renew_deadline <
/// lease` and both count from the same send, the leader has always stepped down before the row can
/// expire and be taken, 5 s before by default. This holds even if its process was paused, its task
/// starved, or a store call hung.
///
/// A failed renew is retried every `acquire_interval`, not at the next `renew_interval`. A renew
/// the store *refuses*, because the row is someone else's, ends the term at once. After any
/// step-down, the latch releases its row, if still there, once its leader-only work has stopped.
/// Every term has a new [fencing token](LeaderTerm::fencing_token).
///
/// # Failover times (defaults)
///
/// | what happens | the next leader takes over |
/// |---|---|
/// | leader calls [`close`](Self::close) or [`resign`](Self::resign) | within `acquire_interval + acquire_jitter` (≤ 2.5 s) after its leader-only work stopped |
/// | leader process dies (`kill -9`, host lost) | when its row expires, `lease` after its last renew, plus one follower attempt: 10–17.5 s after the crash |
/// | leader loses the store | it steps down ≤ `renew_deadline` (10 s) after its last successful renew; another leads 15–17.5 s after that renew |
/// | the store is down briefly | nothing changes if a renew succeeds within `renew_deadline` of the last one: with the defaults, any outage up to 4 s, often up to 9 s |
/// | the store is down longer | the leader steps down at its deadline; every instance stays a follower, logs one ERROR, and keeps trying; a leader is elected at the first attempt after the store is back |
///
/// Make the timings shorter for faster failover. The cost is more store traffic and less tolerance
/// for store hiccups. Each follower sends about one acquire per `acquire_interval`. The leader
/// sends one renew per `renew_interval`.
///
/// # Store errors
///
/// A store that fails, by being down, missing its table or timing out, never makes an instance
/// leader. Each failure streak is logged once at ERROR with what to fix, then at DEBUG until it
/// recovers. The recovery is logged at INFO with `failures` and `outage_ms`. The latch keeps
/// retrying, also on a store set up wrong, because [`start`](Self::start) does not ask the store.
/// To fail at start on a missing table or wrong columns, call
/// [`LockingTaskExecutor::check`](crate::LockingTaskExecutor::check) first. A `Scheduler` on the
/// same store does it in its `start`.
///
/// Followers also read who leads with [`LockProvider::holder`] when the store supports it, one more
/// read per attempt. This read also finds this latch's own row left over from an earlier term whose
/// release failed, or from an acquire whose reply was lost. The latch then releases it, see below.
///
/// # Owner ids
///
/// The owner id is written to the row's `locked_by` with [`ELECTION_MARK`] appended, so an owner id
/// for a latch is at most 246 characters. [`KnownLeader::owner_id`] is the id without the mark.
///
/// By default every latch and executor of a process shares one owner id, the [`default_owner_id`],
/// and an explicit id may be shared too. So a latch releases a leftover row only when it can prove
/// it is its own. That is an acquisition of one of its terms, told by its fencing token or
/// `locked_at`, or of one of its acquires whose reply was lost, when no other latch of the process
/// runs the same election with the same id. Any other row with its owner id, such as another
/// latch's of this process or one left by a crashed earlier run with the same explicit id, is
/// followed like anyone else's and frees itself at the end of its lease. Keep owner ids unique per
/// process, as the default is. Do not use an election's name as a task lock's name.
///
/// Clones are cheap and share the latch. When the last clone is dropped, the latch closes in the
/// background. Call [`close`](Self::close) to wait for that.
#[derive(Clone)]
pub struct LeaderLatch {
    handle: Arc<Handle>,
}

/// Closes the latch when the last user handle goes. The task and helpers hold only [`Shared`].
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.request_close();
    }
}

impl fmt::Debug for LeaderLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = &self.handle.shared;
        f.debug_struct("LeaderLatch")
            .field("name", &shared.config.name())
            .field("owner_id", &shared.owner_id)
            .field("is_leader", &self.is_leader())
            .finish_non_exhaustive()
    }
}

impl LeaderLatch {
    /// Starts a candidate for `config`'s election on `provider`, which may be an `Arc` of a store.
    /// Its first attempt to lead happens at once, in the background.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] when the election name is too long for this store. Also when
    /// `SHEDLOCK_OWNER_ID` is set to an invalid id, or when called outside a tokio runtime.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shedlock_core::{
    ///     InMemoryLockProvider, LeaderLatch, LeaderLatchConfig, provider::LockProvider,
    /// };
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
    /// let store: Arc<dyn LockProvider> = Arc::new(InMemoryLockProvider::new());
    /// let cfg = LeaderLatchConfig::builder("scheduler").owner_id("replica-a").build()?;
    /// let latch = LeaderLatch::start(store.clone(), cfg)?;
    /// assert_eq!(latch.owner_id(), "replica-a");
    /// # latch.close().await?;
    /// # Ok(()) }
    /// ```
    pub fn start(provider: impl LockProvider, config: LeaderLatchConfig) -> Result<Self> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            Error::invalid_config("LeaderLatch::start must be called inside a tokio runtime")
        })?;
        validate_name(config.name(), provider.max_name_len())?;
        let owner_id = match config.owner_id() {
            Some(id) => id.to_owned(),
            None => default_owner_id()?,
        };
        // The row carries the id plus the election mark, within `locked_by`'s 255 characters.
        let room = MAX_OWNER_ID_LEN - ELECTION_MARK.len();
        if owner_id.chars().count() > room {
            return Err(Error::invalid_config(format!(
                "a leader latch's owner id is at most {room} characters long (its rows carry \
                 it with {ELECTION_MARK:?}); set a shorter owner_id"
            )));
        }
        let shared = Arc::new(Shared::new(config, owner_id, Arc::new(provider), runtime));
        let span = tracing::info_span!(
            "leader_latch",
            election = shared.config.name(),
            owner = &*shared.owner_id
        );
        tracing::info!(parent: &span, "leader latch started");
        shared
            .runtime
            .spawn(task::run(shared.clone()).instrument(span));
        Ok(Self {
            handle: Arc::new(Handle { shared }),
        })
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.handle.shared
    }

    /// Whether `other` is this latch or a clone of it.
    pub(crate) fn same_as(&self, other: &Self) -> bool {
        Arc::ptr_eq(self.shared(), other.shared())
    }

    /// The first step of [`close`](Self::close), without waiting: steps down at once.
    pub(crate) fn begin_close(&self) {
        self.shared().request_close();
    }

    /// The election's name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.shared().config.name()
    }

    /// This instance's owner id, without the [`ELECTION_MARK`] its rows carry, see [`LeaderLatch`],
    /// "Owner ids". [`election_owner_id`](crate::admin::election_owner_id) strips the mark.
    ///
    /// ```
    /// use shedlock_core::{
    ///     InMemoryLockProvider, LeaderLatch, LeaderLatchConfig,
    ///     admin::{ELECTION_MARK, election_owner_id},
    ///     provider::LockProvider,
    /// };
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> shedlock_core::Result<()> {
    /// let cfg = LeaderLatchConfig::builder("scheduler").owner_id("replica-a").build()?;
    /// let store = std::sync::Arc::new(InMemoryLockProvider::new());
    /// let latch = LeaderLatch::start(store.clone(), cfg)?;
    /// latch.wait_for_leadership().await.expect("the only candidate leads");
    /// assert_eq!(latch.owner_id(), "replica-a");
    /// let row = LockProvider::holder(&store, "scheduler").await?.expect("it leads");
    /// assert_eq!(row.owner(), format!("replica-a{ELECTION_MARK}"));
    /// assert_eq!(election_owner_id(row.owner()), latch.owner_id());
    /// latch.close().await?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn owner_id(&self) -> &str {
        &self.shared().owner_id
    }

    /// The configuration it runs with.
    #[must_use]
    pub fn config(&self) -> &LeaderLatchConfig {
        &self.shared().config
    }

    /// Whether this instance leads now, from an atomic read of the current term's local deadline
    /// and a clock read, with no I/O and no lock. It turns false exactly at the local deadline, see
    /// [`LeaderLatch`], "Lease, renew interval, renew deadline", even if the background task has
    /// not run since. It turns false at once on [`resign`](Self::resign) or [`close`](Self::close).
    /// Check it right before acting as leader, or hold a [`LeaderTerm`] and race the work against
    /// [`LeaderTerm::ended`]. Pass the term's fencing token downstream for the writes that must
    /// never come from a stale leader.
    #[must_use]
    pub fn is_leader(&self) -> bool {
        self.shared().leader_until.is_live()
    }

    /// The current term, if this instance leads now.
    #[must_use]
    pub fn current_term(&self) -> Option<LeaderTerm> {
        self.shared().current_term()
    }

    /// The last published state (see [`LeaderState`]). It can lag behind. To decide whether to act
    /// as leader, ask [`is_leader`](Self::is_leader).
    #[must_use]
    pub fn state(&self) -> LeaderState {
        self.shared().state.borrow().clone()
    }

    /// A receiver of the state. It sees each transition: elected, stepped down, a different leader
    /// seen, stopped. It never sees a routine renew. The latch's background task publishes them in
    /// order. A step-down by [`resign`](Self::resign) or [`close`](Self::close) is published when
    /// that task next runs, while [`is_leader`](Self::is_leader) and [`LeaderTerm::ended`] see it
    /// at once.
    ///
    /// Do not keep a [`borrow`](watch::Receiver::borrow) across an `.await`. It holds the channel's
    /// lock and stalls the task's next publish. Calling the latch while holding one is fine. A
    /// consumer that is just slow to read never delays publishing.
    #[must_use]
    pub fn watch(&self) -> watch::Receiver<LeaderState> {
        self.shared().state.subscribe()
    }

    /// Waits until this instance leads and returns the term. Returns at once if it leads now.
    /// Returns `None` once the latch has stopped.
    pub async fn wait_for_leadership(&self) -> Option<LeaderTerm> {
        let mut states = self.watch();
        task::wait_for_leadership(&mut states).await
    }

    /// Subscribes to the event stream: every transition plus one event per completed cycle. The
    /// leader sends [`LeaderEvent::Renewed`] for each successful renew. A follower sends
    /// [`LeaderEvent::Following`] for each attempt. Events sent before the call are not seen. A
    /// slow consumer misses events. It never slows the latch.
    ///
    /// ```
    /// use shedlock_core::{
    ///     InMemoryLockProvider, LeaderLatch, LeaderLatchConfig, latch::LeaderEvent,
    /// };
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> shedlock_core::Result<()> {
    /// let latch = LeaderLatch::start(InMemoryLockProvider::new(), LeaderLatchConfig::new("jobs")?)?;
    /// let mut events = latch.events();
    /// assert!(matches!(events.recv().await, Some(LeaderEvent::Elected { .. })));
    /// // Five seconds later: the first renew, the leader's heartbeat.
    /// assert!(matches!(events.recv().await, Some(LeaderEvent::Renewed { .. })));
    /// # latch.close().await?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn events(&self) -> LeaderEvents {
        LeaderEvents::new(self.shared().events.subscribe())
    }

    /// Runs `work` once per term this instance leads, in a background task, until the latch stops.
    ///
    /// The work is cancelled, its future dropped, as soon as the term ends by losing the lease.
    /// When the term ends by [`resign`](Self::resign) or [`close`](Self::close), the work gets up
    /// to [`shutdown_grace`](LeaderLatchConfig::shutdown_grace), never past the term's own
    /// deadline, to finish on its own. Watch [`LeaderTerm::ended`] in the work to stop cleanly.
    /// Work that returns early is not restarted in the same term. Work that panics is logged and
    /// runs again in the next term. The returned handle resolves once the latch has stopped and the
    /// work has ended. Dropping it stops nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::{InMemoryLockProvider, LeaderLatch, LeaderLatchConfig};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> shedlock_core::Result<()> {
    /// let latch = LeaderLatch::start(InMemoryLockProvider::new(), LeaderLatchConfig::new("jobs")?)?;
    /// let work = latch.spawn_leader_work(|term| async move {
    ///     let mut tick = tokio::time::interval(Duration::from_secs(1));
    ///     loop {
    ///         tokio::select! {
    ///             () = term.ended() => break, // finish cleanly on resign or close
    ///             _ = tick.tick() => { /* one unit of leader-only work */ }
    ///         }
    ///     }
    /// });
    /// tokio::time::sleep(Duration::from_secs(30)).await;
    /// latch.close().await?;
    /// work.await.expect("no panic");
    /// # Ok(()) }
    /// ```
    pub fn spawn_leader_work<F, Fut>(&self, work: F) -> JoinHandle<()>
    where
        F: FnMut(LeaderTerm) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let shared = self.shared().clone();
        let span = tracing::info_span!(
            "leader_work",
            election = shared.config.name(),
            owner = &*shared.owner_id
        );
        let runtime = shared.runtime.clone();
        runtime.spawn(task::work_loop(shared, work).instrument(span))
    }

    /// Gives up leadership now, if this instance leads. Returns whether it was leading. It steps
    /// down at once, without I/O, then waits until leader-only work has stopped and the row is
    /// released. The work gets [`shutdown_grace`](LeaderLatchConfig::shutdown_grace), then is
    /// cancelled. The instance stays a candidate but sits out `2 × acquire_interval +
    /// acquire_jitter` first, so another candidate takes over if there is one.
    ///
    /// On a follower it changes nothing and returns `false` at once, unless an acquire of its own
    /// is in flight. Should that acquire win, the row is given back and the instance sits out.
    ///
    /// ```
    /// use shedlock_core::{InMemoryLockProvider, LeaderLatch, LeaderLatchConfig};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> shedlock_core::Result<()> {
    /// let latch = LeaderLatch::start(InMemoryLockProvider::new(), LeaderLatchConfig::new("jobs")?)?;
    /// let first = latch.wait_for_leadership().await.expect("running");
    /// assert!(latch.resign().await);
    /// assert!(!latch.is_leader());
    /// // The only candidate: it leads again after sitting out, with a new fencing token.
    /// let second = latch.wait_for_leadership().await.expect("running");
    /// assert!(second.fencing_token() > first.fencing_token());
    /// # latch.close().await?;
    /// # Ok(()) }
    /// ```
    pub async fn resign(&self) -> bool {
        let Some(term) = self.shared().request_resign() else {
            return false;
        };
        let mut settled = self.shared().settled.subscribe();
        let _ = settled.wait_for(|n| *n >= term.number()).await;
        true
    }

    /// Stops the latch. If leading, it steps down at once, without I/O, and waits until leader-only
    /// work has stopped. The work gets [`shutdown_grace`](LeaderLatchConfig::shutdown_grace), then
    /// is cancelled. It then releases the row, so another replica takes over within one
    /// `acquire_interval`, and publishes [`LeaderState::Stopped`]. An acquire already in flight may
    /// finish within `call_timeout`, and its row is released. Calling it again, or on a clone,
    /// waits for the same stop.
    ///
    /// If the work's cancellation does not complete before the row would expire by itself, for
    /// example because a drop blocks or the runtime is starved, `close` stops waiting, logs a
    /// warning and leaves the row to expire.
    ///
    /// # Errors
    ///
    /// The release of the row failed. The row then expires by itself within `lease`. The latch is
    /// stopped either way.
    pub async fn close(&self) -> Result<()> {
        self.shared().request_close();
        let mut states = self.watch();
        let _ = states.wait_for(|s| *s == LeaderState::Stopped).await;
        self.shared().take_close_error().map_or(Ok(()), Err)
    }
}
