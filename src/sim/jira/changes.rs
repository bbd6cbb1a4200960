//! Changes people and Automation rules make in Jira while the agent works, and the
//! changelog Jira keeps of every edit: each edit (the agent's `PUT /issue`, a person's, a rule's)
//! records a history of the fields it changed, and `GET /issue/{key}?expand=changelog` answers
//! with it as each deployment does.
//!
//! - Data Center: the whole changelog, oldest first, as
//!   `{"startAt": 0, "maxResults": n, "total": n, "histories": […]}` (REST 9.x "Get issue",
//!   `expand=changelog`; `ChangelogBean`); an item names its field by its name (`"field":
//!   "summary"`, `"Epic Link"` for a custom field) with `fieldtype` `jira` or `custom`.
//! - Cloud: "Returns a list of recent updates to an issue, sorted by date, starting from the
//!   most recent" (REST v2 "Get issue", `expand`), cut to the newest 100 (JRACLOUD-67458: the
//!   embedded changelog stops at 100 histories; `GET /issue/{key}/changelog` pages the rest);
//!   items carry the field's id too (`fieldId`, `ChangeDetails`).
//!
//! The knobs: `change_issue` (a person edits now), `change_issue_after` (an Automation rule or a
//! person acting after the n-th request from now, between the agent's calls), `change_issue_at`
//! (at a chosen time: applied when the first request after it arrives).

use super::*;
use serde_json::{Map, Value, json};
use std::time::Instant;

/// The newest histories Cloud embeds with `expand=changelog` (JRACLOUD-67458).
const CLOUD_EMBEDDED_HISTORIES: usize = 100;

/// When a scheduled change happens.
#[derive(Debug, Clone, Copy)]
pub(super) enum When {
    /// Once this many requests (of any kind) have arrived in all.
    Requests(usize),
    At(Instant),
}

/// A change somebody other than the agent makes to an issue.
#[derive(Debug, Clone)]
pub(super) struct Scheduled {
    pub(super) when: When,
    pub(super) key: String,
    pub(super) fields: Map<String, Value>,
    pub(super) by: String,
}

/// The names Data Center's changelog gives the custom fields the fake knows.
fn custom_name(id: &str) -> Option<&'static str> {
    match id {
        EPIC_LINK_FIELD => Some("Epic Link"),
        SPRINT_FIELD => Some("Sprint"),
        PLAN_START_FIELD => Some("Plan start"),
        PLAN_END_FIELD => Some("Plan end"),
        _ => None,
    }
}

/// `from`/`fromString` of a value: an option by id and name, a user by account id (or login) and
/// display name, text as itself.
fn change_parts(value: Option<&Value>) -> (Value, Value) {
    match value {
        None | Some(Value::Null) => (Value::Null, Value::Null),
        Some(Value::String(s)) => (Value::Null, s.clone().into()),
        Some(Value::Object(o)) => {
            let id = o
                .get("id")
                .or_else(|| o.get("accountId"))
                .or_else(|| o.get("name"))
                .or_else(|| o.get("key"))
                .cloned()
                .unwrap_or(Value::Null);
            let text = o
                .get("displayName")
                .or_else(|| o.get("name"))
                .or_else(|| o.get("key"))
                .cloned()
                .unwrap_or(Value::Null);
            (id, text)
        }
        Some(other) => (Value::Null, other.to_string().into()),
    }
}

impl StateInner {
    /// The name as stored of the Data Center user `name` names in any case, if the directory
    /// holds one (the agent's account or one added by `FakeJira::add_user`). Data Center user
    /// names are case-insensitive and REST returns the stored form (guide/jira-field-notes.md,
    /// "Who we are"; Jira's `IdentifierUtils.toLowerCase` keys users by the lower-cased name, and
    /// `UserManager.getUserByName` finds "Ivanov" for "IVANOV"): an assignee set as
    /// `{"name": "IVANOV"}` reads back as the user's own `{"name": "Ivanov", "key", …}`.
    pub(super) fn stored_user(&self, name: &str) -> Option<String> {
        std::iter::once(&self.account_name)
            .chain(&self.users)
            .find(|stored| stored.to_lowercase() == name.to_lowercase())
            .cloned()
    }

