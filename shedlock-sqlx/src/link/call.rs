//! One provider call: its deadline over every attempt, what its timeout says, and the retry loop
//! ([`Link::run`]) with its rules for a reply lost with a dead connection.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use shedlock_core::{Error, Result};
use sqlx::Database;
use tokio::time::{Instant, timeout_at};

use super::Link;
use super::checkout::{Checkout, checkout_lost};

/// What a call was doing when its deadline passed, for the timeout's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum CallStep {
    /// Waiting for a free connection.
    Waiting = 0,
    /// Opening a connection.
    Connecting = 1,
    /// Waiting for the database to answer a statement.
    Statement = 2,
}

/// Where a call's connections go, for its messages: the database (`Postgres at db:5432/app`) and
/// how many connections the provider may have open.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) name: Arc<str>,
    /// The provider's own connections' last refusal, for calls that waited for a free connection
    /// meanwhile. `None` over a sqlx pool, or once a connection opened.
    pub(crate) refusal: Option<Arc<Mutex<Option<String>>>>,
    pub(crate) max: u32,
}

/// What a call does when its connection dies after a statement was sent, which may have committed
/// before the reply was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AfterLostReply {
    /// Run the call again on another connection ([`Link::run`]), as extend, release, reads,
    /// create-table and the history's prune have the same effect and answer when repeated.
    Repeat,
    /// End the call with [`Call::lost_reply`]'s error. A repeat would answer from the lost
    /// statement's own effect: an acquire would find its own lock held, a fire claim its own fire
    /// recorded. It holds what the call does (`acquire lock "report"`), for that error.
    Fail(String),
}

/// One provider call: its name, the lock it is about, what it is doing, and whether it may run
/// again after a lost reply. Its deadline covers connection checkouts plus statements over every
/// attempt, and running out of time says where.
#[derive(Debug)]
pub(crate) struct Call {
    op: &'static str,
    timeout: Duration,
    deadline: Instant,
    /// The current attempt's connection turned out to be dead. [`Checkout::settle`] sets it, and
    /// [`Link::run`] reads it.
    pub(super) lost: AtomicBool,
    /// That lost connection had not been sent a `COMMIT` of this attempt's, so its transaction
    /// rolled back and the attempt may run again whatever [`AfterLostReply`] says.
    /// [`Checkout::begin`] sets it behind a transaction pooler.
    pub(super) rolled_back: AtomicBool,
    /// What [`repeats_after_lost_reply`](Self::repeats_after_lost_reply) answers from.
    after_lost_reply: AfterLostReply,
    pub(super) target: Target,
    /// What the call is about (`lock "report"`).
    about: Option<String>,
    phase: AtomicU8,
    /// The last error the call got past, such as a refused connection, for its timeout message.
    last_error: Mutex<Option<String>>,
}

impl Call {
    pub(crate) fn new(op: &'static str, timeout: Duration, target: Target) -> Self {
        Self {
            op,
            timeout,
            deadline: Instant::now() + timeout,
            lost: AtomicBool::new(false),
            rolled_back: AtomicBool::new(false),
            after_lost_reply: AfterLostReply::Repeat,
            target,
            about: None,
            phase: AtomicU8::new(CallStep::Waiting as u8),
            last_error: Mutex::new(None),
        }
    }

    /// The call is about `what` (`lock "report"`), which its timeout names.
    #[must_use]
    pub(crate) fn about(mut self, what: String) -> Self {
        self.about = Some(what);
        self
    }

    /// What the call does after a lost reply. By default it is [`AfterLostReply::Repeat`].
    #[must_use]
    pub(crate) fn after_lost_reply(mut self, after: AfterLostReply) -> Self {
        self.after_lost_reply = after;
        self
    }

    /// Whether an attempt whose connection died with its statement sent may run again.
    pub(super) fn repeats_after_lost_reply(&self) -> bool {
        self.after_lost_reply == AfterLostReply::Repeat
    }

    /// The error of a call whose connection died after its statement was sent, and that may not run
    /// again ([`AfterLostReply::Fail`]): one line naming the call, the lock and the database, and
    /// what it means, with the driver's error as its source.
    pub(super) fn lost_reply(&self, error: sqlx::Error) -> Error {
        let what = match &self.after_lost_reply {
            AfterLostReply::Fail(what) => what.as_str(),
            AfterLostReply::Repeat => self.op,
        };
        let meaning = match self.op {
            "history" => "the run's history entry may be written",
            "claim_trigger" => {
                "the lock may be held by this owner until at_most and the trigger taken by it"
            }
            "claim_fires" => "each of the locks may be held by this owner until its at_most",
            _ => "the lock may be held by this owner until at_most",
        };
        Error::backend(
            format!(
                "{what} on {}: the reply was lost (the connection died after the statement was \
                 sent) and the statement may have committed, so {meaning}; not repeated",
                self.target.name
            ),
            crate::cause::source(error),
        )
    }

