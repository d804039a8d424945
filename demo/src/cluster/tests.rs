//! Unit tests of the board's lines, the summary's parsing, and a run refused before it starts.

use super::*;

fn live(labels: &[&str]) -> BTreeSet<String> {
    labels.iter().map(|l| (*l).to_owned()).collect()
}

fn ran(replica: &str, job: &str, tick: u64) -> Event {
    Event::Ran {
        replica: replica.into(),
        job: job.into(),
        tick,
        token: Some(i64::try_from(tick).unwrap_or_default()),
        trigger: None,
    }
}

fn skipped(replica: &str, job: &str, tick: u64) -> Event {
    Event::Skipped {
        replica: replica.into(),
        job: job.into(),
        tick,
    }
}

#[test]
fn a_group_is_printed_once_every_live_replica_decided() {
    let mut board = Board::new(&[JobSpec::new("sync")]);
    let all = live(&["r1", "r2", "r3"]);
    assert_eq!(board.record(&ran("r1", "sync", 100)), None);
    assert!(board.flush(&all, false).is_empty());
    board.record(&skipped("r2", "sync", 100));
    assert!(board.flush(&all, false).is_empty());
    board.record(&skipped("r3", "sync", 100));
    let lines = board.flush(&all, false);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("#1") && lines[0].contains("ran: r1 (token 100)"),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("skipped: r2 r3"), "{}", lines[0]);

    // The next tick: r1 is still running its run from #1, so everybody skips.
    for r in ["r1", "r2", "r3"] {
        board.record(&skipped(r, "sync", 101));
    }
    let lines = board.flush(&all, false);
    assert!(
        lines[0].contains("ran: -") && lines[0].contains("r1 still running #1"),
        "{lines:?}"
    );

    // A decision for a printed group is reported on its own line.
    let late = board.record(&skipped("r2", "sync", 100));
    assert!(late.is_some_and(|l| l.contains("(late)")));
}

#[test]
fn a_dead_replica_does_not_hold_back_the_board() {
    let mut board = Board::new(&[JobSpec::new("sync")]);
    board.record(&ran("r1", "sync", 7));
    board.record(&skipped("r2", "sync", 7));
    assert!(board.flush(&live(&["r1", "r2", "r3"]), false).is_empty());
    // r3 died: the group is complete for the live ones.
    let lines = board.flush(&live(&["r1", "r2"]), false);
    assert_eq!(lines.len(), 1);
    // r1 dies holding the lock; the next tick says so.
    board.record(&skipped("r2", "sync", 8));
    let lines = board.flush(&live(&["r2"]), false);
    assert!(lines[0].contains("r1 died holding the lock"), "{lines:?}");
}

#[test]
fn a_complete_group_waits_for_the_incomplete_ones_before_it() {
    let mut board = Board::new(&[JobSpec::new("a"), JobSpec::new("b")]);
    let all = live(&["r1", "r2"]);
    board.record(&skipped("r1", "a", 5));
    board.record(&ran("r1", "b", 5));
    board.record(&skipped("r2", "b", 5));
    assert!(
        board.flush(&all, false).is_empty(),
        "b #1 is complete but a #1 is not"
    );
    board.record(&ran("r2", "a", 5));
    let lines = board.flush(&all, false);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].contains(" a ") && lines[1].contains(" b "),
        "{lines:?}"
    );
    // `all` prints incomplete groups too (at the end of the run).
    board.record(&skipped("r1", "a", 6));
    assert_eq!(board.flush(&all, true).len(), 1);
}

#[test]
fn summary_parse_rejects_garbage() {
    assert!("runs=1".parse::<Summary>().is_err());
    assert!("summary: runs=x".parse::<Summary>().is_err());
    assert!("summary: colour=1".parse::<Summary>().is_err());
}

/// Built as `cargo run --example cluster` builds it (no features), a `redis://` demo stops
/// with the feature to turn on before it starts anything: the replica program given here
/// does not exist, so starting one would fail with another error.
#[tokio::test]
#[cfg_attr(
    feature = "redis",
    ignore = "needs a build without the `redis` feature: `cargo test -p shedlock-demo`"
)]
async fn a_store_whose_feature_is_off_is_refused_before_any_replica_starts() {
    let opts = ClusterOptions {
        database_url: Some("redis://127.0.0.1:6379".into()),
        duration: Duration::from_secs(1),
        replicas: 3,
        prefix: "demo-".into(),
        runs_table: "shedlock_demo_runs".into(),
        lock_table: None,
        jobs: Vec::new(),
        kill_after: None,
        stop_on_eof: false,
        cleanup: false,
        call_timeout: None,
        exe: PathBuf::from("/nonexistent/shedlock-replica"),
    };
    let mut out = Vec::new();
    let error = run(opts, &mut out)
        .await
        .expect_err("no Redis store in this build");
    let text = error.to_string();
    assert!(
        text.contains("no Redis store") && text.contains("--features redis"),
        "{text}"
    );
    assert!(out.is_empty(), "nothing was started or printed: {out:?}");
}
