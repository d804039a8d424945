//! Who may read and who may act: the tokens, the application's [`Actor`], and the guard every
//! request passes. Reads need the read token when one is set; actions need an action token as a
//! bearer token, or the application's `Actor`. The rules are in docs/dashboard.md, "Access".

use std::fmt;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use base64::Engine as _;
use subtle::ConstantTimeEq as _;

use crate::ConfigError;
use crate::failure::Failure;
use crate::html::Mode;
use crate::read::Shared;

/// Who does an action, as recorded with it: the label of the token it came with, or what the
/// application's middleware put in the request's extensions.
///
/// ```
/// use shedlock_web::Actor;
///
/// // In the application's own authentication middleware, for a signed-in operator:
/// let actor = Actor::new("alice@ops").expect("a printable name");
/// assert_eq!(actor.as_str(), "alice@ops");
/// assert!(Actor::new("bad\nname").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor(String);

impl Actor {
    /// An actor named `name`.
    ///
    /// # Errors
    ///
    /// A name the stores refuse to record: empty, too long, or with control or bidirectional
    /// characters.
    pub fn new(name: &str) -> Result<Self, ConfigError> {
        shedlock_core::pause::validate_actor(name)
            .map_err(|e| ConfigError::new(format!("the actor {name:?} cannot be recorded: {e}")))?;
        Ok(Self(name.to_owned()))
    }

    /// The name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The fewest characters a token has.
const MIN_TOKEN: usize = 16;

/// Checks a token as [`Dashboard::action_token`](crate::Dashboard::action_token) and
/// [`Dashboard::read_token`](crate::Dashboard::read_token) do, for a tool that reads tokens before
/// it has a store to build the dashboard over.
///
/// # Errors
///
/// A token shorter than 16 characters, or with characters other than printable ASCII without
/// spaces.
pub fn check_token(token: &str) -> Result<(), ConfigError> {
    Secret::new(token).map(|_| ())
}

/// A secret, never printed.
#[derive(Clone)]
struct Secret(Vec<u8>);

impl Secret {
    fn new(token: &str) -> Result<Self, ConfigError> {
        if token.len() < MIN_TOKEN {
            return Err(ConfigError::new(format!(
                "a token has at least {MIN_TOKEN} characters; this one has {}",
                token.len()
            )));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ConfigError::new(
                "a token is printable ASCII without spaces, as it travels in an HTTP header",
            ));
        }
        Ok(Self(token.as_bytes().to_vec()))
    }

    /// Whether `given` is this secret, in time that does not depend on where they differ.
    fn matches(&self, given: &[u8]) -> bool {
        bool::from(self.0.as_slice().ct_eq(given))
    }
}

#[derive(Clone, Default)]
enum Actions {
    #[default]
    ReadOnly,
    Tokens(Vec<(Actor, Secret)>),
    Middleware,
}

/// The access rules of one dashboard.
#[derive(Clone, Default)]
pub(crate) struct Access {
    actions: Actions,
    read: Vec<Secret>,
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let actions = match &self.actions {
            Actions::ReadOnly => "read-only".to_owned(),
            Actions::Tokens(tokens) => format!("{} action tokens", tokens.len()),
            Actions::Middleware => "actions from middleware".to_owned(),
        };
        f.debug_struct("Access")
            .field("actions", &actions)
            .field("read_token", &!self.read.is_empty())
            .finish()
    }
}

impl Access {
    pub(crate) fn add_action_token(&mut self, label: &str, token: &str) -> Result<(), ConfigError> {
        let actor = Actor::new(label)?;
        let secret = Secret::new(token)?;
        if self.known(&secret) {
            return Err(ConfigError::new(format!(
                "the token of {label:?} is given twice; give each operator a token of their own"
            )));
        }
        match &mut self.actions {
            Actions::Tokens(tokens) => tokens.push((actor, secret)),
            Actions::ReadOnly => self.actions = Actions::Tokens(vec![(actor, secret)]),
            Actions::Middleware => return Err(both()),
        }
        Ok(())
    }

    pub(crate) fn actions_from_middleware(&mut self) -> Result<(), ConfigError> {
        if let Actions::Tokens(_) = self.actions {
            return Err(both());
        }
        self.actions = Actions::Middleware;
        Ok(())
    }

    pub(crate) fn mode(&self) -> Mode {
        match self.actions {
            Actions::ReadOnly => Mode::ReadOnly,
            Actions::Tokens(_) => Mode::Token,
            Actions::Middleware => Mode::Middleware,
        }
    }

    pub(crate) fn add_read_token(&mut self, token: &str) -> Result<(), ConfigError> {
        let secret = Secret::new(token)?;
        if self.known(&secret) {
            return Err(ConfigError::new(
                "the read token is an action token or another read token; give reading a token of \
                 its own",
            ));
        }
        self.read.push(secret);
        Ok(())
    }

