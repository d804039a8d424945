//! A private `PgBouncer` in transaction mode, in front of the shared Postgres, for tests of
//! `shedlock-sqlx`'s `transaction_pooler` setting.
//!
//! [`PgBouncer::start_or_skip`] writes a configuration into a fresh temporary directory (a free
//! loopback port, `auth_type = trust` with an `auth_file` naming the upstream URL's user,
//! `pool_mode = transaction`, [`POOL_SIZE`] server connections per database and user handed out
//! in turn (`server_round_robin`), so that consecutive transactions of one client really meet
//! different server connections, and
//! `ignore_startup_parameters = extra_float_digits,options`, which sqlx sends) and starts
//! `pgbouncer` as a child process, killed on drop. As root it runs with `-u postgres` (it refuses
//! to run as root). Without the binary the test is skipped with a notice on stderr, or fails
//! under `SHEDLOCK_REQUIRE_DB=1`.
//!
//! ```no_run
//! use shedlock_tests::pgbouncer::PgBouncer;
//!
//! # #[tokio::main] async fn main() {
//! let upstream = "postgres://postgres@127.0.0.1:5432/test";
//! let Some(bouncer) = PgBouncer::start_or_skip(upstream, "my_test").await else { return };
//! let url = bouncer.url(); // postgres://postgres@127.0.0.1:<port>/test, through pgbouncer
//! # let _ = url; }
//! ```

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::net::{Ipv4Addr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::throwaway::{REQUIRE_ENV, START_DEADLINE, find_program, free_port, running_as_root};

/// Server connections per database and user: more than one, so that a client's transactions
/// alternate between server connections.
pub const POOL_SIZE: u32 = 4;

/// A running private `PgBouncer` (transaction mode), killed on drop.
#[derive(Debug)]
pub struct PgBouncer {
    child: Child,
    port: u16,
    user: String,
    database: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// The parts of a `postgres://user[:password]@host[:port]/database[?…]` URL pgbouncer needs.
fn upstream_parts(url: &str) -> io::Result<(String, String, u16, String)> {
    let invalid = || io::Error::new(io::ErrorKind::InvalidInput, "not a postgres:// URL");
    let rest = url.split_once("://").ok_or_else(invalid)?.1;
    let (authority, path) = rest.split_once('/').ok_or_else(invalid)?;
    let (user, host_port) = authority.rsplit_once('@').ok_or_else(invalid)?;
    let user = user.split(':').next().unwrap_or(user);
    let (host, port) = match host_port.rsplit_once(':') {
        Some((host, port)) => (host, port.parse().map_err(|_| invalid())?),
        None => (host_port, 5432),
    };
    let database = path.split('?').next().unwrap_or(path);
    if user.is_empty() || database.is_empty() {
        return Err(invalid());
    }
    Ok((user.to_owned(), host.to_owned(), port, database.to_owned()))
}

impl PgBouncer {
    /// Starts a `PgBouncer` in transaction mode in front of `upstream` (a Postgres URL whose
    /// user the server trusts), or `None` with a skip notice when the binary is not installed.
    ///
    /// # Panics
    ///
    /// When the binary is missing and `SHEDLOCK_REQUIRE_DB=1`, or when it is installed but does
    /// not start (a broken setup, not a missing one).
    pub async fn start_or_skip(upstream: &str, test: &str) -> Option<Self> {
        let Some(binary) = find_program(&["pgbouncer"]) else {
            let required = std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1");
            assert!(
                !required,
                "{test}: {REQUIRE_ENV}=1 but pgbouncer is not installed (apt-get install pgbouncer)"
            );
            eprintln!("SKIPPED {test}: pgbouncer is not installed");
            return None;
        };
        let upstream = upstream.to_owned();
        let bouncer =
            match tokio::task::spawn_blocking(move || Self::start(&binary, &upstream)).await {
                Ok(Ok(bouncer)) => bouncer,
                Ok(Err(error)) => panic!("{test}: could not start pgbouncer: {error}"),
                Err(error) => panic!("{test}: the pgbouncer start task failed: {error}"),
            };
        if let Err(error) = bouncer.fill_pool().await {
            panic!(
                "{test}: could not open pgbouncer's server connections: {error}; log: {}",
                bouncer.log_text()
            );
        }
        Some(bouncer)
    }

    /// Opens all [`POOL_SIZE`] server connections: as many clients each hold a transaction at
    /// once, then end it. From then on pgbouncer hands them out in turn, so that even one
    /// client's consecutive transactions meet different server connections.
    async fn fill_pool(&self) -> Result<(), sqlx::Error> {
        use sqlx::Connection as _;
        let mut clients = Vec::new();
        for _ in 0..POOL_SIZE {
            let mut client = sqlx::PgConnection::connect(&self.url()).await?;
            // Simple queries (no prepared statement), each holding its server connection.
            sqlx::raw_sql("BEGIN; SELECT 1")
                .execute(&mut client)
                .await?;
            clients.push(client);
        }
        for mut client in clients {
            sqlx::raw_sql("COMMIT").execute(&mut client).await?;
            client.close().await?;
        }
        Ok(())
    }

    fn start(binary: &std::path::Path, upstream: &str) -> io::Result<Self> {
        let (user, host, upstream_port, database) = upstream_parts(upstream)?;
        let dir = tempfile::Builder::new()
            .prefix("shedlock-pgbouncer-")
            .tempdir()?;
        let port = free_port()?;
        let log = dir.path().join("pgbouncer.log");
        let auth_file = dir.path().join("userlist.txt");
        fs::write(&auth_file, format!("\"{user}\" \"\"\n"))?;
        let mut config = String::new();
        // Writing to a `String` cannot fail.
        let _ = write!(
            config,
            "[databases]\n\
             * = host={host} port={upstream_port}\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = trust\n\
             auth_file = {auth}\n\
             pool_mode = transaction\n\
             default_pool_size = {POOL_SIZE}\n\
             server_round_robin = 1\n\
             max_client_conn = 200\n\
             ignore_startup_parameters = extra_float_digits,options\n\
             logfile = {log}\n\
             log_connections = 0\n\
             log_disconnections = 0\n",
            auth = auth_file.display(),
            log = log.display(),
        );
        let ini = dir.path().join("pgbouncer.ini");
        fs::write(&ini, config)?;
        let mut cmd = Command::new(binary);
        if running_as_root() {
            // pgbouncer refuses root; `-u` makes it switch user itself (it stays our child).
            let status = Command::new("chown")
                .arg("-R")
                .arg("postgres")
                .arg(dir.path())
                .status()?;
            if !status.success() {
                return Err(io::Error::other(format!(
                    "chown of the pgbouncer directory to postgres failed ({status})"
                )));
            }
            cmd.arg("-u").arg("postgres");
        }
        let child = cmd
            .arg(&ini)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut bouncer = Self {
            child,
            port,
            user,
            database,
            log,
            _dir: dir,
        };
        bouncer.wait_listening()?;
        Ok(bouncer)
    }

    /// Waits until pgbouncer accepts connections on its port, or has exited, or
    /// [`START_DEADLINE`] passed (the last two with its log).
    fn wait_listening(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).is_ok() {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "pgbouncer exited ({status}): {}",
                    self.log_text()
                )));
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("pgbouncer did not listen in time: {}", self.log_text()),
                ));
            }
            // Polling a port with a deadline: pgbouncer has no readiness signal of its own.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// pgbouncer's log so far.
    #[must_use]
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_else(|e| format!("(no log: {e})"))
    }

    /// The URL of the upstream database through pgbouncer.
    #[must_use]
    pub fn url(&self) -> String {
        format!(
            "postgres://{}@127.0.0.1:{}/{}",
            self.user, self.port, self.database
        )
    }

    /// The loopback port pgbouncer listens on.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_upstream_url() {
        assert_eq!(
            upstream_parts("postgres://postgres@127.0.0.1:5432/test").unwrap(),
            ("postgres".into(), "127.0.0.1".into(), 5432, "test".into())
        );
        assert_eq!(
            upstream_parts("postgresql://app:pw@db/app?sslmode=disable").unwrap(),
            ("app".into(), "db".into(), 5432, "app".into())
        );
        assert!(upstream_parts("postgres://db/app").is_err());
    }
}
