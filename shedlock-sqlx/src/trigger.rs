//! Run now in the lock table's [`TRIGGER_COLUMNS`]: [`LockAdmin::trigger`]
//! (`Provider::admin_trigger`), the scheduler's [`pending_triggers`] and [`claim_trigger`], the
//! listing's trigger ([`read_trigger`]), and the error of a table without the columns. The rules
//! are in docs/operating.md, "Run now".
//!
//! A trigger reads the database's now and the row in one statement, and answers a refusal from
//! it: the lock held, a pause that holds, a trigger pending. Otherwise one `UPDATE`, guarded by the
//! same three conditions on that now, writes the trigger and the last action; a missing row is
//! first created free, as a pause creates it. On Postgres the `UPDATE` also sends the push
//! (`pg_notify` on [`channel`]) in the same statement, so it goes out exactly when the trigger
//! commits. An `UPDATE` that changed nothing (a race) reads again, a few times at most. A request
//! whose reply was lost is sent again: its read finds its own id and answers it as requested.
//!
//! A claim is one guarded `UPDATE` that takes the lock as acquire does (owner, `locked_at`,
//! `lock_until`, a new token by the table's rule) and marks the trigger taken; it never writes
//! `last_fire`. Postgres and SQLite return the new lock with `RETURNING`; MySQL reads it after. On
//! Postgres the `UPDATE` sits in a CTE whose statement also returns the row as it saw it, as the
//! fire claim does, so every answer is one statement; elsewhere a claim that changed nothing reads
//! the row to say why (`Gone`, `Paused`, `Held`). It is never sent again after a lost reply: a
//! repeat would find the trigger taken and answer `Gone`, and the run would happen nowhere.
//!
//! [`LockAdmin::trigger`]: shedlock_core::admin::LockAdmin::trigger
//! [`pending_triggers`]: shedlock_core::provider::LockProvider::pending_triggers
//! [`claim_trigger`]: shedlock_core::provider::LockProvider::claim_trigger

use std::time::Duration;

use chrono::{DateTime, Utc};
use shedlock_core::{
    Error, Result,
    pause::{Pause, validate_actor},
    provider::{LockRecord, PendingTrigger, TriggerClaim, TriggerWake, validate_at_most},
    trigger::{Trigger, TriggerAnswer},
};
use sqlx::{AssertSqlSafe, ColumnIndex, Decode, Encode, Executor, IntoArguments, Row, Type};

use crate::builder::Settings;
use crate::dialect::{Dialect, Map, PAUSE_COLUMNS, TRIGGER_COLUMNS, missing_columns, not_paused};
use crate::link::{AfterLostReply, Call, Schema, statement};
use crate::provider::{Provider, add_columns};

/// How many times a trigger or a claim reads the row again when it changed between the read and
/// the write.
const LOOKS: usize = 4;

/// The longest Postgres channel name (`NAMEDATALEN` - 1).
const MAX_CHANNEL: usize = 63;

/// The Postgres `NOTIFY` channel of `settings`' table: `<table>_trigger` with the table's name as
/// configured, unquoted (`shedlock_trigger`, `ops.shedlock_trigger`). A name longer than Postgres
/// keeps (63 bytes) becomes `shedlock_trigger_` and a hash of it. The payload is the lock's name,
/// a hint only: a woken scheduler reads every pending trigger.
pub(crate) fn channel(settings: &Settings) -> String {
    let channel = format!("{}_trigger", settings.table);
    if channel.len() <= MAX_CHANNEL {
        return channel;
    }
    // FNV-1a, stable across builds and versions, so every replica listens where others notify.
    let hash = channel.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("shedlock_trigger_{hash:016x}")
}

/// The trigger columns, quoted, in the order of [`TRIGGER_COLUMNS`].
fn columns<D: Dialect>() -> [String; 6] {
    TRIGGER_COLUMNS.map(|(name, _)| D::QUOTE.quote(name))
}

/// The columns `SELECT`ed for a row's trigger, in the order of [`TRIGGER_COLUMNS`], each after a
/// comma and prefixed by `t` (`t.` or empty). [`read_trigger`] reads them.
pub(crate) fn trigger_columns<D: Dialect>(t: &str) -> String {
    columns::<D>()
        .iter()
        .fold(String::new(), |all, c| all + ", " + t + c)
}

