//! `PgLockProvider` against a real Postgres (`SHEDLOCK_PG_URL`; skipped without it unless
//! `SHEDLOCK_REQUIRE_DB=1`). Each test uses a table of its own.

use crate::common;

use std::time::Duration;

use shedlock_core::provider::LockProvider;
use shedlock_sqlx::sqlx::postgres::{PgPool, PgPoolOptions};
use shedlock_sqlx::sqlx::{self, Executor as _};
use shedlock_sqlx::{PgLockProvider, testing};

const MIN: Duration = Duration::from_mins(1);

common::suite::server_store! {
    /// Postgres for the shared cases.
    Pg(PgLockProvider), url: testing::postgres_url, pool: PgPool, tables: "shedlock_pg_suite",
    migrations: "postgres", cycle_statements: 2,
    tests: #[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
}

/// Java ShedLock's DDL (no token column) for `table`.
fn java_ddl(table: &str) -> String {
    format!(
        "CREATE TABLE {table}(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL, \
         locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"
    )
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn a_held_lock_is_one_statement_that_writes_nothing() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (provider, table) = fresh(&url).await;
    let held = provider.acquire("job", MIN, "a").await.unwrap().unwrap();
    // xmin changes with every new row version and xmax with every row lock: a skipped acquire
    // must change neither (an unguarded `INSERT … ON CONFLICT DO UPDATE … WHERE`, Java's, would
    // lock the row; ours inserts nothing while a held lock is visible).
    let versions = || async {
        sqlx::query_as::<_, (String, String)>(sqlx::AssertSqlSafe(format!(
            "SELECT xmin::text, xmax::text FROM {table} WHERE name = 'job'"
        )))
        .fetch_one(&pool(&url).await)
        .await
        .unwrap()
    };
    let before = versions().await;
    for _ in 0..5 {
        assert!(provider.acquire("job", MIN, "b").await.unwrap().is_none());
    }
    assert_eq!(
        versions().await,
        before,
        "a skipped acquire wrote to the row"
    );
    assert!(provider.release(&held, Duration::ZERO).await.unwrap());
    drop_table(&url, &table).await;
}

/// The acquire is one guarded `INSERT … ON CONFLICT DO UPDATE`: acquires racing for a missing
/// row, and for an expired one, give exactly one winner and no error (no duplicate key), a row
/// deleted by hand is recreated by the next acquire, and tokens keep increasing throughout.
#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn racing_acquires_on_a_missing_or_expired_row_give_one_winner() {
    const RACERS: usize = 12;
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (provider, table) = fresh(&url).await;
    let race = |round: usize| {
        let provider = provider.clone();
        async move {
            let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(RACERS));
            let tasks: Vec<_> = (0..RACERS)
                .map(|i| {
                    let (provider, barrier) = (provider.clone(), barrier.clone());
                    tokio::spawn(async move {
                        barrier.wait().await;
                        provider
                            .acquire("raced", MIN, &format!("r{round}-{i}"))
                            .await
                    })
                })
                .collect();
            let mut won = Vec::new();
            for task in tasks {
                if let Some(record) = task.await.unwrap().expect("no error, no duplicate key") {
                    won.push(record);
                }
            }
            assert_eq!(won.len(), 1, "round {round}: one winner, got {won:?}");
            won.remove(0)
        }
    };
    let mut tokens = Vec::new();
    // Round 0: the row is missing.
    let first = race(0).await;
    tokens.push(first.fencing_token().unwrap());
    assert!(provider.release(&first, Duration::ZERO).await.unwrap());
    // Round 1: the row is there, expired.
    let second = race(1).await;
    tokens.push(second.fencing_token().unwrap());
    // Deleted by hand while held: the next acquire recreates it.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DELETE FROM {table} WHERE name = 'raced'"
    )))
    .execute(&pool(&url).await)
    .await
    .unwrap();
    let third = race(2).await;
    tokens.push(third.fencing_token().unwrap());
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens increase: {tokens:?}"
    );
    assert!(provider.release(&third, Duration::ZERO).await.unwrap());
    drop_table(&url, &table).await;
}

