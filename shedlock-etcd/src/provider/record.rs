//! The JSON values the provider writes, and their encoding.
//!
//! It writes them in a lock's keys (record, hold, fire, job state) and in definition keys.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

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
