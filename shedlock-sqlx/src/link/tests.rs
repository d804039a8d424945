//! The store's unit tests: rounding, owner checks, lost connections, timeouts' messages and the
//! retry loop on an in-memory SQLite database.

use std::sync::PoisonError;

use super::checkout::connection_lost;
use super::*;

#[test]
fn durations_round_up() {
    assert_eq!(micros_ceil(Duration::from_nanos(1)), 1);
    assert_eq!(micros_ceil(Duration::from_micros(7)), 7);
    assert_eq!(millis_ceil(Duration::from_micros(1_001)), 2);
    assert_eq!(millis_ceil(Duration::from_secs(3)), 3_000);
    assert_eq!(millis_ceil(Duration::ZERO), 0);
}

#[test]
fn owner_ids_must_fit() {
    let schema = Schema {
        has_token: true,
        has_last_fire: true,
        has_job_state: true,
        has_pause: true,
        has_trigger: true,
        owner_max: Some(3),
    };
    assert!(schema.check_owner("abc").is_ok());
    assert!(schema.check_owner("äöü").is_ok(), "characters, not bytes");
    assert!(schema.check_owner("abcd").unwrap_err().is_invalid_config());
    assert!(schema.check_owner("").unwrap_err().is_invalid_config());
}

#[test]
fn only_broken_connections_count_as_lost() {
    use std::io::ErrorKind;
    let io = |kind: ErrorKind| sqlx::Error::Io(kind.into());
    for kind in [
        ErrorKind::UnexpectedEof,
        ErrorKind::BrokenPipe,
        ErrorKind::ConnectionReset,
    ] {
        assert!(connection_lost(&io(kind)), "{kind:?}");
        assert!(checkout_lost(&io(kind)), "{kind:?}");
    }
    // An established connection's socket failing in any way is a lost connection; a
    // connection that could not be made for a reason that will not go away is not.
    assert!(connection_lost(&io(ErrorKind::InvalidData)));
    assert!(!checkout_lost(&io(ErrorKind::InvalidData)));
    assert!(!checkout_lost(&io(ErrorKind::NotFound)));
    for other in [
        sqlx::Error::RowNotFound,
        sqlx::Error::Protocol("unexpected message".into()),
        sqlx::Error::PoolTimedOut,
        sqlx::Error::PoolClosed,
    ] {
        assert!(!connection_lost(&other), "{other}");
        assert!(!checkout_lost(&other), "{other}");
    }
}

fn target(own: bool) -> Target {
    Target {
        name: "Postgres at db:5432/app".into(),
        refusal: own.then(Arc::default),
        max: 4,
    }
}

/// A timeout says which lock, which step and, where there was one, the last error.
#[tokio::test(start_paused = true)]
async fn a_call_times_out_at_its_deadline_saying_where() {
    let call = Call::new("acquire", Duration::from_secs(2), target(true))
        .about("lock \"report\"".to_owned());
    let err = call
        .timed(std::future::pending::<()>())
        .await
        .expect_err("must time out");
    assert!(err.is_timeout());
    assert_eq!(
        err.to_string(),
        "lock store call `acquire` timed out after 2s: lock \"report\", waiting for a free \
         connection to Postgres at db:5432/app (all 4 of the provider's are busy)"
    );
    call.set_phase(CallStep::Connecting);
    call.note_error(&sqlx::Error::Io(
        std::io::ErrorKind::ConnectionRefused.into(),
    ));
    let text = call.timeout_error().to_string();
    assert!(
        text.ends_with(
            "lock \"report\", connecting to Postgres at db:5432/app (last error: error \
             communicating with database: connection refused)"
        ),
        "{text}"
    );
    call.set_phase(CallStep::Statement);
    let text = call.timeout_error().to_string();
    assert!(
        text.contains("waiting for Postgres at db:5432/app to answer the statement"),
        "{text}"
    );
    // Waiting while the provider's connections are being refused: the refusal is named.
    let waiting = Call::new("extend", Duration::from_secs(1), target(true));
    if let Some(refusal) = &waiting.target.refusal {
        *refusal.lock().unwrap_or_else(PoisonError::into_inner) =
            Some("connection refused".to_owned());
    }
    assert_eq!(
        waiting.timeout_error().to_string(),
        "lock store call `extend` timed out after 1s: waiting for a free connection to \
         Postgres at db:5432/app (all 4 of the provider's are busy or connecting; last \
         connect error: connection refused)"
    );
    let pooled = Call::new("release", Duration::from_secs(1), target(false));
    assert_eq!(
        pooled.timeout_error().to_string(),
        "lock store call `release` timed out after 1s: waiting for a connection to Postgres \
         at db:5432/app from the pool (at most 4)"
    );
}

