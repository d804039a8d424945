//! The definitions and history tables on real databases: Postgres, MySQL/MariaDB and SQLite.
//!
//! These tests are in the crate, as the history write (`after_release_run`) is the crate's own. The
//! same checks run on each database ([`every_check`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use shedlock_core::admin::LockAdmin;
use shedlock_core::jobs::{Definition, HistoryPolicy, RunEntry, RunOutcome, RunReport};
use shedlock_core::provider::LockRecord;
use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Type};

use crate::dialect::Dialect;
use crate::history::after_release_run;
use crate::provider::Provider;
use crate::testing;

/// The time a history write gets in these tests (a release's whole call timeout).
const BUDGET: Duration = Duration::from_secs(5);

/// A time of whole milliseconds, as every database keeps it.
fn ms(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(t.timestamp_millis()).expect("in range")
}

/// What a check needs of one database: providers on a table, a statement run directly, and a count.
/// A provider has a history policy or none.
struct Db<P> {
    /// A provider on `table`, with `history`.
    provider: MakeProvider<P>,
    /// Runs a statement directly.
    exec: Box<dyn Fn(String) -> futures_like::Boxed<()> + Send + Sync>,
    /// Runs a `SELECT COUNT(*)`.
    count: Box<dyn Fn(String) -> futures_like::Boxed<i64> + Send + Sync>,
    /// The database's now minus one hour, in SQL.
    hour_ago: &'static str,
    /// The longest lock table name whose derived names fit (`None`: no limit).
    longest_table: Option<usize>,
}

/// Makes a provider on a table, with a history policy or none.
type MakeProvider<P> = Box<dyn Fn(&str, Option<HistoryPolicy>) -> P + Send + Sync>;

mod futures_like {
    pub(super) type Boxed<T> = std::pin::Pin<Box<dyn Future<Output = T> + Send>>;
}

/// Every check, on fresh tables of `db`.
async fn every_check<D: Dialect, P>(db: &Db<P>, generic: fn(&P) -> &Provider<D>)
where
    P: LockAdmin,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> Option<&'q str>: Encode<'q, D> + Type<D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'r> String: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
    D::Arguments: IntoArguments<D>,
{
    let table = testing::unique_table_name("sj");
    missing_tables_say_what_to_run(db, &table).await;
    let p = (db.provider)(&table, None);
    definitions_are_published_listed_and_expire(db, &p, &table).await;
    replicas_that_disagree_are_both_listed_and_forgotten(&p).await;
    odd_names_round_trip(&p).await;
    many_definitions_are_published_at_once(db, &p, &table).await;
    long_names_are_rejected(db, &p).await;
    history_keeps_the_newest(db, generic, &table).await;
    history_prunes_by_age(db, generic, &table).await;
    a_history_write_that_fails_fails_nothing(db, generic, &table).await;
    a_refused_prune(db, generic, &table).await;
    // Boxed: three writers' futures side by side are large.
    Box::pin(history_writes_of_one_instant_all_succeed(
        db, generic, &table,
    ))
    .await;
    for suffix in ["", "_jobs", "_history"] {
        (db.exec)(format!("DROP TABLE IF EXISTS {table}{suffix}")).await;
    }
}

/// Before the tables exist, every call says what to create, and `missing_ddl` lists it.
/// `create_table_if_not_exists` creates them, and nothing is missing after.
async fn missing_tables_say_what_to_run<P: LockAdmin>(db: &Db<P>, table: &str) {
    let p = (db.provider)(table, None);
    let lock_ddl = p.ddl().expect("ddl");
    (db.exec)(lock_ddl).await;
    let e = p.definitions().await.expect_err("no definitions table");
    assert!(e.is_missing_table(), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("{table}_jobs"))
            && msg.contains("CREATE TABLE IF NOT EXISTS")
            && msg.contains("0004_jobs_and_history.sql"),
        "{msg}"
    );
    let e = p.history("x", 5).await.expect_err("no history table");
    assert!(e.is_missing_table(), "{e}");
    assert!(e.to_string().contains(&format!("{table}_history")), "{e}");
    let e = p
        .publish_definitions(
            "r",
            "1",
            &[Definition::new("j", "l", "{}")],
            Duration::from_mins(1),
        )
        .await
        .expect_err("no definitions table");
    assert!(e.is_missing_table(), "{e}");
    let missing = p.missing_ddl().await.expect("look").expect("both missing");
    assert!(missing.contains(&format!("{table}_jobs")), "{missing}");
    assert!(missing.contains(&format!("{table}_history")), "{missing}");
    (db.exec)(format!("DROP TABLE {table}")).await;
    p.create_table().await.expect("create all three");
    p.create_table().await.expect("again: nothing to do");
    assert_eq!(p.missing_ddl().await.expect("look"), None);
    assert!(p.definitions().await.expect("empty").is_empty());
    assert!(p.history("x", 5).await.expect("empty").is_empty());
}

