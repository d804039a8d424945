//! `PgLockProvider` through a real `PgBouncer` in transaction mode (a private one, in front of
//! the shared Postgres, `SHEDLOCK_PG_URL`): without `transaction_pooler` sqlx's named prepared
//! statements break there; with it, the conformance suite, fire claims from several providers
//! and the admin's `list` work. Skipped without Postgres or the `pgbouncer` binary (failed
//! under `SHEDLOCK_REQUIRE_DB=1`).

use std::time::Duration;

use shedlock_core::provider::chrono::{self, Utc};
use shedlock_core::testkit::ConformanceSuite;
use shedlock_core::{
    admin::LockAdmin,
    provider::{Fire, FireClaim, LockProvider},
};
use shedlock_sqlx::{PgLockProvider, testing};
use shedlock_tests::pgbouncer::PgBouncer;

const MIN: Duration = Duration::from_mins(1);

/// The shared Postgres and a pgbouncer in transaction mode in front of it, or `None` (skipped).
async fn bouncer(test: &str) -> Option<(String, PgBouncer)> {
    let url = testing::postgres_url()?;
    let bouncer = PgBouncer::start_or_skip(&url, test).await?;
    Some((url, bouncer))
}

/// A provider through `bouncer` on `table`, in transaction-pooler mode or not.
fn provider(bouncer: &PgBouncer, table: &str, pooler: bool) -> PgLockProvider {
    PgLockProvider::from_url(bouncer.url())
        .table(table)
        .transaction_pooler(pooler)
        .build()
        .expect("a valid configuration")
}

/// Creates `table` on the database directly, and drops it when the test is done.
struct Table {
    url: String,
    name: String,
}

impl Table {
    async fn create(url: &str) -> Self {
        let name = testing::unique_table_name("shedlock_pgbouncer");
        let direct = PgLockProvider::from_url(url)
            .table(&name)
            .connect()
            .await
            .expect("connect to Postgres directly");
        direct
            .create_table_if_not_exists()
            .await
            .expect("create the table");
        Self {
            url: url.to_owned(),
            name,
        }
    }

    async fn drop_it(self) {
        let pool = PgLockProvider::pool_options()
            .connect(&self.url)
            .await
            .expect("connect to Postgres directly");
        shedlock_sqlx::sqlx::Executor::execute(
            &pool,
            shedlock_sqlx::sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {}", self.name)),
        )
        .await
        .expect("drop the table");
    }
}

/// Without the setting, sqlx's named prepared statements meet other server connections than
/// the ones they were prepared on: calls fail, saying so. (This proves that the tests go
/// through pgbouncer in transaction mode, with server connections that alternate.)
#[tokio::test]
async fn pooler_pgbouncer_without_the_setting_named_statements_break() {
    let Some((url, bouncer)) = bouncer("pooler_pgbouncer_without_the_setting").await else {
        return;
    };
    let table = Table::create(&url).await;
    // Two providers (two client connections at least): their statements share the server
    // connections, which pgbouncer hands to whichever transaction comes next.
    let (a, b) = (
        provider(&bouncer, &table.name, false),
        provider(&bouncer, &table.name, false),
    );
    let mut errors = Vec::new();
    for i in 0..20 {
        let name = format!("job-{}", i % 3);
        let (x, y) = tokio::join!(a.acquire(&name, MIN, "a"), b.holder(&name));
        for error in [x.err(), y.err()].into_iter().flatten() {
            errors.push(with_causes(&error));
        }
        if let Ok(Some(record)) = a.holder(&name).await {
            let _ = a.release(&record, Duration::ZERO).await;
        }
    }
    assert!(
        errors.iter().any(|e| e.contains("prepared statement")),
        "named prepared statements should break behind pgbouncer in transaction mode; errors: \
         {errors:?}"
    );
    drop(bouncer);
    table.drop_it().await;
}

