//! The agent (`jira-hub agent --config FILE`): the program inside Jira's network. It heartbeats,
//! claims commands from the hub (through the shared folder or the hub's HTTP API), runs them
//! against Jira one paced call at a time, and reports each result as soon as it is known.
//!
//! It shares only the wire types ([`crate::protocol`]) and pure rules ([`crate::domain`]) with
//! the hub: it never touches the hub's store, service, relay or HTTP server.
//!
//! - [`config`]: the config file, secrets, defaults.
//! - `net`: the HTTP client (TLS roots, proxy, timeouts).
//! - `jira_api`: paced Jira calls, retries, error words, the two searches.
//! - `jql`: the JQL the agent writes.
//! - `commands`: what each command does in Jira, without duplicates.
//! - `transport`: the relay folder and HTTP ways to the hub.

pub(crate) mod answer;
pub(crate) mod commands;
pub(crate) mod config;
pub(crate) mod conflict;
mod give_back;
pub(crate) mod jira_api;
pub(crate) mod jql;
pub(crate) mod net;
pub(crate) mod preflight;
pub(crate) mod refused;
mod running;
#[cfg(test)]
mod testkit;
pub(crate) mod text;
pub(crate) mod transport;
pub(crate) mod wait;

pub(crate) use config::AgentConfig;

use crate::clock::{Clock, SystemClock};
use crate::protocol::{ClaimedCommand, RefusedPath};
use commands::{AgentSettings, Outcome};
use config::JiraAuth;
use give_back::{GivenBack, safety_margin};
use jira_api::{Jira, JiraError};
use running::LeaseKeeper;
use std::io::Write as _;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use transport::{HubLink, LinkError};
use wait::{Notifier, Waits};

/// Runs the agent until `shutdown` is set: heartbeats, claims, executes, reports.
/// `path`: the config file, read again for new credentials after Jira refused the ones in use.
pub(crate) fn run(
    config: AgentConfig,
    path: &std::path::Path,
    shutdown: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let path = path.to_path_buf();
    let source: CredentialSource = Box::new(move || match AgentConfig::load(&path) {
        Ok(config) => Some(authorization(&config.jira_auth)),
        Err(error) => {
            tracing::warn!(%error, "the config could not be read again for new credentials");
            None
        }
    });
    Agent::new(&config, shutdown, Arc::new(SystemClock), Notifier::Systemd)?
        .with_source(source)
        .run(None)
}

/// Reads the agent's credential source again (the config, `$CREDENTIALS_DIRECTORY`, a token or
/// password file): the `Authorization` value it gives now, `None` when it cannot be read.
type CredentialSource = Box<dyn Fn() -> Option<String>>;

/// The `Authorization` value of the configured credentials.
fn authorization(auth: &JiraAuth) -> String {
    match auth {
        JiraAuth::Basic { user, password } => net::basic_auth(user, password.expose()),
        JiraAuth::Bearer(token) => format!("Bearer {}", token.expose()),
    }
}

/// One cycle: a heartbeat, a claim, its commands executed and reported; then returns.
pub(crate) fn run_once(mut config: AgentConfig, shutdown: Arc<AtomicBool>) -> anyhow::Result<()> {
    // One cycle answers at once: with nothing queued it must not wait for work.
    config.claim_wait = Duration::ZERO;
    config.one_shot = true;
    Agent::new(&config, shutdown, Arc::new(SystemClock), Notifier::Systemd)?.run(Some(1))
}

