//! A private etcd for tests: one member on free loopback ports in a temporary directory, killed
//! when the value is dropped (also when the test panics). Optionally TLS on its client URL
//! (a server certificate; with a CA, client certificates required: `--client-cert-auth`) and
//! authentication (`root` and a user whose role may read and write the keys under
//! [`PREFIX`]).
//!
//! Every member also listens for plain HTTP on a second loopback port: setup (users, roles,
//! `auth/enable`) and readiness checks go there without TLS, and tests use it as "a member that
//! speaks plain HTTP".
//!
//! ```no_run
//! use shedlock_tests::private_etcd::{Auth, EtcdOptions, PrivateEtcd, etcd_binary};
//! use shedlock_tests::tls::Pki;
//!
//! let Some(bin) = etcd_binary() else { return Ok(()) };
//! let pki = Pki::new()?;
//! let etcd = PrivateEtcd::start(&bin, &EtcdOptions::tls(&pki).client_cert_auth(&pki).auth(Auth::default()));
//! let url = etcd.url(); // https://127.0.0.1:port
//! # let _ = url;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::tls::Pki;

/// The key prefix the authenticated user may read and write: the root of
/// `shedlock_etcd::testing::unique_prefix()`.
pub const PREFIX: &str = "shedlock-test/";
/// [`PREFIX`] in base64, as etcd's JSON gateway takes keys.
const PREFIX_B64: &str = "c2hlZGxvY2stdGVzdC8=";
/// The end of [`PREFIX`]'s range (its last byte plus one), in base64.
const PREFIX_END_B64: &str = "c2hlZGxvY2stdGVzdDA=";

pub use shedlock_etcd::testing::etcd_binary;

/// The users [`PrivateEtcd::start`] creates before it enables authentication.
#[derive(Debug, Clone)]
pub struct Auth {
    /// `root`'s password (root may do anything).
    pub root_password: String,
    /// The user whose role may read and write the keys under [`PREFIX`].
    pub user: String,
    /// Its password.
    pub password: String,
    /// The simple tokens' TTL in seconds (`--auth-token-ttl`; etcd's default is 300).
    pub token_ttl: Option<u32>,
}

impl Default for Auth {
    fn default() -> Self {
        Self {
            root_password: "root-pa55".into(),
            user: "locker".into(),
            password: "locker-pa55%@:".into(),
            token_ttl: None,
        }
    }
}

/// How to start a [`PrivateEtcd`].
#[derive(Debug, Clone, Default)]
pub struct EtcdOptions {
    cert: Option<(PathBuf, PathBuf)>,
    client_ca: Option<PathBuf>,
    auth: Option<Auth>,
}

impl EtcdOptions {
    /// Plain HTTP, no authentication.
    #[must_use]
    pub fn plain() -> Self {
        Self::default()
    }

    /// TLS with the PKI's server certificate (for `localhost`, `127.0.0.1`, `::1`).
    #[must_use]
    pub fn tls(pki: &Pki) -> Self {
        Self::tls_with(&pki.server_cert, &pki.server_key)
    }

    /// TLS with another server certificate and key (the expired one, the wrong host's).
    #[must_use]
    pub fn tls_with(cert: &Path, key: &Path) -> Self {
        Self {
            cert: Some((cert.to_owned(), key.to_owned())),
            ..Self::default()
        }
    }

    /// Client certificates required, signed by the PKI's CA (`--client-cert-auth`).
    #[must_use]
    pub fn client_cert_auth(mut self, pki: &Pki) -> Self {
        self.client_ca = Some(pki.ca.clone());
        self
    }

    /// Authentication enabled, with these users.
    #[must_use]
    pub fn auth(mut self, auth: Auth) -> Self {
        self.auth = Some(auth);
        self
    }
}

