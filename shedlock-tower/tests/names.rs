//! The names a request yields: hostile ones are refused with 400 before the store is asked,
//! without echoing their control characters; markup is a valid name whose answers are plain text
//! that browsers must not sniff; a request that names no lock is a 404.

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::{CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use http::{Request, Response, StatusCode};
use shedlock_core::testkit::{FaultyProvider, Operation};
use shedlock_core::{InMemoryLockProvider, LockConfig, LockingTaskExecutor};
use shedlock_tower::{HttpRefusals, LockLayer, LockService};
use tower_layer::Layer;
use tower_service::Service;

/// Answers 200 at once, counting its calls.
#[derive(Clone, Default)]
struct Counted(Arc<AtomicUsize>);

impl Service<Request<String>> for Counted {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<String>) -> Self::Future {
        self.0.fetch_add(1, Ordering::SeqCst);
        ready(Ok(Response::new("ran\n".to_owned())))
    }
}

/// The request's body is its lock name, as given; the body `"-"` names no lock.
type ByBody = fn(&Request<String>) -> Option<String>;

fn by_body(request: &Request<String>) -> Option<String> {
    (request.body() != "-").then(|| request.body().clone())
}

struct Fixture {
    store: Arc<FaultyProvider<InMemoryLockProvider>>,
    executor: LockingTaskExecutor,
    calls: Arc<AtomicUsize>,
    service: LockService<Counted, ByBody, HttpRefusals>,
}

fn fixture() -> Fixture {
    let store = Arc::new(FaultyProvider::new(InMemoryLockProvider::new()));
    let executor = LockingTaskExecutor::new(Arc::clone(&store)).expect("valid");
    let inner = Counted::default();
    let calls = Arc::clone(&inner.0);
    let service = LockLayer::builder(executor.clone(), by_body as ByBody, HttpRefusals::new())
        .at_most(Duration::from_mins(1))
        .build()
        .expect("valid")
        .layer(inner);
    Fixture {
        store,
        executor,
        calls,
        service,
    }
}

fn named(name: &str) -> Request<String> {
    Request::new(name.to_owned())
}

/// A plain-text answer browsers must not sniff as HTML.
fn assert_plain_text(response: &Response<String>) {
    assert_eq!(
        response
            .headers()
            .get(CONTENT_TYPE)
            .map(http::HeaderValue::as_bytes),
        Some(&b"text/plain; charset=utf-8"[..])
    );
    assert_eq!(
        response
            .headers()
            .get(X_CONTENT_TYPE_OPTIONS)
            .map(http::HeaderValue::as_bytes),
        Some(&b"nosniff"[..])
    );
}

