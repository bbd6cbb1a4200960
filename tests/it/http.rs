//! The HTTP API driven without a socket (`tower::ServiceExt::oneshot`): every endpoint, every
//! error case, the data-model's settings scenarios in HTTP terms, and the OpenAPI document
//! against the real routes.

use crate::support::*;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use jira_hub::http::HttpOptions;
use serde_json::{Value, json};
use tower::ServiceExt;

pub(crate) struct Api {
    router: axum::Router,
    pub(crate) client: String,
    agent: String,
    pub(crate) dir: TestDir,
}

fn api_with(options: HttpOptions) -> Api {
    let (router, client, agent, dir) = test_router(options);
    Api {
        router,
        client,
        agent,
        dir,
    }
}

pub(crate) fn api() -> Api {
    api_with(HttpOptions::default())
}

impl Api {
    async fn raw(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> (StatusCode, Value) {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        if let Some(content_type) = content_type {
            request = request.header("Content-Type", content_type);
        }
        let response = self
            .router
            .clone()
            .oneshot(request.body(Body::from(body)).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, value)
    }

    /// A GET without a token, with an `Accept` header: the status, `Content-Type` and body text.
    pub(crate) async fn get_accepting(
        &self,
        path: &str,
        accept: Option<&str>,
    ) -> (StatusCode, String, String) {
        let mut request = Request::builder().method(Method::GET).uri(path);
        if let Some(accept) = accept {
            request = request.header("Accept", accept);
        }
        let response = self
            .router
            .clone()
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (
            status,
            content_type,
            String::from_utf8(bytes.to_vec()).unwrap(),
        )
    }

    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let (content_type, bytes) = match body {
            Some(body) => (Some("application/json"), serde_json::to_vec(&body).unwrap()),
            None => (None, Vec::new()),
        };
        self.raw(method, path, token, content_type, bytes).await
    }

    pub(crate) async fn client(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.call(method, path, Some(&self.client.clone()), body)
            .await
    }

    pub(crate) async fn agent(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(&self.agent.clone()), Some(body))
            .await
    }
}

fn claim_body(id: &str, version: i64) -> Value {
    json!({"kind": "claim", "id": id, "agent": "agent-h", "sent_at": "2026-11-29T10:00:00Z", "agent_version": "1.4.0",
           "settings_version": version, "max_commands": 10})
}

fn error_code(body: &Value) -> (&str, Option<&str>) {
    (
        body["error"]["code"].as_str().unwrap_or("?"),
        body["error"]["field"].as_str(),
    )
}

#[tokio::test]
async fn tokens_guard_every_endpoint() {
    let api = api();
    let client_paths = [
        (Method::GET, "/settings"),
        (Method::PUT, "/settings"),
        (Method::GET, "/projects"),
        (Method::POST, "/projects"),
        (Method::GET, "/projects/AWPCA/issues"),
        (Method::GET, "/issues/AURORA-1"),
        (Method::POST, "/issues/AURORA-1/notes"),
        (Method::GET, "/batches"),
        (Method::POST, "/batches"),
        (Method::GET, "/batches/1"),
        (Method::POST, "/batches/1/cancel"),
        (Method::POST, "/batches/1/retry-failed"),
        (Method::POST, "/commands/1/retry"),
        (Method::GET, "/commands/failed"),
        (Method::POST, "/refresh"),
        (Method::GET, "/sync-runs"),
        (Method::GET, "/agents"),
    ];
    for (method, path) in &client_paths {
        let (status, body) = api.call(method.clone(), path, None, Some(json!({}))).await;
        assert_eq!(
            (status, error_code(&body).0),
            (StatusCode::UNAUTHORIZED, "unauthorized"),
            "{method} {path}"
        );
        let (status, _) = api
            .call(method.clone(), path, Some("not-a-token"), Some(json!({})))
            .await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{method} {path} with a wrong token"
        );
        let (status, body) = api
            .call(method.clone(), path, Some(&api.agent), Some(json!({})))
            .await;
        assert_eq!(
            (status, error_code(&body).0),
            (StatusCode::FORBIDDEN, "forbidden"),
            "{method} {path} with the agent token"
        );
    }
    for path in ["/agent/claim", "/agent/report", "/agent/heartbeat"] {
        assert_eq!(
            api.call(Method::POST, path, None, Some(json!({}))).await.0,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            api.call(Method::POST, path, Some(&api.client), Some(json!({})))
                .await
                .0,
            StatusCode::FORBIDDEN
        );
    }
    for path in ["/health", "/ready", "/metrics", "/openapi.json"] {
        assert_eq!(
            api.call(Method::GET, path, None, None).await.0,
            StatusCode::OK,
            "{path}"
        );
    }
    let (_, body) = api.call(Method::GET, "/health", None, None).await;
    assert_eq!(body, json!({"status": "ok", "schema_version": 4}));
}

