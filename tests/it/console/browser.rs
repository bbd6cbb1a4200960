//! The console in a real headless Chromium (Debian's `chromium` and `chromium-driver`, which
//! `.ci/run` installs), against a real `jira-hub serve` and a test agent that answers claims over
//! the HTTP agent API: sign in, watch a batch go from queued to completed without reloading,
//! retry a failed command, add a note; then what the console owes an operator: retry offered
//! only where the service takes it (a skipped command points at its dependency), a batch that
//! completed with a failure not shown as «завершён», cancel saying what it did with its button
//! gone, an unknown page answered as a page, Jira's times in the hub's form, long params wrapped
//! without a word cut; then the operator's path: a failed command's own page (params
//! whole, its key linked to the mirror) and its retry from there (the first attempt stays, with
//! its agent), cancel asking first on a page of its own, a refresh queued behind other work seen
//! as queued (and a second press adding none), the menu on an unknown page, and a real agent
//! frozen with SIGSTOP flagged silent (a step that runs once the hub knows agents' heartbeat
//! periods, the `quiet` work; it says so when skipped). Screenshots (the overview, a batch with a
//! failure, the cancel question, a cancelled batch, a command's page before and after its retry,
//! a queued refresh, the overview on a phone, the frozen agent) are saved in the test's folder
//! and copied into `target/screenshots/`.
//! Without Chromium or its driver (the build script looks for them) the test is ignored, which
//! `cargo test` counts and shows.
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

    /// Claims at most `max` commands; returns them as handed out.
    fn claim_some(&self, max: u32) -> Vec<Value> {
        let mut claim = self.envelope("claim");
        claim["agent_version"] = "1.4.0".into();
        claim["settings_version"] = 0.into();
        claim["max_commands"] = max.into();
        let (status, answer) = http(
            self.address,
            "POST",
            "/agent/claim",
            Some(self.token),
            Some(&claim),
        );
        assert_eq!(status, 200, "{answer}");
        answer["commands"].as_array().unwrap().clone()
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
                   "issuelinks": [{"id": "9", "type": {"name": "Blocks"}, "outwardIssue": {"key": "AURORA-2"}}],
                   "comment": {"comments": [{"id": "3", "author": {"displayName": "Петров"}, "body": "Проверено",
                                             "created": "2026-11-29T13:05:00.000+0300"}]}}),
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

/// Saves a screenshot in the test's folder and copies it into `target/screenshots/`, where it
/// stays to be looked at.
fn keep_screenshot(browser: &Browser, dir: &TestDir, name: &str) -> PathBuf {
    let shot = dir.path().join(name);
    browser.screenshot(&shot);
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000, "{name}");
    let kept = target_dir().join("screenshots");
    std::fs::create_dir_all(&kept).unwrap();
    let kept = kept.join(name);
    std::fs::copy(&shot, &kept).unwrap();
    println!("screenshot: {}", kept.display());
    kept
}

