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

use super::answer::{Cause, Need};
use super::jira_api::{Deployment, Jira, JiraError, SearchPage};
use super::jql;
use super::net::Reply;
use crate::domain::settings::{IssueTypes, Pacing, TransitionTarget};
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

/// Jira's refusal of a link, naming both keys and, when Jira's words name one of them (the key
/// in its message, or the request's field `inwardIssue`/`outwardIssue` an error is keyed by),
/// which one it is about: «Jira отказала связать AURORA-1 с AURORA-9 (HTTP
/// 404), о задаче AURORA-9: «Issue Does Not Exist: AURORA-9»».
fn link_refusal(from: &str, to: &str, status: u16, message: &str) -> String {
    let names = |key: &str, field: &str| names_key(message, key) || message.contains(field);
    let about = match (names(from, "inwardIssue"), names(to, "outwardIssue")) {
        (true, false) => format!(", о задаче {from}"),
        (false, true) => format!(", о задаче {to}"),
        _ => String::new(),
    };
    format!("Jira отказала связать {from} с {to} (HTTP {status}){about}: «{message}»")
}

/// Whether `text` has `key` as a word of its own (AURORA-1 is not in AURORA-12 or XAURORA-1).
fn names_key(text: &str, key: &str) -> bool {
    !key.is_empty()
        && text.match_indices(key).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + key.len()..].chars().next();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
                && !after.is_some_and(|c| c.is_ascii_digit())
        })
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
            Ok(value) => super::conflict::outcome(value),
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

    // ---- ensure_issue ----

    fn ensure_issue(&mut self, command: &ClaimedCommand) -> Result<Value, Fail> {
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
        let created: Value = super::jira_api::parse(reply)?;
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

    /// A write answered 503 with `Retry-After`: a 503 is not proof that
    /// nothing was applied (a proxy answers it after forwarding), so the agent waits as asked and
    /// looks once: found, it is done. Not found, the write is never sent again in this delivery
    /// (`None`: the caller looks until its grace ends, then gives the command back): a search
    /// may lag behind the write (Cloud, a Data Center cluster's other nodes), and a write
    /// resent on the strength of what it did not show is a doubled issue or comment. `None`
    /// too when the answer was not such a 503.
    fn look_after_503<T>(
        &mut self,
        mut look: impl FnMut(&mut Self) -> Result<Option<T>, Fail>,
    ) -> Result<Option<T>, Fail> {
        let Some(wait) = self.jira.take_busy() else {
            return Ok(None);
        };
        if !(self.sleep)(wait) {
            return Err(Fail::Stopped);
        }
        look(self)
    }

    /// After a write's answer was lost: looking for the command's marker is a
    /// read, not a repeat. The agent looks a few times within `grace`, each wait twice the one
    /// before (1 s, 2 s, 4 s … on the injected clock, at most [`LOOK_MAX_STEP`]), and takes the
    /// write as done as soon as `look` finds it; a write still unseen at the end of the grace
    /// (or when a look fails) gives the command back (`released`), never written again in this
    /// delivery.
    fn look_after_lost_answer<T>(
        &mut self,
        command: &ClaimedCommand,
        error: &str,
        mut look: impl FnMut(&mut Self) -> Result<Option<T>, Fail>,
    ) -> Result<T, Fail> {
        let release = |why: String| {
            Fail::Release(format!(
                "ответ Jira на запись потерян ({error}); {why}; запись могла выполниться, поэтому в этой выдаче она не повторяется"
            ))
        };
        let mut waited = Duration::ZERO;
        let mut step = LOOK_FIRST_STEP;
        let mut looks = 0u32;
        while waited < self.grace {
            let wait = step.min(self.grace - waited);
            if !(self.sleep)(wait) {
                return Err(Fail::Stopped);
            }
            waited += wait;
            looks += 1;
            match look(self) {
                Ok(Some(found)) => return Ok(found),
                Ok(None) => {}
                Err(Fail::Stopped) => return Err(Fail::Stopped),
                Err(Fail::Reason(why) | Fail::Release(why))
                | Err(Fail::GiveBack { reason: why, .. }) => {
                    tracing::warn!(command = command.id, %why, "a look for a lost write's marker failed");
                    return Err(release(format!("поиск отметки не удался: {why}")));
                }
            }
            tracing::info!(
                command = command.id,
                looks,
                waited_ms = waited.as_millis() as u64,
                "a lost write's marker is not seen yet"
            );
            step = (step * 2).min(LOOK_MAX_STEP);
        }
        Err(release(format!(
            "отметка команды не найдена за {} с ({looks} проверок)",
            waited.as_secs()
        )))
    }

    /// The issue an earlier delivery of this command created, if any: this account's issues of
    /// the project created since the batch was enqueued (on Jira's clock, less a margin), with
    /// this summary, whose marker names this command. An issue marked for another command is
    /// never taken. On Cloud, whose search lags behind writes, nothing found is believed only
    /// once the earlier write has had time to end (the request timeout) and to show in search
    /// (the search lag) since the earlier delivery was given back; when the hub does not say
    /// (the earlier agent was killed), the whole of that time is waited, looking again meanwhile.
    fn already_created(
        &mut self,
        command: &ClaimedCommand,
        summary: &str,
    ) -> Result<Option<String>, Fail> {
        let since_ms = self.window_start_ms(command)?;
        let until_ms = self.window_end_ms(command)?;
        let lag = self.lag()?;
        let needed = if lag.is_zero() {
            Duration::ZERO
        } else {
            lag + self.write_limit
        };
        let waited_enough = command
            .released_seconds_ago
            .map(Duration::from_secs)
            .unwrap_or(Duration::ZERO);
        let mut remaining = needed.saturating_sub(waited_enough);
        loop {
            match self.find_marked(command, Some(summary), since_ms, until_ms)? {
                Found::Mine(key) => return Ok(Some(key)),
                Found::Unmarked(keys) => {
                    return Err(fail(format!(
                        "эта команда могла уже создать задачу, но у найденных задач той же учётной записи с тем же summary нет отметки хаба: {}; проверьте их вручную и повторите команду",
                        keys.join(", ")
                    )));
                }
                Found::Nothing => {}
            }
            if remaining.is_zero() {
                return Ok(None);
            }
            // Cloud's search catches up with writes within seconds to minutes: look again.
            let step = remaining.min(Duration::from_secs(5));
            tracing::info!(
                command = command.id,
                wait_ms = step.as_millis() as u64,
                "nothing found yet: waiting for Jira's search to catch up before creating"
            );
            if !(self.sleep)(step) {
                return Err(Fail::Stopped);
            }
            remaining -= step;
        }
    }

    /// Where the check's window starts, in epoch milliseconds on Jira's clock: when the batch
    /// was enqueued (its age on the hub's clock, taken from Jira's now), less
    /// [`WINDOW_MARGIN`]; a day back when the hub did not say.
    fn window_start_ms(&mut self, command: &ClaimedCommand) -> Result<i64, Fail> {
        let jira_now = self.jira.jira_now_ms()?;
        let age = match (command.enqueued_at.as_deref(), self.claimed) {
            (Some(enqueued), Some((created_at, received))) => {
                match (
                    crate::domain::time::parse_utc(enqueued),
                    crate::domain::time::parse_utc(created_at),
                ) {
                    (Some(enqueued), Some(created_at)) => {
                        let on_hub = (created_at - enqueued).whole_milliseconds().max(0) as i64;
                        Some(on_hub + received.elapsed().as_millis() as i64)
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        let back = age.unwrap_or(24 * 3_600_000) + WINDOW_MARGIN.as_millis() as i64;
        Ok(jira_now - back)
    }

    /// Where the check's window ends, in epoch milliseconds on Jira's clock: when the command's
    /// earlier deliveries ended at the latest (the hub says how long ago), plus the time a write
    /// may still run after its answer was lost and [`WINDOW_MARGIN`] for the two clocks. `None`
    /// (now) when the hub does not say. An issue created after it is not this command's: a
    /// «повторить» two weeks on reads the days of the earlier deliveries, not two weeks of the
    /// account's issues.
    fn window_end_ms(&mut self, command: &ClaimedCommand) -> Result<Option<i64>, Fail> {
        let Some(ago) = command.earlier_ended_seconds_ago else {
            return Ok(None);
        };
        let jira_now = self.jira.jira_now_ms()?;
        let received = self.claimed.map(|(_, at)| at.elapsed()).unwrap_or_default();
        let back = Duration::from_secs(ago) + received;
        let ahead = self.write_limit + WINDOW_MARGIN;
        Ok(Some(
            jira_now - back.as_millis() as i64 + ahead.as_millis() as i64,
        ))
    }

    /// Candidates of an earlier create: marked for this command, unmarked, or nothing. Every
    /// issue this account created in the project within the window (`since_ms` to `until_ms`)
    /// is a candidate, whatever its summary now is (an Automation rule or a post-function may
    /// rewrite it on create), and its marker is read: from Cloud's search answer
    /// (`properties=jira-hub`), one GET each on Data Center, whose search never returns
    /// properties (JRASERVER-62898). The issues are read newest first and the look ends at this
    /// command's marker. An issue marked for another command is never taken. An unmarked one
    /// with `summary` (trimmed, as it is sent) is reported, so that a person decides; an
    /// unmarked one with another summary is not this command's (with no `summary`, only the
    /// marker counts).
    fn find_marked(
        &mut self,
        command: &ClaimedCommand,
        summary: Option<&str>,
        since_ms: i64,
        until_ms: Option<i64>,
    ) -> Result<Found, Fail> {
        let project = self.project_key()?;
        let mut query = jql::created_by_me(&project, since_ms);
        if let Some(until_ms) = until_ms {
            query.push_str(&format!(" AND created <= {until_ms}"));
        }
        let mut mine = None;
        let mut unmarked = Vec::new();
        let mut failed = None;
        let mut visit = |jira: &mut Jira, issue: Value| {
            let Some(key) = issue["key"].as_str() else {
                return Ok(false);
            };
            let value = match (PropertyReader { jira }).marker_of(&issue, key) {
                Ok(value) => value,
                Err(error) => {
                    failed = Some(error);
                    return Ok(true);
                }
            };
            match value.as_ref().and_then(|v| marker_is_of(v, command)) {
                Some(true) => {
                    mine = Some(key.to_string());
                    return Ok(true);
                }
                Some(false) => {}
                None => {
                    let now = issue["fields"]["summary"].as_str().map(str::trim);
                    if summary.is_some_and(|s| now == Some(s.trim())) {
                        unmarked.push(key.to_string());
                    }
                }
            }
            Ok(false)
        };
        if until_ms.is_some() || summary.is_none() {
            self.jira
                .search_newest(&query, "summary", Some(MARKER_KEY), &mut visit)?;
        } else {
            // No end from the hub (an older hub): the window may be large, so it is read paged
            // by key, past any result window.
            for issue in self
                .jira
                .search_values(&query, "summary", Some(MARKER_KEY))?
            {
                if visit(self.jira, issue)? {
                    break;
                }
            }
        }
        if let Some(error) = failed {
            return Err(error.into());
        }
        Ok(match mine {
            Some(key) => Found::Mine(key),
            None if unmarked.is_empty() => Found::Nothing,
            None => Found::Unmarked(unmarked),
        })
    }

    /// The issue this delivery's create made, looked for after its answer was lost: this
    /// account's issues of the project created since `since_ms` (the POST's time on Jira's
    /// clock, less [`POSTED_MARGIN_MS`]), newest first, until one's marker names this command
    ///. Markers come with Cloud's search; on Data Center each is read once
    /// per delivery (cached), the newest first, so the write looked for costs one read.
    fn find_newest_marked(
        &mut self,
        command: &ClaimedCommand,
        since_ms: i64,
    ) -> Result<Option<String>, Fail> {
        Ok(match self.find_marked(command, None, since_ms, None)? {
            Found::Mine(key) => Some(key),
            Found::Unmarked(_) | Found::Nothing => None,
        })
    }

    /// An entity property's value, `None` when it is not set (404).
    fn property(&mut self, path: &str) -> Result<Option<Value>, Fail> {
        Ok(PropertyReader { jira: self.jira }.read(path)?)
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
    fn idempotent_write(&mut self, method: &str, path: &str, body: &Value) -> Result<(), Fail> {
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

    // ---- transition ----

    /// Moves an issue to the status `status` names in `transitions_map`: the
    /// transition is chosen among those Jira offers for this issue (`GET …/transitions`, whose
    /// ids differ between workflows) by its target status id; "already there" compares the
    /// issue's `status.id`; after the call the status is read back, and a transition that ended
    /// elsewhere (a post-function, a validator) fails the command with what happened.
    fn transition(&mut self, params: &Value) -> Result<Value, Fail> {
        let key = text(params, "key").ok_or_else(|| fail("key: обязательное поле отсутствует"))?;
        let status =
            text(params, "status").ok_or_else(|| fail("status: обязательное поле отсутствует"))?;
        let target = self
            .settings
            .transitions_map
            .get(&status)
            .cloned()
            .ok_or_else(|| fail(format!("status: {status:?} нет в transitions_map")))?;
        let issue_path = format!("/rest/api/2/issue/{}", jql::encode(&key));
        let mut conflicts = 0u32;
        loop {
            let (current, offered) = self.status_and_transitions(&issue_path, &key)?;
            let (target_id, hint) = match &target {
                TransitionTarget::Status {
                    status_id,
                    transition_id,
                } => (status_id.clone(), transition_id.clone()),
                TransitionTarget::TransitionId(id) => {
                    match offered.iter().find(|t| t.id == *id) {
                        Some(hinted) if same_name(&hinted.to_name, &status) => {
                            (hinted.to_id.clone(), Some(id.clone()))
                        }
                        Some(hinted) => {
                            return Err(fail(format!(
                                "переход {id} из transitions_map для «{status}» ведёт {key} в статус «{}» (id {}), а не в «{status}»; укажите в transitions_map {{\"status_id\": …}} целевого статуса",
                                hinted.to_name, hinted.to_id
                            )));
                        }
                        // The legacy form cannot know the target's id: a name is all it has.
                        None if same_name(&current.name, &status) => {
                            return Ok(json!({"status": status}));
                        }
                        None => {
                            return Err(fail(format!(
                                "Jira не предлагает переход {id} для {key} (статус «{}»); доступны: {}",
                                current.name,
                                describe_offered(&offered)
                            )));
                        }
                    }
                }
            };
            if current.id == target_id {
                return Ok(json!({"status": status}));
            }
            let candidates: Vec<&Offered> =
                offered.iter().filter(|t| t.to_id == target_id).collect();
            let chosen = candidates
                .iter()
                .find(|t| hint.as_deref() == Some(t.id.as_str()))
                .or(candidates.first())
                .ok_or_else(|| {
                    fail(format!(
                        "Jira не предлагает для {key} перехода в «{status}» (статус id {target_id}) из статуса «{}» (id {}); доступны: {}",
                        current.name,
                        current.id,
                        describe_offered(&offered)
                    ))
                })?;
            let transition_id = chosen.id.clone();
            match self.jira.write(
                "POST",
                &format!("{issue_path}/transitions"),
                &json!({"transition": {"id": transition_id}}),
            ) {
                Ok(_) => {
                    let after = self.issue_status(&issue_path, &key)?;
                    if after.id == target_id {
                        return Ok(json!({"status": status}));
                    }
                    return Err(fail(format!(
                        "переход {transition_id} выполнен, но {key} теперь в статусе «{}» (id {}), а не в «{status}» (id {target_id}): его изменила постфункция или другой участник",
                        after.name, after.id
                    )));
                }
                // Cloud answers 409 when transitions of one issue collide: "an existing
                // transition is still being executed … your app should employ a retry mechanism"
                // (developer.atlassian.com/cloud/jira/platform/
                // change-notice-update-in-simultaneous-transitions-issue-api/; the description's
                // "Returned if the issue could not be updated due to a conflicting update"). Ours
                // was not applied: after a short wait the status is read again; at the target it
                // is done, still offered it is sent again, at most [`MAX_TRANSITION_CONFLICTS`]
                // times.
                Err(JiraError::Refused {
                    status: 409,
                    message,
                }) if conflicts < MAX_TRANSITION_CONFLICTS => {
                    conflicts += 1;
                    tracing::info!(%key, conflicts, %message, "Jira says the transition collided with another one: reading the status again");
                    if !(self.sleep)(TRANSITION_CONFLICT_WAIT * conflicts) {
                        return Err(Fail::Stopped);
                    }
                }
                // Ambiguous too: never repeated in this delivery; the next one
                // reads the status before it transitions.
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// The issue's status and the transitions Jira offers from it, in one read:
    /// `GET /rest/api/2/issue/{key}?fields=status&expand=transitions` ("`transitions` Returns all
    /// possible transitions for the issue", the `expand` of Get issue in Atlassian's description of
    /// Cloud and in Data Center's REST reference alike). A Jira that leaves `transitions` out is
    /// asked `GET …/transitions` as before.
    fn status_and_transitions(
        &mut self,
        issue_path: &str,
        key: &str,
    ) -> Result<(StatusRef, Vec<Offered>), Fail> {
        let issue: Value = self
            .jira
            .read_json(&format!("{issue_path}?fields=status&expand=transitions"))?;
        let status = status_of(&issue, key)?;
        if let Some(id) = id_number(&issue["id"]) {
            // Read for a transition: the issue is about to change (see `Jira::note_written`).
            self.jira.note_written(id);
        }
        let offered = match issue.get("transitions") {
            Some(list) => offered_of(list, key)?,
            None => self.offered_transitions(issue_path, key)?,
        };
        Ok((status, offered))
    }

    /// The issue's status, checked: `fields.status.id` must be there.
    fn issue_status(&mut self, issue_path: &str, key: &str) -> Result<StatusRef, Fail> {
        let issue: Value = self
            .jira
            .read_json(&format!("{issue_path}?fields=status"))?;
        status_of(&issue, key)
    }

    /// The transitions Jira offers for the issue now, checked: each with an id and a target.
    fn offered_transitions(&mut self, issue_path: &str, key: &str) -> Result<Vec<Offered>, Fail> {
        let answer: Value = self.jira.read_json(&format!("{issue_path}/transitions"))?;
        offered_of(&answer["transitions"], key)
    }

    // ---- link ----

    /// Jira makes a link once per (type, inward, outward): "If the link request duplicates a
    /// link, the response indicates that the issue link was created" (Cloud REST, Issue links;
    /// Jira's `DefaultIssueLinkManager.createIssueLink` returns without a second link when one of
    /// the type already joins the two issues). So a first delivery posts the link without looking
    /// first (a link made meanwhile by someone else is not doubled by it), and reads the issue's
    /// links once after, for the link's id; a later delivery looks first, as an earlier one may
    /// have made it. A lost answer gives the command back (the next delivery finds the link, or
    /// makes it).
    fn link(&mut self, command: &ClaimedCommand) -> Result<Value, Fail> {
        let params = &command.params;
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
        if command.delivery > 1
            && let Some(id) = self.find_link(&from, &to, &name)?
        {
            return Ok(json!({"link_id": id}));
        }
        let body = json!({"type": {"name": name}, "inwardIssue": {"key": from}, "outwardIssue": {"key": to}});
        match self.jira.write("POST", "/rest/api/2/issueLink", &body) {
            Err(JiraError::Refused { status, message }) => {
                return Err(fail(link_refusal(&from, &to, status, &message)));
            }
            other => {
                other?;
            }
        }
        match self.find_link(&from, &to, &name)? {
            Some(id) => Ok(json!({"link_id": id})),
            None => Err(fail("связь записана, но Jira её не показывает")),
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

    /// A comment carries the marker as a comment property, set in the add request itself
    /// (`properties` of the comment bean: Cloud's "Add comment", Data Center's `CommentJsonBean`).
    /// Every delivery after the first looks for it before posting; a lost answer gives the
    /// command back.
    fn comment(&mut self, command: &ClaimedCommand) -> Result<Value, Fail> {
        let params = &command.params;
        let key = text(params, "key").ok_or_else(|| fail("key: обязательное поле отсутствует"))?;
        let body = params
            .get("body")
            .and_then(Value::as_str)
            .ok_or_else(|| fail("body: обязательное поле отсутствует"))?
            .to_string();
        let path = format!("/rest/api/2/issue/{}/comment", jql::encode(&key));
        // An earlier delivery's comment is looked for from the batch's start, as a create's.
        if command.delivery > 1
            && let Some(id) = {
                let since_ms = self.window_start_ms(command)?;
                self.find_comment(&path, &body, command, since_ms)?
            }
        {
            tracing::info!(
                command = command.id,
                "the comment was already posted by an earlier delivery: not posted again"
            );
            return Ok(json!({"comment_id": id}));
        }
        let marker = marker(command, self.agent);
        let request = json!({"body": body, "properties": [{"key": MARKER_KEY, "value": marker}]});
        // The POST's time on Jira's clock: a look after its answer is lost reads only the
        // comments created since.
        let since_ms = self.jira.jira_now_ms()? - POSTED_MARGIN_MS;
        let answer = self
            .jira
            .write_expecting("POST", &path, &request, Need::Member("id"));
        if matches!(answer, Err(JiraError::Ambiguous(_)))
            && let Some(id) = self
                .look_after_503(|executor| executor.find_comment(&path, &body, command, since_ms))?
        {
            tracing::info!(
                command = command.id,
                "a comment answered 503 is in Jira: it is done"
            );
            return Ok(json!({"comment_id": id}));
        }
        match answer {
            Ok(reply) => {
                let created: Value = super::jira_api::parse(&reply)?;
                if let Some(id) = id_text(&created["id"]) {
                    self.ensure_comment_marker(&id, &marker);
                }
                Ok(json!({"comment_id": created["id"].clone()}))
            }
            Err(JiraError::Ambiguous(error)) => {
                let id = self.look_after_lost_answer(command, &error, |executor| {
                    executor.find_comment(&path, &body, command, since_ms)
                })?;
                tracing::info!(
                    command = command.id,
                    "a lost comment's marker was found: it is done"
                );
                Ok(json!({"comment_id": id}))
            }
            Err(error) => Err(error.into()),
        }
    }

    /// A comment's `properties` are documented on both deployments (Cloud's "Add comment", Data
    /// Center's `CommentJsonBean.properties` since 7.2), yet a proxy that rewrites bodies or a
    /// plugin may drop them (docs/jira-field-notes.md, "Properties in the create body"): as a
    /// create's, the first comment of a run on a server reads its marker back once; a server seen
    /// to keep it is not asked again, one seen to drop it gets the marker PUT after every comment
    /// (`PUT /rest/api/2/comment/{id}/properties/{propertyKey}`, idempotent), and its lost
    /// comments are recognised by their body (see [`Executor::find_comment`]). A failure here
    /// is logged, not the command's: the comment exists.
    fn ensure_comment_marker(&mut self, id: &str, marker: &Value) {
        if self.jira.deployment().ok() == Some(Deployment::Cloud)
            || self.jira.comment_properties_kept() == Some(true)
            || !self.jira.has_comment_properties().unwrap_or(false)
        {
            return;
        }
        let path = format!(
            "/rest/api/2/comment/{}/properties/{MARKER_KEY}",
            jql::encode(id)
        );
        if self.jira.comment_properties_kept().is_none() {
            match self.property(&path) {
                Ok(Some(found)) if found == *marker => {
                    self.jira.set_comment_properties_kept(true);
                    return;
                }
                Ok(_) => {
                    tracing::warn!(comment = %id, "Jira did not keep the marker sent with the comment: it is set after each comment from now on");
                    self.jira.set_comment_properties_kept(false);
                }
                Err(error) => {
                    let error = fail_words(error);
                    tracing::warn!(comment = %id, %error, "the comment's marker could not be read back; it is set again");
                }
            }
        }
        if let Err(error) = self.idempotent_write("PUT", &path, marker) {
            let error = fail_words(error);
            tracing::warn!(comment = %id, %error, "the comment's marker could not be set");
        }
    }

    /// The id of the comment this command posted (an earlier delivery's, or this one's whose
    /// answer was lost): a comment created at or after `since_ms` on Jira's clock whose marker
    /// (its comment property) names this command, whatever its body now is (Cloud gives back
    /// wiki markup converted from ADF, which changes more than whitespace). A comment marked for
    /// another command, or unmarked, is never taken (a recurring text is not
    /// proof). Only on a server without comment properties (before 7.2) is a comment of this account
    /// with the same body in [`normalized_body`] form taken instead.
    ///
    /// The comments are read newest first and the look ends at the first one older than the
    /// window: the write looked for is the newest, so it costs one page. On
    /// Cloud the markers of a page's candidates come in one `POST /comment/list?expand=properties`
    /// (up to 1,000 ids a call); on Data Center, which has no such operation, each candidate's
    /// marker is read, newest first, once per delivery (kept, as the create look's).
    fn find_comment(
        &mut self,
        path: &str,
        body: &str,
        command: &ClaimedCommand,
        since_ms: i64,
    ) -> Result<Option<Value>, Fail> {
        let cloud = self.jira.deployment()? == Deployment::Cloud;
        let by_marker = self.jira.has_comment_properties()?;
        // Unless this run has seen Jira keep the markers sent with comments, they may be dropped
        // on the way (a proxy that rewrites bodies): an unmarked comment of this account with
        // this body, in the window, is this command's whose answer was lost before its marker
        // could be PUT. A comment marked for another command is never taken.
        let dropped = self.jira.comment_properties_kept() != Some(true);
        let wanted = normalized_body(body);
        // On Cloud the markers of a whole page come in one call: every comment of the window is
        // a candidate, and the marker alone decides. On Data Center each marker is a call of
        // its own: only this account's comments are read, the author compared with the account
        // `myself` names by the same field (`key`, else `name` in any case), never with the
        // text of a header (`X-AUSERNAME` comes URL-encoded).
        let me = if cloud { None } else { Some(self.jira.me()?) };
        let mine = |comment: &Value| match &me {
            None => true,
            Some(me) => me.is(&comment["author"], false) == Some(true),
        };
        let same_body =
            |c: &Value| c["body"].as_str().map(normalized_body).as_deref() == Some(&wanted);
        let mut found = None;
        self.jira
            .comments_newest(path, since_ms, &mut |jira, comments| {
                let candidates: Vec<&Value> = comments.iter().filter(|c| mine(c)).collect();
                if !by_marker {
                    found = candidates
                        .iter()
                        .find(|c| same_body(c))
                        .map(|c| c["id"].clone());
                    return Ok(found.is_some());
                }
                let ids: Vec<String> = candidates
                    .iter()
                    .filter_map(|c| id_text(&c["id"]))
                    .collect();
                // Only one whose `created` shows it inside the window (a look-alike of unknown
                // age is never taken).
                let unmarked_alike: Vec<String> = candidates
                    .iter()
                    .filter(|c| {
                        dropped
                            && same_body(c)
                            && c["created"]
                                .as_str()
                                .and_then(super::jira_api::jira_time)
                                .is_some_and(|at| {
                                    (at.unix_timestamp_nanos() / 1_000_000) as i64 >= since_ms
                                })
                    })
                    .filter_map(|c| id_text(&c["id"]))
                    .collect();
                let markers = if cloud {
                    jira.comment_markers(&ids, MARKER_KEY)?
                } else {
                    std::collections::HashMap::new()
                };
                for id in ids {
                    let marker = match markers.get(&id) {
                        Some(known) => known.clone(),
                        None => {
                            let property = format!(
                                "/rest/api/2/comment/{}/properties/{MARKER_KEY}",
                                jql::encode(&id)
                            );
                            (PropertyReader { jira: &mut *jira }).read(&property)?
                        }
                    };
                    match marker.as_ref().and_then(|v| marker_is_of(v, command)) {
                        Some(true) => {
                            found = Some(Value::String(id));
                            return Ok(true);
                        }
                        None if unmarked_alike.contains(&id) => {
                            found = Some(Value::String(id));
                            return Ok(true);
                        }
                        _ => {}
                    }
                }
                Ok(false)
            })?;
        Ok(found)
    }

    // ---- refresh ----

    fn refresh(
        &mut self,
        params: &Value,
        on_page: &mut dyn FnMut(SearchPage) -> Result<(), JiraError>,
    ) -> Result<Value, Fail> {
        let query =
            text(params, "jql").ok_or_else(|| fail("jql: обязательное поле отсутствует"))?;
        // Cloud's search lags behind writes ("seconds to minutes"): the issues this agent wrote
        // since its last full refresh are named for reconciling, and are
        // forgotten once a full refresh (no `updated >=` bound) has read them after the lag.
        let full = crate::domain::jql::split_incremental(&query).is_none();
        let reconcile = match self.jira.deployment()? {
            Deployment::Cloud => self.jira.written_ids(),
            Deployment::Server => Vec::new(),
        };
        let total = self
            .jira
            .search(&query, "*all", self.page_size, &reconcile, on_page)?;
        if full {
            let lag = self.lag()?;
            self.jira.forget_written(&reconcile, lag);
        }
        let mut boards = Vec::new();
        let mut warnings = Vec::new();
        for board in params["boards"].as_array().into_iter().flatten() {
            let Some(id) = board.as_i64() else { continue };
            match self.jira.board_type(id) {
                Ok(kind) => boards.push(json!({"id": id, "type": kind})),
                // Refused for this board (Jira Software's agile REST answers 403 to a user
                // without its licence): the issues are read, the board's type is not.
                Err(JiraError::Refused { status, message }) => {
                    tracing::warn!(board = id, status, %message, "a board could not be read; its type is not reported");
                    warnings.push(format!(
                        "доска {id}: Jira отказала (HTTP {status}): {message}"
                    ));
                }
                // Refused for credentials on the agile path alone: Data Center 9.x without Jira
                // Software redirects `/rest/agile/…` to `login.jsp`, a Cloud token without Jira
                // Software's scopes is answered 401 there (docs/jira-field-notes.md,
                // "Credentials and scopes"). When `myself` passes, it is about the board as a
                // 403 is; when it does not, the credentials are refused: held as before.
                Err(JiraError::Held {
                    cause: Cause::Credentials,
                    reason,
                }) => {
                    let refusal = self.jira.take_refusal();
                    self.jira.probe_myself()?;
                    let (status, words) =
                        refusal.map(|r| (r.status, r.words)).unwrap_or((0, reason));
                    tracing::warn!(board = id, status, %words, "a board's path is refused while the credentials work; its type is not reported");
                    warnings.push(format!(
                        "доска {id}: Jira не пускает к /rest/agile/1.0/board/{id} (HTTP {status}: «{words}»), хотя учётные данные принимает: Jira Software не установлена или у токена нет её областей"
                    ));
                }
                Err(other) => return Err(other.into()),
            }
        }
        let mut result = json!({"total": total, "boards": boards});
        if !warnings.is_empty() {
            result["warnings"] = json!(warnings);
        }
        Ok(result)
    }
}

/// Reads entity properties through the delivery's cache (see [`Executor::property`]) where no
/// executor is at hand (inside a search's visit).
struct PropertyReader<'a> {
    jira: &'a mut Jira,
}

impl PropertyReader<'_> {
    /// The marker of a search's issue `key`: from the issue's `properties` when Cloud's search
    /// named them (absent there is absent), else read.
    fn marker_of(&mut self, issue: &Value, key: &str) -> Result<Option<Value>, JiraError> {
        if let Some(properties) = issue.get("properties").and_then(Value::as_object) {
            return Ok(properties.get(MARKER_KEY).cloned());
        }
        let path = format!(
            "/rest/api/2/issue/{}/properties/{MARKER_KEY}",
            jql::encode(key)
        );
        self.read(&path)
    }

    fn read(&mut self, path: &str) -> Result<Option<Value>, JiraError> {
        if let Some(known) = self.jira.cached_property(path) {
            return Ok(known);
        }
        let value = match self.jira.read_json::<Value>(path) {
            Ok(property) => Some(property.get("value").cloned().unwrap_or(Value::Null)),
            Err(JiraError::Refused { status: 404, .. }) => None,
            Err(error) => return Err(error),
        };
        // Another command's marker never changes; an unset one may be set by the write looked
        // for, so only a found value is kept.
        if value.is_some() {
            self.jira.cache_property(path, value.clone());
        }
        Ok(value)
    }
}

/// An issue's status as Jira shows it.
struct StatusRef {
    id: String,
    name: String,
}

/// A transition Jira offers for an issue.
struct Offered {
    id: String,
    name: String,
    to_id: String,
    to_name: String,
}

/// The status of an issue as Jira sent it, checked: `fields.status.id` must be there.
fn status_of(issue: &Value, key: &str) -> Result<StatusRef, Fail> {
    let status = &issue["fields"]["status"];
    let id = id_text(&status["id"]).ok_or_else(|| {
        fail(format!(
            "ответ Jira о {key} без fields.status.id: {}",
            short(issue)
        ))
    })?;
    Ok(StatusRef {
        id,
        name: status["name"].as_str().unwrap_or("").to_string(),
    })
}

/// The transitions of an answer, checked: an array, each with an id and a target.
fn offered_of(list: &Value, key: &str) -> Result<Vec<Offered>, Fail> {
    let list = list.as_array().ok_or_else(|| {
        fail(format!(
            "ответ Jira о переходах {key} без массива transitions: {}",
            short(list)
        ))
    })?;
    list.iter()
        .map(|t| match (id_text(&t["id"]), id_text(&t["to"]["id"])) {
            (Some(id), Some(to_id)) => Ok(Offered {
                id,
                name: t["name"].as_str().unwrap_or("").to_string(),
                to_id,
                to_name: t["to"]["name"].as_str().unwrap_or("").to_string(),
            }),
            _ => Err(fail(format!(
                "переход {key} без id или без to.id в ответе Jira: {}",
                short(t)
            ))),
        })
        .collect()
}

/// The offered transitions for a message: `«name» (id) → «status» (id)`.
fn describe_offered(offered: &[Offered]) -> String {
    if offered.is_empty() {
        return "ни одного перехода".to_string();
    }
    offered
        .iter()
        .map(|t| format!("«{}» ({}) → «{}» (id {})", t.name, t.id, t.to_name, t.to_id))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Two status names the same, ignoring case and surrounding blanks.
fn same_name(a: &str, b: &str) -> bool {
    a.trim().to_lowercase() == b.trim().to_lowercase()
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
fn id_number(value: &Value) -> Option<u64> {
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

/// How far before the batch's enqueueing the check of a repeated create looks: the age of a
/// batch is measured on the hub's clock and carried to Jira's, and a claim answer may reach the
/// agent late (a relay folder synchronised every few minutes).
const WINDOW_MARGIN: Duration = Duration::from_secs(15 * 60);
/// How far before a lost create's POST (on Jira's clock) its look starts: the skew's error (half
/// a `serverInfo` round trip) and Jira's own clock steps, with room to spare.
const POSTED_MARGIN_MS: i64 = 60_000;

/// The first wait before a lost write's marker is looked for; each next wait doubles, up to
/// [`LOOK_MAX_STEP`]. A write whose answer was cut after Jira made it shows at the first look on
/// Data Center, and as soon as Cloud's search catches up there.
const LOOK_FIRST_STEP: Duration = Duration::from_secs(1);
const LOOK_MAX_STEP: Duration = Duration::from_secs(30);

/// How many times a transition that collided with another (Cloud's 409) is read again and sent
/// again before the command fails with Jira's words; the waits before each read grow by
/// [`TRANSITION_CONFLICT_WAIT`].
const MAX_TRANSITION_CONFLICTS: u32 = 3;
const TRANSITION_CONFLICT_WAIT: Duration = Duration::from_secs(1);

/// What the check before a repeated create found.
enum Found {
    Mine(String),
    Unmarked(Vec<String>),
    Nothing,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_refusal_names_the_key_jira_names() {
        assert_eq!(
            link_refusal(
                "AURORA-1",
                "AURORA-9",
                404,
                "Issue Does Not Exist: AURORA-9"
            ),
            "Jira отказала связать AURORA-1 с AURORA-9 (HTTP 404), о задаче AURORA-9: \
             «Issue Does Not Exist: AURORA-9»"
        );
        assert_eq!(
            link_refusal("AURORA-1", "AURORA-12", 400, "inwardIssue: no permission"),
            "Jira отказала связать AURORA-1 с AURORA-12 (HTTP 400), о задаче AURORA-1: \
             «inwardIssue: no permission»"
        );
        // AURORA-1 is not named by AURORA-12; neither key named: both said, none chosen.
        assert_eq!(
            link_refusal("AURORA-1", "AURORA-12", 404, "AURORA-12 does not exist"),
            "Jira отказала связать AURORA-1 с AURORA-12 (HTTP 404), о задаче AURORA-12: \
             «AURORA-12 does not exist»"
        );
        assert_eq!(
            link_refusal("A-1", "A-2", 404, "Issue does not exist"),
            "Jira отказала связать A-1 с A-2 (HTTP 404): «Issue does not exist»"
        );
    }

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

    /// A Jira of canned answers on a loopback port, for the checks before a repeated write:
    /// `answer(method, path, nth call of that path)` gives status and body. Records what it saw.
    struct Canned {
        url: String,
        seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
        /// Each request's query, in order.
        queries: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    }

    fn canned(answer: fn(&str, &str, usize) -> (u16, Value)) -> Canned {
        serve(move |method, path, nth| {
            let (status, value) = answer(method, path, nth);
            (status, Vec::new(), value)
        })
    }

    /// [`canned`] with the answer's extra headers (`name: value` lines).
    fn serve(
        answer: impl Fn(&str, &str, usize) -> (u16, Vec<String>, Value) + Send + 'static,
    ) -> Canned {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let queries = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let log = seen.clone();
        let query_log = queries.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let mut parts = line.split_whitespace();
                let method = parts.next().unwrap_or("").to_string();
                let target = parts.next().unwrap_or("").to_string();
                let mut length = 0usize;
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let path = target.split('?').next().unwrap_or("").to_string();
                query_log.lock().unwrap().push(
                    target
                        .split_once('?')
                        .map(|(_, q)| q)
                        .unwrap_or("")
                        .to_string(),
                );
                let nth = {
                    let mut log = log.lock().unwrap();
                    log.push(format!("{method} {path}"));
                    log.iter()
                        .filter(|l| **l == format!("{method} {path}"))
                        .count()
                };
                let (status, headers, value) = answer(&method, &path, nth);
                let text = value.to_string();
                let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                );
            }
        });
        Canned { url, seen, queries }
    }

    fn jira_at(url: &str) -> Jira {
        jira_on(
            url,
            std::sync::Arc::new(crate::clock::ManualClock::new(
                time::OffsetDateTime::now_utc(),
            )),
        )
    }

    /// A Jira client at `url` whose waits run on `clock` (a test's own: they take no wall time).
    fn jira_on(url: &str, clock: std::sync::Arc<crate::clock::ManualClock>) -> Jira {
        let text = json!({"jira_url": url, "jira_user": "agent", "jira_password": "secret",
            "agent_token": "t", "hub_url": "http://127.0.0.1:1", "name": "agent-1",
            "search_lag_seconds": 60})
        .to_string();
        let no_env = |_: &str| None;
        let config = crate::agent::config::AgentConfig::from_text(
            &text,
            &crate::agent::config::Environment { var: &no_env },
        )
        .unwrap();
        let client = crate::agent::net::Client::new(&config).unwrap();
        let mut jira = Jira::new(
            client,
            url,
            crate::agent::config::Secret::new(crate::agent::net::basic_auth("agent", "secret")),
            config.deployment,
            0,
            std::sync::Arc::new(crate::agent::wait::Waits::new(
                clock,
                std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
                crate::agent::wait::Notifier::Systemd,
            )),
        );
        jira.set_min_interval(Duration::ZERO);
        jira
    }

    /// Each request (method and path) with the time of the agent's clock it came at.
    type Timed = std::sync::Arc<std::sync::Mutex<Vec<(String, Duration)>>>;
    /// Status, extra headers and body for the nth request of a method and path.
    type HeadedAnswer = fn(&str, &str, usize) -> (u16, Vec<String>, Value);

    /// A Jira whose answers `answer` gives, noting each request with the time of the agent's
    /// clock it came at; the client on that clock.
    fn timed(
        answer: HeadedAnswer,
    ) -> (
        Canned,
        Jira,
        std::sync::Arc<crate::clock::ManualClock>,
        Timed,
    ) {
        use crate::clock::Clock;
        let clock = std::sync::Arc::new(crate::clock::ManualClock::new(
            time::OffsetDateTime::now_utc(),
        ));
        let times = Timed::default();
        let (at, noted) = (clock.clone(), times.clone());
        let server = serve(move |method, path, nth| {
            noted
                .lock()
                .unwrap()
                .push((format!("{method} {path}"), at.monotonic()));
            answer(method, path, nth)
        });
        let jira = jira_on(&server.url, clock.clone());
        (server, jira, clock, times)
    }

    fn post_comment(jira: &mut Jira) -> Result<Reply, JiraError> {
        jira.write_expecting(
            "POST",
            "/rest/api/2/issue/AURORA-1/comment",
            &json!({"body": "x"}),
            Need::Member("id"),
        )
    }

    /// A 429 or a 503 with `Retry-After: 0` (Data Center stamps it on every
    /// answer while its tokens last) asks for no wait; the agent waits a backoff all the same,
    /// never nothing: on the agent's clock each try of a read or a write comes at least half a
    /// second (the first backoff's floor: 1 s times a jitter of 0.5–1) after the one before. A
    /// 503 on a write is a lost answer, not resent: the look it leads to waits a backoff too.
    #[test]
    fn a_retry_after_of_zero_waits_a_backoff_never_zero() {
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Vec<String>, Value) {
            let zero = vec!["Retry-After: 0".to_string()];
            let busy = json!({"errorMessages": ["Rate limit exceeded."]});
            match (method, path) {
                ("GET", "/rest/api/2/issue/AURORA-1") if nth <= 2 => (429, zero, busy),
                ("GET", "/rest/api/2/issue/AURORA-1") if nth == 3 => (503, zero, busy),
                ("GET", "/rest/api/2/issue/AURORA-1") => (
                    200,
                    Vec::new(),
                    json!({"id": "10001", "key": "AURORA-1", "fields": {}}),
                ),
                ("POST", "/rest/api/2/issue/AURORA-1/comment") if nth == 1 => (429, zero, busy),
                ("POST", "/rest/api/2/issue/AURORA-1/comment") => (503, zero, busy),
                _ => (404, Vec::new(), json!({"errorMessages": ["нет"]})),
            }
        }
        let (_server, mut jira, _clock, times) = timed(answer);
        jira.read("/rest/api/2/issue/AURORA-1").unwrap();
        let write = post_comment(&mut jira);
        assert!(
            matches!(write, Err(JiraError::Ambiguous(_))),
            "{:?}",
            write.err()
        );
        let look_after = jira.take_busy().expect("a 503 with Retry-After");
        assert!(look_after >= Duration::from_millis(500), "{look_after:?}");
        let times = times.lock().unwrap().clone();
        assert_eq!(times.len(), 6, "{times:?}");
        for pair in times.windows(2).filter(|p| p[0].0 == p[1].0) {
            let gap = pair[1].1 - pair[0].1;
            assert!(
                gap >= Duration::from_millis(500),
                "{}: the next try {gap:?} after a Retry-After: 0",
                pair[0].0
            );
        }
    }

    /// A call throttled for longer than its time budget (600 s) gives up within
    /// it although its count budget (20 answers) is far from reached. Each answer asks for
    /// 250 s: a read waits 250 + 250 s and gives up at the third answer instead of waiting past
    /// 600 s (before: 750 s); a write the same. The pause Jira asked for stays for the next call.
    #[test]
    fn a_throttled_call_gives_up_within_its_time_budget() {
        fn answer(_: &str, _: &str, _: usize) -> (u16, Vec<String>, Value) {
            (
                429,
                vec!["Retry-After: 250".to_string()],
                json!({"errorMessages": ["Rate limit exceeded."]}),
            )
        }
        let (_server, mut jira, clock, times) = timed(answer);
        use crate::clock::Clock;
        let read = jira.read("/rest/api/2/issue/AURORA-1");
        assert!(
            matches!(read, Err(JiraError::GiveBack(_))),
            "{:?}",
            read.err()
        );
        let spent = clock.monotonic();
        assert_eq!(spent, Duration::from_secs(500), "within 600 s");
        assert_eq!(times.lock().unwrap().len(), 3, "far from 20 answers");
        assert!(
            jira.ready_in() >= Duration::from_secs(249),
            "the pause stays"
        );

        let (_server, mut jira, clock, times) = timed(answer);
        let write = post_comment(&mut jira);
        assert!(
            matches!(write, Err(JiraError::GiveBack(_))),
            "{:?}",
            write.err()
        );
        assert_eq!(clock.monotonic(), Duration::from_secs(500), "within 600 s");
        assert_eq!(times.lock().unwrap().len(), 3);
        assert!(
            jira.ready_in() >= Duration::from_secs(249),
            "the pause stays"
        );
    }

    fn redelivered_create(released_seconds_ago: Option<u64>) -> ClaimedCommand {
        serde_json::from_value(
            json!({"id": 7, "batch_id": 2, "seq": 1, "type": "ensure_issue",
            "params": {"issue_type": "task", "summary": "Облачная"}, "delivery": 2,
            "enqueued_at": "2026-11-29T10:00:00Z", "released_seconds_ago": released_seconds_ago}),
        )
        .unwrap()
    }

    /// Cloud's search shows the issue an earlier delivery made only on the third look: the
    /// redelivered create waits (through the injected sleep: no wall time passes) and looks
    /// again instead of creating a second issue; it waits no longer than the lag plus the
    /// request timeout less what already passed since the command was given back.
    #[test]
    fn a_redelivered_create_on_cloud_waits_for_the_search_through_the_injected_sleep() {
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Cloud",
                    "serverTime": "2026-11-29T13:05:00.000+0300", "versionNumbers": [1001, 0, 0]}),
                ),
                ("GET", "/rest/api/2/search/jql") if nth < 3 => {
                    (200, json!({"issues": [], "isLast": true}))
                }
                ("GET", "/rest/api/2/search/jql") => (
                    200,
                    json!({"isLast": true, "issues": [
                    {"id": "10001", "key": "AURORA-9", "fields": {"summary": "Облачная"}}]}),
                ),
                ("GET", "/rest/api/2/issue/AURORA-9/properties/jira-hub") => (
                    200,
                    json!({
                    "key": "jira-hub", "value": {"command": 7, "batch": 2,
                    "enqueued_at": "2026-11-29T10:00:00Z"}}),
                ),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let settings = AgentSettings::from_value(&json!({"project_key": "AURORA",
            "issue_types": {"task": {"name": "Задача", "id": "10002"}, "epic": {"name": "Эпик"}}}));
        let slept = std::cell::RefCell::new(Vec::<Duration>::new());
        let sleep = |d: Duration| {
            slept.borrow_mut().push(d);
            true
        };
        let mut executor = Executor {
            jira: &mut jira,
            settings: &settings,
            page_size: 100,
            search_lag: None,
            agent: "agent-1",
            write_limit: Duration::from_secs(60),
            grace: Duration::from_secs(180),
            claimed: Some(("2026-11-29T10:05:00Z", std::time::Instant::now())),
            sleep: &sleep,
        };
        let outcome = executor.execute(&redelivered_create(Some(100)), &mut |_| Ok(()));
        assert_eq!(
            outcome,
            Outcome::Done(json!({"key": "AURORA-9", "created": false}))
        );
        assert_eq!(
            *slept.borrow(),
            [Duration::from_secs(5), Duration::from_secs(5)],
            "two waits of the 20 s left of 60 + 60 after 100"
        );
        let seen = jira_server.seen.lock().unwrap().clone();
        assert!(
            !seen.contains(&"POST /rest/api/2/issue".to_string()),
            "{seen:?}"
        );

        // Given back long enough ago: one look, no wait, then the create.
        fn nothing(method: &str, path: &str, _: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Cloud",
                    "serverTime": "2026-11-29T13:05:00.000+0300"}),
                ),
                ("GET", "/rest/api/2/search/jql") => (200, json!({"issues": [], "isLast": true})),
                ("POST", "/rest/api/2/issue") => (201, json!({"id": "10002", "key": "AURORA-10"})),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(nothing);
        let mut jira = jira_at(&jira_server.url);
        let slept = std::cell::RefCell::new(Vec::<Duration>::new());
        let sleep = |d: Duration| {
            slept.borrow_mut().push(d);
            true
        };
        let mut executor = Executor {
            jira: &mut jira,
            settings: &settings,
            page_size: 100,
            search_lag: None,
            agent: "agent-1",
            write_limit: Duration::from_secs(60),
            grace: Duration::from_secs(180),
            claimed: None,
            sleep: &sleep,
        };
        let outcome = executor.execute(&redelivered_create(Some(180)), &mut |_| Ok(()));
        assert_eq!(
            outcome,
            Outcome::Done(json!({"key": "AURORA-10", "created": true}))
        );
        assert!(slept.borrow().is_empty());
    }

    fn first_delivery(command_type: &str, params: Value) -> ClaimedCommand {
        serde_json::from_value(
            json!({"id": 7, "batch_id": 2, "seq": 1, "type": command_type,
            "params": params, "delivery": 1, "enqueued_at": "2026-11-29T10:00:00Z"}),
        )
        .unwrap()
    }

    fn mine() -> Value {
        json!({"key": "jira-hub", "value": {"command": 7, "batch": 2,
               "enqueued_at": "2026-11-29T10:00:00Z"}})
    }

    fn aurora_settings() -> AgentSettings {
        AgentSettings::from_value(&json!({"project_key": "AURORA",
            "issue_types": {"task": {"name": "Задача", "id": "10002"}, "epic": {"name": "Эпик"}}}))
    }

    /// Runs `command` against `jira` with a recording sleep; returns the outcome and the waits.
    fn run_recorded(jira: &mut Jira, command: &ClaimedCommand) -> (Outcome, Vec<Duration>) {
        let settings = aurora_settings();
        let slept = std::cell::RefCell::new(Vec::<Duration>::new());
        let sleep = |d: Duration| {
            slept.borrow_mut().push(d);
            true
        };
        let mut executor = Executor {
            jira,
            settings: &settings,
            page_size: 100,
            search_lag: None,
            agent: "agent-1",
            write_limit: Duration::from_secs(60),
            grace: Duration::from_secs(180),
            claimed: Some(("2026-11-29T10:05:00Z", std::time::Instant::now())),
            sleep: &sleep,
        };
        let outcome = executor.execute(command, &mut |_| Ok(()));
        (outcome, slept.into_inner())
    }

    /// A create whose answer was lost (a 502 after Jira made it) is found by its
    /// marker within seconds, not after the whole grace: Cloud's search shows it, with its
    /// property, at the third look (1 + 2 + 4 s on the injected sleep). No second create. The
    /// summary went out trimmed, and an Automation rule rewrote it: the marker decides.
    #[test]
    fn a_lost_create_is_found_by_its_marker_within_seconds_on_cloud() {
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Cloud",
                    "serverTime": "2026-11-29T13:05:00.000+0300", "versionNumbers": [1001, 0, 0]}),
                ),
                ("POST", "/rest/api/2/issue") => (502, json!({"errorMessages": ["Bad Gateway"]})),
                ("GET", "/rest/api/2/search/jql") if nth < 3 => (
                    200,
                    json!({"isLast": true, "issues": [
                        {"id": "10000", "key": "AURORA-8", "fields": {"summary": "Другая"},
                         "properties": {"jira-hub": {"command": 6, "batch": 2}}}]}),
                ),
                ("GET", "/rest/api/2/search/jql") => (
                    200,
                    json!({"isLast": true, "issues": [
                        {"id": "10000", "key": "AURORA-8", "fields": {"summary": "Другая"},
                         "properties": {"jira-hub": {"command": 6, "batch": 2}}},
                        {"id": "10001", "key": "AURORA-9", "fields": {"summary": "[Авто] Облачная"},
                         "properties": {"jira-hub": mine()["value"].clone()}}]}),
                ),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let command = first_delivery(
            "ensure_issue",
            json!({"issue_type": "task", "summary": "  Облачная  "}),
        );
        let (outcome, slept) = run_recorded(&mut jira, &command);
        assert_eq!(
            outcome,
            Outcome::Done(json!({"key": "AURORA-9", "created": true}))
        );
        assert_eq!(
            slept,
            [1, 2, 4].map(Duration::from_secs),
            "three looks, 7 s in all"
        );
        let seen = jira_server.seen.lock().unwrap().clone();
        let posts = seen
            .iter()
            .filter(|l| *l == "POST /rest/api/2/issue")
            .count();
        assert_eq!(posts, 1, "{seen:?}");
        assert!(
            !seen.iter().any(|l| l.contains("/properties/")),
            "Cloud's search brought the markers: {seen:?}"
        );
    }

    /// Data Center's search has no properties: each candidate's marker is read, whatever its
    /// summary; a write still unseen at the end of the grace is given back, and the looks'
    /// waits add up to the grace exactly.
    #[test]
    fn on_data_center_every_candidate_is_read_and_an_unseen_write_is_released_after_the_grace() {
        fn answer(method: &str, path: &str, _: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Server",
                    "serverTime": "2026-11-29T13:05:00.000+0300", "versionNumbers": [9, 12, 0]}),
                ),
                ("POST", "/rest/api/2/issue") => (502, json!({"errorMessages": ["Bad Gateway"]})),
                ("GET", "/rest/api/2/search") => (
                    200,
                    json!({"startAt": 0, "maxResults": 100, "total": 2, "issues": [
                        {"id": "10000", "key": "AURORA-8", "fields": {"summary": "Другая"}},
                        {"id": "10001", "key": "AURORA-9", "fields": {"summary": "[Авто] Серверная"}}]}),
                ),
                ("GET", "/rest/api/2/issue/AURORA-8/properties/jira-hub") => (
                    200,
                    json!({"key": "jira-hub", "value": {"command": 6, "batch": 2}}),
                ),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let command = first_delivery(
            "ensure_issue",
            json!({"issue_type": "task", "summary": "Серверная"}),
        );
        let (outcome, slept) = run_recorded(&mut jira, &command);
        assert!(matches!(outcome, Outcome::Released(_)), "{outcome:?}");
        assert_eq!(slept.iter().sum::<Duration>(), Duration::from_secs(180));
        assert_eq!(
            slept,
            [1, 2, 4, 8, 16, 30, 30, 30, 30, 29].map(Duration::from_secs)
        );
        let seen = jira_server.seen.lock().unwrap().clone();
        let count = |line: &str| seen.iter().filter(|l| *l == line).count();
        assert_eq!(
            count("POST /rest/api/2/issue"),
            1,
            "never repeated: {seen:?}"
        );
        // Each look read the unset marker of the rewritten summary's candidate (it may be set
        // yet); another command's marker, once read, is kept for the delivery.
        assert_eq!(
            count("GET /rest/api/2/issue/AURORA-9/properties/jira-hub"),
            slept.len()
        );
        assert_eq!(
            count("GET /rest/api/2/issue/AURORA-8/properties/jira-hub"),
            1
        );
    }

    /// A comment is recognised by its marker. A lost comment's marker found at the
    /// second look: done. An unmarked comment of this account with the same text (last week's
    /// «Перенесено в следующий спринт») is never adopted.
    #[test]
    fn comments_are_recognised_by_their_marker_and_a_look_alike_is_never_adopted() {
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            let old = json!({"id": "100", "body": "Перенесено в следующий спринт",
                             "author": {"name": "agent"}});
            let new = json!({"id": "101", "body": "Перенесено в следующий спринт\n",
                             "author": {"name": "agent"}});
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Server",
                    "serverTime": "2026-11-29T13:05:00.000+0300", "versionNumbers": [9, 12, 0]}),
                ),
                ("GET", "/rest/api/2/myself") => (200, json!({"name": "agent"})),
                ("POST", "/rest/api/2/issue/AURORA-1/comment") => {
                    (504, json!({"errorMessages": ["Gateway Time-out"]}))
                }
                ("GET", "/rest/api/2/issue/AURORA-1/comment") if nth < 2 => (
                    200,
                    json!({"startAt": 0, "maxResults": 100, "total": 1, "comments": [old]}),
                ),
                ("GET", "/rest/api/2/issue/AURORA-1/comment") => (
                    200,
                    json!({"startAt": 0, "maxResults": 100, "total": 2, "comments": [old, new]}),
                ),
                ("GET", "/rest/api/2/comment/101/properties/jira-hub") => (200, mine()),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let command = first_delivery(
            "comment",
            json!({"key": "AURORA-1", "body": "Перенесено в следующий спринт"}),
        );
        let (outcome, slept) = run_recorded(&mut jira, &command);
        assert_eq!(outcome, Outcome::Done(json!({"comment_id": "101"})));
        assert_eq!(slept, [1, 2].map(Duration::from_secs));
        let seen = jira_server.seen.lock().unwrap().clone();
        assert_eq!(
            seen.iter()
                .filter(|l| *l == "POST /rest/api/2/issue/AURORA-1/comment")
                .count(),
            1
        );

        // A redelivery finds only the unmarked look-alike: it posts its own comment.
        fn redelivered(method: &str, path: &str, _: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Server",
                    "serverTime": "2026-11-29T13:05:00.000+0300", "versionNumbers": [9, 12, 0]}),
                ),
                ("GET", "/rest/api/2/myself") => (200, json!({"name": "agent"})),
                ("GET", "/rest/api/2/issue/AURORA-1/comment") => (
                    200,
                    json!({"startAt": 0, "maxResults": 100, "total": 1, "comments": [
                        {"id": "100", "body": "Перенесено в следующий спринт", "author": {"name": "agent"}}]}),
                ),
                ("POST", "/rest/api/2/issue/AURORA-1/comment") => (201, json!({"id": "102"})),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(redelivered);
        let mut jira = jira_at(&jira_server.url);
        let mut command = command.clone();
        command.delivery = 2;
        let (outcome, _) = run_recorded(&mut jira, &command);
        assert_eq!(outcome, Outcome::Done(json!({"comment_id": "102"})));
    }

    /// A server that gives the comments oldest first whatever `orderBy` says is never taken for
    /// newest first: every page is read, then the list is looked at from its end, and only the
    /// comments of the window (created since the POST on Jira's clock, less a minute) have their
    /// marker read, the newest first: one property read among 150 of the account's comments.
    #[test]
    fn comments_given_oldest_first_are_looked_at_from_the_end_within_the_window() {
        fn comments(from: u64, to: u64) -> Vec<Value> {
            (from..=to)
                .map(|id| {
                    let created = if id >= 149 {
                        "2026-11-29T13:05:00.000+0300"
                    } else {
                        "2026-11-29T10:00:00.000+0300"
                    };
                    json!({"id": id.to_string(), "body": format!("№{id}"),
                           "author": {"name": "agent"}, "created": created})
                })
                .collect()
        }
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Server",
                    "serverTime": "2026-11-29T13:05:30.000+0300", "versionNumbers": [9, 12, 0]}),
                ),
                ("GET", "/rest/api/2/myself") => (200, json!({"name": "agent"})),
                ("POST", "/rest/api/2/issue/AURORA-1/comment") => {
                    (504, json!({"errorMessages": ["Gateway Time-out"]}))
                }
                ("GET", "/rest/api/2/issue/AURORA-1/comment") if nth % 2 == 1 => (
                    200,
                    json!({"startAt": 0, "maxResults": 100, "total": 150,
                           "comments": comments(1, 100)}),
                ),
                ("GET", "/rest/api/2/issue/AURORA-1/comment") => (
                    200,
                    json!({"startAt": 100, "maxResults": 100, "total": 150,
                           "comments": comments(101, 150)}),
                ),
                ("GET", "/rest/api/2/comment/150/properties/jira-hub") => (200, mine()),
                ("GET", "/rest/api/2/comment/149/properties/jira-hub") => (
                    200,
                    json!({"key": "jira-hub", "value": {"command": 6, "batch": 2}}),
                ),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let command = first_delivery("comment", json!({"key": "AURORA-1", "body": "№150"}));
        let (outcome, _) = run_recorded(&mut jira, &command);
        assert_eq!(outcome, Outcome::Done(json!({"comment_id": "150"})));
        let seen = jira_server.seen.lock().unwrap().clone();
        let properties: Vec<&String> = seen.iter().filter(|l| l.contains("/properties/")).collect();
        assert_eq!(
            properties,
            ["GET /rest/api/2/comment/150/properties/jira-hub"],
            "{seen:?}"
        );
        assert!(
            jira_server
                .queries
                .lock()
                .unwrap()
                .iter()
                .any(|q| q.contains("orderBy=-created")),
            "newest first is asked for"
        );
    }

    /// Only where the server has no comment properties (it names a version before 7.2) is a
    /// comment recognised by its body.
    #[test]
    fn a_server_without_comment_properties_recognises_a_comment_by_its_body() {
        fn answer(method: &str, path: &str, _: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (
                    200,
                    json!({"deploymentType": "Server",
                    "serverTime": "2026-11-29T13:05:00.000+0300", "versionNumbers": [7, 1, 0]}),
                ),
                ("GET", "/rest/api/2/myself") => (200, json!({"name": "agent"})),
                ("GET", "/rest/api/2/issue/AURORA-1/comment") => (
                    200,
                    json!({"startAt": 0, "maxResults": 100, "total": 1, "comments": [
                        {"id": "100", "body": "Готово\r\n", "author": {"name": "agent"}}]}),
                ),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let mut command = first_delivery("comment", json!({"key": "AURORA-1", "body": "Готово"}));
        command.delivery = 2;
        let (outcome, _) = run_recorded(&mut jira, &command);
        assert_eq!(outcome, Outcome::Done(json!({"comment_id": "100"})));
    }

    /// A key refused in `key > "<key>"` is judged gone by reading it, not by the
    /// refusal's words: a Russian-speaking account's 400 for a deleted key is recovered from
    /// (the page is asked again after the key before), and a 400 for a key that is still there
    /// fails the refresh with Jira's words.
    #[test]
    fn a_stale_key_is_recovered_from_whatever_the_language_of_jiras_error() {
        fn issue(key: &str, id: u64) -> Value {
            json!({"id": id.to_string(), "key": key, "fields": {"summary": key}})
        }
        fn page(issues: Vec<Value>, size: usize, total: usize) -> (u16, Value) {
            (
                200,
                json!({"startAt": 0, "maxResults": size, "total": total, "issues": issues}),
            )
        }
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path, nth) {
                ("GET", "/rest/api/2/serverInfo", _) => data_center_9(),
                ("GET", "/rest/api/2/search", 1) => {
                    page(vec![issue("AURORA-1", 1), issue("AURORA-2", 2)], 2, 3)
                }
                ("GET", "/rest/api/2/search", 2) => (
                    400,
                    json!({"errorMessages": ["Задача с ключом 'AURORA-2' не существует для поля 'key'."], "errors": {}}),
                ),
                ("GET", "/rest/api/2/search", 3) => page(vec![issue("AURORA-3", 3)], 2, 1),
                ("GET", "/rest/api/2/search", _) => page(vec![], 2, 0),
                ("GET", "/rest/api/2/issue/AURORA-2", _) => (
                    404,
                    json!({"errorMessages": ["Задача не существует, или у вас нет прав на её просмотр."]}),
                ),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let settings = aurora_settings();
        let sleep = |_: Duration| true;
        let mut executor = Executor {
            jira: &mut jira,
            settings: &settings,
            page_size: 2,
            search_lag: None,
            agent: "agent-1",
            write_limit: Duration::from_secs(60),
            grace: Duration::from_secs(180),
            claimed: None,
            sleep: &sleep,
        };
        let refresh: ClaimedCommand = serde_json::from_value(json!({"id": 9, "batch_id": 3,
            "seq": 1, "type": "refresh", "params": {"jql": "project = AURORA"}, "delivery": 1}))
        .unwrap();
        let mut keys = Vec::new();
        let outcome = executor.execute(&refresh, &mut |page| {
            for raw in page.issues {
                let value: Value = serde_json::from_str(raw.get()).unwrap();
                keys.push(value["key"].as_str().unwrap().to_string());
            }
            Ok(())
        });
        assert_eq!(
            outcome,
            Outcome::Done(json!({"total": 3, "boards": []})),
            "{keys:?}"
        );
        assert_eq!(keys, ["AURORA-1", "AURORA-2", "AURORA-3"]);

        // A refused key that still names its issue: Jira's words fail the refresh.
        fn still_there(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path, nth) {
                ("GET", "/rest/api/2/issue/AURORA-2", _) => (
                    200,
                    json!({"id": "2", "key": "AURORA-2", "fields": {"project": {"key": "AURORA"}}}),
                ),
                _ => answer(method, path, nth),
            }
        }
        let jira_server = canned(still_there);
        let mut jira = jira_at(&jira_server.url);
        let mut executor = Executor {
            jira: &mut jira,
            settings: &settings,
            page_size: 2,
            search_lag: None,
            agent: "agent-1",
            write_limit: Duration::from_secs(60),
            grace: Duration::from_secs(180),
            claimed: None,
            sleep: &sleep,
        };
        match executor.execute(&refresh, &mut |_| Ok(())) {
            Outcome::Failed(error) => assert!(error.contains("Задача с ключом"), "{error}"),
            other => panic!("{other:?}"),
        }
    }

    /// A duplicate check's search has no 10,000 cap: 10,100 issues of the
    /// account in the window come back whole.
    #[test]
    fn search_values_has_no_ten_thousand_cap() {
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path) {
                ("GET", "/rest/api/2/serverInfo") => (200, json!({"deploymentType": "Cloud"})),
                ("GET", "/rest/api/2/search/jql") => {
                    let issues: Vec<Value> = (0..100)
                        .map(|i| {
                            let n = (nth - 1) * 100 + i + 1;
                            json!({"id": n.to_string(), "key": format!("A-{n}"), "fields": {}})
                        })
                        .collect();
                    let last = nth == 101;
                    let mut page = json!({"issues": issues, "isLast": last});
                    if !last {
                        page["nextPageToken"] = json!(format!("t{nth}"));
                    }
                    (200, page)
                }
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let found = jira
            .search_values("project = A", "summary", Some(MARKER_KEY))
            .unwrap();
        assert_eq!(found.len(), 10_100);
    }

    /// A page size halved after a page that did not come grows back once
    /// pages come again (two in a row), up to the size asked.
    #[test]
    fn a_halved_page_size_grows_back() {
        fn issue(n: usize) -> Value {
            json!({"id": n.to_string(), "key": format!("AURORA-{n}"), "fields": {}})
        }
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path, nth) {
                ("GET", "/rest/api/2/serverInfo", _) => data_center_9(),
                ("GET", "/rest/api/2/search", 1) => {
                    (502, json!({"errorMessages": ["Bad Gateway"]}))
                }
                ("GET", "/rest/api/2/search", n) => {
                    // Pages of the size asked, by call: 2, 2, then 4, 4, then the rest.
                    let (first, size) = match n {
                        2 => (1, 2),
                        3 => (3, 2),
                        4 => (5, 4),
                        5 => (9, 4),
                        _ => (13, 1),
                    };
                    let issues: Vec<Value> = (first..first + size).map(issue).collect();
                    (
                        200,
                        json!({"startAt": 0, "maxResults": if n >= 4 { 4 } else { 2 },
                               "total": 14 - first, "issues": issues}),
                    )
                }
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let mut got = 0u64;
        let total = jira
            .search("project = AURORA", "*all", 4, &[], &mut |page| {
                got += page.issues.len() as u64;
                Ok(())
            })
            .unwrap();
        assert_eq!((total, got), (13, 13));
        let sizes: Vec<String> = jira_server
            .queries
            .lock()
            .unwrap()
            .iter()
            .filter(|q| q.starts_with("jql="))
            .filter_map(|q| q.split('&').find(|p| p.starts_with("maxResults=")))
            .map(String::from)
            .collect();
        assert_eq!(
            sizes,
            [4, 2, 2, 4, 4, 4].map(|n| format!("maxResults={n}")),
            "halved once, then back to the size asked"
        );
    }

    /// `serverInfo` of a Data Center 9.12 that says nothing about its clock.
    fn data_center_9() -> (u16, Value) {
        (
            200,
            json!({"deploymentType": "Server", "versionNumbers": [9, 12, 0]}),
        )
    }

    /// A Data Center page that brings the whole `total` of the first page ends
    /// the search; no empty page is asked to learn it (before: two more, `key > "P-n"` and
    /// `project not in (P)`).
    #[test]
    fn no_empty_page_after_the_count_is_reached() {
        fn answer(method: &str, path: &str, nth: usize) -> (u16, Value) {
            match (method, path, nth) {
                ("GET", "/rest/api/2/serverInfo", _) => data_center_9(),
                ("GET", "/rest/api/2/search", 1) => (
                    200,
                    json!({"startAt": 0, "maxResults": 2, "total": 2, "issues": [
                        {"id": "1", "key": "AURORA-1", "fields": {}},
                        {"id": "2", "key": "AURORA-2", "fields": {}}]}),
                ),
                ("GET", "/rest/api/2/search", _) => (
                    200,
                    json!({"startAt": 0, "maxResults": 2, "total": 0, "issues": []}),
                ),
                _ => (404, json!({"errorMessages": ["нет"]})),
            }
        }
        let jira_server = canned(answer);
        let mut jira = jira_at(&jira_server.url);
        let total = jira
            .search("project = AURORA", "*all", 2, &[], &mut |_| Ok(()))
            .unwrap();
        assert_eq!(total, 2);
        let seen = jira_server.seen.lock().unwrap().clone();
        assert_eq!(
            seen.iter()
                .filter(|l| *l == "GET /rest/api/2/search")
                .count(),
            1,
            "{seen:?}"
        );
    }

    /// A `Retry-After` pauses the client, not the request: a write answered 503 with
    /// `Retry-After: 3` (released, a 503 is no proof) holds every next call, a read of another
    /// issue and another command's write alike, until the 3 s have passed; the heartbeat's note
    /// names the wait.
    #[test]
    fn a_retry_after_on_a_write_pauses_every_next_call() {
        fn answer(method: &str, path: &str, _nth: usize) -> (u16, Vec<String>, Value) {
            match (method, path) {
                ("POST", "/rest/api/2/issue/AURORA-1/comment") => (
                    503,
                    vec!["Retry-After: 3".to_string()],
                    json!({"errorMessages": ["Service Unavailable"]}),
                ),
                ("GET", "/rest/api/2/issue/AURORA-2") => (
                    200,
                    Vec::new(),
                    json!({"id": "10002", "key": "AURORA-2", "fields": {}}),
                ),
                _ => (201, Vec::new(), json!({"id": "1"})),
            }
        }
        let (_server, mut jira, _clock, times) = timed(answer);
        jira.set_min_interval(Duration::ZERO);
        assert!(matches!(
            post_comment(&mut jira),
            Err(JiraError::Ambiguous(_))
        ));
        assert!(jira.rate_limited().is_some_and(|note| note.contains("3 с")));
        assert!(
            jira.ready_in() >= Duration::from_secs(2),
            "{:?}",
            jira.ready_in()
        );
        jira.read("/rest/api/2/issue/AURORA-2").unwrap();
        jira.write_expecting(
            "POST",
            "/rest/api/2/issue/AURORA-3/comment",
            &json!({"body": "y"}),
            Need::Member("id"),
        )
        .unwrap();
        let times = times.lock().unwrap().clone();
        assert_eq!(times.len(), 3, "{times:?}");
        for (call, at) in &times[1..] {
            let gap = *at - times[0].1;
            assert!(
                gap >= Duration::from_secs(3),
                "{call} went {gap:?} after the 503 that asked for 3 s"
            );
        }
    }

    /// `myself` needs nothing but a login: its 401 without `X-Seraph-LoginReason: OK` (a front
    /// proxy that authenticates by itself, nginx `auth_basic`) refuses the credentials
    /// themselves, held as refused (never probed again with the same secret); the same 401
    /// stamped OK by Jira's login stays a question about the path.
    #[test]
    fn a_401_on_myself_without_seraphs_ok_refuses_the_credentials() {
        fn front_proxy(_: &str, _: &str, _: usize) -> (u16, Vec<String>, Value) {
            let realm = vec!["WWW-Authenticate: Basic realm=\"jira\"".to_string()];
            (401, realm, json!({"message": "401 Authorization Required"}))
        }
        fn stamped(_: &str, _: &str, _: usize) -> (u16, Vec<String>, Value) {
            let ok = vec!["X-Seraph-LoginReason: OK".to_string()];
            (401, ok, json!({"errorMessages": ["scope does not match"]}))
        }
        let (_server, mut jira, _clock, _times) = timed(front_proxy);
        assert!(matches!(
            jira.probe_myself(),
            Err(JiraError::Held {
                cause: crate::agent::answer::Cause::Rejected,
                ..
            })
        ));
        assert!(jira.take_login_refused().is_some());
        let (_server, mut jira, _clock, _times) = timed(stamped);
        assert!(matches!(
            jira.probe_myself(),
            Err(JiraError::Held {
                cause: crate::agent::answer::Cause::Credentials,
                ..
            })
        ));
    }
}
