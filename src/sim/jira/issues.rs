//! Issues and their fields: create, read and edit as Jira validates and shapes them, the fields
//! filter of reads and searches, and the tests' seeding and accessors.

use super::comments::{markup_through_adf, through_adf};
use super::*;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

/// `(id, name)` of the issue types the fake knows (the example config's, and English ones).
pub const ISSUE_TYPES: &[(&str, &str)] = &[
    ("10002", "Задача"),
    ("10000", "Эпик"),
    ("10004", "Ошибка"),
    ("3", "Task"),
    ("10001", "Epic"),
];

/// The custom fields the fake treats specially (the example config's ids).
pub const SPRINT_FIELD: &str = "customfield_10105";

pub const EPIC_LINK_FIELD: &str = "customfield_10101";

/// The plan-date fields of the example config (`field_ids.plan_start`, `plan_end`).
pub const PLAN_START_FIELD: &str = "customfield_12001";

pub const PLAN_END_FIELD: &str = "customfield_12002";

pub(super) enum FieldFilter {
    All,
    /// Cloud's `search/jql` without `fields`: ids only.
    IdOnly,
    Only(HashSet<String>),
    Except(HashSet<String>),
}

impl FieldFilter {
    pub(super) fn parse(fields: Option<&str>, default: FieldFilter) -> FieldFilter {
        let Some(fields) = fields.filter(|f| !f.trim().is_empty()) else {
            return default;
        };
        let mut only = HashSet::new();
        let mut except = HashSet::new();
        let mut all = false;
        for name in fields.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if name == "*all" || name == "*navigable" {
                all = true;
            } else if let Some(name) = name.strip_prefix('-') {
                except.insert(name.to_string());
            } else {
                only.insert(name.to_string());
            }
        }
        if all || only.is_empty() {
            FieldFilter::Except(except)
        } else {
            only.retain(|n| !except.contains(n));
            FieldFilter::Only(only)
        }
    }

    pub(super) fn keeps(&self, name: &str) -> bool {
        match self {
            FieldFilter::All => true,
            FieldFilter::IdOnly => false,
            FieldFilter::Only(names) => names.contains(name),
            FieldFilter::Except(names) => !names.contains(name),
        }
    }
}

impl StateInner {
    pub(super) fn insert_issue(
        &mut self,
        project: &str,
        mut fields: Map<String, Value>,
        created_ms: i64,
        created_at: Option<Instant>,
    ) -> String {
        let id = self.next_id;
        self.next_id += 1;
        let number = self.projects.entry(project.to_string()).or_insert(1);
        let key = format!("{project}-{number}");
        *number += 1;
        let labels: Vec<String> = fields
            .get("labels")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|l| l.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let summary = fields
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        fields.insert(
            "project".into(),
            json!({"self": format!("{}/rest/api/2/project/{project}", self.base), "id": "10100",
                   "key": project, "name": format!("Проект {project}"), "projectTypeKey": "software"}),
        );
        fields.insert("labels".into(), json!(labels));
        let user = self.author_json();
        fields.insert("reporter".into(), user.clone());
        fields.insert("creator".into(), user);
        self.issues.insert(
            id,
            Issue {
                id,
                key: key.clone(),
                project: project.to_string(),
                labels,
                summary,
                fields,
                status: 0,
                created_ms,
                updated_ms: created_ms,
                created_at,
                changed: None,
                links: Vec::new(),
                comments: Vec::new(),
                properties: BTreeMap::new(),
                histories: Vec::new(),
            },
        );
        self.by_key.insert(key.clone(), id);
        key
    }

