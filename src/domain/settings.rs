//! The hub's settings (data-model «Настройки», system.md §3): which keys exist, what each may
//! hold, their defaults, and the two views of them (the clients' and the agent's).
//!
//! Every write goes through [`validate_update`], whatever the transport (`PUT /settings`,
//! `jira-hub settings set`, `jira-hub init`): one bad key and nothing is written. Stored values are
//! read leniently by [`Settings::from_stored`]: a value that no longer validates (edited by hand,
//! left by an old version) falls back to its default with a warning instead of breaking the hub.

use super::ValidationError;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

pub(crate) const PROJECT_KEY: &str = "project_key";
pub(crate) const FIELD_IDS: &str = "field_ids";
pub(crate) const ISSUE_TYPES: &str = "issue_types";
pub(crate) const PRIORITY_MAP: &str = "priority_map";
pub(crate) const LINK_TYPES: &str = "link_types";
pub(crate) const TRANSITIONS_MAP: &str = "transitions_map";
pub(crate) const PACING: &str = "pacing";
pub(crate) const TOKENS: &str = "tokens";
pub(crate) const SETTINGS_VERSION: &str = "settings_version";
pub(crate) const BACKUP_KEEP: &str = "backup_keep";
pub(crate) const AUTO_REFRESH_MINUTES: &str = "auto_refresh_minutes";
pub(crate) const RELAY_DIR: &str = "relay_dir";
pub(crate) const CLOSED_STATUSES: &str = "closed_statuses";
pub(crate) const FULL_REFRESH_HOURS: &str = "full_refresh_hours";
pub(crate) const PRUNE_GUARD: &str = "prune_guard";
pub(crate) const RETENTION: &str = "retention";
pub(crate) const SCHEMA_VERSION: &str = "schema_version";
/// Legacy keys of schema v1–v3: kept in the table, never written, `board_id` passed to the agent.
pub(crate) const LEGACY_BASE_JQL: &str = "base_jql";
pub(crate) const LEGACY_BOARD_ID: &str = "board_id";

/// The message the data model quotes for a write of `base_jql`.
pub(crate) const BASE_JQL_READ_ONLY: &str = "базовая JQL собирается из проектов";
pub(crate) const BOARD_ID_READ_ONLY: &str =
    "доска задаётся у проекта (POST /projects, jira-hub projects add --board)";

pub(crate) const DEFAULT_CLOSED_STATUSES: [&str; 2] = ["Готово", "Снято"];
pub(crate) const DEFAULT_BACKUP_KEEP: u32 = 10;
/// Hours between two full automatic refreshes (the ones in between are incremental).
pub(crate) const DEFAULT_FULL_REFRESH_HOURS: u32 = 24;

/// When a full refresh may remove issues from the mirror by itself: a run that would remove, in
/// some project, more than `max_percent` percent of that project's mirrored issues, and either
/// at least `min_issues` of them or more than half of the project, is held until an operator
/// confirms it; so is a run that would remove all of a project's issues, whatever the numbers.
/// A later run that misses the same issues does not confirm it. `min_issues` spares the large
/// projects from a confirmation for a few dozen issues; a small project losing most of its issues
/// at once is held all the same (60 issues losing 49 is a lost permission or a changed filter far
/// more often than real work). The hub's alone: the agent never sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PruneGuard {
    pub max_percent: u32,
    pub min_issues: u32,
}

impl Default for PruneGuard {
    fn default() -> Self {
        PruneGuard {
            max_percent: 20,
            min_issues: 50,
        }
    }
}

impl PruneGuard {
    /// Whether removing `missing` of a project's `total` issues needs a confirmation.
    pub fn holds(&self, missing: u64, total: u64) -> bool {
        let over_share = missing * 100 > u64::from(self.max_percent) * total;
        let enough = missing >= u64::from(self.min_issues) || missing * 2 > total;
        (over_share && enough) || (total > 0 && missing == total)
    }
}

/// How long finished batches are kept, with their commands and attempts, in
/// days since the batch finished (its last command's `finished_at`, or its cancellation); 0
/// keeps them for ever. A batch with a command still queued or claimed is never pruned. The
/// defaults follow River's job cleaner in spirit (completed jobs go first, discarded and
/// cancelled ones are kept longer, riverqueue.com/docs/maintenance-services), stretched to
/// days because operators look at last month's batches in the console. The hub's alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// Batches whose commands all ended done (or confirmed by state).
    pub completed_days: u32,
    /// Batches with a command failed, skipped or cancelled, or cancelled themselves.
    pub failed_days: u32,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            completed_days: 30,
            failed_days: 90,
        }
    }
}

/// How the hub paces the agent; missing members take the defaults of system.md §3.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pacing {
    /// The pause the agent keeps between two Jira calls; also prices a batch's estimate.
    pub min_interval_ms: u32,
    /// The most commands one claim hands out, whatever the agent asks for.
    pub max_commands_per_claim: u32,
    /// How long a claimed command waits for its report before the hub takes it back.
    pub claim_timeout_seconds: u32,
    /// After this many deliveries without a report a timed-out command fails.
    pub max_deliveries: u32,
    /// The first pause handed out after the agent reports rate limiting.
    pub backoff_initial_seconds: u32,
    /// The pause stops doubling here.
    pub backoff_max_seconds: u32,
}

