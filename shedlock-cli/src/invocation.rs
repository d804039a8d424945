//! The commands the tool prints for the user to run, such as `show`'s unlock line or "run
//! `shedlock show NAME` again", each running as printed on the same store as the command that
//! printed it.
//!
//! A printed command carries the options that chose the store: `--table` and the column options
//! that differ from their defaults, `--key-prefix`, the TLS files, `--user` and `--password-file`.
//! The database URL is printed, without its password, only when it was given with
//! `--database-url`. A URL from `DATABASE_URL` is left to the same variable. See the README's
//! "Operating locks".

use crate::args::{DEFAULT_COLUMNS, DEFAULT_TABLE, StoreArgs};

/// The `shedlock` options that aim a printed command at the store in use, as shell words.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Invocation {
    options: Vec<(&'static str, String)>,
}

/// The column options, in the order of [`DEFAULT_COLUMNS`].
const COLUMN_OPTIONS: [&str; 5] = [
    "--name-column",
    "--lock-until-column",
    "--locked-at-column",
    "--locked-by-column",
    "--fencing-token-column",
];

impl Invocation {
    /// The options of `args` that a printed command needs to reach the same store.
    pub(crate) fn new(args: &StoreArgs) -> Self {
        let mut options = Vec::new();
        let mut option = |name: &'static str, value: &str| options.push((name, value.to_owned()));
        if args.url_on_command_line
            && let Some(url) = &args.database_url
        {
            option("--database-url", &without_password(url));
        }
        if args.table != DEFAULT_TABLE {
            option("--table", &args.table);
        }
        let columns = [
            &args.name_column,
            &args.lock_until_column,
            &args.locked_at_column,
            &args.locked_by_column,
            &args.fencing_token_column,
        ];
        let defaults = COLUMN_OPTIONS.into_iter().zip(DEFAULT_COLUMNS);
        for ((name, default), value) in defaults.zip(columns) {
            if value != default {
                option(name, value);
            }
        }
        if let Some(prefix) = &args.key_prefix {
            option("--key-prefix", prefix);
        }
        let files = [
            ("--cacert", &args.cacert),
            ("--cert", &args.cert),
            ("--key", &args.key),
            ("--password-file", &args.password_file),
        ];
        for (name, path) in files {
            if let Some(path) = path {
                option(name, &path.to_string_lossy());
            }
        }
        if let Some(user) = &args.user {
            option("--user", user);
        }
        Self { options }
    }

    /// `shedlock SUBCOMMAND [NAME] OPTIONS… FLAGS…` as one shell line, every word quoted where the
    /// shell would change it. A value starting with `-` is attached with `=`, and a name starting
    /// with `-` put last, after `--`, so none is taken for an option. `flags` are options with
    /// their value, or switches (`None`).
    pub(crate) fn command(
        &self,
        subcommand: &str,
        name: Option<&str>,
        flags: &[(&str, Option<&str>)],
    ) -> String {
        let mut words = vec!["shedlock".to_owned(), subcommand.to_owned()];
        let dashed = name.filter(|n| n.starts_with('-'));
        if let Some(name) = name.filter(|_| dashed.is_none()) {
            words.push(shell_word(name));
        }
        let options = self.options.iter().map(|(o, v)| (*o, Some(v.as_str())));
        for (option, value) in options.chain(flags.iter().copied()) {
            match value {
                None => words.push(option.to_owned()),
                Some(value) if value.starts_with('-') => {
                    words.push(format!("{option}={}", shell_word(value)));
                }
                Some(value) => {
                    words.push(option.to_owned());
                    words.push(shell_word(value));
                }
            }
        }
        if let Some(name) = dashed {
            words.push("--".to_owned());
            words.push(shell_word(name));
        }
        words.join(" ")
    }
}

