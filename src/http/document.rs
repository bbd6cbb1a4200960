//! The finishing pass over the generated OpenAPI document: what the derives cannot say.
//!
//! The agent's request bodies are written here as HTTP carries them (`kind` a required constant,
//! no `token`: the relay's wire types carry it, HTTP has it in a header). Settings, command
//! params (one schema per command type) and the error answers every operation can give are
//! declared once, here, by rule: the time limit (408) applies to every route, a token to the
//! routes that name one (401, 403, 503 when the database stays busy), a body or a parameter can
//! be malformed (400), a body too large (413) or of the wrong shape (422). Every `*_at` member is
//! a time the hub wrote in RFC 3339, so it gets `format: date-time`. The command views are
//! discriminated by `type` as the requests are, each with its type's params as stored and its
//! type's result; the tags are described, `/metrics` declares its optional bearer.

use serde_json::{Map, Value, json};

/// The document as `GET /openapi.json` serves it.
pub(crate) fn finish(document: utoipa::openapi::OpenApi) -> Value {
    let mut document = serde_json::to_value(document).unwrap_or_else(|error| {
        tracing::error!(%error, "the OpenAPI document cannot be serialized");
        json!({})
    });
    if let Some(schemas) = document
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        schemas.remove("Envelope");
        for (name, schema) in schemas_written_here() {
            schemas.insert(name.to_string(), schema);
        }
        if let Some(properties) = schemas
            .get_mut("ClaimedCommand")
            .and_then(|s| s.get_mut("properties"))
            .and_then(Value::as_object_mut)
        {
            properties.insert("type".into(), json!({"$ref": reference("CommandType")}));
            properties.insert("params".into(), params_of_any_type());
        }
        discriminate_command_views(schemas);
        for schema in schemas.values_mut() {
            mark_times(schema);
        }
    }
    if let Some(settings) = document.pointer_mut("/paths/~1settings") {
        set_json_schema(settings.pointer_mut("/get/responses/200"), "Settings");
        set_json_schema(settings.pointer_mut("/put/responses/200"), "Settings");
        set_json_schema(settings.pointer_mut("/put/requestBody"), "SettingsUpdate");
    }
    if let Some(body) = document.pointer_mut("/paths/~1refresh/post/requestBody") {
        // An empty body refreshes the base JQL.
        body["required"] = json!(false);
    }
    if let Some(body) = document.pointer_mut("/paths/~1commands~1{id}~1retry/post/requestBody") {
        // No body is a plain retry: the body is optional, not a `null` (which is refused).
        *body = json!({"required": false, "description": "optional: no body is a plain retry",
            "content": {"application/json": {"schema": {"$ref": reference("RetryBody")}}}});
    }
    // Relative to where the document was served from: the hub's own address.
    document["servers"] = json!([{"url": "/", "description": "this hub"}]);
    if let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) {
        for (path, item) in paths.iter_mut() {
            if let Some(post) = item.get_mut("post") {
                if path.starts_with("/agent/") {
                    declare_agent_header(post);
                } else if post.get("security").is_some() {
                    declare_idempotency_key(post);
                }
            }
            for operation in item
                .as_object_mut()
                .into_iter()
                .flat_map(|i| i.values_mut())
            {
                declare_errors(operation);
            }
        }
    }
    document["tags"] = json!(
        TAGS.iter()
            .map(|(name, description)| json!({"name": name, "description": description}))
            .collect::<Vec<_>>()
    );
    declare_metrics_bearer(&mut document);
    document
}

/// The tags of the operations (each operation has one), with what they hold.
const TAGS: [(&str, &str); 6] = [
    (
        "batches",
        "Batches of commands for Jira: submit, wait for, cancel and retry them; resolve an edit's conflict with Jira; refresh the mirror.",
    ),
    (
        "mirror",
        "The hub's copy of Jira: a project's issues (with `ETag`), one issue with its links, comments and notes, the refreshes that brought them.",
    ),
    (
        "projects",
        "The projects of the bridge: Jira labels inside the hub's Jira project.",
    ),
    ("settings", "The hub's settings, all or nothing, versioned."),
    (
        "agent",
        "The agent's side of the protocol (the agent token), and the agents as the hub last saw them.",
    ),
    (
        "operations",
        "For operators and their tools: liveness, readiness, Prometheus metrics.",
    ),
];