impl Default for Pacing {
    fn default() -> Self {
        Self {
            min_interval_ms: 300,
            max_commands_per_claim: 50,
            claim_timeout_seconds: 900,
            max_deliveries: 3,
            backoff_initial_seconds: 5,
            backoff_max_seconds: 300,
        }
    }
}

/// One Jira issue type the hub creates issues of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssueType {
    pub name: String,
    /// Jira's id of the type when known; the agent prefers it to the name.
    pub id: Option<String>,
}

/// The issue types by their logical name; `bug` only when configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssueTypes {
    pub task: IssueType,
    pub epic: IssueType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bug: Option<IssueType>,
}

impl IssueTypes {
    /// The type behind a logical name (`task`, `epic`, `bug`), if configured.
    pub(crate) fn get(&self, logical: &str) -> Option<&IssueType> {
        match logical {
            "task" => Some(&self.task),
            "epic" => Some(&self.epic),
            "bug" => self.bug.as_ref(),
            _ => None,
        }
    }
}

/// The two secrets: the agent's and the clients'. `Debug` never shows them (a `{:?}` in a log
/// line must not leak a token); only `jira-hub init` and `jira-hub tokens` print them.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub agent: String,
    pub client: String,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("agent", &"***")
            .field("client", &"***")
            .finish()
    }
}

/// Where a `transitions_map` entry sends an issue. Either the target status by its
/// id (translated names are never compared), with an optional transition id preferred when
/// several transitions lead there; or, as before, a bare transition id: then the agent takes
/// that transition only when Jira offers it for the issue *and* it leads to a status of the
/// entry's name, so a workflow where that id means something else is refused, not followed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum TransitionTarget {
    /// The legacy form: a transition id.
    TransitionId(String),
    /// The target status's id, and a transition id to prefer.
    Status {
        status_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        transition_id: Option<String>,
    },
}

/// All settings, typed, with defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub project_key: Option<String>,
    pub field_ids: BTreeMap<String, String>,
    pub issue_types: Option<IssueTypes>,
    pub priority_map: BTreeMap<String, String>,
    pub link_types: BTreeMap<String, String>,
    pub transitions_map: BTreeMap<String, TransitionTarget>,
    pub pacing: Pacing,
    /// `None` until `init` made them.
    pub tokens: Option<Tokens>,
    pub settings_version: i64,
    pub backup_keep: u32,
    /// `None` or 0: no automatic refresh.
    pub auto_refresh_minutes: Option<u32>,
    /// The shared folder of the file relay; `None`: no relay.
    pub relay_dir: Option<String>,
    pub closed_statuses: Vec<String>,
    /// The automatic refresh is full when the last full run started this long ago (or never
    /// was); incremental otherwise. The hub's alone: the agent never sees it.
    pub full_refresh_hours: u32,
    /// When a full refresh's removals wait for a confirmation.
    pub prune_guard: PruneGuard,
    /// How long finished batches are kept.
    pub retention: Retention,
    /// `board_id` left by a v3 database: the agent's fallback board for commands enqueued before
    /// the migration. Never shown to clients, never written.
    pub legacy_board_id: Option<Value>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            project_key: None,
            field_ids: BTreeMap::new(),
            issue_types: None,
            priority_map: BTreeMap::new(),
            link_types: BTreeMap::new(),
            transitions_map: BTreeMap::new(),
            pacing: Pacing::default(),
            tokens: None,
            settings_version: 0,
            backup_keep: DEFAULT_BACKUP_KEEP,
            auto_refresh_minutes: None,
            relay_dir: None,
            closed_statuses: DEFAULT_CLOSED_STATUSES.map(String::from).to_vec(),
            full_refresh_hours: DEFAULT_FULL_REFRESH_HOURS,
            prune_guard: PruneGuard::default(),
            retention: Retention::default(),
            legacy_board_id: None,
        }
    }
}

fn typed<T: serde::de::DeserializeOwned>(value: &Value) -> Option<T> {
    serde_json::from_value(value.clone()).ok()
}

