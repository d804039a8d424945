//! etcd over TLS with client certificates and etcd authentication, on private etcd processes of
//! each test's own (`shedlock_tests::private_etcd`): the conformance and trigger suites pass (the
//! trigger watch included), each misconfiguration fails with one line that says what is wrong
//! (and never the password), and an expired token is renewed. Like the other private-etcd tests they run when the store's URL is
//! set (or `SHEDLOCK_REQUIRE_DB=1`) and show as ignored otherwise; without the etcd binary they
//! skip with a notice (and fail under `SHEDLOCK_REQUIRE_DB=1`).

use std::time::{Duration, Instant};

use serde_json::json;
use shedlock_core::provider::LockProvider;
use shedlock_core::testkit::ConformanceSuite;
use shedlock_etcd::{EtcdLockProvider, EtcdLockProviderBuilder, testing};
use shedlock_tests::private_etcd::{Auth, EtcdOptions, PrivateEtcd, etcd_binary};
use shedlock_tests::tls::Pki;

const AT_MOST: Duration = Duration::from_secs(30);

/// A password no message may show.
const SECRET: &str = "n0t-the-Pa55word";

/// The private etcd most tests use: TLS, client certificates required, authentication enabled.
fn secured(bin: &str, pki: &Pki) -> (PrivateEtcd, Auth) {
    let auth = Auth::default();
    let etcd = PrivateEtcd::start(
        bin,
        &EtcdOptions::tls(pki)
            .client_cert_auth(pki)
            .auth(auth.clone()),
    );
    (etcd, auth)
}

/// A builder for `url` trusting the test CA, with a client certificate (without a common name:
/// etcd's gateway refuses one with a name once authentication is on) and `auth`'s user.
fn builder(url: &str, pki: &Pki, auth: &Auth) -> EtcdLockProviderBuilder {
    EtcdLockProvider::builder(url)
        .prefix(testing::unique_prefix())
        .ca_file(&pki.ca)
        .client_cert(&pki.nameless_client_cert, &pki.nameless_client_key)
        .credentials(&auth.user, &auth.password)
}

/// The error of one acquire, checked to be one line that names etcd and the member, says each
/// of `says`, and shows no password.
async fn acquire_fails(provider: &EtcdLockProvider, port: u16, says: &[&str]) {
    let error = provider
        .acquire("tls-job", AT_MOST, "me")
        .await
        .expect_err("the acquire must fail");
    let text = error.to_string();
    assert!(!text.contains('\n'), "one line: {text}");
    assert!(
        text.contains(&format!("127.0.0.1:{port}")),
        "names the member: {text} ({error:?})"
    );
    assert!(text.contains("etcd"), "names etcd: {text}");
    for says in says {
        assert!(text.contains(says), "says {says:?}: {text}");
    }
    for password in [SECRET, &Auth::default().password] {
        assert!(!text.contains(password), "shows a password: {text}");
    }
    assert!(
        !text.contains("reply was lost"),
        "nothing was sent, so nothing may be lost: {text}"
    );
    // What a user reads, for `--nocapture`.
    #[allow(clippy::print_stderr)]
    {
        eprintln!("{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn conformance_suite_passes_over_tls_with_client_cert_and_auth() {
    let Some(bin) = etcd_binary() else {
        return;
    };
    let pki = Pki::new().unwrap();
    let (etcd, auth) = secured(&bin, &pki);
    let provider = builder(&etcd.url(), &pki, &auth).build().unwrap();
    ConformanceSuite::new(provider)
        .time_unit(Duration::from_secs(1))
        .require_fire_claims(true)
        .run()
        .await;
    // Run now, its push included: the trigger watch is a streamed request of its own, which
    // carries the token over TLS too.
    let provider = builder(&etcd.url(), &pki, &auth).build().unwrap();
    shedlock_core::testkit::TriggerSuite::new(provider)
        .time_unit(Duration::from_secs(1))
        .run()
        .await;
}

#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn credentials_in_the_url_are_percent_decoded_and_hidden() {
    let Some(bin) = etcd_binary() else {
        return;
    };
    let pki = Pki::new().unwrap();
    let (etcd, auth) = secured(&bin, &pki);
    // The password is `locker-pa55%@:`: every character that needs escaping in a URL.
    let url = format!(
        "https://locker:locker-pa55%25%40%3A@127.0.0.1:{}",
        etcd.port
    );
    let provider = EtcdLockProvider::builder(&url)
        .prefix(testing::unique_prefix())
        .ca_file(&pki.ca)
        .client_cert(&pki.nameless_client_cert, &pki.nameless_client_key)
        .build()
        .unwrap();
    let acquired = provider
        .acquire("url-job", AT_MOST, "me")
        .await
        .unwrap_or_else(|e| panic!("{e:?}; etcd's log ends:\n{}", etcd.log_tail()));
    assert!(acquired.is_some());
    let shown = format!("{provider:?}");
    assert!(
        !shown.contains(&auth.password) && !shown.contains("pa55"),
        "{shown}"
    );
}

#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn untrusted_certificate_says_so() {
    let Some(bin) = etcd_binary() else {
        return;
    };
    let pki = Pki::new().unwrap();
    let (etcd, auth) = secured(&bin, &pki);
    let provider = builder(&etcd.url(), &pki, &auth)
        .ca_file(&pki.other_ca)
        .build()
        .unwrap();
    acquire_fails(&provider, etcd.port, &["not trusted", "ca_file"]).await;
}

