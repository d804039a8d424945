//! MariaDB with TLS, `require_secure_transport`, and a user that must present its client
//! certificate (`REQUIRE SUBJECT`).

use std::sync::Arc;

use shedlock_core::testkit::ConformanceSuite;
use shedlock_core::{Error, admin::LockAdmin as _};
use shedlock_sqlx::MySqlLockProvider;
use shedlock_tests::throwaway::{Flavor, Throwaway};
use shedlock_tests::tls::{CLIENT_NAME, Pki};
use shedlock_tests::tls_servers;

use crate::support::full;

fn url(user: &str, host: &str, port: u16, params: &str) -> String {
    format!("mysql://{user}@{host}:{port}/test?{params}")
}

fn verify(pki: &Pki) -> String {
    format!("ssl-mode=VERIFY_IDENTITY&ssl-ca={}", pki.ca.display())
}

fn with_client_cert(pki: &Pki) -> String {
    format!(
        "{}&ssl-cert={}&ssl-key={}",
        verify(pki),
        pki.client_cert.display(),
        pki.client_key.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_over_verify_identity_with_a_client_certificate() {
    let pki = Pki::new().expect("certificates");
    let Some(db) = tls_servers::mariadb(&pki, "mariadb tls conformance").await else {
        return;
    };
    let provider = MySqlLockProvider::connect(&url(
        CLIENT_NAME,
        "localhost",
        db.port(),
        &with_client_cert(&pki),
    ))
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
    // alone turns on VERIFY_IDENTITY (so a wrong one is refused).
    let plain_url = format!("mysql://localhost:{}/test", db.port());
    let by_options = MySqlLockProvider::from_url(&plain_url)
        .username(CLIENT_NAME)
        .ca_file(&pki.ca)
        .client_cert(&pki.client_cert, &pki.client_key)
        .connect()
        .await
        .expect("connects with the builder's TLS options");
    assert!(!by_options.list().await.expect("lists").is_empty());
    let e = MySqlLockProvider::from_url(&plain_url)
        .username(CLIENT_NAME)
        .ca_file(&pki.other_ca)
        .client_cert(&pki.client_cert, &pki.client_key)
        .connect()
        .await
        .expect_err("a CA file turns verification on");
    assert!(full(&e).contains("UnknownIssuer"), "{e}");
}

async fn connect_error(url: &str) -> Error {
    let error = MySqlLockProvider::connect(url)
        .await
        .expect_err("must not connect");
    let text = full(&error);
    assert!(!text.contains('\n'), "one line: {text}");
    error
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_mistakes_say_what_is_wrong() {
    let pki = Pki::new().expect("certificates");
    let Some(db) = tls_servers::mariadb(&pki, "mariadb tls mistakes").await else {
        return;
    };
    let port = db.port();
    let local = format!("MySQL/MariaDB at localhost:{port}/test");
    for (u, names, says) in [
        // A CA that did not sign the server's certificate.
        (
            url(
                "root",
                "localhost",
                port,
                &format!("ssl-mode=VERIFY_IDENTITY&ssl-ca={}", pki.other_ca.display()),
            ),
            local.clone(),
            "UnknownIssuer",
        ),
        // A host name the certificate does not hold.
        (
            url("root", "127.0.0.2", port, &verify(&pki)),
            format!("MySQL/MariaDB at 127.0.0.2:{port}/test"),
            "not valid for name \"127.0.0.2\"",
        ),
        // No TLS, to a server with require_secure_transport: MariaDB says only "Access denied".
        (
            url("root", "localhost", port, "ssl-mode=DISABLED"),
            local.clone(),
            "Access denied for user 'root'",
        ),
        // A user that must present a certificate, without one.
        (
            url(CLIENT_NAME, "localhost", port, &verify(&pki)),
            local.clone(),
            "Access denied for user 'shedlock-client'",
        ),
    ] {
        let e = connect_error(&u).await;
        let text = full(&e);
        assert!(text.contains(&names), "names {names}: {text}");
        assert!(text.contains(says), "says {says:?}: {text}");
    }
    // A CA file that is not there: refused before connecting, naming the file.
    let e = connect_error(&url(
        "root",
        "localhost",
        port,
        "ssl-mode=VERIFY_CA&ssl-ca=/nonexistent/ca.pem",
    ))
    .await;
    assert!(
        e.is_invalid_config() && full(&e).contains("/nonexistent/ca.pem"),
        "{e}"
    );

    // TLS required by the client, from a server without it.
    let Some(plain) = Throwaway::with_args_or_skip(Flavor::MariaDb, &[], "mariadb plain").await
    else {
        return;
    };
    let e = connect_error(&url("root", "localhost", plain.port(), "ssl-mode=REQUIRED")).await;
    assert!(full(&e).contains("server does not support TLS"), "{e}");
}
