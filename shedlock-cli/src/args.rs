//! The command line, as clap derive types.
//!
//! It has global connection options and one enum variant per subcommand.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

/// Exit codes and what they mean, shown by `--help`.
const EXIT_CODES: &str = "\
Exit status:
  0  done
  1  refused, nothing changed: the lock changed hands since it was shown, is not held, is a
     leader election (pass --election), or there is no such lock or job
  2  usage or connection error (bad option, URL, unreachable database, missing table, a
     table without the job-state columns); the message says what to fix

Database URLs: postgres://user@host/db, mysql://user@host/db (MySQL and MariaDB),
sqlite://path/to/file.db (sqlite://file.db?mode=rwc creates the file), redis://host:6379,
etcd://host:2379[,host:2379…].

TLS: postgres://…?sslmode=verify-full&sslrootcert=ca.pem, mysql://…?ssl-mode=VERIFY_IDENTITY&
ssl-ca=ca.pem, rediss://host:6379, https://host:2379 (etcd); or --cacert (which turns on
verifying the server's certificate and host name), --cert and --key.

Passwords: in the URL (keep it in DATABASE_URL, not on the command line, where `ps` shows it), in
the environment variable SHEDLOCK_PASSWORD, or in a file (--password-file). Never printed.";

/// See, free and create the locks of shedlock-rs and Java `ShedLock` in a shared database.
#[derive(Debug, Parser)]
// Each usage line is written out: clap's own lists an option set from the environment
// (`DATABASE_URL`) as if it were required.
#[command(
    name = "shedlock",
    version,
    after_help = EXIT_CODES,
    override_usage = "shedlock [OPTIONS] <COMMAND>"
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The table unless `--table` says otherwise.
pub(crate) const DEFAULT_TABLE: &str = "shedlock";
/// The column names unless their options say otherwise. They are in this order: name, `lock_until`,
/// `locked_at`, `locked_by`, fencing token.
pub(crate) const DEFAULT_COLUMNS: [&str; 5] = [
    "name",
    "lock_until",
    "locked_at",
    "locked_by",
    "fencing_token",
];

