//! `shedlock serve`: the dashboard of `shedlock-web` over the store the global options open, on
//! one address, until Ctrl-C or SIGTERM.
//!
//! The token files are read before the store is opened, so a mistake in them fails at once. A
//! message names the file and the line, never a token. What the dashboard allows and refuses is
//! in the repository's docs/dashboard.md.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use shedlock_web::{Actor, Dashboard, check_token};
use tokio::net::TcpListener;

use crate::args::ServeArgs;
use crate::command::Output;
use crate::failure::Failure;
use crate::store::Store;

/// Who may act: a label, recorded as the actor of what its token does, and the token.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ActionToken {
    pub(crate) label: String,
    pub(crate) token: String,
    /// The line of the token file, for messages.
    pub(crate) line: usize,
}

/// The token files of `args`, read: the action tokens (none without `--token-file`) and the read
/// token.
pub(crate) struct Tokens {
    actions: Vec<ActionToken>,
    read: Option<String>,
}

impl Tokens {
    /// Reads `--token-file` and `--read-token-file`.
    pub(crate) fn read(args: &ServeArgs) -> Result<Self, Failure> {
        let actions = match &args.token_file {
            Some(path) => action_tokens(path, &read_file(path, "--token-file")?)?,
            None => Vec::new(),
        };
        let read = match &args.read_token_file {
            Some(path) => Some(read_token(path, &read_file(path, "--read-token-file")?)?),
            None => None,
        };
        if let (Some(read), Some(path)) = (&read, &args.read_token_file)
            && actions.iter().any(|t| &t.token == read)
        {
            return Err(Failure::usage(format!(
                "the read token file {} holds an action token; give reading a token of its own",
                path.display()
            )));
        }
        Ok(Self { actions, read })
    }
}

fn read_file(path: &Path, option: &str) -> Result<String, Failure> {
    std::fs::read_to_string(path).map_err(|e| {
        Failure::usage(format!(
            "cannot read the token file {} ({option}): {e}",
            path.display()
        ))
    })
}

/// The lines of a token file that are neither blank nor comments, numbered from 1, trimmed. A
/// byte order mark, as some editors write, is not part of the first line.
fn token_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.strip_prefix('\u{feff}')
        .unwrap_or(text)
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
}

/// The `LABEL:TOKEN` lines of the `--token-file` at `path`, whose text is `text`.
pub(crate) fn action_tokens(path: &Path, text: &str) -> Result<Vec<ActionToken>, Failure> {
    let at = |line: usize| format!("the token file {}, line {line}", path.display());
    let mut tokens: Vec<ActionToken> = Vec::new();
    for (line, content) in token_lines(text) {
        let Some((label, token)) = content.split_once(':') else {
            return Err(Failure::usage(format!(
                "{} has no `:`; write each token as LABEL:TOKEN, the label being who acts with it",
                at(line)
            )));
        };
        let (label, token) = (label.trim(), token.trim());
        if label.is_empty() {
            return Err(Failure::usage(format!(
                "{} has no label before the `:`; write LABEL:TOKEN, the label being who acts \
                 with it",
                at(line)
            )));
        }
        if token.is_empty() {
            return Err(Failure::usage(format!(
                "{} has no token after the `:`; write LABEL:TOKEN",
                at(line)
            )));
        }
        if let Some(first) = tokens.iter().find(|t| t.label == label) {
            return Err(Failure::usage(format!(
                "{} repeats the label {label:?} of line {}; give each person one line",
                at(line),
                first.line
            )));
        }
        if let Some(first) = tokens.iter().find(|t| t.token == token) {
            return Err(Failure::usage(format!(
                "{} repeats the token of line {} ({:?}); give each label a token of its own, so \
                 the actor recorded is the one who acted",
                at(line),
                first.line,
                first.label
            )));
        }
        // What the dashboard would refuse, refused here, before any connection.
        Actor::new(label).map_err(|e| Failure::usage(format!("{}: {e}", at(line))))?;
        check_token(token).map_err(|e| Failure::usage(format!("{}: {e}", at(line))))?;
        tokens.push(ActionToken {
            label: label.to_owned(),
            token: token.to_owned(),
            line,
        });
    }
    if tokens.is_empty() {
        return Err(Failure::usage(format!(
            "the token file {} has no token; write one LABEL:TOKEN line per person allowed to \
             act, or leave out --token-file for a read-only dashboard",
            path.display()
        )));
    }
    Ok(tokens)
}

