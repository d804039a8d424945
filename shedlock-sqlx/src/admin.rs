//! [`LockAdmin`] for the SQL providers: list every row with the database's now, free one
//! acquisition in one conditional `UPDATE`, DDL and create-table.
//!
//! The statements and the calls are written once ([`statements`], [`admin!`]); each database adds
//! only its SQL spelling ([`AdminSql`]), how it binds and reads times, and how it asks whether
//! the table has a column. (These still sit beside the provider's [`Dialect`](crate::dialect::Dialect)
//! trait rather than in it: folding them in is part of the open one-provider work.)
//!
//! Freeing sets `lock_until` to the database's now and nothing else: the holder, `locked_at`,
//! the token and the recorded fire (`last_fire`) stay, so freeing never re-runs a fire. The
//! `last_fire` column is read when the table has it (asked on each listing: an operator's call,
//! not the hot path) and reported absent when it does not (Java ShedLock's table).

use chrono::{DateTime, Utc};
use shedlock_core::{LockEntry, LockRecord, Result};

use crate::builder::Settings;
use crate::ident::Quote;
use crate::store::Schema;

/// The column holding a job's recorded fire, where the table has it.
pub(crate) const LAST_FIRE: &str = "last_fire";

/// The admin statements for one table layout.
pub(crate) struct Statements {
    /// Every row: name, `locked_by`, `locked_at`, `lock_until`, token, `last_fire`, the database's now.
    pub(crate) list: String,
    /// The same for one name (parameter 1).
    pub(crate) entry: String,
    /// Frees (1 name, 2 owner, 3 `locked_at`[, 4 token]) if it is still held.
    pub(crate) unlock: String,
}

/// How one database spells the admin statements.
pub(crate) struct AdminSql {
    pub(crate) quote: Quote,
    /// The database's now, as the provider's own statements read it.
    pub(crate) now: &'static str,
    /// A statement prefix that pins the session (MySQL's time zone); usually empty.
    pub(crate) prefix: &'static str,
    /// What follows `SELECT` / `UPDATE` (MySQL's optimizer hint); usually empty.
    pub(crate) hint: &'static str,
    /// NULLs of the token's and of a time's type.
    pub(crate) null_token: &'static str,
    pub(crate) null_time: &'static str,
    /// The `n`th parameter (1-based).
    pub(crate) param: fn(usize) -> String,
}

/// `$1`, `$2`, … (Postgres).
#[cfg(feature = "postgres")]
pub(crate) fn dollar(n: usize) -> String {
    format!("${n}")
}

/// `?` (MySQL, SQLite: parameters in order).
#[cfg(any(feature = "mysql", feature = "sqlite"))]
pub(crate) fn question(_: usize) -> String {
    "?".to_owned()
}

/// The statements for `settings`' table, with or without the token and `last_fire` columns.
pub(crate) fn statements(
    d: &AdminSql,
    s: &Settings,
    schema: Schema,
    last_fire: bool,
) -> Statements {
    let table = s.table.quoted(d.quote);
    let c = s.columns.quoted(d.quote);
    let (pre, hint, now) = (d.prefix, d.hint, d.now);
    let tok = if schema.has_token {
        c.fencing_token.clone()
    } else {
        d.null_token.to_owned()
    };
    let fire = if last_fire {
        d.quote.quote(LAST_FIRE)
    } else {
        d.null_time.to_owned()
    };
    let select = format!(
        "{pre}SELECT {hint} {}, {}, {}, {}, {tok}, {fire}, {now} FROM {table}",
        c.name, c.locked_by, c.locked_at, c.lock_until
    );
    let same_token = if schema.has_token {
        format!(" AND {} = {}", c.fencing_token, (d.param)(4))
    } else {
        String::new()
    };
    Statements {
        entry: format!("{select} WHERE {} = {}", c.name, (d.param)(1)),
        list: select,
        unlock: format!(
            "{pre}UPDATE {hint} {table} SET {until} = {now} \
             WHERE {name} = {p1} AND {by} = {p2} AND {at} = {p3}{same_token} AND {until} > {now}",
            until = c.lock_until,
            name = c.name,
            by = c.locked_by,
            at = c.locked_at,
            p1 = (d.param)(1),
            p2 = (d.param)(2),
            p3 = (d.param)(3),
        ),
    }
}

/// One listed row, decoded: name, owner, `locked_at`, `lock_until`, token, `last_fire`, now.
pub(crate) type Listed = (
    String,
    String,
    DateTime<Utc>,
    DateTime<Utc>,
    Option<i64>,
    Option<DateTime<Utc>>,
    DateTime<Utc>,
);