/// Where the locks are: database URL, table, column names.
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    /// The database holding the lock table.
    #[arg(
        short = 'd',
        long,
        env = "DATABASE_URL",
        global = true,
        hide_env_values = true,
        value_name = "URL"
    )]
    pub(crate) database_url: Option<String>,
    /// The lock table, optionally schema-qualified (`ops.locks`).
    #[arg(short, long, global = true, default_value = DEFAULT_TABLE)]
    pub(crate) table: String,
    /// The lock name column.
    #[arg(long, global = true, default_value = DEFAULT_COLUMNS[0], value_name = "COLUMN")]
    pub(crate) name_column: String,
    /// The `lock_until` column.
    #[arg(
        long,
        global = true,
        default_value = DEFAULT_COLUMNS[1],
        value_name = "COLUMN"
    )]
    pub(crate) lock_until_column: String,
    /// The `locked_at` column.
    #[arg(
        long,
        global = true,
        default_value = DEFAULT_COLUMNS[2],
        value_name = "COLUMN"
    )]
    pub(crate) locked_at_column: String,
    /// The `locked_by` column.
    #[arg(
        long,
        global = true,
        default_value = DEFAULT_COLUMNS[3],
        value_name = "COLUMN"
    )]
    pub(crate) locked_by_column: String,
    /// The fencing-token column, used when the table has it.
    #[arg(
        long,
        global = true,
        default_value = DEFAULT_COLUMNS[4],
        value_name = "COLUMN"
    )]
    pub(crate) fencing_token_column: String,
    /// Who you are, recorded with each pause, resume and unlock (`shedlock jobs` shows the last
    /// action per job). Left out, it is user@host.
    #[arg(
        long = "as",
        global = true,
        value_name = "NAME",
        env = "SHEDLOCK_ACTOR"
    )]
    pub(crate) actor: Option<String>,
    /// Redis and etcd: the prefix of the lock keys. Left out, it is the store's own default:
    /// `shedlock:` on Redis, `/shedlock/` on etcd. `--table` and the column options are for SQL.
    #[arg(long, global = true, value_name = "PREFIX")]
    pub(crate) key_prefix: Option<String>,
    /// TLS: trust the CA certificates in this PEM file, and verify the server's certificate and
    /// host name. It is the URL's `sslrootcert=` or `ssl-ca=`.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) cacert: Option<PathBuf>,
    /// TLS: present this client certificate (PEM) to a server that requires one. Give it with
    /// --key.
    #[arg(long, global = true, value_name = "FILE", requires = "key")]
    pub(crate) cert: Option<PathBuf>,
    /// TLS: the private key (PEM) of --cert.
    #[arg(long, global = true, value_name = "FILE", requires = "cert")]
    pub(crate) key: Option<PathBuf>,
    /// Log in as this user instead of the URL's. On etcd it is the authentication user.
    #[arg(long, global = true, value_name = "USER")]
    pub(crate) user: Option<String>,
    /// Read the password from the first line of this file. It is used instead of the URL or
    /// `SHEDLOCK_PASSWORD`.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) password_file: Option<PathBuf>,
    /// How long each database call may take, connecting included. Examples: "5s", "500ms", "PT2S".
    #[arg(long, global = true, default_value = "5s", value_parser = duration, value_name = "DURATION")]
    pub(crate) timeout: Duration,
    /// Whether the URL was given with `--database-url` rather than from `DATABASE_URL`. A printed
    /// command then repeats it, without its password (see [`crate::invocation`]).
    #[arg(skip)]
    pub(crate) url_on_command_line: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Lists every lock by the database's clock: NAME STATE HOLDER LOCKED REMAINING TOKEN. A LAST
    /// FIRE column is added where jobs record fires.
    #[command(override_usage = "shedlock list [--held] [--json] [OPTIONS]")]
    List {
        /// Only locks held now.
        #[arg(long)]
        held: bool,
        /// JSON for scripts: an array of objects with every field at full precision.
        #[arg(long)]
        json: bool,
    },
    /// Shows one lock in full, with the command that frees exactly this acquisition.
    #[command(override_usage = "shedlock show <NAME> [--json] [OPTIONS]")]
    Show {
        /// The lock's name.
        name: String,
        /// JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Frees a lock. Safely, it frees it only if it is still the acquisition `show` printed. Give
    /// `--owner`, `--locked-at`, and `--token` where the table has tokens. With `--force`, it frees
    /// it whoever holds it.
    #[command(
        group = clap::ArgGroup::new("how").required(true).multiple(true).args(["owner", "force"]),
        override_usage = "shedlock unlock <NAME> --owner <OWNER> --locked-at <TIME> [--token <N>] \
                          [--election] [OPTIONS]\n       \
                          shedlock unlock <NAME> --force [--election] [OPTIONS]"
    )]
    Unlock(UnlockArgs),
    /// Who leads an election, from a leader latch's row. It shows the leader, its term token and
    /// the lease left.
    #[command(override_usage = "shedlock leader <NAME> [--json] [OPTIONS]")]
    Leader {
        /// The election's name.
        name: String,
        /// JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Refreshes `list` every second until Ctrl-C. `--interval` sets another period.
    #[command(
        override_usage = "shedlock watch [--held] [--interval <DURATION>] [--count <N>] [OPTIONS]"
    )]
    Watch {
        /// Only locks held now.
        #[arg(long)]
        held: bool,
        /// Time between refreshes.
        #[arg(long, default_value = "1s", value_parser = duration, value_name = "DURATION")]
        interval: Duration,
        /// Stop after this many refreshes.
        #[arg(long, value_name = "N")]
        count: Option<u64>,
    },
    /// Prints the `CREATE TABLE` statement for the table and columns given. It needs no connection.
    #[command(override_usage = "shedlock ddl [OPTIONS]")]
    Ddl,
    /// Creates the lock table unless it exists.
    #[command(override_usage = "shedlock create-table [OPTIONS]")]
    CreateTable,
    /// Lists the jobs the replicas publish and the jobs whose lock rows recorded runs. The columns
    /// are JOB SCHEDULE NEXT LAST RUN OUTCOME FAILURES LAST SUCCESS HELD REPLICAS. Times are by the
    /// database's clock. Replicas publishing different specs of a job are named below the table.
    #[command(override_usage = "shedlock jobs [--failing] [--json] [OPTIONS]")]
    Jobs {
        /// Only failing jobs: the last counted run failed or panicked.
        #[arg(long)]
        failing: bool,
        /// JSON for scripts: an array of objects with every field at full precision.
        #[arg(long)]
        json: bool,
    },
    /// The recorded runs of a job, newest first: FIRE RUNNER STARTED DURATION OUTCOME ERROR. Runs
    /// are kept where the replicas turn history on.
    #[command(
        override_usage = "shedlock history <JOB> [--limit <N>] [--failed] [--json] [OPTIONS]"
    )]
    History {
        /// The job's name. For a job no replica publishes now, its lock's name.
        job: String,
        /// At most this many runs.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000), value_name = "N")]
        limit: u32,
        /// Only runs that failed or panicked. They are looked for among the newest 1000 runs, or
        /// among --limit runs if more.
        #[arg(long)]
        failed: bool,
        /// JSON for scripts: an array of runs.
        #[arg(long)]
        json: bool,
    },
    /// Pauses a job's fires on every replica, until resumed, for a length, or until a time. A run
    /// in progress continues. Only scheduled fires are paused: plain locks and `execute` ignore it,
    /// and so do replicas older than 0.2.0 and Java replicas (`jobs` names them).
    #[command(
        override_usage = "shedlock pause <JOB> [--for <DURATION> | --until <TIME>] [--reason <TEXT>] \
                          [--as <NAME>] [OPTIONS]"
    )]
    Pause {
        /// The job's name, or its lock's name.
        job: String,
        /// How long, such as "1h" or "30m". Left out with --until, until `shedlock resume`.
        #[arg(long = "for", value_parser = duration, value_name = "DURATION", conflicts_with = "until")]
        length: Option<Duration>,
        /// Until this time, in RFC 3339 (2026-12-05T18:00:00Z).
        #[arg(long, value_parser = rfc3339, value_name = "TIME")]
        until: Option<DateTime<Utc>>,
        /// Why, shown by `shedlock jobs` (at most 255 characters).
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },
    /// Ends a job's pause. Its next fire runs as scheduled.
    #[command(override_usage = "shedlock resume <JOB> [--as <NAME>] [OPTIONS]")]
    Resume {
        /// The job's name, or its lock's name.
        job: String,
    },
    /// Runs a job now, once, on one of its replicas ("run now"). It is refused while the job runs
    /// or is paused. A trigger no replica takes within --expires (1 minute) expires. The regular
    /// fires are not affected. With --wait, it reports which replica ran it and how it ended.
    #[command(
        override_usage = "shedlock trigger <JOB> [--wait] [--expires <DURATION>] [--as <NAME>] [OPTIONS]"
    )]
    Trigger {
        /// The job's name, or its lock's name.
        job: String,
        /// Wait until a replica has run it, or the trigger expired, and say how it went.
        #[arg(long)]
        wait: bool,
        /// How long a replica may take to pick it up.
        #[arg(long, default_value = "1m", value_parser = duration, value_name = "DURATION")]
        expires: Duration,
    },
    /// Serves the dashboard: the jobs and locks in a browser, a JSON API and Prometheus metrics
    /// at /metrics, over the store given, until Ctrl-C or SIGTERM. It is read-only unless
    /// --token-file names who may pause, resume, trigger and unlock. The rules, and how to put it
    /// behind a proxy, are in the repository's docs/dashboard.md.
    #[command(
        override_usage = "shedlock serve [--listen <ADDR>] [--token-file <PATH>] \
                          [--read-token-file <PATH>] [OPTIONS]"
    )]
    Serve(ServeArgs),
    /// Removes a job's published definitions, those of every replica. It is for a job that no
    /// replica runs any more. A replica still running it publishes it again at its next heartbeat.
    /// Its lock row and history stay.
    #[command(override_usage = "shedlock forget <JOB> [--json] [OPTIONS]")]
    Forget {
        /// The job's name.
        job: String,
        /// JSON for scripts.
        #[arg(long)]
        json: bool,
    },
}

