//! Postgres's push of new triggers: `LISTEN` on the table's trigger channel
//! ([`channel`](crate::trigger::channel)), on a connection of its own. Each notification wakes the
//! scheduler's trigger loop; its payload, the lock's name, is not read (a woken loop reads every
//! pending trigger). The watch ends when the loop is gone, the connection fails, or after 5
//! minutes: the loop then polls and asks for a new watch (docs/operating.md, "Run now").

use std::time::Duration;

use shedlock_core::provider::TriggerWake;
use shedlock_core::trigger::TriggerWaker;
use shedlock_core::{Error, Result};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};

/// How long one watch lasts at most. A half-open connection (a NAT's timeout, a partition) tells
/// nothing, so a watch is renewed this often: the loop polls once and asks for a new one.
const MAX_AGE: Duration = Duration::from_mins(5);

/// Listens on `channel` with a connection made from `options` (the provider's, TLS included),
/// and forwards each notification to the returned [`TriggerWake`]. `target` names the server in
/// errors. Connecting and the `LISTEN` take at most `timeout` (the provider's call timeout).
pub(crate) async fn watch(
    options: PgConnectOptions,
    target: String,
    channel: String,
    timeout: Duration,
) -> Result<TriggerWake> {
    let failed =
        |e: sqlx::Error| Error::backend(format!("listen for triggers on {target}"), Box::new(e));
    let listen = async {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .acquire_timeout(timeout)
            .connect_with(options)
            .await?;
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.eager_reconnect(false);
        listener.listen(&channel).await?;
        Ok::<_, sqlx::Error>((pool, listener))
    };
    let (pool, listener) = tokio::time::timeout(timeout, listen)
        .await
        .map_err(|_| {
            Error::backend_message(format!(
                "listen for triggers on {target}: no answer within {timeout:?}"
            ))
        })?
        .map_err(failed)?;
    let (waker, wake) = TriggerWake::channel();
    tokio::spawn(forward(listener, pool, waker, channel));
    Ok(wake)
}

/// Wakes `waker` on each notification until the loop is gone or the connection fails.
async fn forward(
    mut listener: PgListener,
    pool: sqlx::PgPool,
    waker: TriggerWaker,
    channel: String,
) {
    let renew = tokio::time::sleep(MAX_AGE);
    tokio::pin!(renew);
    loop {
        tokio::select! {
            received = listener.try_recv() => match received {
                Ok(Some(_)) => {
                    if !waker.wake() {
                        break;
                    }
                }
                Ok(None) => {
                    tracing::debug!(channel, "the trigger watch lost its connection");
                    break;
                }
                Err(error) => {
                    let error = &error as &dyn std::error::Error;
                    tracing::debug!(channel, error, "the trigger watch failed");
                    break;
                }
            },
            () = waker.closed() => break,
            () = &mut renew => {
                tracing::debug!(channel, "renewing the trigger watch");
                break;
            }
        }
    }
    drop(listener);
    // Closing waits for the connection's goodbye, which a dead connection never sends.
    let _ = tokio::time::timeout(Duration::from_secs(5), pool.close()).await;
}