/// The trigger of a row whose columns `first..first + 6` are [`trigger_columns`]: `None` without
/// a trigger id.
pub(crate) fn read_trigger<D: Dialect>(
    row: &D::Row,
    first: usize,
    map: &Map<'_>,
) -> Result<Option<Trigger>>
where
    for<'r> String: Decode<'r, D> + Type<D>,
    for<'r> i64: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
{
    let Some(id) = row.try_get::<Option<i64>, _>(first).map_err(map)? else {
        return Ok(None);
    };
    let text = |i: usize| row.try_get::<Option<String>, _>(first + i).map_err(map);
    let (Some(requested_at), Some(expires)) = (
        D::read_opt_time(row, first + 1, map)?,
        D::read_opt_time(row, first + 2, map)?,
    ) else {
        return Ok(None);
    };
    Ok(Some(Trigger {
        id,
        requested_at,
        expires,
        by: text(3)?.unwrap_or_default(),
        taken_by: text(4)?,
        taken_at: D::read_opt_time(row, first + 5, map)?,
    }))
}

/// The statements of triggers for `settings`' table, which has the [`TRIGGER_COLUMNS`].
struct Statements {
    /// The database's now, the lock (`locked_by`, `locked_at`, `lock_until`, token), then with the
    /// pause columns the pause (`paused_at`, `paused_until`, `paused_by`, `paused_reason`), then
    /// the trigger ([`trigger_columns`]) of one name (parameter 1), all `NULL` but now without a
    /// row.
    look: String,
    /// Creates the row of a name (parameter 1) free at now (parameter 2) where there is none, and
    /// changes nothing where there is one.
    create: String,
    /// Writes a trigger where the lock is free, no pause holds and no trigger is pending at now.
    /// Parameters: 1 name, 2 now, 3 id, 4 expires, 5 actor, and on Postgres 6 the channel; bound
    /// in order of appearance where positional. On Postgres it answers how many rows it wrote.
    write: String,
    /// Claims a trigger. Parameters: 1 `at_most`, 2 name, 3 owner, 4 id; positional in order of
    /// appearance (owner, owner, `at_most`, name, id). Returns `locked_at`, `lock_until`, token
    /// where the dialect has `UPDATE … RETURNING`; on Postgres ([`Dialect::claim_seeing`]) always
    /// one row, those three `NULL` unless it claimed, then the row as `look` reads it.
    claim: String,
    /// Reads a claimed lock where the claim returns nothing: `locked_at`, `lock_until`, token.
    /// Parameters: 1 name, 2 owner, 3 id.
    claimed: String,
    /// Every pending trigger: name, id, `trigger_at`, `trigger_expires`.
    pending: String,
}

/// The claim's guarded `UPDATE`, see [`Statements::claim`].
fn claim<D: Dialect>(s: &Settings, schema: Schema) -> String {
    let table = s.table.quoted(D::QUOTE);
    let c = s.columns.quoted(D::QUOTE);
    let (pre, hint, now) = (D::PIN, D::HINT, D::NOW);
    let [id, _, expires, _, taken_by, taken_at] = columns::<D>();
    let p = D::param;
    let new_token = if schema.has_token {
        format!(
            "{} = {}, ",
            c.fencing_token,
            D::next_token(&c.fencing_token)
        )
    } else {
        String::new()
    };
    let claim_unpaused = if schema.has_pause {
        format!(" AND {}", not_paused::<D>(now))
    } else {
        String::new()
    };
    let returning = if D::UPDATE_RETURNING {
        let tok = if schema.has_token {
            c.fencing_token.clone()
        } else {
            D::NULL_TOKEN.to_owned()
        };
        format!(" RETURNING {}, {}, {tok}", c.locked_at, c.lock_until)
    } else {
        String::new()
    };
    // `lock_until` is assigned last: MySQL assigns left to right, and nothing before it reads it.
    format!(
        "{pre}UPDATE {hint} {table} SET {new_token}{by_col} = {owner}, {at_col} = {now}, \
         {taken_by} = {owner}, {taken_at} = {now}, {until} = {plus} \
         WHERE {name} = {name_p} AND {id} = {id_p} AND {taken_by} IS NULL AND {expires} > {now}\
         {claim_unpaused} AND {until} <= {now}{returning}",
        by_col = c.locked_by,
        at_col = c.locked_at,
        until = c.lock_until,
        name = c.name,
        owner = p(3),
        plus = D::now_plus(&p(1)),
        name_p = p(2),
        id_p = p(4),
    )
}