/// `--check`: the preflight against Jira ([`preflight`]); writes nothing to Jira. Returns
/// whether every check passed.
pub(crate) fn check(mut config: AgentConfig, shutdown: Arc<AtomicBool>) -> anyhow::Result<bool> {
    // The settings come with a claim that takes nothing and must not wait for work.
    config.claim_wait = Duration::ZERO;
    config.one_shot = true;
    config.hub_answer_limit = Some(preflight::HUB_ANSWER_LIMIT);
    let mut agent = Agent::new(&config, shutdown, Arc::new(SystemClock), Notifier::Systemd)?;
    // Credentials Jira refused (here, or in the service's run) are not sent by the check either.
    let refused = agent.rejected.as_ref().and(agent.jira_down.clone());
    let lines = preflight::run(&mut agent.jira, &agent.hub, refused);
    if let Some(reason) = agent.jira.take_login_refused() {
        agent.reject(&reason);
    }
    // A hub that did not answer the claim is not asked again to take the outcome.
    let hub_answered = lines
        .iter()
        .any(|line| line.name == preflight::HUB_CHECK && line.ok);
    let ok = lines.iter().all(|line| line.ok);
    // The outcome goes to the hub with one heartbeat (best effort: the exit code is the checks').
    let jira = lines.iter().find(|line| line.name == "jira");
    let jira_ok = jira.is_some_and(|line| line.ok);
    let last_error = jira
        .filter(|line| !line.ok)
        .map(|line| format!("serverInfo: {}", line.detail));
    let report = preflight::report(&lines, agent.waits.wall());
    // A failed preflight of Jira is the agent's own probe.
    let class = (!jira_ok).then_some("probe");
    let sent = hub_answered.then(|| {
        agent
            .hub
            .heartbeat_with(jira_ok, last_error, Some(report), class)
    });
    drop(agent);
    if let Some(Err(error)) = sent {
        tracing::warn!("Хабу не удалось передать итог проверки: «{error}»");
    }
    // The table last, after everything the run logged: one line per check.
    let mut out = std::io::stdout().lock();
    for line in &lines {
        writeln!(out, "{line}")?;
    }
    Ok(ok)
}

/// The agent in a test's hands: a config's text (as the file would hold it), the clock its waits
/// go through, a datagram socket that receives its watchdog pings, and how many claims it makes
/// before it returns (`None`: until `shutdown`).
#[doc(hidden)]
pub fn run_for_test(
    config_text: &str,
    clock: Arc<dyn Clock>,
    notify_socket: Option<std::path::PathBuf>,
    shutdown: Arc<AtomicBool>,
    claims: Option<u32>,
) -> anyhow::Result<()> {
    let env = config::Environment { var: &|_| None };
    let config = AgentConfig::from_text(config_text, &env)?;
    let notifier = notify_socket.map_or(Notifier::Systemd, Notifier::Socket);
    // The text names its secret files (`jira_password_file`, `jira_token_file`): read again,
    // they give the credentials a person changed.
    let text = config_text.to_string();
    let source: CredentialSource = Box::new(move || {
        let env = config::Environment { var: &|_| None };
        AgentConfig::from_text(&text, &env)
            .ok()
            .map(|config| authorization(&config.jira_auth))
    });
    Agent::new(&config, shutdown, clock, notifier)?
        .with_source(source)
        .run(claims)
}

/// Tells systemd's watchdog the agent is alive (at most once a second; nothing without systemd).
pub(crate) fn alive() {
    static LAST: Mutex<Option<Instant>> = Mutex::new(None);
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    let Ok(mut last) = LAST.lock() else { return };
    if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Watchdog]);
        *last = Some(Instant::now());
    }
}

/// The longest pause between two probes of a Jira that cannot be reached.
const MAX_PROBE_BACKOFF: Duration = Duration::from_secs(60);
/// How long a probe that passed stands for the heartbeat's `jira_ok` while nothing fails: the
/// agent probes `serverInfo` once in this time rather than at every heartbeat
/// (12 calls an idle hour instead of 60), which also keeps Jira's clock offset this fresh. A call
/// that fails holds the agent and is reported at once, so only a Jira that fails while nothing
/// asks it shows late, by this much and a heartbeat at most.
const JIRA_ANSWER_STANDS: Duration = Duration::from_secs(300);
/// How long a command given back because Jira is held stays out of the queue: short, so that
/// another agent (or this one, once its probe succeeds) takes it soon.
const HELD_NOT_BEFORE: Duration = Duration::from_secs(10);

