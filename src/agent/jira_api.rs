//! The agent's Jira client: one paced call at a time (`pacing.min_interval_ms` between two calls,
//! the hub's `pause_seconds` before the next one), 429/503 honoured with `Retry-After`, reads
//! retried, writes never repeated blindly, Jira's error bodies turned into words, answers checked
//! for the shape the agent relies on, and the two searches (Server/DC paged by issue key, project
//! by project; Cloud's `search/jql` with page tokens).
//!
//! Issue bodies stay raw JSON (`RawValue`) and are handed on page by page: nothing here holds a
//! whole result set.

use super::answer::{self, Cause, Class, Need};
use super::config::{DeploymentSetting, Secret};
use super::jql;
use super::net::{Client, NetError, Reply};
use super::wait::Waits;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The longest wait a `Retry-After` may impose.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(900);
/// The longest backoff between two tries when Jira says nothing.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How many times in a row a search page may fail to come (each time asked again with half the
/// page size) before the search fails.
const MAX_PAGE_FAILURES: u32 = 6;

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
/// The most issue ids `reconcileIssues` accepts ("Accepts max 50 ids").
const MAX_RECONCILED: usize = 50;
/// How many search pages in a row must come after the page size was halved before it doubles
/// back (up to the size asked).
const GROW_AFTER: u32 = 2;
/// How many rate-limited answers (429, or 503 with `Retry-After`) one call waits out before the
/// command goes back to the hub: they are not failures of the command, and each wait is bounded
/// by the lease.
const MAX_RATE_LIMITED: u32 = 20;

/// How long one call may spend waiting out rate-limited answers before the command goes back to
/// the hub (a time budget beside [`MAX_RATE_LIMITED`]'s count).
const MAX_THROTTLED: Duration = Duration::from_secs(600);