    pub(crate) fn set_phase(&self, phase: CallStep) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }

    /// Keeps `error`, one the call got past, for the timeout's message.
    pub(crate) fn note_error(&self, error: &sqlx::Error) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(crate::cause::text(error));
    }

    /// The error of this call running out of time, naming the lock, the step (waiting for a free
    /// connection, connecting, or waiting for the answer) and the last error the call got past.
    pub(crate) fn timeout_error(&self) -> Error {
        use std::fmt::Write as _;
        let target = &self.target.name;
        let mut detail = self
            .about
            .as_ref()
            .map(|about| format!("{about}, "))
            .unwrap_or_default();
        // Writing to a `String` cannot fail.
        let _ = match self.phase.load(Ordering::Relaxed) {
            p if p == CallStep::Statement as u8 => {
                write!(detail, "waiting for {target} to answer the statement")
            }
            p if p == CallStep::Connecting as u8 => write!(detail, "connecting to {target}"),
            _ if self.target.refusal.is_some() => {
                let refused = self.target.refusal.as_ref().and_then(|refusal| {
                    refusal
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone()
                });
                let all = match self.target.max {
                    1 => "the provider's one connection is".to_owned(),
                    n => format!("all {n} of the provider's are"),
                };
                match refused {
                    Some(refused) => write!(
                        detail,
                        "waiting for a free connection to {target} ({all} busy or connecting; \
                         last connect error: {refused})"
                    ),
                    None => write!(
                        detail,
                        "waiting for a free connection to {target} ({all} busy)"
                    ),
                }
            }
            _ => write!(
                detail,
                "waiting for a connection to {target} from the pool (at most {})",
                self.target.max
            ),
        };
        if let Some(error) = &*self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            let _ = write!(detail, " (last error: {error})");
        }
        Error::timeout_with(self.op, self.timeout, detail)
    }

    /// Runs `fut` until the call's deadline.
    ///
    /// # Errors
    ///
    /// [`Error::is_timeout`] if the deadline passed first (`fut` is dropped).
    pub(crate) async fn timed<F: Future>(&self, fut: F) -> Result<F::Output> {
        timeout_at(self.deadline, fut)
            .await
            .map_err(|_| self.timeout_error())
    }
}

impl<DB: Database> Link<DB> {
    /// Runs one call: `attempt` on a connection, before `call`'s deadline. A connection that
    /// cannot be opened is reported as [`checkout_error`](Self::checkout_error).
    ///
    /// An attempt that fails because its connection was gone (see
    /// [`connection_lost`](super::checkout::connection_lost)), typically an idle one the server
    /// closed when it restarted, closes it and runs again on another, within the same deadline. So
    /// each dead idle connection costs a retry instead of a failed call, and once none is left, a
    /// fresh one is opened. A server refusing connections while it restarts is asked again until
    /// the deadline. At most max connections + 1 attempts get past every dead connection to a
    /// fresh one. A checkout that fails the same way, as when the server reset a new connection, is
    /// retried alike. Any other error, and the deadline, end the call at once. When nothing fails,
    /// the first attempt is the call.
    ///
    /// A statement whose connection died after it was sent may have committed before its reply was
    /// lost, and the driver cannot tell. So an attempt runs again after a lost connection only for
    /// [`AfterLostReply::Repeat`]. Acquire, fire claim, trigger claim and the history write (its insert, on MySQL) are
    /// [`AfterLostReply::Fail`] and end with
    /// [`Call::lost_reply`]'s error at the first lost connection, so there is at most one failed
    /// call per dead connection. Behind a transaction pooler ([`Checkout::begin`]), a connection
    /// lost before the attempt sent a `COMMIT` rolled back, and the attempt runs again whatever the
    /// call says. A failed checkout sent no statement and is retried either way.
    pub(crate) async fn run<'a, T, F, Fut>(&self, call: &'a Call, mut attempt: F) -> Result<T>
    where
        F: FnMut(Checkout<'a, DB>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let attempts = self.conns.max().saturating_add(1);
        let mut tries = 0;
        loop {
            tries += 1;
            let checkout = match self.conns.checkout(call).await? {
                Ok(conn) => Checkout::new(conn, call, self.settings.transaction_pooler),
                Err(error) if tries < attempts && checkout_lost(&error) => {
                    call.note_error(&error);
                    tracing::info!(
                        op = call.op,
                        attempt = tries,
                        error = &*crate::cause::source(error) as &dyn std::error::Error,
                        "could not open a lock-store connection; trying again"
                    );
                    continue;
                }
                Err(error) => return Err(self.checkout_error(call, error)),
            };
            call.lost.store(false, Ordering::Relaxed);
            call.rolled_back.store(false, Ordering::Relaxed);
            // The attempt owns the connection: by the time it returns, a dead one is closed.
            match attempt(checkout).await {
                Err(error)
                    if tries < attempts
                        && call.lost.load(Ordering::Relaxed)
                        && (call.repeats_after_lost_reply()
                            || call.rolled_back.load(Ordering::Relaxed)) =>
                {
                    tracing::info!(
                        op = call.op,
                        attempt = tries,
                        error = %with_causes(&error),
                        "lock-store connection lost; trying again on another connection"
                    );
                }
                outcome => return outcome,
            }
        }
    }
}

/// `error` and its causes, one after another, for a log line, leaving out a cause whose message is
/// already in the text, as sqlx's I/O errors repeat theirs.
fn with_causes(error: &Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let message = cause.to_string();
        if !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        source = cause.source();
    }
    text
}
