//! The `web` part: the dashboard's response time (`shedlock-web`) against the store calls it is
//! made of, on the same store in the same run.
//!
//! The store holds 1,000 lock rows and 100 published jobs among them, each with a recorded run
//! (every tenth failed); half of the other 900 rows are held by another owner. The suite's stores
//! keep no history, so the jobs page's history reads find none and its strips are empty: the reads
//! are timed, the rendering of runs in the strips is not. The dashboard is served by axum on a real TCP socket on 127.0.0.1, in this
//! process, read-only, and asked over one persistent HTTP/1.1 connection (hyper's client), one
//! request at a time, paced as the uncontended part's calls. Five variants, interleaved:
//!
//! - `LockAdmin::list()`: the floor of `GET /api/locks` (1,000 rows);
//! - `definitions()` then `list()`: the floor of `GET /api/jobs`, the reads it makes;
//! - the same, then `history(lock, 10)` of each of the 100 jobs, 8 at a time: the floor of `GET /`,
//!   whose rows show each job's newest runs;
//! - `GET /api/locks`, `GET /api/jobs` and `GET /` (the jobs page, HTML).
//!
//! Each variant's p50 and p99 are over every request of every round (`Plan::web_requests` per
//! variant: 200 in a quick run, 1,000 in a full one); the ratio to the floor is the median of the
//! per-round ratios of the medians (p50), and the p99 against the floor's p99.
//! There is no target: the figures say what the HTTP layer, the JSON or HTML and the view's
//! computation add to the reads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use shedlock_bench::report::Row;
use shedlock_bench::stats::{median, median_ratio, quantile};
use shedlock_core::admin::LockAdmin;
use shedlock_core::jobs::{Definition, RunOutcome, RunReport, VERSION};

use crate::harness::{OTHER_OWNER, Plan, Result};

/// Lock rows, and jobs among them.
const LOCKS: usize = 1_000;
const JOBS: usize = 100;
const REPLICA: &str = "bench-web-replica:1:aa";

const LIST: &str = "web: list() (1,000 rows, floor)";
const READS: &str = "web: definitions() + list() (floor)";
const API_LOCKS: &str = "web: GET /api/locks";
const API_JOBS: &str = "web: GET /api/jobs";
const PAGE_READS: &str = "web: definitions() + list() + 100 history() (floor)";
const PAGE: &str = "web: GET / (jobs page)";

/// The name of lock `i`.
fn lock(i: usize) -> String {
    format!("bench-web-{i:04}")
}

/// 1,000 rows; the first 100 locks are jobs, each with a recorded run and a published definition;
/// every other one of the rest is held by another owner for an hour.
async fn fill(admin: &dyn LockAdmin) -> Result<()> {
    let fire = shedlock_core::provider::chrono::Utc::now();
    for i in 0..LOCKS {
        let held = i >= JOBS && i % 2 == 1;
        let at_most = if held {
            Duration::from_hours(1)
        } else {
            Duration::from_mins(1)
        };
        let record = admin
            .acquire(&lock(i), at_most, OTHER_OWNER)
            .await?
            .ok_or("web: a fresh lock was held")?;
        if held {
            continue;
        }
        if i < JOBS {
            let outcome = if i % 10 == 0 {
                RunOutcome::Failed("upstream answered 503".into())
            } else {
                RunOutcome::Succeeded
            };
            let report = RunReport::new(fire, outcome);
            admin.release_run(&record, Duration::ZERO, &report).await?;
        } else {
            admin.release(&record, Duration::ZERO).await?;
        }
    }
    let definitions: Vec<Definition> = (0..JOBS)
        .map(|i| {
            let name = format!("job-{i:03}");
            let spec = format!(
                r#"{{"name":"{name}","lock_name":"{}","every":"{}m"}}"#,
                lock(i),
                i % 7 + 1
            );
            Definition::new(name, lock(i), spec)
        })
        .collect();
    admin
        .publish_definitions(REPLICA, VERSION, &definitions, Duration::from_hours(1))
        .await?;
    Ok(())
}

