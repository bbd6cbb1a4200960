//! Who the caller is: the credentials the fake accepts, the 401 for any other, `serverInfo` and
//! the user as each deployment describes it.

use super::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Cloud's 401 to a call that needs a user when the caller is anonymous or its token is not
/// accepted (docs/jira-field-notes.md; ServiceNow KB2942093).
pub(super) const CLOUD_UNAUTHENTICATED: &str =
    "Client must be authenticated to access this resource.";

/// How Data Center refuses Basic auth once an administrator disabled it (see
/// [`FakeJira::disable_basic_auth`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BasicAuthOff {
    /// 8.16+: 403 `{"message":"Basic Authentication has been disabled on this instance."}`.
    Forbidden,
    /// 9.x and later: 302 to `/login.jsp`.
    RedirectToLogin,
}

/// The caller every valid credential authenticates as.
pub const USER: &str = "agent";

pub const PASSWORD: &str = "secret";

pub const TOKEN: &str = "pat-secret";

pub const ACCOUNT_ID: &str = "5b10a2844c20165700ede21g";

pub const DISPLAY_NAME: &str = "Агент синхронизации";

pub fn base64(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `Authorization` header values the fake accepts.
pub fn basic_auth() -> String {
    basic_auth_with(PASSWORD)
}

/// The `Authorization` value of the agent's user with `password`.
pub fn basic_auth_with(password: &str) -> String {
    format!("Basic {}", base64(&format!("{USER}:{password}")))
}

pub fn bearer_auth() -> String {
    format!("Bearer {TOKEN}")
}

impl StateInner {
    /// Before a request touches anything: the rate limit, then who the caller is. `Some`: the
    /// answer the request gets instead of Jira's behaviour.
    pub(super) fn gate(&mut self, auth: &str, endpoint: Endpoint) -> Option<Reply> {
        self.anonymous = false;
        if let Some(limit) = self.rate_limit {
            let now = Instant::now();
            while self
                .window
                .front()
                .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1))
            {
                self.window.pop_front();
            }
            if self.window.len() >= limit as usize {
                let mut reply = Reply::error(429, "Rate limit exceeded.");
                reply.headers.push(("retry-after", "1".into()));
                reply.headers.push(("x-ratelimit-limit", limit.to_string()));
                reply.headers.push(("x-ratelimit-remaining", "0".into()));
                if self.accepts(auth) {
                    self.stamp(&mut reply);
                }
                return Some(reply);
            }
            self.window.push_back(now);
        }
        if self.captcha {
            return Some(self.captcha_reply());
        }
        if let Some(off) = self.basic_auth_off
            && self.mode == Mode::DataCenter
            && auth.starts_with("Basic ")
        {
            return Some(self.basic_auth_refused(off));
        }
        if self.mode == Mode::DataCenter && auth.starts_with("Bearer ") {
            if endpoint.is_write()
                && let Some(left) = self.token_expires_in_writes.take()
            {
                // The token's expiry date passes (or an administrator revokes it) between two
                // of the agent's writes.
                if left <= 1 {
                    self.token_expired = true;
                } else {
                    self.token_expires_in_writes = Some(left - 1);
                }
            }
            if self.token_expired {
                if self.open_to_anyone && anyone_may(endpoint) {
                    // Run as nobody: Jira's own behaviour, answered and stamped as anonymous.
                    self.anonymous = true;
                    return None;
                }
                return Some(self.as_anonymous(endpoint));
            }
        }
        if self.accepts(auth) {
            if auth.starts_with("Basic ") {
                self.failed_logins = 0;
            }
            return None;
        }
        // Data Center counts failed Basic logins: after the third, the account must pass a
        // CAPTCHA in the browser before any login works again, and only an administrator (or a
        // sign-in through the browser) resets it (Atlassian KB "User receives repeated CAPTCHA
        // prompts on login to Jira Data Center": "A service could be using old credentials…";
        // JRASERVER-72572; the default `jira.maximum.authentication.attempts.allowed` is 3).
        if self.mode == Mode::DataCenter && auth.starts_with("Basic ") {
            self.failed_logins += 1;
            if self.failed_logins >= 3 {
                self.captcha = true;
            }
        }
        let supplied = !auth.is_empty();
        self.note_refused_login(auth);
        Some(match self.mode {
            // Cloud with credentials it does not accept (a wrong, expired or revoked API token)
            // treats the caller as anonymous: an anonymous-readable resource (`serverInfo`)
            // answers 200, every call that needs a user 401 «Client must be authenticated to
            // access this resource.», and each answer to a request that carried credentials says
            // `X-Seraph-LoginReason: AUTHENTICATED_FAILED` (docs/jira-field-notes.md: ServiceNow
            // KB2942093; a client measured against a live Cloud site: the header "is present on
            // every request that supplied credentials Jira rejected, and absent on every
            // anonymous one, on every 200").
            Mode::Cloud => {
                let mut reply = if endpoint == Endpoint::ServerInfo {
                    self.server_info()
                } else {
                    Reply::error(401, CLOUD_UNAUTHENTICATED)
                };
                if supplied {
                    reply
                        .headers
                        .push(("x-seraph-loginreason", "AUTHENTICATED_FAILED".into()));
                }
                reply
            }
            // Data Center: 401 for the whole request; a wrong password also says
            // `X-Seraph-LoginReason: AUTHENTICATED_FAILED` (and counts toward the CAPTCHA), an
            // unknown token does not (a Jira DC fixture's recorded deviations: "only a wrong
            // *password* carries `X-Seraph-LoginReason: AUTHENTICATED_FAILED`").
            Mode::DataCenter => {
                let mut reply = Reply::error(
                    401,
                    "You are not authenticated. Authentication required to perform this operation.",
                );
                reply
                    .headers
                    .push(("www-authenticate", "Basic realm=\"protected-area\"".into()));
                if auth.starts_with("Basic ") {
                    reply
                        .headers
                        .push(("x-seraph-loginreason", "AUTHENTICATED_FAILED".into()));
                }
                reply
            }
        })
    }

    /// Counts a request refused for the credentials it carried (none: not counted).
    pub(super) fn note_refused_login(&mut self, auth: &str) {
        if !auth.is_empty() {
            *self.refused_logins.entry(auth.to_string()).or_insert(0) += 1;
        }
    }

    /// A Data Center request whose bearer token expired runs as nobody: a search answers 200
    /// and finds nothing (`X-AUSERNAME: anonymous`; docs/jira-field-notes.md, "An expired or
    /// unresolvable bearer token may search anonymously": Atlassian lists "Unauthenticated user
    /// or expired session" among the causes of an empty or refused `/search`), anything that
    /// needs a user is 401 without `AUTHENTICATED_FAILED` (only a wrong password carries it).
    fn as_anonymous(&self, endpoint: Endpoint) -> Reply {
        let mut reply = match endpoint {
            Endpoint::Search => Reply::json(
                200,
                json!({"startAt": 0, "maxResults": 50, "total": 0, "issues": []}),
            ),
            Endpoint::ServerInfo => self.server_info(),
            _ => Reply::error(
                401,
                "You are not authenticated. Authentication required to perform this operation.",
            ),
        };
        reply.headers.push(("x-ausername", "anonymous".into()));
        reply
    }

    /// The author of what the request being served writes: the agent's user, or nobody (`null`,
    /// shown as "Anonymous") when the request runs anonymously.
    pub(super) fn author_json(&self) -> Value {
        if self.anonymous {
            Value::Null
        } else {
            self.user_json()
        }
    }

    /// Whether `auth` authenticates the agent's user (a valid, unrevoked credential).
    fn accepts(&self, auth: &str) -> bool {
        (auth == self.basic || auth == self.bearer) && !self.revoked
    }

    /// The stamp of an authenticated answer. Data Center's Seraph filter sets
    /// `X-Seraph-LoginReason: OK` and `X-AUSERNAME` on every answer to a request it authenticated
    /// by Basic auth or a token, whatever the status: recorded on a 200 (Jira DC 2022: `HTTP/1.1
    /// 200 … X-Seraph-LoginReason: OK … X-RateLimit-Limit … X-AUSERNAME`), on a 204 (JiraPS's
    /// fixture of a `PUT`, 2014), and on 4xx answers about an issue alike (the header speaks of
    /// the login, not of the request: docs/jira-field-notes.md). Cloud's only recorded form is
    /// `x-seraph-loginreason: OUT, OK` (nock recordings of Cloud answers, jwtd/grunt-jira-actions
    /// test/fixtures), without `X-AUSERNAME` (Cloud users have no user name).
    pub(super) fn stamp(&self, reply: &mut Reply) {
        match self.mode {
            // A request that ran as nobody is stamped as the anonymous answers are (see
            // `StateInner::as_anonymous`): no login took it.
            Mode::DataCenter if self.anonymous => {
                reply.headers.push(("x-ausername", "anonymous".into()));
            }
            Mode::DataCenter => {
                reply.headers.push(("x-seraph-loginreason", "OK".into()));
                reply
                    .headers
                    .push(("x-ausername", jira_url_encode(&self.account_name)));
            }
            Mode::Cloud => reply
                .headers
                .push(("x-seraph-loginreason", "OUT, OK".into())),
        }
    }

    /// A CAPTCHA lockout (too many failed logins): 403, `X-Seraph-LoginReason:
    /// AUTHENTICATED_FAILED`, `X-Authentication-Denied-Reason: CAPTCHA_CHALLENGE;
    /// login-url=<base>/login.jsp` (a recorded Jira 8.20.8 answer, docs/jira-field-notes.md) and
    /// an HTML body (`Content-Type: text/html;charset=UTF-8`, `WWW-Authenticate: OAuth
    /// realm="https"` in a 403 recorded 2021-04-05, Jirassic's JiraRepository+Projects.swift,
    /// which names the reason `AUTHENTICATION_DENIED` as Atlassian's Basic-auth example does).
    pub(super) fn captcha_reply(&self) -> Reply {
        let mut reply = Reply {
            status: 403,
            headers: Vec::new(),
            body: Body::Html(String::new()),
        };
        reply
            .headers
            .push(("x-seraph-loginreason", "AUTHENTICATED_FAILED".into()));
        reply.headers.push((
            "x-authentication-denied-reason",
            format!("CAPTCHA_CHALLENGE; login-url={}/login.jsp", self.base),
        ));
        reply
            .headers
            .push(("www-authenticate", "OAuth realm=\"https\"".into()));
        reply
    }

    /// Basic auth on the API disabled by an administrator (Data Center 8.16+, "Disabling basic
    /// authentication", confluence.atlassian.com/enterprise/disabling-basic-authentication-
    /// 1044776464.html); a token (`Bearer`) still works.
    fn basic_auth_refused(&self, off: BasicAuthOff) -> Reply {
        match off {
            // codeclou.io, "Disabling Basic Auth in Jira Data Center" (8.16, 2021): `HTTP/1.1
            // 403`, `{"message":"Basic Authentication has been disabled on this instance."}`.
            BasicAuthOff::Forbidden => Reply::json(
                403,
                json!({"message": "Basic Authentication has been disabled on this instance."}),
            ),
            // Data Center 9.x and later: a 302 to the login page (docs/jira-field-notes.md:
            // reported by JS client authors; a 9.x client's comment: "Jira Server/DC 9.x answers
            // … with a 302 → /login.jsp").
            BasicAuthOff::RedirectToLogin => Reply {
                status: 302,
                headers: vec![("location", format!("{}/login.jsp", self.base))],
                body: Body::Empty,
            },
        }
    }

    pub(super) fn user_json(&self) -> Value {
        if self.mode == Mode::Cloud {
            // Cloud users have an `accountId` and no `name` or `key` since the privacy changes
            // ("Deprecation notice and migration guide for major changes to Jira Cloud REST APIs
            // to improve user privacy", developer.atlassian.com, 2019).
            return json!({"self": format!("{}/rest/api/2/user?accountId={ACCOUNT_ID}", self.base),
                   "accountId": ACCOUNT_ID, "accountType": "atlassian", "displayName": DISPLAY_NAME,
                   "active": true, "timeZone": "Europe/Moscow"});
        }
        let name = &self.account_name;
        json!({"self": format!("{}/rest/api/2/user?username={}", self.base, jira_url_encode(name)),
               "name": name, "key": "JIRAUSER10100", "accountId": ACCOUNT_ID, "displayName": DISPLAY_NAME,
               "active": true, "timeZone": "Europe/Moscow"})
    }

    pub(super) fn server_info(&self) -> Reply {
        let (deployment, version) = match self.mode {
            Mode::DataCenter => ("Server", "9.12.15"),
            Mode::Cloud => ("Cloud", "1001.0.0-SNAPSHOT"),
        };
        Reply::json(
            200,
            json!({"baseUrl": self.base, "version": version, "versionNumbers": [9, 12, 15],
                   "deploymentType": deployment, "buildNumber": 9120015,
                   "buildDate": "2026-01-15T00:00:00.000+0300",
                   "serverTime": jira_time(self.jira_now_ms()), "scmInfo": "fake", "serverTitle": "Jira"}),
        )
    }
}

