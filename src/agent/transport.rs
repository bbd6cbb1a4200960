//! How the agent talks to the hub: the shared folder (system.md §7) or the hub's HTTP API, with
//! the same messages ([`crate::protocol`]). A request keeps its id across every resend, so the
//! hub's exactly-once handling makes a resend harmless.
//!
//! Relay: the request is written to `inbox/<kind>-<id>.json` under a `.`-name, synced, renamed,
//! and the folder synced; the answer is `outbox/<kind>-<id>.json` (or `error-<kind>-<id>.json`, a
//! refusal), read and then deleted. A request with no answer after `answer_timeout` is written
//! again when it has left `inbox/`. HTTP: `POST {hub_url}/agent/<kind>` with the agent token as
//! `Authorization: Bearer`; lost connections and 5xx are retried with the same id.

use super::config::{AgentConfig, HubTransport, Secret};
use super::net::Client;
use super::wait::Waits;
use crate::protocol::{
    ClaimAnswer, ClaimRequest, CommandResult, Envelope, GiveBackBound, HeartbeatAnswer,
    HeartbeatRequest, Kind, Peer, ReportAnswer, ReportRequest,
};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The agent's version, sent in claims and heartbeats.
pub(crate) const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// A request body this large that loses its connection twice is taken as too large.
const LARGE_BODY: usize = 1024 * 1024;

/// How often the relay's outbox is looked at while an answer is awaited.
const OUTBOX_POLL: Duration = Duration::from_millis(50);

/// The mode of the files the agent writes into the share: the hub reads them as another user of
/// the share's group.
const RELAY_FILE_MODE: u32 = 0o660;

/// The hub, as the agent reaches it.
pub(crate) struct HubLink {
    way: Way,
    name: String,
    /// How its request ids start: its name's, or a one-shot run's of that name.
    id_prefix: String,
    token: Secret,
    answer_timeout: Duration,
    /// How long the hub may hold a claim while it has no work (`wait_seconds`).
    claim_wait: Duration,
    /// The configured time limit of an HTTP request (a waiting claim gets `claim_wait` more).
    request_timeout: Duration,
    /// How often the agent sends a heartbeat, told to the hub with each one.
    heartbeat: Duration,
    /// `--check`: how long a request waits for its answer ([`LinkError::NoAnswer`] after it).
    answer_limit: Option<Duration>,
    /// The last request that could not be written into `inbox/` or sent over HTTP, and why
    /// (cleared by one written): what a `--check` that got no answer names.
    last_failure: std::sync::Mutex<Option<String>>,
    /// Whether the last claim given up was still in `inbox/` (nobody took it) when it was taken
    /// back: what a `--check` that got no answer names.
    claim_left_unread: std::sync::atomic::AtomicBool,
    /// Whether the hub's last claim answer said it bounds give-backs (`bounded_give_backs`):
    /// `None` before the first answer. A hub that does not (the previous release) sends no
    /// `previous_release`, and the agent bounds its give-backs itself.
    hub_bounds_give_backs: std::sync::Mutex<Option<bool>>,
    /// Over the relay: the agent's clock and the file server's at its last request written (the
    /// file's mtime), and how late it saw the hub's last answers on the file server's clock.
    share: std::sync::Mutex<ShareTiming>,
    waits: Arc<Waits>,
}

/// The agent's own bound on the give-backs of one command, under a hub that does not bound them:
/// at most this many, and none later than this after the first (then the command fails with
/// the last reason).
pub(crate) const OWN_GIVE_BACK_BOUND: GiveBackBound = GiveBackBound {
    count: 5,
    seconds: 3600,
};

/// How late the agent sees the hub's answers in the share: each answer's mtime (the file
/// server's clock when the hub wrote it) against the moment the agent found it, put on the file
/// server's clock by the mtime of the agent's own last request there.
#[derive(Debug, Default)]
struct ShareTiming {
    clock: Option<(std::time::SystemTime, std::time::SystemTime)>,
    delays: std::collections::VecDeque<Duration>,
}

impl ShareTiming {
    fn seen(&mut self, found: std::time::SystemTime, written: std::time::SystemTime) {
        let Some((local, server)) = self.clock else {
            return;
        };
        // found + (server - local) - written, without going below the epoch.
        let late = (found + server.duration_since(local).unwrap_or_default())
            .duration_since(written + local.duration_since(server).unwrap_or_default())
            .unwrap_or_default();
        if late > Duration::from_secs(600) {
            return;
        }
        if self.delays.len() == 9 {
            self.delays.pop_front();
        }
        self.delays.push_back(late);
    }

    fn delay(&self) -> Option<Duration> {
        let mut sorted: Vec<Duration> = self.delays.iter().copied().collect();
        sorted.sort();
        sorted.get(sorted.len() / 2).copied()
    }
}

/// What `agent --check` tells of the relay's share.
pub(crate) struct ShareReport {
    pub dir: PathBuf,
    /// How late this agent saw the hub's answers.
    pub answers_late: Option<Duration>,
    /// How late the hub sees this agent's files, as the hub's lock says.
    pub requests_late: Option<Duration>,
    /// Whether the hub's lock could be read (the other side's file), and why not.
    pub lock_read: Result<(), String>,
    /// What the agent could not do in `inbox/` (create, rename over, read, delete), if anything.
    pub inbox_failure: Option<String>,
    /// The mount option that removes the agent's client cache for the share.
    pub advice: String,
    /// The same for the hub's mount (the file system its lock names).
    pub hub_advice: String,
}

