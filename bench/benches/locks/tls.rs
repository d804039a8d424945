//! TLS against cleartext text, on one server each: a private Postgres with `ssl = on` (taking cleartext
//! and TLS connections) and a private `redis-server` with a cleartext and a TLS port, certificates
//! made at run time. Skip and cycle through the provider over both connections, interleaved
//! round by round; rows: each over TLS with its ratio to cleartext text (the floor), and the round
//! trips of each on the wire, which TLS must leave unchanged once connected.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use shedlock_bench::report::Row;
use shedlock_bench::stats::{median, median_ratio};
use shedlock_core::provider::LockProvider;
use shedlock_redis::RedisLockProvider;
use shedlock_sqlx::PgLockProvider;
use shedlock_tests::private_redis::PrivateRedis;
use shedlock_tests::throwaway::{Flavor, Throwaway};
use shedlock_tests::tls::Pki;

use crate::harness::{
    AT_MOST, HELD, Plan, ProviderCycle, ProviderSkip, Result, Variant, hold_elsewhere, interleave,
};
use crate::stores::{WIRE_CALLS, per_call};
use crate::wire::Proxy;

/// Both stores; a store whose server cannot be started fails the part.
pub(crate) async fn run(plan: &Plan) -> Result<Vec<Row>> {
    let pki = Pki::new()?;
    let mut rows = postgres(&pki, plan).await?;
    rows.extend(redis(&pki, plan).await?);
    Ok(rows)
}

async fn postgres(pki: &Pki, plan: &Plan) -> Result<Vec<Row>> {
    let files = pki.server_files(Throwaway::server_user(Flavor::Postgres))?;
    let args = files.postgres_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let pg = Throwaway::with_args(Flavor::Postgres, &args).await?;
    let url = |port: u16, tls: bool| {
        let mode = if tls {
            format!("sslmode=verify-full&sslrootcert={}", pki.ca.display())
        } else {
            "sslmode=disable".to_owned()
        };
        format!("postgres://postgres@localhost:{port}/test?{mode}")
    };
    let cleartext = PgLockProvider::connect(&url(pg.port(), false)).await?;
    cleartext.create_table_if_not_exists().await?;
    let tls = PgLockProvider::connect(&url(pg.port(), true)).await?;
    let mut rows = compare("postgres", Arc::new(cleartext), Arc::new(tls), plan).await?;
    let proxy = Proxy::start(format!("127.0.0.1:{}", pg.port())).await?;
    for tls in [false, true] {
        let wired = PgLockProvider::connect(&url(proxy.port(), tls)).await?;
        rows.extend(round_trips("postgres", &wired, &proxy, tls).await?);
    }
    Ok(rows)
}

async fn redis(pki: &Pki, plan: &Plan) -> Result<Vec<Row>> {
    let files = pki.server_files(None)?;
    let text_port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut args = files.redis_args("no");
    // The TLS port is the server's `{port}`; a cleartext one beside it, instead of `--port 0`.
    args[1] = text_port.to_string();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = PrivateRedis::start(&args).await?;
    let url = |port: u16, tls: bool| {
        let scheme = if tls { "rediss" } else { "redis" };
        format!("{scheme}://localhost:{port}")
    };
    let provider = |port: u16, tls: bool| {
        let builder = RedisLockProvider::builder(url(port, tls).as_str());
        if tls {
            builder.ca_file(&pki.ca)
        } else {
            builder
        }
        .connect()
    };
    let cleartext = provider(text_port, false).await?;
    let tls = provider(server.port(), true).await?;
    let mut rows = compare("redis", Arc::new(cleartext), Arc::new(tls), plan).await?;
    for (port, tls) in [(text_port, false), (server.port(), true)] {
        let proxy = Proxy::start(format!("127.0.0.1:{port}")).await?;
        let wired = provider(proxy.port(), tls).await?;
        rows.extend(round_trips("redis", &wired, &proxy, tls).await?);
    }
    Ok(rows)
}

/// Skip and cycle over cleartext text and TLS, interleaved; the TLS rows with their ratio to cleartext.
async fn compare<P: LockProvider + Clone + 'static>(
    db: &str,
    cleartext: P,
    tls: P,
    plan: &Plan,
) -> Result<Vec<Row>> {
    hold_elsewhere(&cleartext).await?;
    let skip = |provider: &P| ProviderSkip {
        provider: provider.clone(),
        owner: "bench-tls".into(),
    };
    let cycle = |provider: &P, name: &str| ProviderCycle {
        provider: provider.clone(),
        name: name.into(),
        owner: "bench-tls".into(),
    };
    let mut variants = [
        Variant::new("skip: plain", skip(&cleartext)),
        Variant::new("skip: TLS", skip(&tls)),
        Variant::new("cycle: plain", cycle(&cleartext, "bench-tls-plain")),
        Variant::new("cycle: TLS", cycle(&tls, "bench-tls")),
    ];
    let samples = interleave(&mut variants, plan).await?;
    let row = |i: usize| {
        Row::new(
            db,
            variants[i].metric.clone(),
            median(&samples[i]).unwrap_or(f64::NAN),
            "us/op",
        )
    };
    Ok(vec![
        row(0),
        row(1).ratio(median_ratio(&samples[1], &samples[0]), "skip: plain"),
        row(2),
        row(3).ratio(median_ratio(&samples[3], &samples[2]), "cycle: plain"),
    ])
}

/// Round trips per skip and per acquire + release on a warm connection through `proxy`.
async fn round_trips<P: LockProvider>(
    db: &str,
    provider: &P,
    proxy: &Proxy,
    tls: bool,
) -> Result<Vec<Row>> {
    let over = if tls { "TLS" } else { "plain" };
    // Warm up: the connection (and its TLS handshake) is made here, not counted below.
    let warm = provider
        .acquire("bench-tls-wire", AT_MOST, "bench-tls")
        .await?
        .ok_or("the lock was not free")?;
    provider.release(&warm, Duration::ZERO).await?;
    let since = proxy.counts();
    for _ in 0..WIRE_CALLS {
        if provider
            .acquire(HELD, AT_MOST, "bench-tls")
            .await?
            .is_some()
        {
            return Err("acquired a held lock".into());
        }
    }
    let skip = per_call(proxy, since, WIRE_CALLS).0;
    let since = proxy.counts();
    for _ in 0..WIRE_CALLS {
        let record = provider
            .acquire("bench-tls-wire", AT_MOST, "bench-tls")
            .await?
            .ok_or("the lock was not free")?;
        provider.release(&record, Duration::ZERO).await?;
    }
    let cycle = per_call(proxy, since, WIRE_CALLS).0;
    Ok(vec![
        Row::new(db, format!("round trips per skip: {over}"), skip, "rt"),
        Row::new(db, format!("round trips per cycle: {over}"), cycle, "rt"),
    ])
}
