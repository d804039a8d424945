//! What each subcommand does, on an opened [`Store`].

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};

use serde::Serialize;
use shedlock_core::{
    admin::{
        LockEntry, election_owner_id,
        model::{LeaderView, LockView},
    },
    provider::LockRecord,
};

use crate::args::{Command, UnlockArgs};
use crate::failure::Failure;
use crate::render;
use crate::store::Store;

/// Where a command writes: its output (stdout) and its warnings (stderr).
pub(crate) struct Output<'a> {
    pub(crate) out: &'a mut dyn Write,
    pub(crate) err: &'a mut dyn Write,
}

impl Output<'_> {
    fn print(&mut self, text: &str) -> Result<(), Failure> {
        self.out
            .write_all(text.as_bytes())
            .and_then(|()| self.out.flush())
            .map_err(|e| Failure::output(&e))
    }

    fn json(&mut self, value: &impl Serialize) -> Result<(), Failure> {
        let text = serde_json::to_string_pretty(value)
            .map_err(|e| Failure::usage(format!("cannot write JSON: {e}")))?;
        self.print(&format!("{text}\n"))
    }

    fn warn(&mut self, text: &str) {
        // A warning that cannot be written has nowhere else to go.
        let _ = writeln!(self.err, "warning: {text}");
    }
}

/// Whether the command needs a connection before it starts (`ddl` does not).
pub(crate) fn connects(command: &Command) -> bool {
    !matches!(command, Command::Ddl)
}

/// Runs `command` on `store`.
pub(crate) async fn run(
    command: Command,
    store: &Store,
    output: &mut Output<'_>,
) -> Result<(), Failure> {
    match command {
        Command::List { held, json } => {
            let entries = list(store, held).await?;
            if json {
                output.json(&render::json_list(&entries))
            } else {
                output.print(&render::table(&entries))
            }
        }
        Command::Show { name, json } => {
            let entry = entry(store, &name).await?;
            if json {
                output.json(&LockView::from(&entry))
            } else {
                output.print(&render::details(&entry, &store.invocation))
            }
        }
        Command::Unlock(args) if args.force => force_unlock(store, &args, output).await,
        Command::Unlock(args) => unlock(store, &args, output).await,
        Command::Leader { name, json } => leader(store, &name, json, output).await,
        Command::Watch {
            held,
            interval,
            count,
        } => watch(store, held, interval, count, output).await,
        Command::Ddl => match store.admin.ddl() {
            Some(ddl) => output.print(&format!("{};\n", ddl.trim_end().trim_end_matches(';'))),
            None => Err(Failure::usage("this store has no table to create")),
        },
        Command::CreateTable => {
            store
                .admin
                .create_table()
                .await
                .map_err(|e| store.failure(&e))?;
            output.print(&format!(
                "the lock table {} exists (created unless it was there)\n",
                store.table
            ))
        }
    }
}

async fn list(store: &Store, held: bool) -> Result<Vec<LockEntry>, Failure> {
    let mut entries = store.admin.list().await.map_err(|e| store.failure(&e))?;
    if held {
        entries.retain(LockEntry::is_held);
    }
    Ok(entries)
}

async fn find(store: &Store, name: &str) -> Result<Option<LockEntry>, Failure> {
    store.admin.entry(name).await.map_err(|e| store.failure(&e))
}

async fn entry(store: &Store, name: &str) -> Result<LockEntry, Failure> {
    find(store, name)
        .await?
        .ok_or_else(|| not_found(store, name))
}

fn not_found(store: &Store, name: &str) -> Failure {
    Failure::refused(format!(
        "there is no lock named {name:?} in {}; `{}` shows the names",
        store.table,
        store.invocation.command("list", None, &[])
    ))
}

/// The sentence about the risk of freeing an election's row.
fn election_risk(entry: &LockEntry) -> String {
    format!(
        "{:?} is a leader election's row, led by {}: freeing it lets another instance lead while \
         the old leader may still act as leader until its renew deadline passes (10 s by default)",
        entry.record().name(),
        election_owner_id(entry.record().owner())
    )
}