    /// A user object of this deployment for somebody named `name`.
    pub(super) fn person(&self, name: &str) -> Value {
        match self.mode {
            Mode::Cloud => json!({"accountId": format!("5b10ac8d82e05b22cc7d{:04x}", name.len()),
                                  "accountType": "atlassian", "displayName": name, "active": true}),
            Mode::DataCenter => {
                json!({"name": name, "key": name, "displayName": name, "active": true})
            }
        }
    }

    /// Sets `fields` of issue `id` as an edit by `author` does: Jira's shapes, `updated`, and a
    /// history of what changed.
    pub(super) fn set_fields(&mut self, id: u64, mut fields: Map<String, Value>, author: Value) {
        self.normalise(&mut fields);
        let cloud = self.mode == Mode::Cloud;
        let lag = self.search_lag;
        let Some(issue) = self.issues.get_mut(&id) else {
            return;
        };
        let mut items = Vec::new();
        for (name, value) in fields {
            let old = issue.fields.get(&name).cloned();
            if old.as_ref() != Some(&value) && !(old.is_none() && value.is_null()) {
                let (from, from_string) = change_parts(old.as_ref());
                let (to, to_string) = change_parts(Some(&value));
                let custom = custom_name(&name);
                let mut item = json!({"field": custom.unwrap_or(&name),
                    "fieldtype": if custom.is_some() || name.starts_with("customfield_") { "custom" } else { "jira" },
                    "from": from, "fromString": from_string, "to": to, "toString": to_string});
                if cloud {
                    item["fieldId"] = name.clone().into();
                }
                items.push(item);
            }
            match name.as_str() {
                "labels" => {
                    issue.labels = value
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|l| l.as_str().map(String::from))
                                .collect()
                        })
                        .unwrap_or_default();
                }
                "summary" => issue.summary = value.as_str().unwrap_or("").to_string(),
                _ => {}
            }
            issue.fields.insert(name, value);
        }
        issue.touch(now_ms(), lag);
        if !items.is_empty() {
            self.next_history += 1;
            let history = json!({"id": self.next_history.to_string(), "author": author,
                "created": jira_time(now_ms()), "items": items});
            if let Some(issue) = self.issues.get_mut(&id) {
                issue.histories.push(history);
            }
        }
    }

    /// The `changelog` member of `GET /issue/{key}?expand=changelog` (see the module's doc).
    pub(super) fn changelog_json(&self, issue: &Issue) -> Value {
        let total = issue.histories.len();
        let histories: Vec<Value> = match self.mode {
            Mode::DataCenter => issue.histories.clone(),
            Mode::Cloud => issue
                .histories
                .iter()
                .rev()
                .take(CLOUD_EMBEDDED_HISTORIES)
                .cloned()
                .collect(),
        };
        json!({"startAt": 0, "maxResults": histories.len(), "total": total, "histories": histories})
    }

    /// `GET /rest/api/2/issue/{key}/changelog`, Cloud only: "Returns a paginated list of all
    /// changelogs for an issue sorted by date, starting from the oldest" (platform OpenAPI,
    /// December 2025, "Get changelogs"; `startAt` default 0, `maxResults` default 100), a
    /// `PageBeanChangelog` (`self`, `nextPage`, `maxResults`, `startAt`, `total`, `isLast`,
    /// `values`). Data Center 9.x has no such resource: its REST answers an unknown path 404
    /// ("null for uri", as any other path the fake does not serve).
    pub(super) fn paged_changelog(&self, request: &Request) -> Result<Reply, Reply> {
        if self.mode == Mode::DataCenter {
            return Err(Reply::error(
                404,
                &format!("null for uri: {}/{}", self.base, request.segments.join("/")),
            ));
        }
        let id = self.find(&request.segments[4])?;
        let histories = &self.issues[&id].histories;
        let number = |name: &str, default: usize| {
            request
                .param(name)
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(default)
        };
        let start = number("startAt", 0);
        // The most a page gives whatever is asked (Atlassian: "set maxResults to a large number …
        // if the returned value of maxResults is less than the requested value, the returned
        // value is the maximum"): 100, as the default.
        let max = number("maxResults", CLOUD_EMBEDDED_HISTORIES).clamp(1, CLOUD_EMBEDDED_HISTORIES);
        let values: Vec<Value> = histories.iter().skip(start).take(max).cloned().collect();
        let last = start + values.len() >= histories.len();
        let path = format!(
            "{}/rest/api/2/issue/{}/changelog",
            self.base, request.segments[4]
        );
        let mut page = json!({"self": format!("{path}?startAt={start}&maxResults={max}"),
            "maxResults": max, "startAt": start, "total": histories.len(), "isLast": last,
            "values": values});
        if !last {
            page["nextPage"] = format!("{path}?startAt={}&maxResults={max}", start + max).into();
        }
        Ok(Reply::json(200, page))
    }

    /// Applies the scheduled changes that are due once `requests` requests have arrived.
    pub(super) fn apply_due_changes(&mut self, requests: usize) {
        let now = Instant::now();
        let (due, later): (Vec<Scheduled>, Vec<Scheduled>) =
            std::mem::take(&mut self.timed_changes)
                .into_iter()
                .partition(|c| match c.when {
                    When::Requests(n) => requests >= n,
                    When::At(at) => now >= at,
                });
        self.timed_changes = later;
        for change in due {
            if let Some(id) = self.by_key.get(&change.key).copied() {
                let author = self.person(&change.by);
                self.set_fields(id, change.fields, author);
            }
        }
    }
}

