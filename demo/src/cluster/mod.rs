//! The demo's orchestrator: starts N replica processes of the current program, shows as they run
//! which replica ran each job's fire and which skipped it, notices replicas that die, and ends
//! with a [`Summary`] computed from the replicas' own run records and reports.
//!
//! The replicas are this very executable (`std::env::current_exe()`) started with the `run`
//! command, so the `cluster` example and the `replica` binary each re-execute themselves. Each
//! replica writes [`Event`]s as JSON lines on its standard output, read here; its logs go to
//! standard error, which is passed through. A replica's standard input is a pipe from here: to
//! stop the replicas gracefully, the orchestrator closes it (`--stop-on-eof`), and if the
//! orchestrator itself dies, the pipe closes and the replicas stop on their own.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{ChildStdin, Command};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, sleep_until};

use crate::database::{BoxError, Database, redact};
use crate::event::Event;
use crate::job::JobSpec;
use crate::replica::error_chain;
use crate::runlog::RunLog;

mod board;
mod summary;
#[cfg(test)]
mod tests;

pub use summary::Summary;

use board::Board;
use summary::summarise;

/// The environment variable the replicas read their database URL from (so a password never
/// shows in a process list).
pub const DATABASE_URL_ENV: &str = "DATABASE_URL";

/// The orchestrator's settings.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// The lock store: a SQL database, `redis://…` or `etcd://…`; `None` = a SQLite file in a
    /// new temporary directory. With Redis or etcd the run log is a SQLite file in a new
    /// temporary directory (the replicas must then share one host).
    pub database_url: Option<String>,
    /// How long the replicas run before they are asked to stop.
    pub duration: Duration,
    /// How many replica processes.
    pub replicas: usize,
    /// Prefix of every lock name.
    pub prefix: String,
    /// The run log's table.
    pub runs_table: String,
    /// The lock table (the store's default when `None`).
    pub lock_table: Option<String>,
    /// The jobs; empty = the demo's two.
    pub jobs: Vec<JobSpec>,
    /// Kill (SIGKILL) one replica after this long, preferably one that is running a job.
    pub kill_after: Option<Duration>,
    /// Stop when this process's standard input closes (for tests driving the demo).
    pub stop_on_eof: bool,
    /// Drop the run log and lock tables at the end (tests on shared servers).
    pub cleanup: bool,
    /// The replicas' per-call timeout (their default when `None`).
    pub call_timeout: Option<Duration>,
    /// The program to start as replicas (normally `std::env::current_exe()`).
    pub exe: PathBuf,
}

/// What the orchestrator hears from a replica's process.
enum Msg {
    Event(usize, Event),
    Exited(usize, std::io::Result<ExitStatus>),
}

struct Replica {
    label: String,
    pid: Option<u32>,
    stdin: Option<ChildStdin>,
    kill: Option<oneshot::Sender<()>>,
    ready: bool,
    exited: bool,
}

fn describe(job: &JobSpec) -> String {
    let mut text = format!(
        "{} every {:?} (at_most {:?}",
        job.name, job.every, job.at_most
    );
    if !job.at_least.is_zero() {
        let _ = write!(text, ", at_least {:?}", job.at_least);
    }
    if job.keep_alive {
        text.push_str(", keep_alive");
    }
    let _ = write!(text, "; runs take {:?}..{:?})", job.work.0, job.work.1);
    text
}

/// The demo's lock store and run log.
struct Stores {
    url: String,
    /// The run log's URL when it is not the store's (a Redis or etcd store).
    runlog_url: Option<String>,
    /// The run log's database (the store's, if SQL).
    db: Database,
    /// Whether the store is Redis or etcd.
    kv: bool,
    kind: String,
    /// Kept until the end: dropping it deletes the demo's SQLite files.
    _temp_dir: Vec<tempfile::TempDir>,
}

