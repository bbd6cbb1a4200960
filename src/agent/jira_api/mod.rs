//! The agent's Jira client: one paced call at a time (`pacing.min_interval_ms` between two calls,
//! the hub's `pause_seconds` before the next one), 429/503 honoured with `Retry-After`, reads
//! retried, writes never repeated blindly, Jira's error bodies turned into words, answers checked
//! for the shape the agent relies on, and the two searches (Server/DC paged by issue key, project
//! by project; Cloud's `search/jql` with page tokens).
//!
//! Issue bodies stay raw JSON (`RawValue`) and are handed on page by page: nothing here holds a
//! whole result set.

use super::answer::{self, Cause};
use super::config::{DeploymentSetting, Secret};
use super::net::{Client, Reply};
use super::wait::Waits;
use serde_json::Value;
use serde_json::value::RawValue;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

mod client;
mod comments;
mod search;
mod server;

use super::text::error_text;
pub(crate) use client::backoff;
use client::check_json;
pub(crate) use comments::jira_time;
use search::MAX_RECONCILED;
pub(crate) use search::issue_head;

/// Why the last read failed, when it failed for want of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadFailure {
    /// No answer in time, or the connection dropped after the request went.
    NoAnswer,
    /// A 5xx (503 excepted): the answer may be too large or too slow to make.
    ServerError(u16),
    /// Anything else: not sent, rate limited.
    Other,
}

/// What a look does with a page of comments, newest first (see [`Jira::comments_newest`]):
/// `true` when it found what it looks for.
pub(crate) type CommentVisit<'a> = dyn FnMut(&mut Jira, Vec<Value>) -> Result<bool, JiraError> + 'a;

/// Which kind of Jira answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deployment {
    /// Server or Data Center: `search` with `startAt`, users by `name`.
    Server,
    /// Cloud: `search/jql` with `nextPageToken`, users by `accountId`.
    Cloud,
}

/// Why a Jira operation did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JiraError {
    /// Jira answered with an error status; `message` is Jira's words.
    Refused { status: u16, message: String },
    /// A write may or may not have been applied (timeout, dropped connection, 5xx).
    Ambiguous(String),
    /// Jira could not be reached, or kept failing, after every retry.
    Unavailable(String),
    /// Jira cannot be used by the agent (its credentials or access are refused, or no
    /// connection can be made): the command goes back to the hub, and the agent claims nothing
    /// until an authenticated probe (`GET myself`) succeeds.
    Held { cause: Cause, reason: String },
    /// The command goes back to the hub (its lease would lapse during a wait, or was lost).
    GiveBack(String),
    /// The agent is stopping: the call was not made.
    Stopped,
}

impl std::fmt::Display for JiraError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JiraError::Refused { status, message } => write!(f, "{message} (HTTP {status})"),
            JiraError::Ambiguous(e) => write!(f, "ответ Jira потерян: {e}"),
            JiraError::Unavailable(e) => write!(f, "Jira недоступна: {e}"),
            JiraError::Held { reason, .. } => f.write_str(reason),
            JiraError::GiveBack(e) => write!(f, "команда возвращена хабу: {e}"),
            JiraError::Stopped => f.write_str("агент останавливается"),
        }
    }
}

/// The agent's own Jira user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Me {
    pub name: Option<String>,
    /// Data Center's user key (`JIRAUSER10100`, or the first name of a renamed user): it does
    /// not change when the user is renamed.
    pub key: Option<String>,
    pub account_id: Option<String>,
}

impl Me {
    /// Whether a user object of Jira's (a comment's or a history's `author`) is this user,
    /// compared by the field that names a user on each deployment: Cloud's `accountId`; Data
    /// Center's `key`, else its `name` without regard to case (Data Center's user names are
    /// case-insensitive, and REST gives back the stored form: docs/jira-field-notes.md, "Who we
    /// are"). `None` when neither side names the user by the same field.
    pub(crate) fn is(&self, user: &Value, cloud: bool) -> Option<bool> {
        let field = |name: &str| user.get(name).and_then(Value::as_str);
        if cloud {
            return Some(self.account_id.as_deref()? == field("accountId")?);
        }
        if let (Some(mine), Some(theirs)) = (self.key.as_deref(), field("key")) {
            return Some(mine == theirs);
        }
        let (mine, theirs) = (self.name.as_deref()?, field("name")?);
        Some(mine.to_lowercase() == theirs.to_lowercase())
    }
}