/// After this long without an answer, a `--check` says on stderr what it waits for.
const SAY_WAITING_AFTER: Duration = Duration::from_secs(1);

enum Way {
    Relay(PathBuf),
    Http { client: Client, url: String },
}

/// A refusal or failure of a request, for the log.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LinkError {
    #[error("the hub refused the {kind} request: {message}")]
    Refused { kind: Kind, message: String },
    /// The hub refused the agent token (`bad_token` in the relay, HTTP 401): nothing the agent
    /// sends is taken until its token is the hub's again.
    #[error("the hub refused the agent token: {0}")]
    BadToken(String),
    #[error("the agent is stopping")]
    Stopped,
    /// No answer within the hub answer limit (`--check`): what was waited for, in the
    /// operator's words.
    #[error("{0}")]
    NoAnswer(String),
    /// The report is larger than the hub takes (its `max_report_bytes`, an HTTP 413, or a
    /// connection reset twice while a large body was being sent).
    #[error("the report of {bytes} bytes is larger than the hub takes ({limit})")]
    TooLarge { bytes: u64, limit: String },
    #[error("{0}")]
    Other(String),
}

/// A request as sent: `kind` beside the protocol's fields.
#[derive(Serialize)]
struct Outgoing<'a, T: Serialize> {
    kind: Kind,
    #[serde(flatten)]
    body: &'a T,
}

impl HubLink {
    pub(crate) fn new(config: &AgentConfig, client: Client, waits: Arc<Waits>) -> HubLink {
        let way = match &config.transport {
            HubTransport::Relay(dir) => Way::Relay(dir.clone()),
            HubTransport::Http(url) => Way::Http {
                client,
                url: url.clone(),
            },
        };
        // A run beside the running agent of its name (`--once`, `--check`) never waits at the
        // hub, so it left no claim to take back; the claims there are that agent's, waiting.
        if let Way::Relay(dir) = &way
            && !config.one_shot
        {
            forget_stale_claims(&dir.join("inbox"), &config.name);
        }
        HubLink {
            way,
            name: config.name.clone(),
            id_prefix: if config.one_shot {
                one_shot_prefix(&config.name)
            } else {
                id_prefix(&config.name)
            },
            token: config.agent_token.clone(),
            answer_timeout: config.answer_timeout,
            // A claim waits no longer than a heartbeat period: the agent's own requests then
            // come at least that often, and the hub can tell a frozen agent from a waiting one
            // (silent after two missed periods).
            claim_wait: config.claim_wait.min(config.heartbeat),
            request_timeout: config.request_timeout,
            heartbeat: config.heartbeat,
            answer_limit: config.hub_answer_limit,
            last_failure: std::sync::Mutex::new(None),
            claim_left_unread: std::sync::atomic::AtomicBool::new(false),
            hub_bounds_give_backs: std::sync::Mutex::new(None),
            share: std::sync::Mutex::new(ShareTiming::default()),
            waits,
        }
    }

    fn envelope(&self, id: &str) -> Envelope {
        Envelope {
            id: id.to_string(),
            agent: self.name.clone(),
            sent_at: crate::domain::time::format_utc(self.waits.wall()),
            token: match self.way {
                Way::Relay(_) => Some(self.token.expose().to_string()),
                Way::Http { .. } => None,
            },
        }
    }

    pub(crate) fn heartbeat(
        &self,
        jira_ok: bool,
        last_error: Option<String>,
        jira_held_class: Option<&'static str>,
    ) -> Result<(), LinkError> {
        self.heartbeat_with(jira_ok, last_error, None, jira_held_class)
    }

    /// A heartbeat that also carries a preflight's outcome (`--check`).
    pub(crate) fn heartbeat_with(
        &self,
        jira_ok: bool,
        last_error: Option<String>,
        check: Option<crate::protocol::CheckReport>,
        jira_held_class: Option<&'static str>,
    ) -> Result<(), LinkError> {
        let id = new_id_with(&self.id_prefix);
        let request = HeartbeatRequest {
            envelope: self.envelope(&id),
            agent_version: AGENT_VERSION.to_string(),
            jira_ok,
            last_error,
            check,
            heartbeat_seconds: Some(
                u32::try_from(self.heartbeat.as_secs())
                    .unwrap_or(crate::protocol::MAX_HEARTBEAT_SECONDS)
                    .clamp(1, crate::protocol::MAX_HEARTBEAT_SECONDS),
            ),
            peer: Peer::this_agent(),
            own_give_back_bound: self.own_give_back_bound(),
            jira_held_class: jira_held_class.map(str::to_string),
        };
        let bytes = self.exchange(Kind::Heartbeat, &id, &request, false)?;
        let _: HeartbeatAnswer = decode(Kind::Heartbeat, &bytes)?;
        Ok(())
    }

