//! Jobs whose settings come from a configuration file, and a `/status` endpoint.
//! `cargo run -p shedlock-examples --example config_file`
//!
//! `config_file.toml` (beside this file, or the file named by `APP_CONFIG`) holds one `[[jobs]]`
//! table per job: each is a `shedlock_core::JobSpec` (schedule, zone, `at_most`, `at_least`,
//! catch-up), so the schedules live with the rest of the configuration, as Spring's
//! `@Scheduled(cron = "${jobs.sync.cron}")` would have them. An environment variable
//! `APP_JOBS__<JOB>__<KEY>` overrides one key of one job before the settings are checked, so a
//! bad value in either place is reported the same way, naming the job and the key. The code
//! keeps the bodies: each job of the file must have one.
//!
//! It serves `GET /status`, the scheduler's `JobStatus`es as JSON (hyper), fetches it once when
//! `sync` has run twice, prints it, and shuts down.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HOST, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use shedlock_core::{Job, JobSpec, LockingTaskExecutor, Scheduler};
use shedlock_sqlx::SqliteLockProvider;
use shedlock_sqlx::sqlx::sqlite::SqliteConnectOptions;
use tokio::net::{TcpListener, TcpStream};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The configuration file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Where `/status` is served.
    status_addr: SocketAddr,
    /// Every job's settings.
    jobs: Vec<JobSpec>,
}

/// The environment variables that override a job's key: `APP_JOBS__SYNC__EVERY=5s`.
const ENV_PREFIX: &str = "APP_JOBS__";

/// Reads the configuration `text`, with the overrides among `env` (name, value) applied first.
fn load(text: &str, env: impl IntoIterator<Item = (String, String)>) -> Result<Config, BoxError> {
    let mut table: toml::Table = text.parse()?;
    for (name, value) in env {
        let Some(rest) = name.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        let Some((job, key)) = rest.split_once("__") else {
            return Err(format!("{name}: write {ENV_PREFIX}<JOB>__<KEY>").into());
        };
        let spec = table
            .get_mut("jobs")
            .and_then(toml::Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter_map(toml::Value::as_table_mut)
            .find(|t| {
                t.get("name")
                    .and_then(toml::Value::as_str)
                    .is_some_and(|n| n.to_uppercase().replace('-', "_") == job)
            })
            .ok_or_else(|| format!("{name}: the configuration has no job {job:?}"))?;
        let value = match value.as_str() {
            "true" => toml::Value::Boolean(true),
            "false" => toml::Value::Boolean(false),
            _ => toml::Value::String(value),
        };
        spec.insert(key.to_lowercase(), value);
    }
    Ok(table.try_into()?)
}

/// The job of `spec`, with this program's body for it.
fn job(spec: JobSpec) -> Result<Job, BoxError> {
    Ok(match spec.name.as_str() {
        "sync" => Job::from_spec(spec, |run| async move {
            tracing::info!(fire = %run.fire().at(), "syncing");
            Ok::<(), std::io::Error>(())
        }),
        "nightly-report" => Job::from_spec(spec, |run| async move {
            tracing::info!(fire = %run.fire().at(), catch_up = run.is_catch_up(), "reporting");
        }),
        other => {
            return Err(format!(
                "the configuration has a job {other:?} this program has no body for"
            )
            .into());
        }
    })
}

/// Serves `GET /status` on `listener` until the task is dropped.
async fn serve_status(listener: TcpListener, scheduler: Scheduler) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "accepting a /status connection failed");
                continue;
            }
        };
        let scheduler = scheduler.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let response = respond(&request, &scheduler);
                async move { Ok::<_, Infallible>(response) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            if let Err(error) = connection.await {
                tracing::debug!(%error, "a /status connection ended");
            }
        });
    }
}

fn respond(request: &Request<Incoming>, scheduler: &Scheduler) -> Response<Full<Bytes>> {
    if request.method() != Method::GET || request.uri().path() != "/status" {
        let mut response = Response::new(Full::new(Bytes::from_static(b"not found\n")));
        *response.status_mut() = StatusCode::NOT_FOUND;
        return response;
    }
    match serde_json::to_vec_pretty(&scheduler.statuses()) {
        Ok(body) => {
            let mut response = Response::new(Full::new(Bytes::from(body)));
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
        Err(error) => {
            let mut response = Response::new(Full::new(Bytes::from(error.to_string())));
            *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            response
        }
    }
}

/// `GET http://{addr}{path}`: the status code and the body.
async fn get(addr: SocketAddr, path: &str) -> Result<(StatusCode, String), BoxError> {
    let stream = TcpStream::connect(addr).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = Request::get(path)
        .header(HOST, addr.to_string())
        .body(Empty::<Bytes>::new())?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8(body.to_vec())?))
}

