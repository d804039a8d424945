//! The batches of fire claims ([`super::batch`]), on paused tokio time over the in-memory store,
//! behind a gate that holds the first batch in flight so that the next claims meet it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;

use super::batch::{Batcher, Claims, Releases};
use crate::InMemoryLockProvider;
use crate::admin::LockAdmin as _;
use crate::error::{Error, Result};
use crate::fire::{Fire, FireClaim};
use crate::jobs::{RunOutcome, RunReport};
use crate::provider::{ClaimRequest, LockProvider, LockRecord, ReleaseRequest, async_trait};

const SEC: Duration = Duration::from_secs(1);

/// The in-memory store with a batch limit, the names of each batch it was sent, and a gate: each
/// batch waits for a permit. It fails every batch when told to, and answers the claims of the
/// `busy` names in a batch [`Error::busy`] (their rows held elsewhere) without deciding them.
struct Gated {
    inner: InMemoryLockProvider,
    limit: usize,
    batches: Mutex<Vec<Vec<String>>>,
    singles: Mutex<Vec<String>>,
    released: Mutex<Vec<String>>,
    gate: Semaphore,
    fail: bool,
    busy: Vec<&'static str>,
}

impl Gated {
    fn new(limit: usize, fail: bool) -> Arc<Self> {
        Arc::new(Self {
            inner: InMemoryLockProvider::new(),
            limit,
            batches: Mutex::default(),
            singles: Mutex::default(),
            released: Mutex::default(),
            gate: Semaphore::new(0),
            fail,
            busy: Vec::new(),
        })
    }

    fn with_busy(limit: usize, fail: bool, busy: Vec<&'static str>) -> Arc<Self> {
        let mut store = Arc::into_inner(Self::new(limit, fail)).expect("just made");
        store.busy = busy;
        Arc::new(store)
    }

    fn batches(&self) -> Vec<Vec<String>> {
        self.batches.lock().unwrap().clone()
    }
}

