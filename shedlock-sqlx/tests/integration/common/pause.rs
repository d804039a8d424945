//! The pause cases every SQL database runs, over [`Store`]: the core's `PauseSuite` on our DDL,
//! and what is ours: the pause columns read back as written, the fire claim's order on the
//! database's clock, free rows made by a pause, refused input writing nothing, and tables without
//! the columns (Java ShedLock's, those of migrations 0001 to 0004, a partial set).

use std::time::Duration;

use chrono::{DateTime, Utc};
use shedlock_core::admin::{ActionKind, AdminAction, LockAdmin, LockEntry};
use shedlock_core::jobs::JobState;
use shedlock_core::pause::{Pause, PauseFor};
use shedlock_core::provider::{ClaimRequest, Fire, FireClaim, LockProvider, LockRecord};
use shedlock_core::testkit::PauseSuite;
use shedlock_sqlx::sqlx;

use super::suite::{Store, migration, quoted};

const MIN: Duration = Duration::from_mins(1);
const ANN: &str = "ann@ops-host";
const BOB: &str = "bob <on-call>";
/// The pause columns, as the migration names them.
const PAUSE_COLUMNS: [&str; 7] = [
    "paused_at",
    "paused_until",
    "paused_by",
    "paused_reason",
    "last_action",
    "last_action_by",
    "last_action_at",
];

/// What an entry keeps, without the store's now it was read at.
type Kept = (
    LockRecord,
    Option<DateTime<Utc>>,
    Option<JobState>,
    Option<Pause>,
    Option<AdminAction>,
);

/// Every row of `provider`'s table, as kept.
async fn rows(provider: &impl LockAdmin) -> Vec<Kept> {
    provider
        .list()
        .await
        .expect("list")
        .iter()
        .map(kept)
        .collect()
}

fn kept(entry: &LockEntry) -> Kept {
    (
        entry.record().clone(),
        entry.last_fire(),
        entry.state().cloned(),
        entry.pause().cloned(),
        entry.last_action().cloned(),
    )
}

async fn entry(provider: &impl LockAdmin, name: &str) -> LockEntry {
    provider
        .entry(name)
        .await
        .expect("entry")
        .unwrap_or_else(|| panic!("a row for {name:?}"))
}

/// The store's clock, from a claim of a fire a year ahead (always too early, writes nothing).
async fn store_now(provider: &impl LockProvider) -> DateTime<Utc> {
    let far = Utc::now() + chrono::Duration::days(365);
    let fire = Fire::new(far, far + chrono::Duration::seconds(1)).unwrap();
    match provider
        .claim_fire("clock-probe", &fire, MIN, "probe")
        .await
    {
        Ok(FireClaim::TooEarly { now }) => now,
        other => panic!("a fire a year ahead: {other:?}"),
    }
}

/// A fire in whole seconds whose window, `minutes` long, holds the store's now.
async fn open_fire(provider: &impl LockProvider, minutes: i64) -> Fire {
    let now = store_now(provider).await;
    let at = DateTime::from_timestamp(now.timestamp() - 1, 0).unwrap();
    Fire::new(at, at + chrono::Duration::minutes(minutes)).unwrap()
}

/// The last action of `name`'s row: what, by whom, and that it was at most a minute before the
/// store's now.
async fn last_action(provider: &impl LockAdmin, name: &str) -> (ActionKind, String) {
    let entry = entry(provider, name).await;
    let action = entry
        .last_action()
        .cloned()
        .unwrap_or_else(|| panic!("{name:?} records its last action"));
    let ago = entry.store_now() - action.at;
    assert!(
        ago >= chrono::Duration::zero() && ago < chrono::Duration::minutes(1),
        "{action} read at {}",
        entry.store_now()
    );
    (action.kind, action.by)
}

/// The core's `PauseSuite` on our DDL: every case passes.
pub(crate) async fn the_pause_suite_passes<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    PauseSuite::new(provider).run().await;
    db.drop_table(&table).await;
}

