//! Job definitions in the `<table>_jobs` table ([`crate::tables`]): publishing a replica's
//! ([`LockProvider::publish_definitions`](shedlock_core::provider::LockProvider::publish_definitions)),
//! listing those not expired, and forgetting a job. See [the crate's
//! docs](crate#job-definitions-and-run-history) for the statements and round trips. On Postgres a
//! publish is one statement that deletes the expired entries and upserts every entry from arrays.

use std::collections::BTreeMap;
use std::time::Duration;

use shedlock_core::{
    Error, Result,
    jobs::{Definition, DefinitionEntry},
    provider::MAX_DURATION,
};
use sqlx::{AssertSqlSafe, ColumnIndex, Decode, Encode, Executor, IntoArguments, Row, Type};

use crate::dialect::Dialect;
use crate::link::statement;
use crate::provider::Provider;
use crate::tables::{
    MAX_JOB_LEN, MAX_VERSION_LEN, Publish, Which, job_table_error, names, run_queries,
};

/// Checks a text against its column's length, in characters.
fn check_len(what: &str, value: &str, max: usize) -> Result<()> {
    let len = value.chars().count();
    if value.is_empty() {
        return Err(Error::invalid_config(format!("the {what} is empty")));
    }
    if len > max {
        return Err(Error::invalid_config(format!(
            "the {what} {value:?} is {len} characters long; the definitions table holds {max}"
        )));
    }
    Ok(())
}

impl<D: Dialect> Provider<D>
where
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> Option<&'q str>: Encode<'q, D> + Type<D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'r> String: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
    D::Arguments: IntoArguments<D>,
{
    /// Publishes `definitions` of `replica` and removes the expired entries, in one statement or
    /// transaction (see the module's docs).
    pub(crate) async fn publish_definitions(
        &self,
        replica: &str,
        version: &str,
        definitions: &[Definition],
        ttl: Duration,
    ) -> Result<()> {
        let link = self.link();
        let s = &link.settings;
        let t = names::<D>(s)?;
        check_len("replica (owner id)", replica, MAX_JOB_LEN)?;
        check_len("version", version, MAX_VERSION_LEN)?;
        if ttl.is_zero() || ttl > MAX_DURATION {
            return Err(Error::invalid_config(format!(
                "the definitions' ttl is {ttl:?}; use a positive duration of at most 365 days"
            )));
        }
        // One entry per job: the last given wins (an upsert may not write a row twice).
        let mut by_job = BTreeMap::new();
        for d in definitions {
            check_len("job name", &d.job, MAX_JOB_LEN)?;
            link.check_name(&d.lock_name)?;
            by_job.insert(d.job.as_str(), (d.lock_name.as_str(), d.spec.as_str()));
        }
        let args = Publish {
            replica,
            version,
            entries: by_job
                .into_iter()
                .map(|(job, (lock, spec))| (job, lock, spec))
                .collect(),
            ttl,
        };
        let call = &link
            .call("publish_definitions")
            .about(format!("replica {replica:?}"));
        let (t, args) = (&t, &args);
        let target = link.target();
        let map = &|e| job_table_error::<D>(s, target, Which::Jobs, "publish definitions", e);
        link.run(call, |mut c| async move {
            run_queries(&mut c, s.transaction_pooler, D::publish(t, args), map)
                .await
                .map(drop)
        })
        .await
    }

    /// The definitions that have not expired by the database's clock, sorted in code by job, then
    /// replica, in byte order whatever the columns' collation.
    pub(crate) async fn definitions(&self) -> Result<Vec<DefinitionEntry>> {
        let link = self.link();
        let s = &link.settings;
        let t = names::<D>(s)?;
        let sql = format!(
            "{}SELECT {} job, replica, lock_name, version, spec, published, expires FROM {} \
             WHERE expires > {}",
            D::PIN,
            D::HINT,
            t.jobs,
            D::NOW
        );
        let sql = &sql;
        let call = &link.call("definitions");
        let target = link.target();
        let map = &|e| job_table_error::<D>(s, target, Which::Jobs, "list the definitions", e);
        let mut entries = link
            .run(call, |mut c| async move {
                let query = sqlx::query(AssertSqlSafe(sql.clone()));
                let rows = statement!(c, query, map, fetch_all)?;
                rows.iter()
                    .map(|row| {
                        Ok(DefinitionEntry::new(
                            Definition::new(
                                row.try_get::<String, _>(0).map_err(map)?,
                                row.try_get::<String, _>(2).map_err(map)?,
                                row.try_get::<String, _>(4).map_err(map)?,
                            ),
                            row.try_get::<String, _>(1).map_err(map)?,
                            row.try_get::<String, _>(3).map_err(map)?,
                            D::read_time(row, 5, map)?,
                            D::read_time(row, 6, map)?,
                        ))
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .await?;
        entries.sort_by(|a, b| {
            (a.definition.job.as_str(), a.replica.as_str())
                .cmp(&(b.definition.job.as_str(), b.replica.as_str()))
        });
        Ok(entries)
    }

    /// Removes every replica's definition of `job`, and answers how many it removed.
    pub(crate) async fn forget(&self, job: &str) -> Result<u64> {
        let link = self.link();
        let s = &link.settings;
        let t = names::<D>(s)?;
        check_len("job name", job, MAX_JOB_LEN)?;
        let sql = format!("DELETE FROM {} WHERE job = {}", t.jobs, D::param(1));
        let sql = &sql;
        let call = &link.call("forget").about(format!("job {job:?}"));
        let target = link.target();
        let map = &|e| job_table_error::<D>(s, target, Which::Jobs, "forget a job", e);
        link.run(call, |mut c| async move {
            let query = sqlx::query(AssertSqlSafe(sql.clone())).bind(job);
            let done = statement!(c, query, map, execute)?;
            Ok(D::rows_affected(&done))
        })
        .await
    }
}
