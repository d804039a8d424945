//! The pages: the jobs, one job, the locks. Rendered on the server from the same reads as the
//! API, readable with JavaScript off. The page's script refreshes the tables and sends the
//! actions (assets/app.js). What each column means is in docs/dashboard.md, "The pages".

use std::fmt::Write as _;

use axum::extract::State;
use axum::response::Response;
use chrono::{DateTime, Utc};
use shedlock_core::admin::election_owner_id;
use shedlock_core::admin::model::{JobView, LockState, RunView};
use shedlock_core::admin::{LockEntry, TRIGGER_MARK};
use shedlock_core::pause::Pause;

use crate::failure::Failure;
use crate::html::{Base, Mode, exact, page_response, segment, text, when};
use crate::read::{self, Name, Shared, Snapshot, snapshot};
use crate::show::Show;

/// A failure answered as a page.
pub(crate) struct PageFailure(Failure);

impl From<Failure> for PageFailure {
    fn from(failure: Failure) -> Self {
        Self(failure)
    }
}

impl axum::response::IntoResponse for PageFailure {
    fn into_response(self) -> Response {
        self.0.page()
    }
}

/// `GET /`: every job, filtered by `?show=`.
pub(crate) async fn jobs(
    State(state): State<Shared>,
    base: Base,
    show: Show,
) -> Result<Response, PageFailure> {
    let snapshot = snapshot(state.admin.as_ref()).await?;
    let shown: Vec<&JobView> = snapshot.jobs.iter().filter(|j| show.keeps(j)).collect();
    let strips = strips(&state, &shown).await;
    let mode = state.access.mode();
    let actions = mode != Mode::ReadOnly;
    let mut body = String::with_capacity(4096 + shown.len() * 1024);
    body.push_str("<h1>Jobs</h1>\n<p class=\"filters\">Show:");
    for choice in Show::ALL {
        let href = if choice == Show::All {
            text(&base.root)
        } else {
            format!("{}?show={}", text(&base.root), choice.word())
        };
        let current = if choice == show {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = write!(body, " <a href=\"{href}\"{current}>{}</a>", choice.word());
    }
    body.push_str("</p>\n");
    let _ = write!(
        body,
        "<table id=\"jobs\" data-refresh>\n<thead><tr><th>Job</th><th>Schedule</th>\
         <th>Next fire</th><th>Last run</th><th>Failures</th><th>Paused</th><th>Recent runs</th>{}\
         </tr></thead>\n<tbody>\n",
        if actions { "<th>Actions</th>" } else { "" }
    );
    for (job, strip) in shown.iter().zip(&strips) {
        job_row(
            &mut body,
            job,
            strip,
            snapshot.now,
            actions,
            &text(&base.path),
        );
    }
    if shown.is_empty() {
        let _ = writeln!(
            body,
            "<tr class=\"empty\"><td colspan=\"{}\">{}</td></tr>",
            7 + usize::from(actions),
            match show {
                Show::All => "No jobs: no replica publishes one and no lock row recorded a run.",
                Show::Failing => "No failing jobs.",
                Show::Paused => "No paused jobs.",
                Show::Running => "No job is running.",
            }
        );
    }
    let _ = write!(
        body,
        "</tbody>\n</table>\n<p class=\"now\">Read at {} by the store's clock.</p>\n",
        exact(snapshot.now)
    );
    Ok(page_response("Jobs", &body, Some((&base, mode))))
}

/// The last runs of each job, for the strips: read a few jobs at a time. A job whose history
/// cannot be read shows an empty strip.
async fn strips(state: &Shared, jobs: &[&JobView]) -> Vec<Vec<RunView>> {
    let mut strips = Vec::with_capacity(jobs.len());
    for chunk in jobs.chunks(8) {
        let mut set = tokio::task::JoinSet::new();
        for (i, job) in chunk.iter().enumerate() {
            let admin = std::sync::Arc::clone(&state.admin);
            let lock = job.lock_name.clone();
            set.spawn(async move { (i, read::history(admin.as_ref(), &lock, crate::STRIP).await) });
        }
        let mut got: Vec<Vec<RunView>> = vec![Vec::new(); chunk.len()];
        while let Some(done) = set.join_next().await {
            if let Ok((i, Ok(runs))) = done {
                got[i] = runs.iter().map(RunView::from).collect();
            }
        }
        strips.extend(got);
    }
    strips
}

fn job_row(
    out: &mut String,
    job: &JobView,
    strip: &[RunView],
    now: DateTime<Utc>,
    actions: bool,
    base: &str,
) {
    let mut classes = vec!["job"];
    if job.paused.is_some() {
        classes.push("is-paused");
    }
    if job.held {
        classes.push("is-running");
    }
    if job.is_failing() {
        classes.push("is-failing");
    }
    let _ = write!(
        out,
        "<tr class=\"{}\" data-job=\"{}\">",
        classes.join(" "),
        text(&job.job)
    );
    // The job's name, its lock's when it differs, and whether it runs now.
    let _ = write!(
        out,
        "<td class=\"name\"><a href=\"{base}jobs/{}\">{}</a>",
        segment(&job.job),
        text(&job.job)
    );
    if job.lock_name != job.job {
        let _ = write!(out, " <small>lock {}</small>", text(&job.lock_name));
    }
    if job.held {
        out.push_str(" <span class=\"badge running\">running</span>");
    }
    if job.disagreeing {
        out.push_str(" <span class=\"badge warn\" title=\"the replicas publish different specs\">specs differ</span>");
    }
    out.push_str("</td>");
    let _ = write!(out, "<td class=\"schedule\">{}</td>", schedule(job));
    let _ = write!(
        out,
        "<td class=\"next\">{}</td>",
        job.next_fire
            .map_or_else(|| "—".to_owned(), |at| when(at, now))
    );
    let _ = write!(
        out,
        "<td class=\"last\">{}</td>",
        last_run(job.last_run.as_ref(), now)
    );
    let _ = write!(
        out,
        "<td class=\"failures\">{}</td>",
        job.consecutive_failures
    );
    let _ = write!(
        out,
        "<td class=\"paused\">{}</td>",
        job.paused
            .as_ref()
            .map_or_else(|| "—".to_owned(), |p| paused(p, now))
    );
    out.push_str("<td class=\"history\">");
    // Oldest first, so the strip reads left to right.
    for run in strip.iter().rev() {
        let _ = write!(
            out,
            "<span class=\"run {}\" title=\"{} on {}, {} ({})\"></span>",
            text(&run.outcome),
            text(&run.outcome),
            text(&run.runner),
            exact(run.fire),
            shedlock_duration::approx(std::time::Duration::from_millis(run.duration_ms))
        );
    }
    out.push_str("</td>");
    if actions {
        out.push_str("<td class=\"actions\">");
        job_actions(out, job, base);
        out.push_str("</td>");
    }
    out.push_str("</tr>\n");
}

fn schedule(job: &JobView) -> String {
    match (&job.schedule.schedule_words, &job.schedule.schedule) {
        (Some(words), Some(spec)) => format!("{}<br><code>{}</code>", text(words), text(spec)),
        (None, Some(spec)) => format!("<code>{}</code>", text(spec)),
        _ => "<span class=\"muted\">not published</span>".to_owned(),
    }
}

fn last_run(run: Option<&RunView>, now: DateTime<Utc>) -> String {
    let Some(run) = run else {
        return "<span class=\"muted\">none recorded</span>".to_owned();
    };
    let mut out = format!(
        "<span class=\"badge {}\">{}</span> {} on <code>{}</code>, took {}",
        text(&run.outcome),
        text(&run.outcome),
        when(run.ended, now),
        text(&run.runner),
        shedlock_duration::approx(std::time::Duration::from_millis(run.duration_ms))
    );
    if let Some(error) = &run.error {
        let _ = write!(out, "<div class=\"error\">{}</div>", text(error));
    }
    out
}

fn paused(pause: &Pause, now: DateTime<Utc>) -> String {
    let until = pause.until.map_or_else(
        || "until resumed".to_owned(),
        |at| format!("until {}", when(at, now)),
    );
    let mut out = format!("paused {until} by {}", text(&pause.by));
    if let Some(reason) = &pause.reason {
        let _ = write!(out, ": <q>{}</q>", text(reason));
    }
    out
}

/// The action forms of a job. The page's script sends each to its `action` as JSON with the
/// token; without the script a form's plain `POST` is refused, changing nothing.
fn job_actions(out: &mut String, job: &JobView, base: &str) {
    let name = text(&job.job);
    let api = format!("{base}api/jobs/{}", segment(&job.job));
    if job.paused.is_some() {
        let _ = write!(
            out,
            "<form class=\"act\" data-action=\"resume\" data-job=\"{name}\" method=\"post\" action=\"{api}/resume\">\
             <button type=\"submit\">Resume</button></form>"
        );
    } else {
        let _ = write!(
            out,
            "<form class=\"act\" data-action=\"pause\" data-job=\"{name}\" method=\"post\" action=\"{api}/pause\">\
             <input name=\"for\" placeholder=\"for: 30m\" size=\"8\" title=\"how long, as 30m or 2h; empty: until resumed\" aria-label=\"pause for\">\
             <input name=\"reason\" placeholder=\"why\" size=\"12\" aria-label=\"reason\">\
             <button type=\"submit\">Pause</button></form>\
             <form class=\"act\" data-action=\"trigger\" data-job=\"{name}\" method=\"post\" action=\"{api}/trigger\">\
             <button type=\"submit\">Run now</button></form>"
        );
    }
}

/// `GET /jobs/{name}`: the job's definitions, its lock row and its history with errors.
pub(crate) async fn job(
    State(state): State<Shared>,
    base: Base,
    Name(name): Name,
) -> Result<Response, PageFailure> {
    let snapshot = snapshot(state.admin.as_ref()).await?;
    let job = snapshot.job(&name).ok_or_else(|| snapshot.unknown(&name))?;
    let runs = read::history(state.admin.as_ref(), &job.lock_name, crate::HISTORY).await?;
    let runs: Vec<RunView> = runs.iter().map(RunView::from).collect();
    let mode = state.access.mode();
    let actions = mode != Mode::ReadOnly;
    let body = job_page(job, &snapshot, &runs, actions, &text(&base.path));
    Ok(page_response(&job.job, &body, Some((&base, mode))))
}

fn job_page(
    job: &JobView,
    snapshot: &Snapshot,
    runs: &[RunView],
    actions: bool,
    base: &str,
) -> String {
    let mut out = String::with_capacity(8192);
    let _ = writeln!(
        out,
        "<section id=\"job\" data-job=\"{}\" data-refresh>\n<h1>{}</h1>",
        text(&job.job),
        text(&job.job)
    );
    facts(&mut out, job, snapshot.entry(&job.lock_name), snapshot.now);
    if actions {
        out.push_str("<div class=\"actions\">");
        job_actions(&mut out, job, base);
        out.push_str("</div>\n");
    }
    definitions(&mut out, job, snapshot.now);
    out.push_str("<h2>Lock</h2>\n");
    match snapshot.entry(&job.lock_name) {
        Some(entry) => {
            out.push_str("<table class=\"locks\">");
            lock_head(&mut out, false);
            out.push_str("<tbody>");
            lock_row(&mut out, entry, false, base);
            out.push_str("</tbody></table>\n");
        }
        None => out.push_str("<p class=\"muted\">No row yet.</p>\n"),
    }
    history(&mut out, runs, snapshot.now);
    out.push_str("</section>\n");
    out
}

/// The job's state, a fact a row.
fn facts(out: &mut String, job: &JobView, entry: Option<&LockEntry>, now: DateTime<Utc>) {
    out.push_str("<table class=\"facts\">\n");
    let mut fact = |key: &str, value: String| {
        let _ = writeln!(out, "<tr><th>{key}</th><td>{value}</td></tr>");
    };
    fact("Lock", text(&job.lock_name));
    fact("Schedule", schedule(job));
    if let Some(zone) = &job.schedule.zone {
        fact("Zone", text(zone));
    }
    fact(
        "Next fire",
        job.next_fire
            .map_or_else(|| "—".to_owned(), |at| when(at, now)),
    );
    fact("Last run", last_run(job.last_run.as_ref(), now));
    fact(
        "Last success",
        job.last_success
            .map_or_else(|| "none recorded".to_owned(), |at| when(at, now)),
    );
    fact("Failures in a row", job.consecutive_failures.to_string());
    fact(
        "Paused",
        job.paused
            .as_ref()
            .map_or_else(|| "no".to_owned(), |p| paused(p, now)),
    );
    if !job.pause_ignored_by.is_empty() {
        fact(
            "Ignore the pause",
            job.pause_ignored_by
                .iter()
                .map(|r| text(r))
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    if let Some(trigger) = entry.and_then(LockEntry::trigger) {
        let state = match &trigger.taken_by {
            Some(runner) => format!(
                "taken by <code>{}</code>",
                text(runner.strip_suffix(TRIGGER_MARK).unwrap_or(runner))
            ),
            None if trigger.is_pending(now) => format!(
                "waiting for a replica, expires {}",
                when(trigger.expires, now)
            ),
            None => "expired: no replica took it".to_owned(),
        };
        fact(
            "Run now",
            format!(
                "asked by {} {}: {state}",
                text(&trigger.by),
                when(trigger.requested_at, now)
            ),
        );
    }
    fact(
        "Last action",
        job.last_action
            .as_ref()
            .map_or_else(|| "none recorded".to_owned(), |a| text(&a.to_string())),
    );
    out.push_str("</table>\n");
}

/// The specs the replicas publish, and the replicas.
fn definitions(out: &mut String, job: &JobView, now: DateTime<Utc>) {
    out.push_str("<h2>Definitions</h2>\n");
    if job.specs.is_empty() {
        out.push_str("<p class=\"muted\">No replica publishes this job now.</p>\n");
    }
    if job.disagreeing {
        out.push_str(
            "<p class=\"warn\">The replicas publish different specs, as in a rolling deploy.</p>\n",
        );
    }
    for spec in &job.specs {
        let _ = writeln!(
            out,
            "<p>Published by {}:</p>\n<pre class=\"spec\">{}</pre>",
            spec.replicas
                .iter()
                .map(|r| format!("<code>{}</code>", text(r)))
                .collect::<Vec<_>>()
                .join(", "),
            text(&spec.spec)
        );
    }
    if job.replicas.is_empty() {
        return;
    }
    out.push_str(
        "<table class=\"replicas\"><thead><tr><th>Replica</th><th>Version</th>\
         <th>Published</th><th>Expires</th></tr></thead><tbody>\n",
    );
    for r in &job.replicas {
        let _ = writeln!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            text(&r.replica),
            text(&r.version),
            when(r.published, now),
            when(r.expires, now)
        );
    }
    out.push_str("</tbody></table>\n");
}

/// The recorded runs, newest first, with their errors.
fn history(out: &mut String, runs: &[RunView], now: DateTime<Utc>) {
    out.push_str(
        "<h2>History</h2>\n<table id=\"history\">\n<thead><tr><th>Fire</th><th>Outcome</th>\
         <th>Replica</th><th>Started</th><th>Took</th><th>Error</th></tr></thead>\n<tbody>\n",
    );
    for run in runs {
        let _ = writeln!(
            out,
            "<tr class=\"run {}\"><td>{}</td><td><span class=\"badge {}\">{}</span></td>\
             <td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            text(&run.outcome),
            exact(run.fire),
            text(&run.outcome),
            text(&run.outcome),
            text(&run.runner),
            when(run.started, now),
            shedlock_duration::approx(std::time::Duration::from_millis(run.duration_ms)),
            run.error.as_deref().map_or_else(String::new, |e| format!(
                "<pre class=\"error\">{}</pre>",
                text(e)
            ))
        );
    }
    if runs.is_empty() {
        out.push_str("<tr class=\"empty\"><td colspan=\"6\">No runs in the history. The replicas record it \
             when their store is built with a history policy (<code>.history(...)</code>).</td></tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
}

/// `GET /locks`: every row, held or free; election rows marked with their leader.
pub(crate) async fn locks(
    State(state): State<Shared>,
    base: Base,
) -> Result<Response, PageFailure> {
    let entries = state.admin.list().await.map_err(|e| Failure::store(&e))?;
    let now = entries.first().map_or_else(Utc::now, LockEntry::store_now);
    let mode = state.access.mode();
    let actions = mode != Mode::ReadOnly;
    let mut body = String::with_capacity(2048 + entries.len() * 512);
    body.push_str("<h1>Locks</h1>\n<table id=\"locks\" data-refresh>");
    lock_head(&mut body, actions);
    body.push_str("<tbody>\n");
    for entry in &entries {
        lock_row(&mut body, entry, actions, &text(&base.path));
    }
    if entries.is_empty() {
        let _ = writeln!(
            body,
            "<tr class=\"empty\"><td colspan=\"{}\">No lock rows.</td></tr>",
            7 + usize::from(actions)
        );
    }
    let _ = write!(
        body,
        "</tbody>\n</table>\n<p class=\"now\">Read at {} by the store's clock.</p>\n",
        exact(now)
    );
    Ok(page_response("Locks", &body, Some((&base, mode))))
}

fn lock_head(out: &mut String, actions: bool) {
    let _ = write!(
        out,
        "<thead><tr><th>Lock</th><th>State</th><th>Holder</th><th>Locked at</th><th>Until</th>\
         <th>Token</th><th>Last fire</th>{}</tr></thead>",
        if actions { "<th>Actions</th>" } else { "" }
    );
}

fn lock_row(out: &mut String, entry: &LockEntry, actions: bool, base: &str) {
    let record = entry.record();
    let now = entry.store_now();
    let state = LockState::of(entry);
    let election = entry.is_election();
    let _ = write!(
        out,
        "<tr class=\"lock {}{}\" data-lock=\"{}\">",
        state.as_str(),
        if election { " election" } else { "" },
        text(record.name())
    );
    let _ = write!(out, "<td class=\"name\">{}", text(record.name()));
    if election {
        out.push_str(" <span class=\"badge election\">election</span>");
    }
    out.push_str("</td>");
    let state_text = if election && entry.is_held() {
        format!(
            "leader: <code>{}</code>",
            text(election_owner_id(record.owner()))
        )
    } else {
        state.as_str().to_owned()
    };
    let _ = write!(out, "<td class=\"state\">{state_text}</td>");
    let _ = write!(
        out,
        "<td class=\"holder\"><code>{}</code></td>",
        text(record.owner())
    );
    let _ = write!(
        out,
        "<td class=\"locked-at\">{}</td>",
        when(record.locked_at(), now)
    );
    let _ = write!(
        out,
        "<td class=\"until\">{}{}</td>",
        when(record.lock_until(), now),
        entry.remaining().map_or_else(String::new, |left| format!(
            " <small>({} left)</small>",
            shedlock_duration::approx(left)
        ))
    );
    let _ = write!(
        out,
        "<td class=\"token\">{}</td>",
        record
            .fencing_token()
            .map_or_else(|| "—".to_owned(), |t| t.to_string())
    );
    let _ = write!(
        out,
        "<td class=\"last-fire\">{}</td>",
        entry
            .last_fire()
            .map_or_else(|| "—".to_owned(), |at| when(at, now))
    );
    if actions {
        out.push_str("<td class=\"actions\">");
        if entry.is_held() {
            let _ = write!(
                out,
                "<form class=\"act\" data-action=\"unlock\" data-lock=\"{}\" method=\"post\" \
                 action=\"{base}api/locks/{}/unlock\">\
                 <input type=\"hidden\" name=\"owner\" value=\"{}\">\
                 <input type=\"hidden\" name=\"locked_at\" value=\"{}\">\
                 <input type=\"hidden\" name=\"token\" value=\"{}\">",
                text(record.name()),
                segment(record.name()),
                text(record.owner()),
                exact(record.locked_at()),
                record
                    .fencing_token()
                    .map_or_else(String::new, |t| t.to_string())
            );
            if election {
                out.push_str(
                    "<label class=\"confirm\"><input type=\"checkbox\" name=\"election\"> \
                     I understand two leaders may run</label>",
                );
            }
            out.push_str("<button type=\"submit\">Free</button></form>");
        }
        out.push_str("</td>");
    }
    out.push_str("</tr>\n");
}