pub(crate) fn entry((name, owner, at, until, token, fire, now): Listed) -> LockEntry {
    LockEntry::new(
        LockRecord::new(name, owner, at, until).with_fencing_token(token),
        now,
        fire,
    )
}

/// Sorted by name in code (byte order), whatever the column's collation.
pub(crate) fn sorted(rows: Vec<Listed>) -> Vec<LockEntry> {
    let mut entries: Vec<LockEntry> = rows.into_iter().map(entry).collect();
    entries.sort_by(|a, b| a.record().name().cmp(b.record().name()));
    entries
}

/// Whether `expected` can be matched on this table: it carries a token iff the table has one.
///
/// # Errors
///
/// [`shedlock_core::Error::is_invalid_config`] for a record without the token the table has.
pub(crate) fn check_expected(schema: Schema, expected: &LockRecord) -> Result<Option<i64>> {
    if schema.has_token && expected.fencing_token().is_none() {
        return Err(shedlock_core::Error::invalid_config(format!(
            "unlocking {:?} needs its fencing token: the table has a fencing_token column",
            expected.name()
        )));
    }
    Ok(expected.fencing_token().filter(|_| schema.has_token))
}

/// The `LockAdmin` impl of one provider: `$rows` reads (all or one), `$bind_time` binds a
/// `locked_at`, the rest is shared.
macro_rules! admin {
    ($provider:ty) => {
        #[async_trait::async_trait]
        impl shedlock_core::LockAdmin for $provider {
            async fn list(&self) -> shedlock_core::Result<Vec<shedlock_core::LockEntry>> {
                let call = &self.admin_store().call("list");
                Ok($crate::admin::sorted(self.admin_rows(call, None).await?))
            }

            async fn entry(
                &self,
                name: &str,
            ) -> shedlock_core::Result<Option<shedlock_core::LockEntry>> {
                self.admin_store().check_name(name)?;
                let call = &self.admin_store().call("entry");
                Ok(self
                    .admin_rows(call, Some(name))
                    .await?
                    .pop()
                    .map($crate::admin::entry))
            }

            async fn unlock(
                &self,
                expected: &shedlock_core::LockRecord,
            ) -> shedlock_core::Result<bool> {
                self.admin_store().check_name(expected.name())?;
                let call = &self.admin_store().call("unlock");
                self.admin_unlock(call, expected).await
            }

            fn ddl(&self) -> Option<String> {
                Some(<$provider>::ddl(self).to_owned())
            }

            async fn create_table(&self) -> shedlock_core::Result<()> {
                self.create_table_if_not_exists().await
            }
        }
    };
}
pub(crate) use admin;

/// The `admin_unlock` method of one provider: the one conditional `UPDATE`, with `locked_at`
/// bound as `$locked_at` computes it from the record `$r`.
macro_rules! admin_unlock {
    (|$r:ident| $locked_at:expr) => {
        pub(crate) async fn admin_unlock(
            &self,
            call: &Call,
            expected: &LockRecord,
        ) -> Result<bool> {
            let store = self.generic().store();
            let schema = self.generic().schema(call).await?;
            let token = $crate::admin::check_expected(schema, expected)?;
            let sql = &statements(&DIALECT, &store.settings, schema, false).unlock;
            let what = format!("unlock {:?}", expected.name());
            let map = |e| self.generic().map_error(e, &what);
            let locked_at = &{
                let $r = expected;
                $locked_at
            };
            store
                .run(call, map, |mut c| async move {
                    let query = sqlx::query(AssertSqlSafe(sql.clone()))
                        .bind(expected.name())
                        .bind(expected.owner())
                        .bind(locked_at);
                    let query = match token {
                        Some(token) => query.bind(token),
                        None => query,
                    };
                    let outcome = call.timed(query.execute(c.conn())).await;
                    Ok(c.settle(outcome, map)?.rows_affected() == 1)
                })
                .await
        }
    };
}
pub(crate) use admin_unlock;

#[cfg(feature = "postgres")]
mod pg {
    use chrono::NaiveDateTime;
    use shedlock_core::{LockRecord, Result};
    use sqlx::postgres::{PgRow, Postgres};
    use sqlx::{AssertSqlSafe, Row};

    use super::{AdminSql, LAST_FIRE, Listed, dollar, statements};
    use crate::PgLockProvider;
    use crate::ident::Quote;
    use crate::store::{Call, Store};

    const DIALECT: AdminSql = AdminSql {
        quote: Quote::Double,
        now: crate::postgres::NOW,
        prefix: "",
        hint: "",
        null_token: "NULL::bigint",
        null_time: "NULL::timestamp",
        param: dollar,
    };