#[tokio::test]
async fn control_characters_and_bidi_overrides_are_400_without_echo_and_the_store_is_not_asked() {
    let mut f = fixture();
    for (name, code_point) in [
        ("a\r\nSet-Cookie: x=1", "U+000D"),
        ("a\nb", "U+000A"),
        ("a\x1b[31mred", "U+001B"),
        ("a\x7fb", "U+007F"),
        ("tab\there", "U+0009"),
        ("nul\0", "U+0000"),
        ("\u{85}next-line", "U+0085"),
        ("evil\u{202E}gnp.exe", "U+202E"),
        ("left\u{202A}embed", "U+202A"),
        ("isolate\u{2066}x\u{2069}", "U+2066"),
        ("pop\u{2069}", "U+2069"),
    ] {
        let response = f.service.call(named(name)).await.expect("infallible");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{name:?}");
        assert_plain_text(&response);
        let body = response.into_body();
        assert!(body.contains(code_point), "{name:?}: {body}");
        assert!(
            !body.chars().any(|c| c.is_control() && c != '\n'),
            "{name:?}: the body repeats a control character: {body:?}"
        );
        assert!(
            !body.contains("Set-Cookie") && !body.contains("red") && !body.contains('\u{202E}'),
            "{name:?}: the body echoes the name: {body:?}"
        );
    }
    assert_eq!(f.store.calls(Operation::Acquire), 0);
    assert_eq!(f.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_60000_character_name_is_400_with_a_short_body() {
    let mut f = fixture();
    let response = f
        .service
        .call(named(&"x".repeat(60_000)))
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_plain_text(&response);
    let body = response.into_body();
    assert!(body.contains("60000 characters"), "{body}");
    assert!(body.len() < 200, "{} bytes: {body}", body.len());
    assert_eq!(f.store.calls(Operation::Acquire), 0);
}

#[tokio::test]
async fn markup_is_a_valid_name_and_its_answers_are_plain_text_with_nosniff() {
    let mut f = fixture();
    let script = "<script>alert(1)</script>";
    // Valid: it runs.
    let response = f.service.call(named(script)).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(f.calls.load(Ordering::SeqCst), 1);
    // Held elsewhere: the 409 quotes it, as plain text that must not be sniffed.
    let cfg = LockConfig::new(script, Duration::from_mins(1)).expect("valid");
    let held = f
        .executor
        .try_lock(&cfg)
        .await
        .expect("the store answers")
        .expect("free");
    let response = f.service.call(named(script)).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::CONFLICT);
    assert_plain_text(&response);
    assert!(response.into_body().contains(script));
    held.release().await.expect("released");
    // Padded, it is a 400 that quotes it the same way.
    let response = f
        .service
        .call(named(&format!("{script} ")))
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_plain_text(&response);
    assert!(response.into_body().contains(script));
    assert_eq!(f.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_request_that_names_no_lock_is_404_and_neither_the_store_nor_the_service_is_called() {
    let mut f = fixture();
    let response = f.service.call(named("-")).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_plain_text(&response);
    assert_eq!(response.into_body(), "not found\n");
    assert_eq!(f.store.calls(Operation::Acquire), 0);
    assert_eq!(f.calls.load(Ordering::SeqCst), 0);
    // The next request, which names a lock, runs.
    let response = f.service.call(named("report")).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(f.store.calls(Operation::Acquire), 1);
}

/// A store with a short name column, whose acquire can be made to report an invalid
/// configuration, as a store may for what only it checks.
struct Narrow {
    inner: InMemoryLockProvider,
    refuse: std::sync::atomic::AtomicBool,
    acquires: AtomicUsize,
}

#[async_trait::async_trait]
impl shedlock_core::provider::LockProvider for Narrow {
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> shedlock_core::Result<Option<shedlock_core::provider::LockRecord>> {
        self.acquires.fetch_add(1, Ordering::SeqCst);
        if self.refuse.load(Ordering::SeqCst) {
            return Err(shedlock_core::Error::invalid_config(
                "the store refuses this lock",
            ));
        }
        self.inner.acquire(name, at_most, owner).await
    }

    async fn extend(
        &self,
        record: &shedlock_core::provider::LockRecord,
        at_most: Duration,
    ) -> shedlock_core::Result<Option<shedlock_core::provider::LockRecord>> {
        self.inner.extend(record, at_most).await
    }

    async fn release(
        &self,
        record: &shedlock_core::provider::LockRecord,
        at_least: Duration,
    ) -> shedlock_core::Result<bool> {
        self.inner.release(record, at_least).await
    }

    fn max_name_len(&self) -> usize {
        8
    }
}

#[tokio::test]
async fn a_name_too_long_for_the_store_is_400_and_a_stores_invalid_config_is_503() {
    let store = Arc::new(Narrow {
        inner: InMemoryLockProvider::new(),
        refuse: std::sync::atomic::AtomicBool::new(false),
        acquires: AtomicUsize::new(0),
    });
    let executor = LockingTaskExecutor::new(Arc::clone(&store)).expect("valid");
    let mut service = LockLayer::builder(executor, by_body as ByBody, HttpRefusals::new())
        .at_most(Duration::from_mins(1))
        .build()
        .expect("valid")
        .layer(Counted::default());
    // 9 characters: within the layer's 64, beyond the store's 8. The layer refuses it.
    let response = service.call(named("ninechars")).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(response.into_body().contains("at most 8"));
    assert_eq!(store.acquires.load(Ordering::SeqCst), 0);
    let response = service.call(named("eight-ok")).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    // What the store itself refuses is its failure, not the client's: 503.
    store.refuse.store(true, Ordering::SeqCst);
    let response = service.call(named("eight-ok")).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_plain_text(&response);
    assert_eq!(store.acquires.load(Ordering::SeqCst), 2);
}
