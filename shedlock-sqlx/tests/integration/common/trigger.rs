//! The run-now cases every SQL database runs, over [`Store`]: the core's `TriggerSuite` on our DDL
//! and on Java ShedLock's table upgraded by the migrations, and tables without the trigger columns
//! (Java ShedLock's): plain locks work, and triggers answer a schema error naming what is missing,
//! writing nothing.

use std::time::Duration;

use shedlock_core::admin::LockAdmin;
use shedlock_core::provider::LockProvider;
use shedlock_core::testkit::TriggerSuite;
use shedlock_core::trigger::{TriggerAnswer, TriggerClaim};

use super::suite::{Store, migration};

const MIN: Duration = Duration::from_mins(1);
/// The trigger columns, as the migration names them.
const TRIGGER_COLUMNS: [&str; 6] = [
    "trigger_id",
    "trigger_at",
    "trigger_expires",
    "trigger_by",
    "trigger_taken_by",
    "trigger_taken_at",
];

/// The core's `TriggerSuite` on our DDL: every case passes (Postgres's includes its push).
pub(crate) async fn the_trigger_suite_passes<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    TriggerSuite::new(provider).run().await;
    db.drop_table(&table).await;
}

/// The core's `TriggerSuite` on Java ShedLock's table upgraded with `0002_last_fire.sql`,
/// `0005_pause.sql` and `0006_trigger.sql`: no token column, so claims take the lock without a
/// token.
pub(crate) async fn the_trigger_suite_passes_on_a_java_table_with_0002_0005_and_0006<S: Store>() {
    let Some(db) = S::open().await else { return };
    let table = db.table_name();
    db.execute(S::java_ddl(&table)).await;
    for file in ["0002_last_fire.sql", "0005_pause.sql", "0006_trigger.sql"] {
        for statement in migration::<S>(file, &table).split(';') {
            db.execute(statement.trim().to_owned()).await;
        }
    }
    let provider = db.on_table(&table).await;
    let TriggerAnswer::Requested(trigger) = provider.trigger("probe", "ann", MIN).await.unwrap()
    else {
        panic!("a trigger of a free name is written");
    };
    let TriggerClaim::Claimed(record) = provider
        .claim_trigger("probe", trigger.id, MIN, "me")
        .await
        .unwrap()
    else {
        panic!("the pending trigger is claimed");
    };
    assert_eq!(record.fencing_token(), None, "no token column");
    assert_eq!(
        provider.holder("probe").await.unwrap(),
        Some(record.clone())
    );
    assert!(provider.release(&record, Duration::ZERO).await.unwrap());
    TriggerSuite::new(provider).run().await;
    db.drop_table(&table).await;
}

/// Java ShedLock's table: plain locks work; `trigger` answers a schema error naming the columns
/// and the migration, writing nothing; `pending_triggers` and `claim_trigger` answer the same kind
/// (the scheduler's "not set up").
pub(crate) async fn a_java_table_keeps_plain_locks_and_refuses_triggers<S: Store>() {
    let Some(db) = S::open().await else { return };
    let table = db.table_name();
    db.execute(S::java_ddl(&table)).await;
    let provider = db.on_table(&table).await;
    let record = provider.acquire("plain", MIN, "me").await.unwrap().unwrap();
    assert!(provider.release(&record, Duration::ZERO).await.unwrap());
    let err = provider.trigger("job", "ann", MIN).await.unwrap_err();
    assert!(err.is_schema(), "{err}");
    let text = err.to_string();
    for column in TRIGGER_COLUMNS {
        assert!(text.contains(column), "{text} names {column}");
    }
    assert!(
        text.contains(&format!("migrations/{}/0006_trigger.sql", S::MIGRATIONS)),
        "{text}"
    );
    assert!(
        provider.entry("job").await.unwrap().is_none(),
        "a refused trigger writes no row"
    );
    let err = provider.pending_triggers().await.unwrap_err();
    assert!(err.is_schema(), "{err}");
    let err = provider
        .claim_trigger("job", 1, MIN, "me")
        .await
        .unwrap_err();
    assert!(err.is_schema(), "{err}");
    let record = provider.acquire("plain", MIN, "me").await.unwrap().unwrap();
    assert!(provider.release(&record, Duration::ZERO).await.unwrap());
    db.drop_table(&table).await;
}

