//! A request's JSON body. It must say `Content-Type: application/json`, so a plain form of
//! another site cannot send it; an empty body reads as `{}`; anything else is a 4xx that says what
//! is wrong.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use serde::de::DeserializeOwned;

use crate::failure::Failure;

/// A JSON body, as a `T`.
pub(crate) struct Body<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = Failure;

    async fn from_request(request: Request, state: &S) -> Result<Self, Failure> {
        let json = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| {
                let v = v.trim();
                v.eq_ignore_ascii_case("application/json")
                    || (v.len() > 5 && v[v.len() - 5..].eq_ignore_ascii_case("+json"))
            });
        if !json {
            return Err(Failure::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "send the body as JSON, with `Content-Type: application/json`; nothing changed",
            ));
        }
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                Failure::new(
                    rejection.status(),
                    format!("{}; nothing changed", rejection.body_text()),
                )
            })?;
        let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        serde_json::from_slice(text).map(Self).map_err(|e| {
            let status = if e.is_data() {
                StatusCode::UNPROCESSABLE_ENTITY
            } else {
                StatusCode::BAD_REQUEST
            };
            Failure::new(
                status,
                format!("the body is not what this action takes: {e}; nothing changed"),
            )
        })
    }
}