/// A fire claim that does not claim (claimed elsewhere, held, too early) changes no row version
/// and takes no row lock, like a skipped acquire.
#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn a_fire_claim_that_does_not_claim_writes_nothing() {
    use shedlock_core::provider::{ClaimRequest, FireClaim};
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (provider, table) = fresh(&url).await;
    let direct = pool(&url).await;
    let versions = |name: &'static str| {
        let (pool, table) = (direct.clone(), table.clone());
        async move {
            sqlx::query_as::<_, (String, String)>(sqlx::AssertSqlSafe(format!(
                "SELECT xmin::text, xmax::text FROM {table} WHERE name = '{name}'"
            )))
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    let fire = open_fire(&direct).await;
    let claimed = provider.claim_fire("fired", &fire, MIN, "a").await.unwrap();
    let claimed = claimed.claimed().expect("the first claim wins").clone();
    assert!(provider.release(&claimed, Duration::ZERO).await.unwrap());
    let held = provider.acquire("held", MIN, "a").await.unwrap().unwrap();
    let (fired, busy) = (versions("fired").await, versions("held").await);
    let later = shedlock_core::provider::Fire::new(
        fire.at() + chrono::Duration::days(1),
        fire.at() + chrono::Duration::days(2),
    )
    .unwrap();
    for _ in 0..3 {
        let elsewhere = provider.claim_fire("fired", &fire, MIN, "b").await.unwrap();
        assert!(
            matches!(elsewhere, FireClaim::ClaimedElsewhere { .. }),
            "{elsewhere:?}"
        );
        let early = provider
            .claim_fire("fired", &later, MIN, "b")
            .await
            .unwrap();
        assert!(matches!(early, FireClaim::TooEarly { .. }), "{early:?}");
        let busy_reply = provider.claim_fire("held", &fire, MIN, "b").await.unwrap();
        assert!(
            matches!(busy_reply, FireClaim::Held { .. }),
            "{busy_reply:?}"
        );
        // The same claims in one batch statement write nothing either.
        let claims = [
            ClaimRequest::new("fired", &fire, MIN),
            ClaimRequest::new("held", &fire, MIN),
        ];
        let batch = provider.claim_fires(&claims, "b").await.unwrap();
        assert!(
            matches!(
                batch.as_slice(),
                [
                    Ok(FireClaim::ClaimedElsewhere { .. }),
                    Ok(FireClaim::Held { .. })
                ]
            ),
            "{batch:?}"
        );
    }
    assert_eq!(
        versions("fired").await,
        fired,
        "a fire claimed elsewhere wrote"
    );
    assert_eq!(versions("held").await, busy, "a held fire wrote");
    assert!(provider.release(&held, Duration::ZERO).await.unwrap());
    drop_table(&url, &table).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn the_session_time_zone_changes_nothing() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let table = testing::unique_table_name("shedlock_pg_tz");
    let zoned = |zone: &'static str| {
        PgPoolOptions::new()
            .max_connections(2)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    conn.execute(sqlx::AssertSqlSafe(format!("SET TIME ZONE '{zone}'")))
                        .await?;
                    Ok(())
                })
            })
            .connect(&url)
    };
    let east = PgLockProvider::builder(zoned("Pacific/Kiritimati").await.unwrap())
        .table(&table)
        .build()
        .unwrap();
    let west = PgLockProvider::builder(zoned("America/Los_Angeles").await.unwrap())
        .table(&table)
        .build()
        .unwrap();
    east.create_table_if_not_exists().await.unwrap();
    // The stored values are UTC wall-clock times, whatever the writer's session zone.
    let utc = pool(&url).await;
    common::zones_agree(&east, &west, async || {
        let (stored, db_now): (chrono::NaiveDateTime, chrono::DateTime<chrono::Utc>) =
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT locked_at, now() FROM {table} WHERE name = 'tz'"
            )))
            .fetch_one(&utc)
            .await
            .unwrap();
        (stored.and_utc(), db_now)
    })
    .await;
    drop_table(&url, &table).await;
}

/// Tables that do not fit (columns, lengths, keys) and what the schema error says for each.
fn wrong_tables() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMPTZ NOT NULL, \
             locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL",
            "lock_until is timestamp with time zone",
        ),
        (
            "name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL, \
             locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL",
            "not the primary key",
        ),
        (
            "name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP NOT NULL, \
             locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, \
             fencing_token INTEGER NOT NULL DEFAULT 0",
            "fencing_token is integer, expected BIGINT",
        ),
        (
            "name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP NOT NULL, \
             locked_by VARCHAR(255) NOT NULL",
            "locked_at is missing",
        ),
        (
            "name VARCHAR(32) PRIMARY KEY, lock_until TIMESTAMP NOT NULL, \
             locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL",
            "holds 32 characters but max_name_len is 64",
        ),
        (
            "name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP NOT NULL, \
             locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, \
             last_fire TIMESTAMPTZ NULL",
            "column last_fire is timestamp with time zone",
        ),
    ]
}

