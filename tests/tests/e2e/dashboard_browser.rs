//! The dashboard (shedlock-web) in a real browser: Debian's Chromium, headless, driven through
//! chromedriver by a `WebDriver` client, against three `replica` processes on Postgres and a
//! dashboard served in this process on the same lock table. What must hold:
//!
//! - the jobs page lists the replicas' jobs with their last runs;
//! - with the action token entered in the page, pause stops every replica from running the job
//!   (by the replicas' events: no fire after the first one they refused runs) and the page, by its
//!   own refresh, shows the job paused; resume lets the next fires run, each once; run now runs the
//!   job exactly once, with a trigger id;
//! - without the token the buttons are refused: the page says so and the store is unchanged;
//! - a lock named `<script>alert(1)</script>` (or with an `onerror` image) renders as text on the
//!   locks page, also after the page's refresh, and opens no alert.
//!
//! Screenshots of the pages go to `<target>/tmp/screenshots/`. With `SHEDLOCK_DASHBOARD_PNG` set
//! (a path, relative to the workspace root) the jobs page's is written there too: see
//! DEVELOPERS.md for the command that refreshes `docs/dashboard.png`.
//!
//! Ignored, with the reason, without Chromium and chromedriver (`tests/build/browser_cfg.rs`) or
//! without `SHEDLOCK_PG_URL`; `SHEDLOCK_REQUIRE_BROWSER=1` makes a missing browser fail them.

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use fantoccini::error::CmdError;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use shedlock_core::pause::PauseFor;
use shedlock_core::{LockAdmin, LockProvider as _};
use shedlock_demo::event::Event;
use shedlock_sqlx::PgLockProvider;
use shedlock_web::Dashboard;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::fault_support::{Cluster, Stamped};
use crate::steer_processes::{assert_pause_holds, ran, ran_trigger};

/// The action token the dashboard accepts, and the actor it records for it.
const TOKEN: &str = "browser-test-secret-0123456789";
const ACTOR: &str = "browser-test";

/// How long any one thing may take to show (a loaded 2-core machine runs other builds too).
const WAIT: Duration = Duration::from_secs(30);

/// Chromium's flags: headless, no sandbox (CI runs as root), nothing fetched from the network.
const CHROMIUM_FLAGS: [&str; 6] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
];

/// The screenshots' window.
const WINDOW: (u32, u32) = (1280, 800);

/// Hostile lock names: each must show as its own text and run nothing.
const HOSTILE: [&str; 2] = ["<script>alert(1)</script>", "<img src=x onerror=alert(2)>"];
/// A hostile name with quotes, for the attributes and the link of a paused row, and its reason.
const PAUSED_HOSTILE: &str = "\"'><svg onload=alert(3)>";
const HOSTILE_REASON: &str = "</q><img src=x onerror=alert(4)>";

const NO_BROWSER: &str = "chromium and chromedriver are not installed: \
                          apt-get install -y chromium chromium-driver";

/// `name` on `PATH`, else in `/usr/bin`, as `tests/build/browser_cfg.rs` looks for it.
fn program(names: &[&str]) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    names
        .iter()
        .flat_map(|name| {
            std::env::split_paths(&path)
                .chain([PathBuf::from("/usr/bin")])
                .map(move |dir| dir.join(name))
        })
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("{names:?} not found on PATH or in /usr/bin: {NO_BROWSER}"))
}

/// A deadline for one thing to show, and how it failed.
struct Deadline {
    what: String,
    at: Instant,
}

impl Deadline {
    fn new(what: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            at: Instant::now() + WAIT,
        }
    }

    /// Fails with `last` if the deadline passed, else waits a moment before the next look.
    async fn next(&self, last: &dyn Debug) {
        assert!(
            Instant::now() < self.at,
            "timed out after {WAIT:?} waiting for {}; last seen: {last:?}",
            self.what
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// chromedriver on a loopback port of its choosing, in a process group of its own with the
/// browsers it starts: dropping it kills the group.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    async fn start() -> Self {
        let mut child = Command::new(program(&["chromedriver"]))
            .arg("--port=0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("start chromedriver");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let port = tokio::time::timeout(WAIT, async {
            // "ChromeDriver was started successfully on port 45829."
            while let Some(line) = lines.next_line().await.expect("read chromedriver's output") {
                if let Some(rest) = line.split("started successfully on port ").nth(1) {
                    return rest.trim_end_matches('.').parse::<u16>().ok();
                }
            }
            None
        })
        .await
        .expect("chromedriver did not start within the deadline")
        .expect("chromedriver exited without saying its port");
        // Its later output is not read: keep the pipe drained.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            // The group chromedriver leads: it and the browsers it started.
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
        }
    }
}