fn statements<D: Dialect>(s: &Settings, schema: Schema) -> Statements {
    let table = s.table.quoted(D::QUOTE);
    let c = s.columns.quoted(D::QUOTE);
    let (pre, hint, now) = (D::PIN, D::HINT, D::NOW);
    let [id, at, expires, by, taken_by, taken_at] = columns::<D>();
    let p = D::param;
    let tok = if schema.has_token {
        format!("t.{}", c.fencing_token)
    } else {
        D::NULL_TOKEN.to_owned()
    };
    let pause_read = if schema.has_pause {
        PAUSE_COLUMNS[..4]
            .iter()
            .fold(String::new(), |all, (name, _)| {
                all + ", t." + &D::QUOTE.quote(name)
            })
    } else {
        String::new()
    };
    let look = |name_p: &str| {
        format!(
            "{pre}SELECT {hint} {now}, t.{}, t.{}, t.{}, {tok}{pause_read}{} \
             FROM (SELECT 1) AS one LEFT JOIN {table} AS t ON t.{} = {name_p}",
            c.locked_by,
            c.locked_at,
            c.lock_until,
            trigger_columns::<D>("t."),
            c.name,
        )
    };
    let create = format!(
        "{pre}INSERT {hint} INTO {table} ({}, {}, {}, {}) VALUES ({}, {}, {}, '') {}",
        c.name,
        c.lock_until,
        c.locked_at,
        c.locked_by,
        p(1),
        p(2),
        p(2),
        D::upsert(&c.name, &[c.name.as_str()])
    );
    // Positional parameters bind in order of appearance: id, now, expires, actor, [actor, now,]
    // name, now, [now,] now. Numbered ones bind each once.
    let (name_p, now_p, id_p, expires_p, actor_p) = (p(1), p(2), p(3), p(4), p(5));
    let (action, unpaused) = if schema.has_pause {
        let [.., action, action_by, action_at] =
            PAUSE_COLUMNS.map(|(name, _)| D::QUOTE.quote(name));
        (
            format!(", {action} = 'triggered', {action_by} = {actor_p}, {action_at} = {now_p}"),
            format!(" AND {}", not_paused::<D>(&now_p)),
        )
    } else {
        (String::new(), String::new())
    };
    let update = format!(
        "{pre}UPDATE {hint} {table} SET {id} = {id_p}, {at} = {now_p}, {expires} = {expires_p}, \
         {by} = {actor_p}, {taken_by} = NULL, {taken_at} = NULL{action} \
         WHERE {} = {name_p} AND {} <= {now_p}{unpaused} \
         AND ({id} IS NULL OR {taken_by} IS NOT NULL OR {expires} <= {now_p})",
        c.name, c.lock_until
    );
    let write = D::notify_trigger(&update, &c.name, &p(6)).unwrap_or(update);
    let update = claim::<D>(s, schema);
    let claim = D::claim_seeing(&update, &look(&p(2))).unwrap_or(update);
    let look = look(&p(1));
    let claimed_tok = if schema.has_token {
        c.fencing_token.clone()
    } else {
        D::NULL_TOKEN.to_owned()
    };
    let claimed = format!(
        "{pre}SELECT {hint} {}, {}, {claimed_tok} FROM {table} \
         WHERE {} = {} AND {} = {} AND {id} = {}",
        c.locked_at,
        c.lock_until,
        c.name,
        p(1),
        c.locked_by,
        p(2),
        p(3)
    );
    let pending = format!(
        "{pre}SELECT {hint} {}, {id}, {at}, {expires} FROM {table} \
         WHERE {id} IS NOT NULL AND {taken_by} IS NULL AND {expires} > {now}",
        c.name
    );
    Statements {
        look,
        create,
        write,
        claim,
        claimed,
        pending,
    }
}

/// A row as a trigger or a claim read it with [`Statements::look`].
struct Look {
    now: DateTime<Utc>,
    holder: Option<LockRecord>,
    pause: Option<Pause>,
    trigger: Option<Trigger>,
    /// Whether the row exists.
    exists: bool,
}

