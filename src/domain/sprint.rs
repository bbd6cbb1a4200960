//! A sprint as Jira gives it in an issue's sprint field, in either of its forms (Cloud's and
//! Data Center 8+'s objects, older servers' `toString` text), reduced to the one the mirror keeps
//! and an edit's check compares: the latest sprint's name.

use serde_json::Value;

fn text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A sprint in either form Jira uses, reduced to what picks the latest: its name, whether it is
/// closed, and its order (`sequence`, else `id`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sprint {
    name: String,
    closed: bool,
    order: i64,
}

/// The keys Jira Server writes in the string form of a sprint; a name may hold commas, so the
/// name ends only where one of these begins.
const SPRINT_STRING_KEYS: [&str; 12] = [
    "id",
    "rapidViewId",
    "state",
    "name",
    "goal",
    "startDate",
    "endDate",
    "completeDate",
    "activatedDate",
    "sequence",
    "synced",
    "autoStartStop",
];

/// `com.atlassian.greenhopper.service.sprint.Sprint@1a2b[id=5,rapidViewId=4216,state=ACTIVE,name=Sprint 5,…,sequence=5]`
///
/// One pass over the comma-separated segments: a segment that starts with a known key and `=`
/// begins a new pair; any other segment belongs to the value before it (a name with commas).
fn parse_sprint_string(text: &str) -> Option<Sprint> {
    let body = text.get(text.find('[')? + 1..text.rfind(']')?)?;
    let mut pairs: Vec<(&str, usize, usize)> = Vec::new();
    let mut offset = 0;
    for segment in body.split(',') {
        let starts_pair = segment
            .split_once('=')
            .is_some_and(|(key, _)| SPRINT_STRING_KEYS.contains(&key));
        let end = offset + segment.len();
        match pairs.last_mut() {
            Some(last) if !starts_pair => last.2 = end,
            _ => {
                let key_len = segment.find('=').unwrap_or(segment.len());
                let value_start = (offset + key_len + 1).min(end);
                pairs.push((&segment[..key_len], value_start, end));
            }
        }
        offset = end + 1;
    }
    let value = |key: &str| {
        pairs
            .iter()
            .find(|(k, _, _)| *k == key)
            .map(|(_, from, to)| &body[*from..*to])
    };
    let name = value("name")?.to_string();
    let order = value("sequence")
        .or_else(|| value("id"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Some(Sprint {
        name,
        closed: value("state").is_some_and(|s| s.eq_ignore_ascii_case("closed")),
        order,
    })
}

fn parse_sprint(value: &Value) -> Option<Sprint> {
    match value {
        Value::String(text) => parse_sprint_string(text),
        Value::Object(object) => Some(Sprint {
            name: text(object.get("name"))?,
            closed: object
                .get("state")
                .and_then(Value::as_str)
                .is_some_and(|s| s.eq_ignore_ascii_case("closed")),
            order: object
                .get("sequence")
                .or_else(|| object.get("id"))
                .and_then(Value::as_i64)
                .unwrap_or(0),
        }),
        _ => None,
    }
}

/// The latest sprint's name: an open (active or future) sprint over a closed one, then the
/// highest `sequence`/`id`, then the last listed.
pub fn latest_sprint(value: Option<&Value>) -> Option<String> {
    let sprints: Vec<Sprint> = match value? {
        Value::Array(items) => items.iter().filter_map(parse_sprint).collect(),
        single => parse_sprint(single).into_iter().collect(),
    };
    sprints
        .into_iter()
        .enumerate()
        .max_by_key(|(i, s)| (!s.closed, s.order, *i))
        .map(|(_, s)| s.name)
}
