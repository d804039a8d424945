//! etcd's v3 JSON gateway over HTTP/1.1, plain or TLS: the few calls the provider makes, failover
//! across the members of one cluster, authentication, and the JSON shapes, with bytes as base64
//! and int64 values as strings.

use std::error::Error as StdError;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::time::{Instant, timeout_at};

use crate::endpoint::{Credentials, Endpoints};

mod json;
mod watch;

use json::{DeleteRangeResponse, Failure, LeaseGrantResponse, LeaseTimeToLiveResponse};
pub(crate) use json::{KeyValue, Lease, RangeResponse, Txn, TxnResponse, b64};
pub(crate) use watch::Watch;

/// The connector: with `tls-rustls`, rustls for `https://` members and plain TCP for `http://`.
#[cfg(feature = "tls-rustls")]
type Connector = hyper_rustls::HttpsConnector<HttpConnector>;
#[cfg(not(feature = "tls-rustls"))]
type Connector = HttpConnector;

/// gRPC's `UNAVAILABLE`, which the gateway reports for "no leader" and similar member states:
/// another member may answer.
const UNAVAILABLE: i64 = 14;

/// gRPC's `UNAUTHENTICATED`: etcd's answer to a token it does not know. Such a token has expired,
/// or was issued before a restart.
const UNAUTHENTICATED: i64 = 16;

/// One failed gateway call, the `source()` of the provider's errors.
#[derive(Debug)]
pub(crate) enum GatewayError {
    /// No member answered: each one's transport failure, in the order tried. A failed TLS handshake
    /// is given in words.
    Unreachable(Vec<(String, String)>),
    /// The cluster refused the user and password.
    AuthFailed { member: String, user: String },
    /// The cluster has authentication enabled and no user was given.
    AuthRequired { member: String, answer: String },
    /// The user may not touch the keys.
    PermissionDenied { member: String, user: String },
    /// A member answered with an error.
    Status {
        member: String,
        status: u16,
        code: i64,
        message: String,
    },
    /// A member's answer could not be read.
    Decode { member: String, why: String },
    /// The request reached a member, or may have, and its answer was lost or was "unavailable". It
    /// is one whose repeat would answer from its own effect (see [`Gateway::txn_once`]), so it may
    /// have been applied and was not sent again.
    ReplyLost { member: String, why: String },
    /// The call's deadline passed.
    Timeout,
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unreachable(tries) => {
                write!(f, "no etcd member answered (")?;
                for (i, (member, why)) in tries.iter().enumerate() {
                    if i > 0 {
                        write!(f, "; ")?;
                    }
                    write!(f, "{member}: {why}")?;
                }
                write!(f, ")")
            }
            Self::Status {
                member,
                status,
                code,
                message,
            } => write!(
                f,
                "etcd member {member} answered HTTP {status}: {message} (grpc code {code})"
            ),
            Self::Decode { member, why } => {
                write!(f, "etcd member {member} sent an unreadable answer: {why}")
            }
            Self::ReplyLost { member, why } => write!(
                f,
                "the reply was lost (etcd member {member}: {why}) and the transaction may have \
                 been applied; not sent again"
            ),
            Self::AuthFailed { member, user } => write!(
                f,
                "etcd member {member}: authentication failed for user {user:?} (wrong user name \
                 or password)"
            ),
            Self::AuthRequired { member, answer } => write!(
                f,
                "etcd member {member} requires authentication ({answer}) and no user was given: \
                 give one with credentials(user, password) or user:password@ in the URL"
            ),
            Self::PermissionDenied { member, user } => write!(
                f,
                "etcd member {member}: permission denied for user {user:?}; grant its role \
                 readwrite on the provider's key prefix"
            ),
            Self::Timeout => write!(f, "the call's deadline passed"),
        }
    }
}

impl StdError for GatewayError {}

impl GatewayError {
    /// Whether a lease call failed because the lease no longer exists.
    pub(crate) fn is_lease_not_found(&self) -> bool {
        matches!(self, Self::Status { message, .. } if message.contains("lease not found"))
    }

    /// Whether the provider says everything in one line: when no member could be reached, with each
    /// one's cause named, or when the setup is wrong, as with authentication. Both are fixed by
    /// configuration and read in logs.
    pub(crate) fn says_all(&self) -> bool {
        matches!(
            self,
            Self::Unreachable(_)
                | Self::AuthFailed { .. }
                | Self::AuthRequired { .. }
                | Self::PermissionDenied { .. }
        )
    }

