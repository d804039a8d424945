#![allow(
    unused_macros,
    unused_imports,
    reason = "not every test file runs the suite"
)]
//! The store test cases every SQL database runs, written once over [`Store`]; each database's
//! test file implements [`Store`] and instantiates the cases with [`store_suite!`].

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use shedlock_core::admin::LockEntry;
use shedlock_core::jobs::{JobState, MAX_ERROR_LEN, RunOutcome, RunReport};
use shedlock_core::provider::{Fire, FireClaim, LockProvider, LockRecord};
use shedlock_core::testkit::{ConformanceSuite, JobStateSuite};
use tokio::sync::Barrier;

pub(crate) use super::pause::{
    a_java_table_keeps_plain_locks_and_refuses_pauses, a_pause_for_a_length_ends_by_itself,
    a_pause_of_a_name_without_a_row_creates_it_free, a_pause_without_last_fire_is_refused,
    a_paused_fire_is_refused_in_order_and_writes_nothing, bad_pauses_are_refused_and_write_nothing,
    migration_0005_adds_the_pause, pause_resume_and_unlock_record_their_actor,
    the_pause_suite_passes, the_pause_suite_passes_on_a_java_table_with_0002_and_0005,
};
pub(crate) use super::trigger::{
    a_java_table_keeps_plain_locks_and_refuses_triggers,
    the_listing_shows_the_trigger_and_a_claim_records_no_fire, the_trigger_suite_passes,
    the_trigger_suite_passes_on_a_java_table_with_0002_0005_and_0006,
    triggers_work_on_a_java_table_with_0006_only,
};

const MIN: Duration = Duration::from_mins(1);

/// One database the cases run on: where tables go, and how to make them.
pub(crate) trait Store: Sized {
    type Provider: LockProvider + shedlock_core::admin::LockAdmin + Clone + 'static;

    /// The database, or `None` (after a skip notice) when it is not configured.
    async fn open() -> Option<Self>;
    /// A provider on a fresh table of our DDL, on a pool of its own; the table's name.
    async fn fresh(&self) -> (Self::Provider, String);
    /// Another provider on `table`, on a pool of its own.
    async fn on_table(&self, table: &str) -> Self::Provider;
    /// A provider on `table` whose pool holds one connection, with a 30 s call timeout.
    async fn on_one_connection(&self, table: &str) -> Self::Provider;
    /// How many connections `provider`'s pool holds.
    fn pool_size(provider: &Self::Provider) -> u32;
    /// The folder of the database's migration files.
    const MIGRATIONS: &'static str;
    /// The provider's type name, as its messages spell it.
    const PROVIDER: &'static str;
    /// Creates `provider`'s table.
    async fn create_table(provider: &Self::Provider);
    /// A new, unique table name.
    fn table_name(&self) -> String;
    /// Java ShedLock's DDL for this database (no token column) for `table`.
    fn java_ddl(table: &str) -> String;
    /// Column lists of tables that do not fit, each with what the schema error must say.
    fn wrong_tables() -> Vec<(&'static str, &'static str)>;
    /// Runs `sql` on a connection of the database.
    async fn execute(&self, sql: String);
    /// Drops `table`.
    async fn drop_table(&self, table: &str);
}

/// The provider passes the contract's conformance suite on our DDL.
pub(crate) async fn conformance_suite_passes<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    let report = ConformanceSuite::new(provider)
        .require_fire_claims(true)
        .run()
        .await;
    assert!(report.skipped().is_empty(), "{report}");
    db.drop_table(&table).await;
}

/// Java ShedLock's table works as is, without tokens.
pub(crate) async fn conformance_suite_passes_on_a_java_table_without_tokens<S: Store>() {
    let Some(db) = S::open().await else { return };
    let table = db.table_name();
    db.execute(S::java_ddl(&table)).await;
    let provider = db.on_table(&table).await;
    let record = provider.acquire("probe", MIN, "me").await.unwrap().unwrap();
    assert_eq!(record.fencing_token(), None, "no token column, no token");
    assert!(provider.release(&record, Duration::ZERO).await.unwrap());
    // No last_fire column: fire claims are unsupported, and the error names the DDL to add.
    let now = Utc::now();
    let fire = Fire::new(now, now + chrono::Duration::minutes(1)).unwrap();
    let err = provider
        .claim_fire("probe", &fire, MIN, "me")
        .await
        .unwrap_err();
    assert!(err.is_unsupported(), "{err}");
    let message = err.to_string();
    let migration = format!("migrations/{}/0002_last_fire.sql", S::MIGRATIONS);
    assert!(message.contains(&migration), "{message}");
    assert!(
        message.contains(&format!("ALTER TABLE {}", quoted::<S>(&table))),
        "{message}"
    );
    // The suite reports the fire cases skipped, not failed (and passes every other case).
    let report = ConformanceSuite::new(provider).run().await;
    assert!(
        report
            .skipped()
            .iter()
            .any(|(case, _)| *case == "fire_claimed_once"),
        "{report}"
    );
    assert!(
        report
            .skipped()
            .iter()
            .all(|(case, _)| case.starts_with("fire_")),
        "{report}"
    );
    db.drop_table(&table).await;
}

/// `table` quoted as the provider's statements quote it.
pub(crate) fn quoted<S: Store>(table: &str) -> String {
    if S::MIGRATIONS == "mysql" {
        format!("`{table}`")
    } else {
        format!("\"{table}\"")
    }
}

/// The store's clock, from a claim of a fire a year ahead (always too early, writes nothing).
async fn store_now(provider: &impl LockProvider) -> DateTime<Utc> {
    let far = Utc::now() + chrono::Duration::days(365);
    let fire = Fire::new(far, far + chrono::Duration::seconds(1)).unwrap();
    match provider
        .claim_fire("clock-probe", &fire, MIN, "probe")
        .await
        .expect("a fire claim of a far fire")
    {
        FireClaim::TooEarly { now } => now,
        other => panic!("a fire a year ahead: {other:?}"),
    }
}

/// A fire in whole milliseconds whose window, a minute long, is open by the store's clock.
async fn open_fire(provider: &impl LockProvider) -> Fire {
    let now = store_now(provider).await;
    let at = DateTime::from_timestamp_millis(now.timestamp_millis() - 50).unwrap();
    Fire::new(at, at + chrono::Duration::minutes(1)).unwrap()
}

/// A migration file's statement for `table` instead of `shedlock`.
pub(crate) fn migration<S: Store>(file: &str, table: &str) -> String {
    let path = format!(
        "{}/migrations/{}/{file}",
        env!("CARGO_MANIFEST_DIR"),
        S::MIGRATIONS
    );
    let sql = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let sql: String = sql
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    let replaced = sql
        .replace("EXISTS shedlock (", &format!("EXISTS {table} ("))
        .replace("ALTER TABLE shedlock ", &format!("ALTER TABLE {table} "))
        .replace("EXISTS shedlock_jobs (", &format!("EXISTS {table}_jobs ("))
        .replace(
            "EXISTS shedlock_history (",
            &format!("EXISTS {table}_history ("),
        )
        .replace(
            "EXISTS shedlock_history_idx ON shedlock_history (",
            &format!("EXISTS {table}_history_idx ON {table}_history ("),
        );
    assert_ne!(replaced, sql, "{path} names the table shedlock");
    replaced.trim().trim_end_matches(';').to_owned()
}

