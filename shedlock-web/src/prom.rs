//! `/metrics`: the cluster's state from the store, in Prometheus' text format, so one instance
//! tells the whole cluster. The series are listed in shedlock-core's `metrics` module, next to the
//! per-replica ones; their names start with `shedlock_store_`.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use shedlock_core::admin::LockEntry;
use shedlock_core::admin::model::JobView;
use shedlock_core::metrics as names;

use crate::read::{Shared, snapshot};

/// The text format's content type.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub(crate) async fn metrics(State(state): State<Shared>) -> Response {
    match snapshot(state.admin.as_ref()).await {
        Ok(snapshot) => {
            let text = render(&snapshot.jobs, &snapshot.entries, snapshot.now);
            let mut response = (StatusCode::OK, text).into_response();
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
            response
        }
        // A failed scrape: Prometheus marks the target down and keeps the last values stale.
        Err(failure) => failure.json(),
    }
}

/// The metrics of these jobs and rows, read at `now` by the store's clock.
pub(crate) fn render(jobs: &[JobView], entries: &[LockEntry], now: DateTime<Utc>) -> String {
    let mut out = String::with_capacity(256 + (jobs.len() + entries.len()) * 160);
    family(
        &mut out,
        names::STORE_JOB_LAST_SUCCESS,
        "When the job's last successful run anywhere ended, Unix seconds by the store's clock.",
        jobs.iter()
            .filter_map(|j| j.last_success.map(|at| (j, seconds(at)))),
        ["job", "lock"],
        |j| [j.job.as_str(), j.lock_name.as_str()],
    );
    family(
        &mut out,
        names::STORE_JOB_CONSECUTIVE_FAILURES,
        "The job's runs that failed or panicked since its last success, across replicas.",
        jobs.iter().map(|j| (j, f64::from(j.consecutive_failures))),
        ["job", "lock"],
        |j| [j.job.as_str(), j.lock_name.as_str()],
    );
    family(
        &mut out,
        names::STORE_JOB_PAUSED,
        "1 while an operator's pause of the job holds, 0 otherwise.",
        jobs.iter()
            .map(|j| (j, f64::from(u8::from(j.paused.is_some())))),
        ["job", "lock"],
        |j| [j.job.as_str(), j.lock_name.as_str()],
    );
    family(
        &mut out,
        names::STORE_JOB_SINCE_LAST_RUN,
        "Seconds from the end of the job's last recorded run to the store's now.",
        jobs.iter().filter_map(|j| {
            j.last_run
                .as_ref()
                .map(|run| (j, millis_between(run.ended, now)))
        }),
        ["job", "lock"],
        |j| [j.job.as_str(), j.lock_name.as_str()],
    );
    let locks = || entries.iter().filter(|e| !e.is_election());
    family(
        &mut out,
        names::STORE_LOCK_HELD,
        "1 while the lock is held by the store's clock, 0 otherwise.",
        locks().map(|e| (e, f64::from(u8::from(e.is_held())))),
        ["lock"],
        |e| [e.record().name()],
    );
    family(
        &mut out,
        names::STORE_LOCK_SECONDS_LEFT,
        "Seconds until the lock's hold ends, 0 when free.",
        locks().map(|e| (e, e.remaining().map_or(0.0, |d| d.as_secs_f64()))),
        ["lock"],
        |e| [e.record().name()],
    );
    family(
        &mut out,
        names::STORE_LEADER_PRESENT,
        "1 while the election has a leader, 0 otherwise.",
        entries
            .iter()
            .filter(|e| e.is_election())
            .map(|e| (e, f64::from(u8::from(e.is_held())))),
        ["election"],
        |e| [e.record().name()],
    );
    out
}

/// Seconds from `from` to `to`, to the millisecond, exact in the text.
fn millis_between(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    // Any span a store holds is far below 2^53 ms.
    #[expect(clippy::cast_precision_loss, reason = "below 2^53 milliseconds")]
    let ms = (to - from).num_milliseconds() as f64;
    ms / 1000.0
}

fn seconds(at: DateTime<Utc>) -> f64 {
    // Milliseconds are what a dashboard needs; they fit f64 exactly until year 287396.
    #[expect(clippy::cast_precision_loss, reason = "below 2^53 milliseconds")]
    let ms = at.timestamp_millis() as f64;
    ms / 1000.0
}

/// One metric family: its help, its type, and a sample per item.
fn family<'a, T: 'a, const N: usize>(
    out: &mut String,
    name: &str,
    help: &str,
    samples: impl Iterator<Item = (&'a T, f64)>,
    labels: [&str; N],
    values_of: impl Fn(&'a T) -> [&'a str; N],
) {
    let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n");
    for (item, value) in samples {
        let set: Vec<String> = labels
            .iter()
            .zip(values_of(item))
            .map(|(label, v)| format!("{label}=\"{}\"", escape(v)))
            .collect();
        let _ = writeln!(out, "{name}{{{}}} {value}", set.join(","));
    }
}

/// A label value in the text format: backslash, double quote and line feed escaped.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(escape("<script>"), "<script>");
    }
}
