//! Where a lock and published definitions live in etcd's key space (see
//! [the key layout](crate#how-the-contract-maps-onto-etcd)). A job's state is under `/last-run`,
//! `/failures` and `/last-success`, an operator's pause and last action under `/pause` and
//! `/action` (see [Pauses](crate#pauses)), its last trigger under `/trigger`, and a pending trigger
//! also under `{prefix}!trigger/` (see [Run now](crate#run-now)). The name encoding is one-to-one, because `%` itself is
//! encoded, so two names never share a key.

use shedlock_core::{Error, Result};

/// The longest prefix accepted, in bytes.
pub(crate) const MAX_PREFIX_LEN: usize = 256;

/// The keys of one lock (see [the key layout](crate#how-the-contract-maps-onto-etcd)).
pub(crate) struct LockKeys {
    /// The record, without a lease: owner, `locked_at`, the acquisition's first lease. Written by
    /// acquire only, so its `mod_revision` is the acquisition's fencing token.
    pub(crate) rec: Vec<u8>,
    /// Present while the lock is held, attached to the lease that ends the hold.
    pub(crate) hold: Vec<u8>,
    /// The latest fire claimed for the job of this name, without a lease. Only a fire claim writes
    /// it, so no release, expiry or unlock removes it.
    pub(crate) fire: Vec<u8>,
    /// The job's last recorded run, without a lease: written by `release_run` only.
    pub(crate) run: Vec<u8>,
    /// The job's consecutive failures, as the key's version: the puts since it was last deleted.
    pub(crate) failures: Vec<u8>,
    /// The end of the job's last successful run.
    pub(crate) success: Vec<u8>,
    /// An operator's pause of the job's fires, without a lease: it outlives every acquisition.
    pub(crate) pause: Vec<u8>,
    /// The last pause, resume, unlock or trigger: what, by whom, when. Without a lease.
    pub(crate) action: Vec<u8>,
    /// The lock's last trigger ("run now"), pending, taken or expired. Without a lease.
    pub(crate) trigger: Vec<u8>,
    /// The pending trigger's copy under the common triggers prefix, `{prefix}!trigger/{name}`, on
    /// a lease that ends at its expiry. A claim deletes it.
    pub(crate) pending: Vec<u8>,
}

pub(crate) const REC: &[u8] = b"/rec";
pub(crate) const HOLD: &[u8] = b"/hold";
pub(crate) const FIRE: &[u8] = b"/fire";
pub(crate) const RUN: &[u8] = b"/last-run";
pub(crate) const FAILURES: &[u8] = b"/failures";
pub(crate) const SUCCESS: &[u8] = b"/last-success";
pub(crate) const PAUSE: &[u8] = b"/pause";
pub(crate) const ACTION: &[u8] = b"/action";
pub(crate) const TRIGGER: &[u8] = b"/trigger";

/// What follows the prefix in every definition key. `!` is outside the encoded names' alphabet.
const DEFINITIONS: &str = "!def/";

/// What follows the prefix in every pending trigger's key. `!` is outside the encoded names'
/// alphabet, so no lock's key starts with it.
const TRIGGERS: &str = "!trigger/";

pub(crate) fn lock_keys(prefix: &str, name: &str) -> LockKeys {
    let base = format!("{prefix}{}", encode(name)).into_bytes();
    LockKeys {
        rec: [base.as_slice(), REC].concat(),
        hold: [base.as_slice(), HOLD].concat(),
        fire: [base.as_slice(), FIRE].concat(),
        run: [base.as_slice(), RUN].concat(),
        failures: [base.as_slice(), FAILURES].concat(),
        success: [base.as_slice(), SUCCESS].concat(),
        pause: [base.as_slice(), PAUSE].concat(),
        action: [base.as_slice(), ACTION].concat(),
        trigger: [base.as_slice(), TRIGGER].concat(),
        pending: format!("{prefix}{TRIGGERS}{}", encode(name)).into_bytes(),
    }
}

/// The start of every pending trigger's key under `prefix`.
pub(crate) fn triggers_prefix(prefix: &str) -> Vec<u8> {
    format!("{prefix}{TRIGGERS}").into_bytes()
}

/// The lock name of a pending trigger's key, `None` for any other key.
pub(crate) fn parse_pending_key(prefix: &str, key: &[u8]) -> Option<String> {
    let encoded = key
        .strip_prefix(prefix.as_bytes())?
        .strip_prefix(TRIGGERS.as_bytes())?;
    decode(encoded)
}

/// The start of every definition key under `prefix`.
pub(crate) fn definitions_prefix(prefix: &str) -> Vec<u8> {
    format!("{prefix}{DEFINITIONS}").into_bytes()
}

/// The start of the definition keys of `job`, those of every replica.
pub(crate) fn job_definitions_prefix(prefix: &str, job: &str) -> Vec<u8> {
    format!("{prefix}{DEFINITIONS}{}/", encode(job)).into_bytes()
}

/// The key of `replica`'s definition of `job`.
pub(crate) fn definition_key(prefix: &str, job: &str, replica: &str) -> Vec<u8> {
    format!("{prefix}{DEFINITIONS}{}/{}", encode(job), encode(replica)).into_bytes()
}

/// The end of the range of every key that starts with `prefix`, etcd's "prefix end": the last byte
/// below 0xff incremented, and the rest cut off.
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0] // every key
}