/// The newest 10 runs of each job's lock, 8 reads at a time. A store without history answers
/// each at once.
async fn histories(admin: &Arc<dyn LockAdmin>) -> Result<()> {
    let locks: Vec<String> = (0..JOBS).map(lock).collect();
    for chunk in locks.chunks(8) {
        let mut set = tokio::task::JoinSet::new();
        for name in chunk {
            let (admin, name) = (Arc::clone(admin), name.clone());
            set.spawn(async move { admin.history(&name, 10).await });
        }
        while let Some(done) = set.join_next().await {
            match done? {
                Ok(_) => {}
                Err(e) if e.is_unsupported() || e.is_missing_table() => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

/// What one variant does once.
enum Call {
    List,
    Reads,
    /// [`Call::Reads`], then the newest 10 runs of each of the 100 jobs, 8 reads at a time.
    PageReads,
    Get(&'static str),
}

/// The dashboard on 127.0.0.1 and one HTTP/1.1 connection to it.
struct Served {
    sender: SendRequest<Empty<Bytes>>,
    host: String,
    server: tokio::task::JoinHandle<()>,
    connection: tokio::task::JoinHandle<()>,
}

impl Served {
    async fn start(admin: Arc<dyn LockAdmin>) -> Result<Self> {
        let router = shedlock_web::Dashboard::new(admin).router();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                eprintln!("web: the dashboard stopped: {e}");
            }
        });
        let stream = tokio::net::TcpStream::connect(address).await?;
        stream.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        let connection = tokio::spawn(async move {
            if let Err(e) = conn.await {
                eprintln!("web: the connection failed: {e}");
            }
        });
        Ok(Self {
            sender,
            host: address.to_string(),
            server,
            connection,
        })
    }

    /// `GET path`; the body's length. Anything but 200 is an error.
    async fn get(&mut self, path: &str) -> Result<usize> {
        self.sender.ready().await?;
        let request = http::Request::get(path)
            .header(http::header::HOST, &self.host)
            .body(Empty::<Bytes>::new())?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        if status != http::StatusCode::OK {
            return Err(format!(
                "web: GET {path} answered {status}: {}",
                String::from_utf8_lossy(&body)
            )
            .into());
        }
        Ok(body.len())
    }

    fn stop(self) {
        self.connection.abort();
        self.server.abort();
    }
}

/// Every row of the part on the store `provider`, named `db`.
pub(crate) async fn run<P: LockAdmin + Clone + 'static>(
    db: &str,
    provider: &P,
    plan: &Plan,
) -> Result<Vec<Row>> {
    let admin: Arc<dyn LockAdmin> = Arc::new(provider.clone());
    fill(&*admin).await?;
    let mut served = Served::start(admin.clone()).await?;
    let jobs_len = served.get("/api/jobs").await?;
    let page_len = served.get("/").await?;
    eprintln!("{db}: web: /api/jobs is {jobs_len} bytes, / is {page_len} bytes");
    let variants: [(&str, Call); 6] = [
        (LIST, Call::List),
        (READS, Call::Reads),
        (PAGE_READS, Call::PageReads),
        (API_LOCKS, Call::Get("/api/locks")),
        (API_JOBS, Call::Get("/api/jobs")),
        (PAGE, Call::Get("/")),
    ];
    let once = async |served: &mut Served, call: &Call| -> Result<()> {
        match call {
            Call::List => {
                let rows = admin.list().await?;
                if rows.len() < LOCKS {
                    return Err(format!("web: list() gave {} rows", rows.len()).into());
                }
            }
            Call::Reads => {
                let definitions = admin.definitions().await?;
                let rows = admin.list().await?;
                if definitions.len() < JOBS || rows.len() < LOCKS {
                    return Err("web: the reads missed rows".into());
                }
            }
            Call::PageReads => {
                admin.definitions().await?;
                admin.list().await?;
                histories(&admin).await?;
            }
            Call::Get(path) => {
                served.get(path).await?;
            }
        }
        Ok(())
    };
    let n = variants.len();
    for (_, call) in &variants {
        for _ in 0..plan.warmup_ops {
            once(&mut served, call).await?;
        }
    }
    // Per variant: every time, and each round's median.
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut rounds: Vec<Vec<f64>> = vec![Vec::new(); n];
    let per_round = plan.web_requests.div_ceil(plan.rounds.max(1)).max(3);
    for round in 0..plan.rounds {
        for k in 0..n {
            let i = (k + round) % n;
            let start = Instant::now();
            let mut slice = Vec::new();
            loop {
                let op = Instant::now();
                once(&mut served, &variants[i].1)
                    .await
                    .map_err(|e| format!("{}: {e}", variants[i].0))?;
                slice.push(op.elapsed().as_secs_f64() * 1e6);
                tokio::time::sleep(plan.pace).await;
                if start.elapsed() >= plan.slice && slice.len() >= per_round {
                    break;
                }
            }
            rounds[i].push(median(&slice).unwrap_or(f64::NAN));
            times[i].extend(slice);
        }
    }
    served.stop();
    let metrics: Vec<&str> = variants.iter().map(|(m, _)| *m).collect();
    Ok(rows(db, &metrics, &times, &rounds))
}

/// The part's rows: each variant's p50 and p99 against its floor's. `times` are every request's
/// time of each variant of `metrics`, `rounds` each round's median.
fn rows(db: &str, metrics: &[&str], times: &[Vec<f64>], rounds: &[Vec<f64>]) -> Vec<Row> {
    let index = |metric: &str| metrics.iter().position(|m| *m == metric).unwrap_or(0);
    let mut rows = Vec::new();
    for (metric, floor) in [
        (LIST, LIST),
        (READS, READS),
        (API_LOCKS, LIST),
        (API_JOBS, READS),
        (PAGE_READS, PAGE_READS),
        (PAGE, PAGE_READS),
    ] {
        let (i, f) = (index(metric), index(floor));
        let p50 = quantile(&times[i], 0.5).unwrap_or(f64::NAN);
        let p99 = quantile(&times[i], 0.99).unwrap_or(f64::NAN);
        let floor_p99 = quantile(&times[f], 0.99).unwrap_or(f64::NAN);
        rows.push(
            Row::new(db, format!("{metric}, p50"), p50, "us/op")
                .ratio(median_ratio(&rounds[i], &rounds[f]), floor),
        );
        rows.push(
            Row::new(db, format!("{metric}, p99"), p99, "us/op")
                .ratio(Some(p99 / floor_p99), format!("{floor}, p99")),
        );
    }
    rows.push(Row::new(
        db,
        "web: requests per variant",
        f64::from(u32::try_from(times[index(PAGE)].len()).unwrap_or(u32::MAX)),
        "count",
    ));
    rows
}
