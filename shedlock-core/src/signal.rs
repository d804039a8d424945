//! [`shutdown_signal`]: resolves when the process is asked to stop.

/// Resolves, with the signal's name, when the process receives Ctrl-C (SIGINT) or, on Unix, SIGTERM (what Kubernetes,
/// systemd and Docker send on a stop), so `main` can drain before it exits.
///
/// # Errors
///
/// The signal handlers could not be installed (an I/O error from the operating system).
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
pub async fn shutdown_signal() -> std::io::Result<&'static str> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            ctrl_c = tokio::signal::ctrl_c() => ctrl_c.map(|()| "SIGINT"),
            _ = term.recv() => Ok("SIGTERM"),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.map(|()| "Ctrl-C")
    }
}
