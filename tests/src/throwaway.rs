//! Private throwaway database servers for tests that stop, restart, kill or cut off a database.
//!
//! The shared servers (Postgres on 5432, MariaDB on 3306) are never touched: each
//! [`Throwaway`] runs its own server from the installed binaries (`initdb` + `postgres`, stopped
//! with `pg_ctl`; or `mariadb-install-db` + `mariadbd`), in a fresh temporary directory, on a free
//! loopback port, with trust authentication and an empty `test` database. Dropping it stops the
//! server and removes the directory.
//!
//! When the process runs as root (CI), the servers run as the `postgres` and `mysql` users (the
//! binaries refuse root): the directory is handed to that user, `initdb`, `pg_ctl` and
//! `mariadb-install-db` run through `runuser -u <user> --`, the postmaster through `setpriv`
//! (which execs, so the server stays our direct child and we reap it), and `mariadbd` drops to
//! `mysql` with `--user`. As any other user everything runs as that user.
//!
//! Setting up a server (init + first start) takes about a second on a quiet machine; each
//! operation waits with a deadline ([`START_DEADLINE`]) and fails with the server's log tail
//! when it is exceeded, so a broken installation cannot hang a test.
//!
//! ```no_run
//! use shedlock_tests::throwaway::{Flavor, Throwaway};
//!
//! # #[tokio::main] async fn main() -> std::io::Result<()> {
//! // Skips (returns None) without the binaries, or fails under SHEDLOCK_REQUIRE_DB=1.
//! let Some(pg) = Throwaway::postgres_or_skip("my_test").await else { return Ok(()) };
//! let url = pg.url(); // postgres://postgres@127.0.0.1:<port>/test
//! pg.restart_immediate().await?; // crash-stop (no checkpoint) and start again, same port
//! pg.stop().await?;
//! pg.start().await?;
//!
//! // Extra server options (kept across restarts), appended after the built-in ones:
//! let args = ["--default-time-zone=+05:00"];
//! let Some(my) = Throwaway::with_args_or_skip(Flavor::MariaDb, &args, "my_test").await else {
//!     return Ok(())
//! };
//! # let _ = (url, my); Ok(()) }
//! ```

use std::fmt;
use std::fs;
use std::io::{self, Read as _, Seek as _, SeekFrom};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The longest any start or stop may take before it fails (generous: CI machines are loaded).
pub const START_DEADLINE: Duration = Duration::from_mins(1);

/// The environment variable that turns missing binaries into a test failure instead of a skip.
pub const REQUIRE_ENV: &str = "SHEDLOCK_REQUIRE_DB";

/// Which database a [`Throwaway`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Flavor {
    /// PostgreSQL: `initdb`, `postgres`, `pg_ctl`, `pg_isready`, `createdb`.
    Postgres,
    /// MariaDB (MySQL protocol), through `mariadb-install-db` and `mariadbd`.
    MariaDb,
}

impl fmt::Display for Flavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Flavor::Postgres => "PostgreSQL",
            Flavor::MariaDb => "MariaDB",
        })
    }
}

/// A private database server, stopped and deleted on drop.
///
/// Dropping it stops the server (immediate mode, or `SIGKILL` if that fails) and removes its
/// directory; if a control operation is still running on the blocking pool, that happens when it
/// ends.
///
/// All methods that change the server's state are `async` (they run the blocking work on
/// tokio's blocking pool) and may be called concurrently with database traffic. The port stays
/// the same across stops and starts, so pools and URLs built from [`url`](Self::url) stay valid.
pub struct Throwaway {
    inner: Arc<Inner>,
}

impl fmt::Debug for Throwaway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Throwaway")
            .field("flavor", &self.inner.flavor)
            .field("port", &self.inner.port)
            .field("extra_args", &self.inner.extra_args)
            .field("dir", &self.inner.dir.path())
            .finish_non_exhaustive()
    }
}

struct Inner {
    flavor: Flavor,
    bins: Binaries,
    dir: tempfile::TempDir,
    port: u16,
    as_user: Option<&'static str>,
    /// Extra server arguments, appended after the built-in ones at every start.
    extra_args: Vec<String>,
    setup_time: Duration,
    /// The running server process (the postmaster or `mariadbd`), our own child.
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    child: Option<Child>,
    running: bool,
}

#[derive(Debug, Clone)]
enum Binaries {
    Postgres {
        bin_dir: PathBuf,
    },
    MariaDb {
        install_db: PathBuf,
        server: PathBuf,
        client: PathBuf,
    },
}

