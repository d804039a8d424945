//! Deterministic tests of the leader latch. They use paused tokio time, the in-memory store, and
//! stores that fail, hang or hold their replies on demand.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use tokio::time::{Instant, sleep, sleep_until};

use super::*;
use crate::InMemoryLockProvider;
use crate::provider::LockRecord;
use crate::test_observe::Logs;

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

/// Terms seen in event streams: (start, end, fencing token).
type TermLog = Arc<Mutex<Vec<(Instant, Option<Instant>, Option<i64>)>>>;
/// Leader-only work's starts and stops: (term number, what, when after t0).
type WorkLog = Arc<Mutex<Vec<(u64, &'static str, Duration)>>>;

/// Logs a work's stop when its future is dropped.
struct Stopped(WorkLog, u64, Instant);

impl Drop for Stopped {
    fn drop(&mut self) {
        let entry = (self.1, "stop", self.2.elapsed());
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(entry);
    }
}

/// Default timings, a fixed owner id, and no jitter unless a test adds it. So times are exact.
fn config(name: &str, owner: &str) -> LeaderLatchConfigBuilder {
    LeaderLatchConfig::builder(name)
        .owner_id(owner)
        .acquire_jitter(Duration::ZERO)
}

fn start(provider: impl LockProvider, cfg: LeaderLatchConfigBuilder) -> LeaderLatch {
    LeaderLatch::start(provider, cfg.build().expect("valid config")).expect("started")
}

async fn holder(store: &InMemoryLockProvider, name: &str) -> Option<String> {
    store
        .holder(name)
        .await
        .expect("in-memory holder")
        .map(|r| crate::admin::election_owner_id(r.owner()).to_owned())
}

/// The leader a follower reports at its first attempt, within a second.
async fn first_leader_seen(latch: &LeaderLatch) -> KnownLeader {
    let mut states = latch.watch();
    let state = tokio::time::timeout(
        SEC,
        states.wait_for(|s| matches!(s, LeaderState::Follower { leader: Some(_) })),
    )
    .await
    .expect("follows at its first attempt")
    .expect("alive")
    .clone();
    let LeaderState::Follower { leader: Some(seen) } = state else {
        unreachable!()
    };
    seen
}

fn leaders(latches: &[LeaderLatch]) -> Vec<usize> {
    (0..latches.len())
        .filter(|&i| latches[i].is_leader())
        .collect()
}

/// Waits until exactly one of `latches` leads, and returns its index. On paused time, the wait is
/// instant.
async fn one_leader(latches: &[LeaderLatch]) -> usize {
    let limit = Instant::now() + 60 * SEC;
    loop {
        if let [one] = leaders(latches)[..] {
            return one;
        }
        assert!(Instant::now() < limit, "no single leader within 60 s");
        sleep(10 * MS).await;
    }
}

async fn next_state(rx: &mut watch::Receiver<LeaderState>) -> LeaderState {
    rx.changed().await.expect("latch alive");
    rx.borrow_and_update().clone()
}

// ---------------------------------------------------------------------------------------------
// Election basics

#[tokio::test(start_paused = true)]
async fn one_candidate_is_elected_at_its_first_attempt() {
    let store = Arc::new(InMemoryLockProvider::new());
    let t0 = Instant::now();
    let latch = start(store.clone(), config("solo", "a"));
    let term = latch.wait_for_leadership().await.expect("running");
    assert_eq!(t0.elapsed(), Duration::ZERO, "elected by the first attempt");
    assert!(latch.is_leader());
    assert_eq!(term.number(), 1);
    assert_eq!(term.fencing_token(), Some(1));
    assert_eq!(term.owner_id(), "a");
    assert_eq!(term.started_at(), t0);
    assert_eq!(term.deadline(), t0 + 10 * SEC);
    assert_eq!(latch.state(), LeaderState::Leader { term: term.clone() });
    assert_eq!(latch.current_term(), Some(term));
    assert_eq!(holder(&store, "solo").await.as_deref(), Some("a"));
    latch.close().await.expect("closed");
}

#[tokio::test(start_paused = true)]
async fn of_many_candidates_exactly_one_leads_and_terms_never_overlap() {
    let store = Arc::new(InMemoryLockProvider::new());
    let latches: Vec<LeaderLatch> = (0..5)
        .map(|i| {
            start(
                store.clone(),
                LeaderLatchConfig::builder("many").owner_id(format!("c{i}")),
            )
        })
        .collect();
    // Every term of every candidate, as (start, end) instants, from the event streams.
    let terms: TermLog = Arc::default();
    let mut collectors = Vec::new();
    for latch in &latches {
        let mut events = latch.events();
        let terms = terms.clone();
        collectors.push(tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let mut terms = terms.lock().unwrap_or_else(PoisonError::into_inner);
                match event {
                    LeaderEvent::Elected { term } => {
                        terms.push((Instant::now(), None, term.fencing_token()));
                    }
                    LeaderEvent::SteppedDown { term, .. } => {
                        let open = terms
                            .iter_mut()
                            .find(|t| t.2 == term.fencing_token())
                            .expect("stepped down from a known term");
                        open.1 = Some(Instant::now());
                    }
                    _ => {}
                }
            }
        }));
    }

    let first = one_leader(&latches).await;
    assert_eq!(holder(&store, "many").await, Some(format!("c{first}")));
    let t0 = Instant::now();
    let mut handovers = 0;
    while t0.elapsed() < 10 * 60 * SEC {
        sleep(100 * MS).await;
        let now = leaders(&latches);
        assert!(now.len() <= 1, "two leaders at once: {now:?}");
        // Every 37 s the leader resigns: a handover under test.
        if t0.elapsed().as_millis().is_multiple_of(37_000)
            && let [leader] = now[..]
        {
            let l = latches[leader].clone();
            tokio::spawn(async move { l.resign().await });
            handovers += 1;
        }
    }
    assert!(handovers >= 10, "{handovers}");
    for latch in &latches {
        latch.close().await.expect("closed");
    }
    for c in collectors {
        c.await.expect("collector");
    }
    let mut terms = terms.lock().unwrap_or_else(PoisonError::into_inner).clone();
    terms.sort_by_key(|t| t.0);
    assert!(terms.len() > handovers, "{} terms", terms.len());
    for pair in terms.windows(2) {
        let (prev, next) = (pair[0], pair[1]);
        let prev_end = prev.1.expect("every term ended by close");
        assert!(prev_end <= next.0, "terms overlap: {prev:?} and {next:?}");
        assert!(
            next.2 > prev.2,
            "tokens not increasing: {prev:?} then {next:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn steady_state_has_no_transitions_over_an_hour() {
    let store = Arc::new(InMemoryLockProvider::new());
    let latches: Vec<LeaderLatch> = ["a", "b", "c"]
        .iter()
        .map(|o| {
            start(
                store.clone(),
                LeaderLatchConfig::builder("steady").owner_id(*o),
            )
        })
        .collect();
    let leader = one_leader(&latches).await;
    // Let the followers see the leader once.
    sleep(5 * SEC).await;
    let mut watches: Vec<_> = latches.iter().map(LeaderLatch::watch).collect();
    for rx in &mut watches {
        rx.borrow_and_update();
    }
    let mut events = latches[leader].events();
    let t0 = Instant::now();
    sleep(3600 * SEC).await;
    for (i, rx) in watches.iter().enumerate() {
        assert!(!rx.has_changed().expect("alive"), "latch {i} changed state");
    }
    assert_eq!(leaders(&latches), vec![leader]);
    let leader_name = latches[leader].owner_id().to_owned();
    for (i, latch) in latches.iter().enumerate() {
        if i != leader {
            let state = latch.state();
            let LeaderState::Follower { leader: Some(seen) } = state else {
                panic!("follower {i}: {state:?}");
            };
            assert_eq!(seen.owner_id(), leader_name);
        }
    }
    // The heartbeat: one Renewed per renew_interval, nothing else.
    let mut renewed = 0;
    while let Some(event) = events.try_recv() {
        assert!(matches!(event, LeaderEvent::Renewed { .. }), "{event:?}");
        renewed += 1;
    }
    assert_eq!(
        events.missed(),
        3600 / 5 - 64,
        "a buffer of 64 kept the newest"
    );
    assert_eq!(renewed + events.missed(), 3600 / 5, "since {t0:?}");
}

/// The leader renews every `min(renew_interval, renew_deadline / 2)`, as
/// `LeaderLatchConfig::renew_interval` documents. That is 4 s when asked for 4 s. It is 5 s when
/// asked for 6 s with a 10 s deadline.
#[tokio::test(start_paused = true)]
async fn the_renew_interval_is_capped_at_half_the_renew_deadline() {
    for (asked, every) in [(4 * SEC, 4 * SEC), (6 * SEC, 5 * SEC)] {
        let store = Arc::new(InMemoryLockProvider::new());
        let latch = start(
            store.clone(),
            config("capped", "a")
                .lease(15 * SEC)
                .renew_deadline(10 * SEC)
                .renew_interval(asked),
        );
        let mut events = latch.events();
        let term = latch.wait_for_leadership().await.expect("running");
        let elected = term.started_at();
        let mut renewals = Vec::new();
        while renewals.len() < 6 {
            if let LeaderEvent::Renewed { .. } = events.recv().await.expect("alive") {
                renewals.push(Instant::now() - elected);
            }
        }
        let expected: Vec<Duration> = (1..=6).map(|k| every * k).collect();
        assert_eq!(renewals, expected, "asked for a renew every {asked:?}");
        latch.close().await.expect("closed");
    }
}

#[tokio::test(start_paused = true)]
async fn a_refused_renew_steps_down_at_once_and_the_new_holder_is_followed() {
    let store = Arc::new(InMemoryLockProvider::new());
    let t0 = Instant::now();
    let latch = start(store.clone(), config("refused", "a"));
    let mut states = latch.watch();
    let term = latch.wait_for_leadership().await.expect("running");
    states.borrow_and_update();
    // At 3 s someone takes the row from under the leader (say, it was deleted and re-taken).
    sleep_until(t0 + 3 * SEC).await;
    store
        .release(&term.record(), Duration::ZERO)
        .await
        .expect("released");
    store
        .acquire("refused", 4 * SEC, "thief")
        .await
        .expect("ok")
        .expect("free");
    assert!(
        latch.is_leader(),
        "nothing tells the leader before its next renew"
    );
    // The renew at 5 s is refused: step down at once.
    assert_eq!(
        next_state(&mut states).await,
        LeaderState::Follower { leader: None }
    );
    assert_eq!(t0.elapsed(), 5 * SEC);
    assert!(!latch.is_leader() && !term.is_active());
    assert_eq!(term.end_reason(), Some(StepDownReason::Refused));
    // The next attempt (7 s) finds the row free again (the thief's 4 s ended): a new term.
    let again = latch.wait_for_leadership().await.expect("running");
    assert_eq!(t0.elapsed(), 7 * SEC);
    assert_eq!(again.number(), 2);
    assert!(again.fencing_token() > Some(2), "{again:?}");
    latch.close().await.expect("closed");
}

#[tokio::test(start_paused = true)]
async fn followers_publish_who_leads() {
    let store = Arc::new(InMemoryLockProvider::new());
    let a = start(store.clone(), config("who", "a"));
    a.wait_for_leadership().await.expect("running");
    let b = start(store.clone(), config("who", "b"));
    let mut states = b.watch();
    let state = states
        .wait_for(|s| matches!(s, LeaderState::Follower { leader: Some(_) }))
        .await
        .expect("alive")
        .clone();
    let LeaderState::Follower { leader: Some(seen) } = state else {
        unreachable!()
    };
    assert_eq!(seen.owner_id(), "a");
    assert_eq!(seen.fencing_token(), Some(1));
    assert_eq!(seen.to_string(), "a (token 1)");
    let mut events = b.events();
    assert_eq!(
        events.recv().await,
        Some(LeaderEvent::Following { leader: Some(seen) }),
        "one event per follower cycle"
    );
    a.close().await.expect("closed");
    b.close().await.expect("closed");
}

/// Before its store has answered, a latch is `Starting`, not a follower of nobody. The first answer
/// replaces it: elected, or another leads. A step-down is `Follower`, never `Starting` again.
#[tokio::test(start_paused = true)]
async fn the_state_is_starting_until_the_store_first_answers() {
    let store = Arc::new(InMemoryLockProvider::new());
    let a = start(store.clone(), config("starting", "a"));
    // The latch's task has not run yet (one thread, no await since start).
    assert_eq!(a.state(), LeaderState::Starting);
    assert!(!a.state().was_leader() && a.state().term().is_none());
    a.wait_for_leadership().await.expect("running");
    let b = start(store.clone(), config("starting", "b"));
    assert_eq!(b.state(), LeaderState::Starting);
    assert_eq!(first_leader_seen(&b).await.owner_id(), "a");
    let mut a_states = a.watch();
    assert!(a.resign().await, "it led");
    let after_resign = a_states
        .wait_for(|s| !s.was_leader())
        .await
        .expect("alive")
        .clone();
    assert!(
        matches!(after_resign, LeaderState::Follower { .. }),
        "a step-down is a follower, not a start: {after_resign:?}"
    );
    a.close().await.expect("closed");
    b.close().await.expect("closed");
}

// ---------------------------------------------------------------------------------------------
// Shutdown, resign, leader-only work

#[tokio::test(start_paused = true)]
async fn close_releases_the_row_so_another_takes_over_within_one_acquire_interval() {
    let store = Arc::new(InMemoryLockProvider::new());
    let latches: Vec<LeaderLatch> = (0..3)
        .map(|i| {
            start(
                store.clone(),
                LeaderLatchConfig::builder("handover").owner_id(format!("r{i}")),
            )
        })
        .collect();
    let leader = one_leader(&latches).await;
    sleep(7 * SEC).await; // mid-term, after a renew
    let closed = latches[leader].clone();
    let t0 = Instant::now();
    closed.close().await.expect("closed");
    assert_eq!(
        t0.elapsed(),
        Duration::ZERO,
        "no work to wait for, release is instant"
    );
    assert_eq!(closed.state(), LeaderState::Stopped);
    assert!(!closed.is_leader());
    assert!(closed.wait_for_leadership().await.is_none());
    let next = one_leader(&latches).await;
    assert_ne!(next, leader);
    assert!(
        t0.elapsed() <= 2 * SEC + 500 * MS,
        "took {:?}",
        t0.elapsed()
    );
    // A stopped latch stays stopped.
    sleep(60 * SEC).await;
    assert!(!closed.is_leader());
    assert_eq!(closed.state(), LeaderState::Stopped);
    closed.close().await.expect("closing twice is fine");
}

#[tokio::test(start_paused = true)]
async fn resign_hands_over_and_sits_out() {
    let store = Arc::new(InMemoryLockProvider::new());
    let a = start(store.clone(), config("resign", "a"));
    let first = a.wait_for_leadership().await.expect("running");
    let b = start(store.clone(), config("resign", "b"));
    sleep(SEC).await;
    assert!(!b.is_leader());
    let t0 = Instant::now();
    assert!(a.resign().await);
    assert!(!a.is_leader() && !first.is_active());
    assert_eq!(first.end_reason(), Some(StepDownReason::Resigned));
    let term_b = b.wait_for_leadership().await.expect("running");
    assert!(
        t0.elapsed() <= 2 * SEC,
        "b's next attempt is within acquire_interval"
    );
    assert!(term_b.fencing_token() > first.fencing_token());
    // a sat out 2 × acquire_interval after its resign (until 4 s), then tried every 2 s. Now a
    // follower, its resign changes nothing (no new sit-out): when b goes, a takes over at its
    // next regular attempt.
    sleep_until(t0 + 5 * SEC).await;
    assert!(!a.resign().await, "not leading: nothing to resign");
    let t1 = Instant::now();
    b.close().await.expect("closed");
    a.wait_for_leadership().await.expect("running");
    assert!(t1.elapsed() <= 2 * SEC, "{:?}", t1.elapsed());
    a.close().await.expect("closed");
}

#[tokio::test(start_paused = true)]
async fn every_term_has_a_strictly_greater_token() {
    let store = Arc::new(InMemoryLockProvider::new());
    let latch = start(store.clone(), config("tokens", "a"));
    let mut tokens = Vec::new();
    for round in 0..6 {
        let term = latch.wait_for_leadership().await.expect("running");
        tokens.push(term.fencing_token().expect("token"));
        if round % 2 == 0 {
            assert!(latch.resign().await);
        } else {
            // Lose it instead: the row is taken over while the leader is not looking.
            store
                .release(&term.record(), Duration::ZERO)
                .await
                .expect("ok");
            let thief = store
                .acquire("tokens", SEC, "thief")
                .await
                .expect("ok")
                .expect("free");
            tokens.push(thief.fencing_token().expect("token"));
            term.ended().await;
        }
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    latch.close().await.expect("closed");
}

#[tokio::test(start_paused = true)]
async fn leader_work_runs_once_per_term_and_is_cancelled_when_the_term_is_lost() {
    let store = Arc::new(InMemoryLockProvider::new());
    let t0 = Instant::now();
    let latch = start(store.clone(), config("work", "a"));
    let log: WorkLog = Arc::default();
    let work_log = log.clone();
    let work = latch.spawn_leader_work(move |term| {
        let log = work_log.clone();
        async move {
            log.lock().unwrap_or_else(PoisonError::into_inner).push((
                term.number(),
                "start",
                t0.elapsed(),
            ));
            let _stopped = Stopped(log, term.number(), t0);
            std::future::pending::<()>().await;
        }
    });
    let term = latch.wait_for_leadership().await.expect("running");
    // Lose the term at its 5 s renew; lead again at 7 s.
    store
        .release(&term.record(), Duration::ZERO)
        .await
        .expect("ok");
    store
        .acquire("work", 7 * SEC, "thief")
        .await
        .expect("ok")
        .expect("free");
    sleep_until(t0 + 8 * SEC).await;
    // The second term's work ignores `ended()`: close cancels it after the 5 s grace.
    let closing = tokio::spawn({
        let latch = latch.clone();
        async move { latch.close().await }
    });
    sleep_until(t0 + 12 * SEC).await;
    assert!(!latch.is_leader(), "stepped down at once on close");
    assert_eq!(
        holder(&store, "work").await.as_deref(),
        Some("a"),
        "row kept while work winds down"
    );
    closing.await.expect("no panic").expect("closed");
    assert_eq!(t0.elapsed(), 13 * SEC, "close waited out the grace");
    assert_eq!(
        holder(&store, "work").await,
        None,
        "released after the work stopped"
    );
    work.await.expect("helper ends with the latch");
    let log = log.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(
        log,
        vec![
            (1, "start", Duration::ZERO),
            (1, "stop", 5 * SEC),
            (2, "start", 7 * SEC),
            (2, "stop", 13 * SEC),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn close_waits_for_cooperative_work_to_finish() {
    let store = Arc::new(InMemoryLockProvider::new());
    let latch = start(store.clone(), config("coop", "a"));
    let finished = Arc::new(AtomicBool::new(false));
    let done = finished.clone();
    latch.spawn_leader_work(move |term| {
        let done = done.clone();
        async move {
            term.ended().await;
            sleep(SEC).await; // flush, commit, …
            done.store(true, Ordering::SeqCst);
        }
    });
    latch.wait_for_leadership().await.expect("running");
    sleep(SEC).await;
    let t0 = Instant::now();
    latch.close().await.expect("closed");
    assert_eq!(t0.elapsed(), SEC);
    assert!(finished.load(Ordering::SeqCst));
    assert_eq!(holder(&store, "coop").await, None);
}

#[tokio::test(start_paused = true)]
async fn panicking_work_runs_again_next_term() {
    let store = Arc::new(InMemoryLockProvider::new());
    let latch = start(store.clone(), config("panics", "a"));
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    latch.spawn_leader_work(move |term| {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            assert!(
                term.number() > 1,
                "the first term's work fails (expected panic in test)"
            );
            term.ended().await;
        }
    });
    latch.wait_for_leadership().await.expect("running");
    sleep(SEC).await;
    assert!(latch.is_leader(), "a panicking task does not end the term");
    assert!(latch.resign().await);
    latch.wait_for_leadership().await.expect("running");
    sleep(SEC).await;
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    latch.close().await.expect("closed");
}

#[tokio::test(start_paused = true)]
async fn dropping_every_handle_closes_the_latch() {
    let store = Arc::new(InMemoryLockProvider::new());
    let latch = start(store.clone(), config("dropped", "a"));
    let mut states = latch.watch();
    latch.wait_for_leadership().await.expect("running");
    drop(latch);
    let state = states
        .wait_for(|s| *s == LeaderState::Stopped)
        .await
        .expect("alive")
        .clone();
    assert_eq!(state, LeaderState::Stopped);
    assert_eq!(holder(&store, "dropped").await, None);
}

// ---------------------------------------------------------------------------------------------
// Step-down is local and immediate

/// A real-time test of about one second. The runtime's only thread is blocked, so the latch's tasks
/// cannot run. Nothing in it depends on the machine being fast. An OS stall only makes the first
/// check vacuous.
#[tokio::test(flavor = "current_thread")]
async fn a_starved_task_does_not_keep_is_leader_true() {
    let store = Arc::new(InMemoryLockProvider::new());
    let latch = start(
        store.clone(),
        config("starved", "a")
            .lease(2 * SEC)
            .renew_interval(500 * MS)
            .renew_deadline(SEC)
            .acquire_interval(250 * MS),
    );
    let term = latch.wait_for_leadership().await.expect("running");
    let deadline = term.deadline();
    let leading = latch.is_leader();
    if Instant::now() < deadline {
        // (Unless the OS stalled this thread past the deadline since the acquire was sent.)
        assert!(leading, "leads before its deadline");
    }
    // Starve every task of this runtime past the deadline (the injected fault, not a wait).
    std::thread::sleep(deadline.saturating_duration_since(Instant::now()) + 100 * MS);
    assert!(Instant::now() >= deadline);
    assert!(
        latch.state().was_leader(),
        "the task has not run, so nothing was published"
    );
    assert!(
        !latch.is_leader(),
        "yet is_leader() is false after the deadline"
    );
    assert!(!term.is_active());
    assert!(latch.current_term().is_none());
    // Once the task runs it publishes the step-down.
    let mut states = latch.watch();
    let state = states
        .wait_for(|s| !s.was_leader())
        .await
        .expect("alive")
        .clone();
    assert_eq!(state, LeaderState::Follower { leader: None });
    assert_eq!(term.end_reason(), Some(StepDownReason::DeadlineExpired));
    latch.close().await.expect("closed");
}

#[tokio::test(start_paused = true)]
async fn a_slow_event_consumer_cannot_delay_step_down() {
    let store = Arc::new(InMemoryLockProvider::new());
    let t0 = Instant::now();
    let latch = start(store.clone(), config("slow", "a"));
    let term = latch.wait_for_leadership().await.expect("running");
    // Consumers that never read: an event stream and a watch.
    let mut events = latch.events();
    let _states = latch.watch();
    // 100 renews later the buffer has long overflowed.
    sleep_until(t0 + 501 * SEC).await;
    assert!(latch.is_leader());
    store
        .release(&term.record(), Duration::ZERO)
        .await
        .expect("ok");
    store
        .acquire("slow", 60 * SEC, "thief")
        .await
        .expect("ok")
        .expect("free");
    let mut states = latch.watch();
    let _ = states.wait_for(|s| !s.was_leader()).await.expect("alive");
    assert_eq!(t0.elapsed(), 505 * SEC, "stepped down at the refused renew");
    assert!(!latch.is_leader());
    // The consumer gets the newest events, including the step-down, and knows what it missed.
    let mut last = None;
    while let Some(event) = events.try_recv() {
        last = Some(event);
    }
    assert!(events.missed() > 0);
    assert!(
        matches!(
            last,
            Some(LeaderEvent::SteppedDown {
                reason: StepDownReason::Refused,
                ..
            })
        ),
        "{last:?}"
    );
    latch.close().await.expect("closed");
}

// ---------------------------------------------------------------------------------------------
// Races with replies held back by the store

/// Applies each call at once but can hold back the reply of acquire or extend until released. So
/// the reply of a call that already took effect arrives late.
struct HeldReplies {
    inner: Arc<InMemoryLockProvider>,
    hold_acquire: AtomicBool,
    hold_extend: AtomicBool,
    release_replies: watch::Sender<u64>,
    held: AtomicUsize,
}

impl HeldReplies {
    fn new(inner: Arc<InMemoryLockProvider>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            hold_acquire: AtomicBool::new(false),
            hold_extend: AtomicBool::new(false),
            release_replies: watch::Sender::new(0),
            held: AtomicUsize::new(0),
        })
    }

    async fn hold_if(&self, flag: &AtomicBool) {
        if flag.load(Ordering::SeqCst) {
            let mut rx = self.release_replies.subscribe();
            let seen = *rx.borrow_and_update();
            self.held.fetch_add(1, Ordering::SeqCst);
            let _ = rx.wait_for(|n| *n > seen).await;
        }
    }

    fn let_replies_through(&self) {
        self.hold_acquire.store(false, Ordering::SeqCst);
        self.hold_extend.store(false, Ordering::SeqCst);
        self.release_replies.send_modify(|n| *n += 1);
    }
}

#[async_trait]
impl LockProvider for HeldReplies {
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> Result<Option<LockRecord>> {
        let reply = self.inner.acquire(name, at_most, owner).await;
        self.hold_if(&self.hold_acquire).await;
        reply
    }

    async fn extend(&self, record: &LockRecord, at_most: Duration) -> Result<Option<LockRecord>> {
        let reply = self.inner.extend(record, at_most).await;
        self.hold_if(&self.hold_extend).await;
        reply
    }

    async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool> {
        self.inner.release(record, at_least).await
    }

    async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
        self.inner.holder(name).await
    }
}

/// Call-timeout long enough that a held reply is still pending when the test acts.
fn race_config(name: &str, owner: &str) -> LeaderLatchConfigBuilder {
    config(name, owner).call_timeout(2 * SEC)
}

#[tokio::test(start_paused = true)]
async fn resign_racing_a_renew_never_ends_as_leader() {
    let store = Arc::new(InMemoryLockProvider::new());
    let held = HeldReplies::new(store.clone());
    let t0 = Instant::now();
    let latch = start(held.clone(), race_config("race-resign", "a"));
    let term = latch.wait_for_leadership().await.expect("running");
    let other = start(store.clone(), config("race-resign", "b"));
    let mut events = latch.events();
    held.hold_extend.store(true, Ordering::SeqCst);
    // The renew at 5 s reaches the store (the row is extended) but its reply is held.
    sleep_until(t0 + 5 * SEC + 500 * MS).await;
    assert_eq!(held.held.load(Ordering::SeqCst), 1);
    assert!(latch.resign().await);
    assert!(!latch.is_leader());
    held.let_replies_through();
    sleep(SEC).await;
    assert!(!latch.is_leader() && !term.is_active());
    assert_eq!(term.end_reason(), Some(StepDownReason::Resigned));
    // The released row went to the other candidate at its next attempt.
    other.wait_for_leadership().await.expect("running");
    assert!(t0.elapsed() <= 8 * SEC, "{:?}", t0.elapsed());
    sleep(30 * SEC).await;
    assert!(!latch.is_leader());
    while let Some(event) = events.try_recv() {
        assert!(
            !matches!(
                event,
                LeaderEvent::Elected { .. } | LeaderEvent::Renewed { .. }
            ),
            "{event:?}"
        );
    }
    latch.close().await.expect("closed");
    other.close().await.expect("closed");
}

#[tokio::test(start_paused = true)]
async fn close_racing_a_renew_stops_and_releases() {
    let store = Arc::new(InMemoryLockProvider::new());
    let held = HeldReplies::new(store.clone());
    let t0 = Instant::now();
    let latch = start(held.clone(), race_config("race-close", "a"));
    latch.wait_for_leadership().await.expect("running");
    held.hold_extend.store(true, Ordering::SeqCst);
    sleep_until(t0 + 5 * SEC + 500 * MS).await;
    assert_eq!(held.held.load(Ordering::SeqCst), 1, "a renew is in flight");
    latch.close().await.expect("closed");
    held.let_replies_through();
    sleep(SEC).await;
    assert!(!latch.is_leader());
    assert_eq!(latch.state(), LeaderState::Stopped);
    assert_eq!(
        holder(&store, "race-close").await,
        None,
        "the extended row was released"
    );
}

#[tokio::test(start_paused = true)]
async fn resign_racing_an_acquire_does_not_lead_and_releases() {
    let store = Arc::new(InMemoryLockProvider::new());
    let held = HeldReplies::new(store.clone());
    held.hold_acquire.store(true, Ordering::SeqCst);
    let latch = start(held.clone(), race_config("race-acquire", "a"));
    let mut events = latch.events();
    sleep(500 * MS).await;
    assert_eq!(
        held.held.load(Ordering::SeqCst),
        1,
        "the first acquire won but its reply is held"
    );
    assert_eq!(holder(&store, "race-acquire").await.as_deref(), Some("a"));
    assert!(!latch.resign().await, "not leading yet");
    held.let_replies_through();
    sleep(100 * MS).await;
    assert!(!latch.is_leader());
    assert_eq!(
        holder(&store, "race-acquire").await,
        None,
        "the won row was given back"
    );
    assert!(events.try_recv().is_none(), "no term began");
    // After sitting out it competes again.
    let term = latch.wait_for_leadership().await.expect("running");
    assert_eq!(term.number(), 1);
    latch.close().await.expect("closed");
}

/// A broken store. The first acquire fails, as if its reply was lost. The row is always this
/// instance's: "a", marked as an election row. Releases "succeed" and change nothing. Later
/// acquires are refused.
struct StuckOwnRow {
    acquires: AtomicUsize,
    releases: AtomicUsize,
    locked_at: chrono::DateTime<chrono::Utc>,
}

impl Default for StuckOwnRow {
    fn default() -> Self {
        Self {
            acquires: AtomicUsize::new(0),
            releases: AtomicUsize::new(0),
            locked_at: chrono::Utc::now(),
        }
    }
}

#[async_trait]
impl LockProvider for StuckOwnRow {
    async fn acquire(&self, _: &str, _: Duration, _: &str) -> Result<Option<LockRecord>> {
        let n = self.acquires.fetch_add(1, Ordering::SeqCst);
        assert!(n < 1000, "hot loop");
        if n == 0 {
            return Err(Error::backend_message("the reply was lost"));
        }
        Ok(None)
    }

    async fn extend(&self, _: &LockRecord, _: Duration) -> Result<Option<LockRecord>> {
        Ok(None)
    }

    async fn release(&self, _: &LockRecord, _: Duration) -> Result<bool> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        Ok(true)
    }

    async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
        Ok(Some(LockRecord::new(
            name,
            "a#election",
            self.locked_at,
            self.locked_at + chrono::Duration::seconds(15),
        )))
    }
}

