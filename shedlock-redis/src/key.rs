//! Keys: a lock's key, its history key, the definitions key, the triggers index, and the `SCAN`
//! pattern that finds lock keys.
//!
//! Lock names never contain NUL, as [`validate_name`](shedlock_core::provider::validate_name)
//! refuses it, and neither do key prefixes, as the builder refuses it. The history, definitions and
//! triggers keys all do, so none of them is ever a lock's key, whatever the prefixes of the providers
//! sharing the database. Listing keeps only valid names, so it never takes one for a lock.

/// The key of lock `name` under `prefix`. Keys are binary-safe, so any name that
/// [`validate_name`](shedlock_core::provider::validate_name) accepts, with unicode, new lines or
/// glob characters, is its own key, byte for byte.
pub(crate) fn lock_key(prefix: &str, name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(prefix.len() + name.len());
    key.extend_from_slice(prefix.as_bytes());
    key.extend_from_slice(name.as_bytes());
    key
}

/// The lock name a listed key stands for, if it is `prefix` followed by valid UTF-8.
pub(crate) fn name_of<'k>(prefix: &str, key: &'k [u8]) -> Option<&'k str> {
    key.strip_prefix(prefix.as_bytes())
        .and_then(|rest| std::str::from_utf8(rest).ok())
        .filter(|name| !name.is_empty())
}

/// The suffix of a history key after its lock key.
const HISTORY_SUFFIX: &[u8] = b"\0history";

/// The key of the run history of the lock whose key is `lock_key`, a list in the lock key's Redis
/// Cluster hash slot, so that one script can write both:
///
/// - A lock key with a hash tag (`{…}`, as in a prefix `{jobs}:`): the lock key followed by
///   `\0history`, which keeps the tag.
/// - A lock key without braces, as most are: `<lock key>\0history{<lock key>}`.
/// - Any other lock key, with braces that form no tag: `<lock key>\0history{<t>}`, `t` being 2 or 3
///   bytes without braces found so that the key hashes to the lock key's slot.
pub(crate) fn history_key(lock_key: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 * lock_key.len() + HISTORY_SUFFIX.len() + 2);
    key.extend_from_slice(lock_key);
    key.extend_from_slice(HISTORY_SUFFIX);
    if hash_tag(lock_key).is_some() {
        return key;
    }
    key.push(b'{');
    if !lock_key.iter().any(|&b| b == b'{' || b == b'}') {
        key.extend_from_slice(lock_key);
        key.push(b'}');
        return key;
    }
    let slot = key_slot(lock_key);
    // The lock key has braces but no tag. The hashed part of `key ++ t ++ "}"` is then
    // `before ++ t ++ after`: from its first `{` on when that `{` is not followed by a `}` at
    // once (the `}` closing `t` ends the tag), else (an empty `{}` first) the whole key.
    let first = key.iter().position(|&b| b == b'{').unwrap_or(key.len() - 1);
    let (before, after): (&[u8], &[u8]) = if key.get(first + 1) == Some(&b'}') {
        (&key, b"}")
    } else {
        (&key[first + 1..], b"")
    };
    let start = crc16(0, before);
    let no_brace = |b: &u8| *b != b'{' && *b != b'}';
    let found = (0_u32..1 << 16)
        .map(|n| n.to_be_bytes()[2..].to_vec())
        .chain((0_u32..1 << 24).map(|n| n.to_be_bytes()[1..].to_vec()))
        .find(|t| t.iter().all(no_brace) && crc16(crc16(start, t), after) & 0x3fff == slot);
    // Two bytes reach every CRC value exactly once, three bytes each one 256 times: some `t`
    // without braces is always found.
    key.extend_from_slice(&found.unwrap_or_default());
    key.push(b'}');
    key
}

/// The key of the published definitions under `prefix`: one hash for every provider of that prefix.
pub(crate) fn definitions_key(prefix: &str) -> Vec<u8> {
    let mut key = prefix.as_bytes().to_vec();
    key.extend_from_slice(b"\0definitions");
    key
}

/// The key of the triggers index under `prefix`, a sorted set of the pending triggers of every
/// provider of that prefix (see the crate README, "Run now"). It is also the name of the pub/sub
/// channel that announces new triggers.
pub(crate) fn triggers_key(prefix: &str) -> Vec<u8> {
    let mut key = prefix.as_bytes().to_vec();
    key.extend_from_slice(b"\0triggers");
    key
}

