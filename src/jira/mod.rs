//! Reading raw Jira issues (REST API v2 `search`, `{"id", "key", "fields": {...}}`) into the
//! mirror's rows (system.md §4): the fields the hub queries, links (each stored once, source →
//! target), comments with Jira's time strings as they are, and the whole `fields` object.
//!
//! Missing or null fields are never errors; only an issue without a `key` or `fields` is.

mod typed;

use crate::domain::issue::MirrorFields;
use crate::domain::sprint::latest_sprint;
use crate::domain::time::Utc;
use serde_json::Value;
use std::collections::BTreeMap;
use time::OffsetDateTime;
use time::macros::format_description;

/// Where custom fields live, from the `field_ids` setting.
#[derive(Debug, Clone, Default)]
pub struct FieldIds {
    pub epic_link: Option<String>,
    pub sprint: Option<String>,
    pub plan_start: Option<String>,
    pub plan_end: Option<String>,
}

impl FieldIds {
    pub(crate) fn from_setting(field_ids: &BTreeMap<String, String>) -> Self {
        FieldIds {
            epic_link: field_ids.get("epic_link").cloned(),
            sprint: field_ids.get("sprint").cloned(),
            plan_start: field_ids.get("plan_start").cloned(),
            plan_end: field_ids.get("plan_end").cloned(),
        }
    }
}

/// One issue as the mirror stores it: its mirrored fields, its raw `fields`, links, comments.
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorIssue {
    pub mirrored: MirrorFields,
    /// The issue's `fields` object as received, as JSON text (serialized straight from the
    /// request, never cloned).
    pub fields_json: String,
    /// The links on this issue; `None` when the answer did not carry `issuelinks` (then the
    /// stored links are left as they are).
    pub links: Option<Vec<MirrorLink>>,
    /// `None` when the answer did not carry `comment` (then the stored comments stay).
    pub comments: Option<Vec<MirrorComment>>,
}

/// A link, stored once: `source_key <outward> target_key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorLink {
    pub jira_id: Option<String>,
    pub source_key: String,
    pub target_key: String,
    pub link_type: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorComment {
    pub id: String,
    pub author: Option<String>,
    pub body: String,
    /// Jira's own string (`2026-03-05T10:15:30.000+0300`), kept as it is.
    pub created: Option<String>,
    pub updated: Option<String>,
}

fn text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A user: `name` (Server's login), else `displayName`.
fn user(value: Option<&Value>) -> Option<String> {
    let value = value?;
    text(value.get("name")).or_else(|| text(value.get("displayName")))
}

fn named(value: Option<&Value>) -> Option<String> {
    text(value?.get("name"))
}

/// A date field: `YYYY-MM-DD`, or the date part of a date-time.
fn date(text: Option<String>) -> Option<String> {
    let text = text?;
    let date = text.get(..10)?;
    time::Date::parse(date, format_description!("[year]-[month]-[day]")).ok()?;
    Some(date.to_string())
}

/// Jira's time (`2026-03-05T10:15:30.000+0300`, or with a colon in the offset, or RFC 3339).
pub(crate) fn jira_time(text: &str) -> Option<OffsetDateTime> {
    let formats = [
        format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond][offset_hour sign:mandatory][offset_minute]"
        ),
        format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond][offset_hour sign:mandatory]:[offset_minute]"
        ),
        format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second][offset_hour sign:mandatory][offset_minute]"
        ),
        format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second][offset_hour sign:mandatory]:[offset_minute]"
        ),
    ];
    formats
        .iter()
        .find_map(|format| OffsetDateTime::parse(text, format).ok())
        .or_else(|| crate::domain::time::parse_utc(text))
}

/// The links of an issue as it lists them, before they are stored once each.
#[derive(Debug)]
struct LinkParts {
    jira_id: Option<String>,
    link_type: String,
    /// The other issue's key when this one is the link's source.
    outward: Option<String>,
    /// The other issue's key when this one is the link's target.
    inward: Option<String>,
}

fn link_parts(fields: &serde_json::Map<String, Value>) -> Option<Vec<LinkParts>> {
    let items = fields.get("issuelinks")?.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|link| {
                Some(LinkParts {
                    link_type: named(link.get("type"))?,
                    jira_id: text(link.get("id")),
                    outward: link.get("outwardIssue").and_then(|i| text(i.get("key"))),
                    inward: link.get("inwardIssue").and_then(|i| text(i.get("key"))),
                })
            })
            .collect(),
    )
}

