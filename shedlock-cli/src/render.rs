//! What a person reads, aligned tables, `key: value` blocks and human durations, and what a script
//! reads, `--json`, from [`LockEntry`]s.

use std::fmt::Write as _;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use shedlock_core::admin::model::{JobView, LockState, LockView, RunView, ScheduleView};
use shedlock_core::admin::{AdminAction, LockEntry, election_owner_id};
use shedlock_core::pause::Pause;

use crate::invocation::Invocation;

/// A time as RFC 3339 in UTC with all the precision it has (`2026-12-01T20:31:02.123456Z`), so a
/// value printed here and passed back as `--locked-at` is exactly the stored one.
pub(crate) fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// A duration in at most its two largest units: `850ms`, `48s`, `4m12s`, `3h5m`, `2d4h`.
pub(crate) fn human(d: Duration) -> String {
    shedlock_duration::approx(d)
}

/// How long before `now` `at` was (`12s ago`), or how long after (`in 48s`).
pub(crate) fn relative(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    match (now - at).to_std() {
        Ok(ago) => format!("{} ago", human(ago)),
        Err(_) => format!("in {}", human((at - now).to_std().unwrap_or_default())),
    }
}

/// The entry's state word: `held`, `free`, or `leader` for a held election row.
pub(crate) fn state(entry: &LockEntry) -> &'static str {
    LockState::of(entry).as_str()
}

fn token(entry: &LockEntry) -> String {
    entry
        .record()
        .fencing_token()
        .map_or_else(|| "-".to_owned(), |t| t.to_string())
}

/// `list`: one aligned row per lock, like `kubectl get`, with a LAST FIRE column when any lock has
/// a recorded fire.
pub(crate) fn table(entries: &[LockEntry]) -> String {
    if entries.is_empty() {
        return "no locks\n".to_owned();
    }
    let fires = entries.iter().any(|e| e.last_fire().is_some());
    let mut rows = vec![
        [
            "NAME",
            "STATE",
            "HOLDER",
            "LOCKED",
            "REMAINING",
            "TOKEN",
            "LAST FIRE",
        ]
        .map(str::to_owned),
    ];
    for e in entries {
        let r = e.record();
        let now = e.store_now();
        rows.push([
            r.name().to_owned(),
            state(e).to_owned(),
            r.owner().to_owned(),
            relative(r.locked_at(), now),
            e.remaining().map_or_else(|| "-".to_owned(), human),
            token(e),
            e.last_fire()
                .map_or_else(|| "-".to_owned(), |f| relative(f, now)),
        ]);
    }
    let columns = if fires { 7 } else { 6 };
    let rows: Vec<Vec<String>> = rows.into_iter().map(|r| r[..columns].to_vec()).collect();
    aligned(&rows)
}

