//! shedlock-sqlx's integration tests in one test binary (one link, and their tests run side by
//! side), each module behind the features it needs: `cargo test -p shedlock-sqlx --features
//! sqlite,testing` runs the SQLite tests alone. Run one module with a filter:
//! `cargo test -p shedlock-sqlx --all-features --test integration postgres::`.

mod common;

#[cfg(all(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod admin;
#[cfg(all(feature = "postgres", feature = "mysql"))]
mod create_race;
#[cfg(all(feature = "postgres", feature = "mysql"))]
mod interop;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod jobs;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;