    pub(crate) fn claim(
        &self,
        settings_version: i64,
        max_commands: u32,
    ) -> Result<ClaimAnswer, LinkError> {
        let id = new_id_with(&self.id_prefix);
        let request = ClaimRequest {
            envelope: self.envelope(&id),
            agent_version: AGENT_VERSION.to_string(),
            settings_version,
            max_commands,
            wait_seconds: u32::try_from(self.claim_wait.as_secs()).unwrap_or(u32::MAX),
            peer: Peer::this_agent(),
        };
        let sent = Instant::now();
        let bytes = self.exchange(Kind::Claim, &id, &request, false)?;
        let answer: ClaimAnswer = decode(Kind::Claim, &bytes)?;
        // The share test (`scripts/ci-shares.sh`) takes its claim round trips from these lines.
        tracing::debug!(
            id,
            commands = answer.commands.len(),
            round_trip_ms = sent.elapsed().as_millis() as u64,
            "claim answered"
        );
        self.met_hub(&answer.hub);
        Ok(answer)
    }

    /// Notes what the hub said of itself in a claim answer; says in the log when the agent
    /// starts (or stops) bounding its give-backs itself.
    fn met_hub(&self, hub: &Peer) {
        let bounds = hub.can(crate::protocol::HUB_CAP_BOUNDED_GIVE_BACKS);
        let mut known = self
            .hub_bounds_give_backs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *known != Some(bounds) {
            let build = hub.build.as_ref();
            let version = build.map_or("?", |b| b.version.as_str());
            let commit = build.map_or("?", |b| b.commit.as_str());
            if bounds {
                tracing::info!(
                    hub_protocol = hub.revision(),
                    hub_version = version,
                    hub_commit = commit,
                    "the hub bounds give-backs and names the previous one (previous_release)"
                );
            } else {
                tracing::warn!(
                    hub_protocol = hub.revision(),
                    hub_version = version,
                    hub_commit = commit,
                    max_give_backs = OWN_GIVE_BACK_BOUND.count,
                    within_seconds = OWN_GIVE_BACK_BOUND.seconds,
                    "the hub does not bound give-backs (an older release): the agent bounds them itself and fails a command given back past that"
                );
            }
            *known = Some(bounds);
        }
    }

    /// The agent's own bound on give-backs while the hub it meets has none.
    pub(crate) fn own_give_back_bound(&self) -> Option<GiveBackBound> {
        let known = *self
            .hub_bounds_give_backs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (known == Some(false)).then_some(OWN_GIVE_BACK_BOUND)
    }

    /// Sends results. While the agent stops, it still waits (a bounded time) for the answer.
    pub(crate) fn report(&self, results: Vec<CommandResult>) -> Result<ReportAnswer, LinkError> {
        self.report_within(results, None)
            .map_err(|(error, _)| error)
    }

    /// Sends results whose request must fit in `limit` bytes (the hub's `max_report_bytes`): a
    /// larger one is not sent at all but answered [`LinkError::TooLarge`], so the caller can
    /// split it. A failure hands the results back.
    pub(crate) fn report_within(
        &self,
        results: Vec<CommandResult>,
        limit: Option<u64>,
    ) -> Result<ReportAnswer, (LinkError, Vec<CommandResult>)> {
        let id = new_id_with(&self.id_prefix);
        let request = ReportRequest {
            envelope: self.envelope(&id),
            results,
        };
        match self.exchange_within(Kind::Report, &id, &request, true, limit) {
            Ok(bytes) => decode(Kind::Report, &bytes).map_err(|e| (e, request.results)),
            Err(error) => Err((error, request.results)),
        }
    }

    fn stopping(&self) -> bool {
        self.waits.stopping()
    }

    /// Sends one request until it is answered; `patient`: keep at it for a while when stopping.
    fn exchange<T: Serialize>(
        &self,
        kind: Kind,
        id: &str,
        body: &T,
        patient: bool,
    ) -> Result<Vec<u8>, LinkError> {
        self.exchange_within(kind, id, body, patient, None)
    }