/// Registers every job of `config`, starts the scheduler, and serves `/status` on the address
/// the configuration gives; the address it listens on, and the server's task.
async fn run(
    config: Config,
    scheduler: &Scheduler,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), BoxError> {
    for spec in config.jobs {
        scheduler.add(job(spec)?)?;
    }
    scheduler.start().await?;
    let listener = TcpListener::bind(config.status_addr).await?;
    let addr = listener.local_addr()?;
    Ok((
        addr,
        tokio::spawn(serve_status(listener, scheduler.clone())),
    ))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let path = std::env::var("APP_CONFIG")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/config_file.toml").to_owned());
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let config = load(&text, std::env::vars()).map_err(|e| format!("{path}: {e}"))?;

    let dir = tempfile::tempdir()?;
    let options = SqliteConnectOptions::new()
        .filename(dir.path().join("app.db"))
        .create_if_missing(true);
    let provider = SqliteLockProvider::from_options(options).connect().await?;
    provider.create_table_if_not_exists().await?;
    let executor = LockingTaskExecutor::builder(provider)
        .default_at_most(Duration::from_mins(1))
        .build()?;
    let scheduler = Scheduler::new(executor);
    let (addr, server) = run(config, &scheduler).await?;
    println!("serving http://{addr}/status");

    // In a service: `shedlock_core::shutdown_signal().await?;`. Here: until `sync` ran twice.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while scheduler.status("sync").is_some_and(|s| s.runs < 2) {
        if tokio::time::Instant::now() > deadline {
            return Err("sync did not run twice within 20 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, body) = get(addr, "/status").await?;
    println!("GET /status: {status}\n{body}");
    server.abort();
    scheduler.shutdown(Duration::from_secs(10)).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use shedlock_core::scheduler::JobStatus;
    use shedlock_core::{InMemoryLockProvider, Schedule};

    use super::*;

    const FILE: &str = include_str!("config_file.toml");

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_committed_file_is_valid() {
        let config = load(FILE, env(&[])).expect("valid");
        let [sync, report] = &config.jobs[..] else {
            panic!("two jobs: {:?}", config.jobs);
        };
        assert_eq!(sync.name, "sync");
        assert_eq!(
            sync.schedule,
            Schedule::every(Duration::from_secs(1)).unwrap()
        );
        assert_eq!(sync.at_most, Some(Duration::from_secs(30)));
        assert_eq!(report.name, "nightly-report");
        assert_eq!(
            report.schedule,
            Schedule::cron_in("0 0 3 * * *", "Europe/Berlin").unwrap()
        );
        assert_eq!(report.at_least, Some(Duration::from_secs(30)));
        assert!(report.catch_up);
        assert!(job(sync.clone()).is_ok() && job(report.clone()).is_ok());
    }

    #[test]
    fn the_environment_overrides_a_key_and_is_checked_like_the_file() {
        let config = load(
            FILE,
            env(&[
                ("APP_JOBS__SYNC__EVERY", "5s"),
                ("APP_JOBS__NIGHTLY_REPORT__CATCH_UP", "false"),
                ("UNRELATED", "x"),
            ]),
        )
        .expect("valid");
        assert_eq!(
            config.jobs[0].schedule,
            Schedule::every(Duration::from_secs(5)).unwrap()
        );
        assert!(!config.jobs[1].catch_up);
        let err = |pairs: &[(&str, &str)]| load(FILE, env(pairs)).unwrap_err().to_string();
        assert!(
            err(&[("APP_JOBS__NIGHTLY_REPORT__AT_LEAST", "1h")]).starts_with(
                "invalid lock configuration: job \"nightly-report\": at_least (1h) is longer \
                 than at_most (10m)"
            ),
            "{}",
            err(&[("APP_JOBS__NIGHTLY_REPORT__AT_LEAST", "1h")])
        );
        assert_eq!(
            err(&[("APP_JOBS__SYNK__EVERY", "5s")]),
            "APP_JOBS__SYNK__EVERY: the configuration has no job \"SYNK\""
        );
        let unknown = load(
            &FILE.replace("name = \"sync\"", "name = \"purge\""),
            env(&[]),
        )
        .expect("valid settings");
        let no_body = job(unknown.jobs[0].clone()).map(|_| ()).unwrap_err();
        assert_eq!(
            no_body.to_string(),
            "the configuration has a job \"purge\" this program has no body for"
        );
    }

    #[tokio::test]
    async fn status_serves_every_job_with_its_spec_and_next_fire() {
        let config = load(FILE, env(&[])).expect("valid");
        let specs = config.jobs.clone();
        let executor = LockingTaskExecutor::builder(InMemoryLockProvider::new())
            .default_at_most(Duration::from_mins(1))
            .build()
            .unwrap();
        let scheduler = Scheduler::new(executor);
        let (addr, server) = run(config, &scheduler).await.expect("starts");
        assert_eq!(addr.ip().to_string(), "127.0.0.1");
        let (status, body) = get(addr, "/status").await.expect("served");
        assert_eq!(status, StatusCode::OK, "{body}");
        let statuses: Vec<JobStatus> = serde_json::from_str(&body).expect("JobStatus JSON");
        let spec_served: Vec<&JobSpec> = statuses.iter().map(|s| &s.spec).collect();
        assert_eq!(spec_served, specs.iter().collect::<Vec<_>>());
        assert!(
            statuses.iter().all(|s| s.next_fire.is_some()),
            "every job's next fire is known once started: {body}"
        );
        let (missing, _) = get(addr, "/nope").await.expect("served");
        assert_eq!(missing, StatusCode::NOT_FOUND);
        server.abort();
        scheduler.shutdown(Duration::from_secs(1)).await;
    }
}
