//! Issue links: the link types of a real Jira Server and links made from the inward issue.

use super::*;
use serde_json::{Value, json};

/// A link as Jira stores it: `source` (the request's `inwardIssue`) `<outward>` `target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkView {
    pub id: String,
    pub type_name: String,
    pub source: String,
    pub target: String,
}

/// `(id, name, inward, outward)`: the link types of a real Jira Server
/// (`go-jira-all_issuelinktypes.json`).
pub const LINK_TYPES: &[(&str, &str, &str, &str)] = &[
    ("12310361", "Blocked", "Blocked", "Blocked"),
    ("10032", "Blocker", "is blocked by", "blocks"),
    ("12310460", "Child-Issue", "is a child of", "is a parent of"),
    ("10020", "Cloners", "is cloned by", "is a clone of"),
    ("12310060", "Container", "Is contained by", "contains"),
    ("12310461", "Dependency", "Dependency", "Dependency"),
    ("12310360", "Dependent", "Dependent", "Dependent"),
    ("12310000", "Duplicate", "is duplicated by", "duplicates"),
    ("12310010", "Incorporates", "is part of", "incorporates"),
    (
        "12310462",
        "Parent Feature",
        "Parent Feature",
        "Parent Feature",
    ),
    ("12310560", "Problem/Incident", "is caused by", "causes"),
    ("10030", "Reference", "is related to", "relates to"),
    ("12310050", "Regression", "is broken by", "breaks"),
    ("12310260", "Related", "is related to", "relates to"),
    ("12310040", "Required", "is required by", "requires"),
    ("12310051", "Supercedes", "is superceded by", "supercedes"),
    ("10001", "dependent", "is depended upon by", "depends upon"),
];

#[derive(Debug)]
pub(super) struct Link {
    pub(super) id: u64,
    pub(super) kind: usize,
    pub(super) source: String,
    pub(super) target: String,
}

impl StateInner {
    pub(super) fn issue_ref(&self, key: &str) -> Value {
        let Some(issue) = self.by_key.get(key).map(|id| &self.issues[id]) else {
            return json!({"key": key});
        };
        let (status_id, status) = STATUSES[issue.status];
        json!({"id": issue.id.to_string(), "key": issue.key,
               "self": format!("{}/rest/api/2/issue/{}", self.base, issue.id),
               "fields": {"summary": issue.summary, "status": {"id": status_id, "name": status},
                          "issuetype": issue.fields.get("issuetype").cloned().unwrap_or(Value::Null)}})
    }

    pub(super) fn link_json(&self, link: &Link, from: &str) -> Value {
        let (id, name, inward, outward) = LINK_TYPES[link.kind];
        let mut value = json!({
            "id": link.id.to_string(),
            "self": format!("{}/rest/api/2/issueLink/{}", self.base, link.id),
            "type": {"id": id, "name": name, "inward": inward, "outward": outward,
                     "self": format!("{}/rest/api/2/issueLinkType/{id}", self.base)},
        });
        if link.source == from {
            value["outwardIssue"] = self.issue_ref(&link.target);
        } else {
            value["inwardIssue"] = self.issue_ref(&link.source);
        }
        value
    }

    pub(super) fn create_link(&mut self, request: &Request) -> Result<Reply, Reply> {
        let body = Self::body_json(request)?;
        let type_name = body["type"]["name"].as_str();
        let type_id = body["type"]["id"].as_str();
        let kind = LINK_TYPES
            .iter()
            .position(|(id, name, _, _)| Some(*name) == type_name || Some(*id) == type_id)
            .ok_or_else(|| {
                Reply::error(
                    404,
                    &format!(
                        "No issue link type with name '{}' found.",
                        type_name.or(type_id).unwrap_or("")
                    ),
                )
            })?;
        let source = body["inwardIssue"]["key"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let target = body["outwardIssue"]["key"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let source_id = self.find(&source)?;
        let target_id = self.find(&target)?;
        let id = self.next_link;
        self.next_link += 1;
        self.links.insert(
            id,
            Link {
                id,
                kind,
                source,
                target,
            },
        );
        let (now, lag) = (now_ms(), self.search_lag);
        for issue in [source_id, target_id] {
            let issue = self.issues.get_mut(&issue).expect("found");
            issue.links.push(id);
            issue.touch(now, lag);
        }
        Ok(Reply::empty(201))
    }

    pub(super) fn link_types(&self) -> Reply {
        let types: Vec<Value> = LINK_TYPES
            .iter()
            .map(|(id, name, inward, outward)| {
                json!({"id": id, "name": name, "inward": inward, "outward": outward,
                       "self": format!("{}/rest/api/2/issueLinkType/{id}", self.base)})
            })
            .collect();
        Reply::json(200, json!({"issueLinkTypes": types}))
    }
}

impl FakeJira {
    pub fn links(&self) -> Vec<LinkView> {
        lock(&self.state)
            .links
            .values()
            .map(|l| LinkView {
                id: l.id.to_string(),
                type_name: LINK_TYPES[l.kind].1.to_string(),
                source: l.source.clone(),
                target: l.target.clone(),
            })
            .collect()
    }
}
