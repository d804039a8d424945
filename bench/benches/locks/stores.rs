//! The stores beyond SQL: Redis and etcd. Each one's skip and cycle against its own floor (Redis
//! `PING` on one connection, an etcd range read on one HTTP client), and its round trips per
//! operation counted on the wire ([`Proxy`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use shedlock_bench::report::Row;
use shedlock_bench::stats::{median, median_ratio};
use shedlock_core::jobs::HistoryPolicy;
use shedlock_core::provider::chrono::{self, Utc};
use shedlock_core::provider::{Fire, FireClaim, LockProvider};
use shedlock_etcd::EtcdLockProvider;
use shedlock_redis::RedisLockProvider;
use shedlock_redis::redis;

use crate::fires::cpu_per_fire;
use crate::harness::{AT_MOST, HELD, Op, Plan, Result, executor, hold_elsewhere, interleave};
use crate::jobs::Providers;
use crate::sink::capture;
use crate::suite::{Samples, core_variants, versus_rows};
use crate::wire::{Proxy, target, through};

const FLOOR: &str = "floor: one round trip";

/// A unique key prefix for this run, so that other users of the server are not touched.
fn prefix(sep: char) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("shedlock-bench-{}-{nanos:x}{sep}", std::process::id())
}

/// Redis: the provider on `url`, the floor `PING` on one connection manager (the provider's
/// kind of connection).
pub(crate) async fn redis(url: &str, plan: &Plan) -> Result<Vec<Row>> {
    let prefix = prefix(':');
    let provider = Arc::new(
        RedisLockProvider::builder(url)
            .key_prefix(&prefix)
            .connect()
            .await?,
    );
    let mut conn = redis::Client::open(url)?.get_connection_manager().await?;
    let floor = Box::new(Ping(conn.clone()));
    let proxy = Proxy::start(target(url)?).await?;
    let wired_url = through(url, proxy.port())?;
    let wired = Arc::new(
        RedisLockProvider::builder(wired_url.as_str())
            .key_prefix(&prefix)
            .connect()
            .await?,
    );
    let mut rows = run("redis", &provider, floor, (&wired, &proxy), plan).await;
    if plan.runs("jobs") && rows.is_ok() {
        let jobs = redis_jobs(url, &prefix, &provider, (&wired_url, &wired, &proxy), plan).await;
        rows = rows.and_then(|mut rows| {
            rows.extend(jobs?);
            Ok(rows)
        });
    }
    if plan.runs("tower") && rows.is_ok() {
        let tower = crate::tower::run("redis", &provider, plan).await;
        rows = rows.and_then(|mut rows| {
            rows.extend(tower?);
            Ok(rows)
        });
    }
    if plan.runs("trigger") && rows.is_ok() {
        let trigger =
            crate::trigger::run("redis", &provider, Some((&wired, &proxy)), true, plan).await;
        rows = rows.and_then(|mut rows| {
            rows.extend(trigger?);
            Ok(rows)
        });
    }
    if plan.runs("web") && rows.is_ok() {
        let web = crate::web::run("redis", &provider, plan).await;
        rows = rows.and_then(|mut rows| {
            rows.extend(web?);
            Ok(rows)
        });
    }
    if plan.runs("lateness") && rows.is_ok() {
        let store = crate::lateness::Store::Redis {
            url,
            prefix: &prefix,
        };
        let lateness = crate::lateness::run(&store, plan).await;
        rows = rows.and_then(|mut rows| {
            rows.extend(lateness?);
            Ok(rows)
        });
    }
    // Lock keys carry no TTL (by design): remove this run's.
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut conn)
        .await?;
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL").arg(keys).query_async(&mut conn).await?;
    }
    rows
}

/// The `jobs` part on Redis: history off (`provider`) and on (`.history(keep 100)`), counted
/// on the wired providers behind `proxy`.
async fn redis_jobs(
    url: &str,
    prefix: &str,
    provider: &Arc<RedisLockProvider>,
    (wired_url, wired, proxy): (&str, &Arc<RedisLockProvider>, &Proxy),
    plan: &Plan,
) -> Result<Vec<Row>> {
    let with_history = async |url: &str| -> Result<Arc<RedisLockProvider>> {
        Ok(Arc::new(
            RedisLockProvider::builder(url)
                .key_prefix(prefix)
                .history(HistoryPolicy::keep(crate::jobs::KEEP))
                .connect()
                .await?,
        ))
    };
    let on = with_history(url).await?;
    let wired_on = with_history(wired_url).await?;
    let providers = Providers {
        off: provider,
        on: Some(&on),
    };
    let wired = Providers {
        off: wired,
        on: Some(&wired_on),
    };
    crate::jobs::run("redis", &providers, Some((&wired, proxy)), plan).await
}

