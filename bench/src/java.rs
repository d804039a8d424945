//! Java ShedLock's SQL statements, read at run time from the interoperability file
//! (`shared/interop/shedlock-sql.txt`, as its JDBC providers render them), for the comparison
//! baseline. They are never copied into this repository.
//!
//! The file has one section per database and time mode (`### POSTGRES_SQL dbTime=true class=…`)
//! with lines `INSERT: …`, `UPDATE: …`, `EXTEND: …`, `UNLOCK: …`. Named parameters (`:name`) are
//! bound positionally in order of appearance; [`Statement`] rewrites them to `$1, $2, …` or `?`.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::path::Path;

/// How a statement's placeholders are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholder {
    /// Postgres: `$1`, `$2`, …
    Dollar,
    /// MySQL, MariaDB, SQLite: `?`.
    Question,
}

/// One statement with positional placeholders, and the name of each parameter in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The SQL, placeholders rewritten.
    pub sql: String,
    /// The parameter bound at each position (a name may repeat).
    pub params: Vec<String>,
}

/// Why the statements could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError(String);

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoadError {}

/// The statements of one section, by key (`INSERT`, `UPDATE`, `EXTEND`, `UNLOCK`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    statements: BTreeMap<String, Statement>,
}

impl Section {
    /// Reads the section whose header starts with `header` (for example
    /// `"POSTGRES_SQL dbTime=true"`) from the file at `path`.
    ///
    /// # Errors
    ///
    /// The file cannot be read, or has no such section.
    pub fn load(path: &Path, header: &str, placeholder: Placeholder) -> Result<Self, LoadError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| LoadError(format!("read {}: {e}", path.display())))?;
        Self::parse(&text, header, placeholder)
            .map_err(|LoadError(e)| LoadError(format!("{}: {e}", path.display())))
    }

    /// [`load`](Self::load) from the file's text.
    ///
    /// ```
    /// use shedlock_bench::java::{Placeholder, Section};
    ///
    /// let text = "### PG dbTime=true class=X\nUNLOCK: UPDATE shedlock SET a = :x WHERE name = :name\n";
    /// let section = Section::parse(text, "PG dbTime=true", Placeholder::Dollar)?;
    /// let unlock = section.get("UNLOCK")?.with_table("bench_t");
    /// assert_eq!(unlock.sql, "UPDATE bench_t SET a = $1 WHERE name = $2");
    /// assert_eq!(unlock.params, ["x", "name"]);
    /// # Ok::<(), shedlock_bench::java::LoadError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// No section starts with `header`, or it holds no statement.
    pub fn parse(text: &str, header: &str, placeholder: Placeholder) -> Result<Self, LoadError> {
        let mut lines = text.lines();
        let wanted = format!("### {header}");
        if !lines.any(|line| line == wanted || line.starts_with(&format!("{wanted} "))) {
            return Err(LoadError(format!("no section `{wanted}`")));
        }
        let mut statements = BTreeMap::new();
        for line in lines.take_while(|line| !line.starts_with("###")) {
            let Some((key, sql)) = line.split_once(": ") else {
                continue;
            };
            if key.chars().all(|c| c.is_ascii_uppercase() || c == '_') && key != "PARAMS" {
                statements.insert(key.to_owned(), Statement::parse(sql.trim(), placeholder));
            }
        }
        if statements.is_empty() {
            return Err(LoadError(format!("section `{wanted}` holds no statement")));
        }
        Ok(Self { statements })
    }

    /// The statement under `key`.
    ///
    /// # Errors
    ///
    /// The section has no such statement.
    pub fn get(&self, key: &str) -> Result<&Statement, LoadError> {
        self.statements
            .get(key)
            .ok_or_else(|| LoadError(format!("no `{key}` statement")))
    }
}

