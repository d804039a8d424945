// A build without `testing` documents the link to it as a link to docs.rs.
#![cfg_attr(
    not(feature = "testing"),
    doc = "[`testing`]: https://docs.rs/shedlock-etcd/latest/shedlock_etcd/testing/"
)]
//! An etcd v3 lock store for [`shedlock_core`]: locks that survive the loss of a store node.
//!
//! [`EtcdLockProvider`] implements [`LockProvider`](shedlock_core::provider::LockProvider), with
//! `holder`, and [`LockAdmin`](shedlock_core::admin::LockAdmin). It passes
//! `shedlock_core::testkit::ConformanceSuite` against a real etcd, single-node and three-member.
//! The executor, `#[scheduled_lock]` and `LeaderLatch` run on it unchanged.
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
//! `etcd-client` (tonic, gRPC) compiles etcd's `.proto` files at build time. So it needs `protoc`
//! installed, which a fresh machine does not have. Every etcd since 3.4 serves the same v3 API as
//! JSON over HTTP, on the client port. This is its gRPC gateway: `/v3/kv/range`, `/v3/kv/txn`,
//! `/v3/lease/grant`, and so on. This crate speaks that with `hyper` 1 over HTTP/1.1, with no gRPC
//! and no code generation. TLS goes through rustls with the `tls-rustls` feature. There is nothing
//! to install, and the build is small.
//!
//! # The URL
//!
//! `etcd://[user:password@]host[:port][,host[:port]…]` lists the members of one cluster. The port
//! is 2379 by default, and `http://` is a synonym. `https://` or `etcds://` speaks TLS to every
//! member (see [`Endpoints`]).
//!
//! A call goes to the member that answered last. It moves on to the next member in URL order when
//! one refuses the connection, drops it, or answers "unavailable" because it has no leader. A
//! member may accept connections and never answer. A call that timed out on such a member makes the
//! next call start at the next member. When no member answers, the error gives each member's
//! `host:port` and why, in one line. Examples of why are "refused" and "TLS handshake".
//!
//! # TLS and authentication
//!
//! With the `tls-rustls` feature, an `https://` URL connects with rustls (ring). The members'
//! certificates are checked against `EtcdLockProviderBuilder::ca_file` (PEM). Without a CA file,
//! they are checked against the system's roots. `EtcdLockProviderBuilder::client_cert` gives a
//! client certificate and key (PEM). These are for members started with `--client-cert-auth`.
//! [`build`](EtcdLockProviderBuilder::build) reads the files. A missing or non-PEM file is
//! [`Error::is_invalid_config`](shedlock_core::Error::is_invalid_config), and the error names the
//! file. Without the feature, an `https://` URL is refused with an error saying to enable it. A
//! failed handshake says what is wrong:
//!
//! - The certificate is not trusted, so give `ca_file`.
//! - The host name does not match.
//! - The certificate has expired.
//! - A client certificate is required and none was given.
//! - A TLS URL meets a plain-HTTP member, or the other way round.
//!
//! A user is given with [`credentials`](EtcdLockProviderBuilder::credentials) or with
//! `user:password@` in the URL. With a user, the provider authenticates before its first call, at
//! `/v3/auth/authenticate`. It then sends the token with every request. etcd may answer that the
//! token is invalid because it expired. etcd's simple tokens live `--auth-token-ttl` seconds after
//! their last use, 300 by default. The provider then authenticates again, one caller at a time, and
//! sends the request once more. etcd checks the token before it reads or proposes anything. So even
//! an acquire's transaction is then safe to send again, though it is never sent twice otherwise.
//! Wrong credentials fail with "authentication failed for user "…"". A cluster with authentication
//! on and no user given fails with an error saying to give one. The password is never shown: not by
//! `Debug`, `Display`, errors or logs. A cluster without authentication is used without a token.
//!
//! The user needs a role with `readwrite` on the key prefix. Leases need no permission. etcd's JSON
//! gateway has one limit when both `--client-cert-auth` **and** authentication are enabled. It then
//! refuses every client certificate that has a common name (CN). It cannot pass that name on as the
//! etcd user. Give this client a certificate without a CN, with its names as subject alternative
//! names. Give it a user with a password too. The error says so. With `--client-cert-auth`, the
//! gateway also connects to its own member with the member's server certificate. That certificate
//! therefore needs the `clientAuth` extended key usage too.
//!
//! # How the contract maps onto etcd
//!
//! Each lock has two keys under the prefix, which is `shedlock/` by default. A scheduled job has a
//! third key. Its recorded job state has three more (see [Job state](#job-state)). The name in a
//! key is percent-encoded. Every byte outside `A–Z a–z 0–9 - . _ ~` becomes `%XX`. So a name can
//! hold any character, yet never a `/`. Names cannot collide or reach outside the prefix. Some
//! names are refused with [`Error::is_invalid_config`](shedlock_core::Error::is_invalid_config):
//! empty names, names with a NUL or outer white space, and names over
//! [`max_name_len`](EtcdLockProviderBuilder::max_name_len). The keys are these:
//!
//! - `{prefix}{name}/rec`, **without a lease**. It holds the owner, `locked_at` and the
//!   acquisition's first lease. `locked_at` is an estimate (see below). Only acquire writes this
//!   key, so its `mod_revision` is the acquisition's **fencing token**. That is an etcd revision,
//!   strictly increasing across the cluster's whole history. It stays the same through every extend
//!   and release of that acquisition. Revisions never go back, so deleting the keys by hand does
//!   not restart it.
//! - `{prefix}{name}/hold`, **attached to a lease**. It is present while the lock is held. Expiry
//!   is the lease's TTL, counted by the etcd leader. When the TTL runs out, etcd deletes the hold.
//! - `{prefix}{name}/fire`, **without a lease**. It holds the latest fire a scheduler claimed for
//!   the job, as an instant in microseconds. Only a fire claim writes it, so no release, expiry or
//!   unlock removes it. So a fire is never claimed twice.
//!
//! Every decision is one transaction whose compares are the contract's conditions:
//!
//! - acquire: `if hold absent`.
//! - fire claim: `if fire.mod_revision is as read and hold absent`. It then puts the record, the
//!   hold and the fire.
//! - extend: `if rec.mod_revision == token and hold present`.
//! - release: `if rec.mod_revision == token`. A release after expiry finds the record, so it acts
//!   as the contract says. A new acquisition rewrote the record, so a stale release or extend never
//!   touches it.
//!
//! Nothing of a lock is ever put unconditionally. A replica's published definitions are its own
//! keys, and they are put unconditionally.
//!
//! **Whole seconds, rounded toward safety.** Lease TTLs are whole seconds. `at_most` is rounded up.
//! etcd grants at least its minimum TTL, which is 1.5 election timeouts rounded up. That is
//! [`ETCD_MIN_TTL`] (2 s) with etcd's default `--election-timeout` of 1 s. A lock is therefore held
//! up to a second longer than asked, never shorter. A short lock is held up to 2 s longer. The
//! lease's clock starts at the grant, just before the deciding transaction. The record's
//! `locked_at` is read before the grant. So the lock holds at least until the record's
//! `lock_until`. etcd removes expired leases in a sweep every 500 ms. A new etcd leader renews
//! every lease to its full TTL plus an election timeout when it takes over. Both only lengthen a
//! hold.
//!
//! **No wall clock.** etcd has none. So `locked_at` and `lock_until` in records and listings are
//! the client's clock estimates, in milliseconds. They are shown to people, and nothing that
//! decides compares them. `at_least` is measured on the leader's clock. The acquisition's first
//! lease is kept, holding no key, until its TTL runs out. A release computes the time since the
//! acquisition as the lease's granted TTL minus its whole seconds left. This is rounded so that the
//! rest of `at_least` comes out longer, never shorter. The hold then moves to a new lease of that
//! rest, in one guarded transaction. That lease is rounded up to whole seconds and etcd's minimum.
//! A release after that first lease ran out counts the time since the acquisition as its TTL.
//!
//! **Fire claims**
//! ([`LockProvider::claim_fire`](shedlock_core::provider::LockProvider::claim_fire)). A claim reads
//! the lock's keys once. It decides in [`FireClaim`](shedlock_core::provider::FireClaim)'s order.
//! When the fire is claimable, it grants a lease and sends one transaction. The transaction claims
//! the fire only if the fire key and the hold are still as read. A claim that lost a race looks
//! again. **At most once per fire** rests on that compare alone, whatever the clocks say.
//!
//! But a fire claim also needs "now", to compare with the fire's instant `F` and its window's end.
//! etcd has no wall clock, and leases measure durations only. So "now" is the **claiming replica's
//! clock**, as for every record time here. A replica whose clock is ahead may run a fire early by
//! the others' clocks. A replica whose clock is behind may find its window passed. A scheduler
//! learns no store-clock offset from etcd, because each reply's "now" is its own clock. Keep the
//! replicas' clocks in sync (NTP).
//!
//! A claim's transaction is sent to one member only. If its reply is lost, the claim fails and
//! keeps its lease. If the transaction was applied, the scheduler recognises its own claim and runs
//! it. It is never sent again to another member, whose answer would call the claim someone else's.
//!
//! # Job state
//!
//! [`release_run`](shedlock_core::provider::LockProvider::release_run) records how a scheduler's
//! run ended, in three more keys of the lock. None of them has a lease.
//!
//! - `{prefix}{name}/last-run`: the last run. It holds the fire, the runner, the start, the end,
//!   the outcome and the error text. The runner is the record's owner, and the start is the
//!   record's `locked_at`. The error text is capped to
//!   [`MAX_ERROR_LEN`](shedlock_core::jobs::MAX_ERROR_LEN).
//! - `{prefix}{name}/failures`: the consecutive failures, as the key's **version**. The version
//!   counts how many times the key was put since it was last deleted. A failed or panicked run puts
//!   it, a success deletes it, and a cancelled run leaves it. etcd has no increment, and this is
//!   one. The count needs no read of the previous state.
//! - `{prefix}{name}/last-success`: when the last successful run ended.
//!
//! A transaction nested in the release's own writes them. So they are written under the release's
//! guard (`if rec.mod_revision == token`), in the same revision. A release whose lock was taken
//! over answers `false` and writes nothing. `release_run` costs exactly the round trips of
//! `release`, with no extra read. The nested transaction writes only `if last-run.mod_revision <
//! token`. That means the state was not yet written since this acquisition. So each acquisition
//! records one run. A release sent again after its reply was lost counts nothing twice. A second
//! recorded release counts nothing twice either. The record's own key is not touched, so its
//! `mod_revision` stays the fencing token.
//!
//! **Times are estimates**, as every record time here. `ended` and `last_success` are the releasing
//! replica's clock, in milliseconds. `started` is the record's `locked_at`, which is the acquiring
//! replica's clock. [`list`](shedlock_core::admin::LockAdmin::list) and
//! [`entry`](shedlock_core::admin::LockAdmin::entry) read the state keys with the lock's others.
//! That costs no extra round trip. They fill
//! [`LockEntry::state`](shedlock_core::admin::LockEntry::state). It is a default state when no run
//! was recorded yet. Unlocking, expiry and a new acquisition leave the state as it is.
//!
//! **No history.** [`history`](shedlock_core::admin::LockAdmin::history) answers
//! [`Error::is_unsupported`](shedlock_core::Error::is_unsupported). The builder has no
//! `history(..)`. Keeping the newest `keep` runs per lock would need a read of the kept runs in
//! every release. The alternative is a range delete guessed without a read. The read would be an
//! extra round trip on the path every run takes. etcd also keeps every revision of every key until
//! it is compacted. It does so within a database quota, 2 GiB by default. When the quota is
//! reached, all writes stop, the locks' too. That makes etcd a poor place for a log. Use a SQL
//! store when run history matters.
//!
//! **Definitions**
//! ([`publish_definitions`](shedlock_core::provider::LockProvider::publish_definitions)). There is
//! one key per (job, replica): `{prefix}!def/{encoded job}/{encoded replica}`. `!` is never part of
//! an encoded name. So these keys never meet a lock's, and `list` never shows them. A key holds the
//! definition, the replica's version, and the `published` and `expires` estimates. The estimates
//! are the replica's clock. Each publish grants a lease of `ttl`, rounded up to whole seconds and
//! at least etcd's minimum. It puts its keys on that lease in one transaction per 64 definitions.
//! Expiry is the lease's, on the etcd leader's clock. So a dead replica's entries go by themselves,
//! and nothing needs pruning. A republished key moves to the new lease. The previous lease then
//! holds nothing of it and runs out by itself. A replica keeps about `ttl / heartbeat` leases. A
//! job a replica no longer publishes stays listed until its lease ends.
//! [`definitions`](shedlock_core::admin::LockAdmin::definitions) is one range read of what the
//! leases still hold, sorted by job then replica.
//! [`forget`](shedlock_core::admin::LockAdmin::forget) is one range delete of the job's keys, of
//! every replica. If its reply is lost, it is sent again to another member. That member's count
//! then leaves out what the first copy deleted.
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
//! Reads are linearizable, as is etcd's default. Every operation runs under one deadline, the
//! [`call_timeout`](EtcdLockProviderBuilder::call_timeout). It is 5 s by default, like the SQL
//! stores. So a black-holed member cannot hang a caller. A timed-out connection is closed, never
//! reused. A timed-out acquire may have been applied, and the lock is then held until `at_most`. An
//! acquire whose transaction failed in flight revokes its lease. When the revoke gets through, that
//! ends such a hold at once. An acquire's or a fire claim's transaction may have reached a member.
//! It is then never sent again to another member. Its repeat would answer "held" or "claimed
//! elsewhere" for its own effect. It fails instead, saying the reply was lost.
//!
//! # Leader latch
//!
//! A [`LeaderLatch`](shedlock_core::LeaderLatch) on this store hands over after a leader process
//! dies. The handover comes within the sum of three times:
//!
//! - the lease, rounded up to whole seconds,
//! - etcd's 500 ms expiry sweep,
//! - one acquire interval and its jitter.
//!
//! This is tested with a `kill -9` of the leader process. The etcd leader itself may be lost at the
//! same time. Then add the election and up to one election timeout. The new etcd leader renews
//! every lease when it takes over.
//!
//! # Admin
//!
//! [`LockAdmin`](shedlock_core::admin::LockAdmin) works as follows:
//!
//! - `list` is one range over the prefix.
//! - `unlock` frees a lock only if it is held and its owner, `locked_at` and token are still as
//!   listed.
//! - `force_unlock` returns what it freed.
//! - Freeing deletes the hold only, so the record and the token sequence stay. The job state stays
//!   too.
//! - `definitions` and `forget` work as described above.
//! - `history` is unsupported.
//!
//! There is no schema: `ddl()` and `missing_ddl()` are `None`. `create_table()` does nothing and
//! succeeds.
//!
//! # Features
//!
//! - `tls-rustls`: `https://` URLs over rustls (ring), with `EtcdLockProviderBuilder::ca_file` and
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

/// The README's Rust example, compiled as a doc test. The README is what crates.io shows.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