struct Ping(redis::aio::ConnectionManager);

#[async_trait]
impl Op for Ping {
    async fn run(&mut self) -> Result<()> {
        let pong: String = redis::cmd("PING").query_async(&mut self.0).await?;
        if pong == "PONG" {
            Ok(())
        } else {
            Err(format!("PING answered {pong}").into())
        }
    }
}

/// etcd: the provider on `url` (`etcd://host:port`), the floor a range read of one key through
/// the JSON gateway on one keep-alive HTTP/1.1 client (as the provider talks to etcd).
pub(crate) async fn etcd(url: &str, plan: &Plan) -> Result<Vec<Row>> {
    let prefix = prefix('/');
    let provider = Arc::new(EtcdLockProvider::builder(url).prefix(&prefix).build()?);
    let target = target(url)?;
    let proxy = Proxy::start(target.clone()).await?;
    let wired = Arc::new(
        EtcdLockProvider::builder(through(url, proxy.port())?)
            .prefix(&prefix)
            .build()?,
    );
    let range = Range::new(&target, format!("{prefix}floor"));
    let mut rows = run("etcd", &provider, Box::new(range), (&wired, &proxy), plan).await;
    // etcd keeps no run history: the recorded release against the plain one only.
    if plan.runs("jobs") && rows.is_ok() {
        let jobs = crate::jobs::run(
            "etcd",
            &Providers {
                off: &provider,
                on: None,
            },
            Some((
                &Providers {
                    off: &wired,
                    on: None,
                },
                &proxy,
            )),
            plan,
        )
        .await;
        rows = rows.and_then(|mut rows| {
            rows.extend(jobs?);
            Ok(rows)
        });
    }
    if plan.runs("trigger") && rows.is_ok() {
        let trigger =
            crate::trigger::run("etcd", &provider, Some((&wired, &proxy)), true, plan).await;
        rows = rows.and_then(|mut rows| {
            rows.extend(trigger?);
            Ok(rows)
        });
    }
    if plan.runs("web") && rows.is_ok() {
        let web = crate::web::run("etcd", &provider, plan).await;
        rows = rows.and_then(|mut rows| {
            rows.extend(web?);
            Ok(rows)
        });
    }
    // The records without a lease stay: remove this run's keys.
    let end = prefix_end(prefix.as_bytes());
    let cleanup = Range::new(&target, prefix.clone());
    cleanup
        .post(
            "/v3/kv/deleterange",
            serde_json::json!({"key": b64(prefix.as_bytes()), "range_end": b64(&end)}),
        )
        .await?;
    rows
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The first key after every key that starts with `prefix` (etcd's `range_end` of a prefix).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// An etcd range read of one key through the JSON gateway.
struct Range {
    http: Client<HttpConnector, Full<Bytes>>,
    authority: String,
    key: String,
}

impl Range {
    fn new(authority: &str, key: String) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Self {
            http: Client::builder(TokioExecutor::new()).build(connector),
            authority: authority.to_owned(),
            key,
        }
    }

    async fn post(&self, path: &str, body: serde_json::Value) -> Result<Bytes> {
        let request = hyper::Request::post(format!("http://{}{path}", self.authority))
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))?;
        let response = self.http.request(request).await?;
        let status = response.status();
        let bytes = response.into_body().collect().await?.to_bytes();
        if status.is_success() {
            Ok(bytes)
        } else {
            Err(format!("etcd answered {status}").into())
        }
    }
}

#[async_trait]
impl Op for Range {
    async fn run(&mut self) -> Result<()> {
        let body = serde_json::json!({ "key": b64(self.key.as_bytes()) });
        let answer = self.post("/v3/kv/range", body).await?;
        let reply: serde_json::Value = serde_json::from_slice(&answer)?;
        if reply.get("header").is_some() {
            Ok(())
        } else {
            Err("the range read returned no header".into())
        }
    }
}

