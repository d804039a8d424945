//! etcd watches over the JSON gateway: `POST /v3/watch` answers with a stream of JSON messages,
//! one per line, read here as they come.

use std::sync::atomic::Ordering;

use bytes::{Buf as _, Bytes, BytesMut};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::time::{Instant, timeout_at};

use super::{Gateway, GatewayError, b64, decode};

/// A watch created on one member: the stream of its messages.
pub(crate) struct Watch {
    body: Incoming,
    buffer: BytesMut,
}

impl Gateway {
    /// Watches the puts of the keys in `[key, range_end)`, on the first member that accepts a
    /// connection, the one that answered last first, before `deadline`. It answers once etcd confirmed the watch, so every put after
    /// the answer is seen.
    ///
    /// It sends the token the other calls send, authenticating first if there is none yet.
    pub(crate) async fn watch(
        &self,
        key: &[u8],
        range_end: &[u8],
        deadline: Instant,
    ) -> Result<Watch, GatewayError> {
        let body = json!({
            "create_request": { "key": b64(key), "range_end": b64(range_end), "filters": ["NODELETE"] }
        });
        let body = Bytes::from(body.to_string());
        let token = match &self.auth {
            None => None,
            Some(auth) => match auth.current() {
                Some(token) => token,
                None => self.authenticate(auth, None, deadline).await?,
            },
        };
        let members = self.endpoints.authorities();
        let first = self.preferred.load(Ordering::Relaxed) % members.len();
        let mut failures = Vec::new();
        for i in 0..members.len() {
            let member = &members[(first + i) % members.len()];
            let mut request = hyper::Request::post(format!("{}://{member}/v3/watch", self.scheme))
                .header(hyper::header::CONTENT_TYPE, "application/json");
            if let Some(token) = token.as_deref() {
                request = request.header(hyper::header::AUTHORIZATION, token);
            }
            let request =
                request
                    .body(Full::new(body.clone()))
                    .map_err(|e| GatewayError::Decode {
                        member: member.clone(),
                        why: format!("bad request: {e}"),
                    })?;
            let response = match timeout_at(deadline, self.http.request(request)).await {
                Err(_) => return Err(GatewayError::Timeout),
                Ok(Err(e)) => {
                    failures.push((member.clone(), e.to_string()));
                    continue;
                }
                Ok(Ok(response)) => response,
            };
            let status = response.status().as_u16();
            let mut watch = Watch {
                body: response.into_body(),
                buffer: BytesMut::new(),
            };
            if !(200..300).contains(&status) {
                let bytes = timeout_at(deadline, watch.body.collect())
                    .await
                    .map_err(|_| GatewayError::Timeout)?
                    .map(http_body_util::Collected::to_bytes)
                    .unwrap_or_default();
                return Err(decode::<Value>(member, status, &bytes)
                    .err()
                    .unwrap_or_else(|| GatewayError::Decode {
                        member: member.clone(),
                        why: format!("HTTP {status}"),
                    }));
            }
            return match timeout_at(deadline, watch.message()).await {
                Err(_) => Err(GatewayError::Timeout),
                Ok(Some(message)) if message["result"]["created"] == json!(true) => Ok(watch),
                Ok(other) => Err(GatewayError::Decode {
                    member: member.clone(),
                    why: format!("the watch was not created: {other:?}"),
                }),
            };
        }
        Err(GatewayError::Unreachable(failures))
    }
}

impl Watch {
    /// Waits for the next message that reports puts. `None` when the stream ended: the member
    /// closed it, the connection broke, or etcd cancelled the watch.
    pub(crate) async fn next_put(&mut self) -> Option<()> {
        loop {
            let message = self.message().await?;
            let result = &message["result"];
            if message.get("error").is_some() || result["canceled"] == json!(true) {
                tracing::debug!(%message, "etcd ended a watch");
                return None;
            }
            if result["events"].as_array().is_some_and(|e| !e.is_empty()) {
                return Some(());
            }
            // A progress notification, or the confirmation: nothing to report.
        }
    }

    /// The next whole message of the stream, `None` when it ended.
    async fn message(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line = self.buffer.split_to(end + 1);
                let line = line.chunk().trim_ascii();
                if line.is_empty() {
                    continue;
                }
                return match serde_json::from_slice(line) {
                    Ok(message) => Some(message),
                    Err(error) => {
                        tracing::debug!(
                            error = &error as &dyn std::error::Error,
                            "an etcd watch sent an unreadable message"
                        );
                        None
                    }
                };
            }
            // Cancel-safe: a frame is appended whole once it has arrived.
            let frame = self.body.frame().await?.ok()?;
            if let Ok(data) = frame.into_data() {
                self.buffer.extend_from_slice(&data);
            }
        }
    }
}
