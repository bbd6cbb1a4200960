//! Sending: one paced call at a time, retries of reads, `Retry-After` and the rate-limit headers
//! honoured, writes never repeated blindly, answers classified and checked for JSON.

use super::{Jira, JiraError, ReadFailure, parse, path_only};
use crate::agent::answer::{self, Cause, Class, Need};
use crate::agent::net::{NetError, Reply};
use crate::agent::text::body_excerpt;
use serde_json::Value;
use std::time::{Duration, SystemTime};

/// The longest wait a `Retry-After` may impose.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(900);
/// The longest backoff between two tries when Jira says nothing.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// How many rate-limited answers (429, or 503 with `Retry-After`) one call waits out before the
/// command goes back to the hub: they are not failures of the command, and each wait is bounded
/// by the lease.
const MAX_RATE_LIMITED: u32 = 20;

/// How long one call may spend waiting out rate-limited answers before the command goes back to
/// the hub (a time budget beside [`MAX_RATE_LIMITED`]'s count).
const MAX_THROTTLED: Duration = Duration::from_secs(600);

impl Jira {
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
    pub(super) fn read_with(
        &mut self,
        path: &str,
        max_retries: u32,
        wait_limits: bool,
    ) -> Result<Reply, JiraError> {
        self.read_by("GET", path, None, max_retries, wait_limits)
    }

    /// A read sent as `method` with `body` (Cloud's `POST /comment/list` reads by a list of
    /// ids): retried and classified as a read, never taken for a write.
    pub(super) fn read_by(
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
                    return Err(self.refused_credentials(
                        method,
                        path,
                        answer.as_ref().ok(),
                        cause,
                        reason,
                    ));
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
                    if answer.as_ref().is_ok_and(answer::ran_as_nobody) {
                        // Refused credentials, yet Jira went on with the write as nobody and
                        // did not refuse it: it may well have been applied. The queue is held
                        // all the same, and the hub counts this delivery.
                        self.wrote = true;
                    }
                    return Err(self.refused_credentials(
                        method,
                        path,
                        answer.as_ref().ok(),
                        cause,
                        reason,
                    ));
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
}

impl Jira {
    /// A call answered with a credentials refusal: noted for the probe that tells one path's
    /// refusal from a hold, and a login refused kept until taken.
    fn refused_credentials(
        &mut self,
        method: &str,
        path: &str,
        reply: Option<&Reply>,
        cause: Cause,
        reason: String,
    ) -> JiraError {
        self.note_refusal(method, path, reply);
        if cause == Cause::Rejected {
            self.login_refused = Some(reason.clone());
        }
        JiraError::Held { cause, reason }
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

/// A `Content-Type` that is there and is not JSON is refused with the start of the body.
pub(super) fn check_json(reply: &Reply) -> Result<(), JiraError> {
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
    use crate::agent::jira_api::search::server_page;

    use crate::agent::answer::Need;
    use serde_json::json;

    use crate::agent::net::Reply;

    use serde_json::Value;

    use crate::agent::testkit::*;
    use std::time::Duration;

    /// A write Data Center ran as nobody (`X-AUSERNAME: anonymous`) holds the queue for the
    /// credentials either way; answered 201 it may have been applied (`wrote`), answered 401 it
    /// was not.
    #[test]
    fn a_write_answered_anonymously_with_a_2xx_may_have_been_applied() {
        for (status, applied) in [(201, true), (401, false), (403, false)] {
            let jira = serve(move |_, _, _| {
                (
                    status,
                    vec!["X-AUSERNAME: anonymous".to_string()],
                    json!({"id": "30001"}),
                )
            });
            let mut client = jira_at(&jira.url);
            let answer = post_comment(&mut client);
            assert!(
                matches!(
                    answer,
                    Err(JiraError::Held {
                        cause: Cause::Credentials,
                        ..
                    })
                ),
                "{status}: {:?}",
                answer.err()
            );
            assert_eq!(client.wrote(), applied, "{status}");
        }
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
