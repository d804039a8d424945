//! Every route of the dashboard over HTTP, without a browser or a server: each request goes
//! through the router as axum serves it, on the in-memory store with jobs, runs, a lock named
//! like markup and an election row. Every refusal is checked to change nothing.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use chrono::Utc;
use serde_json::Value;
use shedlock_core::admin::LockAdmin;
use shedlock_core::jobs::{Definition, HistoryPolicy, RunReport};
use shedlock_core::provider::{Fire, FireClaim, LockProvider};
use shedlock_core::{ELECTION_MARK, InMemoryLockProvider, RunOutcome};
use shedlock_web::{Actor, Dashboard};
use tower::ServiceExt as _;

const TOKEN: &str = "action-token-0123456789";
const READ: &str = "read-token-0123456789";
const XSS: &str = "<script>alert(1)</script>";

/// A store with two published jobs, one succeeding and one failing, a held lock named like
/// markup and held by an owner named like markup, and a held election row.
async fn store() -> Arc<InMemoryLockProvider> {
    let store = Arc::new(InMemoryLockProvider::new().with_history(HistoryPolicy::keep(20)));
    store
        .publish_definitions(
            "replica-1",
            env!("CARGO_PKG_VERSION"),
            &[
                Definition::new("report", "report", r#"{"every":"1m"}"#),
                Definition::new(
                    "sync",
                    "sync-lock",
                    r#"{"cron":"0 0 3 * * *","zone":"Europe/Berlin"}"#,
                ),
            ],
            Duration::from_hours(1),
        )
        .await
        .expect("publish");
    run(&store, "report", RunOutcome::Succeeded).await;
    run(
        &store,
        "sync-lock",
        RunOutcome::Failed("boom <b>bold</b>".into()),
    )
    .await;
    store
        .acquire(XSS, Duration::from_mins(10), "<img src=x onerror=alert(2)>")
        .await
        .expect("acquire")
        .expect("free");
    store
        .acquire(
            "scheduler-election",
            Duration::from_mins(10),
            &format!("replica-1{ELECTION_MARK}"),
        )
        .await
        .expect("acquire")
        .expect("free");
    store
}

/// One recorded run of the job whose lock is `lock`, by replica-1, for a fire a second ago.
async fn run(store: &InMemoryLockProvider, lock: &str, outcome: RunOutcome) {
    let at = Utc::now() - chrono::Duration::seconds(1);
    let fire = Fire::new(at, at + chrono::Duration::hours(1)).expect("fire");
    let FireClaim::Claimed(record) = store
        .claim_fire(lock, &fire, Duration::from_mins(1), "replica-1")
        .await
        .expect("claim")
    else {
        panic!("the fire of {lock} was not claimed");
    };
    assert!(
        store
            .release_run(&record, Duration::ZERO, &RunReport::new(at, outcome))
            .await
            .expect("release")
    );
}

struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    fn error(&self) -> String {
        self.json()["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error text: {}", self.body))
            .to_owned()
    }
}

async fn send(router: &Router, request: Request<Body>) -> Answer {
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    Answer {
        status,
        headers,
        body: String::from_utf8(bytes.to_vec()).expect("UTF-8"),
    }
}

/// A request with these headers and body.
fn request(
    method: Method,
    path: &str,
    headers: &[(header::HeaderName, &str)],
    body: &str,
) -> Request<Body> {
    let mut request = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(name, *value);
    }
    request.body(Body::from(body.to_owned())).expect("request")
}

fn get(path: &str) -> Request<Body> {
    request(Method::GET, path, &[(header::HOST, "localhost:8080")], "")
}

fn post(path: &str, token: Option<&str>, body: &str) -> Request<Body> {
    let mut request = Request::post(path)
        .header(header::HOST, "localhost:8080")
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    request.body(Body::from(body.to_owned())).expect("request")
}

fn with_token(store: &Arc<InMemoryLockProvider>) -> Router {
    Dashboard::new(Arc::clone(store) as Arc<dyn LockAdmin>)
        .action_token("ann@ops", TOKEN)
        .expect("token")
        .router()
}

async fn paused(store: &InMemoryLockProvider, lock: &str) -> bool {
    store
        .entry(lock)
        .await
        .expect("entry")
        .is_some_and(|e| e.is_paused())
}