/// `error` and its causes, one after another.
fn with_causes(error: &shedlock_core::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// With the setting, the provider passes the conformance suite through pgbouncer, and its
/// `create_table_if_not_exists` works there too.
#[tokio::test]
async fn pooler_pgbouncer_the_conformance_suite_passes() {
    let Some((url, bouncer)) = bouncer("pooler_pgbouncer_the_conformance_suite_passes").await
    else {
        return;
    };
    let name = testing::unique_table_name("shedlock_pgbouncer");
    let provider = provider(&bouncer, &name, true);
    provider
        .create_table_if_not_exists()
        .await
        .expect("create the table through pgbouncer");
    let report = ConformanceSuite::new(provider)
        .require_fire_claims(true)
        .run()
        .await;
    assert!(
        report.failed().is_empty() && report.skipped().is_empty(),
        "{report}"
    );
    drop(bouncer);
    Table { url, name }.drop_it().await;
}

/// Several providers (several client connections each) race for each of a series of fires
/// through pgbouncer: each fire is claimed exactly once, and the others are told so.
#[tokio::test]
async fn pooler_pgbouncer_each_fire_is_claimed_once() {
    const PROVIDERS: usize = 3;
    const FIRES: i64 = 15;
    let Some((url, bouncer)) = bouncer("pooler_pgbouncer_each_fire_is_claimed_once").await else {
        return;
    };
    let table = Table::create(&url).await;
    let providers: Vec<PgLockProvider> = (0..PROVIDERS)
        .map(|_| provider(&bouncer, &table.name, true))
        .collect();
    let now = Utc::now();
    let (base, next) = (
        now - chrono::Duration::minutes(10),
        now + chrono::Duration::hours(1),
    );
    for i in 0..FIRES {
        let fire = Fire::new(base + chrono::Duration::seconds(i), next).expect("a fire");
        let claims = claim_all(&providers, &fire).await;
        let claimed: Vec<_> = claims
            .iter()
            .filter_map(|claim| match claim {
                FireClaim::Claimed(record) => Some(record.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(claimed.len(), 1, "fire {i}: {claims:?}");
        for claim in &claims {
            assert!(
                matches!(
                    claim,
                    FireClaim::Claimed(_) | FireClaim::ClaimedElsewhere { .. }
                ),
                "fire {i}: {claim:?}"
            );
        }
        // The run ends: the next fire's claim finds the lock free.
        assert!(
            providers[0]
                .release(&claimed[0], Duration::ZERO)
                .await
                .expect("release")
        );
    }
    drop(bouncer);
    table.drop_it().await;
}

/// Every provider claims `fire` at once (each claim on a task of its own).
async fn claim_all(providers: &[PgLockProvider], fire: &Fire) -> Vec<FireClaim> {
    let tasks: Vec<_> = providers
        .iter()
        .enumerate()
        .map(|(i, provider)| {
            let (provider, fire) = (provider.clone(), *fire);
            tokio::spawn(async move {
                provider
                    .claim_fire("fired", &fire, MIN, &format!("replica-{i}"))
                    .await
            })
        })
        .collect();
    let mut claims = Vec::with_capacity(tasks.len());
    for task in tasks {
        claims.push(task.await.expect("the claim task").expect("a claim"));
    }
    claims
}

/// What `shedlock list` does, again and again through pgbouncer: each list sees the rows.
#[tokio::test]
async fn pooler_pgbouncer_repeated_lists_keep_working() {
    let Some((url, bouncer)) = bouncer("pooler_pgbouncer_repeated_lists_keep_working").await else {
        return;
    };
    let table = Table::create(&url).await;
    let provider = provider(&bouncer, &table.name, true);
    for name in ["alpha", "beta"] {
        provider
            .acquire(name, MIN, "lister")
            .await
            .expect("acquire")
            .expect("free");
    }
    for round in 0..10 {
        let entries = provider.list().await.expect("list");
        let names: Vec<&str> = entries.iter().map(|e| e.record().name()).collect();
        assert_eq!(names, ["alpha", "beta"], "round {round}");
        assert!(
            provider.entry("beta").await.expect("entry").is_some(),
            "round {round}"
        );
    }
    drop(bouncer);
    table.drop_it().await;
}