fn refuse_election(entry: &LockEntry) -> Failure {
    Failure::refused(format!(
        "refused: {}; pass --election to free it anyway",
        election_risk(entry)
    ))
}

/// What holds `entry` now, for messages.
fn describe(entry: &LockEntry) -> String {
    let r = entry.record();
    let mut text = format!(
        "held by {} since {}",
        r.owner(),
        render::timestamp(r.locked_at())
    );
    if let Some(t) = r.fencing_token() {
        let _ = write!(text, " (token {t})");
    }
    text
}

async fn unlock(store: &Store, args: &UnlockArgs, output: &mut Output<'_>) -> Result<(), Failure> {
    let (Some(owner), Some(locked_at)) = (&args.owner, args.locked_at) else {
        return Err(Failure::usage(
            "pass --owner and --locked-at as `shedlock show` prints them, or --force",
        ));
    };
    let name = &args.name;
    let current = entry(store, name).await?;
    let has_tokens = current.record().fencing_token().is_some();
    match (has_tokens, args.token) {
        (true, None) => {
            return Err(Failure::usage(format!(
                "{} has fencing tokens: pass --token too, as `{}` prints it",
                store.table,
                store.invocation.command("show", Some(name), &[])
            )));
        }
        (false, Some(_)) => {
            return Err(Failure::usage(format!(
                "{} has no fencing-token column: leave out --token",
                store.table
            )));
        }
        _ => {}
    }
    let expected = LockRecord::new(name, owner, locked_at, current.record().lock_until())
        .with_fencing_token(args.token);
    let same = |e: &LockEntry| {
        e.record().owner() == owner
            && e.record().locked_at() == locked_at
            && e.record().fencing_token() == args.token
    };
    if !current.is_held() {
        return Err(Failure::refused(format!(
            "refused: {name:?} is not held (its lock ended {}); nothing to free",
            render::relative(current.record().lock_until(), current.store_now())
        )));
    }
    if !same(&current) {
        return Err(Failure::refused(format!(
            "refused: {name:?} is {} now, not the acquisition given; nothing changed (run `{}` \
             again)",
            describe(&current),
            store.invocation.command("show", Some(name), &[])
        )));
    }
    if current.is_election() && !args.election {
        return Err(refuse_election(&current));
    }
    // The decision is the store's, in one conditional statement: the read above only explains.
    let freed = store
        .admin
        .unlock(&expected)
        .await
        .map_err(|e| store.failure(&e))?;
    if !freed {
        let now = find(store, name).await?;
        let why = match now {
            Some(e) if e.is_held() => format!("it is {} now", describe(&e)),
            Some(_) => "it was freed meanwhile".to_owned(),
            None => "its row was deleted meanwhile".to_owned(),
        };
        return Err(Failure::refused(format!(
            "refused: {name:?} changed since it was read ({why}); nothing changed"
        )));
    }
    if current.is_election() {
        output.warn(&election_risk(&current));
    }
    output.print(&format!("freed {name:?}, {}\n", describe_was(&current)))
}

fn describe_was(entry: &LockEntry) -> String {
    let mut text = format!("which was {}", describe(entry));
    if let Some(left) = entry.remaining() {
        let _ = write!(text, " with {} left", render::human(left));
    }
    text
}

async fn force_unlock(
    store: &Store,
    args: &UnlockArgs,
    output: &mut Output<'_>,
) -> Result<(), Failure> {
    let name = &args.name;
    let current = entry(store, name).await?;
    if !current.is_held() {
        return Err(Failure::refused(format!(
            "refused: {name:?} is not held (its lock ended {}); nothing to free",
            render::relative(current.record().lock_until(), current.store_now())
        )));
    }
    if current.is_election() && !args.election {
        return Err(refuse_election(&current));
    }
    let freed = store
        .admin
        .force_unlock(name)
        .await
        .map_err(|e| store.failure(&e))?;
    let Some(freed) = freed else {
        return Err(Failure::refused(format!(
            "refused: {name:?} was freed by someone else meanwhile; nothing changed"
        )));
    };
    if freed.is_election() {
        output.warn(&election_risk(&freed));
    }
    output.print(&format!("freed {name:?}, {}\n", describe_was(&freed)))
}

