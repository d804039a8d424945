//! The JSON shapes of etcd's v3 gateway, and the answers the provider reads.
//!
//! Bytes are base64, int64 values are strings, and transactions are compare / success / failure
//! lists.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

pub(crate) fn b64(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

// ---- transactions -------------------------------------------------------------------------

/// One etcd transaction: `if compare… then success… else failure…`, applied atomically.
#[derive(Default)]
pub(crate) struct Txn {
    compare: Vec<Value>,
    success: Vec<Value>,
    failure: Vec<Value>,
}

impl Txn {
    pub(super) fn body(&self) -> Value {
        json!({
            "compare": self.compare,
            "success": self.success,
            "failure": self.failure,
        })
    }

    /// `mod_revision(key) == revision`. A revision of 0 means the key does not exist.
    pub(crate) fn mod_is(mut self, key: &[u8], revision: i64) -> Self {
        self.compare.push(json!({
            "key": b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": revision.to_string()
        }));
        self
    }

    /// `mod_revision(key) < revision`: not written since `revision`. A missing key's `mod_revision`
    /// is 0.
    pub(crate) fn mod_below(mut self, key: &[u8], revision: i64) -> Self {
        self.compare.push(json!({
            "key": b64(key), "target": "MOD", "result": "LESS", "mod_revision": revision.to_string()
        }));
        self
    }

    /// The key does not exist.
    pub(crate) fn absent(mut self, key: &[u8]) -> Self {
        self.compare.push(json!({
            "key": b64(key), "target": "VERSION", "result": "EQUAL", "version": "0"
        }));
        self
    }

    /// The key exists.
    pub(crate) fn present(mut self, key: &[u8]) -> Self {
        self.compare.push(json!({
            "key": b64(key), "target": "VERSION", "result": "GREATER", "version": "0"
        }));
        self
    }

    pub(crate) fn then_put(mut self, key: &[u8], value: &[u8], lease: Option<i64>) -> Self {
        let mut put = json!({ "key": b64(key), "value": b64(value), "prev_kv": true });
        if let Some(lease) = lease {
            put["lease"] = json!(lease.to_string());
        }
        self.success.push(json!({ "request_put": put }));
        self
    }

    /// A put whose previous value is not wanted back.
    pub(crate) fn then_set(mut self, key: &[u8], value: &[u8], lease: Option<i64>) -> Self {
        let mut put = json!({ "key": b64(key), "value": b64(value) });
        if let Some(lease) = lease {
            put["lease"] = json!(lease.to_string());
        }
        self.success.push(json!({ "request_put": put }));
        self
    }

    /// A delete whose previous value is not wanted back.
    pub(crate) fn then_remove(mut self, key: &[u8]) -> Self {
        self.success
            .push(json!({ "request_delete_range": { "key": b64(key) } }));
        self
    }

    /// A nested transaction, from etcd 3.3 on.
    ///
    /// It is applied in the same revision as this one's other operations. Its own compares decide
    /// only its own operations.
    pub(crate) fn then_txn(mut self, nested: &Self) -> Self {
        self.success.push(json!({ "request_txn": nested.body() }));
        self
    }

    /// How many operations its success branch holds. etcd's `--max-txn-ops` bounds it, 128 by
    /// default.
    pub(crate) fn ops(&self) -> usize {
        self.success.len()
    }

    pub(crate) fn then_get(mut self, key: &[u8]) -> Self {
        self.success
            .push(json!({ "request_range": { "key": b64(key) } }));
        self
    }

    pub(crate) fn then_delete(mut self, key: &[u8]) -> Self {
        self.success
            .push(json!({ "request_delete_range": { "key": b64(key), "prev_kv": true } }));
        self
    }
}

// ---- answers ------------------------------------------------------------------------------

/// etcd's int64, which the gateway writes as a JSON string. The gateway omits it when it is 0.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Int(pub(crate) i64);

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => s.parse().map(Int).map_err(serde::de::Error::custom),
            Value::Number(n) => n
                .as_i64()
                .map(Int)
                .ok_or_else(|| serde::de::Error::custom("not an int64")),
            Value::Null => Ok(Int(0)),
            other => Err(serde::de::Error::custom(format!(
                "expected an int64, got {other}"
            ))),
        }
    }
}