#[tokio::test]
async fn the_jobs_page_lists_jobs_runs_and_schedules_and_escapes_every_name() {
    let store = store().await;
    let router = with_token(&store);
    let page = send(&router, get("/")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("data-job=\"report\""), "{}", page.body);
    assert!(page.body.contains("data-job=\"sync\""));
    assert!(page.body.contains("every minute") || page.body.contains("every 1m"));
    assert!(
        page.body
            .contains("<span class=\"badge succeeded\">succeeded</span>")
    );
    assert!(
        page.body.contains("boom &lt;b&gt;bold&lt;/b&gt;"),
        "the error is escaped"
    );
    assert!(!page.body.contains("<b>bold</b>"));
    // A lock row with a name like markup appears on the locks page, as text.
    let locks = send(&router, get("/locks")).await;
    assert_eq!(locks.status, StatusCode::OK);
    assert!(locks.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(locks.body.contains("&lt;img src=x onerror=alert(2)&gt;"));
    assert!(!locks.body.contains(XSS) && !locks.body.contains("<img src=x"));
    assert!(locks.body.contains("leader: <code>replica-1</code>"));
    assert!(
        locks.body.contains("name=\"election\""),
        "an election row asks for confirmation"
    );
    // Scripts run from the dashboard's own file only.
    let policy = page.headers[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .expect("ASCII");
    assert!(policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"));
    assert!(!page.body.contains("<script>"), "no inline script");
    assert!(
        page.body
            .contains("<script src=\"/assets/app.js\" defer></script>")
    );
}

#[tokio::test]
async fn filters_and_a_job_page_with_its_history() {
    let store = store().await;
    let router = with_token(&store);
    let failing = send(&router, get("/?show=failing")).await;
    assert!(
        failing.body.contains("data-job=\"sync\"") && !failing.body.contains("data-job=\"report\"")
    );
    let running = send(&router, get("/?show=running")).await;
    assert!(running.body.contains("No job is running."));
    let bad = send(&router, get("/?show=everything")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.body.contains("show=failing"));
    // By the job's name or by its lock's.
    for path in ["/jobs/sync", "/jobs/sync-lock"] {
        let job = send(&router, get(path)).await;
        assert_eq!(job.status, StatusCode::OK, "{path}");
        assert!(job.body.contains("<section id=\"job\" data-job=\"sync\""));
        assert!(job.body.contains("<tr class=\"run failed\">"));
        assert!(
            job.body
                .contains("<pre class=\"error\">boom &lt;b&gt;bold&lt;/b&gt;</pre>")
        );
        assert!(
            job.body.contains("href=\"/assets/style.css\""),
            "links lead to the root"
        );
    }
    let unknown = send(&router, get("/jobs/%3Cnope%3E")).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(unknown.body.contains("&lt;nope&gt;") && !unknown.body.contains("<nope>"));
    assert!(unknown.body.contains("the jobs are"));
}

#[tokio::test]
async fn the_api_answers_the_clis_typed_models() {
    let store = store().await;
    let router = with_token(&store);
    let jobs = send(&router, get("/api/jobs")).await;
    assert_eq!(jobs.status, StatusCode::OK);
    assert_eq!(jobs.headers[header::CONTENT_TYPE], "application/json");
    let jobs = jobs.json();
    let names: Vec<&str> = jobs
        .as_array()
        .expect("array")
        .iter()
        .map(|j| j["job"].as_str().expect("job"))
        .collect();
    assert_eq!(names, ["report", "sync"]);
    assert_eq!(jobs[1]["lock_name"], "sync-lock");
    assert_eq!(jobs[1]["consecutive_failures"], 1);
    assert_eq!(
        jobs[1]["last_run"]["error"], "boom <b>bold</b>",
        "JSON keeps the text"
    );
    assert_eq!(jobs[1]["zone"], "Europe/Berlin");
    let failing = send(&router, get("/api/jobs?show=failing")).await.json();
    assert_eq!(failing.as_array().map(Vec::len), Some(1));
    let job = send(&router, get("/api/jobs/report")).await.json();
    assert_eq!(job["job"]["job"], "report");
    assert_eq!(job["history"][0]["outcome"], "succeeded");
    assert_eq!(job["lock"]["state"], "free");
    let locks = send(&router, get("/api/locks")).await.json();
    let xss = locks
        .as_array()
        .expect("array")
        .iter()
        .find(|l| l["name"] == XSS)
        .expect("the markup-named lock");
    assert_eq!(xss["state"], "held");
    let missing = send(&router, get("/api/jobs/nope")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.error().contains("there is no job named \"nope\""));
    let no_route = send(&router, get("/api/nothing")).await;
    assert_eq!(no_route.status, StatusCode::NOT_FOUND);
    assert!(no_route.error().contains("/api/nothing"));
}

#[tokio::test]
async fn a_read_only_dashboard_refuses_every_action_and_changes_nothing() {
    let store = store().await;
    let router = Dashboard::new(Arc::clone(&store) as Arc<dyn LockAdmin>).router();
    let page = send(&router, get("/")).await;
    assert!(
        !page.body.contains("data-action=\"pause\""),
        "no action forms when read-only"
    );
    for (path, body) in [
        ("/api/jobs/report/pause", "{}"),
        ("/api/jobs/report/trigger", "{}"),
        ("/api/jobs/report/resume", "{}"),
    ] {
        let answer = send(&router, post(path, Some(TOKEN), body)).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{path}");
        assert!(answer.error().contains("read-only"));
    }
    assert!(!paused(&store, "report").await);
    let entry = store.entry(XSS).await.expect("entry").expect("row");
    let unlock = format!(
        r#"{{"owner":{},"locked_at":"{}"}}"#,
        serde_json::to_string(entry.record().owner()).expect("JSON"),
        entry.record().locked_at().to_rfc3339()
    );
    let path = format!(
        "/api/locks/{}/unlock",
        "%3Cscript%3Ealert(1)%3C%2Fscript%3E"
    );
    let answer = send(&router, post(&path, Some(TOKEN), &unlock)).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert!(
        store
            .entry(XSS)
            .await
            .expect("entry")
            .expect("row")
            .is_held()
    );
}

#[tokio::test]
async fn actions_need_the_bearer_token_and_record_its_label() {
    let store = store().await;
    let router = with_token(&store);
    let none = send(&router, post("/api/jobs/report/pause", None, "{}")).await;
    assert_eq!(none.status, StatusCode::UNAUTHORIZED);
    assert!(none.error().contains("Authorization: Bearer"));
    let wrong = send(
        &router,
        post("/api/jobs/report/pause", Some("not-the-token-at-all"), "{}"),
    )
    .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    // Credentials a browser sends by itself (Basic) never act: that would let another site act.
    let basic = request(
        Method::POST,
        "/api/jobs/report/pause",
        &[
            (header::HOST, "localhost"),
            (header::CONTENT_TYPE, "application/json"),
            (header::AUTHORIZATION, &basic_auth(TOKEN)),
        ],
        "{}",
    );
    assert_eq!(send(&router, basic).await.status, StatusCode::UNAUTHORIZED);
    // A page of another site, with the token: refused by its Origin.
    let cross = request(
        Method::POST,
        "/api/jobs/report/pause",
        &[
            (header::HOST, "localhost:8080"),
            (header::ORIGIN, "https://evil.example"),
            (header::CONTENT_TYPE, "application/json"),
            (header::AUTHORIZATION, &format!("Bearer {TOKEN}")),
        ],
        "{}",
    );
    let cross = send(&router, cross).await;
    assert_eq!(cross.status, StatusCode::FORBIDDEN);
    assert!(cross.error().contains("another site"));
    assert!(
        !paused(&store, "report").await,
        "no refusal changed anything"
    );

    let same = request(
        Method::POST,
        "/api/jobs/report/pause",
        &[
            (header::HOST, "localhost:8080"),
            (header::ORIGIN, "http://localhost:8080"),
            (header::CONTENT_TYPE, "application/json"),
            (header::AUTHORIZATION, &format!("Bearer {TOKEN}")),
        ],
        r#"{"for":"30m","reason":"bad upstream"}"#,
    );
    let answer = send(&router, same).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let body = answer.json();
    assert_eq!(body["job"], "report");
    assert_eq!(body["paused"]["by"], "ann@ops");
    assert_eq!(body["paused"]["reason"], "bad upstream");
    assert!(body["paused"]["until"].is_string());
    assert!(paused(&store, "report").await);
    let page = send(&router, get("/")).await;
    assert!(
        page.body
            .contains("class=\"job is-paused\" data-job=\"report\""),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("data-action=\"resume\" data-job=\"report\"")
    );
    // Paused: a run now is refused, resume ends it, a second resume is refused.
    let refused = send(&router, post("/api/jobs/report/trigger", Some(TOKEN), "{}")).await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert!(refused.error().contains("is paused by ann@ops"));
    let resumed = send(&router, post("/api/jobs/report/resume", Some(TOKEN), "")).await;
    assert_eq!(resumed.status, StatusCode::OK, "{}", resumed.body);
    assert_eq!(resumed.json()["resumed"]["by"], "ann@ops");
    assert!(!paused(&store, "report").await);
    let again = send(&router, post("/api/jobs/report/resume", Some(TOKEN), "{}")).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.error().contains("is not paused"));
    let action = store.entry("report").await.expect("entry").expect("row");
    assert_eq!(action.last_action().map(|a| a.by.as_str()), Some("ann@ops"));
}

fn basic_auth(password: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("anyone:{password}"))
    )
}

