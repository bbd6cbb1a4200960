//! The preflight's metadata (`jira-hub agent --check`), all read-only: project, statuses,
//! permissions, createmeta, editmeta, fields and priorities.

use super::*;
use serde_json::{Map, Value, json};

/// `(id, name)` of the priorities (`GET /rest/api/2/priority`): Jira's five defaults, in Russian
/// as a Russian-language instance names them (ids 1–5, Highest … Lowest).
pub const PRIORITIES: &[(&str, &str)] = &[
    ("1", "Блокирующий"),
    ("2", "Высокий"),
    ("3", "Средний"),
    ("4", "Низкий"),
    ("5", "Незначительный"),
];

/// The project permissions `mypermissions` knows, `(key, id, name)`: Jira's built-in ones the
/// agent needs (docs.atlassian.com/software/jira/docs/api/REST/9.12.0/#api/2/mypermissions;
/// developer.atlassian.com/cloud/jira/platform/rest/v2/api-group-permissions/#api-rest-api-2-mypermissions-get).
pub const PERMISSIONS: &[(&str, &str, &str)] = &[
    ("BROWSE_PROJECTS", "10", "Browse Projects"),
    ("CREATE_ISSUES", "11", "Create Issues"),
    ("EDIT_ISSUES", "12", "Edit Issues"),
    ("TRANSITION_ISSUES", "46", "Transition Issues"),
    ("ADD_COMMENTS", "15", "Add Comments"),
    ("LINK_ISSUES", "21", "Link Issues"),
];

/// The names the fake gives its fields.
pub(super) fn field_name(id: &str) -> &'static str {
    match id {
        "summary" => "Тема",
        "issuetype" => "Тип задачи",
        "project" => "Проект",
        "description" => "Описание",
        "labels" => "Метки",
        "priority" => "Приоритет",
        "assignee" => "Исполнитель",
        "reporter" => "Автор",
        "status" => "Статус",
        "parent" => "Родитель",
        EPIC_LINK_FIELD => "Epic Link",
        SPRINT_FIELD => "Sprint",
        PLAN_START_FIELD => "Плановое начало",
        PLAN_END_FIELD => "Плановое окончание",
        _ => "",
    }
}

impl StateInner {
    /// The project, or Jira's 404 (REST v2 `GET /rest/api/2/project/{projectIdOrKey}`:
    /// "Returned if the project is not found, or the calling user does not have permission to
    /// view it", body `{"errorMessages":["No project could be found with key 'X'."]}`).
    pub(super) fn find_project(&self, key: &str) -> Result<(), Reply> {
        if self.projects.contains_key(key) {
            Ok(())
        } else {
            Err(Reply::error(
                404,
                &format!("No project could be found with key '{key}'."),
            ))
        }
    }

    pub(super) fn issue_type_json(&self, id: &str, name: &str) -> Value {
        json!({"self": format!("{}/rest/api/2/issuetype/{id}", self.base), "id": id,
               "name": name, "description": "", "subtask": false})
    }

    pub(super) fn project(&self, request: &Request) -> Result<Reply, Reply> {
        let key = &request.segments[4];
        self.find_project(key)?;
        let types: Vec<Value> = ISSUE_TYPES
            .iter()
            .map(|(id, name)| self.issue_type_json(id, name))
            .collect();
        Ok(Reply::json(
            200,
            json!({"self": format!("{}/rest/api/2/project/10000", self.base), "id": "10000",
                   "key": key, "name": format!("Проект {key}"), "projectTypeKey": "software",
                   "issueTypes": types}),
        ))
    }

    /// `GET /rest/api/2/project/{key}/statuses`: per issue type, its workflow's statuses
    /// (`[{id, name, subtask, statuses: [{id, name, …}]}]`, REST v2 "Get all statuses for
    /// project"). Every type here goes through the same four statuses (the bugs' workflow has
    /// other transitions, not other statuses).
    pub(super) fn project_statuses(&self, request: &Request) -> Result<Reply, Reply> {
        self.find_project(&request.segments[4])?;
        let statuses: Vec<Value> = STATUSES
            .iter()
            .map(|(id, name)| {
                json!({"self": format!("{}/rest/api/2/status/{id}", self.base), "id": id,
                       "name": name, "description": ""})
            })
            .collect();
        let types: Vec<Value> = ISSUE_TYPES
            .iter()
            .map(|(id, name)| {
                json!({"self": format!("{}/rest/api/2/issuetype/{id}", self.base), "id": id,
                       "name": name, "subtask": false, "statuses": statuses})
            })
            .collect();
        Ok(Reply::json(200, Value::Array(types)))
    }