/// A table made by migration 0001 and upgraded by 0002 records fires: claimed once, kept
/// through release, and a row deleted by hand is recreated by the next claim.
pub(crate) async fn a_table_upgraded_by_migration_0002_claims_fires<S: Store>() {
    let Some(db) = S::open().await else { return };
    let table = db.table_name();
    db.execute(migration::<S>("0001_shedlock.sql", &table))
        .await;
    // Before the upgrade a provider finds no last_fire column (checked once, on first use).
    let before = db.on_table(&table).await;
    let fire = open_fire_or_unsupported(&before).await;
    assert!(fire.is_none(), "0001 alone records no fires");
    db.execute(migration::<S>("0002_last_fire.sql", &table))
        .await;
    let provider = db.on_table(&table).await;
    let fire = open_fire(&provider).await;
    let record = provider
        .claim_fire("job", &fire, MIN, "a")
        .await
        .unwrap()
        .claimed()
        .cloned()
        .expect("the first claim of a fire wins");
    assert!(
        record.fencing_token().is_some(),
        "0001 has the token column"
    );
    assert!(record.locked_at() >= fire.at());
    assert!(provider.release(&record, Duration::ZERO).await.unwrap());
    match provider.claim_fire("job", &fire, MIN, "b").await.unwrap() {
        FireClaim::ClaimedElsewhere { recorded, .. } => assert_eq!(recorded, fire.at()),
        other => panic!("the fire after its release: {other:?}"),
    }
    // Deleted by hand: the next claim recreates the row.
    db.execute(format!("DELETE FROM {table}")).await;
    let again = provider.claim_fire("job", &fire, MIN, "c").await.unwrap();
    assert_eq!(
        again
            .claimed()
            .map(shedlock_core::provider::LockRecord::owner),
        Some("c"),
        "{again:?}"
    );
    db.drop_table(&table).await;
}

/// `Some` fire if the provider claims fires, `None` if it says it cannot.
async fn open_fire_or_unsupported(provider: &impl LockProvider) -> Option<Fire> {
    let far = Utc::now() + chrono::Duration::days(365);
    let fire = Fire::new(far, far + chrono::Duration::seconds(1)).unwrap();
    match provider
        .claim_fire("clock-probe", &fire, MIN, "probe")
        .await
    {
        Ok(_) => Some(fire),
        Err(e) if e.is_unsupported() => None,
        Err(e) => panic!("{e}"),
    }
}

/// Four providers on pools of their own race to claim each fire: exactly one claims it, the
/// others are told it was claimed elsewhere (or held), and none gets an error.
pub(crate) async fn providers_on_separate_pools_race_for_a_fire_and_exactly_one_claims<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (providers, table) = four_providers_on_a_fresh_table(&db).await;
    // Each job's first fire races on a missing row (the insert path); its later fires on the
    // existing row, released after each claim.
    for job in 0..4 {
        let name = format!("fire-race-{job}");
        let mut last = None;
        for round in 0..5 {
            let mut fire = open_fire(&providers[0]).await;
            if let Some(last) = last
                && fire.at() <= last
            {
                let at = last + chrono::Duration::milliseconds(1);
                fire = Fire::new(at, at + chrono::Duration::minutes(1)).unwrap();
                while store_now(&providers[0]).await < at {
                    tokio::task::yield_now().await;
                }
            }
            last = Some(fire.at());
            let results = race(&providers, |p, owner| {
                let name = name.clone();
                async move { p.claim_fire(&name, &fire, MIN, &owner).await }
            })
            .await;
            let mut winners = Vec::new();
            for result in results {
                match result.expect("no errors under contention") {
                    FireClaim::Claimed(record) => winners.push(record),
                    FireClaim::ClaimedElsewhere { recorded, .. } => {
                        assert_eq!(recorded, fire.at(), "job {job} round {round}");
                    }
                    FireClaim::Held { .. } => {}
                    other => panic!("job {job} round {round}: {other:?}"),
                }
            }
            release_the_one_winner(&providers[0], &winners, &format!("job {job} round {round}"))
                .await;
        }
    }
    db.drop_table(&table).await;
}

/// Runs `call(provider, owner)` for every provider at once (a barrier starts them together),
/// each in a task of its own, with the owners `racer-0`, `racer-1`, …; the results in order.
async fn race<P, T, F, Fut>(providers: &[P], call: F) -> Vec<T>
where
    P: LockProvider + Clone,
    F: Fn(P, String) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let barrier = Arc::new(Barrier::new(providers.len()));
    let racers: Vec<_> = providers
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let (barrier, run) = (barrier.clone(), call(p.clone(), format!("racer-{i}")));
            tokio::spawn(async move {
                barrier.wait().await;
                run.await
            })
        })
        .collect();
    let mut results = Vec::new();
    for racer in racers {
        results.push(racer.await.unwrap());
    }
    results
}

/// Asserts that a race had exactly one winner and releases its lock.
async fn release_the_one_winner(
    provider: &impl LockProvider,
    winners: &[shedlock_core::provider::LockRecord],
    race: &str,
) {
    assert_eq!(winners.len(), 1, "{race}: {winners:?}");
    assert!(provider.release(&winners[0], Duration::ZERO).await.unwrap());
}

/// Four providers on one fresh table, each on a pool of its own; the table's name.
async fn four_providers_on_a_fresh_table<S: Store>(db: &S) -> (Vec<S::Provider>, String) {
    let (first, table) = db.fresh().await;
    let mut providers = vec![first];
    for _ in 0..3 {
        providers.push(db.on_table(&table).await);
    }
    (providers, table)
}

/// Four providers on pools of their own race for one lock: exactly one wins each time.
pub(crate) async fn providers_on_separate_pools_race_and_exactly_one_wins_each_round<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (providers, table) = four_providers_on_a_fresh_table(&db).await;
    // Each round races on a new, missing row (the insert path) and then on the existing row.
    for round in 0..20 {
        for name in [format!("race-{round}"), format!("race-{round}")] {
            let results = race(&providers, |p, owner| {
                let name = name.clone();
                async move { p.acquire(&name, MIN, &owner).await }
            })
            .await;
            let winners: Vec<_> = results
                .into_iter()
                .filter_map(|r| r.expect("no errors under contention"))
                .collect();
            release_the_one_winner(&providers[0], &winners, &format!("round {round}")).await;
        }
    }
    db.drop_table(&table).await;
}

/// A pool of one connection serves a hundred locks held at once (a connection is taken for
/// one statement, never while a lock is held).
pub(crate) async fn one_connection_serves_a_hundred_held_locks<S: Store>() {
    let Some(db) = S::open().await else { return };
    let table = db.table_name();
    let provider = db.on_one_connection(&table).await;
    super::hundred_locks_held_at_once(provider.clone()).await;
    assert!(S::pool_size(&provider) <= 1);
    db.drop_table(&table).await;
}

