//! Postgres with `ssl = on`, TLS-only connections (`hostssl` in `pg_hba.conf`), and a role that
//! logs in with its client certificate (`cert` authentication).

use std::sync::Arc;

use shedlock_core::testkit::ConformanceSuite;
use shedlock_core::{Error, admin::LockAdmin as _};
use shedlock_sqlx::PgLockProvider;
use shedlock_tests::throwaway::{Flavor, Throwaway};
use shedlock_tests::tls::Pki;
use shedlock_tests::tls_servers;

use crate::support::full;

/// The role that logs in with the client certificate (its common name).
const CERT_ROLE: &str = shedlock_tests::tls::CLIENT_NAME;

fn url(user: &str, host: &str, port: u16, params: &str) -> String {
    format!("postgres://{user}@{host}:{port}/test?{params}")
}

fn verify_full(pki: &Pki) -> String {
    format!("sslmode=verify-full&sslrootcert={}", pki.ca.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_over_verify_full_with_a_client_certificate() {
    let pki = Pki::new().expect("certificates");
    let Some(pg) = tls_servers::postgres(&pki, None, "postgres tls conformance").await else {
        return;
    };
    let by_cert = url(
        CERT_ROLE,
        "localhost",
        pg.port(),
        &format!(
            "{}&sslcert={}&sslkey={}",
            verify_full(&pki),
            pki.client_cert.display(),
            pki.client_key.display()
        ),
    );
    let provider = PgLockProvider::connect(&by_cert)
        .await
        .expect("connects with its certificate");
    provider
        .create_table_if_not_exists()
        .await
        .expect("creates its table over TLS");
    let provider = Arc::new(provider);
    ConformanceSuite::new(Arc::clone(&provider))
        .require_fire_claims(true)
        .run()
        .await;
    provider.list().await.expect("lists");

    // The same through the builder's options, from a URL without TLS parameters: the CA file
    // alone turns on verify-full (so a wrong one is refused).
    let plain_url = format!("postgres://localhost:{}/test", pg.port());
    let by_options = PgLockProvider::from_url(&plain_url)
        .username(CERT_ROLE)
        .ca_file(&pki.ca)
        .client_cert(&pki.client_cert, &pki.client_key)
        .connect()
        .await
        .expect("connects with the builder's TLS options");
    assert!(!by_options.list().await.expect("lists").is_empty());
    let e = PgLockProvider::from_url(&plain_url)
        .username(CERT_ROLE)
        .ca_file(&pki.other_ca)
        .client_cert(&pki.client_cert, &pki.client_key)
        .connect()
        .await
        .expect_err("a CA file turns verification on");
    assert!(full(&e).contains("UnknownIssuer"), "{e}");
}

async fn connect_error(url: &str) -> Error {
    let error = PgLockProvider::connect(url)
        .await
        .expect_err("must not connect");
    let text = full(&error);
    assert!(!text.contains('\n'), "one line: {text}");
    error
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_mistakes_say_what_is_wrong() {
    let pki = Pki::new().expect("certificates");
    let Some(pg) = tls_servers::postgres(&pki, None, "postgres tls mistakes").await else {
        return;
    };
    let port = pg.port();
    let local = format!("Postgres at localhost:{port}/test");
    for (u, names, says) in [
        // A CA that did not sign the server's certificate.
        (
            url(
                "postgres",
                "localhost",
                port,
                &format!("sslmode=verify-full&sslrootcert={}", pki.other_ca.display()),
            ),
            local.clone(),
            "UnknownIssuer",
        ),
        // A host name the certificate does not hold.
        (
            url("postgres", "127.0.0.2", port, &verify_full(&pki)),
            format!("Postgres at 127.0.0.2:{port}/test"),
            "not valid for name \"127.0.0.2\"",
        ),
        // No TLS, to a server that accepts TLS connections only.
        (
            url("postgres", "localhost", port, "sslmode=disable"),
            local.clone(),
            "no encryption",
        ),
        // A role that logs in by certificate, without one.
        (
            url(CERT_ROLE, "localhost", port, &verify_full(&pki)),
            local.clone(),
            "requires a valid client certificate",
        ),
    ] {
        let e = connect_error(&u).await;
        let text = full(&e);
        assert!(text.contains(&names), "names {names}: {text}");
        assert!(text.contains(says), "says {says:?}: {text}");
    }
    // A CA file that is not there: refused before connecting, naming the file.
    let e = connect_error(&url(
        "postgres",
        "localhost",
        port,
        "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
    ))
    .await;
    assert!(
        e.is_invalid_config() && full(&e).contains("/nonexistent/ca.pem"),
        "{e}"
    );

    // An expired server certificate.
    let Some(expired) = tls_servers::postgres(
        &pki,
        Some((&pki.expired_cert, &pki.expired_key)),
        "postgres expired",
    )
    .await
    else {
        return;
    };
    let e = connect_error(&url(
        "postgres",
        "localhost",
        expired.port(),
        &verify_full(&pki),
    ))
    .await;
    assert!(full(&e).contains("certificate expired"), "{e}");

    // TLS required by the client, from a server without it.
    let Some(plain) =
        Throwaway::with_args_or_skip(Flavor::Postgres, &["-c", "ssl=off"], "postgres plain").await
    else {
        return;
    };
    let e = connect_error(&url(
        "postgres",
        "localhost",
        plain.port(),
        "sslmode=require",
    ))
    .await;
    assert!(full(&e).contains("server does not support TLS"), "{e}");
}
