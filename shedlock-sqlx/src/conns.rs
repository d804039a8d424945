//! Where a provider's connections come from: connections it opens and keeps itself (built from
//! a URL), or the application's sqlx pool (`new(pool)`, `builder(pool)`).
//!
//! sqlx's pool checks every connection given back to it with a ping, a round trip of its own.
//! With a spare idle connection the next call does not wait for it, but with a pool of one, or
//! with every connection busy, the next call waits for that ping: two round trips per lock call
//! instead of one. The provider's own connections skip it: a connection goes back to the idle
//! list the moment its statement has finished (its reply read in full), and one whose statement
//! did not finish is closed instead, so a connection never carries a half-read reply into the
//! next call. A dead idle connection (the server restarted) is found by the next statement and
//! retried past by [`Store::run`](crate::store::Store::run), as with sqlx's pool.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{ConnectOptions, Connection, Database, Pool};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::store::{Call, Phase};

/// sqlx's connect options of `D`.
pub(crate) type Options<D> = <<D as Database>::Connection as Connection>::Options;

/// The session settings a dialect runs on each connection it opens.
pub(crate) type Setup<D> =
    for<'c> fn(
        &'c mut <D as Database>::Connection,
    ) -> Pin<Box<dyn Future<Output = sqlx::Result<()>> + Send + 'c>>;

/// An idle connection of the provider's own is closed rather than used once it has been idle
/// this long (sqlx's pool does the same, with the same default): a firewall or NAT that forgets
/// quiet connections would otherwise black-hole the next statement until `call_timeout`.
pub(crate) const IDLE_LIMIT: Duration = Duration::from_mins(10);

/// The first pause before opening a connection again after the server refused one; it doubles
/// up to [`RECONNECT_PAUSE_MAX`].
const RECONNECT_PAUSE: Duration = Duration::from_millis(20);
const RECONNECT_PAUSE_MAX: Duration = Duration::from_millis(500);

/// A provider's connections.
pub(crate) enum Connections<D: Database> {
    /// Opened and kept by the provider: no round trip when one is given back.
    Own(Arc<Own<D>>),
    /// The application's sqlx pool, which pings each connection given back to it.
    Pool(Pool<D>),
}

/// How many connections a provider has open, and how many of them are idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionStats {
    /// Open connections, idle or running a statement.
    pub open: u32,
    /// Open connections waiting for a statement.
    pub idle: u32,
    /// The most the provider opens at once (for a pool given to it, that pool's limit).
    pub max: u32,
}

impl<D: Database> Connections<D> {
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

    /// A connection for one attempt of `call`, before its deadline. `Ok(Err(_))` is the
    /// database's refusal (a wrong password, an unknown database) or a connection that broke
    /// while opening; `Err(_)` the call's deadline.
    pub(crate) async fn checkout(
        &self,
        call: &Call,
    ) -> shedlock_core::Result<sqlx::Result<Held<D>>> {
        call.set_phase(Phase::Waiting);
        match self {
            Self::Pool(pool) => Ok(call.timed(pool.acquire()).await?.map(Held::Pooled)),
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
    /// Connections open, idle or in use.
    open: AtomicU32,
}

struct Idle<D: Database> {
    conn: D::Connection,
    since: Instant,
}

impl<D: Database> Own<D> {
    pub(crate) fn new(options: Options<D>, setup: Setup<D>, max: u32) -> Arc<Self> {
        Arc::new(Self {
            options,
            setup,
            max,
            permits: Arc::new(Semaphore::new(max as usize)),
            idle: Mutex::new(Vec::new()),
            open: AtomicU32::new(0),
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
            if idle.since.elapsed() < IDLE_LIMIT {
                return Ok(Ok(Held::Own {
                    conn: idle.conn,
                    own: Arc::clone(this),
                    permit,
                }));
            }
            tracing::debug!("closing a lock-store connection idle for over 10 minutes");
            this.forget(idle.conn);
        }
        call.set_phase(Phase::Connecting);
        Ok(this.open(call).await?.map(|conn| Held::Own {
            conn,
            own: Arc::clone(this),
            permit,
        }))
    }

    /// Opens a connection and runs the dialect's session settings on it. A server that refuses
    /// connections (down, restarting, starting up) is asked again, with a growing pause, until
    /// the call's deadline; the call's last error is kept for its timeout message.
    async fn open(&self, call: &Call) -> shedlock_core::Result<sqlx::Result<D::Connection>> {
        let mut pause = RECONNECT_PAUSE;
        loop {
            let error = match call.timed(self.options.connect()).await? {
                Ok(mut conn) => match call.timed((self.setup)(&mut conn)).await? {
                    Ok(()) => {
                        self.open.fetch_add(1, Ordering::Relaxed);
                        return Ok(Ok(conn));
                    }
                    Err(error) => error,
                },
                Err(error) => error,
            };
            if !refused(&error) {
                return Ok(Err(error));
            }
            tracing::debug!(%error, "the database refused a lock-store connection; trying again");
            call.note_error(&error);
            call.timed(tokio::time::sleep(pause)).await?;
            pause = (pause * 2).min(RECONNECT_PAUSE_MAX);
        }
    }

    /// Drops a connection that is not coming back (its socket closes at once).
    fn forget(&self, conn: D::Connection) {
        self.open.fetch_sub(1, Ordering::Relaxed);
        drop(conn);
    }
}

/// Whether opening a connection failed in a way that goes away by itself: the server is not
/// listening (down, restarting), reset the connection, or says it is starting or shutting down.
fn refused(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused)
        || crate::store::checkout_lost(error)
}

/// A connection out for one attempt; [`Checkout`](crate::store::Checkout) gives it back or
/// closes it when the attempt ends.
pub(crate) enum Held<D: Database> {
    Own {
        conn: D::Connection,
        own: Arc<Own<D>>,
        /// Released after the connection is back in the idle list (or closed).
        permit: OwnedSemaphorePermit,
    },
    Pooled(PoolConnection<D>),
}

impl<D: Database> Held<D> {
    pub(crate) fn conn(&mut self) -> &mut D::Connection {
        match self {
            Self::Own { conn, .. } => conn,
            Self::Pooled(conn) => conn,
        }
    }

    /// Gives back a connection whose last statement finished: it is ready for the next call
    /// (sqlx's pool still pings it first; the provider's own list does not).
    pub(crate) fn give_back(self) {
        match self {
            Self::Own { conn, own, permit } => {
                own.idle_list().push(Idle {
                    conn,
                    since: Instant::now(),
                });
                drop(permit);
            }
            // Dropped, it goes back to its pool.
            Self::Pooled(conn) => drop(conn),
        }
    }

    /// Closes a connection whose statement did not finish or which the server had closed.
    pub(crate) fn close(self) {
        match self {
            Self::Own { conn, own, permit } => {
                own.forget(conn);
                drop(permit);
            }
            // Detaching lets the pool open a replacement; dropping the raw connection closes
            // its socket without waiting for the server.
            Self::Pooled(conn) => drop(conn.detach()),
        }
    }
}
