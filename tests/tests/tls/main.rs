//! The stores over TLS, one module per store, in one test binary: certificates made at run time
//! (`shedlock_tests::tls`), private servers of each test's own. Run one store's with a filter:
//! `cargo test -p shedlock-tests --test tls etcd::`.

mod etcd;