/// The core's `PauseSuite` on Java ShedLock's table upgraded with `0002_last_fire.sql` and
/// `0005_pause.sql`: no token column, so claims, unlocks and the rows a pause creates go without
/// tokens.
pub(crate) async fn the_pause_suite_passes_on_a_java_table_with_0002_and_0005<S: Store>() {
    let Some(db) = S::open().await else { return };
    let table = db.table_name();
    db.execute(S::java_ddl(&table)).await;
    for file in ["0002_last_fire.sql", "0005_pause.sql"] {
        for statement in migration::<S>(file, &table).split(';') {
            db.execute(statement.trim().to_owned()).await;
        }
    }
    let provider = db.on_table(&table).await;
    let record = provider.acquire("probe", MIN, "me").await.unwrap().unwrap();
    assert_eq!(record.fencing_token(), None, "no token column");
    assert!(provider.unlock(&record, ANN).await.unwrap());
    assert_eq!(
        last_action(&provider, "probe").await,
        (ActionKind::Unlocked, ANN.to_owned())
    );
    PauseSuite::new(provider).run().await;
    db.drop_table(&table).await;
}

/// Java ShedLock's table with `0005_pause.sql` but without `0002_last_fire.sql`: schedulers use
/// plain locks there, which ignore pauses, so a pause is refused with what to add, and nothing is
/// written.
pub(crate) async fn a_pause_without_last_fire_is_refused<S: Store>() {
    let Some(db) = S::open().await else { return };
    let table = db.table_name();
    db.execute(S::java_ddl(&table)).await;
    for statement in migration::<S>("0005_pause.sql", &table).split(';') {
        db.execute(statement.trim().to_owned()).await;
    }
    let provider = db.on_table(&table).await;
    let err = provider
        .pause("job", PauseFor::UntilResumed, None, ANN)
        .await
        .unwrap_err();
    assert!(
        err.is_schema() && err.to_string().contains("0002_last_fire.sql"),
        "{err}"
    );
    assert!(
        provider.entry("job").await.unwrap().is_none(),
        "nothing written"
    );
    db.drop_table(&table).await;
}

/// A paused job's fire is answered `Paused` after "too early" and "window passed" and before
/// "claimed elsewhere" and "held", in the claim's one step, and writes nothing; the pause reads
/// back as `pause` returned it; acquire, extend and release ignore it.
pub(crate) async fn a_paused_fire_is_refused_in_order_and_writes_nothing<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    let name = "nightly";
    let fire = open_fire(&provider, 10).await;
    let first = provider
        .claim_fire(name, &fire, MIN, "a")
        .await
        .unwrap()
        .claimed()
        .cloned()
        .expect("the first claim wins");
    assert!(provider.release(&first, Duration::ZERO).await.unwrap());

    let pause = provider
        .pause(
            name,
            PauseFor::UntilResumed,
            Some("upstream \"x\" down"),
            ANN,
        )
        .await
        .unwrap();
    assert_eq!(
        (pause.by.as_str(), pause.until, pause.reason.as_deref()),
        (ANN, None, Some("upstream \"x\" down"))
    );
    let row = entry(&provider, name).await;
    assert_eq!(row.pause(), Some(&pause), "read back as returned");
    assert!(row.is_paused());
    assert_eq!(row.last_fire(), Some(fire.at()), "the pause keeps the fire");
    assert_eq!(
        row.record(),
        &first.clone().with_lock_until(row.record().lock_until())
    );

    // The same fire, claimed already: Paused, not ClaimedElsewhere; nothing written.
    let before = rows(&provider).await;
    match provider.claim_fire(name, &fire, MIN, "b").await.unwrap() {
        FireClaim::Paused { now, until } => {
            assert_eq!(until, None);
            assert!(
                now >= pause.since,
                "{now} before the pause at {}",
                pause.since
            );
        }
        other => panic!("a recorded fire of a paused job: {other:?}"),
    }
    assert_eq!(
        rows(&provider).await,
        before,
        "a refused claim writes nothing"
    );
    // A later fire, the lock held (acquire ignores the pause): Paused, not Held.
    let held = provider
        .acquire(name, MIN, "runner")
        .await
        .unwrap()
        .expect("acquire ignores a pause");
    let later = Fire::new(fire.at() + chrono::Duration::seconds(1), fire.next()).unwrap();
    let before = rows(&provider).await;
    assert!(matches!(
        provider.claim_fire(name, &later, MIN, "b").await.unwrap(),
        FireClaim::Paused { until: None, .. }
    ));
    assert_eq!(
        rows(&provider).await,
        before,
        "a refused claim writes nothing"
    );
    assert!(provider.extend(&held, MIN).await.unwrap().is_some());
    assert!(provider.release(&held, Duration::ZERO).await.unwrap());
    paused_alone_in_a_batch(&provider, name, &later).await;
    // The window passed, or not yet open: those answers come first.
    let now = store_now(&provider).await;
    let past = DateTime::from_timestamp(now.timestamp() - 120, 0).unwrap();
    let gone = Fire::new(past, past + chrono::Duration::minutes(1)).unwrap();
    assert!(matches!(
        provider.claim_fire(name, &gone, MIN, "b").await.unwrap(),
        FireClaim::WindowPassed { .. }
    ));
    let ahead = Fire::new(
        now + chrono::Duration::hours(1),
        now + chrono::Duration::hours(2),
    )
    .unwrap();
    assert!(matches!(
        provider.claim_fire(name, &ahead, MIN, "b").await.unwrap(),
        FireClaim::TooEarly { .. }
    ));
    let row = entry(&provider, name).await;
    assert_eq!(
        row.last_fire(),
        Some(fire.at()),
        "no refused claim recorded a fire"
    );
    assert_eq!(row.pause(), Some(&pause));
    db.drop_table(&table).await;
}

