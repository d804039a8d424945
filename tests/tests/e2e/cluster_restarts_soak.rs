//! Soak: fire claims whose replies are lost to real server restarts (docs/guarantees.md,
//! "Scheduled jobs"). One replica in this process, a `Scheduler` with [`JOBS`] jobs every 2 s
//! over a private server, which is crash-restarted [`PLAN`]`.len()` times 1–9 ms after a fire
//! instant, while the fire's 40 claims are in flight (Postgres: `SIGQUIT` to the postmaster, what
//! `pg_ctl -m immediate` sends; Redis: `SIGKILL`, with `--appendfsync always` so that a committed
//! claim survives). Every other restart is quick; the others keep the server down past the
//! fire's window, so that claims whose replies were lost must be released unrun.
//!
//! Ground truth of what committed: on Postgres a trigger copies every change of a lock row into
//! a history table; on Redis the append-only file is read back (every write, in order). From it
//! and the replica's own run log (each run's fire, start and end) the test asserts:
//!
//! - every fire recorded by the replica was run by it, except fires cut by a restart whose window
//!   passed before the server answered again; those were released unrun: their lock ended by the
//!   window's end (or the server's return) plus slack, never left to `at_most`;
//! - no fire ran twice, every run's fire is recorded (by this replica, inside its window);
//! - the scheduler's counters: `claimed_elsewhere` is 0 for every job (one replica), `runs`
//!   matches the run log, each fire between start and shutdown was counted exactly once (run,
//!   held, missed), and the restarts did hit claims (`store_errors` > 0);
//! - a fire whose lock was free at its instant, with the server up for most of its window, was
//!   claimed (a slow reply during a restart once skewed the scheduler's estimate of the store's
//!   clock by half its round trip, and such fires were counted missed without a claim).
//!
//! Every other job runs fires met held late ([`OnHeld::RunLate`]), the others skip them. One
//! summary line per store on stderr, with what is reported but not asserted: fires met held, per
//! policy (and whether the lock had in fact freed inside their window), and how far the
//! scheduler's estimate of the store's clock strayed (store and replica share this machine's
//! clock). A failed check prints, for each fire it names, the scheduler's log of that job
//! around the fire (captured at DEBUG for the whole test binary). About 40 s per store; needs
//! the Postgres binaries or `redis-server` (skipped without them, failing under
//! `SHEDLOCK_REQUIRE_DB=1`).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use shedlock_core::{
    Job, LockingTaskExecutor, Schedule, Scheduler,
    provider::{LockProvider, chrono::Utc},
    scheduler::{JobStatus, OnHeld},
};
use shedlock_redis::{RedisLockProvider, redis};
use shedlock_sqlx::PgLockProvider;
use shedlock_tests::log_capture::LogCapture;
use shedlock_tests::throwaway::Throwaway;
use tokio::sync::watch;
use tokio::time::Instant;