impl Throwaway {
    /// Starts a private PostgreSQL server with a `test` database.
    ///
    /// # Errors
    ///
    /// The binaries are missing, or `initdb`, the start or `createdb` failed or did not finish
    /// within [`START_DEADLINE`] (the message carries the server log's tail).
    pub async fn postgres() -> io::Result<Self> {
        Self::launch(Flavor::Postgres, &[]).await
    }

    /// Starts a private MariaDB server with a `test` database (user `root`, no password).
    ///
    /// # Errors
    ///
    /// As [`postgres`](Self::postgres).
    pub async fn mariadb() -> io::Result<Self> {
        Self::launch(Flavor::MariaDb, &[]).await
    }

    /// A private `flavor` server started with `args` appended to the server's command line,
    /// after the built-in options (so they may override them), at this and every later start:
    /// `mariadbd` options such as `--default-time-zone=+05:00`, or `postgres` ones such as
    /// `-c`, `TimeZone=Asia/Kolkata`.
    ///
    /// # Errors
    ///
    /// As [`postgres`](Self::postgres); a server that refuses an argument fails to start, with
    /// its log tail in the error.
    pub async fn with_args(flavor: Flavor, args: &[&str]) -> io::Result<Self> {
        Self::launch(flavor, args).await
    }

    /// [`postgres`](Self::postgres), or `None` with a skip notice on stderr when the binaries
    /// are not installed.
    ///
    /// # Panics
    ///
    /// When the binaries are missing and `SHEDLOCK_REQUIRE_DB=1`, or when they are installed
    /// but the server cannot be started (that is a broken setup, not a missing one).
    pub async fn postgres_or_skip(test: &str) -> Option<Self> {
        Self::launch_or_skip(Flavor::Postgres, &[], test).await
    }

    /// [`mariadb`](Self::mariadb), or `None` with a skip notice; see
    /// [`postgres_or_skip`](Self::postgres_or_skip).
    ///
    /// # Panics
    ///
    /// As [`postgres_or_skip`](Self::postgres_or_skip).
    pub async fn mariadb_or_skip(test: &str) -> Option<Self> {
        Self::launch_or_skip(Flavor::MariaDb, &[], test).await
    }

    /// [`with_args`](Self::with_args), or `None` with a skip notice; see
    /// [`postgres_or_skip`](Self::postgres_or_skip).
    ///
    /// # Panics
    ///
    /// As [`postgres_or_skip`](Self::postgres_or_skip).
    pub async fn with_args_or_skip(flavor: Flavor, args: &[&str], test: &str) -> Option<Self> {
        Self::launch_or_skip(flavor, args, test).await
    }