/// One page of a search.
pub(crate) struct SearchPage {
    pub issues: Vec<Box<RawValue>>,
    /// The size of the whole result, when Jira tells it (not on Cloud).
    pub total: Option<u64>,
}

/// What one command cost: the calls made and how many were rate limited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    pub calls: u32,
    pub rate_limited: u32,
}

pub(crate) struct Jira {
    client: Client,
    base: String,
    authorization: Secret,
    setting: DeploymentSetting,
    deployment: Option<Deployment>,
    me: Option<Me>,
    min_interval: Duration,
    /// When the last call ended (monotonic, [`Waits::now`]).
    last_call: Option<Duration>,
    /// No call before this (the hub's pause, Jira's `Retry-After` or rate-limit reset).
    not_before: Option<Duration>,
    max_retries: u32,
    counters: Rc<Cell<Counters>>,
    /// Jira's clock as the last `serverInfo.serverTime` showed it, anchored on the host's
    /// monotonic clock (the windows of the checks before a repeated write are Jira's times).
    anchor: Option<server::Anchor>,
    /// The host's clocks, wall and monotonic, as the kernel gives them ([`SystemClock`]): what
    /// Jira's clock is anchored on (a test steps its wall).
    ///
    /// [`SystemClock`]: crate::clock::SystemClock
    host: Arc<dyn crate::clock::Clock>,
    /// `serverInfo.versionNumbers`' first two, when Jira said.
    version: Option<(u64, u64)>,
    /// Why the last failed read failed (a search page shrinks only for a slow or large answer).
    last_read_failure: Option<ReadFailure>,
    waits: Arc<Waits>,
    /// The last rate limit Jira announced, in words, until a call goes through unlimited.
    rate_limited: Option<String>,
    /// The rate-limit headers seen on any answer (name → last value), for the preflight.
    limit_headers: std::collections::BTreeMap<String, String>,
    /// Whether a write since the last [`Jira::take_counters`] may have been applied.
    wrote: bool,
    /// The last call Jira answered with a credentials refusal: its method, path (without the
    /// query) and Jira's words, for the probe that tells one path's refusal from a hold.
    refusal: Option<Refusal>,
    /// The last write was answered 503 with `Retry-After`: how long it asked to wait.
    busy: Option<Duration>,
    /// Entity properties read in this delivery (path → value, `None`: not set).
    properties: std::collections::HashMap<String, Option<Value>>,
    /// Whether this Jira was seen to keep a create's `properties` (a marker read back once).
    create_properties_kept: Option<bool>,
    /// The type of each board read in this run (a board's type does not change under a
    /// refresh): read once, again only after a read that failed.
    board_types: std::collections::BTreeMap<i64, Value>,
    /// The ids of the issues this agent wrote since its last full refresh, oldest first, at most
    /// [`MAX_RECONCILED`]: Cloud's search may not show them yet, so a refresh names them in
    /// `reconcileIssues`.
    written: Vec<(u64, Duration)>,
    /// Whether an answer named its cluster node (`X-ANODEID`): a Data Center cluster, whose
    /// search lags its writes.
    clustered: bool,
    /// Whether this Jira was seen to keep a comment's `properties` (a marker read back once).
    comment_properties_kept: Option<bool>,
    /// The least grace the running command asks of the hub if it is given back (`released`):
    /// the time a lagging search needs to show what it may have written.
    release_for: Duration,
    /// Whether the last answer said `X-Seraph-LoginReason: OK` (Jira's login took the
    /// credentials).
    seraph_ok: bool,
    /// Why Jira's login last refused the credentials, until taken (`--check` keeps it).
    login_refused: Option<String>,
}

