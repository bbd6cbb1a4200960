//! What the hub answers is what its served document says: real answers of a live hub (the
//! daemon, the real agent, the simulated Jira) to every client `GET` and the `POST`s that answer
//! a command, with commands of every type done, failed, skipped, stopped by a conflict, left as in
//! Jira and overwritten, each validated against the schema the document declares for that
//! operation and status. The document is made strict for the check: an object's members are
//! only those it declares (`unevaluatedProperties: false`), and every string declared
//! `format: date-time` must be UTC (`Z`) and parse as RFC 3339.

use crate::agent_e2e::{Stack, Transport};
use crate::http::api;
use axum::http::{Method, StatusCode};
use jira_hub::sim::jira::{Mode, PROJECT};
use serde_json::{Map, Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};

/// How many strings declared `date-time` were checked (the format check counts them).
static TIMES_CHECKED: AtomicUsize = AtomicUsize::new(0);

/// `YYYY-MM-DDTHH:MM:SS(.f…)Z`: UTC, and RFC 3339.
fn utc_time(text: &str) -> bool {
    TIMES_CHECKED.fetch_add(1, Ordering::Relaxed);
    text.ends_with('Z')
        && time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).is_ok()
}

/// The document's schemas, strict: every object schema that lists its members and says nothing
/// of others takes no others. Parts of an `allOf` are left open (the whole is closed instead:
/// `unevaluatedProperties` sees the members its parts declare).
struct Strict {
    components: Value,
}

impl Strict {
    fn of(document: &Value) -> Strict {
        let mut components = document["components"].clone();
        // The components an `allOf` is made of stay open.
        let mut parts = Vec::new();
        collect_all_of_parts(&components, &mut parts);
        if let Some(schemas) = components.get_mut("schemas").and_then(Value::as_object_mut) {
            for (name, schema) in schemas.iter_mut() {
                let open = parts.contains(&format!("#/components/schemas/{name}"));
                close(schema, open);
            }
        }
        Strict { components }
    }

    /// What is wrong with `answer` against `schema` (empty: it fits).
    fn check(&self, schema: &Value, answer: &Value) -> Vec<String> {
        let mut root = json!({"components": self.components});
        for (key, value) in schema.as_object().into_iter().flatten() {
            root[key] = value.clone();
        }
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .with_format("date-time", utc_time)
            .build(&root)
            .unwrap_or_else(|e| panic!("the document's schema does not compile: {e}"));
        validator
            .iter_errors(answer)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect()
    }
}

fn collect_all_of_parts(value: &Value, parts: &mut Vec<String>) {
    match value {
        Value::Object(object) => {
            for part in object
                .get("allOf")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(reference) = part["$ref"].as_str() {
                    parts.push(reference.to_string());
                }
            }
            object.values().for_each(|v| collect_all_of_parts(v, parts));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_all_of_parts(v, parts)),
        _ => {}
    }
}

/// Closes `schema` and the object schemas inside it (`open`: this one is a part of an `allOf`).
fn close(schema: &mut Value, open: bool) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let lists_members = object.contains_key("properties") || object.contains_key("allOf");
    if !open
        && lists_members
        && !object.contains_key("additionalProperties")
        && !object.contains_key("unevaluatedProperties")
    {
        object.insert("unevaluatedProperties".into(), json!(false));
    }
    for (key, value) in object.iter_mut() {
        match (key.as_str(), value) {
            ("properties", Value::Object(members)) => {
                members.values_mut().for_each(|m| close(m, false));
            }
            ("allOf", Value::Array(parts)) => parts.iter_mut().for_each(|p| close(p, true)),
            ("oneOf" | "anyOf", Value::Array(choices)) => {
                choices.iter_mut().for_each(|c| close(c, false));
            }
            ("items" | "additionalProperties", item @ Value::Object(_)) => close(item, false),
            _ => {}
        }
    }
}

/// The schema the document declares for `method path` answering `status` (its JSON content).
fn declared<'a>(document: &'a Value, method: &str, template: &str, status: u16) -> &'a Value {
    let schema = &document["paths"][template][method.to_ascii_lowercase()]["responses"]
        [status.to_string()]["content"]["application/json"]["schema"];
    assert!(
        schema.is_object(),
        "{method} {template} answered {status}, which the document does not declare"
    );
    schema
}

/// Every answer the walk collected, checked: each failure names the request.
struct Answers<'s> {
    stack: &'s Stack,
    document: Value,
    strict: Strict,
    failures: Vec<String>,
    checked: usize,
}

impl Answers<'_> {
    /// Sends the request, checks its answer, and gives it back.
    fn ask(&mut self, method: &str, template: &str, path: &str, body: Option<Value>) -> Value {
        let (status, answer) = self.stack.client(method, path, body);
        assert!(status < 300, "{method} {path}: {status} {answer}");
        let schema = declared(&self.document, method, template, status).clone();
        for error in self.strict.check(&schema, &answer) {
            self.failures.push(format!("{method} {path}: {error}"));
        }
        self.checked += 1;
        answer
    }
}

