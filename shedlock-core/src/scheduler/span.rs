//! The span of one fire of a scheduled job, `shedlock_job`, and what is recorded on it. Its fields
//! carry OpenTelemetry's attribute names for scheduled work, so a tracing-to-OpenTelemetry bridge
//! exports them as they are. The README's "OpenTelemetry" section lists them.

use chrono::{DateTime, SecondsFormat, Utc};
use tracing::Span;
use tracing::field::Empty;

use super::RunOutcome;
use crate::schedule::Schedule;

/// How a fire ended on this replica: run here, or why not. The span's `shedlock.claim`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FireEnd {
    /// Claimed, or locked on a store without fire claims, and run here.
    Ran,
    /// Another replica claimed it, or holds the plain lock.
    ClaimedElsewhere,
    /// The previous run still held the lock.
    Held,
    /// Its window passed before a claim reached the store.
    Missed,
    /// An operator paused the job.
    Paused,
    /// The job runs on the leader only, and this replica does not lead.
    NotLeader,
    /// Shutdown began before the fire was decided.
    Shutdown,
    /// The store failed: the plain lock could not be taken, or the claims of
    /// `LockingTaskExecutor::execute_fire` failed until the window ended. A scheduler's claims
    /// retry in their window instead, and end missed if the store fails throughout.
    StoreError,
}

impl FireEnd {
    /// The name recorded as `shedlock.claim`.
    fn as_str(self) -> &'static str {
        match self {
            Self::Ran => "claimed",
            Self::ClaimedElsewhere => "claimed_elsewhere",
            Self::Held => "held",
            Self::Missed => "missed",
            Self::Paused => "paused",
            Self::NotLeader => "not_leader",
            Self::Shutdown => "shutdown",
            Self::StoreError => "store_error",
        }
    }
}

/// The span of `job`'s fire at `fire`, opened before the claim and closed after the run.
///
/// `job` and `fire` are its names from before OpenTelemetry. `faas.trigger` is `timer`, `faas.time`
/// the fire instant in RFC 3339, UTC. A cron schedule's expression, as written, is `faas.cron`. The
/// schedule in full, with a cron schedule's time zone, is `shedlock.schedule`: OpenTelemetry has no
/// attribute for a fixed rate. The token, the claim and the outcome are recorded later, by
/// [`record_token`], [`record_claim`] and [`record_outcome`].
pub(crate) fn run_span(
    job: &str,
    schedule: Option<&Schedule>,
    fire: DateTime<Utc>,
    trigger: Option<i64>,
) -> Span {
    let cron = schedule
        .and_then(Schedule::cron_parts)
        .map(|(cron, _)| cron);
    let schedule = schedule.map(tracing::field::display);
    tracing::info_span!(
        // The span's target from before this module, so filters on it keep working.
        target: "shedlock_core::scheduler::job_loop",
        "shedlock_job",
        job,
        fire = %fire,
        // A manual run (`shedlock trigger`) is OpenTelemetry's "other" trigger.
        "faas.trigger" = if trigger.is_some() { "other" } else { "timer" },
        "shedlock.trigger_id" = trigger,
        "faas.time" = fire.to_rfc3339_opts(SecondsFormat::AutoSi, true),
        "faas.cron" = cron,
        "shedlock.schedule" = schedule,
        "shedlock.fencing_token" = Empty,
        "shedlock.claim" = Empty,
        "shedlock.outcome" = Empty,
        "otel.status_code" = Empty,
        "otel.status_description" = Empty,
    )
}

/// Records the fencing token of the lock the run holds, if the store issues tokens.
pub(crate) fn record_token(span: &Span, token: Option<i64>) {
    if let Some(token) = token {
        span.record("shedlock.fencing_token", token);
    }
}

/// Records how the fire ended on this replica.
pub(crate) fn record_claim(span: &Span, end: FireEnd) {
    span.record("shedlock.claim", end.as_str());
}

/// Records a run's outcome as [`RunOutcome::kind`] names it. A failed or panicked run also sets the
/// span's OpenTelemetry status to an error, with the error's text. A cancelled run is no error.
pub(crate) fn record_outcome(span: &Span, outcome: &RunOutcome) {
    span.record("shedlock.outcome", outcome.kind());
    let description = match outcome {
        RunOutcome::Failed(error) => error.as_str(),
        RunOutcome::Panicked => "the run panicked",
        RunOutcome::Succeeded | RunOutcome::Cancelled => return,
    };
    // The code first: tracing-opentelemetry reads a description as an error status with that
    // text, and until its span has started, a later bare "ERROR" would replace it with none.
    span.record("otel.status_code", "ERROR");
    span.record("otel.status_description", description);
}