async fn leader(
    store: &Store,
    name: &str,
    json: bool,
    output: &mut Output<'_>,
) -> Result<(), Failure> {
    let entry = entry(store, name).await?;
    let r = entry.record();
    let leader = entry.is_held().then(|| election_owner_id(r.owner()));
    if json {
        return output.json(&LeaderView::from(&entry));
    }
    let token = r.fencing_token().map_or_else(
        || "- (the table has no tokens)".to_owned(),
        |t| t.to_string(),
    );
    let mut lines = match (leader, entry.remaining()) {
        (Some(leader), Some(left)) => vec![
            ("leader", leader.to_owned()),
            ("term token", token),
            (
                "lease left",
                format!(
                    "{} (until {})",
                    render::human(left),
                    render::timestamp(r.lock_until())
                ),
            ),
            (
                "since",
                format!(
                    "{} ({})",
                    render::timestamp(r.locked_at()),
                    render::relative(r.locked_at(), entry.store_now())
                ),
            ),
        ],
        _ => vec![
            ("leader", "none".to_owned()),
            (
                "last leader",
                format!(
                    "{}, lease ended {}",
                    election_owner_id(r.owner()),
                    render::relative(r.lock_until(), entry.store_now())
                ),
            ),
            ("last token", token),
        ],
    };
    if !entry.is_election() {
        lines.push((
            "note",
            "this row was not written by a shedlock-rs leader latch (no #election mark): it may \
             be a task lock"
                .to_owned(),
        ));
    }
    output.print(&render::key_values(&lines))
}

