//! `shutdown_signal` resolves on SIGTERM (its own test binary: tokio's handler stays installed
//! for the process).

#[cfg(unix)]
#[tokio::test(flavor = "current_thread")]
async fn sigterm_resolves_the_shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    // Our own registration first, so that tokio's handler (not the default action, which ends
    // the process) is in place whatever happens below.
    let mut ours = signal(SignalKind::terminate()).expect("handler");
    let waiting = tokio::spawn(shedlock_core::shutdown_signal());
    // On a current-thread runtime the spawned task runs up to its first await (where its
    // handlers are registered) before this task resumes.
    tokio::task::yield_now().await;
    let status = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    ours.recv().await.expect("delivered");
    let name = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
        .await
        .expect("resolved in time")
        .expect("no panic")
        .expect("handlers installed");
    assert_eq!(name, "SIGTERM");
}
