//! Misbehaviour on demand: the faults a test queues per endpoint (rate limits, 5xx, dropped
//! connections, proxies, login pages, CAPTCHA), the rate-limit mode and the latency.

use super::*;
use std::time::{Duration, Instant};

/// A misbehaviour, served instead of (or around) the normal answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// 429, nothing applied; `Retry-After: n` when given; a JSON body, or Cloud's HTML error page.
    TooManyRequests {
        retry_after: Option<u64>,
        html: bool,
    },
    /// 503, nothing applied.
    Unavailable,
    /// Waits this long (past the client's timeout), then applies and answers (to nobody, usually).
    Slow(Duration),
    /// Hangs up without an answer, nothing applied.
    DropBeforeApply,
    /// Applies the request, then hangs up without an answer.
    DropAfterApply,
    /// A reverse proxy in front of Jira gives up on the request and answers `504 Gateway
    /// Time-out` (nginx's page) while Jira goes on: the request is applied after `apply_after`
    /// (at once when zero). "A 504 from a proxy at 30–60 s usually means Jira is still
    /// working (listeners, post-functions, indexing)"; nginx answers 504 when
    /// `proxy_read_timeout` (60 s by default) passes without Jira's answer
    /// (nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_read_timeout). Tests get the
    /// 504 at once.
    ProxyTimeout { apply_after: Duration },
    /// A 200 that is not Jira's answer: see [`Broken`].
    Broken(Broken),
    /// Cloud's 429, nothing applied: `Retry-After` when given, `X-RateLimit-Reset` (ISO 8601 to
    /// the minute, `yyyy-MM-ddTHH:mmZ`) `reset_in` seconds from now when given, and
    /// `RateLimit-Reason` (developer.atlassian.com/cloud/jira/platform/rate-limiting/: "429
    /// responses may be accompanied by Retry-After and X-RateLimit-Reset headers";
    /// `jira-burst-based`, `jira-per-issue-on-write`, `jira-quota-tenant-based`, …).
    CloudRateLimit {
        retry_after: Option<u64>,
        reset_in: Option<u64>,
        reason: &'static str,
    },
    /// Data Center's token-bucket 429 (confluence.atlassian.com "_RateLimiting_HTTPheaders":
    /// `X-RateLimit-Limit`, `-Remaining`, `-Interval-Seconds`, `-FillRate`, `retry-after`).
    DataCenterRateLimit { retry_after: u64 },
    /// 503 with `Retry-After` ("a 503 response may be returned when a resource limit has been
    /// reached", developer.atlassian.com rate-limiting), nothing applied.
    UnavailableFor(u64),
    /// A proxy in front of Jira forwards the request, Jira applies it, and the proxy answers
    /// `503` with `Retry-After` all the same: Envoy's `UC` ("upstream connection termination":
    /// the request went out on a pooled connection that was reset before the answer came back,
    /// envoyproxy/envoy#14981 and Envoy's response-flags reference), with its plain-text body
    /// «upstream connect error or disconnect/reset before headers. reset reason: connection
    /// termination»; a `Retry-After` beside it as a maintenance or retry policy adds one
    /// (docs/jira-field-notes.md, "A 503 is not proof that a write was not applied").
    ForwardedThen503 { retry_after: u64 },
    /// A proxy in front of Jira sends the caller to its login page: 302 with `Location`.
    RedirectToLogin,
    /// Jira's CAPTCHA lockout for this one request (`FakeJira::captcha_lockout` locks every
    /// request): 403 with `X-Seraph-LoginReason: AUTHENTICATED_FAILED` and
    /// `X-Authentication-Denied-Reason: CAPTCHA_CHALLENGE; login-url=<base>/login.jsp` (see
    /// `StateInner::captcha_reply`).
    CaptchaRequired,
    /// A front proxy that authenticates by itself (nginx `auth_basic`, an SSO gateway) refuses
    /// the caller's credentials: 401 without any Seraph header (see `server.rs`).
    FrontProxyUnauthorized,
}

/// 200 answers a client must not take for a good page. Each is seen in the field: an SSO or proxy
/// login page served with 200 to an expired session (Atlassian KB "REST API calls return the
/// login page HTML with a 200 status"; jira-python #1125), a body cut short by a proxy that
/// closed the stream (`Content-Length` absent, chunked: the client sees a clean end), and a JSON
/// object without `issues` (an error envelope or another API's answer behind a misrouted proxy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// `text/html` 200: a login page.
    Html,
    /// The normal JSON answer cut in the middle (the request is applied).
    Truncated,
    /// `{"startAt":0,"maxResults":50,"total":0}`: JSON with no `issues` array.
    NoIssues,
}