/// A batch statement the database refuses with an error committed nothing, so its claims, and
/// then its releases, are sent again one by one and each is answered: here a trigger refuses every write made by the
/// batch's statement (the one with `unnest`), and lets the single claims write.
#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn a_batch_the_database_refuses_is_claimed_one_by_one() {
    use shedlock_core::jobs::RunOutcome;
    use shedlock_core::provider::{ClaimRequest, FireClaim, ReleaseRequest, RunReport};
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (provider, table) = fresh(&url).await;
    let direct = pool(&url).await;
    let names = ["refused-a", "refused-b", "refused-c"];
    // Two rows exist (the batch would update them), one does not (it would insert it).
    for name in &names[..2] {
        let record = provider.acquire(name, MIN, "plain").await.unwrap().unwrap();
        assert!(provider.release(&record, Duration::ZERO).await.unwrap());
    }
    let function = format!("{table}_refuse");
    direct
        .execute(sqlx::AssertSqlSafe(format!(
            "CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             IF current_query() LIKE '%unnest(%' THEN RAISE EXCEPTION 'batch refused by a test'; \
             END IF; RETURN NEW; END $$"
        )))
        .await
        .unwrap();
    direct
        .execute(sqlx::AssertSqlSafe(format!(
            "CREATE TRIGGER {table}_refuse BEFORE INSERT OR UPDATE ON {table} \
             FOR EACH ROW EXECUTE FUNCTION {function}()"
        )))
        .await
        .unwrap();
    let refused = direct
        .execute(sqlx::AssertSqlSafe(format!(
            "UPDATE {table} SET locked_by = locked_by WHERE name IN (SELECT unnest(ARRAY['{}']))",
            names[0]
        )))
        .await
        .expect_err("the trigger refuses a write of a statement with unnest");
    assert!(
        refused.to_string().contains("batch refused by a test"),
        "{refused}"
    );
    let fire = open_fire(&direct).await;
    let claims = names.map(|name| ClaimRequest::new(name, &fire, MIN));
    let answers = provider.claim_fires(&claims, "a").await.unwrap();
    let mut records = Vec::new();
    for (name, answer) in names.iter().zip(answers) {
        match answer {
            Ok(FireClaim::Claimed(record)) => {
                assert_eq!(record.name(), *name);
                records.push(record);
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    // The batch of their releases is refused too, and each is then released on its own.
    let run = RunReport::new(fire.at(), RunOutcome::Succeeded);
    let releases: Vec<_> = records
        .iter()
        .map(|record| ReleaseRequest::new(record, Duration::ZERO, &run))
        .collect();
    let answers = provider.release_runs(&releases).await.unwrap();
    assert!(answers.iter().all(|r| matches!(r, Ok(true))), "{answers:?}");
    let recorded: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM {table} WHERE last_run_outcome = 'succeeded' AND lock_until <= \
         timezone('UTC', now())"
    )))
    .fetch_one(&direct)
    .await
    .unwrap();
    assert_eq!(recorded, 3);
    direct
        .execute(sqlx::AssertSqlSafe(format!(
            "DROP TABLE {table}; DROP FUNCTION {function}()"
        )))
        .await
        .unwrap();
}

/// A fire open now by the database's clock: it began a second ago and closes in a minute.
async fn open_fire(direct: &PgPool) -> shedlock_core::provider::Fire {
    let now: chrono::NaiveDateTime = sqlx::query_scalar("SELECT timezone('UTC', now())")
        .fetch_one(direct)
        .await
        .unwrap();
    let at = now.and_utc() - chrono::Duration::seconds(1);
    shedlock_core::provider::Fire::new(at, at + chrono::Duration::minutes(1)).unwrap()
}

/// Makes the lock rows of `names`, free, and opens a transaction that holds the row of `held`, as
/// an operator's open transaction may.
async fn rows_with_one_held(
    provider: &PgLockProvider,
    direct: &PgPool,
    table: &str,
    names: &[&str],
    held: &str,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    for name in names {
        let record = provider.acquire(name, MIN, "plain").await.unwrap().unwrap();
        assert!(provider.release(&record, Duration::ZERO).await.unwrap());
    }
    let mut holder = direct.begin().await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT name FROM {table} WHERE name = $1 FOR UPDATE"
    )))
    .bind(held)
    .fetch_one(&mut *holder)
    .await
    .unwrap();
    holder
}