    /// [`HubLink::exchange`] of a request that must fit in `limit` bytes.
    fn exchange_within<T: Serialize>(
        &self,
        kind: Kind,
        id: &str,
        body: &T,
        patient: bool,
        limit: Option<u64>,
    ) -> Result<Vec<u8>, LinkError> {
        let bytes = serde_json::to_vec(&Outgoing { kind, body })
            .map_err(|e| LinkError::Other(e.to_string()))?;
        if let Some(limit) = limit
            && bytes.len() as u64 > limit
        {
            return Err(LinkError::TooLarge {
                bytes: bytes.len() as u64,
                limit: format!("{limit} bytes"),
            });
        }
        // Once stopping, a patient request gets this long more.
        let grace = self.answer_timeout.min(Duration::from_secs(30));
        let mut stopped_at: Option<Instant> = None;
        let started = Instant::now();
        let timed_out = std::cell::Cell::new(false);
        let said_waiting = std::cell::Cell::new(false);
        let give_up = |stopped_at: &mut Option<Instant>| -> bool {
            if let Some(limit) = self.answer_limit {
                let waited = started.elapsed();
                if waited >= SAY_WAITING_AFTER && !said_waiting.replace(true) {
                    let request = match &self.way {
                        Way::Relay(_) => format!("запрос inbox/{kind}-{id}.json"),
                        Way::Http { url, .. } => format!("запрос POST {url}/agent/{kind}"),
                    };
                    eprintln!(
                        "Жду ответа хаба {} ({request}), не дольше {} с…",
                        self.way.describe(),
                        limit.as_secs()
                    );
                }
                if waited >= limit {
                    timed_out.set(true);
                    return true;
                }
            }
            if !self.stopping() {
                return false;
            }
            if !patient {
                return true;
            }
            let since = *stopped_at.get_or_insert_with(Instant::now);
            since.elapsed() >= grace
        };
        let result = match &self.way {
            Way::Relay(dir) => {
                self.relay_exchange(dir, kind, id, &bytes, &mut || give_up(&mut stopped_at))
            }
            Way::Http { client, url } => {
                self.http_exchange(client, url, kind, &bytes, &mut || give_up(&mut stopped_at))
            }
        };
        match result {
            Err(LinkError::Stopped) if timed_out.get() => Err(LinkError::NoAnswer(format!(
                "хаб не ответил за {} с {}: {}",
                self.answer_limit.unwrap_or_default().as_secs(),
                self.way.describe(),
                match self
                    .last_failure
                    .lock()
                    .ok()
                    .and_then(|failure| failure.clone())
                {
                    Some(failure) => failure,
                    None => self.unanswered(kind, id),
                }
            ))),
            other => other,
        }
    }

    fn relay_exchange(
        &self,
        dir: &Path,
        kind: Kind,
        id: &str,
        bytes: &[u8],
        give_up: &mut dyn FnMut() -> bool,
    ) -> Result<Vec<u8>, LinkError> {
        let inbox = dir.join("inbox");
        let outbox = dir.join("outbox");
        let name = format!("{kind}-{id}.json");
        // The hub answers a refused file `error-<kind>-<id>.json` (one answer per refused file).
        let error_names = [format!("error-{kind}-{id}.json")];
        let mut written_at: Option<Instant> = None;
        let mut warned = false;
        loop {
            self.waits.alive();
            if written_at.is_none() {
                match write_file(&inbox, &name, bytes) {
                    Ok(server) => {
                        written_at = Some(Instant::now());
                        if let (Some(server), Ok(mut share)) = (server, self.share.lock()) {
                            share.clock = Some((std::time::SystemTime::now(), server));
                        }
                        if let Ok(mut failure) = self.last_failure.lock() {
                            *failure = None;
                        }
                    }
                    Err(error) => {
                        let failure = inbox_write_failure(&inbox, &error);
                        if !warned {
                            tracing::warn!("{failure}; повторяю");
                            warned = true;
                        }
                        if let Ok(mut last) = self.last_failure.lock() {
                            *last = Some(failure);
                        }
                        if give_up() {
                            return Err(LinkError::Stopped);
                        }
                        self.waits.sleep_through(Duration::from_secs(1));
                        continue;
                    }
                }
            }
            if let Some((answer, written)) = take_answer(&outbox, &name)? {
                if let Ok(mut share) = self.share.lock() {
                    share.seen(std::time::SystemTime::now(), written);
                }
                return Ok(answer);
            }
            for error_name in &error_names {
                if let Some((refusal, _)) = take_answer(&outbox, error_name)? {
                    let code = serde_json::from_slice::<serde_json::Value>(&refusal)
                        .ok()
                        .and_then(|v| v["error"]["code"].as_str().map(String::from));
                    if code.as_deref() == Some("bad_token") {
                        return Err(LinkError::BadToken(refusal_message(&refusal)));
                    }
                    if code.as_deref() == Some("too_large") {
                        return Err(LinkError::TooLarge {
                            bytes: bytes.len() as u64,
                            limit: refusal_message(&refusal),
                        });
                    }
                    return Err(LinkError::Refused {
                        kind,
                        message: refusal_message(&refusal),
                    });
                }
            }
            if give_up() {
                if kind == Kind::Claim {
                    // A claim left waiting at the hub would take commands nobody reads until
                    // their lease ends: taken back while the hub has not applied it.
                    let unread = std::fs::remove_file(inbox.join(&name)).is_ok();
                    self.claim_left_unread
                        .store(unread, std::sync::atomic::Ordering::Relaxed);
                }
                return Err(LinkError::Stopped);
            }
            if written_at.is_some_and(|at| at.elapsed() >= self.answer_timeout) {
                if inbox.join(&name).exists() {
                    // The hub has not taken it yet: keep waiting.
                    written_at = Some(Instant::now());
                } else {
                    tracing::info!(kind = %kind, id, "no answer in time and the request left inbox/: sending it again");
                    written_at = None;
                    continue;
                }
            }
            std::thread::sleep(OUTBOX_POLL);
        }
    }