#[async_trait]
impl LockProvider for Gated {
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> Result<Option<LockRecord>> {
        self.inner.acquire(name, at_most, owner).await
    }
    async fn extend(&self, record: &LockRecord, at_most: Duration) -> Result<Option<LockRecord>> {
        self.inner.extend(record, at_most).await
    }
    async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool> {
        self.released.lock().unwrap().push(record.name().to_owned());
        self.inner.release(record, at_least).await
    }
    async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
        self.inner.holder(name).await
    }
    async fn claim_fire(
        &self,
        name: &str,
        fire: &Fire,
        at_most: Duration,
        owner: &str,
    ) -> Result<FireClaim> {
        self.singles.lock().unwrap().push(name.to_owned());
        self.inner.claim_fire(name, fire, at_most, owner).await
    }
    async fn claim_fires(
        &self,
        claims: &[ClaimRequest<'_>],
        owner: &str,
    ) -> Result<Vec<Result<FireClaim>>> {
        self.batches
            .lock()
            .unwrap()
            .push(claims.iter().map(|c| c.name.to_owned()).collect());
        self.gate.acquire().await.unwrap().forget();
        if self.fail && !self.busy.is_empty() {
            // Against the contract: only a claim answered on its own may be left undecided.
            return Err(Error::busy("a whole batch (a test's fault)"));
        }
        if self.fail {
            return Err(Error::backend_message("the batch failed (a test's fault)"));
        }
        let mut answers = Vec::new();
        for claim in claims {
            answers.push(if self.busy.contains(&claim.name) {
                Err(Error::busy(format!(
                    "lock {:?}: held (a test's)",
                    claim.name
                )))
            } else {
                self.inner
                    .claim_fire(claim.name, claim.fire, claim.at_most, owner)
                    .await
            });
        }
        Ok(answers)
    }
    fn fire_batch_limit(&self) -> usize {
        self.limit
    }
    async fn release_run(
        &self,
        record: &LockRecord,
        at_least: Duration,
        run: &RunReport,
    ) -> Result<bool> {
        self.singles.lock().unwrap().push(record.name().to_owned());
        self.inner.release_run(record, at_least, run).await
    }
    async fn release_runs(&self, releases: &[ReleaseRequest<'_>]) -> Result<Vec<Result<bool>>> {
        self.batches.lock().unwrap().push(
            releases
                .iter()
                .map(|r| r.record.name().to_owned())
                .collect(),
        );
        self.gate.acquire().await.unwrap().forget();
        let mut answers = Vec::new();
        for r in releases {
            answers.push(if self.busy.contains(&r.record.name()) {
                Err(Error::busy("held (a test's)"))
            } else {
                self.inner.release_run(r.record, r.at_least, r.run).await
            });
        }
        Ok(answers)
    }
    fn release_batch_limit(&self) -> usize {
        self.limit
    }
}

fn open_fire() -> Fire {
    let at = chrono::Utc::now() - chrono::Duration::seconds(1);
    Fire::new(at, at + chrono::Duration::minutes(1)).unwrap()
}

/// Polls until `n` claims wait for the next batch.
async fn until_waiting(batcher: &Batcher<Claims>, n: usize) {
    for _ in 0..1_000 {
        if batcher.waiting() == n {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("{} claims wait, not {n}", batcher.waiting());
}

/// Polls until the store was sent `n` batches.
async fn until_sent(store: &Gated, n: usize) {
    for _ in 0..1_000 {
        if store.batches().len() == n {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("{} batches sent, not {n}", store.batches().len());
}

fn batcher(store: &Arc<Gated>) -> Arc<Batcher<Claims>> {
    let provider: Arc<dyn LockProvider> = store.clone();
    Batcher::<Claims>::new(&provider, "me").expect("the store batches")
}

/// A lone claim goes at once; the claims that come while it is in flight go together next, up to
/// the store's limit, one per lock name: a name claimed twice waits for a later batch.
#[tokio::test(start_paused = true)]
async fn claims_that_meet_a_batch_in_flight_go_together_in_the_next() {
    let store = Gated::new(3, false);
    let batcher = batcher(&store);
    let fire = open_fire();
    let mut claims = Vec::new();
    for name in ["first", "a", "b", "a", "c", "d"] {
        let sender = batcher.clone();
        claims.push(tokio::spawn(async move {
            (name, sender.claim(name, &fire, 10 * SEC, SEC).await.reply)
        }));
        if name == "first" {
            // The first claim is in flight, alone, before the others come.
            until_sent(&store, 1).await;
        }
    }
    until_waiting(&batcher, 5).await;
    store.gate.add_permits(10);
    let mut claimed = Vec::new();
    for claim in claims {
        let (name, reply) = claim.await.unwrap();
        match reply.unwrap() {
            FireClaim::Claimed(record) => claimed.push(record.name().to_owned()),
            FireClaim::ClaimedElsewhere { .. } if name == "a" => {}
            other => panic!("{name}: {other:?}"),
        }
    }
    claimed.sort();
    assert_eq!(
        claimed,
        ["a", "b", "c", "d", "first"],
        "each fire claimed once"
    );
    assert_eq!(
        store.batches(),
        [vec!["first"], vec!["a", "b", "c"], vec!["a", "d"]],
        "the lone claim, then the waiting ones up to 3, the second `a` in a later batch"
    );
}

/// A batch that fails as a whole fails each of its claims, with the store's error.
#[tokio::test(start_paused = true)]
async fn a_failed_batch_fails_each_claim_with_its_error() {
    let store = Gated::new(10, true);
    store.gate.add_permits(10);
    let batcher = batcher(&store);
    let fire = open_fire();
    let claims = ["x", "y", "z"].map(|name| {
        let batcher = batcher.clone();
        tokio::spawn(async move { batcher.claim(name, &fire, 10 * SEC, SEC).await.reply })
    });
    for claim in claims {
        let error = claim.await.unwrap().expect_err("the batch failed");
        assert!(error.is_backend(), "{error}");
        assert!(error.to_string().contains("a test's fault"), "{error}");
    }
}

/// A batch that does not answer within the claims' timeout fails each of them as timed out.
#[tokio::test(start_paused = true)]
async fn a_batch_that_hangs_times_out_each_claim() {
    let store = Gated::new(10, false);
    let batcher = batcher(&store);
    let fire = open_fire();
    let answer = batcher.claim("x", &fire, 10 * SEC, SEC).await;
    let error = answer.reply.expect_err("no answer");
    assert!(error.is_timeout(), "{error}");
    assert!(answer.received - answer.sent >= SEC);
}

/// A claim whose caller went away while its batch was in flight, and that won, is released at
/// once instead of holding its lock, unrun, until `at_most`.
#[tokio::test(start_paused = true)]
async fn a_claim_won_for_a_caller_that_went_away_is_released() {
    let store = Gated::new(10, false);
    let batcher = batcher(&store);
    let fire = open_fire();
    let gone = {
        let batcher = batcher.clone();
        tokio::spawn(async move { batcher.claim("gone", &fire, 600 * SEC, 5 * SEC).await })
    };
    until_sent(&store, 1).await;
    assert_eq!(store.batches(), [vec!["gone"]], "in flight");
    gone.abort();
    assert!(
        gone.await.is_err_and(|e| e.is_cancelled()),
        "the caller went away"
    );
    store.gate.add_permits(1);
    let released = || store.released.lock().unwrap().contains(&"gone".to_owned());
    for _ in 0..1_000 {
        if released() {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(released(), "no release of the claim was sent");
    assert!(
        store.inner.holder("gone").await.unwrap().is_none(),
        "the claim of a caller that went away still holds its lock"
    );
    let recorded = store
        .inner
        .claim_fire("gone", &fire, SEC, "other")
        .await
        .unwrap();
    assert!(
        matches!(recorded, FireClaim::ClaimedElsewhere { .. }),
        "the fire was claimed, and stays so: {recorded:?}"
    );
}

/// A claim its batch left undecided ([`Error::busy`]: its row held elsewhere) is sent on its own
/// through `claim_fire`, and its caller gets that answer; the batch's other claims are answered
/// by the batch. A whole batch that fails is never sent again claim by claim.
#[tokio::test(start_paused = true)]
async fn a_claim_left_undecided_by_its_batch_is_sent_on_its_own() {
    let store = Gated::with_busy(10, false, vec!["held"]);
    store.gate.add_permits(10);
    let batcher = batcher(&store);
    let fire = open_fire();
    let first = batcher.claim("first", &fire, 10 * SEC, SEC).await;
    assert!(matches!(first.reply, Ok(FireClaim::Claimed(_))));
    let claims = ["a", "held", "b"].map(|name| {
        let batcher = batcher.clone();
        tokio::spawn(async move { (name, batcher.claim(name, &fire, 10 * SEC, SEC).await.reply) })
    });
    for claim in claims {
        let (name, reply) = claim.await.unwrap();
        match reply {
            Ok(FireClaim::Claimed(record)) => assert_eq!(record.name(), name),
            other => panic!("{name}: {other:?}"),
        }
    }
    assert!(
        store
            .batches()
            .iter()
            .any(|batch| batch.contains(&"held".to_owned())),
        "the claim went in a batch first: {:?}",
        store.batches()
    );
    assert_eq!(
        *store.singles.lock().unwrap(),
        ["held"],
        "only the undecided claim is sent on its own"
    );
    let failed = Gated::with_busy(10, true, vec!["held"]);
    failed.gate.add_permits(10);
    let error = self::batcher(&failed)
        .claim("held", &fire, 10 * SEC, SEC)
        .await
        .reply
        .expect_err("the batch failed");
    assert!(error.is_busy(), "{error}");
    assert!(
        failed.singles.lock().unwrap().is_empty(),
        "a claim of a batch that failed whole may have committed: it is not sent again"
    );
}

/// Releases that record runs go through the same queue: a lone one at once, those that come while
/// it is in flight together in the next batch, each recorded; one its batch left undecided
/// ([`Error::busy`]) is sent on its own through `release_run`.
#[tokio::test(start_paused = true)]
async fn releases_that_meet_a_batch_in_flight_go_together_and_a_busy_one_alone() {
    let store = Gated::with_busy(10, false, vec!["held"]);
    let provider: Arc<dyn LockProvider> = store.clone();
    let releases = Batcher::<Releases>::new(&provider, "me").expect("the store batches");
    let names = ["first", "a", "held", "b"];
    let mut records = Vec::new();
    for name in names {
        records.push(
            store
                .inner
                .acquire(name, 60 * SEC, "me")
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let run = RunReport::new(chrono::Utc::now(), RunOutcome::Succeeded);
    let mut sent = Vec::new();
    for record in records {
        let (releases, run) = (releases.clone(), run.clone());
        sent.push(tokio::spawn(async move {
            let name = record.name().to_owned();
            (
                name,
                releases.release(&record, Duration::ZERO, &run, SEC).await,
            )
        }));
        if sent.len() == 1 {
            until_sent(&store, 1).await;
        }
    }
    for _ in 0..1_000 {
        if releases.waiting() == 3 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(releases.waiting(), 3, "three releases wait for the first");
    store.gate.add_permits(10);
    for release in sent {
        let (name, done) = release.await.unwrap();
        assert!(matches!(done, Ok(true)), "{name}: {done:?}");
        let entry = store.inner.entry(&name).await.unwrap().unwrap();
        assert!(!entry.is_held(), "{name} is free");
        assert!(
            entry.state().and_then(|s| s.last_run.as_ref()).is_some(),
            "{name}'s run is recorded"
        );
    }
    assert_eq!(
        store.batches(),
        [vec!["first"], vec!["a", "held", "b"]],
        "the lone release, then the three that waited"
    );
    assert_eq!(*store.singles.lock().unwrap(), ["held"]);
}