/// A lock row that another transaction holds, as an operator's open transaction may, holds up
/// its own claim and not the batch's: the batch waits its bound for the row, then claims the
/// others without it and answers the held one "busy", having written nothing to its row. On its
/// own, once the row is free, that claim succeeds.
#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn a_row_held_by_another_transaction_is_left_to_its_own_claim() {
    use shedlock_core::provider::{ClaimRequest, FireClaim};
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (provider, table) = fresh(&url).await;
    let direct = pool(&url).await;
    let names = ["held-a", "held-b", "held-c"];
    let holder = rows_with_one_held(&provider, &direct, &table, &names, "held-b").await;
    let fire = open_fire(&direct).await;
    let claims = names.map(|name| ClaimRequest::new(name, &fire, MIN));
    let answers = provider.claim_fires(&claims, "batch").await.unwrap();
    for (name, answer) in names.iter().zip(&answers) {
        match answer {
            Ok(FireClaim::Claimed(record)) if *name != "held-b" => {
                assert_eq!(record.name(), *name);
            }
            Err(error) if *name == "held-b" => {
                assert!(error.is_busy(), "{error:?}");
                let text = error.to_string();
                assert!(
                    text.contains("\"held-b\"") && text.contains("held by another transaction"),
                    "{text}"
                );
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    // The batch answered while the row was still held, and wrote nothing to it.
    let (by, fired): (String, Option<chrono::NaiveDateTime>) = sqlx::query_as(sqlx::AssertSqlSafe(
        format!("SELECT locked_by, last_fire FROM {table} WHERE name = 'held-b'"),
    ))
    .fetch_one(&direct)
    .await
    .unwrap();
    assert_eq!((by.as_str(), fired), ("plain", None));
    holder.commit().await.unwrap();
    match provider.claim_fire("held-b", &fire, MIN, "batch").await {
        Ok(FireClaim::Claimed(record)) => assert_eq!(record.owner(), "batch"),
        other => panic!("held-b on its own: {other:?}"),
    }
    direct
        .execute(sqlx::AssertSqlSafe(format!("DROP TABLE {table}")))
        .await
        .unwrap();
}

/// A lock row that another transaction holds holds up its own release, not the batch's: the
/// batch of releases waits its bound for the row, then releases the others without it and answers
/// the held one "busy", having written nothing to its row; so does a lone release of it. Once the
/// row is free, that release succeeds.
#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn a_row_held_by_another_transaction_is_left_to_its_own_release() {
    use shedlock_core::jobs::RunOutcome;
    use shedlock_core::provider::{ReleaseRequest, RunReport};
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (provider, table) = fresh(&url).await;
    let direct = pool(&url).await;
    let names = ["rel-held-a", "rel-held-b", "rel-held-c"];
    let mut records = Vec::new();
    for name in names {
        records.push(
            provider
                .acquire(name, MIN, "runner")
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let mut holder = direct.begin().await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT name FROM {table} WHERE name = 'rel-held-b' FOR UPDATE"
    )))
    .fetch_one(&mut *holder)
    .await
    .unwrap();
    let run = RunReport::new(chrono::Utc::now(), RunOutcome::Succeeded);
    let releases: Vec<_> = records
        .iter()
        .map(|record| ReleaseRequest::new(record, Duration::ZERO, &run))
        .collect();
    let answers = provider.release_runs(&releases).await.unwrap();
    for (name, answer) in names.iter().zip(&answers) {
        match answer {
            Ok(true) if *name != "rel-held-b" => {}
            Err(error) if *name == "rel-held-b" => {
                assert!(error.is_busy(), "{error:?}");
                assert!(error.to_string().contains("\"rel-held-b\""), "{error}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    // The batch answered while the row was still held: the others are free and recorded, the
    // held one untouched.
    let rows: Vec<(String, bool, Option<String>)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT name, lock_until > timezone('UTC', now()), last_run_outcome FROM {table} \
         ORDER BY name"
    )))
    .fetch_all(&direct)
    .await
    .unwrap();
    let expected = |name: &str, held: bool, outcome: Option<&str>| {
        (name.to_owned(), held, outcome.map(str::to_owned))
    };
    assert_eq!(
        rows,
        [
            expected("rel-held-a", false, Some("succeeded")),
            expected("rel-held-b", true, None),
            expected("rel-held-c", false, Some("succeeded")),
        ]
    );
    // A lone release, a batch of one, is bounded the same way.
    let lone = provider
        .release_runs(&[ReleaseRequest::new(&records[1], Duration::ZERO, &run)])
        .await
        .unwrap();
    assert!(
        matches!(lone.as_slice(), [Err(error)] if error.is_busy()),
        "{lone:?}"
    );
    holder.commit().await.unwrap();
    assert!(
        provider
            .release_run(&records[1], Duration::ZERO, &run)
            .await
            .unwrap()
    );
    drop_table(&url, &table).await;
}

/// A scheduler's jobs keep running each fire while another transaction holds one job's lock row
/// (an operator's open transaction): the held job waits alone and runs once the row is free.
/// Without a bound on a batch's wait, the batch holding that row stopped every job's claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn jobs_keep_running_while_one_lock_row_is_held() {
    use shedlock_core::{Job, LockingTaskExecutor, Schedule, Scheduler};
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (provider, table) = fresh(&url).await;
    let direct = pool(&url).await;
    let names = ["row-held-a", "row-held-b", "row-held-c", "row-held-d"];
    let holder = rows_with_one_held(&provider, &direct, &table, &names, "row-held-b").await;
    let executor = LockingTaskExecutor::builder(provider)
        .owner_id("replica")
        .default_at_most(MIN)
        .build()
        .unwrap();
    let scheduler = Scheduler::new(executor);
    let runs: Arc<Mutex<HashMap<&'static str, usize>>> = Arc::default();
    for name in names {
        let runs = Arc::clone(&runs);
        scheduler
            .add(Job::new(
                name,
                Schedule::every(Duration::from_secs(1)).unwrap(),
                move |_| {
                    *runs.lock().unwrap().entry(name).or_default() += 1;
                    async {}
                },
            ))
            .unwrap();
    }
    scheduler.start().await.unwrap();
    let count = |name: &str| runs.lock().unwrap().get(name).copied().unwrap_or(0);
    let others_ran = common::eventually(Duration::from_secs(15), || async {
        ["row-held-a", "row-held-c", "row-held-d"]
            .iter()
            .all(|&name| count(name) >= 3)
    })
    .await;
    assert!(
        others_ran,
        "the other jobs ran 3 fires each within 15 s: {:?}",
        runs.lock().unwrap()
    );
    assert_eq!(count("row-held-b"), 0, "the held job did not run");
    holder.commit().await.unwrap();
    let held_ran = common::eventually(Duration::from_secs(15), || async {
        count("row-held-b") >= 1
    })
    .await;
    assert!(
        held_ran,
        "the held job ran once its row was free: {:?}",
        runs.lock().unwrap()
    );
    scheduler.shutdown(Duration::from_secs(1)).await;
    drop_table(&url, &table).await;
}