/// The data model's settings scenarios, in HTTP terms.
#[tokio::test]
async fn settings_scenarios() {
    let api = api();
    let (status, settings) = api.client(Method::GET, "/settings", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        settings["base_jql"],
        "project = AURORA AND labels in (\"AWPCA\")"
    );
    assert_eq!(settings["closed_statuses"], json!(["Готово", "Снято"]));
    let text = settings.to_string();
    assert!(
        settings.get("tokens").is_none()
            && !text.contains(&api.client)
            && !text.contains(&api.agent),
        "no token shown"
    );
    let version = settings["settings_version"].as_i64().unwrap();

    // «Правка настроек поднимает версию»: and the next claim carries it.
    let (status, after) = api
        .client(
            Method::PUT,
            "/settings",
            Some(json!({"pacing": {"min_interval_ms": 1000}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(after["settings_version"], json!(version + 1));
    let (status, claim) = api.agent("/agent/claim", claim_body("c1", version)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(claim["settings_version"], json!(version + 1));
    assert_eq!(claim["settings"]["pacing"]["min_interval_ms"], json!(1000));
    assert!(
        claim["settings"].get("closed_statuses").is_none()
            && claim["settings"].get("relay_dir").is_none()
    );

    // Refusals: 422 naming the field, nothing written, version unchanged.
    for (update, field, message) in [
        (json!({"relay_dir": "rshb/jira-bridge"}), "relay_dir", None),
        (
            json!({"base_jql": "project = AURORA"}),
            "base_jql",
            Some("базовая JQL собирается из проектов"),
        ),
        (json!({"board_id": 4216}), "board_id", None),
        (
            json!({"closed_statuses": "Готово"}),
            "closed_statuses",
            None,
        ),
        (
            json!({"backup_keep": 3, "pacing": {"max_deliveries": 0}}),
            "pacing.max_deliveries",
            None,
        ),
        (
            json!({"tokens": {"agent": "x", "client": "y"}}),
            "tokens",
            None,
        ),
        (json!({"colour": "red"}), "colour", None),
    ] {
        let (status, body) = api
            .client(Method::PUT, "/settings", Some(update.clone()))
            .await;
        assert_eq!(
            (status, error_code(&body)),
            (StatusCode::UNPROCESSABLE_ENTITY, ("invalid", Some(field))),
            "{update}"
        );
        if let Some(message) = message {
            assert_eq!(body["error"]["message"], message);
        }
    }
    let (_, now) = api.client(Method::GET, "/settings", None).await;
    assert_eq!(now["settings_version"], json!(version + 1));
    assert_eq!(now["backup_keep"], json!(14), "all or nothing");

    // «Создание проекта не трогает версию настроек».
    let (status, project) = api
        .client(
            Method::POST,
            "/projects",
            Some(json!({"label": "STOCKS_DRRK", "name": "Склады"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(project["label"], "STOCKS_DRRK");
    let (_, now) = api.client(Method::GET, "/settings", None).await;
    assert_eq!(now["settings_version"], json!(version + 1));
    assert_eq!(
        now["base_jql"],
        "project = AURORA AND labels in (\"AWPCA\", \"STOCKS_DRRK\")"
    );
}

#[tokio::test]
async fn malformed_bodies_and_unknown_routes() {
    let api = api_with(HttpOptions {
        max_body_bytes: 2048,
        ..HttpOptions::default()
    });
    let token = api.client.clone();
    let (status, body) = api
        .raw(
            Method::PUT,
            "/settings",
            Some(&token),
            Some("application/json"),
            b"{not json".to_vec(),
        )
        .await;
    assert_eq!(
        (status, error_code(&body).0),
        (StatusCode::BAD_REQUEST, "malformed")
    );
    let (status, body) = api
        .raw(
            Method::PUT,
            "/settings",
            Some(&token),
            Some("text/plain"),
            b"{}".to_vec(),
        )
        .await;
    assert_eq!(
        (status, error_code(&body).0),
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
    );
    let (status, body) = api
        .raw(
            Method::PUT,
            "/settings",
            Some(&token),
            Some("application/json"),
            b"[1, 2]".to_vec(),
        )
        .await;
    assert_eq!(
        (status, error_code(&body).0),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid")
    );
    let big = serde_json::to_vec(&json!({"closed_statuses": vec!["x".repeat(100); 100]})).unwrap();
    let (status, body) = api
        .raw(
            Method::PUT,
            "/settings",
            Some(&token),
            Some("application/json"),
            big,
        )
        .await;
    assert_eq!(
        (status, error_code(&body).0),
        (StatusCode::PAYLOAD_TOO_LARGE, "too_large")
    );
    let (status, body) = api.client(Method::GET, "/no/such/thing", None).await;
    assert_eq!(
        (status, error_code(&body).0),
        (StatusCode::NOT_FOUND, "not_found")
    );
    let (status, body) = api.client(Method::DELETE, "/settings", None).await;
    assert_eq!(
        (status, error_code(&body).0),
        (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
    );
    let (status, body) = api
        .client(Method::POST, "/batches", Some(json!({"title": "t"})))
        .await;
    assert_eq!(
        (status, error_code(&body).0),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid"),
        "missing fields"
    );
}

#[tokio::test]
async fn projects() {
    let api = api();
    let (status, body) = api
        .client(
            Method::POST,
            "/projects",
            Some(json!({"label": "awpca", "name": "Другой"})),
        )
        .await;
    assert_eq!(
        (status, error_code(&body)),
        (StatusCode::CONFLICT, ("conflict", Some("label")))
    );
    assert_eq!(body["error"]["message"], "проект с такой меткой уже есть");
    for label in ["STOCKS DRRK", "A\\B", "A\nB"] {
        let (status, body) = api
            .client(
                Method::POST,
                "/projects",
                Some(json!({"label": label, "name": "x"})),
            )
            .await;
        assert_eq!(
            (status, error_code(&body)),
            (StatusCode::UNPROCESSABLE_ENTITY, ("invalid", Some("label"))),
            "{label:?}"
        );
    }
    let (status, body) = api
        .client(
            Method::POST,
            "/projects",
            Some(json!({"label": "X", "name": "x", "board_id": 0})),
        )
        .await;
    assert_eq!(
        (status, error_code(&body).1),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("board_id"))
    );
    let (status, list) = api.client(Method::GET, "/projects", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["name"], "АРМ КА");
}

#[tokio::test]
async fn batches_refreshes_and_the_mirror() {
    let api = api();
    let (status, batch) = api
        .client(Method::POST, "/batches", Some(json!({"title": "план", "author": "ivanov", "project": "AWPCA", "commands": [
            {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Новая"}},
            {"type": "comment", "params": {"key": {"$result": "key"}, "body": "к ней"}, "depends_on": 1}]})))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        (batch["status"].as_str(), batch["status_label"].as_str()),
        (Some("queued"), Some("в очереди"))
    );
    assert_eq!(batch["commands"][0]["params"]["labels"], json!(["AWPCA"]));
    assert_eq!(batch["counters"]["queued"], json!(2));
    let id = batch["id"].as_i64().unwrap();
    let (status, body) = api
        .client(
            Method::POST,
            "/batches",
            Some(json!({"title": "t", "author": "a", "commands": [
            {"type": "ensure_issue", "params": {"issue_type": "task"}}]})),
        )
        .await;
    assert_eq!(
        (status, error_code(&body).1),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("commands[1].params.summary")
        )
    );
    assert_eq!(
        api.client(Method::GET, &format!("/batches/{id}"), None)
            .await
            .1["id"],
        json!(id)
    );
    assert_eq!(
        api.client(Method::GET, "/batches?project=AWPCA", None)
            .await
            .1
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        api.client(Method::GET, "/batches?project=NOPE", None)
            .await
            .1
            .as_array()
            .unwrap()
            .len(),
        0
    );
    assert_eq!(
        api.client(Method::GET, "/batches/999", None).await.0,
        StatusCode::NOT_FOUND
    );
    let (status, cancelled) = api
        .client(Method::POST, &format!("/batches/{id}/cancel"), None)
        .await;
    assert_eq!(
        (status, cancelled["status"].as_str()),
        (StatusCode::OK, Some("cancelled"))
    );

    let (status, refresh) = api.client(Method::POST, "/refresh", None).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        refresh["commands"][0]["params"]["jql"],
        "project = AURORA AND labels in (\"AWPCA\")"
    );
    assert_eq!(
        api.client(Method::POST, "/refresh", Some(json!({"project": "NOPE"})))
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    let (_, claim) = api.agent("/agent/claim", claim_body("c1", 0)).await;
    let command = &claim["commands"][0];
    assert_eq!(command["type"], "refresh");
    let issues = [
        raw_issue(
            "AURORA-1",
            "1",
            &["AWPCA"],
            json!({"issuelinks": [{"id": "9", "type": {"name": "Blocks"}, "outwardIssue": {"key": "AURORA-2"}}]}),
        ),
        raw_issue(
            "AURORA-2",
            "2",
            &["OTHER"],
            json!({"issuelinks": [{"id": "9", "type": {"name": "Blocks"}, "inwardIssue": {"key": "AURORA-1"}}]}),
        ),
    ];
    let (status, report) = api
        .agent("/agent/report", json!({"kind": "report", "id": "r1", "agent": "agent-h", "sent_at": "2026-11-29T10:00:00Z", "results": [
            {"command_id": command["id"], "delivery": 1, "status": "progress", "page": {"start_at": 0, "total": 2, "issues": issues}},
            {"command_id": command["id"], "delivery": 1, "status": "done", "result": {"total": 2, "boards": [{"id": 4216, "type": "scrum"}]}}]}))
        .await;
    assert_eq!(
        (status, report["accepted"].as_array().unwrap().len()),
        (StatusCode::OK, 2)
    );
    let (status, slice) = api
        .client(Method::GET, "/projects/AWPCA/issues", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let rows: Vec<(&str, bool)> = slice
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["key"].as_str().unwrap(), r["neighbor"].as_bool().unwrap()))
        .collect();
    assert_eq!(rows, [("AURORA-1", false), ("AURORA-2", true)]);
    assert_eq!(
        api.client(Method::GET, "/projects/NOPE/issues", None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    let (status, note) = api
        .client(
            Method::POST,
            "/issues/AURORA-1/notes",
            Some(json!({"author": "ivanov", "body": "заметка"})),
        )
        .await;
    assert_eq!(
        (status, note["body"].as_str()),
        (StatusCode::CREATED, Some("заметка"))
    );
    assert_eq!(
        api.client(
            Method::POST,
            "/issues/AURORA-1/notes",
            Some(json!({"author": "", "body": "x"}))
        )
        .await
        .0,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        api.client(
            Method::POST,
            "/issues/AURORA-404/notes",
            Some(json!({"author": "a", "body": "x"}))
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
    let (status, issue) = api.client(Method::GET, "/issues/AURORA-1", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (
            issue["links"].as_array().unwrap().len(),
            issue["notes"].as_array().unwrap().len()
        ),
        (1, 1)
    );
    assert_eq!(issue["fields"]["summary"], "Задача AURORA-1");
    assert_eq!(
        api.client(Method::GET, "/issues/AURORA-404", None).await.0,
        StatusCode::NOT_FOUND
    );
    let (_, runs) = api.client(Method::GET, "/sync-runs", None).await;
    assert_eq!(
        (runs[0]["full"].as_bool(), runs[0]["status"].as_str()),
        (Some(true), Some("done"))
    );
    // A refresh is a batch with a run: the run names its batch.
    assert_eq!(runs[0]["batch_id"], refresh["id"], "{runs}");
    let (_, agents) = api.client(Method::GET, "/agents", None).await;
    assert_eq!(agents[0]["agent"], "agent-h");
    let (_, metrics) = api.call(Method::GET, "/metrics", None, None).await;
    let metrics = metrics.as_str().unwrap().to_string();
    for line in [
        "jira_hub_claims_total 1",
        "jira_hub_issues_ingested_total 2",
        "jira_hub_commands{status=\"done\"} 1",
        "jira_hub_mirror_issues 2",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
}

#[tokio::test]
async fn agent_bodies_are_checked_like_relay_files() {
    let api = api();
    let (status, body) = api.agent("/agent/claim", json!({"kind": "heartbeat", "id": "h1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z", "agent_version": "1", "jira_ok": true})).await;
    assert_eq!(
        (status, error_code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, ("invalid", Some("kind")))
    );
    let mut no_max = claim_body("c2", 0);
    no_max.as_object_mut().unwrap().remove("max_commands");
    let (status, body) = api.agent("/agent/claim", no_max).await;
    assert_eq!(
        (status, error_code(&body).1),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("max_commands"))
    );
    let (status, body) = api
        .agent("/agent/claim", json!({"kind": "claim", "id": "bad id"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let agent = api.agent.clone();
    let (status, _) = api
        .raw(
            Method::POST,
            "/agent/heartbeat",
            Some(&agent),
            Some("application/json"),
            b"{oops".to_vec(),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // The same id again: the same answer (exactly once, as over the relay).
    let first = api.agent("/agent/claim", claim_body("same", 0)).await.1;
    let second = api.agent("/agent/claim", claim_body("same", 0)).await.1;
    assert_eq!(first, second);
}

/// Messages to people are Russian and name the field by its path, whatever the transport: a
/// wrong-shape client body, an agent body, a body that is not JSON.
#[tokio::test]
async fn errors_name_the_field_by_path_in_russian() {
    let api = api();
    let (status, body) = api
        .client(
            Method::POST,
            "/batches",
            Some(json!({"title": "t", "author": "a", "commands": [{"type": "comment", "params": {}, "depends_on": "one"}]})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["field"], "commands[1].depends_on", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("неверный тип"),
        "{body}"
    );
    let (status, body) = api
        .client(Method::POST, "/batches", Some(json!({"title": "t"})))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["error"]["field"], "author", "{body}");
    assert_eq!(body["error"]["message"], "обязательное поле отсутствует");

    let mut report = json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
        "results": [{"command_id": 1, "delivery": "first", "status": "done"}]});
    let (status, body) = api.agent("/agent/report", report.clone()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["error"]["field"], "results[0].delivery", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ожидалось целое число")
    );
    report["results"][0]["delivery"] = json!(1);
    report["results"][0]["status"] = json!("finished");
    let (_, body) = api.agent("/agent/report", report).await;
    assert_eq!(body["error"]["field"], "results[0].status", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("недопустимое значение «finished»"),
        "{body}"
    );

    // Path and query parameters too: the error shape, the parameter named.
    let (status, body) = api.client(Method::GET, "/batches/abc", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["field"], "id", "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("«abc»"),
        "{body}"
    );
    let (status, body) = api
        .client(Method::GET, "/batches?project=a&project=b", None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        (&body["error"]["field"], &body["error"]["message"]),
        (&json!("project"), &json!("параметр повторяется")),
        "{body}"
    );

    let token = api.client.clone();
    let (status, body) = api
        .raw(
            Method::PUT,
            "/settings",
            Some(&token),
            Some("application/json"),
            b"{\"backup_keep\": 3".to_vec(),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("JSON оборван"),
        "{body}"
    );
}

/// Every route of the document answers (no fallback 404/405), and every endpoint of system.md
/// §8 is in the document.
#[tokio::test]
async fn the_openapi_document_matches_the_routes() {
    let api = api();
    let (status, document) = api.call(Method::GET, "/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let paths = document["paths"].as_object().unwrap();
    let mut documented = Vec::new();
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            documented.push(format!("{} {path}", method.to_uppercase()));
            let concrete = path
                .replace("{label}", "AWPCA")
                .replace("{key}", "AURORA-1")
                .replace("{id}", "1");
            let token = if path.starts_with("/agent/") {
                api.agent.clone()
            } else {
                api.client.clone()
            };
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let (status, body) = api
                .call(method.clone(), &concrete, Some(&token), Some(json!({})))
                .await;
            let fallback = body["error"]["message"] == "нет такого ресурса"
                || status == StatusCode::METHOD_NOT_ALLOWED;
            assert!(
                !fallback,
                "{method} {path} is documented but not routed: {status} {body}"
            );
        }
    }
    documented.sort();
    let expected = [
        "GET /agents",
        "GET /batches",
        "GET /batches/{id}",
        "GET /commands/failed",
        "GET /commands/{id}",
        "GET /health",
        "GET /issues/{key}",
        "GET /metrics",
        "GET /projects",
        "GET /projects/{label}/issues",
        "GET /ready",
        "GET /settings",
        "GET /sync-runs",
        "POST /agent/claim",
        "POST /agent/heartbeat",
        "POST /agent/report",
        "POST /batches",
        "POST /batches/{id}/cancel",
        "POST /batches/{id}/retry-failed",
        "POST /commands/{id}/enqueue-dependents",
        "POST /commands/{id}/keep-jira",
        "POST /commands/{id}/retry",
        "POST /issues/{key}/notes",
        "POST /projects",
        "POST /refresh",
        "POST /sync-runs/{id}/confirm",
        "PUT /settings",
    ];
    assert_eq!(documented, expected);
    assert!(document["components"]["schemas"]["BatchView"].is_object());
    assert!(document["components"]["securitySchemes"]["client_token"].is_object());
}

#[tokio::test]
async fn slow_requests_are_answered_408() {
    let api = api_with(HttpOptions {
        request_timeout: std::time::Duration::from_nanos(1),
        ..HttpOptions::default()
    });
    let (status, body) = api
        .client(
            Method::POST,
            "/batches",
            Some(json!({"title": "t", "author": "a", "commands": [
            {"type": "comment", "params": {"key": "AURORA-1", "body": "x"}}]})),
        )
        .await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT, "{body}");
    assert_eq!(error_code(&body), ("timeout", None), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("время"));
}

/// Sends `request` as it is (any headers) and reads the answer.
async fn send(api: &Api, request: Request<Body>) -> (StatusCode, Value) {
    let response = api.router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

/// Every rejection answers `{"error": {code, field, message}}` with a Russian message: the auth
/// scheme in any case, a body on GET, axum's own 413 on the endpoints that read raw bytes, a
/// refresh body of the wrong shape.
#[tokio::test]
async fn every_rejection_has_the_error_shape() {
    let api = api_with(HttpOptions {
        max_body_bytes: 2048,
        ..HttpOptions::default()
    });
    let russian = |body: &Value| {
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message
                .chars()
                .any(|c| ('а'..='я').contains(&c.to_lowercase().next().unwrap_or(c))),
            "not Russian: {body}"
        );
    };
    for scheme in ["bearer", "BEARER", "Bearer", "bEaReR"] {
        let request = Request::get("/settings")
            .header("Authorization", format!("{scheme} {}", api.client))
            .body(Body::empty())
            .unwrap();
        assert_eq!(send(&api, request).await.0, StatusCode::OK, "{scheme}");
    }
    for header in ["Basic abc", "Bearer", "Bearer ", "Token x", ""] {
        let request = Request::get("/settings")
            .header("Authorization", header)
            .body(Body::empty())
            .unwrap();
        let (status, body) = send(&api, request).await;
        assert_eq!(
            (status, error_code(&body).0),
            (StatusCode::UNAUTHORIZED, "unauthorized"),
            "{header:?}"
        );
        russian(&body);
    }
    // A body on GET is ignored.
    let request = Request::get("/settings")
        .header("Authorization", format!("Bearer {}", api.client))
        .header("Content-Type", "application/json")
        .body(Body::from("{\"x\": 1}"))
        .unwrap();
    assert_eq!(send(&api, request).await.0, StatusCode::OK);
    // axum's own limit on the endpoints that take raw bytes.
    let big = json!({"kind": "claim", "pad": "x".repeat(4096)});
    for (path, token) in [
        ("/agent/claim", api.agent.clone()),
        ("/agent/report", api.agent.clone()),
        ("/agent/heartbeat", api.agent.clone()),
        ("/refresh", api.client.clone()),
    ] {
        let (status, body) = api
            .call(Method::POST, path, Some(&token), Some(big.clone()))
            .await;
        assert_eq!(
            (status, error_code(&body).0),
            (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            "{path}: {body}"
        );
        russian(&body);
    }
    // The refresh body speaks Russian and names the field like every other body.
    let (status, body) = api
        .client(Method::POST, "/refresh", Some(json!({"project": 5})))
        .await;
    assert_eq!(
        (status, error_code(&body)),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            ("invalid", Some("project"))
        ),
        "{body}"
    );
    russian(&body);
    let token = api.client.clone();
    let (status, body) = api
        .raw(
            Method::POST,
            "/refresh",
            Some(&token),
            Some("application/json"),
            b"{oops".to_vec(),
        )
        .await;
    assert_eq!(
        (status, error_code(&body).0),
        (StatusCode::BAD_REQUEST, "malformed")
    );
    russian(&body);
    // An empty agent body.
    let agent = api.agent.clone();
    let (status, body) = api
        .raw(Method::POST, "/agent/claim", Some(&agent), None, Vec::new())
        .await;
    assert_eq!(
        (status, error_code(&body).0),
        (StatusCode::BAD_REQUEST, "malformed"),
        "{body}"
    );
    russian(&body);
}

/// Jira's `fields` nested deeper than the hub can read back (serde_json's recursion limit): that
/// issue is not stored, the rest of the page is, and what is stored comes back as objects.
#[tokio::test]
async fn fields_nested_too_deep_are_not_stored() {
    let api = api();
    let (status, _) = api.client(Method::POST, "/refresh", None).await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, claim) = api.agent("/agent/claim", claim_body("deep-c", 0)).await;
    let command = claim["commands"][0].clone();
    let mut deep = json!("дно");
    for _ in 0..200 {
        deep = json!({"inner": deep});
    }
    let issues = [
        raw_issue("AURORA-1", "1", &["AWPCA"], json!({})),
        raw_issue(
            "AURORA-2",
            "2",
            &["AWPCA"],
            json!({"customfield_99999": deep}),
        ),
        raw_issue("AURORA-3", "3", &["AWPCA"], json!({})),
    ];
    // Sent as text: serde_json would not build a value this deep.
    let body = format!(
        r#"{{"kind": "report", "id": "deep-r", "agent": "agent-h", "sent_at": "2026-11-29T10:00:00Z", "results": [
            {{"command_id": {}, "delivery": 1, "status": "progress", "page": {{"start_at": 0, "total": 3, "issues": [{}, {}, {}]}}}}]}}"#,
        command["id"], issues[0], issues[1], issues[2]
    );
    let agent = api.agent.clone();
    let (status, report) = api
        .raw(
            Method::POST,
            "/agent/report",
            Some(&agent),
            Some("application/json"),
            body.into_bytes(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["accepted"], json!([command["id"]]));
    for key in ["AURORA-1", "AURORA-3"] {
        let (status, issue) = api
            .client(Method::GET, &format!("/issues/{key}"), None)
            .await;
        assert_eq!(status, StatusCode::OK);
        assert!(issue["fields"].is_object(), "{key}: {}", issue["fields"]);
    }
    let (status, body) = api.client(Method::GET, "/issues/AURORA-2", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (_, metrics) = api.call(Method::GET, "/metrics", None, None).await;
    let metrics = metrics.as_str().unwrap().to_string();
    assert!(
        metrics.contains("jira_hub_issues_not_stored_total 1")
            && metrics.contains("jira_hub_issues_ingested_total 2"),
        "{metrics}"
    );
}

/// Follows a `$ref` of the document.
fn resolve<'a>(document: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(reference) => resolve(
            document,
            document
                .pointer(reference.trim_start_matches('#'))
                .unwrap_or_else(|| panic!("{reference} is not in the document")),
        ),
        None => schema,
    }
}

/// A value that the schema says is valid: its example, constant or first choice; for an object
/// its required members.
fn example_of(document: &Value, schema: &Value) -> Value {
    let schema = resolve(document, schema);
    if let Some(example) = schema.get("example") {
        return example.clone();
    }
    if let Some(constant) = schema.get("const") {
        return constant.clone();
    }
    if let Some(first) = schema["enum"].get(0) {
        return first.clone();
    }
    for choice in ["oneOf", "anyOf"] {
        if let Some(first) = schema[choice].get(0) {
            return example_of(document, first);
        }
    }
    if let Some(parts) = schema["allOf"].as_array() {
        let mut whole = serde_json::Map::new();
        for part in parts {
            if let Value::Object(members) = example_of(document, part) {
                whole.extend(members);
            }
        }
        return Value::Object(whole);
    }
    let kind = match &schema["type"] {
        Value::String(t) => t.clone(),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null")
            .to_string(),
        _ => "object".to_string(),
    };
    match kind.as_str() {
        "object" => {
            let mut object = serde_json::Map::new();
            for name in schema["required"].as_array().into_iter().flatten() {
                let name = name.as_str().unwrap();
                object.insert(
                    name.to_string(),
                    example_of(document, &schema["properties"][name]),
                );
            }
            Value::Object(object)
        }
        "array" => json!([example_of(document, &schema["items"])]),
        "string" => match schema["format"].as_str() {
            Some("date-time") => json!("2026-11-29T10:00:00Z"),
            Some("date") => json!("2026-04-01"),
            _ => json!("x"),
        },
        "integer" | "number" => json!(schema["minimum"].as_i64().unwrap_or(1)),
        "boolean" => json!(true),
        _ => Value::Null,
    }
}

/// A value of the wrong type for `schema`.
fn wrong_type_for(document: &Value, schema: &Value) -> Value {
    let schema = resolve(document, schema);
    match &schema["type"] {
        Value::String(t) if t == "string" => json!(12345),
        Value::Array(types) if types.contains(&json!("string")) => json!(12345),
        _ => json!("не того типа"),
    }
}

/// Every operation of `/openapi.json`, sent a body built from its schema and broken ones, answers
/// no 5xx and only statuses it declares; the agent claim body built from the schema is accepted.
#[tokio::test]
async fn the_openapi_document_makes_valid_requests() {
    let api = api();
    let (_, document) = api.call(Method::GET, "/openapi.json", None, None).await;
    let mut tried = 0;
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let declared: Vec<String> = operation["responses"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            for status in declared.iter().filter(|s| s.as_str() >= "400") {
                assert_eq!(
                    operation["responses"][status]["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/ErrorBody",
                    "{method} {path} {status}"
                );
            }
            let security = operation["security"].to_string();
            let token = if security.contains("agent_token") {
                Some(api.agent.clone())
            } else if security.contains("client_token") {
                Some(api.client.clone())
            } else {
                None
            };
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let concrete = path
                .replace("{label}", "AWPCA")
                .replace("{key}", "AURORA-1")
                .replace("{id}", "1");
            // (path, content type, body, what it is)
            let mut requests: Vec<(String, Option<&str>, Vec<u8>, String)> = Vec::new();
            if path.contains("{id}") {
                requests.push((
                    path.replace("{id}", "abc"),
                    None,
                    Vec::new(),
                    "a path parameter of the wrong type".into(),
                ));
            }
            let schema = &operation["requestBody"]["content"]["application/json"]["schema"];
            if schema.is_null() {
                requests.push((concrete.clone(), None, Vec::new(), "no body".into()));
            } else {
                let valid = example_of(&document, schema);
                let bytes = serde_json::to_vec(&valid).unwrap();
                requests.push((
                    concrete.clone(),
                    Some("application/json"),
                    bytes.clone(),
                    format!("the example {valid}"),
                ));
                requests.push((
                    concrete.clone(),
                    Some("text/plain"),
                    bytes.clone(),
                    "the wrong content type".into(),
                ));
                requests.push((concrete.clone(), None, bytes, "no content type".into()));
                requests.push((
                    concrete.clone(),
                    Some("application/json"),
                    Vec::new(),
                    "an empty body".into(),
                ));
                requests.push((
                    concrete.clone(),
                    Some("application/json"),
                    b"[1, 2]".to_vec(),
                    "an array".into(),
                ));
                let resolved = resolve(&document, schema);
                let resolved = if resolved["oneOf"].is_array() {
                    resolve(&document, &resolved["oneOf"][0])
                } else {
                    resolved
                };
                for (name, property) in resolved["properties"].as_object().into_iter().flatten() {
                    let mut broken = valid.clone();
                    broken[name] = wrong_type_for(&document, property);
                    requests.push((
                        concrete.clone(),
                        Some("application/json"),
                        serde_json::to_vec(&broken).unwrap(),
                        format!("{name} of the wrong type"),
                    ));
                }
                for name in resolved["required"].as_array().into_iter().flatten() {
                    let mut broken = valid.clone();
                    broken
                        .as_object_mut()
                        .unwrap()
                        .remove(name.as_str().unwrap());
                    requests.push((
                        concrete.clone(),
                        Some("application/json"),
                        serde_json::to_vec(&broken).unwrap(),
                        format!("without {name}"),
                    ));
                }
            }
            for (target, content_type, body, what) in requests {
                let (status, answer) = api
                    .raw(
                        method.clone(),
                        &target,
                        token.as_deref(),
                        content_type,
                        body,
                    )
                    .await;
                tried += 1;
                assert!(
                    !status.is_server_error(),
                    "{method} {target} with {what}: {status} {answer}"
                );
                assert!(
                    declared.contains(&status.as_str().to_string()),
                    "{method} {target} with {what}: {status} is not declared ({declared:?}): {answer}"
                );
                if !status.is_success() && status != StatusCode::OK {
                    assert!(
                        answer["error"]["code"].is_string(),
                        "{method} {target} with {what}: {answer}"
                    );
                }
                if path == "/agent/claim" && what.starts_with("the example") {
                    assert_eq!(status, StatusCode::OK, "{answer}");
                }
            }
        }
    }
    assert!(tried > 100, "{tried} requests");
    // The declared error codes are the ones the hub uses.
    let codes = &document["components"]["schemas"]["ErrorCode"]["enum"];
    for code in [
        "malformed",
        "invalid",
        "unauthorized",
        "timeout",
        "too_large",
        "busy",
    ] {
        assert!(codes.as_array().unwrap().contains(&json!(code)), "{code}");
    }
    // Every reference leads somewhere.
    fn every_ref(document: &Value, value: &Value) {
        match value {
            Value::Object(object) => {
                if object.contains_key("$ref") {
                    resolve(document, value);
                }
                object.values().for_each(|v| every_ref(document, v));
            }
            Value::Array(items) => items.iter().for_each(|v| every_ref(document, v)),
            _ => {}
        }
    }
    every_ref(&document, &document);
    let claim = &document["components"]["schemas"]["ClaimRequest"];
    assert!(
        claim["required"]
            .as_array()
            .unwrap()
            .contains(&json!("kind"))
    );
    assert!(claim["properties"].get("token").is_none());
    assert_eq!(claim["properties"]["sent_at"]["format"], "date-time");
}

/// A busy database is 503 `busy` by SQLite's code, whatever the message says; a message that
/// merely mentions a lock is not.
#[test]
fn busy_is_decided_by_the_error_code_not_its_text() {
    use jira_hub::http::{ApiError, ErrorCode};
    use jira_hub::service::ServiceError;
    use jira_hub::store::StoreError;
    let sqlite = |code: std::os::raw::c_int, message: &str| {
        StoreError::from(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(code),
            Some(message.to_string()),
        ))
    };
    for code in [rusqlite::ffi::SQLITE_BUSY, rusqlite::ffi::SQLITE_LOCKED] {
        let error = sqlite(code, "held by another connection");
        assert!(matches!(error, StoreError::Busy(_)), "{error:?}");
        let answer = ApiError::from(ServiceError::from(error));
        assert_eq!(
            (answer.status.as_u16(), answer.code),
            (503, ErrorCode::Busy)
        );
    }
    let answer = ApiError::from(ServiceError::from(sqlite(
        rusqlite::ffi::SQLITE_ERROR,
        "database is locked",
    )));
    assert_eq!(
        (answer.status.as_u16(), answer.code),
        (500, ErrorCode::Internal)
    );
}

/// Faults of the database file are told by SQLite's code too: a full disk is 507
/// `disk_full`, a read-only file or an I/O error 503 `database_unavailable`, each with a Russian
/// message saying nothing was written; never 500 `internal`.
#[test]
fn faults_of_the_database_file_are_507_or_503_by_their_code() {
    use jira_hub::http::{ApiError, ErrorCode};
    use jira_hub::service::ServiceError;
    use jira_hub::store::StoreError;
    for (code, status, expected, words) in [
        (
            rusqlite::ffi::SQLITE_FULL,
            507,
            ErrorCode::DiskFull,
            "нет места",
        ),
        (
            rusqlite::ffi::SQLITE_READONLY,
            503,
            ErrorCode::DatabaseUnavailable,
            "только для чтения",
        ),
        (
            rusqlite::ffi::SQLITE_IOERR,
            503,
            ErrorCode::DatabaseUnavailable,
            "ввода-вывода",
        ),
        (
            rusqlite::ffi::SQLITE_CANTOPEN,
            503,
            ErrorCode::DatabaseUnavailable,
            "ввода-вывода",
        ),
    ] {
        let error = StoreError::from(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(code),
            Some("database or disk is full".to_string()),
        ));
        let answer = ApiError::from(ServiceError::from(error));
        assert_eq!((answer.status.as_u16(), answer.code), (status, expected));
        assert!(
            answer.message.contains(words) && answer.message.contains("запись не сделана"),
            "{}",
            answer.message
        );
    }
}

/// The slice answers with a strong `ETag`; `If-None-Match` with it is 304 with no body while
/// nothing changed, 200 with a new `ETag` after a change. `updated_since` filters the rows;
/// `POST /refresh {"since": "last"}` is incremental, anything else in the body is refused.
#[tokio::test]
async fn slices_carry_etags_and_refreshes_can_be_incremental() {
    let api = api();
    let get = |if_none_match: Option<String>, path: &'static str| {
        let mut request = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header("Authorization", format!("Bearer {}", api.client));
        if let Some(tag) = if_none_match {
            request = request.header("If-None-Match", tag);
        }
        let router = api.router.clone();
        async move {
            let response = router
                .oneshot(request.body(Body::empty()).unwrap())
                .await
                .unwrap();
            let status = response.status();
            let etag = response
                .headers()
                .get("etag")
                .map(|v| v.to_str().unwrap().to_string());
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap();
            (status, etag, bytes)
        }
    };
    let (status, first, body) = get(None, "/projects/AWPCA/issues").await;
    assert_eq!((status, body.as_ref()), (StatusCode::OK, b"[]".as_ref()));
    let first = first.expect("an ETag");
    assert!(first.starts_with('"') && first.ends_with('"'), "{first}");
    let (status, again, body) = get(Some(first.clone()), "/projects/AWPCA/issues").await;
    assert_eq!(
        (status, again.as_deref(), body.len()),
        (StatusCode::NOT_MODIFIED, Some(first.as_str()), 0)
    );
    let (status, _, _) = get(
        Some(format!("\"other\", W/{first}")),
        "/projects/AWPCA/issues",
    )
    .await;
    assert_eq!(status, StatusCode::NOT_MODIFIED, "a list, weak comparison");

    // A full refresh brings an issue: a new ETag.
    let (status, refresh) = api.client(Method::POST, "/refresh", None).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        refresh["commands"][0]["params"]["jql"],
        "project = AURORA AND labels in (\"AWPCA\")"
    );
    let report = |claim: &Value, id: &str, summary: &str| {
        json!({"kind": "report", "id": id, "agent": "agent-h", "sent_at": "2026-11-29T10:00:00Z", "results": [
            {"command_id": claim["commands"][0]["id"], "delivery": 1, "status": "done",
             "page": {"start_at": 0, "total": 1, "issues": [raw_issue("AURORA-1", "1", &["AWPCA"], json!({"summary": summary}))]},
             "result": {"total": 1, "boards": []}}]})
    };
    let (_, claim) = api.agent("/agent/claim", claim_body("c1", 0)).await;
    assert_eq!(
        api.agent("/agent/report", report(&claim, "r1", "a"))
            .await
            .0,
        StatusCode::OK
    );
    let (status, second, body) = get(Some(first.clone()), "/projects/AWPCA/issues").await;
    let second = second.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_ne!(second, first);
    let rows: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(rows[0]["key"], "AURORA-1");
    let changed_at = rows[0]["mirror_changed_at"].as_str().unwrap().to_string();

    // Incremental since the last run; the same issue unchanged changes nothing.
    let (status, refresh) = api
        .client(Method::POST, "/refresh", Some(json!({"since": "last"})))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let jql = refresh["commands"][0]["params"]["jql"].as_str().unwrap();
    let bound = (time::macros::datetime!(2026-11-29 09:50:00 UTC).unix_timestamp()) * 1000;
    assert_eq!(
        jql,
        format!("project = AURORA AND labels in (\"AWPCA\") AND updated >= {bound}")
    );
    let (_, claim) = api.agent("/agent/claim", claim_body("c2", 0)).await;
    api.agent("/agent/report", report(&claim, "r2", "a")).await;
    let (status, _, _) = get(Some(second.clone()), "/projects/AWPCA/issues").await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    let (_, runs) = api.client(Method::GET, "/sync-runs", None).await;
    let kinds: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["incremental", "full"]);

    // updated_since: the time of the change and after.
    let path: &'static str =
        Box::leak(format!("/projects/AWPCA/issues?updated_since={changed_at}").into_boxed_str());
    let (status, _, body) = get(None, path).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()[0]["key"],
        "AURORA-1"
    );
    let (status, _, body) = get(
        None,
        "/projects/AWPCA/issues?updated_since=2026-11-29T10:00:01Z",
    )
    .await;
    assert_eq!((status, body.as_ref()), (StatusCode::OK, b"[]".as_ref()));
    let (status, body) = api
        .client(
            Method::GET,
            "/projects/AWPCA/issues?updated_since=yesterday",
            None,
        )
        .await;
    assert_eq!(
        (status, error_code(&body)),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            ("invalid", Some("updated_since"))
        )
    );

    // The refresh body: `since` is `last` or absent; nothing else.
    for (body, field) in [
        (json!({"since": "first"}), "since"),
        (json!({"since": 5}), "since"),
        (json!({"sinse": "last"}), "sinse"),
    ] {
        let (status, answer) = api
            .client(Method::POST, "/refresh", Some(body.clone()))
            .await;
        let (code, named) = error_code(&answer);
        // (An unknown member is named twice, `sinse.sinse`, by domain::json: an older quirk.)
        assert_eq!(
            (status, code, named.and_then(|f| f.split('.').next())),
            (StatusCode::UNPROCESSABLE_ENTITY, "invalid", Some(field)),
            "{body}: {answer}"
        );
    }
}