    /// Over the relay: how late each side sees the other's files, what the agent can do in
    /// `inbox/`, and whether it can read the hub's file. `None` over HTTP.
    pub(crate) fn share_report(&self) -> Option<ShareReport> {
        let Way::Relay(dir) = &self.way else {
            return None;
        };
        let lock = crate::sharefs::read(&dir.join(crate::protocol::RELAY_LOCK_NAME), 4096);
        let lock_text = lock
            .as_ref()
            .map(|text| String::from_utf8_lossy(text).into_owned())
            .unwrap_or_default();
        let requests_late = crate::protocol::relay_lock_visibility(&lock_text);
        let hub_mount = crate::protocol::relay_lock_mount(&lock_text);
        Some(ShareReport {
            dir: dir.clone(),
            answers_late: self.share.lock().ok().and_then(|share| share.delay()),
            requests_late,
            lock_read: lock.map(|_| ()).map_err(|error| error.to_string()),
            inbox_failure: crate::sharefs::probe_failure(&crate::sharefs::probe(
                &dir.join("inbox"),
            )),
            advice: crate::sharefs::cache_advice(dir),
            hub_advice: crate::sharefs::advice_for(hub_mount.as_deref()),
        })
    }

    fn http_exchange(
        &self,
        client: &Client,
        url: &str,
        kind: Kind,
        bytes: &[u8],
        give_up: &mut dyn FnMut() -> bool,
    ) -> Result<Vec<u8>, LinkError> {
        let target = format!("{url}/agent/{kind}");
        let authorization = format!("Bearer {}", self.token.expose());
        // The hub refuses a wrong token before it reads the body: the header names the agent.
        let named = crate::protocol::agent_header_value(&self.name);
        let mut attempt = 0u32;
        // A claim the hub may hold, and every request of a `--check` (which must say within a
        // second or two what it waits for, however long a request may block), go from a thread
        // of their own.
        let waits =
            (kind == Kind::Claim && !self.claim_wait.is_zero()) || self.answer_limit.is_some();
        let mut resets = 0u32;
        loop {
            self.waits.alive();
            let sent = if waits {
                match self.post_waiting(client, &target, [&authorization, &named], bytes, give_up) {
                    Some(sent) => sent,
                    None => return Err(LinkError::Stopped),
                }
            } else {
                client.post_to_hub(&target, &authorization, &named, bytes, None)
            };
            let failure = match sent {
                Ok(reply) if (200..300).contains(&reply.status) => {
                    if let Ok(mut last) = self.last_failure.lock() {
                        *last = None;
                    }
                    return Ok(reply.body);
                }
                Ok(reply) if reply.status == 413 => {
                    return Err(LinkError::TooLarge {
                        bytes: bytes.len() as u64,
                        limit: format!("HTTP 413: {}", refusal_message(&reply.body)),
                    });
                }
                // A server that refuses a body it will not read may close the connection before
                // its 413 is read: the client sees a reset or a broken pipe instead. A large body
                // that meets that twice is taken as too large rather than sent forever.
                Err(error) if bytes.len() >= LARGE_BODY && resets >= 1 => {
                    return Err(LinkError::TooLarge {
                        bytes: bytes.len() as u64,
                        limit: format!("the connection was cut twice while sending it: {error}"),
                    });
                }
                Err(error) if bytes.len() >= LARGE_BODY => {
                    resets += 1;
                    error.to_string()
                }
                Ok(reply) if reply.status >= 500 || reply.status == 408 || reply.status == 429 => {
                    format!("HTTP {}", reply.status)
                }
                Ok(reply) if reply.status == 401 => {
                    return Err(LinkError::BadToken(format!(
                        "HTTP 401: {}",
                        refusal_message(&reply.body)
                    )));
                }
                Ok(reply) => {
                    return Err(LinkError::Refused {
                        kind,
                        message: format!("HTTP {}: {}", reply.status, refusal_message(&reply.body)),
                    });
                }
                Err(error) => error.to_string(),
            };
            if attempt.is_multiple_of(10) {
                tracing::warn!(kind = %kind, attempt, error = %failure, "the hub did not answer; retrying with the same id");
            }
            if let Ok(mut last) = self.last_failure.lock() {
                *last = Some(format!("хаб не отвечает: «{failure}»"));
            }
            let wait = super::jira_api::backoff(attempt.min(5));
            // A `--check` looks at its limit every second, however long the backoff.
            let wait = match self.answer_limit {
                Some(_) => wait.min(Duration::from_secs(1)),
                None => wait,
            };
            if give_up() {
                return Err(LinkError::Stopped);
            }
            self.waits.sleep_through(wait);
            if give_up() {
                return Err(LinkError::Stopped);
            }
            attempt += 1;
        }
    }
}

impl HubLink {
    /// A claim the hub may hold up to `claim_wait`: sent from a thread of its own, with that much
    /// more time than a request gets, while this one keeps systemd's watchdog fed and stops at
    /// once when the agent stops (`None`; the sending thread is left to end with the process).
    fn post_waiting(
        &self,
        client: &Client,
        target: &str,
        [authorization, named]: [&str; 2],
        bytes: &[u8],
        give_up: &mut dyn FnMut() -> bool,
    ) -> Option<Result<super::net::Reply, super::net::NetError>> {
        let timeout = self.claim_wait + self.request_timeout;
        let (sender, answer) = std::sync::mpsc::channel();
        let (client, url, authorization, named, body) = (
            client.clone(),
            target.to_string(),
            authorization.to_string(),
            named.to_string(),
            bytes.to_vec(),
        );
        let spawned = std::thread::Builder::new()
            .name("hub-claim".into())
            .spawn(move || {
                let posted = client.post_to_hub(&url, &authorization, &named, &body, Some(timeout));
                let _ = sender.send(posted);
            });
        if let Err(error) = spawned {
            tracing::warn!(%error, "no thread for a waiting claim; it waits on the agent's own");
            return Some(Err(super::net::NetError::NotSent(error.to_string())));
        }
        loop {
            match answer.recv_timeout(Duration::from_secs(1)) {
                Ok(sent) => return Some(sent),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    self.waits.alive();
                    if give_up() {
                        return None;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Some(Err(super::net::NetError::Ambiguous(
                        "the claim's thread ended without an answer".into(),
                    )));
                }
            }
        }
    }
}

