//! The agent's Jira client: one paced call at a time (`pacing.min_interval_ms` between two calls,
//! the hub's `pause_seconds` before the next one), 429/503 honoured with `Retry-After`, reads
//! retried, writes never repeated blindly, Jira's error bodies turned into words, and the two
//! searches (Server/DC keyset paging by id, Cloud's `search/jql` with page tokens).
//!
//! Issue bodies stay raw JSON (`RawValue`) and are handed on page by page: nothing here holds a
//! whole result set.

use super::config::{DeploymentSetting, Secret};
use super::jql;
use super::net::{Client, NetError, Reply, sleep_unless};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// The longest wait a `Retry-After` may impose.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(900);
/// The longest backoff between two tries when Jira says nothing.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

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
    /// The agent is stopping: the call was not made.
    Stopped,
}

impl std::fmt::Display for JiraError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JiraError::Refused { status, message } => write!(f, "{message} (HTTP {status})"),
            JiraError::Ambiguous(e) => write!(f, "ответ Jira потерян: {e}"),
            JiraError::Unavailable(e) => write!(f, "Jira недоступна: {e}"),
            JiraError::Stopped => f.write_str("агент останавливается"),
        }
    }
}

/// The agent's own Jira user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Me {
    pub name: Option<String>,
    pub account_id: Option<String>,
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
    last_call: Option<Instant>,
    not_before: Option<Instant>,
    max_retries: u32,
    counters: Rc<Cell<Counters>>,
    stop: Arc<AtomicBool>,
    /// Jira's clock minus the agent's, in milliseconds, from the last `serverInfo.serverTime`
    /// (issue 19: the windows of the checks before a repeated write are Jira's times).
    skew_ms: Option<i64>,
    /// `serverInfo.versionNumbers`' first two, when Jira said.
    version: Option<(u64, u64)>,
}

