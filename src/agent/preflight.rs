//! `jira-hub agent --config FILE --check`: a preflight against the real Jira before the agent is
//! let write. It asks the hub for its settings the way a claim does (a claim of `max_commands: 0`
//! and `settings_version: 0`: the settings come back, no command is handed out), reads Jira's
//! metadata, WRITES NOTHING to Jira, and prints one line per check: `ok` or `ОШИБКА`, the check's
//! name, what it found. Every read goes through [`Jira`] (paced, 429/503 honoured).
//!
//! The endpoints, all REST v2 / Agile 1.0 and present on Data Center and Cloud:
//! - `GET /rest/api/2/serverInfo` (deployment, `serverTime` for the clock);
//! - `GET /rest/api/2/project/{key}` and `GET /rest/api/2/mypermissions?projectKey=…&permissions=…`
//!   (Cloud requires `permissions`: developer.atlassian.com/cloud/jira/platform/rest/v2/
//!   api-group-permissions/#api-rest-api-2-mypermissions-get);
//! - `GET /rest/api/2/issue/createmeta/{project}/issuetypes[/{typeId}]` (the per-project
//!   create metadata: the global `createmeta` is gone from Data Center 9 and deprecated on Cloud;
//!   Data Center answers `values`, Cloud `issueTypes` / `fields`);
//! - `GET /rest/api/2/field`, `GET /rest/api/2/project/{key}/statuses`,
//!   `GET /rest/api/2/issue/{key}/transitions`, `GET /rest/api/2/issueLinkType`,
//!   `GET /rest/api/2/priority` (Data Center; on Cloud the create screens' `allowedValues`),
//!   `GET /rest/agile/1.0/board/{id}`, and one search page
//!   (`search` on Data Center, `search/jql` on Cloud) to find an issue of each type.

use super::commands::AgentSettings;
use super::jira_api::{Deployment, Jira};
use super::jql;
use super::transport::{HubLink, LinkError};
use crate::domain::settings::{IssueType, TransitionTarget};
use serde_json::Value;
use std::collections::BTreeMap;

/// The first check's name: the hub's answer with its settings.
pub(crate) const HUB_CHECK: &str = "настройки хаба";

/// How long `--check` waits for the hub's answer to each of its two requests (the claim that
/// brings the settings, the heartbeat that takes the outcome): a hub that answers does so
/// within a second or two (it looks at `inbox/` every second at most, notified at once where
/// the file system tells it).
pub(crate) const HUB_ANSWER_LIMIT: std::time::Duration = std::time::Duration::from_secs(15);

/// A clock difference above this is an error: Jira's times (the checks before a repeated write,
/// `updated >= …` of a refresh) would be misread.
pub(crate) const MAX_SKEW_MS: i64 = 5 * 60 * 1000;

/// The permissions the agent uses in a project (Jira's keys).
const PERMISSIONS: &[(&str, &str)] = &[
    ("BROWSE_PROJECTS", "просмотр"),
    ("CREATE_ISSUES", "создание"),
    ("EDIT_ISSUES", "правка"),
    ("TRANSITION_ISSUES", "переходы"),
    ("ADD_COMMENTS", "комментарии"),
    ("LINK_ISSUES", "связи"),
];

/// The `field_ids` entries the agent writes on create and edit (`commands::issue_fields`): the
/// epic link (on Data Center) and the plan dates. Any other (the sprint) it only reads.
const WRITTEN_FIELDS: &[&str] = &["epic_link", "plan_start", "plan_end"];

/// The page size of the create metadata: Atlassian's description of Cloud allows at most 200.
const CREATEMETA_PAGE: u32 = 200;

/// A transition an issue offers: its id, the target status's id and name.
type Offer = (String, String, String);

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let word = if self.ok { "ok" } else { "ОШИБКА" };
        write!(f, "{word:<6} {}: {}", self.name, self.detail)
    }
}

struct Checks<'a> {
    jira: &'a mut Jira,
    settings: AgentSettings,
    lines: Vec<Line>,
    /// The create screen of each issue type read so far (type id → its fields, as Jira
    /// describes them), `None` when it could not be read.
    create_screens: BTreeMap<String, Option<Vec<Value>>>,
}

