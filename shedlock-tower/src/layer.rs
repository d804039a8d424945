//! [`LockLayer`] and its builder: the executor, the lock settings every request shares, the
//! closure that names a request's lock, and the refusals.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use shedlock_core::provider::{DEFAULT_MAX_NAME_LEN, validate_name};
use shedlock_core::{Error, LockConfig, LockingTaskExecutor, Result};
use tower_layer::Layer;

use crate::service::LockService;

/// A [`Layer`] that runs each request of the service it wraps under a lock named from the request.
/// See the [crate docs](crate) for what it does and when the lock is released.
///
/// Build it with [`builder`](Self::builder). Clones are cheap and share everything.
pub struct LockLayer<F, R> {
    pub(crate) shared: Arc<Shared<F, R>>,
}

/// What every [`LockService`] of one layer shares.
pub(crate) struct Shared<F, R> {
    pub(crate) executor: LockingTaskExecutor,
    pub(crate) template: Template,
    pub(crate) name: F,
    pub(crate) refusals: R,
}

/// The lock settings of every request, with the executor's defaults already applied.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Template {
    at_most: Duration,
    at_least: Duration,
    keep_alive: bool,
    max_name_len: usize,
}

impl Template {
    /// The lock of one request, or the name back with what is wrong with it. The layer checks
    /// the name itself, so the store is never asked about an invalid one: what
    /// [`validate_name`] refuses, and control or bidirectional-override characters.
    pub(crate) fn config(&self, name: String) -> Result<LockConfig, (String, Error)> {
        if let Err(error) =
            check_characters(&name).and_then(|()| validate_name(&name, self.max_name_len))
        {
            return Err((name, error));
        }
        // The durations were checked when the layer was built and the name just now, so this
        // cannot fail; the name is kept for the refusal all the same.
        self.build(name.as_str()).map_err(|error| (name, error))
    }

    fn build(&self, name: &str) -> Result<LockConfig> {
        LockConfig::builder(name)
            .at_most(self.at_most)
            .at_least(self.at_least)
            .keep_alive(self.keep_alive)
            .max_name_len(self.max_name_len)
            .build()
    }
}

/// Refuses a name with a control character (`char::is_control`: CR, LF, ESC, DEL…) or a Unicode
/// bidirectional override or isolate (U+202A–U+202E, U+2066–U+2069). Such a name comes from
/// input, not from a known set, and would reach logs, metric labels and answers. The message
/// gives the character's code point and position, never the character itself.
fn check_characters(name: &str) -> Result<()> {
    let bad = name.chars().enumerate().find(|&(_, c)| {
        c.is_control()
            || ('\u{202A}'..='\u{202E}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    });
    match bad {
        None => Ok(()),
        Some((at, c)) => Err(Error::invalid_config(format!(
            "the lock name has a control or bidirectional-override character, U+{:04X}, at \
             character {}; a lock name is printable text",
            u32::from(c),
            at + 1
        ))),
    }
}

impl<F, R> Clone for LockLayer<F, R> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<F, R: fmt::Debug> fmt::Debug for LockLayer<F, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockLayer")
            .field("executor", &self.shared.executor)
            .field("template", &self.shared.template)
            .field("refusals", &self.shared.refusals)
            .finish_non_exhaustive()
    }
}

impl<F, R> LockLayer<F, R> {
    /// Starts a layer over `executor`. `name` gives each request's lock name, or `None` when the
    /// request is not one of the layer's locks, such as
    /// `|req: &Request| match req.uri().path() { "/reports/daily" => Some("report-daily"), _ => None }`;
    /// `refusals` answers the requests that do not run (see [`Refusals`](crate::Refusals)).
    ///
    /// Each distinct name is a row in the store and, with metrics on, a series of its own: derive
    /// names from a bounded set, such as a route or a tenant, never from free input.
    pub fn builder(executor: LockingTaskExecutor, name: F, refusals: R) -> LockLayerBuilder<F, R> {
        LockLayerBuilder {
            executor,
            name,
            refusals,
            at_most: None,
            at_least: None,
            keep_alive: false,
            max_name_len: DEFAULT_MAX_NAME_LEN,
        }
    }

    /// The executor the locks are taken through.
    #[must_use]
    pub fn executor(&self) -> &LockingTaskExecutor {
        &self.shared.executor
    }
}

impl<S, F, R> Layer<S> for LockLayer<F, R> {
    type Service = LockService<S, F, R>;

    fn layer(&self, inner: S) -> Self::Service {
        LockService::new(inner, Arc::clone(&self.shared))
    }
}

/// Builds a [`LockLayer`]: the lock settings every request shares, as [`LockConfig`] has them.
#[must_use]
pub struct LockLayerBuilder<F, R> {
    executor: LockingTaskExecutor,
    name: F,
    refusals: R,
    at_most: Option<Duration>,
    at_least: Option<Duration>,
    keep_alive: bool,
    max_name_len: usize,
}

impl<F, R> fmt::Debug for LockLayerBuilder<F, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockLayerBuilder")
            .field("at_most", &self.at_most)
            .field("at_least", &self.at_least)
            .field("keep_alive", &self.keep_alive)
            .field("max_name_len", &self.max_name_len)
            .finish_non_exhaustive()
    }
}

