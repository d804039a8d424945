//! The build scripts of the crates with database tests (`#[path]`-included by each): one cfg per
//! store whose tests can run, so that a test without its server shows as *ignored* with the
//! reason in the test summary, instead of passing without touching a database.
//!
//! - `shedlock_pg`, `shedlock_mysql`, `shedlock_redis`, `shedlock_etcd`: the store's URL
//!   (`SHEDLOCK_PG_URL`, …) is set and not empty;
//! - `shedlock_interop`: Java ShedLock's statements are readable (`SHEDLOCK_INTEROP_SQL`, or
//!   `shared/interop/shedlock-sql.txt` next to the workspace).
//!
//! With `SHEDLOCK_REQUIRE_DB=1` every cfg is set: the tests run, and the test helpers' missing
//! URL or file fails them. With the `testcontainers` feature (shedlock-sqlx) `shedlock_pg` and
//! `shedlock_mysql` are set: the helpers start containers. Changing any of these variables
//! re-runs the build script (`rerun-if-env-changed`); the interop file is watched while it
//! exists (a file that appears later is seen after `touch build.rs` or with the variable set).

use std::path::{Path, PathBuf};

/// Every cfg this module may set, declared for `check-cfg` so rustc and clippy know them.
const CFGS: [&str; 5] = [
    "shedlock_pg",
    "shedlock_mysql",
    "shedlock_redis",
    "shedlock_etcd",
    "shedlock_interop",
];

const REQUIRE_DB: &str = "SHEDLOCK_REQUIRE_DB";
const INTEROP_SQL: &str = "SHEDLOCK_INTEROP_SQL";

/// The stores a crate's tests use.
#[allow(
    dead_code,
    reason = "each build script names the stores of its own tests"
)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Store {
    Postgres,
    MySql,
    Redis,
    Etcd,
    /// Java ShedLock's statements file (the interop tests).
    Interop,
}

impl Store {
    fn cfg(self) -> &'static str {
        match self {
            Self::Postgres => "shedlock_pg",
            Self::MySql => "shedlock_mysql",
            Self::Redis => "shedlock_redis",
            Self::Etcd => "shedlock_etcd",
            Self::Interop => "shedlock_interop",
        }
    }

    fn url_env(self) -> Option<&'static str> {
        match self {
            Self::Postgres => Some("SHEDLOCK_PG_URL"),
            Self::MySql => Some("SHEDLOCK_MYSQL_URL"),
            Self::Redis => Some("SHEDLOCK_REDIS_URL"),
            Self::Etcd => Some("SHEDLOCK_ETCD_URL"),
            Self::Interop => None,
        }
    }
}

/// Prints the cargo instructions for `stores` (call from `main` of a build script).
pub(crate) fn emit(stores: &[Store]) {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=build");
    println!("cargo::rustc-check-cfg=cfg({})", CFGS.join(", "));
    println!("cargo::rerun-if-env-changed={REQUIRE_DB}");
    let required = std::env::var(REQUIRE_DB).is_ok_and(|v| v.trim() == "1");
    let containers = std::env::var_os("CARGO_FEATURE_TESTCONTAINERS").is_some();
    for &store in stores {
        let available = match store.url_env() {
            Some(env) => {
                println!("cargo::rerun-if-env-changed={env}");
                let set = std::env::var(env).is_ok_and(|url| !url.trim().is_empty());
                set || (containers && matches!(store, Store::Postgres | Store::MySql))
            }
            None => interop_file_readable(),
        };
        if available || required {
            println!("cargo::rustc-cfg={}", store.cfg());
        }
    }
}

fn interop_file_readable() -> bool {
    println!("cargo::rerun-if-env-changed={INTEROP_SQL}");
    let path = std::env::var_os(INTEROP_SQL).map_or_else(default_interop_file, PathBuf::from);
    let readable = std::fs::File::open(&path).is_ok();
    if readable {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    readable
}

/// `shared/interop/shedlock-sql.txt` next to the workspace (the interop tests' default).
fn default_interop_file() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(PathBuf::new, PathBuf::from);
    let workspace = manifest.parent().unwrap_or(Path::new(".."));
    workspace.join("../shared/interop/shedlock-sql.txt")
}