/// The batch statements on the table layouts they have variants for: Java's table with only
/// `last_fire` added (no token, no pause or job state columns), our DDL whose configured column
/// names are the claims' own aliases (`rn`, `u`, `a`, `b`), and our DDL without the token column
/// whose names are the releases' aliases (`rb`, `rg`, `ra`, `re`), which they must keep apart. On
/// the last two, the job state suite's batch of releases runs too, guarded by the token and by
/// `locked_at`.
#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn batches_of_claims_and_releases_work_on_every_table_layout() {
    use shedlock_core::testkit::{ConformanceSuite, JobStateSuite};
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let pool = pool(&url).await;
    let java = testing::unique_table_name("java_fires");
    pool.execute(sqlx::AssertSqlSafe(java_ddl(&java)))
        .await
        .unwrap();
    pool.execute(sqlx::AssertSqlSafe(format!(
        "ALTER TABLE {java} ADD COLUMN last_fire TIMESTAMP NULL"
    )))
    .await
    .unwrap();
    let aliased = testing::unique_table_name("aliased");
    let untokened = testing::unique_table_name("untokened");
    let layouts = [
        PgLockProvider::builder(pool.clone())
            .table(&java)
            .build()
            .unwrap(),
        PgLockProvider::builder(pool.clone())
            .table(&aliased)
            .name_column("rn")
            .lock_until_column("u")
            .locked_at_column("a")
            .locked_by_column("b")
            .build()
            .unwrap(),
        PgLockProvider::builder(pool.clone())
            .table(&untokened)
            .name_column("rb")
            .lock_until_column("rg")
            .locked_at_column("ra")
            .locked_by_column("re")
            .build()
            .unwrap(),
    ];
    for (layout, provider) in layouts.into_iter().enumerate() {
        provider.create_table_if_not_exists().await.unwrap();
        let job_state = layout > 0;
        if layout == 2 {
            pool.execute(sqlx::AssertSqlSafe(format!(
                "ALTER TABLE {untokened} DROP COLUMN fencing_token"
            )))
            .await
            .unwrap();
        }
        if job_state {
            assert!(provider.release_batch_limit() > 1);
            JobStateSuite::new(provider.clone()).run().await;
        }
        let report = ConformanceSuite::new(provider)
            .require_fire_claims(true)
            .run()
            .await;
        assert!(report.failed().is_empty(), "{report}");
        assert!(
            !report
                .skipped()
                .iter()
                .any(|(case, _)| case.starts_with("fire_batch")),
            "{report}"
        );
    }
    for table in [java, aliased, untokened] {
        pool.execute(sqlx::AssertSqlSafe(format!("DROP TABLE {table}")))
            .await
            .unwrap();
    }
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn schema_qualified_tables_and_custom_columns_work() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let pool = pool(&url).await;
    let schema = testing::unique_table_name("locks");
    pool.execute(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .await
        .unwrap();
    let provider = common::custom_columns(
        PgLockProvider::builder(pool.clone()).table(format!("{schema}.Job_Locks")),
    )
    .max_name_len(100)
    .build()
    .unwrap();
    let long = "n".repeat(100);
    let extended = common::a_custom_table_takes_a_lock(&provider, &long).await;
    assert!(provider.release(&extended, Duration::ZERO).await.unwrap());
    let owner: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT owner FROM {schema}.\"Job_Locks\" WHERE lock_name = $1"
    )))
    .bind(&long)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(owner, "me");
    pool.execute(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .await
        .unwrap();
}

