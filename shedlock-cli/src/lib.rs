//! `shedlock`: see, free and create the locks of shedlock-rs and Java `ShedLock` in a shared
//! database.
//!
//! ```text
//! $ export DATABASE_URL=postgres://app@db/app
//! $ shedlock list
//! $ shedlock show nightly-report
//! $ shedlock unlock nightly-report --owner pod-7:1:ab12cd --locked-at 2026-12-01T20:31:02.123456Z --token 17
//! $ shedlock jobs --failing
//! $ shedlock history sync-invoices --failed
//! $ shedlock serve --listen 127.0.0.1:8080 --token-file ops-tokens.txt
//! ```
//!
//! Exit codes: 0, done. 1, refused, nothing changed: the lock changed hands since it was shown, is
//! not held, is an election, or does not exist, or there is no such job. 2, usage or connection
//! error, or a store without job state for the job commands.
//!
//! Each failure is one line on stderr that says what to fix, followed by the statements to run
//! where job state needs them. See `shedlock --help` and the README's "Operating locks".

//! The binary is a thin `main` over [`run`], which tests of other packages call in process.

mod args;
mod command;
mod failure;
mod invocation;
mod render;
mod run_now;
mod serve;
mod steer;
mod store;

use std::ffi::OsString;
use std::io::Write;

use crate::command::Output;
use crate::failure::{Exit, Failure};

/// Runs the command line `args` (the program's name first) as the `shedlock` binary does, writing
/// to `out` and `err`, and returns its exit code: 0 done, 1 refused, 2 usage or connection error.
/// `--help` and `--version` print to `out`.
pub async fn run(
    args: impl IntoIterator<Item = OsString>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let cli = match args::Cli::parse_from_args(args) {
        Ok(cli) => cli,
        // --help and --version exit 0, usage errors 2, with clap's own message.
        Err(e) => {
            let text = e.render().to_string();
            let _ = if e.use_stderr() {
                err.write_all(text.as_bytes())
            } else {
                out.write_all(text.as_bytes())
            };
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    match execute(cli, out, err).await {
        Ok(()) => 0,
        Err(failure) => {
            if !failure.message.is_empty() {
                let _ = writeln!(err, "shedlock: {}", failure.message);
            }
            failure.exit.code()
        }
    }
}

async fn execute(cli: args::Cli, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), Failure> {
    // `serve` reads its token files first: a mistake there fails before any connection.
    if let args::Command::Serve(serve_args) = &cli.command {
        let tokens = serve::Tokens::read(serve_args)?;
        let store = store::open(&cli.store, true, command::connections(&cli.command)).await?;
        return serve::serve(serve_args, &tokens, &store, &mut Output { out, err }).await;
    }
    let store = store::open(
        &cli.store,
        command::connects(&cli.command),
        command::connections(&cli.command),
    )
    .await?;
    let result = command::run(cli.command, &store, &mut Output { out, err }).await;
    match result {
        Err(f) if f.exit == Exit::Done => Ok(()),
        other => other,
    }
}
