//! The layer over the in-memory store, on tokio's paused clock where time matters: what runs,
//! what is refused and how, when the lock is released, and what the handler sees.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use http::header::RETRY_AFTER;
use http::{Request, Response, StatusCode};
use shedlock_core::testkit::{Fault, FaultyProvider, Operation};
use shedlock_core::{Error, InMemoryLockProvider, LockConfig, LockingTaskExecutor, current_lock};
use shedlock_tower::{Busy, HttpRefusals, LockLayer, LockService, Refusals};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tower_layer::Layer;
use tower_service::Service;

type BoxFuture<T> = std::pin::Pin<Box<dyn Future<Output = T> + Send>>;

/// A service from a closure, counting its calls.
#[derive(Clone)]
struct FnService<F> {
    f: F,
    calls: Arc<AtomicUsize>,
}

impl<F, B: 'static> Service<Request<String>> for FnService<F>
where
    F: Fn(Request<String>) -> BoxFuture<Response<B>>,
{
    type Response = Response<B>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response<B>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<String>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let response = (self.f)(request);
        Box::pin(async move { Ok(response.await) })
    }
}

fn service<F, B>(f: F) -> FnService<F>
where
    F: Fn(Request<String>) -> BoxFuture<Response<B>>,
{
    FnService {
        f,
        calls: Arc::new(AtomicUsize::new(0)),
    }
}

/// The lock name of a request: its path without the leading slash; `/unknown/…` names no lock.
fn by_path(request: &Request<String>) -> Option<String> {
    let path = request.uri().path();
    if path.starts_with("/unknown") {
        return None;
    }
    Some(path.trim_start_matches('/').to_owned())
}

fn get(path: &str) -> Request<String> {
    Request::builder()
        .uri(path)
        .body(String::new())
        .expect("a valid request")
}

fn executor() -> LockingTaskExecutor {
    LockingTaskExecutor::builder(InMemoryLockProvider::new())
        .owner_id("tower-test")
        .build()
        .expect("a valid executor")
}

type ByPath = fn(&Request<String>) -> Option<String>;

fn layer(executor: &LockingTaskExecutor, at_least: Duration) -> LockLayer<ByPath, HttpRefusals> {
    LockLayer::builder(executor.clone(), by_path as ByPath, HttpRefusals::new())
        .at_most(Duration::from_mins(1))
        .at_least(at_least)
        .build()
        .expect("valid settings")
}

fn cfg(name: &str) -> LockConfig {
    LockConfig::new(name, Duration::from_mins(1)).expect("a valid lock")
}

/// Whether `name` is free now: takes it and gives it back at once.
async fn is_free(executor: &LockingTaskExecutor, name: &str) -> bool {
    match executor
        .try_lock(&cfg(name))
        .await
        .expect("the store answers")
    {
        Some(guard) => {
            guard.release().await.expect("released");
            true
        }
        None => false,
    }
}

fn body_of(response: Response<String>) -> String {
    response.into_body()
}

/// A handler that says on `started` that it started, then waits for a message on `go`.
struct Gated<H> {
    handler: H,
    started: mpsc::UnboundedReceiver<()>,
    go: mpsc::UnboundedSender<()>,
}

fn gated() -> Gated<impl Fn(Request<String>) -> BoxFuture<Response<String>> + Clone> {
    let (started_tx, started) = mpsc::unbounded_channel();
    let (go, go_rx) = mpsc::unbounded_channel::<()>();
    let go_rx = Arc::new(tokio::sync::Mutex::new(go_rx));
    let f = move |_| {
        let started_tx = started_tx.clone();
        let go_rx = Arc::clone(&go_rx);
        Box::pin(async move {
            let _ = started_tx.send(());
            go_rx.lock().await.recv().await;
            Response::new("ran\n".to_owned())
        }) as BoxFuture<Response<String>>
    };
    Gated {
        handler: f,
        started,
        go,
    }
}

#[tokio::test]
async fn a_free_lock_runs_the_call_and_is_released_after_it() {
    let executor = executor();
    let inner = service(|_| {
        Box::pin(async {
            // The handler runs under the lock, as in `execute`.
            let lock = current_lock().expect("the handler holds the lock");
            assert!(!lock.is_lost());
            Response::new(format!("{} {:?}", lock.name(), lock.fencing_token()))
        })
    });
    let calls = Arc::clone(&inner.calls);
    let mut svc = layer(&executor, Duration::ZERO).layer(inner);
    let response = svc.call(get("/reindex")).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    let body = body_of(response);
    assert!(body.starts_with("reindex Some("), "{body}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(
        is_free(&executor, "reindex").await,
        "released after the call"
    );
}