/// A missing table is an error, on one line, that names the table and the ways to create it; a
/// table created later is picked up without a restart, and one dropped while running is
/// reported the same way.
pub(crate) async fn a_missing_table_names_the_table_and_the_ddl<S: Store>() {
    let Some(db) = S::open().await else { return };
    let table = db.table_name();
    let provider = db.on_table(&table).await;
    let err = provider.acquire("job", MIN, "me").await.unwrap_err();
    assert!(err.is_missing_table(), "{err}");
    let m = S::MIGRATIONS;
    let p = S::PROVIDER;
    assert_eq!(
        err.to_string(),
        format!(
            "the lock table {table} does not exist; create it with \
             {p}::create_table_if_not_exists(), with the migrations \
             migrations/{m}/0001_shedlock.sql, migrations/{m}/0002_last_fire.sql, \
             migrations/{m}/0003_job_state.sql, migrations/{m}/0005_pause.sql and \
             migrations/{m}/0006_trigger.sql of shedlock-sqlx, or with the statement {p}::ddl() returns (`shedlock ddl` prints it)"
        )
    );

    S::create_table(&provider).await;
    let record = provider.acquire("job", MIN, "me").await.unwrap().unwrap();
    db.drop_table(&table).await;
    let err = provider.release(&record, Duration::ZERO).await.unwrap_err();
    assert!(err.is_missing_table(), "{err}");
}

/// A row deleted by hand comes back at the next acquire, with a token above the deleted row's
/// (the sequence restarts from the database's clock), and the old holder cannot release it.
pub(crate) async fn a_row_deleted_by_hand_comes_back_and_tokens_keep_increasing<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    let first = provider.acquire("job", MIN, "a").await.unwrap().unwrap();
    db.execute(format!("DELETE FROM {table}")).await;
    // The documented precondition: the row comes back in a later tick of the database's clock
    // than the last acquisition (SQLite's and MySQL's tick is a millisecond).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while store_now(&provider).await <= first.locked_at() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the database's clock stood still"
        );
        tokio::task::yield_now().await;
    }
    let second = provider.acquire("job", MIN, "b").await.unwrap().unwrap();
    assert!(
        second.fencing_token() > first.fencing_token(),
        "{second} after {first}: the sequence must not restart"
    );
    // The old holder cannot release the new holder's lock.
    assert!(!provider.release(&first, Duration::ZERO).await.unwrap());
    assert!(provider.acquire("job", MIN, "c").await.unwrap().is_none());
    db.drop_table(&table).await;
}

/// A table whose columns do not fit (types, lengths, keys, missing columns; `last_fire` of
/// the wrong type too) is a schema error that says what is wrong, on the first call.
pub(crate) async fn tables_that_do_not_fit_are_schema_errors<S: Store>() {
    let Some(db) = S::open().await else { return };
    for (columns, expected) in S::wrong_tables() {
        let table = db.table_name();
        db.execute(format!("CREATE TABLE {table} ({columns})"))
            .await;
        let provider = db.on_table(&table).await;
        let err = provider.acquire("job", MIN, "me").await.unwrap_err();
        assert!(err.is_schema(), "{err}");
        assert!(err.to_string().contains(expected), "{expected}: {err}");
        db.drop_table(&table).await;
    }
}

/// Names with quotes, backslashes, placeholders and Unicode are bound, never spliced: each is
/// its own lock, listed under its own name; invalid names are refused before any SQL; names
/// that differ only in case or accents are different locks.
pub(crate) async fn odd_names_are_bound_never_spliced_and_compare_exactly<S: Store>() {
    use shedlock_core::admin::LockAdmin as _;
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    for name in super::odd_names() {
        let record = provider.acquire(&name, MIN, "me").await.unwrap().unwrap();
        let holder = provider.holder(&name).await.unwrap().unwrap();
        assert_eq!(holder.name(), name);
        assert!(provider.release(&record, Duration::ZERO).await.unwrap());
    }
    for name in super::invalid_names() {
        let err = provider.acquire(&name, MIN, "me").await.unwrap_err();
        assert!(err.is_invalid_config(), "{name:?}: {err}");
    }
    let mut listed: Vec<String> = provider
        .list()
        .await
        .unwrap()
        .iter()
        .map(|e| e.record().name().to_owned())
        .collect();
    let mut expected = super::odd_names();
    listed.sort();
    expected.sort();
    assert_eq!(listed, expected, "one row per odd name, nothing else");
    let upper = provider.acquire("Report", MIN, "a").await.unwrap();
    let lower = provider.acquire("report", MIN, "b").await.unwrap();
    let accent = provider.acquire("répört", MIN, "c").await.unwrap();
    assert!(upper.is_some() && lower.is_some() && accent.is_some());
    db.drop_table(&table).await;
}

// Job state: `release_run` and the state columns.

/// A fire in whole milliseconds (every store keeps it exactly).
fn a_fire(minutes_ago: i64) -> DateTime<Utc> {
    let at = Utc::now() - chrono::Duration::minutes(minutes_ago);
    DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap()
}

/// Takes `name` as `owner`, releases it recording `outcome` for `fire`, and returns the
/// acquisition and the entry the store lists afterwards.
async fn run_once<P: LockProvider + shedlock_core::admin::LockAdmin>(
    provider: &P,
    name: &str,
    owner: &str,
    fire: DateTime<Utc>,
    outcome: RunOutcome,
) -> (LockRecord, LockEntry) {
    let record = provider.acquire(name, MIN, owner).await.unwrap().unwrap();
    let report = RunReport::new(fire, outcome);
    assert!(
        provider
            .release_run(&record, Duration::ZERO, &report)
            .await
            .unwrap(),
        "the acquisition's own release_run releases"
    );
    let entry = provider.entry(name).await.unwrap().unwrap();
    (record, entry)
}

/// The state an entry carries, which a table with the columns always has.
fn state_of(entry: &LockEntry) -> JobState {
    entry
        .state()
        .cloned()
        .expect("a table with the state columns lists a state")
}

