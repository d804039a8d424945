//! What each subcommand does, on an opened [`Store`].

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};

use chrono::{DateTime, Utc};
use serde::Serialize;
use shedlock_core::{
    admin::{
        LockEntry, UnlockRefusal, UnlockRequest, election_owner_id, guarded_unlock,
        model::{ForgetView, JobView, LeaderView, LockView, RunView},
    },
    jobs::DefinitionEntry,
    pause::PauseFor,
};

use crate::args::{Command, UnlockArgs};
use crate::failure::Failure;
use crate::render;
use crate::steer;
use crate::store::Store;

/// Where a command writes: its output to stdout and its warnings to stderr.
pub(crate) struct Output<'a> {
    pub(crate) out: &'a mut dyn Write,
    pub(crate) err: &'a mut dyn Write,
}

impl Output<'_> {
    pub(crate) fn print(&mut self, text: &str) -> Result<(), Failure> {
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

    pub(crate) fn warn(&mut self, text: &str) {
        // A warning that cannot be written has nowhere else to go.
        let _ = writeln!(self.err, "warning: {text}");
    }
}

/// Whether the command needs a connection before it starts. `ddl` does not.
pub(crate) fn connects(command: &Command) -> bool {
    !matches!(command, Command::Ddl)
}

/// How many connections a SQL store may open: two for a command, a few for `serve`, which
/// answers several requests at once.
pub(crate) fn connections(command: &Command) -> u32 {
    if matches!(command, Command::Serve(_)) {
        8
    } else {
        2
    }
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
        Command::Jobs { failing, json } => jobs(store, failing, json, output).await,
        Command::History {
            job,
            limit,
            failed,
            json,
        } => history(store, &job, limit, failed, json, output).await,
        Command::Forget { job, json } => forget(store, &job, json, output).await,
        Command::Pause {
            job,
            length,
            until,
            reason,
        } => {
            let how_long = match (length, until) {
                (Some(length), _) => PauseFor::For(length),
                (None, Some(until)) => PauseFor::Until(until),
                (None, None) => PauseFor::UntilResumed,
            };
            steer::pause(store, &job, how_long, reason.as_deref(), output).await
        }
        Command::Resume { job } => steer::resume(store, &job, output).await,
        Command::Trigger { job, wait, expires } => {
            crate::run_now::trigger(store, &job, expires, wait, output).await
        }
        Command::Serve(args) => {
            let tokens = crate::serve::Tokens::read(&args)?;
            crate::serve::serve(&args, &tokens, store, output).await
        }
    }
}

/// A job command's store error. An error the store words for job state, such as a missing table or
/// column saying what to run, is kept as it is. Any other is worded as the lock commands word it.
pub(crate) fn job_failure(store: &Store, error: &shedlock_core::Error) -> Failure {
    if error.is_unsupported() {
        Failure::usage(format!(
            "this store does not record job state ({}); the job commands need a store that \
             does",
            crate::failure::causes(error)
        ))
    } else if error.is_missing_table() || error.is_schema() {
        Failure::usage(crate::failure::causes(error))
    } else {
        store.failure(error)
    }
}

/// Stops with the statements to run when the store lacks what job state needs.
async fn require_job_state(store: &Store) -> Result<(), Failure> {
    match store.admin.missing_ddl().await {
        Ok(None) => Ok(()),
        Ok(Some(ddl)) => Err(Failure::usage(format!(
            "{} lacks what the job commands need; run this to record job state and allow \
             pauses and triggers:\n{}",
            store.table,
            ddl.trim_end()
        ))),
        // The reads below say what the store cannot do.
        Err(e) if e.is_unsupported() => Ok(()),
        Err(e) => Err(job_failure(store, &e)),
    }
}

/// What the job commands read: the published definitions, the lock rows and the store's now, which
/// is the rows' now, or the local clock when there are no rows.
pub(crate) async fn read_jobs(
    store: &Store,
) -> Result<(Vec<DefinitionEntry>, Vec<LockEntry>, DateTime<Utc>), Failure> {
    require_job_state(store).await?;
    let definitions = store
        .admin
        .definitions()
        .await
        .map_err(|e| job_failure(store, &e))?;
    let entries = list(store, false).await?;
    let now = entries.first().map_or_else(Utc::now, LockEntry::store_now);
    Ok((definitions, entries, now))
}

