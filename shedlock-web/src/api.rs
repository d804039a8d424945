//! `/api`: the jobs and locks as the CLI's `--json` prints them, and the actions. The shapes are
//! documented in docs/dashboard.md, "The API".

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shedlock_core::admin::model::{JobTarget, JobView, LockView, RunView};
use shedlock_core::admin::{UnlockRefusal, UnlockRequest, guarded_unlock};
use shedlock_core::pause::{Pause, PauseFor, honours_pause};
use shedlock_core::trigger::{DEFAULT_TRIGGER_EXPIRY, Trigger, TriggerAnswer};

use crate::access::Actor;
use crate::body::Body;
use crate::failure::Failure;
use crate::read::{self, Name, Shared, snapshot};
use crate::show::Show;

type Answer = Result<Response, Failure>;

fn json(status: StatusCode, value: &impl Serialize) -> Response {
    (status, Json(value)).into_response()
}

pub(crate) async fn jobs(State(state): State<Shared>, show: Show) -> Answer {
    let snapshot = snapshot(state.admin.as_ref()).await?;
    let jobs: Vec<&JobView> = snapshot.jobs.iter().filter(|j| show.keeps(j)).collect();
    Ok(json(StatusCode::OK, &jobs))
}

/// `GET /api/jobs/{name}`.
#[derive(Serialize)]
struct JobDetail<'a> {
    job: &'a JobView,
    history: Vec<RunView>,
    lock: Option<LockView>,
}

pub(crate) async fn job(State(state): State<Shared>, Name(name): Name) -> Answer {
    let snapshot = snapshot(state.admin.as_ref()).await?;
    let job = snapshot.job(&name).ok_or_else(|| snapshot.unknown(&name))?;
    let runs = read::history(state.admin.as_ref(), &job.lock_name, crate::HISTORY).await?;
    Ok(json(
        StatusCode::OK,
        &JobDetail {
            job,
            history: runs.iter().map(RunView::from).collect(),
            lock: snapshot.entry(&job.lock_name).map(LockView::from),
        },
    ))
}

pub(crate) async fn locks(State(state): State<Shared>) -> Answer {
    let entries = state.admin.list().await.map_err(|e| Failure::store(&e))?;
    let views: Vec<LockView> = entries.iter().map(LockView::from).collect();
    Ok(json(StatusCode::OK, &views))
}

/// `POST /api/jobs/{name}/pause`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PauseBody {
    /// How long, as a duration (`"30m"`).
    #[serde(rename = "for")]
    how_long: Option<String>,
    /// Until when.
    until: Option<DateTime<Utc>>,
    reason: Option<String>,
}

#[derive(Serialize)]
struct PauseAnswer {
    job: String,
    lock: String,
    paused: Pause,
    /// Replicas that publish the job but predate pauses: they still run it.
    ignored_by: Vec<String>,
}

/// What a pause body asks for.
pub(crate) fn how_long(
    how_long: Option<&str>,
    until: Option<DateTime<Utc>>,
) -> Result<PauseFor, Failure> {
    match (how_long.map(str::trim).filter(|s| !s.is_empty()), until) {
        (Some(_), Some(_)) => Err(Failure::bad_request(
            "give \"for\" or \"until\", not both; nothing changed",
        )),
        (Some(text), None) => shedlock_duration::parse(text)
            .map(PauseFor::For)
            .map_err(|e| Failure::bad_request(format!("\"for\": {e}; nothing changed"))),
        (None, Some(until)) => Ok(PauseFor::Until(until)),
        (None, None) => Ok(PauseFor::UntilResumed),
    }
}

pub(crate) async fn pause(
    State(state): State<Shared>,
    Extension(actor): Extension<Actor>,
    Name(name): Name,
    Body(request): Body<PauseBody>,
) -> Answer {
    let how_long = how_long(request.how_long.as_deref(), request.until)?;
    let reason = request
        .reason
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty());
    let snapshot = snapshot(state.admin.as_ref()).await?;
    let JobTarget { job, lock, .. } = snapshot.resolve(&name)?;
    let paused = state
        .admin
        .pause(&lock, how_long, reason, actor.as_str())
        .await
        .map_err(|e| Failure::store(&e))?;
    tracing::info!(job = %job, by = actor.as_str(), "paused from the dashboard");
    let ignored_by = snapshot
        .job(&name)
        .map(|j| {
            j.replicas
                .iter()
                .filter(|r| !honours_pause(&r.version))
                .map(|r| r.replica.clone())
                .collect()
        })
        .unwrap_or_default();
    Ok(json(
        StatusCode::OK,
        &PauseAnswer {
            job,
            lock,
            paused,
            ignored_by,
        },
    ))
}

/// `POST /api/jobs/{name}/resume`: no body, or `{}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Empty {}

#[derive(Serialize)]
struct ResumeAnswer {
    job: String,
    lock: String,
    resumed: Pause,
}

