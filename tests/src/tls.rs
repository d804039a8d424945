//! Test certificates, made at run time (nothing committed that can expire): one private CA, a
//! server certificate for `localhost` and `127.0.0.1`, a client certificate, and the bad cases a
//! client must refuse with a clear error (a CA that signed nothing here, an expired server
//! certificate, a server certificate for another host).
//!
//! Files are PEM, in a temporary directory removed on drop. A private server that runs as another
//! user (Postgres and MariaDB refuse root) reads its own copies: [`Pki::server_files`] copies the
//! server's certificate, key and CA into a directory owned by that user, with the key readable by
//! it alone (Postgres refuses a key others can read).
//!
//! ```no_run
//! let pki = shedlock_tests::tls::Pki::new()?;
//! let server = pki.server_files(Some("postgres"))?;
//! let args = [
//!     "-c".to_owned(), "ssl=on".to_owned(),
//!     "-c".to_owned(), format!("ssl_cert_file={}", server.cert.display()),
//!     "-c".to_owned(), format!("ssl_key_file={}", server.key.display()),
//! ];
//! let url = format!("postgres://postgres@localhost:5432/test?sslmode=verify-full&sslrootcert={}", pki.ca.display());
//! # let _ = (args, url);
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

/// The common name of [`Pki::client_cert`]: the user a server that maps certificates to users
/// (etcd with `--client-cert-auth`) sees.
pub const CLIENT_NAME: &str = "shedlock-client";

/// A private CA and the certificates the TLS tests use, as PEM files in a temporary directory.
#[derive(Debug)]
pub struct Pki {
    dir: tempfile::TempDir,
    /// The CA that signed every certificate below (give it to clients as their trusted root).
    pub ca: PathBuf,
    /// A CA that signed nothing here: trusting it instead of [`ca`](Self::ca) must fail.
    pub other_ca: PathBuf,
    /// The server certificate, for `localhost`, `127.0.0.1` and `::1` (usable as a client
    /// certificate too, as etcd's gateway uses it).
    pub server_cert: PathBuf,
    /// Its key.
    pub server_key: PathBuf,
    /// A client certificate (common name [`CLIENT_NAME`]), for servers that require one.
    pub client_cert: PathBuf,
    /// Its key.
    pub client_key: PathBuf,
    /// A client certificate with no common name (its subject is empty; its one name,
    /// [`CLIENT_NAME`], is a DNS subject alternative name). etcd's JSON gateway refuses client
    /// certificates that have a common name once authentication is enabled with
    /// `--client-cert-auth` (it could not pass the name on as the user), so an etcd client that
    /// authenticates with a user and password presents one like this.
    pub nameless_client_cert: PathBuf,
    /// Its key.
    pub nameless_client_key: PathBuf,
    /// A server certificate signed by [`ca`](Self::ca) whose validity ended in 2001.
    pub expired_cert: PathBuf,
    /// Its key.
    pub expired_key: PathBuf,
    /// A server certificate signed by [`ca`](Self::ca) for `elsewhere.invalid` only.
    pub wrong_host_cert: PathBuf,
    /// Its key.
    pub wrong_host_key: PathBuf,
}

/// A server's copies of its certificate, key and trusted CA, readable by the user it runs as.
#[derive(Debug)]
pub struct ServerFiles {
    /// The server certificate.
    pub cert: PathBuf,
    /// Its key (mode 0600, owned by the server's user).
    pub key: PathBuf,
    /// The CA it trusts for client certificates.
    pub ca: PathBuf,
}

impl ServerFiles {
    /// `postgres` options that turn TLS on with these files (`-c ssl=on …`).
    #[must_use]
    pub fn postgres_args(&self) -> Vec<String> {
        [
            "ssl=on".to_owned(),
            format!("ssl_cert_file={}", self.cert.display()),
            format!("ssl_key_file={}", self.key.display()),
            format!("ssl_ca_file={}", self.ca.display()),
        ]
        .into_iter()
        .flat_map(|setting| ["-c".to_owned(), setting])
        .collect()
    }

    /// `mariadbd` options that turn TLS on with these files.
    #[must_use]
    pub fn mariadb_args(&self) -> Vec<String> {
        vec![
            format!("--ssl-cert={}", self.cert.display()),
            format!("--ssl-key={}", self.key.display()),
            format!("--ssl-ca={}", self.ca.display()),
        ]
    }

    /// `redis-server` options for TLS only on [`PrivateRedis::PORT`](crate::private_redis::PrivateRedis::PORT),
    /// asking for client certificates as `auth_clients` says (`no`, `optional`, `yes`).
    #[must_use]
    pub fn redis_args(&self, auth_clients: &str) -> Vec<String> {
        vec![
            "--port".to_owned(),
            "0".to_owned(),
            "--tls-port".to_owned(),
            crate::private_redis::PrivateRedis::PORT.to_owned(),
            "--tls-cert-file".to_owned(),
            self.cert.display().to_string(),
            "--tls-key-file".to_owned(),
            self.key.display().to_string(),
            "--tls-ca-cert-file".to_owned(),
            self.ca.display().to_string(),
            "--tls-auth-clients".to_owned(),
            auth_clients.to_owned(),
        ]
    }
}

#[allow(
    clippy::needless_pass_by_value,
    reason = "called as map_err(io_err), which passes the error by value"
)]
fn io_err(e: rcgen::Error) -> io::Error {
    io::Error::other(e)
}

