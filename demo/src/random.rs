//! Cheap randomness (jitter, work times, ids) from the standard library's random hash keys, so
//! the harness needs no random-number crate.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher as _, Hasher as _};

/// A random `u64` (each call uses fresh keys).
pub(crate) fn random_u64() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(0x5eed);
    hasher.finish()
}

/// A random number in `0..bound` (`0` when `bound` is zero).
pub(crate) fn random_below(bound: u64) -> u64 {
    if bound == 0 { 0 } else { random_u64() % bound }
}
