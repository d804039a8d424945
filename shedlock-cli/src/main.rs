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
//! ```
//!
//! Exit codes: 0, done. 1, refused, nothing changed: the lock changed hands since it was shown, is
//! not held, is an election, or does not exist, or there is no such job. 2, usage or connection
//! error, or a store without job state for the job commands.
//!
//! Each failure is one line on stderr that says what to fix, followed by the statements to run
//! where job state needs them. See `shedlock --help` and the README's "Operating locks".

mod args;
mod command;
mod failure;
mod invocation;
mod render;
mod steer;
mod store;

use std::io::Write;
use std::process::ExitCode;

use crate::command::Output;
use crate::failure::{Exit, Failure};

fn main() -> ExitCode {
    let cli = match args::Cli::parse_from_args(std::env::args_os()) {
        Ok(cli) => cli,
        // --help and --version exit 0, usage errors 2, with clap's own message.
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::usage(format!("cannot start the async runtime: {e}")))
        .and_then(|runtime| runtime.block_on(execute(cli)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if !failure.message.is_empty() {
                let _ = writeln!(std::io::stderr(), "shedlock: {}", failure.message);
            }
            failure.exit.into()
        }
    }
}

async fn execute(cli: args::Cli) -> Result<(), Failure> {
    let store = store::open(&cli.store, command::connects(&cli.command)).await?;
    let (stdout, stderr) = (std::io::stdout(), std::io::stderr());
    let (mut out, mut err) = (stdout.lock(), stderr.lock());
    let result = command::run(
        cli.command,
        &store,
        &mut Output {
            out: &mut out,
            err: &mut err,
        },
    )
    .await;
    match result {
        Err(f) if f.exit == Exit::Done => Ok(()),
        other => other,
    }
}