struct Agent {
    jira: Jira,
    hub: Arc<HubLink>,
    waits: Arc<Waits>,
    settings: AgentSettings,
    settings_version: i64,
    last_error: Option<String>,
    /// When the last heartbeat went (monotonic, [`Waits::now`]).
    last_heartbeat: Option<Duration>,
    heartbeat_every: Duration,
    idle_poll: Duration,
    max_commands: u32,
    page_size: u32,
    search_lag: Option<Duration>,
    name: String,
    release_grace: Duration,
    request_timeout: Duration,
    /// The last claim answer's `created_at` (the hub's clock) and when it arrived.
    claimed: Option<(String, Instant)>,
    /// The hub's `max_report_bytes` from the last claim answer.
    max_report_bytes: Option<u64>,
    /// The lease the hub gave with the last claim (`None`: an older hub that does not say).
    lease: Option<Duration>,
    /// Why Jira is held (its credentials are refused, or it cannot be reached), while it is:
    /// the agent claims nothing meanwhile, and only an authenticated probe (`GET myself`)
    /// ends it.
    jira_down: Option<String>,
    /// The class of `jira_down`'s cause, told to the hub with each heartbeat while it holds
    /// (`credentials`, `unreachable`, `probe`: [`answer::Cause::class`]).
    jira_down_class: &'static str,
    /// Probes of an unreachable Jira so far (for their backoff).
    probes: u32,
    /// When the heartbeat's `serverInfo` last passed (monotonic, [`Waits::now`]). Within
    /// [`JIRA_ANSWER_STANDS`] of it, and nothing held since, a heartbeat reports `jira_ok`
    /// without a probe.
    jira_answered: Option<Duration>,
    /// The path refused in the command being executed while `GET myself` passed, for its
    /// give-back report (`refused`): the hub hands it to the next delivery, and the agent keeps
    /// no count of its own across deliveries.
    refused: Option<RefusedPath>,
    /// Where new credentials come from (`None`: `--once` and `--check`, which do not wait).
    source: Option<CredentialSource>,
    /// Jira's login refused the credentials in use: they are not sent again until the source
    /// gives other ones, whatever the time, the restarts or the `--check`s between (each failed
    /// login counts toward Data Center's CAPTCHA and the directory's lockout:
    /// docs/jira-field-notes.md, "Failed logins count").
    rejected: Option<Rejected>,
    /// The give-backs of each command so far, kept only while the hub does not bound them
    /// (it sends no `previous_release`: the previous release), by command id.
    given_back: std::collections::HashMap<i64, GivenBack>,
    /// Where the refused secret's fingerprint is kept across restarts and `--check`.
    refused_store: refused::RefusedStore,
    /// The secrets came from systemd's `$CREDENTIALS_DIRECTORY` (copied at the service's start).
    systemd_credentials: bool,
    /// The hub refuses the agent token: nothing is claimed, and the hub is asked again (one
    /// heartbeat) after a pause that doubles up to [`HUB_REFUSED_MAX`].
    hub_refused: Option<HubRefused>,
}

/// The hub's refusal of the agent token, while it lasts.
struct HubRefused {
    reason: String,
    /// Requests refused in a row.
    tries: u32,
    /// When the hub may be asked again (monotonic, [`Waits::now`]).
    next: Duration,
}

/// The longest pause between two requests to a hub that refuses the agent token: a rotated token
/// costs the hub about 20 refused requests an hour (a `rejected/` file each, at most one a
/// minute kept), not one every `idle_poll`.
const HUB_REFUSED_MAX: Duration = Duration::from_secs(300);

/// The pause after the `tries`-th refusal in a row: 2 s, 4 s, 8 s … at most [`HUB_REFUSED_MAX`].
fn hub_refused_wait(tries: u32) -> Duration {
    Duration::from_secs(1u64 << tries.clamp(1, 9)).min(HUB_REFUSED_MAX)
}

/// Credentials Jira's login refused.
struct Rejected {
    /// The `Authorization` value refused.
    authorization: String,
}

/// The words the hub shows for refused credentials (it adds «с <time>»). Under systemd the
/// secrets were copied at the service's start (`LoadCredential=`, systemd.exec(5)): a file
/// changed in `/etc/credstore` reaches the agent only after a restart, and the words say so.
fn rejected_words(reason: &str, systemd: bool) -> String {
    let restart = if systemd {
        "; секреты службы копируются при её запуске: после замены файла в /etc/credstore перезапустите её (systemctl restart jira-hub-agent)"
    } else {
        ""
    };
    format!(
        "Учётные данные отвергнуты, агент ждёт новых и не отправляет эти снова, пока их не заменят{restart}: {reason}"
    )
}

