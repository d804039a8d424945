//! The etcd URL form: `etcd://host:port[,host:port…]`, parsed into the members to try in order.

use std::fmt;

use shedlock_core::{Error, Result};

/// etcd's client port when a URL names none.
pub const DEFAULT_PORT: u16 = 2379;

/// The members of one etcd cluster, as an `etcd://` URL lists them, in the order to try them.
///
/// The form is `etcd://host[:port][,host[:port]…][/]`: one or more members of one cluster,
/// separated by commas, port 2379 when omitted; IPv6 hosts in brackets (`etcd://[::1]:2379`).
/// `http://` is accepted as a synonym (`http://a:2379,b:2379`, as `etcdctl --endpoints` takes
/// them). Not accepted, each with an error saying so: `https://` / `etcds://` (this client
/// speaks plain HTTP only; put a TLS proxy such as a sidecar beside it), credentials
/// (`user:password@`; etcd authentication is not supported yet), a path other than `/`, a query.
///
/// ```
/// use shedlock_etcd::Endpoints;
///
/// let endpoints: Endpoints = "etcd://10.0.0.1,10.0.0.2:2380,[::1]".parse()?;
/// assert_eq!(endpoints.authorities(), ["10.0.0.1:2379", "10.0.0.2:2380", "[::1]:2379"]);
/// assert!("https://etcd:2379".parse::<Endpoints>().is_err());
/// # Ok::<(), shedlock_core::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoints {
    authorities: Vec<String>,
}

impl Endpoints {
    /// The members as `host:port`, in the order they are tried.
    #[must_use]
    pub fn authorities(&self) -> &[String] {
        &self.authorities
    }
}

impl fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Endpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "etcd://{}", self.authorities.join(","))
    }
}

impl std::str::FromStr for Endpoints {
    type Err = Error;

    fn from_str(url: &str) -> Result<Self> {
        let url = url.trim();
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(Error::invalid_config(format!(
                "the etcd URL {:?} has no scheme; write it as etcd://host:port[,host:port…]",
                redact(url)
            )));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "etcd" | "http" => {}
            "https" | "etcds" => {
                return Err(Error::invalid_config(format!(
                    "the etcd URL {:?} asks for TLS, which this client does not speak; \
                     use etcd://host:port through a local TLS proxy",
                    redact(url)
                )));
            }
            other => {
                return Err(Error::invalid_config(format!(
                    "the etcd URL {:?} has the scheme {other:?}; write it as etcd://host:port[,host:port…]",
                    redact(url)
                )));
            }
        }
        if rest.contains('@') {
            return Err(Error::invalid_config(format!(
                "the etcd URL {:?} carries credentials, and etcd authentication is not supported \
                 yet; remove user:password@ (and let the cluster accept this client without auth)",
                redact(url)
            )));
        }
        let hosts = rest.strip_suffix('/').unwrap_or(rest);
        if hosts.contains(['/', '?', '#']) {
            return Err(Error::invalid_config(format!(
                "the etcd URL {url:?} has a path or query; only etcd://host:port[,host:port…] is accepted"
            )));
        }
        let authorities = hosts
            .split(',')
            .map(|member| authority(member.trim(), url))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { authorities })
    }
}

/// `host[:port]` → `host:port`, checked.
fn authority(member: &str, url: &str) -> Result<String> {
    let bad = |why: &str| {
        Error::invalid_config(format!(
            "the etcd URL {url:?} has a bad member {member:?}: {why}"
        ))
    };
    if member.is_empty() {
        return Err(bad("it is empty (a stray comma?)"));
    }
    let (host, port) = if let Some(bracketed) = member.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| bad("an IPv6 address needs its closing ]"))?;
        (format!("[{host}]"), after.strip_prefix(':'))
    } else {
        match member.split_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (member.to_owned(), None),
        }
    };
    if host.is_empty() || host == "[]" {
        return Err(bad("the host is empty"));
    }
    if !host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']'))
    {
        return Err(bad("the host has characters a host name cannot have"));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(port) => port
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| bad("the port is not a number from 1 to 65535"))?,
    };
    Ok(format!("{host}:{port}"))
}

/// The URL with anything before an `@` in it replaced, for error messages.
fn redact(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, _)), Some(at)) => format!("{scheme}://***{}", &url[at..]),
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<Vec<String>> {
        url.parse::<Endpoints>().map(|e| e.authorities)
    }

    #[test]
    fn members_ports_and_schemes() {
        assert_eq!(parse("etcd://a").unwrap(), ["a:2379"]);
        assert_eq!(
            parse("http://a:1,b:2/").unwrap(),
            ["a:1", "b:2"],
            "http:// and a trailing slash are accepted"
        );
        assert_eq!(
            parse(" etcd://[::1]:23, 127.0.0.1 ").unwrap(),
            ["[::1]:23", "127.0.0.1:2379"]
        );
    }

    #[test]
    fn bad_urls_say_what_to_fix() {
        for (url, says) in [
            ("a:2379", "no scheme"),
            ("https://a", "TLS"),
            ("redis://a", "scheme \"redis\""),
            ("etcd://a,,b", "empty"),
            ("etcd://a:0", "port"),
            ("etcd://a:x", "port"),
            ("etcd://a/b", "path"),
            ("etcd://[::1", "closing ]"),
            ("etcd://a b", "characters"),
        ] {
            let e = parse(url).expect_err(url);
            assert!(e.is_invalid_config(), "{url}: {e}");
            assert!(e.to_string().contains(says), "{url}: {e}");
        }
    }

    #[test]
    fn credentials_are_refused_and_never_echoed() {
        let e = parse("etcd://root:s3cret@a:2379").unwrap_err();
        assert!(e.to_string().contains("authentication"), "{e}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
        let e = parse("https://root:s3cret@a").unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }
}