/// `/metrics` answers anyone unless the hub was started with `--metrics-token-file`: then only
/// a request with that bearer token. A scheme of its own, and the operation lists it or none.
fn declare_metrics_bearer(document: &mut Value) {
    if let Some(schemes) = document
        .pointer_mut("/components/securitySchemes")
        .and_then(Value::as_object_mut)
    {
        schemes.insert(
            "metrics_token".into(),
            json!({"type": "http", "scheme": "bearer",
                "description": "The token of `--metrics-token-file`, when the hub was started with one; otherwise `/metrics` takes no token."}),
        );
    }
    if let Some(metrics) = document.pointer_mut("/paths/~1metrics/get") {
        metrics["security"] = json!([{"metrics_token": []}, {}]);
    }
}

/// The `Idempotency-Key` header every client `POST` takes, and its two refusals.
fn declare_idempotency_key(operation: &mut Value) {
    let parameter = json!({
        "name": "Idempotency-Key",
        "in": "header",
        "required": false,
        "description": "draft-ietf-httpapi-idempotency-key-header: sent again with the same key, path and body, the request does nothing and is answered what the first was answered (kept as long as the batch it names). A Structured Field string (`\"…\"`) or the bare text, 1 to 255 visible ASCII characters; the client token's own.",
        "schema": {"type": "string", "minLength": 1, "maxLength": 257}
    });
    add_parameter(operation, parameter);
    let responses = &mut operation["responses"];
    if responses.get("409").is_none() {
        responses["409"] = error_response(
            "a request under the same `Idempotency-Key` is still running (field `Idempotency-Key`), or the operation's own conflict",
        );
    }
    if responses.get("422").is_none() {
        responses["422"] = error_response(
            "the `Idempotency-Key` was given to another request (another path or body)",
        );
    }
}

/// The header in which an agent names itself on every request: the hub reads it only when it
/// refuses the token, before the body (which names the agent too) is read.
fn declare_agent_header(operation: &mut Value) {
    add_parameter(
        operation,
        json!({
            "name": crate::protocol::AGENT_HEADER,
            "in": "header",
            "required": false,
            "description": "The agent's name (the body's `agent`), percent-encoded as UTF-8: every byte but RFC 3986's unreserved characters as `%XX` (`Агент` is `%D0%90%D0%B3%D0%B5%D0%BD%D1%82`). Read only when the hub refuses the token (401), before the body is read: `GET /agents` then shows that agent `hub_refused` until a request of it is taken. A value that is not such a name is ignored. Anyone can send any name: it marks only an agent the hub already knows, and only until that agent's next accepted request.",
            "schema": {"type": "string", "minLength": 1, "maxLength": 1200, "pattern": "^[!-~]+$"},
            "example": "agent-1"
        }),
    );
}

/// Adds a parameter to an operation's list.
fn add_parameter(operation: &mut Value, parameter: Value) {
    if let Some(parameters) = operation
        .get_mut("parameters")
        .and_then(Value::as_array_mut)
    {
        parameters.push(parameter);
    } else {
        operation["parameters"] = json!([parameter]);
    }
}

fn reference(name: &str) -> String {
    format!("#/components/schemas/{name}")
}

fn set_json_schema(target: Option<&mut Value>, name: &str) {
    if let Some(target) = target {
        target["content"] = json!({"application/json": {"schema": {"$ref": reference(name)}}});
    }
}

