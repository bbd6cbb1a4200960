//! The legacy sync tool's config (`admin/jira-sync/config.example.json`) that `jira-hub init`
//! imports, and the rule that turns a legacy `base_jql` + `board_id` into projects, shared with
//! the v3→v4 migration so both produce the same projects.
//!
//! Only known keys are taken. Jira credentials are never taken: the hub never talks to Jira and
//! must not hold its password.

use super::ValidationError;
use super::jql::parse_legacy_base_jql;
use super::project::{NewProject, legacy_project_name};
use super::settings::{self, validate_setting};
use serde_json::{Map, Value, json};

/// Setting keys a config may carry as they are.
const SETTING_KEYS: [&str; 10] = [
    settings::PROJECT_KEY,
    settings::FIELD_IDS,
    settings::PRIORITY_MAP,
    settings::LINK_TYPES,
    settings::TRANSITIONS_MAP,
    settings::PACING,
    settings::BACKUP_KEEP,
    settings::AUTO_REFRESH_MINUTES,
    settings::RELAY_DIR,
    settings::CLOSED_STATUSES,
];

const ISSUE_TYPE_KEYS: [&str; 6] = [
    "issue_type_task",
    "issue_type_task_id",
    "issue_type_epic",
    "issue_type_epic_id",
    "issue_type_bug",
    "issue_type_bug_id",
];

/// What a config brings: validated settings, projects, and what the operator should be told.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ImportedConfig {
    /// Normalized setting values, ready to store.
    pub settings: Vec<(String, Value)>,
    /// Projects from the config's `base_jql`/`board_id`, in the order of the JQL.
    pub projects: Vec<NewProject>,
    /// Warnings about the legacy `base_jql`/`board_id`.
    pub warnings: Vec<String>,
    /// Keys that were not imported (credentials among them), by name only.
    pub ignored_keys: Vec<String>,
}

/// Reads a legacy config. Refuses (naming the key) a value that would not pass the settings'
/// own validation; nothing is imported then.
pub(crate) fn import_legacy_config(config: &Value) -> Result<ImportedConfig, ValidationError> {
    let Some(map) = config.as_object() else {
        return Err(ValidationError::new(
            "config",
            "конфиг должен быть JSON-объектом",
        ));
    };
    let mut imported = Vec::new();
    for key in SETTING_KEYS {
        if let Some(value) = map.get(key) {
            imported.push((key.to_string(), validate_setting(key, value)?));
        }
    }
    let (issue_types, mut type_warnings) = issue_types_from_config(map)?;
    imported.push((settings::ISSUE_TYPES.to_string(), issue_types));

    let mut legacy = legacy_projects(
        map.get(settings::LEGACY_BASE_JQL),
        map.get(settings::LEGACY_BOARD_ID),
    );
    let known = |k: &str| {
        SETTING_KEYS.contains(&k)
            || ISSUE_TYPE_KEYS.contains(&k)
            || k == settings::LEGACY_BASE_JQL
            || k == settings::LEGACY_BOARD_ID
    };
    let ignored_keys = map.keys().filter(|k| !known(k)).cloned().collect();
    legacy.warnings.append(&mut type_warnings);
    Ok(ImportedConfig {
        settings: imported,
        projects: legacy.projects,
        warnings: legacy.warnings,
        ignored_keys,
    })
}

/// Jira's own names of its standard issue types: the bug type, given by id only, takes its name.
const DEFAULT_TYPE_NAMES: [(&str, &str); 3] = [("task", "Task"), ("epic", "Epic"), ("bug", "Bug")];

