//! Requests Atlassian's description allows: every request the agent makes in
//! Cloud mode against the simulated Jira — a batch with every command type, a full and an
//! incremental refresh, `agent --check` — is checked against Atlassian's published OpenAPI
//! documents of Jira Cloud (`tests/fixtures/jira-cloud-openapi/`, trimmed from the originals by
//! `scripts/trim-jira-openapi.py`; Apache 2.0, source in that folder's README): the operation
//! exists (path template and method) and is not deprecated, every query parameter is declared
//! and its value fits the parameter's schema (type, minimum, maximum, enum), required ones are
//! there, and a JSON body validates against the operation's request schema.
//!
//! REST v2 has the operations of v3 with plain-text bodies where v3 has ADF (the platform
//! document's note, and `Comment.body` carries no type there), so `/rest/api/2/…` and
//! `/rest/api/latest/…` are checked as `/rest/api/3/…`; `/rest/agile/1.0/…` against the
//! software document.

use crate::agent_e2e::{Stack, Transport};
use jira_hub::sim::jira::{Endpoint, Fault, Mode, PROJECT, Seen};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// The two documents, as trimmed into the repository.
pub(crate) struct Description {
    platform: Value,
    software: Value,
}

/// One operation of a document that a request matched.
struct Operation<'a> {
    document: &'a Value,
    template: String,
    method: String,
    body: &'a Value,
    /// The path item's parameters and the operation's, the operation's last (they win).
    parameters: Vec<&'a Value>,
}

impl Description {
    pub(crate) fn load() -> Description {
        let folder = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/jira-cloud-openapi"
        );
        let read = |name: &str| -> Value {
            let path = format!("{folder}/{name}");
            serde_json::from_slice(&std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
                .unwrap_or_else(|e| panic!("{path}: {e}"))
        };
        Description {
            platform: read("platform.trimmed.json"),
            software: read("software.trimmed.json"),
        }
    }

    /// The operation of a request (`"GET /rest/api/3/issue/{issueIdOrKey}"`), or what is wrong.
    pub(crate) fn check(&self, seen: &Seen) -> Result<String, String> {
        let operation = self.operation(&seen.method, &seen.path)?;
        let name = format!("{} {}", operation.method, operation.template);
        if operation.body["deprecated"] == json!(true) {
            return Err(format!("{name} is deprecated in Atlassian's description"));
        }
        check_query(&operation, &seen.query).map_err(|e| format!("{name}: {e}"))?;
        check_body(&operation, &seen.body).map_err(|e| format!("{name}: {e}"))?;
        Ok(name)
    }

    fn operation(&self, method: &str, path: &str) -> Result<Operation<'_>, String> {
        let (document, described) = if let Some(rest) = path
            .strip_prefix("/rest/api/2/")
            .or_else(|| path.strip_prefix("/rest/api/latest/"))
        {
            (&self.platform, format!("/rest/api/3/{rest}"))
        } else if path.starts_with("/rest/agile/1.0/") {
            (&self.software, path.to_string())
        } else {
            return Err(format!("{path}: not a path of Jira Cloud's REST APIs"));
        };
        let wanted: Vec<&str> = described.trim_matches('/').split('/').collect();
        let method = method.to_ascii_lowercase();
        // The template with the most literal segments wins (`/priority/search` over
        // `/priority/{id}`).
        let mut best: Option<(usize, &String, &Value)> = None;
        for (template, item) in document["paths"].as_object().into_iter().flatten() {
            let segments: Vec<&str> = template.trim_matches('/').split('/').collect();
            if segments.len() != wanted.len() {
                continue;
            }
            let mut literal = 0;
            let fits = segments.iter().zip(&wanted).all(|(t, w)| {
                if t.starts_with('{') && t.ends_with('}') {
                    !w.is_empty()
                } else {
                    literal += 1;
                    t == w
                }
            });
            if fits && item.get(&method).is_some() && best.is_none_or(|(l, ..)| literal > l) {
                best = Some((literal, template, item));
            }
        }
        let (_, template, item) = best.ok_or_else(|| {
            format!(
                "{} {described}: no such operation in Atlassian's description",
                method.to_uppercase()
            )
        })?;
        let body = &item[&method];
        let mut parameters: Vec<&Value> = Vec::new();
        for list in [&item["parameters"], &body["parameters"]] {
            for parameter in list.as_array().into_iter().flatten() {
                parameters.push(resolve(document, parameter));
            }
        }
        Ok(Operation {
            document,
            template: template.clone(),
            method: method.to_uppercase(),
            body,
            parameters,
        })
    }
}