    const HAS_COLUMN: &str = "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = \
         to_regclass($1) AND attname = $2 AND attnum > 0 AND NOT attisdropped)";

    fn decode(r: &PgRow) -> Result<Listed, sqlx::Error> {
        let time = |i: usize| r.try_get::<NaiveDateTime, _>(i).map(|t| t.and_utc());
        Ok((
            r.try_get(0)?,
            r.try_get(1)?,
            time(2)?,
            time(3)?,
            r.try_get(4)?,
            r.try_get::<Option<NaiveDateTime>, _>(5)?
                .map(|t| t.and_utc()),
            time(6)?,
        ))
    }

    impl PgLockProvider {
        pub(crate) fn admin_store(&self) -> &Store<Postgres> {
            self.generic().store()
        }

        pub(crate) async fn admin_rows(
            &self,
            call: &Call,
            name: Option<&str>,
        ) -> Result<Vec<Listed>> {
            let store = self.generic().store();
            let schema = self.generic().schema(call).await?;
            let what = name.map_or_else(
                || "list the locks".to_owned(),
                |n| format!("read lock {n:?}"),
            );
            let map = |e| self.generic().map_error(e, &what);
            let regclass = &store.settings.table.quoted(Quote::Double);
            store
                .run(call, map, |mut c| async move {
                    let outcome = call
                        .timed(
                            sqlx::query_scalar::<_, bool>(HAS_COLUMN)
                                .bind(regclass)
                                .bind(LAST_FIRE)
                                .fetch_one(c.conn()),
                        )
                        .await;
                    let last_fire = c.settle(outcome, map)?;
                    let sql = statements(&DIALECT, &store.settings, schema, last_fire);
                    let query = match name {
                        Some(name) => sqlx::query(AssertSqlSafe(sql.entry)).bind(name),
                        None => sqlx::query(AssertSqlSafe(sql.list)),
                    };
                    let outcome = call.timed(query.fetch_all(c.conn())).await;
                    let rows = c.settle(outcome, map)?;
                    rows.iter().map(|r| decode(r).map_err(map)).collect()
                })
                .await
        }

        super::admin_unlock!(|r| r.locked_at().naive_utc());
    }

    super::admin!(PgLockProvider);
}

#[cfg(feature = "mysql")]
mod my {
    use chrono::{DateTime, NaiveDateTime, Utc};
    use shedlock_core::{LockRecord, Result};
    use sqlx::mysql::{MySql, MySqlRow};
    use sqlx::{AssertSqlSafe, Row};

    use super::{AdminSql, LAST_FIRE, Listed, question, statements};
    use crate::MySqlLockProvider;
    use crate::ident::Quote;
    use crate::mysql::{HINT, NOW, PIN};
    use crate::store::{Call, Store};

    const DIALECT: AdminSql = AdminSql {
        quote: Quote::Backtick,
        now: NOW,
        prefix: PIN,
        hint: HINT,
        null_token: "CAST(NULL AS SIGNED)",
        null_time: "CAST(NULL AS DATETIME(3))",
        param: question,
    };

    const HAS_COLUMN: &str = "SELECT COUNT(*) FROM information_schema.columns \
         WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? AND column_name = ?";

    /// `TIMESTAMP` columns read as UTC (the statements pin the session to UTC); the database's
    /// now (`UTC_TIMESTAMP(3)`) is a `DATETIME`.
    fn decode(r: &MySqlRow) -> Result<Listed, sqlx::Error> {
        Ok((
            r.try_get(0)?,
            r.try_get(1)?,
            r.try_get::<DateTime<Utc>, _>(2)?,
            r.try_get::<DateTime<Utc>, _>(3)?,
            r.try_get(4)?,
            r.try_get::<Option<DateTime<Utc>>, _>(5)?,
            r.try_get::<NaiveDateTime, _>(6)?.and_utc(),
        ))
    }

    impl MySqlLockProvider {
        pub(crate) fn admin_store(&self) -> &Store<MySql> {
            self.generic().store()
        }

