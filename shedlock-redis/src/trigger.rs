//! Run now on Redis: [`RedisLockProvider`]'s triggers. The trigger lives in the lock's hash and is
//! decided there, by one script each for the request and the claim (see `script.rs`). Beside the
//! locks, a sorted set, the triggers index, lists the pending ones so that a scheduler finds them
//! in one command whatever the number of locks, and a pub/sub channel of the same name wakes
//! schedulers. The index is a hint: a claim always decides on the lock's hash. The rules are in the
//! crate README, "Run now".

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_core::Stream;
use shedlock_core::{
    Error, Result,
    pause::validate_actor,
    provider::{LockRecord, validate_at_most},
    trigger::{PendingTrigger, Trigger, TriggerAnswer, TriggerClaim, TriggerWake, TriggerWaker},
};

use crate::connection::Resend;
use crate::key::triggers_key;
use crate::provider::{RedisLockProvider, Reply, check_owner, micros_ceil, num, time};
use crate::script;

/// How often a watch whose scheduler is gone, and that hears nothing, notices it and ends.
const WATCH_CHECK: Duration = Duration::from_secs(5);

impl RedisLockProvider {
    /// The Redis key of the triggers index: one sorted set per key prefix, the prefix followed by
    /// `\0triggers`, of the pending triggers, each `<id>:<requested_at µs>:<lock name>` scored by
    /// its expiry in µs. It is also the pub/sub channel on which a new trigger is announced, with
    /// the lock's name as the message. See the crate README, "Run now".
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
    /// let provider = shedlock_redis::RedisLockProvider::builder("redis://127.0.0.1").build()?;
    /// assert_eq!(provider.triggers_key(), b"shedlock:\0triggers");
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn triggers_key(&self) -> Vec<u8> {
        triggers_key(&self.settings.key_prefix)
    }

    /// [`LockAdmin::trigger`](shedlock_core::admin::LockAdmin::trigger): the trigger script on the
    /// lock's hash, then, for a trigger it wrote or found pending, the index entry and the
    /// announcement.
    pub(crate) async fn request_trigger(
        &self,
        name: &str,
        actor: &str,
        expires_in: Duration,
    ) -> Result<TriggerAnswer> {
        self.check_name(name)?;
        validate_actor(actor)?;
        validate_at_most(expires_in)?;
        let id = Trigger::new_id();
        let op = "trigger";
        // Sent again after a dropped connection: the script knows its own id, and answers the
        // trigger it wrote instead of a pending one.
        let reply = self
            .eval(
                op,
                Resend::AfterDrop,
                &script::TRIGGER,
                name,
                &[
                    actor.as_bytes().to_vec(),
                    num(id),
                    num(micros_ceil(expires_in)),
                ],
            )
            .await?;
        let items = Reply::new(op, name, reply)?;
        let answer = match items.int(0)? {
            1 => TriggerAnswer::Requested(Trigger {
                id,
                requested_at: items.time(2)?,
                expires: items.time(3)?,
                by: actor.to_owned(),
                taken_by: items.opt_text(4)?,
                taken_at: items.opt_time(5)?,
            }),
            2 => TriggerAnswer::Held(items.holder(name)?),
            3 => TriggerAnswer::Paused(items.pause(2)?.ok_or_else(|| items.unexpected())?),
            4 => TriggerAnswer::Pending(Trigger {
                id: parse_id(&items.text(2)?).ok_or_else(|| items.unexpected())?,
                requested_at: items.time(3)?,
                expires: items.time(4)?,
                by: items.opt_text(5)?.unwrap_or_default(),
                taken_by: None,
                taken_at: None,
            }),
            _ => return Err(items.unexpected()),
        };
        // A pending trigger is indexed again: that heals an index entry lost with a connection.
        if let TriggerAnswer::Requested(trigger) | TriggerAnswer::Pending(trigger) = &answer
            && trigger.taken_by.is_none()
        {
            self.index_trigger(name, trigger).await.map_err(|error| {
                Error::backend(
                    format!(
                        "trigger lock {name:?}: the trigger {} is written in the lock's hash, \
                         but its entry in the triggers index could not be (Redis at {}); \
                         schedulers will not find it until asked again (which answers \
                         `pending` and writes the entry), or it expires at {}",
                        trigger.id,
                        self.connection.server(),
                        trigger.expires
                    ),
                    error,
                )
            })?;
        }
        Ok(answer)
    }

