//! What a test's code logs, captured as text: [`LogCapture::capture`] installs a `tracing`
//! subscriber as this thread's default (tests on a current-thread runtime, so every task they
//! spawn logs here) until the returned guard is dropped. [`LogCapture::global`] installs one for
//! the whole test binary (multi-thread runtimes), for a test to print what it needs when it fails.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

/// The captured log lines, shared with the subscriber that writes them.
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl io::Write for LogCapture {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogCapture {
    type Writer = Self;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl LogCapture {
    /// Captures this thread's events at `level` and above until the guard is dropped.
    #[must_use]
    pub fn capture(level: tracing::Level) -> (Self, tracing::subscriber::DefaultGuard) {
        let log = Self::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(log.clone())
            .with_max_level(level)
            .with_ansi(false)
            .finish();
        (log, tracing::subscriber::set_default(subscriber))
    }

    /// Captures the events that `filter` (an `EnvFilter` directive, such as
    /// `shedlock_core=debug`) lets through, from every thread of the test binary, from now on, and
    /// keeps them until the binary exits. Only the first call in a binary installs it, with its
    /// filter; later calls answer the same capture. `None` if another global subscriber was
    /// installed first.
    #[must_use]
    pub fn global(filter: &str) -> Option<Self> {
        static GLOBAL: std::sync::OnceLock<Option<LogCapture>> = std::sync::OnceLock::new();
        GLOBAL
            .get_or_init(|| {
                let log = Self::default();
                tracing_subscriber::fmt()
                    .with_writer(log.clone())
                    .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                    .with_ansi(false)
                    .try_init()
                    .ok()
                    .map(|()| log)
            })
            .clone()
    }

    /// Everything captured so far.
    #[must_use]
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}
