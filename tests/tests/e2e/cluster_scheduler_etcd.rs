//! Fire claims on etcd across real replica processes (`replica run` on `etcd://` URLs), each
//! test on a private etcd of its own (shedlock-etcd's test support: free loopback ports, every
//! process killed at the end, also on panic), the run log in the shared Postgres
//! (`--runlog-url`), whose clock is the true one (replicas under libfaketime read it too):
//!
//! - a three-member cluster whose leader is killed (`kill -9`) a few milliseconds after a fire's
//!   instant, while the replicas claim it: no fire ran twice, no runs overlapped, no replica fell
//!   back to plain locks, and every fire of the run ran once, except fires due around the kill
//!   (up to the end of the longest hold from before the election) that a replica reported
//!   missed with a reason, or that met the lock held (skipped, never queued) by a run claimed
//!   late in its window while etcd recovered, or by a run whose release failed during the
//!   election or was in flight at the kill and waited for the new leader with the fire's claims;
//!   fires due around a later stall of etcd that a probe's linearizable reads saw (on a loaded
//!   machine: a member's answer later than the call timeout, or a new raft term), reported
//!   missed because the store failed or meeting the lock held, are excused too, and only those;
//!   each job ran again after the kill's longest hold;
//! - three replicas whose clocks are 2 s behind, right and 2 s ahead: etcd has no clock, so a
//!   claim's "not before `F`" and its window's end are each replica's own clock's, and the
//!   replica ahead runs fires early by the true clock (allowed, counted and printed); still no
//!   fire ran twice, no runs overlapped, each claim was inside its window by its replica's clock
//!   (the lock record's `locked_at`), and from the first fire the replica ahead ran, every fire
//!   ran once or was reported missed with a reason. Before that (the warm-up) the replicas claim
//!   different fires at the same instant and race for the lock; the fires that lost are
//!   reported, not asserted.
//!
//! Each prints one `SUMMARY` line: fires checked, runs, fires run twice, early runs (run started
//! before `F` by the database's clock), fires missed. Every wait polls the replicas' events or
//! etcd against a deadline; the sleeps are the scenario's length and timing.

#[path = "../../../shedlock-etcd/tests/integration/support/mod.rs"]
mod etcd_support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use etcd_support::Cluster as Etcd;
use shedlock_demo::database::Database;
use shedlock_demo::event::Event;
use shedlock_demo::runlog::{RunRecord, fires_run_twice, overlaps};
use tokio::time::Instant;

use crate::cluster_scheduler::{
    SKEWS, assert_no_fall_back, assert_skews_were_real, period_us, wall_us,
};
use crate::fault_support::{self, Cluster, Replica, Stamped};

/// Replicas on the etcd at `url`, running `jobs`, their run log in the shared Postgres; `None`
/// (after a skip notice) without `SHEDLOCK_PG_URL`.
fn cluster(url: &str, name: &str, jobs: &[&str]) -> Option<Cluster> {
    let runlog = fault_support::postgres_url()?;
    let mut cluster = Cluster::new(url, name, jobs);
    cluster.runlog_url = Some(runlog);
    // The lock table is the key prefix on etcd, which ends with '/'.
    cluster.lock_table.push('/');
    Some(cluster)
}

/// A private etcd of `size` members (`None` after a skip notice when there is no binary).
async fn private_etcd(size: usize) -> Option<Etcd> {
    let bin = etcd_support::etcd_binary()?;
    Some(
        tokio::task::spawn_blocking(move || Etcd::start(&bin, size))
            .await
            .expect("start a private etcd"),
    )
}

/// The replicas' events about `job`'s fires `tick - 2 ..= tick + 2`, one per line.
fn events_around(events: &[Stamped], job: &str, tick: u64) -> String {
    let near = |j: &str, t: u64| j == job && t.abs_diff(tick) <= 2;
    let mut out = String::new();
    for s in events {
        let shown = match &s.event {
            Event::Ran { job, tick, .. }
            | Event::Done { job, tick, .. }
            | Event::Skipped { job, tick, .. }
            | Event::Missed { job, tick, .. }
            | Event::Error { job, tick, .. } => near(job, *tick),
            _ => false,
        };
        if shown {
            let _ = writeln!(out, "  #{} {:?}", s.incarnation, s.event);
        }
    }
    out
}

