//! Owner ids, who holds a lock: [`default_owner_id`] and the [`OWNER_ID_ENV`] override.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// The environment variable that overrides the default owner id of every executor and latch in the
/// process. An id set in code wins over it.
pub const OWNER_ID_ENV: &str = "SHEDLOCK_OWNER_ID";

/// The longest owner id: Java ShedLock's `locked_by VARCHAR(255)`.
pub const MAX_OWNER_ID_LEN: usize = 255;

/// The owner id an executor or latch uses when none is set in code: `$SHEDLOCK_OWNER_ID` if set,
/// else `hostname:pid:random`.
///
/// It is unique per process, so two processes on one host never release each other's locks. It is
/// readable in the `locked_by` column. It is **one per process**: the random part is drawn once. So
/// every executor and latch of a process that take the default show the same `locked_by`. Each
/// acquisition is still told apart by its fencing token or `locked_at`.
///
/// # Errors
///
/// [`Error::is_invalid_config`] when `SHEDLOCK_OWNER_ID` is set but empty, too long or not Unicode.
///
/// ```
/// let id = shedlock_core::owner::default_owner_id()?;
/// if std::env::var_os("SHEDLOCK_OWNER_ID").is_none() {
///     assert_eq!(id.split(':').count(), 3, "{id}");
/// }
/// assert_eq!(shedlock_core::owner::default_owner_id()?, id, "one per process");
/// # Ok::<(), shedlock_core::Error>(())
/// ```
pub fn default_owner_id() -> Result<String> {
    match std::env::var(OWNER_ID_ENV) {
        Ok(id) => {
            validate_owner_id(&id).map_err(|e| {
                Error::invalid_config(format!("{OWNER_ID_ENV} is not a valid owner id: {e}"))
            })?;
            Ok(id)
        }
        Err(std::env::VarError::NotPresent) => {
            static GENERATED: OnceLock<String> = OnceLock::new();
            Ok(GENERATED.get_or_init(generated_owner_id).clone())
        }
        Err(std::env::VarError::NotUnicode(_)) => Err(Error::invalid_config(format!(
            "{OWNER_ID_ENV} is not valid Unicode"
        ))),
    }
}

fn generated_owner_id() -> String {
    let host = gethostname::gethostname();
    let host = host.to_string_lossy();
    let host = if host.is_empty() { "localhost" } else { &host };
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    let random = hasher.finish() & 0xff_ffff;
    let id = format!("{host}:{}:{random:06x}", std::process::id());
    // A very long host name must not push the id past the column.
    id.chars()
        .rev()
        .take(MAX_OWNER_ID_LEN)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect()
}

/// Checks an owner id: not empty, at most [`MAX_OWNER_ID_LEN`] characters, no NUL.
pub(crate) fn validate_owner_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid_config("the owner id is empty"));
    }
    let len = id.chars().count();
    if len > MAX_OWNER_ID_LEN {
        return Err(Error::invalid_config(format!(
            "the owner id is {len} characters long; at most {MAX_OWNER_ID_LEN} fit in locked_by"
        )));
    }
    if id.contains('\0') {
        return Err(Error::invalid_config(
            "the owner id contains a NUL character",
        ));
    }
    Ok(())
}

/// A random number for jitter, from the standard library's per-process random keys.
pub(crate) fn random_u64() -> u64 {
    RandomState::new().build_hasher().finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_differ_and_fit() {
        let a = generated_owner_id();
        let b = generated_owner_id();
        assert_ne!(a, b, "the random part must differ");
        assert!(a.contains(&format!(":{}:", std::process::id())), "{a}");
        assert!(validate_owner_id(&a).is_ok());
    }

    #[test]
    fn validation() {
        assert!(validate_owner_id("").is_err());
        assert!(validate_owner_id(&"x".repeat(256)).is_err());
        assert!(validate_owner_id("a\0").is_err());
        assert!(validate_owner_id("pod-7").is_ok());
    }
}
