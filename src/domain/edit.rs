//! An edit's base and the three-way decision per field: what the hub records when an
//! edit (`ensure_issue` with a `key`) is enqueued, and the forms in which the agent compares the
//! base, Jira's value now and the wanted value right before it writes.
//!
//! One extraction for both sides: the hub reads the base from the mirror's raw `fields` of the
//! issue, the agent reads Jira's value now from its `GET …/issue/KEY?fields=…`; both go through
//! [`jira_value`], so a value the mirror holds and the same value read again compare equal.

use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The fields of an edit that are checked against the base: every field the edit replaces.
/// Labels are added, never replaced (no conflict). A sprint is set through the Agile API
/// (`POST /rest/agile/1.0/sprint/{id}/issue`), which *moves* the issue out of its open sprint: it
/// replaces the sprint field's latest sprint, so it is checked like the others (by the latest
/// sprint's name, the form the mirror keeps).
pub const CHECKED_FIELDS: [&str; 9] = [
    "summary",
    "description",
    "priority",
    "assignee",
    "duedate",
    "plan_start",
    "plan_end",
    "epic_key",
    "sprint",
];

/// Where an edit's base came from (`params.base.from`).
pub const FROM_MIRROR: &str = "mirror";
pub const FROM_CLIENT: &str = "client";
/// The issue was not in the mirror: the edit is written unchecked, as before the conflict check existed.
pub const FROM_NONE: &str = "none";
/// The issue was not in the mirror, but earlier edits of the hub's, not yet read by a refresh,
/// set the fields: those are checked against their wanted values (`params.base.after_edits`).
pub const FROM_EDITS: &str = "edits";

/// A body in the form that survives Jira Cloud's storage: REST v2 takes wiki markup, Cloud
/// stores it as ADF and gives back wiki markup converted again. What changes on the way and is
/// ignored here: line endings (`\r\n`, `\r` → `\n`), whitespace at the end of a line
/// (cronn/jira-sync#15: "Cloud Jira started to remove trailing whitespace at line ends"), runs of
/// blank lines (one ADF paragraph break: developer.atlassian.com/cloud/jira/platform/apis/
/// document/structure/), and blank lines or whitespace around the whole body.
pub(crate) fn normalized_body(body: &str) -> String {
    let unified = body.replace("\r\n", "\n").replace('\r', "\n");
    let mut out: Vec<&str> = Vec::new();
    for line in unified.split('\n') {
        let line = line.trim_end();
        if line.is_empty() && out.last().is_none_or(|l| l.is_empty()) {
            continue;
        }
        out.push(line);
    }
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    out.join("\n").trim_start().to_string()
}