/// Asserts that no fire ran twice (showing the events around each one that did) and that no
/// two runs of a job overlapped (database clock).
fn assert_once_and_apart(cluster: &Cluster, events: &[Stamped], records: &[RunRecord]) {
    let twice = fires_run_twice(records);
    if !twice.is_empty() {
        let period = period_us(cluster);
        let mut detail = String::new();
        for (job, fire, runs) in &twice {
            let tick = u64::try_from(fire / period).unwrap_or(0);
            let rows: Vec<&RunRecord> = records
                .iter()
                .filter(|r| r.job == *job && r.fire_us == *fire)
                .collect();
            let _ = writeln!(
                detail,
                "{job} fire {fire} µs (tick {tick}) ran {runs} times: {rows:#?}\nevents:\n{}",
                events_around(events, job, tick)
            );
        }
        panic!(
            "fires run twice:\n{detail}replica logs:\n{}",
            cluster.log_tails()
        );
    }
    let found = overlaps(records);
    assert!(
        found.is_empty(),
        "{} overlapping runs, e.g. {:#?}",
        found.len(),
        found.first()
    );
}

/// The fires each replica reported missed, with their reasons: (job, tick) → reasons.
///
/// A replica names the fires it decided (`skipped`, `missed`) from its scheduler's counters and
/// the fire its job loop waits for (`JobStatus::next_fire`), polled every 10 ms; a job loop that
/// counted a fire missed and then stayed on it (settling a claim whose reply was lost, until
/// etcd answers again) is polled with the counter already up and `next_fire` not yet moved on,
/// so the fires it then counts at once are named from that one on: the same tick twice, the last
/// fire unnamed. A job loop decides its fires one after another, each once, so each of a
/// replica's decisions (`ran`, whose tick is its run's own, `skipped`, `missed`) is named here no
/// earlier than the fire after its previous one.
fn missed_fires(events: &[Stamped]) -> BTreeMap<(String, u64), Vec<String>> {
    let mut last: BTreeMap<(&str, u32, &str), u64> = BTreeMap::new();
    let mut missed: BTreeMap<(String, u64), Vec<String>> = BTreeMap::new();
    for s in events {
        let (replica, job, tick, reason) = match &s.event {
            Event::Ran {
                replica, job, tick, ..
            }
            | Event::Skipped {
                replica, job, tick, ..
            } => (replica, job, *tick, None),
            Event::Missed {
                replica,
                job,
                tick,
                reason,
            } => (replica, job, *tick, Some(reason)),
            _ => continue,
        };
        let previous = last.entry((replica.as_str(), s.incarnation, job.as_str()));
        let tick = match previous {
            std::collections::btree_map::Entry::Occupied(mut e) => {
                let tick = tick.max(*e.get() + 1);
                e.insert(tick);
                tick
            }
            std::collections::btree_map::Entry::Vacant(e) => *e.insert(tick),
        };
        if let Some(reason) = reason {
            missed
                .entry((job.clone(), tick))
                .or_default()
                .push(reason.clone());
        }
    }
    missed
}

/// The fires of `job` due in `[from_us, to_us)` that did not run exactly once: (tick, F in µs,
/// runs).
fn unrun_fires(
    records: &[RunRecord],
    job: &str,
    period: i64,
    from_us: i64,
    to_us: i64,
) -> (usize, Vec<(u64, i64, usize)>) {
    let mut checked = 0;
    let mut unrun = Vec::new();
    let mut fire = (from_us + period - 1) / period * period;
    while fire < to_us {
        let runs = records
            .iter()
            .filter(|r| r.job == job && r.fire_us == fire)
            .count();
        if runs != 1 {
            unrun.push((u64::try_from(fire / period).unwrap_or(0), fire, runs));
        }
        checked += 1;
        fire += period;
    }
    (checked, unrun)
}

async fn drop_runs_table(cluster: &Cluster, db: &Database) {
    if let Err(error) = db.drop_table(&cluster.runs_table).await {
        eprintln!("could not drop {}: {error}", cluster.runs_table);
    }
}

// ---------------------------------------------------------------------------------------------
// A member killed while fires are claimed.

/// Kills (`kill -9`) the etcd cluster's leader a few milliseconds (0–20) after the next fire's
/// instant of a job every second, while the replicas' claims of that fire are on their way (a
/// committed claim whose reply is lost is one of the cases). Returns the member's index and the
/// wall clock (µs) just before and just after the kill.
async fn kill_the_leader_at_a_fire(etcd: &mut Etcd) -> (usize, i64, i64) {
    let leader = tokio::task::block_in_place(|| etcd.leader()).expect("the etcd leader");
    let period = 1_000_000;
    let now = wall_us();
    let jitter = i64::try_from(fault_support::random_below(20_000)).unwrap_or(0);
    let kill_at = (now / period + 1) * period + jitter;
    let wait = u64::try_from(kill_at - now).unwrap_or(0);
    tokio::time::sleep(Duration::from_micros(wait)).await; // the scenario's timing
    let before = wall_us();
    tokio::task::block_in_place(|| etcd.kill(leader));
    (leader, before, wall_us())
}

