//! [`HttpRefusals`]: the HTTP answers of the `http` feature.

use http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER, X_CONTENT_TYPE_OPTIONS};
use http::{Response, StatusCode};
use shedlock_core::Error;
use shedlock_core::provider::LockRecord;
use shedlock_core::provider::chrono::Utc;

use crate::refusal::{Busy, Refusals};

/// The HTTP answers of a [`LockService`](crate::LockService), with a short plain-text body and
/// `X-Content-Type-Options: nosniff`, as the 409 and 400 bodies quote the lock name:
///
/// | when | status |
/// |---|---|
/// | another replica holds the lock | 409 Conflict, or [`held_status`](Self::held_status) |
/// | the closure returned `None`: not one of the layer's locks | 404 Not Found |
/// | the name the request yielded is not a valid lock name | 400 Bad Request |
/// | the store failed, timed out or refused the lock, or the executor is shutting down | 503 Service Unavailable |
///
/// With [`retry_after`](Self::retry_after), the answer to a held lock carries `Retry-After`: the
/// seconds until the holder's `lock_until`, rounded up. It costs one more store call per skipped
/// request, a read of the holder, bounded by
/// [`HOLDER_READ_TIMEOUT`](crate::HOLDER_READ_TIMEOUT). Without an answer in time the header is
/// left out. `lock_until` is the store's clock, compared with this host's. Off by default.
///
/// The body type is any `B: From<String>`: axum's `Body`, `String`, `http_body_util::Full<Bytes>`.
/// Errors are never produced, so the inner service's error type stays as it is, `Infallible`
/// for axum.
///
/// ```
/// use http::StatusCode;
/// use shedlock_tower::HttpRefusals;
///
/// // 423 Locked instead of 409, and a Retry-After header.
/// let refusals = HttpRefusals::new().held_status(StatusCode::LOCKED).retry_after(true);
/// # let _ = refusals;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct HttpRefusals {
    held_status: StatusCode,
    retry_after: bool,
}

impl Default for HttpRefusals {
    fn default() -> Self {
        Self {
            held_status: StatusCode::CONFLICT,
            retry_after: false,
        }
    }
}

impl HttpRefusals {
    /// 409 when held, 404 for a request that names no lock, 400 for an invalid name, 503 for a
    /// failure, no `Retry-After`.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The status of the answer to a held lock. Defaults to 409 Conflict. 423 Locked, 429 Too
    /// Many Requests and 503 Service Unavailable are other common choices.
    #[must_use]
    pub fn held_status(mut self, status: StatusCode) -> Self {
        self.held_status = status;
        self
    }

    /// Whether the answer to a held lock carries `Retry-After`, read from the holder. Defaults to
    /// off, as it costs one more store call per skipped request.
    #[must_use]
    pub fn retry_after(mut self, retry_after: bool) -> Self {
        self.retry_after = retry_after;
        self
    }
}

impl<B: From<String>, E> Refusals<Response<B>, E> for HttpRefusals {
    fn held(&self, busy: &Busy) -> Result<Response<B>, E> {
        let mut response = text(
            self.held_status,
            format!(
                "the lock {:?} is held by another run; retry later\n",
                busy.name()
            ),
        );
        if self.retry_after
            && let Some(holder) = busy.holder()
        {
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(retry_after_secs(holder)));
        }
        Ok(response)
    }

    fn unrecognised(&self) -> Result<Response<B>, E> {
        Ok(text(StatusCode::NOT_FOUND, "not found\n".to_owned()))
    }

    fn invalid_name(&self, _name: &str, error: &Error) -> Result<Response<B>, E> {
        Ok(text(StatusCode::BAD_REQUEST, format!("{error}\n")))
    }

    fn failed(&self, _name: &str, error: &Error) -> Result<Response<B>, E> {
        // The store's error stays in the log (the executor logs it at WARN): it may name hosts.
        let body = if error.is_shutdown() {
            "shutting down; retry on another replica\n"
        } else {
            "the lock store is unavailable; retry later\n"
        };
        Ok(text(StatusCode::SERVICE_UNAVAILABLE, body.to_owned()))
    }

    fn wants_holder(&self) -> bool {
        self.retry_after
    }
}

/// A plain-text answer.
fn text<B: From<String>>(status: StatusCode, body: String) -> Response<B> {
    let mut response = Response::new(B::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
        .headers_mut()
        .insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// The whole seconds until `holder`'s `lock_until`, rounded up; 0 once it has passed.
fn retry_after_secs(holder: &LockRecord) -> u64 {
    let left = holder.lock_until() - Utc::now();
    let millis = u64::try_from(left.num_milliseconds()).unwrap_or(0);
    millis.div_ceil(1000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shedlock_core::provider::chrono::Duration;

    #[test]
    fn retry_after_rounds_up_and_stops_at_zero() {
        let now = Utc::now();
        let record = |until| LockRecord::new("a", "b", now, until);
        // 10.5 s ahead, less the test's own time: 11 unless the clock jumped by half a second.
        assert_eq!(
            retry_after_secs(&record(now + Duration::milliseconds(10_500))),
            11
        );
        assert_eq!(retry_after_secs(&record(now - Duration::seconds(3))), 0);
    }
}