impl Settings {
    /// Reads the stored key → JSON pairs. Returns the settings and one warning per stored value
    /// that did not validate and was replaced by its default.
    pub(crate) fn from_stored(stored: &BTreeMap<String, Value>) -> (Settings, Vec<String>) {
        let mut settings = Settings::default();
        let mut warnings = Vec::new();
        for (key, value) in stored {
            let key = key.as_str();
            match key {
                SCHEMA_VERSION | LEGACY_BASE_JQL => continue,
                LEGACY_BOARD_ID => {
                    settings.legacy_board_id = Some(value.clone());
                    continue;
                }
                TOKENS => {
                    settings.tokens = typed(value);
                    if settings.tokens.is_none() {
                        warnings.push("stored setting tokens is malformed".to_string());
                    }
                    continue;
                }
                SETTINGS_VERSION => {
                    settings.settings_version = value.as_i64().unwrap_or(0);
                    continue;
                }
                _ => {}
            }
            let normalized = match validate_setting(key, value) {
                Ok(normalized) => normalized,
                Err(error) => {
                    warnings.push(format!(
                        "stored setting {key} is ignored, its default is used: {error}"
                    ));
                    continue;
                }
            };
            let applied = match key {
                PROJECT_KEY => typed(&normalized).map(|v| settings.project_key = v),
                FIELD_IDS => typed(&normalized).map(|v| settings.field_ids = v),
                ISSUE_TYPES => typed(&normalized).map(|v| settings.issue_types = Some(v)),
                PRIORITY_MAP => typed(&normalized).map(|v| settings.priority_map = v),
                LINK_TYPES => typed(&normalized).map(|v| settings.link_types = v),
                TRANSITIONS_MAP => typed(&normalized).map(|v| settings.transitions_map = v),
                PACING => typed(&normalized).map(|v| settings.pacing = v),
                BACKUP_KEEP => typed(&normalized).map(|v| settings.backup_keep = v),
                AUTO_REFRESH_MINUTES => {
                    typed(&normalized).map(|v| settings.auto_refresh_minutes = v)
                }
                RELAY_DIR => typed(&normalized).map(|v| settings.relay_dir = v),
                CLOSED_STATUSES => typed(&normalized).map(|v| settings.closed_statuses = v),
                FULL_REFRESH_HOURS => typed(&normalized).map(|v| settings.full_refresh_hours = v),
                PRUNE_GUARD => typed(&normalized).map(|v| settings.prune_guard = v),
                RETENTION => typed(&normalized).map(|v| settings.retention = v),
                _ => {
                    warnings.push(format!("stored setting {key} is unknown and ignored"));
                    Some(())
                }
            };
            if applied.is_none() {
                warnings.push(format!("stored setting {key} could not be read"));
            }
        }
        (settings, warnings)
    }

    /// The automatic refresh period in minutes, `None` when it is off.
    pub(crate) fn auto_refresh_period_minutes(&self) -> Option<u32> {
        self.auto_refresh_minutes.filter(|m| *m > 0)
    }

    /// What `GET /settings` and `jira-hub settings get` show: every setting but the tokens, plus
    /// the computed `base_jql`, read-only.
    pub(crate) fn public_view(&self, base_jql: Option<&str>) -> Value {
        let mut view = self.shared_view();
        view.insert(
            LEGACY_BASE_JQL.to_string(),
            base_jql.map_or(Value::Null, |j| Value::String(j.to_string())),
        );
        view.insert(RELAY_DIR.to_string(), json!(self.relay_dir));
        view.insert(CLOSED_STATUSES.to_string(), json!(self.closed_statuses));
        view.insert(
            FULL_REFRESH_HOURS.to_string(),
            json!(self.full_refresh_hours),
        );
        view.insert(PRUNE_GUARD.to_string(), json!(self.prune_guard));
        view.insert(RETENTION.to_string(), json!(self.retention));
        view.insert(SETTINGS_VERSION.to_string(), json!(self.settings_version));
        Value::Object(view)
    }

    /// What a claim answer carries in `settings`: every setting except `relay_dir`,
    /// `closed_statuses`, `full_refresh_hours`, `tokens` and `settings_version` (sent beside it), plus the legacy
    /// `board_id` when the database still has it.
    pub(crate) fn agent_view(&self) -> Value {
        let mut view = self.shared_view();
        if let Some(board_id) = &self.legacy_board_id {
            view.insert(LEGACY_BOARD_ID.to_string(), board_id.clone());
        }
        Value::Object(view)
    }

    fn shared_view(&self) -> Map<String, Value> {
        let mut view = Map::new();
        view.insert(PROJECT_KEY.into(), json!(self.project_key));
        view.insert(FIELD_IDS.into(), json!(self.field_ids));
        view.insert(ISSUE_TYPES.into(), json!(self.issue_types));
        view.insert(PRIORITY_MAP.into(), json!(self.priority_map));
        view.insert(LINK_TYPES.into(), json!(self.link_types));
        view.insert(TRANSITIONS_MAP.into(), json!(self.transitions_map));
        view.insert(PACING.into(), json!(self.pacing));
        view.insert(BACKUP_KEEP.into(), json!(self.backup_keep));
        view.insert(
            AUTO_REFRESH_MINUTES.into(),
            json!(self.auto_refresh_minutes),
        );
        view
    }
}

/// Checks a whole update (`PUT /settings` body) and returns the normalized values to store, in
/// the order given. The first bad key refuses the whole update.
pub(crate) fn validate_update(
    update: &Map<String, Value>,
) -> Result<Vec<(String, Value)>, ValidationError> {
    update
        .iter()
        .map(|(key, value)| Ok((key.clone(), validate_setting(key, value)?)))
        .collect()
}