/// The error answers an operation can give, by rule (see the file's doc).
fn declare_errors(operation: &mut Value) {
    let Some(object) = operation.as_object() else {
        return;
    };
    let has_token = object
        .get("security")
        .and_then(Value::as_array)
        .is_some_and(|s| !s.is_empty());
    let has_body = object.contains_key("requestBody");
    let has_parameters = object
        .get("parameters")
        .and_then(Value::as_array)
        .is_some_and(|p| !p.is_empty());
    let mut errors = vec![(
        "408",
        "The request took longer than `--http-timeout-seconds` (code `timeout`).",
    )];
    if has_token {
        errors.extend([
            ("401", "No token, or an unknown one (code `unauthorized`)."),
            ("403", "The other side's token (code `forbidden`)."),
            (
                "503",
                "The database stayed locked (code `busy`), or cannot be written now or is no longer the file the hub opened (code `database_unavailable`); nothing was written, retry.",
            ),
            (
                "507",
                "No room on the database's disk (code `disk_full`); nothing was written, retry later.",
            ),
        ]);
    }
    if has_body || has_parameters {
        errors.push((
            "400",
            "Not JSON, or a bad path or query parameter (code `malformed`).",
        ));
    }
    if has_body {
        errors.extend([
            (
                "413",
                "The body is over `--http-max-body-mb` (code `too_large`).",
            ),
            (
                "422",
                "JSON of the wrong shape or a refused value, the field named (code `invalid`).",
            ),
        ]);
    }
    let responses = operation
        .as_object_mut()
        .map(|o| o.entry("responses").or_insert_with(|| json!({})));
    let Some(responses) = responses.and_then(Value::as_object_mut) else {
        return;
    };
    for (status, description) in errors {
        responses
            .entry(status)
            .or_insert_with(|| error_response(description));
    }
    // Derived entries without a description get the code's words.
    for (status, response) in responses.iter_mut() {
        let error = status.parse::<u16>().is_ok_and(|s| s >= 400);
        if error && response["description"].as_str().is_none_or(str::is_empty) {
            response["description"] = json!("An error in the error shape; the message is Russian.");
        }
    }
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": reference("ErrorBody")}}}
    })
}

/// Adds `format: date-time` to every string member named `*_at`, at any depth.
fn mark_times(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            if let Some(Value::Object(properties)) = object.get_mut("properties") {
                for (name, property) in properties.iter_mut() {
                    let is_string = match property.get("type") {
                        Some(Value::String(t)) => t == "string",
                        Some(Value::Array(types)) => types.contains(&json!("string")),
                        _ => false,
                    };
                    if name.ends_with("_at") && is_string {
                        property["format"] = json!("date-time");
                    }
                }
            }
            for value in object.values_mut() {
                mark_times(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mark_times),
        _ => {}
    }
}

/// The members every agent request carries over HTTP, with `kind` fixed to `kind`.
fn envelope(kind: &str, example_id: &str) -> Map<String, Value> {
    let mut properties = Map::new();
    properties.insert(
        "kind".into(),
        json!({"type": "string", "const": kind, "enum": [kind],
               "description": "The request's kind; it must match the endpoint."}),
    );
    properties.insert(
        "id".into(),
        json!({"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$", "example": example_id,
               "description": "The sender's unique id of this request; a request seen again gets the same answer."}),
    );
    properties.insert(
        "agent".into(),
        json!({"type": "string", "minLength": 1, "maxLength": 100, "example": "agent-1",
               "description": "The agent instance's name, as shown in `agent_status`."}),
    );
    properties.insert(
        "sent_at".into(),
        json!({"type": "string", "format": "date-time", "example": "2026-11-29T10:00:00Z",
               "description": "When the agent sent it (its own clock; only shown)."}),
    );
    properties
}

fn agent_request(
    kind: &str,
    example_id: &str,
    description: &str,
    more: Value,
    required: &[&str],
) -> Value {
    let mut properties = envelope(kind, example_id);
    if let Value::Object(more) = more {
        properties.extend(more);
    }
    let mut all = vec!["kind", "id", "agent", "sent_at"];
    all.extend_from_slice(required);
    json!({
        "type": "object",
        "description": description,
        "required": all,
        "properties": properties,
    })
}

/// An issue key, or `{"$result": "key"}` where the command depends on one that creates it.
fn key_or_result() -> Value {
    json!({"oneOf": [
        {"type": "string", "pattern": "^[A-Z][A-Z0-9_]*-[0-9]+$", "example": "AURORA-1"},
        {"$ref": reference("ResultRef")}
    ]})
}

const COMMAND_TYPES: [(&str, &str, &str); 5] = [
    ("refresh", "RefreshCommand", "RefreshParams"),
    ("ensure_issue", "EnsureIssueCommand", "EnsureIssueParams"),
    ("transition", "TransitionCommand", "TransitionParams"),
    ("link", "LinkCommand", "LinkParams"),
    ("comment", "CommentCommand", "CommentParams"),
];