    pub(super) fn render(&self, issue: &Issue, filter: &FieldFilter) -> Value {
        if let FieldFilter::IdOnly = filter {
            return json!({"id": issue.id.to_string()});
        }
        let mut fields = Map::new();
        for (name, value) in &issue.fields {
            if filter.keeps(name) {
                fields.insert(name.clone(), value.clone());
            }
        }
        if filter.keeps("status") {
            let (id, name) = STATUSES[issue.status];
            fields.insert(
                "status".into(),
                json!({"self": format!("{}/rest/api/2/status/{id}", self.base), "id": id, "name": name,
                       "statusCategory": {"key": if issue.status == 0 { "new" } else if issue.status == 1 { "indeterminate" } else { "done" }}}),
            );
        }
        if filter.keeps("created") {
            fields.insert("created".into(), jira_time(issue.created_ms).into());
        }
        if filter.keeps("updated") {
            fields.insert("updated".into(), jira_time(issue.updated_ms).into());
        }
        if filter.keeps("issuelinks") {
            let links: Vec<Value> = issue
                .links
                .iter()
                .filter_map(|id| self.links.get(id))
                .map(|l| self.link_json(l, &issue.key))
                .collect();
            fields.insert("issuelinks".into(), links.into());
        }
        if filter.keeps("comment") {
            let total = issue.comments.len();
            fields.insert(
                "comment".into(),
                json!({"comments": issue.comments, "maxResults": total, "total": total, "startAt": 0}),
            );
        }
        json!({"expand": "operations,versionedRepresentations,editmeta,changelog,renderedFields",
               "id": issue.id.to_string(),
               "self": format!("{}/rest/api/2/issue/{}", self.base, issue.id),
               "key": issue.key, "fields": fields})
    }

    pub(super) fn body_json(request: &Request) -> Result<Value, Reply> {
        serde_json::from_slice(&request.body).map_err(|e| {
            Reply::error(
                400,
                &format!("Unexpected character in the request body: {e}"),
            )
        })
    }

    pub(super) fn find(&self, key: &str) -> Result<u64, Reply> {
        // An old key of a moved issue still finds it (`MovedIssueKeyStore`, Jira 6.1+).
        let moved = self
            .moved_keys
            .get(key)
            .filter(|id| self.issues.contains_key(id));
        self.by_key.get(key).or(moved).copied().ok_or_else(|| {
            Reply::error(
                404,
                &self.words(
                    "Issue does not exist or you do not have permission to see it.".into(),
                    "Задача не существует, или у вас нет прав на её просмотр.".into(),
                ),
            )
        })
    }

    pub(super) fn get_issue(&self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let filter = FieldFilter::parse(request.param("fields"), FieldFilter::All);
        let issue = &self.issues[&id];
        let mut rendered = self.render(issue, &filter);
        // `expand` is a comma-separated list of expansions (the REST reference, "Get issue").
        let expands = |what: &str| {
            request
                .param("expand")
                .is_some_and(|e| e.split(',').any(|part| part.trim() == what))
        };
        if expands("transitions") {
            rendered["transitions"] = Value::Array(self.transitions_json(issue));
        }
        // `expand=changelog` (see `changes`).
        if expands("changelog") {
            rendered["changelog"] = self.changelog_json(issue);
        }
        Ok(Reply::json(200, rendered))
    }

    pub(super) fn check_fields(&self, fields: &Map<String, Value>) -> Result<(), Reply> {
        if let Some(labels) = fields.get("labels") {
            let Some(labels) = labels.as_array() else {
                return Err(Reply::field_error("labels", "data was not an array"));
            };
            for label in labels {
                let label = label.as_str().unwrap_or("");
                if label.is_empty() || label.contains(' ') {
                    return Err(self.label_with_spaces(label));
                }
            }
        }
        if let Some(sprint) = fields.get(SPRINT_FIELD)
            && !sprint.is_null()
            && !sprint.is_number()
        {
            return Err(Reply::json(
                400,
                json!({"errorMessages": ["Number value expected as the Sprint id."],
                       "errors": {SPRINT_FIELD: "The Sprint (id) must be a number"}}),
            ));
        }
        if let Some(epic) = fields.get(EPIC_LINK_FIELD).and_then(Value::as_str)
            && !self.by_key.contains_key(epic)
        {
            return Err(Reply::field_error(
                EPIC_LINK_FIELD,
                &format!("The issue {epic} does not exist."),
            ));
        }
        if fields.contains_key("status") {
            return Err(Reply::field_error(
                "status",
                "Field 'status' cannot be set. It is not on the appropriate screen, or unknown.",
            ));
        }
        Ok(())
    }

