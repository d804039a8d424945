//! Lost replies (docs/guarantees.md, "After a restart or reset" and "Lost replies"), reproduced
//! deterministically on the shared Postgres, MariaDB, Redis and the run's etcd through the
//! cutting proxy ([`Proxy::cut_reply_to`]): the store gets the request, commits and answers, and
//! the proxy drops the answer and resets the connection. Each provider has one connection of its
//! own through the proxy (a Redis provider always has one), warmed up before the cut.
//!
//! - **`acquire`**: the call fails with an error that says its reply was lost (never `Ok(None)`,
//!   the answer a repeat would give: the lock held, by this very call), and the store shows the
//!   lock held by that owner (on etcd the acquire revokes its lease after a failed transaction,
//!   so the lock is free again);
//! - **`claim_fire`**: the claim fails the same way, and a second claim of the same fire answers
//!   `ClaimedElsewhere` whose holder is the claimer, with a `locked_at` between the instants
//!   the first claim was sent and its error came back, on the store's clock — what a scheduler
//!   adopts its own lost claim by; and so does each claim of a batch (`claim_fires`) on Postgres
//!   and Redis, whose stores send a batch in one round trip;
//! - **extend and release** are repeated after a lost reply, and succeed (not on etcd, whose
//!   gateway repeats a request on the next member only, and these tests give it one);
//! - **a Redis `resume`** fails the same way (a repeat would answer `Ok(None)`, no pause, its own
//!   effect), and the entry shows the pause gone and the resume recorded;
//! - **a `claim_trigger`** on Redis, Postgres and MariaDB fails the same way (a repeat would
//!   answer `Gone`), and the entry shows the trigger taken and the lock held by its owner, while a
//!   `trigger` is sent again and answers its own trigger, as it knows its id.
//!
//! Without the fix (a repeat after a lost connection), the acquire answers `Ok(None)` and the
//! claim `ClaimedElsewhere`: the first two fail. The third guards that the fix is no broader than
//! it should be.

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::admin::LockAdmin;
use shedlock_core::provider::chrono::{self, DateTime, Utc};
use shedlock_core::provider::{ClaimRequest, Fire, FireClaim, LockProvider, LockRecord};
use shedlock_etcd::EtcdLockProvider;
use shedlock_redis::{RedisLockProvider, redis};
use shedlock_sqlx::sqlx::mysql::{MySqlConnectOptions, MySqlSslMode};
use shedlock_sqlx::sqlx::postgres::{PgConnectOptions, PgSslMode};
use shedlock_sqlx::{MySqlLockProvider, PgLockProvider, sqlx, testing};
use shedlock_tests::proxy::Proxy;

/// The providers' call timeout: a lost reply must end the call long before it.
const CALL_TIMEOUT: Duration = Duration::from_secs(3);
const AT_MOST: Duration = Duration::from_mins(2);
/// How far a `locked_at` may lie outside the bracket of two readings of the store's clock. The
/// bracket is exact on a clock that never goes back, but every store reads a wall clock
/// (Postgres' `statement_timestamp()`, MariaDB's `UTC_TIMESTAMP(3)`, Redis' `TIME`), which NTP
/// may slew or step back a little between two readings. A few milliseconds cover that; a
/// claim sent by anyone else would still carry another owner.
const CLOCK_TOLERANCE: chrono::Duration = chrono::Duration::milliseconds(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    Postgres,
    MariaDb,
    Redis,
    Etcd,
}

/// A provider of `store` whose one connection goes through a proxy of its own, and what to
/// clean up.
struct Rig {
    proxy: Proxy,
    provider: Arc<dyn LockProvider>,
    cleanup: Cleanup,
    /// The owner id of the calls under test: unique, in no other request (the cut aims at it).
    owner: String,
    /// The provider as an admin, on the SQL stores (their trigger calls).
    admin: Option<Arc<dyn LockAdmin>>,
    /// etcd's second member: a second proxy to the same server that never cuts, to which the
    /// gateway would send a request again after the first member's connection broke.
    _second: Option<Proxy>,
}

