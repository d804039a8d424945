//! The etcd URL form: `etcd://[user:password@]host:port[,host:port…]` (or `https://` for TLS),
//! parsed into the members to try in order.

use std::fmt;

use shedlock_core::{Error, Result};

/// etcd's client port when a URL names none.
pub const DEFAULT_PORT: u16 = 2379;

/// The members of one etcd cluster, as an etcd URL lists them, in the order to try them, with
/// whether to speak TLS to them and the etcd user to authenticate as.
///
/// The form is `scheme://[user:password@]host[:port][,host[:port]…][/]`, members separated by
/// commas, the port 2379 when omitted, IPv6 hosts in brackets (`etcd://[::1]:2379`).
///
/// - `etcd://` or `http://`, as `etcdctl --endpoints` takes them: plain HTTP to every member.
/// - `https://` or `etcds://`: TLS to every member, which needs the crate's `tls-rustls` feature.
///   See `EtcdLockProviderBuilder::ca_file` and `EtcdLockProviderBuilder::client_cert`.
/// - `user:password@`: the etcd user to authenticate as, percent-decoded, so write `%40` for an
///   `@` in a password. [`credentials`](crate::EtcdLockProviderBuilder::credentials) overrides it.
///   `Display` and `Debug` write `user:***@`, and errors `***@`.
///
/// A path other than `/`, a query, a user without a password, and a bad percent escape are refused
/// with an error saying so.
///
/// ```
/// use shedlock_etcd::Endpoints;
///
/// let endpoints: Endpoints = "etcd://10.0.0.1,10.0.0.2:2380,[::1]".parse()?;
/// assert_eq!(endpoints.authorities(), ["10.0.0.1:2379", "10.0.0.2:2380", "[::1]:2379"]);
/// assert!(!endpoints.is_tls());
///
/// let endpoints: Endpoints = "https://locker:p%40ss@etcd-0:2379,etcd-1:2379".parse()?;
/// assert!(endpoints.is_tls());
/// assert_eq!(endpoints.user(), Some("locker"));
/// assert_eq!(endpoints.to_string(), "https://locker:***@etcd-0:2379,etcd-1:2379");
/// # Ok::<(), shedlock_core::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoints {
    authorities: Vec<String>,
    tls: bool,
    credentials: Option<Credentials>,
}

/// An etcd user and password. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Credentials {
    pub(crate) user: String,
    pub(crate) password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"***")
            .finish()
    }
}

impl Endpoints {
    /// The members as `host:port`, in the order they are tried.
    #[must_use]
    pub fn authorities(&self) -> &[String] {
        &self.authorities
    }

    /// Whether the URL asks for TLS (`https://` or `etcds://`).
    #[must_use]
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The etcd user the URL names (`user:password@`), if any.
    #[must_use]
    pub fn user(&self) -> Option<&str> {
        self.credentials.as_ref().map(|c| c.user.as_str())
    }

    pub(crate) fn credentials(&self) -> Option<&Credentials> {
        self.credentials.as_ref()
    }
}

impl fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Endpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "https" } else { "etcd" };
        write!(f, "{scheme}://")?;
        if let Some(credentials) = &self.credentials {
            write!(f, "{}:***@", percent_encode(&credentials.user))?;
        }
        write!(f, "{}", self.authorities.join(","))
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
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "etcd" | "http" => false,
            "https" | "etcds" => true,
            other => {
                return Err(Error::invalid_config(format!(
                    "the etcd URL {:?} has the scheme {other:?}; write it as etcd://host:port[,host:port…] \
                     (https://… for TLS)",
                    redact(url)
                )));
            }
        };
        let (credentials, rest) = match rest.rfind('@') {
            Some(at) => (Some(credentials(&rest[..at], url)?), &rest[at + 1..]),
            None => (None, rest),
        };
        let hosts = rest.strip_suffix('/').unwrap_or(rest);
        if hosts.contains(['/', '?', '#']) {
            return Err(Error::invalid_config(format!(
                "the etcd URL {:?} has a path or query; only etcd://host:port[,host:port…] is accepted",
                redact(url)
            )));
        }
        let authorities = hosts
            .split(',')
            .map(|member| authority(member.trim(), url))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            authorities,
            tls,
            credentials,
        })
    }
}