/// One store's run: the interleaved variants against the floor and the round trips
/// (`uncontended`), then the scheduler's CPU per fire (`fires`).
async fn run<P: LockProvider + Clone>(
    db: &'static str,
    provider: &P,
    floor: Box<dyn Op>,
    (wired, proxy): (&P, &Proxy),
    plan: &Plan,
) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    if plan.runs("uncontended") {
        rows = uncontended(db, provider, floor, (wired, proxy), plan).await?;
    }
    if plan.runs("fires") {
        rows.extend(cpu_per_fire(db, provider, plan.fire_rounds, plan.fire_window).await?);
    }
    Ok(rows)
}

/// The variants against the floor, then the round trips per operation.
async fn uncontended<P: LockProvider + Clone>(
    db: &'static str,
    provider: &P,
    floor: Box<dyn Op>,
    (wired, proxy): (&P, &Proxy),
    plan: &Plan,
) -> Result<Vec<Row>> {
    hold_elsewhere(provider).await?;
    let executor = executor(provider.clone(), "bench-executor")?;
    let mut variants = vec![crate::harness::Variant::boxed(FLOOR, floor)];
    variants.extend(core_variants(provider, &executor)?);
    let values = interleave(&mut variants, plan).await;
    let s = Samples {
        metrics: variants.iter().map(|v| v.metric.clone()).collect(),
        values: values?,
    };
    let us = |metric: &str| median(s.of(metric)).unwrap_or(f64::NAN);
    let row = |metric: &str| {
        Row::new(db, metric, us(metric), "us/op")
            .ratio(median_ratio(s.of(metric), s.of(FLOOR)), FLOOR)
    };
    let mut rows = vec![Row::new(db, FLOOR, us(FLOOR), "us/op")];
    for metric in [
        crate::suite::SKIP_PROVIDER,
        crate::suite::CYCLE_PROVIDER,
        crate::suite::SKIP_EXECUTOR,
        crate::suite::CYCLE_EXECUTOR,
    ] {
        rows.push(row(metric));
    }
    rows.extend(versus_rows(db, &s));
    rows.extend(round_trips(db, wired, proxy, None).await?);
    Ok(rows)
}

/// Calls per figure of the round-trip count.
pub(crate) const WIRE_CALLS: u32 = 20;

/// Round trips and bytes (both ways) on the proxy since `since`, per call.
pub(crate) fn per_call(proxy: &Proxy, since: (u64, u64), calls: u32) -> (f64, f64) {
    let (trips, bytes) = proxy.counts();
    #[allow(clippy::cast_precision_loss)] // small counts
    let per = |now: u64, then: u64| (now - then) as f64 / f64::from(calls);
    (per(trips, since.0), per(bytes, since.1))
}

fn wire_rows(db: &str, what: &str, (trips, bytes): (f64, f64)) -> [Row; 2] {
    [
        Row::new(db, format!("round trips per {what}"), trips, "rt"),
        Row::new(db, format!("bytes per {what}"), bytes, "B"),
    ]
}

/// Round trips and bytes per operation, through the counting proxy.
pub(crate) async fn round_trips<P: LockProvider>(
    db: &str,
    p: &P,
    proxy: &Proxy,
    wal: Option<&mut dyn WalProbe>,
) -> Result<Vec<Row>> {
    // Warm the connection up (connect, scripts loaded).
    let warm = p
        .acquire("bench-wire-warm", AT_MOST, "bench-wire")
        .await?
        .ok_or("warm-up lock not free")?;
    p.release(&warm, Duration::ZERO).await?;
    let mut rows = Vec::new();
    let since = proxy.counts();
    for _ in 0..WIRE_CALLS {
        if p.acquire(HELD, AT_MOST, "bench-wire").await?.is_some() {
            return Err("acquired a held lock".into());
        }
    }
    rows.extend(wire_rows(db, "skip", per_call(proxy, since, WIRE_CALLS)));
    let since = proxy.counts();
    for _ in 0..WIRE_CALLS {
        let record = p
            .acquire("bench-wire", AT_MOST, "bench-wire")
            .await?
            .ok_or("the lock was not free")?;
        p.release(&record, Duration::ZERO).await?;
    }
    rows.extend(wire_rows(
        db,
        "acquire + release",
        per_call(proxy, since, WIRE_CALLS),
    ));
    let held = p
        .acquire("bench-wire-extend", AT_MOST, "bench-wire")
        .await?
        .ok_or("the lock was not free")?;
    let since = proxy.counts();
    for _ in 0..WIRE_CALLS {
        p.extend(&held, AT_MOST).await?.ok_or("extend refused")?;
    }
    rows.extend(wire_rows(db, "extend", per_call(proxy, since, WIRE_CALLS)));
    p.release(&held, Duration::ZERO).await?;
    rows.extend(fire_round_trips(db, p, proxy, wal).await?);
    Ok(rows)
}