impl Look {
    /// What a trigger of id `id` answers without writing: the trigger itself where the row has it
    /// already (its write's reply was lost and the call repeated), or the refusal of a held lock,
    /// a pause that holds or a pending trigger, in that order.
    fn refusal(self, id: i64) -> Option<TriggerAnswer> {
        let now = self.now;
        if let Some(trigger) = self.trigger.as_ref().filter(|t| t.id == id) {
            return Some(TriggerAnswer::Requested(trigger.clone()));
        }
        // Paused, then held, then pending, as every store answers (docs/operating.md).
        if let Some(pause) = self.pause.filter(|p| p.holds_at(now)) {
            return Some(TriggerAnswer::Paused(pause));
        }
        if let Some(holder) = self.holder.filter(|h| h.lock_until() > now) {
            return Some(TriggerAnswer::Held(holder));
        }
        self.trigger
            .filter(|t| t.is_pending(now))
            .map(TriggerAnswer::Pending)
    }
}

impl Look {
    /// What a claim of trigger `id` that claimed nothing answers from the row it saw: gone, paused
    /// or held, in that order; `None` where the row allowed the claim after all (it changed
    /// between the look and the write), to look again.
    fn claim_refusal(self, id: i64) -> Option<TriggerClaim> {
        let now = self.now;
        let pending = self
            .trigger
            .as_ref()
            .is_some_and(|t| t.id == id && t.is_pending(now));
        if !pending {
            return Some(TriggerClaim::Gone { now });
        }
        if self.pause.is_some_and(|p| p.holds_at(now)) {
            return Some(TriggerClaim::Paused { now });
        }
        self.holder
            .filter(|h| h.lock_until() > now)
            .map(|holder| TriggerClaim::Held { now, holder })
    }
}