/// A batch of a paused job's fire beside a free job's: `Paused` for the paused one alone, whose
/// row is untouched; the other is claimed.
async fn paused_alone_in_a_batch<P: LockProvider + LockAdmin>(
    provider: &P,
    name: &str,
    later: &Fire,
) {
    let before = rows(provider).await;
    let claims = [
        ClaimRequest::new(name, later, MIN),
        ClaimRequest::new("daily", later, MIN),
    ];
    let batch = provider.claim_fires(&claims, "b").await.unwrap();
    let daily = match batch.as_slice() {
        [
            Ok(FireClaim::Paused { until: None, .. }),
            Ok(FireClaim::Claimed(daily)),
        ] => daily,
        other => panic!("a batch of a paused job and a free one: {other:?}"),
    };
    assert!(provider.release(daily, Duration::ZERO).await.unwrap());
    let after = rows(provider).await;
    assert_eq!(
        after.iter().find(|r| r.0.name() == name),
        before.iter().find(|r| r.0.name() == name),
        "the paused job's row is untouched"
    );
}

/// Pause, resume and unlock record their actor as the row's last action; a resume returns the
/// pause as stored and the next fire is claimed; a resume without a pause writes nothing.
pub(crate) async fn pause_resume_and_unlock_record_their_actor<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    let name = "nightly";
    let pause = provider
        .pause(name, PauseFor::UntilResumed, None, ANN)
        .await
        .unwrap();
    assert_eq!(
        last_action(&provider, name).await,
        (ActionKind::Paused, ANN.to_owned())
    );
    let fire = open_fire(&provider, 10).await;
    assert!(matches!(
        provider.claim_fire(name, &fire, MIN, "a").await.unwrap(),
        FireClaim::Paused { .. }
    ));
    assert_eq!(provider.resume(name, BOB).await.unwrap(), Some(pause));
    assert_eq!(
        last_action(&provider, name).await,
        (ActionKind::Resumed, BOB.to_owned())
    );
    assert_eq!(entry(&provider, name).await.pause(), None);
    let before = rows(&provider).await;
    assert_eq!(
        provider.resume(name, ANN).await.unwrap(),
        None,
        "no pause left"
    );
    assert_eq!(provider.resume("no-row", ANN).await.unwrap(), None);
    assert_eq!(
        rows(&provider).await,
        before,
        "a resume without a pause writes nothing"
    );
    let claimed = provider
        .claim_fire(name, &fire, MIN, "a")
        .await
        .unwrap()
        .claimed()
        .cloned()
        .expect("claimed after the resume");
    // Unlock records its actor, in the same statement that frees the lock.
    assert!(provider.unlock(&claimed, "carol").await.unwrap());
    assert_eq!(
        last_action(&provider, name).await,
        (ActionKind::Unlocked, "carol".to_owned())
    );
    assert!(!entry(&provider, name).await.is_held());
    // An unlock that frees nothing records nothing.
    assert!(!provider.unlock(&claimed, "dave").await.unwrap());
    assert_eq!(
        last_action(&provider, name).await,
        (ActionKind::Unlocked, "carol".to_owned())
    );
    db.drop_table(&table).await;
}

