//! Batches and commands (data-model «Пакеты и команды», system.md §5) as rules: what each command
//! type's params may hold, how a `$result` reference is filled in, how a batch's status follows
//! from its commands, how long a batch is expected to take, how the agent is paced.

use super::ValidationError;
use super::project::validate_label;
use super::settings::{Pacing, Settings};
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use time::macros::format_description;

/// The longest error kept on a command, in characters.
pub(crate) const MAX_ERROR_CHARS: usize = 1500;

/// A command's type; its wire name (`ensure_issue`) is the serde and strum name.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    utoipa::ToSchema,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum CommandType {
    Refresh,
    EnsureIssue,
    Transition,
    Link,
    Comment,
}

impl CommandType {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    pub(crate) fn parse(text: &str) -> Option<CommandType> {
        text.parse().ok()
    }
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    utoipa::ToSchema,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum CommandStatus {
    Queued,
    Claimed,
    Done,
    Failed,
    Skipped,
    Cancelled,
    ConfirmedByState,
}

impl CommandStatus {
    pub(crate) const ALL: &[CommandStatus] = <CommandStatus as strum::VariantArray>::VARIANTS;

    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    pub(crate) fn parse(text: &str) -> Option<CommandStatus> {
        text.parse().ok()
    }

    /// Terminal statuses never change again.
    /// The status in Russian, as people see it (the console's badges, messages).
    pub(crate) fn label(self) -> &'static str {
        match self {
            CommandStatus::Queued => "в очереди",
            CommandStatus::Claimed => "у агента",
            CommandStatus::Done => "выполнена",
            CommandStatus::Failed => "ошибка",
            CommandStatus::Skipped => "пропущена",
            CommandStatus::Cancelled => "отменена",
            CommandStatus::ConfirmedByState => "подтверждена по состоянию",
        }
    }

    pub fn is_terminal(self) -> bool {
        !matches!(self, CommandStatus::Queued | CommandStatus::Claimed)
    }

    /// A dependency in this status lets its dependents go.
    pub fn satisfies_dependency(self) -> bool {
        matches!(self, CommandStatus::Done | CommandStatus::ConfirmedByState)
    }
}

/// A sync run's status (the `sync_run` table of a refresh command).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    utoipa::ToSchema,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum RunStatus {
    Running,
    Done,
    Failed,
    /// A full run whose removals from the mirror wait for a confirmation (`prune_guard`).
    Held,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What a sync run asked Jira for, fixed when it starts: `full` (the base JQL: the whole scope,
/// the only kind that prunes), `incremental` (a scope's JQL `AND updated >= <epoch ms>`: what
/// changed since shortly before the last successful run), `partial` (anything else: a project's
/// refresh, a base JQL a project was since added to).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    utoipa::ToSchema,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum RunKind {
    Full,
    Incremental,
    Partial,
}

impl RunKind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A batch's status, computed from its commands and `cancelled_at`, never stored.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    utoipa::ToSchema,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum BatchStatus {
    Queued,
    Running,
    Cancelled,
    Completed,
}

impl BatchStatus {
    /// The label people see (system.md §5).
    pub(crate) fn label(self) -> &'static str {
        match self {
            BatchStatus::Queued => "в очереди",
            BatchStatus::Running => "выполняется",
            BatchStatus::Cancelled => "отменён",
            BatchStatus::Completed => "завершён",
        }
    }
}

/// The data model's rule: commands not terminal → running (queued if all are queued); all
/// terminal → cancelled when the batch was cancelled, else completed.
pub(crate) fn batch_status(statuses: &[CommandStatus], cancelled: bool) -> BatchStatus {
    if statuses.iter().any(|s| !s.is_terminal()) {
        if statuses.iter().all(|s| *s == CommandStatus::Queued) {
            BatchStatus::Queued
        } else {
            BatchStatus::Running
        }
    } else if cancelled {
        BatchStatus::Cancelled
    } else {
        BatchStatus::Completed
    }
}

/// Counters per command status, every status present (zeros included).
pub(crate) fn counters(statuses: &[CommandStatus]) -> BTreeMap<&'static str, usize> {
    let mut counters: BTreeMap<&'static str, usize> =
        CommandStatus::ALL.iter().map(|s| (s.as_str(), 0)).collect();
    for status in statuses {
        *counters.entry(status.as_str()).or_default() += 1;
    }
    counters
}