    /// Jira's shape for the values a caller sets by name.
    pub(super) fn normalise(&self, fields: &mut Map<String, Value>) {
        if let Some(sprint) = fields.get(SPRINT_FIELD).and_then(Value::as_u64) {
            let value = self.sprint_value(sprint);
            fields.insert(SPRINT_FIELD.into(), value);
        }
        // A priority set by name or id reads back as the whole option (`{"self", "id", "name"}`,
        // the `priority` of the fixtures' issues).
        if let Some(Value::Object(given)) = fields.get("priority")
            && let Some((id, name)) = PRIORITIES.iter().find(|(id, name)| {
                given.get("id").and_then(Value::as_str) == Some(id)
                    || given.get("name").and_then(Value::as_str) == Some(name)
            })
        {
            let value = json!({"self": format!("{}/rest/api/2/priority/{id}", self.base),
                               "id": id, "name": name});
            fields.insert("priority".into(), value);
        }
        // A Data Center assignee named in any case reads back as the user as stored
        // (`changes::stored_user`).
        if self.mode == Mode::DataCenter
            && let Some(Value::Object(given)) = fields.get("assignee")
            && let Some(stored) = given
                .get("name")
                .and_then(Value::as_str)
                .and_then(|name| self.stored_user(name))
        {
            let user = self.person(&stored);
            fields.insert("assignee".into(), user);
        }
        // Cloud keeps a REST v2 description as ADF and gives back wiki markup, as a comment body
        // (`comments::through_adf`).
        if self.mode == Mode::Cloud
            && let Some(Value::String(text)) = fields.get("description")
        {
            let text = if self.markup_round_trip {
                markup_through_adf(&through_adf(text))
            } else {
                through_adf(text)
            };
            fields.insert("description".into(), text.into());
        }
    }

    pub(super) fn create_issue(&mut self, request: &Request) -> Result<Reply, Reply> {
        let body = Self::body_json(request)?;
        let mut fields = body
            .get("fields")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let project = fields
            .get("project")
            .and_then(|p| p.get("key").or_else(|| p.get("id")))
            .and_then(Value::as_str)
            .map(String::from)
            .filter(|p| self.projects.contains_key(p))
            .ok_or_else(|| {
                Reply::field_error(
                    "project",
                    &self.words(
                        "Specify a valid project ID or key".into(),
                        "Укажите действительный ID или ключ проекта".into(),
                    ),
                )
            })?;
        let issuetype = fields.get("issuetype").ok_or_else(|| {
            Reply::field_error(
                "issuetype",
                &self.words("Specify an issue type".into(), "Укажите тип задачи".into()),
            )
        })?;
        let (type_id, type_name) = ISSUE_TYPES
            .iter()
            .find(|(id, name)| {
                issuetype.get("id").and_then(Value::as_str) == Some(id)
                    || issuetype.get("name").and_then(Value::as_str) == Some(name)
            })
            .ok_or_else(|| {
                Reply::field_error(
                    "issuetype",
                    &self.words(
                        "valid issue type is required".into(),
                        "требуется действительный тип задачи".into(),
                    ),
                )
            })?;
        let summary = fields
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if summary.trim().is_empty() {
            return Err(self.no_summary());
        }
        self.check_fields(&fields)?;
        self.check_parent(&fields)?;
        self.normalise(&mut fields);
        fields.insert(
            "issuetype".into(),
            json!({"self": format!("{}/rest/api/2/issuetype/{type_id}", self.base),
                   "id": type_id, "name": type_name, "subtask": false}),
        );
        let properties = if self.create_properties {
            Self::entity_properties(&body)?
        } else {
            BTreeMap::new()
        };
        if let Some(rewrite) = &self.summary_rewrite {
            fields.insert("summary".into(), rewrite.apply(&summary).into());
        }
        let now = self.jira_now_ms();
        let key = self.insert_issue(&project, fields, now, Some(Instant::now()));
        *self.creates.entry(summary).or_insert(0) += 1;
        let id = self.by_key[&key];
        self.issues.get_mut(&id).expect("made").properties = properties;
        let node = self.node;
        if let Some(cluster) = &mut self.cluster {
            let at = (cluster.now)();
            cluster.created.insert(id, (node, at));
        }
        Ok(Reply::json(
            201,
            json!({"id": id.to_string(), "key": key,
                   "self": format!("{}/rest/api/2/issue/{id}", self.base)}),
        ))
    }