#[tokio::test]
async fn concurrent_requests_one_runs_the_others_get_409_and_the_inner_service_is_not_called() {
    let executor = executor();
    let Gated {
        handler,
        mut started,
        go,
    } = gated();
    let inner = service(handler);
    let calls = Arc::clone(&inner.calls);
    let svc = layer(&executor, Duration::ZERO).layer(inner);
    let first = tokio::spawn(svc.clone().call(get("/report")));
    started.recv().await.expect("the first call started");
    for _ in 0..3 {
        let response = svc.clone().call(get("/report")).await.expect("infallible");
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert!(
            response.headers().get(RETRY_AFTER).is_none(),
            "off by default"
        );
        assert!(body_of(response).contains("\"report\" is held"));
    }
    // Another name is another lock.
    let Gated {
        handler: other,
        go: other_go,
        ..
    } = gated();
    let other_svc = layer(&executor, Duration::ZERO).layer(service(other));
    let other_call = tokio::spawn(other_svc.clone().call(get("/other")));
    other_go.send(()).expect("the other call waits");
    assert_eq!(
        other_call
            .await
            .expect("no panic")
            .expect("infallible")
            .status(),
        StatusCode::OK
    );
    go.send(()).expect("the first call waits");
    let response = first.await.expect("no panic").expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "only the first call ran");
    // Free again: the next request runs.
    go.send(()).expect("open");
    let again = svc.clone().call(get("/report")).await.expect("infallible");
    assert_eq!(again.status(), StatusCode::OK);
}

#[tokio::test]
async fn retry_after_when_asked_is_the_seconds_to_the_holders_lock_until() {
    let executor = executor();
    let held = executor
        .try_lock(&cfg("export"))
        .await
        .expect("the store answers")
        .expect("free");
    let refusals = HttpRefusals::new().retry_after(true);
    let mut svc = LockLayer::builder(executor.clone(), by_path, refusals)
        .at_most(Duration::from_secs(30))
        .build()
        .expect("valid")
        .layer(service(|_| {
            Box::pin(async { Response::new(String::new()) }) as BoxFuture<_>
        }));
    let response = svc.call(get("/export")).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::CONFLICT);
    // The holder's at_most is 60 s, from a moment ago.
    let seconds: u64 = response
        .headers()
        .get(RETRY_AFTER)
        .expect("a Retry-After header")
        .to_str()
        .expect("ASCII")
        .parse()
        .expect("whole seconds");
    assert!((59..=60).contains(&seconds), "Retry-After: {seconds}");
    held.release().await.expect("released");
}