impl Agent {
    fn new(
        config: &AgentConfig,
        shutdown: Arc<AtomicBool>,
        clock: Arc<dyn Clock>,
        notifier: Notifier,
    ) -> anyhow::Result<Agent> {
        let client = net::Client::new(config)?;
        let authorization = authorization(&config.jira_auth);
        let waits = Arc::new(Waits::new(clock, shutdown, notifier));
        let jira = Jira::new(
            client.clone(),
            &config.jira_url,
            config::Secret::new(authorization),
            config.deployment,
            config.max_retries,
            waits.clone(),
        );
        let hub = Arc::new(HubLink::new(config, client, waits.clone()));
        tracing::info!(version = transport::AGENT_VERSION, "{}", config.describe());
        for (key, source) in &config.secret_sources {
            tracing::info!(secret = key, from = %source, "where the secret comes from");
        }
        let refused_store = refused::RefusedStore::new(config.state_dir.clone());
        let remembered = refused_store.refused(jira.authorization());
        let mut agent = Agent {
            jira,
            hub,
            waits,
            settings: AgentSettings::default(),
            settings_version: 0,
            last_error: None,
            last_heartbeat: None,
            heartbeat_every: config.heartbeat,
            idle_poll: config.idle_poll,
            max_commands: config.max_commands,
            page_size: config.page_size,
            search_lag: config.search_lag,
            name: config.name.clone(),
            release_grace: config.release_grace,
            request_timeout: config.request_timeout,
            claimed: None,
            max_report_bytes: None,
            lease: None,
            jira_down: None,
            jira_down_class: "other",
            probes: 0,
            jira_answered: None,
            refused: None,
            source: None,
            rejected: None,
            given_back: std::collections::HashMap::new(),
            refused_store,
            systemd_credentials: config.systemd_credentials,
            hub_refused: None,
        };
        if let Some(remembered) = remembered {
            // Refused before this run (the service, or a `--check`): held from the start, the
            // same secret never sent.
            let words = rejected_words(
                &format!(
                    "{} (отвергнуты {})",
                    remembered.reason, remembered.refused_at
                ),
                agent.systemd_credentials,
            );
            tracing::warn!(refused_at = %remembered.refused_at, reason = %remembered.reason, "Jira refused these credentials before: they are not sent until they change");
            agent.rejected = Some(Rejected {
                authorization: agent.jira.authorization().to_string(),
            });
            agent.jira_down = Some(words.clone());
            agent.last_error = Some(words);
        }
        Ok(agent)
    }

    fn with_source(mut self, source: CredentialSource) -> Agent {
        self.source = Some(source);
        self
    }

    /// Jira's login refused the credentials in use: held, and they are not sent again until
    /// they change; their fingerprint is kept in the state folder for the next runs.
    fn reject(&mut self, reason: &str) -> String {
        let words = rejected_words(reason, self.systemd_credentials);
        if self.rejected.is_none() {
            tracing::warn!(%reason, "Jira refused the agent's credentials: they are not sent again until they change (the config and secret files are read again)");
        }
        self.refused_store.remember(
            self.jira.authorization(),
            &crate::domain::time::format_utc(self.waits.wall()),
            reason,
        );
        self.rejected = Some(Rejected {
            authorization: self.jira.authorization().to_string(),
        });
        self.jira_down = Some(words.clone());
        self.jira_down_class = answer::Cause::Rejected.class();
        self.last_error = Some(words.clone());
        words
    }

    /// While refused credentials are held back: whether a probe may go now. New credentials from
    /// the source are taken (and probed at once); the same ones never.
    fn may_probe_credentials(&mut self) -> bool {
        let Some(rejected) = &self.rejected else {
            return true;
        };
        let current = self.source.as_ref().and_then(|source| source());
        if let Some(current) = current.filter(|c| *c != rejected.authorization) {
            tracing::info!("the credential source gives new credentials: probing Jira with them");
            self.jira.set_authorization(config::Secret::new(current));
            self.rejected = None;
            return true;
        }
        false
    }

    fn stopping(&self) -> bool {
        self.waits.stopping()
    }

    /// The hub refused the agent token: the next request goes after a growing pause; one log
    /// line when the refusal begins or its words change, none for each repeat.
    fn hub_refuses(&mut self, reason: String) {
        let tries = self.hub_refused.as_ref().map_or(0, |r| r.tries) + 1;
        let wait = hub_refused_wait(tries);
        if self.hub_refused.as_ref().is_none_or(|r| r.reason != reason) {
            tracing::warn!(%reason, "the hub refuses the agent token (agent_token): nothing is claimed; the hub is asked again after a pause that doubles up to 5 min");
        }
        self.hub_refused = Some(HubRefused {
            reason,
            tries,
            next: self.waits.now() + wait,
        });
    }