/// The hash tag of `key` as Redis Cluster reads it: the bytes between its first `{` and the first
/// `}` after it, if there are any.
fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let rest = &key[open + 1..];
    let close = rest.iter().position(|&b| b == b'}')?;
    (close > 0).then(|| &rest[..close])
}

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag, or of the whole key
/// without one, modulo 16384.
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    crc16(0, hash_tag(key).unwrap_or(key)) & 0x3fff
}

/// CRC16-CCITT of `bytes`, continuing from `crc`. It is the XMODEM variant: polynomial 0x1021, no
/// reflection.
fn crc16(crc: u16, bytes: &[u8]) -> u16 {
    bytes.iter().fold(crc, |crc, &byte| {
        let mut crc = crc ^ (u16::from(byte) << 8);
        for _ in 0..8 {
            crc = if crc & 0x8000 == 0 {
                crc << 1
            } else {
                (crc << 1) ^ 0x1021
            };
        }
        crc
    })
}

/// The `SCAN MATCH` pattern of every key under `prefix`. It is the prefix with Redis's glob
/// characters (`*`, `?`, `[`, `]`, `\`) escaped, then `*`.
pub(crate) fn scan_pattern(prefix: &str) -> Vec<u8> {
    let mut pattern = Vec::with_capacity(prefix.len() + 8);
    for &byte in prefix.as_bytes() {
        if matches!(byte, b'*' | b'?' | b'[' | b']' | b'\\') {
            pattern.push(b'\\');
        }
        pattern.push(byte);
    }
    pattern.push(b'*');
    pattern
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_prefix_then_name_bytes() {
        assert_eq!(lock_key("shedlock:", "report"), b"shedlock:report");
        assert_eq!(lock_key("p:", "a\nb ✓"), "p:a\nb ✓".as_bytes());
        assert_eq!(name_of("p:", "p:a\nb ✓".as_bytes()), Some("a\nb ✓"));
        assert_eq!(name_of("p:", b"p:"), None, "no name");
        assert_eq!(name_of("p:", b"q:x"), None, "another prefix");
        assert_eq!(name_of("p:", b"p:\xff"), None, "not UTF-8");
    }

    /// Values from the Redis Cluster specification (`CLUSTER KEYSLOT`).
    #[test]
    fn slots_follow_the_cluster_specification() {
        assert_eq!(crc16(0, b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b"foo{hash_tag}"), 2515);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(0, b"foo{}{bar}") & 0x3fff);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"no close {"), crc16(0, b"no close {") & 0x3fff);
    }

    #[test]
    fn history_keys_share_the_lock_keys_slot_and_are_never_lock_keys() {
        let prefixes = ["shedlock:", "{jobs}:", "a{", "}x{", "{}", "p{}q{r}:", "x}"];
        let names = [
            "report", "{", "}", "{}", "}{", "a{b}c", "{{}}", "x}y", "{x", "ü{✓}", "a\nb", "}}}{{{",
        ];
        for prefix in prefixes {
            for name in names {
                let lock = lock_key(prefix, name);
                let history = history_key(&lock);
                assert_eq!(key_slot(&history), key_slot(&lock), "{prefix:?} {name:?}");
                assert!(history.starts_with(&lock));
                assert!(history.contains(&0), "a NUL: no lock key is ever this key");
                assert!(
                    name_of(prefix, &history)
                        .is_none_or(|n| shedlock_core::provider::validate_name(n, 1024).is_err()),
                    "never listed as a lock"
                );
                assert_eq!(history, history_key(&lock), "the same key every time");
            }
        }
        assert_eq!(
            history_key(b"shedlock:report"),
            b"shedlock:report\0history{shedlock:report}"
        );
        assert_eq!(history_key(b"{jobs}:report"), b"{jobs}:report\0history");
        let triggers = triggers_key("shedlock:");
        assert_eq!(triggers, b"shedlock:\0triggers");
        assert!(
            name_of("shedlock:", &triggers)
                .is_none_or(|n| { shedlock_core::provider::validate_name(n, 1024).is_err() })
        );
        let defs = definitions_key("shedlock:");
        assert_eq!(defs, b"shedlock:\0definitions");
        assert!(
            name_of("shedlock:", &defs)
                .is_some_and(|n| { shedlock_core::provider::validate_name(n, 1024).is_err() })
        );
    }

    #[test]
    fn scan_patterns_escape_glob_characters() {
        assert_eq!(scan_pattern("shedlock:"), b"shedlock:*");
        assert_eq!(scan_pattern(r"a*b?[c]\d"), br"a\*b\?\[c\]\\d*");
    }
}