/// Checks one key and value; returns the value to store (pacing with its defaults filled in).
pub(crate) fn validate_setting(key: &str, value: &Value) -> Result<Value, ValidationError> {
    match key {
        PROJECT_KEY => validate_project_key(value),
        FIELD_IDS | PRIORITY_MAP | LINK_TYPES => validate_string_map(key, value),
        TRANSITIONS_MAP => validate_transitions_map(value),
        ISSUE_TYPES => validate_issue_types(value),
        PACING => validate_pacing(value),
        BACKUP_KEEP => {
            validate_integer(key, value, 1, 100_000, false)?;
            Ok(value.clone())
        }
        AUTO_REFRESH_MINUTES => {
            validate_integer(key, value, 0, 525_600, true)?;
            Ok(value.clone())
        }
        RELAY_DIR => validate_relay_dir(value),
        CLOSED_STATUSES => validate_closed_statuses(value),
        FULL_REFRESH_HOURS => {
            validate_integer(key, value, 1, 87_600, false)?;
            Ok(value.clone())
        }
        PRUNE_GUARD => validate_prune_guard(value),
        RETENTION => validate_retention(value),
        LEGACY_BASE_JQL => Err(ValidationError::new(key, BASE_JQL_READ_ONLY)),
        LEGACY_BOARD_ID => Err(ValidationError::new(key, BOARD_ID_READ_ONLY)),
        TOKENS => Err(ValidationError::new(
            key,
            "токены меняются только командой jira-hub tokens --rotate",
        )),
        SETTINGS_VERSION => Err(ValidationError::new(
            key,
            "версия настроек увеличивается сама при каждой правке",
        )),
        SCHEMA_VERSION => Err(ValidationError::new(
            key,
            "версию схемы меняет только миграция",
        )),
        _ => Err(ValidationError::new(key, "неизвестная настройка")),
    }
}

/// A JSON string with something besides whitespace in it.
fn is_non_blank_string(value: Option<&Value>) -> bool {
    matches!(value, Some(Value::String(s)) if !s.trim().is_empty())
}

fn validate_project_key(value: &Value) -> Result<Value, ValidationError> {
    let valid = value.as_str().is_some_and(|key| {
        let mut chars = key.chars();
        key.len() <= 100
            && chars.next().is_some_and(|c| c.is_ascii_uppercase())
            && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    });
    if valid {
        Ok(value.clone())
    } else {
        Err(ValidationError::new(
            PROJECT_KEY,
            "ключ проекта Jira — строка из заглавных латинских букв, цифр и _, начиная с буквы",
        ))
    }
}

/// `transitions_map`: name → a transition id (legacy), or `{"status_id", "transition_id"?}`.
fn validate_transitions_map(value: &Value) -> Result<Value, ValidationError> {
    let key = TRANSITIONS_MAP;
    let Some(map) = value.as_object() else {
        return Err(ValidationError::new(
            key,
            "ожидается объект «статус → {\"status_id\": …} или id перехода»",
        ));
    };
    for (name, v) in map {
        if name.trim().is_empty() {
            return Err(ValidationError::new(key, "пустое имя в объекте"));
        }
        let field = format!("{key}.{name}");
        match v {
            Value::Object(target) => {
                if !is_non_blank_string(target.get("status_id")) {
                    return Err(ValidationError::new(
                        format!("{field}.status_id"),
                        "ожидается непустая строка: id целевого статуса Jira",
                    ));
                }
                if let Some(hint) = target.get("transition_id")
                    && !hint.is_null()
                    && !is_non_blank_string(Some(hint))
                {
                    return Err(ValidationError::new(
                        format!("{field}.transition_id"),
                        "ожидается непустая строка или null",
                    ));
                }
                if let Some(other) = target
                    .keys()
                    .find(|k| *k != "status_id" && *k != "transition_id")
                {
                    return Err(ValidationError::new(
                        format!("{field}.{other}"),
                        "неизвестное поле; допустимы status_id и transition_id",
                    ));
                }
            }
            other if is_non_blank_string(Some(other)) => {}
            _ => {
                return Err(ValidationError::new(
                    field,
                    "ожидается объект {\"status_id\": …} или непустая строка (id перехода)",
                ));
            }
        }
    }
    Ok(value.clone())
}

fn validate_string_map(key: &str, value: &Value) -> Result<Value, ValidationError> {
    let Some(map) = value.as_object() else {
        return Err(ValidationError::new(key, "ожидается объект «имя → строка»"));
    };
    for (name, v) in map {
        if name.trim().is_empty() {
            return Err(ValidationError::new(key, "пустое имя в объекте"));
        }
        if !is_non_blank_string(Some(v)) {
            return Err(ValidationError::new(
                format!("{key}.{name}"),
                "ожидается непустая строка",
            ));
        }
    }
    Ok(value.clone())
}

