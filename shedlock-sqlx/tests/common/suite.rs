#![allow(
    unused_macros,
    unused_imports,
    reason = "not every test file runs the suite"
)]
//! The store test cases every SQL database runs, written once over [`Store`]; each database's
//! test file implements [`Store`] and instantiates the cases with [`store_suite!`].

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::LockProvider;
use shedlock_core::testkit::ConformanceSuite;
use tokio::sync::Barrier;

const MIN: Duration = Duration::from_mins(1);

/// One database the cases run on: where tables go, and how to make them.
pub(crate) trait Store: Sized {
    type Provider: LockProvider + Clone + 'static;

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
    /// Creates `provider`'s table.
    async fn create_table(provider: &Self::Provider);
    /// A new, unique table name.
    fn table_name(&self) -> String;
    /// Java ShedLock's DDL for this database (no token column) for `table`.
    fn java_ddl(table: &str) -> String;
    /// Runs `sql` on a connection of the database.
    async fn execute(&self, sql: String);
    /// Drops `table`.
    async fn drop_table(&self, table: &str);
}

/// The provider passes the contract's conformance suite on our DDL.
pub(crate) async fn conformance_suite_passes<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (provider, table) = db.fresh().await;
    ConformanceSuite::new(provider).run().await;
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
    ConformanceSuite::new(provider).run().await;
    db.drop_table(&table).await;
}

/// Four providers on pools of their own race for one lock: exactly one wins each time.
pub(crate) async fn providers_on_separate_pools_race_and_exactly_one_wins_each_round<S: Store>() {
    let Some(db) = S::open().await else { return };
    let (first, table) = db.fresh().await;
    let mut providers = vec![first];
    for _ in 0..3 {
        providers.push(db.on_table(&table).await);
    }
    // Each round races on a new, missing row (the insert path) and then on the existing row.
    for round in 0..20 {
        for name in [format!("race-{round}"), format!("race-{round}")] {
            let barrier = Arc::new(Barrier::new(providers.len()));
            let racers: Vec<_> = providers
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let (p, barrier, name) = (p.clone(), barrier.clone(), name.clone());
                    tokio::spawn(async move {
                        barrier.wait().await;
                        p.acquire(&name, MIN, &format!("racer-{i}")).await
                    })
                })
                .collect();
            let mut winners = Vec::new();
            for racer in racers {
                if let Some(record) = racer.await.unwrap().expect("no errors under contention") {
                    winners.push(record);
                }
            }
            assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
            assert!(
                providers[0]
                    .release(&winners[0], Duration::ZERO)
                    .await
                    .unwrap()
            );
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

/// A missing table is an error that names the table and the DDL to run; a table created later
/// is picked up without a restart, and one dropped while running is reported the same way.
pub(crate) async fn a_missing_table_names_the_table_and_the_ddl<S: Store>() {
    let Some(db) = S::open().await else { return };
    let table = db.table_name();
    let provider = db.on_table(&table).await;
    let err = provider.acquire("job", MIN, "me").await.unwrap_err();
    assert!(err.is_missing_table(), "{err}");
    let message = err.to_string();
    assert!(message.contains(&table), "{message}");
    assert!(message.contains("CREATE TABLE IF NOT EXISTS"), "{message}");
    let migration = format!("migrations/{}/0001_shedlock.sql", S::MIGRATIONS);
    assert!(message.contains(&migration), "{message}");

    S::create_table(&provider).await;
    let record = provider.acquire("job", MIN, "me").await.unwrap().unwrap();
    db.drop_table(&table).await;
    let err = provider.release(&record, Duration::ZERO).await.unwrap_err();
    assert!(err.is_missing_table(), "{err}");
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

/// The [`Store`] of a database server reached through a URL, for a test file that defines
/// `pool(url)`, `fresh(url)`, `drop_table(pool, table)` and `java_ddl(table)`; then the cases,
/// each with the attributes after `tests:` (the database's ignore-without-a-URL).
macro_rules! server_store {
    (
        $(#[$doc:meta])*
        $store:ident($provider:ident), url: $url:path, tables: $tables:literal,
        migrations: $migrations:literal, tests: $(#[$test:meta])*
    ) => {
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
                $provider::builder(pool(&self.url).await)
                    .table(table)
                    .build()
                    .unwrap()
            }

            async fn on_one_connection(&self, table: &str) -> $provider {
                // The pool this limits is the provider's own: lock calls take it for one statement each.
                let single = $provider::pool_options()
                    .max_connections(1)
                    .min_connections(0)
                    .connect(&self.url)
                    .await
                    .unwrap();
                let provider = $provider::builder(single)
                    .table(table)
                    .call_timeout(::std::time::Duration::from_secs(30))
                    .build()
                    .unwrap();
                provider.create_table_if_not_exists().await.unwrap();
                provider
            }

            fn pool_size(provider: &$provider) -> u32 {
                provider.pool().size()
            }

            const MIGRATIONS: &'static str = $migrations;

            async fn create_table(provider: &$provider) {
                provider.create_table_if_not_exists().await.unwrap();
            }

            fn table_name(&self) -> String {
                testing::unique_table_name($tables)
            }

            fn java_ddl(table: &str) -> String {
                java_ddl(table)
            }

            async fn execute(&self, sql: String) {
                pool(&self.url)
                    .await
                    .execute(sqlx::AssertSqlSafe(sql))
                    .await
                    .unwrap();
            }

            async fn drop_table(&self, table: &str) {
                drop_table(&pool(&self.url).await, table).await;
            }
        }

        $crate::common::suite::store_suite!($(#[$test])* $store);
    };
}

pub(crate) use server_store;
