// A build without `testing` documents the link to it as a link to docs.rs.
#![cfg_attr(
    not(feature = "testing"),
    doc = "[`testing`]: https://docs.rs/shedlock-etcd/latest/shedlock_etcd/testing/"
)]
//! An etcd v3 lock store for [`shedlock_core`]: locks that survive the loss of a store node.
//!
//! [`EtcdLockProvider`] implements [`LockProvider`](shedlock_core::provider::LockProvider) (with
//! `holder`) and [`LockAdmin`](shedlock_core::admin::LockAdmin), and passes
//! `shedlock_core::testkit::ConformanceSuite` against a real etcd, single-node and
//! three-member. The executor, `#[scheduled_lock]` and `LeaderLatch` run on it unchanged.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use shedlock_core::{LockConfig, LockingTaskExecutor};
//! use shedlock_etcd::EtcdLockProvider;
//!
//! # #[tokio::main] async fn main() -> shedlock_core::Result<()> {
//! let provider = EtcdLockProvider::new("etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379")?;
//! let executor = LockingTaskExecutor::new(Arc::new(provider))?;
//! let config = LockConfig::new("nightly-report", Duration::from_secs(600))?;
//! if let Some(report) = executor.execute(&config, async { 42 }).await? {
//!     println!("ran: {report}");
//! }
//! # Ok(()) }
//! ```
//!
//! # Why the JSON gateway, not `etcd-client`
//!
//! `etcd-client` (tonic, gRPC) compiles etcd's `.proto` files at build time and so needs
//! `protoc` installed, which a fresh machine does not have. Every etcd since 3.4 serves the same
//! v3 API as JSON over HTTP (its gRPC gateway, `/v3/kv/range`, `/v3/kv/txn`,
//! `/v3/lease/grant`, …, on the client port). This crate speaks that with `hyper` 1 (HTTP/1.1,
//! no gRPC, no code generation; TLS through rustls with the `tls-rustls` feature): nothing to
//! install, and a small build.
//!
//! # The URL
//!
//! `etcd://[user:password@]host[:port][,host[:port]…]` lists the members of one cluster (port
//! 2379 by default; `http://` is a synonym); `https://` (or `etcds://`) speaks TLS to every
//! member; see [`Endpoints`]. A call goes to the member that answered last, and moves on to the
//! next in URL order when one refuses the connection, drops it, or answers "unavailable" (no
//! leader); a call that timed out on a member (one that accepts connections and never answers)
//! makes the next call start at the next member. When no member answers, the error says, in one
//! line, each member's `host:port` and why (refused, TLS handshake, …).
//!
//! # TLS and authentication
//!
//! With the `tls-rustls` feature, an `https://` URL connects with rustls (ring): the members'
//! certificates are checked against
//! `EtcdLockProviderBuilder::ca_file` (PEM) or, without one, the system's roots, and
//! `EtcdLockProviderBuilder::client_cert` gives a client certificate and key
//! (PEM) for members started with `--client-cert-auth`. The files are read by
//! [`build`](EtcdLockProviderBuilder::build) (a missing or non-PEM file is
//! [`Error::is_invalid_config`](shedlock_core::Error::is_invalid_config), naming the file). Without
//! the feature, an `https://` URL is refused with an error saying to enable it. A failed handshake
//! says what is wrong: certificate not trusted (give `ca_file`), host name mismatch, expired
//! certificate, a client certificate required and none given, a TLS URL against a plain-HTTP
//! member and the other way round.
//!
//! With a user ([`credentials`](EtcdLockProviderBuilder::credentials), or `user:password@` in the
//! URL) the provider authenticates (`/v3/auth/authenticate`) before its first call and sends the
//! token with every request. When etcd answers that the token is invalid (it expired: etcd's
//! simple tokens live `--auth-token-ttl` seconds, 300 by default, after their last use), it
//! authenticates again, one caller at a time, and sends the request once more: etcd checks the
//! token before it reads or proposes anything, so even an acquire's transaction, never sent
//! twice otherwise, is safe to send again then. Wrong credentials fail with "authentication
//! failed for user "…"", a cluster with authentication on and no user given with an error saying
//! to give one; the password is never shown (`Debug`, `Display`, errors, logs). A cluster without
//! authentication is used without a token.
//!
//! The user needs a role with `readwrite` on the key prefix (leases need no permission). One
//! limit of etcd's JSON gateway: with `--client-cert-auth` **and** authentication enabled, it
//! refuses every client certificate that has a common name (CN) (it cannot pass that name on as
//! the etcd user): give this client a certificate without a CN (its names as subject alternative
//! names) and a user with a password; the error says so. And with `--client-cert-auth` the
//! gateway connects to its own member with the member's server certificate, which therefore
//! needs the `clientAuth` extended key usage too.
//!
//! # How the contract maps onto etcd
//!
//! Each lock has two keys under the prefix, and a scheduled job a third (default `shedlock/`), its name percent-encoded (every
//! byte outside `A–Z a–z 0–9 - . _ ~` becomes `%XX`, so a name can hold any character yet never
//! a `/`: names cannot collide or reach outside the prefix; empty names, names with a NUL or
//! outer white space and names over [`max_name_len`](EtcdLockProviderBuilder::max_name_len) are
//! refused with [`Error::is_invalid_config`](shedlock_core::Error::is_invalid_config)):
//!
//! - `{prefix}{name}/rec`, **without a lease**: the owner, `locked_at` (an estimate, see
//!   below) and the acquisition's first lease. Only acquire writes it, so its `mod_revision`
//!   is the acquisition's **fencing token**: an etcd revision, strictly increasing across the
//!   cluster's whole history, and the same through every extend and release of that
//!   acquisition. Deleting the keys by hand does not restart it (revisions never go back).
//! - `{prefix}{name}/hold`, **attached to a lease**: present while the lock is held. Expiry is
//!   the lease's TTL, counted by the etcd leader: when it runs out, etcd deletes the hold.
//! - `{prefix}{name}/fire`, **without a lease**: the latest fire a scheduler claimed for the
//!   job (its instant, in microseconds). Only a fire claim writes it, so no release, expiry or
//!   unlock removes it, and a fire is never claimed twice.
//!
//! Every decision is one transaction whose compares are the contract's conditions:
//! acquire `if hold absent`; fire claim `if fire.mod_revision is as read and hold absent`
//! (then it puts the record, the hold and the fire); extend `if rec.mod_revision == token and
//! hold present`; release
//! `if rec.mod_revision == token` (a release after expiry finds the record, so it acts as the
//! contract says; a new acquisition rewrote the record, so a stale release or extend never
//! touches it). Nothing is ever put unconditionally.
//!
//! **Whole seconds, rounded toward safety.** Lease TTLs are whole seconds: `at_most` is rounded
//! up, and etcd grants at least its minimum TTL, 1.5 election timeouts rounded up —
//! [`ETCD_MIN_TTL`] (2 s) with etcd's default `--election-timeout` of 1 s. A lock is therefore
//! held up to a second longer than asked (up to 2 s for short ones), never shorter. The lease's
//! clock starts at the grant, just before the deciding transaction; the record's `locked_at` is
//! read before the grant, so the lock holds at least until the record's `lock_until`. etcd
//! removes expired leases in a sweep every 500 ms, and a new etcd leader renews every lease to
//! its full TTL (plus an election timeout) when it takes over: both only lengthen a hold.
//!
//! **No wall clock.** etcd has none, so `locked_at` / `lock_until` in records and listings are
//! the client's clock estimates (milliseconds), shown to people and compared by nothing that
//! decides. `at_least` is measured on the leader's clock: the acquisition's first lease is kept
//! (holding no key) until its TTL runs out, and a release computes the time since the
//! acquisition as its granted TTL minus its whole seconds left, rounded so that the rest of
//! `at_least` comes out longer, never shorter; the hold is then moved, in one guarded
//! transaction, to a new lease of that rest (rounded up to whole seconds and etcd's minimum).
//! A release after that first lease ran out counts the time since the acquisition as its TTL.
//!
//! **Fire claims**
//! ([`LockProvider::claim_fire`](shedlock_core::provider::LockProvider::claim_fire)): one read of
//! the lock's keys, the decision in [`FireClaim`](shedlock_core::provider::FireClaim)'s order, and,
//! when the fire is claimable, a lease grant and one transaction that claims it only if the fire
//! key and the hold are still as read (a claim that lost a race looks again). **At most once per
//! fire** rests on that compare alone, whatever the clocks say. But a fire claim also needs "now",
//! to compare with the fire's instant `F` and its window's end, and etcd has no wall clock (leases
//! measure durations only): "now" is the **claiming replica's clock**, as for every record time
//! here. A replica whose clock is ahead may run a fire early by the others' clocks, one behind may
//! find its window passed; a scheduler learns no store-clock offset from etcd (each reply's "now"
//! is its own clock). Keep the replicas' clocks in sync (NTP). A claim's transaction is sent to one
//! member only: if its reply is lost it fails (its lease kept: if it was applied, the scheduler
//! recognises its own claim and runs it), never sent again to another member, whose answer would
//! call the claim someone else's.
//!
//! # Round trips per operation
//!
//! | operation | round trips |
//! |---|---|
//! | acquire, lock held (skip) | 1 read, no write |
//! | acquire, won | 3: read, lease grant, transaction |
//! | acquire, lost a race | 4: the above, then the lease is revoked (no lease left behind) |
//! | fire claim not won (too early, window passed, claimed elsewhere, held) | 1 read, no write |
//! | fire claim, won | 3: read, lease grant, transaction |
//! | extend | 2 or 3: grant, transaction, revoke of the replaced lease (none after the first extend) |
//! | release, `at_least` zero | 1 or 2: transaction, revoke of the replaced lease (none when never extended) |
//! | release, `at_least` already over | 3 or 4: read, lease time-to-live, transaction, revoke |
//! | release, `at_least` not yet over | 4 or 5: read, lease time-to-live, grant, transaction, revoke |
//! | holder, entry | 1 read |
//! | list | 1 read over the prefix |
//! | unlock, force unlock | 2 or 3: read, transaction, revoke |
//!
//! Reads are linearizable (etcd's default). Every operation runs under one deadline, the
//! [`call_timeout`](EtcdLockProviderBuilder::call_timeout) (default 5 s, like the SQL stores):
//! a black-holed member cannot hang a caller; a timed-out connection is closed, never reused.
//! A timed-out acquire may have been applied; the lock is then held until `at_most` (an acquire
//! whose transaction failed in flight revokes its lease, which ends such a hold at once when the
//! revoke gets through). An acquire's or a fire claim's transaction is never sent again to
//! another member once it may have reached one (its repeat would answer "held" or "claimed
//! elsewhere" for its own effect): it fails, saying the reply was lost.
//!
//! # Leader latch
//!
//! A [`LeaderLatch`](shedlock_core::LeaderLatch) on this store hands over after a leader
//! process dies within its lease rounded up to whole seconds, plus etcd's 500 ms expiry sweep,
//! plus one acquire interval and its jitter (tested with a `kill -9` of the leader process). If
//! the etcd leader itself is lost at the same time, add the election and up to one election
//! timeout, as the new etcd leader renews every lease when it takes over.
//!
//! # Admin
//!
//! [`LockAdmin`](shedlock_core::admin::LockAdmin): `list` is one range over the prefix; `unlock`
//! frees a lock only if owner, `locked_at` and token are still as listed and it is held;
//! `force_unlock` returns what it freed; freeing deletes the hold only, so the record and the
//! token sequence stay. There is no schema: `ddl()` is `None` and `create_table()` does nothing
//! and succeeds.
//!
//! # Features
//!
//! - `tls-rustls`: `https://` URLs over rustls (ring), with
//!   `EtcdLockProviderBuilder::ca_file` and
//!   `EtcdLockProviderBuilder::client_cert`.
//! - `testing`: [`testing`], the etcd URL of tests (`SHEDLOCK_ETCD_URL`) and unique prefixes.

#![warn(missing_docs)]

mod endpoint;
mod gateway;
mod key;
mod provider;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(feature = "tls-rustls")]
mod tls;

pub use endpoint::{DEFAULT_PORT, Endpoints};
pub use provider::{
    DEFAULT_PREFIX, ETCD_MIN_TTL, EtcdLockProvider, EtcdLockProviderBuilder, MAX_NAME_LEN_LIMIT,
    UNKNOWN_OWNER,
};

/// The README's Rust example (what crates.io shows), compiled as a doc test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
