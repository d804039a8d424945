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
//! `etcd-client` (tonic, gRPC) compiles etcd's `.proto` files at build time, so it needs `protoc`,
//! which a fresh machine lacks. Every etcd since 3.4 serves the same v3 API as JSON over HTTP on
//! the client port, its gRPC gateway: `/v3/kv/range`, `/v3/kv/txn`, `/v3/lease/grant`, and so on.
//! This crate speaks that with `hyper` 1 over HTTP/1.1, and TLS through rustls with the
//! `tls-rustls` feature. There is nothing to install, and the build is small.
//!
//! # The URL
//!
//! `etcd://[user:password@]host[:port][,host[:port]…]` lists the members of one cluster. The port
//! is 2379 by default, and `http://` is a synonym. `https://` or `etcds://` speaks TLS to every
//! member (see [`Endpoints`]).
//!
//! A call goes to the member that answered last. It moves on to the next member in URL order when
//! one refuses the connection, drops it, or answers "unavailable" because it has no leader. A call
//! that timed out on a member that accepts connections but never answers makes the next call start
//! at the next member. When no member answers, the error gives each member's `host:port` and why,
//! such as "refused" or "TLS handshake", in one line.
//!
//! # TLS and authentication
//!
//! With the `tls-rustls` feature, an `https://` URL connects with rustls (ring), checking the
//! members' certificates against `EtcdLockProviderBuilder::ca_file` (PEM), or else the system's
//! roots. `EtcdLockProviderBuilder::client_cert` gives a client certificate and key (PEM), for
//! members started with `--client-cert-auth`. [`build`](EtcdLockProviderBuilder::build) reads the
//! files. Without the feature, an `https://` URL is refused with an error saying to enable it. A
//! failed handshake says what is wrong: an untrusted certificate, so give `ca_file`, a host name
//! that does not match, an expired certificate, a missing client certificate, or a TLS URL meeting
//! a plain-HTTP member or the other way round.
//!
//! A user is given with [`credentials`](EtcdLockProviderBuilder::credentials) or with
//! `user:password@` in the URL. The provider then authenticates at `/v3/auth/authenticate` before
//! its first call and sends the token with every request. When etcd answers that the token
//! expired, after `--auth-token-ttl` seconds unused, 300 by default, the provider authenticates
//! again, one caller at a time, and sends the request once more. etcd checks the token before it
//! reads or proposes anything, so even an acquire's transaction, never sent twice otherwise, is
//! then safe to send again. Wrong credentials fail with "authentication failed for user "…"", and
//! a cluster with authentication on and no user given fails with an error saying to give one. The
//! password is never shown by `Debug`, `Display`, errors or logs. A cluster without authentication
//! is used without a token.
//!
//! The user needs a role with `readwrite` on the key prefix. Leases need no permission. When both
//! `--client-cert-auth` **and** authentication are enabled, etcd's JSON gateway refuses every
//! client certificate with a common name (CN), which it cannot pass on as the etcd user. Give this
//! client a certificate without a CN, with its names as subject alternative names, and a user with
//! a password. The error says so. With `--client-cert-auth`, the gateway also connects to its own
//! member with the member's server certificate, which therefore needs the `clientAuth` extended key
//! usage too.
//!
//! # How the contract maps onto etcd
//!
//! Each lock has two keys under the prefix, `shedlock/` by default, a scheduled job a third, its
//! [job state](#job-state) three more, an operator's [pause](#pauses) and last action two more,
//! and its last [trigger](#run-now) one more. The name in a key is percent-encoded, every byte outside `A–Z a–z 0–9 - . _ ~` becoming
//! `%XX`, so a name can hold any character but never a `/`, and names cannot collide or reach
//! outside the prefix. Empty names, names with a NUL or outer white space, and names over
//! [`max_name_len`](EtcdLockProviderBuilder::max_name_len) are refused with
//! [`Error::is_invalid_config`](shedlock_core::Error::is_invalid_config). The keys are:
//!
//! - `{prefix}{name}/rec`, **without a lease**: the owner, the estimated `locked_at` and the
//!   acquisition's first lease. Only acquire writes it, so its `mod_revision` is the acquisition's
//!   **fencing token**, an etcd revision, strictly increasing across the cluster's history and the
//!   same through the acquisition's extends and release. Revisions never go back, so deleting the
//!   keys by hand does not restart it. A [pause](#pauses) of a lock without a record writes a free
//!   one, with no owner and no lease, which the first acquire replaces.
//! - `{prefix}{name}/hold`, **attached to a lease**, present while the lock is held. Expiry is the
//!   lease's TTL, counted by the etcd leader, which then deletes the hold.
//! - `{prefix}{name}/fire`, **without a lease**: the latest fire a scheduler claimed for the job,
//!   in microseconds. Only a fire claim writes it, so no release, expiry or unlock removes it, and
//!   a fire is never claimed twice.
//!
//! Every decision is one transaction whose compares are the contract's conditions. Acquire: `if
//! hold absent`. Fire claim: `if fire.mod_revision and pause.mod_revision are as read and hold
//! absent`, then it puts the record, the hold and the fire. Extend: `if rec.mod_revision == token
//! and hold present`. Release: `if rec.mod_revision == token`, so a release after expiry finds
//! the record and acts as the contract says, while a stale release or extend never touches a
//! record a new acquisition rewrote. Nothing that holds or frees a lock is ever put
//! unconditionally. Only a replica's published definitions and an operator's pause and last
//! action are.
//!
//! **Whole seconds, rounded toward safety.** Lease TTLs are whole seconds, and `at_most` is rounded
//! up. etcd grants at least its minimum TTL, 1.5 election timeouts rounded up, which is
//! [`ETCD_MIN_TTL`] (2 s) with etcd's default `--election-timeout` of 1 s. So a lock is held up to
//! a second longer than asked, a short lock up to 2 s, never shorter. The lease's clock starts at
//! the grant, after the record's `locked_at` is read, so the lock holds at least until the record's
//! `lock_until`. etcd's expiry sweep every 500 ms, and a new etcd leader renewing every lease to
//! its full TTL plus an election timeout, only lengthen a hold.
//!
//! **No wall clock.** etcd has none, so `locked_at` and `lock_until` in records and listings are
//! the client's clock estimates in milliseconds, shown to people and compared by nothing that
//! decides. `at_least` is measured on the leader's clock. The acquisition's first lease is kept,
//! holding no key, until its TTL runs out. A release counts the time since the acquisition as the
//! lease's granted TTL minus its whole seconds left, rounded so that the rest of `at_least` comes
//! out longer, or as the whole TTL once that lease ran out. The hold then moves, in one guarded
//! transaction, to a new lease of that rest, rounded up to whole seconds and etcd's minimum.
//!
//! **Fire claims**
//! ([`LockProvider::claim_fire`](shedlock_core::provider::LockProvider::claim_fire)). A claim reads
//! the lock's keys once and decides in [`FireClaim`](shedlock_core::provider::FireClaim)'s order.
//! When the fire is claimable, it grants a lease and sends one transaction that claims the fire
//! only if the fire key, the hold and the [pause](#pauses) are still as read. A claim that lost a
//! race looks again. **At most once per fire** rests on that compare alone, whatever the clocks
//! say.
//!
//! But "now", to compare with the fire's instant `F` and its window's end, is the **claiming
//! replica's clock**, as etcd has no wall clock and leases measure durations only. A replica whose
//! clock is ahead may run a fire early by the others' clocks, and one whose clock is behind may
//! find its window passed. A scheduler learns no store-clock offset from etcd. Keep the replicas'
//! clocks in sync (NTP).
//!
//! The same "now" judges whether a [pause](#pauses) still holds. A pause's start, and its end
//! for [`PauseFor::For`](shedlock_core::pause::PauseFor::For), are the **pausing client's clock**.
//! An end given with [`PauseFor::Until`](shedlock_core::pause::PauseFor::Until) must be after that
//! clock's now, and is kept as given, rounded up to whole microseconds. A replica whose clock is
//! ahead of the operator's ends a timed pause early by the operator's clock, and one behind ends
//! it late, by their difference. A pause until resumed depends on no clock.
//!
//! A claim's transaction is sent to one member only. If its reply is lost, the claim fails and
//! keeps its lease. If the transaction was applied, the scheduler recognises its own claim and runs
//! it. It is never sent to another member, whose answer would call the claim someone else's.
//!
//! # Job state
//!
//! [`release_run`](shedlock_core::provider::LockProvider::release_run) records how a scheduler's
//! run ended in three more keys of the lock, none with a lease:
//!
//! - `{prefix}{name}/last-run`: the fire, the runner, which is the record's owner, the start, which
//!   is the record's `locked_at`, the end, the outcome and the error text, capped to
//!   [`MAX_ERROR_LEN`](shedlock_core::jobs::MAX_ERROR_LEN).
//! - `{prefix}{name}/failures`: the consecutive failures, as the key's **version**, which counts
//!   the puts since it was last deleted. A failed or panicked run puts it, a success deletes it, a
//!   cancelled run leaves it. That is an increment, which etcd lacks, without reading the state.
//! - `{prefix}{name}/last-success`: when the last successful run ended.
//!
//! A transaction nested in the release's own writes them, under its guard (`if rec.mod_revision ==
//! token`) and in the same revision. So a release whose lock was taken over answers `false` and
//! writes nothing, and `release_run` costs exactly the round trips of `release`. The nested
//! transaction writes only `if last-run.mod_revision < token`, so each acquisition records one run,
//! and a release sent again after a lost reply, or a second recorded release, counts nothing twice.
//! The record's key is not touched, so its `mod_revision` stays the fencing token.
//!
//! **Times are estimates**: `ended` and `last_success` are the releasing replica's clock in
//! milliseconds, `started` the acquiring replica's. [`list`](shedlock_core::admin::LockAdmin::list)
//! and [`entry`](shedlock_core::admin::LockAdmin::entry) read the state keys with the lock's
//! others, at no extra round trip, and fill
//! [`LockEntry::state`](shedlock_core::admin::LockEntry::state), a default state when no run was
//! recorded yet. Unlocking, expiry and a new acquisition leave it as it is.
//!
//! **No history.** [`history`](shedlock_core::admin::LockAdmin::history) answers
//! [`Error::is_unsupported`](shedlock_core::Error::is_unsupported), and the builder has no
//! `history(..)`. Keeping the newest `keep` runs per lock would need a read of the kept runs, an
//! extra round trip on the path every run takes, or a range delete guessed without one. etcd also
//! keeps every revision of every key until compaction, within a database quota, 2 GiB by default,
//! and when it is reached all writes stop, the locks' too. That makes etcd a poor place for a log.
//! Use a SQL store when run history matters.
//!
//! **Definitions**
//! ([`publish_definitions`](shedlock_core::provider::LockProvider::publish_definitions)). There is
//! one key per (job, replica), `{prefix}!def/{encoded job}/{encoded replica}`, which never meets a
//! lock's, as `!` is never part of an encoded name, so `list` never shows it. It holds the
//! definition, the replica's version, and `published` and `expires` estimated on the replica's
//! clock. Each publish grants a lease of `ttl`, rounded up to whole seconds and at least etcd's
//! minimum, and puts its keys on it in one transaction per 64 definitions. Expiry is the lease's,
//! on the etcd leader's clock, so a dead replica's entries go by themselves and nothing needs
//! pruning. A republished key moves to the new lease, and the previous one runs out holding nothing
//! of it. A replica keeps about `ttl / heartbeat` leases. A job a replica no longer publishes stays
//! listed until its lease ends. [`definitions`](shedlock_core::admin::LockAdmin::definitions) is
//! one range read of what the leases still hold, sorted by job then replica.
//! [`forget`](shedlock_core::admin::LockAdmin::forget) is one range delete of the job's keys, of
//! every replica. If its reply is lost, it is sent again to another member, whose count then leaves
//! out what the first copy deleted.
//!
//! # Pauses
//!
//! [`pause`](shedlock_core::admin::LockAdmin::pause) keeps an operator's pause of a job's fires in
//! two more keys of its lock. Neither has a lease, so they outlive every acquisition, release,
//! expiry and unlock:
//!
//! - `{prefix}{name}/pause`: since when, until when (none: until resumed), by whom and why,
//!   times in microseconds.
//! - `{prefix}{name}/action`: the last pause, resume or unlock, by whom and when, in milliseconds.
//!
//! A pause is one transaction. It puts both keys, replacing any pause, and, nested, `if rec absent
//! then put rec` with a free record that has no owner and no lease. So a job paused before its
//! first run is listed, free, and its first acquire replaces that record as any acquire does, at a
//! later revision. The name, the actor, the reason and the end are checked before anything is
//! sent: a bad one is an [`Error::is_invalid_config`](shedlock_core::Error::is_invalid_config)
//! and nothing is written.
//!
//! The fire claim's one range read returns the pause with the lock's other keys, so honouring it
//! costs no round trip. The claim answers
//! [`FireClaim::Paused`](shedlock_core::provider::FireClaim::Paused) after "too early" and "window
//! passed", before "claimed elsewhere" and "held", judged on the claiming replica's clock (see
//! [the fire claims' clock](#how-the-contract-maps-onto-etcd)). Its transaction compares the pause
//! key's `mod_revision` as read, 0 when there was none, so a pause committed between the read and
//! the transaction fails it, and the claim looks again and answers `Paused`. A pause value the
//! claim cannot read, not written by this provider, fails the claim rather than being ignored.
//! Listings show no pause for it, and a resume removes it. Acquire, extend, release and leader
//! latches never read the pause, and a run in progress keeps its lock.
//!
//! [`resume`](shedlock_core::admin::LockAdmin::resume) is one transaction, `if pause present then
//! delete pause, put action`. It answers the pause it deleted, also one whose end had passed, and
//! writes nothing when there is none. It is sent once, as a repeat would find no pause.
//! [`unlock`](shedlock_core::admin::LockAdmin::unlock) and `force_unlock` put the action,
//! `unlocked` by the actor, in the transaction that deletes the hold.
//! [`list`](shedlock_core::admin::LockAdmin::list) and `entry` read both keys with the lock's
//! others into [`LockEntry::pause`](shedlock_core::admin::LockEntry::pause) and
//! [`LockEntry::last_action`](shedlock_core::admin::LockEntry::last_action).
//!
//! # Run now
//!
//! An operator's trigger ([`LockAdmin::trigger`](shedlock_core::admin::LockAdmin::trigger)) asks
//! the replicas for one run of a job now. It lives in two keys:
//!
//! - `{prefix}{name}/trigger`, **without a lease**: the lock's last trigger, pending, taken or
//!   expired: its id, when it was asked for and when it expires, in microseconds, who asked, and
//!   once taken, which replica took it and when. [`list`](shedlock_core::admin::LockAdmin::list)
//!   and `entry` show it as [`LockEntry::trigger`](shedlock_core::admin::LockEntry::trigger),
//!   with the recorded fire as [`LockEntry::last_fire`](shedlock_core::admin::LockEntry::last_fire).
//! - `{prefix}!trigger/{encoded name}`, a copy of a **pending** trigger under one prefix for all
//!   locks, **on a lease** of its expiry, rounded up to whole seconds and at least etcd's
//!   minimum. `!` is never part of an encoded name, so the copy never meets a lock's keys and
//!   `list` never shows it. A claim deletes it, and the lease deletes a copy nobody took, after
//!   its expiry, so the prefix holds only pending triggers and a few just expired. A claimed
//!   copy's lease is not revoked, which would cost the claim a round trip: it runs out by itself,
//!   holding nothing, as an acquisition's first lease does.
//!
//! **The clock** is the one fire claims use: the deciding client's. A trigger's `requested_at` is
//! the operator's clock, in whole milliseconds, and its expiry that plus `expires_in`. A replica
//! judges "expired" by its own clock, as it judges a fire's window and a pause's end, so a
//! replica whose clock is behind the operator's by more than the expiry's rounding may find the
//! copy gone, deleted by its lease on the etcd leader's clock, while its own clock calls the
//! trigger pending. That trigger is then expired for it. Keep the clocks in sync (NTP).
//!
//! **A trigger** reads the lock's keys in one range, as a fire claim does, and decides: refused,
//! with nothing written, while the job is paused
//! ([`TriggerAnswer::Paused`](shedlock_core::trigger::TriggerAnswer::Paused)), while the lock is
//! held (`Held`), or while a trigger of the job is pending (`Pending`). Otherwise it grants the
//! copy's lease and sends one transaction, `if the hold is absent and the pause and trigger keys'
//! mod_revisions are as read then put the trigger, its pending copy on the lease, and the last
//! action "triggered"`, with, nested, `if record absent then put a free record`, as a
//! [pause](#pauses) writes one. A transaction that lost a race revokes the lease and looks again.
//! It is sent once: a repeat of an applied copy would find its own trigger pending. If its reply
//! is lost, it fails saying so, and the entry shows whether it was written. The name, the actor
//! and `expires_in`, checked like `at_most`, are checked before anything is sent.
//!
//! **Pending triggers**
//! ([`LockProvider::pending_triggers`](shedlock_core::provider::LockProvider::pending_triggers))
//! are one range read of `{prefix}!trigger/` whatever the number of locks, filtered by the
//! reading replica's clock. A scheduler reads them at start, at an interval, and when woken.
//!
//! **A claim**
//! ([`LockProvider::claim_trigger`](shedlock_core::provider::LockProvider::claim_trigger)) reads
//! the lock's keys once and answers, writing nothing,
//! [`Gone`](shedlock_core::provider::TriggerClaim::Gone) unless the trigger is the one named and
//! pending, then `Paused`, then `Held`. Otherwise it is an acquire's lease and transaction, `if
//! hold absent then put record, put hold on the lease`, that also compares the trigger and pause
//! keys' `mod_revision`s as read, marks the trigger taken by the owner at the claim's now, and
//! deletes the pending copy. It **never touches the fire key**, so the regular fire of the window
//! still runs. Its fencing token is the transaction's revision, as an acquire's. A claim that
//! lost a race looks again, at most 4 times. It is sent once, and a lost reply fails it and keeps
//! its lease, as a fire claim's: the scheduler recognises its own claim by the holder.
//!
//! **The push**
//! ([`LockProvider::watch_triggers`](shedlock_core::provider::LockProvider::watch_triggers)) is an
//! etcd watch of the puts under `{prefix}!trigger/`: one `POST /v3/watch` whose answer the gateway
//! streams, one JSON message a line. It answers once etcd confirmed the watch, and a task of the
//! provider then wakes the scheduler at each put, so a trigger runs within a round trip or two.
//! Deletes, claims and lease expiry included, wake nobody. The watch ends when the stream ends, a
//! member going away, when its scheduler is gone, and after 5 minutes, which bounds how long a
//! connection that died silently goes unnoticed. The scheduler then reads the pending triggers and
//! watches again. Each watch holds one HTTP connection of its own while it lasts.
//!
//! # Round trips per operation
//!
//! | operation | round trips |
//! |---|---|
//! | acquire, lock held (skip) | 1 read, no write |
//! | acquire, won | 3: read, lease grant, transaction |
//! | acquire, lost a race | 4: the above, then the lease is revoked (no lease left behind) |
//! | fire claim not won (too early, window passed, paused, claimed elsewhere, held) | 1 read, no write |
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
//! | pause, resume | 1 transaction |
//! | trigger, refused (paused, held, pending) | 1 read, no write |
//! | trigger | 3: read, lease grant, transaction |
//! | pending triggers | 1 read over `{prefix}!trigger/`, whatever the number of locks |
//! | trigger claim not won (gone, paused, held) | 1 read, no write |
//! | trigger claim, won | 3: read, lease grant, transaction |
//! | watch triggers | 1 streamed request, for up to 5 minutes |
//!
//! Reads are linearizable, as is etcd's default. Every operation runs under one deadline, the
//! [`call_timeout`](EtcdLockProviderBuilder::call_timeout), 5 s by default like the SQL stores, so
//! a black-holed member cannot hang a caller. A timed-out connection is closed, never reused. A
//! timed-out acquire may have been applied, and the lock is then held until `at_most`, unless the
//! revoke of its lease after the failed transaction gets through. An acquire's or a fire claim's
//! transaction that may have reached a member is never sent again to another, whose answer would be
//! "held" or "claimed elsewhere" for its own effect. It fails instead, saying the reply was lost.
//!
//! # Leader latch
//!
//! A [`LeaderLatch`](shedlock_core::LeaderLatch) on this store hands over after a leader process
//! dies within the lease rounded up to whole seconds, plus etcd's 500 ms expiry sweep, plus one
//! acquire interval and its jitter, as a test with a `kill -9` of the leader process shows. If the
//! etcd leader is lost at the same time, add the election and up to one election timeout, as the
//! new etcd leader renews every lease when it takes over.
//!
//! # Admin
//!
//! In [`LockAdmin`](shedlock_core::admin::LockAdmin), `list` is one range over the prefix. `unlock`
//! frees a lock only if it is held and its owner, `locked_at` and token are still as listed.
//! `force_unlock` returns what it freed. Freeing deletes the hold and records the actor as the last
//! action, so the record, the token sequence, the job state, a pause and a trigger stay. `pause` and
//! `resume` work as described [above](#pauses), `trigger` [as well](#run-now). `definitions` and `forget` work as described above, and
//! `history` is unsupported. There is no schema: `ddl()` and `missing_ddl()` are `None`, and
//! `create_table()` does nothing and succeeds.
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
