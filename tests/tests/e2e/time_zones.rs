//! Time-zone independence on a MariaDB server whose **default** time zone is not UTC (issue 3,
//! item 9; `shedlock-sqlx/tests/integration/mysql.rs` covers session zones on the shared server, whose
//! default is UTC).
//!
//! A private MariaDB is started with `--default-time-zone=+05:00` (skipped without the binaries
//! unless `SHEDLOCK_REQUIRE_DB=1`). On it, a provider whose sessions keep the server's zone and
//! one whose client sets `-07:00` share one table: the times they read and the times stored are
//! UTC (checked against the server's `UTC_TIMESTAMP(3)` through a UTC session), a lock taken by
//! either is held for the other, and a short lock expires for both by the server's clock.

use std::str::FromStr as _;
use std::time::Duration;

use shedlock_core::provider::{LockProvider, LockRecord};
use shedlock_sqlx::sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use shedlock_sqlx::sqlx::types::chrono::{DateTime, Utc};
use shedlock_sqlx::sqlx::{self, AssertSqlSafe};
use shedlock_sqlx::{MySqlLockProvider, testing};
use shedlock_tests::throwaway::{Flavor, Throwaway};

const SERVER_ZONE: &str = "+05:00";
const CLIENT_ZONE: &str = "-07:00";
const AT_MOST: Duration = Duration::from_mins(10);

/// A pool on `url` whose sessions use `zone`, or the server's default zone with `None` (sqlx
/// sets `+00:00` unless told otherwise).
async fn pool_in(url: &str, zone: Option<&str>) -> MySqlPool {
    let options = MySqlConnectOptions::from_str(url)
        .expect("a MySQL URL")
        .timezone(zone.map(str::to_owned));
    MySqlPoolOptions::new()
        .max_connections(2)
        .connect_with(options)
        .await
        .expect("connect to the private MariaDB")
}

