//! The connection: a reconnecting [`ConnectionManager`], replaced after a call timed out, and the
//! per-call deadline.

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ConnectionAddr, ConnectionInfo, RedisError, RedisResult};
use shedlock_core::{Error, Result};
use tokio::time::{Instant, timeout_at};

/// How often a call whose connection turned out to be dead, after a server restart, a dropped
/// socket or a refused reconnection, runs again on a fresh one within its deadline. The manager
/// may report the failure of a reconnection made while the server was down, and the retry then
/// makes a new one.
const RETRIES_ON_DROPPED: u32 = 2;

/// Whether a call may run again after its connection dropped, possibly after its request was
/// written and the script ran, as redis-rs reports both as a closed-connection error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resend {
    /// Run it again on the reconnected connection, as extend, release, reads and admin have the
    /// same effect and answer when repeated.
    AfterDrop,
    /// End the call with an error saying that the reply was lost and the script may have run. A
    /// repeat would answer from its own effect: an acquire would find its own lock held, a fire
    /// claim its own fire recorded, a trigger claim its trigger taken, a resume no pause. A refused
    /// reconnection sent nothing, so it is still retried.
    OnlyIfRefused,
}

/// What a call does after an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    /// Run again on the reconnected connection, within the retries and the deadline.
    Retry,
    /// End with the lost-reply error.
    LostReply,
    /// End with the error.
    Fail,
}

impl Resend {
    /// What a call of this kind does after `error` (see [`Resend`]).
    fn after(self, error: &RedisError) -> After {
        if error.is_connection_refusal() {
            After::Retry
        } else if !error.is_connection_dropped() {
            After::Fail
        } else if self == Self::AfterDrop {
            After::Retry
        } else {
            After::LostReply
        }
    }
}

/// The server's address for messages and `Debug`: the host and port, or the socket path, and the
/// database number, never the user name or password.
pub(crate) fn describe(info: &ConnectionInfo) -> String {
    let addr = match info.addr() {
        ConnectionAddr::Tcp(host, port) => format!("redis://{host}:{port}"),
        ConnectionAddr::TcpTls { host, port, .. } => format!("rediss://{host}:{port}"),
        ConnectionAddr::Unix(path) => format!("unix:{}", path.display()),
        other => other.to_string(),
    };
    format!("{addr}/{}", info.redis_settings().db())
}

/// One multiplexed connection, shared by every call. It reconnects by itself after an I/O error,
/// and is dropped for a fresh one after a call timed out on it. A black-holed socket produces no
/// error for many minutes and would otherwise time out every later call too.
pub(crate) struct Connection {
    client: redis::Client,
    config: ConnectionManagerConfig,
    current: Mutex<Current>,
    server: String,
    timeout: Duration,
}

struct Current {
    generation: u64,
    manager: ConnectionManager,
}