#[tokio::test(start_paused = true)]
async fn an_own_row_that_will_not_go_away_is_retried_once_not_in_a_loop() {
    let store = Arc::new(StuckOwnRow::default());
    let latch = start(store.clone(), config("stuck", "a"));
    // 0 s: the reply is lost. 2 s: refused; the row can only be that acquire's: released, and
    // retried at once: refused again, and this time the row is not explained by anything, so
    // it is left alone. 4, 6, 8 s: one attempt each.
    sleep(9 * SEC).await;
    assert_eq!(store.acquires.load(Ordering::SeqCst), 6);
    assert_eq!(store.releases.load(Ordering::SeqCst), 1);
    assert!(!latch.is_leader());
    latch.close().await.expect("closed");
}

// ---------------------------------------------------------------------------------------------
// Configuration at start

/// A store whose name column is short and whose table is missing.
struct MissingTable;

#[async_trait]
impl LockProvider for MissingTable {
    async fn acquire(&self, _: &str, _: Duration, _: &str) -> Result<Option<LockRecord>> {
        Err(Error::missing_table(
            "shedlock",
            "run the DDL in shedlock-sqlx/migrations/postgres",
            std::io::Error::other("relation \"shedlock\" does not exist"),
        ))
    }

    async fn extend(&self, _: &LockRecord, _: Duration) -> Result<Option<LockRecord>> {
        Err(Error::backend_message("unreachable in this test"))
    }