/// An edit's own base: the values the client saw, checked against Jira before the write.
fn edit_base() -> Value {
    let value = json!({"type": ["string", "null"]});
    json!({"type": ["object", "null"], "additionalProperties": false,
        "description": "Only with `key` (an edit of an existing issue): the values of the fields this edit sets as the client saw them. Right before the write the agent reads those fields in Jira: a field Jira holds at the wanted value is not written, one Jira holds at its base value is written, and one changed in Jira since is a conflict: nothing of the edit is written and the command fails with `result.conflict` (per field `base`, `jira`, `wanted`, and `changed_by`, `changed_at` when Jira's changelog says). Without `base` the hub records the mirror's values at enqueue (`params.base.from`: `mirror`; `none` when the mirror does not hold the issue: then the edit is written unchecked). A field the client leaves out takes the mirror's value. Forms: text as is (a description is compared as Cloud gives it back), `priority` by its Jira name, `assignee` by account id (Cloud) or user name (Data Center), dates `YYYY-MM-DD`, `epic_key` a key. Labels are added and never conflict.",
        "properties": crate::domain::edit::CHECKED_FIELDS.into_iter().map(|f| (f.to_string(), value.clone())).collect::<serde_json::Map<_, _>>()})
}

/// The params of a command as the hub stores and hands them out (an edit's base in its stored
/// form), by its `type`.
fn params_of_any_type() -> Value {
    json!({
        "description": "The command's params, by its `type`.",
        "oneOf": COMMAND_TYPES.iter().map(|(_, _, params)| json!({"$ref": reference(&stored(params))})).collect::<Vec<_>>()
    })
}

/// The name of a type's params as stored: an edit's differ from the request's (its base in the
/// stored form, `overwrite`); the other types' are the request's.
fn stored(params: &str) -> String {
    if params == "EnsureIssueParams" {
        format!("Stored{params}")
    } else {
        params.to_string()
    }
}

/// The name of a type's result schema (`EnsureIssueParams` → `EnsureIssueResult`).
fn result_of(params: &str) -> String {
    params.replace("Params", "Result")
}

/// `CommandView` discriminated by `type`, as the request side is: one view per command type
/// (`EnsureIssueCommandView`…) whose `type` is a constant, `params` its type's as stored, and
/// `result` (its own and its attempts') its type's; `CommandView` is the `oneOf` of them with a
/// `discriminator` mapping, so a generated client narrows `params` and `result` by `type`.
fn discriminate_command_views(schemas: &mut Map<String, Value>) {
    let (Some(view), Some(attempt)) = (
        schemas.get("CommandView").cloned(),
        schemas.get("AttemptView").cloned(),
    ) else {
        return;
    };
    let mut mapping = Map::new();
    for (command_type, command, params) in COMMAND_TYPES {
        let (name, attempt_name) = (format!("{command}View"), format!("{command}Attempt"));
        let result = json!({"oneOf": [{"$ref": reference(&result_of(params))}, {"type": "null"}],
            "description": "What the command found (null until it is done; for an edit stopped by a conflict, the conflict)."});
        let mut typed_attempt = attempt.clone();
        typed_attempt["properties"]["result"] = result.clone();
        typed_attempt["description"] = json!(format!(
            "How an earlier attempt of a retried `{command_type}` command ended."
        ));
        let mut typed = view.clone();
        typed["description"] = json!(format!(
            "A `{command_type}` command as clients see it: params as stored, `$result` references kept."
        ));
        typed["properties"]["type"] =
            json!({"type": "string", "const": command_type, "enum": [command_type]});
        typed["properties"]["params"] = json!({"$ref": reference(&stored(params))});
        typed["properties"]["result"] = result;
        typed["properties"]["attempts"]["items"] = json!({"$ref": reference(&attempt_name)});
        schemas.insert(attempt_name, typed_attempt);
        schemas.insert(name.clone(), typed);
        mapping.insert(command_type.to_string(), json!(reference(&name)));
    }
    schemas.remove("AttemptView");
    schemas.insert(
        "CommandView".into(),
        json!({
            "description": "A command as clients see it, by its `type`: `params` as stored (`$result` references kept), `result` what the command found.",
            "oneOf": mapping.values().map(|r| json!({"$ref": r})).collect::<Vec<_>>(),
            "discriminator": {"propertyName": "type", "mapping": mapping}
        }),
    );
}