fn text_of(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `YYYY-MM-DD`, or the date part of a date-time (as the mirror keeps dates).
fn date_of(value: Option<&Value>) -> Value {
    text_of(value)
        .and_then(|t| t.get(..10).map(String::from))
        .map_or(Value::Null, Value::from)
}

/// The Jira field a logical field lives in, for `?fields=`; `None` when the settings do not say
/// (a plan date or Data Center's Epic Link without `field_ids`). `cloud`: the epic is the
/// issue's `parent` there, the Epic Link custom field on Data Center.
pub fn jira_field(
    logical: &str,
    field_ids: &BTreeMap<String, String>,
    cloud: bool,
) -> Option<String> {
    match logical {
        "summary" | "description" | "priority" | "assignee" | "duedate" => {
            Some(logical.to_string())
        }
        "plan_start" | "plan_end" => field_ids.get(logical).cloned(),
        "epic_key" if cloud => Some("parent".into()),
        "epic_key" => field_ids.get("epic_link").cloned(),
        "sprint" => field_ids.get("sprint").cloned(),
        _ => None,
    }
}

/// A field of a raw issue's `fields` in the compared form: text (summary trimmed), a priority as
/// `{"id", "name"}`, a user as the account id (Cloud) or the login name (Data Center), a date as
/// `YYYY-MM-DD`, the epic as its key; `null` when empty or absent.
pub fn jira_value(
    logical: &str,
    fields: &Map<String, Value>,
    field_ids: &BTreeMap<String, String>,
) -> Value {
    let custom = |name: &str| {
        field_ids
            .get(name)
            .and_then(|id| fields.get(id))
            .filter(|v| !v.is_null())
    };
    match logical {
        "summary" => text_of(fields.get("summary"))
            .map(|s| s.trim().to_string())
            .map_or(Value::Null, Value::from),
        "description" => text_of(fields.get("description"))
            .filter(|d| !d.trim().is_empty())
            .map_or(Value::Null, Value::from),
        "priority" => match fields.get("priority") {
            Some(Value::Object(p)) => {
                let mut out = Map::new();
                for member in ["id", "name"] {
                    if let Some(text) = text_of(p.get(member)) {
                        out.insert(member.into(), text.into());
                    }
                }
                Value::Object(out)
            }
            _ => Value::Null,
        },
        "assignee" => match fields.get("assignee") {
            Some(user @ Value::Object(_)) => text_of(user.get("accountId"))
                .or_else(|| text_of(user.get("name")))
                .map_or(Value::Null, Value::from),
            _ => Value::Null,
        },
        "duedate" => date_of(fields.get("duedate")),
        "plan_start" | "plan_end" => date_of(custom(logical)),
        "epic_key" => custom("epic_link")
            .and_then(|v| text_of(Some(v)))
            .or_else(|| fields.get("parent").and_then(|p| text_of(p.get("key"))))
            .map_or(Value::Null, Value::from),
        "sprint" => super::sprint::latest_sprint(custom("sprint")).map_or(Value::Null, Value::from),
        _ => Value::Null,
    }
}

/// The value an edit's params want for a checked field, in the compared form; `None` when the
/// edit does not set it. A priority is wanted by the name `priority_map` gives it (the edit
/// names it so).
pub fn wanted_value(
    logical: &str,
    params: &Value,
    priority_map: &BTreeMap<String, String>,
) -> Option<Value> {
    let text = params
        .get(logical)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|t| !t.is_empty())?;
    Some(match logical {
        "priority" => {
            json!({"name": priority_map.get(text).map_or(text, String::as_str)})
        }
        _ => Value::from(text),
    })
}

/// The checked fields an edit's params set.
pub fn fields_set(params: &Value) -> Vec<&'static str> {
    CHECKED_FIELDS
        .into_iter()
        .filter(|f| params.get(*f).is_some_and(|v| !v.is_null()))
        .collect()
}

/// Whether two values of `logical` are the same in the compared forms: priorities by id when
/// both have one, else by name (case and spaces around aside); descriptions as Cloud gives them
/// back (`normalized_body`); users whatever the case; an empty text is no text.
pub fn same(logical: &str, a: &Value, b: &Value) -> bool {
    let text = |v: &Value| -> Option<String> {
        match v {
            Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
            _ => None,
        }
    };
    match logical {
        "priority" => {
            let member = |v: &Value, m: &str| match v {
                Value::String(s) if m == "name" => Some(s.trim().to_lowercase()),
                Value::Object(o) => text_of(o.get(m)).map(|s| s.trim().to_lowercase()),
                _ => None,
            };
            match (member(a, "id"), member(b, "id")) {
                (Some(x), Some(y)) => x == y,
                _ => member(a, "name") == member(b, "name"),
            }
        }
        "description" => {
            text(a).map(|t| normalized_body(&t)) == text(b).map(|t| normalized_body(&t))
        }
        "summary" => text(a).map(|t| t.trim().to_string()) == text(b).map(|t| t.trim().to_string()),
        // Data Center user names are case-insensitive and Jira gives back the name as stored
        // (guide/jira-field-notes.md, "Who we are"): `IVANOV` written reads back `ivanov`. Cloud's
        // account ids are lower-case hex or `712020:` and a UUID: no two differ only by case.
        "assignee" => {
            text(a).map(|t| t.trim().to_lowercase()) == text(b).map(|t| t.trim().to_lowercase())
        }
        _ => text(a) == text(b),
    }
}