/// The one token of the `--read-token-file` at `path`, whose text is `text`.
pub(crate) fn read_token(path: &Path, text: &str) -> Result<String, Failure> {
    let mut lines = token_lines(text);
    let Some((_, token)) = lines.next() else {
        return Err(Failure::usage(format!(
            "the read token file {} has no token; write the token on a line of its own",
            path.display()
        )));
    };
    if let Some((line, _)) = lines.next() {
        return Err(Failure::usage(format!(
            "the read token file {} has a second token on line {line}; it holds one token, \
             shared by everyone who may read",
            path.display()
        )));
    }
    check_token(token)
        .map_err(|e| Failure::usage(format!("the read token file {}: {e}", path.display())))?;
    Ok(token.to_owned())
}

/// The dashboard over `store` with `tokens`, loopback-only when `address` is a loopback address.
fn dashboard(
    store: &Store,
    args: &ServeArgs,
    tokens: &Tokens,
    address: SocketAddr,
) -> Result<axum::Router, Failure> {
    let mut dashboard = Dashboard::new(store.admin.clone());
    for token in &tokens.actions {
        dashboard = dashboard
            .action_token(&token.label, &token.token)
            .map_err(|e| {
                let path = args.token_file.as_deref().unwrap_or(Path::new(""));
                Failure::usage(format!(
                    "the token file {}, line {}: {e}",
                    path.display(),
                    token.line
                ))
            })?;
    }
    if let Some(read) = &tokens.read {
        dashboard = dashboard.read_token(read).map_err(|e| {
            let path = args.read_token_file.as_deref().unwrap_or(Path::new(""));
            Failure::usage(format!("the read token file {}: {e}", path.display()))
        })?;
    }
    if loopback(address) {
        dashboard = dashboard.loopback_only();
        for host in &args.allow_host {
            dashboard = dashboard.allow_host(host);
        }
    }
    Ok(dashboard.router())
}

/// Whether `address` is this machine's loopback, IPv4-mapped IPv6 included.
fn loopback(address: SocketAddr) -> bool {
    address.ip().to_canonical().is_loopback()
}

/// Serves the dashboard over `store` until Ctrl-C or SIGTERM.
pub(crate) async fn serve(
    args: &ServeArgs,
    tokens: &Tokens,
    store: &Store,
    output: &mut Output<'_>,
) -> Result<(), Failure> {
    let listener = TcpListener::bind(&args.listen).await.map_err(|e| {
        Failure::usage(format!(
            "cannot listen on {}: {e}; pass another --listen address",
            args.listen
        ))
    })?;
    let address = listener.local_addr().map_err(|e| {
        Failure::usage(format!(
            "cannot read the address listened on ({}): {e}",
            args.listen
        ))
    })?;
    let router = dashboard(store, args, tokens, address)?;
    let who = if tokens.actions.is_empty() {
        "read-only (pass --token-file to allow actions)".to_owned()
    } else {
        let labels: Vec<&str> = tokens.actions.iter().map(|t| t.label.as_str()).collect();
        format!("actions allowed for tokens: {}", labels.join(", "))
    };
    let reading = if tokens.read.is_some() {
        "; reading needs the read token"
    } else {
        ""
    };
    output.print(&format!(
        "shedlock serve: dashboard on http://{address}/ over {}, {who}{reading}\n",
        store.description
    ))?;
    if !loopback(address) {
        output.warn(&format!(
            "the dashboard listens on {address}, reachable from the network without TLS; put it \
             behind a proxy that terminates TLS, or listen on 127.0.0.1 (see docs/dashboard.md)"
        ));
    }
    // The signals are watched from here on: a stop sent once the line above is read is a stop.
    let (first, second) = stops()?;
    let served = axum::serve(listener, router).with_graceful_shutdown(first);
    tokio::select! {
        served = served => {
            served.map_err(|e| Failure::usage(format!("the dashboard stopped: {e}")))
        }
        // Requests in flight get this long after the first stop, or until a second one.
        () = async {
            second.await;
        } => {
            output.warn("stopped before the requests in flight ended");
            Ok(())
        }
    }
}

/// How long requests in flight may take after a stop.
const GRACE: Duration = Duration::from_secs(10);