/// A server that refuses the login fails `connect()` at once, naming the server and its words.
#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn a_refused_login_names_the_server_and_its_reason() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let target = format!(
        "Postgres at {}:{}/{}",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or("postgres")
    );
    let stranger = options.username("shedlock_no_such_role").password("secret");
    let url = format!(
        "postgres://shedlock_no_such_role:secret@{}:{}/{}",
        stranger.get_host(),
        stranger.get_port(),
        stranger.get_database().unwrap_or("postgres")
    );
    let err = PgLockProvider::connect(&url)
        .await
        .expect_err("no such role");
    assert!(err.is_backend(), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("lock store failed to connect to {target}: "))
            && text.contains("shedlock_no_such_role"),
        "{text}"
    );
    assert!(!text.contains("secret"), "{text}");
    assert_no_server_line(&err);

    // A statement's error: its source reads like the server's message, without the line either.
    let provider = PgLockProvider::from_url(testing::postgres_url().unwrap())
        .table("shedlock_no_such_schema.locks")
        .build()
        .unwrap();
    let err = provider
        .create_table_if_not_exists()
        .await
        .expect_err("no such schema");
    assert_no_server_line(&err);
    let chain = error_chain(&err);
    assert!(
        chain.contains("schema \"shedlock_no_such_schema\" does not exist"),
        "{chain}"
    );
}

/// `error` and its sources, one per line.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    let mut next = Some(error);
    while let Some(e) = next {
        text.push_str(&e.to_string());
        text.push('\n');
        next = e.source();
    }
    text
}

/// Neither `error` nor any of its sources ends Postgres's message with the line of the server's
/// source that raised it (sqlx writes ` at line 948`).
#[track_caller]
fn assert_no_server_line(error: &shedlock_core::Error) {
    let chain = error_chain(error);
    assert!(!chain.contains(" at line "), "{chain}");
}

