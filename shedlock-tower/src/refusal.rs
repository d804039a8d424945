//! What the layer answers instead of running the inner service: [`Refusals`] and [`Busy`].

use shedlock_core::Error;
use shedlock_core::provider::LockRecord;

/// The answers of a [`LockService`](crate::LockService) when the inner service does not run.
///
/// Each method returns the inner service's own `Result`. Return `Ok(response)` to answer the
/// client, as HTTP services do, whose error type is `Infallible`. Return `Err` only where the inner
/// service's error type can carry the failure and the caller expects it there.
///
/// With the `http` feature, [`HttpRefusals`] implements it for
/// `http::Response`. For other protocols, implement it:
///
/// ```
/// use shedlock_core::Error;
/// use shedlock_tower::{Busy, Refusals};
///
/// /// A job queue's answers: a code and a message.
/// #[derive(Clone)]
/// struct QueueAnswers;
///
/// impl Refusals<(u16, String), std::convert::Infallible> for QueueAnswers {
///     fn held(&self, busy: &Busy) -> Result<(u16, String), std::convert::Infallible> {
///         Ok((1, format!("{} runs elsewhere", busy.name())))
///     }
///     fn unrecognised(&self) -> Result<(u16, String), std::convert::Infallible> {
///         Ok((4, "no such job".to_owned()))
///     }
///     fn invalid_name(&self, _name: &str, error: &Error) -> Result<(u16, String), std::convert::Infallible> {
///         Ok((2, error.to_string()))
///     }
///     fn failed(&self, _name: &str, error: &Error) -> Result<(u16, String), std::convert::Infallible> {
///         Ok((3, error.to_string()))
///     }
/// }
/// ```
#[cfg_attr(feature = "http", doc = "[`HttpRefusals`]: crate::HttpRefusals")]
#[cfg_attr(
    not(feature = "http"),
    doc = "[`HttpRefusals`]: https://docs.rs/shedlock-tower/latest/shedlock_tower/struct.HttpRefusals.html"
)]
pub trait Refusals<Response, E> {
    /// Another holder has the lock: the request was skipped, not queued.
    ///
    /// # Errors
    ///
    /// Whatever the implementation maps the skip to.
    fn held(&self, busy: &Busy) -> Result<Response, E>;

    /// The closure returned `None`: the request is not one of the layer's locks, such as a path
    /// outside an allow-list. The store was not asked and the inner service did not run.
    ///
    /// # Errors
    ///
    /// Whatever the implementation maps the unrecognised request to.
    fn unrecognised(&self) -> Result<Response, E>;

    /// The name the request yielded is not a valid lock name: empty, longer than the layer's
    /// `max_name_len` or the store's limit, padded with white space, or with a control character
    /// or a bidirectional override. `error` says which without repeating such characters. The
    /// store was not asked.
    ///
    /// # Errors
    ///
    /// Whatever the implementation maps the invalid name to.
    fn invalid_name(&self, name: &str, error: &Error) -> Result<Response, E>;

    /// The lock could not be taken: the store failed, timed out or refused the lock, or the
    /// executor is shutting down ([`Error::is_shutdown`]). The inner service did not run.
    ///
    /// # Errors
    ///
    /// Whatever the implementation maps the failure to.
    fn failed(&self, name: &str, error: &Error) -> Result<Response, E>;

    /// Whether [`held`](Self::held) wants the holder's record in [`Busy::holder`]. It costs one
    /// more store call per skipped request, a read. Defaults to `false`.
    fn wants_holder(&self) -> bool {
        false
    }
}

/// A skipped request's lock: its name and, if the refusal asked for it, who holds it.
#[derive(Debug, Clone)]
pub struct Busy {
    name: String,
    holder: Option<LockRecord>,
}

impl Busy {
    pub(crate) fn new(name: String, holder: Option<LockRecord>) -> Self {
        Self { name, holder }
    }

    /// The lock's name, as the request yielded it.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The holder's record, read after the skip, when [`Refusals::wants_holder`] asks for it.
    /// `None` when not asked, when the store cannot tell or failed to answer within a second, or
    /// when the lock was free again by the time of the read.
    #[must_use]
    pub fn holder(&self) -> Option<&LockRecord> {
        self.holder.as_ref()
    }
}