/// `user:password`, percent-encoded → the credentials, checked. Errors never show them.
fn credentials(userinfo: &str, url: &str) -> Result<Credentials> {
    let bad = |why: &str| {
        Error::invalid_config(format!(
            "the etcd URL {:?} has bad credentials: {why}",
            redact(url)
        ))
    };
    let (user, password) = userinfo
        .split_once(':')
        .ok_or_else(|| bad("write them as user:password@ before the members"))?;
    let user = percent_decode(user).ok_or_else(|| {
        bad("the user name has a bad percent escape or is not UTF-8 once decoded")
    })?;
    let password = percent_decode(password)
        .ok_or_else(|| bad("the password has a bad percent escape or is not UTF-8 once decoded"))?;
    if user.is_empty() {
        return Err(bad("the user name is empty"));
    }
    Ok(Credentials { user, password })
}

/// `%XX` escapes decoded. `None` for a bad escape or bytes that are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// A user name as it may appear in a URL again, as `Display` writes it.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
    }
    out
}

/// `host[:port]` → `host:port`, checked.
fn authority(member: &str, url: &str) -> Result<String> {
    let bad = |why: &str| {
        Error::invalid_config(format!(
            "the etcd URL {:?} has a bad member {member:?}: {why}",
            redact(url)
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
    let Some(at) = url.rfind('@') else {
        return url.to_owned();
    };
    match url.split_once("://") {
        Some((scheme, _)) if scheme.len() < at => format!("{scheme}://***{}", &url[at..]),
        _ => format!("***{}", &url[at..]),
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
        for (url, tls) in [
            ("etcd://a", false),
            ("HTTP://a", false),
            ("https://a,b:2", true),
            ("etcds://a", true),
        ] {
            let endpoints: Endpoints = url.parse().unwrap();
            assert_eq!(endpoints.is_tls(), tls, "{url}");
        }
        assert_eq!(
            "etcds://a,b:2".parse::<Endpoints>().unwrap().to_string(),
            "https://a:2379,b:2"
        );
    }

    #[test]
    fn bad_urls_say_what_to_fix() {
        for (url, says) in [
            ("a:2379", "no scheme"),
            ("redis://a", "scheme \"redis\""),
            ("etcd://a,,b", "empty"),
            ("etcd://a:0", "port"),
            ("etcd://a:x", "port"),
            ("etcd://a/b", "path"),
            ("etcd://[::1", "closing ]"),
            ("etcd://a b", "characters"),
            ("etcd://root@a", "user:password@"),
            ("etcd://:pw@a", "user name is empty"),
            ("etcd://root:%zz@a", "percent escape"),
        ] {
            let e = parse(url).expect_err(url);
            assert!(e.is_invalid_config(), "{url}: {e}");
            assert!(e.to_string().contains(says), "{url}: {e}");
        }
    }

    #[test]
    fn credentials_are_decoded_and_never_shown() {
        let endpoints: Endpoints = "https://lock%20er:s3cr%40t:x@a:2379,b".parse().unwrap();
        assert_eq!(endpoints.authorities(), ["a:2379", "b:2379"]);
        let credentials = endpoints.credentials().unwrap();
        assert_eq!(
            (credentials.user.as_str(), credentials.password.as_str()),
            ("lock er", "s3cr@t:x")
        );
        assert_eq!(endpoints.user(), Some("lock er"));
        for shown in [
            endpoints.to_string(),
            format!("{endpoints:?}"),
            format!("{credentials:?}"),
        ] {
            assert!(!shown.contains("s3cr"), "{shown}");
            assert!(shown.contains("lock") && shown.contains("***"), "{shown}");
        }
        assert_eq!(endpoints.to_string(), "https://lock%20er:***@a:2379,b:2379");
        // An unescaped @ in the password: the last @ ends the credentials.
        let endpoints: Endpoints = "etcd://root:p@ss@a".parse().unwrap();
        assert_eq!(endpoints.credentials().unwrap().password, "p@ss");
        assert_eq!(endpoints.authorities(), ["a:2379"]);
        for url in [
            "etcd://root:s3cret@a:x",
            "https://root:s3cret@a/b",
            "etcd://root:s3cret%zz@a",
            "redis://root:s3cret@a",
        ] {
            let e = parse(url).unwrap_err();
            assert!(!e.to_string().contains("s3cret"), "{e}");
        }
    }
}
