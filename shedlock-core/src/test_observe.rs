//! What the crate logs and counts, recorded for its unit tests: [`Logs`] (tracing events) and, with
//! the `metrics` feature, [`Counters`].

use std::sync::{Arc, Mutex, PoisonError};

/// Records every event's level and text. The text is its fields, `name=value` separated by spaces.
/// Install it for one test with [`Logs::install`].
#[derive(Clone, Default)]
pub(crate) struct Logs(Arc<Mutex<Vec<(tracing::Level, String)>>>);

impl Logs {
    /// Installs the recorder on this thread until the guard drops, then recomputes every callsite's
    /// interest. Tests run in parallel. A callsite first hit on another test's thread while this
    /// recorder was being installed can cache "never" and hide its events from this test, which a
    /// full test run once showed. To close that race, the first install also sets a process-wide
    /// default that records nothing but answers "sometimes" for every callsite, so no callsite
    /// registered afterwards can cache "never".
    #[must_use]
    pub(crate) fn install(&self) -> tracing::subscriber::DefaultGuard {
        static QUIET: std::sync::Once = std::sync::Once::new();
        QUIET.call_once(|| {
            let _ = tracing::subscriber::set_global_default(Quiet);
        });
        let guard = tracing::subscriber::set_default(self.clone());
        tracing::callsite::rebuild_interest_cache();
        guard
    }

    /// How many events at `level` contain `needle`.
    pub(crate) fn count(&self, level: tracing::Level, needle: &str) -> usize {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(l, text)| *l == level && text.contains(needle))
            .count()
    }
}

/// Records nothing, but keeps every callsite's interest at "sometimes" (see [`Logs::install`]).
struct Quiet;

impl tracing::Subscriber for Quiet {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        false
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write as _;
        let _ = write!(self.0, "{}={value:?} ", field.name());
    }
}

impl tracing::Subscriber for Logs {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut text = String::new();
        event.record(&mut Fields(&mut text));
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((*event.metadata().level(), text));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Records counter increments per metric name and `lock` label. Install it for one test with
/// `metrics::set_default_local_recorder(&counters)`. That covers this thread only, so use a
/// current-thread runtime.
#[cfg(feature = "metrics")]
#[derive(Default)]
pub(crate) struct Counters(Mutex<Vec<(metrics::Key, Arc<std::sync::atomic::AtomicU64>)>>);

#[cfg(feature = "metrics")]
impl Counters {
    /// The total of counter `name` for lock `lock`.
    pub(crate) fn get(&self, name: &str, lock: &str) -> u64 {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(key, _)| {
                key.name() == name
                    && key
                        .labels()
                        .any(|label| label.key() == "lock" && label.value() == lock)
            })
            .map(|(_, value)| value.load(std::sync::atomic::Ordering::SeqCst))
            .sum()
    }
}

#[cfg(feature = "metrics")]
impl Counters {
    /// The value of gauge `name` whose label `label` is `value`, if it was set.
    pub(crate) fn gauge(&self, name: &str, label: &str, value: &str) -> Option<f64> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(key, _)| {
                key.name() == name && key.labels().any(|l| l.key() == label && l.value() == value)
            })
            .map(|(_, v)| f64::from_bits(v.load(std::sync::atomic::Ordering::SeqCst)))
    }

    /// The total of counter `name` whose labels include every pair of `labels`.
    pub(crate) fn count(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(key, _)| {
                key.name() == name
                    && labels
                        .iter()
                        .all(|(k, v)| key.labels().any(|l| l.key() == *k && l.value() == *v))
            })
            .map(|(_, v)| v.load(std::sync::atomic::Ordering::SeqCst))
            .sum()
    }
}

#[cfg(feature = "metrics")]
impl metrics::Recorder for Counters {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        let mut counters = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let value = if let Some((_, value)) = counters.iter().find(|(k, _)| k == key) {
            value.clone()
        } else {
            let value = Arc::new(std::sync::atomic::AtomicU64::new(0));
            counters.push((key.clone(), value.clone()));
            value
        };
        metrics::Counter::from_arc(value)
    }
    fn register_gauge(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        // Kept beside the counters: a gauge's value is its f64's bits (`metrics`' own encoding
        // for an `AtomicU64` gauge); read with `gauge`.
        let mut values = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let value = if let Some((_, value)) = values.iter().find(|(k, _)| k == key) {
            value.clone()
        } else {
            let value = Arc::new(std::sync::atomic::AtomicU64::new(0));
            values.push((key.clone(), value.clone()));
            value
        };
        metrics::Gauge::from_arc(value)
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}