    pub(super) fn edit_issue(&mut self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let body = Self::body_json(request)?;
        let fields = body
            .get("fields")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if fields.contains_key("project") || fields.contains_key("issuetype") {
            return Err(Reply::field_error(
                "project",
                "Field 'project' cannot be set. It is not on the appropriate screen, or unknown.",
            ));
        }
        if fields
            .get("summary")
            .is_some_and(|s| s.as_str().is_none_or(|s| s.trim().is_empty()))
        {
            return Err(self.no_summary());
        }
        self.check_fields(&fields)?;
        self.check_parent(&fields)?;
        let update = body
            .get("update")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let labels = self.label_operations(&update, &fields)?;
        let issue = self.issues.get_mut(&id).expect("found");
        if let Some(labels) = labels {
            issue.labels = labels(&issue.labels);
            issue.fields.insert("labels".into(), json!(issue.labels));
        }
        let author = self.user_json();
        self.set_fields(id, fields, author);
        Ok(Reply::empty(204))
    }

    /// Edit issue's `update` for labels: `add`, `remove`, `set` operations applied in order
    /// ("Edit issue": "update: A Map containing the field name and a list of operations to
    /// perform on the issue screen field"; labels take add, set and remove, REST API examples
    /// "Edit issues": `{"update": {"labels": [{"add": "triaged"}, {"remove": "blocker"}]}}`). A
    /// field in both `fields` and `update` is refused ("Fields included in here cannot be
    /// included in `update`"). Returns what turns the old labels into the new ones.
    #[allow(clippy::type_complexity)]
    pub(super) fn label_operations(
        &self,
        update: &Map<String, Value>,
        fields: &Map<String, Value>,
    ) -> Result<Option<Box<dyn Fn(&[String]) -> Vec<String>>>, Reply> {
        let Some(operations) = update.get("labels") else {
            return Ok(None);
        };
        if fields.contains_key("labels") {
            return Err(Reply::field_error(
                "labels",
                "Field 'labels' cannot be set in both 'fields' and 'update'.",
            ));
        }
        let Some(operations) = operations.as_array() else {
            return Err(Reply::field_error("labels", "data was not an array"));
        };
        let mut steps: Vec<(String, Vec<String>)> = Vec::new();
        for operation in operations {
            let Some((verb, value)) = operation.as_object().and_then(|o| o.iter().next()) else {
                return Err(Reply::field_error("labels", "Operation is not an object"));
            };
            let values: Vec<String> = match value {
                Value::String(label) => vec![label.clone()],
                Value::Array(items) => items
                    .iter()
                    .filter_map(|l| l.as_str().map(String::from))
                    .collect(),
                _ => return Err(Reply::field_error("labels", "data was not a string")),
            };
            for label in &values {
                if label.is_empty() || label.contains(' ') {
                    return Err(self.label_with_spaces(label));
                }
            }
            match verb.as_str() {
                "add" | "remove" | "set" => steps.push((verb.clone(), values)),
                other => {
                    return Err(Reply::field_error(
                        "labels",
                        &format!("Operation '{other}' is not supported for field 'labels'."),
                    ));
                }
            }
        }
        Ok(Some(Box::new(move |old: &[String]| {
            let mut labels = old.to_vec();
            for (verb, values) in &steps {
                match verb.as_str() {
                    "add" => {
                        for label in values {
                            if !labels.contains(label) {
                                labels.push(label.clone());
                            }
                        }
                    }
                    "remove" => labels.retain(|l| !values.contains(l)),
                    _ => labels = values.clone(),
                }
            }
            labels
        })))
    }

