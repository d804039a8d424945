//! What a test's code logs, captured as text: [`LogCapture::capture`] installs a `tracing`
//! subscriber as this thread's default (tests on a current-thread runtime, so every task they
//! spawn logs here) until the returned guard is dropped.

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

    /// Everything captured so far.
    #[must_use]
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}