/// Rows as aligned columns, three spaces apart. The last column is not padded, and no line ends in
/// white space.
fn aligned(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, width) in widths.iter().enumerate() {
            if c + 1 == columns {
                line.push_str(&row[c]);
            } else {
                let _ = write!(line, "{:<width$}   ", row[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A value for one table cell, with control characters such as a line break in a name or an error
/// escaped, which keeps each row on one line.
pub(crate) fn cell(text: &str) -> String {
    if text.chars().any(char::is_control) {
        text.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().collect()
                } else {
                    c.to_string()
                }
            })
            .collect()
    } else {
        text.to_owned()
    }
}

/// An error text for a table: its first line, cut to `max` characters with `…`.
/// The first line of `text`, escaped and cut to 200 characters, for a sentence.
pub(crate) fn one_line(text: &str) -> String {
    short(text, 200)
}

fn short(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut cut = cell(line);
    let more = text.lines().nth(1).is_some();
    if cut.chars().count() > max {
        cut = cut.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
    } else if more {
        cut.push_str(" …");
    }
    cut
}

/// A job's name for a table: with its lock's name where that differs.
fn job_name(job: &JobView) -> String {
    if job.job == job.lock_name {
        cell(&job.job)
    } else {
        format!("{} (lock {})", cell(&job.job), cell(&job.lock_name))
    }
}

/// A schedule in words, or as written. It is `unknown` when no replica publishes the job.
fn schedule(view: &ScheduleView) -> String {
    view.schedule_words
        .clone()
        .or_else(|| view.schedule.as_ref().map(|s| format!("cron {s}")))
        .map_or_else(|| "unknown".to_owned(), |s| cell(&s))
}

/// `jobs`: one aligned row per job, then a line per job whose replicas disagree, and a line per
/// failing job.
pub(crate) fn jobs_table(jobs: &[JobView], invocation: &Invocation) -> String {
    if jobs.is_empty() {
        return "no jobs\n".to_owned();
    }
    let mut rows = vec![
        [
            "JOB",
            "SCHEDULE",
            "NEXT",
            "LAST RUN",
            "OUTCOME",
            "FAILURES",
            "LAST SUCCESS",
            "HELD",
            "PAUSED",
            "REPLICAS",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    let dash = || "-".to_owned();
    for job in jobs {
        let now = job.store_now;
        let ago = |t: Option<DateTime<Utc>>| t.map_or_else(dash, |t| relative(t, now));
        let last = job.last_run.as_ref();
        rows.push(vec![
            job_name(job),
            schedule(&job.schedule),
            ago(job.next_fire),
            ago(last.map(|r| r.ended)),
            last.map_or_else(dash, |r| r.outcome.clone()),
            if job.state_recorded {
                job.consecutive_failures.to_string()
            } else {
                dash()
            },
            ago(job.last_success),
            if job.held { "yes" } else { "no" }.to_owned(),
            job.paused
                .as_ref()
                .map_or_else(dash, |p| paused_until(p, now)),
            match (job.replicas.len(), job.disagreeing) {
                (n, true) => format!("{n} (specs differ)"),
                (n, false) => n.to_string(),
            },
        ]);
    }
    let mut out = aligned(&rows);
    for job in jobs.iter().filter(|j| j.disagreeing) {
        let _ = writeln!(
            out,
            "\n{:?}: its replicas publish different specs:",
            job.job
        );
        for spec in &job.specs {
            let _ = writeln!(
                out,
                "  {}: {}",
                spec.replicas
                    .iter()
                    .map(|r| cell(r))
                    .collect::<Vec<_>>()
                    .join(", "),
                schedule(&spec.schedule)
            );
        }
    }
    out.push_str(&steer_notes(jobs));
    for job in jobs.iter().filter(|j| j.is_failing()) {
        let last = job.last_run.as_ref();
        let what = match last.and_then(|r| r.error.as_deref()) {
            Some(error) => format!("failed: {}", short(error, 100)),
            None => last.map_or_else(|| "failed".to_owned(), |r| r.outcome.clone()),
        };
        let _ = writeln!(
            out,
            "\n{:?}: {} failure{} in a row, the last {what}; see `{}`",
            job.job,
            job.consecutive_failures,
            if job.consecutive_failures == 1 {
                ""
            } else {
                "s"
            },
            invocation.command("history", Some(&job.job), &[])
        );
    }
    out
}

/// Below the jobs table: each paused job's pause, with the replicas that ignore it, and each job's
/// last operator action.
fn steer_notes(jobs: &[JobView]) -> String {
    let mut out = String::new();
    for job in jobs {
        if let Some(pause) = &job.paused {
            let _ = writeln!(
                out,
                "\n{}: {}",
                job_name(job),
                pause_note(pause, job.store_now)
            );
            if !job.pause_ignored_by.is_empty() {
                let _ = writeln!(
                    out,
                    "  these replicas predate pauses and still run it: {}",
                    job.pause_ignored_by
                        .iter()
                        .map(|r| cell(r))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
    }
    let actions: Vec<String> = jobs
        .iter()
        .filter_map(|job| {
            let action = job.last_action.as_ref()?;
            Some(format!(
                "  {}: {}",
                job_name(job),
                action_note(action, job.store_now)
            ))
        })
        .collect();
    if !actions.is_empty() {
        let _ = writeln!(out, "\nlast actions:\n{}", actions.join("\n"));
    }
    out
}

/// The PAUSED cell: `until resumed`, or the end relative to now.
fn paused_until(pause: &Pause, now: DateTime<Utc>) -> String {
    pause
        .until
        .map_or_else(|| "until resumed".to_owned(), |until| relative(until, now))
}

/// A pause in a sentence: `paused until resumed by ann 5m ago: upstream down`, every text escaped.
pub(crate) fn pause_note(pause: &Pause, now: DateTime<Utc>) -> String {
    let until = match pause.until {
        Some(until) => format!("until {} ({})", timestamp(until), relative(until, now)),
        None => "until resumed".to_owned(),
    };
    let mut note = format!("paused {until} by {}", cell(&pause.by));
    // A pause just set needs no "0ms ago".
    if now - pause.since >= chrono::Duration::seconds(1) {
        let _ = write!(note, " {}", relative(pause.since, now));
    }
    if let Some(reason) = pause.reason.as_deref().filter(|r| !r.is_empty()) {
        let _ = write!(note, ": {}", cell(reason));
    }
    note
}

/// An operator's action in words: `resumed by bob 3m ago (2026-12-05T…Z)`.
pub(crate) fn action_note(action: &AdminAction, now: DateTime<Utc>) -> String {
    format!(
        "{} by {} {} ({})",
        action.kind,
        cell(&action.by),
        relative(action.at, now),
        timestamp(action.at)
    )
}

/// `history`: one aligned row per run, newest first.
pub(crate) fn history_table(runs: &[RunView], now: DateTime<Utc>) -> String {
    let mut rows = vec![
        ["FIRE", "RUNNER", "STARTED", "DURATION", "OUTCOME", "ERROR"]
            .map(str::to_owned)
            .to_vec(),
    ];
    for run in runs {
        rows.push(vec![
            timestamp(run.fire),
            cell(&run.runner),
            relative(run.started, now),
            human(Duration::from_millis(run.duration_ms)),
            run.outcome.clone(),
            run.error
                .as_deref()
                .map_or_else(|| "-".to_owned(), |e| short(e, 80)),
        ]);
    }
    aligned(&rows)
}

/// The safe unlock command for exactly this acquisition, on the store `invocation` reaches.
pub(crate) fn unlock_command(entry: &LockEntry, invocation: &Invocation) -> String {
    let r = entry.record();
    let locked_at = timestamp(r.locked_at());
    let token = r.fencing_token().map(|t| t.to_string());
    let mut flags = vec![
        ("--owner", Some(r.owner())),
        ("--locked-at", Some(locked_at.as_str())),
    ];
    if let Some(token) = &token {
        flags.push(("--token", Some(token)));
    }
    if entry.is_election() {
        flags.push(("--election", None));
    }
    invocation.command("unlock", Some(r.name()), &flags)
}

/// `show`: one lock in full, every time with full precision.
pub(crate) fn details(entry: &LockEntry, invocation: &Invocation) -> String {
    let r = entry.record();
    let now = entry.store_now();
    let state = match entry.remaining() {
        Some(left) => format!("{}, {} left", state(entry), human(left)),
        None => "free".to_owned(),
    };
    let mut lines = vec![
        ("name", r.name().to_owned()),
        ("state", state),
        ("holder", r.owner().to_owned()),
        (
            "locked at",
            format!(
                "{} ({})",
                timestamp(r.locked_at()),
                relative(r.locked_at(), now)
            ),
        ),
        (
            "lock until",
            format!(
                "{} ({})",
                timestamp(r.lock_until()),
                relative(r.lock_until(), now)
            ),
        ),
        ("token", token(entry)),
        (
            "last fire",
            entry.last_fire().map_or_else(
                || "-".to_owned(),
                |f| format!("{} ({})", timestamp(f), relative(f, now)),
            ),
        ),
        ("store now", timestamp(now)),
    ];
    if entry.is_election() {
        lines.push((
            "election",
            format!(
                "a leader latch's row; {} leads while it is held",
                election_owner_id(r.owner())
            ),
        ));
    }
    if entry.is_held() {
        lines.push(("unlock with", unlock_command(entry, invocation)));
    }
    key_values(&lines)
}

/// `key: value` lines with the values aligned.
pub(crate) fn key_values(lines: &[(&str, String)]) -> String {
    let width = lines.iter().map(|(k, _)| k.len() + 1).max().unwrap_or(0);
    let mut out = String::new();
    for (key, value) in lines {
        let _ = writeln!(out, "{:<width$} {value}", format!("{key}:"));
    }
    out
}

/// `list --json`: an array of [`LockView`]s, the shape `show --json` prints one of.
pub(crate) fn json_list(entries: &[LockEntry]) -> Vec<LockView> {
    entries.iter().map(LockView::from).collect()
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use shedlock_core::provider::LockRecord;

    use super::*;

    fn at(secs: i64, micros: u32) -> DateTime<Utc> {
        Utc.timestamp_opt(1_764_620_000 + secs, micros * 1_000)
            .single()
            .expect("a valid time")
    }

    fn entry(name: &str, owner: &str, locked: i64, until: i64, now: i64) -> LockEntry {
        let record = LockRecord::new(name, owner, at(locked, 123_456), at(until, 123_456))
            .with_fencing_token(Some(42));
        LockEntry::new(record, at(now, 0), None)
    }

    #[test]
    fn human_durations_show_two_units_at_most() {
        let cases = [
            (Duration::from_millis(850), "850ms"),
            (Duration::from_secs(48), "48s"),
            (Duration::from_secs(252), "4m12s"),
            (Duration::from_hours(1), "1h"),
            (Duration::from_secs(3_600 + 5 * 60 + 7), "1h5m"),
            (Duration::from_secs(3_600 + 7), "1h"),
            (Duration::from_secs(2 * 86_400 + 4 * 3_600 + 59), "2d4h"),
            (Duration::ZERO, "0ms"),
        ];
        for (d, want) in cases {
            assert_eq!(human(d), want, "{d:?}");
        }
        assert_eq!(relative(at(0, 0), at(12, 0)), "12s ago");
        assert_eq!(relative(at(60, 0), at(12, 0)), "in 48s");
    }

    #[test]
    fn timestamps_keep_every_digit_the_store_has() {
        assert_eq!(timestamp(at(0, 123_456)), "2025-12-01T20:13:20.123456Z");
        assert_eq!(timestamp(at(0, 123_000)), "2025-12-01T20:13:20.123Z");
        assert_eq!(timestamp(at(0, 0)), "2025-12-01T20:13:20Z");
        let back: DateTime<Utc> = DateTime::parse_from_rfc3339(&timestamp(at(0, 123_456)))
            .expect("parses")
            .into();
        assert_eq!(back, at(0, 123_456));
    }

    #[test]
    fn the_table_is_aligned_and_leaves_out_an_empty_last_fire_column() {
        let entries = [
            entry("report", "pod-7:1:ab12cd", 0, 60, 12),
            entry("a-much-longer-name", "x", -3_600, -3_000, 12),
            entry("scheduler", "pod-2:1:cc#election", 0, 15, 2),
        ];
        let out = table(&entries);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4, "{out}");
        assert!(lines[0].starts_with("NAME "), "{out}");
        assert!(!lines[0].contains("LAST FIRE"), "{out}");
        let col = |line: &str, word: &str| line.find(word).expect(word);
        let state_col = col(lines[0], "STATE");
        assert_eq!(col(lines[1], "held"), state_col, "{out}");
        assert_eq!(col(lines[2], "free"), state_col, "{out}");
        assert_eq!(col(lines[3], "leader"), state_col, "{out}");
        assert!(
            lines[1].contains("11s ago") && lines[1].contains("48s"),
            "{out}"
        );
        assert!(
            lines[2].contains(" - "),
            "a free lock has no time left: {out}"
        );
        assert!(lines.iter().all(|l| l == &l.trim_end()), "{out:?}");

        let fired = LockEntry::new(entries[0].record().clone(), at(12, 0), Some(at(0, 0)));
        let out = table(&[fired]);
        assert!(
            out.lines().next().is_some_and(|l| l.ends_with("LAST FIRE")),
            "{out}"
        );
        assert_eq!(table(&[]), "no locks\n");
    }

    #[test]
    fn show_prints_the_exact_unlock_command() {
        let out = details(
            &entry("report", "pod 7's", 0, 60, 12),
            &Invocation::default(),
        );
        assert!(out.contains("state:       held, 48s left"), "{out}");
        assert!(
            out.contains(
                "unlock with: shedlock unlock report --owner 'pod 7'\\''s' \
                 --locked-at 2025-12-01T20:13:20.123456Z --token 42"
            ),
            "{out}"
        );
        let free = details(&entry("report", "pod-7", 0, 10, 12), &Invocation::default());
        assert!(!free.contains("unlock with"), "{free}");
        let election = details(
            &entry("scheduler", "pod-2:1:cc#election", 0, 15, 2),
            &Invocation::default(),
        );
        assert!(election.contains("pod-2:1:cc leads"), "{election}");
        assert!(election.contains("--token 42 --election"), "{election}");
    }

    #[test]
    fn json_carries_what_the_table_shows() {
        let text = serde_json::to_string(&json_list(&[entry("report", "pod-7", 0, 60, 12)]))
            .expect("serialises");
        let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let value = &value[0];
        assert_eq!(value["name"], "report");
        assert_eq!(value["state"], "held");
        assert_eq!(value["holder"], "pod-7");
        assert_eq!(value["locked_at"], "2025-12-01T20:13:20.123456Z");
        assert_eq!(value["remaining_ms"], 48_123);
        assert_eq!(value["fencing_token"], 42);
        assert_eq!(value["last_fire"], serde_json::Value::Null);
        assert_eq!(value["election"], false);
    }

    fn jobs_sample() -> Vec<JobView> {
        use shedlock_core::jobs::{Definition, DefinitionEntry, JobState, RunEntry, RunOutcome};
        let def = |job: &str, replica: &str, spec: &str| {
            DefinitionEntry::new(
                Definition::new(job, job, spec),
                replica,
                "0.2.0",
                at(-5, 0),
                at(25, 0),
            )
        };
        let definitions = [
            def(
                "nightly-report",
                "pod-7:1:ab12cd",
                r#"{"name":"nightly-report","cron":"0 0 3 * * *","zone":"Europe/Berlin"}"#,
            ),
            def(
                "nightly-report",
                "pod-8:1:ef34ab",
                r#"{"name":"nightly-report","cron":"0 0 3 * * *","zone":"Europe/Berlin"}"#,
            ),
            def(
                "sync-invoices",
                "pod-7:1:ab12cd",
                r#"{"name":"sync-invoices","every":"5m"}"#,
            ),
            def(
                "sync-invoices",
                "pod-8:1:ef34ab",
                r#"{"name":"sync-invoices","every":"5m"}"#,
            ),
        ];
        let run = |lock: &str, ago: i64, took: i64, outcome| {
            RunEntry::new(
                lock,
                at(-ago, 0),
                "pod-8:1:ef34ab",
                at(-ago, 0),
                at(-ago + took, 0),
                outcome,
            )
        };
        let failing = JobState::default()
            .after(run("sync-invoices", 900, 2, RunOutcome::Succeeded))
            .after(run(
                "sync-invoices",
                600,
                31,
                RunOutcome::Failed("connect to billing:443: connection refused".into()),
            ))
            .after(run(
                "sync-invoices",
                300,
                30,
                RunOutcome::Failed("connect to billing:443: connection refused".into()),
            ));
        let fine =
            JobState::default().after(run("nightly-report", 58_000, 252, RunOutcome::Succeeded));
        let row = |name: &str| {
            LockEntry::new(
                LockRecord::new(name, "pod-8:1:ef34ab", at(-300, 0), at(-270, 0)),
                at(0, 0),
                None,
            )
        };
        let entries = [
            row("nightly-report").with_state(fine),
            row("sync-invoices").with_state(failing),
        ];
        JobView::collect(&definitions, &entries, at(0, 0))
    }

    #[test]
    fn the_jobs_table_is_aligned_and_names_failing_jobs() {
        let out = jobs_table(&jobs_sample(), &Invocation::default());
        println!("{out}");
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].starts_with("JOB ") && lines[0].ends_with("REPLICAS"),
            "{out}"
        );
        let col = |line: &str, word: &str| line.find(word).expect(word);
        let schedule = col(lines[0], "SCHEDULE");
        assert_eq!(col(lines[1], "at 03:00"), schedule, "{out}");
        assert_eq!(col(lines[2], "every 5 minutes"), schedule, "{out}");
        assert!(
            lines[2].contains("failed") && lines[2].contains("4m30s ago"),
            "{out}"
        );
        assert!(lines.iter().all(|l| l == &l.trim_end()), "{out:?}");
        assert!(
            out.ends_with(
                "\n\"sync-invoices\": 2 failures in a row, the last failed: connect to \
                 billing:443: connection refused; see `shedlock history sync-invoices`\n"
            ),
            "{out}"
        );
        assert_eq!(jobs_table(&[], &Invocation::default()), "no jobs\n");
    }

    #[test]
    fn the_history_table_shows_one_line_per_run() {
        use shedlock_core::jobs::{RunEntry, RunOutcome};
        let runs = [
            RunEntry::new(
                "sync",
                at(-300, 0),
                "pod-8",
                at(-300, 0),
                at(-270, 0),
                RunOutcome::Failed("a\nb".into()),
            ),
            RunEntry::new(
                "sync",
                at(-600, 0),
                "pod-7",
                at(-600, 0),
                at(-599, 500_000),
                RunOutcome::Succeeded,
            ),
        ]
        .iter()
        .map(RunView::from)
        .collect::<Vec<_>>();
        let out = history_table(&runs, at(0, 0));
        println!("{out}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert!(
            lines[1].starts_with("2025-12-01T20:08:20Z   pod-8    5m ago    30s "),
            "{out}"
        );
        assert!(lines[1].ends_with("failed      a …"), "{out}");
        assert!(
            lines[2].contains("1s ") && lines[2].ends_with("succeeded   -"),
            "{out}"
        );
        assert_eq!(cell("a\tb\u{7}"), "a\\tb\\u{7}");
        assert_eq!(short(&"x".repeat(100), 10), format!("{}…", "x".repeat(9)));
    }
}
