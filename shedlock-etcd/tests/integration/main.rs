//! shedlock-etcd's integration tests in one test binary (one link, their tests side by side): the
//! store against `SHEDLOCK_ETCD_URL` (`etcd`) and against private members started by the test
//! (`cluster`). `leader_process.rs` keeps a binary of its own: it runs that binary again as the
//! candidate processes.

mod support;

mod cluster;
mod etcd;
mod jobs;