/// A time etcd could not serve the replicas (wall clock, µs since the Unix epoch): the leader's
/// kill and the election after it, or a stall the [`Probe`] saw.
struct Outage {
    cause: Cause,
    /// When it began: just before the kill; a stall's last quick probe round before it (the
    /// stall began after that round answered).
    before: i64,
    /// When it ended: a surviving member first reported a new leader (an upper bound of its
    /// election); a stall's first quick probe round after it.
    recovered: i64,
}

#[derive(Clone, Copy, PartialEq)]
enum Cause {
    /// The leader's kill and the election after it.
    Kill,
    /// A stall the probe saw; `election` when the raft term changed in it.
    Stall { election: bool },
}

impl Outage {
    /// Whether etcd elected a new leader in it.
    fn elected(&self) -> bool {
        matches!(self.cause, Cause::Kill | Cause::Stall { election: true })
    }

    /// The latest a hold from before the outage can last, when a leader was elected in it: the
    /// new etcd leader renews every lease to its full TTL plus an election timeout when it
    /// takes over, and expired leases go in a sweep every 500 ms (shedlock-etcd's
    /// documentation); `at_most` 3 s is a 3 s lease.
    fn holds_end_us(&self) -> i64 {
        let ttl = Duration::from_secs(3).max(shedlock_etcd::ETCD_MIN_TTL);
        let longest = ttl + ELECTION_TIMEOUT + Duration::from_millis(500);
        self.recovered + i64::try_from(longest.as_micros()).unwrap_or(i64::MAX)
    }

    /// Whether fire `fire` is due around this outage. Around the kill: from the window the kill
    /// fell in to the end of the longest hold from before the election. Around a stall: from
    /// the window of a claim sent a call timeout before it began (a claim waits that long for
    /// its answer) to a call timeout and a period after it ended (a claim sent as it ended, and
    /// the window that claim's failure lost), or to the end of the longest hold when etcd
    /// elected a leader in it.
    fn covers(&self, fire: i64, period: i64, call_timeout_us: i64) -> bool {
        match self.cause {
            Cause::Kill => fire >= self.before / period * period && fire < self.holds_end_us(),
            Cause::Stall { election } => {
                let end = if election {
                    self.holds_end_us()
                } else {
                    self.recovered + call_timeout_us + period
                };
                fire >= (self.before - call_timeout_us) / period * period && fire < end
            }
        }
    }
}

impl std::fmt::Debug for Outage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.cause {
            Cause::Kill => "the leader's kill and the election",
            Cause::Stall { election: true } => "a stall with an election",
            Cause::Stall { election: false } => "a stall",
        };
        write!(f, "{what} from {} µs to {} µs", self.before, self.recovered)
    }
}

/// Reads one key, linearizably (the member asks the leader, which confirms with a quorum that it
/// still leads), from every running member every 100 ms, on a thread of its own from the
/// replicas' start to the run's end. A slow machine can stall etcd long after the kill's
/// election (a member's heartbeats or disk writes late beyond the election timeout start
/// another election; requests wait or fail meanwhile), and the replicas' claims then fail as
/// they do at the kill. A round is a stall when a member that accepted the connection did not
/// answer within the replicas' call timeout (a replica's call to it would have failed), or when
/// the raft term changed since the previous round (an election, however short, fails the
/// proposals in flight). Fires are excused around those stalls only ([`Outage::covers`]), and
/// only when a replica reported the store failing ([`check_kill_coverage`]).
struct Probe {
    stop: Arc<AtomicBool>,
    rounds: Option<std::thread::JoinHandle<Vec<Round>>>,
}

/// One probe round: when it started and ended (µs), and whether it was a stall and saw a new
/// raft term.
struct Round {
    start: i64,
    end: i64,
    stalled: bool,
    new_term: bool,
}

/// Stall rounds less than this apart (µs) are one stall.
const STALL_GAP_US: i64 = 500_000;