impl Connection {
    /// A connection that connects on first use.
    pub(crate) fn new(client: redis::Client, timeout: Duration) -> Result<Self> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::invalid_config(
                "the Redis lock provider must be built inside a tokio runtime",
            ));
        }
        // Connecting retries a little (a restarting server), and gives up quickly enough that a
        // refused connection is reported as such, not as a timeout; the call's deadline bounds
        // everything. The crate's own response timeout (500 ms by default) is off: the call's
        // deadline is the one timeout, and a call that meets it replaces the connection.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(None)
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let server = describe(client.get_connection_info());
        let manager = Self::manager(&client, &config, &server)?;
        Ok(Self {
            client,
            config,
            current: Mutex::new(Current {
                generation: 0,
                manager,
            }),
            server,
            timeout,
        })
    }

    fn manager(
        client: &redis::Client,
        config: &ConnectionManagerConfig,
        server: &str,
    ) -> Result<ConnectionManager> {
        ConnectionManager::new_lazy_with_config(client.clone(), config.clone())
            .map_err(|e| Error::backend(format!("set up a connection to Redis at {server}"), e))
    }

    /// The client, with the address, credentials and TLS settings of every connection, for the
    /// pub/sub connection of `watch_triggers`.
    pub(crate) fn client(&self) -> &redis::Client {
        &self.client
    }

    /// The deadline of one call.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The server, for messages, without credentials.
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    fn get(&self) -> (u64, ConnectionManager) {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        (current.generation, current.manager.clone())
    }

    /// Replaces the connection of `generation`, unless another call did already.
    fn replace(&self, generation: u64) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.generation != generation {
            return;
        }
        match Self::manager(&self.client, &self.config, &self.server) {
            Ok(manager) => {
                tracing::debug!(server = %self.server, "dropping a Redis connection whose call timed out");
                current.manager = manager;
                current.generation += 1;
            }
            Err(error) => tracing::warn!(
                error = &error as &dyn std::error::Error,
                "could not replace a timed-out Redis connection"
            ),
        }
    }

    /// Runs one call: `attempt` on the connection, before the call's deadline. `what` describes the
    /// call for error messages (`acquire lock "report"`).
    ///
    /// An attempt that fails because the server restarted or closed the connection runs again on
    /// the connection the manager reopens, within the same deadline, only if `resend` allows it
    /// ([`Resend::AfterDrop`]). So a restart that is over before the deadline costs no failed call.
    /// Acquire, fire claim, trigger claim and resume ([`Resend::OnlyIfRefused`]) end at a dropped
    /// connection with an error saying so, as their script may have run. Only a refused
    /// reconnection, which sent nothing, is retried for them. A call that runs out of time drops the connection for a fresh one.
    pub(crate) async fn run<T, F, Fut>(
        &self,
        op: &'static str,
        resend: Resend,
        what: &(dyn Fn() -> String + Sync),
        mut attempt: F,
    ) -> Result<T>
    where
        F: FnMut(ConnectionManager) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let deadline = Instant::now() + self.timeout;
        let mut retries = 0;
        loop {
            let (generation, manager) = self.get();
            match timeout_at(deadline, attempt(manager)).await {
                Err(_) => {
                    self.replace(generation);
                    return Err(Error::timeout(op, self.timeout));
                }
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(error)) => match resend.after(&error) {
                    After::Retry if retries < RETRIES_ON_DROPPED => {
                        retries += 1;
                        tracing::info!(
                            op,
                            error = &error as &dyn std::error::Error,
                            "Redis connection lost; trying again on a new one"
                        );
                    }
                    After::LostReply => return Err(self.lost_reply(op, &what(), error)),
                    After::Retry | After::Fail => return Err(self.error(&what(), error)),
                },
            }
        }
    }

    /// The error of a call whose connection dropped and that may not run again
    /// ([`Resend::OnlyIfRefused`]): one line naming the call, the lock and the server, and what it
    /// means for the operation `op`, with redis-rs's error as its source.
    fn lost_reply(&self, op: &str, what: &str, error: RedisError) -> Error {
        let meaning = match op {
            "resume" => "the pause may have been removed (the lock's entry shows whether it was)",
            "claim_trigger" => {
                "the lock may be held by this owner until at_most and the trigger taken by it \
                 (the lock's entry shows whether it was)"
            }
            "claim_fires" => "each of the locks may be held by this owner until its at_most",
            _ => "the lock may be held by this owner until at_most",
        };
        Error::backend(
            format!(
                "{what} (Redis at {}): the reply was lost (the connection dropped, possibly after \
                 the request was sent) and the script may have run, so {meaning}; not repeated",
                self.server
            ),
            error,
        )
    }

    /// Our error for `error` met while doing `what`: the script's refusals of a key that is not
    /// this lock's record say so, anything else is a backend error. A batch of fire claims maps
    /// each claim's error reply with it, as the single claim's.
    pub(crate) fn error(&self, what: &str, error: RedisError) -> Error {
        let server = &self.server;
        match error.code() {
            Some("SHEDLOCKFOREIGN") => Error::invalid_config(format!(
                "cannot {what}: its key holds the record of another lock, from a provider whose \
                 key prefix overlaps this one's (Redis at {server}); use key prefixes that are \
                 not prefixes of each other"
            )),
            Some("SHEDLOCKNOTLOCK") => Error::invalid_config(format!(
                "cannot {what}: its key holds a hash that is not a lock record (another \
                 program's key?) (Redis at {server}); choose another key prefix"
            )),
            Some("WRONGTYPE") => Error::invalid_config(format!(
                "cannot {what}: its key holds a value that is not a lock record (another \
                 program's key?) (Redis at {server}); choose another key prefix"
            )),
            _ => Error::backend(format!("{what} (Redis at {server})"), error),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    fn io_error(kind: io::ErrorKind) -> RedisError {
        io::Error::from(kind).into()
    }

    /// A refused reconnection sent nothing and is retried for every call. A dropped connection may
    /// have lost a reply, so it is retried only for calls whose repeat is harmless. Others fail.
    #[test]
    fn only_calls_that_may_repeat_are_retried_after_a_drop() {
        let refused = io_error(io::ErrorKind::ConnectionRefused);
        assert!(
            refused.is_connection_dropped(),
            "redis-rs counts a refusal as dropped"
        );
        let closed = RedisError::from((redis::ErrorKind::Io, "Connection closed"));
        let reset = io_error(io::ErrorKind::ConnectionReset);
        let script = RedisError::from((redis::ErrorKind::Client, "NOSCRIPT no such script"));
        for (error, repeat, once) in [
            (&refused, After::Retry, After::Retry),
            (&closed, After::Retry, After::LostReply),
            (&reset, After::Retry, After::LostReply),
            (&script, After::Fail, After::Fail),
        ] {
            assert_eq!(Resend::AfterDrop.after(error), repeat, "{error}");
            assert_eq!(Resend::OnlyIfRefused.after(error), once, "{error}");
        }
    }
}