    /// Whether a member refused the request for its token, unknown or expired, or for having none.
    /// etcd checks the token before it proposes or reads anything.
    fn wants_token(&self) -> bool {
        matches!(self, Self::Status { code, message, .. }
            if (*code == UNAUTHENTICATED && message.contains("invalid auth token"))
                || message.contains("user name is empty"))
    }
}

/// Why a request to one member failed, and whether it may have reached it.
struct Failed {
    sent: bool,
    why: String,
}

/// The token this client sends: `None` until the first authentication, `Some(None)` when the
/// cluster answered that authentication is not enabled, so there is nothing to send.
type Token = Option<Arc<str>>;

/// Authentication: the user, the current token, and one renewal at a time.
struct Auth {
    credentials: Credentials,
    token: Mutex<Option<Token>>,
    renewing: tokio::sync::Mutex<()>,
}

impl Auth {
    fn current(&self) -> Option<Token> {
        self.token
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[derive(Deserialize)]
struct AuthenticateResponse {
    token: String,
}

/// The HTTP client of one cluster: tries the member that answered last first, then the others in
/// URL order.
pub(crate) struct Gateway {
    endpoints: Endpoints,
    preferred: AtomicUsize,
    http: Client<Connector, Full<Bytes>>,
    scheme: &'static str,
    /// Whether TLS connections present a client certificate.
    client_cert: bool,
    auth: Option<Auth>,
}

impl Gateway {
    /// The client of the cluster at `endpoints`, authenticating with `credentials`, the builder's
    /// else the URL's. `tls` is the rustls configuration, used for `https://` members only.
    pub(crate) fn new(
        endpoints: Endpoints,
        connect_timeout: Duration,
        credentials: Option<Credentials>,
        #[cfg(feature = "tls-rustls")] tls: rustls::ClientConfig,
    ) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_nodelay(true);
        #[cfg(feature = "tls-rustls")]
        let client_cert = tls.client_auth_cert_resolver.has_certs();
        #[cfg(not(feature = "tls-rustls"))]
        let client_cert = false;
        #[cfg(feature = "tls-rustls")]
        let connector = {
            // The scheme of each request picks TLS or not; https:// URLs need the connector
            // not to enforce http:// only.
            connector.enforce_http(false);
            hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls)
                .https_or_http()
                .enable_http1()
                .wrap_connector(connector)
        };
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Self {
            scheme: if endpoints.is_tls() { "https" } else { "http" },
            client_cert,
            endpoints,
            preferred: AtomicUsize::new(0),
            http,
            auth: credentials.map(|credentials| Auth {
                credentials,
                token: Mutex::new(None),
                renewing: tokio::sync::Mutex::new(()),
            }),
        }
    }