impl Stores {
    async fn open(opts: &ClusterOptions) -> Result<Self, BoxError> {
        let mut temp_dirs = Vec::new();
        let mut temp_db = |name: &str| -> Result<String, BoxError> {
            let dir = tempfile::Builder::new()
                .prefix("shedlock-demo-")
                .tempdir()?;
            let url = format!("sqlite://{}", dir.path().join(name).display());
            temp_dirs.push(dir);
            Ok(url)
        };
        let url = match &opts.database_url {
            Some(url) => url.clone(),
            None => temp_db("demo.db")?,
        };
        // Before any replica starts: each would fail with the same error.
        crate::store::ensure_built(&url)?;
        // A Redis or etcd store has no tables: the run log goes to a SQLite file (one host).
        let kv = crate::store::is_kv_url(&url);
        let runlog_url = if kv {
            Some(temp_db("runlog.db")?)
        } else {
            None
        };
        let db = Database::connect(runlog_url.as_deref().unwrap_or(&url)).await?;
        if !kv {
            db.create_lock_table(opts.lock_table.as_deref()).await?;
        }
        let kind = if crate::store::is_redis_url(&url) {
            "Redis".to_owned()
        } else if kv {
            "etcd".to_owned()
        } else {
            db.kind().to_string()
        };
        Ok(Self {
            url,
            runlog_url,
            db,
            kv,
            kind,
            _temp_dir: temp_dirs,
        })
    }
}

/// Runs the demo: sets up the tables, starts the replicas, prints the board to `out`, stops the
/// replicas after `duration` (or on Ctrl-C / SIGTERM, or when standard input closes with
/// `stop_on_eof`), and returns the summary (also printed, last).
///
/// # Errors
///
/// The database cannot be reached or set up, a replica cannot be started, the run log cannot be
/// read, or `out` cannot be written.
pub async fn run(opts: ClusterOptions, out: &mut dyn Write) -> Result<Summary, BoxError> {
    let Stores {
        url,
        runlog_url,
        db,
        kv,
        kind: store_kind,
        _temp_dir,
    } = Stores::open(&opts).await?;
    let log = RunLog::new(&db, &opts.runs_table)?;
    log.create_table().await?;
    let session = format!("{:016x}", crate::random::random_u64());
    let specs: Vec<JobSpec> = if opts.jobs.is_empty() {
        crate::demo::jobs()
    } else {
        opts.jobs.clone()
    };

    writeln!(
        out,
        "shedlock demo: {} replicas for {:?} on {} ({})",
        opts.replicas,
        opts.duration,
        store_kind,
        redact(&url)
    )?;
    if let Some(runlog) = &runlog_url {
        writeln!(out, "  run log: {runlog} (the replicas share this host)")?;
    }
    for job in &specs {
        writeln!(out, "  job {}", describe(job))?;
    }

    let (tx, rx) = mpsc::unbounded_channel();
    let mut replicas = Vec::with_capacity(opts.replicas);
    for index in 0..opts.replicas {
        replicas.push(spawn_replica(
            &opts,
            index,
            &session,
            &url,
            runlog_url.as_deref(),
            tx.clone(),
        )?);
    }
    drop(tx);
    writeln!(
        out,
        "started {} (kill one with `kill -9 <pid>` to see the others carry on)",
        replicas
            .iter()
            .map(|r| format!(
                "{} pid {}",
                r.label,
                r.pid.map_or("?".to_owned(), |p| p.to_string())
            ))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    out.flush()?;

    let mut supervisor = Supervisor {
        replicas,
        board: Board::new(&specs),
        tally: Tally::default(),
        stopping: false,
        out,
    };
    let max_work = specs.iter().map(|j| j.work.1).max().unwrap_or_default();
    supervisor
        .supervise(&opts, rx, max_work + Duration::from_secs(10))
        .await?;
    let Supervisor {
        replicas,
        tally,
        out,
        ..
    } = supervisor;
    if !replicas.iter().any(|r| r.ready) {
        return Err("no replica started (their errors are above)".into());
    }

    let records = log.records(&session).await?;
    let summary = summarise(&specs, &records, &tally, replicas.len(), out)?;
    if opts.cleanup {
        if let Err(error) = db.drop_table(&opts.runs_table).await {
            tracing::warn!(error = error_chain(&*error), "could not drop the run log");
        }
        if let Some(table) = &opts.lock_table
            && !kv
            && let Err(error) = db.drop_table(table).await
        {
            tracing::warn!(
                error = error_chain(&*error),
                "could not drop the lock table"
            );
        }
    }
    writeln!(out, "{summary}")?;
    out.flush()?;
    Ok(summary)
}

/// Starts replica number `index` (labelled `r<index+1>`) and a task that forwards its events and
/// its exit on `tx` (and kills it when asked through the replica's `kill`).
fn spawn_replica(
    opts: &ClusterOptions,
    index: usize,
    session: &str,
    url: &str,
    runlog_url: Option<&str>,
    tx: mpsc::UnboundedSender<Msg>,
) -> Result<Replica, BoxError> {
    let label = format!("r{}", index + 1);
    let mut command = Command::new(&opts.exe);
    command
        .arg("run")
        .args([
            "--replica",
            &label,
            "--session",
            session,
            "--prefix",
            &opts.prefix,
        ])
        .args(["--runs-table", &opts.runs_table])
        .arg("--stop-on-eof")
        .env(DATABASE_URL_ENV, url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    if let Some(table) = &opts.lock_table {
        command.args(["--lock-table", table]);
    }
    if let Some(runlog) = runlog_url {
        command.args(["--runlog-url", runlog]);
    }
    for job in &opts.jobs {
        command.args(["--job", &job.to_string()]);
    }
    if let Some(timeout) = opts.call_timeout {
        command.args(["--call-timeout", &format!("{}ms", timeout.as_millis())]);
    }
    let connect = crate::store::connect_options();
    command.args(connect.as_args());
    if let Some(password) = &connect.password {
        command.env(crate::store::PASSWORD_ENV, password);
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start replica {label} ({}): {e}", opts.exe.display()))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().ok_or("replica stdout is not piped")?;
    let (kill_tx, mut kill_rx) = oneshot::channel::<()>();
    let pid = child.id();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        let (mut eof, mut kill_seen, mut kill_now) = (false, false, false);
        let status = loop {
            if kill_now {
                kill_now = false;
                if let Err(error) = child.start_kill() {
                    tracing::warn!(%error, "could not kill a replica");
                }
            }
            tokio::select! {
                line = lines.next_line(), if !eof => match line {
                    Ok(Some(line)) => {
                        if let Some(event) = Event::parse(&line) {
                            let _ = tx.send(Msg::Event(index, event));
                        }
                    }
                    Ok(None) | Err(_) => eof = true,
                },
                killed = &mut kill_rx, if !kill_seen => {
                    kill_seen = true;
                    kill_now = killed.is_ok();
                }
                status = child.wait(), if eof => break status,
            }
        };
        let _ = tx.send(Msg::Exited(index, status));
    });
    Ok(Replica {
        label,
        pid,
        stdin,
        kill: Some(kill_tx),
        ready: false,
        exited: false,
    })
}

/// What the orchestrator counts from the replicas' events.
#[derive(Debug, Default)]
struct Tally {
    /// The fires some replica counted missed: (job, tick).
    missed: BTreeSet<(String, u64)>,
    skipped: u64,
    errors: u64,
    lost: u64,
    died: u64,
}

/// The orchestrator's event loop and its state.
struct Supervisor<'o> {
    replicas: Vec<Replica>,
    board: Board,
    tally: Tally,
    stopping: bool,
    out: &'o mut dyn Write,
}