    /// The epic of an issue: on Cloud through `parent` (the Epic Link field is gone from the
    /// REST API: "Deprecation of the Epic Link, Parent Link and other related fields in REST APIs
    /// and webhooks", community.developer.atlassian.com, t/54048), on Data Center through Epic
    /// Link, where `parent` is for sub-tasks only and a standard issue type has no such field on
    /// its screens (Jira's refusal of a field it cannot set: "Field 'x' cannot be set. It is not
    /// on the appropriate screen, or unknown.", recorded for `labels` in jiralert#74).
    pub(super) fn check_parent(&self, fields: &Map<String, Value>) -> Result<(), Reply> {
        match self.mode {
            Mode::Cloud => {
                if fields.contains_key(EPIC_LINK_FIELD) {
                    return Err(Reply::field_error(
                        EPIC_LINK_FIELD,
                        &format!(
                            "Field '{EPIC_LINK_FIELD}' cannot be set. It is not on the appropriate screen, or unknown."
                        ),
                    ));
                }
                if let Some(parent) = fields.get("parent") {
                    let key = parent.get("key").and_then(Value::as_str).unwrap_or("");
                    if !self.by_key.contains_key(key) {
                        return Err(Reply::field_error(
                            "parent",
                            &format!("Issue '{key}' could not be found."),
                        ));
                    }
                }
            }
            Mode::DataCenter => {
                if fields.contains_key("parent") {
                    return Err(Reply::field_error(
                        "parent",
                        "Field 'parent' cannot be set. It is not on the appropriate screen, or unknown.",
                    ));
                }
            }
        }
        Ok(())
    }
}

impl FakeJira {
    /// Labels of an issue, as Jira holds them.
    pub fn labels_of(&self, key: &str) -> Vec<String> {
        let state = lock(&self.state);
        state
            .by_key
            .get(key)
            .map(|id| state.issues[id].labels.clone())
            .unwrap_or_default()
    }

    pub fn add_project(&self, key: &str) {
        lock(&self.state)
            .projects
            .entry(key.to_string())
            .or_insert(1);
    }

    /// `n` issues of `project` labelled `label`, made directly (no HTTP), visible to search at
    /// once; returns their keys.
    pub fn seed_issues(&self, project: &str, label: &str, n: usize) -> Vec<String> {
        let mut state = lock(&self.state);
        state.projects.entry(project.to_string()).or_insert(1);
        let base_ms = 1_767_225_600_000_i64; // 2026-01-01T00:00:00Z
        let mut keys = Vec::with_capacity(n);
        for i in 0..n {
            let number = state.issues.len() as i64;
            let mut fields = Map::new();
            fields.insert("summary".into(), format!("Задача {label} номер {i}").into());
            fields.insert(
                "description".into(),
                format!("Описание задачи {i}: что сделать и зачем.").into(),
            );
            fields.insert("issuetype".into(), json!({"id": "10002", "name": "Задача"}));
            fields.insert("priority".into(), json!({"id": "3", "name": "Средний"}));
            fields.insert("labels".into(), json!([label]));
            let created = base_ms + number * 60_000;
            let key = state.insert_issue(project, fields, created, None);
            keys.push(key);
        }
        keys
    }