/// The replica's owner id.
const OWNER: &str = "soak-replica";
/// Jobs on the scheduler, all `every 2s`.
const JOBS: usize = 40;
const EVERY: Duration = Duration::from_secs(2);
const EVERY_US: i64 = 2_000_000;
const AT_MOST: Duration = Duration::from_secs(10);
const AT_MOST_US: i64 = 10_000_000;
const CALL_TIMEOUT: Duration = Duration::from_secs(3);
/// How long each run's body works.
const WORK: Duration = Duration::from_millis(3);
/// The restarts: milliseconds after the fire instant, and whether the server stays down past
/// the fire's window (until [`DOWN_UNTIL_US`]).
const PLAN: [(i64, bool); 8] = [
    (9, true),
    (1, false),
    (2, true),
    (5, false),
    (4, true),
    (7, false),
    (3, true),
    (8, false),
];
/// From one restart's fire to the next one's.
const GAP_US: i64 = 2 * EVERY_US;
/// A long outage ends this long after its fire instant (the window ends after 2 s).
const DOWN_UNTIL_US: i64 = 2_300_000;
/// Clean fires after the server's last return, then the shutdown (in the middle of a window).
const CLEAN_FIRES: i64 = 2;
const GRACE: Duration = Duration::from_secs(5);
/// A claim cut by a restart may go unrun only if the server answered again less than this
/// before the window's end (or after it): from then on the scheduler's retries come at least
/// every half of the window's remainder, with a 50 ms floor, through a pool whose dead
/// connections fail once each.
const ANSWERED_LATE_US: i64 = 500_000;
/// The lock of a claim released unrun ends by the window's end (or the server's return) plus
/// this: the scheduler reads the holder again every second while the server fails.
const RELEASE_SLACK_US: i64 = 2_000_000;
/// A run that started this long after its claim committed was adopted after a lost reply (a
/// normal run starts within milliseconds; a retry comes at least 50 ms later).
const ADOPTED_AFTER_US: i64 = 40_000;
/// How often the scheduler's counters are sampled (to attribute `held` counts to fires).
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// How long a server may take to go away or come back.
const SERVER_DEADLINE: Duration = Duration::from_mins(1);
/// The private Postgres's lock table and its history.
const PG_TABLE: &str = "soak_locks";
/// The Redis key prefix.
const REDIS_PREFIX: &str = "soak:";
/// What is captured of the scheduler's log, for the failure messages.
const LOG_FILTER: &str = "shedlock_core=debug,shedlock_redis=debug,shedlock_sqlx=debug";
/// A failure message shows a job's log from this long before a fire to this long after its
/// window.
const LOG_AROUND_US: i64 = 2_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn postgres_restarts_at_fire_instants_lose_no_claim() {
    let test = "postgres_restarts_at_fire_instants_lose_no_claim";
    let Some(server) = Throwaway::postgres_or_skip(test).await else {
        return;
    };
    let url = server.url();
    let provider = PgLockProvider::from_url(url.as_str())
        .table(PG_TABLE)
        .call_timeout(CALL_TIMEOUT)
        .build()
        .expect("valid settings");
    provider
        .create_table_if_not_exists()
        .await
        .expect("create the lock table");
    let pool = sqlx::PgPool::connect(&url).await.expect("connect");
    sqlx::raw_sql(sqlx::AssertSqlSafe(pg_history_ddl()))
        .execute(&pool)
        .await
        .expect("create the history table and its trigger");
    pool.close().await;
    soak(&Server::Postgres(server), provider).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn redis_restarts_at_fire_instants_lose_no_claim() {
    let Some(server) = PrivateRedis::start().await else {
        return;
    };
    let provider = RedisLockProvider::builder(server.url().as_str())
        .key_prefix(REDIS_PREFIX)
        .call_timeout(CALL_TIMEOUT)
        .connect()
        .await
        .expect("connect to the private server");
    soak(&Server::Redis(server), provider).await;
}

/// One run of a job's body, on this machine's clock (the stores' clock too: same machine).
#[derive(Debug, Clone)]
struct Run {
    job: String,
    fire_us: i64,
    start_us: i64,
    end_us: i64,
}

/// One restart: the fire it aimed at, when the server was killed and when it answered again.
#[derive(Debug, Clone, Copy)]
struct Restart {
    fire_us: i64,
    killed_us: i64,
    back_us: i64,
    long: bool,
}

/// A lock row as it was written (the store's history), µs since the epoch.
#[derive(Debug, Clone)]
struct Row {
    name: String,
    last_fire_us: Option<i64>,
    locked_by: String,
    locked_at_us: i64,
    lock_until_us: i64,
    /// This write recorded a new fire (a claim).
    claim: bool,
}

/// A committed claim and when its lock ended (its last `lock_until`).
#[derive(Debug, Clone)]
struct Claim {
    job: String,
    fire_us: i64,
    owner: String,
    locked_at_us: i64,
    lock_end_us: i64,
}

/// A fire the scheduler counted `held` (attributed by when the count rose).
#[derive(Debug, Clone)]
struct HeldFire {
    job: String,
    fire_us: i64,
}

/// What the scenario produced, for the checks.
struct Outcome {
    store: &'static str,
    /// The first fire the job loops handle (decided when `start` spawned them).
    from_us: i64,
    to_us: i64,
    restarts: Vec<Restart>,
    runs: Vec<Run>,
    rows: Vec<Row>,
    samples: Samples,
    statuses: Vec<JobStatus>,
    drained: shedlock_core::Drained,
    took: Duration,
    /// The scheduler's log (`None`: another global subscriber came first).
    log: Option<LogCapture>,
}

fn wall_us() -> i64 {
    Utc::now().timestamp_micros()
}

fn fire_floor(t_us: i64) -> i64 {
    t_us.div_euclid(EVERY_US) * EVERY_US
}

fn fire_at_or_after(t_us: i64) -> i64 {
    let floor = fire_floor(t_us);
    if floor == t_us {
        floor
    } else {
        floor + EVERY_US
    }
}

fn micros(us: i64) -> Duration {
    Duration::from_micros(u64::try_from(us).unwrap_or(0))
}

/// Waits until this machine's clock reads `at_us` (pacing the scenario, not synchronisation).
async fn pace_until(at_us: i64) {
    tokio::time::sleep(micros(at_us - wall_us())).await;
}

/// Runs `fault` when this machine's clock reads `at_us`, on a thread of its own (at a raised
/// priority when the test runs as root, as in CI: at a fire instant the job loops and the
/// server's processes compete for two cores), and returns when the fault did with its result.
/// The thread sleeps until 10 ms before, then spins.
async fn at_instant<T: Send + 'static>(
    at_us: i64,
    fault: impl FnOnce() -> T + Send + 'static,
) -> (i64, T) {
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        if running_as_root() {
            raise_this_threads_priority();
        }
        loop {
            let left = at_us - wall_us();
            if left <= 0 {
                break;
            }
            if left > 10_000 {
                std::thread::sleep(micros(left - 10_000));
            } else {
                std::hint::spin_loop();
            }
        }
        let at = wall_us();
        let _ = done.send((at, fault()));
    });
    result.await.expect("the fault's thread")
}

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `renice -n -10` of the calling thread (its id is the last part of `/proc/thread-self`).
fn raise_this_threads_priority() {
    if let Ok(link) = std::fs::read_link("/proc/thread-self")
        && let Some(tid) = link.file_name()
    {
        let _ = Command::new("renice")
            .args(["-n", "-10", "-p"])
            .arg(tid)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The `i`th job's name on `store` (both soaks may run at once and share the captured log):
/// every other job runs fires met held late (`-late`).
fn job_name(store: &str, i: usize) -> String {
    let store = store.to_ascii_lowercase();
    if i % 2 == 1 {
        format!("soak-{store}-{i:02}-late")
    } else {
        format!("soak-{store}-{i:02}")
    }
}

/// Whether the job of this name runs fires met held late ([`OnHeld::RunLate`]).
fn runs_late(name: &str) -> bool {
    name.ends_with("-late")
}

fn job(name: &str, every: &Schedule, runs: &Arc<Mutex<Vec<Run>>>) -> Job {
    let runs = runs.clone();
    let job = name.to_owned();
    Job::new(name, every.clone(), move |run| {
        let runs = runs.clone();
        let job = job.clone();
        async move {
            let start_us = wall_us();
            tokio::time::sleep(WORK).await;
            let end_us = wall_us();
            runs.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Run {
                    job,
                    fire_us: run.fire().at().timestamp_micros(),
                    start_us,
                    end_us,
                });
        }
    })
    .at_most(AT_MOST)
    .on_held(if runs_late(name) {
        OnHeld::RunLate
    } else {
        OnHeld::Skip
    })
}

/// What the sampler saw.
#[derive(Default)]
struct Samples {
    /// Fires counted held.
    held: Vec<HeldFire>,
    /// The scheduler's estimate of the store's clock offset, when it changed: (when, offset in
    /// µs). Store and replica share this machine's clock: the true offset is about 0.
    offsets: Vec<(i64, i64)>,
}

/// Samples the counters and the clock estimate until told to stop (then once more). A rise of
/// `held` by `k` is the `k` fires before the job's next fire (the loop sets it right after it
/// counted them; after shutdown, the sample's window ends them).
async fn sample(scheduler: Scheduler, mut stop: watch::Receiver<bool>) -> Samples {
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut samples = Samples::default();
    loop {
        let now = wall_us();
        for status in scheduler.statuses() {
            let before = seen.insert(status.name.clone(), status.held).unwrap_or(0);
            let next = status
                .next_fire
                .map_or(fire_floor(now) + EVERY_US, |at| at.timestamp_micros());
            for back in 1..=status.held.saturating_sub(before) {
                samples.held.push(HeldFire {
                    job: status.name.clone(),
                    fire_us: next - EVERY_US * i64::try_from(back).unwrap_or(0),
                });
            }
        }
        if let Some(offset) = scheduler
            .store_clock_offset()
            .and_then(|o| o.num_microseconds())
            && samples
                .offsets
                .last()
                .is_none_or(|&(_, last)| last != offset)
        {
            samples.offsets.push((now, offset));
        }
        if *stop.borrow() {
            return samples;
        }
        tokio::select! {
            () = tokio::time::sleep(SAMPLE_EVERY) => {}
            _ = stop.changed() => {}
        }
    }
}

/// The scenario on `server` through `provider`; then the checks.
async fn soak(server: &Server, provider: impl LockProvider) {
    let began = Instant::now();
    let log = LogCapture::global(LOG_FILTER);
    let executor = LockingTaskExecutor::builder(provider)
        .owner_id(OWNER)
        .call_timeout(CALL_TIMEOUT)
        .build()
        .expect("valid executor settings");
    let scheduler = Scheduler::new(executor);
    let runs: Arc<Mutex<Vec<Run>>> = Arc::default();
    let every = Schedule::every(EVERY).expect("a schedule");
    for i in 0..JOBS {
        scheduler
            .add(job(&job_name(server.label(), i), &every, &runs))
            .expect("register the job");
    }
    // Start in the middle of a window, so which fires the job loops handle is unambiguous.
    let mut mid = fire_floor(wall_us()) + EVERY_US / 2;
    if mid < wall_us() + 100_000 {
        mid += EVERY_US;
    }
    pace_until(mid).await;
    scheduler.start().await.expect("start the scheduler");
    // The fires from the one each loop decided first: `start` names it (a slow check of the
    // store before the loops were spawned may have let one pass, which no loop handles).
    let first: Vec<i64> = scheduler
        .statuses()
        .iter()
        .map(|s| s.next_fire.expect("a next fire").timestamp_micros())
        .collect();
    let from_us = first[0];
    assert!(
        first.iter().all(|&f| f == from_us),
        "the jobs were started for different first fires: {first:?}"
    );
    let (stop_sampling, stop) = watch::channel(false);
    let sampling = tokio::spawn(sample(scheduler.clone(), stop));

    // One clean fire, then the restarts.
    let mut target = fire_at_or_after(from_us) + EVERY_US;
    let mut restarts = Vec::new();
    for (offset_ms, long) in PLAN {
        let fire_us = target.max(fire_at_or_after(wall_us() + 300_000));
        let killed_us = server.kill_at(fire_us + offset_ms * 1_000).await;
        let back_us = server
            .bring_back(long.then_some(fire_us + DOWN_UNTIL_US))
            .await;
        restarts.push(Restart {
            fire_us,
            killed_us,
            back_us,
            long,
        });
        target = fire_us + GAP_US;
    }
    let back = restarts.last().map_or(target, |r| r.back_us);
    pace_until(fire_at_or_after(back) + (CLEAN_FIRES - 1) * EVERY_US + EVERY_US / 2).await;
    let to_us = wall_us();
    let drained = scheduler.shutdown(GRACE).await;
    stop_sampling.send_replace(true);
    let samples = sampling.await.expect("the sampler");
    let statuses = scheduler.statuses();
    let rows = server.history().await;
    let runs = runs.lock().unwrap_or_else(PoisonError::into_inner).clone();
    check(&Outcome {
        store: server.label(),
        from_us,
        to_us,
        restarts,
        runs,
        rows,
        samples,
        statuses,
        drained,
        took: began.elapsed(),
        log,
    });
}

/// The committed claims, in order, each with the last `lock_until` its acquisition wrote.
fn claims(rows: &[Row]) -> Vec<Claim> {
    let mut claims: Vec<Claim> = Vec::new();
    let mut latest: HashMap<&str, usize> = HashMap::new();
    for row in rows {
        if row.claim
            && let Some(fire_us) = row.last_fire_us
        {
            latest.insert(&row.name, claims.len());
            claims.push(Claim {
                job: row.name.clone(),
                fire_us,
                owner: row.locked_by.clone(),
                locked_at_us: row.locked_at_us,
                lock_end_us: row.lock_until_us,
            });
        } else if let Some(&i) = latest.get(row.name.as_str())
            && claims[i].locked_at_us == row.locked_at_us
        {
            claims[i].lock_end_us = row.lock_until_us;
        }
    }
    claims
}

/// How the recorded fires ended.
#[derive(Default)]
struct Fates {
    run: usize,
    adopted: usize,
    released_unrun: usize,
    /// Each lost fire: its job, its instant and why it counts as lost.
    lost: Vec<(String, i64, String)>,
}

/// Each recorded fire: run (adopted if its run started long after its claim), released unrun
/// (cut by a restart whose server answered again only at or after the window's end, and its lock
/// ended soon after), or lost.
fn fates(claims: &[Claim], runs: &[Run], restarts: &[Restart]) -> Fates {
    let mut by_fire: HashMap<(&str, i64), &Run> = HashMap::new();
    for run in runs {
        by_fire.insert((&run.job, run.fire_us), run);
    }
    let mut fates = Fates::default();
    for claim in claims {
        if let Some(run) = by_fire.get(&(claim.job.as_str(), claim.fire_us)) {
            fates.run += 1;
            if run.start_us - claim.locked_at_us > ADOPTED_AFTER_US {
                fates.adopted += 1;
            }
            continue;
        }
        let window_end = claim.fire_us + EVERY_US;
        let cut = restarts
            .iter()
            .find(|r| r.killed_us >= claim.fire_us && r.killed_us < window_end);
        let why = match cut {
            None => "no restart in its window".to_owned(),
            Some(r) if r.back_us + ANSWERED_LATE_US < window_end => format!(
                "the server answered again {} ms before the window's end",
                (window_end - r.back_us) / 1_000
            ),
            Some(r) => {
                let bound = (window_end.max(r.back_us) + RELEASE_SLACK_US)
                    .min(claim.locked_at_us + AT_MOST_US - 1_000_000);
                if claim.lock_end_us <= bound {
                    fates.released_unrun += 1;
                    continue;
                }
                format!(
                    "its lock ended {} ms after the window's end (server back {} ms after it): \
                     not released",
                    (claim.lock_end_us - window_end) / 1_000,
                    (r.back_us - window_end) / 1_000
                )
            }
        };
        fates.lost.push((
            claim.job.clone(),
            claim.fire_us,
            format!("{claim:?}: not run, {why}"),
        ));
    }
    fates
}

/// Held fires of the jobs with `late` as their [`OnHeld::RunLate`]: how many met a lock whose
/// previous run had ended before the fire's window ended (run log), and how many met a lock that
/// did end inside the window (store history).
fn held_detail(held: &[HeldFire], runs: &[Run], claims: &[Claim], late: bool) -> (usize, usize) {
    let mut prev_run_ended = 0;
    let mut freed_in_window = 0;
    for h in held.iter().filter(|h| runs_late(&h.job) == late) {
        let window_end = h.fire_us + EVERY_US;
        let prev_run = runs
            .iter()
            .filter(|r| r.job == h.job && r.fire_us < h.fire_us)
            .max_by_key(|r| r.fire_us);
        if prev_run.is_some_and(|r| r.end_us < window_end) {
            prev_run_ended += 1;
        }
        let holder = claims
            .iter()
            .filter(|c| c.job == h.job && c.fire_us < h.fire_us)
            .max_by_key(|c| c.fire_us);
        if holder.is_some_and(|c| c.lock_end_us < window_end) {
            freed_in_window += 1;
        }
    }
    (prev_run_ended, freed_in_window)
}

/// Fires (job, instant) for which no claim committed although the lock was free at their instant
/// and the server up for all but [`ANSWERED_LATE_US`] of their window: a fire the scheduler
/// counted `missed` or `held` without a claim that could have won.
fn skipped_while_free(o: &Outcome, claims: &[Claim]) -> Vec<(String, i64)> {
    let mut skipped = Vec::new();
    for status in &o.statuses {
        let job = status.name.as_str();
        let mut fire = fire_at_or_after(o.from_us);
        while fire <= o.to_us {
            let window_end = fire + EVERY_US;
            let claimed = claims.iter().any(|c| c.job == job && c.fire_us == fire);
            let free = claims
                .iter()
                .filter(|c| c.job == job && c.fire_us < fire)
                .max_by_key(|c| c.fire_us)
                .is_none_or(|c| c.lock_end_us <= fire);
            let down: i64 = o
                .restarts
                .iter()
                .map(|r| (window_end.min(r.back_us) - fire.max(r.killed_us)).max(0))
                .sum();
            if !claimed && free && down <= EVERY_US - ANSWERED_LATE_US {
                skipped.push((job.to_owned(), fire));
            }
            fire += EVERY_US;
        }
    }
    skipped
}

fn check(o: &Outcome) {
    let claims = claims(&o.rows);
    let fates = fates(&claims, &o.runs, &o.restarts);
    let (prev_run_ended, freed_in_window) = held_detail(&o.samples.held, &o.runs, &claims, false);
    let (_, late_freed_in_window) = held_detail(&o.samples.held, &o.runs, &claims, true);
    let held_by = |late: bool| {
        o.statuses
            .iter()
            .filter(|s| runs_late(&s.name) == late)
            .map(|s| s.held)
            .sum::<u64>()
    };
    let total = |field: fn(&JobStatus) -> u64| o.statuses.iter().map(field).sum::<u64>();
    let mut twice: BTreeMap<(&str, i64), usize> = BTreeMap::new();
    for run in &o.runs {
        *twice.entry((&run.job, run.fire_us)).or_default() += 1;
    }
    twice.retain(|_, n| *n > 1);
    let skipped = skipped_while_free(o, &claims);
    let clock_off_ms = o
        .samples
        .offsets
        .iter()
        .map(|&(_, offset)| offset.abs() / 1_000)
        .max()
        .unwrap_or(0);
    let offsets: Vec<i64> = o
        .restarts
        .iter()
        .map(|r| (r.killed_us - r.fire_us) / 1_000)
        .collect();
    let downtime: Vec<i64> = o
        .restarts
        .iter()
        .map(|r| (r.back_us - r.killed_us) / 1_000)
        .collect();
    eprintln!(
        "cluster_restarts_soak[{}]: restarts={} ({} down past the window; killed at +{offsets:?} ms, \
         back after {downtime:?} ms), fires recorded={}, run={} ({} adopted after a lost reply), \
         recorded-but-released-unrun={}, lost={}, ran twice={}; held: {} of the {} jobs that skip \
         (previous run ended before the window's end {prev_run_ended}, lock freed in the window \
         {freed_in_window}), {} of the {} that run late (lock freed in the window \
         {late_freed_in_window}); missed={}, store_errors={}, claimed_elsewhere={}; no claim though \
         the lock was free and the server up: {} {:?}; store-clock estimate off by up to \
         {clock_off_ms} ms; drained {:?}; took {:.1} s",
        o.store,
        o.restarts.len(),
        o.restarts.iter().filter(|r| r.long).count(),
        claims.len(),
        fates.run,
        fates.adopted,
        fates.released_unrun,
        fates.lost.len(),
        twice.len(),
        held_by(false),
        JOBS - JOBS / 2,
        held_by(true),
        JOBS / 2,
        total(|s| s.missed),
        total(|s| s.store_errors),
        total(|s| s.claimed_elsewhere),
        skipped.len(),
        skipped
            .iter()
            .take(4)
            .map(|(job, fire)| format!("{job}@{}", fire / 1_000_000))
            .collect::<Vec<_>>(),
        o.drained,
        o.took.as_secs_f64(),
    );

    assert!(
        fates.lost.is_empty(),
        "{}: recorded fires neither run nor released unrun:\n{}\nrestarts: {:#?}{}",
        o.store,
        fates
            .lost
            .iter()
            .map(|(_, _, why)| why.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        o.restarts,
        logs_around(o, fates.lost.iter().map(|(job, fire, _)| (job, *fire)))
    );
    assert!(twice.is_empty(), "{}: fires run twice: {twice:?}", o.store);
    assert!(
        skipped.is_empty(),
        "{}: fires for which no claim was made although the lock was free at their instant and \
         the server up for most of their window (a replica that is up and free runs the fire): \
         {skipped:?}\nrestarts: {:#?}{}",
        o.store,
        o.restarts,
        logs_around(o, skipped.iter().map(|(job, fire)| (job, *fire)))
    );
    check_claims(o, &claims);
    check_counters(o);
}

/// [`log_around`] each of `fires` (job, instant).
fn logs_around<'a>(o: &Outcome, fires: impl Iterator<Item = (&'a String, i64)>) -> String {
    let text = o.log.as_ref().map(LogCapture::text);
    fires
        .map(|(job, fire)| log_around(o, text.as_deref(), job, fire))
        .collect()
}