/// `release_run` records the run in the row (fire, runner, start = `locked_at`, end = the
/// store's now, outcome and error text), counts failures and panics, resets them on success
/// (setting `last_success` to the run's end), leaves both alone on a cancelled run, and frees
/// the lock as `release` does.
pub(crate) async fn release_run_records_the_job_state<S: Store>() {
    use shedlock_core::admin::LockAdmin as _;
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    // Before any run: a default state, no last run.
    let record = provider
        .acquire("job", MIN, "pod-1")
        .await
        .unwrap()
        .unwrap();
    let entry = provider.entry("job").await.unwrap().unwrap();
    assert_eq!(state_of(&entry), JobState::default());
    assert!(provider.release(&record, Duration::ZERO).await.unwrap());

    let error = "it's \"quoted\"; DROP TABLE x; -- ünïcødé ✓ 日本語 \\ %s ?1 $1";
    let fire = a_fire(3);
    let (record, entry) = run_once(
        &provider,
        "job",
        "pod-1",
        fire,
        RunOutcome::Failed(error.into()),
    )
    .await;
    let state = state_of(&entry);
    let run = state.last_run.clone().expect("a recorded run");
    assert_eq!(run.lock_name, "job");
    assert_eq!(run.fire, fire);
    assert_eq!(run.runner, "pod-1");
    assert_eq!(run.started, record.locked_at());
    assert!(
        run.ended >= run.started && run.ended <= entry.store_now(),
        "{run:?}"
    );
    assert_eq!(run.outcome, RunOutcome::Failed(error.into()));
    assert_eq!(state.consecutive_failures, 1);
    assert_eq!(state.last_success, None);
    assert!(!entry.is_held(), "released with at_least zero: {entry:?}");

    let (_, entry) = run_once(&provider, "job", "pod-2", a_fire(2), RunOutcome::Panicked).await;
    let state = state_of(&entry);
    assert_eq!(state.consecutive_failures, 2);
    assert_eq!(state.last_run.as_ref().unwrap().runner, "pod-2");
    assert_eq!(state.last_run.unwrap().outcome, RunOutcome::Panicked);

    let (_, entry) = run_once(&provider, "job", "pod-1", a_fire(1), RunOutcome::Cancelled).await;
    let state = state_of(&entry);
    assert_eq!(state.consecutive_failures, 2, "a cancelled run is neutral");
    assert_eq!(state.last_success, None, "a cancelled run is neutral");
    assert_eq!(state.last_run.unwrap().outcome, RunOutcome::Cancelled);

    let (_, entry) = run_once(&provider, "job", "pod-1", a_fire(0), RunOutcome::Succeeded).await;
    let state = state_of(&entry);
    let ended = state.last_run.as_ref().unwrap().ended;
    assert_eq!(state.consecutive_failures, 0, "a success resets the count");
    assert_eq!(
        state.last_success,
        Some(ended),
        "the success is the run's end"
    );
    assert_eq!(state.last_run.unwrap().outcome, RunOutcome::Succeeded);

    let (_, entry) = run_once(
        &provider,
        "job",
        "pod-3",
        a_fire(0),
        RunOutcome::Failed(String::new()),
    )
    .await;
    let state = state_of(&entry);
    assert_eq!(state.consecutive_failures, 1);
    assert_eq!(
        state.last_success,
        Some(ended),
        "a failure keeps the last success"
    );
    assert_eq!(
        state.last_run.unwrap().outcome,
        RunOutcome::Failed(String::new())
    );

    at_least_and_other_rows(&provider).await;
    db.drop_table(&table).await;
}

/// `at_least` keeps the lock as release does; other locks' rows keep their own state; `list`
/// carries the same states as `entry`.
async fn at_least_and_other_rows<P: LockProvider + shedlock_core::admin::LockAdmin>(provider: &P) {
    // `at_least` keeps the lock as release does; other locks' rows keep their own state.
    let record = provider
        .acquire("job", MIN, "pod-1")
        .await
        .unwrap()
        .unwrap();
    let report = RunReport::new(a_fire(0), RunOutcome::Succeeded);
    assert!(provider.release_run(&record, MIN, &report).await.unwrap());
    let held = provider
        .holder("job")
        .await
        .unwrap()
        .expect("held until at_least");
    assert!(held.lock_until() >= record.locked_at() + MIN, "{held}");
    let other = provider
        .acquire("other", MIN, "pod-1")
        .await
        .unwrap()
        .unwrap();
    let entry = provider.entry("other").await.unwrap().unwrap();
    assert_eq!(state_of(&entry), JobState::default());
    assert!(provider.release(&other, Duration::ZERO).await.unwrap());
    // `list` carries the same states.
    let listed = provider.list().await.unwrap();
    let job = listed.iter().find(|e| e.record().name() == "job").unwrap();
    assert_eq!(state_of(job).last_run.unwrap().runner, "pod-1");
}

/// A run whose lock was taken over (released, or expired and taken by another) records
/// nothing and releases nothing: `Ok(false)`, the new holder keeps the lock and the state.
pub(crate) async fn a_run_whose_lock_was_taken_over_records_nothing<S: Store>() {
    use shedlock_core::admin::LockAdmin as _;
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    let (_, before) = run_once(&provider, "job", "pod-1", a_fire(1), RunOutcome::Succeeded).await;
    let old = provider
        .acquire("job", MIN, "pod-1")
        .await
        .unwrap()
        .unwrap();
    // Taken over: freed by an operator and acquired by another replica.
    assert!(
        provider
            .force_unlock("job", "test")
            .await
            .unwrap()
            .is_some()
    );
    let new = provider
        .acquire("job", MIN, "pod-2")
        .await
        .unwrap()
        .unwrap();
    let report = RunReport::new(a_fire(0), RunOutcome::Failed("late".into()));
    assert!(
        !provider
            .release_run(&old, Duration::ZERO, &report)
            .await
            .unwrap()
    );
    let after = provider.entry("job").await.unwrap().unwrap();
    assert_eq!(after.state(), before.state(), "nothing recorded");
    assert_eq!(after.record().owner(), "pod-2");
    assert!(after.is_held(), "the new holder keeps the lock");
    assert!(provider.release(&new, Duration::ZERO).await.unwrap());
    db.drop_table(&table).await;
}

