//! shedlock-tower's `LockLayer` around an apalis worker that is not a cron worker: jobs from
//! apalis's in-memory backend, each run under a lock named from its arguments. A job whose lock
//! another holder has is answered by the layer's `Refusals`, and its handler is not called. In
//! one process, over the in-memory store; apalis runs on real time, and the test waits for the
//! worker's answers with a deadline.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use apalis::prelude::{
    BoxDynError, Event, EventListenerExt as _, MemoryStorage, Task, TaskSink as _, WorkerBuilder,
};
use shedlock_core::provider::LockProvider as _;
use shedlock_core::{Error, InMemoryLockProvider, LockingTaskExecutor};
use shedlock_tower::{Busy, LockLayer, Refusals};

/// What a job answers: the index rebuilt under its lock, or the lock it found held.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Done {
    Rebuilt {
        index: u32,
        lock: String,
    },
    Held(String),
    /// Not a job's answer: the error the worker reported, kept for the assertion's message.
    Failed(String),
}

/// The layer's answers for apalis: a held lock is a job done elsewhere, a success; an invalid
/// name or a store failure is the job's error, which apalis may retry.
struct ApalisRefusals;

impl Refusals<Done, BoxDynError> for ApalisRefusals {
    fn held(&self, busy: &Busy) -> Result<Done, BoxDynError> {
        Ok(Done::Held(busy.name().to_owned()))
    }

    fn unrecognised(&self) -> Result<Done, BoxDynError> {
        Err("not a job of ours".into())
    }

    fn invalid_name(&self, name: &str, error: &Error) -> Result<Done, BoxDynError> {
        Err(format!("lock name {name:?}: {error}").into())
    }

    fn failed(&self, name: &str, error: &Error) -> Result<Done, BoxDynError> {
        Err(format!("lock {name:?}: {error}").into())
    }
}

#[tokio::test]
async fn the_lock_layer_serves_an_apalis_worker() {
    let store = Arc::new(InMemoryLockProvider::new());
    // Another replica is rebuilding index 7.
    store
        .acquire("rebuild-7", Duration::from_mins(1), "other")
        .await
        .expect("the store")
        .expect("free");
    let executor = LockingTaskExecutor::builder(store.clone())
        .owner_id("worker")
        .build()
        .expect("an executor");
    let layer = LockLayer::builder(
        executor,
        // The lock per index to rebuild: a bounded set of names.
        |task: &Task<u32>| (task.args < 100).then(|| format!("rebuild-{}", task.args)),
        ApalisRefusals,
    )
    .at_most(Duration::from_mins(1))
    .build()
    .expect("the layer");

    let runs = Arc::new(AtomicUsize::new(0));
    let rebuild = {
        let runs = Arc::clone(&runs);
        move |index: u32| {
            let runs = Arc::clone(&runs);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                let lock = shedlock_core::current_lock().ok_or("no lock")?;
                Ok::<_, BoxDynError>(Done::Rebuilt {
                    index,
                    lock: lock.name().to_owned(),
                })
            }
        }
    };
    let mut jobs = MemoryStorage::new();
    jobs.push(7).await.expect("push a job");
    jobs.push(8).await.expect("push a job");

    let answers: Arc<Mutex<Vec<Done>>> = Arc::default();
    let worker = WorkerBuilder::new("rebuilder")
        .backend(jobs)
        .layer(layer)
        .on_event({
            let answers = Arc::clone(&answers);
            let stopping = AtomicBool::new(false);
            move |worker, event| {
                let answered = {
                    let mut answers = answers.lock().unwrap_or_else(PoisonError::into_inner);
                    match event {
                        Event::Success(answer) => {
                            answers.extend(answer.downcast_ref::<Done>().cloned());
                        }
                        Event::Error(error) => answers.push(Done::Failed(error.to_string())),
                        _ => {}
                    }
                    answers.len()
                };
                // Once, and not under the mutex: stopping emits an event of its own, to this
                // listener.
                if answered == 2 && !stopping.swap(true, Ordering::SeqCst) {
                    let _ = worker.stop();
                }
            }
        })
        .build(rebuild);
    tokio::time::timeout(Duration::from_secs(10), worker.run())
        .await
        .expect("both jobs answered within 10 s")
        .expect("the worker ran");

    let mut answers = answers
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    answers.sort_by_key(|answer| matches!(answer, Done::Rebuilt { .. }));
    assert_eq!(
        answers,
        [
            Done::Held("rebuild-7".to_owned()),
            Done::Rebuilt {
                index: 8,
                lock: "rebuild-8".to_owned()
            },
        ]
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the held job's handler ran");
    assert!(
        store
            .holder("rebuild-8")
            .await
            .expect("the store")
            .is_none()
    );
    let other = store.holder("rebuild-7").await.expect("the store");
    assert_eq!(
        other.map(|record| record.owner().to_owned()),
        Some("other".to_owned())
    );
}
