//! Helpers for tests that need a real Redis, behind the feature `testing`.
//!
//! They say where the server is and what to do when there is none. They give tests key prefixes of
//! their own, so tests can share a server.
//!
//! Tests read the server's URL from [`REDIS_URL_ENV`] (`SHEDLOCK_REDIS_URL`). Without it,
//! [`redis_url`] prints a skip notice and returns `None`. The test can then return early and pass.
//! With [`REQUIRE_DB_ENV`] set to `1`, as CI does, it panics instead. So a missing server fails the
//! run rather than skipping it silently. Tests never flush a shared server: each uses its own
//! [`unique_prefix`].
//!
//! ```
//! use shedlock_redis::{RedisLockProvider, testing};
//!
//! #[tokio::test]
//! async fn locks_on_redis() -> Result<(), Box<dyn std::error::Error>> {
//!     let Some(url) = testing::redis_url() else { return Ok(()) }; // skipped
//!     let provider = RedisLockProvider::builder(url.as_str())
//!         .key_prefix(testing::unique_prefix("test"))
//!         .connect()
//!         .await?;
//!     // ...
//!     Ok(())
//! }
//! ```

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher as _, Hasher as _};
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable holding the Redis URL of tests.
pub const REDIS_URL_ENV: &str = "SHEDLOCK_REDIS_URL";
/// Set to `1` to make a missing server fail tests instead of skipping them.
pub const REQUIRE_DB_ENV: &str = "SHEDLOCK_REQUIRE_DB";

const EXAMPLE: &str = "redis://127.0.0.1:6379";

/// The Redis URL for a test: [`REDIS_URL_ENV`] if set, else `None` after printing a skip notice.
///
/// # Panics
///
/// When [`REDIS_URL_ENV`] is not set and [`REQUIRE_DB_ENV`] is `1`.
#[must_use]
pub fn redis_url() -> Option<String> {
    if let Ok(url) = std::env::var(REDIS_URL_ENV)
        && !url.trim().is_empty()
    {
        return Some(url);
    }
    assert!(
        !db_required(),
        "{REDIS_URL_ENV} is not set, and {REQUIRE_DB_ENV}=1 requires the server: set \
         {REDIS_URL_ENV}, e.g. {REDIS_URL_ENV}={EXAMPLE}"
    );
    // A skip notice for the test's output (captured by the test harness, shown with
    // --nocapture or when the test fails), not a log line.
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "skipping a Redis test: {REDIS_URL_ENV} is not set (e.g. {REDIS_URL_ENV}={EXAMPLE}; \
             set {REQUIRE_DB_ENV}=1 to fail instead)"
        );
    }
    None
}

/// Whether tests must fail rather than skip without a server ([`REQUIRE_DB_ENV`] is `1`).
#[must_use]
pub fn db_required() -> bool {
    std::env::var(REQUIRE_DB_ENV).is_ok_and(|v| v.trim() == "1")
}

/// A key prefix of its own for one test: `shedlock-test:{label}:` plus the process id, a counter
/// and random bits, ending in `:`.
///
/// ```
/// let a = shedlock_redis::testing::unique_prefix("t");
/// assert_ne!(a, shedlock_redis::testing::unique_prefix("t"));
/// assert!(a.starts_with("shedlock-test:t:") && a.ends_with(':'));
/// ```
#[must_use]
pub fn unique_prefix(label: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let random = RandomState::new().build_hasher().finish() & 0xffff_ffff;
    format!(
        "shedlock-test:{label}:{:x}_{count:x}_{random:08x}:",
        std::process::id()
    )
}
