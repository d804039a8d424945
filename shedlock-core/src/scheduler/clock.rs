//! The store's clock, as a replica learns it from fire-claim replies.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use chrono::{DateTime, Utc};
use tokio::time::Instant;

/// This process's wall clock, derived from tokio's monotonic clock (so paused tests control it),
/// and the estimated offset of the store's clock from it.
///
/// Each reply carries the store's "now" when it decided; the decision happened somewhere between
/// the call's send and its reply, so the estimate takes the midpoint (an error of at most half
/// the round trip). The latest reply wins: the offset follows a clock that drifts or jumps.
#[derive(Debug)]
pub(crate) struct StoreClock {
    origin: (Instant, DateTime<Utc>),
    offset_us: AtomicI64,
    known: AtomicBool,
}

impl StoreClock {
    pub(crate) fn new() -> Self {
        Self {
            origin: (Instant::now(), Utc::now()),
            offset_us: AtomicI64::new(0),
            known: AtomicBool::new(false),
        }
    }

    fn local_at(&self, at: Instant) -> DateTime<Utc> {
        let (origin, wall) = self.origin;
        let elapsed = at.saturating_duration_since(origin);
        wall + chrono::Duration::from_std(elapsed).unwrap_or(chrono::Duration::MAX)
    }

    fn offset(&self) -> chrono::Duration {
        chrono::Duration::microseconds(self.offset_us.load(Ordering::Relaxed))
    }

    /// The estimated offset (store minus local), once a reply has told it.
    pub(crate) fn known_offset(&self) -> Option<chrono::Duration> {
        self.known.load(Ordering::Relaxed).then(|| self.offset())
    }

    /// The store's clock now, as estimated (this process's clock until a reply told the offset).
    pub(crate) fn store_now(&self) -> DateTime<Utc> {
        self.local_at(Instant::now()) + self.offset()
    }

    /// Learns from a reply: the store read `store_now` between `sent` and `received`.
    pub(crate) fn observe(&self, store_now: DateTime<Utc>, sent: Instant, received: Instant) {
        let mid = sent + received.saturating_duration_since(sent) / 2;
        let offset = store_now - self.local_at(mid);
        let micros = offset.num_microseconds().unwrap_or(i64::MAX);
        self.offset_us.store(micros, Ordering::Relaxed);
        self.known.store(true, Ordering::Relaxed);
    }

    /// The tokio instant at which the store's clock should read `at` (now, if it already does).
    pub(crate) fn instant_for(&self, at: DateTime<Utc>) -> Instant {
        let ahead = (at - self.store_now()).to_std().unwrap_or_default();
        Instant::now() + ahead
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn the_offset_comes_from_the_midpoint_of_the_call() {
        let clock = StoreClock::new();
        assert!(clock.known_offset().is_none());
        let sent = Instant::now();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let received = Instant::now();
        // The store read 10 s ahead of us, at the call's midpoint.
        let store_now =
            clock.local_at(sent + Duration::from_millis(50)) + chrono::Duration::seconds(10);
        clock.observe(store_now, sent, received);
        assert_eq!(clock.known_offset(), Some(chrono::Duration::seconds(10)));
        let target = clock.store_now() + chrono::Duration::seconds(3);
        assert_eq!(
            clock.instant_for(target) - Instant::now(),
            Duration::from_secs(3)
        );
        assert!(
            clock.instant_for(clock.store_now() - chrono::Duration::seconds(1)) <= Instant::now()
        );
    }
}
