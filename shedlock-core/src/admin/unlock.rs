//! The guarded unlock of an operator tool: free exactly the acquisition the operator was shown, or
//! say why nothing changed. The CLI's `unlock` and the dashboard's unlock both use it, and word the
//! refusals for their own users.

use chrono::{DateTime, Utc};

use super::{LockAdmin, LockEntry};
use crate::error::Result;
use crate::provider::LockRecord;

/// The acquisition an operator asks to free, as a listing showed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnlockRequest<'a> {
    /// The lock's name.
    pub name: &'a str,
    /// Its holder, as shown.
    pub owner: &'a str,
    /// When the holder took it, as shown (exact, to the microsecond).
    pub locked_at: DateTime<Utc>,
    /// Its fencing token, as shown: required where the store issues tokens, refused where it
    /// does not.
    pub token: Option<i64>,
    /// For a leader-election row, the operator confirms that another replica may lead while the
    /// freed leader still acts as one.
    pub election_confirmed: bool,
}

/// Why a [`guarded_unlock`] changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnlockRefusal {
    /// No row of that name.
    NoSuchLock,
    /// The store issues fencing tokens and the request gave none.
    TokenMissing,
    /// The request gave a token and the store issues none.
    TokenNotUsed,
    /// The lock is not held: nothing to free. The entry as read.
    NotHeld(LockEntry),
    /// The lock is held by another acquisition than the one shown. The entry as read.
    NotAsShown(LockEntry),
    /// The row is a leader election and the request did not confirm it. The entry as read.
    Election(LockEntry),
    /// The row was as shown when read, and the store's conditional unlock then found it changed
    /// (taken again, freed or deleted meanwhile).
    ChangedMeanwhile,
}

/// Frees the acquisition `request` names, and answers the entry it freed, as it was; or the
/// refusal, having changed nothing. The read only explains a refusal: the decision is the store's
/// one conditional [`unlock`](LockAdmin::unlock), which records `actor` where the store keeps
/// actions.
///
/// ```
/// use std::time::Duration;
///
/// use shedlock_core::admin::{UnlockRefusal, UnlockRequest, guarded_unlock};
/// use shedlock_core::{InMemoryLockProvider, LockProvider};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// let store = InMemoryLockProvider::new();
/// let held = store
///     .acquire("report", Duration::from_mins(1), "host-a")
///     .await?
///     .expect("free");
/// let mut request = UnlockRequest {
///     name: "report",
///     owner: "host-b",
///     locked_at: held.locked_at(),
///     token: held.fencing_token(),
///     election_confirmed: false,
/// };
/// let refused = guarded_unlock(&store, &request, "ops").await?;
/// assert!(matches!(refused, Err(UnlockRefusal::NotAsShown(_))));
/// request.owner = "host-a";
/// let freed = guarded_unlock(&store, &request, "ops").await?.expect("as shown");
/// assert_eq!(freed.record().owner(), "host-a");
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// The store failed, does not support it, or `actor` is invalid.
pub async fn guarded_unlock<A: LockAdmin + ?Sized>(
    admin: &A,
    request: &UnlockRequest<'_>,
    actor: &str,
) -> Result<std::result::Result<LockEntry, UnlockRefusal>> {
    let Some(current) = admin.entry(request.name).await? else {
        return Ok(Err(UnlockRefusal::NoSuchLock));
    };
    let record = current.record();
    match (record.fencing_token().is_some(), request.token.is_some()) {
        (true, false) => return Ok(Err(UnlockRefusal::TokenMissing)),
        (false, true) => return Ok(Err(UnlockRefusal::TokenNotUsed)),
        _ => {}
    }
    if !current.is_held() {
        return Ok(Err(UnlockRefusal::NotHeld(current)));
    }
    let as_shown = record.owner() == request.owner
        && record.locked_at() == request.locked_at
        && record.fencing_token() == request.token;
    if !as_shown {
        return Ok(Err(UnlockRefusal::NotAsShown(current)));
    }
    if current.is_election() && !request.election_confirmed {
        return Ok(Err(UnlockRefusal::Election(current)));
    }
    let expected = LockRecord::new(
        request.name,
        request.owner,
        request.locked_at,
        record.lock_until(),
    )
    .with_fencing_token(request.token);
    if admin.unlock(&expected, actor).await? {
        Ok(Ok(current))
    } else {
        Ok(Err(UnlockRefusal::ChangedMeanwhile))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{InMemoryLockProvider, LockProvider};

    /// Each refusal the in-memory store can produce, then the unlock as shown; none of the
    /// refusals freed the lock.
    #[tokio::test(start_paused = true)]
    async fn refuses_all_but_the_acquisition_as_shown() {
        let store = std::sync::Arc::new(InMemoryLockProvider::new());
        let held = store
            .acquire("report", Duration::from_mins(1), "host-a")
            .await
            .unwrap()
            .unwrap();
        let shown = UnlockRequest {
            name: "report",
            owner: "host-a",
            locked_at: held.locked_at(),
            token: held.fencing_token(),
            election_confirmed: false,
        };
        let refused = |request: UnlockRequest<'static>| {
            let store = store.clone();
            async move { guarded_unlock(&store, &request, "ops").await.unwrap() }
        };
        assert_eq!(
            refused(UnlockRequest {
                name: "nope",
                ..shown
            })
            .await,
            Err(UnlockRefusal::NoSuchLock)
        );
        assert_eq!(
            refused(UnlockRequest {
                token: None,
                ..shown
            })
            .await,
            Err(UnlockRefusal::TokenMissing)
        );
        let earlier = shown.locked_at - chrono::Duration::microseconds(1);
        assert!(matches!(
            refused(UnlockRequest {
                locked_at: earlier,
                ..shown
            })
            .await,
            Err(UnlockRefusal::NotAsShown(_))
        ));
        assert!(
            store.holder("report").await.unwrap().is_some(),
            "still held"
        );
        let freed = refused(shown).await.expect("as shown");
        assert_eq!(freed.record().owner(), "host-a");
        assert!(matches!(
            refused(shown).await,
            Err(UnlockRefusal::NotHeld(_))
        ));
    }
}