#[tokio::test]
async fn run_now_is_asked_once_and_refused_while_pending() {
    let store = store().await;
    let router = with_token(&store);
    let asked = send(
        &router,
        post("/api/jobs/sync/trigger", Some(TOKEN), r#"{"expires":"2m"}"#),
    )
    .await;
    assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.body);
    let body = asked.json();
    assert_eq!(body["lock"], "sync-lock");
    assert_eq!(body["trigger"]["by"], "ann@ops");
    let pending = store.pending_triggers().await.expect("pending");
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].lock_name, "sync-lock");
    assert_eq!(Some(pending[0].id), body["trigger"]["id"].as_i64());
    let page = send(&router, get("/jobs/sync")).await;
    assert!(
        page.body.contains("<th>Run now</th><td>asked by ann@ops"),
        "the job page shows the trigger: {}",
        page.body
    );
    assert!(page.body.contains("waiting for a replica"));
    let twice = send(&router, post("/api/jobs/sync/trigger", Some(TOKEN), "{}")).await;
    assert_eq!(twice.status, StatusCode::CONFLICT);
    assert!(twice.error().contains("waiting for a replica"));
    assert_eq!(store.pending_triggers().await.expect("pending").len(), 1);
    let bad = send(
        &router,
        post(
            "/api/jobs/report/trigger",
            Some(TOKEN),
            r#"{"expires":"soon"}"#,
        ),
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.error().contains("\"expires\""));
}