/// Per fire and replica: the claim that wins, the release after the run, and another replica's
/// claim of that fire (claimed elsewhere). Each fire on a job of its own, its window open on the
/// store's clock (a minute either side of now). Empty for a store without fire claims.
pub(crate) async fn fire_round_trips<P: LockProvider>(
    db: &str,
    p: &P,
    proxy: &Proxy,
    mut wal: Option<&mut dyn WalProbe>,
) -> Result<Vec<Row>> {
    let now = Utc::now();
    let fire = Fire::new(
        now - chrono::Duration::minutes(1),
        now + chrono::Duration::minutes(1),
    )?;
    let job = |i: u32| format!("bench-fire-{i}");
    match p
        .claim_fire(&job(WIRE_CALLS), &fire, AT_MOST, "bench-a")
        .await
    {
        Err(e) if e.is_unsupported() => {
            eprintln!("{db}: the store has no fire claims ({e}): fire figures left out");
            return Ok(Vec::new());
        }
        Err(e) => return Err(e.into()),
        Ok(claim) => {
            if let Some(record) = claim.claimed() {
                p.release(record, Duration::ZERO).await?;
            }
        }
    }
    // Per kind: round trips, bytes, statements, WAL bytes.
    let mut totals = [[0.0; 4]; 4];
    let n = f64::from(WIRE_CALLS);
    #[allow(clippy::cast_precision_loss)] // small counts
    let mut add = |k: usize, since: (u64, u64), statements: usize, wal: (u64, u64)| {
        let (trips, bytes) = per_call(proxy, since, WIRE_CALLS);
        let t = &mut totals[k];
        t[0] += trips;
        t[1] += bytes;
        t[2] += statements as f64 / n;
        t[3] += (wal.1 - wal.0) as f64 / n;
    };
    for i in 0..WIRE_CALLS {
        let w0 = wal_position(&mut wal).await?;
        let since = proxy.counts();
        let (claim, sql) = capture(p.claim_fire(&job(i), &fire, AT_MOST, "bench-a")).await;
        let w1 = wal_position(&mut wal).await?;
        add(0, since, sql.len(), (w0, w1));
        let FireClaim::Claimed(record) = claim? else {
            return Err("the first claim of a fire did not claim it".into());
        };
        let since = proxy.counts();
        let (released, sql) = capture(p.release(&record, Duration::ZERO)).await;
        released?;
        let w2 = wal_position(&mut wal).await?;
        add(1, since, sql.len(), (w1, w2));
        // A plain read of the lock row first: on Postgres the first read of a page after an
        // update may prune it (on-access pruning, WAL of its own, whichever statement reads).
        let since = proxy.counts();
        let (read, sql) = capture(p.holder(&job(i))).await;
        read?;
        let w3 = wal_position(&mut wal).await?;
        add(3, since, sql.len(), (w2, w3));
        let since = proxy.counts();
        let (other, sql) = capture(p.claim_fire(&job(i), &fire, AT_MOST, "bench-b")).await;
        let w4 = wal_position(&mut wal).await?;
        add(2, since, sql.len(), (w3, w4));
        if !matches!(other?, FireClaim::ClaimedElsewhere { .. }) {
            return Err("a second claim of one fire was not refused as claimed elsewhere".into());
        }
    }
    let mut rows = Vec::new();
    for (what, t) in [
        "fire claimed (the winner)",
        "release after the run (the winner)",
        "fire claimed elsewhere (each other replica)",
        "read of the lock row before it (holder: the control)",
    ]
    .into_iter()
    .zip(totals)
    {
        rows.extend(wire_rows(db, what, (t[0], t[1])));
        if t[2] > 0.0 {
            rows.push(Row::new(db, format!("statements per {what}"), t[2], "stmt"));
        }
        if wal.is_some() {
            rows.push(Row::new(db, format!("WAL bytes per {what}"), t[3], "B"));
        }
    }
    Ok(rows)
}

/// Reads the store's write-ahead log position (Postgres: `pg_current_wal_insert_lsn()`).
pub(crate) trait WalProbe: Send {
    fn position(&mut self) -> crate::sql::Fut<'_, u64>;
}

async fn wal_position(wal: &mut Option<&mut dyn WalProbe>) -> Result<u64> {
    match wal {
        Some(probe) => probe.position().await,
        None => Ok(0),
    }
}