impl Statement {
    /// Rewrites the named parameters of `sql` (`:name`, not `::cast`, not inside quotes) to
    /// positional ones.
    ///
    /// ```
    /// use shedlock_bench::java::{Placeholder, Statement};
    ///
    /// let s = Statement::parse("SELECT :a::text, ':no', :b, :a", Placeholder::Question);
    /// assert_eq!(s.sql, "SELECT ?::text, ':no', ?, ?");
    /// assert_eq!(s.params, ["a", "b", "a"]);
    /// ```
    #[must_use]
    pub fn parse(sql: &str, placeholder: Placeholder) -> Self {
        let chars: Vec<char> = sql.chars().collect();
        let mut out = String::with_capacity(sql.len());
        let mut params = Vec::new();
        let mut quoted = false;
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '\'' {
                quoted = !quoted;
            }
            let starts_param = !quoted
                && c == ':'
                && chars
                    .get(i + 1)
                    .is_some_and(|n| n.is_ascii_alphabetic() || *n == '_')
                && (i == 0 || chars[i - 1] != ':');
            if !starts_param {
                out.push(c);
                i += 1;
                continue;
            }
            let end = chars[i + 1..]
                .iter()
                .position(|n| !(n.is_ascii_alphanumeric() || *n == '_'))
                .map_or(chars.len(), |p| i + 1 + p);
            params.push(chars[i + 1..end].iter().collect());
            match placeholder {
                Placeholder::Dollar => {
                    let _ = write!(out, "${}", params.len());
                }
                Placeholder::Question => out.push('?'),
            }
            i = end;
        }
        Self { sql: out, params }
    }

    /// The statement on another table: every whole-word `shedlock` outside quotes becomes
    /// `table` (which must be a plain identifier).
    ///
    /// ```
    /// use shedlock_bench::java::{Placeholder, Statement};
    ///
    /// let s = Statement::parse("INSERT INTO shedlock(name) SELECT shedlock_x, shedlock.name, 'shedlock'", Placeholder::Dollar);
    /// assert_eq!(s.with_table("t1").sql, "INSERT INTO t1(name) SELECT shedlock_x, t1.name, 'shedlock'");
    /// ```
    #[must_use]
    pub fn with_table(&self, table: &str) -> Self {
        const WORD: &str = "shedlock";
        let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let mut out = String::with_capacity(self.sql.len());
        let mut quoted = false;
        let mut rest = self.sql.as_str();
        let mut previous: Option<char> = None;
        while let Some(c) = rest.chars().next() {
            if c == '\'' {
                quoted = !quoted;
            }
            let whole_word = !quoted
                && rest.starts_with(WORD)
                && !previous.is_some_and(is_ident)
                && !rest[WORD.len()..].chars().next().is_some_and(is_ident);
            if whole_word {
                out.push_str(table);
                rest = &rest[WORD.len()..];
                previous = Some('k');
            } else {
                out.push(c);
                rest = &rest[c.len_utf8()..];
                previous = Some(c);
            }
        }
        Self {
            sql: out,
            params: self.params.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# comment: with a colon\n\
        ### POSTGRES_SQL dbTime=false class=A\n\
        UPDATE: wrong section\n\
        ### POSTGRES_SQL dbTime=true class=B\n\
        INSERT: INSERT INTO shedlock(name, lock_until) VALUES(:name, now() + make_interval(secs => :lockAtMostForInterval)) ON CONFLICT (name) DO UPDATE SET x = 1 WHERE shedlock.name = :name\n\
        UNLOCK: UPDATE shedlock SET lock_until = CASE WHEN locked_at + make_interval(secs => :lockAtLeastForInterval) > now() THEN locked_at + make_interval(secs => :lockAtLeastForInterval) ELSE now() END WHERE name = :name AND locked_by = :lockedBy\n\
        PARAMS: {name=job}\n\
        ### MARIA_DB dbTime=true class=C\n\
        UPDATE: UPDATE shedlock SET lock_until = TIMESTAMPADD(MICROSECOND, :lockAtMostForMicros, UTC_TIMESTAMP(3)) WHERE name = :name\n";

    #[test]
    fn sections_are_found_by_header_and_end_at_the_next() {
        let pg = Section::parse(FILE, "POSTGRES_SQL dbTime=true", Placeholder::Dollar).unwrap();
        assert!(
            pg.get("UPDATE").is_err(),
            "the dbTime=false UPDATE is not this section's"
        );
        assert!(pg.get("PARAMS").is_err());
        let unlock = pg.get("UNLOCK").unwrap();
        assert_eq!(
            unlock.params,
            [
                "lockAtLeastForInterval",
                "lockAtLeastForInterval",
                "name",
                "lockedBy"
            ]
        );
        assert!(
            unlock.sql.ends_with("WHERE name = $3 AND locked_by = $4"),
            "{}",
            unlock.sql
        );
        let insert = pg.get("INSERT").unwrap().with_table("bench_locks");
        assert!(
            insert
                .sql
                .starts_with("INSERT INTO bench_locks(name, lock_until) VALUES($1,")
        );
        assert!(
            insert.sql.ends_with("WHERE bench_locks.name = $3"),
            "{}",
            insert.sql
        );

        let maria = Section::parse(FILE, "MARIA_DB dbTime=true", Placeholder::Question).unwrap();
        let update = maria.get("UPDATE").unwrap();
        assert_eq!(update.params, ["lockAtMostForMicros", "name"]);
        assert!(
            update
                .sql
                .contains("TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3)) WHERE name = ?")
        );
    }

    #[test]
    fn a_missing_section_or_file_is_an_error() {
        let err = Section::parse(FILE, "SQLITE dbTime=true", Placeholder::Question).unwrap_err();
        assert_eq!(err.to_string(), "no section `### SQLITE dbTime=true`");
        let err =
            Section::load(Path::new("/nonexistent/x.txt"), "A", Placeholder::Dollar).unwrap_err();
        assert!(
            err.to_string().starts_with("read /nonexistent/x.txt"),
            "{err}"
        );
    }

    #[test]
    fn quotes_protect_colons_and_table_names() {
        let s = Statement::parse("SET time_zone = '+00:00', x = :x_1", Placeholder::Question);
        assert_eq!(s.sql, "SET time_zone = '+00:00', x = ?");
        assert_eq!(s.params, ["x_1"]);
        let t = Statement::parse(
            "UPDATE shedlock SET a = 'shedlock' WHERE myshedlock = 1",
            Placeholder::Dollar,
        )
        .with_table("t");
        assert_eq!(t.sql, "UPDATE t SET a = 'shedlock' WHERE myshedlock = 1");
    }
}
