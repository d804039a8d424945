//! Table and column names: validated as plain identifiers, then quoted for one database.

use std::fmt;

use shedlock_core::{Error, Result};

/// The longest identifier accepted: Postgres keeps 63 bytes of a name (MySQL 64).
pub(crate) const MAX_IDENT_LEN: usize = 63;

/// How a database quotes identifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    not(all(feature = "mysql", any(feature = "postgres", feature = "sqlite"))),
    allow(
        dead_code,
        reason = "each style is used by the providers of some features"
    )
)]
pub(crate) enum Quote {
    /// `"name"`: Postgres and SQLite (standard SQL).
    Double,
    /// `` `name` ``: MySQL and MariaDB (whatever the `ANSI_QUOTES` mode).
    Backtick,
}

impl Quote {
    /// `ident` in quotes. Only called with identifiers that passed [`check_ident`], which contain
    /// no quote character, so no escaping is needed.
    pub(crate) fn quote(self, ident: &str) -> String {
        debug_assert!(is_plain_ident(ident), "unchecked identifier {ident:?}");
        match self {
            Self::Double => format!("\"{ident}\""),
            Self::Backtick => format!("`{ident}`"),
        }
    }
}

/// Whether `s` is `[A-Za-z_][A-Za-z0-9_]*` of at most [`MAX_IDENT_LEN`] characters.
fn is_plain_ident(s: &str) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    s.len() <= MAX_IDENT_LEN
        && (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Checks one identifier; `what` names it in the error ("the table name").
pub(crate) fn check_ident(what: &str, ident: &str) -> Result<()> {
    if is_plain_ident(ident) {
        Ok(())
    } else {
        Err(Error::invalid_config(format!(
            "{what} {ident:?} is not a plain identifier: use 1 to {MAX_IDENT_LEN} ASCII letters, \
             digits or underscores, not starting with a digit"
        )))
    }
}

/// A table name, optionally schema-qualified (`schema.table`; for SQLite the schema is the name
/// of an attached database such as `main`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableName {
    pub(crate) schema: Option<String>,
    pub(crate) table: String,
}

impl TableName {
    /// Parses `table` or `schema.table`, each part a plain identifier.
    pub(crate) fn parse(name: &str) -> Result<Self> {
        let (schema, table) = match name.split_once('.') {
            Some((schema, table)) => (Some(schema), table),
            None => (None, name),
        };
        if let Some(schema) = schema {
            check_ident("the schema of the table name", schema).map_err(|_| {
                Error::invalid_config(format!(
                    "the table name {name:?} is not `table` or `schema.table` made of plain \
                     identifiers (1 to {MAX_IDENT_LEN} ASCII letters, digits or underscores, not \
                     starting with a digit)"
                ))
            })?;
        }
        check_ident("the table name", table).map_err(|_| {
            Error::invalid_config(format!(
                "the table name {name:?} is not `table` or `schema.table` made of plain \
                 identifiers (1 to {MAX_IDENT_LEN} ASCII letters, digits or underscores, not \
                 starting with a digit)"
            ))
        })?;
        Ok(Self {
            schema: schema.map(str::to_owned),
            table: table.to_owned(),
        })
    }

    /// The quoted, possibly qualified name to use in SQL.
    pub(crate) fn quoted(&self, quote: Quote) -> String {
        match &self.schema {
            Some(schema) => format!("{}.{}", quote.quote(schema), quote.quote(&self.table)),
            None => quote.quote(&self.table),
        }
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.schema {
            Some(schema) => write!(f, "{schema}.{}", self.table),
            None => f.write_str(&self.table),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_identifiers_pass() {
        for ok in ["shedlock", "_x", "Locks_2", &"a".repeat(MAX_IDENT_LEN)] {
            check_ident("the column name", ok).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
    }

    #[test]
    fn everything_else_is_rejected() {
        let long = "a".repeat(MAX_IDENT_LEN + 1);
        for bad in [
            "",
            "1abc",
            "a-b",
            "a b",
            "a\"b",
            "a`b",
            "a;drop table x",
            "ä",
            "a.b",
            &long,
        ] {
            let err = check_ident("the column name", bad).expect_err(bad);
            assert!(err.is_invalid_config(), "{bad:?}: {err}");
            assert!(err.to_string().contains("the column name"), "{err}");
        }
    }

    #[test]
    fn table_names_may_have_a_schema() {
        let t = TableName::parse("locks.shedlock").unwrap();
        assert_eq!(t.schema.as_deref(), Some("locks"));
        assert_eq!(t.quoted(Quote::Double), "\"locks\".\"shedlock\"");
        assert_eq!(t.quoted(Quote::Backtick), "`locks`.`shedlock`");
        assert_eq!(t.to_string(), "locks.shedlock");
        let t = TableName::parse("shedlock").unwrap();
        assert_eq!(t.quoted(Quote::Double), "\"shedlock\"");
        for bad in ["", ".x", "x.", "a.b.c", "a-b.c", "a.\"c\"", "a..b"] {
            let err = TableName::parse(bad).expect_err(bad);
            assert!(err.is_invalid_config(), "{bad:?}: {err}");
        }
    }
}