/// A page of an issue's comments in a look (`maxResults`: Cloud's documented default; Data
/// Center's is 50, and it may answer fewer: the paging follows what comes).
const COMMENT_PAGE: u64 = 100;
/// The most comment ids one `POST /comment/list` takes ("A maximum of 1000 IDs can be
/// specified").
const MAX_COMMENT_IDS: usize = 1000;

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
    /// Jira's clock minus the agent's, in milliseconds, from the last `serverInfo.serverTime`
    /// (the windows of the checks before a repeated write are Jira's times).
    skew_ms: Option<i64>,
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
            skew_ms: None,
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

    /// The deployment, asking `serverInfo` when it is not known yet.
    pub(crate) fn deployment(&mut self) -> Result<Deployment, JiraError> {
        if let Some(d) = self.deployment {
            return Ok(d);
        }
        self.server_info(true)?;
        Ok(self.deployment.unwrap_or(Deployment::Server))
    }

    /// `GET serverInfo`: whether Jira answers; learns the deployment type.
    /// A heartbeat's probe makes one try (`retry: false`): a Jira that is down is reported at once.
    pub(crate) fn server_info(&mut self, retry: bool) -> Result<(), JiraError> {
        let retries = if retry { self.max_retries } else { 0 };
        // The host's clock, as [`Jira::jira_now_ms`] reads it (a test's manual clock does not
        // move with Jira's).
        let asked = SystemTime::now();
        let reply = self.read_with("/rest/api/2/serverInfo", retries, retry)?;
        let info: Value = parse(&reply)?;
        if let Some([major, minor, ..]) = info
            .get("versionNumbers")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            self.version = major.as_u64().zip(minor.as_u64());
        }
        if let Some(server) = info
            .get("serverTime")
            .and_then(Value::as_str)
            .and_then(jira_time)
        {
            // The answer was made between the question and its arrival: the middle of the two.
            let answered = SystemTime::now();
            let middle = asked + answered.duration_since(asked).unwrap_or_default() / 2;
            let local = time::OffsetDateTime::from(middle);
            self.skew_ms = Some(((server - local).whole_milliseconds()) as i64);
        }
        if self.setting == DeploymentSetting::Auto {
            let cloud = info.get("deploymentType").and_then(Value::as_str) == Some("Cloud");
            let deployment = if cloud {
                Deployment::Cloud
            } else {
                Deployment::Server
            };
            if self.deployment != Some(deployment) {
                tracing::info!(?deployment, "Jira's deployment type");
            }
            self.deployment = Some(deployment);
        }
        Ok(())
    }

    /// Now on Jira's clock, in epoch milliseconds: the agent's clock plus the skew the last
    /// `serverInfo` showed (asked now when none has been seen yet).
    pub(crate) fn jira_now_ms(&mut self) -> Result<i64, JiraError> {
        if self.skew_ms.is_none() {
            self.server_info(true)?;
        }
        let local = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
        Ok(local + self.skew_ms.unwrap_or(0))
    }

    /// Whether a create's `properties` may be ignored: a server before 7.2, or one that did not
    /// say its version (Cloud and Server 7.2 on document them on create).
    pub(crate) fn may_ignore_create_properties(&mut self) -> Result<bool, JiraError> {
        if self.deployment()? == Deployment::Cloud {
            return Ok(false);
        }
        Ok(self.version.is_none_or(|version| version < (7, 2)))
    }

    /// Whether this Jira was seen to keep a create's `properties` (`None`: not checked yet in
    /// this run).
    pub(crate) fn create_properties_kept(&self) -> Option<bool> {
        self.create_properties_kept
    }

    pub(crate) fn set_create_properties_kept(&mut self, kept: bool) {
        self.create_properties_kept = Some(kept);
    }

    /// Whether comments carry entity properties set in the add request, so that the agent's
    /// comments are recognised by their marker: Cloud, and a server that says it is 7.2 or later
    /// (`CommentJsonBean.properties`); a server that names an older version has none, and only
    /// there is a comment recognised by its body. A server that does not say is taken to have
    /// them: an unmarked comment is then never adopted.
    pub(crate) fn has_comment_properties(&mut self) -> Result<bool, JiraError> {
        if self.deployment()? == Deployment::Cloud {
            return Ok(true);
        }
        Ok(self.version.is_none_or(|version| version >= (7, 2)))
    }

    /// Jira's clock minus the agent's, in milliseconds, when a `serverInfo` told it.
    pub(crate) fn skew_ms(&self) -> Option<i64> {
        self.skew_ms
    }

    /// The rate-limit headers Jira sent on any answer so far (name in lower case → last value).
    pub(crate) fn limit_headers(&self) -> &std::collections::BTreeMap<String, String> {
        &self.limit_headers
    }

    /// Asks who the agent is (`GET myself`) when it is not known yet: once a run, where the
    /// call costs no command anything (the heartbeat's probe). A failure is left to the command
    /// that needs the answer.
    /// Jira's login refusing the credentials on that call is not passed over: its reason is
    /// returned, so that the refused secret is held like any other refusal and not sent again by
    /// the next call (each failed login counts toward Data Center's CAPTCHA).
    pub(crate) fn learn_me(&mut self) -> Option<String> {
        if self.me.is_some() {
            return None;
        }
        match self.me() {
            Ok(_) => None,
            Err(JiraError::Held {
                cause: super::answer::Cause::Rejected,
                reason,
            }) => Some(reason),
            Err(error) => {
                tracing::debug!(%error, "who the agent is in Jira is asked again when a command needs it");
                None
            }
        }
    }

    /// The agent's own user (`GET myself`), asked once.
    pub(crate) fn me(&mut self) -> Result<Me, JiraError> {
        if let Some(me) = &self.me {
            return Ok(me.clone());
        }
        let user: Value = self.read_json("/rest/api/2/myself")?;
        let me = me_of(&user);
        self.me = Some(me.clone());
        Ok(me)
    }

    /// Whether an answer came from a node of a Data Center cluster (`X-ANODEID`).
    pub(crate) fn clustered(&self) -> bool {
        self.clustered
    }

    /// If the running command goes back to the hub, it is not handed out again before `least`
    /// (see [`Jira::take_release_for`]).
    pub(crate) fn release_for_at_least(&mut self, least: Duration) {
        self.release_for = self.release_for.max(least);
    }

    /// The least grace the command that ran asks for when it is given back; cleared.
    pub(crate) fn take_release_for(&mut self) -> Duration {
        std::mem::take(&mut self.release_for)
    }

    /// Whether this Jira was seen to keep a comment's `properties` (`None`: not checked yet in
    /// this run).
    pub(crate) fn comment_properties_kept(&self) -> Option<bool> {
        self.comment_properties_kept
    }

    pub(crate) fn set_comment_properties_kept(&mut self, kept: bool) {
        self.comment_properties_kept = Some(kept);
    }

    /// The probe of a held agent: `GET myself`, which needs the agent's login (`serverInfo`
    /// answers anonymously, so a revoked Cloud token passes it: ServiceNow KB2942093). One try;
    /// a rate limit is noted, not waited out.
    pub(crate) fn probe_myself(&mut self) -> Result<(), JiraError> {
        let reply = match self.read_with("/rest/api/2/myself", 0, false) {
            // `myself` needs nothing but a login: its 401 that Jira's login did not stamp
            // `X-Seraph-LoginReason: OK` refuses the credentials themselves, whoever answered it
            // (Jira, or a front proxy that authenticates by itself and sends no Seraph header):
            // sent again it only counts another failed login (docs/jira-field-notes.md, "Failed
            // logins count").
            Err(JiraError::Held {
                cause: Cause::Credentials,
                reason,
            }) if self.refusal.as_ref().is_some_and(|r| r.status == 401) && !self.seraph_ok => {
                self.login_refused = Some(reason.clone());
                return Err(JiraError::Held {
                    cause: Cause::Rejected,
                    reason,
                });
            }
            other => other?,
        };
        let user: Value = parse(&reply)?;
        if user.get("name").is_none() && user.get("accountId").is_none() {
            return Err(JiraError::Unavailable(format!(
                "ответ Jira на myself без name и accountId: {}",
                body_excerpt(&reply.body)
            )));
        }
        self.me = Some(me_of(&user));
        Ok(())
    }

    /// Waits for the pacer (and any pause or rate limit), then makes one call. Every call, the
    /// heartbeat's `serverInfo` included, goes through here.
    fn once(&mut self, method: &str, path: &str, body: Option<&[u8]>) -> Result<Reply, CallError> {
        let wait = self.ready_in();
        if !wait.is_zero() && !self.waits.may_wait(wait) {
            return Err(CallError::GiveBack(format!(
                "Jira можно спрашивать только через {} с, а аренда команд кончится раньше",
                wait.as_secs()
            )));
        }
        // Even with nothing to wait for: the watchdog is fed and the running command's lease
        // and keep-alive kept between two calls of a long look.
        if !self.waits.sleep(wait) {
            return Err(self.interrupted());
        }
        if self.stopping() {
            return Err(CallError::Stopped);
        }
        self.not_before = None;
        self.count(1, 0);
        let url = format!("{}{}", self.base, path);
        let result = self
            .client
            .send(method, &url, self.authorization.expose(), body);
        self.last_call = Some(self.waits.now());
        tracing::debug!(method, path = %path_only(path), status = result.as_ref().map(|r| r.status).ok(), "jira call");
        self.seraph_ok = result.as_ref().is_ok_and(|reply| {
            reply
                .headers
                .iter()
                .filter(|(name, _)| name == "x-seraph-loginreason")
                .any(|(_, value)| {
                    value
                        .split(',')
                        .any(|r| r.trim().eq_ignore_ascii_case("OK"))
                })
        });
        if let Ok(reply) = &result {
            self.note_limits(reply);
            // Who the agent is comes from `myself` (see [`Me::is`]), never from
            // `X-AUSERNAME`'s text.
            if reply
                .header("x-anodeid")
                .is_some_and(|node| !node.is_empty())
            {
                self.clustered = true;
            }
        }
        result.map_err(CallError::Net)
    }

    /// A wait that ended early: the agent stops, or the lease of its commands was lost.
    fn interrupted(&self) -> CallError {
        if self.stopping() {
            CallError::Stopped
        } else {
            CallError::GiveBack("аренда команд потеряна во время ожидания".into())
        }
    }

    /// Rate-limit headers on any answer: a `Retry-After` (Data Center sends one on every answer,
    /// 0 while tokens remain) or a near limit slows the next call down; a 429/503's wait is
    /// decided by [`Jira::wait_after`].
    fn note_limits(&mut self, reply: &Reply) {
        for (name, value) in &reply.headers {
            if name.contains("ratelimit") || name == "retry-after" {
                self.limit_headers.insert(name.clone(), value.clone());
            }
        }
        if let Some(value) = &reply.retry_after {
            self.limit_headers
                .insert("retry-after".into(), value.clone());
        }
        let limited = reply.status == 429 || reply.status == 503;
        if !limited {
            self.rate_limited = None;
            let now = SystemTime::from(self.waits.wall());
            if let Some(wait) = reply
                .retry_after
                .as_deref()
                .and_then(|t| parse_retry_after(t, now))
                .filter(|d| !d.is_zero())
            {
                self.hold_until(self.waits.now() + wait.min(MAX_RETRY_AFTER));
            }
            let near = |name: &str| reply.header(name).is_some_and(|v| v.trim() == "true");
            if near("x-ratelimit-nearlimit") || near("x-beta-ratelimit-nearlimit") {
                // Less than a fifth of the budget left (developer.atlassian.com rate-limiting):
                // at most one call a second until it recovers.
                let until = self.waits.now() + Duration::from_secs(1).max(self.min_interval);
                self.hold_until(until);
            }
        }
    }

    /// How long a rate-limited (or failed) answer asks to wait, and why, in words for the log.
    fn limit_wait(&self, reply: Option<&Reply>, attempt: u32) -> (Duration, String) {
        let wall = self.waits.wall();
        match reply.and_then(|r| rate_limit_wait(r, wall)) {
            // `Retry-After: 0` on a 429 or 503 (Data Center stamps it on every answer while
            // tokens remain, docs/jira-field-notes.md "Rate limits") asks for no wait at all:
            // a backoff instead, never a tight loop.
            Some(limit) if limit.wait.is_zero() => (
                backoff(attempt),
                format!("{}: экспоненциальная пауза", limit.describe()),
            ),
            Some(limit) => (limit.wait.min(MAX_RETRY_AFTER), limit.describe()),
            None => (
                backoff(attempt),
                "без заголовков: экспоненциальная пауза".into(),
            ),
        }
    }

    /// Waits as Jira asked (or a backoff); `Err` when stopping, or when the wait would outlast
    /// the lease of the commands held (they go back to the hub; the pause stays for the next
    /// call).
    fn wait_after(&mut self, reply: Option<&Reply>, attempt: u32) -> Result<Duration, JiraError> {
        let asked = self.limit_wait(reply, attempt);
        self.wait_out(reply, asked, attempt)
    }

    /// [`Jira::wait_after`] with the wait already decided (`limit_wait`'s), so that a call can
    /// check it against its time budget first.
    fn wait_out(
        &mut self,
        reply: Option<&Reply>,
        (wait, why): (Duration, String),
        attempt: u32,
    ) -> Result<Duration, JiraError> {
        if let Some(reply) = reply.filter(|r| r.status == 429 || r.status == 503) {
            let note = format!("HTTP {}: {why}", reply.status);
            tracing::info!(
                wait_ms = wait.as_millis() as u64,
                attempt,
                reason = %note,
                "Jira rate limits the agent: waiting"
            );
            self.rate_limited = Some(note);
        } else {
            tracing::info!(
                wait_ms = wait.as_millis() as u64,
                attempt,
                "Jira did not answer well: waiting before the next try"
            );
        }
        let until = self.waits.now() + wait;
        self.hold_until(until);
        if !self.waits.may_wait(wait) {
            return Err(JiraError::GiveBack(format!(
                "Jira просит подождать {} с, а аренда команд кончится раньше",
                wait.as_secs()
            )));
        }
        if !self.waits.sleep_until(until) {
            return Err(match self.interrupted() {
                CallError::GiveBack(why) => JiraError::GiveBack(why),
                _ => JiraError::Stopped,
            });
        }
        Ok(wait)
    }

    /// A read: retried on lost connections, 5xx and connections not made, up to `max_retries`
    /// (rate-limited answers are waited out apart from those, up to [`MAX_RATE_LIMITED`]). What
    /// each answer means is [`answer::classify`]'s.
    pub(crate) fn read(&mut self, path: &str) -> Result<Reply, JiraError> {
        self.read_with(path, self.max_retries, true)
    }

    /// `wait_limits`: wait out a rate limit (false: the heartbeat's probe, which only notes it).
    fn read_with(
        &mut self,
        path: &str,
        max_retries: u32,
        wait_limits: bool,
    ) -> Result<Reply, JiraError> {
        self.read_by("GET", path, None, max_retries, wait_limits)
    }

    /// A read sent as `method` with `body` (Cloud's `POST /comment/list` reads by a list of
    /// ids): retried and classified as a read, never taken for a write.
    fn read_by(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        max_retries: u32,
        wait_limits: bool,
    ) -> Result<Reply, JiraError> {
        let mut attempt = 0;
        let mut limited = 0;
        let mut throttled = Duration::ZERO;
        loop {
            let answer = self.answer_of(method, path, body)?;
            let error = match answer::classify("GET", Need::Json, answer.as_ref()) {
                Class::Done => {
                    return answer.map_err(|e| JiraError::Ambiguous(e.to_string()));
                }
                Class::Throttled => {
                    let Ok(reply) = answer else { continue };
                    self.count(0, 1);
                    self.last_read_failure = Some(ReadFailure::Other);
                    limited += 1;
                    let asked = self.limit_wait(Some(&reply), limited - 1);
                    // The time budget is never overrun: a wait that would pass it is not begun.
                    if !wait_limits
                        || limited > MAX_RATE_LIMITED
                        || throttled + asked.0 > MAX_THROTTLED
                    {
                        // Not a failure of Jira or of the command: the pause stays for the next
                        // call, whoever makes it.
                        let (wait, why) = asked;
                        tracing::info!(
                            wait_ms = wait.as_millis() as u64,
                            reason = %why,
                            "Jira rate limits the agent: the next call waits"
                        );
                        self.hold_until(self.waits.now() + wait);
                        self.rate_limited = Some(format!("HTTP {}: {why}", reply.status));
                        return Err(JiraError::GiveBack(format!(
                            "Jira ограничивает частоту запросов (HTTP {})",
                            reply.status
                        )));
                    }
                    throttled += self.wait_out(Some(&reply), asked, limited - 1)?;
                    continue;
                }
                Class::Refused { status, message } => {
                    return Err(JiraError::Refused { status, message });
                }
                Class::Broken(why) => return Err(JiraError::Unavailable(why)),
                Class::Held {
                    cause: cause @ (Cause::Credentials | Cause::Rejected),
                    reason,
                } => {
                    self.note_refusal(method, path, answer.as_ref().ok());
                    if cause == Cause::Rejected {
                        self.login_refused = Some(reason.clone());
                    }
                    return Err(JiraError::Held { cause, reason });
                }
                // A connection not made is certainly not sent: tried again, then the queue holds.
                Class::Held {
                    cause: Cause::Unreachable,
                    reason,
                } => {
                    self.last_read_failure = Some(ReadFailure::Other);
                    JiraError::Held {
                        cause: Cause::Unreachable,
                        reason,
                    }
                }
                Class::Ambiguous(why) => {
                    self.last_read_failure = Some(match &answer {
                        Ok(reply) => ReadFailure::ServerError(reply.status),
                        Err(_) => ReadFailure::NoAnswer,
                    });
                    JiraError::Ambiguous(why)
                }
            };
            if attempt >= max_retries {
                return Err(error);
            }
            self.wait_after(answer.as_ref().ok(), attempt)?;
            attempt += 1;
        }
    }

    /// One call's answer or transport failure; `Err` only when the call was not made (the
    /// agent stops, or the wait before it would outlast the lease).
    fn answer_of(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<Result<Reply, NetError>, JiraError> {
        match self.once(method, path, body) {
            Ok(reply) => Ok(Ok(reply)),
            Err(CallError::Net(e)) => Ok(Err(e)),
            Err(CallError::Stopped) => Err(JiraError::Stopped),
            Err(CallError::GiveBack(why)) => Err(JiraError::GiveBack(why)),
        }
    }

    pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
        &mut self,
        path: &str,
    ) -> Result<T, JiraError> {
        let reply = self.read(path)?;
        parse(&reply)
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

    /// A write whose 2xx needs nothing (an edit, a transition, a sprint add, a link, a
    /// property): see [`Jira::write_expecting`].
    pub(crate) fn write(
        &mut self,
        method: &str,
        path: &str,
        body: &Value,
    ) -> Result<Reply, JiraError> {
        self.write_expecting(method, path, body, Need::Nothing)
    }

    /// A write: repeated only when it certainly was not applied (no connection, 429, 503 with
    /// `Retry-After`). A timeout, a dropped connection, a 5xx or a 2xx without what `need` says
    /// is `Ambiguous`: the caller never repeats it in this delivery.
    pub(crate) fn write_expecting(
        &mut self,
        method: &str,
        path: &str,
        body: &Value,
        need: Need,
    ) -> Result<Reply, JiraError> {
        let bytes = serde_json::to_vec(body).map_err(|e| JiraError::Unavailable(e.to_string()))?;
        self.busy = None;
        let mut attempt = 0;
        let mut limited = 0;
        let mut throttled = Duration::ZERO;
        loop {
            let answer = self.answer_of(method, path, Some(&bytes))?;
            let error = match answer::classify(method, need, answer.as_ref()) {
                Class::Done => {
                    self.wrote = true;
                    return answer.map_err(|e| JiraError::Ambiguous(e.to_string()));
                }
                Class::Throttled => {
                    // Nothing was applied: waited out and sent again. A 503 with `Retry-After` is
                    // a resource limit reached, "handled with similar logic" to a 429: never a
                    // lost answer, never the release grace, never a delivery.
                    let Ok(reply) = answer else { continue };
                    self.count(0, 1);
                    limited += 1;
                    let asked = self.limit_wait(Some(&reply), limited - 1);
                    if limited > MAX_RATE_LIMITED || throttled + asked.0 > MAX_THROTTLED {
                        // The pause stays for the next call, whoever makes it.
                        self.hold_until(self.waits.now() + asked.0);
                        return Err(JiraError::GiveBack(format!(
                            "Jira ограничивает частоту запросов (HTTP {}): {limited} ответов за {} с",
                            reply.status,
                            throttled.as_secs()
                        )));
                    }
                    throttled += self.wait_out(Some(&reply), asked, limited - 1)?;
                    continue;
                }
                Class::Ambiguous(why) | Class::Broken(why) => {
                    self.wrote = true;
                    // A 503 that asks to come back: Jira (or its front) was busy, and said when
                    // to look.
                    self.busy = answer
                        .as_ref()
                        .ok()
                        .filter(|reply| reply.status == 503)
                        .and_then(|reply| {
                            let wall = self.waits.wall();
                            rate_limit_wait(reply, wall).map(|limit| {
                                if limit.wait.is_zero() {
                                    backoff(0)
                                } else {
                                    limit.wait.min(MAX_RETRY_AFTER)
                                }
                            })
                        });
                    if let Some(wait) = self.busy {
                        // The `Retry-After` pauses the client, not this request: every next
                        // call, whichever command or look it serves, waits it out (Atlassian's
                        // rate-limiting guidance; jira-python's `ResilientSession` sleeps the
                        // session). The heartbeat says so while it lasts.
                        tracing::info!(
                            wait_ms = wait.as_millis() as u64,
                            "Jira answered a write 503 with Retry-After: no call before it passes"
                        );
                        self.hold_until(self.waits.now() + wait);
                        self.rate_limited = Some(format!(
                            "HTTP 503 на запись: Retry-After {} с",
                            wait.as_secs()
                        ));
                    }
                    return Err(JiraError::Ambiguous(why));
                }
                Class::Refused { status, message } => {
                    return Err(JiraError::Refused { status, message });
                }
                Class::Held {
                    cause: cause @ (Cause::Credentials | Cause::Rejected),
                    reason,
                } => {
                    self.note_refusal(method, path, answer.as_ref().ok());
                    if cause == Cause::Rejected {
                        self.login_refused = Some(reason.clone());
                    }
                    return Err(JiraError::Held { cause, reason });
                }
                Class::Held {
                    cause: Cause::Unreachable,
                    reason,
                } => JiraError::Held {
                    cause: Cause::Unreachable,
                    reason,
                },
            };
            if attempt >= self.max_retries {
                return Err(error);
            }
            self.wait_after(None, attempt)?;
            attempt += 1;
        }
    }

    /// Runs a search and hands each page to `on_page` as Jira returns it. Returns how many
    /// issues came back. On Cloud it names `reconcile` in `reconcileIssues` ("Strong
    /// consistency issue ids to be reconciled with search results. Accepts max 50 ids. This list
    /// of ids should be consistent with each paginated request across different pages":
    /// Atlassian's description of `search/jql`; developer.atlassian.com/cloud/jira/platform/
    /// search-and-reconcile/): issues written moments ago then show as they are now.
    pub(crate) fn search(
        &mut self,
        query: &str,
        fields: &str,
        page_size: u32,
        reconcile: &[u64],
        on_page: &mut dyn FnMut(SearchPage) -> Result<(), JiraError>,
    ) -> Result<u64, JiraError> {
        self.search_with(query, fields, None, reconcile, page_size, on_page)
    }

    /// [`Jira::search`], on Cloud with `properties` and `reconcileIssues` asked for too.
    fn search_with(
        &mut self,
        query: &str,
        fields: &str,
        properties: Option<&str>,
        reconcile: &[u64],
        page_size: u32,
        on_page: &mut dyn FnMut(SearchPage) -> Result<(), JiraError>,
    ) -> Result<u64, JiraError> {
        match self.deployment()? {
            Deployment::Server => self.search_server(query, fields, page_size, on_page),
            Deployment::Cloud => {
                let cloud = CloudAsk {
                    properties,
                    reconcile,
                };
                self.search_cloud(query, fields, cloud, page_size, on_page)
            }
        }
    }

    /// Server/DC: paged by issue key, project by project. In Jira's JQL `id`, `key`,
    /// `issue` and `issuekey` are one clause, and `key > "P-7"` means "project P, key number above
    /// 7", so a numeric `id > N` was "the project of issue N", not "a larger id": a page that ended
    /// on an issue moved into the project stopped the search, and one whose last issue moved away
    /// ended it short. Here:
    ///
    /// - a project's first page is `(<jql>) AND project not in (<done>) ORDER BY key ASC`; its
    ///   first issue names the project P paged next (issues of other projects on that page are
    ///   left for their own turn);
    /// - the next pages are `(<jql>) AND key > "<last key of P>" ORDER BY key ASC` (`startAt=0`:
    ///   no deep offsets, so the 10,000-row window never bites);
    /// - every page must progress: its issues in P, key numbers rising above the last one, each
    ///   with an `id`, a `key` and `fields`; anything else fails the search, never ends it short;
    /// - when the last key no longer names an issue of P (deleted: "An issue with key … does
    ///   not exist", moved: "… cannot be applied to moved issue key …"), the page is asked again
    ///   after the previous key of the last good page, issues already sent are skipped by id; when
    ///   no key of that page is left, P is paged again from its start, de-duplicated the same way;
    /// - an empty page after `key > "P-n"` ends P, not the search (a full last page of P, or a
    ///   first page that also held other projects' issues, is followed by one);
    /// - a page that does not come (a timeout, a 5xx after the retries, 413) is asked again from
    ///   the same place with half the page size, up to [`MAX_PAGE_FAILURES`] times in a row.
    fn search_server(
        &mut self,
        query: &str,
        fields: &str,
        page_size: u32,
        on_page: &mut dyn FnMut(SearchPage) -> Result<(), JiraError>,
    ) -> Result<u64, JiraError> {
        let mut size = page_size.max(1);
        let mut sent = 0u64;
        let mut sent_ids: std::collections::HashSet<u64> = std::collections::HashSet::new();
        let mut done: Vec<String> = Vec::new();
        // The project being paged, and the keys (with their numbers) of its last good page.
        let mut project: Option<String> = None;
        let mut cursor: Vec<(String, u64)> = Vec::new();
        let mut failures = 0u32;
        // Pages answered in a row since the size was last halved: after [`GROW_AFTER`] of them
        // the size doubles back, up to the asked size (a slow moment does not shrink a whole
        // refresh for good).
        let mut answered = 0u32;
        let mut total_hint: Option<u64> = None;
        // The `total` of the last page asked without `key >` (a project's first page, whose
        // query covers every project still to page) and how many issues had been sent before
        // it: once that many are sent, Jira's own count says nothing is left, and no empty page
        // is asked to learn it.
        let mut covered: Option<(u64, u64)> = None;
        loop {
            if answered >= GROW_AFTER && size < page_size.max(1) {
                size = (size * 2).min(page_size.max(1));
                answered = 0;
                tracing::info!(
                    page_size = size,
                    "search pages come again: the page grows back"
                );
            }
            let after = cursor.last().cloned();
            let page_jql = jql::key_page(query, &done, after.as_ref().map(|(k, _)| k.as_str()));
            let path = format!(
                "/rest/api/2/search?jql={}&startAt=0&maxResults={size}&fields={}",
                jql::encode(&page_jql),
                jql::encode(fields)
            );
            self.last_read_failure = None;
            let reply = match self.read(&path) {
                Ok(reply) => reply,
                Err(JiraError::Refused {
                    status: 400,
                    message,
                }) if after.is_some() => {
                    let last = after.as_ref().map(|(k, _)| k.as_str()).unwrap_or_default();
                    if !self.key_is_gone(last)? {
                        return Err(JiraError::Refused {
                            status: 400,
                            message,
                        });
                    }
                    let (gone, _) = cursor.pop().unwrap_or_default();
                    tracing::warn!(key = %gone, %message, "the last key of a page left the project or was deleted: paging again from the key before it");
                    if cursor.is_empty() {
                        project = None;
                    }
                    continue;
                }
                Err(error) if is_page_failure(&error, self.last_read_failure) => {
                    failures += 1;
                    if failures > MAX_PAGE_FAILURES {
                        return Err(JiraError::Unavailable(format!(
                            "страница поиска не получена {failures} раз подряд, последний раз при размере {size}: {error}"
                        )));
                    }
                    size = (size / 2).max(1);
                    answered = 0;
                    tracing::warn!(%error, page_size = size, "a search page did not come: asking again from the same place with a smaller page");
                    continue;
                }
                Err(error) => return Err(error),
            };
            let answer = server_page(&reply)?;
            failures = 0;
            answered += 1;
            let asked = answer.max_results.unwrap_or(u64::from(size)).max(1);
            let count = answer.issues.len() as u64;
            // `total` counts what is left from this page on (`startAt=0`): an empty page with a
            // `total` above zero contradicts itself, a broken answer, never the end.
            if count == 0
                && let Some(total) = answer.total.filter(|t| *t > 0)
            {
                return Err(JiraError::Unavailable(format!(
                    "ответ поиска Jira противоречит себе: issues пуст, а total = {total}"
                )));
            }
            if let Some(remaining) = answer.total {
                let hint = sent + remaining;
                total_hint = Some(total_hint.map_or(hint, |t: u64| t.max(hint)));
            }
            let first_of_project = after.is_none();
            if first_of_project {
                covered = answer.total.map(|total| (sent, total));
            }
            let mut keep: Vec<Box<RawValue>> = Vec::with_capacity(answer.issues.len());
            let mut last_number = after.as_ref().map(|(_, n)| *n);
            let mut page_keys: Vec<(String, u64)> = Vec::new();
            let mut others = 0u64;
            for (raw, head) in answer.issues.into_iter().zip(answer.heads) {
                let (issue_project, number) = split_key(&head.key).ok_or_else(|| {
                    JiraError::Unavailable(format!(
                        "поиск Jira вернул ключ {:?}, это не ключ задачи",
                        head.key
                    ))
                })?;
                if done.iter().any(|d| d == issue_project) {
                    return Err(JiraError::Unavailable(format!(
                        "поиск Jira не продвигается: {} из проекта, уже пройденного до конца",
                        head.key
                    )));
                }
                let current = project.get_or_insert_with(|| issue_project.to_string());
                if issue_project != current.as_str() {
                    if first_of_project {
                        // Another project's issue on a project's first page: its own turn comes.
                        others += 1;
                        continue;
                    }
                    return Err(JiraError::Unavailable(format!(
                        "поиск Jira после ключа {} вернул {} из другого проекта",
                        after.as_ref().map(|(k, _)| k.as_str()).unwrap_or(""),
                        head.key
                    )));
                }
                if let Some(last) = last_number.filter(|last| number <= *last) {
                    return Err(JiraError::Unavailable(format!(
                        "поиск Jira не продвигается по ключу: {} после номера {last}",
                        head.key
                    )));
                }
                last_number = Some(number);
                page_keys.push((head.key.clone(), number));
                if sent_ids.insert(head.id) {
                    keep.push(raw);
                }
            }
            let new = keep.len() as u64;
            if new > 0 {
                on_page(SearchPage {
                    issues: keep,
                    total: total_hint.map(|t| t.max(sent + new)),
                })?;
                sent += new;
            }
            if covered.is_some_and(|(before, total)| sent - before >= total) {
                break;
            }
            if count == 0 && !first_of_project {
                // `key > "P-n"` names project P alone (Jira's `IssueIdClauseQueryFactory`): an
                // empty page after it ends P, not the search. The other projects of the query
                // come next.
                if let Some(finished) = project.take() {
                    done.push(finished);
                }
                cursor.clear();
                continue;
            }
            if count == 0 || (first_of_project && count < asked && others == 0) {
                break;
            }
            if count < asked || page_keys.is_empty() {
                // The project has no more issues after this page (a short page holds the rest).
                if let Some(finished) = project.take() {
                    done.push(finished);
                }
                cursor.clear();
            } else {
                cursor = page_keys;
            }
        }
        Ok(sent)
    }

    /// Whether `key` (the last key of a page, refused in `key > "<key>"` with a 400) no longer
    /// names an issue under that key: deleted (404) or moved (Jira finds the issue by its old
    /// key and answers with its new one). Read, not guessed from the refusal's words: Jira words
    /// JQL errors in the searching account's language.
    fn key_is_gone(&mut self, key: &str) -> Result<bool, JiraError> {
        let path = format!("/rest/api/2/issue/{}?fields=project", jql::encode(key));
        match self.read_json::<Value>(&path) {
            Ok(issue) => Ok(issue.get("key").and_then(Value::as_str) != Some(key)),
            Err(JiraError::Refused { status: 404, .. }) => Ok(true),
            Err(error) => Err(error),
        }
    }

    /// Cloud: `search/jql` with `nextPageToken` until `isLast` or no token. No total.
    fn search_cloud(
        &mut self,
        query: &str,
        fields: &str,
        ask: CloudAsk<'_>,
        page_size: u32,
        on_page: &mut dyn FnMut(SearchPage) -> Result<(), JiraError>,
    ) -> Result<u64, JiraError> {
        #[derive(Deserialize)]
        struct Answer {
            issues: Option<Vec<Box<RawValue>>>,
            #[serde(rename = "nextPageToken")]
            next_page_token: Option<String>,
            #[serde(rename = "isLast")]
            is_last: Option<bool>,
        }
        let mut sent = 0u64;
        let mut token: Option<String> = None;
        loop {
            let mut path = format!(
                "/rest/api/2/search/jql?jql={}&maxResults={page_size}&fields={}",
                jql::encode(query),
                jql::encode(fields)
            );
            if let Some(properties) = ask.properties {
                path.push_str(&format!("&properties={}", jql::encode(properties)));
            }
            // An `int64` array in the query without a `style`: OpenAPI's default, form with
            // `explode`, one `reconcileIssues=<id>` per id (Atlassian's description of
            // `search/jql`; GitLab's Jira client appends one per id).
            for id in ask.reconcile {
                path.push_str(&format!("&reconcileIssues={id}"));
            }
            if let Some(token) = &token {
                path.push_str(&format!("&nextPageToken={}", jql::encode(token)));
            }
            let reply = self.read(&path)?;
            let answer: Answer = parse(&reply)?;
            let issues = answer.issues.ok_or_else(|| no_issues(&reply))?;
            issue_heads(&issues)?;
            let count = issues.len() as u64;
            if count > 0 {
                on_page(SearchPage {
                    issues,
                    total: None,
                })?;
            }
            sent += count;
            match answer.next_page_token {
                Some(next) if answer.is_last != Some(true) && !next.is_empty() => {
                    if token.as_deref() == Some(next.as_str()) {
                        return Err(JiraError::Unavailable(
                            "the page token does not change".into(),
                        ));
                    }
                    token = Some(next);
                }
                _ => break,
            }
        }
        Ok(sent)
    }

    /// The issues of `query` newest first (`ORDER BY created DESC`), each handed to `visit` as a
    /// parsed value until it says it has what it needs (`true`). A look after a lost answer
    ///: its window starts at the write's time, so the issue looked for is on
    /// the first page, and a project's older issues are never read. Pages grow from a small
    /// first one. Server/DC pages by `startAt` (the window is small); Cloud by its page token,
    /// with `property` in each issue's `properties`. Returns whether `visit` stopped it.
    pub(crate) fn search_newest(
        &mut self,
        query: &str,
        fields: &str,
        property: Option<&str>,
        visit: &mut dyn FnMut(&mut Jira, Value) -> Result<bool, JiraError>,
    ) -> Result<bool, JiraError> {
        let ordered = format!("{query} ORDER BY created DESC");
        let cloud = self.deployment()? == Deployment::Cloud;
        let mut start_at = 0u64;
        let mut token: Option<String> = None;
        let mut size = 10u32;
        loop {
            let mut path = if cloud {
                format!(
                    "/rest/api/2/search/jql?jql={}&maxResults={size}&fields={}",
                    jql::encode(&ordered),
                    jql::encode(fields)
                )
            } else {
                format!(
                    "/rest/api/2/search?jql={}&startAt={start_at}&maxResults={size}&fields={}",
                    jql::encode(&ordered),
                    jql::encode(fields)
                )
            };
            if cloud {
                if let Some(property) = property {
                    path.push_str(&format!("&properties={}", jql::encode(property)));
                }
                if let Some(token) = &token {
                    path.push_str(&format!("&nextPageToken={}", jql::encode(token)));
                }
            }
            let reply = self.read(&path)?;
            let answer: Value = parse(&reply)?;
            let issues = answer
                .get("issues")
                .and_then(Value::as_array)
                .cloned()
                .ok_or_else(|| no_issues(&reply))?;
            let count = issues.len() as u64;
            for issue in issues {
                if visit(self, issue)? {
                    return Ok(true);
                }
            }
            start_at += count;
            let more = if cloud {
                match answer.get("nextPageToken").and_then(Value::as_str) {
                    Some(next)
                        if answer.get("isLast").and_then(Value::as_bool) != Some(true)
                            && !next.is_empty()
                            && token.as_deref() != Some(next) =>
                    {
                        token = Some(next.to_string());
                        true
                    }
                    _ => false,
                }
            } else {
                count > 0
                    && answer
                        .get("total")
                        .and_then(Value::as_u64)
                        .is_some_and(|total| start_at < total)
            };
            if !more {
                return Ok(false);
            }
            size = (size * 5).min(100);
        }
    }

    /// An entity property's value as read before in this command's delivery
    /// (a look that runs again reads no marker twice); `None` when not read yet.
    pub(crate) fn cached_property(&self, path: &str) -> Option<Option<Value>> {
        self.properties.get(path).cloned()
    }

    /// Keeps an entity property's value read (`None`: not set) for the rest of the delivery.
    pub(crate) fn cache_property(&mut self, path: &str, value: Option<Value>) {
        self.properties.insert(path.to_string(), value);
    }

    /// A read whose question is a JSON body (`POST`), parsed.
    pub(crate) fn read_posted<T: serde::de::DeserializeOwned>(
        &mut self,
        path: &str,
        body: &Value,
    ) -> Result<T, JiraError> {
        let bytes = serde_json::to_vec(body).map_err(|e| JiraError::Unavailable(e.to_string()))?;
        let reply = self.read_by("POST", path, Some(&bytes), self.max_retries, true)?;
        parse(&reply)
    }

    /// The comments of an issue (`path`: `/rest/api/2/issue/{key}/comment`) created at or after
    /// `since_ms` on Jira's clock, newest first, a page at a time (at most
    /// [`COMMENT_PAGE`]) handed to `visit` until it says it found what it looks for (`true`) or
    /// the window is passed: the first comment older than `since_ms` ends the look. Newest first is `orderBy=-created`, documented on both deployments (Cloud: "Accepts
    /// *created* to sort comments by their created date", `-created` in its enum; Data Center's
    /// `getComments`: "Results can be ordered by the "created" field", `orderBy` "ordering of the
    /// results", REST reference 8.x and 9.x). A first page that comes oldest first (a server that
    /// ignored the parameter) is never taken for newest first: then every page is read, and the
    /// list is looked at from its end. A comment whose `created` cannot be read is in the window.
    pub(crate) fn comments_newest(
        &mut self,
        path: &str,
        since_ms: i64,
        visit: &mut CommentVisit<'_>,
    ) -> Result<bool, JiraError> {
        let created_ms = |comment: &Value| {
            comment["created"]
                .as_str()
                .and_then(jira_time)
                .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
        };
        // The comments of a page within the window, and whether the window ends on it.
        let window = |comments: Vec<Value>| -> (Vec<Value>, bool) {
            let mut inside = Vec::new();
            for comment in comments {
                if created_ms(&comment).is_some_and(|at| at < since_ms) {
                    return (inside, true);
                }
                inside.push(comment);
            }
            (inside, false)
        };
        let mut start_at = 0u64;
        // `Some`: the server gave the oldest first; every comment, in its order.
        let mut oldest_first: Option<Vec<Value>> = None;
        loop {
            let page: Value = self.read_json(&format!(
                "{path}?startAt={start_at}&maxResults={COMMENT_PAGE}&orderBy=-created"
            ))?;
            let comments = page["comments"].as_array().cloned().unwrap_or_default();
            let count = comments.len() as u64;
            if start_at == 0 && oldest_first.is_none() && ascending(&comments, &created_ms) {
                tracing::info!(%path, "Jira gave the comments oldest first (orderBy not applied): all are read, then looked at from the last");
                oldest_first = Some(Vec::new());
            }
            match &mut oldest_first {
                Some(all) => all.extend(comments),
                None => {
                    let (inside, passed) = window(comments);
                    if !inside.is_empty() && visit(self, inside)? {
                        return Ok(true);
                    }
                    if passed {
                        return Ok(false);
                    }
                }
            }
            start_at += count;
            let last = match page["total"].as_u64() {
                Some(total) => start_at >= total,
                None => count < COMMENT_PAGE,
            };
            if count == 0 || last {
                break;
            }
        }
        let Some(mut all) = oldest_first else {
            return Ok(false);
        };
        all.reverse();
        let (inside, _) = window(all);
        let mut rest = inside.into_iter().peekable();
        while rest.peek().is_some() {
            let chunk: Vec<Value> = rest.by_ref().take(COMMENT_PAGE as usize).collect();
            if visit(self, chunk)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The entity property `key` of each comment of `ids`, as Cloud's `POST
    /// /rest/api/2/comment/list?expand=properties` gives them ("Get comments by IDs": "A maximum of
    /// 1000 IDs can be specified"; `expand=properties` "Returns the comment's properties"): one
    /// call per [`MAX_COMMENT_IDS`] ids not read yet in this delivery (the values found are kept,
    /// as [`Jira::cache_property`] keeps them). A comment the answer leaves out (deleted, or not
    /// visible to the agent) has none. The operation takes no `startAt`: an answer that says it is
    /// not the last page is asked again for the ids it left out, while it gives some.
    pub(crate) fn comment_markers(
        &mut self,
        ids: &[String],
        key: &str,
    ) -> Result<std::collections::HashMap<String, Option<Value>>, JiraError> {
        let path_of =
            |id: &str| format!("/rest/api/2/comment/{}/properties/{key}", jql::encode(id));
        let mut markers = std::collections::HashMap::new();
        let mut ask = Vec::new();
        for id in ids {
            match self.cached_property(&path_of(id)) {
                Some(known) => {
                    markers.insert(id.clone(), known);
                }
                None => match id.parse::<u64>() {
                    Ok(number) => ask.push(number),
                    Err(_) => {
                        markers.insert(id.clone(), None);
                    }
                },
            }
        }
        for chunk in ask.chunks(MAX_COMMENT_IDS) {
            let mut left: Vec<u64> = chunk.to_vec();
            while !left.is_empty() {
                let page: Value = self.read_posted(
                    "/rest/api/2/comment/list?expand=properties",
                    &serde_json::json!({ "ids": left }),
                )?;
                let mut came = 0;
                for comment in page["values"].as_array().into_iter().flatten() {
                    let id = match &comment["id"] {
                        Value::String(id) => id.clone(),
                        Value::Number(id) => id.to_string(),
                        _ => continue,
                    };
                    let value = comment["properties"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|p| p["key"].as_str() == Some(key))
                        .map(|p| p.get("value").cloned().unwrap_or(Value::Null));
                    if value.is_some() {
                        self.cache_property(&path_of(&id), value.clone());
                    }
                    if let Ok(number) = id.parse::<u64>()
                        && left.contains(&number)
                    {
                        left.retain(|known| *known != number);
                        came += 1;
                    }
                    markers.insert(id, value);
                }
                if came == 0 || page["isLast"].as_bool() != Some(false) {
                    break;
                }
            }
        }
        for id in ids {
            markers.entry(id.clone()).or_insert(None);
        }
        Ok(markers)
    }

    /// A whole small search as parsed values (duplicate checks: a handful of issues). On Cloud
    /// the entity property `property` comes with each issue (`properties`, up to 5 keys, in
    /// `search/jql`); Data Center's search never returns properties (JRASERVER-62898), so there
    /// the caller reads them one by one.
    pub(crate) fn search_values(
        &mut self,
        query: &str,
        fields: &str,
        property: Option<&str>,
    ) -> Result<Vec<Value>, JiraError> {
        let mut found = Vec::new();
        let properties = match self.deployment()? {
            Deployment::Cloud => property,
            Deployment::Server => None,
        };
        // No cap on the count: a check that stopped at 10,000 would fail the command on a
        // project with that many of the account's issues in the window; the
        // pages are paged by key (Data Center) or token (Cloud), never past a result window.
        self.search_with(query, fields, properties, &[], 100, &mut |page| {
            for raw in page.issues {
                found.push(serde_json::from_str(raw.get()).unwrap_or(Value::Null));
            }
            Ok(())
        })?;
        Ok(found)
    }
}

/// What a Cloud search asks beside the query: issue properties, and issues to reconcile.
struct CloudAsk<'a> {
    properties: Option<&'a str>,
    reconcile: &'a [u64],
}

/// The user of a `myself` answer.
fn me_of(user: &Value) -> Me {
    Me {
        name: user.get("name").and_then(Value::as_str).map(String::from),
        key: user.get("key").and_then(Value::as_str).map(String::from),
        account_id: user
            .get("accountId")
            .and_then(Value::as_str)
            .map(String::from),
    }
}

/// A header value as `decodeURIComponent` reads it: each `%XX` a byte, the bytes UTF-8 (a
/// malformed escape is kept as it is; `+` stays `+`, as Jira encodes a space `%20`).
pub(crate) fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&high), Some(&low)) if hex(high).is_some() && hex(low).is_some() => {
                out.push((hex(high).unwrap_or(0) * 16 + hex(low).unwrap_or(0)) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Jira's time (`2026-03-05T10:15:30.000+0300`, or with a colon in the offset, or RFC 3339).
pub(crate) fn jira_time(text: &str) -> Option<time::OffsetDateTime> {
    use time::macros::format_description;
    let formats = [
        format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond][offset_hour sign:mandatory][offset_minute]"
        ),
        format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond][offset_hour sign:mandatory]:[offset_minute]"
        ),
        format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second][offset_hour sign:mandatory][offset_minute]"
        ),
    ];
    formats
        .iter()
        .find_map(|format| time::OffsetDateTime::parse(text, format).ok())
        .or_else(|| crate::domain::time::parse_utc(text))
}