enum Cleanup {
    Postgres {
        url: String,
        drop: String,
    },
    MariaDb {
        url: String,
        drop: String,
    },
    Keys {
        url: String,
        keys: Vec<Vec<u8>>,
    },
    /// Keys under a prefix of this test's own on the run's etcd, which is thrown away with it.
    Nothing,
}

impl Rig {
    /// `None` (after a skip notice) without the store's URL.
    async fn new(store: Store) -> Option<Self> {
        let suffix = testing::unique_suffix();
        let owner = format!("lost-reply-owner:{suffix}");
        let rig = match store {
            Store::Postgres => {
                let url = testing::postgres_url()?;
                let options: PgConnectOptions = url.parse().expect("a Postgres URL");
                let proxy = proxy_to(options.get_host(), options.get_port()).await;
                let table = testing::unique_table_name("shedlock_lost");
                // Plain text: the proxy finds the request to cut by its bytes (a server with TLS
                // would otherwise be asked for it: sqlx's default `sslmode` is `prefer`).
                let options = options
                    .host("127.0.0.1")
                    .port(proxy.port())
                    .ssl_mode(PgSslMode::Disable);
                let provider = PgLockProvider::from_options(options)
                    .max_connections(1)
                    .table(&table)
                    .call_timeout(CALL_TIMEOUT)
                    .connect()
                    .await
                    .expect("connect through the proxy");
                provider
                    .create_table_if_not_exists()
                    .await
                    .expect("create the lock table");
                let provider = Arc::new(provider);
                Self {
                    proxy,
                    provider: Arc::clone(&provider) as Arc<dyn LockProvider>,
                    admin: Some(provider),
                    cleanup: Cleanup::Postgres {
                        url,
                        drop: format!("DROP TABLE \"{table}\""),
                    },
                    owner,
                    _second: None,
                }
            }
            Store::MariaDb => {
                let url = testing::mysql_url()?;
                let options: MySqlConnectOptions = url.parse().expect("a MySQL URL");
                let proxy = proxy_to(options.get_host(), options.get_port()).await;
                let table = testing::unique_table_name("shedlock_lost");
                let options = options
                    .host("127.0.0.1")
                    .port(proxy.port())
                    .ssl_mode(MySqlSslMode::Disabled);
                let provider = MySqlLockProvider::from_options(options)
                    .max_connections(1)
                    .table(&table)
                    .call_timeout(CALL_TIMEOUT)
                    .connect()
                    .await
                    .expect("connect through the proxy");
                provider
                    .create_table_if_not_exists()
                    .await
                    .expect("create the lock table");
                let provider = Arc::new(provider);
                Self {
                    proxy,
                    provider: Arc::clone(&provider) as Arc<dyn LockProvider>,
                    admin: Some(provider),
                    cleanup: Cleanup::MariaDb {
                        url,
                        drop: format!("DROP TABLE `{table}`"),
                    },
                    owner,
                    _second: None,
                }
            }
            Store::Redis => Self::redis(owner).await?,
            Store::Etcd => Self::etcd(owner).await?,
        };
        Some(rig)
    }

    /// The Redis rig: a provider whose connection goes through the proxy.
    async fn redis(owner: String) -> Option<Self> {
        Some(Self::redis_admin(owner).await?.0)
    }

    /// The Redis rig, and its provider as itself, for the admin calls.
    async fn redis_admin(owner: String) -> Option<(Self, Arc<RedisLockProvider>)> {
        let url = shedlock_redis::testing::redis_url()?;
        let info =
            redis::IntoConnectionInfo::into_connection_info(url.as_str()).expect("a Redis URL");
        let redis::ConnectionAddr::Tcp(host, port) = info.addr().clone() else {
            panic!("SHEDLOCK_REDIS_URL must be a TCP address for the proxy: {url}");
        };
        let proxy = proxy_to(&host, port).await;
        let info = info.set_addr(redis::ConnectionAddr::Tcp("127.0.0.1".into(), proxy.port()));
        let provider = RedisLockProvider::builder(info)
            .key_prefix(shedlock_redis::testing::unique_prefix("lost-reply"))
            .call_timeout(CALL_TIMEOUT)
            .connect()
            .await
            .expect("connect through the proxy");
        let provider = Arc::new(provider);
        let rig = Self {
            proxy,
            cleanup: Cleanup::Keys {
                url,
                keys: std::iter::once(lock_name())
                    .chain(batch_names())
                    .map(|name| provider.key(&name))
                    .collect(),
            },
            provider: Arc::clone(&provider) as Arc<dyn LockProvider>,
            admin: None,
            owner,
            _second: None,
        };
        Some((rig, provider))
    }

