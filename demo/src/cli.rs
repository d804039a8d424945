//! The command line shared by the `replica` binary and the `cluster` example: [`main`].
//!
//! ```text
//! replica [COMMAND] [OPTIONS]
//!
//! COMMANDS
//!   cluster   start --replicas processes of this program running the jobs, show who ran and who
//!             skipped each fire, and end with a `summary:` line (the default command)
//!   run       be one replica: run the jobs until stopped, reporting JSON events on stdout
//!   schema    create the lock table and the run log, then exit (before starting replicas)
//!   check     read a session's run log: runs, interrupted runs and overlaps (exit 1 if any)
//!   leader    be one leader-latch candidate, reporting elected / stepped down / following
//! ```
//!
//! This module is the binaries' `main`: the only code of the crate that writes to standard
//! output (the demo's board, or a replica's events). Logs go to standard error through
//! `tracing` (`RUST_LOG`, default `warn`).

use std::io::{BufRead as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use shedlock_core::parse_duration;
use tokio::sync::{mpsc, watch};

use crate::cluster::{self, ClusterOptions, DATABASE_URL_ENV, Signals};
use crate::database::{BoxError, Database};
use crate::demo;
use crate::event::Event;
use crate::job::JobSpec;
use crate::leader::{self, LeaderOptions};
use crate::replica::{self, ReplicaOptions, error_chain};
use crate::runlog::{DEFAULT_RUNS_TABLE, RunLog, overlaps};

/// The lock-name prefix unless `--prefix` says otherwise.
pub const DEFAULT_PREFIX: &str = "demo-";

/// The help text, after the line `usage: PROGRAM [cluster|run|schema|check|leader] [OPTIONS]`
/// ([`usage`]).
const HELP: &str = "\
commands:
  cluster      start several replicas of this program and summarise (default)
  run          be one replica: run the jobs until stopped; JSON events on stdout
  schema       create the lock table and the run log, then exit
  check        read a session's run log and count overlapping runs (exit 1 if any)
  leader       be one leader-latch candidate; JSON events: ready, elected, stepped_down,
               following, stopped (each with this process's wall clock)

options:
  --database-url URL   the lock store: postgres://…, mysql://… (MySQL/MariaDB), sqlite:…,
                       redis://… or etcd://host:port[,host:port…] (then --lock-table is the
                       key prefix); default $DATABASE_URL, else (cluster only) a SQLite file
                       in a new temporary directory
  --runlog-url URL     the run log's database (SQL; default: --database-url; cluster: with a
                       redis:// or etcd:// store, a SQLite file in a new temporary directory)
  --seconds N          run for N seconds (cluster default 10; run: until stopped)
  --replicas N         replica processes (cluster; default 3)
  --kill-after N       kill one replica (SIGKILL) after N seconds, preferably mid-run (cluster)
  --job SPEC           a scheduled job instead of the demo's two; repeatable. SPEC:
                       NAME[,every=1s][,at_most=10s][,at_least=0s][,work=100ms..500ms]
                       [,keep_alive][,catch_up][,run_late][,leader_only][,fail]
  --prefix P           lock-name prefix (default demo-)
  --lock-table T       lock table (default: the store's, shedlock)
  --runs-table T       run log table (default shedlock_demo_runs)
  --replica ID         this replica's label (run; default r<pid>)
  --session S          run-log session (run, check; default `default`)
  --text               print events as text instead of JSON lines (run)
  --owner-id ID        owner id (run; default $SHEDLOCK_OWNER_ID or hostname:pid:random)
  --call-timeout DUR   per-call timeout of the lock store (default 5s)
  --history N          keep the last N runs of each job in the store (SQL and Redis; run)
  --grace DUR          run: how long runs in flight may finish at shutdown (default 10s)
  --stop-on-eof        stop when standard input closes (run, leader; cluster: its own stdin)
  --election NAME      leader (and run's leader_only jobs): the election (lock row) name
                       (default <prefix>leader)
  --lease DUR, --renew DUR, --renew-deadline DUR, --acquire DUR, --acquire-jitter DUR
                       leader (and run's leader_only jobs): the latch's timings (defaults 15s,
                       5s, 10s, 2s, acquire / 4)
  --record             leader: also write each term to the run log (--runs-table, --session)
  --cleanup            drop the run log and the lock table at the end (cluster)
  --cacert FILE, --cert FILE, --key FILE
                       Redis and etcd over TLS (rediss://, https://): the CA to trust, the client
                       certificate and its key (a SQL database takes them in its URL:
                       sslrootcert=…, ssl-ca=…)
  --user USER, --password-file FILE
                       Redis and etcd: log in as USER; the password from FILE's first line or
                       $SHEDLOCK_PASSWORD (never an option: `ps` would show it)
";

/// The help text, naming the program as the user ran it ([`program_name`]).
fn usage(program: &str) -> String {
    format!("usage: {program} [cluster|run|schema|check|leader] [OPTIONS]\n\n{HELP}")
}

/// How the user ran the program whose path is `argv0`: `cargo run --example cluster --` for an
/// example cargo built (its directory is `examples`), else the file's name (`replica`).
fn program_name(argv0: &str) -> String {
    let path = std::path::Path::new(argv0);
    let name = path.file_stem().map_or_else(
        || "replica".to_owned(),
        |n| n.to_string_lossy().into_owned(),
    );
    let example = path
        .parent()
        .and_then(|dir| dir.file_name())
        .is_some_and(|dir| dir == "examples");
    if example {
        format!("cargo run --example {name} --")
    } else {
        name
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    Cluster,
    Run,
    Schema,
    Check,
    Leader,
}

#[derive(Debug, Default)]
#[allow(clippy::struct_excessive_bools)] // command-line switches
struct Args {
    command: Option<Command>,
    database_url: Option<String>,
    seconds: Option<f64>,
    replicas: Option<usize>,
    kill_after: Option<f64>,
    jobs: Vec<JobSpec>,
    prefix: Option<String>,
    lock_table: Option<String>,
    runs_table: Option<String>,
    replica: Option<String>,
    session: Option<String>,
    owner_id: Option<String>,
    call_timeout: Option<Duration>,
    history: Option<u32>,
    grace: Option<Duration>,
    runlog_url: Option<String>,
    stop_on_eof: bool,
    cleanup: bool,
    text: bool,
    election: Option<String>,
    lease: Option<Duration>,
    renew: Option<Duration>,
    renew_deadline: Option<Duration>,
    acquire: Option<Duration>,
    acquire_jitter: Option<Duration>,
    record: bool,
    cacert: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    user: Option<String>,
    password_file: Option<PathBuf>,
    help: bool,
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, BoxError> {
    let mut parsed = Args::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, BoxError> {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{name} needs a value").into())
        };
        let seconds = |name: &str, text: String| -> Result<f64, BoxError> {
            match text.parse::<f64>() {
                Ok(n) if n.is_finite() && n >= 0.0 => Ok(n),
                _ => Err(format!("{name} takes a number of seconds, not {text:?}").into()),
            }
        };
        let duration = |name: &str, text: String| -> Result<Duration, BoxError> {
            parse_duration(&text).map_err(|e| format!("{name} {text:?}: {e}").into())
        };
        match flag.as_str() {
            "cluster" | "run" | "schema" | "check" | "leader" if parsed.command.is_none() => {
                parsed.command = Some(match flag.as_str() {
                    "cluster" => Command::Cluster,
                    "run" => Command::Run,
                    "schema" => Command::Schema,
                    "check" => Command::Check,
                    _ => Command::Leader,
                });
            }
            "-h" | "--help" => parsed.help = true,
            "--database-url" => parsed.database_url = Some(value(&flag)?),
            "--seconds" => parsed.seconds = Some(seconds(&flag, value(&flag)?)?),
            "--kill-after" => parsed.kill_after = Some(seconds(&flag, value(&flag)?)?),
            "--replicas" => {
                let text = value(&flag)?;
                parsed.replicas = Some(
                    text.parse()
                        .ok()
                        .filter(|n| (1..=64).contains(n))
                        .ok_or_else(|| format!("--replicas takes 1 to 64, not {text:?}"))?,
                );
            }
            "--job" => parsed.jobs.push(value(&flag)?.parse()?),
            "--prefix" => parsed.prefix = Some(value(&flag)?),
            "--lock-table" => parsed.lock_table = Some(value(&flag)?),
            "--runs-table" => parsed.runs_table = Some(value(&flag)?),
            "--replica" => parsed.replica = Some(value(&flag)?),
            "--session" => parsed.session = Some(value(&flag)?),
            "--owner-id" => parsed.owner_id = Some(value(&flag)?),
            "--call-timeout" => parsed.call_timeout = Some(duration(&flag, value(&flag)?)?),
            "--history" => {
                let text = value(&flag)?;
                parsed.history = Some(text.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                    format!("--history takes a whole number from 1, not {text:?}")
                })?);
            }
            "--grace" => parsed.grace = Some(duration(&flag, value(&flag)?)?),
            "--runlog-url" => parsed.runlog_url = Some(value(&flag)?),
            "--stop-on-eof" => parsed.stop_on_eof = true,
            "--cleanup" => parsed.cleanup = true,
            "--text" => parsed.text = true,
            "--record" => parsed.record = true,
            "--election" => parsed.election = Some(value(&flag)?),
            "--lease" => parsed.lease = Some(duration(&flag, value(&flag)?)?),
            "--renew" => parsed.renew = Some(duration(&flag, value(&flag)?)?),
            "--renew-deadline" => parsed.renew_deadline = Some(duration(&flag, value(&flag)?)?),
            "--acquire" => parsed.acquire = Some(duration(&flag, value(&flag)?)?),
            "--acquire-jitter" => parsed.acquire_jitter = Some(duration(&flag, value(&flag)?)?),
            "--cacert" => parsed.cacert = Some(value(&flag)?.into()),
            "--cert" => parsed.cert = Some(value(&flag)?.into()),
            "--key" => parsed.key = Some(value(&flag)?.into()),
            "--user" => parsed.user = Some(value(&flag)?),
            "--password-file" => parsed.password_file = Some(value(&flag)?.into()),
            other => return Err(format!("unknown argument {other:?} (see --help)").into()),
        }
    }
    if parsed.cert.is_some() != parsed.key.is_some() {
        return Err("--cert and --key go together".into());
    }
    let names: std::collections::BTreeSet<_> = parsed.jobs.iter().map(|j| &j.name).collect();
    if names.len() != parsed.jobs.len() {
        return Err("two --job options have the same name".into());
    }
    Ok(parsed)
}

/// The program: parses the command line (`default` is the command when none is given), sets up
/// logging and the runtime, runs the command.
///
/// Exit codes: 0 on success; 1 when the demo found overlapping runs or a fire run twice; 2 on
/// any other error.
#[must_use]
pub fn main(default: &str) -> ExitCode {
    let mut args = std::env::args();
    let program = program_name(&args.next().unwrap_or_default());
    let mut args: Vec<String> = args.collect();
    if args.first().is_none_or(|a| a.starts_with('-')) {
        args.insert(0, default.to_owned());
    }
    let args = match parse_args(args) {
        Ok(args) => args,
        Err(error) => {
            eprintln!("error: {error}\n\n{}", usage(&program));
            return ExitCode::from(2);
        }
    };
    if args.help {
        print!("{}", usage(&program));
        return ExitCode::SUCCESS;
    }
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the tokio runtime: {error}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(dispatch(args));
    // Do not wait for a blocked read of standard input or similar.
    runtime.shutdown_background();
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", error_chain(&*error));
            ExitCode::from(2)
        }
    }
}

/// Logs to standard error, filtered by `RUST_LOG` (`warn` when unset or not understood): a
/// level or a list of `target=level` (`info`, `warn,shedlock_core=debug`), as a
/// `tracing_subscriber::filter::Targets` reads it (no span filters or regexes).
fn init_tracing() {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|spec| spec.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::WARN));
    let _ = tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(filter)
        .try_init();
}

