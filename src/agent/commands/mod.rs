//! What each command does in Jira (system.md §5): `ensure_issue`, `transition`, `link`,
//! `comment`, `refresh`.
//!
//! Writes that must not happen twice: a create and a comment carry a marker (the
//! entity property [`MARKER_KEY`] naming the hub's command), so a later delivery recognises what
//! an earlier one made; a write whose answer was lost (timeout, dropped connection, 5xx, a
//! proxy's 502/504) is never repeated in the same delivery: the command is given back to the hub
//! (`released`) with a grace longer than any server or proxy time limit plus Cloud's search lag,
//! and every delivery after the first looks in Jira before it writes. An edit adds labels and
//! never replaces them.

use super::answer::Cause;
use super::jira_api::{Deployment, Jira, JiraError, SearchPage};
use crate::domain::settings::{IssueTypes, Pacing, TransitionTarget};
use crate::protocol::ClaimedCommand;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

mod comment;
mod issue;
mod link;
mod looks;
mod refresh;
mod transition;

/// The settings a claim answer hands the agent (the hub's agent view), read leniently: a member
/// that does not parse keeps its default.
#[derive(Debug, Clone, Default)]
pub(crate) struct AgentSettings {
    pub project_key: Option<String>,
    pub field_ids: BTreeMap<String, String>,
    pub issue_types: Option<IssueTypes>,
    pub priority_map: BTreeMap<String, String>,
    pub link_types: BTreeMap<String, String>,
    pub transitions_map: BTreeMap<String, TransitionTarget>,
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
    /// An edit stopped by a change made in Jira: reported `failed` with the conflict
    /// as its result.
    Conflict {
        error: String,
        result: Value,
    },
    /// A write's answer was lost and the write may still be running: the command goes back to
    /// the hub (`released`) with this reason, and is not written again in this delivery.
    Released(String),
    /// The agent is stopping: nothing to report, the hub hands the command out again.
    Stopped,
    /// The command goes back to the hub unfinished: Jira is held (`held` says why: its
    /// credentials are refused, or it cannot be reached), or a wait would outlast the lease;
    /// see `agent::give_back`.
    GiveBack {
        reason: String,
        held: Option<Cause>,
    },
}

impl Outcome {
    /// How a command's value ends: an edit's conflict (`{"key", "conflict": {…}}`, see
    /// [`Executor::checked_edit`]) is reported `failed` with the conflict as its result and its
    /// words as the error; any other value is done.
    fn of_value(value: Value) -> Outcome {
        match value
            .get("conflict")
            .and_then(|c| c.get("words"))
            .and_then(Value::as_str)
        {
            Some(words) => Outcome::Conflict {
                error: words.to_string(),
                result: value,
            },
            None => Outcome::Done(value),
        }
    }
}

/// A failure inside a command: a reason for the report, a lost answer, or a stop.
pub(super) enum Fail {
    Reason(String),
    Release(String),
    Stopped,
    GiveBack { reason: String, held: Option<Cause> },
}

/// The entity property that marks what the agent creates (issues and comments), set in the
/// create request itself. Its value names the hub's command (see [`marker`]).
pub(crate) const MARKER_KEY: &str = "jira-hub";

/// The marker of a command: its id, its batch and the batch's creation time (which tells two
/// hubs' commands of the same id apart), its type; the agent's name is only informative.
pub(crate) fn marker(command: &ClaimedCommand, agent: &str) -> Value {
    json!({"command": command.id, "batch": command.batch_id,
           "enqueued_at": command.enqueued_at, "type": command.command_type, "agent": agent})
}

/// Whose a marker is: `Some(true)` this command's, `Some(false)` another command's, `None` not
/// a hub marker at all.
pub(crate) fn marker_is_of(value: &Value, command: &ClaimedCommand) -> Option<bool> {
    let id = value.get("command").and_then(Value::as_i64)?;
    let batch = value.get("batch").and_then(Value::as_i64);
    let enqueued = value.get("enqueued_at").and_then(Value::as_str);
    Some(
        id == command.id
            && batch == Some(command.batch_id)
            && (enqueued.is_none()
                || command.enqueued_at.is_none()
                || enqueued == command.enqueued_at.as_deref()),
    )
}

/// A comment body in the form that survives Jira Cloud's storage (one rule with the edits'
/// descriptions).
pub(crate) use crate::domain::edit::normalized_body;

impl From<JiraError> for Fail {
    fn from(error: JiraError) -> Self {
        match error {
            JiraError::Stopped => Fail::Stopped,
            JiraError::Held { cause, reason } => Fail::GiveBack {
                reason,
                held: Some(cause),
            },
            JiraError::GiveBack(reason) => Fail::GiveBack { reason, held: None },
            // Jira's own words, quoted as such (they come in the account's language, often
            // English), after ours: one language per sentence.
            JiraError::Refused { status, message } => {
                Fail::Reason(format!("Jira отказала (HTTP {status}): «{message}»"))
            }
            JiraError::Ambiguous(error) => Fail::Release(format!(
                "ответ Jira потерян или неясен ({error}); запись могла выполниться, поэтому в этой выдаче она не повторяется"
            )),
            other => Fail::Reason(other.to_string()),
        }
    }
}