    /// The hub took a request: a refusal of the token is over.
    fn hub_accepts(&mut self) {
        if let Some(refused) = self.hub_refused.take() {
            tracing::info!(
                refused = refused.tries,
                "the hub takes the agent token again: claiming commands again"
            );
        }
    }

    fn heartbeat_due(&self) -> bool {
        let now = self.waits.now();
        self.last_heartbeat
            .is_none_or(|t| now.saturating_sub(t) >= self.heartbeat_every)
    }

    /// `claims`: return after that many claims (`None`: run until stopped).
    fn run(mut self, claims: Option<u32>) -> anyhow::Result<()> {
        // Ready once the config is good and the clients are built: an unmounted share or a hub
        // that does not answer yet is waited for (and logged) while running, not by failing the
        // unit's start; the loop keeps the watchdog fed meanwhile.
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
        let mut claimed = 0u32;
        while !self.stopping() && claims.is_none_or(|n| claimed < n) {
            self.waits.alive();
            if let Some(refused) = &self.hub_refused {
                if self.source.is_none() {
                    // `--once`: one cycle, and the hub refused it.
                    anyhow::bail!("хаб не принимает токен агента: {}", refused.reason);
                }
                // Only a heartbeat goes, once the pause is over: it tells whether the hub takes
                // the token again.
                let wait = refused.next.saturating_sub(self.waits.now());
                self.waits.sleep(wait);
                if self.stopping() {
                    break;
                }
                self.heartbeat();
                continue;
            }
            // Refused credentials that did not change are not probed: the hub hears of them at
            // the heartbeat's period, not at every look at their source.
            let renewed = self.rejected.is_some() && self.may_probe_credentials();
            if self.heartbeat_due()
                || (self.jira_down.is_some() && self.rejected.is_none())
                || renewed
            {
                self.heartbeat();
            }
            if self.stopping() {
                break;
            }
            if self.rejected.is_some() && self.source.is_none() {
                // `--once`: nothing will give other credentials to this run.
                anyhow::bail!("{}", self.jira_down.clone().unwrap_or_default());
            }
            if self.jira_down.is_some() {
                // Jira cannot be reached: commands stay queued at the hub (another agent, or
                // this one later, runs them), and Jira is probed again after a backoff.
                let wait = jira_api::backoff(self.probes)
                    .max(self.idle_poll)
                    .min(MAX_PROBE_BACKOFF.max(self.idle_poll));
                self.probes += 1;
                self.waits.sleep(wait);
                continue;
            }
            let ready_in = self.jira.ready_in();
            if ready_in > self.idle_poll {
                // Jira asked for a pause (a rate limit): nothing is claimed that would sit in
                // the agent's hands meanwhile; heartbeats go on.
                let to_heartbeat = self.last_heartbeat.map_or(Duration::ZERO, |t| {
                    (t + self.heartbeat_every).saturating_sub(self.waits.now())
                });
                self.waits
                    .sleep(ready_in.min(to_heartbeat.max(wait::FEED_EVERY)));
                continue;
            }
            let claimed_at = self.waits.now();
            let worked = self.cycle();
            claimed += 1;
            if claims.is_some_and(|n| claimed >= n) {
                break;
            }
            if !worked {
                // A claim the hub held while it had no work has waited already: the next one
                // goes at once; one answered at once (an older hub, an error) waits the rest.
                let rest = self
                    .idle_poll
                    .saturating_sub(self.waits.now().saturating_sub(claimed_at));
                self.waits.sleep(rest);
            }
        }
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
        tracing::info!("the agent stops");
        Ok(())
    }