/// What `job` logged from [`LOG_AROUND_US`] before `fire_us` to as long after its window, with
/// its runs and its lock's history there, for a failure message.
fn log_around(o: &Outcome, log: Option<&str>, job: &str, fire_us: i64) -> String {
    let (from, to) = (fire_us - LOG_AROUND_US, fire_us + EVERY_US + LOG_AROUND_US);
    let mut out = format!("\n--- {job} around its fire at {fire_us} µs\n");
    for run in o
        .runs
        .iter()
        .filter(|r| r.job == job && (from..to).contains(&r.fire_us))
    {
        let _ = writeln!(out, "run: {run:?}");
    }
    for row in o
        .rows
        .iter()
        .filter(|r| r.name == job && (from..to).contains(&r.locked_at_us))
    {
        let _ = writeln!(out, "lock row written: {row:?}");
    }
    let Some(log) = log else {
        out.push_str("(no log captured: another global subscriber was installed first)\n");
        return out;
    };
    // Inside the fire's span the job is quoted; events of the job loop outside it name it bare.
    let (quoted, bare) = (format!("job=\"{job}\""), format!("job={job} "));
    let lines: Vec<String> = log
        .lines()
        .filter(|line| line.contains(&quoted) || line.contains(&bare))
        .filter(|line| {
            line.split_whitespace()
                .next()
                .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
                .is_some_and(|at| (from..to).contains(&at.timestamp_micros()))
        })
        .map(str::to_owned)
        .collect();
    let _ = writeln!(out, "its log ({} lines):", lines.len());
    for line in lines.iter().take(200) {
        let _ = writeln!(out, "{line}");
    }
    out
}