fn command_of(batch: &Value, seq: i64) -> &Value {
    batch["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["seq"] == json!(seq))
        .unwrap_or_else(|| panic!("no command {seq}: {batch:#}"))
}

/// Every command type done; a comment that fails and the transition skipped after it; an
/// edit stopped by a conflict with a change made in Jira (the mirror's base) and overwritten,
/// another (the client's base) left as in Jira; a full refresh that brings the comments; each
/// answer validated against the document, its times UTC.
#[test]
fn every_answer_of_a_live_hub_fits_the_served_document() {
    let mut stack = Stack::start(Mode::Cloud, Transport::Http);
    let keys = stack.fake.seed_issues(PROJECT, "SPR", 3);
    let batch = crate::openapi::every_command(&stack);
    stack.spawn_agent();
    let full = stack.refresh();
    stack.wait_completed(full);
    let done = stack.enqueue(batch);
    stack.wait_completed(done);
    let failing = stack.enqueue(json!({"title": "не выйдет", "author": "ivanov", "commands": [
        {"type": "comment", "params": {"key": format!("{PROJECT}-999999"), "body": "нет такой"}},
        {"type": "transition", "params": {"key": format!("{PROJECT}-999999"), "status": "В работе"}, "depends_on": 1}]}));
    stack.wait_completed(failing);
    // A person changes the summary in Jira after the refresh: the mirror's base is stale.
    stack
        .fake
        .change_issue(&keys[0], json!({"summary": "Их заголовок"}), "petrov");
    let conflicts = stack.enqueue(json!({"title": "конфликты", "author": "ivanov", "commands": [
        {"type": "ensure_issue", "params": {"issue_type": "task", "key": keys[0], "summary": "Наш заголовок", "priority": "high"}},
        {"type": "ensure_issue", "params": {"issue_type": "task", "key": keys[1], "summary": "Наш другой",
            "base": {"summary": "Заголовок, который клиент видел"}}}]}));
    stack.wait_completed(conflicts);

    let (status, document) = stack.client("GET", "/openapi.json", None);
    assert_eq!(status, 200);
    let mapping = &document["components"]["schemas"]["CommandView"]["discriminator"]["mapping"];
    assert_eq!(
        mapping.as_object().map(Map::len),
        Some(5),
        "CommandView is discriminated by type: {mapping}"
    );
    let mut answers = Answers {
        stack: &stack,
        strict: Strict::of(&document),
        document,
        failures: Vec::new(),
        checked: 0,
    };

    let view = answers.ask(
        "GET",
        "/batches/{id}",
        &format!("/batches/{conflicts}"),
        None,
    );
    let (overwritten, kept) = (command_of(&view, 1).clone(), command_of(&view, 2).clone());
    for command in [&overwritten, &kept] {
        assert_eq!(command["status"], "failed", "{command:#}");
        assert!(command["result"]["conflict"].is_object(), "{command:#}");
    }
    let field = &overwritten["result"]["conflict"]["fields"][0];
    assert_eq!(
        (&field["field"], &field["changed_by"]),
        (&json!("summary"), &json!("petrov")),
        "{field}"
    );
    for time in [
        &field["changed_at"],
        &overwritten["result"]["conflict"]["updated"],
    ] {
        assert!(
            time.as_str().is_some_and(|t| t.ends_with('Z')),
            "Jira's time in UTC: {time}"
        );
    }
    assert_eq!(overwritten["params"]["base"]["from"], "mirror");
    answers.ask(
        "POST",
        "/commands/{id}/keep-jira",
        &format!("/commands/{}/keep-jira", kept["id"]),
        None,
    );
    answers.ask(
        "POST",
        "/commands/{id}/retry",
        &format!("/commands/{}/retry", overwritten["id"]),
        Some(json!({"overwrite": true})),
    );
    let failed = answers.ask("GET", "/batches/{id}", &format!("/batches/{failing}"), None);
    assert_eq!(
        (
            &command_of(&failed, 1)["status"],
            &command_of(&failed, 2)["status"]
        ),
        (&json!("failed"), &json!("skipped"))
    );
    answers.ask(
        "POST",
        "/commands/{id}/retry",
        &format!("/commands/{}/retry", command_of(&failed, 1)["id"]),
        None,
    );
    stack.wait_completed(conflicts);
    stack.wait_completed(failing);
    let second = stack.refresh();
    stack.wait_completed(second);

    let view = answers.ask(
        "GET",
        "/batches/{id}",
        &format!("/batches/{conflicts}"),
        None,
    );
    let overwritten = command_of(&view, 1);
    assert_eq!(overwritten["status"], "done", "{overwritten:#}");
    assert_eq!(overwritten["params"]["overwrite"], json!(["summary"]));
    assert!(overwritten["attempts"][0]["result"]["conflict"].is_object());
    assert_eq!(command_of(&view, 2)["status"], "cancelled");
    let every = answers.ask("GET", "/batches/{id}", &format!("/batches/{done}"), None);
    let mut types: Vec<&str> = every["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    types.sort_unstable();
    types.dedup();
    assert_eq!(
        types,
        ["comment", "ensure_issue", "link", "transition"],
        "{every:#}"
    );
    let task = command_of(&every, 2)["result"]["key"]
        .as_str()
        .unwrap()
        .to_string();
    for id in [full, second, failing] {
        answers.ask("GET", "/batches/{id}", &format!("/batches/{id}"), None);
    }
    for seq in 1..=6 {
        let id = &command_of(&every, seq)["id"];
        answers.ask("GET", "/commands/{id}", &format!("/commands/{id}"), None);
    }
    answers.ask(
        "POST",
        "/issues/{key}/notes",
        &format!("/issues/{task}/notes"),
        Some(json!({"author": "ivanov", "body": "Заметка"})),
    );
    let issue = answers.ask("GET", "/issues/{key}", &format!("/issues/{task}"), None);
    let comment = &issue["comments"][0];
    for time in [&comment["created"], &comment["updated"]] {
        assert!(
            time.as_str().is_some_and(|t| t.ends_with('Z')),
            "a comment's time in UTC: {comment}"
        );
    }
    for (template, path) in [
        ("/batches", "/batches"),
        ("/batches", "/batches?limit=2"),
        ("/commands/failed", "/commands/failed"),
        ("/projects", "/projects"),
        ("/projects/{label}/issues", "/projects/SPR/issues"),
        ("/sync-runs", "/sync-runs"),
        ("/agents", "/agents"),
        ("/settings", "/settings"),
        ("/health", "/health"),
    ] {
        answers.ask("GET", template, path, None);
    }
    assert!(
        answers.failures.is_empty(),
        "{} answers do not fit the served document:\n{}",
        answers.failures.len(),
        answers.failures.join("\n")
    );
    // The check itself refuses what the document does not say: a member it does not declare,
    // a time with Jira's offset, an edit's params under another type.
    let comment = json!({"$ref": "#/components/schemas/CommentView"});
    for wrong in [
        json!({"id": "1", "body": "x", "created": "2026-03-05T10:15:30.000+0300"}),
        json!({"id": "1", "body": "x", "extra": 1}),
    ] {
        assert!(
            !answers.strict.check(&comment, &wrong).is_empty(),
            "{wrong}"
        );
    }
    let command = json!({"$ref": "#/components/schemas/CommandView"});
    let mut edit = overwritten.clone();
    assert!(answers.strict.check(&command, &edit).is_empty());
    edit["type"] = json!("comment");
    assert!(!answers.strict.check(&command, &edit).is_empty());
    let times = TIMES_CHECKED.load(Ordering::Relaxed);
    assert!(
        answers.checked > 25 && times > 100,
        "{} answers, {times} times checked",
        answers.checked
    );
}

/// A query parameter sent where the operation takes none is refused naming it, as on the routes
/// that take some: after the token's check where one is needed, at once where none is.
#[tokio::test]
async fn a_query_parameter_where_none_is_taken_is_422_naming_it() {
    let api = api();
    for (method, path, name) in [
        (Method::GET, "/settings?status=x", "status"),
        (Method::GET, "/commands/failed?batch=3", "batch"),
        (Method::GET, "/commands/1?verbose", "verbose"),
        (Method::GET, "/agents?%D0%B8%D0%BC%D1%8F=1", "имя"),
        (Method::POST, "/refresh?project=AWPCA", "project"),
    ] {
        let (status, body) = api.client(method.clone(), path, None).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {body}");
        assert_eq!(
            (&body["error"]["code"], &body["error"]["field"]),
            (&json!("invalid"), &json!(name)),
            "{path}: {body}"
        );
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("параметров запроса не принимает"),
            "{body}"
        );
        // Without a token: the token's refusal first.
        let (status, _) = api.call(method, path, None, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
    }
    let (status, body) = api.call(Method::GET, "/health?x=1", None, None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["field"], "x");
    // An empty query is no parameter; the routes with a query keep their own check.
    let (status, _) = api.client(Method::GET, "/settings?", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = api.client(Method::GET, "/batches?status=x", None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("допустимы"),
        "{body}"
    );
}

/// The document's tags describe what each holds, each operation in one of them; `/metrics`
/// declares its optional bearer: a scheme of its own, or none.
#[tokio::test]
async fn tags_are_described_and_the_metrics_bearer_is_optional() {
    let api = api();
    let (_, document) = api.call(Method::GET, "/openapi.json", None, None).await;
    let tags: Vec<&str> = document["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert!(
                t["description"].as_str().is_some_and(|d| d.len() > 20),
                "{t}"
            );
            t["name"].as_str().unwrap()
        })
        .collect();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let own = operation["tags"].as_array().unwrap();
            assert_eq!(own.len(), 1, "{method} {path}: {own:?}");
            assert!(
                tags.contains(&own[0].as_str().unwrap()),
                "{method} {path}: {own:?} not among {tags:?}"
            );
        }
    }
    let metrics = &document["paths"]["/metrics"]["get"];
    assert_eq!(metrics["security"], json!([{"metrics_token": []}, {}]));
    assert_eq!(
        document["components"]["securitySchemes"]["metrics_token"]["scheme"],
        "bearer"
    );
}