/// Agent names as an old database may hold them (a quote, a backslash, a line feed, a carriage
/// return) keep `/metrics` parseable in both formats by a real parser, and each name reads back
/// as it is stored (control characters other than the line feed shown as `\u{…}`).
#[tokio::test]
async fn metrics_stay_parseable_whatever_the_agents_are_called() {
    let api = api();
    let names = [
        ("agent \"north\"", "agent \"north\""),
        ("back\\slash\\", "back\\slash\\"),
        ("two\nlines", "two\nlines"),
        ("\\\"\n", "\\\"\n"),
        ("carriage\rreturn", "carriage\\u{d}return"),
        ("agent-m", "agent-m"),
    ];
    {
        let conn = rusqlite::Connection::open(api.dir.db()).unwrap();
        for (stored, _) in names {
            conn.execute(
                "INSERT INTO agent_status (agent, version, last_seen_at) VALUES (?1, '1.4.0', '2026-11-29T10:00:00.000000Z')",
                [stored],
            )
            .unwrap();
        }
    }
    let shown = |labels: Vec<String>| {
        let mut labels = labels;
        labels.sort();
        labels
    };
    let mut expected: Vec<String> = names.iter().map(|(_, shown)| shown.to_string()).collect();
    expected.sort();

    let (status, _, text) = api.get_accepting("/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    let exposition = openmetrics_parser::prometheus::parse_prometheus(&text)
        .unwrap_or_else(|error| panic!("Prometheus text does not parse: {error:?}\n{text}"));
    let family = &exposition.families["jira_hub_agent_last_seen_age_seconds"];
    let agents: Vec<String> = family
        .iter_samples()
        .map(|s| {
            s.get_labelset()
                .unwrap()
                .get_label_value("agent")
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(shown(agents), expected);
    assert!(exposition.families.contains_key("jira_hub_claims_total"));

    let (status, _, text) = api
        .get_accepting(
            "/metrics",
            Some("application/openmetrics-text; version=1.0.0"),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let exposition = openmetrics_parser::openmetrics::parse_openmetrics(&text)
        .unwrap_or_else(|error| panic!("OpenMetrics does not parse: {error:?}\n{text}"));
    let family = &exposition.families["jira_hub_agent_last_seen_age_seconds"];
    let agents: Vec<String> = family
        .iter_samples()
        .map(|s| {
            s.get_labelset()
                .unwrap()
                .get_label_value("agent")
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(shown(agents), expected);
    assert!(exposition.families.contains_key("jira_hub_claims"));
}

/// A claim with `wait_seconds` is held while there is nothing to hand out: a batch enqueued
/// meanwhile answers it with the command; with nothing coming it is answered empty when its wait
/// ends. Time is tokio's, paused: the waits pass without waiting, and the test looks at what
/// came first, never at durations.
#[tokio::test(start_paused = true)]
async fn a_claim_waits_for_work_over_http() {
    let api = std::sync::Arc::new(api());
    let version = api.client(Method::GET, "/settings", None).await.1["settings_version"]
        .as_i64()
        .unwrap();
    let waiting = |id: &str| {
        let mut body = claim_body(id, version);
        body["wait_seconds"] = json!(600);
        body
    };
    let held = tokio::spawn({
        let api = api.clone();
        let body = waiting("w1");
        async move { api.agent("/agent/claim", body).await }
    });
    tokio::time::sleep(std::time::Duration::from_secs(10)).await;
    assert!(
        !held.is_finished(),
        "nothing to hand out: the claim is held"
    );
    let (_, agents) = api.client(Method::GET, "/agents", None).await;
    assert_eq!(agents[0]["agent"], "agent-h", "the waiting agent is seen");
    let claims_waiting = |metrics: &Value| {
        metrics
            .as_str()
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("jira_hub_claims_waiting "))
            .map(str::to_string)
    };
    let (_, metrics) = api.call(Method::GET, "/metrics", None, None).await;
    assert_eq!(
        claims_waiting(&metrics).as_deref(),
        Some("1"),
        "/metrics shows it waiting"
    );
    let (status, batch) = api
        .client(
            Method::POST,
            "/batches",
            Some(json!({"title": "t", "author": "a", "commands": [
            {"type": "comment", "params": {"key": "AURORA-1", "body": "x"}}]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, answer) = held.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["commands"][0]["batch_id"], batch["id"], "{answer}");
    let (_, metrics) = api.call(Method::GET, "/metrics", None, None).await;
    assert_eq!(claims_waiting(&metrics).as_deref(), Some("0"));

    // Nothing comes: answered empty at the end of its wait, not before.
    let held = tokio::spawn({
        let api = api.clone();
        let body = waiting("w2");
        async move { api.agent("/agent/claim", body).await }
    });
    tokio::time::sleep(std::time::Duration::from_secs(599)).await;
    assert!(!held.is_finished(), "still within its wait");
    let (status, answer) = held.await.unwrap();
    assert_eq!((status, &answer["commands"]), (StatusCode::OK, &json!([])));
    // The same id again: an empty answer is not recorded (an idle agent writes
    // nothing), so it is looked at again and answered the same at the end of its wait.
    let (_, again) = api.agent("/agent/claim", waiting("w2")).await;
    assert_eq!(again, answer);
    // Out of range: refused naming the field.
    let mut too_long = claim_body("w3", version);
    too_long["wait_seconds"] = json!(901);
    let (status, body) = api.agent("/agent/claim", too_long).await;
    assert_eq!(
        (status, error_code(&body)),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            ("invalid", Some("wait_seconds"))
        )
    );
}

/// `GET /batches` is paged, newest first, and lists each batch with its counters and the number
/// of its commands, never the commands themselves; `before` gives the next page.
#[tokio::test]
async fn batches_are_listed_a_page_at_a_time_without_their_commands() {
    let api = api();
    let mut ids = Vec::new();
    for n in 0..3 {
        let (status, batch) = api
            .client(
                Method::POST,
                "/batches",
                Some(
                    json!({"title": format!("t{n}"), "author": "a", "commands": [
                {"type": "comment", "params": {"key": "AURORA-1", "body": "x"}},
                {"type": "comment", "params": {"key": "AURORA-2", "body": "y"}}]}),
                ),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
        ids.push(batch["id"].as_i64().unwrap());
    }
    let (status, page) = api.client(Method::GET, "/batches?limit=2", None).await;
    assert_eq!(status, StatusCode::OK);
    let listed: Vec<i64> = page
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_i64().unwrap())
        .collect();
    assert_eq!(listed, [ids[2], ids[1]], "newest first, at most the limit");
    for batch in page.as_array().unwrap() {
        assert!(
            batch.get("commands").is_none(),
            "no commands in a list: {batch}"
        );
        assert_eq!(batch["commands_total"], json!(2));
        assert_eq!(batch["counters"]["queued"], json!(2));
    }
    let (_, next) = api
        .client(
            Method::GET,
            &format!("/batches?limit=2&before={}", ids[1]),
            None,
        )
        .await;
    assert_eq!(next.as_array().unwrap().len(), 1);
    assert_eq!(next[0]["id"], json!(ids[0]));
    let (_, whole) = api
        .client(Method::GET, &format!("/batches/{}", ids[0]), None)
        .await;
    assert_eq!(
        whole["commands"].as_array().unwrap().len(),
        2,
        "one batch has them"
    );
    for limit in ["0", "501"] {
        let (status, body) = api
            .client(Method::GET, &format!("/batches?limit={limit}"), None)
            .await;
        assert_eq!(
            (status, error_code(&body)),
            (StatusCode::UNPROCESSABLE_ENTITY, ("invalid", Some("limit"))),
            "limit={limit}"
        );
    }
    let (status, _) = api.client(Method::GET, "/batches?limit=many", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

/// An agent's name is at most 100 printable characters: control characters and invisible ones
/// (zero width, direction overrides, line separators) are refused naming `agent`, so the
/// console and `/agents` never show one name as another; `/agents` lists the 100 most recently
/// seen.
#[tokio::test]
async fn agent_names_are_bounded_and_listed_a_bounded_number() {
    let api = api();
    for name in [
        "x".repeat(101),
        "agent\u{7}".to_string(),
        "agent\u{202E}1-tnega".to_string(),
        "agent\u{200B}".to_string(),
        "agent\u{2028}2".to_string(),
    ] {
        let mut body = claim_body("bad-name", 0);
        body["agent"] = json!(name);
        let (status, body) = api
            .agent("/agent/heartbeat", {
                let mut heartbeat = body;
                heartbeat["kind"] = json!("heartbeat");
                heartbeat["jira_ok"] = json!(true);
                heartbeat
            })
            .await;
        assert_eq!(
            (status, error_code(&body)),
            (StatusCode::UNPROCESSABLE_ENTITY, ("invalid", Some("agent"))),
            "{name:?}"
        );
    }
    for n in 0..120 {
        let mut body = claim_body(&format!("c{n}"), 0);
        body["agent"] = json!(format!("agent-{n:03}"));
        let (status, _) = api.agent("/agent/claim", body).await;
        assert_eq!(status, StatusCode::OK);
    }
    let (_, agents) = api.client(Method::GET, "/agents", None).await;
    let agents = agents.as_array().unwrap();
    assert_eq!(agents.len(), 100, "a bounded number");
    // The test's clock stands still: every agent was seen at the same time, and the list is
    // then in the order of their names.
    assert!(
        agents
            .iter()
            .all(|a| a["agent"].as_str().unwrap().starts_with("agent-"))
    );
}

/// The document carries the hub's extension of the report (`released` with
/// `not_before_seconds`) and of the claim (`released_seconds_ago`).
#[tokio::test]
async fn the_document_shows_the_release_of_a_command() {
    let api = api();
    let (status, document) = api.call(Method::GET, "/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let schemas = &document["components"]["schemas"];
    let statuses = schemas["ResultStatus"]["enum"].as_array().unwrap();
    assert!(statuses.contains(&json!("released")), "{statuses:?}");
    assert!(
        schemas["CommandResult"]["properties"]["not_before_seconds"].is_object(),
        "{}",
        schemas["CommandResult"]
    );
    assert!(
        schemas["ClaimedCommand"]["properties"]["released_seconds_ago"].is_object(),
        "{}",
        schemas["ClaimedCommand"]
    );
}

impl Api {
    /// A request with extra headers: the status, the headers and the body.
    async fn with_headers(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Value>,
    ) -> (StatusCode, axum::http::HeaderMap, Value) {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header("Authorization", format!("Bearer {}", self.client));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let body = match body {
            Some(body) => {
                request = request.header("Content-Type", "application/json");
                Body::from(serde_json::to_vec(&body).unwrap())
            }
            None => Body::empty(),
        };
        let response = self
            .router
            .clone()
            .oneshot(request.body(body).unwrap())
            .await
            .unwrap();
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (parts.status, parts.headers, value)
    }
}

fn one_comment(text: &str) -> Value {
    json!({"title": "план", "author": "ivanov", "commands": [
        {"type": "comment", "params": {"key": "AURORA-1", "body": text}}]})
}

/// A client that lost the answer and sends the same request again under its `Idempotency-Key`
/// gets what the first got (the same status and batch), and nothing is done twice; another
/// request under that key is 422 naming the header; a request refused before it ran frees its
/// key.
#[tokio::test]
async fn an_idempotency_key_makes_a_resent_request_do_nothing_twice() {
    let api = api();
    let key = [("Idempotency-Key", "\"3f1c7a52-batch\"")];
    let (status, _, first) = api
        .with_headers(Method::POST, "/batches", &key, Some(one_comment("раз")))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    // The key in its bare form is the same key.
    for header in ["\"3f1c7a52-batch\"", "3f1c7a52-batch"] {
        let (status, _, again) = api
            .with_headers(
                Method::POST,
                "/batches",
                &[("Idempotency-Key", header)],
                Some(one_comment("раз")),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
        assert_eq!(again, first, "the first answer, as it was");
    }
    let (_, listed) = api.client(Method::GET, "/batches", None).await;
    assert_eq!(listed.as_array().unwrap().len(), 1, "one batch: {listed}");

    let (status, _, other) = api
        .with_headers(Method::POST, "/batches", &key, Some(one_comment("два")))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(error_code(&other), ("invalid", Some("Idempotency-Key")));
    let (status, _, other) = api.with_headers(Method::POST, "/refresh", &key, None).await;
    assert_eq!(
        (status, error_code(&other)),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            ("invalid", Some("Idempotency-Key"))
        )
    );

    // A cancel sent again answers what the first did, though the batch has moved on since.
    let id = first["id"].as_i64().unwrap();
    let cancel = format!("/batches/{id}/cancel");
    let cancel_key = [("Idempotency-Key", "cancel-1")];
    let (status, _, cancelled) = api
        .with_headers(Method::POST, &cancel, &cancel_key, None)
        .await;
    assert_eq!(
        (status, &cancelled["status"]),
        (StatusCode::OK, &json!("cancelled"))
    );
    let (status, _, again) = api
        .with_headers(Method::POST, &cancel, &cancel_key, None)
        .await;
    assert_eq!((status, again), (StatusCode::OK, cancelled));

    // A project created once; its resend is not «проект с такой меткой уже есть».
    let project = json!({"label": "IDEM", "name": "Idempotent"});
    let project_key = [("Idempotency-Key", "project-1")];
    for _ in 0..2 {
        let (status, _, body) = api
            .with_headers(
                Method::POST,
                "/projects",
                &project_key,
                Some(project.clone()),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }

    // Refused before it ran (no Content-Type): the key is free for the request as it should be.
    let (status, _) = {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri("/batches")
            .header("Authorization", format!("Bearer {}", api.client))
            .header("Idempotency-Key", "late-type");
        request = request.header("X-Nothing", "1");
        send(
            &api,
            request
                .body(Body::from(serde_json::to_vec(&one_comment("три")).unwrap()))
                .unwrap(),
        )
        .await
    };
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (status, _, body) = api
        .with_headers(
            Method::POST,
            "/batches",
            &[("Idempotency-Key", "late-type")],
            Some(one_comment("три")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // A key that is no key.
    for bad in ["\"unterminated", "\"\""] {
        let (status, _, body) = api
            .with_headers(
                Method::POST,
                "/batches",
                &[("Idempotency-Key", bad)],
                Some(one_comment("четыре")),
            )
            .await;
        assert_eq!(
            (status, error_code(&body)),
            (
                StatusCode::BAD_REQUEST,
                ("malformed", Some("Idempotency-Key"))
            )
        );
    }
    let (_, listed) = api.client(Method::GET, "/batches", None).await;
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
}

/// While the first request under a key runs (its body still coming), the same key is 409; the
/// first then ends as it would have, and its answer is the key's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_still_running_under_its_key_makes_the_second_409() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let api = api();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let router = api.router.clone();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let body = serde_json::to_vec(&one_comment("медленно")).unwrap();
    // The first request has its key once its headers are read: ask until it shows, with a
    // request that is refused before it runs (no Content-Type) and so frees the key meanwhile.
    // Should the first come while such a request holds the key, it is the one refused (409,
    // answered at once): then again with another key.
    let mut second = (StatusCode::OK, Value::Null);
    let mut slow = None;
    let mut key = String::new();
    'attempts: for attempt in 0..50 {
        key = format!("slow-{attempt}");
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let head = format!(
            "POST /batches HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nIdempotency-Key: {key}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            api.client,
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(&body[..10]).await.unwrap();
        stream.flush().await.unwrap();
        for _ in 0..1000 {
            let request = Request::builder()
                .method(Method::POST)
                .uri("/batches")
                .header("Authorization", format!("Bearer {}", api.client))
                .header("Idempotency-Key", &key)
                .body(Body::from(body.clone()))
                .unwrap();
            second = send(&api, request).await;
            if second.0 != StatusCode::UNSUPPORTED_MEDIA_TYPE {
                slow = Some(stream);
                break 'attempts;
            }
            let mut peek = [0u8; 1];
            if stream.try_read(&mut peek).is_ok() {
                continue 'attempts;
            }
            tokio::task::yield_now().await;
        }
    }
    let mut slow = slow.expect("the slow request held its key");
    assert_eq!(second.0, StatusCode::CONFLICT, "{}", second.1);
    assert_eq!(error_code(&second.1), ("conflict", Some("Idempotency-Key")));
    slow.write_all(&body[10..]).await.unwrap();
    let mut answer = String::new();
    slow.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    let (status, _, again) = api
        .with_headers(
            Method::POST,
            "/batches",
            &[("Idempotency-Key", key.as_str())],
            Some(one_comment("медленно")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(
        answer.contains(&format!("\"id\":{}", again["id"])),
        "{answer}"
    );
    let (_, listed) = api.client(Method::GET, "/batches", None).await;
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
}

/// `GET /batches/{id}` carries an `ETag` (304 on `If-None-Match`); with `wait_seconds` it is
/// held until the batch changes (answered then with the new state) or the time passes (304).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_read_has_an_etag_and_waits_for_a_change() {
    let api = std::sync::Arc::new(api());
    let (_, created) = api
        .client(Method::POST, "/batches", Some(one_comment("ждём")))
        .await;
    let id = created["id"].as_i64().unwrap();
    let path = format!("/batches/{id}");
    let (status, headers, body) = api.with_headers(Method::GET, &path, &[], None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["id"], json!(id));
    let etag = headers["etag"].to_str().unwrap().to_string();
    assert!(etag.starts_with('"') && etag.len() == 34, "{etag}");
    assert_eq!(headers["cache-control"], "private, no-cache");
    let (status, headers, _) = api
        .with_headers(Method::GET, &path, &[("If-None-Match", &etag)], None)
        .await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert_eq!(headers["etag"].to_str().unwrap(), etag);

    // Nothing changes within a second: 304 after it.
    let started = std::time::Instant::now();
    let (status, _, _) = api
        .with_headers(
            Method::GET,
            &format!("{path}?wait_seconds=1"),
            &[("If-None-Match", &etag)],
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));

    // A change answers the waiting read with the batch as it is now.
    let waiting = {
        let api = api.clone();
        let (path, etag) = (path.clone(), etag.clone());
        tokio::spawn(async move {
            api.with_headers(
                Method::GET,
                &format!("{path}?wait_seconds=60"),
                &[("If-None-Match", &etag)],
                None,
            )
            .await
        })
    };
    let started = std::time::Instant::now();
    let (status, cancelled) = api
        .client(Method::POST, &format!("{path}/cancel"), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, headers, body) = waiting.await.unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "answered by the change, not by the wait's end or a recheck"
    );
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], json!("cancelled"));
    assert_eq!(body, cancelled);
    assert_ne!(headers["etag"].to_str().unwrap(), etag);

    for bad in ["0", "61"] {
        let (status, _, body) = api
            .with_headers(
                Method::GET,
                &format!("{path}?wait_seconds={bad}"),
                &[],
                None,
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {body}");
        assert_eq!(error_code(&body).1, Some("wait_seconds"), "{bad}: {body}");
    }
}

/// A query parameter the route does not know is refused, naming it (a misspelt filter used to
/// answer every batch).
#[tokio::test]
async fn an_unknown_query_parameter_is_422_naming_it() {
    let api = api();
    for (path, name) in [
        ("/batches?status=cancelled", "status"),
        ("/batches?limit=5&projct=AWPCA", "projct"),
        ("/projects/AWPCA/issues?since=2026-01-01T00:00:00Z", "since"),
        ("/batches/1?wait=5", "wait"),
    ] {
        let (status, body) = api.client(Method::GET, path, None).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {body}");
        assert_eq!(error_code(&body), ("invalid", Some(name)), "{path}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("неизвестный параметр запроса"),
            "{message}"
        );
    }
    let (status, _) = api.client(Method::GET, "/batches?limit=5", None).await;
    assert_eq!(status, StatusCode::OK);
}

/// What generated clients need of the document and the server: query parameters `in: query`
/// (utoipa took the handlers' `ApiQuery` for path parameters), a plain retry sendable with no
/// body, the `Idempotency-Key` header declared, a `servers` entry; and a body that is a JSON
/// array refused rather than read into fields by position.
#[tokio::test]
async fn generated_clients_get_query_parameters_optional_bodies_and_objects_only() {
    let api = api();
    let (_, document) = api.call(Method::GET, "/openapi.json", None, None).await;
    for (path, names) in [
        ("/batches", vec!["project", "before", "limit"]),
        ("/projects/{label}/issues", vec!["updated_since"]),
        ("/batches/{id}", vec!["wait_seconds"]),
    ] {
        let parameters = document["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap();
        for name in names {
            let parameter = parameters
                .iter()
                .find(|p| p["name"] == json!(name))
                .unwrap_or_else(|| panic!("{path}: no {name}"));
            assert_eq!(parameter["in"], json!("query"), "{path} {name}");
            assert_ne!(parameter["required"], json!(true), "{path} {name}");
        }
    }
    let limit = &document["paths"]["/batches"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == json!("limit"))
        .unwrap()["schema"];
    assert_eq!(
        (&limit["minimum"], &limit["maximum"]),
        (&json!(1), &json!(500))
    );
    let retry = &document["paths"]["/commands/{id}/retry"]["post"]["requestBody"];
    assert_eq!(retry["required"], json!(false), "{retry}");
    assert_eq!(
        retry["content"]["application/json"]["schema"]["$ref"],
        json!("#/components/schemas/RetryBody")
    );
    for path in ["/batches", "/refresh", "/projects", "/batches/{id}/cancel"] {
        let post = &document["paths"][path]["post"];
        assert!(
            post["parameters"].as_array().is_some_and(|p| p
                .iter()
                .any(|p| p["name"] == json!("Idempotency-Key") && p["in"] == json!("header"))),
            "{path}: {post}"
        );
    }
    assert!(
        document["paths"]["/agent/claim"]["post"]["parameters"]
            .as_array()
            .is_none_or(|p| !p.iter().any(|p| p["name"] == json!("Idempotency-Key")))
    );
    assert_eq!(document["servers"][0]["url"], json!("/"));

    let (status, body) = api
        .raw(
            Method::POST,
            "/projects",
            Some(&api.client.clone()),
            Some("application/json"),
            br#"["ARRAY", "filled by position"]"#.to_vec(),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ожидается объект")
    );
    let (_, projects) = api.client(Method::GET, "/projects", None).await;
    assert!(!projects.to_string().contains("ARRAY"), "{projects}");
}