/// A shell word. It is as is when no shell would change it, and in single quotes otherwise.
pub(crate) fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && !s.starts_with(['#', '~', '='])
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/@#%+=,".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `url` without the password of its user part and without the query parameters `password` and
/// `sslpassword`: `postgres://app:secret@db/app` becomes `postgres://app@db/app`.
pub(crate) fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, after) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((user_info, hosts)) => {
            let user = user_info
                .split_once(':')
                .map_or(user_info, |(user, _)| user);
            format!("{user}@{hosts}")
        }
        None => authority.to_owned(),
    };
    let (path, query) = after.split_once('?').unwrap_or((after, ""));
    let (query, fragment) = query
        .split_once('#')
        .map_or((query, None), |(q, f)| (q, Some(f)));
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let key = pair.split_once('=').map_or(*pair, |(key, _)| key);
            !pair.is_empty()
                && !key.eq_ignore_ascii_case("password")
                && !key.eq_ignore_ascii_case("sslpassword")
        })
        .collect();
    let mut shown = format!("{scheme}://{authority}{path}");
    if !kept.is_empty() {
        shown.push('?');
        shown.push_str(&kept.join("&"));
    }
    if let Some(fragment) = fragment {
        shown.push('#');
        shown.push_str(fragment);
    }
    shown
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::args::Cli;

    fn invocation(args: &[&str], url_on_command_line: bool) -> Invocation {
        let mut cli = Cli::try_parse_from(std::iter::once("shedlock").chain(args.iter().copied()))
            .expect("valid arguments");
        cli.store.url_on_command_line = url_on_command_line;
        Invocation::new(&cli.store)
    }

    #[test]
    fn words_are_quoted_where_the_shell_would_change_them() {
        for (word, quoted) in [
            ("report", "report"),
            ("pod-2:1:cc#election", "pod-2:1:cc#election"),
            ("a b", "'a b'"),
            ("it's", r"'it'\''s'"),
            ("#x", "'#x'"),
            ("~x", "'~x'"),
            ("$HOME", "'$HOME'"),
            ("a;b", "'a;b'"),
            ("", "''"),
        ] {
            assert_eq!(shell_word(word), quoted, "{word:?}");
        }
    }

    #[test]
    fn passwords_are_left_out_of_urls() {
        for (url, shown) in [
            (
                "postgres://app:s3cr%40t@db:5432/app",
                "postgres://app@db:5432/app",
            ),
            ("postgres://app@db/app", "postgres://app@db/app"),
            ("redis://:pw@cache:6379/0", "redis://@cache:6379/0"),
            ("etcd://u:p@h1:2379,h2:2379", "etcd://u@h1:2379,h2:2379"),
            (
                "mysql://root@127.0.0.1/test?ssl-mode=DISABLED",
                "mysql://root@127.0.0.1/test?ssl-mode=DISABLED",
            ),
            (
                "postgres://app@db/app?password=s3cret&sslmode=require",
                "postgres://app@db/app?sslmode=require",
            ),
            (
                "postgres://app@db/app?sslmode=verify-full&sslpassword=k3y&PASSWORD=x",
                "postgres://app@db/app?sslmode=verify-full",
            ),
            ("postgres://db/app?password=s3cret", "postgres://db/app"),
            ("sqlite://locks.db", "sqlite://locks.db"),
            ("sqlite::memory:", "sqlite::memory:"),
        ] {
            assert_eq!(without_password(url), shown, "{url}");
        }
    }

    #[test]
    fn a_printed_command_carries_the_options_that_chose_the_store() {
        let given = invocation(
            &[
                "-d",
                "postgres://app:secret@db/app",
                "list",
                "-t",
                "ops.locks",
                "--name-column",
                "lock name",
                "--locked-at-column",
                "locked_at",
                "--password-file",
                "/run/secrets/db",
            ],
            true,
        );
        assert_eq!(
            given.command("show", Some("it's"), &[]),
            "shedlock show 'it'\\''s' --database-url postgres://app@db/app --table ops.locks \
             --name-column 'lock name' --password-file /run/secrets/db"
        );
        // A URL from DATABASE_URL is left to the variable; defaults are left out.
        let from_env = invocation(&["-d", "postgres://app@db/app", "list"], false);
        assert_eq!(from_env.command("list", None, &[]), "shedlock list");
        let redis = invocation(&["list", "--key-prefix", "app:locks:"], false);
        assert_eq!(
            redis.command(
                "unlock",
                Some("a b"),
                &[("--owner", Some("-pod")), ("--election", None)]
            ),
            "shedlock unlock 'a b' --key-prefix app:locks: --owner=-pod --election"
        );
        assert_eq!(
            redis.command("show", Some("-x"), &[]),
            "shedlock show --key-prefix app:locks: -- -x"
        );
    }
}