/// A field's value as the conflict check compares it: a text (a date `YYYY-MM-DD`, an account
/// id or user name), none, or a priority as Jira names it.
fn compared_value() -> Value {
    json!({"oneOf": [{"type": "string"}, {"type": "null"},
        {"type": "object", "additionalProperties": false, "description": "A priority: Jira's id and name (the base from the mirror), or the name alone (the wanted one).",
         "properties": {"id": {"type": "string"}, "name": {"type": "string"}}}]})
}

/// The checked fields, each a [`compared_value`].
fn checked_fields(description: &str) -> Value {
    json!({"type": "object", "additionalProperties": false, "description": description,
        "properties": crate::domain::edit::CHECKED_FIELDS.into_iter()
            .map(|f| (f.to_string(), json!({"$ref": reference("ComparedValue")})))
            .collect::<Map<_, _>>()})
}

/// What each command type's result holds, and an edit's conflict.
fn result_schemas() -> Vec<(&'static str, Value)> {
    let checked = json!({"type": "string", "enum": crate::domain::edit::CHECKED_FIELDS});
    vec![
        ("ComparedValue", compared_value()),
        (
            "RefreshResult",
            json!({"type": "object", "required": ["total", "boards"],
            "properties": {
                "total": {"type": "integer", "minimum": 0, "description": "How many issues the search read."},
                "boards": {"type": "array", "description": "The type of each board of the refresh that Jira let the agent read.",
                    "items": {"type": "object", "required": ["id", "type"], "additionalProperties": false,
                              "properties": {"id": {"type": "integer", "minimum": 1}, "type": {"type": "string", "example": "scrum"}}}},
                "warnings": {"type": "array", "items": {"type": "string"}, "description": "Boards Jira refused to describe, in words; absent when none."}
            }}),
        ),
        (
            "EnsureIssueResult",
            json!({"type": "object", "required": ["key"],
            "description": "Done: the issue's key and whether this command created it. Failed on a conflict: the key and the conflict (nothing written).",
            "properties": {
                "key": {"type": "string", "example": "AURORA-1"},
                "created": {"type": "boolean", "description": "Present when done."},
                "conflict": {"$ref": reference("EditConflict")}
            }}),
        ),
        (
            "EditConflict",
            json!({"type": "object", "required": ["updated", "fields", "words"], "additionalProperties": false,
            "description": "An edit stopped because Jira changed a field it sets after its base was taken.",
            "properties": {
                "updated": {"type": ["string", "null"], "format": "date-time", "description": "The issue's `updated` in Jira when the agent read it, in UTC."},
                "fields": {"type": "array", "items": {"$ref": reference("ConflictField")}},
                "words": {"type": "string", "description": "The conflict in words (the command's `error`)."}
            }}),
        ),
        (
            "ConflictField",
            json!({"type": "object", "required": ["field", "base", "jira", "wanted"], "additionalProperties": false,
            "properties": {
                "field": checked,
                "base": {"$ref": reference("ComparedValue")},
                "jira": {"$ref": reference("ComparedValue")},
                "wanted": {"$ref": reference("ComparedValue")},
                "changed_by": {"type": "string", "description": "Who changed it in Jira, when its changelog says."},
                "changed_at": {"type": "string", "format": "date-time", "description": "When, in UTC, when its changelog says."}
            }}),
        ),
        (
            "TransitionResult",
            json!({"type": "object", "required": ["status"],
                   "properties": {"status": {"type": "string", "description": "The status the issue is in (the name the batch used)."}}}),
        ),
        (
            "LinkResult",
            json!({"type": "object", "required": ["link_id"],
                   "properties": {"link_id": {"type": "string", "description": "Jira's id of the link."}}}),
        ),
        (
            "CommentResult",
            json!({"type": "object", "required": ["comment_id"],
                   "properties": {"comment_id": {"type": "string", "description": "Jira's id of the comment."}}}),
        ),
    ]
}