/// Every claim is this replica's, inside its window; every run's fire is recorded.
fn check_claims(o: &Outcome, claims: &[Claim]) {
    assert!(
        claims.len() >= o.runs.len() && !claims.is_empty(),
        "{}: {} claims in the store's history for {} runs: the history is incomplete",
        o.store,
        claims.len(),
        o.runs.len()
    );
    let odd: Vec<&Claim> = claims
        .iter()
        .filter(|c| {
            c.owner != OWNER || c.locked_at_us < c.fire_us || c.locked_at_us >= c.fire_us + EVERY_US
        })
        .collect();
    assert!(
        odd.is_empty(),
        "{}: claims not this replica's or outside their window: {odd:#?}",
        o.store
    );
    let unrecorded: Vec<&Run> = o
        .runs
        .iter()
        .filter(|r| {
            !claims
                .iter()
                .any(|c| c.job == r.job && c.fire_us == r.fire_us)
        })
        .collect();
    assert!(
        unrecorded.is_empty(),
        "{}: runs whose fire the store never recorded: {unrecorded:#?}",
        o.store
    );
}

/// The counters: nothing claimed elsewhere, runs as logged, each fire counted once, and the
/// restarts cost store errors.
fn check_counters(o: &Outcome) {
    let fires = u64::try_from(
        (fire_at_or_after(o.from_us)..=o.to_us)
            .step_by(usize::try_from(EVERY_US).unwrap_or(1))
            .count(),
    )
    .unwrap_or(0);
    let mut wrong = String::new();
    for s in &o.statuses {
        let logged = o.runs.iter().filter(|r| r.job == s.name).count();
        let counted = s.runs + s.held + s.missed + s.claimed_elsewhere;
        if s.claimed_elsewhere != 0
            || usize::try_from(s.runs).ok() != Some(logged)
            || counted != fires
        {
            let _ = writeln!(
                wrong,
                "{} (runs in the log {logged}, fires {fires}): {s:?}",
                s.name
            );
        }
    }
    assert!(
        wrong.is_empty(),
        "{}: counters off (claimed_elsewhere must be 0 with one replica, runs as logged, \
         runs + held + missed + claimed_elsewhere = fires):\n{wrong}",
        o.store
    );
    let store_errors: u64 = o.statuses.iter().map(|s| s.store_errors).sum();
    assert!(
        store_errors > 0,
        "{}: no fire claim failed: the restarts hit no claim",
        o.store
    );
}