/// `issue_types` from `issue_type_<t>` and `issue_type_<t>_id`: task and epic always, bug when
/// the config has at least one of its two keys (data model). Task and epic need their names, as
/// before; a bug type given by its id alone takes Jira's standard name (`Bug`), with a warning: the
/// agent creates issues by id, and the name only matters for reading the mirror.
fn issue_types_from_config(
    map: &Map<String, Value>,
) -> Result<(Value, Vec<String>), ValidationError> {
    let mut types = Map::new();
    let mut warnings = Vec::new();
    for (logical, default_name) in DEFAULT_TYPE_NAMES {
        let name_key = format!("issue_type_{logical}");
        let id_key = format!("issue_type_{logical}_id");
        let name = map.get(&name_key);
        let id = map.get(&id_key);
        if logical == "bug" && name.is_none() && id.is_none() {
            continue;
        }
        let name = match (name, id) {
            (Some(Value::String(name)), _) if !name.trim().is_empty() => name.trim().to_string(),
            (None | Some(Value::Null), Some(id)) if logical == "bug" && !id.is_null() => {
                warnings.push(format!(
                    "{name_key} is not set: issue type {logical} is named {default_name:?}, Jira's default; \
                     if your Jira names it otherwise, set issue_types"
                ));
                default_name.to_string()
            }
            _ => {
                return Err(ValidationError::new(
                    name_key,
                    "нужно название типа задачи в Jira (непустая строка)",
                ));
            }
        };
        let id = match id {
            None | Some(Value::Null) => Value::Null,
            Some(Value::String(s)) if !s.trim().is_empty() => json!(s.trim()),
            Some(Value::Number(n)) if n.is_u64() => json!(n.to_string()),
            Some(_) => {
                return Err(ValidationError::new(
                    id_key,
                    "id типа задачи — строка с числом или null",
                ));
            }
        };
        types.insert(logical.to_string(), json!({"name": name, "id": id}));
    }
    Ok((
        validate_setting(settings::ISSUE_TYPES, &Value::Object(types))?,
        warnings,
    ))
}

/// Projects recovered from a legacy `base_jql` and `board_id`, with warnings for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LegacyProjects {
    pub projects: Vec<NewProject>,
    pub warnings: Vec<String>,
}