impl Probe {
    fn start(etcd: &Etcd, call_timeout: Duration) -> Self {
        let ports: Vec<u16> = etcd.members.iter().map(|m| m.client_port).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let rounds = std::thread::spawn(move || {
            let mut rounds = Vec::new();
            let mut term: Option<u64> = None;
            while !stopped.load(Ordering::Relaxed) {
                let start = wall_us();
                let mut stalled = false;
                let mut seen = None;
                for &port in &ports {
                    let body = r#"{"key":"cHJvYmU="}"#;
                    match etcd_support::post_within(port, "/v3/kv/range", body, call_timeout) {
                        Ok(answer) => {
                            let t = answer["header"]["raft_term"]
                                .as_str()
                                .and_then(|t| t.parse().ok());
                            seen = seen.max(t);
                        }
                        // A killed member: the replicas skip it at once too.
                        Err(etcd_support::PostFailure::Refused(_)) => {}
                        Err(etcd_support::PostFailure::Failed(_)) => stalled = true,
                    }
                }
                let end = wall_us();
                let new_term = term.is_some() && seen.is_some() && seen != term;
                term = seen.or(term);
                rounds.push(Round {
                    start,
                    end,
                    stalled: stalled || new_term,
                    new_term,
                });
                std::thread::sleep(Duration::from_millis(100)); // the probe's cadence
            }
            rounds
        });
        Self {
            stop,
            rounds: Some(rounds),
        }
    }