#[tokio::test]
async fn an_invalid_name_is_400_and_the_store_is_not_asked() {
    let store = Arc::new(FaultyProvider::new(InMemoryLockProvider::new()));
    let executor = LockingTaskExecutor::new(Arc::clone(&store)).expect("valid");
    let inner = service(|_| Box::pin(async { Response::new(String::new()) }) as BoxFuture<_>);
    let calls = Arc::clone(&inner.calls);
    let names = |request: &Request<String>| {
        // The query's `name=` value as given, to reach every kind of bad name.
        Some(
            request
                .uri()
                .query()
                .and_then(|q| q.strip_prefix("name="))
                .unwrap_or_default()
                .replace("%20", " ")
                .replace("%00", "\0"),
        )
    };
    let mut svc = LockLayer::builder(executor, names, HttpRefusals::new())
        .at_most(Duration::from_mins(1))
        .build()
        .expect("valid")
        .layer(inner);
    let long = format!("/?name={}", "x".repeat(65));
    for uri in [
        "/?name=",
        "/?name=%20padded",
        "/?name=nul%00",
        long.as_str(),
    ] {
        let response = svc.call(get(uri)).await.expect("infallible");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{uri}");
        assert!(body_of(response).contains("lock name"), "{uri}");
    }
    assert_eq!(store.calls(Operation::Acquire), 0);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let response = svc.call(get("/?name=fine")).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_store_failure_is_503_and_the_inner_service_is_not_called() {
    let store = Arc::new(FaultyProvider::new(InMemoryLockProvider::new()));
    let executor = LockingTaskExecutor::new(Arc::clone(&store)).expect("valid");
    let inner = service(|_| Box::pin(async { Response::new(String::new()) }) as BoxFuture<_>);
    let calls = Arc::clone(&inner.calls);
    let mut svc = layer(&executor, Duration::ZERO).layer(inner);
    store.inject(Operation::Acquire, Fault::Fail);
    let response = svc.call(get("/sync")).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(body_of(response).contains("unavailable"));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    store.heal_all();
    let response = svc.call(get("/sync")).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    // Shutting down: 503 too, never a 409 that reads as "held elsewhere".
    executor.shutdown(Duration::from_secs(1)).await;
    let response = svc.call(get("/sync")).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// Answers that make a failure the inner service's error, for a service whose callers expect it.
#[derive(Clone)]
struct FailAsError;

impl Refusals<Response<String>, String> for FailAsError {
    fn unrecognised(&self) -> Result<Response<String>, String> {
        Err("not ours".to_owned())
    }
    fn held(&self, busy: &Busy) -> Result<Response<String>, String> {
        Ok(Response::new(format!("busy {}", busy.name())))
    }
    fn invalid_name(&self, name: &str, _: &Error) -> Result<Response<String>, String> {
        Err(format!("bad name {name:?}"))
    }
    fn failed(&self, name: &str, error: &Error) -> Result<Response<String>, String> {
        Err(format!("{name}: {error}"))
    }
}

/// A service whose error type is `String`.
#[derive(Clone)]
struct Fallible;

impl Service<Request<String>> for Fallible {
    type Response = Response<String>;
    type Error = String;
    type Future = std::future::Ready<Result<Response<String>, String>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), String>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<String>) -> Self::Future {
        std::future::ready(Ok(Response::new("ran".to_owned())))
    }
}

#[tokio::test]
async fn refusals_of_its_own_can_map_a_failure_to_the_inner_error() {
    let store = Arc::new(FaultyProvider::new(InMemoryLockProvider::new()));
    let executor = LockingTaskExecutor::new(Arc::clone(&store)).expect("valid");
    let mut svc = LockLayer::builder(executor.clone(), by_path, FailAsError)
        .at_most(Duration::from_mins(1))
        .build()
        .expect("valid")
        .layer(Fallible);
    store.inject(Operation::Acquire, Fault::Fail);
    let error = svc.call(get("/job")).await.expect_err("mapped to Err");
    assert!(error.starts_with("job: "), "{error}");
    store.heal_all();
    let held = executor
        .try_lock(&cfg("job"))
        .await
        .expect("ok")
        .expect("free");
    let busy = svc.call(get("/job")).await.expect("Ok");
    assert_eq!(busy.into_body(), "busy job");
    held.release().await.expect("released");
    assert_eq!(svc.call(get("/job")).await.expect("Ok").into_body(), "ran");
}

#[tokio::test(start_paused = true)]
async fn a_dropped_response_future_frees_the_lock_at_once() {
    let executor = executor();
    let Gated {
        handler,
        mut started,
        go: _go,
    } = gated();
    let svc = layer(&executor, Duration::ZERO).layer(service(handler));
    let call = tokio::spawn(svc.clone().call(get("/cancelled")));
    started.recv().await.expect("started");
    assert!(!is_free(&executor, "cancelled").await);
    let dropped_at = Instant::now();
    call.abort();
    assert!(call.await.expect_err("aborted").is_cancelled());
    wait_free(&executor, "cancelled").await;
    assert_eq!(Instant::now(), dropped_at, "freed at once, not at at_most");
}

#[tokio::test(start_paused = true)]
async fn a_dropped_response_future_honours_at_least() {
    let executor = executor();
    let Gated {
        handler,
        mut started,
        go: _go,
    } = gated();
    let svc = layer(&executor, Duration::from_secs(10)).layer(service(handler));
    let locked_at = Instant::now();
    let call = tokio::spawn(svc.clone().call(get("/cancelled")));
    started.recv().await.expect("started");
    call.abort();
    assert!(call.await.expect_err("aborted").is_cancelled());
    tokio::time::sleep_until(locked_at + Duration::from_millis(9_900)).await;
    assert!(!is_free(&executor, "cancelled").await, "held for at_least");
    tokio::time::sleep_until(locked_at + Duration::from_secs(10)).await;
    wait_free(&executor, "cancelled").await;
    assert!(Instant::now() - locked_at < Duration::from_secs(11));
}