/// A pause for a length ends by itself on the database's clock: until then a claim answers
/// `Paused` with the stored end, then the same fire is claimed. A resume then still returns the
/// pause, ended.
pub(crate) async fn a_pause_for_a_length_ends_by_itself<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    let name = "hourly";
    let fire = open_fire(&provider, 10).await;
    let pause = provider
        .pause(name, PauseFor::For(Duration::from_millis(1_500)), None, ANN)
        .await
        .unwrap();
    let until = pause.until.expect("an end");
    let length = until - pause.since;
    assert!(
        length >= chrono::Duration::milliseconds(1_500)
            && length < chrono::Duration::milliseconds(1_502),
        "{length}"
    );
    assert_eq!(entry(&provider, name).await.pause(), Some(&pause));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut refused = 0;
    let record = loop {
        match provider.claim_fire(name, &fire, MIN, "a").await.unwrap() {
            FireClaim::Paused { now, until: end } => {
                assert_eq!(end, Some(until));
                assert!(now < until, "refused at {now}, after the end {until}");
                refused += 1;
            }
            FireClaim::Claimed(record) => break record,
            other => panic!("during a pause: {other:?}"),
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pause did not end"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(refused > 0, "the first claim came before the end");
    assert!(record.locked_at() >= until, "{record} before {until}");
    let ended = provider.resume(name, BOB).await.unwrap();
    assert_eq!(
        ended,
        Some(pause),
        "an ended pause is still removed and returned"
    );
    db.drop_table(&table).await;
}

/// A pause of a name without a row creates it free (no owner, not held); the next acquire
/// takes it with a fresh token, and keeps the pause.
pub(crate) async fn a_pause_of_a_name_without_a_row_creates_it_free<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    let name = "never-ran";
    let pause = provider
        .pause(name, PauseFor::UntilResumed, None, ANN)
        .await
        .unwrap();
    let row = entry(&provider, name).await;
    assert!(!row.is_held());
    assert_eq!(row.record().owner(), "");
    assert_eq!(row.last_fire(), None);
    assert_eq!(row.pause(), Some(&pause));
    assert_eq!(provider.holder(name).await.unwrap(), None);
    let record = provider
        .acquire(name, MIN, "me")
        .await
        .unwrap()
        .expect("a pause's free row is taken");
    let token = record.fencing_token().expect("our DDL has tokens");
    assert!(token > 0, "a fresh token: {record}");
    assert!(provider.release(&record, Duration::ZERO).await.unwrap());
    let again = provider.acquire(name, MIN, "me").await.unwrap().unwrap();
    assert!(again.fencing_token() > Some(token));
    assert_eq!(
        entry(&provider, name).await.pause(),
        Some(&pause),
        "acquire keeps it"
    );
    db.drop_table(&table).await;
}

/// An end not after the database's now, a zero length, a name over the limit, a bad actor or
/// reason: an invalid-configuration error, and nothing written. A name with quotes is bound.
pub(crate) async fn bad_pauses_are_refused_and_write_nothing<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    let odd = "a'b\"c";
    provider.acquire("held", MIN, "me").await.unwrap().unwrap();
    let before = rows(&provider).await;
    let now = store_now(&provider).await;
    let long = "n".repeat(65);
    let bad: Vec<(&str, PauseFor, Option<String>, &str)> = vec![
        (
            odd,
            PauseFor::Until(now - chrono::Duration::hours(1)),
            None,
            ANN,
        ),
        ("held", PauseFor::Until(now), None, ANN),
        ("held", PauseFor::For(Duration::ZERO), None, ANN),
        (&long, PauseFor::UntilResumed, None, ANN),
        (odd, PauseFor::UntilResumed, None, ""),
        (odd, PauseFor::UntilResumed, None, "evil\u{1b}[2J"),
        (
            odd,
            PauseFor::UntilResumed,
            Some("two\nlines".to_owned()),
            ANN,
        ),
        ("held", PauseFor::UntilResumed, Some("r".repeat(256)), ANN),
    ];
    for (name, how_long, reason, actor) in bad {
        let err = provider
            .pause(name, how_long, reason.as_deref(), actor)
            .await
            .expect_err("refused");
        assert!(err.is_invalid_config(), "{name:?} {how_long:?}: {err}");
    }
    for (name, actor) in [(long.as_str(), ANN), (odd, " ")] {
        let err = provider.resume(name, actor).await.unwrap_err();
        assert!(err.is_invalid_config(), "{err}");
    }
    assert_eq!(rows(&provider).await, before, "nothing written");

    let reason = "é".repeat(255);
    let pause = provider
        .pause(odd, PauseFor::UntilResumed, Some(&reason), &"o".repeat(255))
        .await
        .unwrap();
    assert_eq!(entry(&provider, odd).await.pause(), Some(&pause));
    assert_eq!(provider.resume(odd, ANN).await.unwrap(), Some(pause));
    db.drop_table(&table).await;
}