/// The TLS files and credentials of the command line; the password from `--password-file` (its
/// first line) or, for a Redis or etcd store, `SHEDLOCK_PASSWORD`.
fn connect_options(
    args: &Args,
    url: Option<&str>,
) -> Result<crate::store::ConnectOptions, BoxError> {
    use crate::store::PASSWORD_ENV;
    let password = match &args.password_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read the password file {}: {e}", path.display()))?;
            let line = text
                .lines()
                .next()
                .filter(|l| !l.is_empty())
                .ok_or_else(|| {
                    format!(
                        "the password file {} is empty; its first line is the password",
                        path.display()
                    )
                })?;
            Some(line.to_owned())
        }
        None if url.is_some_and(crate::store::is_kv_url) => {
            std::env::var(PASSWORD_ENV).ok().filter(|p| !p.is_empty())
        }
        None => None,
    };
    Ok(crate::store::ConnectOptions {
        cacert: args.cacert.clone(),
        cert_key: args.cert.clone().zip(args.key.clone()),
        user: args.user.clone(),
        password,
    })
}

async fn dispatch(args: Args) -> Result<ExitCode, BoxError> {
    let database_url = args
        .database_url
        .clone()
        .or_else(|| std::env::var(DATABASE_URL_ENV).ok());
    crate::store::set_connect_options(connect_options(&args, database_url.as_deref())?)?;
    if let Some(keep) = args.history {
        crate::store::set_history(keep)?;
    }
    match args.command.unwrap_or(Command::Cluster) {
        Command::Cluster => cluster(args, database_url).await,
        Command::Schema => {
            let url = database_url.ok_or("schema needs --database-url or DATABASE_URL")?;
            if !crate::store::is_kv_url(&url) {
                let db = Database::connect(&url).await?;
                db.create_lock_table(args.lock_table.as_deref()).await?;
            }
            let db = Database::connect(runlog_url(&args, &url)?).await?;
            RunLog::new(&db, &runs_table(&args))?.create_table().await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Check => {
            let url = database_url.ok_or("check needs --database-url or DATABASE_URL")?;
            let url = runlog_url(&args, &url)?.to_owned();
            check(args, &url).await
        }
        Command::Leader => {
            let url = database_url.ok_or("leader needs --database-url or DATABASE_URL")?;
            let (seconds, stop_on_eof, text) = (args.seconds, args.stop_on_eof, args.text);
            let opts = leader_options(&args);
            if crate::store::is_redis_url(&url) {
                // The lock table option names the key prefix on Redis.
                let provider = crate::store::redis_provider(
                    &url,
                    opts.lock_table.as_deref(),
                    opts.call_timeout,
                )
                .await?;
                serve(seconds, stop_on_eof, text, |stop, events| async move {
                    leader::run_with(opts, provider, None, stop, events).await
                })
                .await?;
                return Ok(ExitCode::SUCCESS);
            }
            let db = Database::connect(&url).await?;
            serve(seconds, stop_on_eof, text, |stop, events| async move {
                leader::run(opts, &db, stop, events).await
            })
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run => {
            let url = database_url.ok_or("run needs --database-url or DATABASE_URL")?;
            run(args, &url).await
        }
    }
}

/// `run`: one replica on the lock store at `url`, its run log on `--runlog-url` (or `url`).
async fn run(args: Args, url: &str) -> Result<ExitCode, BoxError> {
    let (seconds, stop_on_eof, text) = (args.seconds, args.stop_on_eof, args.text);
    let opts = ReplicaOptions {
        replica: replica_label(args.replica.as_deref()),
        session: session(&args),
        prefix: prefix(&args),
        runs_table: runs_table(&args),
        lock_table: args.lock_table.clone(),
        owner_id: args.owner_id.clone(),
        call_timeout: args.call_timeout,
        grace: args.grace.unwrap_or(replica::DEFAULT_GRACE),
        leader: leader_options(&args),
        jobs: if args.jobs.is_empty() {
            demo::jobs()
        } else {
            args.jobs.clone()
        },
    };
    let runlog = Database::connect(runlog_url(&args, url)?).await?;
    let provider = match crate::store::kv_provider(
        url,
        opts.lock_table.as_deref(),
        opts.call_timeout,
    )
    .await?
    {
        Some(provider) => provider,
        None if args.runlog_url.is_none() => {
            runlog
                .lock_provider(opts.lock_table.as_deref(), opts.call_timeout)
                .await?
        }
        None => {
            Database::connect(url)
                .await?
                .lock_provider(opts.lock_table.as_deref(), opts.call_timeout)
                .await?
        }
    };
    serve(seconds, stop_on_eof, text, |stop, events| async move {
        replica::run_with(opts, provider, &runlog, stop, events).await
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// The run log's database: `--runlog-url`, else the store's URL when it is a SQL database.
fn runlog_url<'a>(args: &'a Args, url: &'a str) -> Result<&'a str, BoxError> {
    match &args.runlog_url {
        Some(runlog) => Ok(runlog),
        None if crate::store::is_kv_url(url) => Err(
            "a redis:// or etcd:// lock store keeps no run log: give --runlog-url (a SQL database)"
                .into(),
        ),
        None => Ok(url),
    }
}

/// The leader latch's settings from the command line (the `leader` command's, and the `run`
/// command's `leader_only` jobs').
fn leader_options(args: &Args) -> LeaderOptions {
    LeaderOptions {
        replica: replica_label(args.replica.as_deref()),
        election: args
            .election
            .clone()
            .unwrap_or_else(|| format!("{}leader", prefix(args))),
        lock_table: args.lock_table.clone(),
        owner_id: args.owner_id.clone(),
        lease: args.lease,
        renew_interval: args.renew,
        renew_deadline: args.renew_deadline,
        acquire_interval: args.acquire,
        acquire_jitter: args.acquire_jitter,
        call_timeout: args.call_timeout,
        record: args.record.then(|| (runs_table(args), session(args))),
    }
}

fn prefix(args: &Args) -> String {
    args.prefix
        .clone()
        .unwrap_or_else(|| DEFAULT_PREFIX.to_owned())
}

fn runs_table(args: &Args) -> String {
    args.runs_table
        .clone()
        .unwrap_or_else(|| DEFAULT_RUNS_TABLE.to_owned())
}

fn session(args: &Args) -> String {
    args.session.clone().unwrap_or_else(|| "default".to_owned())
}

fn replica_label(given: Option<&str>) -> String {
    given.map_or_else(|| format!("r{}", std::process::id()), str::to_owned)
}

/// `cluster`: the demo.
async fn cluster(args: Args, database_url: Option<String>) -> Result<ExitCode, BoxError> {
    let opts = ClusterOptions {
        database_url,
        duration: Duration::from_secs_f64(args.seconds.unwrap_or(10.0)),
        replicas: args.replicas.unwrap_or(3),
        prefix: prefix(&args),
        runs_table: runs_table(&args),
        lock_table: args.lock_table,
        jobs: args.jobs,
        kill_after: args.kill_after.map(Duration::from_secs_f64),
        stop_on_eof: args.stop_on_eof,
        cleanup: args.cleanup,
        call_timeout: args.call_timeout,
        exe: std::env::current_exe()?,
    };
    let mut out = std::io::stdout();
    let summary = cluster::run(opts, &mut out).await?;
    Ok(if summary.overlaps == 0 && summary.fires_run_twice == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `check`: a session's run log, summarised.
async fn check(args: Args, url: &str) -> Result<ExitCode, BoxError> {
    let db = Database::connect(url).await?;
    let session = session(&args);
    let records = RunLog::new(&db, &runs_table(&args))?
        .records(&session)
        .await?;
    let found = overlaps(&records);
    let mut out = std::io::stdout().lock();
    for overlap in &found {
        writeln!(
            out,
            "OVERLAP in {}: {} [{}, {}) and {} [{}, {}) (µs, database clock)",
            overlap.first.job,
            overlap.first.replica,
            overlap.first.started_us,
            overlap.first.effective_end(),
            overlap.second.replica,
            overlap.second.started_us,
            overlap.second.effective_end()
        )?;
    }
    let mut per_job = std::collections::BTreeMap::<&str, u64>::new();
    for record in &records {
        *per_job.entry(record.job.as_str()).or_default() += 1;
    }
    write!(
        out,
        "runlog: session={session} runs={} interrupted={} overlaps={}",
        records.len(),
        records.iter().filter(|r| r.ended_us.is_none()).count(),
        found.len()
    )?;
    for (job, runs) in per_job {
        write!(out, " runs.{job}={runs}")?;
    }
    writeln!(out)?;
    Ok(if found.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Runs `body` (a replica or a leader candidate) with its stop signal (SIGINT, SIGTERM, the
/// deadline, or the end of standard input) and prints its events, as JSON lines or `text`.
async fn serve<F, Fut>(
    seconds: Option<f64>,
    stop_on_eof: bool,
    text: bool,
    body: F,
) -> Result<(), BoxError>
where
    F: FnOnce(watch::Receiver<bool>, mpsc::UnboundedSender<Event>) -> Fut,
    Fut: Future<Output = Result<(), BoxError>>,
{
    let (stop_tx, stop_rx) = watch::channel(false);
    if stop_on_eof {
        on_stdin_eof(stop_tx.clone());
    }
    let mut signals = Signals::new()?;
    let deadline = seconds.map(Duration::from_secs_f64);
    let stopper = stop_tx.clone();
    tokio::spawn(async move {
        match deadline {
            Some(after) => {
                tokio::select! {
                    () = tokio::time::sleep(after) => {}
                    () = signals.recv() => {}
                }
            }
            None => signals.recv().await,
        }
        let _ = stopper.send(true);
    });
    let (events_tx, mut events_rx) = mpsc::unbounded_channel::<Event>();
    let printer = tokio::spawn(async move {
        let mut stdout = std::io::stdout();
        while let Some(event) = events_rx.recv().await {
            // A closed stdout (the orchestrator is gone) is no reason to stop running.
            let _ = if text {
                writeln!(stdout, "{event}")
            } else {
                writeln!(stdout, "{}", event.to_line())
            };
        }
    });
    let result = body(stop_rx, events_tx).await;
    let _ = printer.await;
    drop(stop_tx);
    result
}

/// Sends `true` on `stop` when this process's standard input reaches its end (its parent closed
/// the pipe or died). The read runs on a plain thread, which never delays the process's exit.
pub(crate) fn on_stdin_eof(stop: watch::Sender<bool>) {
    let spawned = std::thread::Builder::new()
        .name("stdin-eof".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut line = String::new();
            while matches!(stdin.read_line(&mut line), Ok(n) if n > 0) {
                line.clear();
            }
            let _ = stop.send(true);
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot watch standard input; --stop-on-eof has no effect");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Args, BoxError> {
        parse_args(list.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn flags_take_values_inline_or_next() {
        let parsed = args(&[
            "run",
            "--seconds=2.5",
            "--replica",
            "r7",
            "--job",
            "a,every=500ms",
        ])
        .expect("valid");
        assert_eq!(parsed.command, Some(Command::Run));
        assert_eq!(parsed.seconds, Some(2.5));
        assert_eq!(parsed.replica.as_deref(), Some("r7"));
        assert_eq!(parsed.jobs[0].every, Duration::from_millis(500));
    }

    #[test]
    fn the_usage_names_the_program_as_it_was_run() {
        for (argv0, first) in [
            (
                "/src/target/debug/examples/cluster",
                "usage: cargo run --example cluster -- [cluster|run|schema|check|leader] [OPTIONS]",
            ),
            (
                "target/release/examples/cluster.exe",
                "usage: cargo run --example cluster -- [cluster|run|schema|check|leader] [OPTIONS]",
            ),
            (
                "/src/target/debug/replica",
                "usage: replica [cluster|run|schema|check|leader] [OPTIONS]",
            ),
            (
                "replica",
                "usage: replica [cluster|run|schema|check|leader] [OPTIONS]",
            ),
        ] {
            let help = usage(&program_name(argv0));
            assert_eq!(help.lines().next(), Some(first), "{argv0}");
            assert!(help.contains("\ncommands:\n"), "{help}");
        }
    }

    #[test]
    fn mistakes_are_errors() {
        for bad in [
            &["--seconds"][..],
            &["--seconds", "-1"],
            &["--replicas", "0"],
            &["--colour", "blue"],
            &["--job", "a", "--job", "a"],
            &["--call-timeout", "soon"],
        ] {
            assert!(args(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