/// `shedlock serve`'s own options.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The address to listen on, as IP:PORT or HOST:PORT. On a loopback address the dashboard
    /// answers only requests for `localhost`, `127.x` or `[::1]`. Port 0 takes a free port; the first
    /// line printed says which.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub(crate) listen: String,
    /// Allow actions (pause, resume, trigger, unlock) to the tokens in this file: one `LABEL:TOKEN`
    /// per line, lines starting with `#` ignored. The label is recorded as who did it. Without it
    /// the dashboard is read-only.
    #[arg(long, value_name = "PATH")]
    pub(crate) token_file: Option<PathBuf>,
    /// Reading (pages, API, metrics) then needs this file's one token too: as a bearer token, or
    /// as the password of Basic authentication.
    #[arg(long, value_name = "PATH")]
    pub(crate) read_token_file: Option<PathBuf>,
    /// On a loopback address, also answer requests for this host name: the public name of a
    /// reverse proxy on this machine that terminates TLS and passes the browser's `Host` on.
    /// Repeatable.
    #[arg(long, value_name = "NAME")]
    pub(crate) allow_host: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct UnlockArgs {
    /// The lock's name.
    pub(crate) name: String,
    /// The holder `show` printed.
    #[arg(long, requires = "locked_at", conflicts_with = "force")]
    pub(crate) owner: Option<String>,
    /// The `locked at` time `show` printed, in RFC 3339 with all its digits.
    #[arg(long, value_parser = rfc3339, requires = "owner", value_name = "TIME")]
    pub(crate) locked_at: Option<DateTime<Utc>>,
    /// The token `show` printed. It is required where the table has tokens.
    #[arg(long, requires = "owner", value_name = "N")]
    pub(crate) token: Option<i64>,
    /// Free the lock whoever holds it, and print what was freed.
    #[arg(long)]
    pub(crate) force: bool,
    /// Allow freeing a leader election's row. The old leader may go on acting as leader next to the
    /// new one. It does so until its renew deadline passes, 10 s by default.
    #[arg(long)]
    pub(crate) election: bool,
}