/// A listing shows each row's last trigger: pending, then taken by the claimer; refused triggers
/// change nothing, and a claim never writes the recorded fire.
pub(crate) async fn the_listing_shows_the_trigger_and_a_claim_records_no_fire<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    let TriggerAnswer::Requested(trigger) = provider.trigger("job", "ann", MIN).await.unwrap()
    else {
        panic!("a trigger of a free name is written");
    };
    let entry = provider.entry("job").await.unwrap().unwrap();
    assert_eq!(entry.trigger(), Some(&trigger));
    assert!(!entry.is_held(), "the row a trigger creates is free");
    assert_eq!(
        provider.trigger("job", "bob", MIN).await.unwrap(),
        TriggerAnswer::Pending(trigger.clone())
    );
    let pending = provider.pending_triggers().await.unwrap();
    assert!(
        pending
            .iter()
            .any(|p| p.lock_name == "job" && p.id == trigger.id)
    );
    let TriggerClaim::Claimed(record) = provider
        .claim_trigger("job", trigger.id, MIN, "replica-a")
        .await
        .map_err(|e| format!("{e:?}"))
        .unwrap()
    else {
        panic!("the pending trigger is claimed");
    };
    let entry = provider.entry("job").await.unwrap().unwrap();
    let taken = entry.trigger().unwrap();
    assert_eq!(taken.taken_by.as_deref(), Some("replica-a"));
    assert!(taken.taken_at.is_some());
    assert_eq!(entry.last_fire(), None, "a claim never records a fire");
    assert_eq!(entry.record(), &record);
    assert!(provider.pending_triggers().await.unwrap().is_empty());
    assert!(matches!(
        provider
            .claim_trigger("job", trigger.id, MIN, "replica-b")
            .await
            .unwrap(),
        TriggerClaim::Gone { .. }
    ));
    assert!(matches!(
        provider.trigger("job", "bob", MIN).await.unwrap(),
        TriggerAnswer::Held(held) if held == record
    ));
    db.drop_table(&table).await;
}

/// Java ShedLock's table with `0006_trigger.sql` only (no token, no `last_fire`, no pause
/// columns): triggers work without a pause to check or a last action to record, and a claim takes
/// the lock without a token.
pub(crate) async fn triggers_work_on_a_java_table_with_0006_only<S: Store>() {
    let Some(db) = S::open().await else { return };
    let table = db.table_name();
    db.execute(S::java_ddl(&table)).await;
    for statement in migration::<S>("0006_trigger.sql", &table).split(';') {
        db.execute(statement.trim().to_owned()).await;
    }
    let provider = db.on_table(&table).await;
    let TriggerAnswer::Requested(trigger) = provider.trigger("job", "ann", MIN).await.unwrap()
    else {
        panic!("a trigger of a free name is written");
    };
    assert_eq!(
        provider.trigger("job", "bob", MIN).await.unwrap(),
        TriggerAnswer::Pending(trigger.clone())
    );
    let TriggerClaim::Claimed(record) = provider
        .claim_trigger("job", trigger.id, MIN, "me")
        .await
        .unwrap()
    else {
        panic!("the pending trigger is claimed");
    };
    assert_eq!(record.fencing_token(), None, "no token column");
    let entry = provider.entry("job").await.unwrap().unwrap();
    assert_eq!(entry.last_action(), None, "no action columns");
    assert_eq!(
        entry.trigger().and_then(|t| t.taken_by.as_deref()),
        Some("me")
    );
    assert!(matches!(
        provider.trigger("job", "bob", MIN).await.unwrap(),
        TriggerAnswer::Held(held) if held == record
    ));
    assert!(provider.release(&record, Duration::ZERO).await.unwrap());
    db.drop_table(&table).await;
}
