//! The operator's web console: its HTTP rules without a browser (the sign-in form is all a
//! request without the cookie sees, no POST without the anti-forgery token or from another site
//! changes anything, hostile text is escaped), then the pages in a real headless Chromium
//! against a real `jira-hub serve` while a test agent works (`browser` below).

use crate::support::*;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use jira_hub::http::HttpOptions;
use serde_json::{Value, json};
use tower::ServiceExt;

mod browser;
mod escaping;

/// Form fields or headers: names and values.
type Pairs<'a> = &'a [(&'a str, &'a str)];

struct Console {
    router: axum::Router,
    client: String,
    agent: String,
    _dir: TestDir,
}

struct Page {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

fn console() -> Console {
    let (router, client, agent, dir) = test_router(HttpOptions::default());
    Console {
        router,
        client,
        agent,
        _dir: dir,
    }
}

/// The anti-forgery token of a page's forms.
fn csrf_of(page: &str) -> String {
    let at = page
        .find("name=\"csrf\" value=\"")
        .expect("a form with csrf")
        + 19;
    page[at..].split('"').next().unwrap().to_string()
}

impl Console {
    async fn send(&self, request: Request<Body>) -> Page {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        Page {
            status,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    async fn get(&self, path: &str, cookie: Option<&str>) -> Page {
        let mut request = Request::builder().method(Method::GET).uri(path);
        if let Some(cookie) = cookie {
            request = request.header("Cookie", cookie);
        }
        self.send(request.body(Body::empty()).unwrap()).await
    }

    async fn post(
        &self,
        path: &str,
        cookie: Option<&str>,
        form: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> Page {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header("Host", "127.0.0.1:8740")
            .header("Content-Type", "application/x-www-form-urlencoded");
        if let Some(cookie) = cookie {
            request = request.header("Cookie", cookie);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let body = serde_urlencoded::to_string(form).unwrap();
        self.send(request.body(Body::from(body)).unwrap()).await
    }

    /// The API, for setting things up and checking what changed.
    async fn api(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header("Authorization", format!("Bearer {}", self.client));
        if body.is_some() {
            request = request.header("Content-Type", "application/json");
        }
        let body = body.map_or_else(Body::empty, |b| Body::from(b.to_string()));
        let page = self.send(request.body(body).unwrap()).await;
        assert!(page.status.is_success(), "{} {}", page.status, page.body);
        serde_json::from_str(&page.body).unwrap()
    }

    /// An agent's request with the agent token.
    async fn agent_post(&self, path: &str, body: Value) -> Page {
        let request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header("Authorization", format!("Bearer {}", self.agent))
            .header("Content-Type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        self.send(request).await
    }

    /// A claim of one command by `agent`; the answer.
    async fn claim(&self, agent: &str, id: &str) -> Value {
        let page = self
            .agent_post(
                "/agent/claim",
                json!({"kind": "claim", "id": id, "agent": agent, "sent_at": "2026-11-29T10:00:00Z",
                       "agent_version": "1.4.0", "settings_version": 0, "max_commands": 1}),
            )
            .await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        serde_json::from_str(&page.body).unwrap()
    }

    /// Signs in; returns the cookie to send.
    async fn sign_in(&self) -> String {
        let page = self
            .post("/ui/sign-in", None, &[("token", &self.client)], &[])
            .await;
        assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
        let set = page.headers["set-cookie"].to_str().unwrap().to_string();
        set.split(';').next().unwrap().to_string()
    }

    async fn batch(&self, title: &str) -> Value {
        self.api(
            Method::POST,
            "/batches",
            Some(json!({"title": title, "author": "ivanov", "commands": [
                {"type": "comment", "params": {"key": "AURORA-1", "body": "x"}}]})),
        )
        .await
    }
}

#[tokio::test]
async fn without_the_cookie_there_is_only_the_sign_in_form() {
    let console = console();
    let batch = console.batch("не трогать").await;
    let id = batch["id"].as_i64().unwrap();
    for path in [
        "/".to_string(),
        "/ui/batches".to_string(),
        format!("/ui/batches/{id}"),
        "/ui/failed".to_string(),
        "/ui/mirror".to_string(),
        "/ui/runs".to_string(),
    ] {
        for cookie in [
            None,
            Some("jira_hub_session=6e6f7065"),
            Some("jira_hub_session=zz"),
        ] {
            let page = console.get(&path, cookie).await;
            assert_eq!(page.status, StatusCode::UNAUTHORIZED, "{path} {cookie:?}");
            assert!(page.body.contains("action=\"/ui/sign-in\""), "{path}");
            assert!(!page.body.contains("не трогать"), "{path}");
            assert!(!page.body.contains("name=\"csrf\""), "{path}");
        }
    }
    // Actions without the cookie change nothing, whatever the form says.
    let page = console
        .post(
            &format!("/ui/batches/{id}/cancel"),
            None,
            &[("csrf", "00")],
            &[],
        )
        .await;
    assert_eq!(page.status, StatusCode::UNAUTHORIZED);
    let page = console
        .post("/ui/refresh", Some("jira_hub_session=6e6f7065"), &[], &[])
        .await;
    assert_eq!(page.status, StatusCode::UNAUTHORIZED);
    let after = console
        .api(Method::GET, &format!("/batches/{id}"), None)
        .await;
    assert_eq!(after["status"], "queued");
    // The list shows the batch without its commands, with their number.
    let mut listed = after.clone();
    let commands = listed.as_object_mut().unwrap().remove("commands").unwrap();
    listed["commands_total"] = json!(commands.as_array().unwrap().len());
    assert_eq!(
        console.api(Method::GET, "/batches", None).await,
        json!([listed])
    );
    // The page's script and style carry no data and need no cookie.
    let script = console.get("/ui/static/console.js", None).await;
    assert_eq!(script.status, StatusCode::OK);
    assert!(script.body.contains("data-live"));
}

#[tokio::test]
async fn signing_in_sets_a_strict_http_only_cookie() {
    let console = console();
    let wrong = console
        .post("/ui/sign-in", None, &[("token", "not-the-token")], &[])
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(wrong.body.contains("Токен не подошёл"), "{}", wrong.body);
    assert!(!wrong.headers.contains_key("set-cookie"));
    let agent = console
        .post("/ui/sign-in", None, &[("token", &console.agent)], &[])
        .await;
    assert_eq!(agent.status, StatusCode::UNAUTHORIZED);
    assert!(agent.body.contains("токен агента"), "{}", agent.body);

    let right = console
        .post("/ui/sign-in", None, &[("token", &console.client)], &[])
        .await;
    assert_eq!(right.status, StatusCode::SEE_OTHER);
    assert_eq!(right.headers["location"], "/");
    let set = right.headers["set-cookie"].to_str().unwrap();
    for part in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(part), "{set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: {set}");
    assert!(
        !set.contains(&console.client),
        "the token is not sent as it is"
    );
    let behind_tls = console
        .post(
            "/ui/sign-in",
            None,
            &[("token", &console.client)],
            &[("X-Forwarded-Proto", "https")],
        )
        .await;
    assert!(
        behind_tls.headers["set-cookie"]
            .to_str()
            .unwrap()
            .contains("; Secure")
    );

    let cookie = console.sign_in().await;
    let page = console.get("/", Some(&cookie)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("<h2>Очередь</h2>"));
    assert!(page.body.contains("<svg"));
    assert_eq!(page.headers["content-type"], "text/html; charset=utf-8");
    assert!(
        page.headers["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("frame-ancestors 'none'")
    );

    // Signing out ends the cookie.
    let csrf = csrf_of(&page.body);
    let out = console
        .post("/ui/sign-out", Some(&cookie), &[("csrf", &csrf)], &[])
        .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(
        out.headers["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
}

#[tokio::test]
async fn a_post_without_the_anti_forgery_token_or_from_another_site_changes_nothing() {
    let console = console();
    let cookie = console.sign_in().await;
    let id = console.batch("пакет").await["id"].as_i64().unwrap();
    let page = console
        .get(&format!("/ui/batches/{id}"), Some(&cookie))
        .await;
    let csrf = csrf_of(&page.body);
    let cancel = format!("/ui/batches/{id}/cancel");
    let refused: [(Pairs, Pairs); 5] = [
        (&[], &[]),
        (&[("csrf", "")], &[]),
        (&[("csrf", "0123456789abcdef")], &[]),
        (&[("csrf", &csrf)], &[("Origin", "http://evil.example")]),
        (&[("csrf", &csrf)], &[("Sec-Fetch-Site", "cross-site")]),
    ];
    for (form, headers) in refused {
        let page = console.post(&cancel, Some(&cookie), form, headers).await;
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{form:?} {headers:?}");
        assert!(page.body.contains("role=\"alert\""), "{}", page.body);
        assert!(!page.body.contains("<form"), "{}", page.body);
        let batch = console
            .api(Method::GET, &format!("/batches/{id}"), None)
            .await;
        assert_eq!(batch["status"], "queued", "{form:?} {headers:?}");
    }
    // A refresh, a retry and a note need it too.
    let refresh = console.post("/ui/refresh", Some(&cookie), &[], &[]).await;
    assert_eq!(refresh.status, StatusCode::FORBIDDEN);
    for path in [
        "/ui/commands/1/retry".to_string(),
        format!("/ui/batches/{id}/retry-failed"),
        "/ui/issues/AURORA-1/notes".to_string(),
    ] {
        let page = console
            .post(&path, Some(&cookie), &[("author", "a"), ("body", "b")], &[])
            .await;
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{path}");
    }
    assert_eq!(
        console
            .api(Method::GET, "/batches", None)
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // The same form from this site, with the token, works.
    let page = console
        .post(
            &cancel,
            Some(&cookie),
            &[("csrf", &csrf), ("confirmed", "yes")],
            &[
                ("Origin", "http://127.0.0.1:8740"),
                ("Sec-Fetch-Site", "same-origin"),
            ],
        )
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert_eq!(
        page.headers["location"],
        format!("/ui/batches/{id}?notice=cancelled")
    );
    let batch = console
        .api(Method::GET, &format!("/batches/{id}"), None)
        .await;
    assert_eq!(batch["status"], "cancelled");
    // Cancelling twice changes nothing more.
    let again = console
        .post(&cancel, Some(&cookie), &[("csrf", &csrf)], &[])
        .await;
    assert_eq!(again.status, StatusCode::SEE_OTHER);
    // A sign-in form posted from another site is refused too.
    let page = console
        .post(
            "/ui/sign-in",
            None,
            &[("token", &console.client)],
            &[("Origin", "http://evil.example")],
        )
        .await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    assert!(page.body.contains("с другого сайта"), "{}", page.body);
    assert!(!page.headers.contains_key("set-cookie"));
    // The sign-in address opened by hand leads to the console.
    let page = console.get("/ui/sign-in", None).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn hostile_text_is_escaped_and_pages_answer() {
    let console = console();
    let cookie = console.sign_in().await;
    let hostile = "<script>alert(1)</script>\"'&";
    let id = console.batch(hostile).await["id"].as_i64().unwrap();
    for path in [
        "/ui/batches".to_string(),
        format!("/ui/batches/{id}"),
        "/ui/batches?project=AWPCA&status=queued".to_string(),
        "/ui/batches?status=nonsense".to_string(),
    ] {
        let page = console.get(&path, Some(&cookie)).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        assert!(!page.body.contains("<script>alert"), "{path}");
    }
    let page = console
        .get(&format!("/ui/batches/{id}"), Some(&cookie))
        .await;
    assert!(
        page.body
            .contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;")
    );
    for (path, status) in [
        ("/ui/failed", StatusCode::OK),
        ("/ui/mirror", StatusCode::OK),
        ("/ui/mirror/AWPCA", StatusCode::OK),
        ("/ui/runs", StatusCode::OK),
        ("/ui/mirror/NOPE", StatusCode::NOT_FOUND),
        ("/ui/issues/NOPE-1", StatusCode::NOT_FOUND),
        ("/ui/batches/999", StatusCode::NOT_FOUND),
        ("/ui/batches/x", StatusCode::NOT_FOUND),
    ] {
        let page = console.get(path, Some(&cookie)).await;
        assert_eq!(page.status, status, "{path}: {}", page.body);
        assert!(page.body.contains("<nav>"), "{path}");
    }
    let page = console.get("/ui/mirror/NOPE", Some(&cookie)).await;
    assert!(page.body.contains("Проекта «NOPE» нет"), "{}", page.body);
}

/// The overview shows a refresh in progress (pages, issues so far, Jira's total) and the
/// queue's oldest command; the sync runs page shows the same run.
#[tokio::test]
async fn the_overview_shows_a_refresh_in_progress() {
    let console = console();
    let cookie = console.sign_in().await;
    let page = console.get("/", Some(&cookie)).await;
    assert!(
        page.body.contains("Сейчас обновление не идёт"),
        "{}",
        page.body
    );
    assert!(page.body.contains("В очереди ничего не ждёт"));
    console.api(Method::POST, "/refresh", None).await;
    let page = console.get("/", Some(&cookie)).await;
    assert!(
        page.body.contains("Старейшая команда в очереди ждёт"),
        "{}",
        page.body
    );

    let claim = console.claim("agent-<i>", "c1").await;
    let command = &claim["commands"][0];
    let issues = [
        raw_issue("AURORA-1", "1", &["AWPCA"], json!({})),
        raw_issue("AURORA-2", "2", &["AWPCA"], json!({})),
    ];
    let report = console
        .agent_post(
            "/agent/report",
        json!({"kind": "report", "id": "r1", "agent": "agent-<i>", "sent_at": "2026-11-29T10:00:00Z",
               "results": [{"command_id": command["id"], "delivery": command["delivery"], "status": "progress",
                            "page": {"start_at": 0, "total": 3, "issues": issues}}]}),
    )
    .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.body);

    let page = console.get("/", Some(&cookie)).await;
    assert!(
        page.body
            .contains("страниц: <b>1</b>, задач получено: <b>2</b> из 3"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("<h3>agent-&lt;i&gt;</h3>"),
        "{}",
        page.body
    );
    let runs = console.get("/ui/runs", Some(&cookie)).await;
    assert!(
        runs.body.contains("задач получено: <b>2</b> из 3"),
        "{}",
        runs.body
    );
    let mirror = console.get("/ui/mirror", Some(&cookie)).await;
    assert!(
        mirror.body.contains("Задач в зеркале всего: <b>2</b>"),
        "{}",
        mirror.body
    );
    let slice = console.get("/ui/mirror/AWPCA", Some(&cookie)).await;
    assert!(
        slice.body.contains("href=\"/ui/issues/AURORA-2\""),
        "{}",
        slice.body
    );
}

/// A failed command is offered again on the failed page and its batch's page; in a cancelled
/// batch it is not (its commands never go back to Jira), and retrying it by hand is refused in
/// words.
#[tokio::test]
async fn a_cancelled_batch_offers_no_retry() {
    let console = console();
    let cookie = console.sign_in().await;
    let batch = console
        .api(
            Method::POST,
            "/batches",
            Some(
                json!({"title": "два комментария", "author": "ivanov", "commands": [
                {"type": "comment", "params": {"key": "AURORA-1", "body": "x"}},
                {"type": "comment", "params": {"key": "AURORA-1", "body": "y"}}]}),
            ),
        )
        .await;
    let id = batch["id"].as_i64().unwrap();
    let claim = console.claim("agent-1", "c1").await;
    let command = claim["commands"][0]["id"].as_i64().unwrap();
    let report = console
        .agent_post(
            "/agent/report",
            json!({"kind": "report", "id": "r1", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
                   "results": [{"command_id": command, "delivery": claim["commands"][0]["delivery"],
                                "status": "failed", "error": "нет прав <b>"}]}),
        )
        .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.body);
    let retry_form = format!("action=\"/ui/commands/{command}/retry\"");

    let failed = console.get("/ui/failed", Some(&cookie)).await;
    assert!(failed.body.contains(&retry_form), "{}", failed.body);
    assert!(failed.body.contains("нет прав &lt;b&gt;"));
    assert!(
        failed
            .body
            .contains("Отменить пакет… (не закончено: 1 команда)"),
        "{}",
        failed.body
    );
    let page = console
        .get(&format!("/ui/batches/{id}"), Some(&cookie))
        .await;
    assert!(page.body.contains(&retry_form));
    let csrf = csrf_of(&page.body);

    let cancel = console
        .post(
            &format!("/ui/batches/{id}/cancel"),
            Some(&cookie),
            &[
                ("csrf", &csrf),
                ("back", "/ui/failed"),
                ("confirmed", "yes"),
            ],
            &[],
        )
        .await;
    assert_eq!(cancel.status, StatusCode::SEE_OTHER);
    assert_eq!(cancel.headers["location"], "/ui/failed?notice=cancelled");
    let failed = console
        .get("/ui/failed?notice=cancelled", Some(&cookie))
        .await;
    assert!(
        failed
            .body
            .contains("Пакет отменён: его команды в очереди сняты."),
        "{}",
        failed.body
    );
    assert!(failed.body.contains("его команды не повторяются"));
    assert!(!failed.body.contains(&retry_form));
    assert!(!failed.body.contains("Отменить пакет"));
    let page = console
        .get(&format!("/ui/batches/{id}"), Some(&cookie))
        .await;
    assert!(!page.body.contains(&retry_form));

    let refused = console
        .post(
            &format!("/ui/commands/{command}/retry"),
            Some(&cookie),
            &[("csrf", &csrf)],
            &[],
        )
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    assert!(refused.body.contains("role=\"alert\""));
    let after = console
        .api(Method::GET, &format!("/batches/{id}"), None)
        .await;
    assert_eq!(after["commands"][0]["status"], "failed");
}

/// A console over a hub whose clock the test moves.
fn console_on_clock(
    options: HttpOptions,
) -> (Console, std::sync::Arc<jira_hub::clock::ManualClock>) {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, json!({"auto_refresh_minutes": 0}));
    let tokens = hub.tokens().unwrap().unwrap();
    let state = jira_hub::http::AppState {
        pool: std::sync::Arc::new(jira_hub::http::HubPool::new(hub)),
        options,
    };
    (
        Console {
            router: jira_hub::http::router(state),
            client: tokens.client,
            agent: tokens.agent,
            _dir: dir,
        },
        clock,
    )
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The cookie holds a session of the hub's, not the client token; «Выйти» ends that session
/// on the hub (the same cookie sent again is refused), so does a rotated client token, and a
/// session ends after 12 hours unused.
#[tokio::test]
async fn a_session_is_the_hubs_and_ends_on_sign_out_rotation_and_idleness() {
    let (console, clock) = console_on_clock(HttpOptions::default());
    let cookie = console.sign_in().await;
    let value = cookie.split_once('=').unwrap().1.to_string();
    assert_ne!(value, hex(&console.client), "the cookie is not the token");
    assert!(!value.contains(&console.client));
    assert_eq!(value.len(), 64);
    let page = console.get("/", Some(&cookie)).await;
    assert_eq!(page.status, StatusCode::OK);
    // Another sign-in is another session.
    let second = console.sign_in().await;
    assert_ne!(second, cookie);

    let csrf = csrf_of(&page.body);
    let out = console
        .post("/ui/sign-out", Some(&cookie), &[("csrf", &csrf)], &[])
        .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    let replayed = console.get("/", Some(&cookie)).await;
    assert_eq!(
        replayed.status,
        StatusCode::UNAUTHORIZED,
        "signed out on the hub"
    );
    assert_eq!(console.get("/", Some(&second)).await.status, StatusCode::OK);

    // Unused for 12 hours: gone; used within them: kept.
    clock.advance(time::Duration::hours(11));
    assert_eq!(console.get("/", Some(&second)).await.status, StatusCode::OK);
    clock.advance(time::Duration::hours(11));
    assert_eq!(console.get("/", Some(&second)).await.status, StatusCode::OK);
    clock.advance(time::Duration::hours(13));
    assert_eq!(
        console.get("/", Some(&second)).await.status,
        StatusCode::UNAUTHORIZED,
        "idle"
    );

    // A rotated client token ends every session.
    let third = console.sign_in().await;
    assert_eq!(console.get("/", Some(&third)).await.status, StatusCode::OK);
    run_ok(&console._dir.db(), &["tokens", "--rotate", "client"]);
    // The hub keeps its tokens in memory and reads them again once another process committed
    // (looked at every quarter second): the rotation is in force within seconds.
    let rotated = std::time::Instant::now();
    loop {
        let status = console.get("/", Some(&third)).await.status;
        if status == StatusCode::UNAUTHORIZED {
            break;
        }
        assert_eq!(status, StatusCode::OK);
        assert!(
            rotated.elapsed() < std::time::Duration::from_secs(5),
            "the rotation was not noticed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Wrong sign-ins: five are answered at once, then each sets a wait twice as long, and a wrong
/// guess within it is answered 429 with `Retry-After`; the right token signs in at once all the
/// while, and forgets the address's failures.
#[tokio::test]
async fn wrong_sign_ins_are_delayed_and_the_right_token_never_is() {
    let (console, clock) = console_on_clock(HttpOptions::default());
    for n in 1..=6 {
        let page = console
            .post("/ui/sign-in", None, &[("token", "guess")], &[])
            .await;
        assert_eq!(page.status, StatusCode::UNAUTHORIZED, "attempt {n}");
    }
    let limited = console
        .post("/ui/sign-in", None, &[("token", "guess")], &[])
        .await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(limited.headers["retry-after"], "2");
    assert!(limited.body.contains("через 2 с"), "{}", limited.body);
    let right = console
        .post("/ui/sign-in", None, &[("token", &console.client)], &[])
        .await;
    assert_eq!(right.status, StatusCode::SEE_OTHER, "{}", right.body);
    // The right token forgot the failures: the next wrong guess is answered at once.
    let wrong = console
        .post("/ui/sign-in", None, &[("token", "guess")], &[])
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    for _ in 0..6 {
        console
            .post("/ui/sign-in", None, &[("token", "guess")], &[])
            .await;
    }
    let limited = console
        .post("/ui/sign-in", None, &[("token", "guess")], &[])
        .await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS);
    clock.advance(time::Duration::minutes(15));
    let wrong = console
        .post("/ui/sign-in", None, &[("token", "guess")], &[])
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED, "the wait is over");
}

/// Behind a reverse proxy that passes its upstream's address as `Host` (nginx's default), a
/// browser's sign-in and actions are from this site: by `Sec-Fetch-Site`, by the proxy's
/// `X-Forwarded-Host`, or by `--public-url`; another site is still refused.
#[tokio::test]
async fn behind_a_proxy_that_rewrites_host_the_console_works() {
    let proxied: Pairs = &[("Origin", "https://hub.example.com")];
    let console = console();
    let modern: Pairs = &[
        ("Origin", "https://hub.example.com"),
        ("Sec-Fetch-Site", "same-origin"),
    ];
    let forwarded: Pairs = &[
        ("Origin", "https://hub.example.com"),
        ("X-Forwarded-Host", "hub.example.com"),
    ];
    for headers in [modern, forwarded] {
        let page = console
            .post("/ui/sign-in", None, &[("token", &console.client)], headers)
            .await;
        assert_eq!(
            page.status,
            StatusCode::SEE_OTHER,
            "{headers:?}: {}",
            page.body
        );
    }
    let refused = console
        .post("/ui/sign-in", None, &[("token", &console.client)], proxied)
        .await;
    assert_eq!(
        refused.status,
        StatusCode::FORBIDDEN,
        "no sign of this site"
    );

    let public = jira_hub::http::parse_origin("https://Hub.Example.com:443/").unwrap();
    assert_eq!(public, "https://hub.example.com");
    let (console, _) = console_on_clock(HttpOptions {
        public_origins: vec![public],
        ..HttpOptions::default()
    });
    let page = console
        .post("/ui/sign-in", None, &[("token", &console.client)], proxied)
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    let cookie = page.headers["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let csrf = csrf_of(&console.get("/ui/runs", Some(&cookie)).await.body);
    let refresh = console
        .post("/ui/refresh", Some(&cookie), &[("csrf", &csrf)], proxied)
        .await;
    assert_eq!(refresh.status, StatusCode::SEE_OTHER, "{}", refresh.body);
    let evil = console
        .post(
            "/ui/refresh",
            Some(&cookie),
            &[("csrf", &csrf)],
            &[("Origin", "https://evil.example")],
        )
        .await;
    assert_eq!(evil.status, StatusCode::FORBIDDEN);
}

/// API answers are not kept by caches (`no-store`; the slice is revalidated by its ETag), the
/// console's script may be.
#[tokio::test]
async fn answers_say_how_they_may_be_cached() {
    let console = console();
    let cookie = console.sign_in().await;
    let cache = |page: &Page| {
        page.headers
            .get("cache-control")
            .map(|v| v.to_str().unwrap().to_string())
    };
    let bearer = |path: &str| {
        Request::builder()
            .uri(path)
            .header("Authorization", format!("Bearer {}", console.client))
            .body(Body::empty())
            .unwrap()
    };
    for path in [
        "/batches",
        "/settings",
        "/projects",
        "/agents",
        "/nonexistent",
    ] {
        let page = console.send(bearer(path)).await;
        assert_eq!(cache(&page).as_deref(), Some("no-store"), "{path}");
    }
    for path in ["/metrics", "/ready", "/openapi.json"] {
        let page = console.get(path, None).await;
        assert_eq!(cache(&page).as_deref(), Some("no-store"), "{path}");
    }
    let slice = console.send(bearer("/projects/AWPCA/issues")).await;
    assert_eq!(slice.status, StatusCode::OK, "{}", slice.body);
    assert_eq!(cache(&slice).as_deref(), Some("private, no-cache"));
    let page = console.get("/ui/batches", Some(&cookie)).await;
    assert_eq!(cache(&page).as_deref(), Some("no-store"));
    let script = console.get("/ui/static/console.js", None).await;
    assert_eq!(cache(&script).as_deref(), Some("max-age=300"));
}

/// DNS rebinding: a request that names the hub by a name it was not given is refused (403) by
/// everything a token does not protect; IP addresses, localhost, allowed names, `/health` and
/// requests with a token pass.
#[tokio::test]
async fn a_request_naming_an_unknown_host_is_refused() {
    let (console, _) = console_on_clock(HttpOptions {
        allowed_hosts: vec!["hub.example.com".into()],
        ..HttpOptions::default()
    });
    let get = |path: &str, host: &str, token: Option<&str>| {
        let mut request = Request::builder().uri(path).header("Host", host);
        if let Some(token) = token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        request.body(Body::empty()).unwrap()
    };
    for host in [
        "evil.example",
        "evil.example:8740",
        "hub.example.com.evil.example",
    ] {
        for path in ["/metrics", "/ready", "/openapi.json", "/", "/ui/batches"] {
            let page = console.send(get(path, host, None)).await;
            assert_eq!(page.status, StatusCode::FORBIDDEN, "{host} {path}");
            assert!(page.body.contains("--allowed-host"), "{}", page.body);
        }
        assert_eq!(
            console.send(get("/health", host, None)).await.status,
            StatusCode::OK
        );
        assert_eq!(
            console
                .send(get("/batches", host, Some(&console.client)))
                .await
                .status,
            StatusCode::OK,
            "a token is checked instead"
        );
    }
    for host in [
        "127.0.0.1:8740",
        "[::1]:8740",
        "10.1.2.3",
        "localhost:8740",
        "LOCALHOST",
        "hub.example.com",
        "Hub.Example.COM.:443",
    ] {
        let page = console.send(get("/metrics", host, None)).await;
        assert_eq!(page.status, StatusCode::OK, "{host}");
    }
}

/// «Повторить» only where the service takes it: a command skipped because its dependency failed
/// offers the dependency instead, by the number the table shows; a batch that completed with a
/// failure is not «завершён»; the service's refusal names commands by that number and says
/// statuses in Russian.
#[tokio::test]
async fn retry_is_offered_only_where_the_service_takes_it() {
    let console = console();
    let cookie = console.sign_in().await;
    let batch = console
        .api(
            Method::POST,
            "/batches",
            Some(json!({"title": "создать и прокомментировать", "author": "ivanov", "commands": [
                {"type": "comment", "params": {"key": "AURORA-1", "body": "первый"}},
                {"type": "comment", "params": {"key": {"$result": "key"}, "body": "второй"}, "depends_on": 1}]})),
        )
        .await;
    let id = batch["id"].as_i64().unwrap();
    let first = batch["commands"][0]["id"].as_i64().unwrap();
    let second = batch["commands"][1]["id"].as_i64().unwrap();
    let claim = console.claim("agent-1", "c1").await;
    assert_eq!(claim["commands"][0]["id"], first);
    let report = console
        .agent_post(
            "/agent/report",
            json!({"kind": "report", "id": "r1", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
                   "results": [{"command_id": first, "delivery": claim["commands"][0]["delivery"],
                                "status": "failed", "error": "нет прав"}]}),
        )
        .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.body);
    // The next claim skips the dependent.
    console.claim("agent-1", "c2").await;
    let after = console
        .api(Method::GET, &format!("/batches/{id}"), None)
        .await;
    assert_eq!(after["commands"][1]["status"], "skipped", "{after}");

    let first_form = format!("action=\"/ui/commands/{first}/retry\"");
    let second_form = format!("action=\"/ui/commands/{second}/retry\"");
    for path in [format!("/ui/batches/{id}"), "/ui/failed".to_string()] {
        let page = console.get(&path, Some(&cookie)).await;
        assert!(page.body.contains(&first_form), "{path}: {}", page.body);
        assert!(!page.body.contains(&second_form), "{path}: {}", page.body);
        assert!(
            page.body.contains(&format!(
                "Зависит от <a href=\"/ui/batches/{id}#command-{first}\">команды 1</a> («ошибка»)"
            )),
            "{path}: {}",
            page.body
        );
    }
    let page = console
        .get(&format!("/ui/batches/{id}"), Some(&cookie))
        .await;
    assert!(
        page.body
            .contains("class=\"bs bs-completed-failed\">завершён с ошибками</dd>"),
        "{}",
        page.body
    );
    let list = console.get("/ui/batches", Some(&cookie)).await;
    assert!(
        list.body
            .contains("class=\"bs bs-completed-failed\">завершён с ошибками</td>"),
        "{}",
        list.body
    );
    // The refusal, should the form be posted anyway, in the table's numbering and Russian.
    let csrf = csrf_of(&page.body);
    let refused = console
        .post(
            &format!("/ui/commands/{second}/retry"),
            Some(&cookie),
            &[("csrf", &csrf)],
            &[],
        )
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    assert!(
        refused.body.contains(&format!(
            "пакет {id}, команда 2 использует результат команды 1 со статусом «ошибка»"
        )),
        "{}",
        refused.body
    );
    let alert = refused.body.split("role=\"alert\">").nth(1).unwrap();
    let alert = alert.split("</p>").next().unwrap();
    assert!(
        !alert.contains("failed") && !alert.contains("command"),
        "{alert}"
    );
    // Params readable: «name: value» a line each, the key a link to its issue.
    assert!(
        page.body.contains(
            "<td class=\"params\"><span class=\"member\"><span class=\"hint\">задача:</span> \
             <a href=\"/ui/issues/AURORA-1\">AURORA-1</a></span><br><span class=\"member\">\
             <span class=\"hint\">текст:</span> <span class=\"value\">первый</span></span></td>"
        ),
        "{}",
        page.body
    );
}

/// Cancelling a batch whose first command is at the agent says what it did (the queued one is
/// off the queue) and did not (the one at the agent goes on); the button goes.
#[tokio::test]
async fn cancelling_says_what_it_did_and_the_button_goes() {
    let console = console();
    let cookie = console.sign_in().await;
    let batch = console
        .api(
            Method::POST,
            "/batches",
            Some(
                json!({"title": "три комментария", "author": "ivanov", "commands": [
                {"type": "comment", "params": {"key": "AURORA-1", "body": "x"}},
                {"type": "comment", "params": {"key": "AURORA-1", "body": "y"}},
                {"type": "comment", "params": {"key": "AURORA-1", "body": "z"}}]}),
            ),
        )
        .await;
    let id = batch["id"].as_i64().unwrap();
    console.claim("agent-1", "c1").await;
    let page = console
        .get(&format!("/ui/batches/{id}"), Some(&cookie))
        .await;
    // The button is a step that asks first (a page: it works without JavaScript).
    let cancel_form = format!("href=\"/ui/batches/{id}/cancel\"");
    assert!(page.body.contains(&cancel_form), "{}", page.body);
    let csrf = csrf_of(&page.body);
    // A POST that was not the question's answer asks the question, cancelling nothing.
    let unasked = console
        .post(
            &format!("/ui/batches/{id}/cancel"),
            Some(&cookie),
            &[("csrf", &csrf)],
            &[],
        )
        .await;
    assert_eq!(unasked.status, StatusCode::SEE_OTHER, "{}", unasked.body);
    assert_eq!(
        unasked.headers["location"],
        format!("/ui/batches/{id}/cancel").as_str()
    );
    let still = console
        .api(Method::GET, &format!("/batches/{id}"), None)
        .await;
    assert_eq!(still["status"], "running", "{still}");
    let question = console
        .get(&format!("/ui/batches/{id}/cancel"), Some(&cookie))
        .await;
    assert_eq!(question.status, StatusCode::OK, "{}", question.body);
    assert!(
        question
            .body
            .contains(&format!("Отменить пакет {id} «три комментария»?"))
            && question
                .body
                .contains("Снимутся с очереди: <b>2 команды</b>")
            && question.body.contains("У агента: <b>1 команда</b>")
            && question.body.contains("name=\"confirmed\" value=\"yes\"")
            && question.body.contains("Нет, вернуться"),
        "{}",
        question.body
    );
    let cancel = console
        .post(
            &format!("/ui/batches/{id}/cancel"),
            Some(&cookie),
            &[("csrf", &csrf), ("confirmed", "yes")],
            &[],
        )
        .await;
    assert_eq!(cancel.status, StatusCode::SEE_OTHER, "{}", cancel.body);
    let location = cancel.headers["location"].to_str().unwrap().to_string();
    assert_eq!(
        location,
        format!("/ui/batches/{id}?notice=cancelled-at-agent")
    );
    let page = console.get(&location, Some(&cookie)).await;
    assert!(
        page.body
            .contains("те, что уже у агента, отмена не прерывает"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("Отмена сняла с очереди 2 команды.")
            && page
                .body
                .contains("У агента осталась 1 команда: отмена её не прерывает")
            && page.body.contains("она станет «отменена»"),
        "{}",
        page.body
    );
    assert!(!page.body.contains(&cancel_form), "{}", page.body);
    let failed = console.get("/ui/failed", Some(&cookie)).await;
    assert!(!failed.body.contains(&cancel_form), "{}", failed.body);
}

/// An unknown page of the console is an HTML page; the API's unknown paths stay JSON for
/// clients, HTML for a browser.
#[tokio::test]
async fn an_unknown_console_page_is_a_page() {
    let console = console();
    let cookie = console.sign_in().await;
    for path in ["/ui/nothing", "/ui/batches/1/nothing"] {
        let page = console.get(path, Some(&cookie)).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(
            page.headers["content-type"], "text/html; charset=utf-8",
            "{path}"
        );
        assert!(page.body.contains("Такой страницы в консоли нет"), "{path}");
        // The menu stays, and «Выйти» for the signed-in.
        assert!(
            page.body.contains("<nav>")
                && page.body.contains("href=\"/ui/batches\">Пакеты</a>")
                && page.body.contains("action=\"/ui/sign-out\""),
            "{path}: {}",
            page.body
        );
    }
    let page = console.get("/ui/nothing", None).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(
        page.body.contains("href=\"/ui/mirror\">Зеркало</a>"),
        "{}",
        page.body
    );
    let request = Request::builder()
        .uri("/favicon.ico")
        .header("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
        .body(Body::empty())
        .unwrap();
    let page = console.send(request).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(page.body.contains("<!DOCTYPE html>"), "{}", page.body);
    let page = console.get("/no-such-api", None).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    let error: Value = serde_json::from_str(&page.body).unwrap();
    assert_eq!(error["error"]["code"], "not_found", "{error}");
}

/// The overview flags an agent that has said nothing for longer than it ever waits between
/// requests, and a refresh the agent has sent no page of for ten minutes; Jira's comment times
/// show in the hub's form.
#[tokio::test]
async fn the_overview_flags_a_silent_agent_and_a_stalled_refresh() {
    let (console, clock) = console_on_clock(HttpOptions::default());
    let cookie = console.sign_in().await;
    console.api(Method::POST, "/refresh", None).await;
    let claim = console.claim("agent-1", "c1").await;
    let command = &claim["commands"][0];
    let issues = [raw_issue(
        "AURORA-1",
        "1",
        &["AWPCA"],
        json!({"comment": {"comments": [{"id": "5", "author": {"displayName": "Петров"}, "body": "ок",
                                         "created": "2026-11-29T13:00:00.000+0300"}]}}),
    )];
    let report = console
        .agent_post(
            "/agent/report",
            json!({"kind": "report", "id": "r1", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
                   "results": [{"command_id": command["id"], "delivery": command["delivery"], "status": "progress",
                                "page": {"start_at": 0, "total": 3, "issues": issues}}]}),
        )
        .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.body);
    let page = console.get("/", Some(&cookie)).await;
    assert!(!page.body.contains("стоит:"), "{}", page.body);
    assert!(!page.body.contains("Молчит"), "{}", page.body);

    clock.advance(time::Duration::minutes(11));
    let page = console.get("/", Some(&cookie)).await;
    assert!(
        page.body.contains("стоит: от агента ничего нет 11 мин"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("Молчит"), "{}", page.body);

    clock.advance(time::Duration::minutes(10));
    let page = console.get("/", Some(&cookie)).await;
    assert!(
        page.body
            .contains("Молчит <span title=\"2026-11-29T10:00:00.000000Z\">21 мин</span>"),
        "{}",
        page.body
    );
    assert!(page.body.contains("class=\"agent silent\""));

    let issue = console.get("/ui/issues/AURORA-1", Some(&cookie)).await;
    assert!(
        issue.body.contains(
            "<time datetime=\"2026-11-29T10:00:00.000000Z\" title=\"2026-11-29T13:00:00.000+0300\">21 мин назад</time>"
        ),
        "{}",
        issue.body
    );
    // Times in one form: relative while recent, a date beyond a day.
    clock.advance(time::Duration::days(2));
    let cookie = console.sign_in().await;
    let issue = console.get("/ui/issues/AURORA-1", Some(&cookie)).await;
    assert!(
        issue
            .body
            .contains("title=\"2026-11-29T13:00:00.000+0300\">2026-11-29 10:00 UTC</time>"),
        "{}",
        issue.body
    );
}

/// A command its agent gave back after a lost answer shows why and until when it
/// waits, escaped like every text from outside.
#[tokio::test]
async fn a_command_given_back_shows_its_wait_and_reason() {
    let console = console();
    let cookie = console.sign_in().await;
    let id = console.batch("возврат").await["id"].as_i64().unwrap();
    let claim = console.claim("agent-1", "c1").await;
    let command = claim["commands"][0]["id"].as_i64().unwrap();
    let report = console
        .agent_post(
            "/agent/report",
            json!({"kind": "report", "id": "r1", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
                   "results": [{"command_id": command, "delivery": 1, "status": "released",
                                "not_before_seconds": 180, "error": "ответ потерян <504>"}]}),
        )
        .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.body);
    let page = console
        .get(&format!("/ui/batches/{id}"), Some(&cookie))
        .await;
    assert!(
        page.body.contains("возвращена агентом, выдача не раньше"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("ответ потерян &lt;504&gt;"),
        "{}",
        page.body
    );
}

/// «Обновить сейчас» while the same refresh is pending adds none and says so.
#[tokio::test]
async fn refresh_now_reuses_a_pending_refresh() {
    let console = console();
    let cookie = console.sign_in().await;
    let page = console.get("/ui/runs", Some(&cookie)).await;
    let csrf = csrf_of(&page.body);
    let first = console
        .post("/ui/refresh", Some(&cookie), &[("csrf", &csrf)], &[])
        .await;
    assert_eq!(first.headers["location"], "/ui/runs?notice=refresh");
    let again = console
        .post("/ui/refresh", Some(&cookie), &[("csrf", &csrf)], &[])
        .await;
    assert_eq!(again.headers["location"], "/ui/runs?notice=refresh-pending");
    let page = console
        .get("/ui/runs?notice=refresh-pending", Some(&cookie))
        .await;
    assert!(
        page.body
            .contains("Такое обновление уже ждёт в очереди или идёт"),
        "{}",
        page.body
    );
    let second = Request::builder()
        .uri("/batches/2")
        .header("Authorization", format!("Bearer {}", console.client))
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        console.send(second).await.status,
        StatusCode::NOT_FOUND,
        "one refresh batch only"
    );
}

/// The last preflight an agent sent with a heartbeat shows on the overview's agent
/// panel, when it ran and its failing lines.
#[tokio::test]
async fn the_overview_shows_an_agents_last_check() {
    let console = console();
    let cookie = console.sign_in().await;
    let page = console
        .agent_post(
            "/agent/heartbeat",
            json!({"kind": "heartbeat", "id": "h1", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
                   "agent_version": "1.4.0", "jira_ok": true,
                   "check": {"ran_at": "2026-11-28T09:00:00.123456Z", "ok": false, "lines": [
                       {"name": "проект", "ok": true, "detail": "AURORA"},
                       {"name": "тип связи blocks", "ok": false,
                        "detail": "типа связи «Blocks» в Jira нет; есть: «Blocker»"}]}}),
        )
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let page = console.get("/", Some(&cookie)).await;
    // The check's time in the console's one form, the stored text in the tooltip.
    assert!(
        page.body.contains(
            "Проверка настроек (agent --check) <time datetime=\"2026-11-28T09:00:00.123456Z\" \
             title=\"2026-11-28T09:00:00.123456Z\">2026-11-28 09:00 UTC</time>: ошибок: 1"
        ),
        "{}",
        page.body
    );
    // It only ran a check: a check, not a silent agent.
    assert!(
        page.body.contains("class=\"agent check-only\""),
        "{}",
        page.body
    );
    assert!(!page.body.contains("Молчит"), "{}", page.body);
    assert!(
        page.body
            .contains("тип связи blocks: типа связи «Blocks» в Jira нет; есть: «Blocker»"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("<li>проект"), "{}", page.body);
}

/// An agent that says Jira refuses its credentials is shown with that reason and
/// since when on the overview's agent panel, never as an agent that did not report.
#[tokio::test]
async fn the_overview_says_why_jira_is_held_for_an_agent() {
    let console = console();
    let cookie = console.sign_in().await;
    let page = console
        .agent_post(
            "/agent/heartbeat",
            json!({"kind": "heartbeat", "id": "h1", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
                   "agent_version": "1.4.0", "jira_ok": false,
                   "last_error": "Jira не принимает учётные данные агента (HTTP 401)"}),
        )
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let page = console.get("/", Some(&cookie)).await;
    let held = &page.body;
    let at = held
        .find("<p class=\"bad held\" role=\"status\">Jira не принимает учётные данные агента (HTTP 401) с ")
        .unwrap_or_else(|| panic!("{held}"));
    assert!(held[at..].contains(" UTC</p>"), "{held}");
    assert!(!page.body.contains("не отчитался"), "{}", page.body);
}

impl Console {
    /// A report of one agent (`agent-1`) with `results`.
    async fn report(&self, id: &str, results: Value) {
        let page = self
            .agent_post(
                "/agent/report",
                json!({"kind": "report", "id": id, "agent": "agent-1",
                       "sent_at": "2026-11-29T10:00:00Z", "results": results}),
            )
            .await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    }
}

/// The text of the element with `id` (up to its first closing tag of `tag`).
fn part<'a>(body: &'a str, id: &str, tag: &str) -> &'a str {
    let start = body
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id}: {body}"));
    let rest = &body[start..];
    &rest[..rest.find(&format!("</{tag}>")).unwrap_or(rest.len())]
}

/// «Выполнено команд в час» counts done commands only (a failed one is
/// not «выполнено»); a refresh is named by its batch on the runs page and on the overview, its
/// run knows it; a refresh of 0.4 s lasted «0,4 с», not «0 с».
#[tokio::test]
async fn numbers_are_what_their_labels_say_and_a_refresh_is_its_batch() {
    let (console, clock) = console_on_clock(HttpOptions::default());
    let cookie = console.sign_in().await;
    let batch = console
        .api(
            Method::POST,
            "/batches",
            Some(json!({"title": "два", "author": "ivanov", "commands": [
                {"type": "comment", "params": {"key": "AURORA-1", "body": "x"}},
                {"type": "comment", "params": {"key": "AURORA-1", "body": "y"}}]})),
        )
        .await;
    let claim = console.claim("agent-1", "c1").await;
    let first = &claim["commands"][0];
    let claim = console.claim("agent-1", "c2").await;
    let second = &claim["commands"][0];
    console
        .report(
            "r1",
            json!([{"command_id": first["id"], "delivery": first["delivery"], "status": "done", "result": {"id": "1"}},
                   {"command_id": second["id"], "delivery": second["delivery"], "status": "failed", "error": "нет прав"}]),
        )
        .await;
    assert_eq!(batch["commands"].as_array().unwrap().len(), 2);
    let page = console.get("/", Some(&cookie)).await;
    let chart = part(&page.body, "overview-charts", "section");
    let done = chart
        .split("<figcaption>Выполнено команд в час</figcaption>")
        .nth(1)
        .unwrap();
    let done = &done[..done.find("</figure>").unwrap()];
    assert!(done.contains("макс. 1 команда"), "{done}");
    assert!(!done.contains("2 команды"), "{done}");

    // A refresh: a batch with a run, named by the batch.
    let refresh = console.api(Method::POST, "/refresh", None).await;
    let refresh_batch = refresh["id"].as_i64().unwrap();
    let claim = console.claim("agent-1", "c3").await;
    let command = &claim["commands"][0];
    console
        .report(
            "r2",
            json!([{"command_id": command["id"], "delivery": command["delivery"], "status": "progress",
                    "page": {"start_at": 0, "total": 0, "issues": []}}]),
        )
        .await;
    clock.advance(time::Duration::milliseconds(400));
    console
        .report(
            "r3",
            json!([{"command_id": command["id"], "delivery": command["delivery"], "status": "done",
                    "result": {"total": 0, "boards": []}}]),
        )
        .await;
    let runs = console.api(Method::GET, "/sync-runs", None).await;
    assert_eq!(runs[0]["batch_id"], refresh_batch, "{runs}");
    let run_id = runs[0]["id"].as_i64().unwrap();
    let page = console.get("/ui/runs", Some(&cookie)).await;
    let row = part(&page.body, &format!("run-{run_id}"), "tr");
    assert!(
        row.contains(&format!(
            "<a href=\"/ui/batches/{refresh_batch}\">пакет {refresh_batch}</a>"
        )) && row.contains("<td class=\"duration\">0,4 с</td>"),
        "{row}"
    );
    assert!(page.body.contains("<th>Обновление</th><th>Прогон</th>"));
    let page = console.get("/", Some(&cookie)).await;
    assert!(
        page.body
            .contains(&format!("пакет {refresh_batch} полное, готово: 0,4 с")),
        "{}",
        page.body
    );
}

/// A refresh behind other work is shown as queued, where it stands and «ждёт
/// агента» while no agent is about, on «Синхронизация» and the overview's mirror card; pressing
/// «Обновить сейчас» again adds none and says so.
#[tokio::test]
async fn a_queued_refresh_is_shown_as_queued() {
    let (console, clock) = console_on_clock(HttpOptions::default());
    let cookie = console.sign_in().await;
    let work = console
        .api(
            Method::POST,
            "/batches",
            Some(json!({"title": "долгий", "author": "ivanov", "commands": [
                {"type": "comment", "params": {"key": "AURORA-1", "body": "x"}},
                {"type": "comment", "params": {"key": "AURORA-1", "body": "y"}}]})),
        )
        .await;
    assert_eq!(work["id"], 1);
    let page = console.get("/ui/runs", Some(&cookie)).await;
    let csrf = csrf_of(&page.body);
    let first = console
        .post("/ui/refresh", Some(&cookie), &[("csrf", &csrf)], &[])
        .await;
    assert_eq!(first.headers["location"], "/ui/runs?notice=refresh");
    let page = console.get("/ui/runs", Some(&cookie)).await;
    let queued = part(&page.body, "queued-refresh-2", "li");
    assert!(
        queued
            .contains("<a href=\"/ui/batches/2\">пакет 2</a>: ждёт в очереди, перед ним 2 команды")
            && queued.contains("ждёт агента"),
        "{queued}"
    );
    let overview = console.get("/", Some(&cookie)).await;
    assert!(
        !overview.body.contains("Сейчас обновление не идёт"),
        "{}",
        overview.body
    );
    let card = part(&overview.body, "queued-refresh-2", "li");
    assert!(
        card.contains("перед ним 2 команды") && card.contains("ждёт агента"),
        "{card}"
    );

    // Pressed again: nothing new queued, and the page says why.
    let again = console
        .post("/ui/refresh", Some(&cookie), &[("csrf", &csrf)], &[])
        .await;
    assert_eq!(again.headers["location"], "/ui/runs?notice=refresh-pending");
    let batches = console.api(Method::GET, "/batches", None).await;
    assert_eq!(batches.as_array().unwrap().len(), 2, "{batches}");

    // An agent takes the first command: the refresh moves up, and an agent is about.
    console.claim("agent-1", "c1").await;
    clock.advance(time::Duration::seconds(5));
    let page = console.get("/ui/runs", Some(&cookie)).await;
    let queued = part(&page.body, "queued-refresh-2", "li");
    assert!(
        queued.contains("ждёт в очереди, перед ним 1 команда") && !queued.contains("ждёт агента"),
        "{queued}"
    );
}

/// A page per command: its params whole, every attempt with its agent and
/// times, its Jira calls and 429s, the keys it names linked to the mirror's page; the batch page
/// has a dependency column and links each command to its page.
#[tokio::test]
async fn a_command_has_its_own_page() {
    let console = console();
    let cookie = console.sign_in().await;
    // The mirror has AURORA-1.
    console.api(Method::POST, "/refresh", None).await;
    let claim = console.claim("agent-1", "c0").await;
    let command = &claim["commands"][0];
    let issues = [raw_issue("AURORA-1", "1", &["AWPCA"], json!({}))];
    console
        .report(
            "r0",
            json!([{"command_id": command["id"], "delivery": command["delivery"], "status": "progress",
                    "page": {"start_at": 0, "total": 1, "issues": issues}},
                   {"command_id": command["id"], "delivery": command["delivery"], "status": "done",
                    "result": {"total": 1, "boards": []}}]),
        )
        .await;
    let long = "слово ".repeat(60);
    let batch = console
        .api(
            Method::POST,
            "/batches",
            Some(json!({"title": "с зависимостью", "author": "ivanov", "commands": [
                {"type": "comment", "params": {"key": "AURORA-1", "body": long.trim()}},
                {"type": "comment", "params": {"key": {"$result": "key"}, "body": "следом"}, "depends_on": 1}]})),
        )
        .await;
    let id = batch["id"].as_i64().unwrap();
    let first = batch["commands"][0]["id"].as_i64().unwrap();
    let second = batch["commands"][1]["id"].as_i64().unwrap();
    let claim = console.claim("agent-1", "c1").await;
    console
        .report(
            "r1",
            json!([{"command_id": first, "delivery": claim["commands"][0]["delivery"], "status": "failed",
                    "error": "Jira ответила 500", "jira_calls": 2, "rate_limited": 1}]),
        )
        .await;
    // Retried, then done by another agent.
    console
        .api(Method::POST, &format!("/commands/{first}/retry"), None)
        .await;
    let page = console
        .agent_post(
            "/agent/claim",
            json!({"kind": "claim", "id": "c2", "agent": "agent-2", "sent_at": "2026-11-29T10:00:00Z",
                   "agent_version": "1.4.0", "settings_version": 0, "max_commands": 1}),
        )
        .await;
    let claim: Value = serde_json::from_str(&page.body).unwrap();
    let report = console
        .agent_post(
            "/agent/report",
            json!({"kind": "report", "id": "r2", "agent": "agent-2", "sent_at": "2026-11-29T10:00:00Z",
                   "results": [{"command_id": first, "delivery": claim["commands"][0]["delivery"],
                                "status": "done", "result": {"key": "AURORA-1", "comment_id": "77"}, "jira_calls": 1}]}),
        )
        .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.body);

    let page = console
        .get(&format!("/ui/batches/{id}"), Some(&cookie))
        .await;
    let row = part(&page.body, &format!("command-{second}"), "tr");
    assert!(
        row.contains(&format!(
            "<a class=\"dependency\" href=\"/ui/commands/{first}\">команда&nbsp;1</a>"
        )),
        "{row}"
    );
    assert!(
        page.body.contains("<th class=\"dependency\">Зависит от</th>")
            && page.body.contains(&format!(
                "<a href=\"/ui/commands/{first}\" title=\"пакет {id}, команда 1\">команда&nbsp;1</a>"
            )),
        "{}",
        page.body
    );

    let page = console
        .get(&format!("/ui/commands/{first}"), Some(&cookie))
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body
            .contains(&format!("<h1>Пакет {id}, команда 1</h1>")),
        "{}",
        page.body
    );
    let params = part(&page.body, "command-params", "pre");
    assert!(params.contains(long.trim()), "params whole: {params}");
    let attempts = part(&page.body, "attempts", "table");
    assert!(
        attempts.contains("agent-1") && attempts.contains("Jira ответила 500"),
        "{attempts}"
    );
    assert!(
        page.body.contains("<dt>Агент</dt><dd>agent-2</dd>")
            && page.body.contains("<dt>Вызовов Jira</dt><dd>3</dd>")
            && page.body.contains("<dt>Ответов 429</dt><dd>1</dd>"),
        "{}",
        page.body
    );
    let keys = part(&page.body, "command-keys", "dd");
    assert!(
        keys.contains("<a href=\"/ui/issues/AURORA-1\">AURORA-1</a>"),
        "{keys}"
    );
    assert!(
        page.body.contains(&format!(
            "<dt>От неё зависят</dt><dd><a href=\"/ui/commands/{second}\">пакет {id}, команда 2</a>"
        )),
        "{}",
        page.body
    );
    let missing = console.get("/ui/commands/99999", Some(&cookie)).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

/// A project's slice is sorted by key number (AURORA-9 before AURORA-10), has a
/// search box, is paged, and every column has a heading.
#[tokio::test]
async fn the_mirror_is_sorted_by_number_searched_and_paged() {
    let console = console();
    let cookie = console.sign_in().await;
    console.api(Method::POST, "/refresh", None).await;
    let claim = console.claim("agent-1", "c0").await;
    let command = &claim["commands"][0];
    let issues: Vec<Value> = (1..=205)
        .rev()
        .map(|n| {
            let extra = if n == 42 {
                json!({"summary": "Особая задача"})
            } else {
                json!({})
            };
            raw_issue(&format!("AURORA-{n}"), &n.to_string(), &["AWPCA"], extra)
        })
        .collect();
    console
        .report(
            "r0",
            json!([{"command_id": command["id"], "delivery": command["delivery"], "status": "progress",
                    "page": {"start_at": 0, "total": 205, "issues": issues}},
                   {"command_id": command["id"], "delivery": command["delivery"], "status": "done",
                    "result": {"total": 205, "boards": []}}]),
        )
        .await;
    let page = console.get("/ui/mirror/AWPCA", Some(&cookie)).await;
    let body = &page.body;
    let at = |key: &str| {
        body.find(&format!(">{key}</a>"))
            .unwrap_or_else(|| panic!("{key}: {body}"))
    };
    assert!(at("AURORA-1") < at("AURORA-2") && at("AURORA-9") < at("AURORA-10"));
    assert!(at("AURORA-99") < at("AURORA-100"));
    assert!(!body.contains(">AURORA-201</a>"), "200 a page");
    assert!(
        body.contains("<th>Отметки</th>") && !body.contains("<th></th>"),
        "{body}"
    );
    assert!(body.contains("страница 1 из 2"), "{body}");
    assert!(body.contains("href=\"/ui/mirror/AWPCA?page=2\""), "{body}");
    assert!(body.contains("name=\"q\""), "a search box: {body}");
    let page = console.get("/ui/mirror/AWPCA?page=2", Some(&cookie)).await;
    assert!(page.body.contains(">AURORA-205</a>"), "{}", page.body);
    assert!(!page.body.contains(">AURORA-1</a>"), "{}", page.body);
    let page = console
        .get(
            "/ui/mirror/AWPCA?q=%D0%BE%D1%81%D0%BE%D0%B1%D0%B0%D1%8F",
            Some(&cookie),
        )
        .await;
    assert!(
        page.body.contains(">AURORA-42</a>")
            && page.body.contains("Найдено по «особая»: <b>1</b>")
            && !page.body.contains(">AURORA-41</a>"),
        "{}",
        page.body
    );
}

/// A command in an agent's hands is never summarised as nothing waiting.
#[tokio::test]
async fn a_command_with_an_agent_is_not_nothing_waiting() {
    let console = console();
    let cookie = console.sign_in().await;
    let page = console.get("/", Some(&cookie)).await;
    assert!(
        page.body.contains("В очереди ничего не ждёт"),
        "{}",
        page.body
    );
    console.batch("one").await;
    console.claim("agent-1", "c1").await;
    let page = console.get("/", Some(&cookie)).await;
    assert!(!page.body.contains("ничего не ждёт"), "{}", page.body);
    assert!(
        page.body
            .contains("Новых команд в очереди нет; у агента 1 команда."),
        "{}",
        page.body
    );
}

/// A silent agent's card says once how long it has been silent and counts the
/// heartbeats it missed (4 at 2 min with a 30 s period), and never «Jira доступна» beside it;
/// «Забыть агента» (a form with the anti-forgery token) forgets it, a live agent is refused.
#[tokio::test]
async fn a_silent_agent_is_said_once_counted_right_and_can_be_forgotten() {
    let (console, clock) = console_on_clock(HttpOptions::default());
    let cookie = console.sign_in().await;
    for (id, agent) in [("h1", "old-name"), ("h2", "live")] {
        let page = console
            .agent_post(
                "/agent/heartbeat",
                json!({"kind": "heartbeat", "id": id, "agent": agent, "sent_at": "2026-11-29T10:00:00Z",
                       "agent_version": "1.4.0", "jira_ok": true, "heartbeat_seconds": 30}),
            )
            .await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    }
    clock.advance(time::Duration::seconds(100));
    let page = console
        .agent_post(
            "/agent/heartbeat",
            json!({"kind": "heartbeat", "id": "h3", "agent": "live", "sent_at": "2026-11-29T10:01:40Z",
                   "agent_version": "1.4.0", "jira_ok": true, "heartbeat_seconds": 30}),
        )
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    clock.advance(time::Duration::seconds(20));
    let page = console.get("/", Some(&cookie)).await;
    let card = part(&page.body, "overview-cards", "section");
    let silent = &card[card.find("<h3>old-name</h3>").unwrap()..];
    let silent = &silent[..silent.find("</div>").unwrap()];
    assert!(
        silent.contains(
            "Молчит <span title=\"2026-11-29T10:00:00.000000Z\">2 мин</span>: пропущено 4 сигнала о жизни \
             (агент шлёт их раз в 30 с)."
        ),
        "{silent}"
    );
    assert!(!silent.contains("Jira доступна"), "{silent}");
    assert!(!silent.contains("назад"), "said once: {silent}");
    assert!(silent.contains("Забыть агента"), "{silent}");
    let live = &card[card.find("<h3>live</h3>").unwrap()..];
    let live = &live[..live.find("</div>").unwrap()];
    assert!(live.contains("Jira доступна"), "{live}");
    assert!(!live.contains("Забыть агента"), "{live}");

    let csrf = csrf_of(&page.body);
    let refused = console
        .post(
            "/ui/agents/forget",
            Some(&cookie),
            &[("csrf", &csrf), ("agent", "live")],
            &[],
        )
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    assert!(
        refused.body.contains("Агент «live» на связи"),
        "{}",
        refused.body
    );
    let forged = console
        .post(
            "/ui/agents/forget",
            Some(&cookie),
            &[("csrf", "0"), ("agent", "old-name")],
            &[],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.body);
    let forgot = console
        .post(
            "/ui/agents/forget",
            Some(&cookie),
            &[("csrf", &csrf), ("agent", "old-name")],
            &[],
        )
        .await;
    assert_eq!(forgot.status, StatusCode::SEE_OTHER, "{}", forgot.body);
    assert_eq!(forgot.headers["location"], "/?notice=forgotten");
    let agents = console.api(Method::GET, "/agents", None).await;
    let names: Vec<&str> = agents
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["agent"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["live"]);
    let page = console.get("/?notice=forgotten", Some(&cookie)).await;
    assert!(page.body.contains("Агент забыт"), "{}", page.body);
}

/// Russian sentences start with a capital letter («Пакета 999 нет»), a batch's
/// counters read «выполнена: 1 (всего 1)», not «выполнена 1 из 1», the deliveries column is
/// «Выдачи», the retry button says whose failed commands it retries.
#[tokio::test]
async fn the_console_writes_russian_as_russian_is_written() {
    let console = console();
    let cookie = console.sign_in().await;
    let page = console.get("/ui/batches/999", Some(&cookie)).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(page.body.contains("Пакета 999 нет"), "{}", page.body);
    let id = console.batch("слова").await["id"].as_i64().unwrap();
    let claim = console.claim("agent-1", "c1").await;
    let command = claim["commands"][0]["id"].as_i64().unwrap();
    console
        .report(
            "r1",
            json!([{"command_id": command, "delivery": 1, "status": "failed", "error": "нет"}]),
        )
        .await;
    let list = console.get("/ui/batches", Some(&cookie)).await;
    assert!(
        list.body
            .contains("<span class=\"st st-failed\">ошибка: 1</span> (всего 1)"),
        "{}",
        list.body
    );
    let page = console
        .get(&format!("/ui/batches/{id}"), Some(&cookie))
        .await;
    assert!(page.body.contains(">Выдачи</th>"), "{}", page.body);
    let page = console.get("/ui/failed", Some(&cookie)).await;
    assert!(
        page.body.contains("Повторить все неудачные команды пакета"),
        "{}",
        page.body
    );
}

/// A link command's params say the link's direction in Russian between its keys,
/// on the batch page and the command page; a type of Jira's own is named in Jira's words.
#[tokio::test]
async fn link_params_say_the_direction_in_russian() {
    let console = console();
    let cookie = console.sign_in().await;
    let batch = console
        .api(
            Method::POST,
            "/batches",
            Some(json!({"title": "связи", "author": "ivanov", "commands": [
                {"type": "link", "params": {"from": "AURORA-1", "to": "AURORA-2", "type": "blocks"}},
                {"type": "link", "params": {"from": "AURORA-3", "to": "AURORA-4", "type": "duplicates"}}]})),
        )
        .await;
    let id = batch["id"].as_i64().unwrap();
    let first = batch["commands"][0]["id"].as_i64().unwrap();
    let page = console
        .get(&format!("/ui/batches/{id}"), Some(&cookie))
        .await;
    assert!(
        page.body.contains(
            "<span class=\"hint\">тип связи:</span> <span class=\"value\">blocks</span>: \
             <a href=\"/ui/issues/AURORA-1\">AURORA-1</a> блокирует \
             <a href=\"/ui/issues/AURORA-2\">AURORA-2</a>"
        ),
        "{}",
        page.body
    );
    assert!(
        page.body.contains(
            "<a href=\"/ui/issues/AURORA-3\">AURORA-3</a> дублирует \
             <a href=\"/ui/issues/AURORA-4\">AURORA-4</a>"
        ),
        "{}",
        page.body
    );
    let command = console
        .get(&format!("/ui/commands/{first}"), Some(&cookie))
        .await;
    assert!(
        command
            .body
            .contains("<a href=\"/ui/issues/AURORA-1\">AURORA-1</a> блокирует"),
        "{}",
        command.body
    );
}

/// An issue's links say their direction in Russian from that issue's side, Jira's
/// name beside; a type of Jira's own is shown in Jira's words, quoted.
#[tokio::test]
async fn issue_links_say_their_direction_in_russian() {
    let console = console();
    let cookie = console.sign_in().await;
    console.api(Method::POST, "/refresh", None).await;
    let claim = console.claim("agent-1", "c1").await;
    let command = &claim["commands"][0];
    let blocks = json!({"name": "Blocks", "inward": "is blocked by", "outward": "blocks"});
    let issues = [
        raw_issue(
            "AURORA-1",
            "1",
            &["AWPCA"],
            json!({"issuelinks": [
                {"id": "5001", "type": blocks, "outwardIssue": {"key": "AURORA-2"}},
                {"id": "5002", "type": {"name": "Haunts", "inward": "is haunted by", "outward": "haunts"},
                 "outwardIssue": {"key": "AURORA-9"}}]}),
        ),
        raw_issue(
            "AURORA-2",
            "2",
            &["AWPCA"],
            json!({"issuelinks": [{"id": "5001", "type": blocks, "inwardIssue": {"key": "AURORA-1"}}]}),
        ),
    ];
    let report = console
        .agent_post(
            "/agent/report",
            json!({"kind": "report", "id": "r1", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
               "results": [{"command_id": command["id"], "delivery": command["delivery"], "status": "progress",
                            "page": {"start_at": 0, "total": 2, "issues": issues}}]}),
        )
        .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.body);
    let first = console.get("/ui/issues/AURORA-1", Some(&cookie)).await;
    assert!(
        first.body.contains(
            "<li>Блокирует <a href=\"/ui/issues/AURORA-2\">AURORA-2</a> \
             <span class=\"hint\">(«Blocks»)</span></li>"
        ),
        "{}",
        first.body
    );
    assert!(
        first
            .body
            .contains("<li>Связь «Haunts»: «haunts» AURORA-9 (нет в зеркале)</li>"),
        "{}",
        first.body
    );
    let second = console.get("/ui/issues/AURORA-2", Some(&cookie)).await;
    assert!(
        second.body.contains(
            "<li>Заблокирована задачей <a href=\"/ui/issues/AURORA-1\">AURORA-1</a> \
             <span class=\"hint\">(«Blocks»)</span></li>"
        ),
        "{}",
        second.body
    );
}

/// The previous release's agent (its claim says no protocol, no capability) is never handed an
/// edit with a base: the batch's page says the command waits for an agent that checks conflicts,
/// and the agents card shows each agent's version, commit and protocol, and the hub's.
#[tokio::test]
async fn an_edit_withheld_from_an_older_agent_says_so_and_the_agents_show_their_protocol() {
    let console = console();
    let created = console
        .api(
            Method::POST,
            "/batches",
            Some(json!({"title": "правка", "author": "ivanov", "commands": [
                {"type": "ensure_issue", "params": {"issue_type": "task", "key": "AURORA-2",
                 "summary": "Наше", "base": {"summary": "Видел"}}}]})),
        )
        .await;
    let (batch, command) = (
        created["id"].as_i64().unwrap(),
        created["commands"][0]["id"].as_i64().unwrap(),
    );
    let answer = console.claim("old-agent", "old-1").await;
    assert_eq!(answer["commands"], json!([]), "{answer}");
    let cookie = console.sign_in().await;
    let page = console
        .get(&format!("/ui/batches/{batch}"), Some(&cookie))
        .await;
    assert!(
        page.body
            .contains("ждёт агента, который проверяет конфликты"),
        "{}",
        page.body
    );
    let view = console
        .api(Method::GET, &format!("/commands/{command}"), None)
        .await;
    assert_eq!(view["waiting"], "ждёт агента, который проверяет конфликты");
    let page = console.get("/", Some(&cookie)).await;
    assert!(
        page.body.contains("Версия: 1.4.0, коммит —, протокол 1"),
        "{}",
        page.body
    );
    assert!(page.body.contains("Агент прежней версии"), "{}", page.body);
    assert!(
        page.body
            .contains(&format!("Хаб: {}, коммит", env!("CARGO_PKG_VERSION"))),
        "{}",
        page.body
    );
}

/// An edit stopped by a change made in Jira, and a comment depending on it: the conflict's time
/// (Jira's `+0300` text) is shown in the console's one form, in UTC; after «Оставить как в Jira»
/// the page says the comment will not run and offers it as a new batch, whose copy runs on the
/// edit's issue; once enqueued it is offered no more, and a second post is refused.
#[tokio::test]
async fn keep_jira_offers_its_dependents_as_a_new_batch_and_times_are_the_consoles() {
    let console = console();
    let cookie = console.sign_in().await;
    let batch = console
        .api(
            Method::POST,
            "/batches",
            Some(json!({"title": "правка и комментарий", "author": "ivanov", "commands": [
                {"type": "ensure_issue", "params": {"issue_type": "task", "key": "AURORA-7", "summary": "Наше"}},
                {"type": "comment", "params": {"key": {"$result": "key"}, "body": "после правки"}, "depends_on": 1}]})),
        )
        .await;
    let id = batch["id"].as_i64().unwrap();
    let edit = batch["commands"][0]["id"].as_i64().unwrap();
    let comment = batch["commands"][1]["id"].as_i64().unwrap();
    let claim = console.claim("agent-1", "c1").await;
    assert_eq!(claim["commands"][0]["id"], edit);
    let report = console
        .agent_post(
            "/agent/report",
            json!({"kind": "report", "id": "r1", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
                   "results": [{"command_id": edit, "delivery": claim["commands"][0]["delivery"],
                                "status": "failed", "error": "AURORA-7: конфликт — поле изменили в Jira",
                                "result": {"key": "AURORA-7", "conflict": {"updated": "2026-11-29T12:40:00.000+0300", "fields": [
                                    {"field": "summary", "base": "Старое", "jira": "Их", "wanted": "Наше",
                                     "changed_by": "Мария Петрова", "changed_at": "2026-11-29T12:40:00.000+0300"}]}}}]}),
        )
        .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.body);
    console.claim("agent-1", "c2").await;

    let path = format!("/ui/commands/{edit}");
    let page = console.get(&path, Some(&cookie)).await;
    let table = part(&page.body, "conflict-fields", "table");
    assert!(
        table.contains(
            "<time datetime=\"2026-11-29T09:40:00.000000Z\" title=\"2026-11-29T12:40:00.000+0300\">"
        ),
        "Jira's time in the console's form: {table}"
    );
    assert!(!table.contains(">2026-11-29 12:40"), "{table}");
    let csrf = csrf_of(&page.body);
    let kept = console
        .post(
            &format!("{path}/keep-jira"),
            Some(&cookie),
            &[("csrf", &csrf)],
            &[],
        )
        .await;
    assert_eq!(kept.status, StatusCode::SEE_OTHER, "{}", kept.body);

    let page = console.get(&path, Some(&cookie)).await;
    let said = part(&page.body, "kept-dependents", "p");
    assert!(
        said.contains("не выполнятся") && said.contains(&format!("/ui/commands/{comment}")),
        "{said}"
    );
    let offer = format!("action=\"/ui/commands/{edit}/enqueue-dependents\"");
    assert!(page.body.contains(&offer), "{}", page.body);
    // The comment's own row no longer tells to retry the cancelled edit first.
    let batch_page = console
        .get(&format!("/ui/batches/{id}"), Some(&cookie))
        .await;
    assert!(
        !batch_page.body.contains("повторите её"),
        "{}",
        batch_page.body
    );
    assert!(
        batch_page.body.contains("в этом пакете не выполнится"),
        "{}",
        batch_page.body
    );

    let enqueued = console
        .post(
            &format!("{path}/enqueue-dependents"),
            Some(&cookie),
            &[("csrf", &csrf)],
            &[],
        )
        .await;
    assert_eq!(enqueued.status, StatusCode::SEE_OTHER, "{}", enqueued.body);
    let location = enqueued.headers["location"].to_str().unwrap().to_string();
    let new_id: i64 = location
        .strip_prefix("/ui/batches/")
        .and_then(|rest| rest.split('?').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{location}"));
    assert_ne!(new_id, id);
    let new = console
        .api(Method::GET, &format!("/batches/{new_id}"), None)
        .await;
    assert_eq!(new["commands"].as_array().map(Vec::len), Some(1), "{new}");
    let copy = &new["commands"][0];
    assert_eq!(
        (
            &copy["type"],
            &copy["status"],
            &copy["params"]["key"],
            &copy["params"]["body"],
            &copy["depends_on"]
        ),
        (
            &json!("comment"),
            &json!("queued"),
            &json!("AURORA-7"),
            &json!("после правки"),
            &Value::Null
        ),
        "{copy}"
    );
    let new_page = console.get(&location, Some(&cookie)).await;
    assert!(
        new_page.body.contains("Новый пакет: копии команд"),
        "{}",
        new_page.body
    );
    // The copy is handed out: it runs on the issue as Jira holds it.
    let claim = console.claim("agent-1", "c3").await;
    assert_eq!(claim["commands"][0]["id"], copy["id"], "{claim}");
    assert_eq!(claim["commands"][0]["params"]["key"], "AURORA-7", "{claim}");

    let old = console
        .api(Method::GET, &format!("/batches/{id}"), None)
        .await;
    assert_eq!(old["commands"][1]["status"], "skipped", "{old}");
    assert!(
        old["commands"][1]["error"]
            .as_str()
            .is_some_and(|e| e.contains(&format!("пакет {new_id}, команда 1"))),
        "{old}"
    );
    let page = console.get(&path, Some(&cookie)).await;
    assert!(!page.body.contains(&offer), "offered twice: {}", page.body);
    assert!(
        page.body.contains("уже поставлены новым пакетом"),
        "{}",
        page.body
    );
    let twice = console
        .post(
            &format!("{path}/enqueue-dependents"),
            Some(&cookie),
            &[("csrf", &csrf)],
            &[],
        )
        .await;
    assert_eq!(twice.status, StatusCode::CONFLICT, "{}", twice.body);
    assert!(
        twice.body.contains("уже поставлены снова"),
        "{}",
        twice.body
    );
    // Only a command left as it is in Jira has dependents to enqueue again.
    let other = console
        .post(
            &format!("/ui/commands/{comment}/enqueue-dependents"),
            Some(&cookie),
            &[("csrf", &csrf)],
            &[],
        )
        .await;
    assert_eq!(other.status, StatusCode::CONFLICT, "{}", other.body);
}