    fn known(&self, secret: &Secret) -> bool {
        let actions = match &self.actions {
            Actions::Tokens(tokens) => tokens.iter().any(|(_, s)| s.matches(&secret.0)),
            _ => false,
        };
        actions || self.read.iter().any(|s| s.matches(&secret.0))
    }

    pub(crate) fn allows_actions(&self) -> bool {
        !matches!(self.actions, Actions::ReadOnly)
    }

    pub(crate) fn labels(&self) -> Vec<String> {
        match &self.actions {
            Actions::Tokens(tokens) => tokens.iter().map(|(a, _)| a.0.clone()).collect(),
            _ => Vec::new(),
        }
    }

    /// The actor of an action token, checking every token whatever matches.
    fn action_actor(&self, given: &[u8]) -> Option<Actor> {
        let Actions::Tokens(tokens) = &self.actions else {
            return None;
        };
        let mut found = None;
        for (actor, secret) in tokens {
            if secret.matches(given) && found.is_none() {
                found = Some(actor.clone());
            }
        }
        found
    }

    /// Whether `given` reads: a read token or an action token.
    fn reads(&self, given: &[u8]) -> bool {
        let read = self
            .read
            .iter()
            .fold(false, |any, s| any | s.matches(given));
        read | self.action_actor(given).is_some()
    }
}

fn both() -> ConfigError {
    ConfigError::new(
        "actions are authorised by action tokens or by the application's middleware, not both: \
         choose one",
    )
}

/// A request's credential: a bearer token, or the password of HTTP Basic authentication.
enum Credential {
    Bearer(Vec<u8>),
    Basic(Vec<u8>),
}

fn credential(headers: &HeaderMap) -> Option<Credential> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        Some(Credential::Bearer(rest.as_bytes().to_vec()))
    } else if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()?;
        let at = decoded.iter().position(|&b| b == b':')?;
        Some(Credential::Basic(decoded[at + 1..].to_vec()))
    } else {
        None
    }
}

/// Whether the request's `Origin`, when it has one, is its own host: a browser sends it on a
/// `POST`, so an action asked for by a page of another site is refused.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let (Ok(origin), Some(Ok(host))) = (
        origin.to_str(),
        headers.get(header::HOST).map(|h| h.to_str()),
    ) else {
        return false;
    };
    origin
        .split_once("://")
        .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host))
}

/// The guard every request passes: reads need the read token when one is set, actions an action
/// token or the application's actor. A refused request reaches no handler.
pub(crate) async fn guard(
    State(state): State<Shared>,
    mut request: Request,
    next: Next,
) -> Response {
    match check(&state.access, &mut request) {
        Ok(()) => next.run(request).await,
        Err(failure) => failure.for_path(request.uri().path()),
    }
}

fn check(access: &Access, request: &mut Request) -> Result<(), Failure> {
    let given = credential(request.headers());
    if *request.method() == Method::POST {
        if !same_origin(request.headers()) {
            return Err(Failure::forbidden(
                "refused: the request comes from a page of another site (its Origin is not this \
                 host); nothing changed",
            ));
        }
        let actor = match &access.actions {
            Actions::ReadOnly => {
                return Err(Failure::forbidden(
                    "refused: this dashboard is read-only; nothing changed (actions need an \
                     action token: `shedlock serve --token-file`, or `Dashboard::action_token`)",
                ));
            }
            Actions::Middleware => {
                request
                    .extensions()
                    .get::<Actor>()
                    .cloned()
                    .ok_or_else(|| {
                        Failure::forbidden(
                            "refused: the application did not say who you are; nothing changed",
                        )
                    })?
            }
            Actions::Tokens(_) => match given {
                Some(Credential::Bearer(token)) => {
                    access.action_actor(&token).ok_or_else(|| {
                        Failure::unauthorized(
                            "refused: the token is not an action token here; nothing changed",
                        )
                    })?
                }
                _ => {
                    return Err(Failure::unauthorized(
                        "refused: actions need the action token as `Authorization: Bearer`; \
                         nothing changed",
                    ));
                }
            },
        };
        request.extensions_mut().insert(actor);
        return Ok(());
    }
    if access.read.is_empty() {
        return Ok(());
    }
    match given {
        Some(Credential::Bearer(token) | Credential::Basic(token)) if access.reads(&token) => {
            Ok(())
        }
        Some(_) => Err(Failure::unauthorized("the token is not a read token here").basic()),
        None => Err(Failure::unauthorized(
            "this dashboard needs its read token: as `Authorization: Bearer`, or as the password \
             your browser asks for",
        )
        .basic()),
    }
}