impl<F, R> LockLayerBuilder<F, R> {
    /// The longest hold, as [`LockConfigBuilder::at_most`](shedlock_core::LockConfigBuilder::at_most).
    /// Unset means the executor's default, which must then be set.
    pub fn at_most(mut self, at_most: Duration) -> Self {
        self.at_most = Some(at_most);
        self
    }

    /// The shortest hold, as [`LockConfigBuilder::at_least`](shedlock_core::LockConfigBuilder::at_least).
    /// Unset means the executor's default. A request that ends sooner keeps the lock until then, so
    /// requests of the same name in that window are refused as held.
    pub fn at_least(mut self, at_least: Duration) -> Self {
        self.at_least = Some(at_least);
        self
    }

    /// Extend the lock every `at_most / 2` while the inner service's call runs, as
    /// [`LockConfigBuilder::keep_alive`](shedlock_core::LockConfigBuilder::keep_alive). Defaults
    /// to off.
    pub fn keep_alive(mut self, keep_alive: bool) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// The longest name accepted, in characters, as
    /// [`LockConfigBuilder::max_name_len`](shedlock_core::LockConfigBuilder::max_name_len).
    /// Defaults to [`DEFAULT_MAX_NAME_LEN`]. The store's own limit applies too: the layer checks a
    /// name against the smaller of the two, so a name too long for the store is an invalid name
    /// and the store is not asked.
    pub fn max_name_len(mut self, max: usize) -> Self {
        self.max_name_len = max;
        self
    }

    /// Checks the settings, with the executor's defaults for what is unset, and builds the layer.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] when neither the layer nor the executor sets `at_most`, or when
    /// the durations are invalid as [`LockConfigBuilder::build`](shedlock_core::LockConfigBuilder::build)
    /// checks them. A request's name is checked per request.
    pub fn build(self) -> Result<LockLayer<F, R>> {
        let at_most = self
            .at_most
            .or(self.executor.default_at_most())
            .ok_or_else(|| {
                Error::invalid_config(
                    "the lock layer has no at_most and the executor has no default_at_most; set \
                     one of them",
                )
            })?;
        let at_least = self
            .at_least
            .unwrap_or_else(|| self.executor.default_at_least());
        let template = Template {
            at_most,
            at_least,
            keep_alive: self.keep_alive,
            // The store's own limit too, so that the layer refuses a name the store would.
            max_name_len: self
                .max_name_len
                .min(self.executor.provider().max_name_len()),
        };
        // The durations, checked once, with a one-character name.
        template.build("x")?;
        Ok(LockLayer {
            shared: Arc::new(Shared {
                executor: self.executor,
                template,
                name: self.name,
                refusals: self.refusals,
            }),
        })
    }
}