fn validate_issue_types(value: &Value) -> Result<Value, ValidationError> {
    let Some(map) = value.as_object() else {
        return Err(ValidationError::new(
            ISSUE_TYPES,
            "ожидается объект {task, epic, bug?}",
        ));
    };
    for (logical, issue_type) in map {
        let field = format!("{ISSUE_TYPES}.{logical}");
        if !matches!(logical.as_str(), "task" | "epic" | "bug") {
            return Err(ValidationError::new(
                field,
                "неизвестный тип задачи; допустимы task, epic, bug",
            ));
        }
        let Some(members) = issue_type.as_object() else {
            return Err(ValidationError::new(field, "ожидается объект {name, id}"));
        };
        if let Some(unknown) = members
            .keys()
            .find(|k| !matches!(k.as_str(), "name" | "id"))
        {
            return Err(ValidationError::new(
                format!("{field}.{unknown}"),
                "неизвестное поле; допустимы name и id",
            ));
        }
        if !is_non_blank_string(members.get("name")) {
            return Err(ValidationError::new(
                format!("{field}.name"),
                "название типа в Jira — непустая строка",
            ));
        }
        match members.get("id") {
            None | Some(Value::Null) => {}
            Some(Value::String(id)) if !id.trim().is_empty() => {}
            Some(_) => {
                return Err(ValidationError::new(
                    format!("{field}.id"),
                    "id типа в Jira — непустая строка или null",
                ));
            }
        }
    }
    for required in ["task", "epic"] {
        if !map.contains_key(required) {
            return Err(ValidationError::new(
                format!("{ISSUE_TYPES}.{required}"),
                "тип обязателен",
            ));
        }
    }
    let mut normalized = map.clone();
    for issue_type in normalized.values_mut() {
        if let Some(members) = issue_type.as_object_mut() {
            members.entry("id").or_insert(Value::Null);
        }
    }
    Ok(Value::Object(normalized))
}

/// How many Jira calls a command other than a refresh makes, about (a check, the write, a
/// read-back): with the pacing's interval, what the agent sizes its claims by.
pub(crate) const CALLS_PER_COMMAND: u64 = 4;
/// What one call takes besides the pacing's interval, about, in milliseconds.
pub(crate) const CALL_ALLOWANCE_MS: u64 = 500;

/// What one command needs at `min_interval_ms`, about, in milliseconds.
pub(crate) fn command_needs_ms(min_interval_ms: u64) -> u64 {
    (min_interval_ms + CALL_ALLOWANCE_MS) * CALLS_PER_COMMAND
}

/// What the agent keeps back from a lease of `lease_ms`: a command is not started, nor a wait
/// begun, that would end closer than this to the lease's end (a tenth, at least 2 s, at most
/// half of it).
pub(crate) fn lease_margin_ms(lease_ms: u64) -> u64 {
    (lease_ms / 10).max(2000).min(lease_ms / 2)
}

/// Seconds with a decimal comma and one decimal: `4,5`.
fn seconds_words(ms: u64) -> String {
    format!("{},{}", ms / 1000, ms % 1000 / 100)
}

/// The members of `pacing` with their lowest and highest allowed values.
const PACING_RANGES: [(&str, u64, u64); 6] = [
    ("min_interval_ms", 0, 600_000),
    ("max_commands_per_claim", 1, 1000),
    ("claim_timeout_seconds", 10, 604_800),
    ("max_deliveries", 1, 1000),
    ("backoff_initial_seconds", 0, 86_400),
    ("backoff_max_seconds", 0, 86_400),
];

fn validate_pacing(value: &Value) -> Result<Value, ValidationError> {
    let Some(map) = value.as_object() else {
        return Err(ValidationError::new(PACING, "ожидается объект"));
    };
    if let Some(unknown) = map
        .keys()
        .find(|k| !PACING_RANGES.iter().any(|(name, _, _)| name == k))
    {
        return Err(ValidationError::new(
            format!("{PACING}.{unknown}"),
            "неизвестный параметр темпа",
        ));
    }
    let mut normalized = match serde_json::to_value(Pacing::default()) {
        Ok(Value::Object(defaults)) => defaults,
        _ => Map::new(),
    };
    for (name, low, high) in PACING_RANGES {
        if let Some(v) = map.get(name) {
            let field = format!("{PACING}.{name}");
            match v.as_u64() {
                Some(n) if (low..=high).contains(&n) => {
                    normalized.insert(name.to_string(), v.clone());
                }
                _ => {
                    return Err(ValidationError::new(
                        field,
                        format!("ожидается целое от {low} до {high}"),
                    ));
                }
            }
        }
    }
    let initial = normalized
        .get("backoff_initial_seconds")
        .and_then(Value::as_u64);
    let max = normalized
        .get("backoff_max_seconds")
        .and_then(Value::as_u64);
    if let (Some(initial), Some(max)) = (initial, max)
        && max < initial
    {
        return Err(ValidationError::new(
            format!("{PACING}.backoff_max_seconds"),
            format!("не может быть меньше backoff_initial_seconds ({initial})"),
        ));
    }
    // One command must fit in a lease at this pacing: an agent that cannot
    // start one gives every claim back unstarted, and nothing ever runs.
    let interval = normalized.get("min_interval_ms").and_then(Value::as_u64);
    let timeout = normalized
        .get("claim_timeout_seconds")
        .and_then(Value::as_u64);
    if let (Some(interval), Some(timeout)) = (interval, timeout) {
        let lease_ms = timeout * 1000;
        let usable = lease_ms - lease_margin_ms(lease_ms);
        let needs = command_needs_ms(interval);
        if needs > usable {
            return Err(ValidationError::new(
                format!("{PACING}.min_interval_ms"),
                format!(
                    "при min_interval_ms = {interval} команде нужно около {} с ({CALLS_PER_COMMAND} вызова Jira), а claim_timeout_seconds = {timeout} оставляет ей {} с (аренда без запаса агента); уменьшите min_interval_ms или увеличьте claim_timeout_seconds",
                    seconds_words(needs),
                    seconds_words(usable)
                ),
            ));
        }
    }
    Ok(Value::Object(normalized))
}