    /// The system user a private `flavor` server runs as: `postgres` or `mysql` when this
    /// process is root (the servers refuse root), else `None` (this process's user).
    #[must_use]
    pub fn server_user(flavor: Flavor) -> Option<&'static str> {
        running_as_root().then_some(match flavor {
            Flavor::Postgres => "postgres",
            Flavor::MariaDb => "mysql",
        })
    }

    /// Whether the binaries for `flavor` are installed (and, as root, its system user exists).
    #[must_use]
    pub fn available(flavor: Flavor) -> bool {
        Binaries::find(flavor).is_ok()
    }

    async fn launch_or_skip(flavor: Flavor, args: &[&str], test: &str) -> Option<Self> {
        if let Err(missing) = Binaries::find(flavor) {
            let required = std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1");
            assert!(
                !required,
                "{test}: {REQUIRE_ENV}=1 but a private {flavor} server cannot be started: {missing}"
            );
            eprintln!("SKIPPED {test}: no private {flavor} server available ({missing})");
            return None;
        }
        match Self::launch(flavor, args).await {
            Ok(server) => Some(server),
            Err(error) => panic!("{test}: could not start a private {flavor} server: {error}"),
        }
    }

    async fn launch(flavor: Flavor, args: &[&str]) -> io::Result<Self> {
        let bins = Binaries::find(flavor)?;
        let extra_args: Vec<String> = args.iter().map(|&a| a.to_owned()).collect();
        blocking(move || {
            let started = Instant::now();
            let as_user = Self::server_user(flavor);
            let dir = tempfile::Builder::new()
                .prefix(match flavor {
                    Flavor::Postgres => "shedlock-pg-",
                    Flavor::MariaDb => "shedlock-mariadb-",
                })
                .tempdir()?;
            if let Some(user) = as_user {
                run(Command::new("chown").arg(user).arg(dir.path()), "chown")?;
            }
            let port = free_port()?;
            let mut inner = Inner {
                flavor,
                bins,
                dir,
                port,
                as_user,
                extra_args,
                setup_time: Duration::ZERO,
                state: Mutex::new(State::default()),
            };
            inner.init()?;
            inner.start()?;
            inner.create_test_database()?;
            inner.setup_time = started.elapsed();
            tracing::info!(%flavor, port, setup = ?inner.setup_time, "private server up");
            Ok(Self {
                inner: Arc::new(inner),
            })
        })
        .await
    }

    /// The URL of the `test` database: `postgres://postgres@127.0.0.1:<port>/test` or
    /// `mysql://root@127.0.0.1:<port>/test`.
    #[must_use]
    pub fn url(&self) -> String {
        self.url_via(self.inner.port)
    }

    /// The same URL with another port, for example a [`Proxy`](crate::proxy::Proxy) in front.
    #[must_use]
    pub fn url_via(&self, port: u16) -> String {
        match self.inner.flavor {
            Flavor::Postgres => format!("postgres://postgres@127.0.0.1:{port}/test"),
            Flavor::MariaDb => format!("mysql://root@127.0.0.1:{port}/test"),
        }
    }

    /// The server's port on 127.0.0.1.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.inner.port
    }

    /// Which database this is.
    #[must_use]
    pub fn flavor(&self) -> Flavor {
        self.inner.flavor
    }

    /// The server's temporary directory (data, logs, socket), removed on drop.
    #[must_use]
    pub fn dir(&self) -> &std::path::Path {
        self.inner.dir.path()
    }

    /// How long the initial setup took (init, first start, database creation).
    #[must_use]
    pub fn setup_time(&self) -> Duration {
        self.inner.setup_time
    }

    /// Whether the server was left running by the last operation.
    #[must_use]
    pub fn is_running(&self) -> bool {
        self.inner.lock_state().running
    }

    /// Starts a stopped server again on the same port, and waits until it answers.
    ///
    /// # Errors
    ///
    /// The start failed or exceeded [`START_DEADLINE`].
    pub async fn start(&self) -> io::Result<()> {
        let inner = self.inner.clone();
        blocking(move || inner.start()).await
    }

    /// Stops the server cleanly (Postgres `-m fast`; MariaDB `SIGTERM`) and waits until it is gone.
    ///
    /// # Errors
    ///
    /// The stop failed or exceeded [`START_DEADLINE`].
    pub async fn stop(&self) -> io::Result<()> {
        let inner = self.inner.clone();
        blocking(move || inner.stop(StopMode::Fast)).await
    }

    /// Crash-stops the server without a clean shutdown (Postgres `pg_ctl -m immediate`: no
    /// checkpoint, crash recovery at the next start; MariaDB `SIGKILL`).
    ///
    /// # Errors
    ///
    /// As [`stop`](Self::stop).
    pub async fn stop_immediate(&self) -> io::Result<()> {
        let inner = self.inner.clone();
        blocking(move || inner.stop(StopMode::Immediate)).await
    }

    /// [`stop_immediate`](Self::stop_immediate) then [`start`](Self::start): every open
    /// connection is broken and the server recovers from its WAL / redo log.
    ///
    /// # Errors
    ///
    /// As [`stop`](Self::stop) and [`start`](Self::start).
    pub async fn restart_immediate(&self) -> io::Result<()> {
        let inner = self.inner.clone();
        blocking(move || {
            inner.stop(StopMode::Immediate)?;
            inner.start()
        })
        .await
    }

    /// Kills the server and all its processes with `SIGKILL` and waits until they are gone.
    ///
    /// # Errors
    ///
    /// The processes did not die within [`START_DEADLINE`].
    pub async fn kill(&self) -> io::Result<()> {
        let inner = self.inner.clone();
        blocking(move || inner.stop(StopMode::Kill)).await
    }

    /// The last `max` bytes of the server's log, for failure messages.
    #[must_use]
    pub fn log_tail(&self, max: usize) -> String {
        self.inner.log_tail(max)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopMode {
    Fast,
    Immediate,
    Kill,
}

impl Inner {
    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// A command for `program`, run as the server's user when we are root.
    fn command(&self, program: &Path) -> Command {
        match self.as_user {
            Some(user) => {
                let mut cmd = Command::new("runuser");
                cmd.arg("-u").arg(user).arg("--").arg(program);
                cmd
            }
            None => Command::new(program),
        }
    }

    fn init(&self) -> io::Result<()> {
        match &self.bins {
            Binaries::Postgres { bin_dir } => run(
                self.command(&bin_dir.join("initdb"))
                    .arg("-D")
                    .arg(self.data_dir())
                    .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C"])
                    .arg("--no-sync"),
                "initdb",
            ),
            Binaries::MariaDb { install_db, .. } => run(
                self.command(install_db)
                    .arg("--no-defaults")
                    .arg(format!("--datadir={}", self.data_dir().display()))
                    // Our own temporary directory: concurrent installs sharing /tmp trip over
                    // each other's temporary tables.
                    .arg(format!("--tmpdir={}", self.dir.path().display()))
                    .args([
                        "--auth-root-authentication-method=normal",
                        "--skip-test-db",
                        "--skip-name-resolve",
                    ]),
                "mariadb-install-db",
            ),
        }
    }

    /// The server process as our own child (so we reap it: a zombie postmaster would block the
    /// next start, and PID 1 in a container may never reap it). As root it drops to the server's
    /// user: `setpriv` for Postgres (it execs, no extra process), `--user` for `mariadbd`.
    fn spawn_server(&self) -> io::Result<Child> {
        let dir = self.dir.path();
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())?;
        let mut cmd = match &self.bins {
            Binaries::Postgres { bin_dir } => {
                let server = bin_dir.join("postgres");
                let mut cmd = match self.as_user {
                    Some(user) => {
                        let mut cmd = Command::new("setpriv");
                        cmd.arg(format!("--reuid={user}"))
                            .arg(format!("--regid={user}"))
                            .args(["--init-groups", "--"])
                            .arg(server);
                        cmd
                    }
                    None => Command::new(server),
                };
                cmd.arg("-D")
                    .arg(self.data_dir())
                    .arg("-p")
                    .arg(self.port.to_string())
                    .arg("-k")
                    .arg(dir);
                for setting in [
                    "listen_addresses=127.0.0.1",
                    // Safe for process crashes (the kernel keeps what was written), which is
                    // all these tests cause; `synchronous_commit` stays on, or an immediate
                    // stop could lose committed transactions (and lock rows with them).
                    "fsync=off",
                    "full_page_writes=off",
                    "max_connections=200",
                    "shared_buffers=16MB",
                ] {
                    cmd.arg("-c").arg(setting);
                }
                cmd
            }
            Binaries::MariaDb { server, .. } => {
                let mut cmd = Command::new(server);
                cmd.arg("--no-defaults");
                if let Some(user) = self.as_user {
                    cmd.arg(format!("--user={user}"));
                }
                cmd.arg(format!("--datadir={}", self.data_dir().display()))
                    .arg(format!("--port={}", self.port))
                    .arg("--bind-address=127.0.0.1")
                    .arg(format!("--socket={}", dir.join("mysqld.sock").display()))
                    .arg(format!("--pid-file={}", dir.join("mysqld.pid").display()))
                    .arg(format!("--tmpdir={}", dir.display()))
                    .arg(format!("--log-error={}", self.log_path().display()))
                    .args([
                        "--skip-name-resolve",
                        "--skip-log-bin",
                        "--innodb-buffer-pool-size=16M",
                        "--innodb-log-file-size=16M",
                        // Written to the kernel at each commit (so a killed server loses
                        // nothing), synced once a second.
                        "--innodb-flush-log-at-trx-commit=2",
                        "--innodb-doublewrite=0",
                        "--innodb-use-native-aio=0",
                        "--max-connections=200",
                        "--performance-schema=0",
                    ]);
                cmd
            }
        };
        cmd.args(&self.extra_args);
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
    }

    /// One readiness probe: does the server accept a query (or, for Postgres, connections)?
    fn answers(&self) -> io::Result<bool> {
        let mut probe = match &self.bins {
            Binaries::Postgres { bin_dir } => {
                let mut cmd = Command::new(bin_dir.join("pg_isready"));
                cmd.args(["-q", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres"])
                    .args(["-t", "2", "-p"])
                    .arg(self.port.to_string());
                cmd
            }
            Binaries::MariaDb { client, .. } => {
                let mut cmd = Command::new(client);
                cmd.args(["--no-defaults", "-h", "127.0.0.1", "-u", "root"])
                    .arg(format!("-P{}", self.port))
                    .args(["--connect-timeout=2", "-e", "SELECT 1"]);
                cmd
            }
        };
        Ok(probe
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?
            .success())
    }

    fn start(&self) -> io::Result<()> {
        let mut state = self.lock_state();
        if state.running {
            return Ok(());
        }
        state.child = Some(self.spawn_server()?);
        let deadline = Instant::now() + START_DEADLINE;
        while !self.answers()? {
            if let Some(child) = state.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                state.child = None;
                return Err(self.with_log(&io::Error::other(format!(
                    "the {} server exited during start ({status})",
                    self.flavor
                ))));
            }
            if Instant::now() > deadline {
                if let Some(mut child) = state.child.take() {
                    kill_tree(&mut child)?;
                }
                return Err(self.with_log(&io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the {} server did not answer within {START_DEADLINE:?}",
                        self.flavor
                    ),
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        state.running = true;
        Ok(())
    }

    fn create_test_database(&self) -> io::Result<()> {
        match &self.bins {
            Binaries::Postgres { bin_dir } => run(
                Command::new(bin_dir.join("createdb"))
                    .args(["-h", "127.0.0.1", "-U", "postgres", "-p"])
                    .arg(self.port.to_string())
                    .arg("test"),
                "createdb",
            ),
            Binaries::MariaDb { client, .. } => run(
                Command::new(client)
                    .args(["--no-defaults", "-h", "127.0.0.1", "-u", "root"])
                    .arg(format!("-P{}", self.port))
                    .args(["-e", "CREATE DATABASE test"]),
                "CREATE DATABASE test",
            ),
        }
    }

    fn stop(&self, mode: StopMode) -> io::Result<()> {
        let mut state = self.lock_state();
        state.running = false;
        let Some(mut child) = state.child.take() else {
            return Ok(());
        };
        if child.try_wait()?.is_some() {
            return Ok(()); // it died by itself
        }
        match (&self.bins, mode) {
            (_, StopMode::Kill) | (Binaries::MariaDb { .. }, StopMode::Immediate) => {
                return kill_tree(&mut child);
            }
            (Binaries::Postgres { bin_dir }, _) => run(
                self.command(&bin_dir.join("pg_ctl"))
                    .arg("-D")
                    .arg(self.data_dir())
                    .arg("-m")
                    .arg(if mode == StopMode::Fast {
                        "fast"
                    } else {
                        "immediate"
                    })
                    .args(["-w", "-t"])
                    .arg(START_DEADLINE.as_secs().to_string())
                    .arg("stop"),
                "pg_ctl stop",
            )?,
            (Binaries::MariaDb { .. }, StopMode::Fast) => run(
                Command::new("kill")
                    .arg("-TERM")
                    .arg(child.id().to_string()),
                "kill -TERM",
            )?,
        }
        wait_with_deadline(&mut child)
    }

    fn with_log(&self, error: &io::Error) -> io::Error {
        io::Error::new(
            error.kind(),
            format!(
                "{error}; {} log tail:\n{}",
                self.flavor,
                self.log_tail(2000)
            ),
        )
    }

    fn log_tail(&self, max: usize) -> String {
        let read = || -> io::Result<String> {
            let mut file = fs::File::open(self.log_path())?;
            let len = file.metadata()?.len();
            file.seek(SeekFrom::Start(len.saturating_sub(max as u64)))?;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        };
        read().unwrap_or_else(|e| format!("(no log: {e})"))
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Err(error) = self.stop(StopMode::Immediate) {
            tracing::warn!(%error, "could not stop the private server cleanly; killing it");
            let _ = self.stop(StopMode::Kill);
        }
    }
}

impl Binaries {
    fn find(flavor: Flavor) -> io::Result<Self> {
        let not_found = |what: &str| io::Error::new(io::ErrorKind::NotFound, what.to_owned());
        if running_as_root() {
            let user = match flavor {
                Flavor::Postgres => "postgres",
                Flavor::MariaDb => "mysql",
            };
            let known = Command::new("id")
                .arg("-u")
                .arg(user)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !known {
                return Err(not_found(&format!("running as root but no `{user}` user")));
            }
            for tool in ["runuser", "setpriv"] {
                if find_program(&[tool]).is_none() {
                    return Err(not_found(&format!("running as root but no `{tool}`")));
                }
            }
        }
        match flavor {
            Flavor::Postgres => {
                let bin_dir = postgres_bin_dir().ok_or_else(|| {
                    not_found("no initdb/pg_ctl (looked in /usr/lib/postgresql/*/bin and PATH)")
                })?;
                Ok(Binaries::Postgres { bin_dir })
            }
            Flavor::MariaDb => {
                let install_db = find_program(&["mariadb-install-db", "mysql_install_db"])
                    .ok_or_else(|| not_found("no mariadb-install-db"))?;
                let server = find_program(&["mariadbd", "mysqld"])
                    .ok_or_else(|| not_found("no mariadbd"))?;
                let client = find_program(&["mariadb", "mysql"])
                    .ok_or_else(|| not_found("no mariadb client"))?;
                Ok(Binaries::MariaDb {
                    install_db,
                    server,
                    client,
                })
            }
        }
    }
}

/// The newest `/usr/lib/postgresql/<v>/bin` with `initdb` and `pg_ctl`, else the directory of
/// `initdb` on the `PATH`.
fn postgres_bin_dir() -> Option<PathBuf> {
    let complete = |dir: &Path| {
        ["initdb", "pg_ctl", "postgres", "pg_isready", "createdb"]
            .iter()
            .all(|bin| dir.join(bin).is_file())
    };
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, dir)| complete(dir))
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.pop() {
        return Some(dir);
    }
    let initdb = find_program(&["initdb"])?;
    let dir = initdb.parent()?.to_path_buf();
    complete(&dir).then_some(dir)
}

/// The first of `names` found on the `PATH` or in the sbin directories.
pub(crate) fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"].map(PathBuf::from))
        .collect();
    names
        .iter()
        .flat_map(|name| dirs.iter().map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Our effective uid is the owner of `/proc/self` (no `libc` call needed).
pub(crate) fn running_as_root() -> bool {
    fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A port that was free a moment ago (bound to 0, then released). Never 5432 or 3306: those
/// are in use by the shared servers, so the kernel cannot hand them out.
pub(crate) fn free_port() -> io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// Runs a command to completion; a non-zero exit is an error with its output.
fn run(cmd: &mut Command, what: &str) -> io::Result<()> {
    let output = cmd.stdin(Stdio::null()).output()?;
    if output.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{what} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )))
    }
}