#[tokio::test]
async fn bad_input_gets_a_clear_4xx_and_changes_nothing() {
    let store = store().await;
    let router = with_token(&store);
    let cases: [(&str, &str, StatusCode, &str); 6] = [
        (
            "/api/jobs/report/pause",
            r#"{"for":"ten minutes"}"#,
            StatusCode::BAD_REQUEST,
            "\"for\"",
        ),
        (
            "/api/jobs/report/pause",
            r#"{"for":"10m","until":"2030-01-01T00:00:00Z"}"#,
            StatusCode::BAD_REQUEST,
            "not both",
        ),
        (
            "/api/jobs/report/pause",
            r#"{"until":"2001-01-01T00:00:00Z"}"#,
            StatusCode::BAD_REQUEST,
            "nothing changed",
        ),
        (
            "/api/jobs/report/pause",
            r#"{"forever":true}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "forever",
        ),
        (
            "/api/jobs/report/pause",
            "{not json",
            StatusCode::BAD_REQUEST,
            "nothing changed",
        ),
        (
            "/api/jobs/nope/pause",
            "{}",
            StatusCode::NOT_FOUND,
            "there is no job named \"nope\"",
        ),
    ];
    for (path, body, status, says) in cases {
        let answer = send(&router, post(path, Some(TOKEN), body)).await;
        assert_eq!(answer.status, status, "{path} {body}: {}", answer.body);
        assert!(answer.error().contains(says), "{body}: {}", answer.body);
    }
    let huge = format!(
        r#"{{"reason":"{}"}}"#,
        "x".repeat(shedlock_web::MAX_BODY + 1)
    );
    let answer = send(&router, post("/api/jobs/report/pause", Some(TOKEN), &huge)).await;
    assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
    let form = request(
        Method::POST,
        "/api/jobs/report/pause",
        &[
            (header::HOST, "localhost"),
            (header::CONTENT_TYPE, "application/x-www-form-urlencoded"),
            (header::AUTHORIZATION, &format!("Bearer {TOKEN}")),
        ],
        "for=10m",
    );
    let answer = send(&router, form).await;
    assert_eq!(answer.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(answer.error().contains("application/json"));
    let control = send(&router, post("/api/jobs/a%0Ab/pause", Some(TOKEN), "{}")).await;
    assert_eq!(control.status, StatusCode::BAD_REQUEST);
    assert!(
        !paused(&store, "report").await,
        "no bad request paused anything"
    );
    let get_action = send(&router, get("/api/jobs/report/pause")).await;
    assert_eq!(get_action.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn a_lock_is_freed_only_as_shown_and_an_election_only_when_confirmed() {
    let store = store().await;
    let router = with_token(&store);
    let entry = store.entry(XSS).await.expect("entry").expect("row");
    let path = "/api/locks/%3Cscript%3Ealert(1)%3C%2Fscript%3E/unlock";
    let owner = serde_json::to_string(entry.record().owner()).expect("JSON");
    let stale = format!(
        r#"{{"owner":{owner},"locked_at":"2001-01-01T00:00:00Z","token":{}}}"#,
        entry.record().fencing_token().expect("a token")
    );
    let answer = send(&router, post(path, Some(TOKEN), &stale)).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.body);
    assert!(answer.error().contains("changed hands"));
    assert!(
        store
            .entry(XSS)
            .await
            .expect("entry")
            .expect("row")
            .is_held()
    );
    let view = shedlock_core::admin::model::LockView::from(&entry);
    let shown = format!(
        r#"{{"owner":{owner},"locked_at":"{}","token":{}}}"#,
        view.locked_at
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        view.fencing_token.expect("the memory store issues tokens")
    );
    let no_token = format!(
        r#"{{"owner":{owner},"locked_at":"{}"}}"#,
        view.locked_at
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
    );
    let answer = send(&router, post(path, Some(TOKEN), &no_token)).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer.error().contains("fencing tokens"));
    let answer = send(&router, post(path, Some(TOKEN), &shown)).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.json()["freed"]["name"], XSS);
    assert!(
        !store
            .entry(XSS)
            .await
            .expect("entry")
            .expect("row")
            .is_held()
    );
    let again = send(&router, post(path, Some(TOKEN), &shown)).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.error().contains("not held"));

    let election = store
        .entry("scheduler-election")
        .await
        .expect("entry")
        .expect("row");
    let body = |confirm: bool| {
        format!(
            r#"{{"owner":{},"locked_at":"{}","token":{},"election":{confirm}}}"#,
            serde_json::to_string(election.record().owner()).expect("JSON"),
            election
                .record()
                .locked_at()
                .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            election.record().fencing_token().expect("a token")
        )
    };
    let path = "/api/locks/scheduler-election/unlock";
    let unconfirmed = send(&router, post(path, Some(TOKEN), &body(false))).await;
    assert_eq!(unconfirmed.status, StatusCode::CONFLICT);
    assert!(unconfirmed.error().contains("two leaders may run"));
    assert!(
        store
            .entry("scheduler-election")
            .await
            .expect("entry")
            .expect("row")
            .is_held()
    );
    let confirmed = send(&router, post(path, Some(TOKEN), &body(true))).await;
    assert_eq!(confirmed.status, StatusCode::OK, "{}", confirmed.body);
    let missing = send(
        &router,
        post("/api/locks/nope/unlock", Some(TOKEN), &body(true)),
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_read_token_guards_pages_api_and_metrics() {
    let store = store().await;
    let router = Dashboard::new(Arc::clone(&store) as Arc<dyn LockAdmin>)
        .read_token(READ)
        .expect("token")
        .action_token("ann@ops", TOKEN)
        .expect("token")
        .router();
    for path in [
        "/",
        "/locks",
        "/jobs/report",
        "/api/jobs",
        "/metrics",
        "/assets/app.js",
    ] {
        let answer = send(&router, get(path)).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{path}");
        assert!(
            answer.headers[header::WWW_AUTHENTICATE]
                .to_str()
                .expect("ASCII")
                .starts_with("Basic")
        );
    }
    let basic = request(
        Method::GET,
        "/",
        &[
            (header::HOST, "localhost"),
            (header::AUTHORIZATION, &basic_auth(READ)),
        ],
        "",
    );
    assert_eq!(send(&router, basic).await.status, StatusCode::OK);
    for token in [READ, TOKEN] {
        let bearer = request(
            Method::GET,
            "/api/jobs",
            &[
                (header::HOST, "localhost"),
                (header::AUTHORIZATION, &format!("Bearer {token}")),
            ],
            "",
        );
        assert_eq!(send(&router, bearer).await.status, StatusCode::OK);
    }
    let wrong = request(
        Method::GET,
        "/api/jobs",
        &[
            (header::HOST, "localhost"),
            (header::AUTHORIZATION, "Bearer wrong-token-0123456789"),
        ],
        "",
    );
    assert_eq!(send(&router, wrong).await.status, StatusCode::UNAUTHORIZED);
    // The read token does not act.
    let act = send(&router, post("/api/jobs/report/pause", Some(READ), "{}")).await;
    assert_eq!(act.status, StatusCode::UNAUTHORIZED);
    assert!(!paused(&store, "report").await);
}

#[tokio::test]
async fn on_loopback_a_foreign_host_is_refused() {
    let store = store().await;
    let router = Dashboard::new(Arc::clone(&store) as Arc<dyn LockAdmin>)
        .loopback_only()
        .router();
    for host in ["evil.example", "evil.example:8080", "127.0.0.1.nip.io"] {
        let request = request(Method::GET, "/api/jobs", &[(header::HOST, host)], "");
        let answer = send(&router, request).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{host}");
        assert!(answer.error().contains("loopback only"));
    }
    let page = request(Method::GET, "/", &[(header::HOST, "evil.example")], "");
    let page = send(&router, page).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    assert!(page.body.contains("&quot;evil.example&quot;"));
    for host in ["localhost:8080", "127.0.0.1:8080", "[::1]:8080"] {
        let request = request(Method::GET, "/", &[(header::HOST, host)], "");
        assert_eq!(
            send(&router, request).await.status,
            StatusCode::OK,
            "{host}"
        );
    }
}

#[tokio::test]
async fn the_applications_middleware_can_say_who_acts() {
    let store = store().await;
    let dashboard = Dashboard::new(Arc::clone(&store) as Arc<dyn LockAdmin>)
        .actions_from_middleware()
        .expect("no tokens");
    let page = send(&dashboard.clone().router(), get("/")).await;
    assert!(
        page.body.contains("actions as you are signed in") && !page.body.contains("id=\"token\"")
    );
    // The application's middleware and a cross-site Origin: still refused.
    let cross = request(
        Method::POST,
        "/api/jobs/report/pause",
        &[
            (header::HOST, "localhost"),
            (header::ORIGIN, "null"),
            (header::CONTENT_TYPE, "application/json"),
        ],
        "{}",
    );
    let mut cross = cross;
    cross
        .extensions_mut()
        .insert(Actor::new("bob@sso").expect("actor"));
    assert_eq!(
        send(&dashboard.clone().router(), cross).await.status,
        StatusCode::FORBIDDEN
    );
    // Without the application's actor: refused.
    let bare = dashboard.clone().router();
    let answer = send(&bare, post("/api/jobs/report/pause", None, "{}")).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert!(!paused(&store, "report").await);
    // The application's own authentication, here a header its proxy sets.
    let app = dashboard.router().layer(axum::middleware::from_fn(
        |mut request: axum::extract::Request, next: axum::middleware::Next| async move {
            let user = request
                .headers()
                .get("x-user")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| Actor::new(v).ok());
            if let Some(actor) = user {
                request.extensions_mut().insert(actor);
            }
            next.run(request).await
        },
    ));
    let request = request(
        Method::POST,
        "/api/jobs/report/pause",
        &[
            (header::HOST, "localhost"),
            (header::HeaderName::from_static("x-user"), "bob@sso"),
            (header::CONTENT_TYPE, "application/json"),
        ],
        "{}",
    );
    let answer = send(&app, request).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.json()["paused"]["by"], "bob@sso");
    assert!(paused(&store, "report").await);
}