/// What "Anyone on the web" may do in a project open to anyone (see
/// [`FakeJira::open_to_anyone`]): browse its issues (search, read issues, comments and their
/// properties), create issues and add comments.
fn anyone_may(endpoint: Endpoint) -> bool {
    matches!(
        endpoint,
        Endpoint::Search
            | Endpoint::GetIssue
            | Endpoint::GetComments
            | Endpoint::GetIssueProperty
            | Endpoint::GetCommentProperty
            | Endpoint::CreateIssue
            | Endpoint::AddComment
    )
}

/// `JiraUrlCodec.encode(value, true)`, as Jira's `AccessLogFilter` writes `X-AUSERNAME`
/// ("response header doesn't support not US-ASCII chars", GHS-10385): `java.net.URLEncoder`'s
/// form encoding of the UTF-8 bytes (letters, digits and `. - * _` kept, every other byte
/// `%XX` in upper case) with a space as `%20` rather than `+` (Jira's `TestJiraUrlCodec`:
/// `"i+am a&nasty-string"` → `"i%2Bam%20a%26nasty-string"`). `svc.jira@corp.ru` arrives as
/// `svc.jira%40corp.ru`, `CORP\svc` as `CORP%5Csvc`, a Cyrillic name as its bytes.
pub fn jira_url_encode(value: &str) -> String {
    let mut out = String::new();
    for byte in value.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

impl FakeJira {
    /// The agent's account is named `name` (default [`USER`]): a directory-backed Data Center
    /// account is often named by its UPN or `DOMAIN\user` (docs/jira-field-notes.md, "Who we
    /// are"). JSON bodies (`/myself`, authors, creators) carry it as it is, `X-AUSERNAME`
    /// URL-encoded (see [`jira_url_encode`]); Basic auth takes `name:`[`PASSWORD`].
    pub fn set_account_name(&self, name: &str) {
        let mut state = lock(&self.state);
        state.account_name = name.to_string();
        state.basic = format!("Basic {}", base64(&format!("{name}:{PASSWORD}")));
    }

    /// The agent's credentials stop working (a revoked or expired API token, a changed
    /// password): each deployment answers as Jira does (Cloud: `serverInfo` 200
    /// anonymously with `X-Seraph-LoginReason: AUTHENTICATED_FAILED`, every other call 401).
    /// `false` gives them back.
    pub fn revoke_credentials(&self, revoked: bool) {
        lock(&self.state).revoked = revoked;
    }

    /// The agent's user is locked out behind a CAPTCHA: every call is answered 403 with the
    /// CAPTCHA headers until `false` (someone signed in through the browser).
    pub fn captcha_lockout(&self, locked: bool) {
        let mut state = lock(&self.state);
        state.captcha = locked;
        if !locked {
            state.failed_logins = 0;
        }
    }

    /// Data Center: the agent's personal access token has expired (`true`), and its requests
    /// run anonymously (see `StateInner::as_anonymous`).
    pub fn expire_token(&self, expired: bool) {
        let mut state = lock(&self.state);
        state.token_expired = expired;
        state.token_expires_in_writes = None;
    }

    /// Data Center: the agent's token expires just before the `nth` write from now arrives
    /// (its expiry date passes, or an administrator revokes it, between two commands): that
    /// write and every request after it run anonymously.
    pub fn expire_token_at_write(&self, nth: u32) {
        lock(&self.state).token_expires_in_writes = Some(nth);
    }

    /// An administrator gives the agent a new personal access token: only `token` is accepted
    /// from now on (`Authorization: Bearer <token>`), and it has not expired.
    pub fn set_token(&self, token: &str) {
        let mut state = lock(&self.state);
        state.bearer = format!("Bearer {token}");
        state.token_expired = false;
        state.token_expires_in_writes = None;
    }

    /// The project's permission scheme grants Browse Projects, Create Issues and Add Comments
    /// to "Anyone on the web" (Atlassian, "Allowing anonymous access to your project", Jira
    /// Server/DC administration: «Jira applications can be configured to allow users to create
    /// issues without having logged in»; an issue made so shows "Anonymous" as its reporter).
    /// A request whose token has expired is then not refused on those operations: it runs as
    /// nobody and succeeds (`201`, `X-AUSERNAME: anonymous`, no author), while everything that
    /// needs a user (`myself`, an edit, a transition) is still 401.
    pub fn open_to_anyone(&self, open: bool) {
        lock(&self.state).open_to_anyone = open;
    }

    /// An administrator changes the agent's password (a rotation): from now on only
    /// `password` logs in, and the old one is a failed login like any wrong password (each
    /// counts toward Data Center's CAPTCHA: see `StateInner::gate`).
    pub fn set_password(&self, password: &str) {
        lock(&self.state).basic = basic_auth_with(password);
    }

    /// Requests refused for the credentials they carried, with `authorization` (an
    /// `Authorization` value, e.g. [`basic_auth_with`]).
    pub fn refused_logins(&self, authorization: &str) -> u32 {
        lock(&self.state)
            .refused_logins
            .get(authorization)
            .copied()
            .unwrap_or(0)
    }

    /// Failed Basic logins counted so far (Data Center demands a CAPTCHA at 3).
    pub fn failed_logins(&self) -> u32 {
        lock(&self.state).failed_logins
    }

    /// Data Center: Basic auth on the API disabled (`Some`, answered as `off` says) or allowed
    /// (`None`, the default); a token still works.
    pub fn disable_basic_auth(&self, off: Option<BasicAuthOff>) {
        lock(&self.state).basic_auth_off = off;
    }
}