/// An error cut to [`MAX_ERROR_CHARS`] characters, never inside one.
pub(crate) fn truncate_error(error: &str) -> String {
    match error.char_indices().nth(MAX_ERROR_CHARS) {
        Some((byte, _)) => error[..byte].to_string(),
        None => error.to_string(),
    }
}

/// A command of a batch request, before validation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CommandRequest {
    pub command_type: String,
    pub params: Value,
    /// The `seq` (1-based) of an earlier command of the same batch.
    pub depends_on: Option<i64>,
}

/// A validated command, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewCommand {
    pub seq: i64,
    pub command_type: CommandType,
    pub params: Value,
    pub depends_on_seq: Option<i64>,
}

/// The project a batch is enqueued in: its label goes on created issues, its board on commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchScope {
    pub label: String,
    pub board_id: Option<i64>,
}

/// `{"$result": "key"}`: the key from the result of the command this one depends on.
pub(crate) fn is_result_reference(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|o| o.len() == 1 && o.get("$result") == Some(&json!("key")))
}

pub(crate) fn is_issue_key(text: &str) -> bool {
    let Some((project, number)) = text.rsplit_once('-') else {
        return false;
    };
    let mut chars = project.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit())
}

/// A field path of a batch body with its command counted from 1, as `depends_on` and the console
/// count them: serde names the second command `commands[1]`, a person reads «команда 2», so the
/// path says `commands[2]`. Other paths are left as they are.
pub(crate) fn field_counted_from_one(field: &str) -> String {
    let Some(rest) = field.strip_prefix("commands[") else {
        return field.to_string();
    };
    let Some((index, tail)) = rest.split_once(']') else {
        return field.to_string();
    };
    match index.parse::<u64>() {
        Ok(index) => format!("commands[{}]{tail}", index + 1),
        Err(_) => field.to_string(),
    }
}

/// Validates the commands of one batch against the settings; returns them ready to store, with
/// the project's label and board applied. The first problem refuses the whole batch.
pub(crate) fn validate_commands(
    commands: &[CommandRequest],
    settings: &Settings,
    scope: Option<&BatchScope>,
) -> Result<Vec<NewCommand>, ValidationError> {
    if commands.is_empty() {
        return Err(ValidationError::new("commands", "пакет без команд"));
    }
    if commands.len() > 10_000 {
        return Err(ValidationError::new(
            "commands",
            "больше 10000 команд в одном пакете",
        ));
    }
    commands
        .iter()
        .enumerate()
        .map(|(i, request)| {
            let seq = i as i64 + 1;
            let at = format!("commands[{seq}]");
            let command_type = CommandType::parse(&request.command_type).ok_or_else(|| {
                ValidationError::new(
                    format!("{at}.type"),
                    "неизвестный тип команды; допустимы refresh, ensure_issue, transition, link, comment",
                )
            })?;
            if let Some(dep) = request.depends_on
                && (dep < 1 || dep >= seq) {
                    return Err(ValidationError::new(
                        format!("{at}.depends_on"),
                        "ссылка должна указывать на более раннюю команду этого пакета (seq от 1)",
                    ));
                }
            let mut params = request
                .params
                .as_object()
                .cloned()
                .ok_or_else(|| ValidationError::new(format!("{at}.params"), "ожидается объект"))?;
            let checker = ParamsChecker {
                at: &at,
                settings,
                has_dependency: request.depends_on.is_some(),
            };
            checker.check(command_type, &mut params, scope)?;
            Ok(NewCommand {
                seq,
                command_type,
                params: Value::Object(params),
                depends_on_seq: request.depends_on,
            })
        })
        .collect()
}

struct ParamsChecker<'a> {
    at: &'a str,
    settings: &'a Settings,
    has_dependency: bool,
}