    /// Ends the probe; the stalls it saw, each from the last quick round before it to the first
    /// quick round after it, those less than [`STALL_GAP_US`] apart merged.
    fn finish(mut self) -> Vec<Outage> {
        self.stop.store(true, Ordering::Relaxed);
        let rounds = self
            .rounds
            .take()
            .map(|r| r.join().expect("the probe thread"))
            .unwrap_or_default();
        let mut stalls: Vec<Outage> = Vec::new();
        let mut last_quick_end: Option<i64> = None;
        let mut open = false;
        for round in &rounds {
            if !round.stalled {
                if open && let Some(stall) = stalls.last_mut() {
                    stall.recovered = round.end;
                }
                open = false;
                last_quick_end = Some(round.end);
                continue;
            }
            let before = last_quick_end.unwrap_or(round.start);
            match stalls.last_mut() {
                Some(stall) if open || before <= stall.recovered + STALL_GAP_US => {
                    stall.recovered = stall.recovered.max(round.end);
                    if round.new_term {
                        stall.cause = Cause::Stall { election: true };
                    }
                }
                _ => stalls.push(Outage {
                    cause: Cause::Stall {
                        election: round.new_term,
                    },
                    before,
                    recovered: round.end,
                }),
            }
            open = true;
        }
        stalls
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// etcd's default `--election-timeout`, which the private clusters run with.
const ELECTION_TIMEOUT: Duration = Duration::from_secs(1);

/// Polls (every 20 ms, for at most 30 s: on a loaded two-core machine an election and the status
/// calls that see it have taken more than 10 s) until a running member reports a leader other
/// than member `killed`; the wall clock (µs) then.
async fn wait_for_new_leader(etcd: &Etcd, killed: usize) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let leader = tokio::task::block_in_place(|| etcd.leader());
        if leader.is_some_and(|l| l != killed) {
            return wall_us();
        }
        assert!(
            Instant::now() < deadline,
            "the surviving etcd members elected no leader within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What [`check_kill_coverage`] found.
struct KillCoverage {
    /// Fires checked.
    fires: usize,
    /// Fires reported missed: (job, F minus the kill in ms, the outage around it, reasons).
    missed: Vec<(String, i64, String, Vec<String>)>,
    /// Fires not run because they met the lock held: (job, F minus the kill in ms, the outage
    /// around it, why, the holding run's replica and tick).
    held: Vec<(String, i64, String, &'static str, String)>,
}

/// The reason a replica gives for a fire it missed because its claims failed (the demo's).
const STORE_FAILED: &str = "the store failed while the window was open";

/// Checks that every fire of both jobs due in `range` ran once, except fires due around the
/// kill or a stall the probe saw ([`Outage::covers`]) that a replica reported missed with a
/// reason (around a stall: every reason given, and one of them the store failing), or that met
/// the lock held ([`why_held`]; a fire met while the lock is held is skipped, never queued:
/// docs/guarantees.md).
fn check_kill_coverage(
    cluster: &Cluster,
    events: &[Stamped],
    records: &[RunRecord],
    range: (i64, i64),
    (kill, stalls): (&Outage, &[Outage]),
) -> KillCoverage {
    let period = period_us(cluster);
    let call_timeout_us = i64::try_from(cluster.call_timeout.as_micros()).unwrap_or(i64::MAX);
    let missed = missed_fires(events);
    let mut coverage = KillCoverage {
        fires: 0,
        missed: Vec::new(),
        held: Vec::new(),
    };
    for job in ["ka", "kb"] {
        let (checked, unrun) = unrun_fires(records, job, period, range.0, range.1);
        coverage.fires += checked;
        for (tick, fire, runs) in unrun {
            assert_eq!(runs, 0, "{job} fire {fire} ran {runs} times");
            let since_kill_ms = (fire - kill.before) / 1000;
            let around: Vec<&Outage> = std::iter::once(kill)
                .chain(stalls)
                .filter(|o| o.covers(fire, period, call_timeout_us))
                .collect();
            assert!(
                !around.is_empty(),
                "{job} fire {fire} µs (tick {tick}) did not run, away from the kill and every \
                 stall the probe saw ({kill:?}; {stalls:?}); events:\n{}logs:\n{}",
                events_around(events, job, tick),
                cluster.log_tails()
            );
            if let Some(reasons) = missed.get(&(job.to_owned(), tick))
                && reasons.iter().all(|r| !r.is_empty())
                && let Some(outage) = around
                    .iter()
                    .find(|o| o.cause == Cause::Kill || reasons.iter().any(|r| r == STORE_FAILED))
            {
                coverage.missed.push((
                    job.to_owned(),
                    since_kill_ms,
                    format!("{outage:?}"),
                    reasons.clone(),
                ));
                continue;
            }
            let Some((outage, why, holder)) = around.iter().find_map(|outage| {
                why_held(cluster, records, job, fire, outage).map(|(w, h)| (outage, w, h))
            }) else {
                panic!(
                    "{job} fire {fire} µs (tick {tick}) did not run, and no replica reported it \
                     missed for a reason that outage allows, nor did it meet the lock held by a \
                     run in progress, after a failed release, or by a release in flight at the \
                     start of an outage around it ({around:?}); events:\n{}\
                     runs: {records:#?}\nlogs:\n{}",
                    events_around(events, job, tick),
                    cluster.log_tails()
                );
            };
            coverage.held.push((
                job.to_owned(),
                since_kill_ms,
                format!("{outage:?}"),
                why,
                format!("{} tick {}", holder.replica, holder.tick),
            ));
        }
    }
    coverage
}

/// Why fire `F` of `job`, due around `outage` (the kill, or a stall the probe saw: below, "the
/// kill" is its start and "the new leader" its end), met its lock held, if it did: the lock's
/// last holder before `F` (the run of the job with the latest fire before it) was
///
/// - still running at `F` (its run, claimed late in its window while the store recovered, ended
///   less than 100 ms before `F`: its release follows the run's end), or
/// - ended before `F`, its release sent at most two call timeouts before the kill or after it,
///   and its replica logged within two call timeouts of the run's end that it could not release
///   the lock (a release that records the run falls back to a plain release when the recording
///   fails: two calls, each with its timeout), whose hold may then last past `F` (to its
///   `lock_until`, or, when etcd elected a leader in the outage, as the new leader renewed its
///   lease: [`Outage::holds_end_us`]), or
/// - when etcd elected a leader in the outage: ended before `F`, at most
///   [`IN_FLIGHT_AT_KILL_US`] before the kill or after it (its release, sent at the run's end,
///   was still in flight when the leader died), with `F` before the new leader was seen and
///   before that release's call timeouts ran out: the release and `F`'s claims then waited
///   together for a leader, and etcd orders them as the new leader receives them, so the claims
///   may be answered before the release lands (a release that lands late is no failure, and
///   logs nothing; one that failed is the case above). Without an election the leader orders
///   them as they arrive, the release first.
fn why_held<'a>(
    cluster: &Cluster,
    records: &'a [RunRecord],
    job: &str,
    fire: i64,
    outage: &Outage,
) -> Option<(&'static str, &'a RunRecord)> {
    let call_timeout_us = i64::try_from(cluster.call_timeout.as_micros()).unwrap_or(i64::MAX);
    let holder = records
        .iter()
        .filter(|r| r.job == job && r.fire_us < fire)
        .max_by_key(|r| r.fire_us)?;
    let end = holder.ended_us?;
    if end > fire - 100_000 && end + call_timeout_us >= outage.before {
        return Some(("run in progress", holder));
    }
    let release_us = 2 * call_timeout_us;
    let renewed = if outage.elected() {
        outage.holds_end_us()
    } else {
        0
    };
    let failed = end <= fire
        && end + release_us >= outage.before
        && fire < holder.lock_until_us.max(renewed)
        && release_failed(
            cluster,
            &holder.replica,
            &format!("{}{job}", cluster.prefix),
            (end, end + release_us + 500_000),
        );
    if failed {
        return Some(("release failed", holder));
    }
    let queued = outage.elected()
        && end <= fire
        && end + IN_FLIGHT_AT_KILL_US >= outage.before
        && fire < end + release_us
        && fire < outage.recovered;
    queued.then_some(("release in flight at the outage's start", holder))
}

/// How long (µs) before the kill a release may have been sent and still be in flight when the
/// leader died: far more than a healthy etcd takes to commit one on loopback, far less than the
/// 800 ms or more between a run's end and the next fire.
const IN_FLIGHT_AT_KILL_US: i64 = 100_000;

/// Whether replica `label` logged that it failed to release `lock`, at a time (its log's
/// timestamp, µs since the Unix epoch) in `within`.
fn release_failed(cluster: &Cluster, label: &str, lock: &str, within: (i64, i64)) -> bool {
    let quoted = format!("\"{lock}\"");
    let logged_at = |line: &str| {
        let plain = strip_ansi(line);
        let stamp = plain.split_whitespace().next()?;
        shedlock_core::provider::chrono::DateTime::parse_from_rfc3339(stamp)
            .ok()
            .map(|t| t.timestamp_micros())
    };
    std::fs::read_dir(cluster.logs.path())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{label}."))
        })
        .any(|e| {
            std::fs::read_to_string(e.path())
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains("failed to release lock") && l.contains(&quoted))
                .filter_map(logged_at)
                .any(|at| within.0 <= at && at <= within.1)
        })
}