async fn text(pool: &MySqlPool, sql: &'static str) -> String {
    sqlx::query_scalar(sql)
        .fetch_one(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// `locked_at` and `lock_until` of `name` as `pool`'s session reads them (wall-clock values in
/// that session's zone, decoded as UTC by sqlx).
async fn stored(pool: &MySqlPool, table: &str, name: &str) -> (DateTime<Utc>, DateTime<Utc>) {
    sqlx::query_as(AssertSqlSafe(format!(
        "SELECT locked_at, lock_until FROM `{table}` WHERE name = ?"
    )))
    .bind(name)
    .fetch_one(pool)
    .await
    .expect("read the lock row")
}

/// `a - b` in whole seconds.
fn seconds(a: DateTime<Utc>, b: DateTime<Utc>) -> i64 {
    (a - b).num_seconds()
}

/// `record` (just acquired) holds UTC times: `locked_at` within a second of the server's
/// `UTC_TIMESTAMP(3)`, `lock_until` exactly `AT_MOST` later, the stored row equal to it as a
/// UTC session reads it and shifted by the zone's offset as the other sessions read it.
async fn assert_utc(
    record: &LockRecord,
    table: &str,
    utc: &MySqlPool,
    server_zone: &MySqlPool,
    client_zone: &MySqlPool,
) {
    let now: DateTime<Utc> = sqlx::query_scalar("SELECT UTC_TIMESTAMP(3)")
        .fetch_one(utc)
        .await
        .expect("the server's UTC time");
    // Read after the acquire: `now` is at or after `locked_at`, and close to it (a zone mixed in
    // would put them hours apart).
    let skew_ms = (now - record.locked_at()).num_milliseconds();
    assert!(
        (0..5_000).contains(&skew_ms),
        "locked_at {} is {skew_ms} ms before the server's UTC_TIMESTAMP(3) {now}",
        record.locked_at()
    );
    assert_eq!(
        (record.lock_until() - record.locked_at()).to_std().ok(),
        Some(AT_MOST),
        "{record}"
    );
    let name = record.name();
    assert_eq!(
        stored(utc, table, name).await,
        (record.locked_at(), record.lock_until()),
        "as stored (read by a UTC session)"
    );
    // The zones really are in play: the same instants, as the other sessions' wall clocks show
    // them (TIMESTAMP converts through the session zone).
    let (at, until) = stored(server_zone, table, name).await;
    assert_eq!(
        (
            seconds(at, record.locked_at()),
            seconds(until, record.lock_until())
        ),
        (5 * 3600, 5 * 3600),
        "as a {SERVER_ZONE} session reads it"
    );
    let (at, until) = stored(client_zone, table, name).await;
    assert_eq!(
        (
            seconds(at, record.locked_at()),
            seconds(until, record.lock_until())
        ),
        (-7 * 3600, -7 * 3600),
        "as a {CLIENT_ZONE} session reads it"
    );
}

/// `by` sees the lock `record` as held: it cannot take it, and `holder` reports the same times.
async fn assert_held_for(by: &MySqlLockProvider, record: &LockRecord) {
    let name = record.name();
    assert!(
        by.acquire(name, AT_MOST, "intruder")
            .await
            .expect("acquire")
            .is_none(),
        "{record} was taken again by another session"
    );
    let seen = by
        .holder(name)
        .await
        .expect("holder")
        .expect("the lock is held");
    assert_eq!(seen.owner(), record.owner());
    assert_eq!(seen.locked_at(), record.locked_at());
    assert_eq!(seen.lock_until(), record.lock_until());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mariadb_server_default_zone_other_than_utc_changes_nothing() {
    let test = "a_mariadb_server_default_zone_other_than_utc_changes_nothing";
    let arg = format!("--default-time-zone={SERVER_ZONE}");
    let Some(server) = Throwaway::with_args_or_skip(Flavor::MariaDb, &[&arg], test).await else {
        return;
    };
    let url = server.url();
    let server_zone = pool_in(&url, None).await;
    let client_zone = pool_in(&url, Some(CLIENT_ZONE)).await;
    let utc = pool_in(&url, Some("+00:00")).await;
    assert_eq!(
        text(&server_zone, "SELECT CAST(@@global.time_zone AS CHAR)").await,
        SERVER_ZONE,
        "the server's default zone"
    );
    for (pool, zone) in [
        (&server_zone, SERVER_ZONE),
        (&client_zone, CLIENT_ZONE),
        (&utc, "+00:00"),
    ] {
        assert_eq!(
            text(pool, "SELECT CAST(@@session.time_zone AS CHAR)").await,
            zone
        );
    }

    let table = testing::unique_table_name("tz_server");
    let east = MySqlLockProvider::builder(server_zone.clone())
        .table(&table)
        .build()
        .expect("valid settings");
    east.create_table_if_not_exists()
        .await
        .expect("create the table");
    let west = MySqlLockProvider::builder(client_zone.clone())
        .table(&table)
        .build()
        .expect("valid settings");

    // Taken in the server's zone, held for the other client.
    let record = east
        .acquire("tz", AT_MOST, "east")
        .await
        .expect("acquire")
        .expect("a fresh lock");
    assert_utc(&record, &table, &utc, &server_zone, &client_zone).await;
    assert_held_for(&west, &record).await;
    assert!(
        east.release(&record, Duration::ZERO)
            .await
            .expect("release")
    );

    // And the other way round.
    let record = west
        .acquire("tz", AT_MOST, "west")
        .await
        .expect("acquire")
        .expect("the released lock");
    assert_utc(&record, &table, &utc, &server_zone, &client_zone).await;
    assert_held_for(&east, &record).await;
    assert!(
        west.release(&record, Duration::ZERO)
            .await
            .expect("release")
    );

    // A short (3 s) lock lasts its length for both, by the server's clock (a zone mixed into the
    // comparison would make it last hours, or not at all).
    let short = west
        .acquire("tz", Duration::from_secs(3), "west")
        .await
        .expect("acquire")
        .expect("the released lock");
    assert!(
        east.acquire("tz", AT_MOST, "east")
            .await
            .expect("acquire")
            .is_none(),
        "{short} was not held for the other zone"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(record) = east.acquire("tz", AT_MOST, "east").await.expect("acquire") {
            assert!(
                record.locked_at() >= short.lock_until(),
                "{record} / {short}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{short} never expired for the other zone"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(server);
}
