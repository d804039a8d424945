//! What every page and API route reads from the store: the published definitions and the lock
//! rows, joined into [`JobView`]s as `shedlock jobs` joins them, and which job a name means.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::response::Response;
use chrono::{DateTime, Utc};
use shedlock_core::admin::model::{JobTarget, JobView};
use shedlock_core::admin::{LockAdmin, LockEntry};
use shedlock_core::jobs::{DefinitionEntry, RunEntry};

use crate::access::Access;
use crate::failure::Failure;

/// What the handlers share.
pub(crate) struct State {
    pub(crate) admin: Arc<dyn LockAdmin>,
    pub(crate) access: Access,
}

pub(crate) type Shared = Arc<State>;

/// One read of the store.
pub(crate) struct Snapshot {
    pub(crate) definitions: Vec<DefinitionEntry>,
    pub(crate) entries: Vec<LockEntry>,
    pub(crate) jobs: Vec<JobView>,
    /// The store's clock when read: the rows' now, or this process's clock without rows.
    pub(crate) now: DateTime<Utc>,
}

impl Snapshot {
    /// The job `name` means, as the CLI resolves it ([`JobTarget::resolve`]).
    pub(crate) fn target(&self, name: &str) -> Option<JobTarget> {
        JobTarget::resolve(&self.definitions, &self.entries, name)
    }

    /// The job `name` means, or a 404 that lists the jobs there are.
    pub(crate) fn resolve(&self, name: &str) -> Result<JobTarget, Failure> {
        self.target(name).ok_or_else(|| self.unknown(name))
    }

    /// The view of the job `name` means.
    pub(crate) fn job(&self, name: &str) -> Option<&JobView> {
        let target = self.target(name)?;
        self.jobs
            .iter()
            .find(|j| j.job == target.job && j.lock_name == target.lock)
            .or_else(|| self.jobs.iter().find(|j| j.lock_name == target.lock))
    }

    pub(crate) fn entry(&self, lock: &str) -> Option<&LockEntry> {
        self.entries.iter().find(|e| e.record().name() == lock)
    }

    /// No job or lock named `name`: what there is instead.
    pub(crate) fn unknown(&self, name: &str) -> Failure {
        let names: Vec<String> = self
            .jobs
            .iter()
            .take(20)
            .map(|j| format!("{:?}", j.job))
            .collect();
        let known = if names.is_empty() {
            "no job is known: no replica publishes one and no lock row recorded a run".to_owned()
        } else {
            let more = match self.jobs.len().saturating_sub(20) {
                0 => String::new(),
                more => format!(" and {more} more"),
            };
            format!("the jobs are {}{more}", names.join(", "))
        };
        Failure::not_found(format!("there is no job named {name:?}; {known}"))
    }
}

/// Reads the definitions and the lock rows. A store that keeps no definitions shows the jobs its
/// rows recorded.
pub(crate) async fn snapshot(admin: &dyn LockAdmin) -> Result<Snapshot, Failure> {
    let definitions: Vec<DefinitionEntry> = match admin.definitions().await {
        Ok(d) => d,
        Err(e) if e.is_unsupported() => Vec::new(),
        Err(e) => return Err(Failure::store(&e)),
    };
    let entries = admin.list().await.map_err(|e| Failure::store(&e))?;
    let now = entries.first().map_or_else(Utc::now, LockEntry::store_now);
    let jobs = JobView::collect(&definitions, &entries, now);
    Ok(Snapshot {
        definitions,
        entries,
        jobs,
        now,
    })
}

/// The recorded runs of `lock`, newest first. A store without history has none.
pub(crate) async fn history(
    admin: &dyn LockAdmin,
    lock: &str,
    limit: usize,
) -> Result<Vec<RunEntry>, Failure> {
    match admin.history(lock, limit).await {
        Ok(runs) => Ok(runs),
        Err(e) if e.is_unsupported() => Ok(Vec::new()),
        Err(e) => Err(Failure::store(&e)),
    }
}

/// The job or lock name in a route's path, percent-decoded: a name with control characters, or
/// whose encoding is not UTF-8, is refused before the store is asked.
pub(crate) struct Name(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for Name {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        let path = parts.uri.path().to_owned();
        let refuse = |text: String| Failure::bad_request(text).for_path(&path);
        let Path(name) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| {
                refuse(format!(
                    "the name in the path cannot be read: {}",
                    e.body_text()
                ))
            })?;
        if name.trim().is_empty() {
            return Err(refuse("the name is empty".to_owned()));
        }
        if name.chars().any(char::is_control) {
            return Err(refuse(format!("the name {name:?} has a control character")));
        }
        Ok(Self(name))
    }
}