/// Each link stored once: `source <outward> target`.
fn links_of(key: &str, parts: Vec<LinkParts>) -> Vec<MirrorLink> {
    parts
        .into_iter()
        .filter_map(|link| match (link.outward, link.inward) {
            (Some(other), _) => Some(MirrorLink {
                jira_id: link.jira_id,
                source_key: key.to_string(),
                target_key: other,
                link_type: link.link_type,
            }),
            (None, Some(other)) => Some(MirrorLink {
                jira_id: link.jira_id,
                source_key: other,
                target_key: key.to_string(),
                link_type: link.link_type,
            }),
            (None, None) => None,
        })
        .collect()
}

fn comments_of(fields: &serde_json::Map<String, Value>) -> Option<Vec<MirrorComment>> {
    let items = fields.get("comment")?.get("comments")?.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|c| {
                Some(MirrorComment {
                    id: text(c.get("id"))?,
                    author: user(c.get("author")),
                    body: text(c.get("body")).unwrap_or_default(),
                    created: text(c.get("created")),
                    updated: text(c.get("updated")),
                })
            })
            .collect(),
    )
}

/// The standard fields the mapping reads (custom ones come from [`FieldIds`]).
const USED_FIELDS: [&str; 14] = [
    "summary",
    "description",
    "status",
    "issuetype",
    "priority",
    "assignee",
    "reporter",
    "labels",
    "duedate",
    "created",
    "updated",
    "issuelinks",
    "comment",
    "parent",
];

/// What the mapping reads of an issue's `fields`, taken out of them (from a parsed `Value`, or in
/// one typed pass over the text).
#[derive(Debug, Default)]
struct Picked {
    summary: Option<String>,
    description: Option<String>,
    status: Option<String>,
    issue_type: Option<String>,
    priority: Option<String>,
    assignee: Option<String>,
    reporter: Option<String>,
    labels: Vec<String>,
    duedate: Option<String>,
    created: Option<String>,
    updated: Option<String>,
    /// `None` when `issuelinks` is not an array (the stored links then stay).
    links: Option<Vec<LinkParts>>,
    /// `None` when `comment.comments` is not an array (the stored comments then stay).
    comments: Option<Vec<MirrorComment>>,
    /// The parent's key and its issue type's name.
    parent: Option<(Option<String>, Option<String>)>,
    epic_link: Option<String>,
    /// Not null.
    sprint: Option<Value>,
    plan_start: Option<String>,
    plan_end: Option<String>,
}