/// The private server of one test.
enum Server {
    Postgres(Throwaway),
    Redis(PrivateRedis),
}

impl Server {
    fn label(&self) -> &'static str {
        match self {
            Server::Postgres(_) => "Postgres",
            Server::Redis(_) => "Redis",
        }
    }

    /// Crash-stops the server when the clock reads `at_us`; returns when it did, once it is gone.
    async fn kill_at(&self, at_us: i64) -> i64 {
        match self {
            Server::Postgres(pg) => pg_quit_at(pg, at_us).await,
            Server::Redis(redis) => redis.kill_at(at_us).await,
        }
    }

    /// Starts the stopped server again (after `down_until_us`, if given); returns when it
    /// answers.
    async fn bring_back(&self, down_until_us: Option<i64>) -> i64 {
        match (self, down_until_us) {
            (Server::Postgres(pg), None) => {
                pg.restart_immediate().await.expect("start Postgres again");
            }
            (Server::Postgres(pg), Some(until)) => {
                // Reaps the postmaster (already gone).
                pg.stop_immediate().await.expect("stop Postgres");
                pace_until(until).await;
                pg.start().await.expect("start Postgres again");
            }
            (Server::Redis(redis), until) => {
                if let Some(until) = until {
                    pace_until(until).await;
                }
                redis.respawn().await;
            }
        }
        wall_us()
    }

    /// Every write of a lock row, in order.
    async fn history(&self) -> Vec<Row> {
        match self {
            Server::Postgres(pg) => pg_history(&pg.url()).await,
            Server::Redis(redis) => redis.history(),
        }
    }
}