    /// The probe for `jira_ok`, then the heartbeat message: `serverInfo` while Jira is used
    /// (it learns the deployment and the clock; its answer is classified like any other, so a
    /// 200 whose `X-Seraph-LoginReason` says the login failed holds the queue), the
    /// authenticated `GET myself` while it is held (a `serverInfo` answered anonymously proves
    /// nothing about the credentials). A rate-limited Jira is up (`jira_ok: true`, with a note);
    /// a held one is down, with exactly why. Within [`JIRA_ANSWER_STANDS`] of a probe that
    /// passed, and nothing held since, no probe goes: that answer stands.
    fn heartbeat(&mut self) {
        self.last_heartbeat = Some(self.waits.now());
        let mut note = None;
        let paused = (self.jira.ready_in() > Duration::ZERO)
            .then(|| self.jira.rate_limited().map(str::to_string))
            .flatten();
        let jira_ok = if let Some(limit) = paused {
            // Jira asked for a pause: a probe now would only break its rule. It is up, unless
            // the agent is held: held wins (the commands wait for the hold, not for the pause),
            // and the pause is added to why.
            note = Some(self.with_rate_limit(&limit));
            self.jira_down.is_none()
        } else if self.jira_down.is_some() && !self.may_probe_credentials() {
            // Refused credentials are not sent again: the hub is told, Jira is not asked.
            false
        } else if self.jira_down.is_none()
            && self
                .jira_answered
                .is_some_and(|at| self.waits.now().saturating_sub(at) < JIRA_ANSWER_STANDS)
        {
            // The probe passed moments ago and nothing failed since: its answer stands.
            true
        } else {
            let probe = if self.jira_down.is_some() {
                self.jira.probe_myself()
            } else {
                self.jira.server_info(false)
            };
            match probe {
                Ok(()) => {
                    // Who the agent is, asked once a run after the first probe that passed: a
                    // login refused there is a refusal like any other.
                    let refused = if self.jira_down.is_none() {
                        self.jira.learn_me()
                    } else {
                        None
                    };
                    if let Some(reason) = refused {
                        self.reject(&reason);
                        false
                    } else {
                        if self.jira_down.is_some() || self.jira_answered.is_none() {
                            // The credentials in use work: a refusal kept is history.
                            self.refused_store.forget();
                        }
                        if self.jira_down.take().is_some() {
                            tracing::info!("Jira answers again: claiming commands again");
                        } else {
                            // `serverInfo` answered (and gave Jira's clock): it stands a while.
                            self.jira_answered = Some(self.waits.now());
                        }
                        self.rejected = None;
                        self.probes = 0;
                        true
                    }
                }
                Err(JiraError::Stopped) => return,
                Err(JiraError::GiveBack(_)) => {
                    let limit = self.jira.rate_limited().unwrap_or("HTTP 429").to_string();
                    tracing::info!(%limit, "Jira rate limits the probe: it is up");
                    note = Some(self.with_rate_limit(&limit));
                    // A held agent's probe (`myself`) met the limit: the hold stands.
                    self.jira_down.is_none()
                }
                Err(JiraError::Held {
                    cause: answer::Cause::Rejected,
                    reason,
                }) => {
                    self.reject(&reason);
                    false
                }
                Err(error) => {
                    self.rejected = None;
                    let (reason, class) = match &error {
                        JiraError::Held { reason, cause } => (reason.clone(), cause.class()),
                        other if self.jira_down.is_some() => (format!("myself: {other}"), "probe"),
                        other => (format!("serverInfo: {other}"), "probe"),
                    };
                    self.jira_down_class = class;
                    if self.jira_down.as_deref() != Some(reason.as_str()) {
                        tracing::warn!(%reason, "Jira cannot be reached: no commands are claimed until it answers");
                    }
                    self.jira_down = Some(reason.clone());
                    self.last_error = Some(reason);
                    false
                }
            }
        };
        self.jira.take_counters();
        let last_error = note.or_else(|| self.last_error.clone());
        let class = (!jira_ok && self.jira_down.is_some()).then_some(self.jira_down_class);
        match self.hub.heartbeat(jira_ok, last_error, class) {
            Ok(()) => {
                self.hub_accepts();
                if jira_ok {
                    self.last_error = None;
                }
            }
            Err(LinkError::Stopped) => {}
            Err(LinkError::BadToken(reason)) => self.hub_refuses(reason),
            Err(error) => tracing::warn!(%error, "heartbeat"),
        }
    }

    /// What the heartbeat says of a rate limit: the limit, after why the agent is held when it
    /// is.
    fn with_rate_limit(&self, limit: &str) -> String {
        let limited = format!("Jira ограничивает частоту запросов: {limit}");
        match &self.jira_down {
            Some(why) => format!("{why}; {limited}"),
            None => limited,
        }
    }

    /// How long one command is expected to take, about (pacing and calls).
    fn per_command(&self) -> Duration {
        // The hub refuses a pacing whose command does not fit its lease by the same rule.
        Duration::from_millis(crate::domain::settings::command_needs_ms(u64::from(
            self.settings.pacing.min_interval_ms,
        )))
    }