impl FakeJira {
    /// A person (`by`) edits an issue now, in Jira's UI: `fields` as an edit's `fields` would
    /// set them (a priority by `{"name"}`), with a history in the changelog.
    pub fn change_issue(&self, key: &str, fields: Value, by: &str) {
        let mut state = lock(&self.state);
        let id = state.by_key[key];
        let author = state.person(by);
        state.set_fields(id, fields.as_object().cloned().unwrap_or_default(), author);
    }

    /// Somebody (`by`: a person, an Automation rule) edits an issue once `n` more requests have
    /// arrived: between two of the agent's calls, e.g. its read and its write.
    pub fn change_issue_after(&self, n: usize, key: &str, fields: Value, by: &str) {
        let so_far: usize = lock(&self.state).calls.values().sum();
        self.schedule(When::Requests(so_far + n), key, fields, by);
    }

    /// Somebody edits an issue at `at`: applied when the first request after it arrives.
    pub fn change_issue_at(&self, at: Instant, key: &str, fields: Value, by: &str) {
        self.schedule(When::At(at), key, fields, by);
    }

    fn schedule(&self, when: When, key: &str, fields: Value, by: &str) {
        lock(&self.state).timed_changes.push(Scheduled {
            when,
            key: key.to_string(),
            fields: fields.as_object().cloned().unwrap_or_default(),
            by: by.to_string(),
        });
    }

    /// A user of the directory named `name` as stored (Data Center): an assignee set by any
    /// case of it reads back in this form (see `StateInner::stored_user`).
    pub fn add_user(&self, name: &str) {
        lock(&self.state).users.push(name.to_string());
    }

    /// The histories of an issue's changelog, oldest first.
    pub fn histories(&self, key: &str) -> Vec<Value> {
        let state = lock(&self.state);
        state
            .by_key
            .get(key)
            .map(|id| state.issues[id].histories.clone())
            .unwrap_or_default()
    }
}