/// [`Link::run`] on an in-memory SQLite pool: attempts that report a lost connection.
#[cfg(feature = "sqlite")]
mod retries {
    use std::sync::atomic::{AtomicU32, Ordering};

    use sqlx::Sqlite;
    use sqlx::sqlite::SqlitePoolOptions;

    use super::*;

    const POOL: u32 = 3;

    /// A store on an in-memory database: over a sqlx pool (`own` false) or with connections of its
    /// own.
    async fn link(own: bool) -> Link<Sqlite> {
        let conns = if own {
            let options = "sqlite::memory:".parse().expect("a valid URL");
            let anchor = <Sqlite as crate::dialect::Dialect>::keeps_anchor(&options);
            assert!(anchor, "an in-memory database keeps a connection open");
            Connections::Own(crate::conns::Own::new(
                options,
                <Sqlite as crate::dialect::Dialect>::setup,
                POOL,
                anchor,
                true,
            ))
        } else {
            let pool = SqlitePoolOptions::new()
                .max_connections(POOL)
                .connect("sqlite::memory:")
                .await
                .expect("an in-memory database");
            Connections::Pool(pool)
        };
        Link::new(conns, Settings::defaults(), "SQLite in memory".to_owned())
    }

    fn open(link: &Link<Sqlite>) -> u32 {
        link.stats().open
    }

    fn map(e: sqlx::Error) -> Error {
        Error::backend("test", e)
    }

    fn eof() -> sqlx::Error {
        sqlx::Error::Io(std::io::ErrorKind::UnexpectedEof.into())
    }

    /// Runs a call whose first `dead` attempts find their connection dead.
    ///
    /// That is as after a restart: the statement is sent, and the server is gone. The next attempts
    /// run `SELECT 7`. It returns the outcome and the number of attempts.
    async fn call_with_dead_connections(link: &Link<Sqlite>, dead: u32) -> (Result<i64>, u32) {
        let tries = &AtomicU32::new(0);
        let call = &link.call("extend");
        let outcome = link
            .run(call, |mut c| async move {
                let n = tries.fetch_add(1, Ordering::Relaxed) + 1;
                let outcome = if n <= dead {
                    let _sent = c.conn();
                    Ok(Err(eof()))
                } else {
                    call.timed(sqlx::query_scalar::<_, i64>("SELECT 7").fetch_one(c.conn()))
                        .await
                };
                c.settle(outcome, map)
            })
            .await;
        (outcome, tries.load(Ordering::Relaxed))
    }

    #[tokio::test]
    async fn each_dead_connection_is_closed_and_the_call_runs_again_on_another() {
        for own in [false, true] {
            let link = link(own).await;
            let (outcome, tries) = call_with_dead_connections(&link, POOL).await;
            assert_eq!(outcome.expect("the call succeeds"), 7, "own: {own}");
            assert_eq!(
                tries,
                POOL + 1,
                "one attempt per dead connection, then a fresh one (own: {own})"
            );
            // The dead connections were closed at once, the good one went back.
            assert_eq!(open(&link), 1, "own: {own}");
            if own {
                // Back in the list at once (sqlx's pool takes it back after a ping, in a
                // task of its own).
                assert_eq!(link.stats().idle, 1);
            }
        }
    }

    #[tokio::test]
    async fn retries_stop_after_pool_size_plus_one_attempts() {
        for own in [false, true] {
            let link = link(own).await;
            let (outcome, tries) = call_with_dead_connections(&link, u32::MAX).await;
            let err = outcome.expect_err("every connection was dead");
            assert!(err.is_backend(), "{err}");
            assert_eq!(tries, POOL + 1, "own: {own}");
            assert_eq!(open(&link), 0, "no dead connection went back (own: {own})");
        }
    }