    /// How many commands to ask for: no more than can be finished within the lease at this
    /// pacing (at least one); `max_commands` is the upper bound.
    fn claim_size(&self) -> u32 {
        let Some(lease) = self.lease else {
            return self.max_commands;
        };
        let usable = lease.saturating_sub(safety_margin(lease));
        let fits = usable.as_millis() / self.per_command().as_millis().max(1);
        u32::try_from(fits)
            .unwrap_or(u32::MAX)
            .clamp(1, self.max_commands.max(1))
    }

    /// One claim and its commands. Returns whether there was work.
    fn cycle(&mut self) -> bool {
        let answer = match self.hub.claim(self.settings_version, self.claim_size()) {
            Ok(answer) => {
                self.hub_accepts();
                answer
            }
            Err(LinkError::Stopped) => return false,
            Err(LinkError::BadToken(reason)) => {
                self.hub_refuses(reason);
                return false;
            }
            Err(error) => {
                tracing::warn!(%error, "claim");
                self.last_error = Some(error.to_string());
                return false;
            }
        };
        // The leases run from when the hub handed the commands out, which is when it answered: a
        // claim the hub held while it had no work (`claim_wait_seconds`) must not count its wait
        // against them. The answer's way back (a relay file, an HTTP body) is within the margin.
        let claimed_at = self.waits.now();
        self.claimed = Some((answer.created_at.clone(), Instant::now()));
        if let Some(settings) = &answer.settings {
            self.settings = AgentSettings::from_value(settings);
            self.settings_version = answer.settings_version;
            self.jira.set_min_interval(Duration::from_millis(u64::from(
                self.settings.pacing.min_interval_ms,
            )));
            tracing::info!(
                settings_version = self.settings_version,
                "settings from the hub"
            );
        }
        self.max_report_bytes = answer.max_report_bytes;
        self.lease = answer
            .lease_seconds
            .map(|s| Duration::from_secs(u64::from(s)));
        if answer.pause_seconds > 0 {
            tracing::info!(
                pause_seconds = answer.pause_seconds,
                "the hub asks for a pause before the next Jira call"
            );
            self.jira
                .pause(Duration::from_secs(u64::from(answer.pause_seconds)));
        }
        if answer.commands.is_empty() {
            return false;
        }
        let mut deadline = self.lease.map(|lease| claimed_at + lease);
        for (index, command) in answer.commands.iter().enumerate() {
            if self.heartbeat_due() {
                self.heartbeat();
            }
            if self.stopping() {
                tracing::info!(
                    command = command.id,
                    "stopping: the command is left for the hub to hand out again"
                );
                break;
            }
            if let Some(reason) = self.jira_down.clone() {
                self.give_back(&answer.commands[index..], &reason, HELD_NOT_BEFORE);
                break;
            }
            if let (Some(lease), Some(deadline)) = (self.lease, deadline) {
                // The command's own lease runs from the claim: it is started only when what it
                // needs (the pacer's or Jira's wait, and its calls) fits in what is left.
                let needs = self.jira.ready_in() + self.per_command() + safety_margin(lease);
                let left = deadline.saturating_sub(self.waits.now());
                if left < needs {
                    let reason = format!(
                        "до конца аренды {} с, а команде нужно около {} с",
                        left.as_secs(),
                        needs.as_secs()
                    );
                    self.give_back(&answer.commands[index..], &reason, Duration::from_secs(1));
                    break;
                }
            }
            // The rest of the claim is kept leased with the command: a long wait or look inside
            // it (a lost answer's grace) must not let them lapse.
            let keeper = self.lease.zip(deadline).map(|(lease, deadline)| {
                Arc::new(LeaseKeeper {
                    hub: self.hub.clone(),
                    command_id: command.id,
                    delivery: command.delivery,
                    rest: Mutex::new(
                        answer.commands[index + 1..]
                            .iter()
                            .map(|c| (c.id, c.delivery))
                            .collect(),
                    ),
                    lease,
                    deadline: Mutex::new(deadline),
                    every: self.heartbeat_every,
                    sent: Mutex::new(self.waits.now()),
                })
            });
            self.waits
                .hold(keeper.clone().map(|k| k as Arc<dyn wait::Lease>));
            let ended = self.execute(command);
            self.waits.hold(None);
            if let Some(keeper) = &keeper {
                // Renewed with the command, the rest's leases end when its last renewal says.
                deadline = Some(keeper.deadline());
            }
            if let Some((mut reason, held, not_before)) = ended {
                if held == Some(answer::Cause::Rejected) {
                    reason = self.reject(&reason);
                } else if let Some(cause) = held {
                    tracing::warn!(%reason, "Jira is held: no commands are claimed until an authenticated probe succeeds");
                    self.jira_down = Some(reason.clone());
                    self.jira_down_class = cause.class();
                    self.last_error = Some(reason.clone());
                }
                // The command itself was reported; the rest of the claim was never started.
                self.give_back(&answer.commands[index + 1..], &reason, not_before);
                break;
            }
        }
        true
    }