/// Whether a page of comments came oldest first: its first comment is older than its last (by
/// `created`, else by id, which Jira hands out in order).
fn ascending(comments: &[Value], created_ms: &dyn Fn(&Value) -> Option<i64>) -> bool {
    let (Some(first), Some(last)) = (comments.first(), comments.last()) else {
        return false;
    };
    let id = |c: &Value| match &c["id"] {
        Value::String(id) => id.parse::<u64>().ok(),
        other => other.as_u64(),
    };
    match (created_ms(first), created_ms(last)) {
        (Some(a), Some(b)) if a != b => a < b,
        _ => matches!((id(first), id(last)), (Some(a), Some(b)) if a < b),
    }
}

enum CallError {
    Net(NetError),
    Stopped,
    GiveBack(String),
}

/// What a rate-limited answer asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RateLimit {
    pub wait: Duration,
    /// Which header gave the wait.
    pub source: &'static str,
    /// `RateLimit-Reason` (or Cloud's beta `X-Beta-RateLimit-Reason`).
    pub reason: Option<String>,
}

impl RateLimit {
    fn describe(&self) -> String {
        let mut text = format!("ждём {} с ({})", self.wait.as_secs(), self.source);
        if let Some(reason) = &self.reason {
            text.push_str(&format!(", причина: {reason}"));
        }
        text
    }
}

