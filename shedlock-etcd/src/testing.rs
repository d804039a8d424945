//! Helpers for tests that need a real etcd, behind the feature `testing`.
//!
//! They say where etcd is and what to do when there is none. They give unique key prefixes, so
//! tests can share a cluster.
//!
//! Tests read the URL from [`ETCD_URL_ENV`] (`SHEDLOCK_ETCD_URL`). An example URL is
//! `etcd://127.0.0.1:2379`. Without it, [`etcd_url`] prints a skip notice and returns `None`. The
//! test can then return early and pass. With [`REQUIRE_DB_ENV`] set to `1`, as CI does, it panics
//! instead. So a missing etcd fails the run rather than skipping it silently.
//!
//! ```
//! use shedlock_etcd::{EtcdLockProvider, testing};
//!
//! #[tokio::test]
//! async fn locks_on_etcd() -> Result<(), Box<dyn std::error::Error>> {
//!     let Some(url) = testing::etcd_url() else { return Ok(()) }; // skipped
//!     let provider = EtcdLockProvider::builder(url).prefix(testing::unique_prefix()).build()?;
//!     // ...
//!     Ok(())
//! }
//! ```

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher as _, Hasher as _};
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable holding the etcd URL of tests.
pub const ETCD_URL_ENV: &str = "SHEDLOCK_ETCD_URL";
/// Set to `1` to make a missing etcd fail tests instead of skipping them.
pub const REQUIRE_DB_ENV: &str = "SHEDLOCK_REQUIRE_DB";

const EXAMPLE: &str = "etcd://127.0.0.1:2379";

/// The etcd URL for a test: [`ETCD_URL_ENV`] if set, else `None` after printing a skip notice.
///
/// # Panics
///
/// When it is not set and [`REQUIRE_DB_ENV`] is `1`.
#[must_use]
pub fn etcd_url() -> Option<String> {
    if let Ok(url) = std::env::var(ETCD_URL_ENV)
        && !url.trim().is_empty()
    {
        return Some(url);
    }
    assert!(
        !db_required(),
        "{ETCD_URL_ENV} is not set, and {REQUIRE_DB_ENV}=1 requires etcd: set {ETCD_URL_ENV}, \
         e.g. {ETCD_URL_ENV}={EXAMPLE}"
    );
    // A skip notice for the test's output, not a log line.
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "skipping an etcd test: {ETCD_URL_ENV} is not set (e.g. {ETCD_URL_ENV}={EXAMPLE}; \
             set {REQUIRE_DB_ENV}=1 to fail instead)"
        );
    }
    None
}

/// The etcd binary for tests that start private etcd processes.
///
/// It is `SHEDLOCK_ETCD_BIN`, else `etcd` on the `PATH`. It is `None` when there is none, after a
/// skip notice.
///
/// # Panics
///
/// Without the binary when [`REQUIRE_DB_ENV`] is `1`.
#[must_use]
pub fn etcd_binary() -> Option<String> {
    let bin = std::env::var("SHEDLOCK_ETCD_BIN").unwrap_or_else(|_| "etcd".into());
    let found = std::process::Command::new(&bin)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return Some(bin);
    }
    assert!(
        !db_required(),
        "no etcd binary ({bin:?}) to start a private etcd, and {REQUIRE_DB_ENV}=1 requires it: \
         install etcd-server or set SHEDLOCK_ETCD_BIN"
    );
    // A skip notice for the test's output, not a log line.
    #[allow(clippy::print_stderr)]
    {
        eprintln!("skipping a private-etcd test: no {bin:?} binary (install etcd-server)");
    }
    None
}

/// Whether tests must fail rather than skip without etcd ([`REQUIRE_DB_ENV`] is `1`).
#[must_use]
pub fn db_required() -> bool {
    std::env::var(REQUIRE_DB_ENV).is_ok_and(|v| v.trim() == "1")
}

/// A key prefix no other call in any process makes (in practice): `shedlock-test/`, the process id,
/// a counter and random bits, then `/`.
///
/// ```
/// let (a, b) = (shedlock_etcd::testing::unique_prefix(), shedlock_etcd::testing::unique_prefix());
/// assert_ne!(a, b);
/// assert!(a.starts_with("shedlock-test/") && a.ends_with('/'));
/// ```
#[must_use]
pub fn unique_prefix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let random = RandomState::new().build_hasher().finish() & 0xffff_ffff;
    format!(
        "shedlock-test/{:x}_{count:x}_{random:08x}/",
        std::process::id()
    )
}