    /// A command met a credentials answer (a 401, a login redirect, an anonymous answer): one path's
    /// refusal or the credentials'? The failing read is probed again when it was
    /// a read (a passing probe: the command goes back, nothing held); then `GET myself`: when it
    /// passes, the credentials work and this path alone is refused (Cloud's scoped token
    /// «Unauthorized; scope does not match», DC 9.x's redirect of an unknown REST path). The
    /// first time the command goes back, uncounted, naming the path to the hub; when the hub
    /// says the previous delivery went back for the same method and path, the command fails with
    /// Jira's words. Only a probe that fails the same way holds the queue.
    fn credentials_or_path(&mut self, command: &ClaimedCommand, reason: String) -> Outcome {
        let held = |reason: String| Outcome::GiveBack {
            reason,
            held: Some(answer::Cause::Credentials),
        };
        let Some(refusal) = self.jira.take_refusal() else {
            return held(reason);
        };
        if refusal.method == "GET" {
            match self.jira.probe_read(&refusal.path) {
                Ok(()) => {
                    tracing::info!(path = %jira_api::path_only(&refusal.path), "a read refused for credentials passes when probed: the command goes back, nothing is held");
                    return Outcome::GiveBack {
                        reason: format!("{reason}; повторное чтение прошло"),
                        held: None,
                    };
                }
                Err(JiraError::Held {
                    cause: answer::Cause::Credentials,
                    ..
                }) => {}
                Err(JiraError::Stopped) => return Outcome::Stopped,
                Err(JiraError::Held { cause, reason }) => {
                    return Outcome::GiveBack {
                        reason,
                        held: Some(cause),
                    };
                }
                Err(_) => return held(reason),
            }
        }
        match self.jira.probe_myself() {
            Ok(()) => {
                let path = jira_api::path_only(&refusal.path);
                let words = format!(
                    "Jira отказала в доступе к {} {path} (HTTP {}): «{}», хотя те же учётные данные принимает (GET /rest/api/2/myself проходит)",
                    refusal.method, refusal.status, refusal.words
                );
                let this = RefusedPath {
                    method: refusal.method.clone(),
                    path: path.to_string(),
                    status: refusal.status,
                };
                // Once may be a refusal that passed (credentials refused for a moment): the
                // command goes back, uncounted, and runs again soon. The same call refused in
                // the delivery after such a give-back fails it (never a silent loop); the hub
                // says which call the give-back was for, so a restarted agent or another one
                // decides the same. A give-back for anything else starts afresh.
                // A hub that does not bound give-backs sends no `previous_release`: the agent's
                // own memory of the command's last give-back stands in for it.
                let own = self
                    .hub
                    .own_give_back_bound()
                    .and_then(|_| self.given_back.get(&command.id))
                    .and_then(|given| given.refused.as_ref());
                let again = command
                    .previous_release
                    .as_ref()
                    .and_then(|previous| previous.refused.as_ref())
                    .or(own)
                    .is_some_and(|previous| previous.same_call(&this));
                if !again {
                    tracing::warn!(method = %refusal.method, %path, status = refusal.status, words = %refusal.words, "one path is refused while the credentials work: the command goes back once, nothing is held");
                    self.refused = Some(this);
                    return Outcome::GiveBack {
                        reason: format!("{words}; команда будет выполнена ещё раз"),
                        held: None,
                    };
                }
                tracing::warn!(method = %refusal.method, %path, status = refusal.status, words = %refusal.words, "one path is refused again while the credentials work: the command fails, nothing is held");
                Outcome::Failed(format!(
                    "{words}, второй раз подряд: у них нет прав на этот путь (например, области токена) или такого пути в этой Jira нет"
                ))
            }
            Err(JiraError::Stopped) => Outcome::Stopped,
            Err(JiraError::Held { cause, reason }) => Outcome::GiveBack {
                reason,
                held: Some(cause),
            },
            Err(_) => held(reason),
        }
    }
}
