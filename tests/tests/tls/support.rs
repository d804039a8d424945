//! What the stores' TLS tests share.

use shedlock_core::Error;

/// The error with its causes on one line, each cause its parent did not already say (as the
/// CLI prints it).
pub(crate) fn full(error: &Error) -> String {
    let mut text = error.to_string();
    let mut last = text.clone();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let said = cause.to_string();
        if !last.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        last = said;
        source = cause.source();
    }
    text
}