/// A provider in transaction-pooler mode runs each statement unnamed inside `BEGIN` …
/// `COMMIT`: four round trips per statement instead of one (`BEGIN`, parse, bind and execute,
/// `COMMIT`), counted on the wire of a direct connection. The setting comes from the builder
/// or from the URL (`?transaction_pooler=true`, taken out before sqlx reads the URL).
#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn in_transaction_pooler_mode_a_statement_costs_four_round_trips() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (_direct, table) = fresh(&url).await;
    let proxy = common::Proxy::start(common::url_addr(&url)).await;
    let via = common::url_via(&url, proxy.addr);
    let separator = if via.contains('?') { '&' } else { '?' };
    let providers = [
        (
            "default",
            PgLockProvider::from_url(&via).max_connections(1),
            1,
        ),
        (
            "builder",
            PgLockProvider::from_url(&via)
                .max_connections(1)
                .transaction_pooler(true),
            4,
        ),
        (
            "url",
            PgLockProvider::from_url(format!("{via}{separator}transaction_pooler=true"))
                .max_connections(1),
            4,
        ),
    ];
    for (how, builder, per_statement) in providers {
        let provider = builder.table(&table).build().unwrap();
        let name = format!("rt-{how}");
        let held = provider.acquire(&name, MIN, "a").await.unwrap().unwrap();
        assert!(provider.acquire(&name, MIN, "b").await.unwrap().is_none()); // warmed up
        let before = proxy.requests();
        for _ in 0..10 {
            assert!(provider.acquire(&name, MIN, "b").await.unwrap().is_none());
        }
        tokio::task::yield_now().await;
        assert_eq!(
            proxy.requests() - before,
            10 * per_statement,
            "{how}: round trips of 10 skips"
        );
        assert!(provider.release(&held, Duration::ZERO).await.unwrap());
        let before = proxy.requests();
        let cycle = provider.acquire(&name, MIN, "a").await.unwrap().unwrap();
        assert!(provider.release(&cycle, Duration::ZERO).await.unwrap());
        tokio::task::yield_now().await;
        assert_eq!(
            proxy.requests() - before,
            2 * per_statement,
            "{how}: round trips of an acquire and a release"
        );
        assert_eq!(provider.connection_stats().open, 1, "{how}");
    }
    drop_table(&url, &table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn a_pause_committed_during_the_claim_statement_is_honoured() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (_, table) = fresh(&url).await;
    let provider = PgLockProvider::from_url(&url)
        .table(&table)
        .call_timeout(Duration::from_secs(30))
        .build()
        .expect("valid settings");
    let pool = pool(&url).await;
    common::pause::a_pause_committed_during_a_claim_is_honoured(
        &pool,
        provider,
        &table,
        "timezone('UTC', now())",
        "SELECT count(*) FROM pg_stat_activity \
         WHERE wait_event_type = 'Lock' AND query LIKE $1",
    )
    .await;
    drop_table(&url, &table).await;
}

/// Each run: replica, trigger id, fire.
type Runs =
    std::sync::Arc<std::sync::Mutex<Vec<(String, Option<i64>, chrono::DateTime<chrono::Utc>)>>>;

/// Three replicas over one Postgres table, each with an hourly job (no fire of its own during the
/// test) and the trigger loop watching by `LISTEN`: each trigger runs exactly once, as the
/// trigger's run (its fire is the request time), and the recorded fire is never written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn three_schedulers_run_each_trigger_once_and_record_no_fire() {
    use shedlock_core::admin::LockAdmin as _;
    use shedlock_core::trigger::TriggerAnswer;
    use shedlock_core::{Job, LockingTaskExecutor, Schedule, Scheduler};
    use std::sync::Arc;
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (provider, table) = fresh(&url).await;
    let provider = Arc::new(provider);
    let runs = Runs::default();
    let mut schedulers = Vec::new();
    for owner in ["replica-a", "replica-b", "replica-c"] {
        let executor = LockingTaskExecutor::builder(Arc::clone(&provider))
            .owner_id(owner)
            .default_at_most(MIN)
            .build()
            .unwrap();
        let scheduler = Scheduler::new(executor);
        let runs = Arc::clone(&runs);
        scheduler
            .add(Job::new(
                "report",
                Schedule::every(Duration::from_hours(1)).unwrap(),
                move |run| {
                    let runs = Arc::clone(&runs);
                    async move {
                        runs.lock().unwrap().push((
                            owner.to_owned(),
                            run.trigger(),
                            run.fire().at(),
                        ));
                    }
                },
            ))
            .unwrap();
        scheduler.start().await.unwrap();
        schedulers.push(scheduler);
    }
    for round in 1..=3 {
        let trigger = loop {
            match provider.trigger("report", "ann", MIN).await.unwrap() {
                TriggerAnswer::Requested(trigger) => break trigger,
                // The last run's release is on its way.
                TriggerAnswer::Held(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                other => panic!("trigger answered {other:?}"),
            }
        };
        let finished = common::eventually(Duration::from_secs(10), || async {
            let entry = provider.entry("report").await.unwrap().unwrap();
            !entry.is_held()
                && entry
                    .state()
                    .and_then(|s| s.last_run.as_ref())
                    .is_some_and(|run| run.fire == trigger.requested_at)
        })
        .await;
        assert!(finished, "round {round}: no finished run within 10 s");
        let seen = runs.lock().unwrap().clone();
        assert_eq!(seen.len(), round, "each trigger ran once: {seen:?}");
        let (by, id, fire) = seen.last().unwrap().clone();
        assert_eq!((id, fire), (Some(trigger.id), trigger.requested_at));
        let entry = provider.entry("report").await.unwrap().unwrap();
        let taken = entry.trigger().and_then(|t| t.taken_by.clone()).unwrap();
        assert!(taken.starts_with(&by), "{taken} took it, {by} ran it");
        assert_eq!(entry.last_fire(), None, "a trigger never records a fire");
    }
    for scheduler in &schedulers {
        scheduler.shutdown(Duration::from_secs(1)).await;
    }
    assert_eq!(runs.lock().unwrap().len(), 3);
    drop_table(&url, &table).await;
}