/// Java ShedLock's table: plain locks work, entries carry no pause or action, an unlock works
/// without recording one; pause and resume are schema errors naming every pause column and the
/// migration, and write nothing.
pub(crate) async fn a_java_table_keeps_plain_locks_and_refuses_pauses<S: Store>() {
    let Some(db) = S::open().await else { return };
    let table = db.table_name();
    db.execute(S::java_ddl(&table)).await;
    let provider = db.on_table(&table).await;
    let record = provider.acquire("job", MIN, "me").await.unwrap().unwrap();
    let row = entry(&provider, "job").await;
    assert_eq!((row.pause(), row.last_action()), (None, None));
    assert!(provider.unlock(&record, ANN).await.unwrap());
    assert_eq!(entry(&provider, "job").await.last_action(), None);
    let before = rows(&provider).await;
    for name in ["job", "no-row"] {
        let err = provider
            .pause(name, PauseFor::UntilResumed, None, ANN)
            .await
            .unwrap_err();
        assert_missing_pause_columns::<S>(&err, &table, &PAUSE_COLUMNS);
        let err = provider.resume(name, ANN).await.unwrap_err();
        assert_missing_pause_columns::<S>(&err, &table, &PAUSE_COLUMNS);
    }
    assert_eq!(rows(&provider).await, before, "nothing written");
    let again = provider.acquire("job", MIN, "you").await.unwrap();
    assert!(again.is_some(), "plain locks still work");
    db.drop_table(&table).await;
}

fn assert_missing_pause_columns<S: Store>(
    err: &shedlock_core::Error,
    table: &str,
    missing: &[&str],
) {
    assert!(err.is_schema(), "{err}");
    let message = err.to_string();
    for column in PAUSE_COLUMNS {
        assert_eq!(
            message.contains(&format!("ADD COLUMN {}", quoted_column::<S>(column))),
            missing.contains(&column),
            "{column}: {message}"
        );
    }
    let file = format!("migrations/{}/0005_pause.sql", S::MIGRATIONS);
    assert!(message.contains(&file), "{message}");
    assert!(
        message.contains(&format!("ALTER TABLE {}", quoted::<S>(table))),
        "{message}"
    );
}

fn quoted_column<S: Store>(column: &str) -> String {
    if S::MIGRATIONS == "mysql" {
        format!("`{column}`")
    } else {
        format!("\"{column}\"")
    }
}

