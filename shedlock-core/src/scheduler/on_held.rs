//! [`OnHeld`]: what a job does with a fire met while its lock is held.

/// What a job does with a fire met while its lock is held. The holder may be a previous run, of
/// this replica or another, that is still going. It may also be a plain-lock user holding the job's
/// lock. Set it with [`Job::on_held`](crate::Job::on_held). In a configuration file, it is `"skip"`
/// or `"run_late"` (see [`JobSpec`](crate::scheduler::JobSpec)).
///
/// Either way a fire runs at most once. It never runs before its instant `F` by the store's clock,
/// and never after its window `[F, next)` ends. A late run is a claim like any other, answered by
/// the store in one atomic step (see docs/guarantees.md, "Scheduled jobs").
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
    /// Count the fire `held` and skip it: "skip if still running". The default.
    #[default]
    Skip,
    /// Claim the fire again when the lock frees inside its window.
    ///
    /// A replica whose run ends inside a later fire's window claims that fire right after its
    /// release. That is the latest fire whose window is open. A replica whose claim met the lock
    /// held claims once more at the holder's `lock_until`, if that falls before the window's end.
    /// Fires whose windows ended while the lock was held are counted `held`, never queued.
    ///
    /// This works with fire claims only. A store without them uses plain locks and `at_least`.
    /// There a late acquire is exactly the duplicate `at_least` exists to prevent. So there the job
    /// skips as with [`Skip`](Self::Skip), with a warning at start.
    RunLate,
}