/// A call refused for credentials (see [`Jira::take_refusal`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub method: String,
    pub status: u16,
    /// The path with its query, as asked (a read is probed with it again).
    pub path: String,
    /// Jira's words (the body's messages, or the `Location` of a redirect).
    pub words: String,
}

impl Jira {
    pub(crate) fn new(
        client: Client,
        base: &str,
        authorization: Secret,
        setting: DeploymentSetting,
        max_retries: u32,
        waits: Arc<Waits>,
    ) -> Jira {
        let deployment = match setting {
            DeploymentSetting::Auto => None,
            DeploymentSetting::Server => Some(Deployment::Server),
            DeploymentSetting::Cloud => Some(Deployment::Cloud),
        };
        Jira {
            client,
            base: base.to_string(),
            authorization,
            setting,
            deployment,
            me: None,
            min_interval: Duration::from_millis(300),
            last_call: None,
            not_before: None,
            max_retries,
            counters: Rc::default(),
            anchor: None,
            host: Arc::new(crate::clock::SystemClock),
            version: None,
            last_read_failure: None,
            waits,
            rate_limited: None,
            limit_headers: std::collections::BTreeMap::new(),
            wrote: false,
            refusal: None,
            properties: std::collections::HashMap::new(),
            create_properties_kept: None,
            busy: None,
            board_types: std::collections::BTreeMap::new(),
            written: Vec::new(),
            clustered: false,
            comment_properties_kept: None,
            release_for: Duration::ZERO,
            seraph_ok: false,
            login_refused: None,
        }
    }

    /// Why Jira's login refused the credentials since the last call of this, taken.
    pub(crate) fn take_login_refused(&mut self) -> Option<String> {
        self.login_refused.take()
    }

    /// The credentials sent from now on (`Authorization`'s value), when the agent's source
    /// gave new ones.
    pub(crate) fn set_authorization(&mut self, authorization: Secret) {
        self.authorization = authorization;
    }

    /// The `Authorization` value sent now.
    pub(crate) fn authorization(&self) -> &str {
        self.authorization.expose()
    }

    /// Whether the last write's answer was a 503 with `Retry-After`, and the wait it asked for
    /// (taken: cleared).
    pub(crate) fn take_busy(&mut self) -> Option<Duration> {
        self.busy.take()
    }

    /// The last credentials refusal of a call, taken (cleared).
    pub(crate) fn take_refusal(&mut self) -> Option<Refusal> {
        self.refusal.take()
    }

    fn note_refusal(&mut self, method: &str, path: &str, reply: Option<&Reply>) {
        let words = reply
            .map(|reply| match reply.header("location") {
                Some(location) if (300..400).contains(&reply.status) => location.to_string(),
                _ => error_text(reply),
            })
            .unwrap_or_default();
        self.refusal = Some(Refusal {
            method: method.to_string(),
            status: reply.map_or(0, |reply| reply.status),
            path: path.to_string(),
            words,
        });
    }

    /// One read of `path` with no retry and no rate-limit wait: the probe of a read refused for
    /// credentials.
    pub(crate) fn probe_read(&mut self, path: &str) -> Result<(), JiraError> {
        self.read_with(path, 0, false).map(|_| ())
    }

    /// The pause between two calls (`pacing.min_interval_ms`).
    pub(crate) fn set_min_interval(&mut self, interval: Duration) {
        self.min_interval = interval;
    }

    /// The hub's `pause_seconds`: no call before that long from now.
    pub(crate) fn pause(&mut self, pause: Duration) {
        if !pause.is_zero() {
            self.hold_until(self.waits.now() + pause);
        }
    }

    fn hold_until(&mut self, until: Duration) {
        self.not_before = Some(self.not_before.map_or(until, |t| t.max(until)));
    }