/// Whether each word of the element's text sits on one line (a word cut across two lines has
/// two boxes); the words that do not, with their boxes.
fn cut_words(browser: &Browser, css: &str) -> Value {
    browser.script(
        "const e = document.querySelector(arguments[0]);
         const node = e.firstChild; const text = node.textContent; const cut = [];
         let at = 0;
         for (const word of text.split(' ')) {
           if (word.length > 0) {
             const r = document.createRange(); r.setStart(node, at); r.setEnd(node, at + word.length);
             const boxes = Array.from(r.getClientRects()).filter(b => b.width > 0);
             if (boxes.length !== 1) { cut.push([word, boxes.length]); }
           }
           at += word.length + 1;
         }
         return {cut: cut, lines: Math.round(e.getBoundingClientRect().height / parseFloat(getComputedStyle(e).lineHeight || 16))};",
        json!([css]),
    )
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs /usr/bin/chromium and /usr/bin/chromedriver (Debian's chromium, chromium-driver)"
)]
fn the_console_in_a_headless_browser() {
    assert!(
        Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists(),
        "{CHROMIUM} or {CHROMEDRIVER} went away since the build"
    );
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
    browser.wait_text("[role=alert]", |t| t.contains("Токен не подошёл"));
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
    browser.wait_text(&format!("#command-{command_id} td:nth-child(7)"), |t| {
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

    // Jira's comment time in the hub's form, Jira's own text on hover.
    let comment_time = browser.wait_text(".comment .meta time", |t| t.contains("UTC"));
    assert_eq!(comment_time, "2026-11-29 10:05 UTC");

    // A batch whose first command fails: the dependent is skipped, and only the first offers
    // «Повторить»; the skipped one points at it by the number the table shows. The batch is
    // not a green «завершён». Long params wrap between members, no word cut.
    let long_body = "Релиз согласован с заказчиком; стенд обновлён, миграции проверены, \
                     документация передана в поддержку, замечания по интерфейсу закрыты";
    let (status, created) = http(
        &daemon.address,
        "POST",
        "/batches",
        Some(&client_token),
        Some(
            &json!({"title": "Создать и прокомментировать", "author": "petrov", "project": "AWPCA",
            "commands": [
                {"type": "comment", "params": {"key": "AURORA-1", "body": long_body}},
                {"type": "comment", "params": {"key": {"$result": "key"}, "body": "Следом"}, "depends_on": 1},
                {"type": "link", "params": {"from": "AURORA-1", "to": "AURORA-404", "type": "blocks"}}]}),
        ),
    );
    assert_eq!(status, 201, "{created}");
    let failing_batch = created["id"].as_i64().unwrap();
    let first = created["commands"][0]["id"].as_i64().unwrap();
    let second = created["commands"][1]["id"].as_i64().unwrap();
    let link = created["commands"][2]["id"].as_i64().unwrap();
    let delivery = agent.claim(first);
    agent.report(
        json!({"command_id": first, "delivery": delivery, "status": "failed",
                        "error": "Jira ответила 400: поле body слишком длинное"}),
    );
    // A link Jira refused, its key named: shown as the agent reported it.
    agent.report(
        json!({"command_id": link, "delivery": 1, "status": "failed",
        "error": "AURORA-404: Jira отказала (HTTP 404): «Issue Does Not Exist»"}),
    );
    agent.claim_some(10); // the claim walk skips the dependent
    browser.goto(&format!("{base}/ui/batches/{failing_batch}"));
    browser.wait_text("#batch-status", |t| t == "завершён с ошибками");
    let color = browser.script(
        "return getComputedStyle(document.getElementById('batch-status')).color;",
        json!([]),
    );
    assert_eq!(
        color, "rgb(179, 38, 30)",
        "the failed batch's status is not red"
    );
    assert_eq!(
        browser.text(&format!("#command-{first} button")).as_deref(),
        Some("Повторить")
    );
    assert_eq!(browser.text(&format!("#command-{second} button")), None);
    let pointer = browser.wait_text(&format!("#command-{second} td:last-child"), |t| {
        !t.is_empty()
    });
    assert!(
        pointer.contains("Зависит от команды 1 («ошибка»)"),
        "{pointer}"
    );
    let skipped_because = browser.text(&format!("#command-{second} .error")).unwrap();
    assert_eq!(
        skipped_because,
        "Команда 1 этого пакета, от которой зависит эта, завершилась со статусом «ошибка»"
    );
    let params = format!("#command-{first} td.params .value");
    let wrapped = cut_words(&browser, &params);
    assert_eq!(wrapped["cut"], json!([]), "{wrapped}");
    keep_screenshot(&browser, &dir, "console-batch-failed.png");
    // On a phone the params wrap over more lines, still without a word cut.
    browser.resize(400, 1500);
    browser.goto(&format!("{base}/ui/batches/{failing_batch}"));
    browser.wait_text("#batch-status", |t| t == "завершён с ошибками");
    let wrapped = cut_words(&browser, &params);
    assert_eq!(wrapped["cut"], json!([]), "{wrapped}");
    assert!(wrapped["lines"].as_i64().unwrap() > 2, "{wrapped}");
    // The status and the error stay on screen (only the action column may need a scroll).
    let fits = browser.script(
        "const row = document.querySelector(arguments[0]); \
         return ['td.status', 'td.outcome'].map(c => \
           row.querySelector(c).getBoundingClientRect().right <= window.innerWidth);",
        json!([format!("#command-{first}")]),
    );
    assert_eq!(
        fits,
        json!([true, true]),
        "status and error off screen on a phone"
    );
    keep_screenshot(&browser, &dir, "console-batch-phone.png");
    browser.resize(1280, 1500);
    // Following the pointer leads to the dependency's row.
    browser.click(&format!("#command-{second} td:last-child a"));
    browser.wait_text(&format!("#command-{first}"), |t| t.contains("ошибка"));
    let hash = browser.script("return window.location.hash;", json!([]));
    assert_eq!(hash, format!("#command-{first}"));

    // Cancelling a batch with a command at the agent: says what it did and did not, the button
    // goes.
    let (status, created) = http(
        &daemon.address,
        "POST",
        "/batches",
        Some(&client_token),
        Some(&json!({"title": "Три комментария", "author": "petrov",
            "commands": [
                {"type": "comment", "params": {"key": "AURORA-1", "body": "раз"}},
                {"type": "comment", "params": {"key": "AURORA-1", "body": "два"}},
                {"type": "comment", "params": {"key": "AURORA-1", "body": "три"}}]})),
    );
    assert_eq!(status, 201, "{created}");
    let cancelled_batch = created["id"].as_i64().unwrap();
    let at_agent = agent.claim_some(1);
    assert_eq!(at_agent.len(), 1);
    assert_eq!(at_agent[0]["batch_id"], cancelled_batch);
    browser.goto(&format!("{base}/ui/batches/{cancelled_batch}"));
    browser.wait_text("#batch-status", |t| t == "выполняется");
    // Cancel asks first: a page of its own (no script needed) says what it will do.
    browser.click("#batch-head a.danger");
    let question = browser.wait_text("#cancel-question", |t| !t.is_empty());
    assert_eq!(
        question,
        "Отменить пакет ".to_string() + &cancelled_batch.to_string() + " «Три комментария»?"
    );
    let said = browser.text("main").unwrap();
    assert!(
        said.contains("Снимутся с очереди: 2 команды") && said.contains("У агента: 1 команда"),
        "{said}"
    );
    keep_screenshot(&browser, &dir, "console-cancel-confirm.png");
    browser.click("main button.danger");
    let notice = browser.wait_text(".notice", |t| t.contains("Пакет отменён"));
    assert!(
        notice.contains("те, что уже у агента, отмена не прерывает"),
        "{notice}"
    );
    let outcome = browser.wait_text("#cancel-outcome", |t| !t.is_empty());
    assert!(
        outcome.contains("Отмена сняла с очереди 2 команды.")
            && outcome.contains("У агента осталась 1 команда"),
        "{outcome}"
    );
    assert_eq!(browser.text("#batch-head .danger"), None);
    keep_screenshot(&browser, &dir, "console-batch-cancelled.png");

    // The failed command's own page: params whole, its agent, its keys; retried from there, its
    // first attempt stays in the table with the agent that made it.
    browser.goto(&format!("{base}/ui/batches/{failing_batch}"));
    browser.click(&format!("#command-{first} td:first-child a"));
    browser.wait_text("h1", |t| *t == format!("Пакет {failing_batch}, команда 1"));
    let params = browser.wait_text("#command-params", |t| {
        t.contains("замечания по интерфейсу закрыты")
    });
    assert!(params.contains(long_body), "{params}");
    assert_eq!(
        browser.text("#command-keys a").as_deref(),
        Some("AURORA-1"),
        "the key links to the mirror's page"
    );
    keep_screenshot(&browser, &dir, "console-command.png");
    browser.click("#command-head button");
    browser.wait_text(".notice", |t| t.contains("снова в очереди"));
    let attempts = browser.wait_text("#attempts", |t| t.contains("agent-web"));
    assert!(attempts.contains("поле body слишком длинное"), "{attempts}");
    // The new attempt is not handed out yet: the last attempt's agent is in the table, not above.
    let head = browser.text("#command-head").unwrap_or_default();
    assert!(head.contains("ещё не выдана"), "{head}");
    keep_screenshot(&browser, &dir, "console-command-retried.png");

    // A refresh behind other work: shown as queued, where it stands; pressing again adds none.
    let (status, created) = http(
        &daemon.address,
        "POST",
        "/batches",
        Some(&client_token),
        Some(
            &json!({"title": "Работа перед обновлением", "author": "petrov",
            "commands": [
                {"type": "comment", "params": {"key": "AURORA-1", "body": "раз"}},
                {"type": "comment", "params": {"key": "AURORA-1", "body": "два"}}]}),
        ),
    );
    assert_eq!(status, 201, "{created}");
    browser.goto(&format!("{base}/ui/runs"));
    browser.click("form.filter button");
    let queued = browser.wait_text(".queued-refresh", |t| t.contains("ждёт в очереди"));
    assert!(queued.contains("пакет"), "{queued}");
    keep_screenshot(&browser, &dir, "console-refresh-queued.png");
    let queued_count = browser.script(
        "return document.querySelectorAll('.queued-refresh').length;",
        json!([]),
    );
    browser.click("form.filter button");
    browser.wait_text(".notice", |t| t.contains("второе не добавлено"));
    assert_eq!(
        browser.script(
            "return document.querySelectorAll('.queued-refresh').length;",
            json!([])
        ),
        queued_count,
        "pressed again: no second refresh"
    );
    browser.goto(&base);
    browser.wait_text(".queued-refresh", |t| t.contains("ждёт в очереди"));

    // An unknown page is a page.
    browser.goto(&format!("{base}/ui/no-such-page"));
    browser.wait_text("[role=alert]", |t| {
        t.contains("Такой страницы в консоли нет")
    });
    // The menu stays.
    assert!(
        browser.text("nav").unwrap_or_default().contains("Пакеты"),
        "{:?}",
        browser.text("body")
    );

    // The overview, as a picture.
    browser.goto(&base);
    browser.wait_text("#overview-charts", |t| t.contains("Выполнено команд в час"));
    keep_screenshot(&browser, &dir, "console-overview.png");
    // And as a phone shows it: one column, nothing wider than the screen.
    browser.resize(400, 1800);
    browser.goto(&base);
    browser.wait_text("#overview-charts", |t| t.contains("Выполнено команд в час"));
    let overflow = browser.script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth;",
        json!([]),
    );
    assert_eq!(overflow, 0, "the overview is wider than a phone's screen");
    keep_screenshot(&browser, &dir, "console-overview-phone.png");
    browser.resize(1280, 1500);

    frozen_agent_is_flagged(&browser, &dir, &daemon.address, &agent_token, &client_token);
}

/// A real `jira-hub agent` with a heartbeat every 2 s, frozen with SIGSTOP: the overview flags
/// it silent once two heartbeat periods pass without a word from it: the hub
/// knows the agent's period from its heartbeats (`/agents` carries `heartbeat_seconds`).
fn frozen_agent_is_flagged(
    browser: &Browser,
    dir: &TestDir,
    address: &str,
    agent_token: &str,
    client_token: &str,
) {
    let fake = jira_hub::sim::jira::FakeJira::start(jira_hub::sim::jira::Mode::DataCenter);
    let config = json!({
        "jira_url": fake.url(), "jira_user": "agent", "jira_password": "secret",
        "agent_token": agent_token, "name": "agent-frozen", "idle_poll_ms": 100,
        "hub_url": format!("http://{address}"), "heartbeat_seconds": 2,
    });
    let path = dir.path().join("agent-frozen.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let log = std::fs::File::create(dir.path().join("agent-frozen.log")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_jira-hub"))
        .arg("agent")
        .arg("--config")
        .arg(&path)
        .current_dir(dir.path())
        .env_remove("JIRA_HUB_DB")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start the agent");
    let agent = Stopped(child);
    let base = format!("http://{address}");
    browser.goto(&base);
    browser.wait_text(".agent h3", |_| {
        browser
            .text("#overview-cards")
            .is_some_and(|t| t.contains("agent-frozen"))
    });
    let (_, agents) = http(address, "GET", "/agents", Some(client_token), None);
    let knows_period = agents
        .as_array()
        .into_iter()
        .flatten()
        .any(|a| a["agent"] == "agent-frozen" && a.get("heartbeat_seconds").is_some());
    assert!(
        knows_period,
        "the hub does not know the agent's heartbeat period: {agents}"
    );
    let pid = agent.0.id().to_string();
    let stopped = Command::new("kill").args(["-STOP", &pid]).status().unwrap();
    assert!(stopped.success());
    // Two missed periods are 4 s; the wait is bounded generously (debug builds, two cores).
    browser.goto(&base);
    browser.wait_text("#overview-cards", |t| t.contains("Молчит"));
    let silent = browser.script(
        "return Array.from(document.querySelectorAll('.agent.silent h3')).map(e => e.textContent);",
        json!([]),
    );
    assert!(
        silent
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "agent-frozen"),
        "{silent}"
    );
    keep_screenshot(browser, dir, "console-agent-frozen.png");
    drop(agent);
}