/// An edit's or a create's params: as a client sends them, or as the hub stores them
/// (`stored`: the base in its stored form and the fields an overwrite names).
fn ensure_issue_params(stored: bool) -> Value {
    let text = |example: &str| json!({"type": "string", "minLength": 1, "example": example});
    let date = json!({"type": "string", "format": "date", "example": "2026-04-01"});
    let base = if stored { stored_base() } else { edit_base() };
    let mut params = json!({"type": "object", "required": ["issue_type", "summary"], "additionalProperties": false,
    "description": "Creates an issue, or updates the one named by `key`.",
    "properties": {
        "issue_type": {"type": "string", "enum": ["task", "epic", "bug"], "description": "A type configured in `issue_types`."},
        "key": key_or_result(),
        "summary": text("Новая задача"),
        "description": {"type": ["string", "null"]},
        "labels": {"type": "array", "items": {"type": "string"}},
        "epic_key": key_or_result(),
        "priority": {"type": ["string", "null"], "description": "A key of `priority_map`."},
        "assignee": {"type": ["string", "null"]},
        "duedate": date.clone(),
        "plan_start": date.clone(),
        "plan_end": date,
        "sprint": {"type": ["string", "null"]},
        "board_id": {"type": ["integer", "null"], "minimum": 1},
        "base": base
    }});
    if stored {
        params["description"] = json!(
            "Creates an issue, or updates the one named by `key`; as stored: `base` in its stored form, `overwrite` after «Записать поверх»."
        );
        params["properties"]["overwrite"] = json!({"type": "array", "items": {"type": "string", "enum": crate::domain::edit::CHECKED_FIELDS},
            "description": "The fields in conflict an operator chose to write over what Jira holds (a retry with `overwrite`); absent otherwise."});
    }
    params
}

/// An edit's base as the hub stores it (and hands it to the agent).
fn stored_base() -> Value {
    json!({"type": "object", "required": ["from", "fields"], "additionalProperties": false,
    "description": "The base recorded at enqueue: the client's own (`from`: `client`), the mirror's values then (`mirror`), or none (`none`: the mirror did not hold the issue; the edit is written unchecked).",
    "properties": {
        "from": {"type": "string", "enum": [crate::domain::edit::FROM_CLIENT, crate::domain::edit::FROM_MIRROR, crate::domain::edit::FROM_NONE]},
        "fields": checked_fields("The values the edit's checked fields had, in the compared forms."),
        "updated": {"type": "string", "format": "date-time", "description": "The mirror's `updated_at` of the issue when the base was taken (UTC)."},
        "note": {"type": "string", "description": "With `none`: why the edit is written unchecked."}
    }})
}