    /// The etcd rig: a provider with two members, both proxies to the run's etcd.
    async fn etcd(owner: String) -> Option<Self> {
        let url = shedlock_etcd::testing::etcd_url()?;
        let endpoint = url.trim_start_matches("etcd://");
        let (host, port) = endpoint.rsplit_once(':').expect("etcd://HOST:PORT");
        let port = port.parse().expect("a port");
        let (proxy, second) = (proxy_to(host, port).await, proxy_to(host, port).await);
        let members = format!("127.0.0.1:{},127.0.0.1:{}", proxy.port(), second.port());
        let provider = EtcdLockProvider::builder(format!("etcd://{members}"))
            .prefix(shedlock_etcd::testing::unique_prefix())
            .call_timeout(CALL_TIMEOUT)
            .build()
            .expect("a valid URL");
        Some(Self {
            proxy,
            provider: Arc::new(provider),
            cleanup: Cleanup::Nothing,
            admin: None,
            owner,
            _second: Some(second),
        })
    }

    /// What the cut aims at in the request of an acquire or a claim that writes: the owner id
    /// (MariaDB's claim reads the row first, in a statement without it), or on etcd, whose
    /// values travel base64-encoded, the transaction's path (an acquire or claim sends one).
    fn write_request(&self, store: Store) -> Vec<u8> {
        if store == Store::Etcd {
            b"/v3/kv/txn".to_vec()
        } else {
            self.owner.as_bytes().to_vec()
        }
    }

    /// Drops the test's table, or deletes its keys (straight to the server, not through the
    /// proxy).
    async fn clean_up(self) {
        match self.cleanup {
            Cleanup::Postgres { url, drop } => {
                let pool = sqlx::PgPool::connect(&url).await.expect("connect");
                sqlx::raw_sql(sqlx::AssertSqlSafe(drop))
                    .execute(&pool)
                    .await
                    .expect("drop the table");
            }
            Cleanup::MariaDb { url, drop } => {
                let pool = sqlx::MySqlPool::connect(&url).await.expect("connect");
                sqlx::raw_sql(sqlx::AssertSqlSafe(drop))
                    .execute(&pool)
                    .await
                    .expect("drop the table");
            }
            Cleanup::Nothing => {}
            Cleanup::Keys { url, keys } => {
                let client = redis::Client::open(url).expect("a Redis URL");
                let mut conn = client
                    .get_multiplexed_async_connection()
                    .await
                    .expect("connect to delete the keys");
                redis::cmd("DEL")
                    .arg(keys)
                    .query_async::<()>(&mut conn)
                    .await
                    .expect("delete the keys");
            }
        }
    }

    /// The store's clock, from a claim of a fire a year ahead (always `TooEarly`, writes
    /// nothing), as the conformance suite reads it. Its owner (`probe`) is not the one the
    /// cuts aim at.
    async fn store_now(&self, name: &str) -> DateTime<Utc> {
        let far = whole_ms(Utc::now() + chrono::Duration::days(365));
        let fire = Fire::new(far, far + chrono::Duration::milliseconds(1)).expect("a fire");
        match self
            .provider
            .claim_fire(name, &fire, AT_MOST, "probe")
            .await
            .expect("a claim of a fire a year ahead")
        {
            FireClaim::TooEarly { now } => now,
            other => panic!("a claim of a fire a year ahead answered {other:?}"),
        }
    }
}

