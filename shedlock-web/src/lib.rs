//! A dashboard for the jobs and locks of a shedlock-rs store, its JSON API and cluster-wide
//! Prometheus metrics, as one axum [`Router`] that an application mounts on its admin port. The
//! `shedlock serve` command serves the same router.
//!
//! ```no_run
//! use std::sync::Arc;
//! use shedlock_web::Dashboard;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // Any store: `PgLockProvider::connect(url).await?` and the others alike.
//! let provider = shedlock_core::InMemoryLockProvider::new();
//! let dashboard = Dashboard::new(Arc::new(provider))
//!     // Actions (pause, resume, run now, free a lock) need this token as a bearer token.
//!     // Its label, "ops", is recorded as who did them.
//!     .action_token("ops", &std::env::var("SHEDLOCK_TOKEN")?)?
//!     .loopback_only();
//! let app = axum::Router::new().nest("/shedlock", dashboard.router());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9090").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```
//!
//! Without [`action_token`](Dashboard::action_token) or
//! [`actions_from_middleware`](Dashboard::actions_from_middleware) the router is read-only: every
//! action answers 403 and changes nothing. The pages, the API's shapes, the metrics and the rules
//! of access are in the repository's docs/dashboard.md.

mod access;
mod api;
mod assets;
mod body;
mod failure;
mod host;
mod html;
mod pages;
mod prom;
mod read;
mod show;

use std::fmt;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use shedlock_core::admin::LockAdmin;

pub use access::{Actor, check_token};

/// The largest request body the router reads, in bytes. A larger one is answered 413.
pub const MAX_BODY: usize = 16 * 1024;

/// How many recorded runs a job's page shows, and its API lists.
const HISTORY: usize = 50;

/// How many runs the jobs page's strip shows per job.
const STRIP: usize = 10;

/// The dashboard over one store: build it, then take its [`router`](Self::router).
#[derive(Clone)]
pub struct Dashboard {
    admin: Arc<dyn LockAdmin>,
    access: access::Access,
    loopback_only: bool,
    hosts: Vec<String>,
}

impl fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dashboard")
            .field("access", &self.access)
            .field("loopback_only", &self.loopback_only)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl Dashboard {
    /// A read-only dashboard over `admin`: anyone who reaches it sees the jobs and locks, and
    /// every action is refused.
    #[must_use]
    pub fn new(admin: Arc<dyn LockAdmin>) -> Self {
        Self {
            admin,
            access: access::Access::default(),
            loopback_only: false,
            hosts: Vec::new(),
        }
    }

    /// Allows actions to requests that carry `token` as `Authorization: Bearer`, recorded as done
    /// by `label`. Call it once per operator or tool. Compared in constant time.
    ///
    /// # Errors
    ///
    /// A token shorter than 16 characters, or with characters other than printable ASCII
    /// without spaces. A label that is empty, or has control characters. Two tokens alike. Actions
    /// from the application's middleware were asked for already.
    pub fn action_token(mut self, label: &str, token: &str) -> Result<Self, ConfigError> {
        self.access.add_action_token(label, token)?;
        Ok(self)
    }

    /// Allows actions to requests whose [`Actor`] the application's own middleware put in the
    /// request's extensions, recorded as done by that actor. Requests without one get 403. The
    /// middleware is a layer on this router, or on the application's router around it.
    ///
    /// # Errors
    ///
    /// Action tokens were given: actions are authorised one way or the other, not both.
    pub fn actions_from_middleware(mut self) -> Result<Self, ConfigError> {
        self.access.actions_from_middleware()?;
        Ok(self)
    }

    /// Asks for `token` on every read too: pages, `/api` and `/metrics` then need it, as a bearer
    /// token or as the password of HTTP Basic authentication, which browsers ask for. An action
    /// token reads too.
    ///
    /// # Errors
    ///
    /// As [`action_token`](Self::action_token) for the token.
    pub fn read_token(mut self, token: &str) -> Result<Self, ConfigError> {
        self.access.add_read_token(token)?;
        Ok(self)
    }

    /// Refuses, with 403, requests whose `Host` is not a loopback name: `localhost`, `127.0.0.1`
    /// or another 127.x address, `[::1]`, with any port. For a router bound to loopback. A web
    /// page elsewhere that resolves its own name to 127.0.0.1 (DNS rebinding) cannot read it then.
    #[must_use]
    pub fn loopback_only(mut self) -> Self {
        self.loopback_only = true;
        self
    }

    /// With [`loopback_only`](Self::loopback_only), also answers requests whose `Host` is `name`
    /// (with any port): the public name of a reverse proxy on the same machine that passes the
    /// browser's `Host` on. Compared without case.
    #[must_use]
    pub fn allow_host(mut self, name: &str) -> Self {
        self.hosts
            .push(name.trim().trim_end_matches('.').to_ascii_lowercase());
        self
    }

    /// Whether actions are allowed, by a token or by the application's middleware.
    #[must_use]
    pub fn allows_actions(&self) -> bool {
        self.access.allows_actions()
    }

    /// The labels of the action tokens, in the order given.
    #[must_use]
    pub fn token_labels(&self) -> Vec<String> {
        self.access.labels()
    }

    /// The router: the pages, `/api`, `/metrics` and the page's assets, to serve or to nest
    /// under a prefix. The pages' links carry the path the router was reached under, so a prefix
    /// given by `nest` works; a reverse proxy that strips a prefix from the path must add it back.
    pub fn router(self) -> Router {
        let state = Arc::new(read::State {
            admin: self.admin,
            access: self.access,
        });
        let routes = Router::new()
            .route("/", get(pages::jobs))
            .route("/jobs/{name}", get(pages::job))
            .route("/locks", get(pages::locks))
            .route("/api/jobs", get(api::jobs))
            .route("/api/jobs/{name}", get(api::job))
            .route("/api/locks", get(api::locks))
            .route("/api/jobs/{name}/pause", post(api::pause))
            .route("/api/jobs/{name}/resume", post(api::resume))
            .route("/api/jobs/{name}/trigger", post(api::trigger))
            .route("/api/locks/{name}/unlock", post(api::unlock))
            .route("/metrics", get(prom::metrics))
            .route("/assets/app.js", get(assets::script))
            .route("/assets/style.css", get(assets::style))
            .fallback(failure::not_found)
            .method_not_allowed_fallback(failure::wrong_method)
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&state),
                access::guard,
            ))
            .layer(DefaultBodyLimit::max(MAX_BODY));
        let routes = if self.loopback_only {
            let hosts = Arc::new(self.hosts);
            routes.layer(axum::middleware::from_fn_with_state(
                hosts,
                host::loopback_only,
            ))
        } else {
            routes
        };
        routes.with_state(state)
    }
}

/// A dashboard setting that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(String);

impl ConfigError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}
