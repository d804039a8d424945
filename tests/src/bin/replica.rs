//! The replica program: `replica cluster` (the default) runs the three-replica demo,
//! `replica run` is one replica, `replica schema` creates the tables. See `replica --help`.

use std::process::ExitCode;

fn main() -> ExitCode {
    shedlock_demo::cli::main("cluster")
}