    /// Writes `trigger`'s entry in the index and announces it, in one script on the index.
    async fn index_trigger(&self, name: &str, trigger: &Trigger) -> Result<()> {
        let member = member(name, trigger.id, trigger.requested_at);
        let key = self.triggers_key();
        let what = || format!("index the trigger of lock {name:?}");
        self.invoke(
            "trigger",
            Resend::AfterDrop,
            &what,
            &script::INDEX_TRIGGER,
            std::slice::from_ref(&key),
            &member,
            &[
                num(trigger.expires.timestamp_micros()),
                key.clone(),
                name.as_bytes().to_vec(),
            ],
        )
        .await
        .map(drop)
    }

    /// [`LockProvider::pending_triggers`](shedlock_core::provider::LockProvider::pending_triggers):
    /// one script on the index, whatever the number of locks.
    pub(crate) async fn read_pending_triggers(&self) -> Result<Vec<PendingTrigger>> {
        let op = "pending_triggers";
        let prefix = &self.settings.key_prefix;
        let what = || format!("{op}: the triggers index under the key prefix {prefix:?}");
        let reply = self
            .invoke(
                op,
                Resend::AfterDrop,
                &what,
                &script::PENDING_TRIGGERS,
                &[self.triggers_key()],
                b"",
                &[],
            )
            .await?;
        let items = Reply::new(op, "(triggers index)", reply)?;
        let mut pending = Vec::with_capacity(items.len() / 2);
        for i in (1..items.len()).step_by(2) {
            let member = items.text(i)?;
            let expires = items.text(i + 1)?;
            let parsed = parse_member(&member).and_then(|(id, requested_at, name)| {
                let expires = parse_micros(&expires)?;
                Some(PendingTrigger {
                    lock_name: name.to_owned(),
                    id,
                    requested_at,
                    expires,
                })
            });
            if let Some(trigger) = parsed {
                pending.push(trigger);
            } else {
                tracing::debug!(member, "not a trigger index entry; left out");
            }
        }
        pending.sort_by(|a, b| a.lock_name.cmp(&b.lock_name));
        Ok(pending)
    }

    /// [`LockProvider::claim_trigger`](shedlock_core::provider::LockProvider::claim_trigger): one
    /// script on the lock's hash, never sent again after a dropped connection. A trigger it took,
    /// or found gone, is then removed from the index, best effort: an entry left there costs each
    /// replica one claim answered `Gone`, which removes it again, until it expires.
    pub(crate) async fn take_trigger(
        &self,
        name: &str,
        id: i64,
        at_most: Duration,
        owner: &str,
    ) -> Result<TriggerClaim> {
        self.check_name(name)?;
        validate_at_most(at_most)?;
        check_owner(owner)?;
        let op = "claim_trigger";
        let reply = self
            .eval(
                op,
                Resend::OnlyIfRefused,
                &script::CLAIM_TRIGGER,
                name,
                &[
                    num(id),
                    num(micros_ceil(at_most)),
                    owner.as_bytes().to_vec(),
                ],
            )
            .await?;
        let items = Reply::new(op, name, reply)?;
        let now = items.time(1)?;
        let claim = match items.int(0)? {
            0 => TriggerClaim::Claimed(
                LockRecord::new(name, owner, now, items.time(2)?)
                    .with_fencing_token(Some(items.int(3)?)),
            ),
            1 => TriggerClaim::Gone { now },
            2 => TriggerClaim::Paused { now },
            3 => TriggerClaim::Held {
                now,
                holder: items.holder(name)?,
            },
            _ => return Err(items.unexpected()),
        };
        if matches!(claim, TriggerClaim::Claimed(_) | TriggerClaim::Gone { .. }) {
            self.unindex_trigger(name, id).await;
        }
        Ok(claim)
    }

    /// Removes the index entries of the trigger `id`, logging a failure at DEBUG.
    async fn unindex_trigger(&self, name: &str, id: i64) {
        let what = || format!("remove the trigger {id} of lock {name:?} from the triggers index");
        let removed = self
            .invoke(
                "claim_trigger",
                Resend::AfterDrop,
                &what,
                &script::UNINDEX_TRIGGER,
                &[self.triggers_key()],
                format!("{id}:").as_bytes(),
                &[],
            )
            .await;
        if let Err(error) = removed {
            tracing::debug!(
                lock = name,
                id,
                error = &error as &dyn std::error::Error,
                "could not remove a trigger from the triggers index; it stays listed until a \
                 claim answered gone removes it, or it expires"
            );
        }
    }