/// The v3→v4 rule (data-model «Схема базы хаба»): the labels of `base_jql` become projects
/// (AWPCA named «АРМ КА», the others by their label); `board_id` goes to the project when there is
/// exactly one, else to none, with a warning. An unparsable `base_jql` gives no projects and a
/// warning quoting it.
pub(crate) fn legacy_projects(
    base_jql: Option<&Value>,
    board_id: Option<&Value>,
) -> LegacyProjects {
    let mut warnings = Vec::new();
    let labels = match base_jql {
        None | Some(Value::Null) => {
            warnings.push("no legacy base_jql: no projects were created".to_string());
            Vec::new()
        }
        Some(value) => match value.as_str().and_then(parse_legacy_base_jql) {
            Some(labels) => labels,
            None => {
                warnings.push(format!(
                    "legacy base_jql could not be parsed, no projects were created; its value was {value}"
                ));
                Vec::new()
            }
        },
    };
    let mut projects: Vec<NewProject> = labels
        .into_iter()
        .map(|label| NewProject {
            name: legacy_project_name(&label),
            label,
            board_id: None,
        })
        .collect();
    match board_id {
        None | Some(Value::Null) => {}
        Some(value) => match value.as_i64().filter(|id| *id > 0) {
            Some(id) if projects.len() == 1 => projects[0].board_id = Some(id),
            Some(id) => warnings.push(format!(
                "legacy board_id {id} was given to no project: there are {} projects, not one",
                projects.len()
            )),
            None => warnings.push(format!(
                "legacy board_id {value} is not a positive integer and was given to no project"
            )),
        },
    }
    LegacyProjects { projects, warnings }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Value {
        json!({
            "jira_url": "https://jira.example.org",
            "jira_user": "svc-jira-sync",
            "jira_password": "change-me",
            "project_key": "AURORA",
            "base_jql": "project = AURORA AND labels = AWPCA",
            "board_id": 4216,
            "issue_type_task": "Задача",
            "issue_type_task_id": "10002",
            "issue_type_epic": "Эпик",
            "issue_type_epic_id": "10000",
            "issue_type_bug": "Ошибка",
            "issue_type_bug_id": "10004",
            "pacing": {"min_interval_ms": 300},
            "backup_keep": 14,
            "sync_interval_seconds": 600
        })
    }

    fn setting<'a>(imported: &'a ImportedConfig, key: &str) -> Option<&'a Value> {
        imported
            .settings
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    #[test]
    fn imports_known_keys_only() {
        let imported = import_legacy_config(&example()).unwrap();
        assert_eq!(setting(&imported, "project_key"), Some(&json!("AURORA")));
        assert_eq!(setting(&imported, "backup_keep"), Some(&json!(14)));
        assert_eq!(
            setting(&imported, "pacing").unwrap()["max_deliveries"],
            json!(3)
        );
        assert_eq!(
            setting(&imported, "issue_types"),
            Some(
                &json!({"task": {"name": "Задача", "id": "10002"}, "epic": {"name": "Эпик", "id": "10000"}, "bug": {"name": "Ошибка", "id": "10004"}})
            )
        );
        let text = serde_json::to_string(&imported.settings).unwrap();
        assert!(!text.contains("change-me") && !text.contains("svc-jira-sync"));
        assert_eq!(
            imported.projects,
            vec![NewProject {
                label: "AWPCA".into(),
                name: "АРМ КА".into(),
                board_id: Some(4216)
            }]
        );
        for key in [
            "jira_url",
            "jira_user",
            "jira_password",
            "sync_interval_seconds",
        ] {
            assert!(imported.ignored_keys.iter().any(|k| k == key), "{key}");
        }
    }

    #[test]
    fn bug_only_when_configured() {
        let mut config = example();
        let map = config.as_object_mut().unwrap();
        map.remove("issue_type_bug");
        map.remove("issue_type_bug_id");
        let imported = import_legacy_config(&config).unwrap();
        assert!(
            setting(&imported, "issue_types")
                .unwrap()
                .get("bug")
                .is_none()
        );

        // Either key brings bug in (data model); by id alone it takes Jira's standard name.
        config
            .as_object_mut()
            .unwrap()
            .insert("issue_type_bug_id".into(), json!("10004"));
        let imported = import_legacy_config(&config).unwrap();
        assert_eq!(
            setting(&imported, "issue_types").unwrap()["bug"],
            json!({"name": "Bug", "id": "10004"})
        );
        assert!(
            imported
                .warnings
                .iter()
                .any(|w| w.contains("issue_type_bug"))
        );
        // A name that is there but not a string is still refused, naming the key.
        config["issue_type_bug"] = json!(5);
        assert_eq!(
            import_legacy_config(&config).unwrap_err().field,
            "issue_type_bug"
        );
    }

    #[test]
    fn bad_values_are_refused_by_key() {
        let mut config = example();
        config["relay_dir"] = json!("relative/path");
        assert_eq!(
            import_legacy_config(&config).unwrap_err().field,
            "relay_dir"
        );
        let mut config = example();
        config.as_object_mut().unwrap().remove("issue_type_task");
        assert_eq!(
            import_legacy_config(&config).unwrap_err().field,
            "issue_type_task"
        );
        assert_eq!(
            import_legacy_config(&json!([1])).unwrap_err().field,
            "config"
        );
    }

    #[test]
    fn legacy_board_rule() {
        let two = legacy_projects(
            Some(&json!("project = A AND labels in (X, AWPCA)")),
            Some(&json!(7)),
        );
        assert_eq!(two.projects.len(), 2);
        assert!(two.projects.iter().all(|p| p.board_id.is_none()));
        assert_eq!(two.projects[1].name, "АРМ КА");
        assert_eq!(two.projects[0].name, "X");
        assert!(two.warnings[0].contains("board_id 7"));

        let bad = legacy_projects(Some(&json!("project = A OR labels = X")), Some(&json!(7)));
        assert!(bad.projects.is_empty());
        assert!(
            bad.warnings[0].contains("project = A OR labels = X"),
            "{:?}",
            bad.warnings
        );
    }
}
