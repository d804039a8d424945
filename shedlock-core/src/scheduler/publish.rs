//! Publishing the jobs' definitions to the store, at start and then as a heartbeat (see
//! [`LockProvider::publish_definitions`](crate::provider::LockProvider::publish_definitions)).
//! Operators' tools then show each job's schedule and next fire without the application.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use super::Shared;
use crate::jobs::{Definition, VERSION};

/// How often a running scheduler publishes its jobs' definitions again.
pub const DEFINITIONS_HEARTBEAT: Duration = Duration::from_secs(30);

/// How long a published definition stands without a heartbeat: four heartbeats. So a replica that
/// misses three, on a slow store, keeps its entries. A dead replica's entries go within two
/// minutes.
pub const DEFINITIONS_TTL: Duration = Duration::from_mins(2);

/// How long a scheduler waits before publishing again to a store that is not set up for definitions
/// (its definitions table is missing).
const NOT_SET_UP_RETRY: Duration = Duration::from_mins(10);

/// The definitions of the scheduler's jobs, as published.
fn definitions(shared: &Shared) -> Vec<Definition> {
    shared
        .jobs
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(|job| {
            // A `JobSpec` always serialises (its fields are plain data); skip one that would not.
            let spec = serde_json::to_string(&job.spec).ok()?;
            Some(Definition::new(&job.name, job.spec.lock_name(), spec))
        })
        .collect()
}

/// Publishes now and then every [`DEFINITIONS_HEARTBEAT`] until the scheduler stops. A store that
/// keeps no definitions ends the loop, logged at DEBUG. A failure is logged once until a publish
/// succeeds again. It never stops a job.
pub(super) async fn publish_loop(shared: Arc<Shared>) {
    let mut stopping = shared.stopping.subscribe();
    let replica = shared.executor.owner_id().to_owned();
    let mut failing = false;
    let mut not_set_up = false;
    loop {
        let mut wait = DEFINITIONS_HEARTBEAT;
        let definitions = definitions(&shared);
        let published = tokio::time::timeout(
            shared.executor.call_timeout(),
            shared.executor.provider().publish_definitions(
                &replica,
                VERSION,
                &definitions,
                DEFINITIONS_TTL,
            ),
        )
        .await;
        match published {
            Ok(Ok(())) => {
                not_set_up = false;
                if std::mem::take(&mut failing) {
                    tracing::info!("job definitions published again");
                }
            }
            Ok(Err(error)) if error.is_unsupported() => {
                tracing::debug!("the store keeps no job definitions; not publishing them");
                return;
            }
            Ok(Err(error))
                if error.is_missing_table() || error.is_schema() || error.is_invalid_config() =>
            {
                // Set up without the definitions table (a Java ShedLock table, one made before
                // it existed): asked again rarely, so that a migration run later is noticed
                // without a restart and without a failing statement every heartbeat.
                if !std::mem::replace(&mut not_set_up, true) {
                    tracing::info!(
                        error = &error as &dyn std::error::Error,
                        "the store is not set up for job definitions (operators' tools will not \
                         show this replica's schedules); asking again every {}",
                        shedlock_duration::format(NOT_SET_UP_RETRY)
                    );
                }
                wait = NOT_SET_UP_RETRY;
            }
            Ok(Err(error)) => {
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        "could not publish the job definitions (operators' tools will not show \
                         this replica's schedules until it can); the jobs run as usual"
                    );
                }
            }
            Err(_) => {
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!(
                        "publishing the job definitions timed out; the jobs run as usual"
                    );
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stopping.wait_for(|stop| *stop) => return,
        }
    }
}