    /// An acquire or a fire claim is not repeated once its statement was sent.
    ///
    /// The first lost connection ends it with an error that says so. That connection is closed.
    #[tokio::test]
    async fn a_call_that_may_not_repeat_fails_at_its_first_lost_reply() {
        for own in [false, true] {
            let link = link(own).await;
            let tries = &AtomicU32::new(0);
            let call = &link
                .call("acquire")
                .about("lock \"report\"".to_owned())
                .after_lost_reply(AfterLostReply::Fail("acquire lock \"report\"".to_owned()));
            let err = link
                .run(call, |mut c| async move {
                    tries.fetch_add(1, Ordering::Relaxed);
                    let _sent = c.conn();
                    c.settle(Ok(Err::<i64, _>(eof())), map)
                })
                .await
                .expect_err("the reply was lost");
            assert!(err.is_backend(), "{err}");
            assert_eq!(
                err.to_string(),
                "lock store failed to acquire lock \"report\" on SQLite in memory: the reply \
                 was lost (the connection died after the statement was sent) and the \
                 statement may have committed, so the lock may be held by this owner until \
                 at_most; not repeated"
            );
            let source = std::error::Error::source(&err).map(ToString::to_string);
            assert!(
                source
                    .as_deref()
                    .is_some_and(|s| s.contains("communicating")),
                "the driver's error is the source: {source:?}"
            );
            assert_eq!(
                tries.load(Ordering::Relaxed),
                1,
                "not repeated (own: {own})"
            );
            assert_eq!(
                open(&link),
                0,
                "the dead connection was closed (own: {own})"
            );
            // The next call opens a fresh connection.
            let (outcome, tries) = call_with_dead_connections(&link, 0).await;
            assert_eq!(outcome.expect("a fresh connection"), 7);
            assert_eq!(tries, 1);
        }
    }