/// A Java ShedLock table (four columns) and one made by migrations 0001 and 0002 (five and six)
/// answer `release_run` unsupported, naming migration 0003, and change nothing; the plain
/// release works and entries carry no state. `missing_ddl` names what to add (the columns, then
/// the definitions and history tables); once it ran (and a new provider looked), runs are
/// recorded.
pub(crate) async fn tables_without_the_state_columns_answer_unsupported_until_upgraded<S: Store>() {
    use shedlock_core::admin::LockAdmin as _;
    let Some(db) = S::open().await else { return };
    let java = db.table_name();
    db.execute(S::java_ddl(&java)).await;
    let ours = db.table_name();
    db.execute(migration::<S>("0001_shedlock.sql", &ours)).await;
    db.execute(migration::<S>("0002_last_fire.sql", &ours))
        .await;
    // The job state's columns (and last_fire on Java's), then the pause and trigger columns.
    for (table, missing) in [(&java, 22), (&ours, 21)] {
        let provider = db.on_table(table).await;
        let record = provider.acquire("job", MIN, "me").await.unwrap().unwrap();
        let report = RunReport::new(a_fire(0), RunOutcome::Succeeded);
        let err = provider
            .release_run(&record, Duration::ZERO, &report)
            .await
            .unwrap_err();
        assert!(err.is_unsupported(), "{err}");
        let migration_file = format!("migrations/{}/0003_job_state.sql", S::MIGRATIONS);
        assert!(err.to_string().contains(&migration_file), "{err}");
        assert!(
            provider.holder("job").await.unwrap().is_some(),
            "nothing released"
        );
        assert!(provider.release(&record, Duration::ZERO).await.unwrap());
        let entry = provider.entry("job").await.unwrap().unwrap();
        assert_eq!(entry.state(), None, "no state columns, no state");
        let ddl = provider
            .missing_ddl()
            .await
            .unwrap()
            .expect("columns missing");
        let statements: Vec<&str> = ddl.lines().collect();
        let (alter, create) = statements.split_at(missing);
        assert!(
            alter
                .iter()
                .all(|s| s.starts_with(&format!("ALTER TABLE {}", quoted::<S>(table)))),
            "{ddl}"
        );
        assert!(
            !create.is_empty()
                && create
                    .iter()
                    .all(|s| s.starts_with("CREATE ") && s.contains(&format!("{table}_"))),
            "{ddl}"
        );
        for statement in statements {
            db.execute(statement.trim_end_matches(';').to_owned()).await;
        }
        // The provider looked once: still unsupported until a new one looks.
        let record = provider.acquire("job", MIN, "me").await.unwrap().unwrap();
        let err = provider
            .release_run(&record, Duration::ZERO, &report)
            .await
            .unwrap_err();
        assert!(err.is_unsupported(), "{err}");
        let upgraded = db.on_table(table).await;
        assert_eq!(upgraded.missing_ddl().await.unwrap(), None);
        assert!(
            upgraded
                .release_run(&record, Duration::ZERO, &report)
                .await
                .unwrap()
        );
        let state = state_of(&upgraded.entry("job").await.unwrap().unwrap());
        assert_eq!(state.last_run.unwrap().outcome, RunOutcome::Succeeded);
        assert!(state.last_success.is_some());
        // Java's four-column INSERT still works on the upgraded table (the count's default).
        db.execute(format!(
            "INSERT INTO {table} (name, lock_until, locked_at, locked_by) \
             VALUES ('java-job', '2020-01-01 00:00:00.000', '2020-01-01 00:00:00.000', 'java')"
        ))
        .await;
        let java_entry = upgraded.entry("java-job").await.unwrap().unwrap();
        assert_eq!(state_of(&java_entry), JobState::default());
        db.drop_table(table).await;
    }
}

/// A table made by migrations 0001, 0002 and 0003 records runs (0004 adds the definitions and
/// history tables, 0005 the pause and 0006 the trigger columns, so nothing is missing); one with only some of the state columns counts as
/// without them (unsupported), and `missing_ddl` lists the others.
pub(crate) async fn migration_0003_adds_the_state_and_a_partial_set_counts_as_none<S: Store>() {
    use shedlock_core::admin::LockAdmin as _;
    let Some(db) = S::open().await else { return };
    let table = db.table_name();
    for file in [
        "0001_shedlock.sql",
        "0002_last_fire.sql",
        "0003_job_state.sql",
        "0004_jobs_and_history.sql",
        "0005_pause.sql",
        "0006_trigger.sql",
    ] {
        for statement in migration::<S>(file, &table).split(';') {
            db.execute(statement.trim().to_owned()).await;
        }
    }
    let provider = db.on_table(&table).await;
    assert_eq!(provider.missing_ddl().await.unwrap(), None);
    let (_, entry) = run_once(&provider, "job", "me", a_fire(0), RunOutcome::Panicked).await;
    assert_eq!(state_of(&entry).consecutive_failures, 1);
    // Our DDL is the same table: nothing missing either.
    let (fresh, fresh_table) = db.fresh().await;
    assert_eq!(fresh.missing_ddl().await.unwrap(), None);
    db.drop_table(&fresh_table).await;
    db.drop_table(&table).await;

    // Some state columns only.
    let partial = db.table_name();
    let all = migration::<S>("0003_job_state.sql", &partial);
    db.execute(migration::<S>("0001_shedlock.sql", &partial))
        .await;
    db.execute(migration::<S>("0002_last_fire.sql", &partial))
        .await;
    for statement in all.split(';').take(3) {
        db.execute(statement.trim().to_owned()).await;
    }
    let provider = db.on_table(&partial).await;
    let record = provider.acquire("job", MIN, "me").await.unwrap().unwrap();
    let report = RunReport::new(a_fire(0), RunOutcome::Succeeded);
    let err = provider
        .release_run(&record, Duration::ZERO, &report)
        .await
        .unwrap_err();
    assert!(err.is_unsupported(), "{err}");
    assert_eq!(provider.entry("job").await.unwrap().unwrap().state(), None);
    let ddl = provider.missing_ddl().await.unwrap().unwrap();
    // The five columns, the seven pause and the six trigger columns, then the definitions and
    // history tables this test did not create.
    let alter = ddl.lines().filter(|l| l.starts_with("ALTER TABLE")).count();
    assert_eq!(alter, 5 + 7 + 6, "{ddl}");
    assert!(
        ddl.contains("last_run_outcome") && !ddl.contains("last_run_fire"),
        "{ddl}"
    );
    db.drop_table(&partial).await;
}

/// A state column dropped after the provider looked: `release_run` is an error (the scheduler
/// then runs the plain release), never a panic, and the plain release still works.
pub(crate) async fn a_state_column_dropped_after_detection_is_an_error<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    let (_, _) = run_once(&provider, "job", "me", a_fire(1), RunOutcome::Succeeded).await;
    db.execute(format!("ALTER TABLE {table} DROP COLUMN last_run_error"))
        .await;
    let record = provider.acquire("job", MIN, "me").await.unwrap().unwrap();
    let report = RunReport::new(a_fire(0), RunOutcome::Failed("x".into()));
    let result = provider.release_run(&record, Duration::ZERO, &report).await;
    assert!(result.is_err(), "{result:?}");
    assert!(provider.release(&record, Duration::ZERO).await.unwrap());
    db.drop_table(&table).await;
}

/// Error texts at the cap: 1000 characters of multi-byte text fit and read back the same; a
/// longer one is cut to 1000 with `…` (by the report) and fits too.
pub(crate) async fn error_texts_at_the_cap_fit<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    let exact = "ü".repeat(MAX_ERROR_LEN - 1) + "✓";
    let (_, entry) = run_once(
        &provider,
        "job",
        "me",
        a_fire(0),
        RunOutcome::Failed(exact.clone()),
    )
    .await;
    assert_eq!(
        state_of(&entry).last_run.unwrap().outcome,
        RunOutcome::Failed(exact)
    );
    let long = "日本".repeat(3000);
    let (_, entry) = run_once(
        &provider,
        "job",
        "me",
        a_fire(0),
        RunOutcome::Failed(long.clone()),
    )
    .await;
    let outcome = state_of(&entry).last_run.unwrap().outcome;
    assert_eq!(outcome, RunOutcome::Failed(long).capped());
    assert_eq!(outcome.error().unwrap().chars().count(), MAX_ERROR_LEN);
    db.drop_table(&table).await;
}

/// The core's `JobStateSuite` on our DDL (`create_table_if_not_exists`: the lock table with the
/// job state columns, and the definitions and history tables), history off: every case passes.
/// `jobs.rs` runs it with history on.
pub(crate) async fn the_job_state_suite_passes<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    JobStateSuite::new(provider).run().await;
    db.drop_table(&table).await;
}