/// A proxy to `host:port` (resolved now).
async fn proxy_to(host: &str, port: u16) -> Proxy {
    let upstream = tokio::net::lookup_host((host, port))
        .await
        .expect("resolve the store's host")
        .next()
        .expect("an address for the store's host");
    Proxy::start(upstream).await.expect("start a proxy")
}

/// The one lock name of a test (each test has a table or key prefix of its own).
fn lock_name() -> String {
    "lost-reply".to_owned()
}

/// The locks of the lost batch.
fn batch_names() -> Vec<String> {
    (0..3).map(|i| format!("{}-{i}", lock_name())).collect()
}

fn whole_ms(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(t.timestamp_millis()).expect("in range")
}

/// The error of a call whose reply was lost: a store failure that says so, naming the lock, and
/// what it means (`meaning`).
fn assert_lost_reply(error: &shedlock_core::Error, name: &str, meaning: &str) {
    let text = error.to_string();
    assert!(error.is_backend(), "{error:?}");
    assert!(text.contains("reply was lost"), "{text}");
    assert!(text.contains(&format!("{name:?}")), "{text}");
    assert!(text.contains(meaning), "{text}");
}

/// What the error of a lost acquire says it means.
fn lost_acquire_means(store: Store) -> &'static str {
    if store == Store::Etcd {
        "its lease was revoked"
    } else {
        "may be held by this owner"
    }
}

/// (a) An acquire whose reply is lost fails (a repeat would have answered `Ok(None)`), and the
/// store shows the lock held by its owner: it had committed.
async fn acquire_whose_reply_is_lost(store: Store) {
    let Some(rig) = Rig::new(store).await else {
        return;
    };
    let (p, name, owner) = (&rig.provider, lock_name(), rig.owner.as_str());
    // Warm up: the connection, the acquire and release statements (or scripts), and an existing
    // expired row (MariaDB's acquire then takes it in its first statement, whose reply is cut).
    let first = p
        .acquire(&name, AT_MOST, owner)
        .await
        .expect("acquire")
        .expect("free");
    assert!(p.release(&first, Duration::ZERO).await.expect("release"));

    rig.proxy.cut_reply_to(rig.write_request(store));
    let outcome = p.acquire(&name, AT_MOST, owner).await;
    assert_eq!(rig.proxy.replies_cut(), 1, "the acquire's reply was cut");
    let error = match outcome {
        Err(error) => error,
        Ok(answer) => panic!(
            "{store:?}: an acquire whose reply was lost must fail, not answer {answer:?} (a \
             repeat finds the lock held by this very call)"
        ),
    };
    assert_lost_reply(&error, &name, lost_acquire_means(store));
    if store == Store::Etcd {
        // The acquire revokes its lease after any failed transaction, so whatever the lost
        // copy took is given back at once.
        let holder = p.holder(&name).await.expect("holder");
        assert_eq!(holder, None, "the lost acquire's lease was revoked");
        eprintln!("{store:?}: lost acquire: {error}; then free");
        rig.clean_up().await;
        return;
    }
    let holder = p
        .holder(&name)
        .await
        .expect("holder (repeated after a lost reply if need be)")
        .expect("the lost acquire committed: the lock is held");
    assert_eq!(holder.owner(), owner, "{holder}");
    assert!(
        holder.fencing_token() > first.fencing_token(),
        "a new acquisition: {holder} after {first}"
    );
    eprintln!("{store:?}: lost acquire: {error}; then held: {holder}");
    rig.clean_up().await;
}

