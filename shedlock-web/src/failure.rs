//! A refused or failed request: its status and the sentence that says what to fix, answered as
//! JSON under `/api` and as a page elsewhere. Bad input is a 4xx, a failing store a 503; nothing
//! is answered 500.

use std::error::Error as StdError;

use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::html;

/// A refusal or failure.
#[derive(Debug)]
pub(crate) struct Failure {
    status: StatusCode,
    message: String,
    basic: bool,
}

#[derive(Serialize)]
struct Body<'a> {
    error: &'a str,
}

impl Failure {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            basic: false,
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub(crate) fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, message)
    }

    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub(crate) fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    /// With `WWW-Authenticate: Basic`, so a browser asks for the read token.
    pub(crate) fn basic(mut self) -> Self {
        self.basic = true;
        self
    }

    /// A store's error: bad input 400, a store that cannot do it 501, anything else 503 with what
    /// the store said (a missing table or column names what to run).
    pub(crate) fn store(error: &shedlock_core::Error) -> Self {
        let text = causes(error);
        if error.is_invalid_config() {
            Self::bad_request(format!("{text}; nothing changed"))
        } else if error.is_unsupported() {
            Self::new(
                StatusCode::NOT_IMPLEMENTED,
                format!("this store cannot do that: {text}"),
            )
        } else {
            Self::new(StatusCode::SERVICE_UNAVAILABLE, text)
        }
    }

    fn headers(&self, mut response: Response) -> Response {
        if self.basic {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Basic realm=\"shedlock\", charset=\"UTF-8\""),
            );
        }
        response
    }

    /// As JSON: `{"error": "..."}`.
    pub(crate) fn json(self) -> Response {
        let response = (
            self.status,
            Json(Body {
                error: &self.message,
            }),
        )
            .into_response();
        self.headers(response)
    }

    /// As a page that says it.
    pub(crate) fn page(self) -> Response {
        let title = self.status.canonical_reason().unwrap_or("Error");
        let body = format!(
            "<h1>{}</h1>\n<pre class=\"error\">{}</pre>\n",
            html::text(title),
            html::text(&self.message),
        );
        let response = (self.status, html::page_response(title, &body, None)).into_response();
        self.headers(response)
    }
}

impl Failure {
    /// As JSON under `/api`, as a page elsewhere: `path` is the path the router saw.
    pub(crate) fn for_path(self, path: &str) -> Response {
        if path.starts_with("/api/") {
            self.json()
        } else {
            self.page()
        }
    }
}

/// Under `/api`, a failure answers as JSON.
impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        self.json()
    }
}

/// An error and its causes, each said once.
pub(crate) fn causes(error: &(dyn StdError + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

/// What an unknown path answers.
pub(crate) async fn not_found(uri: axum::http::Uri) -> Response {
    Failure::not_found(format!("there is no page at {}", uri.path())).for_path(uri.path())
}

/// What a known path answers to a method it does not take.
pub(crate) async fn wrong_method(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    let takes = if uri.path().starts_with("/api/") && method == axum::http::Method::GET {
        "POST"
    } else {
        "GET"
    };
    Failure::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{} takes {takes}, not {method}", uri.path()),
    )
    .for_path(uri.path())
}