/// Refuses a job name that cannot be one, before asking the store.
pub(crate) fn check_job_name(job: &str) -> Result<(), Failure> {
    if job.trim().is_empty() {
        return Err(Failure::usage(
            "the job name is empty; `shedlock jobs` lists the names",
        ));
    }
    if job.chars().any(char::is_control) {
        return Err(Failure::usage(format!(
            "the job name {job:?} has a control character; `shedlock jobs` lists the names"
        )));
    }
    Ok(())
}

/// No job named `job`: the names there are, at most 20 of them.
pub(crate) fn unknown_job(store: &Store, job: &str, known: &[String]) -> Failure {
    let longest = store.admin.max_name_len();
    let note = if job.chars().count() > longest {
        format!(" (it is longer than the {longest} characters a lock name can have here)")
    } else {
        String::new()
    };
    let names = if known.is_empty() {
        "no job is known: no replica publishes one and no lock row recorded a run".to_owned()
    } else {
        let shown: Vec<String> = known.iter().take(20).map(|n| format!("{n:?}")).collect();
        let more = match known.len().saturating_sub(20) {
            0 => String::new(),
            more => format!(" and {more} more"),
        };
        format!("the jobs are {}{more}", shown.join(", "))
    };
    Failure::refused(format!(
        "there is no job named {job:?}{note}; {names} (`{}` lists them)",
        store.invocation.command("jobs", None, &[])
    ))
}

async fn jobs(
    store: &Store,
    failing: bool,
    json: bool,
    output: &mut Output<'_>,
) -> Result<(), Failure> {
    let (definitions, entries, now) = read_jobs(store).await?;
    let mut jobs = JobView::collect(&definitions, &entries, now);
    if failing {
        jobs.retain(JobView::is_failing);
    }
    if json {
        output.json(&jobs)
    } else if jobs.is_empty() && failing {
        output.print("no failing jobs\n")
    } else {
        output.print(&render::jobs_table(&jobs, &store.invocation))
    }
}

/// How many runs `history --failed` looks through at least.
const FAILED_SCAN: usize = 1000;

async fn history(
    store: &Store,
    job: &str,
    limit: u32,
    failed: bool,
    json: bool,
    output: &mut Output<'_>,
) -> Result<(), Failure> {
    check_job_name(job)?;
    let (definitions, entries, now) = read_jobs(store).await?;
    let lock_name = match definitions.iter().find(|d| d.definition.job == job) {
        Some(d) => d.definition.lock_name.clone(),
        None if entries.iter().any(|e| e.record().name() == job) => job.to_owned(),
        None => {
            let known: Vec<String> = JobView::collect(&definitions, &entries, now)
                .into_iter()
                .map(|j| j.job)
                .collect();
            return Err(unknown_job(store, job, &known));
        }
    };
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let read = if failed {
        limit.max(FAILED_SCAN)
    } else {
        limit
    };
    let runs = store.admin.history(&lock_name, read).await.map_err(|e| {
        if e.is_unsupported() {
            Failure::usage(format!(
                "this store keeps no run history; `{}` shows each job's last run",
                store.invocation.command("jobs", None, &[])
            ))
        } else {
            job_failure(store, &e)
        }
    })?;
    let runs: Vec<RunView> = runs
        .iter()
        .map(RunView::from)
        .filter(|r| !failed || r.is_failure())
        .take(limit)
        .collect();
    if json {
        return output.json(&runs);
    }
    let of = if lock_name == job {
        format!("{job:?}")
    } else {
        format!("{job:?} (lock {lock_name:?})")
    };
    if let Some(action) = entries
        .iter()
        .find(|e| e.record().name() == lock_name)
        .and_then(LockEntry::last_action)
    {
        output.print(&format!(
            "last action on {of}: {}\n",
            render::action_note(action, now)
        ))?;
    }
    if runs.is_empty() {
        return output.print(&if failed {
            format!("no failed runs among the newest {read} recorded for {of}\n")
        } else {
            format!(
                "no runs recorded for {of}; runs are kept where the replicas' store turns \
                 history on\n"
            )
        });
    }
    output.print(&render::history_table(&runs, now))
}