/// A table of migrations 0001 to 0004 has no pause (a schema error, `missing_ddl` lists the
/// columns); with part of 0005 it still counts as without, naming the rest; with all of 0005 (and
/// a new provider) pauses work, and nothing is missing.
pub(crate) async fn migration_0005_adds_the_pause<S: Store>() {
    let Some(db) = S::open().await else { return };
    let table = db.table_name();
    for file in [
        "0001_shedlock.sql",
        "0002_last_fire.sql",
        "0003_job_state.sql",
        "0004_jobs_and_history.sql",
    ] {
        for statement in migration::<S>(file, &table).split(';') {
            db.execute(statement.trim().to_owned()).await;
        }
    }
    let provider = db.on_table(&table).await;
    let err = provider
        .pause("job", PauseFor::UntilResumed, None, ANN)
        .await
        .unwrap_err();
    assert_missing_pause_columns::<S>(&err, &table, &PAUSE_COLUMNS);
    let ddl = provider
        .missing_ddl()
        .await
        .unwrap()
        .expect("the pause columns");
    // The pause columns, then the trigger columns of 0006.
    assert_eq!(ddl.lines().count(), PAUSE_COLUMNS.len() + 6, "{ddl}");
    // A fire is claimed as before, with no pause to check.
    let fire = open_fire(&provider, 10).await;
    let claimed = provider.claim_fire("job", &fire, MIN, "a").await.unwrap();
    let claimed = claimed.claimed().cloned().expect("claimed");
    assert!(provider.release(&claimed, Duration::ZERO).await.unwrap());

    let statements: Vec<String> = migration::<S>("0005_pause.sql", &table)
        .split(';')
        .map(|s| s.trim().to_owned())
        .collect();
    for statement in &statements[..3] {
        db.execute(statement.clone()).await;
    }
    let partial = db.on_table(&table).await;
    let err = partial
        .pause("job", PauseFor::UntilResumed, None, ANN)
        .await
        .unwrap_err();
    assert_missing_pause_columns::<S>(&err, &table, &PAUSE_COLUMNS[3..]);
    for statement in &statements[3..] {
        db.execute(statement.clone()).await;
    }
    let err = partial
        .pause("job", PauseFor::UntilResumed, None, ANN)
        .await
        .unwrap_err();
    assert!(
        err.is_schema() && err.to_string().contains("restart"),
        "a provider that looked before: {err}"
    );
    for statement in migration::<S>("0006_trigger.sql", &table).split(';') {
        db.execute(statement.trim().to_owned()).await;
    }
    let upgraded = db.on_table(&table).await;
    assert_eq!(upgraded.missing_ddl().await.unwrap(), None);
    upgraded
        .pause("job", PauseFor::UntilResumed, None, ANN)
        .await
        .unwrap();
    let later = Fire::new(fire.at() + chrono::Duration::seconds(1), fire.next()).unwrap();
    assert!(matches!(
        upgraded.claim_fire("job", &later, MIN, "b").await.unwrap(),
        FireClaim::Paused { .. }
    ));
    // The provider that looked before the upgrade claims as it did: it does not see pauses.
    let old = provider.claim_fire("job", &later, MIN, "b").await.unwrap();
    assert!(old.claimed().is_some(), "{old:?}");
    db.drop_table(&table).await;
}

/// A pause committed after the claim read the row and before its write is honoured: a
/// transaction on `pool` sets a pause on the free row of `name` in `provider`'s `table` and
/// holds the row lock; the claim reads the row as it was (unpaused, as MySQL's look and
/// Postgres's snapshot do) and its write waits for the lock; once `lock_waits` (SQL counting the
/// sessions running or waiting in an `UPDATE` naming the table, given `%table%`) sees it, the
/// pause commits. The write then finds the pause and claims nothing, and the
/// claim answers `Paused`. `now` is the database's now in SQL. `provider`'s call timeout must be
/// above 20 s, the longest this waits for the lock wait on a busy machine.
pub(crate) async fn a_pause_committed_during_a_claim_is_honoured<DB, P>(
    pool: &sqlx::Pool<DB>,
    provider: P,
    table: &str,
    now: &str,
    lock_waits: &str,
) where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> <DB as sqlx::Database>::Arguments: sqlx::IntoArguments<DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
    P: LockAdmin + Clone + 'static,
{
    let name = "raced";
    let record = provider.acquire(name, MIN, "me").await.unwrap().unwrap();
    assert!(provider.release(&record, Duration::ZERO).await.unwrap());
    let fire = open_fire(&provider, 10).await;
    let mut tx = pool.begin().await.expect("begin");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE {table} SET paused_at = {now}, paused_by = 'ann' WHERE name = 'raced'"
    )))
    .execute(&mut *tx)
    .await
    .expect("pause in a transaction");
    let claimer = provider.clone();
    let claim =
        tokio::spawn(async move { claimer.claim_fire(name, &fire, MIN, "a").await.unwrap() });
    // Within the call timeout of `provider`, which must be longer.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (waiting,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(lock_waits.to_owned()))
            .bind(format!("%{table}%"))
            .fetch_one(pool)
            .await
            .expect("lock waits");
        if waiting > 0 {
            break;
        }
        assert!(
            !claim.is_finished(),
            "the claim did not wait for the pause's row lock"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "no lock wait seen for the claim's write"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tx.commit().await.expect("commit the pause");
    match claim.await.expect("the claim") {
        FireClaim::Paused { until: None, .. } => {}
        other => panic!("a pause committed during the claim: {other:?}"),
    }
    let row = entry(&provider, name).await;
    assert_eq!(row.last_fire(), None, "nothing claimed");
    assert_eq!(row.record().owner(), "me");
}