impl ParamsChecker<'_> {
    fn error(&self, name: &str, message: impl Into<String>) -> ValidationError {
        ValidationError::new(format!("{}.params.{name}", self.at), message)
    }

    fn check(
        &self,
        command_type: CommandType,
        params: &mut Map<String, Value>,
        scope: Option<&BatchScope>,
    ) -> Result<(), ValidationError> {
        let allowed: &[&str] = match command_type {
            CommandType::Refresh => &["jql", "boards"],
            CommandType::EnsureIssue => &[
                "issue_type",
                "key",
                "summary",
                "description",
                "labels",
                "epic_key",
                "priority",
                "assignee",
                "duedate",
                "plan_start",
                "plan_end",
                "sprint",
                "board_id",
                "base",
            ],
            CommandType::Transition => &["key", "status"],
            CommandType::Link => &["from", "to", "type"],
            CommandType::Comment => &["key", "body"],
        };
        if let Some(unknown) = params.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(self.error(unknown, "неизвестный параметр"));
        }
        match command_type {
            CommandType::Refresh => {
                self.required_text(params, "jql")?;
                match params.get("boards") {
                    None | Some(Value::Null) => {
                        params.insert("boards".into(), json!([]));
                    }
                    Some(Value::Array(boards)) => {
                        if boards.iter().any(|b| b.as_i64().is_none_or(|b| b <= 0)) {
                            return Err(
                                self.error("boards", "ожидается список номеров досок (целые > 0)")
                            );
                        }
                    }
                    Some(_) => return Err(self.error("boards", "ожидается список номеров досок")),
                }
                if let Some(scope) = scope
                    && let (Some(board), Some(Value::Array(boards))) =
                        (scope.board_id, params.get_mut("boards"))
                    && !boards.contains(&json!(board))
                {
                    boards.push(json!(board));
                }
            }
            CommandType::EnsureIssue => self.ensure_issue(params, scope)?,
            CommandType::Transition => {
                self.issue_key(params, "key", true)?;
                let status = self.required_text(params, "status")?;
                if !self.settings.transitions_map.contains_key(&status) {
                    return Err(self.error(
                        "status",
                        format!("статуса «{status}» нет в transitions_map"),
                    ));
                }
            }
            CommandType::Link => {
                self.issue_key(params, "from", true)?;
                self.issue_key(params, "to", true)?;
                let link_type = self.required_text(params, "type")?;
                if !self.settings.link_types.contains_key(&link_type) {
                    return Err(
                        self.error("type", format!("типа связи «{link_type}» нет в link_types"))
                    );
                }
            }
            CommandType::Comment => {
                self.issue_key(params, "key", true)?;
                self.required_text(params, "body")?;
            }
        }
        Ok(())
    }

    fn ensure_issue(
        &self,
        params: &mut Map<String, Value>,
        scope: Option<&BatchScope>,
    ) -> Result<(), ValidationError> {
        let issue_type = self.required_text(params, "issue_type")?;
        let configured = self
            .settings
            .issue_types
            .as_ref()
            .and_then(|t| t.get(&issue_type));
        if configured.is_none() {
            return Err(self.error(
                "issue_type",
                format!("тип задачи «{issue_type}» не настроен в issue_types"),
            ));
        }
        self.issue_key(params, "key", false)?;
        self.required_text(params, "summary")?;
        if let Some(base) = params.get("base").filter(|b| !b.is_null()) {
            let base = super::edit::client_base(params, base).map_err(|e| self.error("base", e))?;
            params.insert("base".into(), base);
        }
        self.issue_key(params, "epic_key", false)?;
        for name in ["description", "assignee", "sprint"] {
            self.optional_text(params, name)?;
        }
        if let Some(priority) = self.optional_text(params, "priority")?
            && !self.settings.priority_map.contains_key(&priority)
        {
            return Err(self.error(
                "priority",
                format!("приоритета «{priority}» нет в priority_map"),
            ));
        }
        for name in ["duedate", "plan_start", "plan_end"] {
            if let Some(date) = self.optional_text(params, name)?
                && time::Date::parse(&date, format_description!("[year]-[month]-[day]")).is_err()
            {
                return Err(self.error(name, "ожидается дата ГГГГ-ММ-ДД"));
            }
        }
        match params.get("board_id") {
            None | Some(Value::Null) => {}
            Some(board) if board.as_i64().is_some_and(|b| b > 0) => {}
            Some(_) => return Err(self.error("board_id", "номер доски — целое больше нуля")),
        }
        let mut labels: Vec<String> = match params.get("labels") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                let mut labels = Vec::new();
                for item in items {
                    let Some(label) = item.as_str() else {
                        return Err(self.error("labels", "ожидается список строк"));
                    };
                    validate_label(label).map_err(|e| self.error("labels", e.message))?;
                    labels.push(label.to_string());
                }
                labels
            }
            Some(_) => return Err(self.error("labels", "ожидается список строк")),
        };
        if let Some(scope) = scope {
            if !labels.contains(&scope.label) {
                labels.push(scope.label.clone());
            }
            if let Some(board) = scope.board_id
                && params.get("board_id").is_none_or(Value::is_null)
            {
                params.insert("board_id".into(), json!(board));
            }
        }
        if params.contains_key("labels") || !labels.is_empty() {
            params.insert("labels".into(), json!(labels));
        }
        Ok(())
    }

    fn required_text(
        &self,
        params: &Map<String, Value>,
        name: &str,
    ) -> Result<String, ValidationError> {
        match params.get(name) {
            Some(Value::String(text)) if !text.trim().is_empty() => Ok(text.clone()),
            Some(Value::String(_)) => Err(self.error(name, "не может быть пустым")),
            Some(_) => Err(self.error(name, "ожидается строка")),
            None => Err(self.error(name, "обязательный параметр")),
        }
    }

    fn optional_text(
        &self,
        params: &Map<String, Value>,
        name: &str,
    ) -> Result<Option<String>, ValidationError> {
        match params.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.required_text(params, name).map(Some),
        }
    }

    /// An issue key, or a `$result` reference where the command has a dependency.
    fn issue_key(
        &self,
        params: &Map<String, Value>,
        name: &str,
        required: bool,
    ) -> Result<(), ValidationError> {
        match params.get(name) {
            None | Some(Value::Null) if !required => Ok(()),
            None | Some(Value::Null) => Err(self.error(name, "обязательный параметр")),
            Some(Value::String(key)) if is_issue_key(key) => Ok(()),
            Some(value) if is_result_reference(value) => {
                if self.has_dependency {
                    Ok(())
                } else {
                    Err(self.error(
                        name,
                        "{\"$result\": \"key\"} допустим только у команды с depends_on",
                    ))
                }
            }
            Some(_) => Err(self.error(
                name,
                "ожидается ключ задачи Jira (AURORA-17) или {\"$result\": \"key\"}",
            )),
        }
    }
}

