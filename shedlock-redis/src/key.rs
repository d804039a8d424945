//! Lock keys: the configured prefix followed by the lock name's UTF-8 bytes, and the `SCAN`
//! pattern that finds them.

/// The key of lock `name` under `prefix`. Keys are binary-safe, so any name
/// [`validate_name`](shedlock_core::provider::validate_name) accepts (unicode, new lines, glob
/// characters) is its own key, byte for byte.
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

/// The `SCAN MATCH` pattern of every key under `prefix`: the prefix with Redis's glob
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

    #[test]
    fn scan_patterns_escape_glob_characters() {
        assert_eq!(scan_pattern("shedlock:"), b"shedlock:*");
        assert_eq!(scan_pattern(r"a*b?[c]\d"), br"a\*b\?\[c\]\\d*");
    }
}