#[tokio::test]
async fn metrics_tell_the_clusters_state_from_the_store() {
    let store = store().await;
    let router = with_token(&store);
    let answer = send(&router, get("/metrics")).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert!(
        answer.headers[header::CONTENT_TYPE]
            .to_str()
            .expect("ASCII")
            .starts_with("text/plain; version=0.0.4")
    );
    let text = answer.body;
    for name in shedlock_core::metrics::STORE_ALL {
        assert!(text.contains(&format!("# TYPE {name} gauge")), "{name}");
    }
    let sample = |series: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(series))
            .unwrap_or_else(|| panic!("no {series} in\n{text}"));
        line[series.len()..].trim().parse().expect("a number")
    };
    assert!(
        (sample("shedlock_store_job_consecutive_failures{job=\"sync\",lock=\"sync-lock\"}") - 1.0)
            .abs()
            < f64::EPSILON
    );
    assert!(
        sample("shedlock_store_job_consecutive_failures{job=\"report\",lock=\"report\"}").abs()
            < f64::EPSILON
    );
    let success =
        sample("shedlock_store_job_last_success_timestamp_seconds{job=\"report\",lock=\"report\"}");
    #[allow(clippy::cast_precision_loss)]
    let now = Utc::now().timestamp() as f64;
    assert!((now - success).abs() < 60.0, "{success} vs {now}");
    assert!(
        !text.contains(
            "shedlock_store_job_last_success_timestamp_seconds{job=\"sync\",lock=\"sync-lock\"}"
        ),
        "never succeeded"
    );
    assert!(
        sample("shedlock_store_job_seconds_since_last_run{job=\"sync\",lock=\"sync-lock\"}") >= 0.0
    );
    assert!(
        (sample(&format!("shedlock_store_lock_held{{lock=\"{XSS}\"}}")) - 1.0).abs() < f64::EPSILON
    );
    assert!(
        sample(&format!(
            "shedlock_store_lock_seconds_left{{lock=\"{XSS}\"}}"
        )) > 500.0
    );
    assert!(
        (sample("shedlock_store_leader_present{election=\"scheduler-election\"}") - 1.0).abs()
            < f64::EPSILON
    );
    assert!(
        !text.contains("shedlock_store_lock_held{lock=\"scheduler-election\"}"),
        "elections apart"
    );
    // Pausing moves the gauge.
    let _ = send(&router, post("/api/jobs/report/pause", Some(TOKEN), "{}")).await;
    let text = send(&router, get("/metrics")).await.body;
    assert!(
        text.contains("shedlock_store_job_paused{job=\"report\",lock=\"report\"} 1\n"),
        "{text}"
    );
}