fn validate_integer(
    key: &str,
    value: &Value,
    low: u64,
    high: u64,
    nullable: bool,
) -> Result<(), ValidationError> {
    if nullable && value.is_null() {
        return Ok(());
    }
    match value.as_u64() {
        Some(n) if (low..=high).contains(&n) => Ok(()),
        _ => Err(ValidationError::new(
            key,
            format!(
                "ожидается целое от {low} до {high}{}",
                if nullable { " или null" } else { "" }
            ),
        )),
    }
}

fn validate_relay_dir(value: &Value) -> Result<Value, ValidationError> {
    match value {
        Value::Null => Ok(Value::Null),
        Value::String(path) if path.starts_with('/') && !path.contains('\0') => Ok(value.clone()),
        Value::String(_) => Err(ValidationError::new(
            RELAY_DIR,
            "путь папки обмена должен быть абсолютным (начинаться с /)",
        )),
        _ => Err(ValidationError::new(
            RELAY_DIR,
            "ожидается абсолютный путь строкой или null",
        )),
    }
}

/// `prune_guard`: `{"max_percent": 0–100, "min_issues": ≥ 0}`; a member left out keeps its
/// default. Returns the object with both members.
fn validate_prune_guard(value: &Value) -> Result<Value, ValidationError> {
    let Some(object) = value.as_object() else {
        return Err(ValidationError::new(
            PRUNE_GUARD,
            "ожидается объект {\"max_percent\": 0–100, \"min_issues\": число}",
        ));
    };
    if let Some(other) = object
        .keys()
        .find(|k| *k != "max_percent" && *k != "min_issues")
    {
        return Err(ValidationError::new(
            format!("{PRUNE_GUARD}.{other}"),
            "неизвестное поле; допустимы max_percent и min_issues",
        ));
    }
    let mut guard = PruneGuard::default();
    if let Some(v) = object.get("max_percent") {
        validate_integer(&format!("{PRUNE_GUARD}.max_percent"), v, 0, 100, false)?;
        guard.max_percent = v.as_u64().unwrap_or_default() as u32;
    }
    if let Some(v) = object.get("min_issues") {
        validate_integer(
            &format!("{PRUNE_GUARD}.min_issues"),
            v,
            0,
            10_000_000,
            false,
        )?;
        guard.min_issues = v.as_u64().unwrap_or_default() as u32;
    }
    Ok(json!(guard))
}

/// `retention`: `{"completed_days", "failed_days"}`, each 0 (for ever) to 36,500; a member left
/// out keeps its default.
fn validate_retention(value: &Value) -> Result<Value, ValidationError> {
    let Some(object) = value.as_object() else {
        return Err(ValidationError::new(
            RETENTION,
            "ожидается объект {\"completed_days\": дни, \"failed_days\": дни} (0 — хранить всегда)",
        ));
    };
    if let Some(other) = object
        .keys()
        .find(|k| *k != "completed_days" && *k != "failed_days")
    {
        return Err(ValidationError::new(
            format!("{RETENTION}.{other}"),
            "неизвестное поле; допустимы completed_days и failed_days",
        ));
    }
    let mut retention = Retention::default();
    for (name, slot) in [
        ("completed_days", &mut retention.completed_days),
        ("failed_days", &mut retention.failed_days),
    ] {
        if let Some(v) = object.get(name) {
            validate_integer(&format!("{RETENTION}.{name}"), v, 0, 36_500, false)?;
            *slot = v.as_u64().unwrap_or_default() as u32;
        }
    }
    Ok(json!(retention))
}