async fn definitions_are_published_listed_and_expire<P: LockAdmin>(db: &Db<P>, p: &P, table: &str) {
    let short = [
        Definition::new("b-job", "b-lock", r#"{"every":"1m"}"#),
        Definition::new("a-job", "a-lock", r#"{"cron":"0 * * * * *"}"#),
    ];
    let long = [Definition::new("c-job", "c-lock", "{}")];
    p.publish_definitions("short-lived", "1.2.3", &short, Duration::from_secs(2))
        .await
        .expect("publish");
    p.publish_definitions("long-lived", "1.2.4", &long, Duration::from_mins(10))
        .await
        .expect("publish");
    let listed = p.definitions().await.expect("list");
    let keys: Vec<_> = listed
        .iter()
        .map(|e| (e.definition.job.as_str(), e.replica.as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            ("a-job", "short-lived"),
            ("b-job", "short-lived"),
            ("c-job", "long-lived")
        ]
    );
    let a = &listed[0];
    assert_eq!(a.definition, short[1]);
    assert_eq!(a.version, "1.2.3");
    let ttl = a.expires - a.published;
    assert_eq!(ttl, chrono::Duration::seconds(2), "{a:?}");
    let c = &listed[2];
    assert_eq!(c.expires - c.published, chrono::Duration::minutes(10));
    // Publishing again overwrites (one row per job and replica).
    p.publish_definitions("long-lived", "1.2.5", &long, Duration::from_mins(10))
        .await
        .expect("publish again");
    // The short-lived replica's entries expire by the database's clock.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let listed = p.definitions().await.expect("list");
        if listed.iter().all(|e| e.replica != "short-lived") {
            assert_eq!(listed.len(), 1, "{listed:?}");
            assert_eq!(listed[0].version, "1.2.5");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still listed: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Expired rows stay until a publish removes them, any replica's.
    assert_eq!(
        (db.count)(format!("SELECT COUNT(*) FROM {table}_jobs")).await,
        3
    );
    p.publish_definitions("long-lived", "1.2.5", &long, Duration::from_mins(10))
        .await
        .expect("publish removes the expired");
    assert_eq!(
        (db.count)(format!("SELECT COUNT(*) FROM {table}_jobs")).await,
        1
    );
    assert_eq!(p.forget("c-job").await.expect("forget"), 1);
}

async fn replicas_that_disagree_are_both_listed_and_forgotten<P: LockAdmin>(p: &P) {
    p.publish_definitions(
        "pod-2",
        "2.0.0",
        &[Definition::new("report", "report-v2", r#"{"every":"5m"}"#)],
        Duration::from_mins(5),
    )
    .await
    .expect("publish");
    p.publish_definitions(
        "pod-1",
        "1.0.0",
        &[
            Definition::new("report", "report", r#"{"every":"1m"}"#),
            // The same job twice: the last one given wins.
            Definition::new("other", "other", "{}"),
            Definition::new("other", "other", r#"{"twice":true}"#),
        ],
        Duration::from_mins(5),
    )
    .await
    .expect("publish");
    let listed = p.definitions().await.expect("list");
    let report: Vec<_> = listed
        .iter()
        .filter(|e| e.definition.job == "report")
        .map(|e| {
            (
                e.replica.as_str(),
                e.version.as_str(),
                e.definition.lock_name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        report,
        [
            ("pod-1", "1.0.0", "report"),
            ("pod-2", "2.0.0", "report-v2")
        ]
    );
    let other: Vec<_> = listed
        .iter()
        .filter(|e| e.definition.job == "other")
        .collect();
    assert_eq!(other.len(), 1);
    assert_eq!(other[0].definition.spec, r#"{"twice":true}"#);
    assert_eq!(p.forget("report").await.expect("forget"), 2);
    assert_eq!(p.forget("report").await.expect("forget"), 0);
    assert_eq!(p.forget("other").await.expect("forget"), 1);
    assert!(p.definitions().await.expect("list").is_empty());
    // Publishing nothing is fine.
    p.publish_definitions("pod-3", "1.0.0", &[], Duration::from_mins(5))
        .await
        .expect("publish nothing");
}

async fn odd_names_round_trip<P: LockAdmin>(p: &P) {
    let job = "it's a \"quoted\" job; DROP TABLE x; -- ✓ 日本";
    let lock = "lock with spaces, 'quotes' and ünïcödé 🔒";
    let spec = r#"{"name":"it's \"odd\""}"#;
    let replica = "pod 'ä' \"1\"";
    p.publish_definitions(
        replica,
        "1.0.0-β",
        &[Definition::new(job, lock, spec)],
        Duration::from_mins(5),
    )
    .await
    .expect("publish");
    let listed = p.definitions().await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].definition, Definition::new(job, lock, spec));
    assert_eq!(listed[0].replica, replica);
    assert_eq!(listed[0].version, "1.0.0-β");
    // Names that differ only in case are two jobs (binary collation on MySQL).
    p.publish_definitions(
        replica,
        "1.0.0-β",
        &[
            Definition::new(job.to_uppercase(), lock, spec),
            Definition::new(job, lock, spec),
        ],
        Duration::from_mins(5),
    )
    .await
    .expect("publish");
    assert_eq!(p.definitions().await.expect("list").len(), 2);
    assert_eq!(p.forget(job).await.expect("forget"), 1);
    assert_eq!(p.forget(&job.to_uppercase()).await.expect("forget"), 1);
}

/// More jobs than one multi-row upsert takes, 100 on MySQL and SQLite. They are republished with
/// one changed, in one call each.
async fn many_definitions_are_published_at_once<P: LockAdmin>(db: &Db<P>, p: &P, table: &str) {
    let mut defs: Vec<_> = (0..250)
        .map(|i| Definition::new(format!("job-{i:03}"), format!("lock-{i}"), "{}"))
        .collect();
    p.publish_definitions("many", "1", &defs, Duration::from_mins(5))
        .await
        .expect("publish");
    defs[199] = Definition::new("job-199", "lock-199", r#"{"changed":true}"#);
    p.publish_definitions("many", "2", &defs, Duration::from_mins(5))
        .await
        .expect("publish again");
    let listed = p.definitions().await.expect("list");
    assert_eq!(listed.len(), 250);
    assert!(listed.iter().all(|e| e.version == "2"));
    let listed: Vec<_> = listed.into_iter().map(|e| e.definition).collect();
    assert_eq!(listed, defs, "in job order, the last publish's");
    (db.exec)(format!("DELETE FROM {table}_jobs")).await;
}

async fn long_names_are_rejected<P: LockAdmin>(db: &Db<P>, p: &P) {
    let long = "x".repeat(65);
    let e = p
        .publish_definitions(
            "pod",
            "1",
            &[Definition::new("job", &long, "{}")],
            Duration::from_mins(1),
        )
        .await
        .expect_err("too long");
    assert!(e.is_invalid_config(), "{e}");
    assert!(e.to_string().contains("64"), "{e}");
    let e = p.history(&long, 5).await.expect_err("too long");
    assert!(e.is_invalid_config(), "{e}");
    let e = p
        .publish_definitions(
            "pod",
            "1",
            &[Definition::new("j".repeat(256), "l", "{}")],
            Duration::from_mins(1),
        )
        .await
        .expect_err("too long");
    assert!(
        e.is_invalid_config() && e.to_string().contains("255"),
        "{e}"
    );
    let e = p
        .publish_definitions("pod", &"1".repeat(33), &[], Duration::from_mins(1))
        .await
        .expect_err("too long");
    assert!(e.is_invalid_config() && e.to_string().contains("32"), "{e}");
    if let Some(max) = db.longest_table {
        let fits = "t".repeat(max);
        let too_long = "t".repeat(max + 1);
        let _ = (db.provider)(&fits, None);
        let on_long = (db.provider)(&too_long, None);
        let e = on_long.definitions().await.expect_err("too long");
        assert!(e.is_invalid_config(), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("too long") && msg.contains(&format!("at most {max} characters")),
            "{msg}"
        );
    }
}

/// A record of a run of `lock` taken `ago` before now.
fn record(lock: &str, runner: &str) -> LockRecord {
    let now = ms(Utc::now());
    LockRecord::new(lock, runner, now - chrono::Duration::seconds(3), now)
}

async fn history_keeps_the_newest<D: Dialect, P: LockAdmin>(
    db: &Db<P>,
    generic: fn(&P) -> &Provider<D>,
    table: &str,
) where
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> Option<&'q str>: Encode<'q, D> + Type<D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'r> String: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
    D::Arguments: IntoArguments<D>,
{
    let p = (db.provider)(table, Some(HistoryPolicy::keep(3)));
    let off = (db.provider)(table, None);
    let (lock, other) = ("hist 'ä' lock", "other lock");
    let base = ms(Utc::now()) - chrono::Duration::hours(1);
    let outcome = |i: usize| match i % 4 {
        0 => RunOutcome::Succeeded,
        1 => RunOutcome::Failed(format!("error {i}: it's \"bad\" ✗")),
        2 => RunOutcome::Panicked,
        _ => RunOutcome::Cancelled,
    };
    let records: Vec<_> = (0..9)
        .map(|i| (record(lock, &format!("pod-{i}")), i))
        .collect();
    for (rec, i) in &records {
        let fire = base + chrono::Duration::seconds(i64::try_from(*i).expect("small"));
        after_release_run(generic(&p), rec, &RunReport::new(fire, outcome(*i)), BUDGET).await;
        // A provider without a policy writes nothing.
        after_release_run(
            generic(&off),
            rec,
            &RunReport::new(fire, outcome(*i)),
            BUDGET,
        )
        .await;
    }
    let other_rec = record(other, "pod-x");
    after_release_run(
        generic(&p),
        &other_rec,
        &RunReport::new(base, RunOutcome::Succeeded),
        BUDGET,
    )
    .await;
    let kept = off.history(lock, 100).await.expect("read with history off");
    let summary: Vec<(DateTime<Utc>, String, RunOutcome)> = kept
        .iter()
        .map(|e| (e.fire, e.runner.clone(), e.outcome.clone()))
        .collect();
    let expected: Vec<_> = [8usize, 7, 6]
        .iter()
        .map(|&i| {
            (
                base + chrono::Duration::seconds(i64::try_from(i).expect("small")),
                format!("pod-{i}"),
                outcome(i),
            )
        })
        .collect();
    assert_eq!(summary, expected);
    for (entry, &i) in kept.iter().zip(&[8usize, 7, 6]) {
        assert_eq!(entry.lock_name, lock);
        assert_eq!(entry.started, records[i].0.locked_at());
        assert!(entry.ended >= entry.started, "{entry:?}");
    }
    assert_eq!(
        p.history(lock, 2)
            .await
            .expect("read")
            .iter()
            .map(|e| e.fire)
            .collect::<Vec<_>>(),
        [expected[0].0, expected[1].0]
    );
    assert_eq!(
        (db.count)(format!(
            "SELECT COUNT(*) FROM {table}_history WHERE lock_name = 'hist ''ä'' lock'"
        ))
        .await,
        3
    );
    let others: Vec<RunEntry> = p.history(other, 10).await.expect("read");
    assert_eq!(others.len(), 1);
    assert_eq!(others[0].runner, "pod-x");
    assert!(p.history("never ran", 10).await.expect("read").is_empty());
}

async fn history_prunes_by_age<D: Dialect, P: LockAdmin>(
    db: &Db<P>,
    generic: fn(&P) -> &Provider<D>,
    table: &str,
) where
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> Option<&'q str>: Encode<'q, D> + Type<D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'r> String: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
    D::Arguments: IntoArguments<D>,
{
    let p = (db.provider)(
        table,
        Some(HistoryPolicy::keep(100).max_age(Duration::from_mins(10))),
    );
    let lock = "aged";
    let old = db.hour_ago;
    (db.exec)(format!(
        "INSERT INTO {table}_history (lock_name, fire, runner, started, ended, outcome) \
         VALUES ('{lock}', {old}, 'old', {old}, {old}, 'succeeded')"
    ))
    .await;
    let fire = ms(Utc::now());
    let rec = record(lock, "new");
    assert_eq!(p.history(lock, 10).await.expect("read").len(), 1);
    after_release_run(
        generic(&p),
        &rec,
        &RunReport::new(fire, RunOutcome::Failed("x".repeat(5000))),
        BUDGET,
    )
    .await;
    let kept = p.history(lock, 10).await.expect("read");
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].runner, "new");
    assert_eq!(kept[0].fire, fire);
    let error = kept[0].outcome.error().expect("failed");
    assert_eq!(error.chars().count(), shedlock_core::jobs::MAX_ERROR_LEN);
}

async fn a_history_write_that_fails_fails_nothing<D: Dialect, P: LockAdmin>(
    db: &Db<P>,
    generic: fn(&P) -> &Provider<D>,
    table: &str,
) where
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> Option<&'q str>: Encode<'q, D> + Type<D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'r> String: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
    D::Arguments: IntoArguments<D>,
{
    let p = (db.provider)(table, Some(HistoryPolicy::keep(5)));
    let failing = || {
        generic(&p)
            .link()
            .settings
            .history
            .as_ref()
            .expect("a policy")
            .failing()
    };
    let rec = p
        .acquire("dropped", Duration::from_mins(1), "me")
        .await
        .expect("acquire")
        .expect("free");
    (db.exec)(format!("DROP TABLE {table}_history")).await;
    let report = RunReport::new(ms(Utc::now()), RunOutcome::Succeeded);
    after_release_run(generic(&p), &rec, &report, BUDGET).await;
    assert!(failing(), "the failure is noted (logged once)");
    after_release_run(generic(&p), &rec, &report, BUDGET).await;
    assert!(failing());
    // The lock is untouched by it and releases as ever.
    assert!(
        p.release(&rec, Duration::ZERO).await.expect("release"),
        "released"
    );
    let e = p.history("dropped", 5).await.expect_err("no table");
    assert!(e.is_missing_table(), "{e}");
    p.create_table().await.expect("recreate");
    after_release_run(generic(&p), &rec, &report, BUDGET).await;
    assert!(!failing(), "works again");
    assert_eq!(p.history("dropped", 5).await.expect("read").len(), 1);
}

/// Statements that make the database refuse every delete from the `history` table, and those
/// that undo them.
fn refuse_deletes<D: Dialect>(table: &str, history: &str) -> (Vec<String>, Vec<String>) {
    let trigger = format!("{table}_refuse");
    match D::NAME {
        "PostgreSQL" => (
            vec![
                format!(
                    "CREATE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql AS \
                     $$ BEGIN RAISE EXCEPTION 'deletes refused'; END $$"
                ),
                format!(
                    "CREATE TRIGGER {trigger} BEFORE DELETE ON {history} FOR EACH ROW \
                     EXECUTE FUNCTION {trigger}()"
                ),
            ],
            vec![
                format!("DROP TRIGGER {trigger} ON {history}"),
                format!("DROP FUNCTION {trigger}()"),
            ],
        ),
        "MySQL" => (
            vec![format!(
                "CREATE TRIGGER {trigger} BEFORE DELETE ON {history} FOR EACH ROW \
                 SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'deletes refused'"
            )],
            vec![format!("DROP TRIGGER {trigger}")],
        ),
        _ => (
            vec![format!(
                "CREATE TRIGGER {trigger} BEFORE DELETE ON {history} \
                 BEGIN SELECT RAISE(ABORT, 'deletes refused'); END"
            )],
            vec![format!("DROP TRIGGER {trigger}")],
        ),
    }
}

/// A prune the database refuses. On MySQL the entry is written by a call of its own: it stays,
/// and the prune's failure is noted apart from the write's. On Postgres (one statement) and SQLite
/// (one transaction) the write fails as a whole and leaves nothing. A later write prunes.
async fn a_refused_prune<D: Dialect, P: LockAdmin>(
    db: &Db<P>,
    generic: fn(&P) -> &Provider<D>,
    table: &str,
) where
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> Option<&'q str>: Encode<'q, D> + Type<D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'r> String: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
    D::Arguments: IntoArguments<D>,
{
    let p = (db.provider)(table, Some(HistoryPolicy::keep(1)));
    let history = generic(&p)
        .link()
        .settings
        .history
        .as_ref()
        .expect("a policy");
    let lock = "refused prune";
    let write = || async {
        let report = RunReport::new(ms(Utc::now()), RunOutcome::Succeeded);
        after_release_run(generic(&p), &record(lock, "pod"), &report, BUDGET).await;
    };
    let count = || {
        (db.count)(format!(
            "SELECT COUNT(*) FROM {table}_history WHERE lock_name = '{lock}'"
        ))
    };
    write().await;
    assert_eq!(count().await, 1);
    let (refuse, allow) = refuse_deletes::<D>(table, &format!("{table}_history"));
    for sql in refuse {
        (db.exec)(sql).await;
    }
    write().await;
    let apart = D::NAME == "MySQL";
    assert_eq!(
        (history.failing(), history.prune_failing(), count().await),
        if apart {
            (false, true, 2)
        } else {
            (true, false, 1)
        },
        "{}: (write failed, prune failed, entries)",
        D::NAME
    );
    for sql in allow {
        (db.exec)(sql).await;
    }
    write().await;
    assert_eq!(
        (history.failing(), history.prune_failing(), count().await),
        (false, false, 1),
        "{}: a later write prunes",
        D::NAME
    );
}

/// Three jobs that end at the same instant write their history at once, round after round, each
/// from a provider of its own (so each has its own failure flag): every write succeeds and each
/// lock keeps its newest entries. On MariaDB an insert and prune in one transaction deadlocked
/// about one write in ten this way (`tables::portable::record`).
async fn history_writes_of_one_instant_all_succeed<D: Dialect, P: LockAdmin>(
    db: &Db<P>,
    generic: fn(&P) -> &Provider<D>,
    table: &str,
) where
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> Option<&'q str>: Encode<'q, D> + Type<D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'r> String: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
    D::Arguments: IntoArguments<D>,
{
    const ROUNDS: usize = 30;
    const KEEP: u32 = 3;
    let locks = ["instant-a", "instant-b", "instant-c"];
    // One prunes by age too, which reads all of its lock's entries.
    let providers: Vec<P> = [None, Some(Duration::from_hours(1)), None]
        .into_iter()
        .map(|age| {
            let policy = HistoryPolicy::keep(KEEP);
            (db.provider)(table, Some(age.map_or(policy, |age| policy.max_age(age))))
        })
        .collect();
    let barrier = tokio::sync::Barrier::new(locks.len());
    let base = ms(Utc::now());
    let writes = |i: usize| {
        let (lock, p, barrier) = (locks[i], &providers[i], &barrier);
        async move {
            let mut failed = 0;
            for round in 0..ROUNDS {
                let fire = base + chrono::Duration::seconds(i64::try_from(round).expect("small"));
                let rec = record(lock, "pod");
                barrier.wait().await;
                let report = RunReport::new(fire, RunOutcome::Succeeded);
                after_release_run(generic(p), &rec, &report, BUDGET).await;
                let history = generic(p).link().settings.history.as_ref();
                let history = history.expect("a policy");
                if history.failing() || history.prune_failing() {
                    failed += 1;
                }
            }
            failed
        }
    };
    let (a, b, c) = tokio::join!(writes(0), writes(1), writes(2));
    let failed = [a, b, c];
    assert_eq!(failed, [0, 0, 0], "failed writes or prunes of each lock");
    for lock in locks {
        let kept = providers[0].history(lock, 10).await.expect("read");
        let fires: Vec<_> = kept.iter().map(|e| e.fire).collect();
        let newest: Vec<_> = (ROUNDS - KEEP as usize..ROUNDS)
            .rev()
            .map(|r| base + chrono::Duration::seconds(i64::try_from(r).expect("small")))
            .collect();
        assert_eq!(fires, newest, "{lock} keeps its newest {KEEP}");
    }
}

#[tokio::test]
async fn builder_checks_the_history_policy_and_the_derived_names() {
    #[cfg(feature = "postgres")]
    {
        let pool = sqlx::PgPool::connect_lazy("postgres://localhost/none").expect("a valid URL");
        let b = || crate::PgLockProvider::builder(pool.clone());
        let mut zero = HistoryPolicy::keep(1);
        zero.keep = 0;
        let e = b().history(zero).build().expect_err("keep 0");
        assert!(
            e.is_invalid_config() && e.to_string().contains("keep"),
            "{e}"
        );
        let e = b()
            .history(HistoryPolicy::default().max_age(Duration::ZERO))
            .build()
            .expect_err("max_age 0");
        assert!(e.to_string().contains("max_age"), "{e}");
        let e = b()
            .table("t".repeat(52))
            .history(HistoryPolicy::default())
            .build()
            .expect_err("too long");
        let msg = e.to_string();
        assert!(
            e.is_invalid_config()
                && msg.contains("_history_idx")
                && msg.contains("Postgres keeps 63")
                && msg.contains("at most 51 characters"),
            "{msg}"
        );
        b().table(format!("ops.{}", "t".repeat(51)))
            .history(HistoryPolicy::default())
            .build()
            .expect("fits");
        // Without history, a long name builds (the lock table works without the others).
        b().table("t".repeat(63)).build().expect("lock table alone");
    }
}

#[test]
fn the_migrations_hold_the_built_in_ddl() {
    #[cfg(feature = "postgres")]
    crate::tables::assert_migration::<sqlx::Postgres>();
    #[cfg(feature = "mysql")]
    crate::tables::assert_migration::<sqlx::MySql>();
    #[cfg(feature = "sqlite")]
    crate::tables::assert_migration::<sqlx::Sqlite>();
}

/// A [`Db`] on a sqlx pool.
macro_rules! db_on_pool {
    ($pool:expr, $provider:ty, $hour_ago:expr, $longest:expr) => {
        db_on_pool!($pool, $provider, $hour_ago, $longest, false)
    };
    ($pool:expr, $provider:ty, $hour_ago:expr, $longest:expr, $pooler:expr) => {{
        let pool = $pool;
        let (p1, p2, p3) = (pool.clone(), pool.clone(), pool.clone());
        Db {
            provider: Box::new(move |table: &str, history: Option<HistoryPolicy>| {
                let b = <$provider>::builder(p1.clone())
                    .table(table)
                    .transaction_pooler($pooler);
                match history {
                    Some(policy) => b.history(policy),
                    None => b,
                }
                .build()
                .expect("valid")
            }),
            exec: Box::new(move |sql: String| {
                let pool = p2.clone();
                Box::pin(async move {
                    pool.execute(sqlx::AssertSqlSafe(sql.clone()))
                        .await
                        .unwrap_or_else(|e| panic!("{sql}: {e}"));
                })
            }),
            count: Box::new(move |sql: String| {
                let pool = p3.clone();
                Box::pin(async move {
                    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.clone()))
                        .fetch_one(&pool)
                        .await
                        .unwrap_or_else(|e| panic!("{sql}: {e}"))
                })
            }),
            hour_ago: $hour_ago,
            longest_table: $longest,
        }
    }};
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn postgres_keeps_definitions_and_history() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let pool = crate::PgLockProvider::pool_options()
        .connect(&url)
        .await
        .expect("connect");
    let db = db_on_pool!(
        pool,
        crate::PgLockProvider,
        "timezone('UTC', now()) - interval '1 hour'",
        Some(51)
    );
    every_check(&db, crate::PgLockProvider::generic).await;
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn mysql_keeps_definitions_and_history() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let pool = crate::MySqlLockProvider::pool_options()
        .connect(&url)
        .await
        .expect("connect");
    let db = db_on_pool!(
        pool,
        crate::MySqlLockProvider,
        "TIMESTAMPADD(HOUR, -1, UTC_TIMESTAMP(3))",
        Some(56)
    );
    every_check(&db, crate::MySqlLockProvider::generic).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_keeps_definitions_and_history() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("jobs.db").display());
    let pool = crate::SqliteLockProvider::pool_options()
        .connect(&url)
        .await
        .expect("open");
    let db = db_on_pool!(
        pool,
        crate::SqliteLockProvider,
        "strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 hour')",
        None
    );
    every_check(&db, crate::SqliteLockProvider::generic).await;
}

/// Behind a transaction pooler the statements go unnamed, and a transaction of several is the
/// pooler's unit. The same checks pass. MySQL's publish is a transaction.
#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn mysql_keeps_definitions_and_history_behind_a_transaction_pooler() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let pool = crate::MySqlLockProvider::pool_options()
        .connect(&url)
        .await
        .expect("connect");
    let db = db_on_pool!(
        pool,
        crate::MySqlLockProvider,
        "TIMESTAMPADD(HOUR, -1, UTC_TIMESTAMP(3))",
        Some(56),
        true
    );
    every_check(&db, crate::MySqlLockProvider::generic).await;
}