/// A checked field as people read it (the console, the words of a conflict).
pub fn field_label(field: &str) -> &str {
    match field {
        "summary" => "Название",
        "description" => "Описание",
        "priority" => "Приоритет",
        "assignee" => "Исполнитель",
        "duedate" => "Срок",
        "plan_start" => "Начало по плану",
        "plan_end" => "Конец по плану",
        "epic_key" => "Эпик",
        "sprint" => "Спринт",
        other => other,
    }
}

/// A value for people: a priority by its name, text as it is, `—` for none.
pub fn shown(value: &Value) -> String {
    match value {
        Value::Null => "—".into(),
        Value::String(s) if s.trim().is_empty() => "—".into(),
        Value::String(s) => s.clone(),
        Value::Object(o) => text_of(o.get("name"))
            .or_else(|| text_of(o.get("id")))
            .unwrap_or_else(|| value.to_string()),
        other => other.to_string(),
    }
}

/// The base of an edit from the mirror: for each checked field the edit sets, the value the
/// mirror's raw `fields` hold, with the mirrored `updated`; what a client sent in its own
/// `base` (`client`: `{"from": "client", "fields": {…}}`) takes the place of the mirror's value
/// of its fields. `mirror`: the raw `fields` and `updated`, `None` when the mirror does
/// not hold the issue (then the base says so, and the edit is written unchecked unless the client
/// gave a base).
pub fn base_of(
    params: &Value,
    client: Option<&Value>,
    mirror: Option<(&Map<String, Value>, Option<&str>)>,
    field_ids: &BTreeMap<String, String>,
) -> Value {
    let client_fields = client
        .and_then(|c| c.get("fields"))
        .and_then(Value::as_object);
    let mut fields = Map::new();
    for logical in fields_set(params) {
        if let Some(given) = client_fields.and_then(|c| c.get(logical)) {
            fields.insert(logical.into(), given.clone());
        } else if let Some((raw, _)) = mirror {
            fields.insert(logical.into(), jira_value(logical, raw, field_ids));
        }
    }
    let from = match (client_fields.is_some(), mirror.is_some()) {
        (true, _) => FROM_CLIENT,
        (false, true) => FROM_MIRROR,
        (false, false) => FROM_NONE,
    };
    let mut base = json!({"from": from, "fields": fields});
    if let Some((_, Some(updated))) = mirror {
        base["updated"] = updated.into();
    }
    if from == FROM_NONE {
        base["note"] =
            "задачи нет в зеркале: правка записывается без сверки с тем, что сейчас в Jira".into();
    }
    base
}

/// A client's own `base` of an edit (`params.base`: the values it saw, by field), checked and put
/// in the stored form `{"from": "client", "fields": {…}}`. `Err` says what is wrong, in the
/// words of the batch's errors.
pub(crate) fn client_base(params: &Map<String, Value>, base: &Value) -> Result<Value, String> {
    if !params.get("key").is_some_and(Value::is_string) {
        return Err(
            "base бывает только у правки существующей задачи (key — ключ задачи Jira)".into(),
        );
    }
    let Some(given) = base.as_object() else {
        return Err("ожидается объект: поле → значение, которое клиент видел".into());
    };
    let set = fields_set(&Value::Object(params.clone()));
    let mut fields = Map::new();
    for (name, value) in given {
        if !CHECKED_FIELDS.contains(&name.as_str()) {
            return Err(format!(
                "поле «{name}» не сверяется; допустимы {}",
                CHECKED_FIELDS.join(", ")
            ));
        }
        if !set.contains(&name.as_str()) {
            return Err(format!("поле «{name}» эта команда не меняет"));
        }
        if !(value.is_string() || value.is_null()) {
            return Err(format!("поле «{name}»: ожидается строка или null"));
        }
        fields.insert(name.clone(), value.clone());
    }
    Ok(json!({"from": FROM_CLIENT, "fields": fields}))
}

/// Whether params carry a base to check against (a base of fields, not `none`).
pub fn has_base(params: &Value) -> bool {
    params
        .get("base")
        .and_then(|b| b.get("fields"))
        .and_then(Value::as_object)
        .is_some_and(|f| !f.is_empty())
}

/// The conflict a failed edit's result carries (`result.conflict`), if any.
pub fn conflict_of(result: Option<&Value>) -> Option<&Value> {
    result?.get("conflict").filter(|c| c.is_object())
}