/// The history table and the trigger that fills it: every insert or update of a lock row.
fn pg_history_ddl() -> String {
    format!(
        r"
CREATE TABLE soak_history (
    seq BIGSERIAL PRIMARY KEY,
    name VARCHAR(64) NOT NULL,
    last_fire TIMESTAMP NULL,
    locked_by VARCHAR(255) NOT NULL,
    locked_at TIMESTAMP NOT NULL,
    lock_until TIMESTAMP NOT NULL,
    claim BOOLEAN NOT NULL
);
CREATE FUNCTION soak_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO soak_history (name, last_fire, locked_by, locked_at, lock_until, claim)
    VALUES (NEW.name, NEW.last_fire, NEW.locked_by, NEW.locked_at, NEW.lock_until,
            CASE WHEN TG_OP = 'INSERT' THEN NEW.last_fire IS NOT NULL
                 ELSE NEW.last_fire IS DISTINCT FROM OLD.last_fire END);
    RETURN NULL;
END $$;
CREATE TRIGGER soak_record AFTER INSERT OR UPDATE ON {PG_TABLE}
    FOR EACH ROW EXECUTE FUNCTION soak_record();
"
    )
}

async fn pg_history(url: &str) -> Vec<Row> {
    let pool = sqlx::PgPool::connect(url).await.expect("connect");
    let rows: Vec<(String, Option<i64>, String, i64, i64, bool)> = sqlx::query_as(
        "SELECT name, (EXTRACT(EPOCH FROM last_fire) * 1000000)::BIGINT, locked_by, \
         (EXTRACT(EPOCH FROM locked_at) * 1000000)::BIGINT, \
         (EXTRACT(EPOCH FROM lock_until) * 1000000)::BIGINT, claim \
         FROM soak_history ORDER BY seq",
    )
    .fetch_all(&pool)
    .await
    .expect("read the history");
    pool.close().await;
    rows.into_iter()
        .map(
            |(name, last_fire_us, locked_by, locked_at_us, lock_until_us, claim)| Row {
                name,
                last_fire_us,
                locked_by,
                locked_at_us,
                lock_until_us,
                claim,
            },
        )
        .collect()
}

