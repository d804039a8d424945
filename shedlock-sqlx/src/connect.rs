//! What a URL cannot carry, given to a provider's builder.
//!
//! These are TLS files, a CA to trust and a client certificate. They are also credentials, a user
//! and a password read from a secret. Each dialect applies them to the parsed connect options
//! ([`Dialect::connect_settings`](crate::dialect::Dialect)).

use std::fmt;
use std::path::{Path, PathBuf};

use shedlock_core::{Error, Result};

/// The builder's TLS files and credentials. They are empty by default.
#[derive(Clone, Default)]
pub(crate) struct ConnectSettings {
    pub(crate) ca: Option<PathBuf>,
    pub(crate) client: Option<(PathBuf, PathBuf)>,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
}

impl fmt::Debug for ConnectSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectSettings")
            .field("ca", &self.ca)
            .field("client", &self.client)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

impl ConnectSettings {
    pub(crate) fn is_empty(&self) -> bool {
        self.ca.is_none()
            && self.client.is_none()
            && self.username.is_none()
            && self.password.is_none()
    }

    /// Checks that each TLS file can be read, so that a wrong path is named now.
    ///
    /// sqlx reads them when it connects and reports only the operating system's error.
    pub(crate) fn check_files(&self) -> Result<()> {
        let files = self
            .ca
            .iter()
            .map(|ca| (ca.as_path(), "CA file (ca_file)"))
            .chain(self.client.iter().flat_map(|(cert, key)| {
                [
                    (cert.as_path(), "client certificate file"),
                    (key.as_path(), "client key file"),
                ]
            }));
        for (path, what) in files {
            readable(path, what)?;
        }
        Ok(())
    }
}

/// Whether the file at `path` can be read. The error names it as `what`.
pub(crate) fn readable(path: &Path, what: &str) -> Result<()> {
    std::fs::File::open(path).map(drop).map_err(|e| {
        Error::invalid_config(format!("cannot read the {what} {}: {e}", path.display()))
    })
}