/// One `#[tokio::test]` per case of this module for the [`Store`] `$store`; attributes written
/// before the store (`#[cfg_attr(not(shedlock_pg), ignore = "...")]`) go on every case.
macro_rules! store_suite {
    ($(#[$test:meta])* $store:ty) => {
        $crate::common::suite::store_suite!(
            $(#[$test])* $store;
            conformance_suite_passes,
            conformance_suite_passes_on_a_java_table_without_tokens,
            providers_on_separate_pools_race_and_exactly_one_wins_each_round,
            one_connection_serves_a_hundred_held_locks,
            a_missing_table_names_the_table_and_the_ddl,
            a_table_upgraded_by_migration_0002_claims_fires,
            providers_on_separate_pools_race_for_a_fire_and_exactly_one_claims,
            a_row_deleted_by_hand_comes_back_and_tokens_keep_increasing,
            tables_that_do_not_fit_are_schema_errors,
            odd_names_are_bound_never_spliced_and_compare_exactly,
            release_run_records_the_job_state,
            a_run_whose_lock_was_taken_over_records_nothing,
            tables_without_the_state_columns_answer_unsupported_until_upgraded,
            migration_0003_adds_the_state_and_a_partial_set_counts_as_none,
            a_state_column_dropped_after_detection_is_an_error,
            error_texts_at_the_cap_fit,
            the_job_state_suite_passes,
            the_pause_suite_passes,
            the_pause_suite_passes_on_a_java_table_with_0002_and_0005,
            a_paused_fire_is_refused_in_order_and_writes_nothing,
            pause_resume_and_unlock_record_their_actor,
            a_pause_for_a_length_ends_by_itself,
            a_pause_of_a_name_without_a_row_creates_it_free,
            bad_pauses_are_refused_and_write_nothing,
            a_java_table_keeps_plain_locks_and_refuses_pauses,
            migration_0005_adds_the_pause,
            a_pause_without_last_fire_is_refused,
            the_trigger_suite_passes,
            the_trigger_suite_passes_on_a_java_table_with_0002_0005_and_0006,
            a_java_table_keeps_plain_locks_and_refuses_triggers,
            the_listing_shows_the_trigger_and_a_claim_records_no_fire,
            triggers_work_on_a_java_table_with_0006_only,
        );
    };
    // One case per step: the attributes repeat once per case, which one repetition cannot say.
    ($(#[$test:meta])* $store:ty; $case:ident, $($rest:ident,)*) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$test])*
        async fn $case() {
            $crate::common::suite::$case::<$store>().await;
        }
        $crate::common::suite::store_suite!($(#[$test])* $store; $($rest,)*);
    };
    ($(#[$test:meta])* $store:ty;) => {};
}

pub(crate) use store_suite;

/// The [`Store`] of a database server reached through a URL, with the file's helpers `pool(url)`,
/// `fresh(url)` and `drop_table(pool, table)`, for a test file that defines `java_ddl(table)` and
/// `wrong_tables()`; then the cases, each with the attributes after `tests:` (the database's
/// ignore-without-a-URL).
macro_rules! server_store {
    (
        $(#[$doc:meta])*
        $store:ident($provider:ident), url: $url:path, pool: $pool:ty, tables: $tables:literal,
        migrations: $migrations:literal, cycle_statements: $cycle:literal,
        tests: $(#[$test:meta])*
    ) => {
        /// A pool of the provider's own options on `url`.
        async fn pool(url: &str) -> $pool {
            $provider::pool_options()
                .connect(url)
                .await
                .expect("connect to the database")
        }

        /// A provider on a fresh table of our DDL, with connections of its own (as
        /// `connect(url)` makes it).
        async fn fresh(url: &str) -> ($provider, String) {
            let table = testing::unique_table_name($tables);
            let provider = $provider::from_url(url)
                .table(&table)
                .build()
                .expect("valid settings");
            provider
                .create_table_if_not_exists()
                .await
                .expect("create table");
            (provider, table)
        }

        /// Drops the lock table and the definitions and history tables made with it.
        async fn drop_table(url: &str, table: &str) {
            let pool = pool(url).await;
            for suffix in ["", "_jobs", "_history"] {
                // A quoted name (`schema`.`table`) takes the suffix inside its last quotes.
                let name = match table.strip_suffix(['`', '"']) {
                    Some(bare) => format!("{bare}{suffix}{}", &table[bare.len()..]),
                    None => format!("{table}{suffix}"),
                };
                ::shedlock_sqlx::sqlx::Executor::execute(
                    &pool,
                    ::shedlock_sqlx::sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {name}")),
                )
                .await
                .expect("drop table");
            }
        }

        $(#[$doc])*
        struct $store {
            url: String,
        }

        impl $crate::common::suite::Store for $store {
            type Provider = $provider;

            async fn open() -> Option<Self> {
                $url().map(|url| Self { url })
            }

            async fn fresh(&self) -> ($provider, String) {
                fresh(&self.url).await
            }

            async fn on_table(&self, table: &str) -> $provider {
                $provider::from_url(&self.url)
                    .table(table)
                    .build()
                    .unwrap()
            }

            async fn on_one_connection(&self, table: &str) -> $provider {
                // The connections this limits are the provider's own: lock calls take one for
                // one statement each.
                let provider = $provider::from_url(&self.url)
                    .max_connections(1)
                    .table(table)
                    .call_timeout(::std::time::Duration::from_secs(30))
                    .build()
                    .unwrap();
                provider.create_table_if_not_exists().await.unwrap();
                provider
            }

            fn pool_size(provider: &$provider) -> u32 {
                provider.connection_stats().open
            }

            const MIGRATIONS: &'static str = $migrations;
            const PROVIDER: &'static str = stringify!($provider);

            async fn create_table(provider: &$provider) {
                provider.create_table_if_not_exists().await.unwrap();
            }

            fn table_name(&self) -> String {
                testing::unique_table_name($tables)
            }

            fn java_ddl(table: &str) -> String {
                java_ddl(table)
            }

            fn wrong_tables() -> Vec<(&'static str, &'static str)> {
                wrong_tables()
            }

            async fn execute(&self, sql: String) {
                pool(&self.url)
                    .await
                    .execute(sqlx::AssertSqlSafe(sql))
                    .await
                    .unwrap();
            }

            async fn drop_table(&self, table: &str) {
                drop_table(&self.url, table).await;
            }
        }

        $crate::common::suite::store_suite!($(#[$test])* $store);
        $crate::common::suite::server_cases!(
            $provider, url: $url, scheme: $migrations, cycle: $cycle, tests: $(#[$test])*
        );
    };
}

pub(crate) use server_store;

/// The cases of a database server reached through a URL (the application's own pool beside the
/// provider's, a proxy in front of the server, a server that never answers): `#[tokio::test]`s on
/// a single-threaded runtime, for a test file that defines `pool(url)`, `fresh(url)` and
/// `drop_table(pool, table)`. Instantiated by [`server_store!`].
macro_rules! server_cases {
    (
        $provider:ident, url: $url:path, scheme: $scheme:literal, cycle: $cycle:literal,
        tests: $(#[$test:meta])*
    ) => {
        /// An owner id longer than the `locked_by` column (VARCHAR(255)) is refused before any SQL.
        #[tokio::test]
        $(#[$test])*
        async fn owner_ids_longer_than_the_column_are_rejected() {
            let Some(url) = $url() else {
                return;
            };
            let (provider, table) = fresh(&url).await;
            let err = provider
                .acquire("job", MIN, &"o".repeat(256))
                .await
                .unwrap_err();
            assert!(err.is_invalid_config(), "{err}");
            drop_table(&url, &table).await;
        }

        #[tokio::test]
        $(#[$test])*
        async fn locks_work_while_the_apps_own_pool_is_exhausted() {
            let Some(url) = $url() else {
                return;
            };
            let table = testing::unique_table_name("shedlock_app");
            // The application's pool, all of whose connections its jobs will hold.
            let app = ::sqlx::pool::PoolOptions::new()
                .max_connections(2)
                .acquire_timeout(Duration::from_millis(200))
                .connect(&url)
                .await
                .unwrap();
            // The provider as the README builds it: connections of its own (`connect` =
            // `from_url(url).connect()`, here with a table of this test's own).
            let provider = $provider::from_url(&url)
                .table(&table)
                .build()
                .unwrap();
            provider.create_table_if_not_exists().await.unwrap();
            let on_app = $provider::builder(app.clone())
                .table(&table)
                .call_timeout(Duration::from_millis(300))
                .build()
                .unwrap();
            $crate::common::locks_work_while_the_app_pool_is_exhausted(
                &app,
                provider.clone(),
                on_app,
            )
            .await;
            drop_table(&url, &table).await;
        }

        #[tokio::test]
        $(#[$test])*
        async fn a_black_holed_call_times_out_and_its_connection_is_closed() {
            let Some(url) = $url() else {
                return;
            };
            let (_direct, table) = fresh(&url).await;
            let timeout = Duration::from_millis(500);
            // One connection, so the count of open ones shows whether the frozen one went back:
            // the provider's own connections, then a sqlx pool of the application's.
            for own in [true, false] {
                let proxy = $crate::common::Proxy::start($crate::common::url_addr(&url)).await;
                let via = $crate::common::url_via(&url, proxy.addr);
                let (provider, pool) = if own {
                    let provider = $provider::from_url(&via)
                        .max_connections(1)
                        .table(&table)
                        .call_timeout(timeout)
                        .build()
                        .unwrap();
                    (provider, None)
                } else {
                    let pool = $provider::pool_options()
                        .max_connections(1)
                        .min_connections(0)
                        .connect(&via)
                        .await
                        .unwrap();
                    let provider = $provider::builder(pool.clone())
                        .table(&table)
                        .call_timeout(timeout)
                        .build()
                        .unwrap();
                    (provider, Some(pool))
                };
                let name = format!("job-{own}");
                let record = provider.acquire(&name, MIN, "me").await.unwrap().unwrap();
                // sqlx pings a connection when it goes back to the pool (in the background); let
                // that finish, or the ping itself would hang in the black hole and keep the slot.
                // The provider's own connection is idle at once.
                if own {
                    assert_eq!(provider.connection_stats().idle, 1);
                }
                assert!(
                    $crate::common::eventually(Duration::from_secs(5), || async {
                        provider.connection_stats().idle == 1
                    })
                    .await
                );

                proxy.blackhole();
                let started = tokio::time::Instant::now();
                let err = provider.release(&record, Duration::ZERO).await.unwrap_err();
                assert!(err.is_timeout(), "{err}");
                let text = err.to_string();
                assert!(
                    text.contains(&format!("lock {name:?}"))
                        && text.contains("to answer the statement"),
                    "the timeout names the lock and the step: {text}"
                );
                assert!(
                    started.elapsed() < timeout * 3,
                    "took {:?}",
                    started.elapsed()
                );
                // The frozen connection was closed, not returned: nothing is open.
                assert_eq!(
                    provider.connection_stats().open,
                    0,
                    "the timed-out connection went back (own: {own})"
                );
                if let Some(pool) = &pool {
                    assert_eq!(pool.size(), 0);
                }
                // New connections hang too, and still fail within the timeout.
                let started = tokio::time::Instant::now();
                let err = provider.acquire("other", MIN, "me").await.unwrap_err();
                assert!(err.is_timeout(), "{err}");
                assert!(
                    started.elapsed() < timeout * 3,
                    "took {:?}",
                    started.elapsed()
                );

                proxy.heal();
                // Back to normal without any action: the release that timed out never reached the
                // server, so the lock is still held; the holder releases it.
                assert!(
                    $crate::common::eventually(Duration::from_secs(10), || async {
                        provider
                            .release(&record, Duration::ZERO)
                            .await
                            .is_ok_and(|released| released)
                    })
                    .await,
                    "the provider did not recover (own: {own})"
                );
                assert!(
                    provider
                        .acquire(&name, MIN, "other")
                        .await
                        .unwrap()
                        .is_some()
                );
            }
            drop_table(&url, &table).await;
        }

        #[tokio::test]
        async fn an_unresponsive_server_fails_within_the_timeout() {
            // No database needed: a listener that accepts and never answers.
            let addr = $crate::common::silent_server().await;
            let pool = $provider::pool_options()
                .min_connections(0)
                .connect_lazy(&format!("{}://nobody@{addr}/none", $scheme))
                .unwrap();
            let provider = $provider::builder(pool)
                .call_timeout(Duration::from_millis(300))
                .build()
                .unwrap();
            let started = tokio::time::Instant::now();
            let err = provider.acquire("job", MIN, "me").await.unwrap_err();
            assert!(err.is_timeout(), "{err}");
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "took {:?}",
                started.elapsed()
            );
            // The same with connections of the provider's own: the message says it was
            // connecting, to where, for which lock.
            let provider = $provider::from_url(format!("{}://nobody@{addr}/none", $scheme))
                .call_timeout(Duration::from_millis(300))
                .build()
                .unwrap();
            let started = tokio::time::Instant::now();
            let err = provider.acquire("job", MIN, "me").await.unwrap_err();
            assert!(err.is_timeout(), "{err}");
            let text = err.to_string();
            assert!(
                text.contains(&format!("lock \"job\", connecting to ")) && text.contains(&format!("{addr}/none")),
                "{text}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "took {:?}",
                started.elapsed()
            );
        }

        /// `pending_triggers` is one statement whatever the number of rows: one round trip at 1
        /// and at 1,000 pending triggers.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$test])*
        async fn pending_triggers_is_one_round_trip_at_1_and_1000_triggers() {
            use ::shedlock_core::admin::LockAdmin as _;
            let Some(url) = $url() else {
                return;
            };
            let (direct, table) = fresh(&url).await;
            let proxy = $crate::common::Proxy::start($crate::common::url_addr(&url)).await;
            let via = $crate::common::url_via(&url, proxy.addr);
            let provider = $provider::from_url(&via)
                .max_connections(1)
                .table(&table)
                .build()
                .unwrap();
            // Statement prepared and layout read first.
            assert!(provider.pending_triggers().await.unwrap().is_empty());
            let mut costs = Vec::new();
            let mut asked = 0;
            for count in [1, 1_000] {
                while asked < count {
                    let answer = direct.trigger(&format!("job-{asked}"), "ann", MIN).await;
                    assert!(
                        matches!(answer, Ok(::shedlock_core::trigger::TriggerAnswer::Requested(_))),
                        "{answer:?}"
                    );
                    asked += 1;
                }
                let before = proxy.requests();
                let pending = provider.pending_triggers().await.unwrap();
                tokio::task::yield_now().await;
                costs.push(proxy.requests() - before);
                assert_eq!(pending.len(), count);
            }
            assert_eq!(costs, [1, 1], "one round trip at 1 and at 1,000 pending triggers");
            drop_table(&url, &table).await;
        }

        /// A recorded release is one statement, as a plain one; on a table without the state
        /// columns it answers unsupported without a round trip (the layout is known by then).
        #[tokio::test]
        $(#[$test])*
        async fn release_run_costs_the_round_trips_of_a_release() {
            use ::shedlock_core::jobs::{RunOutcome, RunReport};
            let Some(url) = $url() else {
                return;
            };
            let (_direct, table) = fresh(&url).await;
            let java = testing::unique_table_name("shedlock_rr_java");
            ::shedlock_sqlx::sqlx::Executor::execute(
                &pool(&url).await,
                ::shedlock_sqlx::sqlx::AssertSqlSafe(java_ddl(&java)),
            )
            .await
            .unwrap();
            let proxy = $crate::common::Proxy::start($crate::common::url_addr(&url)).await;
            let via = $crate::common::url_via(&url, proxy.addr);
            let provider = $provider::from_url(&via)
                .max_connections(1)
                .table(&table)
                .build()
                .unwrap();
            let report = RunReport::new(::chrono::Utc::now(), RunOutcome::Succeeded);
            // Statements prepared first.
            let record = provider.acquire("rr", MIN, "a").await.unwrap().unwrap();
            assert!(provider.release_run(&record, Duration::ZERO, &report).await.unwrap());
            let record = provider.acquire("rr", MIN, "a").await.unwrap().unwrap();
            assert!(provider.release(&record, Duration::ZERO).await.unwrap());
            let mut costs = Vec::new();
            for recorded in [false, true] {
                let record = provider.acquire("rr", MIN, "a").await.unwrap().unwrap();
                let before = proxy.requests();
                let released = if recorded {
                    provider.release_run(&record, Duration::ZERO, &report).await
                } else {
                    provider.release(&record, Duration::ZERO).await
                };
                assert!(released.unwrap());
                tokio::task::yield_now().await;
                costs.push(proxy.requests() - before);
            }
            assert_eq!(costs, [1, 1], "a release and a recorded release: one round trip each");
            let on_java = $provider::from_url(&via)
                .max_connections(1)
                .table(&java)
                .build()
                .unwrap();
            let record = on_java.acquire("rr", MIN, "a").await.unwrap().unwrap();
            let before = proxy.requests();
            let err = on_java
                .release_run(&record, Duration::ZERO, &report)
                .await
                .unwrap_err();
            assert!(err.is_unsupported(), "{err}");
            tokio::task::yield_now().await;
            assert_eq!(proxy.requests() - before, 0, "unsupported without a round trip");
            assert!(on_java.release(&record, Duration::ZERO).await.unwrap());
            drop_table(&url, &java).await;
            drop_table(&url, &table).await;
        }

        #[tokio::test]
        $(#[$test])*
        async fn a_skipped_acquire_costs_one_round_trip_on_the_callers_path() {
            let Some(url) = $url() else {
                return;
            };
            let (_direct, table) = fresh(&url).await;
            let proxy = $crate::common::Proxy::start($crate::common::url_addr(&url)).await;
            let via = $crate::common::url_via(&url, proxy.addr);
            // The provider's own connections (one of them): one round trip per skip, nothing
            // in the background, and an acquire + release is two; back to back, each call finds
            // the connection the last one gave back.
            let provider = $provider::from_url(&via)
                .max_connections(1)
                .table(&table)
                .build()
                .unwrap();
            let held = provider.acquire("rt", MIN, "a").await.unwrap().unwrap();
            assert!(provider.acquire("rt", MIN, "b").await.unwrap().is_none()); // statement prepared
            let before = proxy.requests();
            for _ in 0..10 {
                assert!(provider.acquire("rt", MIN, "b").await.unwrap().is_none());
            }
            tokio::task::yield_now().await;
            assert_eq!(proxy.requests() - before, 10, "one round trip per skip, none after");
            assert!(provider.release(&held, Duration::ZERO).await.unwrap());
            let cycle = provider.acquire("rt2", MIN, "a").await.unwrap().unwrap(); // prepared
            assert!(provider.release(&cycle, Duration::ZERO).await.unwrap());
            let before = proxy.requests();
            let cycle = provider.acquire("rt2", MIN, "a").await.unwrap().unwrap();
            assert!(provider.release(&cycle, Duration::ZERO).await.unwrap());
            tokio::task::yield_now().await;
            assert_eq!(
                proxy.requests() - before,
                $cycle,
                "one round trip per statement of an acquire and a release"
            );
            assert_eq!(provider.connection_stats().open, 1);
            // A sqlx pool: ours (no ping on checkout) and sqlx's default (ping on checkout).
            for (test_before_acquire, expected) in [(false, 1), (true, 2)] {
                let pool = $provider::pool_options()
                    .max_connections(1)
                    .test_before_acquire(test_before_acquire)
                    .connect(&via)
                    .await
                    .unwrap();
                let provider = $provider::builder(pool.clone())
                    .table(&table)
                    .build()
                    .unwrap();
                let held = provider.acquire("rt", MIN, "a").await.unwrap().unwrap();
                assert!(provider.acquire("rt", MIN, "b").await.unwrap().is_none()); // statement prepared
                let idle = || async { pool.num_idle() == 1 };
                assert!($crate::common::eventually(Duration::from_secs(5), idle).await);
                let before = proxy.requests();
                assert!(provider.acquire("rt", MIN, "b").await.unwrap().is_none());
                // Read before yielding: sqlx's check of the returned connection has not started yet
                // (this test runs on a single-threaded runtime).
                let on_path = proxy.requests() - before;
                assert!($crate::common::eventually(Duration::from_secs(5), idle).await);
                let in_background = proxy.requests() - before - on_path;
                assert_eq!(
                    on_path, expected,
                    "test_before_acquire({test_before_acquire})"
                );
                assert_eq!(in_background, 1, "sqlx pings the connection it takes back");
                assert!(provider.release(&held, Duration::ZERO).await.unwrap());
            }
            drop_table(&url, &table).await;
        }
    };
}

pub(crate) use server_cases;