/// Two futures over the signals, watched from the call on: the first resolves at Ctrl-C (SIGINT)
/// or SIGTERM, the second at a later one or [`GRACE`] after the first.
fn stops() -> Result<
    (
        impl std::future::Future<Output = ()> + Send + 'static,
        impl std::future::Future<Output = ()> + Send + 'static,
    ),
    Failure,
> {
    let (tx, rx) = tokio::sync::watch::channel(0_u8);
    let mut signals = Signals::new()?;
    tokio::spawn(async move {
        signals.next().await;
        let _ = tx.send(1);
        tokio::select! {
            () = signals.next() => {}
            () = tokio::time::sleep(GRACE) => {}
        }
        let _ = tx.send(2);
    });
    let at = |level: u8| {
        let mut rx = rx.clone();
        async move {
            let _ = rx.wait_for(|seen| *seen >= level).await;
        }
    };
    Ok((at(1), at(2)))
}

/// Ctrl-C and, on Unix, SIGTERM, registered when made.
struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Self, Failure> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let watch = |kind: SignalKind| {
                signal(kind).map_err(|e| Failure::usage(format!("cannot watch for signals: {e}")))
            };
            Ok(Self {
                interrupt: watch(SignalKind::interrupt())?,
                terminate: watch(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Self {})
        }
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => {}
                _ = self.terminate.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path() -> &'static Path {
        Path::new("tokens.txt")
    }

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_line() {
        let text = "\u{feff}alice:aaaaaaaaaaaaaaaa\n";
        let tokens = action_tokens(path(), text).expect("valid");
        assert_eq!(tokens[0].label, "alice");
        assert_eq!(
            read_token(path(), "\u{feff}# reading\nrrrrrrrrrrrrrrrr\n").expect("one token"),
            "rrrrrrrrrrrrrrrr"
        );
    }

    #[test]
    fn token_lines_are_label_colon_token() {
        let text = "# who may act\n\nalice:aaaaaaaaaaaaaaaa\r\n  bob : bbbbbbbbbbbbbbbb  \n";
        let tokens = action_tokens(path(), text).expect("valid");
        assert_eq!(
            tokens,
            vec![
                ActionToken {
                    label: "alice".into(),
                    token: "aaaaaaaaaaaaaaaa".into(),
                    line: 3
                },
                ActionToken {
                    label: "bob".into(),
                    token: "bbbbbbbbbbbbbbbb".into(),
                    line: 4
                },
            ]
        );
    }

    #[test]
    fn token_file_mistakes_name_the_line_and_never_the_token() {
        let secret = "s3cr3t-s3cr3t-s3cr3t";
        for (text, says) in [
            (format!("# x\n{secret}\n"), "line 2 has no `:`"),
            (format!(":{secret}\n"), "line 1 has no label"),
            ("alice:\n".to_owned(), "line 1 has no token"),
            (
                format!("a:{secret}\na:{secret}x\n"),
                "line 2 repeats the label \"a\" of line 1",
            ),
            (
                format!("a:{secret}\nb:{secret}\n"),
                "line 2 repeats the token of line 1 (\"a\")",
            ),
            ("# only a comment\n\n".to_owned(), "has no token"),
        ] {
            let failure = action_tokens(path(), &text).expect_err(&text);
            assert_eq!(failure.exit.code(), 2);
            assert!(failure.message.contains(says), "{}", failure.message);
            assert!(
                failure.message.contains("tokens.txt"),
                "{}",
                failure.message
            );
            assert!(!failure.message.contains(secret), "{}", failure.message);
            assert!(!failure.message.contains('\n'), "{}", failure.message);
        }
    }

    #[test]
    fn a_read_token_file_holds_one_token() {
        let token = read_token(path(), "# shared\n r-r-r-r-r-r-r-r-r \n").expect("valid");
        assert_eq!(token, "r-r-r-r-r-r-r-r-r");
        let empty = read_token(path(), "\n# none\n").expect_err("empty");
        assert!(empty.message.contains("has no token"), "{}", empty.message);
        let two = read_token(path(), "first-token-aaaaaa\nsecond-token-bbbbbb\n").expect_err("two");
        assert!(two.message.contains("line 2"), "{}", two.message);
        assert!(!two.message.contains("token-bbbbbb"), "{}", two.message);
    }
}
