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
    /// `` `name` ``: MySQL and MariaDB, whatever the `ANSI_QUOTES` mode.
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

/// Checks one identifier. `what` names it in the error ("the table name").
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

/// The names one database keeps for itself.
///
/// They are plain identifiers that pass [`check_ident`]. No table of that database can use them:
/// `CREATE TABLE`, or any use, would fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reserved {
    /// Postgres: the system column names `tableoid`, `xmin`, `cmin`, `xmax`, `cmax` and `ctid`.
    ///
    /// They are reserved exactly so: the names are quoted, so `XMIN` is an ordinary column. `oid`
    /// is an ordinary name since Postgres 12.
    #[cfg(feature = "postgres")]
    Postgres,
    /// MySQL and MariaDB: the hidden columns of `InnoDB` tables, `DB_ROW_ID`, `DB_TRX_ID` and
    /// `DB_ROLL_PTR`, in any case.
    #[cfg(feature = "mysql")]
    MySql,
    /// SQLite: table names starting with `sqlite_`, in any case.
    #[cfg(feature = "sqlite")]
    Sqlite,
}

#[cfg(feature = "postgres")]
const PG_SYSTEM_COLUMNS: [&str; 6] = ["tableoid", "xmin", "cmin", "xmax", "cmax", "ctid"];

#[cfg(feature = "mysql")]
const INNODB_COLUMNS: [&str; 3] = ["DB_ROW_ID", "DB_TRX_ID", "DB_ROLL_PTR"];

impl Reserved {
    /// Checks a table name against the database's reserved names. The name is already a valid
    /// [`TableName`].
    #[cfg_attr(
        not(feature = "sqlite"),
        allow(
            unused_variables,
            clippy::unnecessary_wraps,
            reason = "only SQLite reserves table names"
        )
    )]
    pub(crate) fn check_table(self, table: &TableName) -> Result<()> {
        match self {
            #[cfg(feature = "sqlite")]
            Self::Sqlite
                if table
                    .table
                    .get(..7)
                    .is_some_and(|p| p.eq_ignore_ascii_case("sqlite_")) =>
            {
                Err(Error::invalid_config(format!(
                    "the table name {:?} starts with \"sqlite_\", a prefix SQLite reserves for its \
                     own tables (in any case): choose a name without it, such as the default \
                     \"shedlock\"",
                    table.to_string()
                )))
            }
            _ => Ok(()),
        }
    }

    /// Checks one column name, which is already a plain identifier. `what` names it in the error,
    /// as in `the locked_at column name`.
    #[cfg_attr(
        not(any(feature = "postgres", feature = "mysql")),
        allow(
            unused_variables,
            clippy::unnecessary_wraps,
            reason = "only Postgres and MySQL reserve column names"
        )
    )]
    pub(crate) fn check_column(self, what: &str, column: &str) -> Result<()> {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres if PG_SYSTEM_COLUMNS.contains(&column) => {
                Err(Error::invalid_config(format!(
                    "{what} {column:?} is a Postgres system column name ({}), which no table can \
                     have as a column: choose another name",
                    PG_SYSTEM_COLUMNS.join(", ")
                )))
            }
            #[cfg(feature = "mysql")]
            Self::MySql
                if INNODB_COLUMNS
                    .iter()
                    .any(|r| r.eq_ignore_ascii_case(column)) =>
            {
                Err(Error::invalid_config(format!(
                    "{what} {column:?} is reserved by InnoDB ({}, in any case), which no table \
                     can have as a column: choose another name",
                    INNODB_COLUMNS.join(", ")
                )))
            }
            _ => Ok(()),
        }
    }
}

/// A table name, optionally schema-qualified (`schema.table`). For SQLite the schema is the name of
/// an attached database such as `main`.
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
        let invalid = |_| {
            Error::invalid_config(format!(
                "the table name {name:?} is not `table` or `schema.table` made of plain \
                 identifiers (1 to {MAX_IDENT_LEN} ASCII letters, digits or underscores, not \
                 starting with a digit)"
            ))
        };
        if let Some(schema) = schema {
            check_ident("the schema of the table name", schema).map_err(invalid)?;
        }
        check_ident("the table name", table).map_err(invalid)?;
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

    fn table(name: &str) -> TableName {
        TableName::parse(name).expect(name)
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn postgres_system_column_names_are_reserved_exactly() {
        for bad in ["tableoid", "xmin", "cmin", "xmax", "cmax", "ctid"] {
            let err = Reserved::Postgres
                .check_column("the name column name", bad)
                .expect_err(bad);
            assert!(err.is_invalid_config(), "{bad:?}: {err}");
            let msg = err.to_string();
            assert!(msg.contains("the name column name"), "{msg}");
            assert!(
                msg.contains("system column") && msg.contains("choose another name"),
                "{msg}"
            );
        }
        // Quoted names are case-sensitive, and `oid` is ordinary since Postgres 12.
        for ok in ["XMIN", "Xmin", "ctid_", "oid", "name"] {
            Reserved::Postgres
                .check_column("the name column name", ok)
                .expect(ok);
        }
        for ok in ["xmin", "sqlite_x", "ops.ctid"] {
            Reserved::Postgres.check_table(&table(ok)).expect(ok);
        }
    }

    #[cfg(feature = "mysql")]
    #[test]
    fn innodb_column_names_are_reserved_in_any_case() {
        for bad in ["DB_ROW_ID", "db_row_id", "Db_Trx_Id", "DB_ROLL_PTR"] {
            let err = Reserved::MySql
                .check_column("the locked_by column name", bad)
                .expect_err(bad);
            assert!(err.is_invalid_config(), "{bad:?}: {err}");
            let msg = err.to_string();
            assert!(
                msg.contains("InnoDB") && msg.contains("choose another name"),
                "{msg}"
            );
        }
        for ok in ["DB_MIX_ID", "db_row_id_", "xmin", "row_id"] {
            Reserved::MySql
                .check_column("the locked_by column name", ok)
                .expect(ok);
        }
        Reserved::MySql
            .check_table(&table("sqlite_x"))
            .expect("ordinary on MySQL");
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn sqlite_table_prefix_is_reserved_in_any_case() {
        for bad in [
            "sqlite_",
            "sqlite_locks",
            "SQLITE_x",
            "Sqlite_x",
            "main.sqlite_x",
        ] {
            let err = Reserved::Sqlite.check_table(&table(bad)).expect_err(bad);
            assert!(err.is_invalid_config(), "{bad:?}: {err}");
            let msg = err.to_string();
            assert!(
                msg.contains("\"sqlite_\"") && msg.contains("choose a name"),
                "{msg}"
            );
        }
        for ok in [
            "sqlite",
            "sqlitex",
            "my_sqlite_x",
            "sqlite_x.locks",
            "shedlock",
        ] {
            Reserved::Sqlite.check_table(&table(ok)).expect(ok);
        }
        for ok in ["xmin", "db_row_id", "sqlite_x"] {
            Reserved::Sqlite
                .check_column("the name column name", ok)
                .expect(ok);
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
