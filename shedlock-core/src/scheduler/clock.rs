//! The store's clock, as a replica learns it from fire-claim replies.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

/// How fast an estimate is taken to grow less certain: 500 µs a second. That is 500 ppm, the most
/// NTP slews a clock by. So a fresher reply with a somewhat longer round trip can replace it.
const DRIFT_PER_SEC: Duration = Duration::from_micros(500);

/// This process's wall clock, and the estimated offset of the store's clock from it. The wall clock
/// is derived from tokio's monotonic clock, so paused tests control it.
///
/// Each reply carries the store's "now" when it decided, somewhere between the call's send and its
/// reply, so the midpoint tells the offset to within half the round trip. The estimate keeps the
/// most certain reply. A later one replaces it when its half round trip is no longer than the kept
/// one's, grown by [`DRIFT_PER_SEC`] since, or when their ranges do not overlap because the store's
/// clock jumped. So one slow reply, such as a claim that waited seconds for a restarting database,
/// does not move the estimate by half its round trip, and the offset still follows a clock that
/// drifts or jumps.
#[derive(Debug)]
pub(crate) struct StoreClock {
    origin: (Instant, DateTime<Utc>),
    kept: Mutex<Option<Sample>>,
}

/// What one reply told.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// The store's clock minus this process's, at the call's midpoint.
    offset: chrono::Duration,
    /// Half the call's round trip. It is how far off `offset` may be.
    error: Duration,
    /// When the reply came.
    at: Instant,
}

impl Sample {
    /// How far off this sample may be at `now`.
    fn error_at(&self, now: Instant) -> Duration {
        let age = now.saturating_duration_since(self.at);
        self.error
            .saturating_add(DRIFT_PER_SEC.mul_f64(age.as_secs_f64()))
    }
}

impl StoreClock {
    pub(crate) fn new() -> Self {
        Self {
            origin: (Instant::now(), Utc::now()),
            kept: Mutex::new(None),
        }
    }

    fn local_at(&self, at: Instant) -> DateTime<Utc> {
        let (origin, wall) = self.origin;
        let elapsed = at.saturating_duration_since(origin);
        wall + chrono::Duration::from_std(elapsed).unwrap_or(chrono::Duration::MAX)
    }

    fn kept(&self) -> Option<Sample> {
        *self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn offset(&self) -> chrono::Duration {
        self.kept()
            .map_or_else(chrono::Duration::zero, |s| s.offset)
    }

    /// The estimated offset, store minus local, once a reply has told it.
    pub(crate) fn known_offset(&self) -> Option<chrono::Duration> {
        self.kept().map(|s| s.offset)
    }

    /// The store's clock now, as estimated: this process's clock until a reply told the offset.
    pub(crate) fn store_now(&self) -> DateTime<Utc> {
        self.store_at(Instant::now())
    }

    /// The store's clock at the local instant `at`, as estimated.
    pub(crate) fn store_at(&self, at: Instant) -> DateTime<Utc> {
        self.local_at(at) + self.offset()
    }

    /// How far [`store_at`](Self::store_at) may be off now. It is half the round trip of the reply
    /// the estimate came from, grown by [`DRIFT_PER_SEC`] since. It is zero before any reply.
    pub(crate) fn error(&self) -> Duration {
        self.kept()
            .map_or(Duration::ZERO, |s| s.error_at(Instant::now()))
    }

    /// Learns from a reply. The store read `store_now` between `sent` and `received`.
    pub(crate) fn observe(&self, store_now: DateTime<Utc>, sent: Instant, received: Instant) {
        let trip = received.saturating_duration_since(sent);
        let new = Sample {
            offset: store_now - self.local_at(sent + trip / 2),
            error: trip / 2,
            at: received,
        };
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let replace = match *kept {
            None => true,
            Some(old) => {
                let old_error = old.error_at(received);
                let apart = (new.offset - old.offset)
                    .abs()
                    .to_std()
                    .unwrap_or(Duration::MAX);
                new.error <= old_error || apart > new.error.saturating_add(old_error)
            }
        };
        if replace {
            *kept = Some(new);
        }
    }

    /// The tokio instant at which the store's clock should read `at`, or now if it already does.
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
        assert_eq!(
            clock.error(),
            Duration::from_millis(50),
            "half the round trip"
        );
        assert_eq!(
            clock.store_at(sent),
            clock.local_at(sent) + chrono::Duration::seconds(10)
        );
        let target = clock.store_now() + chrono::Duration::seconds(3);
        assert_eq!(
            clock.instant_for(target) - Instant::now(),
            Duration::from_secs(3)
        );
        assert!(
            clock.instant_for(clock.store_now() - chrono::Duration::seconds(1)) <= Instant::now()
        );
    }

    /// A claim that waited 2.6 s for a restarting database leaves a 2 ms estimate alone. Its reply
    /// says nothing better than ±1.3 s. A quick reply that disagrees with the estimate beyond both
    /// errors replaces it, because the store's clock jumped. And the estimate grows less certain
    /// with age.
    #[tokio::test(start_paused = true)]
    async fn slow_replies_do_not_move_the_estimate_but_a_jump_does() {
        let clock = StoreClock::new();
        let ms = Duration::from_millis;
        // A quick reply: the store is 10 s ahead, ±1 ms.
        let sent = Instant::now();
        tokio::time::sleep(ms(2)).await;
        let store =
            |at: Instant, ahead: i64| clock.local_at(at) + chrono::Duration::milliseconds(ahead);
        clock.observe(store(sent + ms(1), 10_000), sent, Instant::now());
        assert_eq!(clock.known_offset(), Some(chrono::Duration::seconds(10)));
        assert_eq!(clock.error(), ms(1));
        // A slow reply, the store having decided near its end: its midpoint says 11.3 s.
        let sent = Instant::now();
        tokio::time::sleep(ms(2_600)).await;
        clock.observe(store(Instant::now(), 10_000), sent, Instant::now());
        assert_eq!(
            clock.known_offset(),
            Some(chrono::Duration::seconds(10)),
            "the slow reply is less certain than the kept one"
        );
        // 2.6 s later the kept estimate may be off by 1 ms + 1.3 ms of drift.
        assert_eq!(clock.error(), ms(1) + Duration::from_micros(1_300));
        // A quick reply 5 s off: the store's clock jumped; it wins at once.
        let sent = Instant::now();
        tokio::time::sleep(ms(4)).await;
        clock.observe(store(sent + ms(2), 15_000), sent, Instant::now());
        assert_eq!(clock.known_offset(), Some(chrono::Duration::seconds(15)));
        assert_eq!(clock.error(), ms(2));
        // An equally quick reply later replaces it (a drifting clock is followed).
        tokio::time::sleep(ms(1_000)).await;
        let sent = Instant::now();
        tokio::time::sleep(ms(4)).await;
        clock.observe(store(sent + ms(2), 15_001), sent, Instant::now());
        assert_eq!(
            clock.known_offset(),
            Some(chrono::Duration::milliseconds(15_001))
        );
    }
}