pub(crate) async fn resume(
    State(state): State<Shared>,
    Extension(actor): Extension<Actor>,
    Name(name): Name,
    Body(Empty {}): Body<Empty>,
) -> Answer {
    let snapshot = snapshot(state.admin.as_ref()).await?;
    let JobTarget { job, lock, .. } = snapshot.resolve(&name)?;
    let ended = state
        .admin
        .resume(&lock, actor.as_str())
        .await
        .map_err(|e| Failure::store(&e))?;
    let Some(resumed) = ended else {
        return Err(Failure::conflict(format!(
            "refused: {job:?} is not paused; nothing changed"
        )));
    };
    tracing::info!(job = %job, by = actor.as_str(), "resumed from the dashboard");
    Ok(json(StatusCode::OK, &ResumeAnswer { job, lock, resumed }))
}

/// `POST /api/jobs/{name}/trigger`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TriggerBody {
    /// How long it waits for a replica (`"2m"`); one minute when left out.
    expires: Option<String>,
}

#[derive(Serialize)]
struct TriggerAnswerBody {
    job: String,
    lock: String,
    trigger: Trigger,
}

pub(crate) async fn trigger(
    State(state): State<Shared>,
    Extension(actor): Extension<Actor>,
    Name(name): Name,
    Body(request): Body<TriggerBody>,
) -> Answer {
    let expires = match request
        .expires
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        None => DEFAULT_TRIGGER_EXPIRY,
        Some(text) => shedlock_duration::parse(text)
            .map_err(|e| Failure::bad_request(format!("\"expires\": {e}; nothing changed")))?,
    };
    let snapshot = snapshot(state.admin.as_ref()).await?;
    let JobTarget {
        job,
        lock,
        published,
        ..
    } = snapshot.resolve(&name)?;
    if !published {
        return Err(Failure::conflict(format!(
            "refused: no replica runs {job:?} now (none publishes it), so none could take a \
             trigger; nothing changed"
        )));
    }
    let answer = state
        .admin
        .trigger(&lock, actor.as_str(), expires)
        .await
        .map_err(|e| Failure::store(&e))?;
    let refused = |why: String| {
        Err(Failure::conflict(format!(
            "refused: {job:?} {why}; nothing changed"
        )))
    };
    match answer {
        TriggerAnswer::Requested(trigger) => {
            tracing::info!(job = %job, by = actor.as_str(), id = trigger.id, "run now from the dashboard");
            Ok(json(
                StatusCode::ACCEPTED,
                &TriggerAnswerBody { job, lock, trigger },
            ))
        }
        TriggerAnswer::Held(record) => refused(format!("is running: held by {}", record.owner())),
        TriggerAnswer::Paused(pause) => refused(format!("is paused by {}", pause.by)),
        TriggerAnswer::Pending(pending) => refused(format!(
            "has a run asked for already, by {}, waiting for a replica",
            pending.by
        )),
        _ => refused("was refused by the store".to_owned()),
    }
}

/// `POST /api/locks/{name}/unlock`: the acquisition as shown.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UnlockBody {
    owner: String,
    locked_at: DateTime<Utc>,
    #[serde(default)]
    token: Option<i64>,
    /// For an election row: the operator confirms that two leaders may run for a while.
    #[serde(default)]
    election: bool,
}

/// The dashboard's words and status for a guarded unlock's refusal.
fn unlock_refused(name: &str, refusal: &UnlockRefusal) -> Failure {
    match refusal {
        UnlockRefusal::NoSuchLock => Failure::not_found(format!("there is no lock named {name:?}")),
        UnlockRefusal::TokenMissing => Failure::bad_request(
            "this table has fencing tokens: give \"token\" as the lock shows it; nothing changed",
        ),
        UnlockRefusal::TokenNotUsed => Failure::bad_request(
            "this table has no fencing tokens: leave out \"token\"; nothing changed",
        ),
        UnlockRefusal::NotHeld(_) => {
            Failure::conflict(format!("refused: {name:?} is not held; nothing to free"))
        }
        UnlockRefusal::NotAsShown(current) => Failure::conflict(format!(
            "refused: {name:?} changed hands since it was shown (held by {} since {}); nothing \
             changed",
            current.record().owner(),
            crate::html::exact(current.record().locked_at())
        )),
        UnlockRefusal::Election(current) => Failure::conflict(format!(
            "refused: {name:?} is a leader election: freeing it lets another replica lead while \
             {} may still act as leader, so two leaders may run. Confirm with \"election\": true",
            current.record().owner()
        )),
        UnlockRefusal::ChangedMeanwhile => Failure::conflict(format!(
            "refused: {name:?} changed since it was read; nothing changed"
        )),
    }
}

#[derive(Serialize)]
struct UnlockAnswer {
    freed: LockView,
}

pub(crate) async fn unlock(
    State(state): State<Shared>,
    Extension(actor): Extension<Actor>,
    Name(name): Name,
    Body(request): Body<UnlockBody>,
) -> Answer {
    let shown = UnlockRequest {
        name: &name,
        owner: &request.owner,
        locked_at: request.locked_at,
        token: request.token,
        election_confirmed: request.election,
    };
    let current = guarded_unlock(state.admin.as_ref(), &shown, actor.as_str())
        .await
        .map_err(|e| Failure::store(&e))?
        .map_err(|refusal| unlock_refused(&name, &refusal))?;
    tracing::warn!(lock = %name, by = actor.as_str(), owner = %request.owner, "lock freed from the dashboard");
    Ok(json(
        StatusCode::OK,
        &UnlockAnswer {
            freed: LockView::from(&current),
        },
    ))
}