fn leaf(
    names: &[&str],
    common_name: &str,
    usages: &[ExtendedKeyUsagePurpose],
) -> io::Result<CertificateParams> {
    let names: Vec<String> = names.iter().map(|&n| n.to_owned()).collect();
    let mut params = CertificateParams::new(names).map_err(io_err)?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.extended_key_usages = usages.to_vec();
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    Ok(params)
}

fn ca_params(name: &str) -> io::Result<CertificateParams> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(io_err)?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

fn write(path: &Path, pem: &str, mode: u32) -> io::Result<()> {
    fs::write(path, pem)?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

impl Pki {
    /// Makes a CA and every certificate, and writes them.
    ///
    /// # Errors
    ///
    /// When a key cannot be made or a file cannot be written.
    pub fn new() -> io::Result<Self> {
        let dir = tempfile::Builder::new().prefix("shedlock-pki-").tempdir()?;
        // Servers running as another user must reach their copies below it.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755))?;
        let at = |name: &str| dir.path().join(name);

        let ca = CertifiedIssuer::self_signed(
            ca_params("shedlock-rs test CA")?,
            KeyPair::generate().map_err(io_err)?,
        )
        .map_err(io_err)?;
        let other = CertifiedIssuer::self_signed(
            ca_params("some other CA")?,
            KeyPair::generate().map_err(io_err)?,
        )
        .map_err(io_err)?;
        write(&at("ca.pem"), &ca.pem(), 0o644)?;
        write(&at("other-ca.pem"), &other.pem(), 0o644)?;

        let sign = |params: CertificateParams,
                    issuer: &Issuer<'_, KeyPair>,
                    name: &str|
         -> io::Result<(PathBuf, PathBuf)> {
            let key = KeyPair::generate().map_err(io_err)?;
            let cert = params.signed_by(&key, issuer).map_err(io_err)?;
            let (cert_path, key_path) = (at(&format!("{name}.pem")), at(&format!("{name}.key")));
            write(&cert_path, &cert.pem(), 0o644)?;
            write(&key_path, &key.serialize_pem(), 0o600)?;
            Ok((cert_path, key_path))
        };
        // Server certificates are also client certificates: etcd's JSON gateway connects to its
        // own gRPC server with the server certificate, which `--client-cert-auth` then checks.
        let server = [
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let (server_cert, server_key) = sign(
            leaf(&["localhost", "127.0.0.1", "::1"], "localhost", &server)?,
            &ca,
            "server",
        )?;
        let (client_cert, client_key) = sign(
            leaf(
                &[CLIENT_NAME],
                CLIENT_NAME,
                &[ExtendedKeyUsagePurpose::ClientAuth],
            )?,
            &ca,
            "client",
        )?;
        let mut nameless = leaf(
            &[CLIENT_NAME],
            CLIENT_NAME,
            &[ExtendedKeyUsagePurpose::ClientAuth],
        )?;
        nameless.distinguished_name = DistinguishedName::new();
        let (nameless_client_cert, nameless_client_key) = sign(nameless, &ca, "nameless-client")?;
        let mut expired = leaf(&["localhost", "127.0.0.1"], "localhost", &server)?;
        expired.not_before = rcgen::date_time_ymd(2000, 1, 1);
        expired.not_after = rcgen::date_time_ymd(2001, 1, 1);
        let (expired_cert, expired_key) = sign(expired, &ca, "expired")?;
        let (wrong_host_cert, wrong_host_key) = sign(
            leaf(&["elsewhere.invalid"], "elsewhere.invalid", &server)?,
            &ca,
            "wrong-host",
        )?;
        Ok(Self {
            ca: at("ca.pem"),
            other_ca: at("other-ca.pem"),
            server_cert,
            server_key,
            client_cert,
            client_key,
            nameless_client_cert,
            nameless_client_key,
            expired_cert,
            expired_key,
            wrong_host_cert,
            wrong_host_key,
            dir,
        })
    }

    /// Copies a server certificate and key (by default [`server_cert`](Self::server_cert) and
    /// [`server_key`](Self::server_key)), with the CA, into a new directory owned by `user`
    /// (`None`: the current user), the key readable by that user alone.
    ///
    /// # Errors
    ///
    /// When a copy fails or `chown` cannot hand the files over.
    pub fn server_files(&self, user: Option<&str>) -> io::Result<ServerFiles> {
        self.server_files_from(&self.server_cert, &self.server_key, user)
    }

    /// [`server_files`](Self::server_files) for another certificate and key (the expired one, the
    /// one for another host).
    ///
    /// # Errors
    ///
    /// As [`server_files`](Self::server_files).
    pub fn server_files_from(
        &self,
        cert: &Path,
        key: &Path,
        user: Option<&str>,
    ) -> io::Result<ServerFiles> {
        let dir = tempfile::Builder::new()
            .prefix("server-")
            .tempdir_in(self.dir.path())?
            .keep();
        let files = ServerFiles {
            cert: dir.join("server.pem"),
            key: dir.join("server.key"),
            ca: dir.join("ca.pem"),
        };
        fs::copy(cert, &files.cert)?;
        fs::copy(key, &files.key)?;
        fs::copy(&self.ca, &files.ca)?;
        fs::set_permissions(&files.key, fs::Permissions::from_mode(0o600))?;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755))?;
        if let Some(user) = user {
            let status = Command::new("chown")
                .arg("-R")
                .arg(format!("{user}:"))
                .arg(&dir)
                .status()?;
            if !status.success() {
                return Err(io::Error::other(format!(
                    "chown -R {user}: {} failed: {status}",
                    dir.display()
                )));
            }
        }
        Ok(files)
    }

    /// The directory holding every file.
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}