/// The wait a 429/503 asks for: `Retry-After` (seconds or an HTTP date); else Cloud's
/// `X-RateLimit-Reset` (ISO 8601, `yyyy-MM-ddTHH:mmZ`), the beta quota's
/// `X-Beta-RateLimit-Reset` or `Beta-RateLimit: "…";r=0;t=<seconds>` (the longest of them).
/// Sources: developer.atlassian.com/cloud/jira/platform/rate-limiting/ ("429 responses may be
/// accompanied by Retry-After and X-RateLimit-Reset headers … in the format
/// yyyy-MM-ddTHH:mmZ"; `RateLimit-Reason`), community.developer.atlassian.com
/// "2026 point-based rate limits" (the beta headers as observed).
pub(crate) fn rate_limit_wait(reply: &Reply, now: time::OffsetDateTime) -> Option<RateLimit> {
    let reason = reply
        .header("ratelimit-reason")
        .or_else(|| reply.header("x-beta-ratelimit-reason"))
        .map(str::to_string);
    if let Some(wait) = reply
        .retry_after
        .as_deref()
        .and_then(|t| parse_retry_after(t, SystemTime::from(now)))
    {
        return Some(RateLimit {
            wait,
            source: "Retry-After",
            reason,
        });
    }
    let until = |name: &str| {
        let at = parse_reset(reply.header(name)?)?;
        (at - now).try_into().ok().or(Some(Duration::ZERO))
    };
    let mut best: Option<(Duration, &'static str)> = None;
    for (wait, source) in [
        (until("x-ratelimit-reset"), "X-RateLimit-Reset"),
        (until("x-beta-ratelimit-reset"), "X-Beta-RateLimit-Reset"),
        (
            reply.header("beta-ratelimit").and_then(beta_reset),
            "Beta-RateLimit",
        ),
    ] {
        if let Some(wait) = wait
            && best.is_none_or(|(b, _)| wait > b)
        {
            best = Some((wait, source));
        }
    }
    best.map(|(wait, source)| RateLimit {
        wait,
        source,
        reason,
    })
}

/// `X-RateLimit-Reset`: ISO 8601 to the minute (`2026-03-26T16:00Z`) or with seconds.
fn parse_reset(text: &str) -> Option<time::OffsetDateTime> {
    use time::format_description::well_known::Rfc3339;
    let text = text.trim();
    if let Ok(at) = time::OffsetDateTime::parse(text, &Rfc3339) {
        return Some(at);
    }
    let minutes = text.strip_suffix('Z')?;
    time::OffsetDateTime::parse(&format!("{minutes}:00Z"), &Rfc3339).ok()
}

/// `Beta-RateLimit: "tenant-app-quota";r=0;t=2788`: with nothing remaining (`r=0`), `t` seconds
/// until the quota resets (the IETF RateLimit header fields draft's `t`).
fn beta_reset(text: &str) -> Option<Duration> {
    let mut remaining = None;
    let mut reset = None;
    for part in text.split(';').map(str::trim) {
        if let Some(r) = part.strip_prefix("r=") {
            remaining = r.trim().parse::<u64>().ok();
        } else if let Some(t) = part.strip_prefix("t=") {
            reset = t.trim().parse::<u64>().ok();
        }
    }
    (remaining == Some(0)).then_some(Duration::from_secs(reset?))
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

/// The start of a body, as text for a message.
pub(crate) fn body_excerpt(body: &[u8]) -> String {
    short_text(&String::from_utf8_lossy(&body[..body.len().min(4096)]))
}

/// A `Content-Type` that is there and is not JSON is refused with the start of the body.
fn check_json(reply: &Reply) -> Result<(), JiraError> {
    match reply.content_type.as_deref() {
        Some(kind) if !kind.to_ascii_lowercase().contains("json") => {
            Err(JiraError::Unavailable(format!(
                "HTTP {}: ответ Jira — не JSON (Content-Type: {kind}): {}",
                reply.status,
                body_excerpt(&reply.body)
            )))
        }
        _ => Ok(()),
    }
}

/// What the agent relies on in an issue of a search result.
#[derive(Debug)]
pub(crate) struct IssueHead {
    pub id: u64,
    pub key: String,
}

/// Checks one raw issue of a search page: an object with a numeric `id` (a string of digits or
/// a number), a non-empty `key` and a `fields` object.
pub(crate) fn issue_head(raw: &str) -> Result<IssueHead, String> {
    #[derive(Deserialize)]
    struct Head<'a> {
        id: Option<Value>,
        #[serde(borrow)]
        key: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow)]
        fields: Option<&'a RawValue>,
    }
    let head: Head<'_> =
        serde_json::from_str(raw).map_err(|e| format!("задача — не объект JSON ({e})"))?;
    let id = match &head.id {
        Some(Value::String(s)) => s.parse().ok(),
        Some(Value::Number(n)) => n.as_u64(),
        _ => None,
    }
    .ok_or_else(|| "у задачи нет числового id".to_string())?;
    let key = head
        .key
        .filter(|k| !k.is_empty())
        .ok_or_else(|| format!("у задачи {id} нет key"))?
        .into_owned();
    if !head.fields.is_some_and(|f| f.get().starts_with('{')) {
        return Err(format!("у задачи {key} нет объекта fields"));
    }
    Ok(IssueHead { id, key })
}