    /// How long from now until the next call may go (the pacer, a pause, a rate limit).
    pub(crate) fn ready_in(&self) -> Duration {
        let mut ready = self
            .last_call
            .map_or(Duration::ZERO, |t| t + self.min_interval);
        if let Some(not_before) = self.not_before {
            ready = ready.max(not_before);
        }
        ready.saturating_sub(self.waits.now())
    }

    /// The rate limit Jira announced last, while it lasts (for the heartbeat's note).
    pub(crate) fn rate_limited(&self) -> Option<&str> {
        self.rate_limited.as_deref()
    }

    /// The counters since the last call of this, which resets them (and [`Jira::wrote`], and the
    /// properties read: a command's delivery starts with it).
    pub(crate) fn take_counters(&mut self) -> Counters {
        self.wrote = false;
        self.properties.clear();
        self.counters.take()
    }

    /// The counters, shared: a refresh's pages report the calls made so far while the search
    /// is still running.
    pub(crate) fn counters_handle(&self) -> Rc<Cell<Counters>> {
        self.counters.clone()
    }

    fn count(&self, calls: u32, rate_limited: u32) {
        let mut c = self.counters.get();
        c.calls += calls;
        c.rate_limited += rate_limited;
        self.counters.set(c);
    }

    fn stopping(&self) -> bool {
        self.waits.stopping()
    }

    /// Notes an issue this agent created or changed (its id), for the next refreshes'
    /// `reconcileIssues`.
    pub(crate) fn note_written(&mut self, id: u64) {
        self.written.retain(|(known, _)| *known != id);
        self.written.push((id, self.waits.now()));
        if self.written.len() > MAX_RECONCILED {
            self.written.remove(0);
        }
    }

    /// The issues written since the last full refresh (see [`Jira::note_written`]).
    pub(crate) fn written_ids(&self) -> Vec<u64> {
        self.written.iter().map(|(id, _)| *id).collect()
    }

    /// A full refresh read these with strong consistency: those written longer than `lag` ago
    /// need no reconciling any more (the search shows them by now); the others are still named
    /// by the next refreshes, which a lagging search would otherwise show without them.
    pub(crate) fn forget_written(&mut self, ids: &[u64], lag: Duration) {
        let now = self.waits.now();
        self.written
            .retain(|(id, at)| !ids.contains(id) || now.saturating_sub(*at) < lag);
    }

    /// A board's `type` (`scrum`, `kanban`): `GET /rest/agile/1.0/board/{id}` once per agent
    /// run; a read that fails is not remembered, so the next refresh asks again.
    pub(crate) fn board_type(&mut self, id: i64) -> Result<Value, JiraError> {
        if let Some(kind) = self.board_types.get(&id) {
            return Ok(kind.clone());
        }
        let board: Value = self.read_json(&format!("/rest/agile/1.0/board/{id}"))?;
        let kind = board["type"].clone();
        self.board_types.insert(id, kind.clone());
        Ok(kind)
    }

    /// Whether a write of the current command may have been applied (an answer of any 2xx, or
    /// none): the command's report says so (`sent`), and the hub counts a delivery only then.
    /// Reset by [`Jira::take_counters`].
    pub(crate) fn wrote(&self) -> bool {
        self.wrote
    }
}

/// The path without its query (queries carry JQL, which may name labels and summaries).
pub(crate) fn path_only(path: &str) -> &str {
    path.split('?').next().unwrap_or(path)
}

/// Parses a 2xx answer's JSON body. An answer that says it is not JSON (an HTML login or error
/// page a proxy serves with 200) or that is not the JSON expected (cut short, another shape) is
/// an error naming what was wrong, never an empty result.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(reply: &Reply) -> Result<T, JiraError> {
    check_json(reply)?;
    serde_json::from_slice(&reply.body).map_err(|e| {
        JiraError::Unavailable(format!(
            "HTTP {}: ответ — не тот JSON, что ожидался ({e})",
            reply.status
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_paths_are_not_logged() {
        assert_eq!(
            path_only("/rest/api/2/search?jql=secret"),
            "/rest/api/2/search"
        );
    }
}