/// One browser session: chromedriver, headless Chromium with a profile of its own, the client.
struct Browser {
    client: Client,
    base: String,
    _profile: tempfile::TempDir,
    _driver: Driver,
}

impl Browser {
    /// A session on the dashboard at `base`, its window [`WINDOW`].
    async fn start(base: &str) -> Self {
        let driver = Driver::start().await;
        let profile = tempfile::tempdir().expect("a Chromium profile directory");
        let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|f| (*f).to_owned()).collect();
        args.push(format!("--window-size={},{}", WINDOW.0, WINDOW.1));
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let capabilities = json!({
            "browserName": "chrome",
            // An alert stays open for the test to see, instead of being dismissed.
            "unhandledPromptBehavior": "ignore",
            "goog:chromeOptions": {
                "binary": program(&["chromium", "chromium-browser"]),
                "args": args,
            },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("a JSON object")
        };
        let mut builder =
            ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
        builder.capabilities(capabilities);
        let deadline = Deadline::new("a Chromium session from chromedriver");
        let client = loop {
            match builder.connect(&driver.url).await {
                Ok(client) => break client,
                Err(error) => deadline.next(&error).await,
            }
        };
        // The window's frame around the page: the page itself gets exactly [`WINDOW`].
        let frame = client
            .execute(
                "return [window.outerWidth - window.innerWidth, \
                         window.outerHeight - window.innerHeight];",
                vec![],
            )
            .await
            .expect("measure the window's frame");
        let extra = |i: usize| {
            frame[i]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(0)
        };
        client
            .set_window_size(WINDOW.0 + extra(0), WINDOW.1 + extra(1))
            .await
            .expect("size the window");
        Self {
            client,
            base: base.to_owned(),
            _profile: profile,
            _driver: driver,
        }
    }

    async fn goto(&self, path: &str) {
        self.client
            .goto(&format!("{}{path}", self.base))
            .await
            .unwrap_or_else(|e| panic!("open {path}: {e}"));
    }

    /// The text of the first element matching `css`, `None` while there is none.
    async fn text(&self, css: &str) -> Option<String> {
        let element = self.client.find(Locator::Css(css)).await.ok()?;
        element.text().await.ok()
    }

    /// The attribute `name` of the first element matching `css`, `None` while there is none.
    async fn attr(&self, css: &str, name: &str) -> Option<String> {
        let element = self.client.find(Locator::Css(css)).await.ok()?;
        element.attr(name).await.ok().flatten()
    }

    /// Waits until the text of `css` satisfies `done`, and returns it.
    async fn wait_text(&self, what: &str, css: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Deadline::new(what);
        loop {
            let text = self.text(css).await;
            if let Some(text) = text.as_deref().filter(|t| done(t)) {
                return text.to_owned();
            }
            deadline.next(&text).await;
        }
    }

    /// Waits until the `class` attribute of `css` satisfies `done`.
    async fn wait_class(&self, what: &str, css: &str, done: impl Fn(&[&str]) -> bool) {
        let deadline = Deadline::new(what);
        loop {
            let class = self.attr(css, "class").await;
            let classes: Vec<&str> = class.as_deref().unwrap_or("").split_whitespace().collect();
            if class.is_some() && done(&classes) {
                return;
            }
            deadline.next(&class).await;
        }
    }

    /// Fills the inputs of the form `css` and clicks its button, as a person does. The page
    /// redraws its tables every 2 s, which can replace the form between two steps: then it starts
    /// again on the new one.
    async fn submit(&self, css: &str, fields: &[(&str, &str)]) {
        let deadline = Deadline::new(format!("to submit {css}"));
        loop {
            match self.try_submit(css, fields).await {
                Ok(()) => return,
                Err(error) => deadline.next(&error).await,
            }
        }
    }