        pub(crate) async fn admin_rows(
            &self,
            call: &Call,
            name: Option<&str>,
        ) -> Result<Vec<Listed>> {
            let store = self.generic().store();
            let schema = self.generic().schema(call).await?;
            let what = name.map_or_else(
                || "list the locks".to_owned(),
                |n| format!("read lock {n:?}"),
            );
            let map = |e| self.generic().map_error(e, &what);
            let table = &store.settings.table;
            store
                .run(call, map, |mut c| async move {
                    let outcome = call
                        .timed(
                            sqlx::query_scalar::<_, i64>(HAS_COLUMN)
                                .bind(table.schema.as_deref())
                                .bind(&table.table)
                                .bind(LAST_FIRE)
                                .fetch_one(c.conn()),
                        )
                        .await;
                    let last_fire = c.settle(outcome, map)? > 0;
                    let sql = statements(&DIALECT, &store.settings, schema, last_fire);
                    let query = match name {
                        Some(name) => sqlx::query(AssertSqlSafe(sql.entry)).bind(name),
                        None => sqlx::query(AssertSqlSafe(sql.list)),
                    };
                    let outcome = call.timed(query.fetch_all(c.conn())).await;
                    let rows = c.settle(outcome, map)?;
                    rows.iter().map(|r| decode(r).map_err(map)).collect()
                })
                .await
        }

        super::admin_unlock!(|r| r.locked_at());
    }

    super::admin!(MySqlLockProvider);
}

#[cfg(feature = "sqlite")]
mod lite {
    use shedlock_core::{LockRecord, Result};
    use sqlx::sqlite::{Sqlite, SqliteRow};
    use sqlx::{AssertSqlSafe, Row};

    use super::{AdminSql, LAST_FIRE, Listed, question, statements};
    use crate::SqliteLockProvider;
    use crate::ident::Quote;
    use crate::sqlite::{CHRONO_FORMAT, NOW};

    /// A time column, as the provider reads SQLite's text times.
    fn time(r: &SqliteRow, index: usize) -> Result<chrono::DateTime<chrono::Utc>> {
        <Sqlite as crate::dialect::Dialect>::read_time(r, index, &|e| {
            shedlock_core::Error::backend("read a lock row", e)
        })
    }
    use crate::store::{Call, Store};

    const DIALECT: AdminSql = AdminSql {
        quote: Quote::Double,
        now: NOW,
        prefix: "",
        hint: "",
        null_token: "NULL",
        null_time: "NULL",
        param: question,
    };

    fn decode(r: &SqliteRow) -> Result<Listed> {
        let text = |i: usize| {
            r.try_get(i)
                .map_err(|e| shedlock_core::Error::backend("read a lock row", e))
        };
        let fire = match r
            .try_get::<Option<String>, _>(5)
            .map_err(|e| shedlock_core::Error::backend("read a lock row", e))?
        {
            Some(_) => Some(time(r, 5)?),
            None => None,
        };
        Ok((
            text(0)?,
            text(1)?,
            time(r, 2)?,
            time(r, 3)?,
            r.try_get(4)
                .map_err(|e| shedlock_core::Error::backend("read a lock row", e))?,
            fire,
            time(r, 6)?,
        ))
    }

    impl SqliteLockProvider {
        pub(crate) fn admin_store(&self) -> &Store<Sqlite> {
            self.generic().store()
        }

        pub(crate) async fn admin_rows(
            &self,
            call: &Call,
            name: Option<&str>,
        ) -> Result<Vec<Listed>> {
            let store = self.generic().store();
            let schema = self.generic().schema(call).await?;
            let what = name.map_or_else(
                || "list the locks".to_owned(),
                |n| format!("read lock {n:?}"),
            );
            let map = |e| self.generic().map_error(e, &what);
            let table = &store.settings.table;
            store
                .run(call, map, |mut c| async move {
                    let has_column = match &table.schema {
                        Some(schema) => sqlx::query_scalar::<_, i64>(
                            "SELECT COUNT(*) FROM pragma_table_info(?1, ?2) WHERE name = ?3",
                        )
                        .bind(&table.table)
                        .bind(schema),
                        None => sqlx::query_scalar::<_, i64>(
                            "SELECT COUNT(*) FROM pragma_table_info(?1) WHERE name = ?2",
                        )
                        .bind(&table.table),
                    };
                    let outcome = call
                        .timed(has_column.bind(LAST_FIRE).fetch_one(c.conn()))
                        .await;
                    let last_fire = c.settle(outcome, map)? > 0;
                    let sql = statements(&DIALECT, &store.settings, schema, last_fire);
                    let query = match name {
                        Some(name) => sqlx::query(AssertSqlSafe(sql.entry)).bind(name),
                        None => sqlx::query(AssertSqlSafe(sql.list)),
                    };
                    let outcome = call.timed(query.fetch_all(c.conn())).await;
                    let rows = c.settle(outcome, map)?;
                    rows.iter().map(decode).collect()
                })
                .await
        }

        super::admin_unlock!(|r| r.locked_at().format(CHRONO_FORMAT).to_string());
    }

    super::admin!(SqliteLockProvider);
}