/// Fills every `{"$result": "key"}` in `params` with the dependency's result key.
/// `Err` names what is missing when the dependency's result has no key.
pub(crate) fn substitute_result(
    params: &Value,
    dependency_result: Option<&Value>,
) -> Result<Value, String> {
    if is_result_reference(params) {
        return match dependency_result
            .and_then(|r| r.get("key"))
            .and_then(Value::as_str)
        {
            Some(key) => Ok(json!(key)),
            None => Err("результат команды, от которой зависит эта, не содержит key".to_string()),
        };
    }
    match params {
        Value::Object(map) => Ok(Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), substitute_result(v, dependency_result)?)))
                .collect::<Result<Map<_, _>, String>>()?,
        )),
        Value::Array(items) => Ok(Value::Array(
            items
                .iter()
                .map(|v| substitute_result(v, dependency_result))
                .collect::<Result<_, _>>()?,
        )),
        other => Ok(other.clone()),
    }
}

/// How many Jira calls a command is expected to take; a refresh reads one page per 100 issues of
/// the mirror and every board.
pub(crate) fn expected_jira_calls(command: &NewCommand, mirror_issues: i64) -> i64 {
    let params = &command.params;
    match command.command_type {
        CommandType::Refresh => {
            let boards = params
                .get("boards")
                .and_then(Value::as_array)
                .map_or(0, Vec::len) as i64;
            1 + mirror_issues / 100 + boards
        }
        CommandType::EnsureIssue => {
            let update = params.get("key").is_some_and(|k| !k.is_null());
            let sprint = params.get("sprint").is_some_and(|s| !s.is_null());
            1 + i64::from(update) + i64::from(sprint)
        }
        CommandType::Transition => 2,
        CommandType::Link | CommandType::Comment => 1,
    }
}