async fn watch(
    store: &Store,
    held: bool,
    interval: std::time::Duration,
    count: Option<u64>,
    output: &mut Output<'_>,
) -> Result<(), Failure> {
    let terminal = std::io::stdout().is_terminal();
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shown = 0;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
        let entries = list(store, held).await?;
        let now = entries
            .first()
            .map_or_else(String::new, |e| render::timestamp(e.store_now()));
        let clear = if terminal { "\x1b[H\x1b[2J" } else { "" };
        let separator = if shown > 0 && !terminal { "\n" } else { "" };
        output.print(&format!(
            "{clear}{separator}every {}: {} locks in {}   {now}\n{}",
            render::human(interval),
            entries.len(),
            store.table,
            render::table(&entries)
        ))?;
        shown += 1;
        if count.is_some_and(|n| shown >= n) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use clap::Parser;
    use shedlock_core::{InMemoryLockProvider, admin::LockAdmin, provider::LockProvider};

    use super::*;
    use crate::args::Cli;
    use crate::failure::Exit;

    struct Run {
        result: Result<(), Failure>,
        out: String,
        err: String,
    }

    async fn exec(store: &Store, args: &[&str]) -> Run {
        let cli = Cli::try_parse_from(std::iter::once("shedlock").chain(args.iter().copied()))
            .expect("valid arguments");
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let result = run(
            cli.command,
            store,
            &mut Output {
                out: &mut out,
                err: &mut err,
            },
        )
        .await;
        Run {
            result,
            out: String::from_utf8_lossy(&out).into_owned(),
            err: String::from_utf8_lossy(&err).into_owned(),
        }
    }

    fn exit(run: &Run) -> Exit {
        run.result.as_ref().map_or_else(|f| f.exit, |()| Exit::Done)
    }

    fn memory() -> (Arc<InMemoryLockProvider>, Store) {
        let mem = Arc::new(InMemoryLockProvider::new());
        let store = Store {
            admin: mem.clone(),
            table: "memory".into(),
            invocation: crate::invocation::Invocation::default(),
        };
        (mem, store)
    }

    async fn take(
        mem: &InMemoryLockProvider,
        name: &str,
        owner: &str,
        lease: Duration,
    ) -> LockRecord {
        mem.acquire(name, lease, owner)
            .await
            .expect("in-memory acquire")
            .expect("free")
    }

    fn safe_args(record: &LockRecord) -> Vec<String> {
        vec![
            "unlock".into(),
            record.name().into(),
            "--owner".into(),
            record.owner().into(),
            "--locked-at".into(),
            render::timestamp(record.locked_at()),
            "--token".into(),
            record.fencing_token().unwrap_or_default().to_string(),
        ]
    }

    async fn exec_owned(store: &Store, args: &[String]) -> Run {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        exec(store, &args).await
    }

    #[tokio::test(start_paused = true)]
    async fn safe_unlock_frees_exactly_the_acquisition_shown() {
        let (mem, store) = memory();
        let record = take(&mem, "report", "pod-7", Duration::from_mins(1)).await;
        let shown = exec(&store, &["show", "report"]).await;
        assert!(shown.out.contains(&safe_args(&record)[5]), "{}", shown.out);
        let run = exec_owned(&store, &safe_args(&record)).await;
        assert_eq!(exit(&run), Exit::Done, "{:?}", run.result);
        assert!(run.out.starts_with("freed \"report\""), "{}", run.out);
        let entry = mem.entry("report").await.expect("ok").expect("row");
        assert!(!entry.is_held());
    }

    #[tokio::test(start_paused = true)]
    async fn a_stale_unlock_is_refused_and_frees_nothing() {
        let (mem, store) = memory();
        let first = take(&mem, "report", "pod-7", Duration::from_mins(1)).await;
        mem.release(&first, Duration::ZERO).await.expect("ok");
        tokio::time::advance(Duration::from_millis(3)).await;
        let _second = take(&mem, "report", "pod-7", Duration::from_mins(1)).await;
        let run = exec_owned(&store, &safe_args(&first)).await;
        assert_eq!(exit(&run), Exit::Refused);
        let message = run.result.err().map(|f| f.message).unwrap_or_default();
        assert!(message.contains("not the acquisition given"), "{message}");
        assert!(
            mem.entry("report")
                .await
                .expect("ok")
                .expect("row")
                .is_held()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_missing_token_and_unknown_names_are_reported() {
        let (mem, store) = memory();
        let record = take(&mem, "report", "pod-7", Duration::from_mins(1)).await;
        let mut args = safe_args(&record);
        args.truncate(6);
        let run = exec_owned(&store, &args).await;
        assert_eq!(exit(&run), Exit::Usage);
        for args in [
            &["show", "nope"][..],
            &["unlock", "nope", "--force"],
            &["leader", "nope"],
        ] {
            let run = exec(&store, args).await;
            assert_eq!(exit(&run), Exit::Refused, "{args:?}");
            let message = run.result.err().map(|f| f.message).unwrap_or_default();
            assert!(message.contains("no lock named \"nope\""), "{message}");
        }
        assert!(
            mem.entry("report")
                .await
                .expect("ok")
                .expect("row")
                .is_held()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn force_prints_what_it_freed_and_refuses_a_free_lock() {
        let (mem, store) = memory();
        take(&mem, "report", "pod-7", Duration::from_mins(1)).await;
        let run = exec(&store, &["unlock", "report", "--force"]).await;
        assert_eq!(exit(&run), Exit::Done);
        assert!(
            run.out.contains("which was held by pod-7 since"),
            "{}",
            run.out
        );
        let again = exec(&store, &["unlock", "report", "--force"]).await;
        assert_eq!(exit(&again), Exit::Refused);
    }

    #[tokio::test(start_paused = true)]
    async fn an_election_row_needs_the_election_flag_and_gets_a_warning() {
        let (mem, store) = memory();
        let record = take(
            &mem,
            "scheduler",
            "pod-2:1:cc#election",
            Duration::from_secs(15),
        )
        .await;
        let listed = exec(&store, &["list"]).await;
        assert!(listed.out.contains("leader"), "{}", listed.out);
        let leader = exec(&store, &["leader", "scheduler"]).await;
        assert!(
            leader.out.contains("leader:     pod-2:1:cc\n"),
            "{}",
            leader.out
        );
        assert!(leader.out.contains("lease left: 15s"), "{}", leader.out);

        for args in [
            vec!["unlock".to_owned(), "scheduler".into(), "--force".into()],
            safe_args(&record),
        ] {
            let run = exec_owned(&store, &args).await;
            assert_eq!(exit(&run), Exit::Refused, "{args:?}");
            let message = run.result.err().map(|f| f.message).unwrap_or_default();
            assert!(message.contains("pass --election"), "{message}");
            assert!(
                mem.entry("scheduler")
                    .await
                    .expect("ok")
                    .expect("row")
                    .is_held()
            );
        }
        let mut args = safe_args(&record);
        args.push("--election".into());
        let run = exec_owned(&store, &args).await;
        assert_eq!(exit(&run), Exit::Done, "{:?}", run.result);
        assert!(
            run.err
                .contains("warning: \"scheduler\" is a leader election's row"),
            "{}",
            run.err
        );
        let none = exec(&store, &["leader", "scheduler"]).await;
        assert!(none.out.contains("leader:      none"), "{}", none.out);
    }

    #[tokio::test(start_paused = true)]
    async fn json_output_is_the_typed_models_in_their_order() {
        let (mem, store) = memory();
        take(&mem, "report", "pod-7", Duration::from_mins(1)).await;
        take(
            &mem,
            "scheduler",
            "pod-2:1:cc#election",
            Duration::from_secs(15),
        )
        .await;
        let shown = exec(&store, &["show", "report", "--json"]).await;
        let entry = mem.entry("report").await.expect("ok").expect("row");
        assert_eq!(
            serde_json::from_str::<LockView>(&shown.out).expect("a LockView"),
            LockView::from(&entry)
        );
        assert!(
            shown
                .out
                .starts_with("{\n  \"name\": \"report\",\n  \"state\": \"held\",\n"),
            "{}",
            shown.out
        );
        let leader = exec(&store, &["leader", "scheduler", "--json"]).await;
        let view: LeaderView = serde_json::from_str(&leader.out).expect("a LeaderView");
        assert_eq!(view.leader.as_deref(), Some("pod-2:1:cc"));
        assert_eq!(view.lease_left_ms, Some(15_000));
        assert!(
            leader
                .out
                .starts_with("{\n  \"name\": \"scheduler\",\n  \"leader\": \"pod-2:1:cc\",\n"),
            "{}",
            leader.out
        );
    }

    #[tokio::test(start_paused = true)]
    async fn list_held_json_and_watch_count() {
        let (mem, store) = memory();
        take(&mem, "b-held", "pod-7", Duration::from_mins(1)).await;
        let free = take(&mem, "a-free", "pod-7", Duration::from_mins(1)).await;
        mem.release(&free, Duration::ZERO).await.expect("ok");
        let all = exec(&store, &["list", "--json"]).await;
        let value: serde_json::Value = serde_json::from_str(&all.out).expect("JSON");
        let names: Vec<&str> = value
            .as_array()
            .expect("an array")
            .iter()
            .filter_map(|v| v["name"].as_str())
            .collect();
        assert_eq!(names, ["a-free", "b-held"]);
        let held = exec(&store, &["list", "--held"]).await;
        assert!(
            !held.out.contains("a-free") && held.out.contains("b-held"),
            "{}",
            held.out
        );
        let watched = exec(&store, &["watch", "--count", "3"]).await;
        assert_eq!(exit(&watched), Exit::Done);
        assert_eq!(
            watched.out.matches("every 1s: 2 locks").count(),
            3,
            "{}",
            watched.out
        );
        let ddl = exec(&store, &["ddl"]).await;
        assert_eq!(exit(&ddl), Exit::Usage, "memory has no table");
        assert_eq!(exit(&exec(&store, &["create-table"]).await), Exit::Done);
    }
}