    async fn try_submit(&self, css: &str, fields: &[(&str, &str)]) -> Result<(), CmdError> {
        let form = self.client.find(Locator::Css(css)).await?;
        for (name, value) in fields {
            let input = form
                .find(Locator::Css(&format!("[name=\"{name}\"]")))
                .await?;
            input.clear().await?;
            input.send_keys(value).await?;
        }
        form.find(Locator::Css("button")).await?.click().await
    }

    /// Empties `#message`, so that the next answer shows as new even when it reads as the last.
    async fn clear_message(&self) {
        self.client
            .execute(
                "document.getElementById('message').textContent = '';",
                vec![],
            )
            .await
            .expect("empty #message");
    }

    /// Submits the form `css` as [`submit`](Self::submit) and returns the page's answer in
    /// `#message`.
    async fn act(&self, css: &str, fields: &[(&str, &str)]) -> String {
        self.clear_message().await;
        self.submit(css, fields).await;
        self.wait_text(&format!("the answer to {css}"), "#message", |t| {
            !t.is_empty()
        })
        .await
    }

    /// Enters the action token in the page's token box and saves it (in sessionStorage).
    async fn save_token(&self, token: &str) {
        let input = self
            .client
            .find(Locator::Css("#token"))
            .await
            .expect("the token box");
        input.send_keys(token).await.expect("type the token");
        self.client
            .find(Locator::Css("#token-save"))
            .await
            .expect("the token's save button")
            .click()
            .await
            .expect("save the token");
    }

    /// The token the page keeps.
    async fn stored_token(&self) -> Value {
        self.client
            .execute("return sessionStorage.getItem('shedlock-token');", vec![])
            .await
            .expect("read sessionStorage")
    }

    /// Asserts that no alert, confirm or prompt is open.
    async fn assert_no_dialog(&self) {
        match self.client.get_alert_text().await {
            Err(e) if e.is_no_such_alert() => {}
            other => panic!("a dialog is open (or the check failed): {other:?}"),
        }
    }

    /// Asserts that no element of `part` was made from a name: no script, image or SVG.
    async fn assert_no_markup(&self, part: &str) {
        let found = self
            .client
            .execute(
                "return document.querySelectorAll(\
                 arguments[0] + ' script, ' + arguments[0] + ' img, ' + arguments[0] + ' svg').length;",
                vec![json!(part)],
            )
            .await
            .expect("count elements");
        assert_eq!(found, json!(0), "{part}: a name became markup");
    }

    /// Asserts that each of `names` has its row in the table `table` (its attribute `attr` equal to
    /// the name) showing the name as text, that no name became markup, and that no dialog opened.
    async fn assert_as_text(&self, table: &str, attr: &str, names: &[&str], when: &str) {
        for name in names {
            let css = format!("{table} tr[{attr}={}]", css_string(name));
            let text = self
                .wait_text(&format!("the row of {name:?} {when}"), &css, |_| true)
                .await;
            assert!(text.contains(name), "{when}: the row shows {text:?}");
        }
        self.assert_no_markup(table).await;
        self.assert_no_dialog().await;
    }

    /// Waits until the page's refresh has replaced the element `part` (it replaces each part with
    /// the one the server sends every 2 s): marks it, and waits until the mark is gone.
    async fn wait_refreshed(&self, part: &str) {
        self.client
            .execute(
                "document.querySelector(arguments[0]).dataset.seen = '1';",
                vec![json!(part)],
            )
            .await
            .expect("mark the part");
        let deadline = Deadline::new(format!("the refresh of {part}"));
        loop {
            let marked = self
                .client
                .execute(
                    "return document.querySelector(arguments[0] + '[data-seen]') !== null;",
                    vec![json!(part)],
                )
                .await
                .expect("look for the mark");
            if marked == json!(false) {
                return;
            }
            deadline.next(&marked).await;
        }
    }

    /// A PNG of the window, written to `<target>/tmp/screenshots/<name>.png`; returns its bytes.
    async fn screenshot(&self, name: &str) -> Vec<u8> {
        let png = self.client.screenshot().await.expect("take a screenshot");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
        std::fs::create_dir_all(&dir).expect("create the screenshots' directory");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, &png).expect("write a screenshot");
        eprintln!("screenshot: {}", path.display());
        png
    }

    /// Ends the session (Chromium quits); chromedriver is killed when dropped.
    async fn close(self) {
        let Self { client, .. } = self;
        client.close().await.expect("end the browser session");
    }
}