#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn host_name_mismatch_says_so() {
    let Some(bin) = etcd_binary() else {
        return;
    };
    let pki = Pki::new().unwrap();
    let etcd = PrivateEtcd::start(
        &bin,
        &EtcdOptions::tls_with(&pki.wrong_host_cert, &pki.wrong_host_key),
    );
    let provider = builder(&etcd.url(), &pki, &Auth::default())
        .build()
        .unwrap();
    acquire_fails(&provider, etcd.port, &["not valid for this host name"]).await;
}

#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn expired_certificate_says_so() {
    let Some(bin) = etcd_binary() else {
        return;
    };
    let pki = Pki::new().unwrap();
    let etcd = PrivateEtcd::start(
        &bin,
        &EtcdOptions::tls_with(&pki.expired_cert, &pki.expired_key),
    );
    let provider = builder(&etcd.url(), &pki, &Auth::default())
        .build()
        .unwrap();
    acquire_fails(&provider, etcd.port, &["certificate has expired"]).await;
}

#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn missing_client_certificate_says_so() {
    let Some(bin) = etcd_binary() else {
        return;
    };
    let pki = Pki::new().unwrap();
    let (etcd, auth) = secured(&bin, &pki);
    let provider = EtcdLockProvider::builder(etcd.url())
        .prefix(testing::unique_prefix())
        .ca_file(&pki.ca)
        .credentials(&auth.user, &auth.password)
        .build()
        .unwrap();
    acquire_fails(
        &provider,
        etcd.port,
        &["requires a client certificate", "client_cert"],
    )
    .await;
}

#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn client_certificate_with_a_common_name_says_so() {
    let Some(bin) = etcd_binary() else {
        return;
    };
    let pki = Pki::new().unwrap();
    let (etcd, auth) = secured(&bin, &pki);
    let provider = builder(&etcd.url(), &pki, &auth)
        .client_cert(&pki.client_cert, &pki.client_key)
        .build()
        .unwrap();
    acquire_fails(&provider, etcd.port, &["common name (CN)", "without a CN"]).await;
}

#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn tls_url_against_a_plain_member_says_so() {
    let Some(bin) = etcd_binary() else {
        return;
    };
    let pki = Pki::new().unwrap();
    let (etcd, auth) = secured(&bin, &pki);
    let url = format!("https://127.0.0.1:{}", etcd.plain_port);
    let provider = builder(&url, &pki, &auth).build().unwrap();
    acquire_fails(&provider, etcd.plain_port, &["plain HTTP", "etcd://"]).await;
}

/// A plain-HTTP member may reset a TLS handshake instead of answering it (its reset overtakes
/// its answer when it closes with the handshake unread). A listener that reads the client's first
/// bytes and resets the connection stands for it, every time: the error says what it may mean.
#[tokio::test]
async fn a_reset_tls_handshake_says_what_it_may_mean() {
    let pki = Pki::new().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let resetting = tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let mut hello = [0_u8; 64];
            let _ = tokio::io::AsyncReadExt::read(&mut stream, &mut hello).await;
            let _ = stream.set_zero_linger();
        }
    });
    let provider = EtcdLockProvider::builder(format!("https://127.0.0.1:{port}"))
        .prefix(testing::unique_prefix())
        .ca_file(&pki.ca)
        .build()
        .unwrap();
    acquire_fails(
        &provider,
        port,
        &["reset the connection", "plain HTTP", "etcd://"],
    )
    .await;
    resetting.abort();
}