/// A Server/DC search answer, checked: `issues` an array of issues (each with `id`, `key`,
/// `fields`), `startAt`/`maxResults`/`total` numbers when present.
struct ServerPage {
    max_results: Option<u64>,
    total: Option<u64>,
    issues: Vec<Box<RawValue>>,
    heads: Vec<IssueHead>,
}

fn server_page(reply: &Reply) -> Result<ServerPage, JiraError> {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(rename = "startAt")]
        _start_at: Option<u64>,
        #[serde(rename = "maxResults")]
        max_results: Option<u64>,
        total: Option<u64>,
        issues: Option<Vec<Box<RawValue>>>,
    }
    let answer: Answer = parse(reply)?;
    let issues = answer.issues.ok_or_else(|| no_issues(reply))?;
    let heads = issue_heads(&issues)?;
    Ok(ServerPage {
        max_results: answer.max_results,
        total: answer.total,
        issues,
        heads,
    })
}

fn no_issues(reply: &Reply) -> JiraError {
    JiraError::Unavailable(format!(
        "HTTP {}: в ответе поиска Jira нет массива issues: {}",
        reply.status,
        body_excerpt(&reply.body)
    ))
}

/// The checked heads of a page's issues, or an error naming the first issue that is not one.
fn issue_heads(issues: &[Box<RawValue>]) -> Result<Vec<IssueHead>, JiraError> {
    issues
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            issue_head(raw.get()).map_err(|e| {
                JiraError::Unavailable(format!("ответ поиска Jira, задача {}: {e}", i + 1))
            })
        })
        .collect()
}

