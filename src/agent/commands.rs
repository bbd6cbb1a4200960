//! What each command does in Jira (system.md §5): `ensure_issue`, `transition`, `link`,
//! `comment`, `refresh`. Every write that may have happened without an answer (timeout, dropped
//! connection, 5xx) is checked against Jira before it is made again, and so is every write of a
//! redelivered command (delivery > 1): a create looks for the issue it may already have made, a
//! transition reads the status, a link and a comment look for themselves.

use super::jira_api::{Deployment, Jira, JiraError, SearchPage};
use super::jql;
use crate::domain::settings::{IssueTypes, Pacing};
use crate::protocol::ClaimedCommand;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// The settings a claim answer hands the agent (the hub's agent view), read leniently: a member
/// that does not parse keeps its default.
#[derive(Debug, Clone, Default)]
pub(crate) struct AgentSettings {
    pub project_key: Option<String>,
    pub field_ids: BTreeMap<String, String>,
    pub issue_types: Option<IssueTypes>,
    pub priority_map: BTreeMap<String, String>,
    pub link_types: BTreeMap<String, String>,
    pub transitions_map: BTreeMap<String, String>,
    pub pacing: Pacing,
    /// The legacy fallback board of commands enqueued before schema v4.
    pub board_id: Option<i64>,
}

impl AgentSettings {
    pub(crate) fn from_value(value: &Value) -> AgentSettings {
        fn member<T: serde::de::DeserializeOwned + Default>(value: &Value, key: &str) -> T {
            match value.get(key) {
                None | Some(Value::Null) => T::default(),
                Some(v) => serde_json::from_value(v.clone()).unwrap_or_else(|e| {
                    tracing::warn!(setting = key, error = %e, "a setting from the hub is not understood; its default is used");
                    T::default()
                }),
            }
        }
        let mut pacing: Pacing = Pacing::default();
        if let Some(Value::Object(given)) = value.get("pacing") {
            let mut merged = serde_json::to_value(&pacing)
                .ok()
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default();
            for (k, v) in given {
                merged.insert(k.clone(), v.clone());
            }
            pacing = serde_json::from_value(Value::Object(merged)).unwrap_or_default();
        }
        AgentSettings {
            project_key: member(value, "project_key"),
            field_ids: member(value, "field_ids"),
            issue_types: member(value, "issue_types"),
            priority_map: member(value, "priority_map"),
            link_types: member(value, "link_types"),
            transitions_map: member(value, "transitions_map"),
            pacing,
            board_id: value.get("board_id").and_then(|b| {
                b.as_i64()
                    .or_else(|| b.as_str().and_then(|s| s.trim().parse().ok()))
            }),
        }
    }
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Done(Value),
    Failed(String),
    /// The agent is stopping: nothing to report, the hub hands the command out again.
    Stopped,
    /// The command goes back to the hub unfinished (Jira cannot be reached, or the lease would
    /// lapse): `unreachable` says which; see `agent::give_back`.
    GiveBack {
        reason: String,
        unreachable: bool,
    },
}

/// A failure inside a command: a reason for the report, or a stop.
enum Fail {
    Reason(String),
    Stopped,
    GiveBack { reason: String, unreachable: bool },
}

impl From<JiraError> for Fail {
    fn from(error: JiraError) -> Self {
        match error {
            JiraError::Stopped => Fail::Stopped,
            JiraError::Unreachable(reason) => Fail::GiveBack {
                reason,
                unreachable: true,
            },
            JiraError::GiveBack(reason) => Fail::GiveBack {
                reason,
                unreachable: false,
            },
            JiraError::Refused { message, .. } => Fail::Reason(message),
            other => Fail::Reason(other.to_string()),
        }
    }
}

fn fail(message: impl Into<String>) -> Fail {
    Fail::Reason(message.into())
}

/// Runs commands against Jira with the settings the hub gave.
pub(crate) struct Executor<'a> {
    pub jira: &'a mut Jira,
    pub settings: &'a AgentSettings,
    pub page_size: u32,
    pub max_retries: u32,
    /// `search_lag_seconds`; `None`: 60 s on Cloud, 0 on Server/DC.
    pub search_lag: Option<Duration>,
}