impl Supervisor<'_> {
    /// The replicas that are up (ready and not exited).
    fn live(&self) -> BTreeSet<String> {
        self.replicas
            .iter()
            .filter(|r| r.ready && !r.exited)
            .map(|r| r.label.clone())
            .collect()
    }

    /// Prints the tick lines that are due.
    fn print_board(&mut self) -> std::io::Result<()> {
        let live = self.live();
        for line in self.board.flush(&live, false) {
            writeln!(self.out, "{line}")?;
        }
        Ok(())
    }

    /// Runs until every replica has exited: stops them after `opts.duration`, on a signal or at
    /// the end of standard input, kills those that do not stop within `grace`, and kills one at
    /// `opts.kill_after`.
    async fn supervise(
        &mut self,
        opts: &ClusterOptions,
        mut rx: mpsc::UnboundedReceiver<Msg>,
        grace: Duration,
    ) -> Result<(), BoxError> {
        // `eof_tx` lives until the end of this function, so `changed()` resolves only on a send.
        let (eof_tx, mut eof_rx) = watch::channel(false);
        if opts.stop_on_eof {
            crate::cli::on_stdin_eof(eof_tx.clone());
        }
        let mut signals = Signals::new()?;
        let started = Instant::now();
        let mut stop_at = started + opts.duration;
        let mut kill_at = opts.kill_after.map(|after| started + after);
        let mut refresh = tokio::time::interval(Duration::from_millis(250));
        while self.replicas.iter().any(|r| !r.exited) {
            let mut stop_now = false;
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(Msg::Event(index, event)) => self.on_event(index, &event)?,
                    Some(Msg::Exited(index, status)) => self.on_exit(index, &status)?,
                    None => break,
                },
                _ = refresh.tick() => {
                    self.print_board()?;
                    if let Some(at) = kill_at && Instant::now() >= at {
                        kill_at = None;
                        kill_one(&mut self.replicas, &self.board, self.out)?;
                    }
                }
                () = sleep_until(stop_at), if !self.stopping => stop_now = true,
                () = sleep_until(stop_at + grace), if self.stopping => {
                    for replica in self.replicas.iter_mut().filter(|r| !r.exited) {
                        writeln!(self.out, "{} did not stop within {grace:?}; killing it", replica.label)?;
                        if let Some(kill) = replica.kill.take() {
                            let _ = kill.send(());
                        }
                    }
                    stop_at += Duration::from_hours(1);
                }
                _ = eof_rx.changed(), if !self.stopping => stop_now = true,
                () = signals.recv(), if !self.stopping => stop_now = true,
            }
            if stop_now {
                self.stopping = true;
                stop_at = Instant::now();
                writeln!(
                    self.out,
                    "stopping the replicas (they finish their runs in flight)"
                )?;
                for replica in &mut self.replicas {
                    replica.stdin = None; // --stop-on-eof: the replica stops
                }
            }
            self.out.flush()?;
        }
        for line in self.board.flush(&BTreeSet::new(), true) {
            writeln!(self.out, "{line}")?;
        }
        Ok(())
    }

    fn on_event(&mut self, index: usize, event: &Event) -> std::io::Result<()> {
        match event {
            Event::Ready { pid, owner, .. } => {
                self.replicas[index].ready = true;
                let label = &self.replicas[index].label;
                writeln!(self.out, "{label} ready: pid {pid}, owner {owner}")?;
            }
            Event::Skipped { .. } => self.tally.skipped += 1,
            Event::Missed { job, tick, .. } => {
                self.tally.missed.insert((job.clone(), *tick));
            }
            Event::Error { .. } => self.tally.errors += 1,
            Event::Done {
                lock_lost: true,
                replica,
                job,
                ..
            } => {
                self.tally.lost += 1;
                writeln!(self.out, "{replica} lost its lock of {job} during a run")?;
            }
            Event::Stopped { .. } => writeln!(self.out, "{event}")?,
            _ => {}
        }
        if let Some(line) = self.board.record(event) {
            writeln!(self.out, "{line}")?;
        }
        self.print_board()
    }

    fn on_exit(
        &mut self,
        index: usize,
        status: &std::io::Result<ExitStatus>,
    ) -> std::io::Result<()> {
        let how = match status {
            Ok(status) => describe_exit(*status),
            Err(e) => format!("could not be waited for: {e}"),
        };
        let clean = status.as_ref().is_ok_and(ExitStatus::success);
        let replica = &mut self.replicas[index];
        replica.exited = true;
        replica.stdin = None;
        let (label, ready) = (replica.label.clone(), replica.ready);
        if !ready {
            self.tally.died += 1;
            writeln!(
                self.out,
                "{label} could not start ({how}); its error is above"
            )?;
        } else if !self.stopping {
            self.tally.died += 1;
            let others = self.live();
            let others = if others.is_empty() {
                "no replica left".to_owned()
            } else {
                format!(
                    "{} carry on",
                    others.into_iter().collect::<Vec<_>>().join(" ")
                )
            };
            writeln!(self.out, "{label} died ({how}); {others}")?;
        } else if !clean {
            writeln!(self.out, "{label} exited ({how})")?;
        }
        self.print_board()
    }
}

/// Kills one live replica, preferring one that is running a job right now.
fn kill_one(replicas: &mut [Replica], board: &Board, out: &mut dyn Write) -> std::io::Result<()> {
    let running: BTreeMap<&str, &str> = board
        .running
        .iter()
        .map(|(job, (replica, _))| (replica.as_str(), job.as_str()))
        .collect();
    let victim = replicas
        .iter()
        .position(|r| !r.exited && running.contains_key(r.label.as_str()))
        .or_else(|| replicas.iter().position(|r| !r.exited));
    let Some(victim) = victim else {
        return Ok(());
    };
    let replica = &mut replicas[victim];
    match running.get(replica.label.as_str()) {
        Some(job) => writeln!(
            out,
            "killing {} (SIGKILL) in the middle of a {job} run",
            replica.label
        )?,
        None => writeln!(out, "killing {} (SIGKILL)", replica.label)?,
    }
    if let Some(kill) = replica.kill.take() {
        let _ = kill.send(());
    }
    Ok(())
}

fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(9)) => "killed by SIGKILL".to_owned(),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

/// Ctrl-C and SIGTERM.
pub(crate) struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    pub(crate) fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    /// Resolves at the next SIGINT or SIGTERM.
    pub(crate) async fn recv(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}
