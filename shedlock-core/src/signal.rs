//! [`shutdown_signal`]: resolves when the process is asked to stop.

/// Resolves, with the signal's name, when the process receives Ctrl-C (SIGINT) or, on Unix,
/// SIGTERM. SIGTERM is what Kubernetes, systemd and Docker send on a stop. So `main` can drain
/// before it exits.
///
/// On Unix, called on a tokio runtime, it installs its handlers at once. A signal that arrives
/// before the returned future is first awaited is kept for it. Call it early in `main`, before the
/// slow part of startup, and await it when ready to wait. From that call on, SIGINT and SIGTERM no
/// longer end the process by themselves, because tokio keeps its handlers for the process's life.
/// During a long startup step, `select!` on the future, so that Ctrl-C still stops it. Elsewhere
/// the handlers are installed when the future is first polled.
///
/// # Errors
///
/// The signal handlers could not be installed. That is an I/O error from the operating system.
///
/// ```no_run
/// use std::time::Duration;
/// use shedlock_core::{InMemoryLockProvider, LockingTaskExecutor};
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
/// // ... start the work ...
/// shedlock_core::shutdown_signal().await?;
/// executor.shutdown(Duration::from_secs(20)).await; // every lock released before exit
/// # Ok(()) }
/// ```
pub fn shutdown_signal() -> impl Future<Output = std::io::Result<&'static str>> + Send {
    // Installed now when called on a runtime, so a signal that arrives between this call and
    // the future's first poll (a slow startup) is kept, not left to the default action (which
    // ends the process without a drain). Outside a runtime, installed when first polled.
    #[cfg(unix)]
    let installed = tokio::runtime::Handle::try_current()
        .ok()
        .map(|_| handlers());
    async move {
        #[cfg(unix)]
        {
            let (mut int, mut term) = match installed {
                Some(installed) => installed?,
                None => handlers()?,
            };
            tokio::select! {
                _ = int.recv() => Ok("SIGINT"),
                _ = term.recv() => Ok("SIGTERM"),
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c().await.map(|()| "Ctrl-C")
        }
    }
}

/// SIGINT's and SIGTERM's handlers.
#[cfg(unix)]
fn handlers() -> std::io::Result<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)> {
    use tokio::signal::unix::{SignalKind, signal};
    Ok((
        signal(SignalKind::interrupt())?,
        signal(SignalKind::terminate())?,
    ))
}