#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn plain_url_against_a_tls_member_says_so() {
    let Some(bin) = etcd_binary() else {
        return;
    };
    let pki = Pki::new().unwrap();
    let (etcd, auth) = secured(&bin, &pki);
    let provider = EtcdLockProvider::builder(format!("etcd://127.0.0.1:{}", etcd.port))
        .prefix(testing::unique_prefix())
        .credentials(&auth.user, &auth.password)
        .build()
        .unwrap();
    acquire_fails(&provider, etcd.port, &["speaks TLS", "https://"]).await;
}

#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn wrong_credentials_say_so_without_the_password() {
    let Some(bin) = etcd_binary() else {
        return;
    };
    let pki = Pki::new().unwrap();
    let (etcd, auth) = secured(&bin, &pki);
    let provider = builder(&etcd.url(), &pki, &auth)
        .credentials(&auth.user, SECRET)
        .build()
        .unwrap();
    acquire_fails(
        &provider,
        etcd.port,
        &["authentication failed for user \"locker\""],
    )
    .await;
}

#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn missing_credentials_say_to_give_a_user() {
    let Some(bin) = etcd_binary() else {
        return;
    };
    let pki = Pki::new().unwrap();
    // With --client-cert-auth etcd answers a request without a user "permission denied" (its
    // gateway acts as the user its own certificate names); without, "user name is empty".
    let (with_certs, _auth) = secured(&bin, &pki);
    let without_certs = PrivateEtcd::start(&bin, &EtcdOptions::tls(&pki).auth(Auth::default()));
    for (etcd, answer) in [
        (&with_certs, "permission denied"),
        (&without_certs, "user name is empty"),
    ] {
        let provider = EtcdLockProvider::builder(etcd.url())
            .prefix(testing::unique_prefix())
            .ca_file(&pki.ca)
            .client_cert(&pki.nameless_client_cert, &pki.nameless_client_key)
            .build()
            .unwrap();
        acquire_fails(
            &provider,
            etcd.port,
            &[
                "requires authentication",
                answer,
                "credentials(",
                "user:password@",
            ],
        )
        .await;
    }
}

/// etcd's simple tokens expire after `--auth-token-ttl` seconds unused (each use restarts the
/// count; etcd checks every second). The provider's token expires while it is idle, and its next
/// call authenticates again.
#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn an_expired_token_is_renewed() {
    let Some(bin) = etcd_binary() else {
        return;
    };
    let pki = Pki::new().unwrap();
    let auth = Auth {
        token_ttl: Some(1),
        ..Auth::default()
    };
    let etcd = PrivateEtcd::start(
        &bin,
        &EtcdOptions::tls(&pki)
            .client_cert_auth(&pki)
            .auth(auth.clone()),
    );
    let provider = builder(&etcd.url(), &pki, &auth).build().unwrap();
    let record = provider
        .acquire("renewed", AT_MOST, "me")
        .await
        .unwrap()
        .expect("free");

    // A token issued after the provider's last call: once etcd refuses it, the provider's
    // (older, unused since) is gone too.
    let token = etcd.authenticate(&auth.user, &auth.password).unwrap();
    let range = json!({ "key": "c2hlZGxvY2stdGVzdC8=" });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match etcd.call("/v3/kv/range", &range, Some(&token)) {
            Err(e) if e.contains("invalid auth token") => break,
            Err(e) => panic!("the range with the old token failed otherwise: {e}"),
            Ok(_) => {}
        }
        assert!(
            Instant::now() < deadline,
            "etcd still accepts the token after 20 s"
        );
        // Poll less often than the TTL: a use restarts the token's time to live.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }

    let holder = provider.holder("renewed").await.unwrap().expect("held");
    assert_eq!(holder.fencing_token(), record.fencing_token());
    assert!(provider.release(&record, Duration::ZERO).await.unwrap());
}