/// The relay's share, both ways: how late the agent saw the hub's answer and how late the hub
/// sees the agent's files (from its lock), each with the mount option that removes a late one;
/// what the agent can do in `inbox/`; whether it can read the hub's file.
fn share_lines(checks: &mut Checks<'_>, share: &super::transport::ShareReport) {
    const NAME: &str = "папка обмена";
    let late = |delay: Option<std::time::Duration>| delay.is_some_and(|d| d > SHARE_LATE);
    let words = |delay: Option<std::time::Duration>| match delay {
        Some(delay) => format!("{:.1} с", delay.as_secs_f64()),
        None => "не измерено".to_string(),
    };
    let ok = !late(share.answers_late) && !late(share.requests_late);
    let mut detail = format!(
        "{}: ответы хаба видны агенту через {}, файлы агента хабу — через {}",
        share.dir.display(),
        words(share.answers_late),
        words(share.requests_late)
    );
    if late(share.answers_late) {
        detail.push_str(&format!(
            "; опоздание ответов убирает параметр монтирования у агента: {}",
            share.advice
        ));
    }
    if late(share.requests_late) {
        detail.push_str(&format!(
            "; опоздание запросов убирает параметр монтирования у хаба: {}",
            share.hub_advice
        ));
    }
    checks.push(NAME, ok, detail);
    match &share.inbox_failure {
        None => checks.push(
            NAME,
            true,
            "в inbox/ агент создаёт, переименовывает поверх, читает и удаляет файлы",
        ),
        Some(failure) => checks.push(NAME, false, format!("inbox/: {failure}")),
    }
    match &share.lock_read {
        Ok(()) => checks.push(NAME, true, "файл хаба (его метка в папке) читается"),
        Err(error) => checks.push(
            NAME,
            false,
            format!(
                "файл хаба {} не читается: «{error}» (хаб и агент должны быть в общей группе папки)",
                crate::protocol::RELAY_LOCK_NAME
            ),
        ),
    }
}

/// A delay above this is named late: the hub's listing interval and SFTP's whole-second mtimes
/// stay below it.
const SHARE_LATE: std::time::Duration = std::time::Duration::from_secs(2);

impl Checks<'_> {
    fn push(&mut self, name: impl Into<String>, ok: bool, detail: impl Into<String>) {
        let line = Line {
            name: name.into(),
            ok,
            detail: detail.into(),
        };
        self.lines.push(line);
    }
}

/// The settings through a claim that takes nothing, then every check: their lines, which the
/// caller prints as a table once the run is over (so that no log line of the run follows it).
/// `refused`: Jira's login refused these credentials before (the agent's state folder says so):
/// they are not sent, and the Jira check says why.
pub(crate) fn run(jira: &mut Jira, hub: &HubLink, refused: Option<String>) -> Vec<Line> {
    let mut checks = Checks {
        jira,
        settings: AgentSettings::default(),
        lines: Vec::new(),
        create_screens: BTreeMap::new(),
    };
    match hub.claim(0, 0) {
        Ok(answer) => {
            if !answer.commands.is_empty() {
                // A hub that does not honour `max_commands: 0`: the commands go back to the
                // queue when their lease lapses; the agent does nothing with them.
                checks.push(
                    HUB_CHECK,
                    false,
                    format!(
                        "хаб выдал {} команд(ы) на запрос без команд (max_commands 0); они вернутся в очередь по истечении аренды",
                        answer.commands.len()
                    ),
                );
            }
            match &answer.settings {
                Some(settings) => {
                    checks.settings = AgentSettings::from_value(settings);
                    // Jira's calls at the hub's pacing, as the agent makes them (not the
                    // client's cautious 300 ms before any settings: 15 to 30 reads took 5 s).
                    checks
                        .jira
                        .set_min_interval(std::time::Duration::from_millis(u64::from(
                            checks.settings.pacing.min_interval_ms,
                        )));
                    checks.push(
                        HUB_CHECK,
                        true,
                        format!("версия {}", answer.settings_version),
                    );
                }
                None => {
                    checks.push(HUB_CHECK, false, "хаб не прислал настроек");
                    return checks.lines;
                }
            }
        }
        Err(error) => {
            let detail = match error {
                LinkError::NoAnswer(why) => why,
                LinkError::Stopped => "проверка остановлена сигналом до ответа хаба".to_string(),
                // Ours in Russian, the hub's or the OS's words quoted after.
                LinkError::Refused { kind, message } => {
                    format!("хаб отказал в запросе {}: «{message}»", kind.as_str())
                }
                LinkError::TooLarge { bytes, limit } => {
                    format!("запрос в {bytes} байт больше, чем хаб принимает ({limit})")
                }
                LinkError::Other(why) => format!("хаб не ответил: «{why}»"),
                LinkError::BadToken(why) => {
                    // The preflight's one request to the hub is its claim.
                    format!("хаб отказал в запросе claim: «{why}» (токен агента, agent_token)")
                }
            };
            checks.push(HUB_CHECK, false, detail);
            return checks.lines;
        }
    }
    if let Some(share) = hub.share_report() {
        share_lines(&mut checks, &share);
    }
    if let Some(refused) = refused {
        checks.push("jira", false, refused);
        return checks.lines;
    }
    if let Err(error) = checks.jira.server_info(true) {
        checks.push("jira", false, format!("serverInfo: {error}"));
        return checks.lines;
    }
    let deployment = match checks.jira.deployment() {
        Ok(d) => d,
        Err(error) => {
            checks.push("jira", false, format!("serverInfo: {error}"));
            return checks.lines;
        }
    };
    checks.push(
        "jira",
        true,
        match deployment {
            Deployment::Cloud => "Cloud",
            Deployment::Server => "Server / Data Center",
        },
    );
    checks.all(deployment);
    checks.lines
}

