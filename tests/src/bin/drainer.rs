//! The graceful-drain tests' process: scheduled jobs on one store until SIGTERM, then a drain;
//! JSON lines on standard output. See `shedlock_tests::drainer`.

use std::process::ExitCode;

fn main() -> ExitCode {
    shedlock_tests::drainer::main()
}