/// The login page an SSO proxy serves in place of the API's answer.
pub(super) const LOGIN_PAGE: &str = "<!DOCTYPE html><html><head><title>Log in - Jira</title></head><body>\
<form id=\"login-form\" action=\"/login.jsp\" method=\"post\"><input name=\"os_username\"></form></body></html>";

pub(super) struct Rule {
    pub(super) endpoint: Endpoint,
    pub(super) fault: Fault,
    pub(super) remaining: usize,
}

/// Envoy's body for a 503 after an upstream reset (its `UC` response flag).
/// nginx's page for a 401 of `auth_basic` (its built-in `ngx_http_error_401_page`).
pub(super) const NGINX_401: &str = "<html>\r\n<head><title>401 Authorization Required</title></head>\r\n<body>\r\n<center><h1>401 Authorization Required</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";

pub(super) const ENVOY_UPSTREAM_RESET: &str = "upstream connect error or disconnect/reset before headers. reset reason: connection termination";

/// nginx's own page for a 504 (its `ngx_http_error_504_page`).
pub(super) const GATEWAY_TIMEOUT_504: &str = "<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n<center><h1>504 Gateway Time-out</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";

pub(super) const OOPS_429: &str = "<!DOCTYPE html><html lang=\"en\"><head><title>Oops - an error has occurred</title></head>\
<body><div id=\"error-page\"><h1>Oops - an error has occurred</h1>\
<p>error429: Too many requests. Please try again later.</p></div></body></html>";

impl StateInner {
    pub(super) fn take_fault(&mut self, endpoint: Endpoint) -> Option<Fault> {
        let rule = self
            .rules
            .iter_mut()
            .find(|r| r.remaining > 0 && (r.endpoint == endpoint || r.endpoint == Endpoint::Any))?;
        rule.remaining -= 1;
        let fault = rule.fault.clone();
        self.rules.retain(|r| r.remaining > 0);
        Some(fault)
    }
}

impl StateInner {
    /// Data Center with rate limiting on stamps its bucket's headers on *every* answer, not
    /// only on a 429, with `Retry-After: 0` while tokens remain (Atlassian's Data Center page
    /// "Rate limiting: HTTP headers", confluence.atlassian.com/doc/_ratelimiting_httpheaders-
    /// 992678779.html; a recorded Jira 8.20.8 200 carries `X-RateLimit-Limit` and `Retry-After:
    /// 0`, docs/jira-field-notes.md "Rate limits"). Cloud does not.
    pub(super) fn stamp_rate_limit(&self, reply: &mut Reply) {
        let Some(limit) = self.rate_limit.filter(|_| self.mode == Mode::DataCenter) else {
            return;
        };
        if reply.headers.iter().any(|(name, _)| *name == "retry-after") {
            return;
        }
        let remaining = (limit as usize).saturating_sub(self.window.len());
        reply.headers.push(("x-ratelimit-limit", limit.to_string()));
        reply
            .headers
            .push(("x-ratelimit-remaining", remaining.to_string()));
        reply
            .headers
            .push(("x-ratelimit-interval-seconds", "1".into()));
        reply
            .headers
            .push(("x-ratelimit-fillrate", limit.to_string()));
        reply.headers.push(("retry-after", "0".into()));
    }
}

impl FakeJira {
    /// Every normal answer takes this long: half before the request is applied, half after (so
    /// a client killed meanwhile may have written without hearing of it).
    pub fn set_latency(&self, latency: Duration) {
        lock(&self.state).latency = latency;
    }

    /// Answers 429 (`Retry-After: 1`) to requests beyond `per_second` in any one-second window.
    pub fn rate_limit(&self, per_second: Option<u32>) {
        let mut state = lock(&self.state);
        state.rate_limit = per_second;
        state.window.clear();
    }

    /// The next `times` requests to `endpoint` get `fault`. Rules apply in the order given.
    pub fn fault(&self, endpoint: Endpoint, fault: Fault, times: usize) {
        lock(&self.state).rules.push(Rule {
            endpoint,
            fault,
            remaining: times,
        });
    }

    pub fn clear_faults(&self) {
        lock(&self.state).rules.clear();
    }

    /// Faults not yet served.
    pub fn faults_pending(&self) -> usize {
        lock(&self.state).rules.iter().map(|r| r.remaining).sum()
    }

    /// Waits (at most `limit`) until Jira has finished every request a proxy answered for
    /// early, so that a test sees their effects before it counts.
    pub fn wait_applied(&self, limit: Duration) {
        let started = Instant::now();
        while lock(&self.state).in_flight > 0 && started.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
