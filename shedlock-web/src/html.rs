//! Text into HTML: every name, owner and error text goes through [`text`], so a lock named
//! `<script>` reads as its name. And the frame every page has, with headers that keep scripts to
//! the dashboard's own file.

use std::fmt::Write as _;

use axum::http::{HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, SecondsFormat, Utc};

/// `s` as HTML text or as an attribute value in double quotes.
pub(crate) fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `s` as one segment of a URL path: every byte but the unreserved ones percent-encoded, so a
/// name with `/`, `?` or `#` stays one segment.
pub(crate) fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A stored instant, with every digit the store keeps: what a guarded unlock sends back.
pub(crate) fn exact(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// An instant as a `<time>`: the time of day in UTC, and how long before or after `now`.
pub(crate) fn when(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    format!(
        "<time datetime=\"{}\" title=\"{}\">{}</time>",
        exact(at),
        exact(at),
        relative(at, now)
    )
}

/// How long before `now` `at` was (`12s ago`), or how long after (`in 48s`).
pub(crate) fn relative(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    match (now - at).to_std() {
        Ok(ago) => format!("{} ago", shedlock_duration::approx(ago)),
        Err(_) => format!(
            "in {}",
            shedlock_duration::approx((at - now).to_std().unwrap_or_default())
        ),
    }
}

/// The dashboard's content security policy: scripts, styles and requests to the dashboard itself
/// only, no inline script, no frames around it.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                      connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Where the dashboard is mounted, as a page's links need it: the path the router is nested
/// under, read from the request, so links work under any prefix.
#[derive(Debug, Clone)]
pub(crate) struct Base {
    /// The prefix with a `/` after it: `/` unnested, `/ops/shedlock/` nested.
    pub(crate) path: String,
    /// The jobs page: the prefix itself, or `/`.
    pub(crate) root: String,
}

impl Base {
    /// The mount point of a request the router saw as `inner`, sent as `original`.
    pub(crate) fn of(original: &str, inner: &str) -> Self {
        let prefix = if inner == "/" {
            original.trim_end_matches('/')
        } else {
            original.strip_suffix(inner).unwrap_or("")
        };
        Self {
            path: format!("{prefix}/"),
            root: if prefix.is_empty() {
                "/".to_owned()
            } else {
                prefix.to_owned()
            },
        }
    }
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Base {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        let inner = parts.uri.path().to_owned();
        let original = parts
            .extensions
            .get::<axum::extract::OriginalUri>()
            .map_or_else(|| inner.clone(), |o| o.0.path().to_owned());
        Ok(Self::of(&original, &inner))
    }
}

/// How the page's actions are authorised, for its header: the token box only where a token acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    ReadOnly,
    Token,
    Middleware,
}

/// A whole page: `body` in the frame with the navigation, the token box and the status line.
/// `None` for a page without the frame, as an error before routing.
pub(crate) fn page_response(title: &str, body: &str, frame: Option<(&Base, Mode)>) -> Response {
    let mut out = String::with_capacity(body.len() + 2048);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{} · shedlock</title>\n",
        text(title)
    );
    if let Some((base, mode)) = frame {
        let (path, root) = (text(&base.path), text(&base.root));
        let _ = write!(
            out,
            "<link rel=\"stylesheet\" href=\"{path}assets/style.css\">\n\
             <script src=\"{path}assets/app.js\" defer></script>\n</head>\n<body data-base=\"{path}\">\n\
             <header>\n<nav><a class=\"brand\" href=\"{root}\">shedlock</a> \
             <a href=\"{root}\">Jobs</a> <a href=\"{path}locks\">Locks</a></nav>\n"
        );
        out.push_str(match mode {
            Mode::Token => {
                "<form id=\"token-form\" class=\"token\">\
                 <label for=\"token\">Action token</label> \
                 <input id=\"token\" type=\"password\" autocomplete=\"off\" size=\"24\"> \
                 <button id=\"token-save\" type=\"submit\">Use</button> \
                 <button id=\"token-forget\" type=\"button\">Forget</button> \
                 <span id=\"token-state\"></span></form>\n"
            }
            Mode::Middleware => "<span class=\"mode\">actions as you are signed in</span>\n",
            Mode::ReadOnly => "<span class=\"mode\">read-only</span>\n",
        });
        out.push_str("</header>\n<p id=\"message\" role=\"status\"></p>\n");
    } else {
        out.push_str("</head>\n<body>\n");
    }
    let _ = write!(out, "<main>\n{body}</main>\n</body>\n</html>\n");
    let mut response = Html(out).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_escapes_what_html_reads_as_markup() {
        assert_eq!(
            text("<script>alert(\"x\")</script> & 'y'"),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn the_base_is_where_the_router_is_mounted() {
        let at = |o, i| {
            let b = Base::of(o, i);
            (b.path, b.root)
        };
        assert_eq!(at("/", "/"), ("/".to_owned(), "/".to_owned()));
        assert_eq!(
            at("/jobs/a%2Fb", "/jobs/a%2Fb"),
            ("/".to_owned(), "/".to_owned())
        );
        assert_eq!(
            at("/ops/shedlock", "/"),
            ("/ops/shedlock/".to_owned(), "/ops/shedlock".to_owned())
        );
        assert_eq!(
            at("/ops/shedlock/", "/"),
            ("/ops/shedlock/".to_owned(), "/ops/shedlock".to_owned())
        );
        assert_eq!(
            at("/ops/locks", "/locks"),
            ("/ops/".to_owned(), "/ops".to_owned())
        );
    }

    #[test]
    fn a_segment_keeps_slashes_and_markup_inside() {
        assert_eq!(segment("report/eu?x#y"), "report%2Feu%3Fx%23y");
        assert_eq!(segment("<b>é"), "%3Cb%3E%C3%A9");
        assert_eq!(segment("nightly-report_1.2~"), "nightly-report_1.2~");
    }
}