/// A private single-member etcd.
#[derive(Debug)]
pub struct PrivateEtcd {
    /// The client port (`https` with TLS).
    pub port: u16,
    /// The plain-HTTP client port (setup, and "a plain member").
    pub plain_port: u16,
    tls: bool,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl PrivateEtcd {
    /// Starts the member, waits (up to 30 s) until it has elected itself, then creates the users
    /// and enables authentication when asked.
    ///
    /// # Panics
    ///
    /// When etcd does not start (with the end of its log) or a setup call fails.
    #[must_use]
    pub fn start(bin: &str, options: &EtcdOptions) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (port, plain_port, peer) = (free_port(), free_port(), free_port());
        let tls = options.cert.is_some();
        let scheme = if tls { "https" } else { "http" };
        let log = std::fs::File::create(dir.path().join("etcd.log")).expect("a log file");
        let mut command = Command::new(bin);
        command
            .args(["--name", "m0"])
            .arg("--data-dir")
            .arg(dir.path().join("m0"))
            .args([
                "--listen-client-urls",
                &format!("{scheme}://127.0.0.1:{port},http://127.0.0.1:{plain_port}"),
            ])
            .args([
                "--advertise-client-urls",
                &format!("{scheme}://127.0.0.1:{port}"),
            ])
            .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{peer}"),
            ])
            .args(["--initial-cluster", &format!("m0=http://127.0.0.1:{peer}")])
            .args(["--initial-cluster-token", &format!("shedlock-tls-{port}")]);
        if let Some((cert, key)) = &options.cert {
            command
                .arg("--cert-file")
                .arg(cert)
                .arg("--key-file")
                .arg(key);
        }
        if let Some(ca) = &options.client_ca {
            command
                .arg("--trusted-ca-file")
                .arg(ca)
                .arg("--client-cert-auth");
        }
        if let Some(ttl) = options.auth.as_ref().and_then(|a| a.token_ttl) {
            command.args(["--auth-token-ttl", &ttl.to_string()]);
        }
        let child = command
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("etcd starts");
        let etcd = Self {
            port,
            plain_port,
            tls,
            child: Some(child),
            dir,
        };
        etcd.wait_ready();
        if let Some(auth) = &options.auth {
            etcd.enable_auth(auth);
        }
        etcd
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = self
                .call("/v3/maintenance/status", &json!({}), None)
                .ok()
                .and_then(|s| s["leader"].as_str().map(|l| l != "0"))
                .unwrap_or(false);
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the private etcd did not start; its log ends:\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last lines of the member's log.
    #[must_use]
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    fn setup(&self, path: &str, body: &Value) {
        if let Err(e) = self.call(path, body, None) {
            panic!("etcd setup {path} failed: {e}");
        }
    }

    fn enable_auth(&self, auth: &Auth) {
        self.setup(
            "/v3/auth/user/add",
            &json!({ "name": "root", "password": auth.root_password }),
        );
        self.setup(
            "/v3/auth/user/grant",
            &json!({ "user": "root", "role": "root" }),
        );
        self.setup("/v3/auth/role/add", &json!({ "name": "locks" }));
        self.setup(
            "/v3/auth/role/grant",
            &json!({
                "name": "locks",
                "perm": { "permType": "READWRITE", "key": PREFIX_B64, "range_end": PREFIX_END_B64 },
            }),
        );
        self.setup(
            "/v3/auth/user/add",
            &json!({ "name": auth.user, "password": auth.password }),
        );
        self.setup(
            "/v3/auth/user/grant",
            &json!({ "user": auth.user, "role": "locks" }),
        );
        self.setup("/v3/auth/enable", &json!({}));
    }

    /// The client URL: `https://127.0.0.1:port` with TLS, else `etcd://127.0.0.1:port`.
    #[must_use]
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "etcd" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The plain-HTTP URL, `etcd://127.0.0.1:plain_port`.
    #[must_use]
    pub fn plain_url(&self) -> String {
        format!("etcd://127.0.0.1:{}", self.plain_port)
    }

    /// A token for `user` (`/v3/auth/authenticate` over the plain port).
    ///
    /// # Errors
    ///
    /// etcd's answer when it refuses.
    pub fn authenticate(&self, user: &str, password: &str) -> Result<String, String> {
        let answer = self.call(
            "/v3/auth/authenticate",
            &json!({ "name": user, "password": password }),
            None,
        )?;
        answer["token"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("no token in {answer}"))
    }

    /// One JSON call over the plain port, with `token` as its `Authorization`.
    ///
    /// # Errors
    ///
    /// A transport failure, or the status line and body of an answer other than 200.
    pub fn call(&self, path: &str, body: &Value, token: Option<&str>) -> Result<Value, String> {
        post(self.plain_port, path, &body.to_string(), token)
    }
}

impl Drop for PrivateEtcd {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One blocking JSON POST (HTTP/1.0, connection closed after it).
fn post(port: u16, path: &str, body: &str, token: Option<&str>) -> Result<Value, String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let authorization = token.map_or_else(String::new, |t| format!("Authorization: {t}\r\n"));
    write!(
        stream,
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         {authorization}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|e| e.to_string())?;
    let (head, json) = answer.split_once("\r\n\r\n").ok_or("no HTTP body")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(format!(
            "{}: {}",
            head.lines().next().unwrap_or_default(),
            json.trim()
        ));
    }
    serde_json::from_str(json).map_err(|e| e.to_string())
}
