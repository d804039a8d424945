//! [`LockAdmin`] for the SQL providers: list every row with the database's now, free one
//! acquisition in one conditional `UPDATE`, DDL and create-table.
//!
//! Written once over the [`Dialect`]: the statements ([`statements`]) take its spelling (its
//! now, its session pin and hint, its typed `NULL`s, its parameters), the rows are read with its
//! time readers, and whether the table has the `last_fire` column comes from the table layout
//! the provider detected once ([`Schema::has_last_fire`]). The calls themselves
//! (`Provider::admin_list`, `Provider::admin_unlock`) are in the provider's impl, under the
//! bounds it already states.
//!
//! Freeing sets `lock_until` to the database's now and nothing else: the holder, `locked_at`,
//! the token and the recorded fire (`last_fire`) stay, so freeing never re-runs a fire. The
//! `last_fire` column is read when the table has it and reported absent when it does not (Java
//! ShedLock's table).

use shedlock_core::{Result, admin::LockEntry, provider::LockRecord};
use sqlx::{ColumnIndex, Decode, Row, Type};

use crate::builder::Settings;
use crate::dialect::{Dialect, LAST_FIRE, Map};
use crate::link::Schema;

/// The admin statements for one table layout.
pub(crate) struct Statements {
    /// Every row: name, `locked_by`, `locked_at`, `lock_until`, token, `last_fire`, the database's now.
    pub(crate) list: String,
    /// The same for one name (parameter 1).
    pub(crate) entry: String,
    /// Frees (1 name, 2 owner, 3 `locked_at`[, 4 token]) if it is still held.
    pub(crate) unlock: String,
}

/// The statements for `settings`' table, with or without the token and `last_fire` columns.
pub(crate) fn statements<D: Dialect>(s: &Settings, schema: Schema) -> Statements {
    let table = s.table.quoted(D::QUOTE);
    let c = s.columns.quoted(D::QUOTE);
    let (pre, hint, now) = (D::PIN, D::HINT, D::NOW);
    let tok = if schema.has_token {
        c.fencing_token.clone()
    } else {
        D::NULL_TOKEN.to_owned()
    };
    let fire = if schema.has_last_fire {
        D::QUOTE.quote(LAST_FIRE)
    } else {
        D::NULL_TIME.to_owned()
    };
    let select = format!(
        "{pre}SELECT {hint} {}, {}, {}, {}, {tok}, {fire}, {now} FROM {table}",
        c.name, c.locked_by, c.locked_at, c.lock_until
    );
    let same_token = if schema.has_token {
        format!(" AND {} = {}", c.fencing_token, D::param(4))
    } else {
        String::new()
    };
    Statements {
        entry: format!("{select} WHERE {} = {}", c.name, D::param(1)),
        list: select,
        unlock: format!(
            "{pre}UPDATE {hint} {table} SET {until} = {now} \
             WHERE {name} = {p1} AND {by} = {p2} AND {at} = {p3}{same_token} AND {until} > {now}",
            until = c.lock_until,
            name = c.name,
            by = c.locked_by,
            at = c.locked_at,
            p1 = D::param(1),
            p2 = D::param(2),
            p3 = D::param(3),
        ),
    }
}

/// A listed row: name, owner, `locked_at`, `lock_until`, token, `last_fire`, now.
pub(crate) fn entry<D: Dialect>(row: &D::Row, map: &Map<'_>) -> Result<LockEntry>
where
    for<'r> String: Decode<'r, D> + Type<D>,
    for<'r> i64: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
{
    let record = LockRecord::new(
        row.try_get::<String, _>(0).map_err(map)?,
        row.try_get::<String, _>(1).map_err(map)?,
        D::read_time(row, 2, map)?,
        D::read_time(row, 3, map)?,
    )
    .with_fencing_token(row.try_get(4).map_err(map)?);
    Ok(LockEntry::new(
        record,
        D::read_time(row, 6, map)?,
        D::read_opt_time(row, 5, map)?,
    ))
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

/// The `LockAdmin` impl of one provider, on its generic provider.
macro_rules! admin {
    ($provider:ty) => {
        #[async_trait::async_trait]
        impl shedlock_core::admin::LockAdmin for $provider {
            async fn list(&self) -> shedlock_core::Result<Vec<shedlock_core::admin::LockEntry>> {
                self.generic().admin_list("list", None).await
            }

            async fn entry(
                &self,
                name: &str,
            ) -> shedlock_core::Result<Option<shedlock_core::admin::LockEntry>> {
                Ok(self.generic().admin_list("entry", Some(name)).await?.pop())
            }

            async fn unlock(
                &self,
                expected: &shedlock_core::provider::LockRecord,
            ) -> shedlock_core::Result<bool> {
                self.generic().admin_unlock(expected).await
            }

            fn ddl(&self) -> Option<String> {
                Some(<$provider>::ddl(self).to_owned())
            }

            async fn create_table(&self) -> shedlock_core::Result<()> {
                self.create_table_if_not_exists().await
            }

            async fn missing_ddl(&self) -> shedlock_core::Result<Option<String>> {
                let mut statements: Vec<String> = Vec::new();
                statements.extend(self.generic().missing_job_tables().await?);
                Ok((!statements.is_empty()).then(|| format!("{};", statements.join(";\n"))))
            }

            async fn definitions(
                &self,
            ) -> shedlock_core::Result<Vec<shedlock_core::jobs::DefinitionEntry>> {
                self.generic().definitions().await
            }

            async fn history(
                &self,
                lock_name: &str,
                limit: usize,
            ) -> shedlock_core::Result<Vec<shedlock_core::jobs::RunEntry>> {
                self.generic().history(lock_name, limit).await
            }

            async fn forget(&self, job: &str) -> shedlock_core::Result<u64> {
                self.generic().forget(job).await
            }
        }
    };
}

#[cfg(feature = "postgres")]
admin!(crate::PgLockProvider);
#[cfg(feature = "mysql")]
admin!(crate::MySqlLockProvider);
#[cfg(feature = "sqlite")]
admin!(crate::SqliteLockProvider);