/// A `$ref` to the document's components, followed; anything else as it is.
fn resolve<'a>(document: &'a Value, value: &'a Value) -> &'a Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(reference) => document
            .pointer(reference.trim_start_matches('#'))
            .unwrap_or(value),
        None => value,
    }
}

fn check_query(operation: &Operation<'_>, query: &str) -> Result<(), String> {
    let declared = |name: &str| {
        operation
            .parameters
            .iter()
            .rev()
            .find(|p| p["in"] == "query" && p["name"] == name)
    };
    let mut given = BTreeSet::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (name, value) = (decode(name), decode(value));
        let parameter =
            declared(&name).ok_or_else(|| format!("query parameter {name:?} is not declared"))?;
        let schema = resolve(operation.document, &parameter["schema"]);
        // An array is comma-separated where its description says so (Jira's `fields`,
        // `properties`: «a comma-separated list»); otherwise OpenAPI's default for the query
        // (`style: form`, `explode: true`): one item per `name=value`, e.g. `reconcileIssues`.
        let comma_separated = parameter["description"]
            .as_str()
            .is_some_and(|d| d.to_ascii_lowercase().contains("comma"));
        let schema = match schema["type"].as_str() {
            Some("array") if !comma_separated => resolve(operation.document, &schema["items"]),
            _ => schema,
        };
        check_value(operation.document, schema, &value)
            .map_err(|e| format!("query parameter {name}={value:?}: {e}"))?;
        given.insert(name);
    }
    for parameter in &operation.parameters {
        if parameter["in"] == "query"
            && parameter["required"] == json!(true)
            && let Some(name) = parameter["name"].as_str()
            && !given.contains(name)
        {
            return Err(format!("required query parameter {name} is missing"));
        }
    }
    Ok(())
}

/// A query value against its parameter's schema: integers within `minimum`/`maximum`, booleans,
/// `enum`; a comma-separated array, each item against `items` (an exploded one is checked item by
/// item by the caller). A schema of
/// `type: object` is taken as is (the agile document declares `state` of `getAllSprints` so:
/// its description lists the values, see the folder's README).
fn check_value(document: &Value, schema: &Value, value: &str) -> Result<(), String> {
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.iter().any(|a| a.as_str() == Some(value))
    {
        return Err(format!("not one of {allowed:?}"));
    }
    match schema["type"].as_str() {
        Some("integer") => {
            let number: i64 = value.parse().map_err(|_| "not an integer".to_string())?;
            if let Some(min) = schema["minimum"].as_i64()
                && number < min
            {
                return Err(format!("below the minimum {min}"));
            }
            if let Some(max) = schema["maximum"].as_i64()
                && number > max
            {
                return Err(format!("above the maximum {max}"));
            }
            Ok(())
        }
        Some("number") => value
            .parse::<f64>()
            .map(drop)
            .map_err(|_| "not a number".to_string()),
        Some("boolean") => match value {
            "true" | "false" => Ok(()),
            _ => Err("not a boolean".into()),
        },
        Some("array") => {
            let items = resolve(document, &schema["items"]);
            value
                .split(',')
                .try_for_each(|item| check_value(document, items, item))
        }
        _ => Ok(()),
    }
}