/// Sends `SIGQUIT` to the postmaster (an immediate shutdown, as `pg_ctl -m immediate` does) when
/// the clock reads `at_us`, from a shell started beforehand and told by a byte on its stdin
/// (`kill` is its built-in: no process start at the instant); waits until the postmaster exited.
async fn pg_quit_at(pg: &Throwaway, at_us: i64) -> i64 {
    let pid_file = pg.dir().join("data").join("postmaster.pid");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .expect("read postmaster.pid")
        .lines()
        .next()
        .and_then(|line| line.trim().parse().ok())
        .expect("the postmaster's pid");
    // As root the shell runs at a raised priority too (`nice` only warns otherwise).
    let mut shell = Command::new("nice")
        .args(["-n", "-10", "sh", "-c", r#"read _ && kill -QUIT "$0""#])
        .arg(pid.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sh");
    let mut stdin = shell.stdin.take().expect("its stdin");
    let (killed_us, told) = at_instant(at_us, move || stdin.write_all(b"\n")).await;
    told.expect("tell sh");
    let status = tokio::task::spawn_blocking(move || shell.wait())
        .await
        .expect("wait for sh")
        .expect("wait for sh");
    assert!(status.success(), "kill -QUIT {pid} failed: {status}");
    let deadline = Instant::now() + SERVER_DEADLINE;
    while process_alive(pid) {
        assert!(Instant::now() < deadline, "the postmaster did not exit");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    killed_us
}

/// Whether `pid` runs (a zombie, exited but not reaped, does not).
fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// A `redis-server` of the test's own (free port, temporary directory, append-only file synced
/// at every write, no rewrites), killed by its PID when dropped.
struct PrivateRedis {
    child: Arc<Mutex<Option<Child>>>,
    port: u16,
    dir: tempfile::TempDir,
}

impl PrivateRedis {
    /// Starts one, or `None` (after a skip notice) without `redis-server`.
    async fn start() -> Option<Self> {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            listener.local_addr().expect("its address").port()
        };
        let server = Self {
            child: Arc::default(),
            port,
            dir: tempfile::tempdir().expect("a temporary directory"),
        };
        match server.spawn() {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                assert!(
                    !shedlock_redis::testing::db_required(),
                    "redis-server is not installed, and {}=1 requires it",
                    shedlock_redis::testing::REQUIRE_DB_ENV
                );
                eprintln!("skipping: redis-server is not installed");
                return None;
            }
            Err(e) => panic!("cannot start redis-server: {e}"),
        }
        server.wait_ready().await;
        Some(server)
    }

    fn spawn(&self) -> std::io::Result<()> {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ])
            .args(["--auto-aof-rewrite-percentage", "0"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        *self.child.lock().unwrap_or_else(PoisonError::into_inner) = Some(child);
        Ok(())
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Polls `PING` until it answers.
    async fn wait_ready(&self) {
        let deadline = Instant::now() + SERVER_DEADLINE;
        let client = redis::Client::open(self.url()).expect("a valid URL");
        loop {
            let ping = async {
                let mut conn = client.get_multiplexed_async_connection().await?;
                redis::cmd("PING").query_async::<String>(&mut conn).await
            };
            if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(1), ping).await {
                return;
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// `SIGKILL` when the clock reads `at_us`; waits until it is gone.
    async fn kill_at(&self, at_us: i64) -> i64 {
        let mut child = self
            .child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .expect("redis-server runs");
        let (killed_us, killed) = at_instant(at_us, move || {
            let killed = child.kill();
            (killed, child.wait())
        })
        .await;
        killed.0.expect("kill redis-server");
        killed.1.expect("reap redis-server");
        killed_us
    }

    async fn respawn(&self) {
        self.spawn().expect("restart redis-server");
        self.wait_ready().await;
    }

    /// Every write of a lock hash, read back from the append-only files.
    fn history(&self) -> Vec<Row> {
        let dir = self.dir.path().join("appendonlydir");
        let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(&dir)
            .expect("the append-only directory")
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let seq = name.strip_suffix(".incr.aof")?.rsplit('.').next()?;
                Some((seq.parse().ok()?, entry.path()))
            })
            .collect();
        files.sort();
        assert!(
            !files.is_empty(),
            "no append-only file in {}",
            dir.display()
        );
        let mut hashes: HashMap<Vec<u8>, HashMap<Vec<u8>, Vec<u8>>> = HashMap::new();
        let mut rows = Vec::new();
        for (_, path) in files {
            for command in aof_commands(&path) {
                if let Some(row) = apply_hset(&mut hashes, &command) {
                    rows.push(row);
                }
            }
        }
        rows
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        if let Some(mut child) = self
            .child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The commands of one append-only file (RESP arrays of bulk strings), all of it: the server is
/// up and idle when it is read, so nothing is half written.
fn aof_commands(path: &Path) -> Vec<Vec<Vec<u8>>> {
    let bytes = std::fs::read(path).expect("read the append-only file");
    let mut commands = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let (command, next) = resp_command(&bytes, pos).unwrap_or_else(|| {
            panic!(
                "{}: not a RESP command at byte {pos} of {}",
                path.display(),
                bytes.len()
            )
        });
        commands.push(command);
        pos = next;
    }
    commands
}

fn resp_command(bytes: &[u8], pos: usize) -> Option<(Vec<Vec<u8>>, usize)> {
    let (count, mut pos) = resp_header(bytes, pos, b'*')?;
    let mut args = Vec::with_capacity(count);
    for _ in 0..count {
        let (len, start) = resp_header(bytes, pos, b'$')?;
        let end = start.checked_add(len)?;
        if bytes.get(end..end + 2)? != b"\r\n" {
            return None;
        }
        args.push(bytes[start..end].to_vec());
        pos = end + 2;
    }
    Some((args, pos))
}

/// `<tag><number>\r\n` at `pos`: the number and the position after it.
fn resp_header(bytes: &[u8], pos: usize, tag: u8) -> Option<(usize, usize)> {
    if *bytes.get(pos)? != tag {
        return None;
    }
    let line = bytes.get(pos + 1..)?;
    let len = line.windows(2).position(|w| w == b"\r\n")?;
    let number = std::str::from_utf8(&line[..len]).ok()?.parse().ok()?;
    Some((number, pos + 1 + len + 2))
}

/// Applies an `HSET` of a lock key to `hashes` and returns the lock row it wrote.
fn apply_hset(
    hashes: &mut HashMap<Vec<u8>, HashMap<Vec<u8>, Vec<u8>>>,
    command: &[Vec<u8>],
) -> Option<Row> {
    let (verb, args) = command.split_first()?;
    if !verb.eq_ignore_ascii_case(b"hset") && !verb.eq_ignore_ascii_case(b"hmset") {
        return None;
    }
    let (key, pairs) = args.split_first()?;
    let name = std::str::from_utf8(key.strip_prefix(REDIS_PREFIX.as_bytes())?).ok()?;
    let hash = hashes.entry(key.clone()).or_default();
    let mut claim = false;
    for pair in pairs.chunks(2) {
        let [field, value] = pair else {
            panic!("an odd HSET: {command:?}");
        };
        let old = hash.insert(field.clone(), value.clone());
        claim |= field == b"last_fire" && old.as_ref() != Some(value);
    }
    let int = |field: &str| -> Option<i64> {
        std::str::from_utf8(hash.get(field.as_bytes())?)
            .ok()?
            .parse()
            .ok()
    };
    Some(Row {
        name: name.to_owned(),
        last_fire_us: int("last_fire"),
        locked_by: String::from_utf8_lossy(hash.get(b"locked_by".as_slice())?).into_owned(),
        locked_at_us: int("locked_at")?,
        lock_until_us: int("lock_until")?,
        claim,
    })
}