/// The dashboard on a loopback port of this process, with [`TOKEN`] for actions; stopped when
/// dropped.
struct Served {
    base: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(admin: Arc<dyn LockAdmin>) -> Served {
    let router = Dashboard::new(admin)
        .action_token(ACTOR, TOKEN)
        .expect("a valid action token")
        .loopback_only()
        .router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("the dashboard's address");
    let task = tokio::spawn(async move {
        axum::serve(listener, router)
            .await
            .expect("serve the dashboard");
    });
    Served {
        base: format!("http://{addr}"),
        task,
    }
}

/// The CSS of job `job`'s row on the jobs page.
fn row(job: &str) -> String {
    format!("#jobs tr.job[data-job=\"{job}\"]")
}

/// The CSS of the form of `action` in job `job`'s row.
fn form(job: &str, action: &str) -> String {
    format!("{} form.act[data-action=\"{action}\"]", row(job))
}

/// Whether the store has `lock` paused now, and by whom.
async fn paused_in_store(admin: &PgLockProvider, lock: &str) -> Option<String> {
    let entry = admin.entry(lock).await.expect("read the lock row")?;
    entry
        .is_paused()
        .then(|| entry.pause().map(|p| p.by.clone()).unwrap_or_default())
}

/// Writes the jobs page's screenshot to `SHEDLOCK_DASHBOARD_PNG` too, when set (a path relative
/// to the workspace root, e.g. `docs/dashboard.png`).
fn refresh_docs_png(png: &[u8]) {
    let Some(target) = std::env::var_os("SHEDLOCK_DASHBOARD_PNG").filter(|v| !v.is_empty()) else {
        return;
    };
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root");
    let path = workspace.join(target);
    std::fs::write(&path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    eprintln!("wrote {}", path.display());
}

/// The Postgres store, or `None` after a skip notice.
async fn provider(url: &str, table: &str) -> Arc<PgLockProvider> {
    Arc::new(
        PgLockProvider::from_url(url)
            .table(table)
            .connect()
            .await
            .expect("connect the dashboard's store"),
    )
}

/// Runs of `job` that a trigger asked for: (trigger id, replica).
fn triggered(events: &[Stamped], job: &str) -> Vec<(i64, String)> {
    events
        .iter()
        .filter_map(|s| match &s.event {
            Event::Ran {
                replica,
                job: j,
                trigger: Some(id),
                ..
            } if j == job => Some((*id, replica.clone())),
            _ => None,
        })
        .collect()
}

#[cfg_attr(
    not(shedlock_browser),
    ignore = "chromium and chromedriver are not installed: apt-get install -y chromium chromium-driver"
)]
#[cfg_attr(
    all(shedlock_browser, not(shedlock_pg)),
    ignore = "needs SHEDLOCK_PG_URL (Postgres)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_steers_three_replicas() {
    let Some(url) = shedlock_sqlx::testing::postgres_url() else {
        return;
    };
    let mut cluster = Cluster::new(
        &url,
        "dash",
        &[
            "tick,every=1s,work=10ms..40ms",
            "slow,every=5s,work=500ms..1500ms,at_most=30s",
            "hourly,every=1h,work=10ms..40ms",
        ],
    );
    // The table is the test's own: the locks are named as the jobs, as the screenshot shows them.
    cluster.prefix = String::new();
    // A history of runs for the page's strip of recent runs.
    cluster.extra_args = vec!["--history".into(), "20".into()];
    cluster.create_schema().await;
    let admin = provider(&url, &cluster.lock_table).await;
    let served = serve(admin.clone()).await;
    let mut replicas = Vec::new();
    for label in ["a", "b", "c"] {
        replicas.push(cluster.start(label).await);
    }
    let browser = Browser::start(&served.base).await;

    // The jobs page lists the jobs, with the last runs the replicas recorded.
    browser.goto("/").await;
    for job in ["tick", "slow", "hourly"] {
        browser
            .wait_text(
                &format!("{job}'s row"),
                &format!("{} .name", row(job)),
                |t| t.starts_with(job),
            )
            .await;
    }
    browser
        .wait_text(
            "tick's last run on the jobs page",
            &format!("{} .last", row("tick")),
            |t| t.starts_with("succeeded") && t.chars().any(|c| c.is_ascii_digit()),
        )
        .await;

    browser.save_token(TOKEN).await;
    assert_eq!(browser.stored_token().await, json!(TOKEN));

    let id = run_now(&browser, &cluster, &admin).await;
    pause(&browser, &cluster, &admin).await;
    resume(&browser, &cluster, &admin).await;
    refused_without_token(&browser, &admin).await;

    browser.close().await;
    cluster.stop_all(replicas).await;
    // Run now ran exactly once, for the page's trigger.
    let runs = triggered(&cluster.events.all(), "hourly");
    assert_eq!(runs.len(), 1, "hourly's triggered runs: {runs:?}");
    assert_eq!(runs[0].0, id, "the run was for the page's trigger");
    drop_tables(&cluster).await;
}