impl Executor<'_> {
    /// Runs one command. `on_page` receives each page of a refresh as Jira returns it.
    pub(crate) fn execute(
        &mut self,
        command: &ClaimedCommand,
        on_page: &mut dyn FnMut(SearchPage) -> Result<(), JiraError>,
    ) -> Outcome {
        let params = &command.params;
        let result = match command.command_type.as_str() {
            "ensure_issue" => self.ensure_issue(command),
            "transition" => self.transition(params),
            "link" => self.link(params),
            "comment" => self.comment(params, command.delivery > 1),
            "refresh" => self.refresh(params, on_page),
            other => Err(fail(format!("неизвестный тип команды {other:?}"))),
        };
        match result {
            Ok(value) => Outcome::Done(value),
            Err(Fail::Reason(message)) => Outcome::Failed(message),
            Err(Fail::Stopped) => Outcome::Stopped,
            Err(Fail::GiveBack {
                reason,
                unreachable,
            }) => Outcome::GiveBack {
                reason,
                unreachable,
            },
        }
    }

    fn lag(&mut self) -> Result<Duration, Fail> {
        Ok(match self.search_lag {
            Some(lag) => lag,
            None => match self.jira.deployment()? {
                Deployment::Cloud => Duration::from_secs(60),
                Deployment::Server => Duration::ZERO,
            },
        })
    }

    // ---- ensure_issue ----

    fn ensure_issue(&mut self, command: &ClaimedCommand) -> Result<Value, Fail> {
        let params = &command.params;
        let sprint = text(params, "sprint");
        if let Some(key) = text(params, "key") {
            let fields = self.issue_fields(params, false)?;
            if !fields.is_empty() {
                let path = format!("/rest/api/2/issue/{}", jql::encode(&key));
                self.idempotent_write("PUT", &path, &json!({"fields": fields}))?;
            }
            if let Some(sprint) = &sprint {
                self.add_to_sprint(&key, sprint, params)?;
            }
            return Ok(json!({"key": key, "created": false}));
        }
        let summary = text(params, "summary")
            .ok_or_else(|| fail("summary: обязательное поле отсутствует"))?;
        let labels = strings(params, "labels");
        let fields = self.issue_fields(params, true)?;
        let since_ms = since_ms(command.enqueued_at.as_deref());
        let mut check = command.delivery > 1;
        let mut lost_at: Option<Duration> = None;
        let mut tries = 0u32;
        loop {
            if check {
                let lag_until = match lost_at {
                    Some(at) => at + self.lag()?,
                    None => self.jira.waits().now(),
                };
                loop {
                    let found = self.find_created(&summary, &labels, since_ms)?;
                    match found.as_slice() {
                        [] => {}
                        [key] => {
                            tracing::info!(
                                command = command.id,
                                "the issue was already created: no second create"
                            );
                            if let Some(sprint) = &sprint {
                                self.add_to_sprint(key, sprint, params)?;
                            }
                            return Ok(json!({"key": key, "created": false}));
                        }
                        several => {
                            return Err(fail(format!(
                                "этому созданию соответствуют несколько задач: {}",
                                several.join(", ")
                            )));
                        }
                    }
                    let now = self.jira.waits().now();
                    if now >= lag_until {
                        break;
                    }
                    // Cloud's search catches up with writes within seconds to minutes.
                    let wait = Duration::from_secs(1).min(lag_until - now);
                    if !self.jira.waits().sleep(wait) {
                        return Err(Fail::Stopped);
                    }
                }
            }
            match self
                .jira
                .write("POST", "/rest/api/2/issue", &json!({"fields": fields}))
            {
                Ok(reply) => {
                    let created: Value = super::jira_api::parse(&reply)?;
                    let key = created
                        .get("key")
                        .and_then(Value::as_str)
                        .ok_or_else(|| fail("Jira создала задачу, но не назвала её ключ"))?
                        .to_string();
                    if let Some(sprint) = &sprint {
                        self.add_to_sprint(&key, sprint, params)
                            .map_err(|e| match e {
                                Fail::Reason(r) | Fail::GiveBack { reason: r, .. } => {
                                    fail(format!("{key} создана, но {r}"))
                                }
                                Fail::Stopped => Fail::Stopped,
                            })?;
                    }
                    return Ok(json!({"key": key, "created": true}));
                }
                Err(JiraError::Ambiguous(error)) => {
                    tries += 1;
                    tracing::warn!(command = command.id, %error, "a create got no answer: checking Jira before trying again");
                    if tries > self.max_retries {
                        return Err(fail(format!(
                            "Jira не ответила на создание задачи: {error}"
                        )));
                    }
                    check = true;
                    lost_at = Some(self.jira.waits().now());
                }
                Err(other) => return Err(other.into()),
            }
        }
    }

    /// Keys of this user's recent issues with this summary and every one of these labels.
    fn find_created(
        &mut self,
        summary: &str,
        labels: &[String],
        since_ms: i64,
    ) -> Result<Vec<String>, Fail> {
        let project = self.project_key()?;
        let query = jql::duplicates(&project, since_ms, labels.first().map(String::as_str));
        let issues = self.jira.search_values(&query, "summary,labels")?;
        Ok(issues
            .iter()
            .filter(|issue| {
                let fields = &issue["fields"];
                let has: Vec<&str> = fields["labels"]
                    .as_array()
                    .map(|l| l.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                fields["summary"].as_str() == Some(summary)
                    && labels.iter().all(|l| has.contains(&l.as_str()))
            })
            .filter_map(|issue| issue["key"].as_str().map(String::from))
            .collect())
    }

    fn project_key(&self) -> Result<String, Fail> {
        self.settings
            .project_key
            .clone()
            .ok_or_else(|| fail("project_key: не задан в настройках хаба"))
    }

    /// The `fields` of a create or an edit, from the command's params and the settings.
    fn issue_fields(&mut self, params: &Value, create: bool) -> Result<Map<String, Value>, Fail> {
        let settings = self.settings;
        let mut fields = Map::new();
        if create {
            fields.insert("project".into(), json!({"key": self.project_key()?}));
            let logical = text(params, "issue_type")
                .ok_or_else(|| fail("issue_type: обязательное поле отсутствует"))?;
            let issue_type = settings
                .issue_types
                .as_ref()
                .and_then(|t| t.get(&logical))
                .ok_or_else(|| fail(format!("issue_type: {logical:?} нет в issue_types")))?;
            let type_ref = match &issue_type.id {
                Some(id) if !id.is_empty() => json!({"id": id}),
                _ => json!({"name": issue_type.name}),
            };
            fields.insert("issuetype".into(), type_ref);
        }
        for key in ["summary", "description", "duedate"] {
            if let Some(value) = params.get(key).filter(|v| !v.is_null()) {
                fields.insert(key.into(), value.clone());
            }
        }
        if let Some(labels) = params.get("labels").filter(|v| v.is_array()) {
            fields.insert("labels".into(), labels.clone());
        }
        if let Some(priority) = text(params, "priority") {
            let name = settings
                .priority_map
                .get(&priority)
                .cloned()
                .unwrap_or(priority);
            fields.insert("priority".into(), json!({"name": name}));
        }
        if let Some(assignee) = text(params, "assignee") {
            let user = match self.jira.deployment()? {
                Deployment::Cloud => json!({"accountId": assignee}),
                Deployment::Server => json!({"name": assignee}),
            };
            fields.insert("assignee".into(), user);
        }
        if let Some(epic) = text(params, "epic_key") {
            match settings.field_ids.get("epic_link") {
                Some(field) => fields.insert(field.clone(), json!(epic)),
                None => fields.insert("parent".into(), json!({"key": epic})),
            };
        }
        for key in ["plan_start", "plan_end"] {
            if let Some(date) = text(params, key) {
                let field = settings.field_ids.get(key).ok_or_else(|| {
                    fail(format!("{key}: field_ids.{key} не задан в настройках хаба"))
                })?;
                fields.insert(field.clone(), json!(date));
            }
        }
        Ok(fields)
    }

    /// A write that may be repeated as it is (PUT of fields, adding to a sprint).
    fn idempotent_write(&mut self, method: &str, path: &str, body: &Value) -> Result<(), Fail> {
        let mut tries = 0;
        loop {
            match self.jira.write(method, path, body) {
                Ok(_) => return Ok(()),
                Err(JiraError::Ambiguous(error)) if tries < self.max_retries => {
                    tracing::warn!(%error, "a write got no answer; it is safe to repeat");
                    tries += 1;
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Puts the issue into the named active or future sprint of the command's board (else the
    /// legacy `board_id` setting).
    fn add_to_sprint(&mut self, key: &str, sprint: &str, params: &Value) -> Result<(), Fail> {
        let board = params
            .get("board_id")
            .and_then(|b| {
                b.as_i64()
                    .or_else(|| b.as_str().and_then(|s| s.parse().ok()))
            })
            .or(self.settings.board_id)
            .ok_or_else(|| {
                fail(format!(
                    "sprint {sprint:?}: нет доски, на которой его искать (board_id)"
                ))
            })?;
        let mut start_at = 0u64;
        let sprint_id = loop {
            let page: Value = self.jira.read_json(&format!(
                "/rest/agile/1.0/board/{board}/sprint?state=active,future&startAt={start_at}&maxResults=50"
            ))?;
            let values = page["values"].as_array().cloned().unwrap_or_default();
            if let Some(found) = values.iter().find(|s| s["name"].as_str() == Some(sprint)) {
                break found["id"].clone();
            }
            let is_last = page["isLast"].as_bool().unwrap_or(true);
            if is_last || values.is_empty() {
                return Err(fail(format!(
                    "спринта {sprint:?} нет среди активных и будущих спринтов доски {board}"
                )));
            }
            start_at += values.len() as u64;
        };
        let id = match &sprint_id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        self.idempotent_write(
            "POST",
            &format!("/rest/agile/1.0/sprint/{}/issue", jql::encode(&id)),
            &json!({"issues": [key]}),
        )
    }

    // ---- transition ----

    fn transition(&mut self, params: &Value) -> Result<Value, Fail> {
        let key = text(params, "key").ok_or_else(|| fail("key: обязательное поле отсутствует"))?;
        let status =
            text(params, "status").ok_or_else(|| fail("status: обязательное поле отсутствует"))?;
        let issue_path = format!("/rest/api/2/issue/{}", jql::encode(&key));
        let mut tries = 0;
        loop {
            let issue: Value = self
                .jira
                .read_json(&format!("{issue_path}?fields=status"))?;
            if issue["fields"]["status"]["name"].as_str() == Some(status.as_str()) {
                return Ok(json!({"status": status}));
            }
            let id = self
                .settings
                .transitions_map
                .get(&status)
                .ok_or_else(|| fail(format!("status: {status:?} нет в transitions_map")))?;
            match self.jira.write(
                "POST",
                &format!("{issue_path}/transitions"),
                &json!({"transition": {"id": id}}),
            ) {
                Ok(_) => return Ok(json!({"status": status})),
                Err(JiraError::Ambiguous(error)) if tries < self.max_retries => {
                    tracing::warn!(%error, "a transition got no answer: reading the status again");
                    tries += 1;
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    // ---- link ----

    fn link(&mut self, params: &Value) -> Result<Value, Fail> {
        let from =
            text(params, "from").ok_or_else(|| fail("from: обязательное поле отсутствует"))?;
        let to = text(params, "to").ok_or_else(|| fail("to: обязательное поле отсутствует"))?;
        let logical =
            text(params, "type").ok_or_else(|| fail("type: обязательное поле отсутствует"))?;
        let name = self
            .settings
            .link_types
            .get(&logical)
            .cloned()
            .ok_or_else(|| fail(format!("type: {logical:?} нет в link_types")))?;
        let mut tries = 0;
        loop {
            if let Some(id) = self.find_link(&from, &to, &name)? {
                return Ok(json!({"link_id": id}));
            }
            if tries > self.max_retries {
                return Err(fail("связь записана, но Jira её не показывает"));
            }
            tries += 1;
            let body = json!({"type": {"name": name}, "inwardIssue": {"key": from}, "outwardIssue": {"key": to}});
            match self.jira.write("POST", "/rest/api/2/issueLink", &body) {
                Ok(_) => {}
                Err(JiraError::Ambiguous(error)) => {
                    tracing::warn!(%error, "a link got no answer: looking for it before trying again");
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    fn find_link(&mut self, from: &str, to: &str, name: &str) -> Result<Option<Value>, Fail> {
        let issue: Value = self.jira.read_json(&format!(
            "/rest/api/2/issue/{}?fields=issuelinks",
            jql::encode(from)
        ))?;
        Ok(issue["fields"]["issuelinks"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|link| {
                link["type"]["name"].as_str() == Some(name)
                    && link["outwardIssue"]["key"].as_str() == Some(to)
            })
            .map(|link| link["id"].clone()))
    }

    // ---- comment ----

    fn comment(&mut self, params: &Value, redelivered: bool) -> Result<Value, Fail> {
        let key = text(params, "key").ok_or_else(|| fail("key: обязательное поле отсутствует"))?;
        let body = params
            .get("body")
            .and_then(Value::as_str)
            .ok_or_else(|| fail("body: обязательное поле отсутствует"))?
            .to_string();
        let path = format!("/rest/api/2/issue/{}/comment", jql::encode(&key));
        let mut check = redelivered;
        let mut tries = 0;
        loop {
            if check && let Some(id) = self.find_comment(&path, &body)? {
                return Ok(json!({"comment_id": id}));
            }
            match self.jira.write("POST", &path, &json!({"body": body})) {
                Ok(reply) => {
                    let created: Value = super::jira_api::parse(&reply)?;
                    return Ok(json!({"comment_id": created["id"].clone()}));
                }
                Err(JiraError::Ambiguous(error)) if tries < self.max_retries => {
                    tracing::warn!(%error, "a comment got no answer: looking for it before trying again");
                    tries += 1;
                    check = true;
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// The id of a comment of this user with this body (trimmed), if there is one.
    fn find_comment(&mut self, path: &str, body: &str) -> Result<Option<Value>, Fail> {
        let me = self.jira.me()?;
        let cloud = self.jira.deployment()? == Deployment::Cloud;
        let mut start_at = 0u64;
        loop {
            let page: Value = self
                .jira
                .read_json(&format!("{path}?startAt={start_at}&maxResults=100"))?;
            let comments = page["comments"].as_array().cloned().unwrap_or_default();
            for comment in &comments {
                let author = &comment["author"];
                let mine = if cloud {
                    me.account_id.is_some()
                        && author["accountId"].as_str() == me.account_id.as_deref()
                } else {
                    me.name.is_some() && author["name"].as_str() == me.name.as_deref()
                };
                if mine && comment["body"].as_str().map(str::trim) == Some(body.trim()) {
                    return Ok(Some(comment["id"].clone()));
                }
            }
            start_at += comments.len() as u64;
            let total = page["total"].as_u64().unwrap_or(start_at);
            if comments.is_empty() || start_at >= total {
                return Ok(None);
            }
        }
    }

    // ---- refresh ----

    fn refresh(
        &mut self,
        params: &Value,
        on_page: &mut dyn FnMut(SearchPage) -> Result<(), JiraError>,
    ) -> Result<Value, Fail> {
        let query =
            text(params, "jql").ok_or_else(|| fail("jql: обязательное поле отсутствует"))?;
        let total = self.jira.search(&query, "*all", self.page_size, on_page)?;
        let mut boards = Vec::new();
        for board in params["boards"].as_array().into_iter().flatten() {
            let Some(id) = board.as_i64() else { continue };
            match self
                .jira
                .read_json::<Value>(&format!("/rest/agile/1.0/board/{id}"))
            {
                Ok(found) => boards.push(json!({"id": id, "type": found["type"]})),
                Err(JiraError::Refused { status, message }) => {
                    tracing::warn!(board = id, status, %message, "a board could not be read; its type is not reported");
                }
                Err(other) => return Err(other.into()),
            }
        }
        Ok(json!({"total": total, "boards": boards}))
    }
}

/// A non-empty string param.
fn text(params: &Value, key: &str) -> Option<String> {
    params
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
}

fn strings(params: &Value, key: &str) -> Vec<String> {
    params[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// Where a duplicate search starts: 10 minutes before the batch was enqueued (Jira's clock is
/// not the hub's), else 24 hours ago.
fn since_ms(enqueued_at: Option<&str>) -> i64 {
    let now = time::OffsetDateTime::now_utc();
    let since = enqueued_at
        .and_then(crate::domain::time::parse_utc)
        .map(|at| at - time::Duration::minutes(10))
        .unwrap_or(now - time::Duration::hours(24));
    (since.unix_timestamp_nanos() / 1_000_000) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_from_the_hubs_agent_view() {
        let view = json!({"project_key": "AURORA", "field_ids": {"epic_link": "customfield_10101"},
            "issue_types": {"task": {"name": "Задача", "id": "10002"}, "epic": {"name": "Эпик", "id": null}},
            "priority_map": {"high": "Высокий"}, "link_types": {"blocks": "Blocks"},
            "transitions_map": {"Готово": "31"}, "pacing": {"min_interval_ms": 50},
            "backup_keep": 10, "auto_refresh_minutes": null, "board_id": 4216});
        let settings = AgentSettings::from_value(&view);
        assert_eq!(settings.project_key.as_deref(), Some("AURORA"));
        assert_eq!(settings.pacing.min_interval_ms, 50);
        assert_eq!(
            settings.pacing.max_deliveries, 3,
            "missing members keep defaults"
        );
        assert_eq!(settings.board_id, Some(4216));
        assert_eq!(
            settings.issue_types.unwrap().task.id.as_deref(),
            Some("10002")
        );
        let broken = AgentSettings::from_value(&json!({"link_types": [1], "board_id": "77"}));
        assert!(broken.link_types.is_empty());
        assert_eq!(broken.board_id, Some(77));
    }

    #[test]
    fn duplicate_search_window() {
        let since = since_ms(Some("2026-11-29T10:10:00Z"));
        let at = crate::domain::time::parse_utc("2026-11-29T10:00:00Z").unwrap();
        assert_eq!(since, (at.unix_timestamp_nanos() / 1_000_000) as i64);
        let day_ago = since_ms(None);
        let now_ms = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
        assert!((now_ms - day_ago - 86_400_000).abs() < 5_000);
    }
}
