//! The console in a real headless Chromium (Debian's `chromium` and `chromium-driver`, which
//! `.ci/run` installs), against a real `jira-hub serve` and a test agent that answers claims over
//! the HTTP agent API: sign in, watch a batch go from queued to completed without reloading,
//! retry a failed command, add a note; a screenshot of the overview is saved as
//! `target/console-overview.png`. Without Chromium or its driver the test says it is skipped.
//!
//! Chromium is driven through chromedriver with `fantoccini`, on a runtime of the test's own
//! (the test itself is synchronous, like the daemon and the agent it drives).

use crate::support::*;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A Chromium session driven through chromedriver; both end when dropped.
struct Browser {
    runtime: tokio::runtime::Runtime,
    client: Option<Client>,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start() -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1280,1500",
            &format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".into(), "chrome".into());
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({"binary": CHROMIUM, "args": args}),
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let driver_url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        let client = runtime.block_on(async {
            loop {
                // Plain HTTP to the local driver: no TLS connector is needed.
                let connector = hyper_util::client::legacy::connect::HttpConnector::new();
                match ClientBuilder::new(connector)
                    .capabilities(capabilities.clone())
                    .connect(&driver_url)
                    .await
                {
                    Ok(client) => break client,
                    Err(error) => {
                        assert!(
                            started.elapsed() < Duration::from_secs(20),
                            "chromedriver did not start a session: {error}"
                        );
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Browser {
            runtime,
            client: Some(client),
            driver,
            _profile: profile,
        }
    }

    fn client(&self) -> &Client {
        self.client.as_ref().expect("a session")
    }

    fn goto(&self, url: &str) {
        self.runtime
            .block_on(self.client().goto(url))
            .unwrap_or_else(|e| panic!("goto {url}: {e}"));
    }

    fn script(&self, script: &str, args: Value) -> Value {
        let args = args.as_array().cloned().unwrap_or_default();
        self.runtime
            .block_on(self.client().execute(script, args))
            .unwrap_or_else(|e| panic!("{script}: {e}"))
    }

    /// The text of the first element `css` finds, `None` when there is none.
    fn text(&self, css: &str) -> Option<String> {
        self.script(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
            json!([css]),
        )
        .as_str()
        .map(String::from)
    }

    /// Waits (bounded) until the text of `css` satisfies `ok`; returns it.
    fn wait_text(&self, css: &str, ok: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let text = self.text(css);
            if let Some(text) = &text
                && ok(text)
            {
                return text.clone();
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{css}: {text:?} (page {:?})",
                self.text("main")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn element(&self, css: &str) -> fantoccini::elements::Element {
        self.runtime
            .block_on(self.client().find(Locator::Css(css)))
            .unwrap_or_else(|e| panic!("{css}: {e}"))
    }

    fn click(&self, css: &str) {
        let element = self.element(css);
        self.runtime
            .block_on(element.click())
            .unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    fn type_into(&self, css: &str, text: &str) {
        let element = self.element(css);
        self.runtime
            .block_on(element.send_keys(text))
            .unwrap_or_else(|e| panic!("type into {css}: {e}"));
    }

    fn resize(&self, width: u32, height: u32) {
        self.runtime
            .block_on(self.client().set_window_size(width, height))
            .expect("resize the window");
    }

    fn screenshot(&self, path: &Path) {
        let png = self
            .runtime
            .block_on(self.client().screenshot())
            .expect("a screenshot");
        std::fs::write(path, png).expect("write the screenshot");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = self.runtime.block_on(client.close());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `target/` of this build (the test binary is `target/debug/deps/it-…`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().to_path_buf()
}

/// The agent's side over HTTP: claims, reports.
struct HttpAgent<'a> {
    address: &'a str,
    token: &'a str,
    next: std::cell::Cell<u32>,
}

impl HttpAgent<'_> {
    fn envelope(&self, kind: &str) -> Value {
        let n = self.next.get();
        self.next.set(n + 1);
        json!({"kind": kind, "id": format!("web-{kind}-{n}"), "agent": "agent-web",
               "sent_at": "2026-11-29T10:00:00Z"})
    }

    /// Claims until the hub hands out `command`; returns its delivery.
    fn claim(&self, command: i64) -> Value {
        let started = Instant::now();
        loop {
            let mut claim = self.envelope("claim");
            claim["agent_version"] = "1.4.0".into();
            claim["settings_version"] = 0.into();
            claim["max_commands"] = 10.into();
            let (status, answer) = http(
                self.address,
                "POST",
                "/agent/claim",
                Some(self.token),
                Some(&claim),
            );
            assert_eq!(status, 200, "{answer}");
            if let Some(found) = answer["commands"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["id"] == command)
            {
                return found["delivery"].clone();
            }
            assert!(started.elapsed() < Duration::from_secs(20), "{answer}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn report(&self, result: Value) {
        let mut report = self.envelope("report");
        report["results"] = json!([result]);
        let (status, answer) = http(
            self.address,
            "POST",
            "/agent/report",
            Some(self.token),
            Some(&report),
        );
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["accepted"].as_array().unwrap().len(), 1, "{answer}");
    }
}

/// A mirror to look at and a failed command, made through the service before the daemon runs.
fn prepare(hub: &mut jira_hub::service::HubConnection) -> i64 {
    let agent = Agent::new("agent-relay");
    hub.enqueue_refresh(None, "ivanov").unwrap();
    let claim = agent.claim(hub, 1);
    let command = &claim.commands[0];
    let issues = [
        raw_issue(
            "AURORA-1",
            "1",
            &["AWPCA"],
            json!({"description": "Описание <b>не разметка</b>",
                   "issuelinks": [{"id": "9", "type": {"name": "Blocks"}, "outwardIssue": {"key": "AURORA-2"}}]}),
        ),
        raw_issue(
            "AURORA-2",
            "2",
            &["OTHER"],
            json!({"issuelinks": [{"id": "9", "type": {"name": "Blocks"}, "inwardIssue": {"key": "AURORA-1"}}]}),
        ),
    ];
    agent.report(
        hub,
        json!([{"command_id": command.id, "delivery": command.delivery, "status": "progress",
                "page": {"start_at": 0, "total": 2, "issues": issues}},
               {"command_id": command.id, "delivery": command.delivery, "status": "done",
                "result": {"total": 2, "boards": []}, "jira_calls": 2}]),
    );
    let failing = hub
        .enqueue_batch(&batch(
            json!({"title": "Комментарии к релизу", "author": "ivanov",
            "commands": [{"type": "comment", "params": {"key": "AURORA-1", "body": "Готово"}}]}),
        ))
        .unwrap();
    let claim = agent.claim(hub, 1);
    let command = &claim.commands[0];
    assert_eq!(command.batch_id, failing.id);
    agent.report(
        hub,
        json!([{"command_id": command.id, "delivery": command.delivery, "status": "failed",
                "error": "Jira ответила 403: нет прав на комментарии", "jira_calls": 1, "rate_limited": 1}]),
    );
    command.id
}

#[test]
fn the_console_in_a_headless_browser() {
    if !Path::new(CHROMIUM).exists() || !Path::new(CHROMEDRIVER).exists() {
        println!("skipped: chromium/chromedriver not installed ({CHROMIUM}, {CHROMEDRIVER})");
        return;
    }
    let dir = TestDir::new();
    let (mut hub, _relay, agent_token) = relay_hub(&dir);
    let client_token = hub.tokens().unwrap().unwrap().client;
    let failed_command = prepare(&mut hub);
    drop(hub);
    let daemon = Daemon::start(&dir.db(), &[]);
    let base = format!("http://{}", daemon.address);
    let browser = Browser::start();

    // Signing in: nothing but the form first.
    browser.goto(&base);
    browser.wait_text("form", |t| t.contains("Токен клиента"));
    assert_eq!(browser.text("nav"), None);
    browser.type_into("#token", "не тот токен");
    browser.click("form button");
    browser.wait_text("[role=alert]", |t| t.contains("токен не подошёл"));
    browser.type_into("#token", &client_token);
    browser.click("form button");
    browser.wait_text("h1", |t| t == "Обзор");
    browser.wait_text("main", |t| t.contains("Очередь") && t.contains("Агенты"));

    // A batch moves from queued to completed while the test agent works; the page updates
    // itself (the same document all along: a mark set on it stays).
    let (status, created) = http(
        &daemon.address,
        "POST",
        "/batches",
        Some(&client_token),
        Some(
            &json!({"title": "Связать задачи", "author": "petrov", "project": "AWPCA",
            "commands": [{"type": "comment", "params": {"key": "AURORA-1", "body": "Связь готова"}}]}),
        ),
    );
    assert_eq!(status, 201, "{created}");
    let batch_id = created["id"].as_i64().unwrap();
    let command_id = created["commands"][0]["id"].as_i64().unwrap();
    browser.goto(&format!("{base}/ui/batches/{batch_id}"));
    browser.wait_text("#batch-status", |t| t == "в очереди");
    browser.script("document.body.dataset.mark = 'same page';", json!([]));
    let agent = HttpAgent {
        address: &daemon.address,
        token: &agent_token,
        next: std::cell::Cell::new(1),
    };
    let delivery = agent.claim(command_id);
    browser.wait_text("#batch-status", |t| t == "выполняется");
    browser.wait_text(&format!("#command-{command_id} td:nth-child(6)"), |t| {
        t == "agent-web"
    });
    agent.report(
        json!({"command_id": command_id, "delivery": delivery, "status": "done",
        "result": {"id": "10001"}, "jira_calls": 1}),
    );
    browser.wait_text("#batch-status", |t| t == "завершён");
    assert_eq!(
        browser.script("return document.body.dataset.mark;", json!([])),
        "same page",
        "the page was reloaded instead of updated"
    );

    // Retrying a failed command.
    browser.goto(&format!("{base}/ui/failed"));
    browser.wait_text(&format!("#command-{failed_command}"), |t| {
        t.contains("нет прав на комментарии")
    });
    browser.click(&format!("#command-{failed_command} button"));
    browser.wait_text(".notice", |t| t.contains("снова в очереди"));
    let (_, batches) = http(
        &daemon.address,
        "GET",
        "/batches",
        Some(&client_token),
        None,
    );
    // The list has no commands: each batch is asked for its own.
    let retried = batches
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| {
            let path = format!("/batches/{}", b["id"]);
            let (_, batch) = http(&daemon.address, "GET", &path, Some(&client_token), None);
            batch["commands"].as_array().unwrap().clone()
        })
        .find(|c| c["id"] == failed_command)
        .unwrap();
    assert_eq!(retried["status"], "queued", "{retried}");

    // Adding a note.
    browser.goto(&format!("{base}/ui/issues/AURORA-1"));
    browser.wait_text("h1", |t| t == "AURORA-1");
    assert!(browser.text("main").unwrap().contains("<b>не разметка</b>"));
    browser.type_into("#note-author", "Сидоров");
    browser.type_into("#note-body", "Проверить на стенде <i>до</i> релиза");
    browser.click(".note-form button");
    browser.wait_text("#notes", |t| {
        t.contains("Проверить на стенде <i>до</i> релиза")
    });
    let (_, issue) = http(
        &daemon.address,
        "GET",
        "/issues/AURORA-1",
        Some(&client_token),
        None,
    );
    assert_eq!(issue["notes"][0]["author"], "Сидоров");

    // The overview, as a picture.
    browser.goto(&base);
    browser.wait_text("#overview-charts", |t| t.contains("Выполнено команд в час"));
    let shot = target_dir().join("console-overview.png");
    browser.screenshot(&shot);
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000);
    println!("screenshot of the overview: {}", shot.display());
    // And as a phone shows it: one column, nothing wider than the screen.
    browser.resize(400, 1800);
    browser.goto(&base);
    browser.wait_text("#overview-charts", |t| t.contains("Выполнено команд в час"));
    let overflow = browser.script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth;",
        json!([]),
    );
    assert_eq!(overflow, 0, "the overview is wider than a phone's screen");
    let phone = target_dir().join("console-overview-phone.png");
    browser.screenshot(&phone);
    println!("screenshot of the overview on a phone: {}", phone.display());
}