    /// `GET /rest/api/2/mypermissions?projectKey=…&permissions=…`: `{"permissions": {KEY:
    /// {id, key, name, type, description, havePermission}}}`. Cloud refuses the call without
    /// `permissions` (developer.atlassian.com/cloud/jira/platform/rest/v2/api-group-permissions:
    /// "permissions: A list of permission keys. This parameter is required."; 400 otherwise).
    /// An unknown project: 404 as the project itself.
    pub(super) fn my_permissions(&self, request: &Request) -> Result<Reply, Reply> {
        if let Some(project) = request.param("projectKey") {
            self.find_project(project)?;
        }
        let asked: Vec<&str> = request
            .param("permissions")
            .map(|p| {
                p.split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if asked.is_empty() && self.mode == Mode::Cloud {
            return Err(Reply::error(
                400,
                "The 'permissions' query parameter is required.",
            ));
        }
        let mut out = Map::new();
        for (key, id, name) in PERMISSIONS {
            if !asked.is_empty() && !asked.contains(key) {
                continue;
            }
            out.insert(
                key.to_string(),
                json!({"id": id, "key": key, "name": name, "type": "PROJECT", "description": "",
                       "havePermission": !self.withheld.contains(*key)}),
            );
        }
        if let Some(unknown) = asked
            .iter()
            .find(|a| !PERMISSIONS.iter().any(|(k, _, _)| k == *a))
        {
            return Err(Reply::error(
                400,
                &format!("Permission key '{unknown}' does not exist."),
            ));
        }
        Ok(Reply::json(200, json!({"permissions": out})))
    }

    /// `GET /rest/api/2/issue/createmeta/{project}/issuetypes`: Data Center 8.4+ pages them as
    /// `{maxResults, startAt, total, isLast, values}`, Cloud as `{maxResults, startAt, total,
    /// issueTypes}` (jira.js `server.getCreateIssueMetaProjectIssueTypes` and
    /// `cloud.getCreateIssueMetaIssueTypes`, from the two REST specs).
    pub(super) fn create_meta_types(&self, request: &Request) -> Result<Reply, Reply> {
        self.find_project(&request.segments[5])?;
        let types: Vec<Value> = ISSUE_TYPES
            .iter()
            .map(|(id, name)| self.issue_type_json(id, name))
            .collect();
        Ok(self.create_meta_page(request, types, "issueTypes"))
    }

    /// One page of createmeta as each deployment pages it: Data Center `values` with `isLast`,
    /// Cloud under its own member (`issueTypes`, `fields`); `startAt` and `maxResults` (default
    /// 50, at most 200 in Atlassian's description of Cloud: larger asks are clamped here).
    pub(super) fn create_meta_page(
        &self,
        request: &Request,
        values: Vec<Value>,
        cloud_member: &str,
    ) -> Reply {
        let total = values.len();
        let start = request
            .param("startAt")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0);
        let size = request
            .param("maxResults")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(50)
            .clamp(1, 200);
        let page_values: Vec<Value> = values.into_iter().skip(start).take(size).collect();
        let last = start + page_values.len() >= total;
        let mut page = json!({"maxResults": size, "startAt": start, "total": total});
        match self.mode {
            Mode::DataCenter => {
                page["isLast"] = json!(last);
                page["values"] = Value::Array(page_values);
            }
            Mode::Cloud => page[cloud_member] = Value::Array(page_values),
        }
        Reply::json(200, page)
    }

    /// The create screen's fields of one type: Data Center `{…, values: [{fieldId, name, …}]}`,
    /// Cloud `{…, fields: [{fieldId, key, name, …}]}` (the same two specs). On Data Center the
    /// epic goes through Epic Link (not on the epic's own screen); on Cloud through `parent`
    /// (Epic Link is not on any screen: "Field 'customfield_…' cannot be set", see
    /// `check_parent`).
    pub(super) fn create_meta_fields(&self, request: &Request) -> Result<Reply, Reply> {
        self.find_project(&request.segments[5])?;
        let type_id = &request.segments[7];
        let Some((_, type_name)) = ISSUE_TYPES.iter().find(|(id, _)| id == type_id) else {
            return Err(Reply::error(
                404,
                &format!("Issue type with id '{type_id}' does not exist."),
            ));
        };
        let ids = self.screen_fields(type_name);
        let fields: Vec<Value> = ids
            .iter()
            .map(|id| {
                let mut field = json!({"fieldId": id, "key": id, "name": field_name(id),
                       "required": matches!(*id, "summary" | "issuetype" | "project"),
                       "hasDefaultValue": false, "operations": ["set"]});
                // A field with a list of values names them (`FieldCreateMetadata.allowedValues`
                // in Atlassian's description of Cloud; `allowedValues` of Data Center's
                // createmeta too): the priorities of the project's priority scheme.
                if *id == "priority" {
                    field["allowedValues"] = self.priority_values();
                }
                field
            })
            .collect();
        Ok(self.create_meta_page(request, fields, "fields"))
    }

    /// `GET /rest/api/2/issue/{key}/editmeta`: `{"fields": {fieldId: {required, name, key,
    /// operations, …}}}`, the edit screen's fields (REST v2 "Get edit issue metadata", Data
    /// Center and Cloud alike). The edit screen here is the create screen without `project`.
    pub(super) fn edit_meta(&self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let issue = &self.issues[&id];
        let type_name = issue.fields["issuetype"]["name"].as_str().unwrap_or("");
        let mut fields = Map::new();
        for id in self.screen_fields(type_name) {
            if id == "project" {
                continue;
            }
            fields.insert(
                id.to_string(),
                json!({"required": id == "summary", "name": field_name(id), "key": id,
                       "operations": ["set"]}),
            );
        }
        Ok(Reply::json(200, json!({"fields": fields})))
    }

    /// The fields on the create screen of a type (by its name).
    pub(super) fn screen_fields(&self, type_name: &str) -> Vec<&'static str> {
        let epic = type_name == "Эпик" || type_name == "Epic";
        let mut ids: Vec<&'static str> = vec![
            "summary",
            "issuetype",
            "project",
            "description",
            "labels",
            "priority",
            "assignee",
            "reporter",
            SPRINT_FIELD,
            PLAN_START_FIELD,
            PLAN_END_FIELD,
        ];
        if !epic {
            ids.push(match self.mode {
                Mode::DataCenter => EPIC_LINK_FIELD,
                Mode::Cloud => "parent",
            });
        }
        ids.retain(|id| !self.off_screens.contains(*id));
        ids
    }

    /// `GET /rest/api/2/field`: every field, system and custom (`[{id, key, name, custom, …}]`).
    pub(super) fn fields(&self) -> Reply {
        let fields: Vec<Value> = [
            "summary",
            "issuetype",
            "project",
            "description",
            "labels",
            "priority",
            "assignee",
            "reporter",
            "status",
            "parent",
            EPIC_LINK_FIELD,
            SPRINT_FIELD,
            PLAN_START_FIELD,
            PLAN_END_FIELD,
        ]
        .iter()
        .map(|id| {
            json!({"id": id, "key": id, "name": field_name(id),
                   "custom": id.starts_with("customfield_"), "orderable": true,
                   "navigable": true, "searchable": true})
        })
        .collect();
        Reply::json(200, Value::Array(fields))
    }

    /// `GET /rest/api/2/priority`: `[{self, id, name, …}]`.
    pub(super) fn priorities(&self) -> Reply {
        Reply::json(200, self.priority_values())
    }

    fn priority_values(&self) -> Value {
        PRIORITIES
            .iter()
            .map(|(id, name)| {
                json!({"self": format!("{}/rest/api/2/priority/{id}", self.base), "id": id,
                       "name": name, "description": ""})
            })
            .collect()
    }
}

impl FakeJira {
    /// The agent's user loses a project permission (`mypermissions` says `false`).
    pub fn withhold_permission(&self, key: &str) {
        lock(&self.state).withheld.insert(key.to_string());
    }

    /// A field is left off every create and edit screen (it still exists: `GET field` lists
    /// it), as kanban projects and many scrum screens leave off Sprint.
    pub fn take_off_screens(&self, field: &str) {
        lock(&self.state).off_screens.insert(field.to_string());
    }
}