/// Bytes, which the gateway writes as base64.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Blob(pub(crate) Vec<u8>);

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = Option::<String>::deserialize(d)?.unwrap_or_default();
        BASE64
            .decode(text)
            .map(Blob)
            .map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Header {
    pub(crate) revision: Int,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default)]
pub(crate) struct KeyValue {
    pub(crate) key: Blob,
    pub(crate) value: Blob,
    pub(crate) mod_revision: Int,
    /// How many times the key was put since it was created. 0 means it does not exist.
    pub(crate) version: Int,
    pub(crate) lease: Int,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RangeResponse {
    pub(crate) header: Header,
    pub(crate) kvs: Vec<KeyValue>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct TxnResponse {
    pub(crate) header: Header,
    pub(crate) succeeded: bool,
    pub(crate) responses: Vec<ResponseOp>,
}

impl TxnResponse {
    /// The `prev_kv` of the first put or delete that had one.
    pub(crate) fn previous(&self) -> Option<&KeyValue> {
        self.responses.iter().find_map(|op| {
            op.response_put
                .as_ref()
                .and_then(|put| put.prev_kv.as_ref())
                .or_else(|| {
                    op.response_delete_range
                        .as_ref()
                        .and_then(|del| del.prev_kvs.first())
                })
        })
    }

    /// The first key a range in the transaction found.
    pub(crate) fn got(&self) -> Option<&KeyValue> {
        self.responses
            .iter()
            .find_map(|op| op.response_range.as_ref().and_then(|r| r.kvs.first()))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
#[allow(clippy::struct_field_names)] // the gateway's own field names
pub(crate) struct ResponseOp {
    pub(crate) response_range: Option<RangeResponse>,
    pub(crate) response_put: Option<PutResponse>,
    pub(crate) response_delete_range: Option<DeleteResponse>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct PutResponse {
    pub(crate) prev_kv: Option<KeyValue>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct DeleteResponse {
    pub(crate) prev_kvs: Vec<KeyValue>,
}

/// The answer of a delete of a range.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct DeleteRangeResponse {
    pub(super) deleted: Int,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct LeaseGrantResponse {
    #[serde(rename = "ID")]
    pub(super) id: Int,
    #[serde(rename = "TTL")]
    pub(super) ttl: Int,
    pub(super) error: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct LeaseTimeToLiveResponse {
    #[serde(rename = "TTL")]
    pub(super) ttl: Int,
    #[serde(rename = "grantedTTL")]
    pub(super) granted_ttl: Int,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Failure {
    pub(super) message: String,
    pub(super) code: i64,
}

/// A granted lease.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lease {
    pub(crate) id: i64,
    pub(crate) ttl: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateway_json_decodes() {
        let answer: TxnResponse = serde_json::from_str(
            r#"{"header":{"revision":"7"},"succeeded":true,"responses":[
                {"response_range":{"kvs":[{"key":"YQ==","value":"Yg==","mod_revision":"5","lease":"9"}],"count":"1"}},
                {"response_put":{"header":{},"prev_kv":{"key":"YQ==","lease":"3"}}}]}"#,
        )
        .unwrap();
        assert!(answer.succeeded);
        assert_eq!(answer.header.revision, Int(7));
        let got = answer.got().unwrap();
        assert_eq!(
            (got.key.0.as_slice(), got.value.0.as_slice()),
            (&b"a"[..], &b"b"[..])
        );
        assert_eq!(got.mod_revision, Int(5));
        assert_eq!(answer.previous().unwrap().lease, Int(3));
        // A failed transaction omits `succeeded` and `responses`.
        let failed: TxnResponse = serde_json::from_str(r#"{"header":{"revision":"8"}}"#).unwrap();
        assert!(!failed.succeeded && failed.got().is_none());
    }
}