    /// [`LockProvider::watch_triggers`](shedlock_core::provider::LockProvider::watch_triggers): a
    /// pub/sub connection of its own, with the client's address, credentials and TLS, subscribed to
    /// the [triggers channel](Self::triggers_key) before this returns. A task forwards each message
    /// as a wake, and ends, closing the connection, when the scheduler's loop is gone. A lost
    /// connection ends the watch, and the scheduler polls and watches again.
    pub(crate) async fn watch(&self) -> Result<TriggerWake> {
        let channel = self.triggers_key();
        let server = self.connection.server().to_owned();
        let subscribe = async {
            let mut pubsub = self.connection.client().get_async_pubsub().await?;
            pubsub.subscribe(channel.as_slice()).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let pubsub = match tokio::time::timeout(self.connection.timeout(), subscribe).await {
            Ok(Ok(pubsub)) => pubsub,
            Ok(Err(error)) => {
                return Err(Error::backend(
                    format!(
                        "watch_triggers: subscribe to the triggers channel (Redis at {server})"
                    ),
                    error,
                ));
            }
            Err(_) => return Err(Error::timeout("watch_triggers", self.connection.timeout())),
        };
        let (waker, wake) = TriggerWake::channel();
        tokio::spawn(forward(pubsub, waker, server));
        Ok(wake)
    }
}

/// Wakes `waker` at each message until the connection ends or the loop is gone. The sink half is
/// kept, so the connection lives as long as this task.
async fn forward(pubsub: redis::aio::PubSub, waker: TriggerWaker, server: String) {
    let (_sink, mut stream) = pubsub.split();
    let mut check = tokio::time::interval(WATCH_CHECK);
    loop {
        tokio::select! {
            message = std::future::poll_fn(|cx| std::pin::Pin::new(&mut stream).poll_next(cx)) => {
                if message.is_none() {
                    tracing::debug!(server, "the triggers channel's connection ended");
                    return;
                }
                if !waker.wake() {
                    return;
                }
            }
            _ = check.tick() => {
                if waker.is_closed() {
                    return;
                }
            }
        }
    }
}

/// The index member of a trigger: `<id>:<requested_at µs>:<name>`. The id first, so that the
/// entries of one trigger are those starting with `<id>:`.
fn member(name: &str, id: i64, requested_at: DateTime<Utc>) -> Vec<u8> {
    format!("{id}:{}:{name}", requested_at.timestamp_micros()).into_bytes()
}

/// The id, requested time and lock name of an index member, if it is one.
fn parse_member(member: &str) -> Option<(i64, DateTime<Utc>, &str)> {
    let mut parts = member.splitn(3, ':');
    let id = parse_id(parts.next()?)?;
    let requested_at = parse_micros(parts.next()?)?;
    let name = parts.next().filter(|name| !name.is_empty())?;
    Some((id, requested_at, name))
}

fn parse_id(text: &str) -> Option<i64> {
    text.parse().ok()
}

/// µs as the index keeps them: an integer, or a score as Redis writes a double.
fn parse_micros(text: &str) -> Option<DateTime<Utc>> {
    let micros = text.parse::<i64>().ok().or_else(|| {
        let value = text.parse::<f64>().ok()?;
        // Integral and in range: an expiry in µs, exact below 2^53.
        #[allow(clippy::cast_possible_truncation)]
        (value.is_finite() && value.fract() == 0.0 && value.abs() < 9.0e15).then_some(value as i64)
    })?;
    time(micros).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_round_trip_with_any_name() {
        let at = DateTime::from_timestamp_micros(1_764_900_000_123_456).unwrap();
        for name in ["report", "a:b:c", "ü ✓\n", ":"] {
            let id = Trigger::new_id();
            let text = String::from_utf8(member(name, id, at)).unwrap();
            assert!(text.starts_with(&format!("{id}:")));
            assert_eq!(parse_member(&text), Some((id, at, name)));
        }
        assert_eq!(parse_member("x:1:a"), None);
        assert_eq!(parse_member("1:1:"), None);
        assert_eq!(parse_micros("1764900000123456"), Some(at));
        assert_eq!(parse_micros("1.764900000123456e15"), Some(at));
        assert_eq!(parse_micros("inf"), None);
    }
}