fn check_body(operation: &Operation<'_>, body: &[u8]) -> Result<(), String> {
    let content = &operation.body["requestBody"]["content"];
    if body.is_empty() {
        if operation.body["requestBody"]["required"] == json!(true) {
            return Err("the request body is required".into());
        }
        return Ok(());
    }
    let Some(schema) = content.get("application/json").map(|c| &c["schema"]) else {
        return Err("a body where the operation takes no JSON body".into());
    };
    let instance: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    // The schema with the document's components beside it, so that its `$ref`s resolve.
    let mut root = json!({"components": operation.document["components"]});
    for (key, value) in schema.as_object().into_iter().flatten() {
        root[key] = value.clone();
    }
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .build(&root)
        .map_err(|e| format!("the description's schema does not compile: {e}"))?;
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("the body does not fit: {}", errors.join("; ")))
    }
}

/// Percent-decoding of a query's name or value (`+` stays: the agent encodes blanks as `%20`).
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `jira-hub agent --check` with the stack's config; its exit code (0: all passed, 1: some
/// check failed; anything else is a failure of the run).
pub(crate) fn run_check(stack: &Stack) -> i32 {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jira-hub"))
        .args(["agent", "--check", "--config"])
        .arg(&stack.config)
        .current_dir(stack.dir.path())
        .env_remove("JIRA_HUB_DB")
        .output()
        .expect("run the agent");
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "agent --check: {code}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    code
}

/// A project with a scrum board and an active sprint, and a batch with every command type on
/// it: two creates (an epic, a task in it and in the sprint), an edit, a transition, a link, a
/// comment.
pub(crate) fn every_command(stack: &Stack) -> Value {
    let (status, settings) = stack.client(
        "PUT",
        "/settings",
        Some(json!({"priority_map": {"high": "Высокий"}})),
    );
    assert_eq!(status, 200, "{settings}");
    stack.fake.add_board(7, "Доска спринтов", "scrum");
    stack.fake.add_sprint(7, 70, "Спринт 1", "active");
    let (status, project) = stack.client(
        "POST",
        "/projects",
        Some(json!({"label": "SPR", "name": "Спринты", "board_id": 7})),
    );
    assert_eq!(status, 201, "{project}");
    json!({"title": "все команды", "author": "ivanov", "project": "SPR", "commands": [
        {"type": "ensure_issue", "params": {"issue_type": "epic", "summary": "Эпик"}},
        {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Задача",
            "description": "сделать", "priority": "high", "duedate": "2026-12-31",
            "epic_key": {"$result": "key"}, "sprint": "Спринт 1"}, "depends_on": 1},
        {"type": "ensure_issue", "params": {"key": {"$result": "key"}, "issue_type": "task", "summary": "Задача, уточнённая",
            "labels": ["ещё"]}, "depends_on": 2},
        {"type": "transition", "params": {"key": {"$result": "key"}, "status": "В работе"}, "depends_on": 2},
        {"type": "link", "params": {"from": {"$result": "key"}, "to": format!("{PROJECT}-1"), "type": "blocks"}, "depends_on": 2},
        {"type": "comment", "params": {"key": {"$result": "key"}, "body": "Готово к проверке."}, "depends_on": 2},
    ]})
}