fn validate_closed_statuses(value: &Value) -> Result<Value, ValidationError> {
    let Some(list) = value.as_array() else {
        return Err(ValidationError::new(
            CLOSED_STATUSES,
            "ожидается список имён статусов",
        ));
    };
    for (i, status) in list.iter().enumerate() {
        if !is_non_blank_string(Some(status)) {
            return Err(ValidationError::new(
                format!("{CLOSED_STATUSES}[{i}]"),
                "имя статуса — непустая строка",
            ));
        }
    }
    Ok(value.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(key: &str, value: Value, field: Option<&str>) {
        match (validate_setting(key, &value), field) {
            (Ok(_), None) => {}
            (Err(e), Some(field)) => assert_eq!(e.field, field, "{key} = {value}: {e}"),
            (result, expected) => {
                panic!("{key} = {value}: {result:?}, expected error on {expected:?}")
            }
        }
    }

    #[test]
    fn keys_and_values() {
        check("project_key", json!("AURORA"), None);
        check("project_key", json!("aurora"), Some("project_key"));
        check("project_key", json!(""), Some("project_key"));
        check("project_key", json!(7), Some("project_key"));
        check("field_ids", json!({"epic_link": "customfield_10101"}), None);
        check(
            "field_ids",
            json!({"epic_link": 10101}),
            Some("field_ids.epic_link"),
        );
        check("field_ids", json!([]), Some("field_ids"));
        check("transitions_map", json!({"Готово": "31"}), None);
        check(
            "transitions_map",
            json!({"Готово": {"status_id": "10001"}, "В работе": {"status_id": "3", "transition_id": "11"}}),
            None,
        );
        check(
            "transitions_map",
            json!({"Готово": {"transition_id": "31"}}),
            Some("transitions_map.Готово.status_id"),
        );
        check(
            "transitions_map",
            json!({"Готово": {"status_id": "1", "to": "x"}}),
            Some("transitions_map.Готово.to"),
        );
        check(
            "transitions_map",
            json!({"Готово": 31}),
            Some("transitions_map.Готово"),
        );
        check(
            "issue_types",
            json!({"task": {"name": "Задача", "id": "10002"}, "epic": {"name": "Эпик", "id": null}}),
            None,
        );
        check(
            "issue_types",
            json!({"task": {"name": "Задача"}}),
            Some("issue_types.epic"),
        );
        check(
            "issue_types",
            json!({"task": {"name": ""}, "epic": {"name": "Эпик"}}),
            Some("issue_types.task.name"),
        );
        check(
            "issue_types",
            json!({"task": {"name": "З"}, "epic": {"name": "Э"}, "story": {"name": "И"}}),
            Some("issue_types.story"),
        );
        check(
            "issue_types",
            json!({"task": {"name": "З", "id": 5}, "epic": {"name": "Э"}}),
            Some("issue_types.task.id"),
        );
        check("pacing", json!({}), None);
        check("pacing", json!({"min_interval_ms": 0}), None);
        // A pacing that cannot fit one command in a lease is refused, naming
        // both settings.
        let refused = validate_setting(
            "pacing",
            &json!({"min_interval_ms": 5000, "claim_timeout_seconds": 20}),
        )
        .unwrap_err();
        assert_eq!(refused.field, "pacing.min_interval_ms");
        assert!(
            refused.message.contains("min_interval_ms = 5000")
                && refused.message.contains("claim_timeout_seconds = 20")
                && refused.message.contains("22,0 с")
                && refused.message.contains("18,0 с"),
            "{}",
            refused.message
        );
        check(
            "pacing",
            json!({"min_interval_ms": 5000, "claim_timeout_seconds": 30}),
            None,
        );
        check(
            "pacing",
            json!({"max_commands_per_claim": 0}),
            Some("pacing.max_commands_per_claim"),
        );
        check(
            "pacing",
            json!({"max_commands_per_claim": 1001}),
            Some("pacing.max_commands_per_claim"),
        );
        check(
            "pacing",
            json!({"claim_timeout_seconds": 9}),
            Some("pacing.claim_timeout_seconds"),
        );
        check(
            "pacing",
            json!({"max_deliveries": 0}),
            Some("pacing.max_deliveries"),
        );
        check(
            "pacing",
            json!({"min_interval_ms": -1}),
            Some("pacing.min_interval_ms"),
        );
        check(
            "pacing",
            json!({"min_interval_ms": 1.5}),
            Some("pacing.min_interval_ms"),
        );
        check(
            "pacing",
            json!({"backoff_initial_seconds": 400}),
            Some("pacing.backoff_max_seconds"),
        );
        check("pacing", json!({"speed": 1}), Some("pacing.speed"));
        check("pacing", json!(5), Some("pacing"));
        check("backup_keep", json!(1), None);
        check(
            "retention",
            json!({"completed_days": 0, "failed_days": 36500}),
            None,
        );
        check(
            "retention",
            json!({"completed_days": -1}),
            Some("retention.completed_days"),
        );
        check(
            "retention",
            json!({"failed_days": 36501}),
            Some("retention.failed_days"),
        );
        check(
            "retention",
            json!({"done_days": 3}),
            Some("retention.done_days"),
        );
        check("retention", json!(30), Some("retention"));
        check("backup_keep", json!(0), Some("backup_keep"));
        check("backup_keep", json!(null), Some("backup_keep"));
        check("auto_refresh_minutes", json!(null), None);
        check("auto_refresh_minutes", json!(0), None);
        check(
            "auto_refresh_minutes",
            json!(-5),
            Some("auto_refresh_minutes"),
        );
        check("full_refresh_hours", json!(1), None);
        check("full_refresh_hours", json!(0), Some("full_refresh_hours"));
        check(
            "full_refresh_hours",
            json!(null),
            Some("full_refresh_hours"),
        );
        check("full_refresh_hours", json!(1.5), Some("full_refresh_hours"));
        check("relay_dir", json!("/srv/jira-bridge"), None);
        check("relay_dir", json!(null), None);
        check("relay_dir", json!("rshb/jira-bridge"), Some("relay_dir"));
        check("relay_dir", json!(42), Some("relay_dir"));
        check("closed_statuses", json!(["Готово"]), None);
        check("closed_statuses", json!([]), None);
        check("closed_statuses", json!("Готово"), Some("closed_statuses"));
        check(
            "closed_statuses",
            json!(["Готово", 3]),
            Some("closed_statuses[1]"),
        );
        check("base_jql", json!("project = AURORA"), Some("base_jql"));
        check("board_id", json!(4216), Some("board_id"));
        check(
            "tokens",
            json!({"agent": "a", "client": "c"}),
            Some("tokens"),
        );
        check("settings_version", json!(99), Some("settings_version"));
        check("schema_version", json!(5), Some("schema_version"));
        check("colour", json!("red"), Some("colour"));
    }

    #[test]
    fn base_jql_write_is_refused_with_the_spec_message() {
        let error = validate_setting("base_jql", &json!("project = AURORA")).unwrap_err();
        assert_eq!(error.message, "базовая JQL собирается из проектов");
    }

    #[test]
    fn pacing_members_take_defaults() {
        let normalized = validate_setting("pacing", &json!({"min_interval_ms": 100})).unwrap();
        let pacing: Pacing = serde_json::from_value(normalized).unwrap();
        assert_eq!(
            pacing,
            Pacing {
                min_interval_ms: 100,
                ..Pacing::default()
            }
        );
    }

    #[test]
    fn an_update_is_all_or_nothing() {
        let update = json!({"backup_keep": 3, "relay_dir": "relative"});
        let error = validate_update(update.as_object().unwrap()).unwrap_err();
        assert_eq!(error.field, "relay_dir");
    }

    #[test]
    fn stored_values_are_read_leniently() {
        let stored: BTreeMap<String, Value> = [
            ("schema_version", json!(4)),
            ("settings_version", json!(12)),
            ("backup_keep", json!(0)),
            ("pacing", json!({"max_deliveries": 5})),
            ("board_id", json!(4216)),
            ("base_jql", json!("project = AURORA AND labels = AWPCA")),
            ("tokens", json!({"agent": "a", "client": "c"})),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let (settings, warnings) = Settings::from_stored(&stored);
        assert_eq!(settings.settings_version, 12);
        assert_eq!(settings.backup_keep, DEFAULT_BACKUP_KEEP);
        assert_eq!(settings.pacing.max_deliveries, 5);
        assert_eq!(settings.pacing.min_interval_ms, 300);
        assert_eq!(settings.closed_statuses, ["Готово", "Снято"]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("backup_keep"));
        assert_eq!(
            settings.tokens.as_ref().map(|t| t.agent.as_str()),
            Some("a")
        );
    }

    #[test]
    fn views() {
        let settings = Settings {
            relay_dir: Some("/srv/relay".into()),
            tokens: Some(Tokens {
                agent: "secret-a".into(),
                client: "secret-c".into(),
            }),
            legacy_board_id: Some(json!(4216)),
            settings_version: 7,
            ..Settings::default()
        };
        let public = settings.public_view(Some("project = A AND labels in (\"X\")"));
        assert_eq!(
            public["base_jql"],
            json!("project = A AND labels in (\"X\")")
        );
        assert_eq!(public["relay_dir"], json!("/srv/relay"));
        assert_eq!(public["closed_statuses"], json!(["Готово", "Снято"]));
        assert_eq!(public["settings_version"], json!(7));
        assert_eq!(public["full_refresh_hours"], json!(24));
        assert!(public.get("board_id").is_none());
        assert!(!public.to_string().contains("secret"));

        let agent = settings.agent_view();
        for hidden in [
            "relay_dir",
            "closed_statuses",
            "full_refresh_hours",
            "tokens",
            "settings_version",
            "base_jql",
        ] {
            assert!(
                agent.get(hidden).is_none(),
                "{hidden} must not reach the agent"
            );
        }
        assert_eq!(agent["board_id"], json!(4216));
        assert_eq!(agent["pacing"]["max_deliveries"], json!(3));
        assert!(!agent.to_string().contains("secret"));
    }
}