    pub(crate) fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// POSTs `body` to `path` on the first member that answers, before `deadline`.
    ///
    /// A member is skipped for the next when it cannot be reached, its connection breaks, or it
    /// answers `UNAVAILABLE` for having no leader. That sends twice only what is safe to: reads,
    /// lease grants, revokes, and the transactions of extend, release and unlock. A spare lease
    /// expires by itself, and a transaction's compares fail when its first copy was applied, which
    /// its callers read as "no longer held" only where it is true.
    ///
    /// With `once`, only a member that could not be connected to, so was sent nothing, is skipped.
    /// A broken connection or an `UNAVAILABLE` answer, which etcd also gives for a proposal that
    /// timed out while the leader changed and may have been applied, ends the call with
    /// [`GatewayError::ReplyLost`].
    ///
    /// With credentials, the request carries the token, authenticating first when there is none
    /// yet. A token refused as expired, or unknown after a restart, is renewed and the request sent
    /// once more, also with `once`, as etcd checks the token before it reads or proposes anything.
    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &Value,
        once: bool,
        deadline: Instant,
    ) -> Result<T, GatewayError> {
        let body = Bytes::from(body.to_string());
        let Some(auth) = &self.auth else {
            return match self.post_as(path, body, once, deadline, None).await {
                // With --client-cert-auth, etcd's gateway acts as the user its own certificate
                // names, which may do nothing: permission denied.
                Err(GatewayError::Status {
                    member, message, ..
                }) if message.contains("user name is empty")
                    || message.contains("permission denied") =>
                {
                    Err(GatewayError::AuthRequired {
                        member,
                        answer: message,
                    })
                }
                other => other,
            };
        };
        let token = match auth.current() {
            Some(token) => token,
            None => self.authenticate(auth, None, deadline).await?,
        };
        match self
            .post_as(path, body.clone(), once, deadline, token.as_deref())
            .await
        {
            Err(e) if e.wants_token() => {
                tracing::debug!(path, error = %e, "etcd refused the token; authenticating again");
                let token = self.authenticate(auth, Some(&token), deadline).await?;
                self.post_as(path, body, once, deadline, token.as_deref())
                    .await
                    .map_err(|e| denied(auth, e))
            }
            other => other.map_err(|e| denied(auth, e)),
        }
    }

    /// A token for `auth`'s user: a new one, unless another caller renewed `stale` meanwhile.
    /// Callers that find the same stale token wait for one renewal.
    async fn authenticate(
        &self,
        auth: &Auth,
        stale: Option<&Token>,
        deadline: Instant,
    ) -> Result<Token, GatewayError> {
        let _one = timeout_at(deadline, auth.renewing.lock())
            .await
            .map_err(|_| GatewayError::Timeout)?;
        if let Some(current) = auth.current()
            && stale != Some(&current)
        {
            return Ok(current);
        }
        let body = json!({
            "name": auth.credentials.user,
            "password": auth.credentials.password,
        });
        let body = Bytes::from(body.to_string());
        let answer: Result<AuthenticateResponse, _> = self
            .post_as("/v3/auth/authenticate", body, false, deadline, None)
            .await;
        let token = match answer {
            Ok(answer) => Some(Arc::from(answer.token)),
            Err(GatewayError::Status { message, .. })
                if message.contains("authentication is not enabled") =>
            {
                tracing::debug!(
                    user = %auth.credentials.user,
                    "etcd authentication is not enabled; sending no token"
                );
                None
            }
            Err(GatewayError::Status {
                member, message, ..
            }) if message.contains("authentication failed") => {
                return Err(GatewayError::AuthFailed {
                    member,
                    user: auth.credentials.user.clone(),
                });
            }
            Err(e) => return Err(e),
        };
        *auth.token.lock().unwrap_or_else(PoisonError::into_inner) = Some(token.clone());
        Ok(token)
    }

    /// [`post`](Self::post) with `token` as it is, no authentication.
    async fn post_as<T: DeserializeOwned>(
        &self,
        path: &str,
        body: Bytes,
        once: bool,
        deadline: Instant,
        token: Option<&str>,
    ) -> Result<T, GatewayError> {
        let members = self.endpoints.authorities();
        let first = self.preferred.load(Ordering::Relaxed) % members.len();
        let mut failures = Vec::new();
        for i in 0..members.len() {
            let index = (first + i) % members.len();
            let member = &members[index];
            match timeout_at(deadline, self.post_to(member, path, body.clone(), token)).await {
                Err(_) => {
                    // A member that accepts and never answers (stopped, overloaded) must not
                    // take every later call down with it: the next call starts at the next one.
                    self.preferred
                        .store((index + 1) % members.len(), Ordering::Relaxed);
                    return Err(GatewayError::Timeout);
                }
                Ok(Ok((status, bytes))) => {
                    let answer = decode(member, status, &bytes);
                    if let Err(GatewayError::Status { code, message, .. }) = &answer
                        && *code == UNAVAILABLE
                    {
                        if once {
                            return Err(GatewayError::ReplyLost {
                                member: member.clone(),
                                why: format!("it answered unavailable: {message}"),
                            });
                        }
                        failures.push((member.clone(), message.clone()));
                        continue;
                    }
                    self.preferred.store(index, Ordering::Relaxed);
                    return answer;
                }
                Ok(Err(Failed { sent, why })) => {
                    if once && sent {
                        return Err(GatewayError::ReplyLost {
                            member: member.clone(),
                            why,
                        });
                    }
                    tracing::debug!(member = %member, path, error = %why, "etcd member unreachable");
                    failures.push((member.clone(), why));
                }
            }
        }
        Err(GatewayError::Unreachable(failures))
    }

    async fn post_to(
        &self,
        member: &str,
        path: &str,
        body: Bytes,
        token: Option<&str>,
    ) -> Result<(u16, Bytes), Failed> {
        let mut request = hyper::Request::post(format!("{}://{member}{path}", self.scheme))
            .header(hyper::header::CONTENT_TYPE, "application/json");
        if let Some(token) = token {
            request = request.header(hyper::header::AUTHORIZATION, token);
        }
        let request = request.body(Full::new(body)).map_err(|e| Failed {
            sent: false,
            why: format!("bad request: {e}"),
        })?;
        let response = self
            .http
            .request(request)
            .await
            .map_err(|e| transport_failure(&e, self.scheme, self.client_cert))?;
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| Failed {
                sent: true,
                why: format!("the answer broke off: {e}"),
            })?
            .to_bytes();
        // With --client-cert-auth and authentication enabled, etcd's JSON gateway refuses every
        // client certificate that has a common name (it could not pass that name on as the
        // user), whatever token the request carries, before it reads the request.
        if status == 400
            && String::from_utf8_lossy(&bytes)
                .contains("CommonName of client sending a request against gateway")
        {
            return Err(Failed {
                sent: false,
                why: "the member refuses client certificates that have a common name (CN) on its \
                      JSON gateway once authentication is enabled: give client_cert(..) a \
                      certificate without a CN (its names as subject alternative names), and \
                      the user with credentials(..)"
                    .to_owned(),
            });
        }
        Ok((status, bytes))
    }

    // ---- the calls ------------------------------------------------------------------------

    /// Every key in `[key, range_end)`. It is just `key` when `range_end` is `None`.
    pub(crate) async fn range(
        &self,
        key: &[u8],
        range_end: Option<&[u8]>,
        deadline: Instant,
    ) -> Result<RangeResponse, GatewayError> {
        let mut body = json!({ "key": b64(key) });
        if let Some(end) = range_end {
            body["range_end"] = json!(b64(end));
        }
        self.post("/v3/kv/range", &body, false, deadline).await
    }

    /// Deletes every key in `[key, range_end)`, and answers how many there were. It is safe to send
    /// again: a repeat deletes nothing more, and only its own count is lost.
    pub(crate) async fn delete_range(
        &self,
        key: &[u8],
        range_end: &[u8],
        deadline: Instant,
    ) -> Result<i64, GatewayError> {
        let body = json!({ "key": b64(key), "range_end": b64(range_end) });
        let answer: DeleteRangeResponse = self
            .post("/v3/kv/deleterange", &body, false, deadline)
            .await?;
        Ok(answer.deleted.0)
    }

    pub(crate) async fn txn(
        &self,
        txn: &Txn,
        deadline: Instant,
    ) -> Result<TxnResponse, GatewayError> {
        self.post("/v3/kv/txn", &txn.body(), false, deadline).await
    }

    /// A transaction whose repeat would answer from its own effect, an acquire's or a fire claim's,
    /// finding its own hold or fire. Once it may have reached a member, it is sent to that member
    /// only (see [`post`](Self::post)).
    pub(crate) async fn txn_once(
        &self,
        txn: &Txn,
        deadline: Instant,
    ) -> Result<TxnResponse, GatewayError> {
        self.post("/v3/kv/txn", &txn.body(), true, deadline).await
    }

    /// A new lease of `ttl` seconds. etcd may raise the TTL to its minimum.
    pub(crate) async fn grant(&self, ttl: i64, deadline: Instant) -> Result<Lease, GatewayError> {
        let body = json!({ "TTL": ttl.to_string() });
        let lease: LeaseGrantResponse =
            self.post("/v3/lease/grant", &body, false, deadline).await?;
        if !lease.error.is_empty() {
            return Err(GatewayError::Status {
                member: "?".into(),
                status: 200,
                code: 0,
                message: lease.error,
            });
        }
        Ok(Lease {
            id: lease.id.0,
            ttl: lease.ttl.0,
        })
    }

    /// Revokes a lease, which deletes its keys. A lease already gone is fine.
    pub(crate) async fn revoke(&self, id: i64, deadline: Instant) -> Result<(), GatewayError> {
        let body = json!({ "ID": id.to_string() });
        match self
            .post::<Value>("/v3/lease/revoke", &body, false, deadline)
            .await
        {
            Err(e) if e.is_lease_not_found() => Ok(()),
            other => other.map(drop),
        }
    }

    /// A lease's granted TTL and whole seconds left (rounded down), `None` once it is gone.
    pub(crate) async fn time_to_live(
        &self,
        id: i64,
        deadline: Instant,
    ) -> Result<Option<(i64, i64)>, GatewayError> {
        let body = json!({ "ID": id.to_string() });
        let answer: LeaseTimeToLiveResponse = self
            .post("/v3/lease/timetolive", &body, false, deadline)
            .await?;
        Ok((answer.ttl.0 >= 0).then_some((answer.granted_ttl.0, answer.ttl.0)))
    }
}

