//! A private `redis-server` for tests that configure it as the shared one is not (TLS, ACL
//! users): a free loopback port, a temporary directory, nothing kept on disk, killed on drop.
//!
//! ```no_run
//! use shedlock_tests::private_redis::PrivateRedis;
//!
//! # #[tokio::main] async fn main() -> std::io::Result<()> {
//! let Some(redis) = PrivateRedis::start_or_skip(&["--user", "default", "on", "nopass", "~*", "+@all"], "my_test").await
//! else { return Ok(()) };
//! let url = format!("redis://127.0.0.1:{}", redis.port());
//! # let _ = url; Ok(()) }
//! ```

use std::io;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::throwaway::{REQUIRE_ENV, START_DEADLINE};

/// A `redis-server` of the test's own, killed when dropped (also on a panic).
#[derive(Debug)]
pub struct PrivateRedis {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl PrivateRedis {
    /// Starts `redis-server` on a free port with `args` after the built-in ones (no
    /// persistence). With TLS arguments, pass `--port 0 --tls-port` [`PrivateRedis::PORT`]: that
    /// placeholder is replaced by the chosen port, which is then the TLS one.
    ///
    /// # Errors
    ///
    /// When the server cannot be started or does not listen within [`START_DEADLINE`].
    pub async fn start(args: &[&str]) -> io::Result<Self> {
        let args: Vec<String> = args.iter().map(|&a| a.to_owned()).collect();
        tokio::task::spawn_blocking(move || Self::launch(&args))
            .await
            .map_err(io::Error::other)?
    }

    /// The placeholder for the port in [`start`](Self::start)'s arguments.
    pub const PORT: &'static str = "{port}";

    /// [`start`](Self::start), or `None` with a skip notice when `redis-server` is not
    /// installed.
    ///
    /// # Panics
    ///
    /// When it is missing and `SHEDLOCK_REQUIRE_DB=1`, or installed but fails to start.
    pub async fn start_or_skip(args: &[&str], test: &str) -> Option<Self> {
        let installed = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            assert!(
                !std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1"),
                "{test}: {REQUIRE_ENV}=1 but redis-server is not installed"
            );
            eprintln!("SKIPPED {test}: redis-server is not installed");
            return None;
        }
        match Self::start(args).await {
            Ok(server) => Some(server),
            Err(e) => panic!("{test}: could not start a private redis-server: {e}"),
        }
    }

    fn launch(args: &[String]) -> io::Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir = tempfile::Builder::new()
            .prefix("shedlock-redis-")
            .tempdir()?;
        let log = dir.path().join("redis.log");
        let has_port = args.iter().any(|a| a == Self::PORT);
        let mut cmd = Command::new("redis-server");
        if !has_port {
            cmd.args(["--port", &port.to_string()]);
        }
        cmd.args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .arg("--logfile")
            .arg(&log)
            .args(
                args.iter()
                    .map(|a| a.replace(Self::PORT, &port.to_string())),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd.spawn()?;
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(Self {
                    child,
                    port,
                    _dir: dir,
                });
            }
            if let Some(status) = child.try_wait()? {
                let tail = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(io::Error::other(format!(
                    "redis-server exited ({status}): {tail}"
                )));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return Err(io::Error::other("redis-server did not listen in time"));
            }
            std::thread::sleep(Duration::from_millis(20)); // polling a port, with a deadline
        }
    }

    /// The port it listens on (the TLS port when started with [`PrivateRedis::PORT`]).
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