impl Jira {
    pub(crate) fn new(
        client: Client,
        base: &str,
        authorization: Secret,
        setting: DeploymentSetting,
        max_retries: u32,
        stop: Arc<AtomicBool>,
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
            stop,
            skew_ms: None,
            version: None,
        }
    }

    /// The pause between two calls (`pacing.min_interval_ms`).
    pub(crate) fn set_min_interval(&mut self, interval: Duration) {
        self.min_interval = interval;
    }

    /// The hub's `pause_seconds`: no call before that long from now.
    pub(crate) fn pause(&mut self, pause: Duration) {
        if !pause.is_zero() {
            let until = Instant::now() + pause;
            self.not_before = Some(self.not_before.map_or(until, |t| t.max(until)));
        }
    }

    /// The counters since the last call of this, which resets them.
    pub(crate) fn take_counters(&mut self) -> Counters {
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
        self.stop.load(Ordering::SeqCst)
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
        let asked = SystemTime::now();
        let reply = self.read_with("/rest/api/2/serverInfo", retries)?;
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

    /// The agent's own user (`GET myself`), asked once.
    pub(crate) fn me(&mut self) -> Result<Me, JiraError> {
        if let Some(me) = &self.me {
            return Ok(me.clone());
        }
        let user: Value = self.read_json("/rest/api/2/myself")?;
        let me = Me {
            name: user.get("name").and_then(Value::as_str).map(String::from),
            account_id: user
                .get("accountId")
                .and_then(Value::as_str)
                .map(String::from),
        };
        self.me = Some(me.clone());
        Ok(me)
    }

    /// Waits for the pacer, then makes one call.
    fn once(&mut self, method: &str, path: &str, body: Option<&[u8]>) -> Result<Reply, CallError> {
        let now = Instant::now();
        let mut ready = self.last_call.map_or(now, |t| t + self.min_interval);
        if let Some(not_before) = self.not_before {
            ready = ready.max(not_before);
        }
        if ready > now {
            let stop = self.stop.clone();
            if !sleep_unless(ready - now, &|| stop.load(Ordering::SeqCst)) {
                return Err(CallError::Stopped);
            }
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
        self.last_call = Some(Instant::now());
        tracing::debug!(method, path = %path_only(path), status = ?result.as_ref().map(|r| r.status).ok(), "jira call");
        result.map_err(CallError::Net)
    }

    /// Waits as Jira asked (or a backoff); false when stopping.
    fn wait_after(&mut self, reply_retry_after: Option<&str>, attempt: u32) -> bool {
        let wait = reply_retry_after
            .and_then(|text| parse_retry_after(text, SystemTime::now()))
            .map(|d| d.min(MAX_RETRY_AFTER))
            .unwrap_or_else(|| backoff(attempt));
        tracing::info!(
            wait_ms = wait.as_millis() as u64,
            attempt,
            "Jira asks to wait"
        );
        let stop = self.stop.clone();
        sleep_unless(wait, &|| stop.load(Ordering::SeqCst))
    }

    /// A read: retried on lost connections, 429, 5xx, up to `max_retries`.
    pub(crate) fn read(&mut self, path: &str) -> Result<Reply, JiraError> {
        self.read_with(path, self.max_retries)
    }

    fn read_with(&mut self, path: &str, max_retries: u32) -> Result<Reply, JiraError> {
        let mut attempt = 0;
        loop {
            let (failure, retry_after) = match self.once("GET", path, None) {
                Err(CallError::Stopped) => return Err(JiraError::Stopped),
                Err(CallError::Net(e)) => (e.to_string(), None),
                Ok(reply) if (200..300).contains(&reply.status) => return Ok(reply),
                Ok(reply) if reply.status == 429 || reply.status == 503 => {
                    self.count(0, 1);
                    (error_text(&reply), reply.retry_after)
                }
                Ok(reply) if reply.status >= 500 => (error_text(&reply), None),
                Ok(reply) => {
                    return Err(JiraError::Refused {
                        status: reply.status,
                        message: error_text(&reply),
                    });
                }
            };
            if attempt >= max_retries {
                return Err(JiraError::Unavailable(failure));
            }
            if !self.wait_after(retry_after.as_deref(), attempt) {
                return Err(JiraError::Stopped);
            }
            attempt += 1;
        }
    }

    pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
        &mut self,
        path: &str,
    ) -> Result<T, JiraError> {
        let reply = self.read(path)?;
        parse(&reply)
    }

    /// A write: repeated only when it certainly was not applied (no connection, 429). A timeout,
    /// a dropped connection or a 5xx (503 included, after its `Retry-After`) is `Ambiguous`: the
    /// caller checks Jira before it writes again.
    pub(crate) fn write(
        &mut self,
        method: &str,
        path: &str,
        body: &Value,
    ) -> Result<Reply, JiraError> {
        let bytes = serde_json::to_vec(body).map_err(|e| JiraError::Unavailable(e.to_string()))?;
        let mut attempt = 0;
        loop {
            let (failure, retry_after) = match self.once(method, path, Some(&bytes)) {
                Err(CallError::Stopped) => return Err(JiraError::Stopped),
                Err(CallError::Net(NetError::Ambiguous(e))) => {
                    return Err(JiraError::Ambiguous(e));
                }
                Err(CallError::Net(e)) => (e.to_string(), None),
                Ok(reply) if (200..300).contains(&reply.status) => return Ok(reply),
                Ok(reply) if reply.status == 429 => {
                    self.count(0, 1);
                    (error_text(&reply), reply.retry_after)
                }
                Ok(reply) if reply.status == 503 => {
                    self.count(0, 1);
                    if !self.wait_after(reply.retry_after.as_deref(), attempt) {
                        return Err(JiraError::Stopped);
                    }
                    return Err(JiraError::Ambiguous(error_text(&reply)));
                }
                Ok(reply) if reply.status >= 500 => {
                    if !self.wait_after(None, attempt) {
                        return Err(JiraError::Stopped);
                    }
                    return Err(JiraError::Ambiguous(error_text(&reply)));
                }
                Ok(reply) => {
                    return Err(JiraError::Refused {
                        status: reply.status,
                        message: error_text(&reply),
                    });
                }
            };
            if attempt >= self.max_retries {
                return Err(JiraError::Unavailable(failure));
            }
            if !self.wait_after(retry_after.as_deref(), attempt) {
                return Err(JiraError::Stopped);
            }
            attempt += 1;
        }
    }

    /// Runs a search and hands each page to `on_page` as Jira returns it. Returns how many
    /// issues came back.
    pub(crate) fn search(
        &mut self,
        query: &str,
        fields: &str,
        page_size: u32,
        on_page: &mut dyn FnMut(SearchPage) -> Result<(), JiraError>,
    ) -> Result<u64, JiraError> {
        match self.deployment()? {
            Deployment::Server => self.search_server(query, fields, page_size, on_page),
            Deployment::Cloud => self.search_cloud(query, fields, page_size, on_page),
        }
    }

    /// Server/DC: keyset paging by id from the start (`(jql) AND id > last ORDER BY id ASC`,
    /// always `startAt=0`), so results past the 10,000-row window come back whole.
    fn search_server(
        &mut self,
        query: &str,
        fields: &str,
        page_size: u32,
        on_page: &mut dyn FnMut(SearchPage) -> Result<(), JiraError>,
    ) -> Result<u64, JiraError> {
        #[derive(Deserialize)]
        struct Answer {
            #[serde(rename = "maxResults")]
            max_results: Option<u64>,
            total: Option<u64>,
            #[serde(default)]
            issues: Vec<Box<RawValue>>,
        }
        let mut sent = 0u64;
        let mut last_id: Option<u64> = None;
        loop {
            let page_jql = jql::keyset(query, last_id);
            let path = format!(
                "/rest/api/2/search?jql={}&startAt=0&maxResults={page_size}&fields={}",
                jql::encode(&page_jql),
                jql::encode(fields)
            );
            let answer: Answer = self.read_json(&path)?;
            let count = answer.issues.len() as u64;
            if count == 0 {
                break;
            }
            let next_id = issue_id(answer.issues.last().map(|r| r.get()).unwrap_or("{}"))
                .ok_or_else(|| {
                    JiraError::Unavailable("a search result has no numeric id".into())
                })?;
            if last_id.is_some_and(|last| next_id <= last) {
                return Err(JiraError::Unavailable(
                    "the search does not progress by id".into(),
                ));
            }
            last_id = Some(next_id);
            let asked = answer.max_results.unwrap_or(u64::from(page_size)).max(1);
            let remaining = answer.total;
            on_page(SearchPage {
                issues: answer.issues,
                total: remaining.map(|t| sent + t),
            })?;
            sent += count;
            if count < asked || remaining.is_some_and(|t| count >= t) {
                break;
            }
        }
        Ok(sent)
    }

    /// Cloud: `search/jql` with `nextPageToken` until `isLast` or no token. No total.
    fn search_cloud(
        &mut self,
        query: &str,
        fields: &str,
        page_size: u32,
        on_page: &mut dyn FnMut(SearchPage) -> Result<(), JiraError>,
    ) -> Result<u64, JiraError> {
        #[derive(Deserialize)]
        struct Answer {
            #[serde(default)]
            issues: Vec<Box<RawValue>>,
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
            if let Some(token) = &token {
                path.push_str(&format!("&nextPageToken={}", jql::encode(token)));
            }
            let answer: Answer = self.read_json(&path)?;
            let count = answer.issues.len() as u64;
            if count > 0 {
                on_page(SearchPage {
                    issues: answer.issues,
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

    /// A whole small search as parsed values (duplicate checks: a handful of issues).
    pub(crate) fn search_values(
        &mut self,
        query: &str,
        fields: &str,
    ) -> Result<Vec<Value>, JiraError> {
        let mut found = Vec::new();
        self.search(query, fields, 100, &mut |page| {
            for raw in page.issues {
                found.push(serde_json::from_str(raw.get()).unwrap_or(Value::Null));
            }
            if found.len() > 10_000 {
                return Err(JiraError::Unavailable(
                    "too many issues for a duplicate check".into(),
                ));
            }
            Ok(())
        })?;
        Ok(found)
    }
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

enum CallError {
    Net(NetError),
    Stopped,
}

/// The path without its query (queries carry JQL, which may name labels and summaries).
fn path_only(path: &str) -> &str {
    path.split('?').next().unwrap_or(path)
}

fn issue_id(raw: &str) -> Option<u64> {
    #[derive(Deserialize)]
    struct Id {
        id: Value,
    }
    let id: Id = serde_json::from_str(raw).ok()?;
    match id.id {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

/// Parses a 2xx answer's JSON body.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(reply: &Reply) -> Result<T, JiraError> {
    serde_json::from_slice(&reply.body).map_err(|e| {
        JiraError::Unavailable(format!(
            "HTTP {}: ответ — не тот JSON, что ожидался ({e})",
            reply.status
        ))
    })
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
    fn ids_of_raw_issues() {
        assert_eq!(issue_id(r#"{"id": "10014", "key": "A-1"}"#), Some(10014));
        assert_eq!(issue_id(r#"{"id": 7}"#), Some(7));
        assert_eq!(issue_id(r#"{"key": "A-1"}"#), None);
    }

    #[test]
    fn query_paths_are_not_logged() {
        assert_eq!(
            path_only("/rest/api/2/search?jql=secret"),
            "/rest/api/2/search"
        );
    }
}
