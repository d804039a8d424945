//! `rediss://` against a private `redis-server` with TLS only (`--port 0 --tls-port N`).

use std::sync::Arc;

use shedlock_core::testkit::{ConformanceSuite, TriggerSuite};
use shedlock_core::{Error, admin::LockAdmin as _};
use shedlock_redis::RedisLockProvider;
use shedlock_tests::private_redis::PrivateRedis;
use shedlock_tests::tls::Pki;
use shedlock_tests::tls_servers;

use crate::support::full;

const PASSWORD: &str = tls_servers::REDIS_PASSWORD;

fn url(host: &str, port: u16) -> String {
    format!("rediss://locker:{PASSWORD}@{host}:{port}")
}

/// The error `connect` gives, checked to be one line without the password.
async fn connect_error(builder: shedlock_redis::RedisLockProviderBuilder) -> Error {
    let error = builder.connect().await.expect_err("must not connect");
    let text = full(&error);
    assert!(!text.contains(PASSWORD), "the password leaked: {text}");
    assert!(!text.contains('\n'), "one line: {text}");
    error
}

#[tokio::test]
async fn conformance_over_tls_with_a_client_certificate_and_an_acl_user() {
    let pki = Pki::new().expect("certificates");
    let Some(redis) = tls_servers::redis(&pki, None, "yes", "redis tls conformance").await else {
        return;
    };
    let provider = RedisLockProvider::builder(url("localhost", redis.port()))
        .ca_file(&pki.ca)
        .client_cert(&pki.client_cert, &pki.client_key)
        .connect()
        .await
        .expect("connects over TLS with a client certificate");
    let provider = Arc::new(provider);
    ConformanceSuite::new(Arc::clone(&provider))
        .require_fire_claims(true)
        .run()
        .await;
    provider.list().await.expect("lists over TLS");

    // The user and password through the builder, not the URL.
    let by_options = RedisLockProvider::builder(format!("rediss://localhost:{}", redis.port()))
        .username("locker")
        .password(PASSWORD)
        .ca_file(&pki.ca)
        .client_cert(&pki.client_cert, &pki.client_key);
    assert!(
        !format!("{by_options:?}").contains(PASSWORD),
        "{by_options:?}"
    );
    let by_options = by_options
        .connect()
        .await
        .expect("logs in with the builder's credentials");
    by_options.list().await.expect("lists");
}

/// Run now over TLS with a client certificate and an ACL user: the trigger suite, whose push case
/// needs `watch_triggers`' own pub/sub connection to log in and handshake as the provider does.
#[tokio::test]
async fn triggers_and_their_push_over_tls_with_a_client_certificate_and_an_acl_user() {
    let pki = Pki::new().expect("certificates");
    let Some(redis) = tls_servers::redis(&pki, None, "yes", "redis tls triggers").await else {
        return;
    };
    let provider = RedisLockProvider::builder(url("localhost", redis.port()))
        .ca_file(&pki.ca)
        .client_cert(&pki.client_cert, &pki.client_key)
        .connect()
        .await
        .expect("connects over TLS with a client certificate");
    TriggerSuite::new(provider)
        .time_unit(std::time::Duration::from_millis(200))
        .run()
        .await;
}

/// `builder`'s `connect` error, which must name the server and say `says`.
async fn refused(
    builder: shedlock_redis::RedisLockProviderBuilder,
    server: &str,
    says: &str,
) -> Error {
    let error = connect_error(builder).await;
    let text = full(&error);
    assert!(text.contains(server), "names the server {server}: {text}");
    assert!(text.contains(says), "says {says:?}: {text}");
    error
}

#[tokio::test]
async fn tls_mistakes_say_what_is_wrong() {
    let pki = Pki::new().expect("certificates");
    let Some(redis) = tls_servers::redis(&pki, None, "yes", "redis tls mistakes").await else {
        return;
    };
    let port = redis.port();
    let at = |host: &str| format!("rediss://{host}:{port}");
    let with_client = |builder: shedlock_redis::RedisLockProviderBuilder| {
        builder.client_cert(&pki.client_cert, &pki.client_key)
    };
    let builder = |host: &str| RedisLockProvider::builder(url(host, port));

    // A CA that did not sign the server's certificate.
    let e = refused(
        with_client(builder("localhost").ca_file(&pki.other_ca)),
        &at("localhost"),
        "UnknownIssuer",
    )
    .await;
    assert!(e.is_backend(), "{e}");
    // A host name the certificate does not hold.
    refused(
        with_client(builder("127.0.0.2").ca_file(&pki.ca)),
        &at("127.0.0.2"),
        "not valid for name \"127.0.0.2\"",
    )
    .await;
    // The server requires a client certificate.
    refused(
        builder("localhost").ca_file(&pki.ca),
        &at("localhost"),
        "CertificateRequired",
    )
    .await;
    // Plain text to a TLS-only port.
    refused(
        RedisLockProvider::builder(format!("redis://locker:{PASSWORD}@localhost:{port}")),
        &format!("redis://localhost:{port}"),
        "reset by peer",
    )
    .await;
    // A wrong password (never echoed: `connect_error` checks).
    refused(
        with_client(
            RedisLockProvider::builder(format!("rediss://locker:wrong@localhost:{port}"))
                .ca_file(&pki.ca),
        ),
        &at("localhost"),
        "Password authentication failed",
    )
    .await;
    // Settings that cannot work, refused before any I/O.
    for (builder, says) in [
        (
            RedisLockProvider::builder(format!("redis://localhost:{port}")).ca_file(&pki.ca),
            "use rediss://",
        ),
        (
            builder("localhost").ca_file("/nonexistent/ca.pem"),
            "/nonexistent/ca.pem",
        ),
        (
            builder("localhost").ca_file(&pki.client_key),
            "holds no PEM certificate",
        ),
        (
            builder("localhost")
                .ca_file(&pki.ca)
                .client_cert(&pki.client_cert, &pki.ca),
            "holds no PEM private key",
        ),
    ] {
        let e = connect_error(builder).await;
        assert!(e.is_invalid_config(), "{e}");
        assert!(full(&e).contains(says), "says {says:?}: {e}");
    }
    // And the right settings connect.
    with_client(builder("localhost").ca_file(&pki.ca))
        .connect()
        .await
        .expect("the right settings connect");

    // An expired server certificate.
    let Some(expired) = tls_servers::redis(
        &pki,
        Some((&pki.expired_cert, &pki.expired_key)),
        "no",
        "redis expired",
    )
    .await
    else {
        return;
    };
    refused(
        RedisLockProvider::builder(url("localhost", expired.port())).ca_file(&pki.ca),
        &at_port("localhost", expired.port()),
        "certificate expired",
    )
    .await;

    // TLS to a plain server: its inline parser waits for a line end the handshake never sends,
    // so the call's deadline ends it.
    let Some(plain) = PrivateRedis::start_or_skip(&[], "redis plain").await else {
        return;
    };
    let e = connect_error(
        RedisLockProvider::builder(format!("rediss://localhost:{}", plain.port()))
            .ca_file(&pki.ca)
            .call_timeout(std::time::Duration::from_millis(500)),
    )
    .await;
    assert!(e.is_timeout(), "{e}");
}

fn at_port(host: &str, port: u16) -> String {
    format!("rediss://{host}:{port}")
}
