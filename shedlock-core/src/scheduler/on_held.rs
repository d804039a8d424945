//! [`OnHeld`]: what a job does with a fire met while its lock is held.

/// What a job does with a fire met while its lock is held: a previous run (of this replica or
/// another) still going, or a plain-lock user holding the job's lock. Set with
/// [`Job::on_held`](crate::Job::on_held); in a configuration file, `"skip"` or `"run_late"`
/// ([`JobSpec`](crate::scheduler::JobSpec)).
///
/// Either way a fire runs at most once, never before its instant `F` by the store's clock and
/// never after its window `[F, next)` ends: a late run is a claim like any other, answered by
/// the store in one atomic step (docs/guarantees.md, "Scheduled jobs").
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{Job, Schedule, scheduler::OnHeld};
///
/// let report = Job::new("report", Schedule::every(Duration::from_secs(60))?, |_| async {})
///     .at_most(Duration::from_secs(300))
///     .on_held(OnHeld::RunLate);
/// # let _ = report;
/// # Ok::<(), shedlock_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OnHeld {
    /// Count the fire `held` and skip it ("skip if still running"). The default.
    #[default]
    Skip,
    /// Claim the fire again when the lock frees inside its window: the replica whose run ends
    /// inside a later fire's window claims that fire (the latest one whose window is open) right
    /// after its release, and a replica whose claim met the lock held claims once more at the
    /// holder's `lock_until` if that falls before the window's end. Fires whose windows ended
    /// while the lock was held are counted `held`, never queued.
    ///
    /// Fire claims only: on a store without them (plain locks and `at_least`) a late acquire is
    /// exactly the duplicate `at_least` exists to prevent, so there the job skips as with
    /// [`Skip`](Self::Skip), with a warning at start.
    RunLate,
}