    /// Behind a transaction pooler a statement runs inside `BEGIN` … `COMMIT`.
    ///
    /// A connection lost before the `COMMIT` was sent rolled back, so even an acquire runs again.
    /// One lost after it may have committed, and the acquire fails saying so.
    #[tokio::test]
    async fn behind_a_pooler_only_a_connection_lost_after_commit_loses_the_reply() {
        let mut settings = Settings::defaults();
        settings.transaction_pooler = true;
        let link: Link<Sqlite> = Link::new(
            Connections::Own(crate::conns::Own::new(
                "sqlite::memory:".parse().expect("a valid URL"),
                <Sqlite as crate::dialect::Dialect>::setup,
                POOL,
                true,
                true,
            )),
            settings,
            "SQLite in memory".to_owned(),
        );
        let fail = || AfterLostReply::Fail("acquire lock \"report\"".to_owned());
        // Lost while the statement ran: rolled back, run again, and the second attempt
        // commits.
        let tries = &AtomicU32::new(0);
        let call = &link.call("acquire").after_lost_reply(fail());
        let seven = link
            .run(call, |mut c| async move {
                if tries.fetch_add(1, Ordering::Relaxed) == 0 {
                    let _query = c.begin(sqlx::query::<Sqlite>("SELECT 7"), map).await?;
                    let _sent = c.conn();
                    return c.end::<i64>(Ok(Err(eof())), map).await;
                }
                statement!(c, sqlx::query_scalar::<_, i64>("SELECT 7"), map, fetch_one)
            })
            .await
            .expect("run again after a rollback");
        assert_eq!((seven, tries.load(Ordering::Relaxed)), (7, 2));
        // A statement of the attempt committed before the connection was lost: not
        // repeated.
        let tries = &AtomicU32::new(0);
        let call = &link.call("acquire").after_lost_reply(fail());
        let err = link
            .run(call, |mut c| async move {
                tries.fetch_add(1, Ordering::Relaxed);
                statement!(c, sqlx::query_scalar::<_, i64>("SELECT 7"), map, fetch_one)?;
                let _query = c.begin(sqlx::query::<Sqlite>("SELECT 8"), map).await?;
                let _sent = c.conn();
                c.end::<i64>(Ok(Err(eof())), map).await
            })
            .await
            .expect_err("a commit was sent");
        assert!(err.to_string().contains("the reply was lost"), "{err}");
        assert_eq!(tries.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn the_statements_own_errors_are_not_retried() {
        for own in [false, true] {
            let link = link(own).await;
            let tries = &AtomicU32::new(0);
            let call = &link.call("acquire");
            let err = link
                .run(call, |mut c| async move {
                    tries.fetch_add(1, Ordering::Relaxed);
                    let outcome = call
                        .timed(sqlx::query("SELECT * FROM no_such_table").execute(c.conn()))
                        .await;
                    c.settle(outcome, map)
                })
                .await
                .expect_err("no such table");
            assert!(err.to_string().contains("test"), "{err}");
            assert_eq!(tries.load(Ordering::Relaxed), 1, "own: {own}");
            assert_eq!(open(&link), 1, "the connection is fine (own: {own})");
            if own {
                assert_eq!(link.stats().idle, 1, "and went back at once");
            }
        }
    }

    #[tokio::test]
    async fn a_timeout_is_not_retried() {
        for own in [false, true] {
            let link = link(own).await;
            let tries = &AtomicU32::new(0);
            // Real time (SQLite connects on a thread of its own, which paused time would
            // outrun).
            let call = &Call::new("extend", Duration::from_millis(50), link.target.clone());
            let err = link
                .run(call, |mut c| async move {
                    tries.fetch_add(1, Ordering::Relaxed);
                    let _sent = c.conn();
                    let outcome = call
                        .timed(std::future::pending::<std::result::Result<(), sqlx::Error>>())
                        .await;
                    c.settle(outcome, map)
                })
                .await
                .expect_err("must time out");
            assert!(err.is_timeout(), "{err}");
            assert!(err.to_string().contains("to answer the statement"), "{err}");
            assert_eq!(tries.load(Ordering::Relaxed), 1, "own: {own}");
            assert_eq!(
                open(&link),
                0,
                "the unfinished connection was closed (own: {own})"
            );
        }
    }

    /// An in-memory database outlives the provider's connections.
    ///
    /// One more connection stays open for it. So closing every connection, all found dead, loses no
    /// table.
    #[tokio::test]
    async fn an_in_memory_database_survives_its_connections() {
        let link = link(true).await;
        let call = &link.call("create_table_if_not_exists");
        link.run(call, |mut c| async move {
            let outcome = call
                .timed(sqlx::query("CREATE TABLE kept (x INTEGER)").execute(c.conn()))
                .await;
            c.settle(outcome, map).map(drop)
        })
        .await
        .expect("create a table");
        let (outcome, _) = call_with_dead_connections(&link, u32::MAX).await;
        outcome.expect_err("every connection was dead");
        assert_eq!(open(&link), 0, "every connection was closed");
        let call = &link.call("holder");
        let rows = link
            .run(call, |mut c| async move {
                let outcome = call
                    .timed(
                        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM kept")
                            .fetch_one(c.conn()),
                    )
                    .await;
                c.settle(outcome, map)
            })
            .await
            .expect("the table is still there");
        assert_eq!(rows, 0);
    }

    /// The provider's own connections go back without a round trip, and a call that finds one idle
    /// uses it rather than opening another.
    #[tokio::test]
    async fn own_connections_are_reused_in_turn() {
        let link = link(true).await;
        for _ in 0..5 {
            let call = &link.call("holder");
            let seven = link
                .run(call, |mut c| async move {
                    let outcome = call
                        .timed(sqlx::query_scalar::<_, i64>("SELECT 7").fetch_one(c.conn()))
                        .await;
                    c.settle(outcome, map)
                })
                .await
                .expect("SELECT 7");
            assert_eq!(seven, 7);
            assert_eq!(
                link.stats(),
                ConnectionStats {
                    open: 1,
                    idle: 1,
                    max: POOL
                }
            );
        }
    }
}