impl Way {
    /// How the hub is reached, for an operator: «через папку обмена /srv/jira-bridge», «по HTTP
    /// http://hub:8740».
    fn describe(&self) -> String {
        match self {
            Way::Relay(dir) => format!("через папку обмена {}", dir.display()),
            Way::Http { url, .. } => format!("по HTTP {url}"),
        }
    }
}

impl HubLink {
    /// What became of a request the hub did not answer, and what to look at.
    fn unanswered(&self, kind: Kind, id: &str) -> String {
        match &self.way {
            Way::Relay(dir) => {
                let name = format!("{kind}-{id}.json");
                let unread = if kind == Kind::Claim {
                    self.claim_left_unread
                        .load(std::sync::atomic::Ordering::Relaxed)
                } else {
                    dir.join("inbox").join(&name).exists()
                };
                if unread {
                    format!(
                        "запрос inbox/{name} никто не забрал (хаб не запущен, его relay_dir — другая папка: jira-hub settings get relay_dir, или ему нет доступа к папке)"
                    )
                } else {
                    format!(
                        "запрос inbox/{name} хаб забрал, но ответа outbox/{name} нет (журнал хаба: journalctl -u jira-hub)"
                    )
                }
            }
            Way::Http { .. } => {
                "хаб не запущен, hub_url — не его адрес, или хаб не отвечает (журнал хаба: journalctl -u jira-hub)"
                    .to_string()
            }
        }
    }
}

/// A request that cannot be written into `inbox/`, in the operator's words: a permission is
/// named as one (the folder's mode and group, and how to fix them), a missing folder as a
/// share that is not there; the system's own words quoted after ours.
pub(crate) fn inbox_write_failure(inbox: &Path, error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::PermissionDenied => format!(
            "Нет права писать в папку обмена {}: «{error}». Нужен режим 2770 и группа общей папки, в которую входит пользователь агента (jira-hub relay init на стороне хаба; usermod -aG <группа> jira-hub-agent)",
            inbox.display()
        ),
        std::io::ErrorKind::NotFound => format!(
            "Нет папки {}: «{error}». Общая папка не смонтирована или не подготовлена (jira-hub relay init)",
            inbox.display()
        ),
        _ => format!(
            "Не удалось записать запрос в папку обмена {}: «{error}»",
            inbox.display()
        ),
    }
}

fn decode<T: serde::de::DeserializeOwned>(kind: Kind, bytes: &[u8]) -> Result<T, LinkError> {
    serde_json::from_slice(bytes)
        .map_err(|e| LinkError::Other(format!("the hub's {kind} answer is not understood: {e}")))
}

/// The hub's words in an error answer (`{"error": {"message"}}`), else a short text.
fn refusal_message(bytes: &[u8]) -> String {
    let value: serde_json::Value = serde_json::from_slice(bytes).unwrap_or_default();
    let error = &value["error"];
    match (error["field"].as_str(), error["message"].as_str()) {
        (Some(field), Some(message)) if !field.is_empty() => format!("{field}: {message}"),
        (_, Some(message)) => message.to_string(),
        _ => String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned(),
    }
}

/// Takes back the claims an earlier run of this agent (same name) left in `inbox/`: killed
/// while the hub held them waiting for work, they would take the next commands for nobody
/// (until their lease ends). A claim the hub has already applied has left `inbox/`.
fn forget_stale_claims(inbox: &Path, name: &str) {
    let prefix = format!("claim-{}-", id_prefix(name));
    let Ok(entries) = std::fs::read_dir(inbox) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let file = entry.file_name();
        let Some(file) = file.to_str() else { continue };
        let ours = file
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(".json"))
            .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
        if ours {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => tracing::info!(file, "a claim left by an earlier run taken back"),
                Err(error) => {
                    tracing::debug!(file, %error, "a claim left by an earlier run is gone")
                }
            }
        }
    }
}

/// Reads and deletes `dir/name` when it is there and complete JSON; with its modification time
/// (the file server's clock when the hub wrote it).
fn take_answer(
    dir: &Path,
    name: &str,
) -> Result<Option<(Vec<u8>, std::time::SystemTime)>, LinkError> {
    let path = dir.join(name);
    // Never through a link, never blocking on a FIFO, never more than an HTTP answer may be.
    let read = crate::sharefs::open_regular(&path, false, super::net::MAX_BODY_BYTES).and_then(
        |(mut file, meta)| {
            let bytes = crate::sharefs::read_limited(
                &mut file,
                super::net::MAX_BODY_BYTES,
                meta.len(),
                &|| {},
            )?;
            Ok((bytes, meta.modified()?))
        },
    );
    let (bytes, written) = match read {
        Ok(read) => read,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "cannot read an answer yet");
            return Ok(None);
        }
    };
    if serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_err() {
        // Still arriving (a copy tool writing in place): read it again on the next look.
        return Ok(None);
    }
    if let Err(e) = std::fs::remove_file(&path) {
        tracing::warn!(file = %path.display(), error = %e, "cannot delete an answer read");
    }
    Ok(Some((bytes, written)))
}

