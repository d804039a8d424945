//! Unit tests of the provider's time rounding and of its builder's checks.

use super::*;

#[test]
fn fires_round_up_to_whole_microseconds() {
    let whole = DateTime::from_timestamp_micros(1_800_000_000_000_001).unwrap();
    assert_eq!(micros_ceil(whole), whole);
    let between = whole + chrono::Duration::nanoseconds(1);
    assert_eq!(
        micros_ceil(between),
        whole + chrono::Duration::microseconds(1)
    );
    let before_epoch =
        DateTime::from_timestamp_micros(-5).unwrap() - chrono::Duration::nanoseconds(1);
    assert_eq!(
        micros_ceil(before_epoch),
        DateTime::from_timestamp_micros(-5).unwrap()
    );
}

#[test]
fn ttls_round_up_to_whole_seconds() {
    assert_eq!(ttl_secs(Duration::from_millis(1)), 1);
    assert_eq!(ttl_secs(Duration::from_secs(2)), 2);
    assert_eq!(ttl_secs(Duration::from_millis(2001)), 3);
    assert_eq!(
        ttl_secs(shedlock_core::provider::MAX_DURATION),
        365 * 24 * 3600
    );
}

#[test]
fn builder_checks_its_settings() {
    for builder in [
        EtcdLockProvider::builder("etcd://a").prefix("nope"),
        EtcdLockProvider::builder("etcd://a").call_timeout(Duration::ZERO),
        EtcdLockProvider::builder("etcd://a").max_name_len(0),
        EtcdLockProvider::builder("etcd://a").max_name_len(MAX_NAME_LEN_LIMIT + 1),
        EtcdLockProvider::builder("postgres://a"),
    ] {
        let e = builder.build().unwrap_err();
        assert!(e.is_invalid_config(), "{e}");
    }
}

#[cfg(not(feature = "tls-rustls"))]
#[test]
fn https_needs_the_tls_feature() {
    let e = EtcdLockProvider::new("https://root:s3cret@a:2379").unwrap_err();
    assert!(e.is_invalid_config(), "{e}");
    assert!(e.to_string().contains("feature `tls-rustls`"), "{e}");
    assert!(!e.to_string().contains("s3cret"), "{e}");
}

#[cfg(feature = "tls-rustls")]
#[test]
fn tls_files_are_checked_at_build() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing-ca.pem");
    let not_pem = dir.path().join("not-pem.pem");
    std::fs::write(&not_pem, "hello").unwrap();
    for (builder, says) in [
        (
            EtcdLockProvider::builder("etcd://a").ca_file(&not_pem),
            "use https://",
        ),
        (
            EtcdLockProvider::builder("https://a").ca_file(&missing),
            "missing-ca.pem",
        ),
        (
            EtcdLockProvider::builder("https://a").ca_file(&not_pem),
            "CA that signed",
        ),
        (
            EtcdLockProvider::builder("https://a").client_cert(&not_pem, &missing),
            "client certificate",
        ),
    ] {
        let e = builder.build().unwrap_err();
        assert!(e.is_invalid_config(), "{e}");
        assert!(e.to_string().contains(says), "{says}: {e}");
    }
}

#[test]
fn credentials_are_never_shown() {
    let builder = EtcdLockProvider::builder("etcd://root:s3cret@a").credentials("me", "pa55");
    let debug = format!("{builder:?}");
    assert!(
        !debug.contains("s3cret") && !debug.contains("pa55"),
        "{debug}"
    );
    let p = builder.build().unwrap();
    let debug = format!("{p:?}");
    assert!(debug.contains("root:***@a:2379"), "{debug}");
    assert!(!debug.contains("s3cret"), "{debug}");
}

#[test]
fn debug_shows_settings() {
    let p = EtcdLockProvider::new("etcd://a:1,b:2").unwrap();
    let debug = format!("{p:?}");
    assert!(
        debug.contains("etcd://a:1,b:2") && debug.contains("shedlock/"),
        "{debug}"
    );
}
