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
//! Each lock has two keys under the prefix (default `shedlock/`), a scheduled job a third and
//! its recorded job state three more (see [Job state](#job-state)), its name percent-encoded (every
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
//! touches it). Nothing of a lock is ever put unconditionally (a replica's published
//! definitions, its own keys, are).
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
//! # Job state
//!
//! [`release_run`](shedlock_core::provider::LockProvider::release_run) records how a scheduler's
//! run ended in three more keys of the lock, none with a lease:
//!
//! - `{prefix}{name}/last-run`: the last run (its fire, runner = the record's owner, start = the
//!   record's `locked_at`, end, outcome and error text, capped to
//!   [`MAX_ERROR_LEN`](shedlock_core::jobs::MAX_ERROR_LEN));
//! - `{prefix}{name}/failures`: the consecutive failures, as the key's **version** (how many
//!   times it was put since it was last deleted): a failed or panicked run puts it, a success
//!   deletes it, a cancelled run leaves it. etcd has no increment, and this is one: the count
//!   needs no read of the previous state;
//! - `{prefix}{name}/last-success`: when the last successful run ended.
//!
//! They are written by a transaction nested in the release's own, so under the release's guard
//! (`if rec.mod_revision == token`) and in the same revision: a release whose lock was taken
//! over answers `false` and writes nothing, and `release_run` costs exactly the round trips of
//! `release` (no extra read). The nested transaction writes only `if last-run.mod_revision <
//! token` (not yet written since this acquisition), so each acquisition records one run: a
//! release sent again after its reply was lost, or a second recorded release, counts nothing
//! twice. The record's own key is not touched (its `mod_revision` stays the fencing token).
//!
//! **Times are estimates**, as every record time here: `ended` and `last_success` are the
//! releasing replica's clock (milliseconds), `started` is the record's `locked_at` (the
//! acquiring replica's clock). [`list`](shedlock_core::admin::LockAdmin::list) and
//! [`entry`](shedlock_core::admin::LockAdmin::entry) read the state keys with the lock's others
//! (no extra round trip) and fill [`LockEntry::state`](shedlock_core::admin::LockEntry::state),
//! a default state when no run was recorded yet. Unlocking, expiry and a new acquisition leave
//! the state as it is.
//!
//! **No history**: [`history`](shedlock_core::admin::LockAdmin::history) answers
//! [`Error::is_unsupported`](shedlock_core::Error::is_unsupported), and the builder has no
//! `history(..)`. Keeping the newest `keep` runs per lock would need a read of the kept runs (or
//! a range delete guessed without one) in every release, an extra round trip on the path every
//! run takes; and etcd keeps every revision of every key until it is compacted, within a
//! database quota (2 GiB by default) that stops all writes, the locks' too, when reached: a poor
//! place for a log. Use a SQL store when run history matters.
//!
//! **Definitions**
//! ([`publish_definitions`](shedlock_core::provider::LockProvider::publish_definitions)): one key
//! per (job, replica), `{prefix}!def/{encoded job}/{encoded replica}` (`!` is never part of an
//! encoded name, so these keys never meet a lock's, and `list` never shows them), holding the
//! definition, the replica's version and the `published` and `expires` estimates (the
//! replica's clock). Each publish grants a lease of `ttl` (whole seconds rounded up, at least
//! etcd's minimum) and puts its keys on it in one transaction (one per 64 definitions): expiry
//! is the lease's, on the etcd leader's clock, so a dead replica's entries go by themselves and
//! nothing needs pruning. A republished key moves to the new lease; the previous lease, then
//! holding nothing of it, runs out by itself (a replica keeps about `ttl / heartbeat` leases).
//! A job a replica no longer publishes stays listed until its lease ends.
//! [`definitions`](shedlock_core::admin::LockAdmin::definitions) is one range read (what the
//! leases still hold), sorted by job then replica;
//! [`forget`](shedlock_core::admin::LockAdmin::forget) one range delete of the job's keys (every
//! replica's); if its reply is lost it is sent again to another member, whose count then leaves
//! out what the first copy deleted.
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
//! | recorded release (`release_run`) | as release: the state rides in its transaction |
//! | publish definitions | 2: lease grant, transaction (one more per 64 definitions) |
//! | definitions | 1 read |
//! | forget | 1 range delete |
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
//! token sequence stay; the job state stays too. `definitions` and `forget` as above; `history`
//! is unsupported. There is no schema: `ddl()` and `missing_ddl()` are `None` and
//! `create_table()` does nothing and succeeds.
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