/// The fields in conflict (`result.conflict.fields[].field`).
pub fn conflict_fields(conflict: &Value) -> Vec<String> {
    conflict
        .get("fields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| f.get("field").and_then(Value::as_str).map(String::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> BTreeMap<String, String> {
        [
            ("plan_start".to_string(), "customfield_12001".to_string()),
            ("epic_link".to_string(), "customfield_10101".to_string()),
        ]
        .into()
    }

    #[test]
    fn compared_forms() {
        let fields = json!({"summary": " Сделать ", "priority": {"self": "x", "id": "2", "name": "High"},
            "assignee": {"accountId": "5b10a", "displayName": "Иван"}, "duedate": "2026-04-01",
            "customfield_12001": "2026-03-01T00:00:00.000+0300", "parent": {"key": "AURORA-9"},
            "description": "  "});
        let fields = fields.as_object().unwrap();
        assert_eq!(jira_value("summary", fields, &ids()), json!("Сделать"));
        assert_eq!(
            jira_value("priority", fields, &ids()),
            json!({"id": "2", "name": "High"})
        );
        assert_eq!(jira_value("assignee", fields, &ids()), json!("5b10a"));
        assert_eq!(
            jira_value("plan_start", fields, &ids()),
            json!("2026-03-01")
        );
        assert_eq!(jira_value("epic_key", fields, &ids()), json!("AURORA-9"));
        assert_eq!(jira_value("description", fields, &ids()), Value::Null);
        assert_eq!(jira_value("plan_end", fields, &ids()), Value::Null);
    }

    #[test]
    fn sameness() {
        let map = [("high".to_string(), "High".to_string())].into();
        let wanted = wanted_value("priority", &json!({"priority": "high"}), &map).unwrap();
        assert!(same(
            "priority",
            &json!({"id": "2", "name": "high "}),
            &wanted
        ));
        assert!(!same(
            "priority",
            &json!({"id": "3", "name": "Low"}),
            &wanted
        ));
        assert!(same(
            "priority",
            &json!({"id": "2", "name": "High"}),
            &json!({"id": "2", "name": "Высокий"})
        ));
        assert!(same(
            "description",
            &json!("Текст  \r\n\r\n\r\nещё  "),
            &json!("Текст\n\nещё")
        ));
        assert!(!same("description", &json!("Текст"), &json!("Текст!")));
        assert!(same("description", &json!(""), &Value::Null));
        assert!(same("summary", &json!(" a "), &json!("a")));
        assert!(!same("assignee", &json!("a"), &Value::Null));
        assert!(same("assignee", &json!("IVANOV"), &json!("ivanov")));
        assert!(!same("assignee", &json!("ivanov"), &json!("petrov")));
    }

    #[test]
    fn bases() {
        let params =
            json!({"key": "AURORA-1", "summary": "новое", "labels": ["X"], "priority": "high"});
        let raw = json!({"summary": "старое", "priority": {"id": "3", "name": "Low"}});
        let base = base_of(
            &params,
            None,
            Some((
                raw.as_object().unwrap(),
                Some("2026-03-01T10:00:00.000000Z"),
            )),
            &ids(),
        );
        assert_eq!(
            base,
            json!({"from": "mirror", "updated": "2026-03-01T10:00:00.000000Z",
                   "fields": {"summary": "старое", "priority": {"id": "3", "name": "Low"}}})
        );
        assert!(has_base(&json!({"base": base})));
        let client = json!({"from": "client", "fields": {"summary": "видел"}});
        let base = base_of(&params, Some(&client), None, &ids());
        assert_eq!(base["fields"], json!({"summary": "видел"}));
        let none = base_of(&params, None, None, &ids());
        assert_eq!(none["from"], "none");
        assert!(!has_base(&json!({"base": none})));
    }

    #[test]
    fn bodies_compare_as_cloud_gives_them_back() {
        assert_eq!(normalized_body("a  \r\n\r\n\r\nb \n\n"), "a\n\nb");
        assert_eq!(normalized_body("\n\n  a"), "a");
    }
}