    async fn release(&self, _: &LockRecord, _: Duration) -> Result<bool> {
        Err(Error::backend_message("unreachable in this test"))
    }

    fn max_name_len(&self) -> usize {
        8
    }
}

#[tokio::test]
async fn start_checks_the_name_against_the_store() {
    let err = LeaderLatch::start(
        MissingTable,
        LeaderLatchConfig::new("too-long-name").expect("valid"),
    )
    .expect_err("9+ characters");
    assert!(err.is_invalid_config());
    assert!(err.to_string().contains("at most 8"), "{err}");
}

#[test]
fn start_outside_a_runtime_is_an_error_not_a_panic() {
    let err = LeaderLatch::start(
        InMemoryLockProvider::new(),
        LeaderLatchConfig::new("x").expect("valid"),
    )
    .expect_err("no runtime");
    assert!(err.to_string().contains("inside a tokio runtime"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Store failures: one ERROR per streak

#[tokio::test(start_paused = true)]
async fn a_missing_table_keeps_the_instance_a_follower_with_one_error() {
    let logs = Logs::default();
    let _guard = logs.install();
    let latch = start(MissingTable, config("jobs", "a"));
    let mut states = latch.watch();
    sleep(119 * SEC).await; // attempts at 0, 2, …, 118 s
    assert!(!latch.is_leader());
    assert!(
        !states.has_changed().expect("alive"),
        "no event for a failing store"
    );
    assert_eq!(
        *states.borrow_and_update(),
        LeaderState::Starting,
        "no attempt was answered: who leads is unknown"
    );
    let errors = logs.count(tracing::Level::ERROR, "cannot reach its lock store");
    assert_eq!(errors, 1, "one ERROR for the whole streak");
    assert_eq!(
        logs.count(
            tracing::Level::ERROR,
            "create the lock table (the `error` field says how)"
        ),
        1,
        "with guidance, pointing at the field on the same line"
    );
    assert_eq!(logs.count(tracing::Level::ERROR, "above"), 0);
    assert_eq!(
        logs.count(
            tracing::Level::ERROR,
            "run the DDL in shedlock-sqlx/migrations/postgres"
        ),
        1,
        "and the store's own fix"
    );
    // It kept retrying every 2 s (logged at DEBUG).
    assert_eq!(
        logs.count(tracing::Level::DEBUG, "lock store still failing"),
        59
    );
    latch.close().await.expect("closed");
}

// ---------------------------------------------------------------------------------------------
// With the testkit's fault-injecting store

#[cfg(feature = "testkit")]
mod faulty {
    use super::*;
    use crate::testkit::{Fault, FaultyProvider, Operation};

    type Faulty = Arc<FaultyProvider<Arc<InMemoryLockProvider>>>;

    fn faulty(store: &Arc<InMemoryLockProvider>) -> Faulty {
        Arc::new(FaultyProvider::new(store.clone()))
    }

    #[tokio::test(start_paused = true)]
    async fn a_renew_that_never_returns_steps_down_exactly_at_the_deadline() {
        let store = Arc::new(InMemoryLockProvider::new());
        let db = faulty(&store);
        let t0 = Instant::now();
        let latch = start(db.clone(), config("hung", "a"));
        let mut states = latch.watch();
        let term = latch.wait_for_leadership().await.expect("running");
        states.borrow_and_update();
        db.inject(Operation::Extend, Fault::Hang);
        // Renew at 5 s hangs, times out at 7 s; the retry at 9 s hangs too.
        sleep_until(t0 + 10 * SEC - MS).await;
        assert_eq!(db.calls(Operation::Extend), 2);
        assert!(
            latch.is_leader() && term.is_active(),
            "still leading just before the deadline"
        );
        assert_eq!(
            next_state(&mut states).await,
            LeaderState::Follower { leader: None }
        );
        assert_eq!(
            t0.elapsed(),
            10 * SEC,
            "stepped down exactly at the deadline"
        );
        assert!(!latch.is_leader());
        assert_eq!(term.end_reason(), Some(StepDownReason::DeadlineExpired));
        // It gave its row back at once, and leads again at its next attempt, in a new term.
        assert_eq!(db.calls(Operation::Release), 1);
        let again = latch.wait_for_leadership().await.expect("running");
        assert_eq!(t0.elapsed(), 12 * SEC);
        assert!(again.fencing_token() > term.fencing_token());
        db.heal_all();
        latch.close().await.expect("closed");
    }

    #[tokio::test(start_paused = true)]
    async fn transient_renew_errors_cause_no_step_down_and_are_retried_at_the_acquire_interval() {
        let store = Arc::new(InMemoryLockProvider::new());
        let db = faulty(&store);
        let t0 = Instant::now();
        let latch = start(db.clone(), config("transient", "a"));
        let term = latch.wait_for_leadership().await.expect("running");
        let mut states = latch.watch();
        states.borrow_and_update();
        let mut events = latch.events();
        sleep_until(t0 + 4 * SEC).await;
        db.inject(Operation::Extend, Fault::Fail);
        let expect_calls = |at: Duration, calls: usize| {
            let db = db.clone();
            let latch = latch.clone();
            async move {
                sleep_until(t0 + at).await;
                assert_eq!(db.calls(Operation::Extend), calls, "at {at:?}");
                assert!(latch.is_leader(), "at {at:?}");
            }
        };
        expect_calls(5 * SEC + 500 * MS, 1).await; // the renew at 5 s failed
        expect_calls(7 * SEC + 500 * MS, 2).await; // retried after acquire_interval, failed
        db.heal(Operation::Extend);
        expect_calls(9 * SEC + 500 * MS, 3).await; // retried again, succeeded
        expect_calls(14 * SEC + 500 * MS, 4).await; // back on the renew_interval schedule
        assert_eq!(term.deadline(), t0 + 24 * SEC);
        assert!(!states.has_changed().expect("alive"), "no state change");
        let seen: Vec<_> = std::iter::from_fn(|| events.try_recv()).collect();
        assert_eq!(
            seen,
            vec![
                LeaderEvent::Renewed { term: term.clone() },
                LeaderEvent::Renewed { term: term.clone() }
            ],
            "only the two successful renews"
        );
        latch.close().await.expect("closed");
    }

    #[tokio::test(start_paused = true)]
    async fn leader_work_never_outlives_the_term_deadline_even_in_its_grace() {
        let store = Arc::new(InMemoryLockProvider::new());
        let db = faulty(&store);
        let t0 = Instant::now();
        let latch = start(db.clone(), config("grace-cap", "a"));
        let stopped_at: Arc<Mutex<Option<Duration>>> = Arc::default();
        let stopped = stopped_at.clone();
        latch.spawn_leader_work(move |_term| {
            let stopped = stopped.clone();
            async move {
                struct OnDrop(Arc<Mutex<Option<Duration>>>, Instant);
                impl Drop for OnDrop {
                    fn drop(&mut self) {
                        *self.0.lock().unwrap_or_else(PoisonError::into_inner) =
                            Some(self.1.elapsed());
                    }
                }
                let _on_drop = OnDrop(stopped, t0);
                std::future::pending::<()>().await; // ignores the end of the term
            }
        });
        let term = latch.wait_for_leadership().await.expect("running");
        // Renews fail from now on: the deadline stays at 10 s.
        db.inject(Operation::Extend, Fault::Fail);
        sleep_until(t0 + 8 * SEC).await;
        assert_eq!(term.deadline(), t0 + 10 * SEC);
        latch.close().await.expect("closed");
        // The 5 s grace would end at 13 s; the term's deadline (10 s) comes first.
        assert_eq!(t0.elapsed(), 10 * SEC);
        let stopped = *stopped_at.lock().unwrap_or_else(PoisonError::into_inner);
        assert_eq!(stopped, Some(10 * SEC));
        assert_eq!(
            holder(&store, "grace-cap").await,
            None,
            "released once the work stopped"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_outage_logs_one_error_keeps_retrying_and_recovers() {
        let logs = Logs::default();
        let _guard = logs.install();
        let store = Arc::new(InMemoryLockProvider::new());
        let db = faulty(&store);
        db.inject(Operation::Acquire, Fault::Fail);
        let latch = start(db.clone(), config("outage", "a").acquire_jitter(500 * MS));
        sleep(60 * SEC).await;
        assert!(!latch.is_leader());
        assert_eq!(latch.state(), LeaderState::Starting, "no attempt answered");
        let attempts = db.calls(Operation::Acquire);
        assert!((24..=31).contains(&attempts), "{attempts} attempts in 60 s");
        assert_eq!(
            logs.count(tracing::Level::ERROR, "cannot reach its lock store"),
            1
        );
        assert_eq!(
            logs.count(tracing::Level::ERROR, "check that the database is up"),
            1
        );
        // A different failure (timeouts now) is reported once more.
        db.inject(Operation::Acquire, Fault::Hang);
        sleep(30 * SEC).await;
        assert_eq!(
            logs.count(tracing::Level::ERROR, "no answer within call_timeout = 2s"),
            1
        );
        assert_eq!(
            logs.count(tracing::Level::ERROR, "cannot reach its lock store"),
            2
        );
        let failed = db.calls(Operation::Acquire);
        db.heal_all();
        let t0 = Instant::now();
        latch.wait_for_leadership().await.expect("running");
        assert!(t0.elapsed() <= 4 * SEC + 500 * MS, "{:?}", t0.elapsed());
        assert_eq!(
            logs.count(tracing::Level::INFO, "the lock store answers again"),
            1
        );
        // With how many attempts failed, and for how long (from the first failure at 0 s).
        assert_eq!(
            logs.count(tracing::Level::INFO, &format!("failures={failed} ")),
            1
        );
        let lasted = format!("outage_ms={} ", (90 * SEC + t0.elapsed()).as_millis());
        assert_eq!(logs.count(tracing::Level::INFO, &lasted), 1, "{lasted}");
        latch.close().await.expect("closed");
    }

    #[tokio::test(start_paused = true)]
    async fn an_own_leftover_row_is_released_and_a_new_term_starts() {
        let store = Arc::new(InMemoryLockProvider::new());
        let db = faulty(&store);
        let t0 = Instant::now();
        let latch = start(db.clone(), config("leftover", "a"));
        let term = latch.wait_for_leadership().await.expect("running");
        // Renews hang, so the term ends at 10 s; the release after it fails.
        db.inject(Operation::Extend, Fault::Hang);
        db.inject_times(Operation::Release, Fault::Fail, 1);
        term.ended().await;
        assert_eq!(t0.elapsed(), 10 * SEC);
        // At 12 s the row (valid until 15 s) is still this instance's: the acquire is refused,
        // the holder query finds it, it is released and taken again at once.
        let again = latch.wait_for_leadership().await.expect("running");
        assert_eq!(
            t0.elapsed(),
            12 * SEC,
            "did not wait for the old row to expire"
        );
        assert_eq!(db.calls(Operation::Release), 2);
        assert!(again.fencing_token() > term.fencing_token());
        db.heal_all();
        latch.close().await.expect("closed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_cut_off_from_the_store_steps_down_before_its_row_can_be_taken() {
        let store = Arc::new(InMemoryLockProvider::new());
        let (db_a, db_b) = (faulty(&store), faulty(&store));
        let t0 = Instant::now();
        let a = start(db_a.clone(), config("partition", "a"));
        a.wait_for_leadership().await.expect("running");
        let b = start(db_b.clone(), config("partition", "b"));
        // At 6 s (after the renew at 5 s), a loses its connection: every call hangs.
        sleep_until(t0 + 6 * SEC).await;
        for op in [
            Operation::Acquire,
            Operation::Extend,
            Operation::Release,
            Operation::Holder,
        ] {
            db_a.inject(op, Fault::Hang);
        }
        let mut a_states = a.watch();
        a_states.borrow_and_update();
        let b_term = b.wait_for_leadership().await.expect("running");
        let taken_at = t0.elapsed();
        assert!(!a.is_leader());
        assert_eq!(
            a.state(),
            LeaderState::Follower { leader: None },
            "a stepped down (at 15 s) before b took over"
        );
        // a's last successful renew was sent at 5 s: it stepped down at 15 s, the row expired at
        // 20 s, b took it at its first attempt after that.
        assert!(taken_at >= 20 * SEC && taken_at <= 22 * SEC, "{taken_at:?}");
        assert!(b_term.fencing_token() > Some(1));
        for db in [&db_a, &db_b] {
            db.heal_all();
        }
        a.close().await.expect("closed");
        b.close().await.expect("closed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_acquire_reply_is_recognised_and_its_row_released() {
        let store = Arc::new(InMemoryLockProvider::new());
        let db = faulty(&store);
        // The first acquire takes the row but its reply is lost.
        db.inject_times(Operation::Acquire, Fault::FailAfterApplying, 1);
        let t0 = Instant::now();
        let latch = start(db.clone(), config("lost-reply", "a"));
        // At 2 s the row (valid until 15 s) is refused; it can only be that acquire's: released,
        // and taken again at once in a new term.
        let term = latch.wait_for_leadership().await.expect("running");
        assert_eq!(t0.elapsed(), 2 * SEC);
        assert_eq!(db.calls(Operation::Release), 1);
        assert_eq!(term.fencing_token(), Some(2));
        latch.close().await.expect("closed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_acquire_reply_never_frees_the_row_of_a_leader_with_the_same_owner_id() {
        let store = Arc::new(InMemoryLockProvider::new());
        let t0 = Instant::now();
        let a = start(store.clone(), config("lost-shared", "p"));
        let a_term = a.wait_for_leadership().await.expect("running");
        // b, same owner id: its first acquire is refused by the store, but the reply is lost,
        // so b cannot tell whether the row it then sees is the product of that acquire.
        let db = faulty(&store);
        db.inject_times(Operation::Acquire, Fault::FailAfterApplying, 1);
        let b = start(db.clone(), config("lost-shared", "p"));
        while t0.elapsed() < 60 * SEC {
            sleep(100 * MS).await;
            assert!(a.is_leader() && !b.is_leader(), "at {:?}", t0.elapsed());
        }
        assert!(a_term.is_active(), "a's term never ended");
        assert_eq!(db.calls(Operation::Release), 0, "b released nothing");
        a.close().await.expect("closed");
        b.close().await.expect("closed");
    }

    /// Leader-only work that ignores the end of its term and records, when it is finally dropped,
    /// how many releases the store had seen.
    fn spawn_stubborn_work(latch: &LeaderLatch, db: &Faulty) -> Arc<Mutex<Vec<(u64, usize)>>> {
        let drops: Arc<Mutex<Vec<(u64, usize)>>> = Arc::default();
        let log = drops.clone();
        let db = db.clone();
        latch.spawn_leader_work(move |term| {
            struct OnDrop(Arc<Mutex<Vec<(u64, usize)>>>, Faulty, u64);
            impl Drop for OnDrop {
                fn drop(&mut self) {
                    let releases = self.1.calls(Operation::Release);
                    self.0
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((self.2, releases));
                }
            }
            let on_drop = OnDrop(log.clone(), db.clone(), term.number());
            async move {
                let _on_drop = on_drop;
                std::future::pending::<()>().await;
            }
        });
        drops
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_lost_lease_the_row_is_released_only_once_the_work_stopped() {
        let logs = Logs::default();
        let _guard = logs.install();
        let store = Arc::new(InMemoryLockProvider::new());
        let db = faulty(&store);
        let t0 = Instant::now();
        let latch = start(db.clone(), config("lost-work", "a"));
        let drops = spawn_stubborn_work(&latch, &db);
        let term = latch.wait_for_leadership().await.expect("running");
        db.inject(Operation::Extend, Fault::Hang);
        term.ended().await;
        assert_eq!(t0.elapsed(), 10 * SEC);
        // The release follows in this same instant, once the work loop has dropped the work.
        for _ in 0..1000 {
            if db.calls(Operation::Release) > 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(db.calls(Operation::Release), 1, "released");
        assert_eq!(
            *drops.lock().unwrap_or_else(PoisonError::into_inner),
            vec![(1, 0)],
            "the work stopped before the release was sent"
        );
        assert_eq!(t0.elapsed(), 10 * SEC, "released at once after it stopped");
        assert_eq!(
            logs.count(tracing::Level::WARN, "did not stop within shutdown_grace"),
            0,
            "no grace applies to a lost lease"
        );
        db.heal_all();
        latch.close().await.expect("closed");
    }

    #[tokio::test(start_paused = true)]
    async fn close_releases_the_row_only_after_the_work_is_cancelled_at_the_end_of_the_grace() {
        let logs = Logs::default();
        let _guard = logs.install();
        let store = Arc::new(InMemoryLockProvider::new());
        let db = faulty(&store);
        let latch = start(db.clone(), config("grace-work", "a"));
        let drops = spawn_stubborn_work(&latch, &db);
        latch.wait_for_leadership().await.expect("running");
        sleep(SEC).await;
        let t0 = Instant::now();
        latch.close().await.expect("closed");
        assert_eq!(t0.elapsed(), 5 * SEC, "the grace");
        assert_eq!(
            *drops.lock().unwrap_or_else(PoisonError::into_inner),
            vec![(1, 0)],
            "the work stopped before the release was sent"
        );
        assert_eq!(db.calls(Operation::Release), 1);
        assert_eq!(holder(&store, "grace-work").await, None);
        assert_eq!(
            logs.count(tracing::Level::WARN, "did not stop within shutdown_grace"),
            1
        );
    }

    #[tokio::test(start_paused = true)]
    async fn work_that_never_stops_keeps_the_row_until_it_expires() {
        let logs = Logs::default();
        let _guard = logs.install();
        let store = Arc::new(InMemoryLockProvider::new());
        let db = faulty(&store);
        let t0 = Instant::now();
        let latch = start(db.clone(), config("runaway", "a"));
        latch.wait_for_leadership().await.expect("running");
        // Leader-only work whose cancellation never completes (say, a drop that blocks).
        let runaway = latch.shared().work_started();
        sleep_until(t0 + SEC).await;
        let closing = tokio::spawn({
            let latch = latch.clone();
            async move { latch.close().await }
        });
        sleep_until(t0 + 15 * SEC - MS).await;
        assert!(!latch.is_leader());
        assert_eq!(
            holder(&store, "runaway").await.as_deref(),
            Some("a"),
            "the row is not handed over while the work may still run"
        );
        closing.await.expect("no panic").expect("closed");
        // close() gave up when the row expired by itself (acquired at 0 s for 15 s).
        assert_eq!(t0.elapsed(), 15 * SEC);
        assert_eq!(db.calls(Operation::Release), 0);
        assert_eq!(holder(&store, "runaway").await, None);
        assert_eq!(logs.count(tracing::Level::WARN, "has still not stopped"), 1);
        drop(runaway);
    }
}

// ---------------------------------------------------------------------------------------------
// Shared owner ids, resign on a follower, publishing while user code holds the state

/// Collects every term of `latches` from their event streams: (start, end, token).
fn collect_terms(latches: &[LeaderLatch]) -> (TermLog, Vec<tokio::task::JoinHandle<()>>) {
    let terms: TermLog = Arc::default();
    let mut collectors = Vec::new();
    for latch in latches {
        let mut events = latch.events();
        let terms = terms.clone();
        collectors.push(tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let mut terms = terms.lock().unwrap_or_else(PoisonError::into_inner);
                match event {
                    LeaderEvent::Elected { term } => {
                        terms.push((Instant::now(), None, term.fencing_token()));
                    }
                    LeaderEvent::SteppedDown { term, .. } => {
                        let open = terms
                            .iter_mut()
                            .find(|t| t.2 == term.fencing_token())
                            .expect("stepped down from a known term");
                        open.1 = Some(Instant::now());
                    }
                    _ => {}
                }
            }
        }));
    }
    (terms, collectors)
}

/// Asserts that the collected terms never overlap and that their tokens increase.
fn assert_terms_disjoint(terms: &TermLog) -> usize {
    let mut terms = terms.lock().unwrap_or_else(PoisonError::into_inner).clone();
    terms.sort_by_key(|t| t.0);
    for pair in terms.windows(2) {
        let (prev, next) = (pair[0], pair[1]);
        let prev_end = prev.1.expect("every term ended by close");
        assert!(prev_end <= next.0, "terms overlap: {prev:?} and {next:?}");
        assert!(
            next.2 > prev.2,
            "tokens not increasing: {prev:?} then {next:?}"
        );
    }
    terms.len()
}

#[tokio::test(start_paused = true)]
async fn two_latches_sharing_an_owner_id_never_lead_at_once() {
    let store = Arc::new(InMemoryLockProvider::new());
    // Same owner id (say, both from SHEDLOCK_OWNER_ID in one process), same election.
    let latches: Vec<LeaderLatch> = (0..2)
        .map(|_| {
            start(
                store.clone(),
                LeaderLatchConfig::builder("shared-id").owner_id("p"),
            )
        })
        .collect();
    let (terms, collectors) = collect_terms(&latches);
    one_leader(&latches).await;
    let t0 = Instant::now();
    let mut led = [false; 2];
    while t0.elapsed() < 5 * 60 * SEC {
        sleep(100 * MS).await;
        let now = leaders(&latches);
        assert!(
            now.len() <= 1,
            "two leaders at once at {:?}: {now:?}",
            t0.elapsed()
        );
        if let [leader] = now[..] {
            led[leader] = true;
            // Every 41 s the leader resigns, so both get to lead.
            if t0.elapsed().as_millis().is_multiple_of(41_000) {
                let l = latches[leader].clone();
                tokio::spawn(async move { l.resign().await });
            }
        }
    }
    assert_eq!(led, [true, true], "both led at some point");
    for latch in &latches {
        latch.close().await.expect("closed");
    }
    for c in collectors {
        c.await.expect("collector");
    }
    assert!(assert_terms_disjoint(&terms) >= 5);
}

#[tokio::test(start_paused = true)]
async fn a_row_of_an_earlier_process_with_the_same_owner_id_is_left_to_expire() {
    let store = Arc::new(InMemoryLockProvider::new());
    // A crashed earlier incarnation with the same explicit owner id left its row (15 s lease),
    // or another live latch uses the id: either way this latch cannot tell it is its own.
    let t0 = Instant::now();
    store
        .acquire("earlier", 15 * SEC, "a#election")
        .await
        .expect("ok")
        .expect("free");
    let latch = start(store.clone(), config("earlier", "a"));
    let seen = first_leader_seen(&latch).await;
    assert_eq!(seen.owner_id(), "a", "followed, not released");
    sleep_until(t0 + 14 * SEC + 500 * MS).await;
    assert!(!latch.is_leader());
    assert_eq!(seen.fencing_token(), Some(1));
    // Its attempts at 0, 2, …, 14 s were refused; the one at 16 s finds the row expired.
    let term = latch.wait_for_leadership().await.expect("running");
    assert_eq!(t0.elapsed(), 16 * SEC);
    assert_eq!(term.fencing_token(), Some(2));
    latch.close().await.expect("closed");
}

#[tokio::test(start_paused = true)]
async fn resign_on_a_follower_changes_nothing() {
    let store = Arc::new(InMemoryLockProvider::new());
    let a = start(store.clone(), config("follower-resign", "a"));
    a.wait_for_leadership().await.expect("running");
    let b = start(store.clone(), config("follower-resign", "b"));
    sleep(SEC).await; // b tried at 0 s; its next attempt is at 2 s
    assert!(!b.resign().await, "not leading: nothing to resign");
    // b does not sit out: when a closes, b takes over at its next regular attempt (2 s).
    let t0 = Instant::now();
    a.close().await.expect("closed");
    b.wait_for_leadership().await.expect("running");
    assert_eq!(t0.elapsed(), SEC);
    b.close().await.expect("closed");
}

/// Runs `scenario` on its own thread and runtime. Fails, instead of hanging, if it deadlocks.
fn without_deadlock(scenario: impl FnOnce() + Send + 'static) {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        scenario();
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(Duration::from_secs(30)) {
        Ok(()) => {}
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("deadlocked"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("the scenario panicked"),
    }
}

#[test]
fn resigning_and_dropping_while_holding_a_state_borrow_do_not_deadlock() {
    without_deadlock(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        rt.block_on(async {
            let latch = start(InMemoryLockProvider::new(), config("borrowed", "a"));
            let term = latch.wait_for_leadership().await.expect("running");
            let states = latch.watch();
            {
                // User code holding a read guard of the state while it calls the latch.
                let state = states.borrow();
                assert!(state.was_leader());
                let mut resign = std::pin::pin!(latch.resign());
                let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                assert!(resign.as_mut().poll(&mut cx).is_pending());
                assert!(!latch.is_leader() && !term.is_active());
                assert_eq!(latch.current_term(), None);
                assert!(state.was_leader(), "published by the task, later");
            }
            latch.wait_for_leadership().await.expect("running");
            let state = states.borrow();
            drop(latch); // the last handle: closes
            drop(state);
            let mut states = states;
            states
                .wait_for(|s| *s == LeaderState::Stopped)
                .await
                .expect("alive");
        });
    });
}

/// The latch's task and a resign on another thread step down while this thread holds a read guard
/// of the state and calls `current_term()`. The step-down is published, taking the watch's write
/// lock, only after the guard goes. Nothing that publishes holds the lock `current_term()` takes.
/// Everything runs on the watchdog's thread, so a deadlock fails the test cleanly.
#[test]
fn current_term_while_holding_a_state_borrow_does_not_deadlock() {
    without_deadlock(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let latch = rt.block_on(async {
            let latch = start(InMemoryLockProvider::new(), config("borrowed-mt", "a"));
            latch.wait_for_leadership().await.expect("running");
            latch
        });
        let states = latch.watch();
        let guard = states.borrow();
        let resign = rt.spawn({
            let latch = latch.clone();
            async move { latch.resign().await }
        });
        let give_up = std::time::Instant::now() + Duration::from_secs(10);
        while latch.is_leader() {
            assert!(
                std::time::Instant::now() < give_up,
                "resign did not step down"
            );
            std::thread::yield_now();
        }
        assert_eq!(latch.current_term(), None);
        assert!(guard.was_leader(), "not published while the guard is held");
        drop(guard);
        assert!(rt.block_on(resign).expect("no panic"));
        assert!(!latch.state().was_leader());
        rt.block_on(latch.close()).expect("closed");
    });
}

// ---------------------------------------------------------------------------------------------
// Election rows are marked for operators

#[tokio::test(start_paused = true)]
async fn the_latch_marks_its_rows_and_followers_see_the_plain_owner_id() {
    use crate::admin::LockAdmin;
    let store = Arc::new(InMemoryLockProvider::new());
    let a = start(store.clone(), config("marked", "a"));
    a.wait_for_leadership().await.expect("running");
    let entry = store
        .entry("marked")
        .await
        .expect("in-memory entry")
        .expect("a row");
    assert_eq!(entry.record().owner(), "a#election");
    assert!(entry.is_election());

    let b = start(store.clone(), config("marked", "b"));
    let seen = first_leader_seen(&b).await;
    assert_eq!(seen.owner_id(), "a");
    assert_eq!(seen.owner_id(), a.owner_id());
    b.close().await.expect("closed");
    a.close().await.expect("closed");

    // The mark must fit in locked_by's 255 characters.
    let long = config("marked", &"x".repeat(247))
        .build()
        .expect("a valid id");
    let err = LeaderLatch::start(store.clone(), long).expect_err("too long with the mark");
    assert!(err.is_invalid_config(), "{err}");
    let fits = config("marked", &"x".repeat(246))
        .build()
        .expect("a valid id");
    LeaderLatch::start(store, fits)
        .expect("fits with the mark")
        .close()
        .await
        .expect("closed");
}