/// (b) A fire claim whose reply is lost fails; the next claim of the same fire answers
/// `ClaimedElsewhere` with the claimer as holder, locked between the lost claim's send and its
/// error on the store's clock.
async fn claim_whose_reply_is_lost(store: Store) {
    let Some(rig) = Rig::new(store).await else {
        return;
    };
    let (p, name, owner) = (&rig.provider, lock_name(), rig.owner.as_str());
    // Also warms up the claim statement (or script) and, on MariaDB, its look.
    let start = rig.store_now(&name).await;
    let fire = Fire::new(
        whole_ms(start - chrono::Duration::seconds(1)),
        whole_ms(start + chrono::Duration::minutes(10)),
    )
    .expect("an open fire");

    let sent = rig.store_now(&name).await;
    rig.proxy.cut_reply_to(rig.write_request(store));
    let outcome = p.claim_fire(&name, &fire, AT_MOST, owner).await;
    assert_eq!(rig.proxy.replies_cut(), 1, "the claim's reply was cut");
    assert!(!rig.proxy.is_armed(), "the cut was used");
    let error = match outcome {
        Err(error) => error,
        Ok(answer) => panic!(
            "{store:?}: a claim whose reply was lost must fail, not answer {answer:?} (a repeat \
             finds its own fire recorded)"
        ),
    };
    let returned = rig.store_now(&name).await;
    assert_lost_reply(&error, &name, "may be held by this owner");

    let again = p
        .claim_fire(&name, &fire, AT_MOST, owner)
        .await
        .expect("the second claim");
    let FireClaim::ClaimedElsewhere {
        now,
        recorded,
        holder,
    } = &again
    else {
        panic!("{store:?}: the second claim of the fire answered {again:?}");
    };
    assert_eq!(*recorded, fire.at(), "the lost claim recorded the fire");
    assert_eq!(holder.owner(), owner, "the claimer holds it: {holder}");
    assert!(
        holder.locked_at() >= sent - CLOCK_TOLERANCE
            && holder.locked_at() <= returned + CLOCK_TOLERANCE,
        "{store:?}: locked_at {} is not between the claim's send ({sent}) and its error \
         ({returned}) on the store's clock",
        holder.locked_at()
    );
    assert!(holder.lock_until() > *now, "still held: {holder}");
    let read: Option<LockRecord> = p.holder(&name).await.expect("holder");
    assert_eq!(
        read.as_ref(),
        Some(holder),
        "the claim's holder is the lock's row"
    );
    eprintln!("{store:?}: lost claim: {error}; then {holder} (sent {sent}, error back {returned})");
    rig.clean_up().await;
}

/// (b') A batch of fire claims whose reply is lost (docs/guarantees.md, "Many jobs at one
/// instant"): the whole call fails saying so, and each claim of it is then found as a lost single
/// claim is: a second batch answers `ClaimedElsewhere` for each, its holder the claimer, with a
/// `locked_at` between the batch's send and its error.
async fn batch_whose_reply_is_lost(store: Store) {
    let Some(rig) = Rig::new(store).await else {
        return;
    };
    let (p, owner) = (&rig.provider, rig.owner.as_str());
    let names = batch_names();
    let start = rig.store_now(&names[0]).await;
    let fire = Fire::new(
        whole_ms(start - chrono::Duration::seconds(1)),
        whole_ms(start + chrono::Duration::minutes(10)),
    )
    .expect("an open fire");
    let claims: Vec<ClaimRequest<'_>> = names
        .iter()
        .map(|name| ClaimRequest::new(name, &fire, AT_MOST))
        .collect();
    // Warms up the batch's statement: a batch of fires a year ahead writes nothing.
    let far = whole_ms(start + chrono::Duration::days(365));
    let ahead = Fire::new(far, far + chrono::Duration::minutes(1)).expect("a fire");
    let warm: Vec<ClaimRequest<'_>> = names
        .iter()
        .map(|name| ClaimRequest::new(name, &ahead, AT_MOST))
        .collect();
    p.claim_fires(&warm, owner)
        .await
        .expect("a batch too early");

    let sent = rig.store_now(&names[0]).await;
    rig.proxy.cut_reply_to(rig.write_request(store));
    let outcome = p.claim_fires(&claims, owner).await;
    assert_eq!(rig.proxy.replies_cut(), 1, "the batch's reply was cut");
    let error = match outcome {
        Err(error) => error,
        Ok(answers) => panic!("{store:?}: a batch whose reply was lost answered {answers:?}"),
    };
    let returned = rig.store_now(&names[0]).await;
    let text = error.to_string();
    assert!(error.is_backend(), "{store:?}: {error:?}");
    assert!(
        text.contains("the reply was lost")
            && text.contains("3 locks")
            && text.contains("each of the locks may be held by this owner"),
        "{store:?}: {text}"
    );
    let again = p
        .claim_fires(&claims, owner)
        .await
        .expect("the second batch");
    for (name, answer) in names.iter().zip(&again) {
        let Ok(FireClaim::ClaimedElsewhere {
            recorded, holder, ..
        }) = answer
        else {
            panic!("{store:?}: the second claim of {name:?} answered {answer:?}");
        };
        assert_eq!(*recorded, fire.at(), "the lost batch recorded the fire");
        assert_eq!(holder.owner(), owner, "the claimer holds it: {holder}");
        assert!(
            holder.locked_at() >= sent - CLOCK_TOLERANCE
                && holder.locked_at() <= returned + CLOCK_TOLERANCE,
            "{store:?}: locked_at {} is not between the batch's send ({sent}) and its error \
             ({returned})",
            holder.locked_at()
        );
    }
    eprintln!("{store:?}: lost batch: {error}");
    rig.clean_up().await;
}