impl Checks<'_> {
    fn all(&mut self, deployment: Deployment) {
        let project = self.project();
        let types = project
            .as_ref()
            .map(|key| self.issue_types(key))
            .unwrap_or_default();
        if let Some(key) = &project {
            // One issue of each type, when the project has one: one search page.
            let samples = self.samples(key, deployment);
            self.fields(key, &types, &samples, deployment);
            self.transitions(key, &types, &samples);
        }
        self.link_types();
        self.priorities(project.as_deref(), &types, deployment);
        self.board();
        self.clock();
        self.limits();
    }

    /// The project exists and the account may do what the agent does in it. Its key when it does.
    fn project(&mut self) -> Option<String> {
        let Some(key) = self.settings.project_key.clone() else {
            self.push("проект", false, "project_key не задан в настройках хаба");
            return None;
        };
        // GET /rest/api/2/project/{projectIdOrKey} (REST v2, Data Center and Cloud).
        match self
            .jira
            .read_json::<Value>(&format!("/rest/api/2/project/{}", jql::encode(&key)))
        {
            Ok(found) => {
                let name = found.get("name").and_then(Value::as_str).unwrap_or("");
                let id = found.get("id").and_then(Value::as_str).unwrap_or("");
                self.push("проект", true, format!("{key}: «{name}» ({id})"));
            }
            Err(error) => {
                self.push(
                    "проект",
                    false,
                    format!("проекта {key} нет или учётная запись его не видит: {error}"),
                );
                return None;
            }
        }
        let keys: Vec<&str> = PERMISSIONS.iter().map(|(k, _)| *k).collect();
        // GET /rest/api/2/mypermissions?projectKey=…&permissions=… ("permissions" is required
        // on Cloud since 2019; Data Center takes it too).
        let path = format!(
            "/rest/api/2/mypermissions?projectKey={}&permissions={}",
            jql::encode(&key),
            keys.join(",")
        );
        match self.jira.read_json::<Value>(&path) {
            Ok(answer) => {
                let mut missing = Vec::new();
                for (permission, words) in PERMISSIONS {
                    let have = answer
                        .pointer(&format!("/permissions/{permission}/havePermission"))
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    if !have {
                        missing.push(format!("{permission} ({words})"));
                    }
                }
                if missing.is_empty() {
                    self.push("права", true, format!("в {key}: {}", keys.join(", ")));
                } else {
                    self.push(
                        "права",
                        false,
                        format!("в {key} у учётной записи нет: {}", missing.join(", ")),
                    );
                }
            }
            Err(error) => self.push("права", false, format!("mypermissions: {error}")),
        }
        Some(key)
    }

    /// Each configured type (`task`, `epic`, `bug`) among the project's create types. Returns
    /// the ones found: logical name → (id, name).
    fn issue_types(&mut self, project: &str) -> Vec<(String, String, String)> {
        let Some(configured) = self.settings.issue_types.clone() else {
            self.push(
                "типы задач",
                false,
                "issue_types не заданы в настройках хаба",
            );
            return Vec::new();
        };
        // GET /rest/api/2/issue/createmeta/{projectIdOrKey}/issuetypes: DC `values`, Cloud
        // `issueTypes`.
        let path = format!(
            "/rest/api/2/issue/createmeta/{}/issuetypes?maxResults=200",
            jql::encode(project)
        );
        let available: Vec<(String, String)> = match self.jira.read_json::<Value>(&path) {
            Ok(answer) => answer
                .get("values")
                .or_else(|| answer.get("issueTypes"))
                .and_then(Value::as_array)
                .map(|types| types.iter().filter_map(id_name).collect())
                .unwrap_or_default(),
            Err(error) => {
                self.push(
                    "типы задач",
                    false,
                    format!("createmeta {project}: {error}"),
                );
                return Vec::new();
            }
        };
        let listing = list(&available);
        let mut found = Vec::new();
        let mut wanted: Vec<(&str, IssueType)> = vec![
            ("task", configured.task.clone()),
            ("epic", configured.epic.clone()),
        ];
        if let Some(bug) = &configured.bug {
            wanted.push(("bug", bug.clone()));
        }
        for (logical, wanted) in wanted {
            let name = format!("тип задачи {logical}");
            let shown = match &wanted.id {
                Some(id) => format!("«{}» ({id})", wanted.name),
                None => format!("«{}»", wanted.name),
            };
            let hit = available.iter().find(|(id, n)| match &wanted.id {
                Some(want) => id == want,
                None => *n == wanted.name,
            });
            match hit {
                Some((id, n)) if *n == wanted.name => {
                    self.push(name, true, format!("{shown} есть в {project}"));
                    found.push((logical.to_string(), id.clone(), n.clone()));
                }
                Some((id, n)) => {
                    self.push(
                        name,
                        false,
                        format!("{shown}: тип {id} в {project} называется «{n}»"),
                    );
                    found.push((logical.to_string(), id.clone(), n.clone()));
                }
                None => self.push(
                    name,
                    false,
                    format!("{shown} нет в проекте {project}; есть: {listing}"),
                ),
            }
        }
        found
    }

    /// The create screen of one issue type: `GET /rest/api/2/issue/createmeta/{project}/
    /// issuetypes/{typeId}`, Data Center `values`, Cloud `fields`, each field with `fieldId`
    /// (and `allowedValues` where the field has a list). Paged: Atlassian's description of Cloud
    /// allows `maxResults` up to 200 (`getCreateIssueMetaIssueTypeId`), so a screen with more
    /// fields comes in pages (`startAt`, until `total` or Data Center's `isLast`). Read once.
    fn create_screen(&mut self, project: &str, type_id: &str) -> Option<Vec<Value>> {
        if let Some(known) = self.create_screens.get(type_id) {
            return known.clone();
        }
        let mut fields: Vec<Value> = Vec::new();
        let read = loop {
            let path = format!(
                "/rest/api/2/issue/createmeta/{}/issuetypes/{}?startAt={}&maxResults={CREATEMETA_PAGE}",
                jql::encode(project),
                jql::encode(type_id),
                fields.len()
            );
            let Ok(answer) = self.jira.read_json::<Value>(&path) else {
                break None;
            };
            let page = answer
                .get("values")
                .or_else(|| answer.get("fields"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let empty = page.is_empty();
            fields.extend(page);
            let total = answer.get("total").and_then(Value::as_u64);
            let last = answer.get("isLast").and_then(Value::as_bool) == Some(true)
                || total.is_none_or(|total| fields.len() as u64 >= total);
            if empty || last {
                break Some(fields);
            }
        };
        self.create_screens
            .insert(type_id.to_string(), read.clone());
        read
    }

    /// The field ids of a type's create screen.
    fn screen_ids(&mut self, project: &str, type_id: &str) -> Option<Vec<String>> {
        self.create_screen(project, type_id).map(|fields| {
            fields
                .iter()
                .filter_map(|f| f.get("fieldId").and_then(Value::as_str))
                .map(String::from)
                .collect()
        })
    }

    /// Each `field_ids` entry exists; one the agent writes is also on the create and edit screens
    /// of the types it writes it for (the epic on Cloud through `parent`, see
    /// `commands::issue_fields`); one it only reads needs no screen.
    fn fields(
        &mut self,
        project: &str,
        types: &[(String, String, String)],
        samples: &BTreeMap<String, String>,
        d: Deployment,
    ) {
        // GET /rest/api/2/field: every field, system and custom.
        let all: Vec<(String, String)> = match self.jira.read_json::<Value>("/rest/api/2/field") {
            Ok(Value::Array(fields)) => fields.iter().filter_map(id_name).collect(),
            Ok(_) => {
                self.push("поля", false, "GET field: ответ не список полей");
                return;
            }
            Err(error) => {
                self.push("поля", false, format!("GET field: {error}"));
                return;
            }
        };
        // The edit screen, where the project has an issue of the type:
        // GET /rest/api/2/issue/{key}/editmeta, `{"fields": {fieldId: {…}}}` (REST v2, Data
        // Center and Cloud).
        let mut edits: BTreeMap<String, Option<Vec<String>>> = BTreeMap::new();
        let mut edit_screen = |jira: &mut Jira, issue: &str| -> Option<Vec<String>> {
            edits
                .entry(issue.to_string())
                .or_insert_with(|| {
                    let path = format!("/rest/api/2/issue/{}/editmeta", jql::encode(issue));
                    jira.read_json::<Value>(&path).ok().map(|answer| {
                        answer
                            .get("fields")
                            .and_then(Value::as_object)
                            .map(|fields| fields.keys().cloned().collect())
                            .unwrap_or_default()
                    })
                })
                .clone()
        };
        let field_ids = self.settings.field_ids.clone();
        for (key, id) in &field_ids {
            let name = format!("поле {key}");
            if key == "epic_link" && d == Deployment::Cloud {
                // Cloud: the epic goes through `parent`; Epic Link is not used.
                let mut missing = Vec::new();
                for (logical, type_id, type_name) in types.iter().filter(|t| t.0 != "epic") {
                    match self.screen_ids(project, type_id) {
                        Some(fields) if fields.iter().any(|f| f == "parent") => {}
                        Some(_) => missing.push(format!("{logical} «{type_name}» ({type_id})")),
                        None => missing.push(format!(
                            "{logical} «{type_name}» ({type_id}): экран создания не прочитан"
                        )),
                    }
                    if let Some(issue) = samples.get(type_id) {
                        match edit_screen(self.jira, issue) {
                            Some(fields) if fields.iter().any(|f| f == "parent") => {}
                            Some(_) => missing.push(format!("экран правки {issue} ({logical})")),
                            None => missing.push(format!("{issue}: editmeta не прочитан")),
                        }
                    }
                }
                if missing.is_empty() {
                    self.push(
                        name,
                        true,
                        format!("на Cloud эпик задаётся полем parent ({id} не используется); parent есть на экранах создания и правки"),
                    );
                } else {
                    self.push(
                        name,
                        false,
                        format!(
                            "на Cloud эпик задаётся полем parent, а его нет на экранах: {}",
                            missing.join(", ")
                        ),
                    );
                }
                continue;
            }
            let Some((_, field_name)) = all.iter().find(|(f, _)| f == id) else {
                self.push(
                    name,
                    false,
                    format!("поля {id} в Jira нет (GET /rest/api/2/field)"),
                );
                continue;
            };
            let field_name = field_name.clone();
            if !WRITTEN_FIELDS.contains(&key.as_str()) {
                // Only read (the sprint: the agent puts issues into sprints through the agile
                // API, and the hub reads the field from search answers): it needs to exist, not
                // to be on a screen (kanban projects and many scrum screens leave it off).
                self.push(
                    name,
                    true,
                    format!(
                        "{id} «{field_name}» есть (агент поле только читает, экраны ему не нужны)"
                    ),
                );
                continue;
            }
            // Who writes it: the epic link every type but the epic; the others every type.
            let users: Vec<&(String, String, String)> = types
                .iter()
                .filter(|t| !(key == "epic_link" && t.0 == "epic"))
                .collect();
            let mut missing = Vec::new();
            for (logical, type_id, type_name) in users {
                match self.screen_ids(project, type_id) {
                    Some(fields) if fields.iter().any(|f| f == id) => {}
                    Some(_) => {
                        missing.push(format!("создания {logical} «{type_name}» ({type_id})"))
                    }
                    None => missing.push(format!(
                        "{logical} «{type_name}» ({type_id}): экран создания не прочитан"
                    )),
                }
                if let Some(issue) = samples.get(type_id) {
                    match edit_screen(self.jira, issue) {
                        Some(fields) if fields.iter().any(|f| f == id) => {}
                        Some(_) => missing.push(format!("правки {issue} ({logical})")),
                        None => missing.push(format!("{issue}: editmeta не прочитан")),
                    }
                }
            }
            if missing.is_empty() {
                self.push(
                    name,
                    true,
                    format!("{id} «{field_name}» есть и стоит на экранах создания и правки"),
                );
            } else {
                self.push(
                    name,
                    false,
                    format!(
                        "{id} «{field_name}» нет на экранах в {project}: {}",
                        missing.join(", ")
                    ),
                );
            }
        }
    }

    /// Every `transitions_map` entry: its status is in the workflow of each configured type, and
    /// where an issue of the type exists, its transitions (read-only) do not contradict it.
    fn transitions(
        &mut self,
        project: &str,
        types: &[(String, String, String)],
        samples: &BTreeMap<String, String>,
    ) {
        if self.settings.transitions_map.is_empty() {
            self.push(
                "переходы",
                true,
                "transitions_map пуст: переходов хаб не делает",
            );
            return;
        }
        // GET /rest/api/2/project/{key}/statuses: per issue type, its statuses.
        let per_type: Vec<(String, Vec<(String, String)>)> = match self.jira.read_json::<Value>(
            &format!("/rest/api/2/project/{}/statuses", jql::encode(project)),
        ) {
            Ok(Value::Array(list)) => list
                .iter()
                .filter_map(|t| {
                    let id = t.get("id").and_then(Value::as_str)?.to_string();
                    let statuses = t
                        .get("statuses")
                        .and_then(Value::as_array)
                        .map(|s| s.iter().filter_map(id_name).collect())
                        .unwrap_or_default();
                    Some((id, statuses))
                })
                .collect(),
            Ok(_) => {
                self.push("переходы", false, "статусы проекта: ответ не список");
                return;
            }
            Err(error) => {
                self.push("переходы", false, format!("статусы проекта: {error}"));
                return;
            }
        };
        let mut offered: BTreeMap<String, Option<Vec<Offer>>> = BTreeMap::new();
        let map = self.settings.transitions_map.clone();
        for (status, target) in &map {
            let name = format!("переход «{status}»");
            let (status_id, transition_id) = match target {
                TransitionTarget::TransitionId(t) => (None, Some(t.clone())),
                TransitionTarget::Status {
                    status_id,
                    transition_id,
                } => (Some(status_id.clone()), transition_id.clone()),
            };
            let mut problems = Vec::new();
            let mut notes = Vec::new();
            for (logical, type_id, type_name) in types {
                let statuses = per_type
                    .iter()
                    .find(|(id, _)| id == type_id)
                    .map(|(_, s)| s.as_slice())
                    .unwrap_or_default();
                let hit = statuses.iter().find(|(id, n)| match &status_id {
                    Some(want) => id == want,
                    None => n == status,
                });
                let Some((target_id, target_name)) = hit else {
                    let wanted = status_id
                        .as_ref()
                        .map_or(format!("«{status}»"), |id| id.clone());
                    problems.push(format!(
                        "статуса {wanted} нет в процессе типа {logical} «{type_name}» ({type_id}); есть: {}",
                        list(statuses)
                    ));
                    continue;
                };
                let Some(issue) = samples.get(type_id) else {
                    notes.push(format!(
                        "{logical}: задач этого типа нет, проверен только статус"
                    ));
                    continue;
                };
                let offers = offered
                    .entry(issue.clone())
                    .or_insert_with(|| {
                        // GET /rest/api/2/issue/{key}/transitions: what the workflow offers
                        // from the issue's current status (read-only).
                        self.jira
                            .read_json::<Value>(&format!(
                                "/rest/api/2/issue/{}/transitions",
                                jql::encode(issue)
                            ))
                            .ok()
                            .map(|answer| {
                                answer
                                    .get("transitions")
                                    .and_then(Value::as_array)
                                    .map(|list| {
                                        list.iter()
                                            .filter_map(|t| {
                                                Some((
                                                    t.get("id")?.as_str()?.to_string(),
                                                    t.pointer("/to/id")?.as_str()?.to_string(),
                                                    t.pointer("/to/name")?.as_str()?.to_string(),
                                                ))
                                            })
                                            .collect()
                                    })
                                    .unwrap_or_default()
                            })
                    })
                    .clone();
                let Some(offers) = offers else {
                    notes.push(format!("{logical}: переходы {issue} не прочитаны"));
                    continue;
                };
                if let Some(tid) = &transition_id
                    && let Some((_, to_id, to_name)) = offers.iter().find(|(t, _, _)| t == tid)
                    && to_id != target_id
                {
                    problems.push(format!(
                        "переход {tid} у {issue} (тип {logical} «{type_name}») ведёт в «{to_name}» ({to_id}), а не в «{target_name}» ({target_id})"
                    ));
                    continue;
                }
                if offers.iter().any(|(_, to, _)| to == target_id) {
                    notes.push(format!("{logical}: {issue} предлагает переход"));
                } else {
                    notes.push(format!(
                        "{logical}: из текущего статуса {issue} перехода нет, проверен статус"
                    ));
                }
            }
            if problems.is_empty() {
                self.push(name, true, notes.join("; "));
            } else {
                self.push(name, false, problems.join("; "));
            }
        }
    }

    /// Type id → the key of one issue of that type in the project (one page of a search).
    fn samples(&mut self, project: &str, d: Deployment) -> BTreeMap<String, String> {
        let jql = format!("project = {}", crate::domain::jql::project_value(project));
        let path = match d {
            Deployment::Server => format!(
                "/rest/api/2/search?jql={}&startAt=0&maxResults=100&fields=issuetype",
                jql::encode(&jql)
            ),
            Deployment::Cloud => format!(
                "/rest/api/2/search/jql?jql={}&maxResults=100&fields=issuetype",
                jql::encode(&jql)
            ),
        };
        let mut out = BTreeMap::new();
        if let Ok(answer) = self.jira.read_json::<Value>(&path) {
            for issue in answer
                .get("issues")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let (Some(key), Some(type_id)) = (
                    issue.get("key").and_then(Value::as_str),
                    issue
                        .pointer("/fields/issuetype/id")
                        .and_then(Value::as_str),
                ) {
                    out.entry(type_id.to_string())
                        .or_insert_with(|| key.to_string());
                }
            }
        }
        out
    }

    fn link_types(&mut self) {
        let wanted = self.settings.link_types.clone();
        if wanted.is_empty() {
            return;
        }
        // GET /rest/api/2/issueLinkType: `{"issueLinkTypes": [{id, name, inward, outward}]}`.
        let available: Vec<(String, String)> =
            match self.jira.read_json::<Value>("/rest/api/2/issueLinkType") {
                Ok(answer) => answer
                    .get("issueLinkTypes")
                    .and_then(Value::as_array)
                    .map(|l| l.iter().filter_map(id_name).collect())
                    .unwrap_or_default(),
                Err(error) => {
                    self.push("типы связей", false, format!("issueLinkType: {error}"));
                    return;
                }
            };
        for (key, type_name) in &wanted {
            let name = format!("тип связи {key}");
            match available.iter().find(|(_, n)| n == type_name) {
                Some((id, _)) => self.push(name, true, format!("«{type_name}» ({id})")),
                None => self.push(
                    name,
                    false,
                    format!(
                        "типа связи «{type_name}» в Jira нет; есть: {}",
                        names(&available)
                    ),
                ),
            }
        }
    }

    /// Each `priority_map` value is a priority Jira has. Data Center: `GET /rest/api/2/priority`
    /// (`[{id, name, …}]`). Cloud: Atlassian's description of December 2025 marks both
    /// `GET /rest/api/3/priority` and `GET /rest/api/3/priority/search` deprecated (priority
    /// schemes replaced them), so the priorities are those the project's create screens offer:
    /// `allowedValues` of the `priority` field in the create metadata of the configured types,
    /// already read for the fields check (no extra call; it is also what a create may set).
    fn priorities(
        &mut self,
        project: Option<&str>,
        types: &[(String, String, String)],
        deployment: Deployment,
    ) {
        let wanted = self.settings.priority_map.clone();
        if wanted.is_empty() {
            return;
        }
        let available: Vec<(String, String)> = match deployment {
            Deployment::Server => match self.jira.read_json::<Value>("/rest/api/2/priority") {
                Ok(Value::Array(list)) => list.iter().filter_map(id_name).collect(),
                Ok(_) => Vec::new(),
                Err(error) => {
                    self.push("приоритеты", false, format!("priority: {error}"));
                    return;
                }
            },
            Deployment::Cloud => {
                let Some(project) = project else {
                    self.push(
                        "приоритеты",
                        false,
                        "на Cloud приоритеты берутся с экранов создания проекта, а проект не прочитан",
                    );
                    return;
                };
                let mut offered: Vec<(String, String)> = Vec::new();
                for (_, type_id, _) in types {
                    let screen = self.create_screen(project, type_id).unwrap_or_default();
                    let values = screen
                        .iter()
                        .find(|f| f.get("fieldId").and_then(Value::as_str) == Some("priority"))
                        .and_then(|f| f.get("allowedValues"))
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    for pair in values.iter().filter_map(id_name) {
                        if !offered.contains(&pair) {
                            offered.push(pair);
                        }
                    }
                }
                if offered.is_empty() {
                    self.push(
                        "приоритеты",
                        false,
                        format!(
                            "на экранах создания задач в {project} нет поля priority со списком значений"
                        ),
                    );
                    return;
                }
                offered
            }
        };
        for (key, priority) in &wanted {
            let name = format!("приоритет {key}");
            match available.iter().find(|(_, n)| n == priority) {
                Some((id, _)) => self.push(name, true, format!("«{priority}» ({id})")),
                None => self.push(
                    name,
                    false,
                    format!(
                        "приоритета «{priority}» в Jira нет; есть: {}",
                        names(&available)
                    ),
                ),
            }
        }
    }

    /// The board of the settings (`board_id`), and its type. Each project's own board is given
    /// with its commands (a project's `board_id` at the hub) and is not known to the agent here.
    fn board(&mut self) {
        let Some(board) = self.settings.board_id else {
            self.push(
                "доска",
                true,
                "board_id в настройках не задан: доски проектов хаба приходят с командами",
            );
            return;
        };
        // GET /rest/agile/1.0/board/{boardId}: `{id, name, type, location}`; 404 when it does not
        // exist or the user may not see it.
        match self
            .jira
            .read_json::<Value>(&format!("/rest/agile/1.0/board/{board}"))
        {
            Ok(answer) => {
                let name = answer.get("name").and_then(Value::as_str).unwrap_or("");
                let kind = answer.get("type").and_then(Value::as_str).unwrap_or("?");
                self.push("доска", true, format!("{board}: «{name}», тип {kind}"));
            }
            Err(error) => self.push(
                "доска",
                false,
                format!("доски {board} нет или её не видно: {error}"),
            ),
        }
    }

    fn clock(&mut self) {
        match self.jira.skew_ms() {
            None => self.push("часы", false, "serverInfo не сообщил serverTime"),
            Some(skew) => {
                let words = skew_words(skew);
                if skew.abs() > MAX_SKEW_MS {
                    self.push(
                        "часы",
                        false,
                        format!("{words}: больше {} мин", MAX_SKEW_MS / 60_000),
                    );
                } else {
                    self.push("часы", true, words);
                }
            }
        }
    }

    fn limits(&mut self) {
        let seen = self.jira.limit_headers();
        let detail = if seen.is_empty() {
            "Jira не присылала заголовков ограничения частоты (X-RateLimit-*, RateLimit-Reason, Retry-After)".to_string()
        } else {
            seen.iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        self.push("ограничения частоты", true, detail);
    }
}

/// The report sent to the hub, cut to the protocol's bounds (at most
/// [`crate::protocol::MAX_CHECK_LINES`] lines; a cut keeps the failing lines first).
pub(crate) fn report(lines: &[Line], ran_at: time::OffsetDateTime) -> crate::protocol::CheckReport {
    use crate::protocol::{
        CheckLine, CheckReport, MAX_CHECK_DETAIL_CHARS, MAX_CHECK_LINES, MAX_CHECK_NAME_CHARS,
    };
    let cut = |text: &str, max: usize| -> String {
        if text.chars().count() <= max {
            text.to_string()
        } else {
            let mut short: String = text.chars().take(max - 1).collect();
            short.push('…');
            short
        }
    };
    // Within bounds: the printed order; over them, the failing lines first.
    let mut ordered: Vec<&Line> = lines.iter().collect();
    if lines.len() > MAX_CHECK_LINES {
        ordered.sort_by_key(|l| l.ok);
    }
    CheckReport {
        ran_at: crate::domain::time::format_utc(ran_at),
        ok: lines.iter().all(|l| l.ok),
        lines: ordered
            .into_iter()
            .take(MAX_CHECK_LINES)
            .map(|l| CheckLine {
                name: cut(&l.name, MAX_CHECK_NAME_CHARS),
                ok: l.ok,
                detail: cut(&l.detail, MAX_CHECK_DETAIL_CHARS),
            })
            .collect(),
    }
}

/// `{id, name}` of a JSON object.
fn id_name(value: &Value) -> Option<(String, String)> {
    let id = match value.get("id")? {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let name = value.get("name")?.as_str()?.to_string();
    Some((id, name))
}

/// `Имя (id), …`.
fn list(items: &[(String, String)]) -> String {
    if items.is_empty() {
        return "ничего".into();
    }
    items
        .iter()
        .map(|(id, n)| format!("{n} ({id})"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn names(items: &[(String, String)]) -> String {
    if items.is_empty() {
        return "ничего".into();
    }
    items
        .iter()
        .map(|(_, n)| format!("«{n}»"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn skew_words(skew_ms: i64) -> String {
    let seconds = skew_ms as f64 / 1000.0;
    if skew_ms >= 0 {
        format!("часы Jira впереди часов агента на {seconds:.1} с")
    } else {
        format!("часы Jira позади часов агента на {:.1} с", -seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_skews_in_words() {
        let line = Line {
            name: "проект".into(),
            ok: false,
            detail: "нет".into(),
        };
        assert_eq!(line.to_string(), "ОШИБКА проект: нет");
        assert!(skew_words(-1500).contains("позади"));
        assert!(skew_words(400_000).contains("впереди часов агента на 400.0 с"));
        assert_eq!(list(&[("10002".into(), "Задача".into())]), "Задача (10002)");
    }
}
