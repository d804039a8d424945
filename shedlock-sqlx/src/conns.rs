//! Where a provider's connections come from: opened and kept by a provider built from a URL, or
//! the application's sqlx pool (`new(pool)`, `builder(pool)`).
//!
//! sqlx's pool pings every connection given back to it, a round trip of its own. With a pool of
//! one, or every connection busy, the next call waits for that ping, two round trips per lock call
//! instead of one. The provider's own connections skip the ping and go back to the idle list the
//! moment a statement has finished and its reply was read. One whose statement did not finish is
//! closed, so none carries a half-read reply into the next call. An idle connection the server
//! closed on a restart is found by the next statement, and [`Link::run`](crate::link::Link::run)
//! retries past it, as with sqlx's pool.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{ConnectOptions, Connection, Database, Pool};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::link::{Call, CallStep};

/// sqlx's connect options of `D`.
pub(crate) type Options<D> = <<D as Database>::Connection as Connection>::Options;

/// The session settings a dialect runs on each connection it opens.
pub(crate) type Setup<D> =
    for<'c> fn(
        &'c mut <D as Database>::Connection,
    ) -> Pin<Box<dyn Future<Output = sqlx::Result<()>> + Send + 'c>>;

/// An idle connection of the provider's own is closed rather than used once it has been idle this
/// long, as sqlx's pool does by default. Otherwise a firewall or NAT that forgot it would
/// black-hole the next statement until `call_timeout`.
pub(crate) const IDLE_LIMIT: Duration = Duration::from_mins(10);

/// The first pause before opening a connection again after the server refused one. It doubles up to
/// [`RECONNECT_PAUSE_MAX`].
const RECONNECT_PAUSE: Duration = Duration::from_millis(20);
const RECONNECT_PAUSE_MAX: Duration = Duration::from_millis(500);

/// A provider's connections.
pub(crate) enum Connections<D: Database> {
    /// Opened and kept by the provider: no round trip when one is given back.
    Own(Arc<Own<D>>),
    /// The application's sqlx pool, which pings each connection given back to it.
    Pool(Pool<D>),
}

/// How many connections a provider has open, and how many of them are idle. An in-memory SQLite
/// database has one more, which keeps it alive and is not counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionStats {
    /// Open connections, idle or running a statement.
    pub open: u32,
    /// Open connections waiting for a statement.
    pub idle: u32,
    /// The most the provider opens at once. For a pool given to it, this is that pool's limit.
    pub max: u32,
}

impl ConnectionStats {
    /// Open connections running a statement now.
    #[must_use]
    pub fn in_use(&self) -> u32 {
        self.open.saturating_sub(self.idle)
    }
}

impl<D: Database> Connections<D> {
    /// The options the connections are made with, for a connection of its own (such as
    /// Postgres's `LISTEN`).
    #[cfg_attr(
        not(feature = "postgres"),
        allow(dead_code, reason = "used by Postgres")
    )]
    pub(crate) fn connect_options(&self) -> Options<D> {
        match self {
            Self::Own(own) => own.options.clone(),
            Self::Pool(pool) => (*pool.connect_options()).clone(),
        }
    }

    /// The most connections open at once.
    pub(crate) fn max(&self) -> u32 {
        match self {
            Self::Own(own) => own.max,
            Self::Pool(pool) => pool.options().get_max_connections(),
        }
    }

    pub(crate) fn stats(&self) -> ConnectionStats {
        match self {
            Self::Own(own) => ConnectionStats {
                open: own.open.load(Ordering::Relaxed),
                idle: u32::try_from(own.idle_list().len()).unwrap_or(u32::MAX),
                max: own.max,
            },
            Self::Pool(pool) => ConnectionStats {
                open: pool.size(),
                idle: u32::try_from(pool.num_idle()).unwrap_or(u32::MAX),
                max: pool.options().get_max_connections(),
            },
        }
    }

    /// A connection for one attempt of `call`, before its deadline. `Ok(Err(_))` is the database's
    /// refusal, as for a wrong password or an unknown database, or a connection that broke while
    /// opening. `Err(_)` is the call's deadline.
    pub(crate) async fn checkout(
        &self,
        call: &Call,
    ) -> shedlock_core::Result<sqlx::Result<Held<D>>> {
        call.set_phase(CallStep::Waiting);
        match self {
            Self::Pool(pool) => Ok(call
                .timed(pool.acquire())
                .await?
                .map(|conn| Held::Pooled(Some(conn)))),
            Self::Own(own) => Own::checkout(own, call).await,
        }
    }
}