fn schemas_written_here() -> Vec<(&'static str, Value)> {
    let text = |example: &str| json!({"type": "string", "minLength": 1, "example": example});
    let string_map = |description: &str| json!({"type": "object", "additionalProperties": {"type": "string"}, "description": description});
    let issue_type = json!({
        "type": "object", "required": ["name"],
        "properties": {"name": {"type": "string"}, "id": {"type": ["string", "null"], "description": "Jira's id of the type, when known."}}
    });
    let mut schemas = result_schemas();
    schemas.extend([
        (
            "ClaimRequest",
            agent_request(
                "claim",
                "claim-1",
                "`POST /agent/claim`: hand me commands.",
                json!({
                    "agent_version": text("1.4.0"),
                    "settings_version": {"type": "integer", "format": "int64", "example": 0,
                        "description": "The settings version the agent holds; the answer carries the settings when it differs."},
                    "max_commands": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 4294967295u64, "example": 10,
                        "description": "How many commands the agent takes at most; capped by `pacing.max_commands_per_claim`."},
                    "wait_seconds": {"type": "integer", "format": "int32", "minimum": 0, "maximum": crate::protocol::MAX_CLAIM_WAIT_SECONDS, "default": 0, "example": 600,
                        "description": "How long the hub may hold the answer while it has nothing to hand out (no command, no pause, no settings): the answer comes as soon as a command may be handed out, or empty when the wait ends. 0 answers at once."}
                }),
                &["agent_version", "settings_version", "max_commands"],
            ),
        ),
        (
            "ReportRequest",
            agent_request(
                "report",
                "report-1",
                "`POST /agent/report`: results of commands, or pages of a refresh.",
                json!({"results": {"type": "array", "items": {"$ref": reference("CommandResult")}}}),
                &["results"],
            ),
        ),
        (
            "HeartbeatRequest",
            agent_request(
                "heartbeat",
                "heartbeat-1",
                "`POST /agent/heartbeat`: the agent is alive; whether Jira answers it.",
                json!({
                    "agent_version": text("1.4.0"),
                    "jira_ok": {"type": "boolean", "example": true},
                    "last_error": {"type": ["string", "null"]},
                    "heartbeat_seconds": {
                        "description": "Hub extension: how often this agent sends a heartbeat, in seconds. The hub flags the agent silent once two such periods pass without a request of its own (`GET /agents` `silent`); without it, after a fixed 20 minutes.",
                        "type": "integer", "format": "int32", "minimum": 1, "maximum": crate::protocol::MAX_HEARTBEAT_SECONDS, "example": 60},
                    "check": {
                        "description": "Hub extension: the preflight `jira-hub agent --check` ran, sent once with a heartbeat; the hub keeps the last one per agent (`GET /agents`, the console's overview).",
                        "type": "object", "additionalProperties": false,
                        "required": ["ran_at", "ok", "lines"],
                        "properties": {
                            "ran_at": text("2026-11-30T19:00:00Z"),
                            "ok": {"type": "boolean"},
                            "lines": {"type": "array", "maxItems": crate::protocol::MAX_CHECK_LINES,
                                      "items": {"type": "object", "additionalProperties": false,
                                                "required": ["name", "ok", "detail"],
                                                "properties": {
                                                    "name": {"type": "string", "maxLength": crate::protocol::MAX_CHECK_NAME_CHARS},
                                                    "ok": {"type": "boolean"},
                                                    "detail": {"type": "string", "maxLength": crate::protocol::MAX_CHECK_DETAIL_CHARS}}}}
                        }
                    }
                }),
                &["agent_version", "jira_ok"],
            ),
        ),
        (
            "ResultRef",
            json!({"type": "object", "required": ["$result"], "additionalProperties": false,
                   "description": "The key from the result of the command this one depends on.",
                   "properties": {"$result": {"type": "string", "const": "key", "enum": ["key"]}}}),
        ),
        (
            "CommandType",
            json!({"type": "string", "enum": COMMAND_TYPES.iter().map(|(t, _, _)| *t).collect::<Vec<_>>()}),
        ),
        (
            "RefreshParams",
            json!({"type": "object", "required": ["jql"], "additionalProperties": false,
                   "properties": {"jql": text("project = AURORA"),
                                  "boards": {"type": "array", "items": {"type": "integer", "minimum": 1}}}}),
        ),
        ("EnsureIssueParams", ensure_issue_params(false)),
        ("StoredEnsureIssueParams", ensure_issue_params(true)),
        (
            "TransitionParams",
            json!({"type": "object", "required": ["key", "status"], "additionalProperties": false,
                   "properties": {"key": key_or_result(), "status": {"type": "string", "description": "A key of `transitions_map`."}}}),
        ),
        (
            "LinkParams",
            json!({"type": "object", "required": ["from", "to", "type"], "additionalProperties": false,
                   "properties": {"from": key_or_result(), "to": key_or_result(),
                                  "type": {"type": "string", "description": "A key of `link_types`."}}}),
        ),
        (
            "CommentParams",
            json!({"type": "object", "required": ["key", "body"], "additionalProperties": false,
                   "properties": {"key": key_or_result(), "body": text("Комментарий")}}),
        ),
        (
            "CommandRequestBody",
            json!({
                "description": "One command of a batch; `params` by `type`.",
                "oneOf": COMMAND_TYPES.iter().map(|(_, command, _)| json!({"$ref": reference(command)})).collect::<Vec<_>>(),
                "discriminator": {"propertyName": "type", "mapping": COMMAND_TYPES.iter()
                    .map(|(t, command, _)| (t.to_string(), json!(reference(command))))
                    .collect::<Map<String, Value>>()}
            }),
        ),
        ("IssueTypeSetting", issue_type),
        (
            "IssueTypesSetting",
            json!({"type": "object", "required": ["task", "epic"],
                   "properties": {"task": {"$ref": reference("IssueTypeSetting")},
                                  "epic": {"$ref": reference("IssueTypeSetting")},
                                  "bug": {"$ref": reference("IssueTypeSetting")}}}),
        ),
        (
            "Pacing",
            json!({"type": "object", "description": "Missing members take their defaults.",
            "properties": {
                "min_interval_ms": {"type": "integer", "minimum": 0},
                "max_commands_per_claim": {"type": "integer", "minimum": 1},
                "claim_timeout_seconds": {"type": "integer", "minimum": 1},
                "max_deliveries": {"type": "integer", "minimum": 1},
                "backoff_initial_seconds": {"type": "integer", "minimum": 0},
                "backoff_max_seconds": {"type": "integer", "minimum": 0}
            }}),
        ),
    ]);
    let writable = json!({
        "project_key": {"type": ["string", "null"], "example": "AURORA"},
        "field_ids": string_map("Where custom fields live: `epic_link`, `sprint`, `plan_start`, `plan_end`."),
        "issue_types": {"oneOf": [{"$ref": reference("IssueTypesSetting")}, {"type": "null"}]},
        "priority_map": string_map("Priority names by logical name."),
        "link_types": string_map("Jira link type names by logical name."),
        "transitions_map": {"type": "object", "description": "Jira statuses by the names batches use: the target status's id (`{\"status_id\": \"10001\", \"transition_id\": \"31\"}`, the transition id only preferred when several lead there), or, the legacy form, a transition id, taken only when it leads to a status of that name.",
            "additionalProperties": {"oneOf": [
                {"type": "string"},
                {"type": "object", "required": ["status_id"], "additionalProperties": false,
                 "properties": {"status_id": {"type": "string"}, "transition_id": {"type": ["string", "null"]}}}]}},
        "pacing": {"$ref": reference("Pacing")},
        "backup_keep": {"type": "integer", "minimum": 1, "maximum": 100000},
        "auto_refresh_minutes": {"type": ["integer", "null"], "minimum": 0, "maximum": 525600},
        "relay_dir": {"type": ["string", "null"], "description": "An absolute path; null turns the relay off."},
        "closed_statuses": {"type": "array", "items": {"type": "string"}},
        "full_refresh_hours": {"type": "integer", "minimum": 1, "maximum": 87600, "description": "Hours between two full automatic refreshes; the automatic refreshes in between are incremental (`updated >=` the start of the last successful run, less an overlap)."},
        "prune_guard": {"type": "object", "additionalProperties": false, "description": "A full refresh that would remove, in some project, more than `max_percent` percent of its mirror, and either at least `min_issues` issues or more than half of the project, is held until confirmed (`POST /sync-runs/{id}/confirm`); so is one that would remove all of a project's issues, whatever the numbers. A later full refresh that misses the same issues does not confirm it: it is held in its turn and replaces it. A full refresh that received fewer issues than Jira's `total` (or than the agent says it sent) removes nothing and ends `failed`, saying why.",
            "properties": {"max_percent": {"type": "integer", "minimum": 0, "maximum": 100, "default": 20}, "min_issues": {"type": "integer", "minimum": 0, "default": 50}}},
        "retention": {"type": "object", "additionalProperties": false, "description": "Days a finished batch is kept with its commands and attempts after it finished, then pruned by the daemon (0: kept for ever). A batch with a command queued or claimed is never pruned. `jira-hub batches prune --export FILE` prunes now and writes what it removes as JSON lines.",
            "properties": {"completed_days": {"type": "integer", "minimum": 0, "maximum": 36500, "default": 30}, "failed_days": {"type": "integer", "minimum": 0, "maximum": 36500, "default": 90}}}
    });
    let mut view = writable.clone();
    if let Some(view) = view.as_object_mut() {
        view.insert(
            "base_jql".into(),
            json!({"type": ["string", "null"], "readOnly": true, "description": "Computed from the projects."}),
        );
        view.insert(
            "settings_version".into(),
            json!({"type": "integer", "format": "int64", "readOnly": true}),
        );
    }
    let required: Vec<String> = view
        .as_object()
        .map(|v| v.keys().cloned().collect())
        .unwrap_or_default();
    schemas.push((
        "Settings",
        json!({"type": "object", "description": "Every setting but the tokens.", "required": required, "properties": view}),
    ));
    schemas.push((
        "SettingsUpdate",
        json!({"type": "object", "additionalProperties": false,
               "description": "The settings to write, all or nothing; `settings_version` goes up by one.",
               "properties": writable}),
    ));
    for (command_type, command, params) in COMMAND_TYPES {
        schemas.push((
            command,
            json!({"type": "object", "required": ["type", "params"],
            "properties": {
                "type": {"type": "string", "const": command_type, "enum": [command_type]},
                "params": {"$ref": reference(params)},
                "depends_on": {"type": ["integer", "null"], "format": "int64",
                    "description": "The `seq` (1-based) of an earlier command of the same batch."}
            }}),
        ));
    }
    schemas
}
