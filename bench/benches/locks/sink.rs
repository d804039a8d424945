//! A tracing subscriber that counts the statements sqlx runs and captures their SQL text, so
//! the floor runs exactly what the providers send (without any accessor in the providers) and
//! statement counts are exact.
//!
//! sqlx reports each statement as an event with target `sqlx::query` (the full SQL in its
//! `db.statement` field, or in `summary` when that is the whole statement). The subscriber is
//! interested in nothing else, and in those only while [`capture`] runs: otherwise every
//! callsite is disabled (one relaxed atomic load per statement), as in an application whose
//! filter leaves sqlx and shedlock quiet.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber, span};

const TARGET: &str = "sqlx::query";

static ON: AtomicBool = AtomicBool::new(false);
static CAPTURED: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Probe;

/// Installs the subscriber process-wide.
pub(crate) fn install() -> Result<(), tracing::subscriber::SetGlobalDefaultError> {
    tracing::subscriber::set_global_default(Probe)
}

/// Runs `fut` and returns the statements sqlx ran meanwhile (any task), in order. Session
/// setup statements (`SET …`, `PRAGMA …`, which sqlx and the pools run on new connections)
/// are left out.
pub(crate) async fn capture<F: Future>(fut: F) -> (F::Output, Vec<String>) {
    take();
    ON.store(true, Ordering::SeqCst);
    let output = fut.await;
    ON.store(false, Ordering::SeqCst);
    (output, take())
}

fn take() -> Vec<String> {
    let mut captured = CAPTURED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    std::mem::take(&mut *captured)
}

impl Subscriber for Probe {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if metadata.target() == TARGET {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == TARGET && ON.load(Ordering::Relaxed)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::TRACE)
    }

    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }

    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}

    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}

    fn event(&self, event: &Event<'_>) {
        if event.metadata().target() != TARGET || !ON.load(Ordering::Relaxed) {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let sql = if fields.statement.trim().is_empty() {
            fields.summary
        } else {
            fields.statement.trim().to_owned()
        };
        let head = sql.trim_start().to_ascii_uppercase();
        if head.starts_with("SET ") || head.starts_with("PRAGMA ") {
            return;
        }
        CAPTURED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(sql);
    }

    fn enter(&self, _: &span::Id) {}

    fn exit(&self, _: &span::Id) {}
}

#[derive(Default)]
struct Fields {
    summary: String,
    statement: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "summary" => value.clone_into(&mut self.summary),
            "db.statement" => value.clone_into(&mut self.statement),
            _ => {}
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}