/// Run now on hourly (every hour: no fire of its own in the test): it runs once, on one replica,
/// for the trigger, and the page shows its last run. Returns the trigger's id.
async fn run_now(browser: &Browser, cluster: &Cluster, admin: &PgLockProvider) -> i64 {
    assert!(triggered(&cluster.events.all(), "hourly").is_empty());
    let said = browser.act(&form("hourly", "trigger"), &[]).await;
    assert_eq!(said, format!("asked for a run of hourly now, by {ACTOR}"));
    let asked = admin
        .entry("hourly")
        .await
        .expect("read hourly's row")
        .and_then(|entry| entry.trigger().cloned())
        .unwrap_or_else(|| panic!("no trigger in the store after {said:?}"));
    assert_eq!(asked.by, ACTOR);
    cluster
        .events
        .wait_for("hourly's triggered run", WAIT, |all| {
            !ran_trigger(all, asked.id).is_empty()
        })
        .await;
    browser
        .wait_text(
            "hourly's last run on the jobs page",
            &format!("{} .last", row("hourly")),
            |t| t.starts_with("succeeded"),
        )
        .await;
    asked.id
}

/// Pause tick: the store has it paused by the token's actor, the page shows it paused by its own
/// refresh, and every replica refuses its fires: none runs after the first one refused.
async fn pause(browser: &Browser, cluster: &Cluster, admin: &PgLockProvider) {
    let paused_at = Instant::now();
    let said = browser
        .act(&form("tick", "pause"), &[("reason", "browser test")])
        .await;
    assert_eq!(said, format!("paused tick until resumed, by {ACTOR}"));
    assert_eq!(
        paused_in_store(admin, "tick").await.as_deref(),
        Some(ACTOR),
        "the store has tick paused by the token's actor"
    );
    browser
        .wait_class("tick's row to show paused", &row("tick"), |c| {
            c.contains(&"is-paused")
        })
        .await;
    let cell = browser
        .text(&format!("{} .paused", row("tick")))
        .await
        .unwrap_or_default();
    assert!(
        cell.starts_with("paused") && cell.contains(ACTOR) && cell.contains("browser test"),
        "tick's paused cell: {cell:?}"
    );
    assert_pause_holds(cluster, "tick", paused_at, WAIT).await;
    let png = browser.screenshot("dashboard-jobs").await;
    refresh_docs_png(&png);
}

/// Resume tick: the store and the page show it resumed, and the next fires run, each once.
async fn resume(browser: &Browser, cluster: &Cluster, admin: &PgLockProvider) {
    let said = browser.act(&form("tick", "resume"), &[]).await;
    assert_eq!(said, "resumed tick");
    let resumed_at = Instant::now();
    assert_eq!(
        paused_in_store(admin, "tick").await,
        None,
        "tick is resumed"
    );
    browser
        .wait_class("tick's row to show resumed", &row("tick"), |c| {
            c.contains(&"job") && !c.contains(&"is-paused")
        })
        .await;
    cluster
        .events
        .wait_for("three runs of tick after resume", WAIT, |all| {
            ran(all, "tick", resumed_at).len() >= 3
        })
        .await;
    for (tick, ran_on) in ran(&cluster.events.all(), "tick", resumed_at) {
        assert_eq!(ran_on.len(), 1, "tick's fire {tick} ran on {ran_on:?}");
    }
}

