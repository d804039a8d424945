//! `shedlock`: see, free and create the locks of shedlock-rs and Java `ShedLock` in a shared
//! database. The commands are in the library, [`shedlock_cli::run`].

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "shedlock: cannot start the async runtime: {e}"
            );
            return ExitCode::from(2);
        }
    };
    let (stdout, stderr) = (std::io::stdout(), std::io::stderr());
    let (mut out, mut err) = (stdout.lock(), stderr.lock());
    let code = runtime.block_on(shedlock_cli::run(std::env::args_os(), &mut out, &mut err));
    ExitCode::from(code)
}
