//! Every store over TLS, against private servers configured as production ones are: TLS with
//! certificates made at run time by [`shedlock_tests::tls::Pki`] (nothing committed that can
//! expire), client certificates, users with passwords. Each store passes the conformance suite
//! over such a connection, and each mistake an operator can make (a wrong CA, a host name the
//! certificate does not name, an expired certificate, TLS on one side only, a missing client
//! certificate, a wrong password) fails with one clear line that names the store and never a
//! secret. Run one store's with a filter: `cargo test -p shedlock-tests --test tls redis::`.

mod support;

mod demo;
mod etcd;
mod mysql;
mod postgres;
mod redis;