#[tokio::test]
async fn nested_under_a_prefix_with_assets_and_unknown_paths() {
    let store = store().await;
    let app = Router::new().nest("/ops/shedlock", with_token(&store));
    let page = send(&app, get("/ops/shedlock")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains("href=\"/ops/shedlock/jobs/report\""),
        "links under the prefix"
    );
    assert!(
        page.body.contains("data-base=\"/ops/shedlock/\""),
        "the script's base"
    );
    assert!(page.body.contains("href=\"/ops/shedlock/locks\""));
    assert!(page.body.contains("href=\"/ops/shedlock?show=failing\""));
    let job = send(&app, get("/ops/shedlock/jobs/report")).await;
    assert!(
        job.body
            .contains("<script src=\"/ops/shedlock/assets/app.js\"")
    );
    assert!(job.body.contains("<a href=\"/ops/shedlock\">Jobs</a>"));
    let script = send(&app, get("/ops/shedlock/assets/app.js")).await;
    assert_eq!(script.status, StatusCode::OK);
    assert!(
        script.headers[header::CONTENT_TYPE]
            .to_str()
            .expect("ASCII")
            .starts_with("text/javascript")
    );
    assert!(script.body.contains("sessionStorage"));
    let style = send(&app, get("/ops/shedlock/assets/style.css")).await;
    assert!(
        style.headers[header::CONTENT_TYPE]
            .to_str()
            .expect("ASCII")
            .starts_with("text/css")
    );
    let nothing = send(&app, get("/ops/shedlock/nothing")).await;
    assert_eq!(nothing.status, StatusCode::NOT_FOUND);
    let answer = send(
        &app,
        post("/ops/shedlock/api/jobs/report/pause", Some(TOKEN), "{}"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
}

#[test]
fn tokens_and_labels_that_cannot_be_used_are_refused() {
    let store: Arc<dyn LockAdmin> = Arc::new(InMemoryLockProvider::new());
    let short = Dashboard::new(Arc::clone(&store))
        .action_token("ann", "short")
        .unwrap_err();
    assert!(short.to_string().contains("at least 16"));
    let spaced = Dashboard::new(Arc::clone(&store))
        .action_token("ann", "has a space in it!!")
        .unwrap_err();
    assert!(spaced.to_string().contains("without spaces"));
    let label = Dashboard::new(Arc::clone(&store))
        .action_token("ann\u{202e}", TOKEN)
        .unwrap_err();
    assert!(label.to_string().contains("cannot be recorded"));
    let mixed = Dashboard::new(Arc::clone(&store))
        .actions_from_middleware()
        .and_then(|d| d.action_token("ann", TOKEN))
        .unwrap_err();
    assert!(mixed.to_string().contains("not both"));
    let mixed = Dashboard::new(Arc::clone(&store))
        .action_token("ann", TOKEN)
        .and_then(Dashboard::actions_from_middleware)
        .unwrap_err();
    assert!(mixed.to_string().contains("not both"));
    let twice = Dashboard::new(Arc::clone(&store))
        .action_token("ann", TOKEN)
        .and_then(|d| d.action_token("bob", TOKEN))
        .unwrap_err();
    assert!(twice.to_string().contains("twice"));
    let dashboard = Dashboard::new(store)
        .action_token("ann", TOKEN)
        .and_then(|d| d.action_token("bob", "another-token-0123456789"))
        .expect("two tokens");
    assert!(dashboard.allows_actions());
    assert_eq!(dashboard.token_labels(), ["ann", "bob"]);
    assert!(
        !format!("{dashboard:?}").contains(TOKEN),
        "Debug never shows a token"
    );
}

/// A job whose lock was renamed: the old row `report` stays, with a recorded run, and the job
/// `report` now takes `report-v2`. The name means the published job, as the CLI resolves it,
/// and the metrics stay one series per job and lock.
#[tokio::test]
async fn a_renamed_jobs_name_means_the_published_job_and_metrics_stay_distinct() {
    let store = Arc::new(InMemoryLockProvider::new().with_history(HistoryPolicy::keep(20)));
    run(&store, "report", RunOutcome::Succeeded).await;
    store
        .publish_definitions(
            "replica-2",
            env!("CARGO_PKG_VERSION"),
            &[Definition::new("report", "report-v2", r#"{"every":"1m"}"#)],
            Duration::from_hours(1),
        )
        .await
        .expect("publish");
    run(&store, "report-v2", RunOutcome::Failed("v2 failed".into())).await;
    let router = with_token(&store);
    let answer = send(&router, post("/api/jobs/report/pause", Some(TOKEN), "{}")).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.json()["lock"], "report-v2");
    assert!(paused(&store, "report-v2").await && !paused(&store, "report").await);
    let job = send(&router, get("/api/jobs/report")).await.json();
    assert_eq!(job["job"]["lock_name"], "report-v2");
    assert_eq!(job["history"][0]["error"], "v2 failed");
    // The leftover row has no replica: nobody would take its trigger.
    let _ = send(&router, post("/api/jobs/report/resume", Some(TOKEN), "{}")).await;
    let answer = send(
        &router,
        post("/api/jobs/report-v2/trigger", Some(TOKEN), "{}"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    let store2 = Arc::new(InMemoryLockProvider::new());
    run(&store2, "orphan", RunOutcome::Succeeded).await;
    let answer = send(
        &with_token(&store2),
        post("/api/jobs/orphan/trigger", Some(TOKEN), "{}"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CONFLICT);
    assert!(answer.error().contains("none publishes it"));
    assert!(store2.pending_triggers().await.expect("pending").is_empty());
    // Every sample of /metrics is a distinct series, and every line parses.
    let text = send(&router, get("/metrics")).await.body;
    let mut seen = std::collections::HashSet::new();
    for line in text.lines() {
        if line.starts_with("# HELP ") || line.starts_with("# TYPE ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        assert!(value.parse::<f64>().is_ok_and(f64::is_finite), "{line}");
        assert!(series.ends_with('}') && series.contains('{'), "{line}");
        assert!(seen.insert(series.to_owned()), "a repeated series: {line}");
    }
    assert!(
        text.contains("shedlock_store_job_consecutive_failures{job=\"report\",lock=\"report\"} 0")
    );
    assert!(
        text.contains(
            "shedlock_store_job_consecutive_failures{job=\"report\",lock=\"report-v2\"} 1"
        )
    );
}

/// A store whose reads fail, and one without pauses: 503 and 501 with what the store said, on
/// pages, API and metrics alike; never a 500.
#[tokio::test]
async fn a_failing_store_answers_503_and_a_store_without_pauses_501() {
    let failing: Arc<dyn LockAdmin> = Arc::new(Unreachable);
    let router = Dashboard::new(failing)
        .action_token("ann", TOKEN)
        .expect("token")
        .router();
    for path in [
        "/",
        "/locks",
        "/jobs/x",
        "/api/jobs",
        "/api/locks",
        "/metrics",
    ] {
        let answer = send(&router, get(path)).await;
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{path}");
        assert!(
            answer.body.contains("connection refused"),
            "{path}: {}",
            answer.body
        );
    }
    // The in-memory store's definitions, but no pauses: a store of its own with defaults.
    let store = store().await;
    let bare: Arc<dyn LockAdmin> = Arc::new(NoPauses(Arc::clone(&store)));
    let router = Dashboard::new(bare)
        .action_token("ann", TOKEN)
        .expect("token")
        .router();
    let answer = send(&router, post("/api/jobs/report/pause", Some(TOKEN), "{}")).await;
    assert_eq!(
        answer.status,
        StatusCode::NOT_IMPLEMENTED,
        "{}",
        answer.body
    );
    assert!(answer.error().contains("pause"));
}

/// Refusals by the job's state: a run now while the job runs, a pause with an end, and the
/// replicas that predate pauses.
#[tokio::test]
async fn run_now_is_refused_while_running_and_a_pause_names_who_ignores_it() {
    let store = store().await;
    store
        .publish_definitions(
            "old-replica",
            "0.1.3",
            &[Definition::new("report", "report", r#"{"every":"1m"}"#)],
            Duration::from_hours(1),
        )
        .await
        .expect("publish");
    let router = with_token(&store);
    let until = (Utc::now() + chrono::Duration::hours(2)).to_rfc3339();
    let answer = send(
        &router,
        post(
            "/api/jobs/report/pause",
            Some(TOKEN),
            &format!(r#"{{"until":"{until}"}}"#),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let body = answer.json();
    assert_eq!(body["ignored_by"], serde_json::json!(["old-replica"]));
    assert!(
        body["paused"]["until"]
            .as_str()
            .is_some_and(|u| u.starts_with(&until[..16]))
    );
    let _ = send(&router, post("/api/jobs/report/resume", Some(TOKEN), "{}")).await;
    let held = store
        .acquire("report", Duration::from_mins(5), "replica-1")
        .await
        .expect("acquire")
        .expect("free");
    let answer = send(&router, post("/api/jobs/report/trigger", Some(TOKEN), "{}")).await;
    assert_eq!(answer.status, StatusCode::CONFLICT);
    assert!(answer.error().contains("is running: held by replica-1"));
    let page = send(&router, get("/")).await;
    assert!(
        page.body
            .contains("class=\"job is-running\" data-job=\"report\"")
    );
    drop(held);
}

/// The forms work without the script as plain `POST`s to their API route, which refuses them,
/// changing nothing; with a prefix and a name needing encoding, the links lead to the routes.
#[tokio::test]
async fn forms_and_links_lead_to_their_routes_under_a_prefix() {
    let store = store().await;
    store
        .publish_definitions(
            "replica-1",
            env!("CARGO_PKG_VERSION"),
            &[Definition::new(
                "eu/report one",
                "eu/report one",
                r#"{"every":"1m"}"#,
            )],
            Duration::from_hours(1),
        )
        .await
        .expect("publish");
    let app = Router::new().nest("/ops", with_token(&store));
    let page = send(&app, get("/ops")).await.body;
    assert!(
        page.contains("<a href=\"/ops/jobs/eu%2Freport%20one\">eu/report one</a>"),
        "{page}"
    );
    assert!(page.contains("method=\"post\" action=\"/ops/api/jobs/eu%2Freport%20one/pause\""));
    let job = send(&app, get("/ops/jobs/eu%2Freport%20one")).await;
    assert_eq!(job.status, StatusCode::OK);
    assert!(job.body.contains("data-job=\"eu/report one\""));
    let plain = request(
        Method::POST,
        "/ops/api/jobs/eu%2Freport%20one/pause",
        &[
            (header::HOST, "localhost"),
            (header::CONTENT_TYPE, "application/x-www-form-urlencoded"),
        ],
        "for=&reason=",
    );
    let plain = send(&app, plain).await;
    assert_eq!(plain.status, StatusCode::UNAUTHORIZED);
    assert!(
        plain.error().contains("Authorization: Bearer"),
        "JSON under the prefix too"
    );
    assert!(!paused(&store, "eu/report one").await);
    let bad = send(&app, get("/ops/api/jobs/%FF")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.error().contains("cannot be read"));
    let wrong = request(
        Method::DELETE,
        "/ops/api/jobs/report/pause",
        &[(header::HOST, "localhost")],
        "",
    );
    let wrong = send(&app, wrong).await;
    assert_eq!(wrong.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(wrong.error().contains("not DELETE"));
    // A prefix taken from the request, with a quote in it, is written escaped.
    let odd = Router::new().nest("/t/{tenant}", with_token(&store));
    let page = send(&odd, get("/t/a\"b/locks")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains("data-base=\"/t/a&quot;b/\""),
        "{}",
        page.body
    );
    assert!(!page.body.contains("a\"b"), "{}", page.body);
}

#[tokio::test]
async fn a_read_only_page_says_so_and_a_request_without_host_is_refused_on_loopback() {
    let store = store().await;
    let router = Dashboard::new(Arc::clone(&store) as Arc<dyn LockAdmin>)
        .loopback_only()
        .router();
    let page = send(&router, get("/")).await;
    assert!(page.body.contains("<span class=\"mode\">read-only</span>"));
    assert!(!page.body.contains("id=\"token\""));
    let hostless = request(Method::GET, "/api/jobs", &[], "");
    let answer = send(&router, hostless).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert!(answer.error().contains("no host"));
}

/// A store that cannot be reached: every read fails as a refused connection does.
struct Unreachable;

fn refused() -> shedlock_core::Error {
    shedlock_core::Error::backend(
        "list locks",
        std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused"),
    )
}

#[async_trait::async_trait]
impl LockProvider for Unreachable {
    async fn acquire(
        &self,
        _: &str,
        _: Duration,
        _: &str,
    ) -> shedlock_core::Result<Option<shedlock_core::LockRecord>> {
        Err(refused())
    }
    async fn extend(
        &self,
        _: &shedlock_core::LockRecord,
        _: Duration,
    ) -> shedlock_core::Result<Option<shedlock_core::LockRecord>> {
        Err(refused())
    }
    async fn release(
        &self,
        _: &shedlock_core::LockRecord,
        _: Duration,
    ) -> shedlock_core::Result<bool> {
        Err(refused())
    }
}

#[async_trait::async_trait]
impl LockAdmin for Unreachable {
    async fn list(&self) -> shedlock_core::Result<Vec<shedlock_core::LockEntry>> {
        Err(refused())
    }
    async fn definitions(
        &self,
    ) -> shedlock_core::Result<Vec<shedlock_core::jobs::DefinitionEntry>> {
        Err(refused())
    }
}

/// The in-memory store's reads, without pauses or triggers: the trait's defaults answer those.
struct NoPauses(Arc<InMemoryLockProvider>);

#[async_trait::async_trait]
impl LockProvider for NoPauses {
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> shedlock_core::Result<Option<shedlock_core::LockRecord>> {
        self.0.acquire(name, at_most, owner).await
    }
    async fn extend(
        &self,
        record: &shedlock_core::LockRecord,
        at_most: Duration,
    ) -> shedlock_core::Result<Option<shedlock_core::LockRecord>> {
        self.0.extend(record, at_most).await
    }
    async fn release(
        &self,
        record: &shedlock_core::LockRecord,
        at_least: Duration,
    ) -> shedlock_core::Result<bool> {
        self.0.release(record, at_least).await
    }
}

#[async_trait::async_trait]
impl LockAdmin for NoPauses {
    async fn list(&self) -> shedlock_core::Result<Vec<shedlock_core::LockEntry>> {
        self.0.list().await
    }
    async fn definitions(
        &self,
    ) -> shedlock_core::Result<Vec<shedlock_core::jobs::DefinitionEntry>> {
        self.0.definitions().await
    }
}