async fn forget(
    store: &Store,
    job: &str,
    json: bool,
    output: &mut Output<'_>,
) -> Result<(), Failure> {
    check_job_name(job)?;
    require_job_state(store).await?;
    let definitions = store
        .admin
        .definitions()
        .await
        .map_err(|e| job_failure(store, &e))?;
    if !definitions.iter().any(|d| d.definition.job == job) {
        let mut known: Vec<String> = definitions.into_iter().map(|d| d.definition.job).collect();
        known.dedup();
        return Err(unknown_job(store, job, &known));
    }
    let removed = store
        .admin
        .forget(job)
        .await
        .map_err(|e| job_failure(store, &e))?;
    if json {
        return output.json(&ForgetView::new(job, removed));
    }
    output.print(&format!(
        "forgot {job:?}: removed {removed} definition{} (one per replica); a replica still \
         running it publishes it again at its next heartbeat\n",
        if removed == 1 { "" } else { "s" }
    ))
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
    let request = UnlockRequest {
        name,
        owner,
        locked_at,
        token: args.token,
        election_confirmed: args.election,
    };
    let answer = guarded_unlock(store.admin.as_ref(), &request, &store.actor)
        .await
        .map_err(|e| store.failure(&e))?;
    let freed = match answer {
        Ok(freed) => freed,
        Err(refusal) => return Err(unlock_refused(store, name, refusal).await),
    };
    if freed.is_election() {
        output.warn(&election_risk(&freed));
    }
    output.print(&format!("freed {name:?}, {}\n", describe_was(&freed)))
}

/// The CLI's words for a guarded unlock's refusal.
async fn unlock_refused(store: &Store, name: &str, refusal: UnlockRefusal) -> Failure {
    match refusal {
        UnlockRefusal::NoSuchLock => not_found(store, name),
        UnlockRefusal::TokenMissing => Failure::usage(format!(
            "{} has fencing tokens: pass --token too, as `{}` prints it",
            store.table,
            store.invocation.command("show", Some(name), &[])
        )),
        UnlockRefusal::TokenNotUsed => Failure::usage(format!(
            "{} has no fencing-token column: leave out --token",
            store.table
        )),
        UnlockRefusal::NotHeld(current) => not_held(name, &current),
        UnlockRefusal::NotAsShown(current) => Failure::refused(format!(
            "refused: {name:?} is {} now, not the acquisition given; nothing changed (run `{}` \
             again)",
            describe(&current),
            store.invocation.command("show", Some(name), &[])
        )),
        UnlockRefusal::Election(current) => refuse_election(&current),
        UnlockRefusal::ChangedMeanwhile => {
            // Read again, only to say what changed.
            let why = match find(store, name).await {
                Ok(Some(e)) if e.is_held() => format!("it is {} now", describe(&e)),
                Ok(Some(_)) => "it was freed meanwhile".to_owned(),
                Ok(None) => "its row was deleted meanwhile".to_owned(),
                Err(failure) => return failure,
            };
            Failure::refused(format!(
                "refused: {name:?} changed since it was read ({why}); nothing changed"
            ))
        }
    }
}