/// `line` without its terminal colour sequences (`ESC [ … m`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn killed_etcd_leader_while_fires_are_claimed_runs_no_fire_twice() {
    let test = "killed_etcd_leader_while_fires_are_claimed_runs_no_fire_twice";
    let Some(mut etcd) = private_etcd(3).await else {
        return;
    };
    let Some(cluster) = cluster(
        &etcd.url(),
        "etcdkill",
        &[
            "ka,every=1s,at_most=3s,work=50ms..200ms",
            "kb,every=1s,at_most=3s,work=50ms..200ms",
        ],
    ) else {
        return;
    };
    cluster.create_schema().await;
    let db = cluster.runlog().await;
    let mut replicas: Vec<Replica> = Vec::new();
    for label in ["r1", "r2", "r3"] {
        replicas.push(cluster.start(label).await);
    }
    let probe = Probe::start(&etcd, cluster.call_timeout);
    let from_us = wall_us();
    let started = Instant::now();
    // Warm-up: both jobs run, a few fires each.
    cluster
        .events
        .wait_for("six runs", Duration::from_secs(30), |all| {
            all.iter()
                .filter(|s| s.at > started && matches!(s.event, Event::Ran { .. }))
                .count()
                >= 6
        })
        .await;
    let (leader, killed_from_us, killed_us) = kill_the_leader_at_a_fire(&mut etcd).await;
    let elected_us = wait_for_new_leader(&etcd, leader).await;
    let period = period_us(&cluster);
    let kill = Outage {
        cause: Cause::Kill,
        before: killed_from_us,
        recovered: elected_us,
    };
    // The run's length, not a synchronisation: 10 s from the kill.
    let rest = Duration::from_secs(10).saturating_sub(Duration::from_micros(
        u64::try_from(wall_us() - killed_us).unwrap_or(0),
    ));
    tokio::time::sleep(rest).await;
    let to_us = wall_us();
    cluster.stop_all(replicas).await;
    let stalls = tokio::task::block_in_place(|| probe.finish());

    let events = cluster.events.all();
    let records = cluster.records(&db).await;
    assert_no_fall_back(&cluster);
    assert_once_and_apart(&cluster, &events, &records);

    let coverage = check_kill_coverage(
        &cluster,
        &events,
        &records,
        (from_us + period, to_us - period),
        (&kill, &stalls),
    );
    let fires = coverage.fires;
    assert!(fires >= 20, "{test}: only {fires} fires checked");
    // Fires after the longest hold from before the election were checked too, and the replicas
    // recovered: each job ran one of them at least (whatever stalls came later).
    assert!(
        to_us - 2 * period > kill.holds_end_us(),
        "{test}: the run ended before the recovery could be checked (new leader {} ms after the \
         kill)",
        (elected_us - killed_us) / 1000
    );
    for job in ["ka", "kb"] {
        assert!(
            records
                .iter()
                .any(|r| r.job == job && r.fire_us >= kill.holds_end_us()),
            "{test}: {job} ran no fire after the kill's longest hold ({kill:?}; stalls: \
             {stalls:?})"
        );
    }
    let early = records.iter().filter(|r| r.started_us < r.fire_us).count();
    let errors = events
        .iter()
        .filter(|s| matches!(s.event, Event::Error { .. }))
        .count();
    let kill_fire = killed_from_us / period * period;
    eprintln!(
        "SUMMARY {test}: fires={fires} runs={} twice=0 early={early} missed={} \
         (killed member m{leader}, the leader, {} ms into a fire's window; a new leader seen {} ms \
         after the kill; error events={errors}; \
         missed (job, ms after the kill, outage, reasons): {:?}; not run, met the lock held \
         (job, ms after the kill, outage, why, holder): {:?}; stalls the probe saw: {:?})",
        records.len(),
        coverage.missed.len(),
        (killed_from_us - kill_fire) / 1000,
        (elected_us - killed_us) / 1000,
        coverage.missed,
        coverage.held,
        stalls,
    );
    drop_runs_table(&cluster, &db).await;
}