/// A failure's words, for a log line.
fn fail_words(error: Fail) -> String {
    match error {
        Fail::Reason(r) | Fail::Release(r) | Fail::GiveBack { reason: r, .. } => r,
        Fail::Stopped => "the agent is stopping".into(),
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
    /// `search_lag_seconds`; `None`: 60 s on Cloud, 0 on Server/DC.
    pub search_lag: Option<Duration>,
    /// The agent's name, written into markers (informative).
    pub agent: &'a str,
    /// How long a write may still run in Jira after its answer was lost: the request timeout.
    pub write_limit: Duration,
    /// `release_grace_seconds`: how long after a lost answer the agent looks for the write's
    /// marker before it gives the command back.
    pub grace: Duration,
    /// The claim answer's `created_at` (the hub's clock) and when it arrived: with the
    /// command's `enqueued_at` they give the batch's age, which bounds the checks on Jira's clock.
    pub claimed: Option<(&'a str, std::time::Instant)>,
    /// Waits this long, feeding the watchdog; false when the agent is stopping. Injected, so
    /// that the agent's clock can drive it (tests do not sleep).
    pub sleep: &'a dyn Fn(Duration) -> bool,
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
            "link" => self.link(command),
            "comment" => self.comment(command),
            "refresh" => self.refresh(params, on_page),
            other => Err(fail(format!("неизвестный тип команды {other:?}"))),
        };
        match result {
            Ok(value) => Outcome::of_value(value),
            // A refusal names the issue it was about (Jira's words often do not).
            Err(Fail::Reason(message)) => match text(params, "key") {
                Some(key) if !message.contains(&key) => {
                    Outcome::Failed(format!("{key}: {message}"))
                }
                _ => Outcome::Failed(message),
            },
            Err(Fail::Release(message)) => Outcome::Released(message),
            Err(Fail::Stopped) => Outcome::Stopped,
            Err(Fail::GiveBack { reason, held }) => Outcome::GiveBack { reason, held },
        }
    }

    /// How long Jira's search may take to show a write: `search_lag_seconds` when set; else
    /// 60 s on Cloud, [`CLUSTER_SEARCH_LAG`] on a Data Center cluster (an answer named its node,
    /// `X-ANODEID`), none on a single server, whose own index is written in the request that
    /// made the issue.
    fn lag(&mut self) -> Result<Duration, Fail> {
        Ok(match self.search_lag {
            Some(lag) => lag,
            None => match self.jira.deployment()? {
                Deployment::Cloud => Duration::from_secs(60),
                Deployment::Server if self.jira.clustered() => CLUSTER_SEARCH_LAG,
                Deployment::Server => Duration::ZERO,
            },
        })
    }
}

/// An id as Jira sends it: a string, or a number.
fn id_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A numeric id as Jira sends it: a string of digits, or a number.
pub(crate) fn id_number(value: &Value) -> Option<u64> {
    id_text(value).and_then(|id| id.parse().ok())
}

/// A value for a message, at most 200 characters.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 200 {
        text.chars().take(200).collect::<String>() + "…"
    } else {
        text
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

/// How far a Data Center cluster's search may lag behind a write made on another node, when
/// `search_lag_seconds` does not say: Atlassian's health check reports "Index replication …
/// is behind by 763 seconds" (KB "Lucene Index Synchronization in Jira Data Center"; each node
/// polls for changes once a second "and could start to fall behind"), rounded up to 15 minutes.
pub(crate) const CLUSTER_SEARCH_LAG: Duration = Duration::from_secs(15 * 60);

#[cfg(test)]
mod tests {
    use super::*;

    use crate::protocol::ClaimedCommand;
    use serde_json::json;

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
    fn bodies_compare_as_cloud_gives_them_back() {
        assert_eq!(
            normalized_body("Готово.  \r\nСтрока два\t\r\n\r\n\r\n\r\nАбзац\n\n"),
            "Готово.\nСтрока два\n\nАбзац"
        );
        assert_eq!(normalized_body("\n\n  текст"), "текст");
        assert_ne!(normalized_body("*жирный*"), normalized_body("жирный"));
    }

    #[test]
    fn markers_name_one_command() {
        let command: ClaimedCommand = serde_json::from_value(json!({"id": 7, "batch_id": 2,
            "seq": 1, "type": "comment", "params": {}, "delivery": 2,
            "enqueued_at": "2026-11-29T10:00:00Z"}))
        .unwrap();
        let mine = marker(&command, "agent-1");
        assert_eq!(marker_is_of(&mine, &command), Some(true));
        let other = json!({"command": 8, "batch": 2, "enqueued_at": "2026-11-29T10:00:00Z"});
        assert_eq!(marker_is_of(&other, &command), Some(false));
        let other_hub = json!({"command": 7, "batch": 2, "enqueued_at": "2026-01-01T00:00:00Z"});
        assert_eq!(marker_is_of(&other_hub, &command), Some(false));
        assert_eq!(marker_is_of(&json!({"note": "x"}), &command), None);
    }
}
