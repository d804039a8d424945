//! The JSON values the provider writes in a lock's keys (record, hold, fire), and their
//! encoding.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::gateway::{GatewayError, KeyValue};

/// The record key's value: who took the lock, when (the client's estimate), and the
/// acquisition's first lease, whose remaining TTL measures how long ago that was.
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