fn picked_from_map(fields: &serde_json::Map<String, Value>, ids: &FieldIds) -> Picked {
    let custom = |id: &Option<String>| {
        id.as_ref()
            .and_then(|id| fields.get(id))
            .filter(|v| !v.is_null())
    };
    Picked {
        summary: text(fields.get("summary")),
        description: text(fields.get("description")),
        status: named(fields.get("status")),
        issue_type: named(fields.get("issuetype")),
        priority: named(fields.get("priority")),
        assignee: user(fields.get("assignee")),
        reporter: user(fields.get("reporter")),
        labels: fields
            .get("labels")
            .and_then(Value::as_array)
            .map(|l| {
                l.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        duedate: text(fields.get("duedate")),
        created: text(fields.get("created")),
        updated: text(fields.get("updated")),
        links: link_parts(fields),
        comments: comments_of(fields),
        parent: fields.get("parent").map(|parent| {
            (
                text(parent.get("key")),
                parent.get("fields").and_then(|f| named(f.get("issuetype"))),
            )
        }),
        epic_link: custom(&ids.epic_link).and_then(|v| text(Some(v))),
        sprint: custom(&ids.sprint).cloned(),
        plan_start: custom(&ids.plan_start).and_then(|v| text(Some(v))),
        plan_end: custom(&ids.plan_end).and_then(|v| text(Some(v))),
    }
}

/// Maps one raw issue given as parsed JSON.
pub fn map_issue(
    raw: &Value,
    ids: &FieldIds,
    epic_type_names: &[&str],
) -> Result<MirrorIssue, String> {
    let key = text(raw.get("key")).ok_or("an issue without a key")?;
    let fields = raw
        .get("fields")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{key}: no fields object"))?;
    let fields_json = serde_json::to_string(fields).map_err(|e| format!("{key}: {e}"))?;
    map_fields(
        key,
        text(raw.get("id")),
        picked_from_map(fields, ids),
        fields_json,
        epic_type_names,
    )
}

/// Maps one raw issue given as its JSON text (a refresh page): `fields` is kept exactly as the
/// agent sent it, without being serialized again, and read in one typed pass that builds no
/// values and skips the dozens of fields the mirror never reads. What that pass cannot read
/// (custom field ids that name standard fields or each other, a member twice in one object) is
/// read as a `Value`, with the same result.
pub(crate) fn map_issue_text(
    raw: &str,
    ids: &FieldIds,
    epic_type_names: &[&str],
) -> Result<MirrorIssue, String> {
    #[derive(serde::Deserialize)]
    struct Parts<'a> {
        id: Option<Value>,
        key: Option<Value>,
        #[serde(borrow)]
        fields: Option<&'a serde_json::value::RawValue>,
    }
    let parts: Parts<'_> =
        serde_json::from_str(raw).map_err(|e| format!("an issue is not JSON: {e}"))?;
    let key = text(parts.key.as_ref()).ok_or("an issue without a key")?;
    let raw_fields = parts
        .fields
        .ok_or_else(|| format!("{key}: no fields object"))?;
    let custom: Vec<&str> = [&ids.epic_link, &ids.sprint, &ids.plan_start, &ids.plan_end]
        .into_iter()
        .filter_map(|id| id.as_deref())
        .collect();
    let plain_ids = custom
        .iter()
        .enumerate()
        .all(|(i, id)| !USED_FIELDS.contains(id) && !custom[..i].contains(id));
    let typed = plain_ids
        .then(|| {
            let mut deserializer = serde_json::Deserializer::from_str(raw_fields.get());
            serde::de::DeserializeSeed::deserialize(typed::FieldsSeed { ids }, &mut deserializer)
                .ok()
        })
        .flatten();
    let picked = match typed {
        Some(picked) => picked,
        None => {
            let fields: serde_json::Map<String, Value> = serde_json::from_str(raw_fields.get())
                .map_err(|_| format!("{key}: no fields object"))?;
            picked_from_map(&fields, ids)
        }
    };
    map_fields(
        key,
        text(parts.id.as_ref()),
        picked,
        raw_fields.get().to_string(),
        epic_type_names,
    )
}

/// The deepest nesting of a `fields` object the hub stores: `serde_json` refuses to read back
/// (its recursion limit) a text nested deeper than this, and the mirror must give back as a JSON
/// object whatever it stored. The object itself is level 1.
pub(crate) const MAX_FIELDS_DEPTH: usize = 127;

/// How deeply the arrays and objects of a JSON text nest (0 for a scalar), found by one pass over
/// its bytes without building anything: the text is valid JSON already.
pub(crate) fn json_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Jira's time, typed: in UTC, written in the hub's form (ISO-8601 with microseconds).
fn jira_utc(text: &str) -> Option<Utc> {
    let at = jira_time(text)?.to_offset(time::UtcOffset::UTC);
    // The hub's form keeps microseconds, and RFC 3339 years of four digits.
    let at = at.replace_nanosecond(at.nanosecond() / 1000 * 1000).ok()?;
    (0..=9999).contains(&at.year()).then(|| Utc::new(at))
}

fn map_fields(
    key: String,
    jira_id: Option<String>,
    picked: Picked,
    fields_json: String,
    epic_type_names: &[&str],
) -> Result<MirrorIssue, String> {
    // A text nests no deeper than it has opening brackets (those in strings included): almost
    // every issue has far fewer than the limit, and that count is one quick pass.
    let openings = fields_json
        .bytes()
        .filter(|b| matches!(b, b'[' | b'{'))
        .count();
    if openings > MAX_FIELDS_DEPTH {
        let depth = json_depth(&fields_json);
        if depth > MAX_FIELDS_DEPTH {
            return Err(format!(
                "{key}: fields nest {depth} levels deep, more than the {MAX_FIELDS_DEPTH} the mirror can give back"
            ));
        }
    }
    let epic_key = picked.epic_link.or_else(|| {
        let (parent_key, parent_type) = picked.parent?;
        epic_type_names
            .contains(&parent_type?.as_str())
            .then_some(parent_key)?
    });
    let links = picked.links.map(|parts| links_of(&key, parts));
    Ok(MirrorIssue {
        mirrored: MirrorFields {
            jira_id,
            issue_type: picked.issue_type.unwrap_or_default(),
            summary: picked.summary.unwrap_or_default(),
            description: picked.description,
            status: picked.status.unwrap_or_default(),
            priority: picked.priority,
            assignee: picked.assignee,
            reporter: picked.reporter,
            labels: picked.labels,
            epic_key,
            sprint: latest_sprint(picked.sprint.as_ref()),
            duedate: date(picked.duedate),
            plan_start: date(picked.plan_start),
            plan_end: date(picked.plan_end),
            created_at: picked.created.and_then(|t| jira_utc(&t)),
            updated_at: picked.updated.and_then(|t| jira_utc(&t)),
            key,
        },
        links,
        comments: picked.comments,
        fields_json,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(levels: usize) -> String {
        format!("{}{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn the_depth_limit_is_what_serde_json_reads_back() {
        assert_eq!(json_depth(&nested(MAX_FIELDS_DEPTH)), MAX_FIELDS_DEPTH);
        assert!(serde_json::from_str::<Value>(&nested(MAX_FIELDS_DEPTH)).is_ok());
        assert!(serde_json::from_str::<Value>(&nested(MAX_FIELDS_DEPTH + 1)).is_err());
        assert_eq!(json_depth(r#"{"a": "[[[{{\"]]", "b": [{"c": 1}]}"#), 3);
        assert_eq!(json_depth("1"), 0);
    }

    fn ids() -> FieldIds {
        FieldIds {
            epic_link: Some("customfield_10101".into()),
            sprint: Some("customfield_10105".into()),
            plan_start: Some("customfield_12001".into()),
            plan_end: Some("customfield_12002".into()),
        }
    }

    fn fixture(name: &str) -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/jira")
            .join(name);
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn times() {
        for (jira, utc) in [
            (
                "2026-03-05T10:15:30.000+0300",
                "2026-03-05T07:15:30.000000Z",
            ),
            (
                "2011-12-15T15:35:06.000+1300",
                "2011-12-15T02:35:06.000000Z",
            ),
            (
                "2016-04-28T05:08:48.543-07:00",
                "2016-04-28T12:08:48.543000Z",
            ),
            ("2026-03-05T10:15:30+0000", "2026-03-05T10:15:30.000000Z"),
        ] {
            let typed = jira_utc(jira);
            assert_eq!(typed.as_ref().map(Utc::as_str), Some(utc), "{jira}");
            assert_eq!(typed, Utc::parse(utc), "{jira}: the time its text says");
        }
        assert_eq!(jira_utc("yesterday"), None);
    }

    #[test]
    fn maps_the_real_search_answer() {
        let search = fixture("jira-ruby-search-issue.json");
        let issues: Vec<MirrorIssue> = search["issues"]
            .as_array()
            .unwrap()
            .iter()
            .map(|raw| map_issue(raw, &ids(), &["Epic"]).unwrap())
            .collect();
        assert_eq!(issues.len(), 11);
        let first = &issues[0];
        assert_eq!(first.mirrored.key, "SAMPLEPROJECT-13");
        assert_eq!(first.mirrored.jira_id.as_deref(), Some("10014"));
        assert_eq!(first.mirrored.summary, "blarg from in example.rb");
        assert_eq!(
            (
                first.mirrored.issue_type.as_str(),
                first.mirrored.status.as_str()
            ),
            ("Task", "Open")
        );
        assert_eq!(first.mirrored.priority.as_deref(), Some("Major"));
        assert_eq!(first.mirrored.assignee.as_deref(), Some("admin"));
        assert_eq!(
            first.mirrored.created_at.as_ref().map(Utc::as_str),
            Some("2011-12-15T02:35:06.000000Z")
        );
        assert_eq!(first.mirrored.description, None);
        assert_eq!(first.links, Some(vec![]));
        assert_eq!(first.comments, None, "the search did not ask for comments");
        let fields: Value = serde_json::from_str(&first.fields_json).unwrap();
        assert_eq!(
            fields, search["issues"][0]["fields"],
            "the whole fields object is kept"
        );
    }

    /// The typed pass over the text maps every issue as reading it as a `Value` does, odd
    /// shapes included.
    #[test]
    fn the_text_maps_as_the_value_does() {
        let search = fixture("jira-ruby-search-issue.json");
        let mut raws: Vec<Value> = search["issues"].as_array().unwrap().clone();
        raws.extend([
            json!({"id": 7, "key": "A-1", "fields": {"summary": 12.5, "description": null, "status": "Open",
                "issuetype": {"name": 3}, "priority": [1], "assignee": {"displayName": "Иван"},
                "reporter": {"name": null, "displayName": "Пётр"}, "labels": ["a", 1, null, ["b"], "c"],
                "duedate": "2026-04-01T10:00:00.000+0300", "created": "2026-03-05T10:15:30.000+0300",
                "updated": "bad", "customfield_10101": null, "customfield_10105": {"name": "S", "state": "closed"},
                "customfield_12001": 20260301, "customfield_12002": "2026-13-01",
                "issuelinks": [1, {"type": {"name": "Blocks"}}, {"id": 5, "type": {"name": "Relates"}, "outwardIssue": {}, "inwardIssue": {"key": "A-9"}},
                    {"type": "x", "outwardIssue": {"key": "A-2"}}],
                "comment": {"comments": [{"id": 1, "body": null, "author": "x"}, {"body": "no id"}, 5]},
                "parent": {"key": "A-8", "fields": {"issuetype": {"name": "Эпик"}}}}}),
            json!({"key": "A-2", "fields": {"issuelinks": {}, "comment": {"comments": {}}, "labels": "x", "parent": {"key": "A-3"}}}),
            json!({"key": "A-3", "fields": {"comment": [], "parent": {"key": "A-4", "fields": {"issuetype": {"name": "Задача"}}},
                "customfield_10101": {"key": "A-5"}, "customfield_10105": null}}),
        ]);
        for raw in &raws {
            let text = serde_json::to_string(raw).unwrap();
            let from_value = map_issue(raw, &ids(), &["Эпик", "Epic"]).unwrap();
            let from_text = map_issue_text(&text, &ids(), &["Эпик", "Epic"]).unwrap();
            assert_eq!(from_text, from_value, "{text}");
        }
        // A member twice, or custom ids that name standard fields: read as a `Value` instead.
        let twice =
            r#"{"key": "A-1", "fields": {"status": {"name": "a", "name": "b"}, "summary": "x"}}"#;
        assert_eq!(
            map_issue_text(twice, &ids(), &[]).unwrap().mirrored.status,
            "b"
        );
        let mut odd = ids();
        odd.epic_link = Some("summary".into());
        let raw = json!({"key": "A-1", "fields": {"summary": "A-7"}});
        assert_eq!(
            map_issue_text(&raw.to_string(), &odd, &[]).unwrap(),
            map_issue(&raw, &odd, &[]).unwrap()
        );
    }

    #[test]
    fn sprints_in_both_forms() {
        let server = json!([
            "com.atlassian.greenhopper.service.sprint.Sprint@1a2b[id=4,rapidViewId=4216,state=CLOSED,name=Sprint 4,startDate=2026-02-01T10:00:00.000+03:00,endDate=2026-02-14T10:00:00.000+03:00,completeDate=2026-02-14T10:00:00.000+03:00,sequence=4]",
            "com.atlassian.greenhopper.service.sprint.Sprint@3c4d[id=5,rapidViewId=4216,state=ACTIVE,name=Sprint 5, часть 1,startDate=2026-03-01T10:00:00.000+03:00,endDate=<null>,completeDate=<null>,sequence=5]"
        ]);
        assert_eq!(
            latest_sprint(Some(&server)).as_deref(),
            Some("Sprint 5, часть 1")
        );
        let closed_only = json!([
            "com.atlassian.greenhopper.service.sprint.Sprint@1[id=9,rapidViewId=1,state=CLOSED,name=Old,sequence=9]",
            "com.atlassian.greenhopper.service.sprint.Sprint@2[id=3,rapidViewId=1,state=CLOSED,name=Older,sequence=3]"
        ]);
        assert_eq!(latest_sprint(Some(&closed_only)).as_deref(), Some("Old"));
        let agile = fixture("go-jira-sprints.json");
        let values = &agile["values"];
        let expected = values
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["state"] != "closed")
            .max_by_key(|s| s["id"].as_i64())
            .map(|s| s["name"].as_str().unwrap().to_string());
        assert_eq!(latest_sprint(Some(values)), expected);
        assert_eq!(latest_sprint(Some(&json!(null))), None);
        assert_eq!(latest_sprint(Some(&json!(["garbage"]))), None);
    }

    #[test]
    fn links_comments_epics_and_dates() {
        let raw = json!({"id": "20001", "key": "AURORA-1", "fields": {
            "summary": "Первая", "status": {"name": "В работе"}, "issuetype": {"name": "Задача"},
            "assignee": {"displayName": "Иван Иванов"}, "labels": ["AWPCA", "x"],
            "duedate": "2026-04-01", "customfield_12001": "2026-03-01", "customfield_12002": "2026-03-31T00:00:00.000+0300",
            "customfield_10101": "AURORA-9",
            "issuelinks": [
                {"id": "5001", "type": {"name": "Blocks", "inward": "is blocked by", "outward": "blocks"}, "outwardIssue": {"key": "AURORA-2"}},
                {"id": "5002", "type": {"name": "Relates"}, "inwardIssue": {"key": "AURORA-3"}}],
            "comment": {"comments": [{"id": "777", "author": {"name": "ivanov"}, "body": "текст", "created": "2026-03-05T10:15:30.000+0300"}]}
        }});
        let issue = map_issue(&raw, &ids(), &["Эпик"]).unwrap();
        assert_eq!(issue.mirrored.assignee.as_deref(), Some("Иван Иванов"));
        assert_eq!(issue.mirrored.epic_key.as_deref(), Some("AURORA-9"));
        assert_eq!(issue.mirrored.duedate.as_deref(), Some("2026-04-01"));
        assert_eq!(issue.mirrored.plan_start.as_deref(), Some("2026-03-01"));
        assert_eq!(issue.mirrored.plan_end.as_deref(), Some("2026-03-31"));
        assert_eq!(issue.mirrored.labels, ["AWPCA", "x"]);
        assert_eq!(
            issue.links.unwrap(),
            [
                MirrorLink {
                    jira_id: Some("5001".into()),
                    source_key: "AURORA-1".into(),
                    target_key: "AURORA-2".into(),
                    link_type: "Blocks".into()
                },
                MirrorLink {
                    jira_id: Some("5002".into()),
                    source_key: "AURORA-3".into(),
                    target_key: "AURORA-1".into(),
                    link_type: "Relates".into()
                },
            ]
        );
        let comments = issue.comments.unwrap();
        assert_eq!(
            comments[0].created.as_deref(),
            Some("2026-03-05T10:15:30.000+0300"),
            "kept as Jira wrote it"
        );

        let next_gen = json!({"key": "AURORA-5", "fields": {"parent": {"key": "AURORA-8", "fields": {"issuetype": {"name": "Эпик"}}}}});
        assert_eq!(
            map_issue(&next_gen, &ids(), &["Эпик"])
                .unwrap()
                .mirrored
                .epic_key
                .as_deref(),
            Some("AURORA-8")
        );
        let subtask = json!({"key": "AURORA-6", "fields": {"parent": {"key": "AURORA-1", "fields": {"issuetype": {"name": "Задача"}}}}});
        assert_eq!(
            map_issue(&subtask, &ids(), &["Эпик"])
                .unwrap()
                .mirrored
                .epic_key,
            None
        );
        let bare = map_issue(&json!({"key": "AURORA-7", "fields": {}}), &ids(), &[]).unwrap();
        assert_eq!(
            (
                bare.mirrored.summary.as_str(),
                bare.links.clone(),
                bare.comments.clone()
            ),
            ("", None, None)
        );
        assert!(map_issue(&json!({"fields": {}}), &ids(), &[]).is_err());
        assert!(map_issue(&json!({"key": "A-1"}), &ids(), &[]).is_err());
        let text = r#"{"id": "5", "key": "A-1", "fields": {"summary": "Ы",  "labels": ["x"]}}"#;
        let from_text = map_issue_text(text, &ids(), &[]).unwrap();
        assert_eq!(
            from_text.fields_json, r#"{"summary": "Ы",  "labels": ["x"]}"#,
            "kept as received"
        );
        assert_eq!(from_text.mirrored.summary, "Ы");
        assert_eq!(from_text.mirrored.jira_id.as_deref(), Some("5"));
        assert!(map_issue_text("{", &ids(), &[]).is_err());
        assert!(map_issue_text(r#"{"key": "A-1", "fields": []}"#, &ids(), &[]).is_err());
    }
}