/// Waits for `name` to be free, yielding to the background release; fails after 1,000 yields.
async fn wait_free(executor: &LockingTaskExecutor, name: &str) {
    for _ in 0..1_000 {
        if is_free(executor, name).await {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("{name} was not freed");
}

#[tokio::test(start_paused = true)]
async fn keep_alive_extends_the_lock_and_the_handler_sees_it_lost() {
    let store = Arc::new(FaultyProvider::new(InMemoryLockProvider::new()));
    let executor = LockingTaskExecutor::new(Arc::clone(&store)).expect("valid");
    let inner = service(|_| {
        Box::pin(async {
            let lock = current_lock().expect("under the lock");
            tokio::select! {
                () = lock.lost() => Response::new("lost".to_owned()),
                () = tokio::time::sleep(Duration::from_secs(5)) => Response::new("done".to_owned()),
            }
        }) as BoxFuture<_>
    });
    let svc = LockLayer::builder(executor.clone(), by_path, HttpRefusals::new())
        .at_most(Duration::from_secs(2))
        .keep_alive(true)
        .build()
        .expect("valid")
        .layer(inner);
    // Extended past its at_most of 2 s while the 5 s handler runs.
    let run = tokio::spawn(svc.clone().call(get("/long")));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!is_free(&executor, "long").await, "kept alive past at_most");
    let response = run.await.expect("no panic").expect("infallible");
    assert_eq!(body_of(response), "done");
    assert!(store.calls(Operation::Extend) >= 2);
    // With every extension failing, the handler learns the lock is lost.
    store.inject(Operation::Extend, Fault::Fail);
    let response = svc.clone().call(get("/long")).await.expect("infallible");
    assert_eq!(body_of(response), "lost");
}

/// A service whose readiness the test sets: pending, ready, or an error.
#[derive(Clone, Default)]
struct Gate(Arc<AtomicUsize>);

impl Service<Request<String>> for Gate {
    type Response = Response<String>;
    type Error = String;
    type Future = std::future::Ready<Result<Response<String>, String>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), String>> {
        match self.0.load(Ordering::SeqCst) {
            0 => Poll::Pending,
            1 => Poll::Ready(Ok(())),
            _ => Poll::Ready(Err("overloaded".to_owned())),
        }
    }

    fn call(&mut self, _: Request<String>) -> Self::Future {
        std::future::ready(Ok(Response::new(String::new())))
    }
}

#[test]
fn poll_ready_is_the_inner_services() {
    let executor = executor();
    let gate = Gate::default();
    let mut svc: LockService<Gate, ByPath, FailAsError> =
        LockLayer::builder(executor, by_path as ByPath, FailAsError)
            .at_most(Duration::from_mins(1))
            .build()
            .expect("valid")
            .layer(gate.clone());
    let mut cx = Context::from_waker(Waker::noop());
    assert!(svc.poll_ready(&mut cx).is_pending());
    gate.0.store(1, Ordering::SeqCst);
    assert_eq!(svc.poll_ready(&mut cx), Poll::Ready(Ok(())));
    gate.0.store(2, Ordering::SeqCst);
    assert_eq!(
        svc.poll_ready(&mut cx),
        Poll::Ready(Err("overloaded".to_owned()))
    );
}

/// A streamed body: chunks sent by the handler's producer after the response went out.
struct Chunks(mpsc::UnboundedReceiver<String>);

impl From<String> for Chunks {
    fn from(text: String) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(text);
        Self(rx)
    }
}

#[tokio::test]
async fn a_streamed_body_streams_without_the_lock() {
    let executor = executor();
    let (finish, finish_rx) = oneshot::channel::<()>();
    let finish_rx = Arc::new(std::sync::Mutex::new(Some(finish_rx)));
    let inner = service(move |_| {
        let finish_rx = finish_rx.lock().expect("not poisoned").take();
        Box::pin(async move {
            let (tx, rx) = mpsc::unbounded_channel();
            tx.send("first chunk".to_owned()).expect("open");
            // The body's producer goes on after the handler returned its response.
            tokio::spawn(async move {
                if let Some(finish_rx) = finish_rx {
                    let _ = finish_rx.await;
                }
                let _ = tx.send("last chunk".to_owned());
            });
            Response::new(Chunks(rx))
        }) as BoxFuture<Response<Chunks>>
    });
    let mut svc = layer(&executor, Duration::ZERO).layer(inner);
    let response = svc.call(get("/stream")).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body().0;
    assert_eq!(body.recv().await.as_deref(), Some("first chunk"));
    // The body is still open, and the lock is already free: released at the headers.
    assert!(body.try_recv().is_err() && !body.is_closed());
    assert!(is_free(&executor, "stream").await);
    finish.send(()).expect("the producer waits");
    assert_eq!(body.recv().await.as_deref(), Some("last chunk"));
    assert_eq!(body.recv().await, None);
}

