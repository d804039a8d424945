//! Leader election across processes on etcd: two candidate processes (this test binary run
//! again as a child), the leader killed with `kill -9`, the other leads within the bound.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use shedlock_core::{LeaderLatch, LeaderLatchConfig, latch::LeaderState};
use shedlock_etcd::{EtcdLockProvider, testing};

/// Set in a child: `url prefix owner`; the child then runs one latch candidate until killed.
const CHILD_ENV: &str = "SHEDLOCK_ETCD_LATCH_CHILD";
const LEASE: Duration = Duration::from_secs(4);
const RETRY: Duration = Duration::from_millis(500);

fn config(owner: &str) -> LeaderLatchConfig {
    LeaderLatchConfig::builder("leader")
        .owner_id(owner)
        .lease(LEASE)
        .renew_interval(Duration::from_secs(1))
        .renew_deadline(Duration::from_secs(3))
        .acquire_interval(RETRY)
        .acquire_jitter(Duration::from_millis(100))
        .call_timeout(RETRY)
        .build()
        .unwrap()
}

/// Not a test by itself: the body of a candidate process (does nothing unless `CHILD_ENV`).
#[tokio::test]
async fn latch_candidate_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let [url, prefix, owner]: [&str; 3] = spec.split(' ').collect::<Vec<_>>().try_into().unwrap();
    let provider = EtcdLockProvider::builder(url)
        .prefix(prefix)
        .build()
        .unwrap();
    let latch = LeaderLatch::start(provider, config(owner)).unwrap();
    let mut states = latch.watch();
    loop {
        let state = states.borrow_and_update().clone();
        if let LeaderState::Leader { term } = &state {
            // On a line of its own (the harness has printed "test … " without a newline).
            println!(
                "\nshedlock-latch {owner} leads {}",
                term.fencing_token().unwrap_or(-1)
            );
        }
        if states.changed().await.is_err() {
            return;
        }
    }
}

/// Kills the candidates when dropped (also on panic).
struct Candidates(Vec<Child>);

impl Drop for Candidates {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
fn the_leader_process_killed_the_other_leads_within_the_bound() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let Some(url) = testing::etcd_url() else {
        return;
    };
    let prefix = testing::unique_prefix();
    let exe = std::env::current_exe().unwrap();
    let (tx, rx) = mpsc::channel::<(usize, String, i64)>();
    let mut candidates = Candidates(Vec::new());
    for i in 0..2 {
        let mut child = Command::new(&exe)
            .args([
                "latch_candidate_process",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, format!("{url} {prefix} candidate-{i}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let words: Vec<&str> = line.split(' ').collect();
                if let ["shedlock-latch", owner, "leads", token] = words[..] {
                    let _ = tx.send((i, owner.to_owned(), token.parse().unwrap_or(-1)));
                }
            }
        });
        candidates.0.push(child);
    }

    let (first, _, first_token) = rx.recv_timeout(Duration::from_secs(20)).expect("a leader");
    candidates.0[first].kill().unwrap(); // SIGKILL: no release, the lease must run out
    let killed = Instant::now();
    let (second, _, second_token) = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the other candidate leads");
    let took = killed.elapsed();
    assert_ne!(second, first, "the killed process cannot lead again");
    assert!(
        second_token > first_token,
        "{second_token} after {first_token}"
    );
    // Not before the dead leader's lease ran out (its last renew was at most a renew interval
    // before the kill).
    assert!(
        took + Duration::from_secs(1) >= LEASE,
        "took over after {took:?}, inside the lease"
    );
    // The bound: the lease (whole seconds, as asked here) and etcd's 500 ms expiry sweep, then
    // one retry interval plus jitter, with a second of slack for a loaded machine.
    let bound = LEASE + Duration::from_millis(500) + RETRY + Duration::from_millis(100);
    assert!(
        took <= bound + Duration::from_secs(1),
        "took {took:?}, bound {bound:?}"
    );
    eprintln!("leader process killed: the other led after {took:?} (bound {bound:?})");
}