// ---------------------------------------------------------------------------------------------
// Skewed replica clocks.

/// What [`check_skewed_coverage`] found.
struct Coverage {
    /// Fires checked after the warm-up.
    fires: usize,
    /// Fires after the warm-up not run, reported missed (ticks).
    missed: Vec<u64>,
    /// The first fire the replica ahead ran.
    ahead_first_tick: Option<u64>,
    /// From the replica ahead being ready to its first claim (true clock), in seconds.
    warm_up_secs: f64,
    /// Fires from the replica ahead's start to the end of the warm-up that nobody ran nor
    /// reported missed (each replica that decided them skipped them), by tick.
    warm_up_lost: Vec<u64>,
}

/// Checks that every fire ran once or was reported missed, from the end of the warm-up to
/// `to_us`.
///
/// The replicas start in `SKEWS` order, the one 2 s ahead last. Until it first wins a claim,
/// the three claim different fires at the same true instant (the one behind `F - 2 s`, the
/// other `F`, the one ahead `F + 2 s`) and race for the one lock: the losers' fires meet it held
/// (never queued), and once the one ahead wins, the fires it lost before are older than the
/// recorded fire, which closes them for everybody. Those fires are reported, not asserted.
/// From the first fire the one ahead ran, it claims each fire first, 2 s early by the true
/// clock, and the others find it recorded: each must run once, or be reported missed.
fn check_skewed_coverage(
    cluster: &Cluster,
    events: &[Stamped],
    records: &[RunRecord],
    to_us: i64,
) -> Coverage {
    let period = period_us(cluster);
    let (ahead, ..) = SKEWS[SKEWS.len() - 1];
    let ahead_first = records
        .iter()
        .filter(|r| r.replica == ahead)
        .map(|r| r.fire_us)
        .min()
        .unwrap_or_else(|| panic!("{ahead} (the clock ahead) ran no fire: {records:#?}"));
    // Its own clock when it was ready, and that instant by the test's clock.
    let (ready_at, ready_wall_us) = events
        .iter()
        .find_map(|s| match &s.event {
            Event::Ready {
                replica, wall_ms, ..
            } if replica == ahead => Some((s.at, wall_ms * 1000)),
            _ => None,
        })
        .expect("the replica ahead was ready");
    let claimed_first = events
        .iter()
        .find(|s| s.event.replica() == ahead && matches!(s.event, Event::Ran { .. }))
        .map_or(ready_at, |s| s.at);
    let missed = missed_fires(events);
    let (fires, unrun) = unrun_fires(records, "tick", period, ahead_first, to_us);
    for (tick, fire, runs) in &unrun {
        assert_eq!(*runs, 0, "fire {fire} ran {runs} times");
        let reasons = missed.get(&("tick".to_owned(), *tick));
        assert!(
            reasons.is_some_and(|r| r.iter().all(|r| !r.is_empty())),
            "fire {fire} µs (tick {tick}), after the replica ahead ran its first fire, did not \
             run and no replica reported it missed; events:\n{}logs:\n{}",
            events_around(events, "tick", *tick),
            cluster.log_tails()
        );
    }
    // The warm-up's fires: from the first the one ahead could claim (its clock when ready).
    let (_, lost) = unrun_fires(records, "tick", period, ready_wall_us, ahead_first);
    let mut warm_up_lost = Vec::new();
    for (tick, fire, runs) in lost {
        assert_eq!(runs, 0, "fire {fire} ran {runs} times");
        if missed.contains_key(&("tick".to_owned(), tick)) {
            continue;
        }
        assert!(
            events
                .iter()
                .any(|s| matches!(&s.event, Event::Skipped { tick: t, .. } if *t == tick)),
            "fire {fire} µs (tick {tick}) of the warm-up was neither run nor decided by any \
             replica; events:\n{}",
            events_around(events, "tick", tick)
        );
        warm_up_lost.push(tick);
    }
    Coverage {
        fires,
        missed: unrun.iter().map(|(t, ..)| *t).collect(),
        ahead_first_tick: u64::try_from(ahead_first / period).ok(),
        warm_up_secs: claimed_first.duration_since(ready_at).as_secs_f64(),
        warm_up_lost,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn skewed_replicas_on_etcd_run_each_fire_at_most_once() {
    let test = "skewed_replicas_on_etcd_run_each_fire_at_most_once";
    let Some(lib) = fault_support::libfaketime() else {
        assert!(
            !fault_support::required(),
            "{test}: SHEDLOCK_REQUIRE_DB=1 but libfaketime is not installed"
        );
        eprintln!("SKIPPED {test}: libfaketime is not installed (apt-get install faketime)");
        return;
    };
    let Some(etcd) = private_etcd(1).await else {
        return;
    };
    let Some(cluster) = cluster(
        &etcd.url(),
        "etcdskew",
        &["tick,every=1s,at_most=5s,work=50ms..300ms"],
    ) else {
        return;
    };
    cluster.create_schema().await;
    let db = cluster.runlog().await;
    let mut replicas = Vec::new();
    for (label, offset, _) in SKEWS {
        let env: Vec<(&str, String)> = if offset.is_empty() {
            Vec::new()
        } else {
            vec![
                ("LD_PRELOAD", lib.display().to_string()),
                ("FAKETIME", offset.to_owned()),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_owned()),
            ]
        };
        replicas.push(cluster.start_with(label, &cluster.url, &env).await);
    }
    tokio::time::sleep(Duration::from_secs(16)).await; // the run's length, not a synchronisation
    let to_us = wall_us();
    cluster.stop_all(replicas).await;

    let events = cluster.events.all();
    let records = cluster.records(&db).await;
    assert_skews_were_real(&events);
    assert_no_fall_back(&cluster);
    assert_once_and_apart(&cluster, &events, &records);
    // By the claiming replica's own clock (etcd's "now" in a claim; the lock record's
    // `locked_at`), each claim was inside its fire's window.
    let period = period_us(&cluster);
    for run in &records {
        assert!(
            run.fire_us <= run.locked_at_us && run.locked_at_us < run.fire_us + period,
            "a claim outside its fire's window by its replica's clock: {run:?}"
        );
    }
    let coverage = check_skewed_coverage(&cluster, &events, &records, to_us - period);
    assert!(
        coverage.fires >= 5,
        "{test}: only {} fires checked after the warm-up (the replica ahead first ran tick {:?})",
        coverage.fires,
        coverage.ahead_first_tick
    );
    // Every replica took part: it ran fires or was told another had claimed them.
    for (label, ..) in SKEWS {
        assert!(
            events.iter().any(|s| s.event.replica() == label
                && matches!(s.event, Event::Ran { .. } | Event::Skipped { .. })),
            "{label} decided no fire; logs:\n{}",
            cluster.log_tails()
        );
    }
    // Early by the true clock: the run started (database clock) before its fire's instant, so
    // its claim was earlier still; late: it started after its window by the true clock.
    let mut early: BTreeMap<&str, (usize, i64)> = BTreeMap::new();
    for run in records.iter().filter(|r| r.started_us < r.fire_us) {
        let entry = early.entry(run.replica.as_str()).or_default();
        entry.0 += 1;
        entry.1 = entry.1.max((run.fire_us - run.started_us) / 1000);
    }
    let late = records
        .iter()
        .filter(|r| r.started_us >= r.fire_us + period)
        .count();
    let per_replica: BTreeMap<&str, usize> = records.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.replica.as_str()).or_default() += 1;
        m
    });
    eprintln!(
        "SUMMARY {test}: fires={} runs={} twice=0 early={} missed={} (runs per replica \
         {per_replica:?}; early per replica (count, most ms before F) {early:?}; late by the \
         true clock {late}; missed ticks {:?}; warm-up: the replica ahead first ran tick {:?}, \
         {:.1} s after it was ready; fires of the warm-up not run and not reported missed \
         {:?})",
        coverage.fires,
        records.len(),
        early.values().map(|(n, _)| n).sum::<usize>(),
        coverage.missed.len(),
        coverage.missed,
        coverage.ahead_first_tick,
        coverage.warm_up_secs,
        coverage.warm_up_lost,
    );
    drop_runs_table(&cluster, &db).await;
    drop(etcd);
}