/// The provider's own connections: at most `max` open, the idle ones kept newest last.
pub(crate) struct Own<D: Database> {
    options: Options<D>,
    setup: Setup<D>,
    max: u32,
    permits: Arc<Semaphore>,
    idle: Mutex<Vec<Idle<D>>>,
    /// Connections open, idle or in use, not counting the anchor.
    open: AtomicU32,
    /// Keeps an in-memory SQLite database, which ends with its last connection, alive. Opened with
    /// the first connection, never handed out, and closed with the provider.
    anchor: Option<Mutex<Option<D::Connection>>>,
    /// Why the last connection could not be opened, until one is, for the timeouts of calls that
    /// waited for a free connection meanwhile.
    pub(crate) refusal: Arc<Mutex<Option<String>>>,
    /// Whether a refused connection is asked for again until the call's deadline.
    retry_refused: bool,
}

struct Idle<D: Database> {
    conn: D::Connection,
    created: Instant,
    since: Instant,
}

/// A connection is closed, not reused, once this old, as sqlx's pool does, so sessions to a server
/// that was failed over behind a proxy, or that changed role, do not live forever.
pub(crate) const MAX_LIFETIME: Duration = Duration::from_mins(30);

impl<D: Database> Own<D> {
    pub(crate) fn new(
        options: Options<D>,
        setup: Setup<D>,
        max: u32,
        anchor: bool,
        retry_refused: bool,
    ) -> Arc<Self> {
        Arc::new(Self {
            options,
            setup,
            max,
            permits: Arc::new(Semaphore::new(max as usize)),
            idle: Mutex::new(Vec::new()),
            open: AtomicU32::new(0),
            anchor: anchor.then(|| Mutex::new(None)),
            refusal: Arc::default(),
            retry_refused,
        })
    }

    fn idle_list(&self) -> std::sync::MutexGuard<'_, Vec<Idle<D>>> {
        // A panic while the list is locked cannot leave it inconsistent (push and pop only).
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn checkout(
        this: &Arc<Self>,
        call: &Call,
    ) -> shedlock_core::Result<sqlx::Result<Held<D>>> {
        // The semaphore is never closed, so acquiring fails only at the deadline.
        let Ok(permit) = call
            .timed(Arc::clone(&this.permits).acquire_owned())
            .await?
        else {
            return Err(call.timeout_error());
        };
        // The most recently used idle connection: the others age out under light load.
        loop {
            let idle = this.idle_list().pop();
            let Some(idle) = idle else { break };
            if reusable(idle.created, idle.since, Instant::now()) {
                return Ok(Ok(Held::Own {
                    conn: Some(idle.conn),
                    created: idle.created,
                    own: Arc::clone(this),
                    _permit: permit,
                }));
            }
            tracing::debug!("closing a lock-store connection past its idle time or lifetime");
            this.retire(idle.conn);
        }
        call.set_phase(CallStep::Connecting);
        Ok(this.open(call).await?.map(|conn| Held::Own {
            conn: Some(conn),
            created: Instant::now(),
            own: Arc::clone(this),
            _permit: permit,
        }))
    }

    /// Opens a connection and runs the dialect's session settings on it. A server refusing
    /// connections, down, restarting or starting up, is asked again with a growing pause until the
    /// call's deadline, unless `retry_refused` is off. The last error is kept for the timeout
    /// messages.
    async fn open(&self, call: &Call) -> shedlock_core::Result<sqlx::Result<D::Connection>> {
        let mut pause = RECONNECT_PAUSE;
        loop {
            let error = match call.timed(self.options.connect()).await? {
                Ok(mut conn) => match call.timed((self.setup)(&mut conn)).await? {
                    Ok(()) => {
                        *self.refusal.lock().unwrap_or_else(PoisonError::into_inner) = None;
                        if let Some(anchor) = &self.anchor {
                            let mut anchor = anchor.lock().unwrap_or_else(PoisonError::into_inner);
                            if anchor.is_none() {
                                // The first connection keeps the database; open another.
                                *anchor = Some(conn);
                                continue;
                            }
                        }
                        self.open.fetch_add(1, Ordering::Relaxed);
                        return Ok(Ok(conn));
                    }
                    Err(error) => error,
                },
                Err(error) => error,
            };
            if !self.retry_refused || !refused(&error) {
                return Ok(Err(error));
            }
            call.note_error(&error);
            *self.refusal.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(crate::cause::text(&error));
            tracing::debug!(
                error = &*crate::cause::source(error) as &dyn std::error::Error,
                "the database refused a lock-store connection; trying again"
            );
            call.timed(tokio::time::sleep(pause)).await?;
            pause = (pause * 2).min(RECONNECT_PAUSE_MAX);
        }
    }

