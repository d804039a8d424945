//! The `Host` check of a dashboard bound to loopback ([`Dashboard::loopback_only`]). A page on
//! another site whose name an attacker points at 127.0.0.1 (DNS rebinding) sends its own name as
//! `Host`, and is refused before any handler reads the store.
//!
//! [`Dashboard::loopback_only`]: crate::Dashboard::loopback_only

use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;

use crate::failure::Failure;

/// Whether `host`, a `Host` header's value, names this machine's loopback: `localhost`, a
/// 127.x address or `[::1]`, with or without a port.
pub(crate) fn is_loopback(host: &str) -> bool {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        let Some((ip, port)) = rest.split_once(']') else {
            return false;
        };
        return (port.is_empty() || is_port(port.strip_prefix(':').unwrap_or("x")))
            && ip.parse::<Ipv6Addr>().is_ok_and(|ip| ip.is_loopback());
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if is_port(port) => name,
        Some(_) => return false,
        None => host,
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn is_port(port: &str) -> bool {
    !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `host` names one of `allowed`, with or without a port.
fn is_allowed(host: &str, allowed: &[String]) -> bool {
    let host = host.trim();
    let name = match host.rsplit_once(':') {
        Some((name, port)) if is_port(port) => name,
        _ => host,
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    allowed.iter().any(|a| a.eq_ignore_ascii_case(name))
}

pub(crate) async fn loopback_only(
    State(allowed): State<Arc<Vec<String>>>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| {
            request
                .uri()
                .authority()
                .map(axum::http::uri::Authority::as_str)
        });
    match host {
        Some(host) if is_loopback(host) || is_allowed(host, &allowed) => next.run(request).await,
        other => {
            let failure = Failure::forbidden(format!(
                "refused: this dashboard answers on loopback only, and the request names {}; \
                 open it as http://localhost or http://127.0.0.1, or allow the name (a reverse \
                 proxy's: `allow_host`, `shedlock serve --allow-host`)",
                other.map_or_else(|| "no host".to_owned(), |h| format!("the host {h:?}"))
            ));
            failure.for_path(request.uri().path())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_loopback;

    #[test]
    fn loopback_names_with_and_without_ports() {
        for host in [
            "localhost",
            "localhost:8080",
            "LOCALHOST.",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:1",
            "[::1]",
            "[::1]:8080",
        ] {
            assert!(is_loopback(host), "{host}");
        }
    }

    #[test]
    fn other_names_are_not_loopback() {
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "10.0.0.1:8080",
            "[::2]:80",
            "[::1",
            "localhost:http",
            "",
            "0.0.0.0:8080",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    #[test]
    fn allowed_names_with_and_without_ports() {
        let allowed = ["dash.example".to_owned()];
        for host in ["dash.example", "DASH.example:443", "dash.example."] {
            assert!(super::is_allowed(host, &allowed), "{host}");
        }
        for host in [
            "evil.example",
            "dash.example.evil",
            "x.dash.example",
            "dash.example:x",
        ] {
            assert!(!super::is_allowed(host, &allowed), "{host}");
        }
    }
}