/// Writes `dir/name` safely: a `.`-name in the same folder, synced, renamed, the folder synced.
/// An existing file of that name is left as it is (the same request, already there). Returns
/// the new file's modification time (the file server's clock at the write), `None` when it was
/// there already.
pub(crate) fn write_file(
    dir: &Path,
    name: &str,
    bytes: &[u8],
) -> std::io::Result<Option<std::time::SystemTime>> {
    let target = dir.join(name);
    if target.exists() {
        return Ok(None);
    }
    // A new file under a name nobody can plant a link at first: the share is writable by others.
    let temp = crate::sharefs::temp_name(dir, name);
    let result = (|| {
        let mut file = crate::sharefs::create_new(&temp, RELAY_FILE_MODE)?;
        std::io::Write::write_all(&mut file, bytes)?;
        file.sync_all()?;
        let written = file.metadata()?.modified()?;
        drop(file);
        std::fs::rename(&temp, &target)?;
        std::fs::File::open(dir)?.sync_all()?;
        Ok(Some(written))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// The start of this agent's request ids: its name made safe (at most 31 characters).
fn id_prefix(name: &str) -> String {
    let prefix: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(31)
        .collect();
    if prefix.is_empty() {
        "agent".to_string()
    } else {
        prefix
    }
}

/// The start of the request ids of a `--once` or `--check` run: its name made safe (at most 26
/// characters), then `-once`. Its files (`claim-<name>-once-<hex>.json`) are its own: the agent
/// running under the same name takes back only `claim-<name>-<hex>.json` when it starts, and
/// the one-shot run takes back nothing, so neither touches the other's claim.
fn one_shot_prefix(name: &str) -> String {
    let mut prefix = id_prefix(name);
    prefix.truncate(26);
    format!("{prefix}-once")
}

/// A new request id: the agent's name made safe, a dash, a UUID v7 in 32 hex digits; at most 64
/// characters of `[A-Za-z0-9_-]`. A v7 UUID starts with the time in milliseconds (then random
/// bits, kept increasing within the process), so one agent's relay files sort by time in a
/// listing.
#[cfg(test)]
pub(crate) fn new_id(name: &str) -> String {
    new_id_with(&id_prefix(name))
}

/// A new request id after `prefix` (from [`id_prefix`] or [`one_shot_prefix`]).
fn new_id_with(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::now_v7().simple())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Page, ResultStatus, decode_request, is_valid_id};
    use serde_json::value::RawValue;

    #[test]
    fn ids_fit_the_protocol() {
        for name in ["agent-1", "хост.example.org", "", &"x".repeat(100)] {
            let id = new_id(name);
            assert!(is_valid_id(&id), "{id}");
        }
        assert!(new_id("agent-1").starts_with("agent-1-"));
        for name in ["agent-1", &"x".repeat(100)] {
            let id = new_id_with(&one_shot_prefix(name));
            assert!(is_valid_id(&id), "{id}");
        }
        assert_ne!(new_id("a"), new_id("a"));
        // Time-ordered: later ids sort after earlier ones, and carry a v7 UUID.
        let ids: Vec<String> = (0..200).map(|_| new_id("agent-1")).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        let uuid = uuid::Uuid::parse_str(&ids[0]["agent-1-".len()..]).expect("a UUID");
        assert_eq!(uuid.get_version_num(), 7);
    }

    #[test]
    fn a_report_is_written_as_the_hub_reads_it() {
        let issues = vec![
            RawValue::from_string(r#"{"id":"1","key":"A-1","fields":{}}"#.into())
                .unwrap()
                .into(),
        ];
        let request = ReportRequest {
            envelope: Envelope {
                id: "r1".into(),
                agent: "a".into(),
                sent_at: "2026-11-29T10:00:00.000000Z".into(),
                token: Some("t".into()),
            },
            results: vec![CommandResult {
                command_id: 4,
                delivery: 1,
                status: ResultStatus::Progress,
                result: None,
                error: None,
                jira_calls: 1,
                rate_limited: 0,
                finished_at: None,
                page: Some(Page {
                    start_at: 0,
                    total: None,
                    issues,
                }),
                not_before_seconds: None,
                sent: None,
                refused: None,
            }],
        };
        let bytes = serde_json::to_vec(&Outgoing {
            kind: Kind::Report,
            body: &request,
        })
        .unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.contains(r#""kind":"report""#), "{text}");
        assert!(
            text.contains(r#"{"id":"1","key":"A-1","fields":{}}"#),
            "raw issues stay as they are"
        );
        let decoded = decode_request(&bytes).unwrap();
        assert_eq!(decoded, crate::protocol::AgentRequest::Report(request));
    }

    #[test]
    fn the_share_is_hostile_ground_for_the_agent_too() {
        let home = tempfile::tempdir().unwrap();
        let secret = home.path().join("agent_token");
        std::fs::write(&secret, b"precious").unwrap();
        let dir = tempfile::tempdir().unwrap();
        // A link at the temporary name the agent used to write through (its process id).
        std::os::unix::fs::symlink(
            &secret,
            dir.path()
                .join(format!(".claim-x.json.{}.tmp", std::process::id())),
        )
        .unwrap();
        write_file(dir.path(), "claim-x.json", b"{}").unwrap();
        assert_eq!(std::fs::read(&secret).unwrap(), b"precious");
        assert_eq!(
            std::fs::read(dir.path().join("claim-x.json")).unwrap(),
            b"{}"
        );
        // Answers that are a link, a FIFO or a link to an endless device are not read.
        std::os::unix::fs::symlink(&secret, dir.path().join("link.json")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.json")).unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            dir.path().join("fifo.json"),
            rustix::fs::Mode::from_raw_mode(0o666),
        )
        .unwrap();
        for name in ["link.json", "zero.json", "fifo.json"] {
            assert_eq!(take_answer(dir.path(), name).unwrap(), None, "{name}");
        }
        assert_eq!(std::fs::read(&secret).unwrap(), b"precious");
    }

    #[test]
    fn answers_seen_late_are_timed_on_the_file_servers_clock() {
        let server = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let skew = Duration::from_secs(200);
        // The agent's clock as the file server's, 200 s ahead of it, 200 s behind it.
        for local in [server, server + skew, server - skew] {
            let mut share = ShareTiming::default();
            share.seen(local, server);
            assert_eq!(share.delay(), None, "no clock learnt yet");
            share.clock = Some((local, server));
            // An answer the hub wrote 5 s later, found by the agent 20 s after that.
            let written = server + Duration::from_secs(5);
            share.seen(local + Duration::from_secs(25), written);
            assert_eq!(share.delay(), Some(Duration::from_secs(20)), "{local:?}");
        }
    }

    #[test]
    fn files_are_written_whole_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        write_file(dir.path(), "claim-x.json", b"{}").unwrap();
        write_file(dir.path(), "claim-x.json", b"{\"other\": 1}").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("claim-x.json")).unwrap(),
            b"{}"
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["claim-x.json"]);
        assert_eq!(
            take_answer(dir.path(), "claim-x.json").unwrap().unwrap().0,
            b"{}"
        );
        assert!(
            !dir.path().join("claim-x.json").exists(),
            "an answer read is deleted"
        );
        std::fs::write(dir.path().join("half.json"), b"{\"kind\": ").unwrap();
        assert_eq!(take_answer(dir.path(), "half.json").unwrap(), None);
        assert!(dir.path().join("half.json").exists());
    }

    #[test]
    fn a_new_run_takes_back_only_its_own_name_s_waiting_claims() {
        let dir = tempfile::tempdir().unwrap();
        let hex = "0123456789abcdef0123456789abcdef";
        let ours = format!("claim-agent-1-{hex}.json");
        let kept = [
            format!("claim-agent-1-x-{hex}.json"),
            format!("claim-agent-10-{hex}.json"),
            format!("report-agent-1-{hex}.json"),
            format!("claim-agent-1-{hex}.json.part"),
            // A `--once` or `--check` run of the same name, beside it.
            format!("claim-{}-{hex}.json", one_shot_prefix("agent-1")),
        ];
        for name in kept.iter().chain([&ours]) {
            std::fs::write(dir.path().join(name), b"{}").unwrap();
        }
        forget_stale_claims(dir.path(), "agent-1");
        assert!(
            !dir.path().join(&ours).exists(),
            "its own claim is taken back"
        );
        for name in &kept {
            assert!(dir.path().join(name).exists(), "{name} is not its claim");
        }
        assert_eq!(new_id("agent-1").len(), "agent-1-".len() + 32);
    }

    /// A share the agent may not write to is named a permission problem (the OS's
    /// words quoted, the mode and group it needs), never «is the share mounted?», which is
    /// said for a folder that is not there.
    #[test]
    fn an_inbox_the_agent_may_not_write_is_named_a_permission_problem() {
        let inbox = Path::new("/srv/jira-bridge/inbox");
        let denied = std::io::Error::from_raw_os_error(13);
        let message = inbox_write_failure(inbox, &denied);
        assert!(
            message.starts_with("Нет права писать в папку обмена /srv/jira-bridge/inbox: «Permission denied (os error 13)»"),
            "{message}"
        );
        assert!(message.contains("2770"), "{message}");
        assert!(!message.contains("смонтирован"), "{message}");
        let missing = std::io::Error::from_raw_os_error(2);
        let message = inbox_write_failure(inbox, &missing);
        assert!(
            message.starts_with(
                "Нет папки /srv/jira-bridge/inbox: «No such file or directory (os error 2)»"
            ) && message.contains("не смонтирована"),
            "{message}"
        );
    }

    #[test]
    fn refusals_in_the_hubs_words() {
        assert_eq!(
            refusal_message(br#"{"kind":"error","error":{"code":"token","field":"token","message":"bad token"}}"#),
            "token: bad token"
        );
        assert_eq!(refusal_message(b"nope"), "nope");
    }
}