/// Without the token (forgotten) the buttons are refused, the page says so, and the store has
/// neither a pause nor a trigger of tick.
async fn refused_without_token(browser: &Browser, admin: &PgLockProvider) {
    browser
        .client
        .find(Locator::Css("#token-forget"))
        .await
        .expect("the token's forget button")
        .click()
        .await
        .expect("forget the token");
    assert_eq!(browser.stored_token().await, Value::Null);
    for action in ["pause", "trigger"] {
        let refused = browser.act(&form("tick", action), &[]).await;
        assert!(
            refused.starts_with("refused: actions need the action token")
                && refused.ends_with("(enter the action token above)"),
            "{action} without the token: {refused:?}"
        );
    }
    assert_eq!(
        paused_in_store(admin, "tick").await,
        None,
        "a pause without the token changed the store"
    );
    let entry = admin
        .entry("tick")
        .await
        .expect("read tick's row")
        .expect("tick's row");
    assert!(
        entry.trigger().is_none(),
        "a trigger without the token reached the store: {entry:?}"
    );
}

#[cfg_attr(
    not(shedlock_browser),
    ignore = "chromium and chromedriver are not installed: apt-get install -y chromium chromium-driver"
)]
#[cfg_attr(
    all(shedlock_browser, not(shedlock_pg)),
    ignore = "needs SHEDLOCK_PG_URL (Postgres)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_shows_hostile_lock_names_as_text() {
    let Some(url) = shedlock_sqlx::testing::postgres_url() else {
        return;
    };
    let cluster = Cluster::new(&url, "dash-xss", &[]);
    cluster.create_schema().await;
    let admin = provider(&url, &cluster.lock_table).await;
    for name in HOSTILE {
        admin
            .acquire(name, Duration::from_mins(10), "browser-test-holder")
            .await
            .expect("take a lock")
            .expect("a free lock");
    }
    // A paused row: the jobs page lists it, with its reason, and links to its own page.
    admin
        .pause(
            PAUSED_HOSTILE,
            PauseFor::UntilResumed,
            Some(HOSTILE_REASON),
            ACTOR,
        )
        .await
        .expect("pause a hostile name");
    let served = serve(admin.clone()).await;
    let browser = Browser::start(&served.base).await;

    browser.goto("/locks").await;
    browser
        .assert_as_text("#locks", "data-lock", &HOSTILE, "when loaded")
        .await;
    browser.wait_refreshed("#locks").await;
    browser
        .assert_as_text("#locks", "data-lock", &HOSTILE, "after a refresh")
        .await;
    browser.screenshot("dashboard-locks").await;

    browser.goto("/").await;
    browser
        .assert_as_text("#jobs", "data-job", &[PAUSED_HOSTILE], "when loaded")
        .await;
    let reason = browser
        .text(&format!(
            "#jobs tr.job[data-job={}] .paused",
            css_string(PAUSED_HOSTILE)
        ))
        .await
        .unwrap_or_default();
    assert!(
        reason.contains(HOSTILE_REASON),
        "the reason shows as {reason:?}"
    );
    browser.wait_refreshed("#jobs").await;
    browser
        .assert_as_text("#jobs", "data-job", &[PAUSED_HOSTILE], "after a refresh")
        .await;

    // Its link leads to its own page, the name in the path and the heading as sent.
    browser
        .client
        .find(Locator::Css(&format!(
            "#jobs tr.job[data-job={}] .name a",
            css_string(PAUSED_HOSTILE)
        )))
        .await
        .expect("the job's link")
        .click()
        .await
        .expect("follow the job's link");
    let heading = browser
        .wait_text("the job page's heading", "#job h1", |_| true)
        .await;
    assert_eq!(heading, PAUSED_HOSTILE);
    assert_eq!(
        browser.attr("#job", "data-job").await.as_deref(),
        Some(PAUSED_HOSTILE)
    );
    browser.assert_no_markup("#job").await;
    browser.assert_no_dialog().await;
    browser.close().await;
    drop_tables(&cluster).await;
}

/// Drops the cluster's tables: the lock table, its definitions and history, and the run log.
async fn drop_tables(cluster: &Cluster) {
    let db = cluster.runlog().await;
    cluster.drop_tables(&db).await;
    for suffix in ["_jobs", "_history"] {
        let table = format!("{}{suffix}", cluster.lock_table);
        if let Err(error) = db.drop_table(&table).await {
            eprintln!("could not drop {table}: {error}");
        }
    }
}

/// `s` as a CSS string literal.
fn css_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}