#[test]
fn a_layer_without_at_most_anywhere_is_refused_at_build() {
    let error = LockLayer::builder(executor(), by_path, HttpRefusals::new())
        .build()
        .expect_err("no at_most");
    assert!(error.is_invalid_config(), "{error}");
    assert!(error.to_string().contains("default_at_most"), "{error}");
    let error = LockLayer::builder(executor(), by_path, HttpRefusals::new())
        .at_most(Duration::from_secs(5))
        .at_least(Duration::from_secs(6))
        .build()
        .expect_err("at_least > at_most");
    assert!(error.is_invalid_config(), "{error}");
    // The executor's default at_most is enough.
    let executor = LockingTaskExecutor::builder(InMemoryLockProvider::new())
        .default_at_most(Duration::from_mins(1))
        .build()
        .expect("valid");
    assert!(
        LockLayer::builder(executor, by_path, HttpRefusals::new())
            .build()
            .is_ok()
    );
}

/// A service whose clones start not ready: `call` on an instance `poll_ready` did not ready is an
/// error, so a layer that called a fresh clone instead of the readied one fails.
struct Strict {
    ready: bool,
    calls: Arc<AtomicUsize>,
}

impl Clone for Strict {
    fn clone(&self) -> Self {
        Self {
            ready: false,
            calls: Arc::clone(&self.calls),
        }
    }
}

impl Service<Request<String>> for Strict {
    type Response = Response<String>;
    type Error = String;
    type Future = std::future::Ready<Result<Response<String>, String>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), String>> {
        self.ready = true;
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<String>) -> Self::Future {
        if !std::mem::replace(&mut self.ready, false) {
            return std::future::ready(Err("called without poll_ready".to_owned()));
        }
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(Response::new("ran".to_owned())))
    }
}

#[tokio::test]
async fn the_call_goes_to_the_instance_poll_ready_readied() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut svc = LockLayer::builder(executor(), by_path as ByPath, FailAsError)
        .at_most(Duration::from_mins(1))
        .build()
        .expect("valid")
        .layer(Strict {
            ready: false,
            calls: Arc::clone(&calls),
        });
    for round in 1..=3 {
        std::future::poll_fn(|cx| svc.poll_ready(cx))
            .await
            .expect("ready");
        let response = svc
            .call(get("/strict"))
            .await
            .expect("the readied instance");
        assert_eq!(response.into_body(), "ran");
        assert_eq!(calls.load(Ordering::SeqCst), round);
    }
    // Without poll_ready, the fresh clone left in the service is not ready: the check bites.
    let error = svc.call(get("/strict")).await.expect_err("not readied");
    assert_eq!(error, "called without poll_ready");
}

fn handler_fails() -> Response<String> {
    panic!("the handler failed")
}

#[tokio::test]
async fn a_panic_in_the_inner_future_frees_the_lock_and_resumes() {
    let executor = executor();
    let inner = service(|_| {
        Box::pin(async {
            assert!(current_lock().is_some(), "under the lock");
            handler_fails()
        }) as BoxFuture<Response<String>>
    });
    let svc = layer(&executor, Duration::ZERO).layer(inner);
    let error = tokio::spawn(svc.clone().call(get("/panics")))
        .await
        .expect_err("the panic resumes");
    let payload = error.into_panic();
    assert_eq!(
        payload.downcast_ref::<&str>().copied(),
        Some("the handler failed")
    );
    assert!(
        is_free(&executor, "panics").await,
        "released before resuming"
    );
}

#[tokio::test]
async fn a_request_that_names_no_lock_is_refused_as_unrecognised() {
    let executor = executor();
    let mut svc = LockLayer::builder(executor, by_path as ByPath, FailAsError)
        .at_most(Duration::from_mins(1))
        .build()
        .expect("valid")
        .layer(Fallible);
    let error = svc.call(get("/unknown/x")).await.expect_err("unrecognised");
    assert_eq!(error, "not ours");
    assert_eq!(
        svc.call(get("/known")).await.expect("ran").into_body(),
        "ran"
    );
}