/// Splits a key under `prefix` into the lock name and which of its keys it is: the record, the
/// hold, the fire, a job state key, the pause, the last action or the last trigger. A definition,
/// a pending trigger's copy, or a key this provider did not write gives `None`.
pub(crate) fn parse_key<'k>(prefix: &str, key: &'k [u8]) -> Option<(String, &'k [u8])> {
    let rest = key.strip_prefix(prefix.as_bytes())?;
    let slash = rest.iter().position(|b| *b == b'/')?;
    let (encoded, which) = rest.split_at(slash);
    if ![
        REC, HOLD, FIRE, RUN, FAILURES, SUCCESS, PAUSE, ACTION, TRIGGER,
    ]
    .contains(&which)
    {
        return None;
    }
    Some((decode(encoded)?, which))
}

/// Checks a key prefix: 1 to 256 bytes of printable ASCII, ending in `/`.
pub(crate) fn validate_prefix(prefix: &str) -> Result<()> {
    let ok = !prefix.is_empty()
        && prefix.len() <= MAX_PREFIX_LEN
        && prefix.bytes().all(|b| b.is_ascii_graphic())
        && prefix.ends_with('/');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid_config(format!(
            "the etcd key prefix {prefix:?} must be 1 to {MAX_PREFIX_LEN} printable ASCII \
             characters without spaces and end with '/' (for example \"shedlock/\"), so that it \
             cannot overlap other keys"
        )))
    }
}

fn is_plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

pub(crate) fn encode(name: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if is_plain(b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn decode(encoded: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(encoded.len());
    let mut bytes = encoded.iter();
    while let Some(&b) = bytes.next() {
        if b == b'%' {
            let hex = [*bytes.next()?, *bytes.next()?];
            let hex = std::str::from_utf8(&hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
        } else if is_plain(b) {
            out.push(b);
        } else {
            return None;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_names_encode_one_to_one_and_never_hold_a_slash() {
        let names = [
            "report",
            "a/b",
            "a%2Fb",
            "../../etc",
            "a/rec",
            "tenant:42 nightly",
            "ünïcødé-名前",
            "%",
            "\u{1}\u{7f}",
        ];
        let mut seen = std::collections::HashSet::new();
        for name in names {
            let encoded = encode(name);
            assert!(!encoded.contains('/'), "{name:?} -> {encoded}");
            assert!(seen.insert(encoded.clone()), "{name:?} collides");
            assert_eq!(decode(encoded.as_bytes()).as_deref(), Some(name));
            let keys = lock_keys("p/", name);
            assert_eq!(
                parse_key("p/", &keys.rec),
                Some((name.to_owned(), REC)),
                "{name:?}"
            );
            assert_eq!(parse_key("p/", &keys.hold), Some((name.to_owned(), HOLD)));
            assert_eq!(parse_key("p/", &keys.run), Some((name.to_owned(), RUN)));
            assert_eq!(parse_key("p/", &keys.pause), Some((name.to_owned(), PAUSE)));
            assert_eq!(
                parse_key("p/", &keys.action),
                Some((name.to_owned(), ACTION))
            );
            assert_eq!(
                parse_key("p/", &keys.trigger),
                Some((name.to_owned(), TRIGGER))
            );
            // A pending trigger's copy is never one of a lock's keys, and names its lock.
            assert_eq!(parse_key("p/", &keys.pending), None, "{name:?}");
            assert_eq!(
                parse_pending_key("p/", &keys.pending).as_deref(),
                Some(name)
            );
            assert!(keys.pending.starts_with(&triggers_prefix("p/")));
            assert_eq!(parse_pending_key("p/", &keys.rec), None);
            // A definition of a job of the same name is never one of the lock's keys.
            let def = definition_key("p/", name, name);
            assert_eq!(parse_key("p/", &def), None, "{name:?}");
            assert!(def.starts_with(&job_definitions_prefix("p/", name)));
            assert!(!def.starts_with(&keys.rec[..keys.rec.len() - REC.len()]));
        }
        assert_eq!(encode("a/b c"), "a%2Fb%20c");
    }

    #[test]
    fn foreign_keys_are_not_ours() {
        assert_eq!(parse_key("p/", b"q/a/rec"), None);
        assert_eq!(parse_key("p/", b"p/a/other"), None);
        assert_eq!(parse_key("p/", b"p/a"), None);
        assert_eq!(parse_key("p/", b"p/a b/rec"), None);
        assert_eq!(parse_key("p/", b"p/%zz/rec"), None);
        assert_eq!(parse_key("p/", b"p/!def/a/rec"), None);
        assert_eq!(parse_key("p/", b"p/!trigger/a/rec"), None);
        assert_eq!(parse_pending_key("p/", b"p/!trigger/a/b"), None);
        assert_eq!(parse_pending_key("p/", b"q/!trigger/a"), None);
    }

    #[test]
    fn prefix_end_covers_the_prefix() {
        assert_eq!(prefix_end(b"shedlock/"), b"shedlock0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
    }

    #[test]
    fn prefixes_are_checked() {
        assert!(validate_prefix("shedlock/").is_ok());
        assert!(validate_prefix("apps/billing/locks/").is_ok());
        for bad in ["", "shedlock", "a b/", "ü/", &"x/".repeat(200)] {
            let e = validate_prefix(bad).unwrap_err();
            assert!(
                e.is_invalid_config() && e.to_string().contains("end with '/'"),
                "{bad:?}"
            );
        }
    }
}