/// The refusal to free a lock that is not held.
fn not_held(name: &str, current: &LockEntry) -> Failure {
    Failure::refused(format!(
        "refused: {name:?} is not held (its lock ended {}); nothing to free",
        render::relative(current.record().lock_until(), current.store_now())
    ))
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
        return Err(not_held(name, &current));
    }
    if current.is_election() && !args.election {
        return Err(refuse_election(&current));
    }
    let freed = store
        .admin
        .force_unlock(name, &store.actor)
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
    use shedlock_core::jobs::{Definition, JobState, RunEntry, RunOutcome};
    use shedlock_core::{InMemoryLockProvider, admin::LockAdmin, provider::LockProvider};

    use super::*;
    use crate::args::Cli;
    use crate::failure::Exit;
    use shedlock_core::provider::LockRecord;

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
            actor: "tester@cli".into(),
            description: "a test store".into(),
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

    /// A store that records job state. It has the in-memory store's rows, with states, definitions
    /// and history kept here.
    struct JobStore {
        mem: InMemoryLockProvider,
        states: Vec<(String, JobState)>,
        definitions: std::sync::Mutex<Vec<DefinitionEntry>>,
        runs: Vec<RunEntry>,
        missing: Option<String>,
        /// Whether it answers the job-state calls. A store that does not answers unsupported.
        supported: bool,
    }

    #[async_trait::async_trait]
    impl LockProvider for JobStore {
        async fn acquire(
            &self,
            name: &str,
            at_most: Duration,
            owner: &str,
        ) -> shedlock_core::Result<Option<LockRecord>> {
            self.mem.acquire(name, at_most, owner).await
        }

        async fn extend(
            &self,
            record: &LockRecord,
            at_most: Duration,
        ) -> shedlock_core::Result<Option<LockRecord>> {
            self.mem.extend(record, at_most).await
        }

        async fn release(
            &self,
            record: &LockRecord,
            at_least: Duration,
        ) -> shedlock_core::Result<bool> {
            self.mem.release(record, at_least).await
        }
    }

    #[async_trait::async_trait]
    impl LockAdmin for JobStore {
        async fn list(&self) -> shedlock_core::Result<Vec<LockEntry>> {
            Ok(self
                .mem
                .list()
                .await?
                .into_iter()
                .map(|e| {
                    let state = self
                        .states
                        .iter()
                        .find(|(n, _)| n == e.record().name())
                        .map(|(_, s)| s.clone())
                        .unwrap_or_default();
                    e.with_state(state)
                })
                .collect())
        }

        async fn missing_ddl(&self) -> shedlock_core::Result<Option<String>> {
            Ok(self.missing.clone())
        }

        async fn definitions(&self) -> shedlock_core::Result<Vec<DefinitionEntry>> {
            if !self.supported {
                return Err(shedlock_core::Error::unsupported("definitions"));
            }
            Ok(self.definitions.lock().expect("not poisoned").clone())
        }

        async fn history(
            &self,
            lock_name: &str,
            limit: usize,
        ) -> shedlock_core::Result<Vec<RunEntry>> {
            Ok(self
                .runs
                .iter()
                .filter(|r| r.lock_name == lock_name)
                .take(limit)
                .cloned()
                .collect())
        }

        async fn forget(&self, job: &str) -> shedlock_core::Result<u64> {
            let mut defs = self.definitions.lock().expect("not poisoned");
            let before = defs.len();
            defs.retain(|d| d.definition.job != job);
            Ok(u64::try_from(before - defs.len()).unwrap_or(u64::MAX))
        }
    }

    const ODD: &str = "it's a \"job\" – ünïcode";

    /// A store with three jobs: `report`, with the lock `report-lock`, failing and published by two
    /// replicas that disagree, `sync`, which is fine, and ODD, a name with quotes, spaces and
    /// unicode.
    async fn job_store(missing: Option<&str>) -> (Arc<JobStore>, Store) {
        let mem = InMemoryLockProvider::new();
        let now = chrono::Utc::now();
        for name in ["report-lock", "sync", ODD] {
            let r = mem
                .acquire(name, Duration::from_mins(1), "pod-1")
                .await
                .expect("acquire")
                .expect("free");
            mem.release(&r, Duration::ZERO).await.expect("release");
        }
        let run = |lock: &str, secs: i64, outcome: RunOutcome| {
            let at = now - chrono::Duration::seconds(secs);
            RunEntry::new(
                lock,
                at,
                "pod-1",
                at,
                at + chrono::Duration::seconds(2),
                outcome,
            )
        };
        // Newest first, as stores answer.
        let runs = vec![
            run(
                "report-lock",
                60,
                RunOutcome::Failed("no route to host\nat line 2".into()),
            ),
            run("report-lock", 120, RunOutcome::Panicked),
            run("report-lock", 180, RunOutcome::Succeeded),
            run("sync", 60, RunOutcome::Succeeded),
            run(ODD, 60, RunOutcome::Succeeded),
        ];
        let state = |lock: &str| {
            let mut of: Vec<RunEntry> = runs
                .iter()
                .filter(|r| r.lock_name == lock)
                .cloned()
                .collect();
            of.reverse();
            of.into_iter().fold(JobState::default(), JobState::after)
        };
        let states = ["report-lock", "sync", ODD]
            .map(|l| (l.to_owned(), state(l)))
            .to_vec();
        let def = |job: &str, lock: &str, replica: &str, spec: &str| {
            DefinitionEntry::new(
                Definition::new(job, lock, spec),
                replica,
                "0.2.0",
                now,
                now + chrono::Duration::seconds(30),
            )
        };
        let definitions = vec![
            def(
                "report",
                "report-lock",
                "pod-1",
                r#"{"name":"report","lock_name":"report-lock","cron":"0 0 3 * * *","zone":"Europe/Berlin"}"#,
            ),
            def(
                "report",
                "report-lock",
                "pod-2",
                r#"{"name":"report","lock_name":"report-lock","cron":"0 0 4 * * *","zone":"Europe/Berlin"}"#,
            ),
            def("sync", "sync", "pod-1", r#"{"name":"sync","every":"5m"}"#),
        ];
        let jobs = Arc::new(JobStore {
            mem,
            states,
            definitions: std::sync::Mutex::new(definitions),
            runs,
            missing: missing.map(str::to_owned),
            supported: true,
        });
        let store = Store {
            admin: jobs.clone(),
            table: "jobs".into(),
            invocation: crate::invocation::Invocation::default(),
            actor: "tester@cli".into(),
            description: "a test store".into(),
        };
        (jobs, store)
    }

    fn message(run: &Run) -> String {
        run.result
            .as_ref()
            .err()
            .map(|f| f.message.clone())
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn jobs_lists_every_job_and_its_json_says_the_same() {
        let (_, store) = job_store(None).await;
        let run = exec(&store, &["jobs"]).await;
        assert_eq!(exit(&run), Exit::Done, "{:?}", run.result);
        let lines: Vec<&str> = run.out.lines().collect();
        assert!(lines[0].starts_with("JOB "), "{}", run.out);
        assert!(lines[1].starts_with(ODD), "{}", run.out);
        assert!(
            lines[2].starts_with("report (lock report-lock)")
                && lines[2].contains("at 03:00 every day (Europe/Berlin)")
                && lines[2].contains("failed")
                && lines[2].contains("2 (specs differ)"),
            "{}",
            run.out
        );
        assert!(
            lines[3].starts_with("sync ") && lines[3].contains("every 5 minutes"),
            "{}",
            run.out
        );
        assert!(
            run.out
                .contains("\"report\": its replicas publish different specs:\n  pod-1: at 03:00"),
            "{}",
            run.out
        );
        assert!(
            run.out
                .contains("  pod-2: at 04:00 every day (Europe/Berlin)"),
            "{}",
            run.out
        );
        assert!(
            run.out.contains(
                "\"report\": 2 failures in a row, the last failed: no route to host …; see \
                 `shedlock history report`"
            ),
            "{}",
            run.out
        );

        let json = exec(&store, &["jobs", "--json"]).await;
        let views: Vec<JobView> = serde_json::from_str(&json.out).expect("JobViews");
        let names: Vec<&str> = views.iter().map(|v| v.job.as_str()).collect();
        assert_eq!(names, [ODD, "report", "sync"]);
        assert_eq!(views[1].consecutive_failures, 2);
        assert_eq!(
            views[1].last_run.as_ref().and_then(|r| r.error.as_deref()),
            Some("no route to host\nat line 2")
        );

        let failing = exec(&store, &["jobs", "--failing", "--json"]).await;
        let views: Vec<JobView> = serde_json::from_str(&failing.out).expect("JobViews");
        assert_eq!(views.len(), 1);
        assert_eq!(views[0].job, "report");
        let failing = exec(&store, &["jobs", "--failing"]).await;
        assert_eq!(failing.out.lines().count(), 2 + 4 + 2, "{}", failing.out);
    }

    #[tokio::test]
    async fn history_maps_a_job_to_its_lock_and_filters() {
        let (_, store) = job_store(None).await;
        let run = exec(&store, &["history", "report"]).await;
        assert_eq!(exit(&run), Exit::Done, "{:?}", run.result);
        let lines: Vec<&str> = run.out.lines().collect();
        assert_eq!(lines.len(), 4, "{}", run.out);
        assert!(
            lines[0].starts_with("FIRE ") && lines[0].ends_with("ERROR"),
            "{}",
            run.out
        );
        assert!(
            lines[1].contains("failed") && lines[1].ends_with("no route to host …"),
            "{}",
            run.out
        );
        assert!(
            lines[2].contains("panicked") && lines[2].ends_with('-'),
            "{}",
            run.out
        );
        assert!(lines[1].contains(" 2s "), "{}", run.out);

        let limited = exec(&store, &["history", "report", "--limit", "1", "--json"]).await;
        let runs: Vec<RunView> = serde_json::from_str(&limited.out).expect("RunViews");
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].outcome, "failed");
        let failed = exec(&store, &["history", "report", "--failed", "--json"]).await;
        let runs: Vec<RunView> = serde_json::from_str(&failed.out).expect("RunViews");
        let outcomes: Vec<&str> = runs.iter().map(|r| r.outcome.as_str()).collect();
        assert_eq!(outcomes, ["failed", "panicked"]);

        // A lock name no definition names is taken as the job's.
        let by_lock = exec(&store, &["history", ODD]).await;
        assert_eq!(exit(&by_lock), Exit::Done, "{:?}", by_lock.result);
        assert_eq!(by_lock.out.lines().count(), 2, "{}", by_lock.out);
        let none = exec(&store, &["history", "sync", "--failed"]).await;
        assert_eq!(
            none.out,
            "no failed runs among the newest 1000 recorded for \"sync\"\n"
        );
    }

    #[tokio::test]
    async fn unknown_and_bad_job_names_are_clear_errors() {
        let (_, store) = job_store(None).await;
        let long = "n".repeat(70);
        for job in ["nope", "it's", "a b", long.as_str()] {
            for command in ["history", "forget"] {
                let run = exec(&store, &[command, job]).await;
                assert_eq!(exit(&run), Exit::Refused, "{command} {job}");
                let message = message(&run);
                assert!(
                    message.starts_with(&format!("there is no job named {job:?}")),
                    "{message}"
                );
                assert!(message.contains("\"report\""), "{message}");
                assert!(message.contains("`shedlock jobs` lists them"), "{message}");
            }
        }
        let run = exec(&store, &["history", &long]).await;
        assert!(
            message(&run).contains("longer than the 64 characters"),
            "{}",
            message(&run)
        );
        for job in ["", " ", "a\nb"] {
            let run = exec(&store, &["history", job]).await;
            assert_eq!(exit(&run), Exit::Usage, "{job:?}");
        }
    }

    #[tokio::test]
    async fn forget_removes_a_jobs_definitions() {
        let (jobs, store) = job_store(None).await;
        let run = exec(&store, &["forget", "report"]).await;
        assert_eq!(exit(&run), Exit::Done, "{:?}", run.result);
        assert!(
            run.out
                .starts_with("forgot \"report\": removed 2 definitions"),
            "{}",
            run.out
        );
        assert!(
            jobs.definitions
                .lock()
                .expect("ok")
                .iter()
                .all(|d| d.definition.job != "report")
        );
        let again = exec(&store, &["forget", "sync", "--json"]).await;
        let view: ForgetView = serde_json::from_str(&again.out).expect("a ForgetView");
        assert_eq!(view, ForgetView::new("sync", 1));
        // The row still records its state: the job is listed, its schedule unknown.
        let listed = exec(&store, &["jobs"]).await;
        assert!(
            listed
                .out
                .lines()
                .any(|l| l.starts_with("report-lock ") && l.contains(" unknown ")),
            "{}",
            listed.out
        );
    }

    #[tokio::test]
    async fn a_store_without_job_state_says_what_to_run() {
        let (_, store) = job_store(Some("ALTER TABLE jobs ADD COLUMN last_outcome TEXT;")).await;
        for args in [&["jobs"][..], &["history", "report"], &["forget", "report"]] {
            let run = exec(&store, args).await;
            assert_eq!(exit(&run), Exit::Usage, "{args:?}");
            assert_eq!(
                message(&run),
                "jobs lacks what the job commands need; run this to record job state and allow \
                 pauses and triggers:\nALTER TABLE \
                 jobs ADD COLUMN last_outcome TEXT;"
            );
        }
        let unsupported = Store {
            admin: Arc::new(JobStore {
                mem: InMemoryLockProvider::new(),
                states: Vec::new(),
                definitions: std::sync::Mutex::new(Vec::new()),
                runs: Vec::new(),
                missing: None,
                supported: false,
            }),
            table: "jobs".into(),
            invocation: crate::invocation::Invocation::default(),
            actor: "tester@cli".into(),
            description: "a test store".into(),
        };
        let run = exec(&unsupported, &["jobs"]).await;
        assert_eq!(exit(&run), Exit::Usage);
        assert!(
            message(&run).starts_with("this store does not record job state"),
            "{}",
            message(&run)
        );
    }

    /// `pause` and `resume` by job name, recorded with the actor; `jobs` shows the pause, the
    /// replica that ignores it and the last action; refusals exit as documented.
    #[tokio::test]
    async fn pause_and_resume_steer_a_job_by_its_name_with_who_did_it() {
        let (mem, store) = memory();
        let defs = [Definition::new(
            "sync",
            "sync-lock",
            r#"{"name":"sync","every":"5m"}"#,
        )];
        for (replica, version) in [("pod-new", "0.2.0"), ("pod-old", "0.1.0")] {
            mem.publish_definitions(replica, version, &defs, Duration::from_mins(1))
                .await
                .expect("published");
        }
        let run = exec(
            &store,
            &[
                "pause",
                "sync",
                "--for",
                "1h",
                "--reason",
                "upstream <down>",
            ],
        )
        .await;
        assert_eq!(exit(&run), Exit::Done, "{}", message(&run));
        assert!(
            run.out
                .starts_with(r#""sync" (lock "sync-lock") paused until "#),
            "{}",
            run.out
        );
        assert!(run.err.contains("pod-old (0.1.0)"), "{}", run.err);
        let entry = mem.entry("sync-lock").await.unwrap().expect("a row");
        assert!(entry.is_paused());
        assert_eq!(entry.pause().map(|p| p.by.as_str()), Some("tester@cli"));
        let run = exec(&store, &["jobs"]).await;
        assert!(run.out.contains("PAUSED"), "{}", run.out);
        assert!(
            run.out.contains("by tester@cli") && run.out.contains("upstream <down>"),
            "{}",
            run.out
        );
        assert!(run.out.contains("still run it: pod-old"), "{}", run.out);
        assert!(run.out.contains("last actions:"), "{}", run.out);

        let run = exec(&store, &["resume", "sync-lock"]).await;
        assert_eq!(exit(&run), Exit::Done, "{}", message(&run));
        assert!(
            run.out.starts_with(r#"resumed "sync" (lock "sync-lock")"#),
            "{}",
            run.out
        );
        let entry = mem.entry("sync-lock").await.unwrap().expect("a row");
        assert!(!entry.is_paused());
        assert_eq!(
            entry.last_action().map(|a| a.kind.as_str()),
            Some("resumed")
        );

        let history = exec(&store, &["history", "sync"]).await;
        assert!(
            history
                .out
                .starts_with(r#"last action on "sync" (lock "sync-lock"): resumed by tester@cli"#),
            "{}",
            history.out
        );

        let again = exec(&store, &["resume", "sync"]).await;
        assert_eq!(exit(&again), Exit::Refused, "{}", message(&again));
        assert!(
            message(&again).contains("not paused"),
            "{}",
            message(&again)
        );
    }

    #[tokio::test]
    async fn a_pause_in_the_past_or_of_an_unknown_job_changes_nothing() {
        let (mem, store) = memory();
        let defs = [Definition::new(
            "sync",
            "sync",
            r#"{"name":"sync","every":"5m"}"#,
        )];
        mem.publish_definitions("pod", "0.2.0", &defs, Duration::from_mins(1))
            .await
            .expect("published");
        let past = exec(
            &store,
            &["pause", "sync", "--until", "2020-01-01T00:00:00Z"],
        )
        .await;
        assert_eq!(exit(&past), Exit::Usage, "{}", message(&past));
        assert!(
            message(&past).contains("must end in the future"),
            "{}",
            message(&past)
        );
        assert!(
            mem.entry("sync").await.unwrap().is_none(),
            "nothing written"
        );
        let unknown = exec(&store, &["pause", "synk"]).await;
        assert_eq!(exit(&unknown), Exit::Refused, "{}", message(&unknown));
        assert!(
            message(&unknown).contains(r#"no job named "synk""#),
            "{}",
            message(&unknown)
        );
        let long = "x".repeat(300);
        let reason = exec(&store, &["pause", "sync", "--reason", &long]).await;
        assert_eq!(exit(&reason), Exit::Usage, "{}", message(&reason));
        assert!(
            mem.entry("sync").await.unwrap().is_none(),
            "nothing written"
        );
    }

    /// `trigger --wait` against a running scheduler on the same store: one run, reported with its
    /// replica and outcome; refusals while held, while paused, and for a job no replica runs.
    #[tokio::test]
    async fn trigger_runs_a_job_now_and_waits_for_its_outcome() {
        use shedlock_core::{Job, LockingTaskExecutor, Schedule, Scheduler};
        let (mem, store) = memory();
        let executor = LockingTaskExecutor::builder(mem.clone())
            .owner_id("replica-1")
            .default_at_most(Duration::from_secs(30))
            .build()
            .expect("executor");
        let scheduler = Scheduler::new(executor);
        let hourly = Schedule::every(Duration::from_hours(1)).expect("schedule");
        scheduler
            .add(Job::new("sync", hourly, |_| async {
                Err::<(), _>("upstream said 503")
            }))
            .expect("added");
        scheduler.start().await.expect("started");
        // The scheduler publishes its jobs right after it starts.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while mem.definitions().await.expect("definitions").is_empty() {
            assert!(tokio::time::Instant::now() < deadline, "never published");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let run = exec(&store, &["trigger", "sync", "--wait"]).await;
        assert_eq!(exit(&run), Exit::Done, "{}", message(&run));
        assert!(run.out.contains("taken by replica-1"), "{}", run.out);
        assert!(
            run.out.contains("ran on replica-1: failed in ")
                && run.out.contains("upstream said 503"),
            "{}",
            run.out
        );
        let held = take(&mem, "sync", "someone", Duration::from_mins(1)).await;
        let refused = exec(&store, &["trigger", "sync"]).await;
        assert_eq!(exit(&refused), Exit::Refused, "{}", message(&refused));
        assert!(
            message(&refused).contains("is running now"),
            "{}",
            message(&refused)
        );
        mem.release(&held, Duration::ZERO).await.expect("released");
        assert_eq!(exit(&exec(&store, &["pause", "sync"]).await), Exit::Done);
        let paused = exec(&store, &["trigger", "sync"]).await;
        assert_eq!(exit(&paused), Exit::Refused, "{}", message(&paused));
        assert!(
            message(&paused).contains("resume it first"),
            "{}",
            message(&paused)
        );
        scheduler.shutdown(Duration::from_secs(1)).await;
    }

    #[tokio::test]
    async fn a_trigger_nobody_takes_expires_and_says_so() {
        let (mem, store) = memory();
        let defs = [Definition::new(
            "sync",
            "sync",
            r#"{"name":"sync","every":"5m"}"#,
        )];
        mem.publish_definitions("gone-pod", "0.2.0", &defs, Duration::from_mins(1))
            .await
            .expect("published");
        let run = exec(&store, &["trigger", "sync", "--wait", "--expires", "300ms"]).await;
        assert_eq!(exit(&run), Exit::Refused, "{}", message(&run));
        assert!(
            message(&run).contains("nobody picked up"),
            "{}",
            message(&run)
        );
        let unknown = exec(&store, &["trigger", "nightly"]).await;
        assert_eq!(exit(&unknown), Exit::Refused, "{}", message(&unknown));
    }
}
