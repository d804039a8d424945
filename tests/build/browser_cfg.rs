//! The browser tests' cfg (`#[path]`-included by `tests/build.rs`): `shedlock_browser` is set when
//! Chromium and chromedriver are installed (found on `PATH`, or in `/usr/bin` where Debian's
//! `chromium` and `chromium-driver` packages put them), so that without them the dashboard's
//! browser tests show as *ignored* with the reason, instead of passing without a browser.
//!
//! With `SHEDLOCK_REQUIRE_BROWSER=1` (set by `.ci/run`, which installs both) the cfg is always
//! set: the tests run, and a missing program fails them. The programs found are watched while they
//! exist; one installed later is seen after `touch tests/build.rs` or with the variable set.

use std::path::PathBuf;

/// The cfg this module may set, declared for `check-cfg`.
pub(crate) const CFG: &str = "shedlock_browser";

const REQUIRE_BROWSER: &str = "SHEDLOCK_REQUIRE_BROWSER";

/// The browser and its driver, by the names Debian installs them under.
const PROGRAMS: [&[&str]; 2] = [&["chromium", "chromium-browser"], &["chromedriver"]];

/// Prints the cargo instructions for the browser cfg (call from `main` of the build script).
pub(crate) fn emit() {
    println!("cargo::rustc-check-cfg=cfg({CFG})");
    println!("cargo::rerun-if-env-changed={REQUIRE_BROWSER}");
    let required = std::env::var(REQUIRE_BROWSER).is_ok_and(|v| v.trim() == "1");
    let mut installed = true;
    for names in PROGRAMS {
        match names.iter().find_map(|name| find(name)) {
            Some(path) => println!("cargo::rerun-if-changed={}", path.display()),
            None => installed = false,
        }
    }
    if installed || required {
        println!("cargo::rustc-cfg={CFG}");
    }
}

/// `name` on `PATH`, else in `/usr/bin`.
fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}