/// The watch wakes on a trigger and ends (`None`) when its connection dies, so the scheduler
/// polls and asks for a new one; a new watch works again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn a_watch_wakes_on_a_trigger_and_ends_with_its_connection() {
    use shedlock_core::admin::LockAdmin as _;
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (provider, table) = fresh(&url).await;
    let mut watch = provider.watch_triggers().await.unwrap();
    assert!(provider.trigger("a", "ann", MIN).await.is_ok());
    let woke = tokio::time::timeout(Duration::from_secs(5), watch.next()).await;
    assert_eq!(woke, Ok(Some(())), "a trigger wakes the watch");
    // Only this test's listener: its last statement is the LISTEN on this table's channel.
    let listen = format!("LISTEN \"{table}_trigger\"");
    let killed: Vec<(bool,)> =
        sqlx::query_as("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1")
            .bind(&listen)
            .fetch_all(&pool(&url).await)
            .await
            .unwrap();
    assert_eq!(killed, [(true,)], "one listener on {listen}");
    let ended = tokio::time::timeout(Duration::from_secs(5), watch.next()).await;
    assert_eq!(ended, Ok(None), "a dead connection ends the watch");
    let mut again = provider.watch_triggers().await.unwrap();
    assert!(provider.trigger("b", "ann", MIN).await.is_ok());
    let woke = tokio::time::timeout(Duration::from_secs(5), again.next()).await;
    assert_eq!(woke, Ok(Some(())), "a new watch wakes");
    drop_table(&url, &table).await;
}

/// A trigger claim is one statement on Postgres whatever it answers: claimed, held, gone, each
/// one round trip (the CTE reports the row it saw, as the fire claim's does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn a_trigger_claim_is_one_round_trip_whatever_it_answers() {
    use shedlock_core::admin::LockAdmin as _;
    use shedlock_core::trigger::{TriggerAnswer, TriggerClaim};
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (direct, table) = fresh(&url).await;
    let proxy = common::Proxy::start(common::url_addr(&url)).await;
    let via = common::url_via(&url, proxy.addr);
    let provider = PgLockProvider::from_url(&via)
        .max_connections(1)
        .table(&table)
        .build()
        .unwrap();
    let requested = |name: &'static str| {
        let direct = direct.clone();
        async move {
            match direct.trigger(name, "ann", MIN).await.unwrap() {
                TriggerAnswer::Requested(trigger) => trigger,
                other => panic!("{other:?}"),
            }
        }
    };
    // Statement prepared and layout read first.
    let warm = requested("warm").await;
    assert!(matches!(
        provider
            .claim_trigger("warm", warm.id, MIN, "a")
            .await
            .unwrap(),
        TriggerClaim::Claimed(_)
    ));
    let trigger = requested("job").await;
    let held = direct.acquire("job", MIN, "other").await.unwrap().unwrap();
    let mut answers = Vec::new();
    for step in 0..3 {
        if step == 1 {
            assert!(direct.release(&held, Duration::ZERO).await.unwrap());
        }
        let before = proxy.requests();
        let answer = provider
            .claim_trigger("job", trigger.id, MIN, "a")
            .await
            .unwrap();
        tokio::task::yield_now().await;
        answers.push((
            match answer {
                TriggerClaim::Held { .. } => "held",
                TriggerClaim::Claimed(_) => "claimed",
                TriggerClaim::Gone { .. } => "gone",
                _ => "other",
            },
            proxy.requests() - before,
        ));
    }
    assert_eq!(answers, [("held", 1), ("claimed", 1), ("gone", 1)]);
    drop_table(&url, &table).await;
}