    /// Takes back a connection whose statement finished into the idle list, unless it has lived its
    /// lifetime. Connections idle for too long at the list's far end go.
    fn give_back(&self, conn: D::Connection, created: Instant) {
        let now = Instant::now();
        if !reusable(created, now, now) {
            self.retire(conn);
            return;
        }
        let stale = {
            let mut idle = self.idle_list();
            let stale = idle
                .iter()
                .take_while(|i| !reusable(i.created, i.since, now))
                .count();
            let stale: Vec<Idle<D>> = idle.drain(..stale).collect();
            idle.push(Idle {
                conn,
                created,
                since: Instant::now(),
            });
            stale
        };
        for idle in stale {
            self.retire(idle.conn);
        }
    }

    /// Closes a healthy connection that is no longer wanted, telling the server in the background,
    /// for at most a second, so that it does not count it as aborted.
    fn retire(&self, conn: D::Connection) {
        self.open.fetch_sub(1, Ordering::Relaxed);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(1), conn.close()).await;
            });
        }
    }

    /// Drops a connection that is not coming back, dead or in an unknown state after a statement
    /// that did not finish. Its socket closes at once.
    fn forget(&self, conn: D::Connection) {
        self.open.fetch_sub(1, Ordering::Relaxed);
        drop(conn);
    }
}

/// Whether a connection opened at `created` and idle since `since` may serve another call at `now`:
/// neither idle for [`IDLE_LIMIT`] nor older than [`MAX_LIFETIME`].
fn reusable(created: Instant, since: Instant, now: Instant) -> bool {
    now.duration_since(since) < IDLE_LIMIT && now.duration_since(created) < MAX_LIFETIME
}

/// Whether opening a connection failed in a way that goes away by itself: the server is not
/// listening because it is down or restarting, reset the connection, or says it is starting or
/// shutting down.
fn refused(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused)
        || crate::link::checkout_lost(error)
}

/// A connection out for one attempt, which [`Checkout`](crate::link::Checkout) gives back or
/// closes when the attempt ends. One of the provider's own dropped otherwise is closed, its state
/// unknown.
pub(crate) enum Held<D: Database> {
    Own {
        /// `Some` until given back or closed.
        conn: Option<D::Connection>,
        created: Instant,
        own: Arc<Own<D>>,
        /// Released after the connection is back in the idle list (or closed).
        _permit: OwnedSemaphorePermit,
    },
    Pooled(Option<PoolConnection<D>>),
}

impl<D: Database> Held<D> {
    pub(crate) fn conn(&mut self) -> &mut D::Connection {
        let conn = match self {
            Self::Own { conn, .. } => conn.as_mut(),
            Self::Pooled(conn) => conn.as_deref_mut(),
        };
        // `Some` until `give_back` or `close`, which consume the `Held`.
        conn.unwrap_or_else(|| unreachable!())
    }

    /// Gives back a connection whose last statement finished, ready for the next call.
    ///
    /// sqlx's pool still pings it first. The provider's own list does not.
    pub(crate) fn give_back(mut self) {
        match &mut self {
            Self::Own {
                conn, created, own, ..
            } => {
                if let Some(conn) = conn.take() {
                    own.give_back(conn, *created);
                }
            }
            // Dropped, it goes back to its pool.
            Self::Pooled(conn) => drop(conn.take()),
        }
        // The permit goes with `self`, after the connection is in the list.
    }

    /// Closes a connection whose statement did not finish or which the server had closed.
    pub(crate) fn close(mut self) {
        match &mut self {
            Self::Own { conn, own, .. } => {
                if let Some(conn) = conn.take() {
                    own.forget(conn);
                }
            }
            // Detaching lets the pool open a replacement; dropping the raw connection closes
            // its socket without waiting for the server.
            Self::Pooled(conn) => {
                if let Some(conn) = conn.take() {
                    drop(conn.detach());
                }
            }
        }
    }
}

impl<D: Database> Drop for Held<D> {
    fn drop(&mut self) {
        if let Self::Own { conn, own, .. } = self
            && let Some(conn) = conn.take()
        {
            own.forget(conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn connections_age_out_by_idle_time_and_by_lifetime() {
        let t0 = Instant::now();
        assert!(reusable(t0, t0, t0));
        let minute = Duration::from_mins(1);
        assert!(reusable(t0, t0 + minute * 5, t0 + minute * 14));
        assert!(!reusable(t0, t0, t0 + IDLE_LIMIT), "idle for the limit");
        assert!(
            !reusable(t0, t0 + MAX_LIFETIME - minute, t0 + MAX_LIFETIME),
            "busy all along, but old"
        );
    }
}