impl<D: Dialect> Provider<D>
where
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> Option<&'q str>: Encode<'q, D> + Type<D>,
    for<'q> Option<D::Time>: Encode<'q, D> + Type<D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'r> String: Decode<'r, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
    D::Arguments: IntoArguments<D>,
{
    /// Reads the row of `name` with `look`.
    fn read_look(
        row: &D::Row,
        first: usize,
        name: &str,
        schema: Schema,
        map: &Map<'_>,
    ) -> Result<Look> {
        let now = D::read_time(row, first, map)?;
        let owner: Option<String> = row.try_get(first + 1).map_err(map)?;
        let locked_at = D::read_opt_time(row, first + 2, map)?;
        let lock_until = D::read_opt_time(row, first + 3, map)?;
        let token: Option<i64> = row.try_get(first + 4).map_err(map)?;
        let exists = lock_until.is_some();
        let holder = match (owner, locked_at, lock_until) {
            (Some(owner), Some(locked_at), Some(lock_until)) => {
                Some(LockRecord::new(name, owner, locked_at, lock_until).with_fencing_token(token))
            }
            _ => None,
        };
        let mut next = first + 5;
        let pause = if schema.has_pause {
            next += 4;
            match D::read_opt_time(row, first + 5, map)? {
                Some(since) => {
                    let by: Option<String> = row.try_get(first + 7).map_err(map)?;
                    let reason: Option<String> = row.try_get(first + 8).map_err(map)?;
                    Some(Pause::new(
                        since,
                        D::read_opt_time(row, first + 6, map)?,
                        by.unwrap_or_default(),
                        reason.as_deref(),
                    ))
                }
                None => None,
            }
        } else {
            None
        };
        Ok(Look {
            now,
            holder,
            pause,
            trigger: read_trigger::<D>(row, next, map)?,
            exists,
        })
    }

    /// Asks for a run of `name` now (see the module's docs).
    pub(crate) async fn admin_trigger(
        &self,
        name: &str,
        actor: &str,
        expires_in: Duration,
    ) -> Result<TriggerAnswer> {
        let link = self.link();
        link.check_name(name)?;
        validate_actor(actor)?;
        validate_at_most(expires_in)?;
        let call = &link.call("trigger").about(format!("lock {name:?}"));
        let schema = self.check_trigger_columns(call).await?;
        let sql = &statements::<D>(&link.settings, schema);
        let what = format!("trigger lock {name:?}");
        let map = &|e| self.map_error(e, &what);
        let id = Trigger::new_id();
        let channel = &channel(&link.settings);
        let expiry = chrono::Duration::from_std(expires_in)
            .map_err(|_| Error::invalid_config("trigger: the expiry is too long"))?;
        for _ in 0..LOOKS {
            let answer = link
                .run(call, |mut c| async move {
                    let query = sqlx::query(AssertSqlSafe(sql.look.clone())).bind(name);
                    let row = statement!(c, query, map, fetch_one)?;
                    let look = Self::read_look(&row, 0, name, schema, map)?;
                    let (now, exists) = (look.now, look.exists);
                    if let Some(answer) = look.refusal(id) {
                        return Ok(Some(answer));
                    }
                    // As the columns keep it: rounded up to their precision.
                    let expires = crate::dialect::fire_time(now + expiry, D::TIME_PRECISION_MICROS);
                    if !exists {
                        let query = sqlx::query(AssertSqlSafe(sql.create.clone()))
                            .bind(name)
                            .bind(D::time(now));
                        let query = if D::POSITIONAL {
                            query.bind(D::time(now))
                        } else {
                            query
                        };
                        statement!(c, query, map, execute)?;
                    }
                    let (t_now, t_expires) = (D::time(now), D::time(expires));
                    let query = sqlx::query(AssertSqlSafe(sql.write.clone()));
                    let query = if D::POSITIONAL {
                        let query = query
                            .bind(id)
                            .bind(t_now.clone())
                            .bind(t_expires)
                            .bind(actor);
                        let query = if schema.has_pause {
                            query.bind(actor).bind(t_now.clone())
                        } else {
                            query
                        };
                        let query = query.bind(name).bind(t_now.clone());
                        let query = if schema.has_pause {
                            query.bind(t_now.clone())
                        } else {
                            query
                        };
                        query.bind(t_now)
                    } else {
                        query
                            .bind(name)
                            .bind(t_now)
                            .bind(id)
                            .bind(t_expires)
                            .bind(actor)
                    };
                    let written = if D::NOTIFIES {
                        let row = statement!(c, query.bind(channel.as_str()), map, fetch_one)?;
                        row.try_get::<i64, _>(0).map_err(map)? == 1
                    } else {
                        D::rows_affected(&statement!(c, query, map, execute)?) == 1
                    };
                    Ok(written.then(|| {
                        TriggerAnswer::Requested(Trigger {
                            id,
                            requested_at: now,
                            expires,
                            by: actor.to_owned(),
                            taken_by: None,
                            taken_at: None,
                        })
                    }))
                })
                .await?;
            if let Some(answer) = answer {
                return Ok(answer);
            }
            tracing::debug!(
                name,
                "the lock row changed during a trigger; reading it again"
            );
        }
        Err(Error::backend_message(format!(
            "trigger lock {name:?}: the row changed under each of {LOOKS} attempts"
        )))
    }

    /// Every pending trigger, in one statement.
    pub(crate) async fn pending_triggers(&self) -> Result<Vec<PendingTrigger>> {
        let link = self.link();
        let call = &link.call("pending_triggers");
        let schema = self.check_trigger_columns(call).await?;
        let sql = &statements::<D>(&link.settings, schema).pending;
        let map = &|e| self.map_error(e, "read the pending triggers");
        link.run(call, |mut c| async move {
            let query = sqlx::query(AssertSqlSafe(sql.clone()));
            let rows = statement!(c, query, map, fetch_all)?;
            rows.iter()
                .map(|row| {
                    Ok(PendingTrigger {
                        lock_name: row.try_get(0).map_err(map)?,
                        id: row.try_get(1).map_err(map)?,
                        requested_at: D::read_time(row, 2, map)?,
                        expires: D::read_time(row, 3, map)?,
                    })
                })
                .collect()
        })
        .await
    }

    /// Claims the trigger `id` of `name` (see the module's docs).
    pub(crate) async fn claim_trigger(
        &self,
        name: &str,
        id: i64,
        at_most: Duration,
        owner: &str,
    ) -> Result<TriggerClaim> {
        let link = self.link();
        link.check_name(name)?;
        validate_at_most(at_most)?;
        let what = format!("claim trigger {id} of lock {name:?}");
        let call = link
            .call("claim_trigger")
            .about(format!("lock {name:?}"))
            .after_lost_reply(AfterLostReply::Fail(what.clone()));
        let call = &call;
        let schema = self.check_trigger_columns(call).await?;
        schema.check_owner(owner)?;
        let sql = &statements::<D>(&link.settings, schema);
        let map = &|e| self.map_error(e, &what);
        for _ in 0..LOOKS {
            let claim = link
                .run(call, |mut c| async move {
                    let query = sqlx::query(AssertSqlSafe(sql.claim.clone()));
                    let query = if D::POSITIONAL {
                        query
                            .bind(owner)
                            .bind(owner)
                            .bind(D::span(at_most))
                            .bind(name)
                            .bind(id)
                    } else {
                        query.bind(D::span(at_most)).bind(name).bind(owner).bind(id)
                    };
                    if D::CLAIM_SEES {
                        let row = statement!(c, query, map, fetch_one)?;
                        if D::read_opt_time(&row, 0, map)?.is_some() {
                            let record = Self::returned_record(&row, 0, name, owner, map)?;
                            return Ok(Some(TriggerClaim::Claimed(record)));
                        }
                        let look = Self::read_look(&row, 3, name, schema, map)?;
                        return Ok(look.claim_refusal(id));
                    }
                    let won = if D::UPDATE_RETURNING {
                        statement!(c, query, map, fetch_optional)?
                    } else if D::rows_affected(&statement!(c, query, map, execute)?) == 1 {
                        let query = sqlx::query(AssertSqlSafe(sql.claimed.clone()))
                            .bind(name)
                            .bind(owner)
                            .bind(id);
                        Some(statement!(c, query, map, fetch_one)?)
                    } else {
                        None
                    };
                    if let Some(row) = won {
                        let record = Self::returned_record(&row, 0, name, owner, map)?;
                        return Ok(Some(TriggerClaim::Claimed(record)));
                    }
                    let query = sqlx::query(AssertSqlSafe(sql.look.clone())).bind(name);
                    let row = statement!(c, query, map, fetch_one)?;
                    let look = Self::read_look(&row, 0, name, schema, map)?;
                    Ok(look.claim_refusal(id))
                })
                .await?;
            if let Some(claim) = claim {
                return Ok(claim);
            }
            tracing::debug!(
                name,
                id,
                "the lock row changed during a trigger claim; looking again"
            );
        }
        Err(Error::backend_message(format!(
            "claim trigger {id} of lock {name:?}: the row changed under each of {LOOKS} attempts"
        )))
    }

    /// A push of new triggers where the dialect has one.
    pub(crate) async fn watch_triggers(&self) -> Result<TriggerWake> {
        let link = self.link();
        if link.settings.transaction_pooler {
            // A `LISTEN` on a pooled server connection hears nothing (docs/sql-stores.md): the
            // schedulers poll instead.
            return Err(Error::unsupported(
                "watch_triggers behind a transaction-mode pooler",
            ));
        }
        let call = &link.call("watch_triggers");
        self.check_trigger_columns(call).await?;
        D::watch_triggers(link, channel(&link.settings)).await
    }

    /// The table's layout where it has the [`TRIGGER_COLUMNS`]. Otherwise a schema error naming
    /// the columns it lacks, read anew, and the migration that adds them.
    async fn check_trigger_columns(&self, call: &Call) -> Result<Schema> {
        let schema = self.schema(call).await?;
        if schema.has_trigger {
            return Ok(schema);
        }
        let link = self.link();
        let s = &link.settings;
        let look = &|e| self.map_error(e, "read the lock table's columns");
        let missing = match D::detect(link, call, look).await? {
            Some((columns, _)) => missing_columns::<D>(&columns, &TRIGGER_COLUMNS),
            None => TRIGGER_COLUMNS.to_vec(),
        };
        let names: Vec<&str> = missing.iter().map(|(name, _)| *name).collect();
        let message = if missing.is_empty() {
            format!(
                "the lock table {} has the trigger columns now, but this provider read its \
                 columns before they were added; restart the service",
                s.table
            )
        } else {
            format!(
                "the lock table {} cannot keep triggers (run now): it lacks the column(s) {} \
                 (Java ShedLock's table has none of them); add them with the migration \
                 migrations/{}/0006_trigger.sql of shedlock-sqlx, i.e. run: {}; and restart the \
                 service. Nothing was written",
                s.table,
                names.join(", "),
                D::MIGRATIONS,
                add_columns::<D>(s, &missing).join("; "),
            )
        };
        Err(Error::schema(message, None))
    }
}