/// What a failed request to one member means, and whether the member may have read it. A
/// "permission denied" answer as [`GatewayError::PermissionDenied`], naming the user.
fn denied(auth: &Auth, e: GatewayError) -> GatewayError {
    match e {
        GatewayError::Status {
            member, message, ..
        } if message.contains("permission denied") => GatewayError::PermissionDenied {
            member,
            user: auth.credentials.user.clone(),
        },
        e => e,
    }
}

fn transport_failure(
    e: &hyper_util::client::legacy::Error,
    scheme: &str,
    client_cert: bool,
) -> Failed {
    #[cfg(feature = "tls-rustls")]
    if let Some((why, refused)) = crate::tls::explain(e, client_cert) {
        return Failed {
            // A member that refused the handshake read no request, even one already written.
            sent: !e.is_connect() && !refused,
            why,
        };
    }
    #[cfg(not(feature = "tls-rustls"))]
    let _ = client_cert;
    // The legacy client's error says little by itself; its cause says what broke.
    let mut why = match e.source() {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    };
    let closed = e
        .source()
        .and_then(|cause| cause.downcast_ref::<hyper::Error>())
        .is_some_and(hyper::Error::is_incomplete_message);
    if scheme == "http" && closed {
        // What a TLS member does with plain HTTP; a member that went down mid-request too.
        why.push_str(" (if the member speaks TLS, use an https:// URL)");
    } else if scheme == "https" && e.is_connect() && why.contains("handshake eof") {
        // What a plain-HTTP member does with a TLS handshake.
        "the TLS handshake failed: the member closed the connection (it seems to speak plain \
         HTTP: use etcd://, or enable TLS on the member)"
            .clone_into(&mut why);
    } else if scheme == "https" && handshake_reset(e) {
        // The same member, when its reset (it closed with the handshake's bytes unread) overtakes
        // its plain-HTTP answer; a proxy or a member going down can reset a handshake too.
        "the TLS handshake failed: the member reset the connection (a member that speaks plain \
         HTTP may do this: use etcd://, or enable TLS on the member)"
            .clone_into(&mut why);
    }
    Failed {
        // Only a failed connect proves that nothing was sent.
        sent: !e.is_connect(),
        why,
    }
}

