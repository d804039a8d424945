//! `shutdown_signal` resolves on SIGTERM (its own test binary: tokio's handler stays installed
//! for the process). One test, so that no other test's signal can stand in for its own.

#[cfg(unix)]
#[tokio::test(flavor = "current_thread")]
async fn sigterm_resolves_the_shutdown_signal_even_before_its_first_poll() {
    use tokio::signal::unix::{SignalKind, signal};
    // Our own registration first, to know when a signal has been delivered, and so that tokio's
    // handler (not the default action, which ends the process) is in place whatever the library
    // does.
    let mut ours = signal(SignalKind::terminate()).expect("handler");
    let sigterm = || {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    };
    let within = std::time::Duration::from_secs(10);

    // Called, not yet polled: the handlers are in place at once, so the signal is kept for it.
    let pending = shedlock_core::shutdown_signal();
    sigterm();
    ours.recv().await.expect("delivered");
    let name = tokio::time::timeout(within, pending)
        .await
        .expect("the signal that came before the first poll resolves it")
        .expect("handlers installed");
    assert_eq!(name, "SIGTERM");

    // Awaited in a task of its own, as `main` would.
    let waiting = tokio::spawn(shedlock_core::shutdown_signal());
    tokio::task::yield_now().await;
    sigterm();
    ours.recv().await.expect("delivered");
    let name = tokio::time::timeout(within, waiting)
        .await
        .expect("resolved in time")
        .expect("no panic")
        .expect("handlers installed");
    assert_eq!(name, "SIGTERM");
}
