//! Creating an issue or finding the one an earlier delivery made, its fields, its marker and its
//! sprint.

use super::looks::{POSTED_MARGIN_MS, PropertyReader};
use super::{Executor, Fail, MARKER_KEY, fail, fail_words, id_number, marker, text};
use crate::agent::answer::Need;
use crate::agent::jira_api::{Deployment, JiraError};
use crate::agent::jql;
use crate::agent::net::Reply;
use crate::protocol::ClaimedCommand;
use serde_json::{Map, Value, json};

impl Executor<'_> {
    pub(super) fn ensure_issue(&mut self, command: &ClaimedCommand) -> Result<Value, Fail> {
        let params = &command.params;
        let sprint = text(params, "sprint");
        if let Some(key) = text(params, "key") {
            let mut fields = self.issue_fields(params, false)?;
            // An edit adds labels (`update.labels[{add}]`): `fields.labels` would replace the
            // set and drop the labels of other projects and teams.
            let labels = fields.remove("labels");
            if let Some(conflict) = self.checked_edit(&key, params, &mut fields)? {
                return Ok(conflict);
            }
            let mut body = Map::new();
            if !fields.is_empty() {
                body.insert("fields".into(), Value::Object(fields));
            }
            let adds: Vec<Value> = labels
                .as_ref()
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|label| json!({"add": label}))
                .collect();
            if !adds.is_empty() {
                body.insert("update".into(), json!({"labels": adds}));
            }
            if !body.is_empty() {
                let path = format!("/rest/api/2/issue/{}", jql::encode(&key));
                self.idempotent_write("PUT", &path, &Value::Object(body))?;
            }
            if let Some(sprint) = &sprint {
                self.add_to_sprint(&key, sprint, params)?;
            }
            return Ok(json!({"key": key, "created": false}));
        }
        let summary = text(params, "summary")
            .ok_or_else(|| fail("summary: обязательное поле отсутствует"))?;
        let fields = self.issue_fields(params, true)?;
        if command.delivery > 1
            && let Some(key) = self.already_created(command, &summary)?
        {
            tracing::info!(
                command = command.id,
                %key,
                "the issue was already created by an earlier delivery: no second create"
            );
            if let Some(sprint) = &sprint {
                self.add_to_sprint(&key, sprint, params)?;
            }
            return Ok(json!({"key": key, "created": false}));
        }
        let marker = marker(command, self.agent);
        let body = json!({"fields": fields, "properties": [{"key": MARKER_KEY, "value": marker}]});
        // The POST's time on Jira's clock (the skew is known from `serverInfo`): a look after a
        // lost answer reads only what was created since.
        let posted_ms = self.jira.jira_now_ms()?;
        let key = match self.jira.write_expecting(
            "POST",
            "/rest/api/2/issue",
            &body,
            Need::Member("key"),
        ) {
            Ok(reply) => self.created(&reply, &marker)?,
            Err(JiraError::Ambiguous(error)) => {
                let since_ms = posted_ms - POSTED_MARGIN_MS;
                // Never sent again in this delivery, whatever a search shows: a search may lag
                // (Cloud, a Data Center cluster), so what it does not find is no proof.
                match self
                    .look_after_503(|executor| executor.find_newest_marked(command, since_ms))?
                {
                    Some(key) => {
                        tracing::info!(command = command.id, %key, "a create answered 503 is in Jira: it is done");
                        key
                    }
                    None => self.lost_create(command, &error, since_ms)?,
                }
            }
            Err(error) => return Err(error.into()),
        };
        if let Some(sprint) = &sprint {
            self.add_to_sprint(&key, sprint, params)
                .map_err(|e| match e {
                    Fail::Reason(r) => fail(format!("{key} создана, но {r}")),
                    // The issue is marked: the next delivery takes it and adds it to the sprint.
                    Fail::Release(r) => Fail::Release(format!("{key} создана, но {r}")),
                    Fail::GiveBack { reason, held } => Fail::GiveBack {
                        reason: format!("{key} создана, но {reason}"),
                        held,
                    },
                    Fail::Stopped => Fail::Stopped,
                })?;
        }
        Ok(json!({"key": key, "created": true}))
    }

    /// A create's `properties` are documented on Cloud and on Server since 7.2 ("properties can
    /// be set at issue create or update time", REST 7.2.8's Issue Update schema); an older
    /// server's `IssueUpdateBean` ignores the member (`@JsonIgnoreProperties(ignoreUnknown =
    /// true)`), so there (or when the version is unknown) the marker is also PUT right after the
    /// create: a PUT of the same value is idempotent (`PUT
    /// /rest/api/2/issue/{key}/properties/{propertyKey}`). A failure here is logged, not the
    /// command's: the issue exists.
    fn ensure_marker(&mut self, key: &str, marker: &Value) {
        if self.jira.deployment().ok() == Some(Deployment::Cloud)
            || self.jira.create_properties_kept() == Some(true)
        {
            return;
        }
        let path = format!(
            "/rest/api/2/issue/{}/properties/{MARKER_KEY}",
            jql::encode(key)
        );
        // A server's version does not prove that its create keeps `properties` (a plugin, a
        // proxy that rewrites bodies, an old `IssueUpdateBean`: docs/jira-field-notes.md,
        // "Properties in the create body"), so the first create of a run reads its marker back
        // once; a server seen to keep it is not asked again, one seen to drop
        // it gets the marker PUT after every create.
        if self.jira.create_properties_kept().is_none()
            && !self.jira.may_ignore_create_properties().unwrap_or(true)
        {
            match self.property(&path) {
                Ok(Some(found)) if found == *marker => {
                    self.jira.set_create_properties_kept(true);
                    return;
                }
                Ok(_) => {
                    tracing::warn!(%key, "Jira did not keep the marker sent with the create: it is set after each create from now on");
                    self.jira.set_create_properties_kept(false);
                }
                Err(error) => {
                    let error = fail_words(error);
                    tracing::warn!(%key, %error, "the created issue's marker could not be read back; it is set again");
                }
            }
        }
        if let Err(error) = self.idempotent_write("PUT", &path, marker) {
            let error = fail_words(error);
            tracing::warn!(%key, %error, "the created issue's marker could not be set");
        }
    }

    /// The key of a create Jira answered, its marker made sure of.
    fn created(&mut self, reply: &Reply, marker: &Value) -> Result<String, Fail> {
        let created: Value = crate::agent::jira_api::parse(reply)?;
        if let Some(id) = id_number(&created["id"]) {
            self.jira.note_written(id);
        }
        let key = created
            .get("key")
            .and_then(Value::as_str)
            .ok_or_else(|| fail("Jira создала задачу, но не назвала её ключ"))?
            .to_string();
        self.ensure_marker(&key, marker);
        Ok(key)
    }

    /// A lost create looked for until the grace ends (see [`Executor::look_after_lost_answer`]).
    /// Not found, it goes back to the hub for no less than the search's lag and the write's
    /// time limit: the next delivery's search then shows what this one's may have made.
    fn lost_create(
        &mut self,
        command: &ClaimedCommand,
        error: &str,
        since_ms: i64,
    ) -> Result<String, Fail> {
        let lag = self.lag()?;
        if !lag.is_zero() {
            self.jira.release_for_at_least(lag + self.write_limit);
        }
        let found = self.look_after_lost_answer(command, error, |executor| {
            executor.find_newest_marked(command, since_ms)
        })?;
        tracing::info!(command = command.id, key = %found, "a lost create's marker was found: it is done");
        Ok(found)
    }

    /// An entity property's value, `None` when it is not set (404).
    pub(super) fn property(&mut self, path: &str) -> Result<Option<Value>, Fail> {
        Ok(PropertyReader { jira: self.jira }.read(path)?)
    }

    pub(super) fn project_key(&self) -> Result<String, Fail> {
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
        // The summary is sent trimmed: Jira stores it as sent (`SummarySystemField` trims only a
        // copy for validation), and a later look compares it trimmed.
        if let Some(summary) = params.get("summary").filter(|v| !v.is_null()) {
            let summary = summary
                .as_str()
                .map_or_else(|| summary.clone(), |s| Value::from(s.trim()));
            fields.insert("summary".into(), summary);
        }
        for key in ["description", "duedate"] {
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
            // Cloud: the epic is the issue's `parent`, in company- and team-managed projects
            // alike (Epic Link was replaced by `parent`: community.developer.atlassian.com,
            // "Deprecation of the Epic Link, Parent Link and other related fields in REST APIs").
            // Data Center: the Epic Link custom field; its `parent` is for sub-tasks only.
            match self.jira.deployment()? {
                Deployment::Cloud => {
                    fields.insert("parent".into(), json!({"key": epic}));
                }
                Deployment::Server => {
                    let field = settings.field_ids.get("epic_link").ok_or_else(|| {
                        fail(
                            "epic_key: на Data Center эпик задаётся полем Epic Link, а field_ids.epic_link не задан в настройках хаба",
                        )
                    })?;
                    fields.insert(field.clone(), json!(epic));
                }
            }
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

    /// A write that could be repeated as it is (PUT of fields, adding to a sprint). An ambiguous
    /// answer is still not repeated in this delivery: the command goes back to
    /// the hub, and the next delivery writes it again.
    pub(super) fn idempotent_write(
        &mut self,
        method: &str,
        path: &str,
        body: &Value,
    ) -> Result<(), Fail> {
        self.jira.write(method, path, body)?;
        Ok(())
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
}
