//! The etcd provider on private etcd processes of each test's own (free loopback ports,
//! temporary directories, every process killed at the end, also on panic): write and lease
//! accounting on one member, and a three-member cluster that loses its leader. Like every store
//! test they run when the store's URL is set (or `SHEDLOCK_REQUIRE_DB=1`) and show as ignored
//! otherwise, so a run without URLs does not spend half a minute on etcd clusters.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use shedlock_core::provider::LockProvider;
use shedlock_core::testkit::ConformanceSuite;
use shedlock_etcd::EtcdLockProvider;
use support::Cluster;

/// Fire claims on etcd: a claim that does not win (claimed elsewhere, held, too early) is one
/// read and writes nothing; a won claim is one lease; racing claimers of one fire leave one
/// winner and no spare lease; the recorded fire survives release and an operator's unlock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn fire_claims_write_only_when_they_claim_and_leave_no_spare_lease() {
    use shedlock_core::{
        admin::LockAdmin,
        pause::PauseFor,
        provider::{Fire, FireClaim},
    };
    let Some(bin) = support::etcd_binary() else {
        return;
    };
    let etcd = Cluster::start(&bin, 1);
    let p = Arc::new(EtcdLockProvider::new(&etcd.url()).unwrap());
    // Whole milliseconds, as a schedule's instants are (the fire key keeps microseconds).
    let now = chrono::SubsecRound::trunc_subsecs(chrono::Utc::now(), 3);
    let fire = Fire::new(
        now - chrono::Duration::seconds(1),
        now + chrono::Duration::minutes(5),
    )
    .unwrap();
    let minute = Duration::from_mins(1);

    // Racers for one fire: one claims it, the others see it claimed; one lease in all.
    let barrier = Arc::new(tokio::sync::Barrier::new(6));
    let racers: Vec<_> = (0..6)
        .map(|i| {
            let (p, barrier) = (p.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                p.claim_fire("nightly", &fire, minute, &format!("r{i}"))
                    .await
            })
        })
        .collect();
    let mut won = Vec::new();
    for racer in racers {
        match racer.await.unwrap().unwrap() {
            FireClaim::Claimed(record) => won.push(record),
            FireClaim::ClaimedElsewhere { recorded, .. } => assert_eq!(recorded, fire.at()),
            other => panic!("a racer's claim answered {other:?}"),
        }
    }
    assert_eq!(won.len(), 1, "one winner: {won:?}");
    let winner = won.remove(0);
    assert_eq!(etcd.lease_count(), 1, "the winner's lease only");

    // Claims that do not win write nothing and grant no lease.
    let revision = etcd.revision();
    let too_early = Fire::new(
        now + chrono::Duration::hours(1),
        now + chrono::Duration::hours(2),
    )
    .unwrap();
    match p
        .claim_fire("nightly", &too_early, minute, "x")
        .await
        .unwrap()
    {
        FireClaim::TooEarly { .. } => {}
        other => panic!("a claim an hour early answered {other:?}"),
    }
    match p.claim_fire("nightly", &fire, minute, "x").await.unwrap() {
        FireClaim::ClaimedElsewhere { holder, .. } => assert_eq!(holder, winner),
        other => panic!("a second claim answered {other:?}"),
    }
    let later = Fire::new(now, now + chrono::Duration::minutes(5)).unwrap();
    match p.claim_fire("nightly", &later, minute, "x").await.unwrap() {
        FireClaim::Held { holder, .. } => assert_eq!(holder, winner),
        other => panic!("a later fire's claim while held answered {other:?}"),
    }
    assert_eq!(
        etcd.revision(),
        revision,
        "claims that did not win wrote nothing"
    );
    assert_eq!(etcd.lease_count(), 1, "and granted no lease");

    // Nor does a paused job's claim; a resume lets the next claim go on as before.
    p.pause("nightly", PauseFor::UntilResumed, None, "ann")
        .await
        .unwrap();
    let revision = etcd.revision();
    match p.claim_fire("nightly", &later, minute, "x").await.unwrap() {
        FireClaim::Paused { until: None, .. } => {}
        other => panic!("a paused job's claim answered {other:?}"),
    }
    assert_eq!(etcd.revision(), revision, "a paused claim wrote nothing");
    assert_eq!(etcd.lease_count(), 1, "and granted no lease");
    assert!(p.resume("nightly", "ann").await.unwrap().is_some());

    // The recorded fire survives the release and an operator's unlock.
    assert!(p.release(&winner, Duration::ZERO).await.unwrap());
    match p.claim_fire("nightly", &fire, minute, "y").await.unwrap() {
        FireClaim::ClaimedElsewhere { recorded, .. } => assert_eq!(recorded, fire.at()),
        other => panic!("the fire after its release answered {other:?}"),
    }
    let record = match p.claim_fire("nightly", &later, minute, "y").await.unwrap() {
        FireClaim::Claimed(record) => record,
        other => panic!("a later fire once free answered {other:?}"),
    };
    assert!(record.fencing_token() > winner.fencing_token());
    assert!(p.force_unlock("nightly", "test").await.unwrap().is_some());
    match p.claim_fire("nightly", &later, minute, "z").await.unwrap() {
        FireClaim::ClaimedElsewhere { recorded, .. } => assert_eq!(recorded, later.at()),
        other => panic!("the fire after an unlock answered {other:?}"),
    }
    // Listing shows the lock, not its fire record.
    let listed = p.list().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn a_skip_writes_nothing_and_a_lost_race_leaves_no_lease() {
    let Some(bin) = support::etcd_binary() else {
        return;
    };
    let etcd = Cluster::start(&bin, 1);
    let p = Arc::new(EtcdLockProvider::new(&etcd.url()).unwrap());

    let held = p
        .acquire("job", Duration::from_secs(30), "a")
        .await
        .unwrap()
        .unwrap();
    let (revision, leases) = (etcd.revision(), etcd.lease_count());
    assert_eq!(leases, 1, "the holder's lease");
    for _ in 0..5 {
        assert!(
            p.acquire("job", Duration::from_secs(30), "b")
                .await
                .unwrap()
                .is_none()
        );
    }
    assert_eq!(etcd.revision(), revision, "a skipped acquire wrote nothing");
    assert_eq!(
        etcd.lease_count(),
        leases,
        "a skipped acquire granted no lease"
    );
    assert_eq!(
        held.fencing_token(),
        Some(revision),
        "the token is the acquire's revision"
    );

    // Racers on a free lock: one wins, the losers revoke the leases they were granted.
    p.release(&held, Duration::ZERO).await.unwrap();
    let before = etcd.lease_count();
    for round in 0..5 {
        let name = format!("race-{round}");
        let barrier = Arc::new(tokio::sync::Barrier::new(6));
        let racers: Vec<_> = (0..6)
            .map(|i| {
                let (p, barrier, name) = (p.clone(), barrier.clone(), name.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    p.acquire(&name, Duration::from_secs(30), &format!("r{i}"))
                        .await
                })
            })
            .collect();
        let mut winners = 0;
        for racer in racers {
            winners += usize::from(racer.await.unwrap().unwrap().is_some());
        }
        assert_eq!(winners, 1, "round {round}");
    }
    assert_eq!(
        etcd.lease_count(),
        before + 5,
        "one lease per won race, none left by the losers"
    );

    // Keys deleted by hand: the next acquire writes them again, and tokens keep increasing
    // (they are revisions, which never go back).
    let last = p
        .acquire("job", Duration::from_secs(30), "a")
        .await
        .unwrap()
        .unwrap();
    let b64 = |b: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b);
    let deleted = etcd.call(
        "/v3/kv/deleterange",
        &format!(
            r#"{{"key":"{}","range_end":"{}"}}"#,
            b64(b"shedlock/"),
            b64(b"shedlock0")
        ),
    );
    // Six locks (job, race-0..4), two keys each.
    assert_eq!(deleted["deleted"].as_str(), Some("12"), "{deleted}");
    assert!(p.holder("job").await.unwrap().is_none());
    let again = p
        .acquire("job", Duration::from_secs(30), "b")
        .await
        .unwrap()
        .unwrap();
    assert!(again.fencing_token() > last.fencing_token());
    assert!(
        !p.release(&last, Duration::ZERO).await.unwrap(),
        "the old record is gone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn conformance_suite_passes_on_a_three_member_cluster() {
    let Some(bin) = support::etcd_binary() else {
        return;
    };
    let etcd = Cluster::start(&bin, 3);
    let start = Instant::now();
    ConformanceSuite::new(EtcdLockProvider::new(&etcd.url()).unwrap())
        .time_unit(Duration::from_secs(1))
        .require_fire_claims(true)
        .run()
        .await;
    eprintln!(
        "etcd conformance suite on three members: {:?}",
        start.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn killing_the_leader_while_a_lock_is_held_never_makes_two_holders() {
    let Some(bin) = support::etcd_binary() else {
        return;
    };
    let mut etcd = Cluster::start(&bin, 3);
    let url = etcd.url();
    let holder = EtcdLockProvider::new(&url).unwrap();
    let rival = EtcdLockProvider::builder(&url)
        .call_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let at_most = Duration::from_secs(5);

    let start = Instant::now();
    let held = holder
        .acquire("job", at_most, "holder")
        .await
        .unwrap()
        .unwrap();
    let leader = etcd.leader().expect("a leader");
    etcd.kill(leader);
    let killed = Instant::now();

    // The rival polls until it wins; every answer before that is "held" or an error (no leader
    // yet), and the lock is never won before the holder's at_most.
    let mut errors = 0;
    let won = loop {
        match rival.acquire("job", at_most, "rival").await {
            Ok(Some(record)) => break record,
            Ok(None) => {}
            Err(_) => errors += 1,
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "the lock did not free itself within 30 s of the leader's death"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let freed_after = start.elapsed();
    assert!(
        freed_after >= at_most,
        "the rival won after {freed_after:?}, inside the holder's at_most of {at_most:?}"
    );
    assert!(won.fencing_token() > held.fencing_token());
    // The old holder's record no longer holds anything.
    assert!(holder.extend(&held, at_most).await.unwrap().is_none());
    assert!(!holder.release(&held, Duration::ZERO).await.unwrap());
    assert_eq!(
        holder.holder("job").await.unwrap().unwrap().owner(),
        "rival"
    );
    eprintln!(
        "leader killed: lock freed {freed_after:?} after the acquire ({errors} errors while electing)"
    );
}

#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn a_hold_whose_record_was_deleted_by_hand_shows_and_can_be_forced_free() {
    use shedlock_core::admin::LockAdmin as _;
    let Some(bin) = support::etcd_binary() else {
        return;
    };
    let etcd = Cluster::start(&bin, 1);
    let p = EtcdLockProvider::new(&etcd.url()).unwrap();
    let held = p
        .acquire("job", Duration::from_mins(1), "a")
        .await
        .unwrap()
        .unwrap();
    let (rec, _) = p.keys("job").unwrap();
    let b64 = |b: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b);
    etcd.call(
        "/v3/kv/deleterange",
        &format!(r#"{{"key":"{}"}}"#, b64(&rec)),
    );

    let shown = p
        .holder("job")
        .await
        .unwrap()
        .expect("still held by its lease");
    assert_eq!(shown.owner(), shedlock_etcd::UNKNOWN_OWNER);
    assert_eq!(shown.fencing_token(), None);
    assert!(
        p.acquire("job", Duration::from_secs(5), "b")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        !p.release(&held, Duration::ZERO).await.unwrap(),
        "its record is gone"
    );
    assert_eq!(p.list().await.unwrap().len(), 1);

    let freed = p.force_unlock("job", "test").await.unwrap().expect("freed");
    assert_eq!(freed.record().owner(), shedlock_etcd::UNKNOWN_OWNER);
    let again = p
        .acquire("job", Duration::from_secs(5), "b")
        .await
        .unwrap()
        .unwrap();
    assert!(again.fencing_token() > held.fencing_token());
}

/// A pause key holding something this provider cannot read fails the fire claim, which never
/// ignores a pause. The entry shows no pause for it, and a resume removes it.
#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn a_pause_that_cannot_be_read_fails_the_claim() {
    use shedlock_core::{admin::LockAdmin as _, provider::Fire};
    let Some(bin) = support::etcd_binary() else {
        return;
    };
    let etcd = Cluster::start(&bin, 1);
    let p = EtcdLockProvider::new(&etcd.url()).unwrap();
    let (rec, _) = p.keys("job").unwrap();
    let pause = [&rec[..rec.len() - b"rec".len()], b"pause"].concat();
    let b64 = |b: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b);
    etcd.call(
        "/v3/kv/put",
        &format!(
            r#"{{"key":"{}","value":"{}"}}"#,
            b64(&pause),
            b64(b"not json")
        ),
    );
    p.acquire("job", Duration::from_secs(5), "a")
        .await
        .unwrap()
        .expect("acquire ignores pauses");
    let now = chrono::Utc::now();
    let fire = Fire::new(
        now - chrono::Duration::seconds(1),
        now + chrono::Duration::minutes(5),
    )
    .unwrap();
    let revision = etcd.revision();
    let error = p
        .claim_fire("job", &fire, Duration::from_mins(1), "b")
        .await
        .expect_err("an unreadable pause fails the claim");
    assert!(format!("{error:?}").contains("/pause"), "{error:?}");
    assert_eq!(etcd.revision(), revision, "the failed claim wrote nothing");
    let entry = p.entry("job").await.unwrap().expect("listed");
    assert!(entry.is_held() && entry.pause().is_none(), "{entry}");
    assert_eq!(p.resume("job", "ann").await.unwrap(), None);
    assert_ne!(etcd.revision(), revision, "the resume removed it");
    match p
        .claim_fire("job", &fire, Duration::from_mins(1), "b")
        .await
        .unwrap()
    {
        shedlock_core::provider::FireClaim::Held { .. } => {}
        other => panic!("after the resume the claim answered {other:?}"),
    }
}

/// Triggers on etcd: a refused trigger writes nothing, also one refused by the pause of a lock
/// whose record was deleted by hand; a pause that cannot be read fails the trigger, writing
/// nothing; a pending copy nobody takes is deleted by its lease, while the lock keeps its last
/// trigger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn triggers_write_only_when_requested_and_an_expired_copy_goes_by_itself() {
    use shedlock_core::{admin::LockAdmin as _, pause::PauseFor, trigger::TriggerAnswer};
    let Some(bin) = support::etcd_binary() else {
        return;
    };
    let etcd = Cluster::start(&bin, 1);
    let p = EtcdLockProvider::new(&etcd.url()).unwrap();
    let b64 = |b: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b);
    let minute = Duration::from_mins(1);

    p.pause("paused", PauseFor::UntilResumed, None, "ann")
        .await
        .unwrap();
    let (rec, _) = p.keys("paused").unwrap();
    etcd.call(
        "/v3/kv/deleterange",
        &format!(r#"{{"key":"{}"}}"#, b64(&rec)),
    );
    let revision = etcd.revision();
    match p.trigger("paused", "bob", minute).await.unwrap() {
        TriggerAnswer::Paused(pause) => assert_eq!(pause.by, "ann"),
        other => panic!("a trigger of a paused lock without a record answered {other:?}"),
    }
    assert_eq!(
        etcd.revision(),
        revision,
        "the refused trigger wrote nothing"
    );

    let (rec, _) = p.keys("garbled").unwrap();
    let pause = [&rec[..rec.len() - b"rec".len()], b"pause"].concat();
    etcd.call(
        "/v3/kv/put",
        &format!(
            r#"{{"key":"{}","value":"{}"}}"#,
            b64(&pause),
            b64(b"not json")
        ),
    );
    let revision = etcd.revision();
    let error = p
        .trigger("garbled", "bob", minute)
        .await
        .expect_err("an unreadable pause fails the trigger");
    assert!(format!("{error:?}").contains("/pause"), "{error:?}");
    assert_eq!(
        etcd.revision(),
        revision,
        "the failed trigger wrote nothing"
    );

    let TriggerAnswer::Requested(trigger) = p
        .trigger("short", "bob", Duration::from_secs(1))
        .await
        .unwrap()
    else {
        panic!("the trigger of a new name was refused");
    };
    let copies = || {
        let start = b64(b"shedlock/!trigger/");
        let end = b64(b"shedlock/!trigger0");
        etcd.call(
            "/v3/kv/range",
            &format!(r#"{{"key":"{start}","range_end":"{end}","count_only":true}}"#),
        )["count"]
            .as_str()
            .unwrap_or("0")
            .parse::<u32>()
            .unwrap()
    };
    assert_eq!(copies(), 1, "the pending copy");
    // etcd's minimum lease (2 s) and its expiry sweep (500 ms): gone within a few seconds.
    let deadline = Instant::now() + Duration::from_secs(10);
    while copies() > 0 {
        assert!(
            Instant::now() < deadline,
            "the copy of an expired trigger stayed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(p.pending_triggers().await.unwrap().is_empty());
    let entry = p.entry("short").await.unwrap().expect("a free record");
    assert_eq!(
        entry.trigger(),
        Some(&trigger),
        "the lock keeps its last trigger"
    );
    assert!(!entry.is_held());
}