/// `P-12` → `("P", 12)`.
fn split_key(key: &str) -> Option<(&str, u64)> {
    let (project, number) = key.rsplit_once('-')?;
    if project.is_empty() {
        return None;
    }
    Some((project, number.parse().ok()?))
}

/// A page that did not come for want of time or room: no answer, a 5xx, or 413.
fn is_page_failure(error: &JiraError, failure: Option<ReadFailure>) -> bool {
    match error {
        JiraError::Refused { status: 413, .. } => true,
        // A search sent and never answered (after the read's own retries) is a page too slow to
        // make, not yet a Jira that cannot be reached.
        JiraError::Ambiguous(_) => matches!(
            failure,
            Some(ReadFailure::NoAnswer | ReadFailure::ServerError(_))
        ),
        _ => false,
    }
}

/// Jira's words for an error answer: `errors` as `field: message`, then `errorMessages`, joined
/// by `; `. A body that is not Jira's JSON (an HTML error page) gives the status and a short
/// text.
pub(crate) fn error_text(reply: &Reply) -> String {
    error_text_of(reply.status, &reply.body)
}

pub(crate) fn error_text_of(status: u16, body: &[u8]) -> String {
    let mut parts = Vec::new();
    let json = serde_json::from_slice::<Value>(body).ok();
    if let Some(Value::Object(object)) = &json {
        if let Some(Value::Object(errors)) = object.get("errors") {
            for (field, message) in errors {
                let message = message
                    .as_str()
                    .map(String::from)
                    .unwrap_or_else(|| message.to_string());
                parts.push(format!("{field}: {message}"));
            }
        }
        if let Some(Value::Array(messages)) = object.get("errorMessages") {
            parts.extend(messages.iter().filter_map(Value::as_str).map(String::from));
        }
        if parts.is_empty()
            && let Some(message) = object.get("message").and_then(Value::as_str)
        {
            parts.push(message.to_string());
        }
    }
    if !parts.is_empty() {
        return parts.join("; ");
    }
    if json.is_some() {
        return format!("HTTP {status}");
    }
    let text = short_text(&String::from_utf8_lossy(body));
    if text.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {text}")
    }
}

