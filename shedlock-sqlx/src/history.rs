//! History: written by the history module.

use shedlock_core::jobs::RunReport;
use shedlock_core::provider::LockRecord;

use crate::dialect::Dialect;
use crate::provider::Provider;

/// Records `run` of `record` in the history table, after a `release_run` that recorded it.
/// History: written by the history module.
#[allow(
    clippy::unused_async,
    reason = "a stub; the history module writes the real one"
)]
pub(crate) async fn after_release_run<D: Dialect>(
    _provider: &Provider<D>,
    _record: &LockRecord,
    _run: &RunReport,
) {
}
