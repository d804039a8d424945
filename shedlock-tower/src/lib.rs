// A build without `http` documents the links to what it adds as links to docs.rs, where every
// feature is on.
#![cfg_attr(
    not(feature = "http"),
    doc = "[`HttpRefusals`]: https://docs.rs/shedlock-tower/latest/shedlock_tower/struct.HttpRefusals.html"
)]
//! A [`tower`](https://docs.rs/tower) [`Layer`](tower_layer::Layer) that runs a request's work
//! once across replicas: each call of the wrapped service runs under a
//! [shedlock-core](shedlock_core) lock named from the request, and a request whose lock another
//! replica holds is answered without running it, not queued. For axum, hyper, tonic, or any
//! [`Service`](tower_service::Service).
//!
//! ```
//! use std::convert::Infallible;
//! use std::future::{Ready, ready};
//! use std::task::{Context, Poll};
//! use std::time::Duration;
//!
//! use http::{Request, Response, StatusCode};
//! use shedlock_core::{InMemoryLockProvider, LockingTaskExecutor};
//! use shedlock_tower::{HttpRefusals, LockLayer};
//! use tower_layer::Layer;
//! use tower_service::Service;
//!
//! /// The work to run once at a time: any service, an axum `Router` included.
//! #[derive(Clone)]
//! struct Rebuild;
//!
//! impl Service<Request<String>> for Rebuild {
//!     type Response = Response<String>;
//!     type Error = Infallible;
//!     type Future = Ready<Result<Response<String>, Infallible>>;
//!
//!     fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
//!         Poll::Ready(Ok(()))
//!     }
//!
//!     fn call(&mut self, _: Request<String>) -> Self::Future {
//!         ready(Ok(Response::new("rebuilt\n".to_owned())))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
//! let layer = LockLayer::builder(
//!     executor.clone(),
//!     // The lock name, from a known set: each index has a lock of its own, and any other path
//!     // is not a lock of this layer (`None`, a 404).
//!     |request: &Request<String>| match request.uri().path() {
//!         "/rebuild/search" => Some("rebuild-search"),
//!         "/rebuild/catalog" => Some("rebuild-catalog"),
//!         _ => None,
//!     },
//!     HttpRefusals::new(), // 409 when held, 404 for no lock, 400 for a bad name, 503 when the store fails
//! )
//! .at_most(Duration::from_secs(600))
//! .build()?;
//! let mut service = layer.layer(Rebuild);
//!
//! let request = Request::builder().uri("/rebuild/search").body(String::new())?;
//! assert_eq!(service.call(request).await?.status(), StatusCode::OK);
//! let request = Request::builder().uri("/rebuild/everything").body(String::new())?;
//! assert_eq!(service.call(request).await?.status(), StatusCode::NOT_FOUND);
//! # Ok(()) }
//! ```
//!
//! With axum, `Router::route_layer(layer)` locks the routes above it; the repository's
//! `tests/examples/axum_layer.rs` is a complete server.
//!
//! # What a request goes through
//!
//! 1. The closure given to [`LockLayer::builder`] names the request's lock, or returns `None`
//!    when the request is not one of the layer's locks: that is answered with
//!    [`Refusals::unrecognised`], 404 over HTTP. The closure runs in `call`, before the lock and
//!    outside the returned future, so a panic in it is the caller's and touches no lock. The
//!    settings the builder takes, `at_most`, `at_least` and `keep_alive`, are the same for every
//!    request, with the executor's defaults for what is unset.
//! 2. A name that is not a valid lock name is answered with [`Refusals::invalid_name`], 400 over
//!    HTTP, and the store is not asked: empty, longer than `max_name_len` or the store allows, padded with white
//!    space, or with a control character (`char::is_control`: NUL, CR, LF, ESC, DEL…) or a
//!    bidirectional override or isolate (U+202A–U+202E, U+2066–U+2069). The error names the
//!    character by its code point and never repeats it.
//! 3. The lock is taken through [`LockingTaskExecutor::execute_reported`](shedlock_core::LockingTaskExecutor::execute_reported),
//!    one store call. If another holder has it, the request is answered with [`Refusals::held`],
//!    409 over HTTP, without a store call more unless the refusal asks for the holder, as
//!    `Retry-After` does: one read, bounded by [`HOLDER_READ_TIMEOUT`]. If the store fails, times
//!    out or refuses the lock, or the executor is shutting down, it is answered with
//!    [`Refusals::failed`], 503 over HTTP. In both cases the inner service is not called.
//! 4. Otherwise the inner service is called and its response future runs under the lock. Inside
//!    it, in the handler, [`shedlock_core::current_lock`] gives the lock's handle, as for
//!    `execute`: the fencing token, [`lost`](shedlock_core::current::LockHandle::lost), extension,
//!    and the shutdown signals. With `keep_alive(true)` the lock is extended while the call runs.
//!    A nested layer, or an `execute`, with the same name runs directly inside it (re-entrancy).
//! 5. The lock is released when the inner response future completes, honouring `at_least`, and
//!    the response is passed on after the release call. A panic in the inner future releases the
//!    lock, then resumes.
//!
//! [`poll_ready`](tower_service::Service::poll_ready) is the inner service's, unchanged. The
//! inner service is called only once the lock is taken, so a [`LockService`] needs it to be
//! `Clone`: the instance `poll_ready` readied goes with the call, and a clone takes its place, as
//! tower's docs advise. axum's routers and handlers are `Clone`. The future is boxed and `Send`.
//!
//! # What runs under the lock
//!
//! Everything in the inner service's response future. With axum's `Router::route_layer`, that
//! is the handler **and its extractors**: reading the request body, `Json`, `Form`, and any
//! authentication done by an extractor run after the lock is taken. So a slow client uploading
//! its body holds the lock while it sends, and every other request of that name is answered 409
//! meanwhile; a request whose extraction fails gets its 4xx from under the lock, and with
//! `at_least` keeps the lock that long. Put what does not need the lock outside the layer:
//!
//! - authentication as a layer applied after this one, so that it is the outer one, or before
//!   the router;
//! - a body limit and a timeout outside the layer, such as tower-http's `RequestBodyLimitLayer`
//!   and `timeout::RequestBodyTimeoutLayer`, or a layer that buffers the whole body before the
//!   request reaches this one.
//!
//! # When the lock is released
//! # When the lock is released
//!
//! **When the inner service's response future completes, not when a streamed body ends.** For
//! HTTP that is when the handler has returned its response, with its status and headers. A body
//! that streams after that, such as axum's `Body::from_stream` or server-sent events, streams
//! without the lock. Work that must hold the lock to its end must run in the handler before it
//! returns, and return the result.
//!
//! **When the response future is dropped, the lock is released at once**, honouring `at_least`,
//! by the guard's background release. That happens when a client disconnects before the handler
//! returned, and when a timeout layer outside this one gives up. So a cancelled request does not
//! hold its lock to `at_most`. A future dropped while the lock is still being acquired releases
//! what the acquire wins with `at_least` 0, as the inner service never ran.
//!
//! With `at_least`, a request that ends sooner keeps the lock until `locked_at + at_least`, and
//! requests of its name are answered as held until then.
//!
//! # Lock names from requests
//!
//! Each distinct name is a row in the lock table, never deleted, and with the `metrics` feature
//! of shedlock-core a metric series of its own. Derive names from a small, known set, such as the
//! route or a tenant from your own records, never from free input such as a query string or a
//! path segment formatted into the name. Match the request against the names you know and
//! return `None` for the rest, as the example above does, or lock per route.
//!
//! # Without HTTP
//!
//! The answers are a [`Refusals`] implementation. Without the `http` feature, write one for the
//! inner service's response type. Each answer is the inner service's `Result`, so a store failure
//! becomes an `Err` only where the implementation says so.
//!
//! # Feature flags
//!
//! - `http`: [`HttpRefusals`], the HTTP answers, on the `http` crate's types. axum is not a
//!   dependency.
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "http")]
mod http;
mod layer;
mod refusal;
mod service;

#[cfg(feature = "http")]
pub use crate::http::HttpRefusals;
pub use crate::layer::{LockLayer, LockLayerBuilder};
pub use crate::refusal::{Busy, Refusals};
pub use crate::service::{HOLDER_READ_TIMEOUT, LockService, ResponseFuture};