/// An agent process: continued (it may be stopped) and killed when dropped.
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-CONT", &pid]).status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The conflict check in the browser: an edit stopped by a change made in Jira shows its conflict as a
/// table on its command's page (and apart from other failures on its batch's page); «Записать
/// поверх» queues it again to overwrite, «Оставить как в Jira» ends it cancelled with its
/// dependent skipped and saying why. Screenshots: the batch, the conflict, after each action.
#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs /usr/bin/chromium and /usr/bin/chromedriver (Debian's chromium, chromium-driver)"
)]
fn a_conflict_and_the_operators_answers_in_a_headless_browser() {
    let dir = TestDir::new();
    let (mut hub, _relay, _agent_token) = relay_hub(&dir);
    let client_token = hub.tokens().unwrap().unwrap().client;
    prepare(&mut hub);
    let edit = |key: &str, summary: &str| json!({"type": "ensure_issue", "params": {"issue_type": "task", "key": key, "summary": summary, "priority": "high"}});
    let view = hub
        .enqueue_batch(&batch(json!({"title": "Правки к релизу", "author": "ivanov", "commands": [
            edit("AURORA-1", "Наше название"),
            edit("AURORA-2", "Наше второе"),
            {"type": "comment", "params": {"key": "AURORA-2", "body": "Поправлено"}, "depends_on": 2}]})))
        .unwrap();
    let ids: Vec<i64> = view.commands.iter().map(|c| c.id).collect();
    let agent = Agent::new("agent-relay");
    let mut claimed = agent.claim(&mut hub, 10).commands;
    if claimed.len() < 3 {
        claimed.extend(agent.claim(&mut hub, 10).commands);
    }
    claimed.retain(|c| c.batch_id == view.id);
    assert_eq!(
        claimed.iter().map(|c| c.id).collect::<Vec<_>>(),
        ids[..2],
        "the comment waits for its edit"
    );
    let conflict = |command: &jira_hub::protocol::ClaimedCommand, key: &str, theirs: &str| {
        json!({"command_id": command.id, "delivery": command.delivery, "status": "failed", "jira_calls": 1,
               "error": format!("{key}: конфликт — поле изменили в Jira после постановки правки в очередь; ничего не записано"),
               "result": {"key": key, "conflict": {"updated": "2026-11-29T12:40:00.000+0300", "fields": [
                   {"field": "summary", "base": format!("Задача {key}"), "jira": theirs, "wanted": command.params["summary"],
                    "changed_by": "Мария Петрова", "changed_at": "2026-11-29T12:40:00.000+0300"},
                   {"field": "priority", "base": null, "jira": {"id": "4", "name": "Низкий"}, "wanted": {"name": "Высокий"},
                    "changed_by": "Automation for Jira", "changed_at": "2026-11-29T12:41:00.000+0300"}]}}})
    };
    agent.report(
        &mut hub,
        json!([
            conflict(&claimed[0], "AURORA-1", "Их название"),
            conflict(&claimed[1], "AURORA-2", "Их второе")
        ]),
    );
    drop(hub);
    let daemon = Daemon::start(&dir.db(), &[]);
    let base = format!("http://{}", daemon.address);
    let browser = Browser::start();
    browser.goto(&base);
    browser.wait_text("form", |t| t.contains("Токен клиента"));
    browser.type_into("#token", &client_token);
    browser.click("form button");
    browser.wait_text("h1", |t| t == "Обзор");

    browser.goto(&format!("{base}/ui/batches/{}", view.id));
    browser.wait_text("#batch-conflicts", |t| t.starts_with("2 ждут решения"));
    keep_screenshot(&browser, &dir, "conflict-batch.png");

    browser.goto(&format!("{base}/ui/commands/{}", ids[0]));
    let table = browser.wait_text("#conflict-fields", |t| t.contains("Их название"));
    for words in [
        "Поле",
        "Было",
        "В Jira сейчас",
        "Хотели записать",
        "Задача AURORA-1",
        "Наше название",
        "Низкий",
        "Высокий",
        "Мария Петрова",
        "Automation for Jira",
    ] {
        assert!(table.contains(words), "{words}: {table}");
    }
    keep_screenshot(&browser, &dir, "conflict.png");
    // At a phone's 400 px the five columns do not fit: each field is a card of its values, each
    // value labelled, nothing scrolled sideways (before, the table scrolled in its box).
    browser.resize(400, 1800);
    browser.goto(&format!("{base}/ui/commands/{}", ids[0]));
    browser.wait_text("#conflict-fields", |t| t.contains("Их название"));
    let wider = browser.script(
        "const t = document.getElementById('conflict-fields'); \
         return [t.scrollWidth - t.parentElement.clientWidth, \
                 document.documentElement.scrollWidth - document.documentElement.clientWidth];",
        json!([]),
    );
    assert_eq!(
        wider,
        json!([0, 0]),
        "the conflict table is wider than a phone's screen"
    );
    let labelled = browser.script(
        "const cell = document.querySelector('#conflict-fields tbody td:nth-child(3)'); \
         return getComputedStyle(cell, '::before').content;",
        json!([]),
    );
    assert!(
        labelled
            .as_str()
            .is_some_and(|l| l.contains("В Jira сейчас")),
        "{labelled}"
    );
    keep_screenshot(&browser, &dir, "conflict-phone.png");
    browser.resize(1280, 1500);
    browser.click("#conflict form[action$='/overwrite'] button");
    browser.wait_text(".notice", |t| t.contains("поверх значений Jira"));
    browser.wait_text("#command-status", |t| t.contains("в очереди"));
    assert!(
        browser
            .text("#command-params")
            .unwrap()
            .contains("\"overwrite\"")
    );
    keep_screenshot(&browser, &dir, "conflict-after-overwrite.png");

    browser.goto(&format!("{base}/ui/commands/{}", ids[1]));
    browser.wait_text("#conflict-fields", |t| t.contains("Их второе"));
    browser.click("#conflict form[action$='/keep-jira'] button");
    browser.wait_text(".notice", |t| t.contains("Оставлено как в Jira"));
    browser.wait_text("#command-status", |t| t.contains("отменена"));
    for decided in ["overwrite", "keep-jira"] {
        assert_eq!(
            browser.text(&format!("#conflict form[action$='/{decided}']")),
            None,
            "no actions once decided"
        );
    }
    // What is left to decide: the dependent, as a copy in a new batch.
    browser.wait_text("#kept-dependents", |t| t.contains("не выполнятся"));
    assert!(
        browser
            .text("#conflict form[action$='/enqueue-dependents']")
            .is_some()
    );
    keep_screenshot(&browser, &dir, "conflict-after-keep.png");

    browser.goto(&format!("{base}/ui/commands/{}", ids[2]));
    browser.wait_text("main", |t| t.contains("оставил как в Jira"));
    keep_screenshot(&browser, &dir, "conflict-dependent-skipped.png");
}
