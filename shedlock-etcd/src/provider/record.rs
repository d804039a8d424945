//! The JSON values the provider writes, and their encoding.
//!
//! It writes them in a lock's keys (record, hold, fire, job state, pause, last action, trigger), in
//! pending triggers' keys and in definition keys.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shedlock_core::admin::{ActionKind, AdminAction};
use shedlock_core::pause::Pause;
use shedlock_core::trigger::Trigger;

use crate::gateway::{GatewayError, KeyValue};

/// The record key's value: who took the lock, when, and the acquisition's first lease.
///
/// When is the client's estimate. The first lease's remaining TTL measures how long ago that was.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct RecValue {
    pub(super) owner: String,
    pub(super) locked_at_ms: i64,
    pub(super) lease: i64,
    pub(super) ttl: i64,
}

impl RecValue {
    /// The record a [`pause`](shedlock_core::admin::LockAdmin::pause) writes for a lock that has
    /// none: free since `at`, with no owner and no lease (etcd's lease ids are never 0).
    pub(super) fn never_held(at: DateTime<Utc>) -> Self {
        Self {
            owner: String::new(),
            locked_at_ms: at.timestamp_millis(),
            lease: 0,
            ttl: 0,
        }
    }

    /// Whether a pause wrote it and no acquisition since.
    pub(super) fn is_never_held(&self) -> bool {
        self.lease == 0
    }
}

/// The hold key's value: the client's estimate of the lease's end, for display only.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct HoldValue {
    pub(super) until_ms: i64,
}

/// The fire key's value: the latest fire claimed for the job, in microseconds since the epoch.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct FireValue {
    pub(super) at_us: i64,
}

/// The last-run key's value: the job's last recorded run.
///
/// Times are the clients' clocks, in milliseconds. The fire is in microseconds, as the fire key
/// keeps it.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct RunValue {
    pub(super) fire_us: i64,
    pub(super) runner: String,
    pub(super) started_ms: i64,
    pub(super) ended_ms: i64,
    /// [`RunOutcome::kind`](shedlock_core::jobs::RunOutcome::kind).
    pub(super) outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<String>,
}

/// The last-success key's value: when the job's last successful run ended (client clock).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct SuccessValue {
    pub(super) at_ms: i64,
}

/// The pause key's value: an operator's pause, times in microseconds since the epoch.
///
/// `since` is the pausing client's clock. `until` is on that clock too and compared with the
/// claiming replica's, as the fire claim's "now" is (see [Pauses](crate#pauses)).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct PauseValue {
    pub(super) since_us: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) until_us: Option<i64>,
    pub(super) by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) reason: Option<String>,
}

impl PauseValue {
    pub(super) fn of(pause: &Pause) -> Self {
        Self {
            since_us: pause.since.timestamp_micros(),
            until_us: pause.until.map(|until| until.timestamp_micros()),
            by: pause.by.clone(),
            reason: pause.reason.clone(),
        }
    }

    pub(super) fn into_pause(self) -> Pause {
        Pause {
            since: from_micros(self.since_us),
            until: self.until_us.map(from_micros),
            by: self.by,
            reason: self.reason,
        }
    }
}

/// The action key's value: the last pause, resume, unlock or trigger, by whom, when (the client's clock, in
/// milliseconds).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct ActionValue {
    /// [`ActionKind::as_str`].
    pub(super) kind: String,
    pub(super) by: String,
    pub(super) at_ms: i64,
}

impl ActionValue {
    pub(super) fn new(kind: ActionKind, by: &str, at: DateTime<Utc>) -> Self {
        Self {
            kind: kind.as_str().to_owned(),
            by: by.to_owned(),
            at_ms: at.timestamp_millis(),
        }
    }

    /// The action, or `None` for a kind a newer version wrote.
    pub(super) fn into_action(self) -> Option<AdminAction> {
        let kind = ActionKind::parse(&self.kind)?;
        Some(AdminAction::new(
            kind,
            self.by,
            super::from_millis(self.at_ms),
        ))
    }
}

/// The trigger key's value, and its pending copy's: a "run now", times in microseconds since the
/// epoch, on the clocks of the client that asked (`requested_at`, `expires`) and of the replica
/// that took it (`taken_at`).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct TriggerValue {
    pub(super) id: i64,
    pub(super) requested_at_us: i64,
    pub(super) expires_us: i64,
    pub(super) by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) taken_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) taken_at_us: Option<i64>,
}

impl TriggerValue {
    pub(super) fn of(trigger: &Trigger) -> Self {
        Self {
            id: trigger.id,
            requested_at_us: trigger.requested_at.timestamp_micros(),
            expires_us: trigger.expires.timestamp_micros(),
            by: trigger.by.clone(),
            taken_by: trigger.taken_by.clone(),
            taken_at_us: trigger.taken_at.map(|at| at.timestamp_micros()),
        }
    }

    pub(super) fn into_trigger(self) -> Trigger {
        Trigger {
            id: self.id,
            requested_at: from_micros(self.requested_at_us),
            expires: from_micros(self.expires_us),
            by: self.by,
            taken_by: self.taken_by,
            taken_at: self.taken_at_us.map(from_micros),
        }
    }
}

fn from_micros(us: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(us).unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
}

/// A definition key's value: one replica's definition of one job.
///
/// It also says when the replica published it and until when it stands, by the client's clock. etcd
/// ends it with its lease.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct DefinitionValue {
    pub(super) job: String,
    pub(super) lock_name: String,
    pub(super) spec: String,
    pub(super) replica: String,
    pub(super) version: String,
    pub(super) published_ms: i64,
    pub(super) expires_ms: i64,
}

pub(super) fn encode_value<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

pub(super) fn hold_value(until: DateTime<Utc>) -> Vec<u8> {
    encode_value(&HoldValue {
        until_ms: until.timestamp_millis(),
    })
}

pub(super) fn decode_value<T: for<'de> Deserialize<'de>>(kv: &KeyValue) -> Result<T, GatewayError> {
    serde_json::from_slice(&kv.value.0).map_err(|e| GatewayError::Decode {
        member: "(key value)".into(),
        why: format!(
            "the key {:?} does not hold a shedlock value ({e}); was it written by something else?",
            String::from_utf8_lossy(&kv.key.0)
        ),
    })
}