/// (c) Extend and release are repeated after a lost reply (same effect, same answer): both
/// succeed, on a new connection.
async fn extend_and_release_are_repeated(store: Store) {
    let Some(rig) = Rig::new(store).await else {
        return;
    };
    let (p, name, owner) = (&rig.provider, lock_name(), rig.owner.as_str());
    let record = p
        .acquire(&name, AT_MOST, owner)
        .await
        .expect("acquire")
        .expect("free");
    let accepted = rig.proxy.accepted();

    rig.proxy.cut_reply_to(owner.as_bytes().to_vec());
    let extended = p
        .extend(&record, AT_MOST)
        .await
        .expect("an extend whose reply was lost runs again")
        .expect("and finds the lock still this acquisition's");
    assert_eq!(rig.proxy.replies_cut(), 1, "the extend's reply was cut");
    assert_eq!(extended.fencing_token(), record.fencing_token());
    assert!(extended.lock_until() >= record.lock_until());

    rig.proxy.cut_reply_to(owner.as_bytes().to_vec());
    let released = p
        .release(&extended, Duration::ZERO)
        .await
        .expect("a release whose reply was lost runs again");
    assert_eq!(rig.proxy.replies_cut(), 2, "the release's reply was cut");
    assert!(released, "the repeat finds the acquisition it released");
    assert!(
        rig.proxy.accepted() > accepted,
        "the repeats ran on new connections"
    );
    assert_eq!(p.holder(&name).await.expect("holder"), None, "released");
    rig.clean_up().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn postgres_acquire_whose_reply_is_lost_fails_and_holds() {
    acquire_whose_reply_is_lost(Store::Postgres).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn mariadb_acquire_whose_reply_is_lost_fails_and_holds() {
    acquire_whose_reply_is_lost(Store::MariaDb).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn redis_acquire_whose_reply_is_lost_fails_and_holds() {
    acquire_whose_reply_is_lost(Store::Redis).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn postgres_claim_whose_reply_is_lost_fails_and_shows_its_holder() {
    claim_whose_reply_is_lost(Store::Postgres).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn postgres_batch_whose_reply_is_lost_fails_and_shows_each_holder() {
    batch_whose_reply_is_lost(Store::Postgres).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn redis_batch_whose_reply_is_lost_fails_and_shows_each_holder() {
    batch_whose_reply_is_lost(Store::Redis).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn mariadb_claim_whose_reply_is_lost_fails_and_shows_its_holder() {
    claim_whose_reply_is_lost(Store::MariaDb).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn redis_claim_whose_reply_is_lost_fails_and_shows_its_holder() {
    claim_whose_reply_is_lost(Store::Redis).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn postgres_extend_and_release_whose_replies_are_lost_are_repeated() {
    extend_and_release_are_repeated(Store::Postgres).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn mariadb_extend_and_release_whose_replies_are_lost_are_repeated() {
    extend_and_release_are_repeated(Store::MariaDb).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn redis_extend_and_release_whose_replies_are_lost_are_repeated() {
    extend_and_release_are_repeated(Store::Redis).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn etcd_acquire_whose_reply_is_lost_fails_and_frees() {
    acquire_whose_reply_is_lost(Store::Etcd).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn etcd_claim_whose_reply_is_lost_fails_and_shows_its_holder() {
    claim_whose_reply_is_lost(Store::Etcd).await;
}

/// (d) Redis: a resume whose reply is lost fails (a repeat would have answered `Ok(None)`: no
/// pause, by its own effect), and the entry shows that it removed the pause and recorded its actor.
#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn redis_resume_whose_reply_is_lost_fails_and_the_pause_is_gone() {
    use shedlock_core::admin::{ActionKind, LockAdmin as _};
    use shedlock_core::pause::PauseFor;
    let Some((rig, p)) =
        Rig::redis_admin(format!("lost-reply-actor:{}", testing::unique_suffix())).await
    else {
        return;
    };
    let (name, actor) = (lock_name(), rig.owner.as_str());
    // Warm up: the connection and the pause and resume scripts.
    p.pause(&name, PauseFor::UntilResumed, None, "ann")
        .await
        .expect("pause");
    p.resume(&name, "ann")
        .await
        .expect("resume")
        .expect("paused");
    p.pause(&name, PauseFor::UntilResumed, None, "ann")
        .await
        .expect("pause");

    rig.proxy.cut_reply_to(actor.as_bytes().to_vec());
    let outcome = p.resume(&name, actor).await;
    assert_eq!(rig.proxy.replies_cut(), 1, "the resume's reply was cut");
    let error = match outcome {
        Err(error) => error,
        Ok(answer) => panic!(
            "a resume whose reply was lost must fail, not answer {answer:?} (a repeat finds no \
             pause)"
        ),
    };
    assert_lost_reply(&error, &name, "the pause may have been removed");
    let entry = p.entry(&name).await.expect("entry").expect("a record");
    assert_eq!(entry.pause(), None, "the lost resume removed the pause");
    let action = entry.last_action().expect("recorded");
    assert_eq!(
        (action.kind, action.by.as_str()),
        (ActionKind::Resumed, actor)
    );
    rig.clean_up().await;
}

/// (e) Redis: a trigger claim whose reply is lost fails (a repeat would have answered `Gone`: the
/// trigger taken, by its own effect), and the entry shows the trigger taken by its owner and the
/// lock held; a trigger request whose reply is lost is sent again and answers its own trigger
/// (`Requested`, the same id), not `Pending`.
#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn redis_trigger_claim_whose_reply_is_lost_fails_and_a_lost_request_is_repeated() {
    use shedlock_core::admin::LockAdmin as _;
    use shedlock_core::trigger::{TriggerAnswer, TriggerClaim};
    let Some((rig, p)) =
        Rig::redis_admin(format!("lost-reply-trigger:{}", testing::unique_suffix())).await
    else {
        return;
    };
    let (name, actor) = (lock_name(), rig.owner.as_str());
    let minute = Duration::from_mins(1);
    let requested = |answer| match answer {
        TriggerAnswer::Requested(trigger) => trigger,
        other => panic!("trigger answered {other:?}"),
    };
    // Warm up: the connection and the trigger, index and claim scripts.
    let warm = requested(p.trigger(&name, "ann", minute).await.expect("trigger"));
    let claimed = p
        .claim_trigger(&name, warm.id, minute, "warm-up")
        .await
        .expect("claim");
    let TriggerClaim::Claimed(record) = claimed else {
        panic!("the warm-up claim answered {claimed:?}");
    };
    p.release(&record, Duration::ZERO).await.expect("release");

    rig.proxy.cut_reply_to(actor.as_bytes().to_vec());
    let trigger = requested(p.trigger(&name, actor, minute).await.expect("repeated"));
    assert_eq!(rig.proxy.replies_cut(), 1, "the trigger's reply was cut");
    assert_eq!(trigger.by, actor);
    let shown = p.entry(&name).await.expect("entry").expect("a record");
    assert_eq!(
        shown.trigger().map(|t| t.id),
        Some(trigger.id),
        "one trigger, written once"
    );

    rig.proxy.cut_reply_to(actor.as_bytes().to_vec());
    let outcome = p.claim_trigger(&name, trigger.id, minute, actor).await;
    assert_eq!(rig.proxy.replies_cut(), 2, "the claim's reply was cut");
    let error = match outcome {
        Err(error) => error,
        Ok(answer) => panic!(
            "a trigger claim whose reply was lost must fail, not answer {answer:?} (a repeat \
             finds the trigger taken)"
        ),
    };
    assert_lost_reply(&error, &name, "the trigger taken by it");
    let entry = p.entry(&name).await.expect("entry").expect("a record");
    assert_eq!(
        entry.trigger().and_then(|t| t.taken_by.as_deref()),
        Some(actor)
    );
    assert!(entry.is_held(), "the lost claim took the lock");
    assert_eq!(entry.record().owner(), actor);
    rig.clean_up().await;
}

/// (f) Postgres and MariaDB: as (e), a trigger claim whose reply is lost fails and shows the
/// trigger taken by its owner, the lock held; a trigger request whose reply is lost is sent again
/// (its read finds its own id) and answers its own trigger, not `Pending`.
async fn sql_trigger_claim_whose_reply_is_lost(store: Store) {
    use shedlock_core::trigger::{TriggerAnswer, TriggerClaim};
    let Some(rig) = Rig::new(store).await else {
        return;
    };
    let p = rig.admin.clone().expect("a SQL rig has its admin");
    let (name, actor) = (lock_name(), rig.owner.as_str());
    let minute = Duration::from_mins(1);
    let requested = |answer| match answer {
        TriggerAnswer::Requested(trigger) => trigger,
        other => panic!("{store:?}: trigger answered {other:?}"),
    };
    // Warm up: the connection, the layout and the statements.
    let warm = requested(p.trigger(&name, "ann", minute).await.expect("trigger"));
    let claimed = p
        .claim_trigger(&name, warm.id, minute, "warm-up")
        .await
        .expect("claim");
    let TriggerClaim::Claimed(record) = claimed else {
        panic!("{store:?}: the warm-up claim answered {claimed:?}");
    };
    p.release(&record, Duration::ZERO).await.expect("release");

    rig.proxy.cut_reply_to(actor.as_bytes().to_vec());
    let trigger = requested(p.trigger(&name, actor, minute).await.expect("repeated"));
    assert_eq!(rig.proxy.replies_cut(), 1, "the trigger's reply was cut");
    assert_eq!(trigger.by, actor);
    let shown = p.entry(&name).await.expect("entry").expect("a row");
    assert_eq!(
        shown.trigger().map(|t| t.id),
        Some(trigger.id),
        "one trigger, written once"
    );

    rig.proxy.cut_reply_to(actor.as_bytes().to_vec());
    let outcome = p.claim_trigger(&name, trigger.id, minute, actor).await;
    assert_eq!(rig.proxy.replies_cut(), 2, "the claim's reply was cut");
    let error = match outcome {
        Err(error) => error,
        Ok(answer) => panic!(
            "{store:?}: a trigger claim whose reply was lost must fail, not answer {answer:?} \
             (a repeat finds the trigger taken)"
        ),
    };
    assert_lost_reply(&error, &name, "the trigger taken by it");
    let entry = p.entry(&name).await.expect("entry").expect("a row");
    assert_eq!(
        entry.trigger().and_then(|t| t.taken_by.as_deref()),
        Some(actor)
    );
    assert!(entry.is_held(), "the lost claim took the lock");
    assert_eq!(entry.record().owner(), actor);
    rig.clean_up().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn postgres_trigger_claim_whose_reply_is_lost_fails_and_a_lost_request_is_repeated() {
    sql_trigger_claim_whose_reply_is_lost(Store::Postgres).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn mariadb_trigger_claim_whose_reply_is_lost_fails_and_a_lost_request_is_repeated() {
    sql_trigger_claim_whose_reply_is_lost(Store::MariaDb).await;
}
