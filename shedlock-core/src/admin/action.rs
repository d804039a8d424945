//! [`AdminAction`]: who last steered a job, how and when.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What an operator did to a job's lock row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ActionKind {
    /// [`LockAdmin::pause`](crate::admin::LockAdmin::pause).
    Paused,
    /// [`LockAdmin::resume`](crate::admin::LockAdmin::resume).
    Resumed,
    /// [`LockAdmin::unlock`](crate::admin::LockAdmin::unlock) freed the lock.
    Unlocked,
    /// [`LockAdmin::trigger`](crate::admin::LockAdmin::trigger) asked for a run now.
    Triggered,
}

impl ActionKind {
    /// The word a store keeps and the CLI prints: `paused`, `resumed`, `unlocked` or `triggered`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Paused => "paused",
            Self::Resumed => "resumed",
            Self::Unlocked => "unlocked",
            Self::Triggered => "triggered",
        }
    }

    /// The kind a store kept as [`as_str`](Self::as_str) wrote it. `None` for a word this version
    /// does not know, written by a newer one.
    #[must_use]
    pub fn parse(word: &str) -> Option<Self> {
        [Self::Paused, Self::Resumed, Self::Unlocked, Self::Triggered]
            .into_iter()
            .find(|kind| kind.as_str() == word)
    }
}

impl fmt::Display for ActionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The last action an operator took on a job: what, by whom, when (the store's clock). A store
/// keeps the last one per lock row, beside the row's job state.
///
/// ```
/// use chrono::Utc;
/// use shedlock_core::admin::{ActionKind, AdminAction};
///
/// let action = AdminAction::new(ActionKind::Paused, "ann@ops", Utc::now());
/// assert!(action.to_string().starts_with("paused by ann@ops at "));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminAction {
    /// What was done.
    pub kind: ActionKind,
    /// Who did it.
    pub by: String,
    /// When, by the store's clock.
    pub at: DateTime<Utc>,
}

impl AdminAction {
    /// `kind`, done by `by` at `at`.
    #[must_use]
    pub fn new(kind: ActionKind, by: impl Into<String>, at: DateTime<Utc>) -> Self {
        Self {
            kind,
            by: by.into(),
            at,
        }
    }
}

impl fmt::Display for AdminAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} by {} at {}", self.kind, self.by, self.at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_read_back_as_written() {
        for kind in [
            ActionKind::Paused,
            ActionKind::Resumed,
            ActionKind::Unlocked,
        ] {
            assert_eq!(ActionKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(ActionKind::parse("triggered-by-v9"), None);
    }
}