impl Cli {
    /// Parses `args`, the program's name first. It notes where the database URL came from.
    pub(crate) fn parse_from_args(
        args: impl IntoIterator<Item = std::ffi::OsString>,
    ) -> Result<Self, clap::Error> {
        let matches: ArgMatches = Self::command().try_get_matches_from(args)?;
        let mut cli = Self::from_arg_matches(&matches)?;
        cli.store.url_on_command_line =
            matches.value_source("database_url") == Some(ValueSource::CommandLine);
        Ok(cli)
    }
}

fn duration(s: &str) -> Result<Duration, String> {
    match shedlock_core::parse_duration(s) {
        Ok(d) if d.is_zero() => Err("must be more than zero".to_owned()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

fn rfc3339(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s)
        .map(Into::into)
        .map_err(|e| format!("{e}; give it as `show` prints it, e.g. 2026-12-01T20:31:02.123456Z"))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("shedlock").chain(args.iter().copied()))
    }

    #[test]
    fn history_limits_are_whole_numbers_from_one() {
        let cli = parse(&["history", "report"]).expect("valid");
        assert!(matches!(cli.command, Command::History { limit: 20, .. }));
        for bad in ["0", "-1", "x", "10001"] {
            let err = parse(&["history", "report", "--limit", bad]).expect_err(bad);
            assert_eq!(err.exit_code(), 2, "{bad}");
        }
        assert!(parse(&["history"]).is_err(), "a job is required");
        assert!(parse(&["forget"]).is_err(), "a job is required");
    }

    #[test]
    fn the_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_options_go_before_or_after_the_subcommand() {
        let cli = parse(&["list", "--table", "ops_locks", "-d", "sqlite://x.db"]).expect("valid");
        assert_eq!(cli.store.table, "ops_locks");
        assert_eq!(cli.store.database_url.as_deref(), Some("sqlite://x.db"));
        let cli = parse(&["--timeout", "2s", "show", "report", "--json"]).expect("valid");
        assert_eq!(cli.store.timeout, Duration::from_secs(2));
        assert!(matches!(cli.command, Command::Show { json: true, .. }));
    }

    #[test]
    fn unlock_needs_owner_and_locked_at_or_force_not_both() {
        let ok = parse(&[
            "unlock",
            "report",
            "--owner",
            "pod-7",
            "--locked-at",
            "2026-12-01T20:31:02.123456Z",
            "--token",
            "7",
        ])
        .expect("valid");
        let Command::Unlock(args) = ok.command else {
            panic!("unlock")
        };
        assert_eq!(
            args.locked_at.map(|t| t.timestamp_subsec_micros()),
            Some(123_456)
        );
        assert!(parse(&["unlock", "report", "--force"]).is_ok());
        for bad in [
            &["unlock", "report"][..],
            &["unlock", "report", "--owner", "pod-7"],
            &["unlock", "report", "--locked-at", "2026-12-01T20:31:02Z"],
            &[
                "unlock",
                "report",
                "--force",
                "--owner",
                "a",
                "--locked-at",
                "2026-12-01T20:31:02Z",
            ],
            &[
                "unlock",
                "report",
                "--owner",
                "a",
                "--locked-at",
                "yesterday",
            ],
            &["list", "--timeout", "0s"],
            &["watch", "--interval", "soon"],
        ] {
            let err = parse(bad).expect_err(&format!("{bad:?} must be refused"));
            assert_eq!(err.exit_code(), 2, "{bad:?}: {err}");
        }
    }

    #[test]
    fn the_url_is_known_to_come_from_the_command_line() {
        for args in [
            &["shedlock", "-d", "sqlite://x.db", "list"][..],
            &["shedlock", "list", "--database-url", "sqlite://x.db"],
        ] {
            let cli = Cli::parse_from_args(args.iter().map(Into::into)).expect("valid");
            assert!(cli.store.url_on_command_line, "{args:?}");
        }
        let cli = Cli::parse_from_args(["shedlock", "list"].map(Into::into)).expect("valid");
        assert!(!cli.store.url_on_command_line);
    }

    #[test]
    fn help_documents_the_exit_codes() {
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("Exit status:"), "{help}");
        assert!(help.contains("DATABASE_URL"), "{help}");
    }
}