    /// One issue made directly, `fields` as a create would give them; returns its key.
    pub fn seed_issue(&self, project: &str, fields: Value) -> String {
        let mut state = lock(&self.state);
        state.projects.entry(project.to_string()).or_insert(1);
        let fields = fields.as_object().cloned().unwrap_or_default();
        state.insert_issue(project, fields, now_ms(), None)
    }

    /// Moves an issue to `project` as Jira's Move does: a new key (the next number there), the
    /// old key remembered (`GET /issue/OLD` still finds it; a relational JQL on it is refused).
    /// Returns the new key.
    pub fn move_issue(&self, key: &str, project: &str) -> String {
        let mut state = lock(&self.state);
        let id = state.by_key.remove(key).expect("the issue to move");
        let number = state.projects.entry(project.to_string()).or_insert(1);
        let new_key = format!("{project}-{number}");
        *number += 1;
        let (base, lag) = (state.base.clone(), state.search_lag);
        let issue = state.issues.get_mut(&id).expect("issue");
        issue.key = new_key.clone();
        issue.project = project.to_string();
        issue.fields.insert(
            "project".into(),
            json!({"self": format!("{base}/rest/api/2/project/{project}"), "id": "10101",
                   "key": project, "name": format!("Проект {project}"), "projectTypeKey": "software"}),
        );
        issue.touch(now_ms(), lag);
        state.by_key.insert(new_key.clone(), id);
        state.moved_keys.insert(key.to_string(), id);
        new_key
    }

    /// Deletes an issue: its key names nothing any more.
    pub fn delete_issue(&self, key: &str) {
        let mut state = lock(&self.state);
        let id = state.by_key.remove(key).expect("the issue to delete");
        state.issues.remove(&id);
    }

    pub fn issue_count(&self) -> usize {
        lock(&self.state).issues.len()
    }

    /// Every issue, raw, as search returns it with all fields.
    pub fn issues(&self) -> Vec<Value> {
        let state = lock(&self.state);
        state
            .issues
            .values()
            .map(|i| state.render(i, &FieldFilter::All))
            .collect()
    }

    pub fn issue(&self, key: &str) -> Option<Value> {
        let state = lock(&self.state);
        let id = state.by_key.get(key)?;
        Some(state.render(&state.issues[id], &FieldFilter::All))
    }

    /// Keys of the issues with this summary.
    pub fn keys_with_summary(&self, summary: &str) -> Vec<String> {
        lock(&self.state)
            .issues
            .values()
            .filter(|i| i.summary == summary)
            .map(|i| i.key.clone())
            .collect()
    }
}

/// What an Automation rule or a create post-function does to the summary of every new issue
/// ([`FakeJira::rewrite_summaries_on_create`]). Jira stores the summary as sent
/// (`SummarySystemField` trims only a copy for validation), and then a rule may rewrite it: an
/// Automation "Edit issue" action on "Issue created" setting `Summary` to, say, `[Support]
/// {{issue.summary}}` (Atlassian's Automation smart values documentation), or a workflow's
/// "Update issue field" post-function on the create transition (docs/jira-field-notes.md,
/// "Writes"). A create's identity is then its marker, never its summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SummaryRewrite {
    /// `prefix` + the summary as sent.
    Prefix(String),
    /// Another summary altogether.
    Replace(String),
}

impl SummaryRewrite {
    fn apply(&self, summary: &str) -> String {
        match self {
            SummaryRewrite::Prefix(prefix) => format!("{prefix}{summary}"),
            SummaryRewrite::Replace(text) => text.clone(),
        }
    }
}

impl FakeJira {
    /// Every issue created over HTTP from now on gets its summary rewritten by `rewrite`
    /// (`None`: stored as sent, the default). `creates_of` still counts by the summary sent.
    pub fn rewrite_summaries_on_create(&self, rewrite: Option<SummaryRewrite>) {
        lock(&self.state).summary_rewrite = rewrite;
    }
}
