//! The demo over TLS: `replica cluster` (the demo program) on a Redis that speaks TLS only and
//! wants a client certificate and an ACL user, given as `--cacert`, `--cert`, `--key`, `--user`
//! and `SHEDLOCK_PASSWORD`; its replicas get them from the cluster and every fire runs once.

use std::process::Command;

use shedlock_demo::cluster::Summary;
use shedlock_tests::tls::Pki;
use shedlock_tests::tls_servers::{self, REDIS_PASSWORD, REDIS_USER};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_runs_its_replicas_over_tls() {
    let pki = Pki::new().expect("certificates");
    let Some(redis) = tls_servers::redis(&pki, None, "yes", "demo over tls").await else {
        return;
    };
    let url = format!("rediss://localhost:{}", redis.port());
    let output = Command::new(env!("CARGO_BIN_EXE_replica"))
        .args([
            "cluster",
            "--seconds",
            "3",
            "--replicas",
            "2",
            "--database-url",
            &url,
        ])
        .arg("--cacert")
        .arg(&pki.ca)
        .arg("--cert")
        .arg(&pki.client_cert)
        .arg("--key")
        .arg(&pki.client_key)
        .args(["--user", REDIS_USER])
        .env("SHEDLOCK_PASSWORD", REDIS_PASSWORD)
        .env_remove("DATABASE_URL")
        .output()
        .expect("run the demo");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let summary: Summary = stdout
        .lines()
        .find(|l| l.starts_with("summary:"))
        .unwrap_or_else(|| panic!("no summary line: {stdout}\n{stderr}"))
        .parse()
        .expect("a summary");
    assert!(summary.runs > 0, "{summary:?}");
    assert_eq!(
        (summary.overlaps, summary.fires_run_twice, summary.errors),
        (0, 0, 0),
        "{summary:?}"
    );
    assert!(!stdout.contains(REDIS_PASSWORD) && !stderr.contains(REDIS_PASSWORD));

    // The same without the CA: the replicas cannot trust the server, and the demo says why.
    let output = Command::new(env!("CARGO_BIN_EXE_replica"))
        .args([
            "cluster",
            "--seconds",
            "1",
            "--replicas",
            "1",
            "--database-url",
            &url,
        ])
        .args(["--user", REDIS_USER])
        .env("SHEDLOCK_PASSWORD", REDIS_PASSWORD)
        .output()
        .expect("run the demo");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success(), "{all}");
    assert!(
        all.contains("UnknownIssuer") || all.contains("certificate"),
        "{all}"
    );
}