/// The requests of `--check`, a batch of every command type, a full
/// and an incremental refresh, each in Atlassian's description of Jira Cloud.
#[test]
fn every_cloud_request_of_the_agent_is_in_atlassians_description() {
    let description = Description::load();
    let mut stack = Stack::start(Mode::Cloud, Transport::Http);
    stack.fake.seed_issues(PROJECT, "SPR", 3);
    let batch = every_command(&stack);
    // The comment's answer is lost after Jira applied it: the look reads the comments newest
    // first and their markers through `POST /comment/list`.
    stack
        .fake
        .fault(Endpoint::AddComment, Fault::DropAfterApply, 1);
    run_check(&stack);
    stack.spawn_agent();
    crate::calls::run_batch(&stack, batch);
    let full = stack.refresh();
    stack.wait_completed(full);
    let (status, incremental) = stack.client("POST", "/refresh", Some(json!({"since": "last"})));
    assert_eq!(status, 201, "{incremental}");
    stack.wait_completed(incremental["id"].as_i64().unwrap());
    stack.kill_agent();

    let requests = stack.fake.requests();
    let mut operations = BTreeSet::new();
    let mut failures = Vec::new();
    for seen in &requests {
        match description.check(seen) {
            Ok(operation) => {
                operations.insert(operation);
            }
            Err(error) => failures.push(format!(
                "{} {}?{}: {error}",
                seen.method, seen.path, seen.query
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} requests are not what Atlassian's description allows:\n{}",
        failures.len(),
        requests.len(),
        failures.join("\n")
    );
    eprintln!(
        "{} requests, {} operations, each in Atlassian's description: {operations:#?}",
        requests.len(),
        operations.len()
    );
    for wanted in [
        "POST /rest/api/3/issue",
        "PUT /rest/api/3/issue/{issueIdOrKey}",
        "POST /rest/api/3/issue/{issueIdOrKey}/transitions",
        "POST /rest/api/3/issueLink",
        "POST /rest/api/3/issue/{issueIdOrKey}/comment",
        "GET /rest/api/3/issue/{issueIdOrKey}/comment",
        "POST /rest/api/3/comment/list",
        "GET /rest/api/3/search/jql",
        "POST /rest/agile/1.0/sprint/{sprintId}/issue",
        "GET /rest/api/3/issue/createmeta/{projectIdOrKey}/issuetypes/{issueTypeId}",
    ] {
        assert!(
            operations.contains(wanted),
            "{wanted} was not exercised: {operations:#?}"
        );
    }
}

/// The checker itself refuses what the description does not allow: an unknown operation, an
/// undeclared parameter, a value over its maximum, a deprecated operation, a body of the wrong
/// shape.
#[test]
fn the_description_refuses_what_it_does_not_allow() {
    let description = Description::load();
    let seen = |method: &str, path: &str, query: &str, body: &str| Seen {
        at: std::time::SystemTime::now(),
        method: method.into(),
        path: path.into(),
        query: query.into(),
        endpoint: jira_hub::sim::jira::Endpoint::Other,
        status: 200,
        body: body.as_bytes().to_vec(),
    };
    let ok = |s: Seen| description.check(&s).unwrap();
    let refused = |s: Seen, words: &str| {
        let error = description.check(&s).unwrap_err();
        assert!(error.contains(words), "{error}");
    };
    assert_eq!(
        ok(seen(
            "GET",
            "/rest/api/2/issue/A-1",
            "fields=status&expand=transitions",
            ""
        )),
        "GET /rest/api/3/issue/{issueIdOrKey}"
    );
    ok(seen(
        "GET",
        "/rest/api/2/search/jql",
        "jql=project%20%3D%20A&maxResults=100&fields=%2Aall&reconcileIssues=10001&reconcileIssues=10002",
        "",
    ));
    ok(seen(
        "POST",
        "/rest/api/2/issueLink",
        "",
        r#"{"type":{"name":"Blocks"},"inwardIssue":{"key":"A-1"},"outwardIssue":{"key":"A-2"}}"#,
    ));
    refused(
        seen("GET", "/rest/api/2/nothing", "", ""),
        "no such operation",
    );
    refused(
        seen("DELETE", "/rest/api/2/issue/A-1", "", ""),
        "no such operation",
    );
    refused(
        seen("GET", "/rest/api/2/issue/A-1", "color=red", ""),
        "\"color\" is not declared",
    );
    refused(
        seen(
            "GET",
            "/rest/api/2/issue/createmeta/A/issuetypes/10002",
            "maxResults=500",
            "",
        ),
        "above the maximum 200",
    );
    refused(
        seen("GET", "/rest/api/2/search/jql", "reconcileIssues=x", ""),
        "not an integer",
    );
    // Declared an `int64` array without a style: exploded, never comma-joined.
    refused(
        seen(
            "GET",
            "/rest/api/2/search/jql",
            "reconcileIssues=10001%2C10002",
            "",
        ),
        "not an integer",
    );
    refused(seen("GET", "/rest/api/2/priority", "", ""), "deprecated");
    refused(
        seen("POST", "/rest/api/2/issueLink", "", r#"{"type": "Blocks"}"#),
        "does not fit",
    );
}
