//! The `sql_lock_provider!` macro.

/// Declares a public provider type around [`Provider`](crate::provider::Provider) for one dialect,
/// with its constructors, its builder's `build()`, the
/// [`LockProvider`](shedlock_core::provider::LockProvider) implementation and `Debug`. The type's
/// own documentation is the dialect's.
macro_rules! sql_lock_provider {
    (
        $(#[$doc:meta])*
        pub struct $name:ident($db:ty);
        options: $options:ty,
        url: $url:literal,
        offline url: $lazy:literal,
        $(#[$pool_doc:meta])*
        fn pool_options;
    ) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name($crate::provider::Provider<$db>);

        impl $name {
            /// The generic provider inside, for the crate's other surfaces, such as `admin.rs`.
            pub(crate) fn generic(&self) -> &$crate::provider::Provider<$db> {
                &self.0
            }
        }

        impl $name {
            /// A provider over the application's sqlx `pool`, on Java ShedLock's table `shedlock`
            /// with the call timeout
            /// [`DEFAULT_CALL_TIMEOUT`](shedlock_core::provider::DEFAULT_CALL_TIMEOUT). See
            /// [`builder`](Self::builder) for the settings. sqlx's pool pings every connection
            /// given back to it, so with no spare idle connection, the next lock call waits a
            /// second round trip for that ping. A provider from [`connect`](Self::connect) or
            /// [`from_url`](Self::from_url) never pings its own connections.
            ///
            /// ```no_run
            #[doc = concat!("use shedlock_sqlx::", stringify!($name), ";")]
            ///
            /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
            #[doc = concat!("let pool = ", stringify!($name), "::pool_options().connect(\"", $url, "\").await?;")]
            #[doc = concat!("let provider = ", stringify!($name), "::new(pool);")]
            /// # Ok(()) }
            /// ```
            #[must_use]
            pub fn new(pool: ::sqlx::Pool<$db>) -> Self {
                Self($crate::provider::Provider::new(
                    $crate::builder::Checked::Pool(pool),
                    $crate::builder::Settings::defaults(),
                ))
            }

            /// Starts configuring a provider over the application's sqlx `pool` (see
            /// [`new`](Self::new)). Finish with [`build`]($crate::LockProviderBuilder::build).
            pub fn builder(pool: ::sqlx::Pool<$db>) -> $crate::LockProviderBuilder<$db> {
                $crate::LockProviderBuilder::new(pool)
            }

            /// Starts configuring a provider with connections of its own to `url`: the table,
            /// columns, call timeout and
            /// [`max_connections`]($crate::LockProviderBuilder::max_connections). Finish with
            /// [`connect`]($crate::LockProviderBuilder::connect), which opens one connection now,
            /// or [`build`]($crate::LockProviderBuilder::build), which connects on first use. A
            /// connection goes back to the provider's list without a ping.
            ///
            /// ```no_run
            /// use std::time::Duration;
            #[doc = concat!("use shedlock_sqlx::", stringify!($name), ";")]
            ///
            /// # async fn example() -> shedlock_core::Result<()> {
            #[doc = concat!("let provider = ", stringify!($name), "::from_url(\"", $url, "\")")]
            ///     .table("job_locks")
            ///     .max_connections(2)
            ///     .call_timeout(Duration::from_secs(3))
            ///     .connect()
            ///     .await?;
            /// # Ok(()) }
            /// ```
            pub fn from_url(url: impl Into<String>) -> $crate::LockProviderBuilder<$db> {
                $crate::LockProviderBuilder::from_url(url.into())
            }

            /// Like [`from_url`](Self::from_url), from sqlx's connect options, which carry settings
            /// a URL cannot, such as TLS files, or SQLite's journal mode or busy timeout.
            ///
            /// ```no_run
            #[doc = concat!("use shedlock_sqlx::", stringify!($name), ";")]
            ///
            /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
            #[doc = concat!("let options = \"", $url, "\".parse()?;")]
            #[doc = concat!("let provider = ", stringify!($name), "::from_options(options).connect().await?;")]
            /// # Ok(()) }
            /// ```
            pub fn from_options(options: $options) -> $crate::LockProviderBuilder<$db> {
                $crate::LockProviderBuilder::from_options(options)
            }

            /// Options for a sqlx pool of your own, to pass to [`new`](Self::new) or
            /// [`builder`](Self::builder). The pool has at most
            /// [`DEFAULT_POOL_SIZE`]($crate::DEFAULT_POOL_SIZE) connections and keeps one open,
            /// does no ping on checkout (`test_before_acquire(false)`), waits
            /// [`DEFAULT_CALL_TIMEOUT`](shedlock_core::provider::DEFAULT_CALL_TIMEOUT) for a
            /// connection, and applies the database's session settings.
            $(#[$pool_doc])*
            ///
            /// ```no_run
            #[doc = concat!("use shedlock_sqlx::", stringify!($name), ";")]
            ///
            /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
            #[doc = concat!("let pool = ", stringify!($name), "::pool_options()")]
            ///     .max_connections(8)
            #[doc = concat!("    .connect(\"", $url, "\")")]
            ///     .await?;
            #[doc = concat!("let provider = ", stringify!($name), "::builder(pool).table(\"job_locks\").build()?;")]
            /// # Ok(()) }
            /// ```
            #[must_use]
            pub fn pool_options() -> ::sqlx::pool::PoolOptions<$db> {
                $crate::provider::Provider::<$db>::pool_options()
            }

            /// A provider with connections of its own to `url` and the default settings, the same
            /// as `from_url(url).connect()`. It opens one connection now, so a wrong URL, password
            /// or database fails here. A server refusing connections, down or restarting, is asked
            /// again until [`DEFAULT_CALL_TIMEOUT`](shedlock_core::provider::DEFAULT_CALL_TIMEOUT).
            ///
            /// # Errors
            ///
            /// [`Error::is_invalid_config`](shedlock_core::Error::is_invalid_config) if the URL
            /// does not parse or is another database's, naming the provider to use.
            /// [`Error::is_backend`](shedlock_core::Error::is_backend) if the database refused the
            /// connection, [`Error::is_timeout`](shedlock_core::Error::is_timeout) if it could not
            /// be reached in time. Each names the database's host and port and the cause.
            pub async fn connect(url: &str) -> ::shedlock_core::Result<Self> {
                Self::from_url(url).connect().await
            }

            /// Like [`connect`](Self::connect), but connects on first use, so startup does not
            /// need the database. It is the same as `from_url(url).build()`.
            ///
            /// # Errors
            ///
            /// [`Error::is_invalid_config`](shedlock_core::Error::is_invalid_config) if the URL
            /// does not parse or is another database's.
            pub fn connect_lazy(url: &str) -> ::shedlock_core::Result<Self> {
                Self::from_url(url).build()
            }

            /// The application's pool given to [`new`](Self::new) or [`builder`](Self::builder),
            /// `None` for a provider with connections of its own.
            #[must_use]
            pub fn pool(&self) -> Option<&::sqlx::Pool<$db>> {
                self.0.pool()
            }

            /// How many connections are open and idle now, and the most there may be.
            #[must_use]
            pub fn connection_stats(&self) -> $crate::ConnectionStats {
                self.0.connection_stats()
            }

            /// The `CREATE TABLE IF NOT EXISTS` statement for the configured table and columns,
            /// the migration file's for the default names.
            ///
            /// ```
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
            #[doc = concat!("let provider = shedlock_sqlx::", stringify!($name), "::connect_lazy(\"", $lazy, "\")?;")]
            /// assert!(provider.ddl().starts_with("CREATE TABLE IF NOT EXISTS"));
            /// assert!(provider.ddl().contains("fencing_token"));
            /// # Ok(()) }
            /// ```
            #[must_use]
            pub fn ddl(&self) -> &str {
                self.0.ddl()
            }

            /// Creates the lock table, with the fencing-token column, then the
            /// [`<table>_jobs` and `<table>_history`](crate#job-definitions-and-run-history)
            /// tables, each unless it exists. A lock table whose name is too long for theirs does
            /// not get them, with a warning. It looks first, so on existing tables it runs no
            /// `CREATE` and Postgres sends no "already exists" notice. It needs the privilege to
            /// create tables, and the schema of a schema-qualified table must exist.
            ///
            /// # Errors
            ///
            /// [`Error::is_backend`](shedlock_core::Error::is_backend) or
            /// [`Error::is_timeout`](shedlock_core::Error::is_timeout) if the statement failed.
            pub async fn create_table_if_not_exists(&self) -> ::shedlock_core::Result<()> {
                self.0.create_table_if_not_exists().await?;
                self.0.create_job_tables().await
            }
        }

        impl $crate::LockProviderBuilder<$db> {
            /// Checks the settings and builds the provider, without database access yet.
            ///
            /// # Errors
            ///
            /// [`Error::is_invalid_config`](shedlock_core::Error::is_invalid_config) for a table or
            /// column name that is not a plain identifier or that the database reserves, two
            /// columns with one name, a `max_name_len` of 0 or above 10,000, a zero call timeout,
            /// a URL that does not parse or is another database's, a `max_connections` of 0 or
            /// above 1,000, or `max_connections` on a builder over a pool. A table may be
            /// `schema.table`.
            pub fn build(self) -> ::shedlock_core::Result<$name> {
                let (source, settings) = self.into_parts()?;
                Ok($name($crate::provider::Provider::new(source, settings)))
            }

            /// Checks the settings, builds the provider and opens one connection now, kept for the
            /// first call. See [`connect`](Self::connect) for what that checks.
            ///
            /// # Errors
            ///
            /// Those of [`build`](Self::build), and
            /// [`Error::is_backend`](shedlock_core::Error::is_backend) or
            /// [`Error::is_timeout`](shedlock_core::Error::is_timeout) if the database refused the
            /// connection or could not be reached within the call timeout. Each names the
            /// database's host and port and the cause.
            pub async fn connect(self) -> ::shedlock_core::Result<$name> {
                let provider = self.build()?;
                provider.0.warm_up().await?;
                Ok(provider)
            }
        }

        #[::async_trait::async_trait]
        impl ::shedlock_core::provider::LockProvider for $name {
            async fn acquire(
                &self,
                name: &str,
                at_most: ::std::time::Duration,
                owner: &str,
            ) -> ::shedlock_core::Result<Option<::shedlock_core::provider::LockRecord>> {
                self.0.acquire(name, at_most, owner).await
            }

            async fn extend(
                &self,
                record: &::shedlock_core::provider::LockRecord,
                at_most: ::std::time::Duration,
            ) -> ::shedlock_core::Result<Option<::shedlock_core::provider::LockRecord>> {
                self.0.extend(record, at_most).await
            }

            async fn release(
                &self,
                record: &::shedlock_core::provider::LockRecord,
                at_least: ::std::time::Duration,
            ) -> ::shedlock_core::Result<bool> {
                self.0.release(record, at_least).await
            }

            async fn release_run(
                &self,
                record: &::shedlock_core::provider::LockRecord,
                at_least: ::std::time::Duration,
                run: &::shedlock_core::provider::RunReport,
            ) -> ::shedlock_core::Result<bool> {
                self.0.release_run(record, at_least, run).await
            }

            async fn release_runs(
                &self,
                releases: &[::shedlock_core::provider::ReleaseRequest<'_>],
            ) -> ::shedlock_core::Result<Vec<::shedlock_core::Result<bool>>> {
                self.0.release_runs(releases).await
            }

            fn release_batch_limit(&self) -> usize {
                self.0.release_batch_limit()
            }

            async fn holder(
                &self,
                name: &str,
            ) -> ::shedlock_core::Result<Option<::shedlock_core::provider::LockRecord>> {
                self.0.holder(name).await
            }

            async fn claim_fire(
                &self,
                name: &str,
                fire: &::shedlock_core::provider::Fire,
                at_most: ::std::time::Duration,
                owner: &str,
            ) -> ::shedlock_core::Result<::shedlock_core::provider::FireClaim> {
                self.0.claim_fire(name, fire, at_most, owner).await
            }

            async fn claim_fires(
                &self,
                claims: &[::shedlock_core::provider::ClaimRequest<'_>],
                owner: &str,
            ) -> ::shedlock_core::Result<
                Vec<::shedlock_core::Result<::shedlock_core::provider::FireClaim>>,
            > {
                self.0.claim_fires(claims, owner).await
            }

            fn fire_batch_limit(&self) -> usize {
                <$db as $crate::dialect::Dialect>::FIRE_BATCH
            }

            async fn pending_triggers(
                &self,
            ) -> ::shedlock_core::Result<Vec<::shedlock_core::provider::PendingTrigger>> {
                self.0.pending_triggers().await
            }

            async fn claim_trigger(
                &self,
                name: &str,
                id: i64,
                at_most: ::std::time::Duration,
                owner: &str,
            ) -> ::shedlock_core::Result<::shedlock_core::provider::TriggerClaim> {
                self.0.claim_trigger(name, id, at_most, owner).await
            }

            async fn watch_triggers(
                &self,
            ) -> ::shedlock_core::Result<::shedlock_core::provider::TriggerWake> {
                self.0.watch_triggers().await
            }

            async fn publish_definitions(
                &self,
                replica: &str,
                version: &str,
                definitions: &[::shedlock_core::provider::Definition],
                ttl: ::std::time::Duration,
            ) -> ::shedlock_core::Result<()> {
                self.0
                    .publish_definitions(replica, version, definitions, ttl)
                    .await
            }

            fn max_name_len(&self) -> usize {
                self.0.max_name_len()
            }
        }

        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                let s = self.0.settings();
                f.debug_struct(stringify!($name))
                    .field("table", &s.table.to_string())
                    .field("max_name_len", &s.max_name_len)
                    .field("call_timeout", &s.call_timeout)
                    .finish_non_exhaustive()
            }
        }
    };
}

pub(crate) use sql_lock_provider;