/// `estimate_seconds`: expected Jira calls × `min_interval_ms`, rounded up.
pub(crate) fn estimate_seconds(
    commands: &[NewCommand],
    pacing: &Pacing,
    mirror_issues: i64,
) -> i64 {
    let calls: i64 = commands
        .iter()
        .map(|c| expected_jira_calls(c, mirror_issues))
        .sum();
    (calls * i64::from(pacing.min_interval_ms) + 999) / 1000
}

/// The pause handed out after `rate_limited_reports` reports in a row brought rate limiting:
/// none, then `backoff_initial_seconds`, doubling, up to `backoff_max_seconds`.
pub(crate) fn backoff_pause(pacing: &Pacing, rate_limited_reports: u32) -> u32 {
    if rate_limited_reports == 0 {
        return 0;
    }
    let doublings = (rate_limited_reports - 1).min(31);
    let pause = u64::from(pacing.backoff_initial_seconds) << doublings;
    pause.min(u64::from(pacing.backoff_max_seconds)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::settings::{IssueType, IssueTypes};
    use CommandStatus::*;

    /// strum's names (the store, `as_str`, `parse`) are serde's (the API) and the old tables'.
    #[test]
    fn wire_names_are_the_same_everywhere() {
        let all = <CommandType as strum::VariantArray>::VARIANTS;
        let types: Vec<&str> = all.iter().map(|t| t.as_str()).collect();
        assert_eq!(
            types,
            ["refresh", "ensure_issue", "transition", "link", "comment"]
        );
        for t in all {
            assert_eq!(json!(t), json!(t.as_str()));
            assert_eq!(CommandType::parse(t.as_str()), Some(*t));
            assert_eq!(t.to_string(), t.as_str());
        }
        let statuses: Vec<&str> = CommandStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            statuses,
            [
                "queued",
                "claimed",
                "done",
                "failed",
                "skipped",
                "cancelled",
                "confirmed_by_state"
            ]
        );
        for s in CommandStatus::ALL {
            assert_eq!(json!(s), json!(s.as_str()));
            assert_eq!(CommandStatus::parse(s.as_str()), Some(*s));
        }
        for (b, name) in [
            (BatchStatus::Queued, "queued"),
            (BatchStatus::Running, "running"),
            (BatchStatus::Cancelled, "cancelled"),
            (BatchStatus::Completed, "completed"),
        ] {
            let text: &'static str = b.into();
            assert_eq!((text, json!(b)), (name, json!(name)));
        }
        for (r, name) in [
            (RunStatus::Running, "running"),
            (RunStatus::Done, "done"),
            (RunStatus::Failed, "failed"),
        ] {
            assert_eq!((r.as_str(), json!(r)), (name, json!(name)));
            assert_eq!(name.parse::<RunStatus>().ok(), Some(r));
        }
        assert_eq!(CommandType::parse("Refresh"), None);
        assert_eq!(CommandStatus::parse("DONE"), None);
    }

    fn settings() -> Settings {
        Settings {
            issue_types: Some(IssueTypes {
                task: IssueType {
                    name: "Задача".into(),
                    id: Some("10002".into()),
                },
                epic: IssueType {
                    name: "Эпик".into(),
                    id: None,
                },
                bug: None,
            }),
            priority_map: [("high".to_string(), "Высокий".to_string())].into(),
            link_types: [("blocks".to_string(), "Blocks".to_string())].into(),
            transitions_map: [(
                "Готово".to_string(),
                crate::domain::settings::TransitionTarget::TransitionId("31".to_string()),
            )]
            .into(),
            ..Settings::default()
        }
    }

    fn command(command_type: &str, params: Value, depends_on: Option<i64>) -> CommandRequest {
        CommandRequest {
            command_type: command_type.into(),
            params,
            depends_on,
        }
    }

    fn check(commands: &[CommandRequest], field: Option<&str>) {
        match (validate_commands(commands, &settings(), None), field) {
            (Ok(_), None) => {}
            (Err(e), Some(field)) => assert_eq!(e.field, field, "{e}"),
            (result, field) => panic!("{commands:?}: {result:?}, expected error on {field:?}"),
        }
    }

    #[test]
    fn body_paths_count_commands_from_one() {
        assert_eq!(
            field_counted_from_one("commands[0].depends_on"),
            "commands[1].depends_on"
        );
        assert_eq!(field_counted_from_one("commands[9]"), "commands[10]");
        assert_eq!(field_counted_from_one("title"), "title");
        assert_eq!(field_counted_from_one("commands[x]"), "commands[x]");
    }

    #[test]
    fn params_of_each_type() {
        let ok = |t: &str, p: Value| check(&[command(t, p, None)], None);
        let bad = |t: &str, p: Value, f: &str| check(&[command(t, p, None)], Some(f));
        ok(
            "refresh",
            json!({"jql": "project = AURORA", "boards": [4216]}),
        );
        ok("refresh", json!({"jql": "project = AURORA"}));
        bad("refresh", json!({"boards": []}), "commands[1].params.jql");
        bad(
            "refresh",
            json!({"jql": "x", "boards": [0]}),
            "commands[1].params.boards",
        );
        ok(
            "ensure_issue",
            json!({"issue_type": "task", "summary": "Сделать", "labels": ["AWPCA"], "priority": "high", "duedate": "2026-04-01", "epic_key": "AURORA-9"}),
        );
        ok(
            "ensure_issue",
            json!({"issue_type": "epic", "key": "AURORA-1", "summary": "Эпик"}),
        );
        bad(
            "ensure_issue",
            json!({"issue_type": "bug", "summary": "x"}),
            "commands[1].params.issue_type",
        );
        bad(
            "ensure_issue",
            json!({"issue_type": "task"}),
            "commands[1].params.summary",
        );
        bad(
            "ensure_issue",
            json!({"issue_type": "task", "summary": "x", "priority": "urgent"}),
            "commands[1].params.priority",
        );
        bad(
            "ensure_issue",
            json!({"issue_type": "task", "summary": "x", "duedate": "2026-02-30"}),
            "commands[1].params.duedate",
        );
        bad(
            "ensure_issue",
            json!({"issue_type": "task", "summary": "x", "plan_end": "01.04.2026"}),
            "commands[1].params.plan_end",
        );
        bad(
            "ensure_issue",
            json!({"issue_type": "task", "summary": "x", "labels": ["A B"]}),
            "commands[1].params.labels",
        );
        bad(
            "ensure_issue",
            json!({"issue_type": "task", "summary": "x", "key": "aurora-1"}),
            "commands[1].params.key",
        );
        bad(
            "ensure_issue",
            json!({"issue_type": "task", "summary": "x", "colour": "red"}),
            "commands[1].params.colour",
        );
        ok("transition", json!({"key": "AURORA-1", "status": "Готово"}));
        bad(
            "transition",
            json!({"key": "AURORA-1", "status": "Закрыто"}),
            "commands[1].params.status",
        );
        ok(
            "link",
            json!({"from": "AURORA-1", "to": "AURORA-2", "type": "blocks"}),
        );
        bad(
            "link",
            json!({"from": "AURORA-1", "to": "AURORA-2", "type": "Blocks"}),
            "commands[1].params.type",
        );
        ok("comment", json!({"key": "AURORA-1", "body": "текст"}));
        bad(
            "comment",
            json!({"key": "AURORA-1", "body": ""}),
            "commands[1].params.body",
        );
        bad(
            "comment",
            json!({"key": {"$result": "key"}, "body": "x"}),
            "commands[1].params.key",
        );
        bad("delete", json!({}), "commands[1].type");
        bad("comment", json!([]), "commands[1].params");
        check(&[], Some("commands"));
    }

    #[test]
    fn dependencies_point_backwards() {
        let create = command(
            "ensure_issue",
            json!({"issue_type": "task", "summary": "x"}),
            None,
        );
        let comment = |dep| {
            command(
                "comment",
                json!({"key": {"$result": "key"}, "body": "x"}),
                dep,
            )
        };
        check(&[create.clone(), comment(Some(1))], None);
        check(
            &[create.clone(), comment(Some(2))],
            Some("commands[2].depends_on"),
        );
        check(
            &[create.clone(), comment(Some(0))],
            Some("commands[2].depends_on"),
        );
        check(&[create, comment(None)], Some("commands[2].params.key"));
    }

    #[test]
    fn a_project_scope_adds_its_label_and_board() {
        let scope = BatchScope {
            label: "STOCKS_DRRK".into(),
            board_id: Some(77),
        };
        let commands = validate_commands(
            &[
                command("ensure_issue", json!({"issue_type": "task", "summary": "x", "labels": ["A"]}), None),
                command("ensure_issue", json!({"issue_type": "task", "summary": "y", "labels": ["STOCKS_DRRK"], "board_id": 5}), None),
                command("refresh", json!({"jql": "x"}), None),
            ],
            &settings(),
            Some(&scope),
        )
        .unwrap();
        assert_eq!(commands[0].params["labels"], json!(["A", "STOCKS_DRRK"]));
        assert_eq!(commands[0].params["board_id"], json!(77));
        assert_eq!(commands[1].params["labels"], json!(["STOCKS_DRRK"]));
        assert_eq!(
            commands[1].params["board_id"],
            json!(5),
            "an explicit board wins"
        );
        assert_eq!(commands[2].params["boards"], json!([77]));
    }

    #[test]
    fn statuses_of_a_batch() {
        assert_eq!(
            batch_status(&[Done, Claimed, Queued], false),
            BatchStatus::Running
        );
        assert_eq!(batch_status(&[Queued, Queued], false), BatchStatus::Queued);
        assert_eq!(
            batch_status(&[Done, Failed, Skipped], false),
            BatchStatus::Completed
        );
        assert_eq!(
            batch_status(&[Done, Done, Cancelled], true),
            BatchStatus::Cancelled
        );
        assert_eq!(
            batch_status(&[Done, Claimed, Cancelled], true),
            BatchStatus::Running
        );
        assert_eq!(BatchStatus::Running.label(), "выполняется");
        let c = counters(&[Done, Done, Cancelled]);
        assert_eq!((c["done"], c["cancelled"], c["queued"]), (2, 1, 0));
        assert_eq!(c.values().sum::<usize>(), 3);
    }

    #[test]
    fn errors_are_cut_by_characters() {
        let long = "ж".repeat(2000);
        assert_eq!(truncate_error(&long).chars().count(), 1500);
        assert_eq!(truncate_error("short"), "short");
        let mixed = format!("{}{}", "a".repeat(1499), "жжж");
        assert_eq!(truncate_error(&mixed), format!("{}ж", "a".repeat(1499)));
    }

    #[test]
    fn substitution() {
        let params =
            json!({"key": {"$result": "key"}, "body": "x", "nested": [{"$result": "key"}]});
        let result = json!({"key": "AURORA-17", "created": true});
        assert_eq!(
            substitute_result(&params, Some(&result)).unwrap(),
            json!({"key": "AURORA-17", "body": "x", "nested": ["AURORA-17"]})
        );
        assert!(substitute_result(&params, Some(&json!({"link_id": "1"}))).is_err());
        assert_eq!(
            substitute_result(&json!({"a": 1}), None).unwrap(),
            json!({"a": 1})
        );
    }

    #[test]
    fn backoff_doubles_to_the_cap() {
        let pacing = Pacing {
            backoff_initial_seconds: 5,
            backoff_max_seconds: 30,
            ..Pacing::default()
        };
        let pauses: Vec<u32> = (0..6).map(|n| backoff_pause(&pacing, n)).collect();
        assert_eq!(pauses, [0, 5, 10, 20, 30, 30]);
        assert_eq!(backoff_pause(&pacing, 1000), 30);
    }

    #[test]
    fn estimates() {
        let commands = validate_commands(
            &[
                command("comment", json!({"key": "AURORA-1", "body": "x"}), None),
                command(
                    "transition",
                    json!({"key": "AURORA-1", "status": "Готово"}),
                    None,
                ),
            ],
            &settings(),
            None,
        )
        .unwrap();
        assert_eq!(
            estimate_seconds(
                &commands,
                &Pacing {
                    min_interval_ms: 300,
                    ..Pacing::default()
                },
                0
            ),
            1
        );
        assert_eq!(
            estimate_seconds(
                &commands,
                &Pacing {
                    min_interval_ms: 1000,
                    ..Pacing::default()
                },
                0
            ),
            3
        );
    }
}