/// `SIGKILL`s `child` and every process below it, reaps `child`, and waits until the others are
/// gone too (a new postmaster refuses to start while old backends still hold its shared memory).
fn kill_tree(child: &mut Child) -> io::Result<()> {
    let below = descendants(child.id());
    if !below.is_empty() {
        let mut cmd = Command::new("kill");
        cmd.arg("-KILL");
        for pid in &below {
            cmd.arg(pid.to_string());
        }
        // Some may be gone already; that is fine.
        let _ = cmd.stderr(Stdio::null()).status()?;
    }
    child.kill()?;
    child.wait()?;
    let deadline = Instant::now() + START_DEADLINE;
    while below.iter().any(|pid| alive(*pid)) {
        if Instant::now() > deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "killed server processes did not exit",
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn wait_with_deadline(child: &mut Child) -> io::Result<()> {
    let deadline = Instant::now() + START_DEADLINE;
    loop {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        if Instant::now() > deadline {
            child.kill()?;
            child.wait()?;
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the server did not stop in time; killed it",
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` still exists (and is not a zombie).
fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat_fields(&stat).is_some_and(|(state, _)| state != 'Z'),
        Err(_) => false,
    }
}

/// All processes below `root`, from `/proc/<pid>/stat`'s parent field.
fn descendants(root: u32) -> Vec<u32> {
    let table: Vec<(u32, u32)> = fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let child: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = fs::read_to_string(entry.path().join("stat")).ok()?;
            let (_, parent) = stat_fields(&stat)?;
            Some((child, parent))
        })
        .collect();
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid) in &table {
            if ppid == parent && !found.contains(&pid) {
                found.push(pid);
                frontier.push(pid);
            }
        }
    }
    found
}

/// State and parent pid from a `/proc/<pid>/stat` line (the name in parentheses may hold spaces).
fn stat_fields(stat: &str) -> Option<(char, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| io::Error::other(format!("server control task failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat_with_odd_names() {
        assert_eq!(
            stat_fields("42 (postgres: a) b) S 7 42 42 0"),
            Some(('S', 7))
        );
        assert_eq!(stat_fields("garbage"), None);
    }

    #[test]
    fn free_port_is_not_a_shared_server_port() {
        let port = free_port().expect("a free port");
        assert_ne!(port, 5432);
        assert_ne!(port, 3306);
        assert_ne!(port, 0);
    }
}
