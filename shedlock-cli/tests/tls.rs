//! The built `shedlock` binary over TLS, against private servers that accept TLS connections
//! only (`shedlock_tests::tls_servers`): it lists and frees a lock on each store, with the TLS
//! files and credentials given as options (`--cacert`, `--cert`, `--key`, `--user`,
//! `--password-file`, `SHEDLOCK_PASSWORD`) or in the URL, and a mistake is one line that says
//! what to do and never shows a password.

use std::process::Command;
use std::time::Duration;

use shedlock_core::admin::LockAdmin;
use shedlock_redis::RedisLockProvider;
use shedlock_sqlx::{MySqlLockProvider, PgLockProvider};
use shedlock_tests::tls::{CLIENT_NAME, Pki};
use shedlock_tests::tls_servers::{self, REDIS_PASSWORD, REDIS_USER};

const HOLDER: &str = "tls-test:1:abc";

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn shedlock(url: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_shedlock"))
        .args(args)
        .env("DATABASE_URL", url)
        .env_remove("SHEDLOCK_PASSWORD")
        .envs(env.iter().copied())
        .output()
        .expect("run the shedlock binary");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Holds `name` through `store`, then checks that `shedlock list` (with `args`) shows it held and
/// `shedlock unlock --force` frees it.
async fn lists_and_frees(store: &impl LockAdmin, url: &str, args: &[&str], env: &[(&str, &str)]) {
    let name = "tls-report";
    store
        .acquire(name, Duration::from_mins(1), HOLDER)
        .await
        .expect("acquire")
        .expect("free");
    let list = shedlock(url, &[args, &["list"]].concat(), env);
    assert_eq!(list.code, 0, "{}{}", list.stdout, list.stderr);
    assert!(
        list.stdout.contains(name) && list.stdout.contains(HOLDER),
        "{}",
        list.stdout
    );
    let freed = shedlock(url, &[args, &["unlock", name, "--force"]].concat(), env);
    assert_eq!(freed.code, 0, "{}{}", freed.stdout, freed.stderr);
    assert!(
        store.holder(name).await.expect("holder").is_none(),
        "freed over TLS"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_with_options_for_the_files_and_the_user() {
    let pki = Pki::new().expect("certificates");
    let Some(pg) = tls_servers::postgres(&pki, None, "cli postgres tls").await else {
        return;
    };
    let url = format!("postgres://localhost:{}/test", pg.port());
    let store = PgLockProvider::from_url(&url)
        .username(CLIENT_NAME)
        .ca_file(&pki.ca)
        .client_cert(&pki.client_cert, &pki.client_key)
        .connect()
        .await
        .expect("the test's own provider over TLS");
    store.create_table_if_not_exists().await.expect("table");
    let (ca, cert, key) = (
        pki.ca.to_str().unwrap(),
        pki.client_cert.to_str().unwrap(),
        pki.client_key.to_str().unwrap(),
    );
    let args = [
        "--user",
        CLIENT_NAME,
        "--cacert",
        ca,
        "--cert",
        cert,
        "--key",
        key,
    ];
    lists_and_frees(&store, &url, &args, &[]).await;

    // A CA that did not sign the server's certificate: one line, exit 2, what to do.
    let other = pki.other_ca.to_str().unwrap();
    let wrong = shedlock(
        &url,
        &[
            "--user",
            CLIENT_NAME,
            "--cacert",
            other,
            "--cert",
            cert,
            "--key",
            key,
            "list",
        ],
        &[],
    );
    assert_eq!(wrong.code, 2, "{}", wrong.stderr);
    assert_eq!(wrong.stderr.lines().count(), 1, "{}", wrong.stderr);
    assert!(
        wrong.stderr.contains("UnknownIssuer") && wrong.stderr.contains("--cacert"),
        "{}",
        wrong.stderr
    );
    // Without TLS, to a server that accepts TLS only: the hint says how to turn it on.
    let plain = shedlock(&format!("{url}?sslmode=disable"), &["list"], &[]);
    assert_eq!(plain.code, 2, "{}", plain.stderr);
    assert!(
        plain.stderr.contains("sslmode=verify-full"),
        "{}",
        plain.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_with_the_files_in_the_url() {
    let pki = Pki::new().expect("certificates");
    let Some(db) = tls_servers::mariadb(&pki, "cli mariadb tls").await else {
        return;
    };
    let url = format!(
        "mysql://{CLIENT_NAME}@localhost:{}/test?ssl-mode=VERIFY_IDENTITY&ssl-ca={}&ssl-cert={}&ssl-key={}",
        db.port(),
        pki.ca.display(),
        pki.client_cert.display(),
        pki.client_key.display()
    );
    let store = MySqlLockProvider::connect(&url)
        .await
        .expect("the test's own provider over TLS");
    store.create_table_if_not_exists().await.expect("table");
    lists_and_frees(&store, &url, &[], &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_with_the_password_from_a_file_or_the_environment() {
    let pki = Pki::new().expect("certificates");
    let Some(redis) = tls_servers::redis(&pki, None, "yes", "cli redis tls").await else {
        return;
    };
    let url = format!("rediss://localhost:{}", redis.port());
    let store = RedisLockProvider::builder(url.as_str())
        .username(REDIS_USER)
        .password(REDIS_PASSWORD)
        .ca_file(&pki.ca)
        .client_cert(&pki.client_cert, &pki.client_key)
        .connect()
        .await
        .expect("the test's own provider over TLS");
    let password_file = pki.dir().join("redis-password");
    std::fs::write(&password_file, format!("{REDIS_PASSWORD}\n")).expect("password file");
    let (ca, cert, key, file) = (
        pki.ca.to_str().unwrap(),
        pki.client_cert.to_str().unwrap(),
        pki.client_key.to_str().unwrap(),
        password_file.to_str().unwrap(),
    );
    let tls = [
        "--cacert", ca, "--cert", cert, "--key", key, "--user", REDIS_USER,
    ];
    let from_file = [&tls[..], &["--password-file", file]].concat();
    lists_and_frees(&store, &url, &from_file, &[]).await;
    lists_and_frees(&store, &url, &tls, &[("SHEDLOCK_PASSWORD", REDIS_PASSWORD)]).await;

    // Both sources at once, an empty file, a wrong password: one line each, never the password.
    let empty = pki.dir().join("empty-password");
    std::fs::write(&empty, "").expect("empty file");
    for (args, env, says) in [
        (
            from_file.clone(),
            vec![("SHEDLOCK_PASSWORD", REDIS_PASSWORD)],
            "keep one",
        ),
        (
            [&tls[..], &["--password-file", empty.to_str().unwrap()]].concat(),
            vec![],
            "is empty",
        ),
        (
            tls.to_vec(),
            vec![("SHEDLOCK_PASSWORD", "not-it")],
            "authentication failed",
        ),
    ] {
        let run = shedlock(&url, &[&args[..], &["list"]].concat(), &env);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(run.stderr.contains(says), "says {says:?}: {}", run.stderr);
        assert!(!run.stderr.contains(REDIS_PASSWORD), "{}", run.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_with_a_client_certificate_and_a_user() {
    use shedlock_etcd::EtcdLockProvider;
    use shedlock_tests::private_etcd::{Auth, EtcdOptions, PREFIX, PrivateEtcd, etcd_binary};

    let Some(bin) = etcd_binary() else {
        return;
    };
    let pki = Pki::new().expect("certificates");
    let auth = Auth::default();
    let etcd = PrivateEtcd::start(
        &bin,
        &EtcdOptions::tls(&pki)
            .client_cert_auth(&pki)
            .auth(auth.clone()),
    );
    let prefix = format!("{PREFIX}cli/");
    // etcd's gateway refuses a client certificate with a common name once authentication is on.
    let (cert, key) = (&pki.nameless_client_cert, &pki.nameless_client_key);
    let store = EtcdLockProvider::builder(etcd.url())
        .prefix(&prefix)
        .ca_file(&pki.ca)
        .client_cert(cert, key)
        .credentials(&auth.user, &auth.password)
        .build()
        .expect("the test's own provider over TLS");
    let password_file = pki.dir().join("etcd-password");
    std::fs::write(&password_file, format!("{}\n", auth.password)).expect("password file");
    let args = [
        "--key-prefix",
        &prefix,
        "--cacert",
        pki.ca.to_str().unwrap(),
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
        "--user",
        &auth.user,
        "--password-file",
        password_file.to_str().unwrap(),
    ];
    lists_and_frees(&store, &etcd.url(), &args, &[]).await;

    // A user without its password is refused before any call.
    let run = shedlock(&etcd.url(), &["--user", &auth.user, "list"], &[]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("needs both --user and a password"),
        "{}",
        run.stderr
    );
}