/// Whether a connect failed because the connection was reset after TCP connected, that is in
/// the TLS handshake. The legacy client says "tcp connect error" for a failure of TCP itself. The
/// connector hands the handshake's I/O error over wrapped in another, which `source` skips, so
/// wrapped I/O errors are opened with `get_ref`.
fn handshake_reset(e: &hyper_util::client::legacy::Error) -> bool {
    fn reset(error: &(dyn StdError + 'static)) -> bool {
        error.downcast_ref::<std::io::Error>().is_some_and(|io| {
            io.kind() == std::io::ErrorKind::ConnectionReset
                || io.get_ref().is_some_and(|inner| reset(inner))
        })
    }
    if !e.is_connect() {
        return false;
    }
    let mut next = e.source();
    while let Some(cause) = next {
        if cause.to_string().contains("tcp connect error") {
            return false;
        }
        if reset(cause) {
            return true;
        }
        next = cause.source();
    }
    false
}

fn decode<T: DeserializeOwned>(member: &str, status: u16, bytes: &[u8]) -> Result<T, GatewayError> {
    if !(200..300).contains(&status) {
        let failure: Failure = serde_json::from_slice(bytes).unwrap_or_else(|_| Failure {
            message: String::from_utf8_lossy(bytes).trim().to_owned(),
            code: 0,
        });
        return Err(GatewayError::Status {
            member: member.to_owned(),
            status,
            code: failure.code,
            message: failure.message,
        });
    }
    serde_json::from_slice(bytes).map_err(|e| GatewayError::Decode {
        member: member.to_owned(),
        why: e.to_string(),
    })
}