/// Text without HTML tags, whitespace collapsed, at most 200 characters.
fn short_text(body: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    let mut skip_until: Option<&str> = None;
    let lower = body.to_lowercase();
    let mut i = 0;
    let chars: Vec<(usize, char)> = body.char_indices().collect();
    while i < chars.len() {
        let (at, c) = chars[i];
        if let Some(end) = skip_until {
            if lower.get(at..).is_some_and(|rest| rest.starts_with(end)) {
                skip_until = None;
            }
            i += 1;
            continue;
        }
        if c == '<' {
            if lower.get(at..).is_some_and(|r| r.starts_with("<style")) {
                skip_until = Some("</style");
            } else if lower.get(at..).is_some_and(|r| r.starts_with("<script")) {
                skip_until = Some("</script");
            }
            in_tag = true;
        } else if c == '>' {
            in_tag = false;
            out.push(' ');
        } else if !in_tag {
            out.push(c);
        }
        i += 1;
    }
    let collapsed: Vec<&str> = out.split_whitespace().collect();
    let mut text = collapsed.join(" ");
    if text.chars().count() > 200 {
        text = text.chars().take(200).collect::<String>() + "…";
    }
    text
}

/// `Retry-After`: delay seconds or an HTTP date.
pub(crate) fn parse_retry_after(text: &str, now: SystemTime) -> Option<Duration> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    if let Ok(seconds) = text.parse::<f64>()
        && seconds.is_finite()
        && seconds >= 0.0
    {
        return Some(Duration::from_secs_f64(seconds.min(86_400.0)));
    }
    let at = httpdate::parse_http_date(text).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Exponential backoff with jitter: 1 s, 2 s, 4 s… capped, times a random 0.5–1.0.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let base = Duration::from_secs(1u64 << attempt.min(10)).min(MAX_BACKOFF);
    let mut byte = [0u8; 1];
    let jitter = if getrandom::fill(&mut byte).is_ok() {
        0.5 + f64::from(byte[0]) / 510.0
    } else {
        0.75
    };
    base.mul_f64(jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `X-AUSERNAME` as Jira's `AccessLogFilter` writes it (`JiraUrlCodec.encode(name, true)`).
    #[test]
    fn user_names_in_headers_are_percent_decoded() {
        assert_eq!(percent_decoded("svc.jira%40corp.ru"), "svc.jira@corp.ru");
        assert_eq!(percent_decoded("CORP%5Csvc"), "CORP\\svc");
        assert_eq!(
            percent_decoded("%D1%81%D0%B5%D1%80%D0%B2%D0%B8%D1%81%20jira"),
            "сервис jira"
        );
        assert_eq!(percent_decoded("a+b%2"), "a+b%2");
    }

    #[test]
    fn the_same_user_by_the_same_field() {
        use serde_json::json;
        let dc = Me {
            name: Some("svc.jira@corp.ru".into()),
            key: Some("JIRAUSER10100".into()),
            account_id: None,
        };
        let author = json!({"name": "SVC.Jira@corp.ru", "key": "JIRAUSER10100"});
        assert_eq!(dc.is(&author, false), Some(true));
        assert_eq!(
            dc.is(
                &json!({"name": "svc.jira@corp.ru", "key": "JIRAUSER2"}),
                false
            ),
            Some(false)
        );
        let by_name = Me {
            key: None,
            ..dc.clone()
        };
        assert_eq!(
            by_name.is(&json!({"name": "SVC.JIRA@CORP.RU"}), false),
            Some(true)
        );
        let cloud = Me {
            name: None,
            key: None,
            account_id: Some("5b10".into()),
        };
        assert_eq!(cloud.is(&json!({"accountId": "5b10"}), true), Some(true));
        assert_eq!(cloud.is(&json!({"name": "agent"}), true), None);
    }

    #[test]
    fn retry_after_in_seconds_or_a_date() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("1.5", now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
    }

    #[test]
    fn backoff_grows_with_jitter_and_a_cap() {
        for attempt in 0..20 {
            let d = backoff(attempt);
            let base = Duration::from_secs(1u64 << attempt.min(10)).min(MAX_BACKOFF);
            assert!(d >= base / 2 && d <= base, "{attempt}: {d:?}");
        }
    }

    #[test]
    fn errors_in_jira_words() {
        assert_eq!(
            error_text_of(
                400,
                br#"{"errorMessages":["Issue does not exist"],"errors":{"summary":"Field required"}}"#
            ),
            "summary: Field required; Issue does not exist"
        );
        assert_eq!(
            error_text_of(404, br#"{"errorMessages":[],"errors":{}}"#),
            "HTTP 404"
        );
        assert_eq!(
            error_text_of(
                429,
                b"<html><head><style>p{}</style><title>Oops</title></head><body><h1>Oops - an error has occurred</h1>\n\n</body></html>"
            ),
            "HTTP 429: Oops Oops - an error has occurred"
        );
        assert_eq!(error_text_of(502, b""), "HTTP 502");
        let long = "x".repeat(500);
        assert!(error_text_of(500, long.as_bytes()).chars().count() < 220);
        assert_eq!(
            error_text_of(401, br#"{"message":"Unauthorized"}"#),
            "Unauthorized"
        );
    }

    #[test]
    fn issues_of_a_page_are_checked() {
        let head = |text: &str| issue_head(text);
        let ok = head(r#"{"id": "10014", "key": "A-1", "fields": {}}"#).unwrap();
        assert_eq!((ok.id, ok.key.as_str()), (10014, "A-1"));
        assert_eq!(
            head(r#"{"id": 7, "key": "A-2", "fields": {"a": 1}}"#)
                .unwrap()
                .id,
            7
        );
        assert!(
            head(r#"{"key": "A-1", "fields": {}}"#)
                .unwrap_err()
                .contains("id")
        );
        assert!(head(r#"{"id": "x1", "key": "A-1", "fields": {}}"#).is_err());
        assert!(
            head(r#"{"id": "1", "fields": {}}"#)
                .unwrap_err()
                .contains("key")
        );
        assert!(
            head(r#"{"id": "1", "key": "A-1"}"#)
                .unwrap_err()
                .contains("fields")
        );
        assert!(head(r#"{"id": "1", "key": "A-1", "fields": []}"#).is_err());
        assert!(head("[1]").is_err());
        assert_eq!(split_key("AURORA-12"), Some(("AURORA", 12)));
        assert_eq!(split_key("A-B-3"), Some(("A-B", 3)));
        assert_eq!(split_key("-3"), None);
        assert_eq!(split_key("A-x"), None);
    }

    #[test]
    fn answers_that_are_not_json_are_errors() {
        let reply = |content_type: Option<&str>, body: &[u8]| Reply {
            status: 200,
            retry_after: None,
            content_type: content_type.map(String::from),
            headers: Vec::new(),
            body: body.to_vec(),
        };
        let html = reply(
            Some("text/html;charset=UTF-8"),
            b"<html><title>Log in</title></html>",
        );
        let error = parse::<Value>(&html).unwrap_err().to_string();
        assert!(
            error.contains("не JSON") && error.contains("Log in"),
            "{error}"
        );
        let cut = reply(Some("application/json"), br#"{"issues": [{"id": "1""#);
        assert!(parse::<Value>(&cut).is_err());
        let no_issues = reply(Some("application/json"), br#"{"startAt":0,"total":0}"#);
        let error = server_page(&no_issues).err().unwrap().to_string();
        assert!(server_page(&reply(None, br#"{"issues":[{"id":"1"}]}"#)).is_err());
        assert!(error.contains("issues"), "{error}");
        let typed = reply(None, br#"{"total":"many","issues":[]}"#);
        assert!(server_page(&typed).is_err(), "paging fields are typed");
        assert!(server_page(&reply(None, br#"{"issues":[]}"#)).is_ok());
    }

    #[test]
    fn query_paths_are_not_logged() {
        assert_eq!(
            path_only("/rest/api/2/search?jql=secret"),
            "/rest/api/2/search"
        );
    }
}
