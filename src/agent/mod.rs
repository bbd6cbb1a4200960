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

pub(crate) mod commands;
pub(crate) mod config;
pub(crate) mod jira_api;
pub(crate) mod jql;
pub(crate) mod net;
pub(crate) mod transport;

pub(crate) use config::AgentConfig;

use crate::protocol::{ClaimedCommand, CommandResult, Page, ResultStatus};
use commands::{AgentSettings, Executor, Outcome};
use config::JiraAuth;
use jira_api::{Jira, JiraError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use transport::{HubLink, LinkError};

/// Runs the agent until `shutdown` is set: heartbeats, claims, executes, reports.
pub(crate) fn run(config: AgentConfig, shutdown: Arc<AtomicBool>) -> anyhow::Result<()> {
    Agent::new(&config, shutdown)?.run(false)
}

/// One cycle: a heartbeat, a claim, its commands executed and reported; then returns.
pub(crate) fn run_once(mut config: AgentConfig, shutdown: Arc<AtomicBool>) -> anyhow::Result<()> {
    // One cycle answers at once: with nothing queued it must not wait for work.
    config.claim_wait = Duration::ZERO;
    Agent::new(&config, shutdown)?.run(true)
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

struct Agent {
    jira: Jira,
    hub: HubLink,
    shutdown: Arc<AtomicBool>,
    settings: AgentSettings,
    settings_version: i64,
    last_error: Option<String>,
    last_heartbeat: Option<Instant>,
    heartbeat_every: Duration,
    idle_poll: Duration,
    max_commands: u32,
    page_size: u32,
    max_retries: u32,
    search_lag: Option<Duration>,
    name: String,
    release_grace: Duration,
    request_timeout: Duration,
    /// The last claim answer's `created_at` (the hub's clock) and when it arrived.
    claimed: Option<(String, Instant)>,
    /// The hub's `max_report_bytes` from the last claim answer (issue 19).
    max_report_bytes: Option<u64>,
}

impl Agent {
    fn new(config: &AgentConfig, shutdown: Arc<AtomicBool>) -> anyhow::Result<Agent> {
        let client = net::Client::new(config)?;
        let authorization = match &config.jira_auth {
            JiraAuth::Basic { user, password } => net::basic_auth(user, password.expose()),
            JiraAuth::Bearer(token) => format!("Bearer {}", token.expose()),
        };
        let jira = Jira::new(
            client.clone(),
            &config.jira_url,
            config::Secret::new(authorization),
            config.deployment,
            config.max_retries,
            shutdown.clone(),
        );
        let hub = HubLink::new(config, client, shutdown.clone());
        tracing::info!(version = transport::AGENT_VERSION, "{}", config.describe());
        Ok(Agent {
            jira,
            hub,
            shutdown,
            settings: AgentSettings::default(),
            settings_version: 0,
            last_error: None,
            last_heartbeat: None,
            heartbeat_every: config.heartbeat,
            idle_poll: config.idle_poll,
            max_commands: config.max_commands,
            page_size: config.page_size,
            max_retries: config.max_retries,
            search_lag: config.search_lag,
            name: config.name.clone(),
            release_grace: config.release_grace,
            request_timeout: config.request_timeout,
            claimed: None,
            max_report_bytes: None,
        })
    }

    fn stopping(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    fn run(mut self, once: bool) -> anyhow::Result<()> {
        // Ready once the config is good and the clients are built: an unmounted share or a hub
        // that does not answer yet is waited for (and logged) while running, not by failing the
        // unit's start; the loop keeps the watchdog fed meanwhile.
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
        while !self.stopping() {
            alive();
            if self
                .last_heartbeat
                .is_none_or(|t| t.elapsed() >= self.heartbeat_every)
            {
                self.heartbeat();
            }
            let claimed_at = Instant::now();
            let worked = self.cycle();
            if once {
                break;
            }
            if !worked {
                // A claim the hub held while it had no work has waited already: the next one
                // goes at once; one answered at once (an older hub, an error) waits the rest.
                let rest = self.idle_poll.saturating_sub(claimed_at.elapsed());
                let stop = self.shutdown.clone();
                net::sleep_unless(rest, &|| {
                    alive();
                    stop.load(Ordering::SeqCst)
                });
            }
        }
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
        tracing::info!("the agent stops");
        Ok(())
    }

    /// `serverInfo` for `jira_ok`, then the heartbeat message.
    fn heartbeat(&mut self) {
        self.last_heartbeat = Some(Instant::now());
        let jira_ok = match self.jira.server_info(false) {
            Ok(()) => true,
            Err(JiraError::Stopped) => return,
            Err(error) => {
                tracing::warn!(%error, "Jira does not answer serverInfo");
                self.last_error = Some(format!("serverInfo: {error}"));
                false
            }
        };
        self.jira.take_counters();
        match self.hub.heartbeat(jira_ok, self.last_error.clone()) {
            Ok(()) => {
                if jira_ok {
                    self.last_error = None;
                }
            }
            Err(LinkError::Stopped) => {}
            Err(error) => tracing::warn!(%error, "heartbeat"),
        }
    }

    /// One claim and its commands. Returns whether there was work.
    fn cycle(&mut self) -> bool {
        let answer = match self.hub.claim(self.settings_version, self.max_commands) {
            Ok(answer) => answer,
            Err(LinkError::Stopped) => return false,
            Err(error) => {
                tracing::warn!(%error, "claim");
                self.last_error = Some(error.to_string());
                return false;
            }
        };
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
        for command in &answer.commands {
            if self
                .last_heartbeat
                .is_none_or(|t| t.elapsed() >= self.heartbeat_every)
            {
                self.heartbeat();
            }
            if self.stopping() {
                tracing::info!(
                    command = command.id,
                    "stopping: the command is left for the hub to hand out again"
                );
                break;
            }
            self.execute(command);
        }
        true
    }

    fn execute(&mut self, command: &ClaimedCommand) {
        tracing::info!(command = command.id, r#type = %command.command_type, delivery = command.delivery, "executing");
        self.jira.take_counters();
        let hub = &self.hub;
        let max_report_bytes = self.max_report_bytes;
        let mut start_at = 0u64;
        // A refresh's pages go to the hub from a thread of their own while the next page is read
        // from Jira: the two waits overlap instead of adding up. At most one page waits in the
        // channel and one is on its way, so memory stays a few pages whatever the result set.
        let failure: std::sync::Mutex<Option<JiraError>> = std::sync::Mutex::new(None);
        let fail = |error: JiraError| {
            if let Ok(mut slot) = failure.lock() {
                slot.get_or_insert(error);
            }
        };
        let outcome = std::thread::scope(|scope| {
            let (pages, queued) = std::sync::mpsc::sync_channel::<CommandResult>(1);
            let reporter = scope.spawn(|| {
                for result in queued {
                    match report_page(hub, result, max_report_bytes) {
                        Ok(Some(reason)) => {
                            fail(JiraError::Unavailable(format!(
                                "хаб больше не принимает этот refresh: {reason}"
                            )));
                            return;
                        }
                        Ok(None) => {}
                        Err(LinkError::Stopped) => {
                            fail(JiraError::Stopped);
                            return;
                        }
                        Err(error) => {
                            fail(JiraError::Unavailable(error.to_string()));
                            return;
                        }
                    }
                }
            });
            let jira = &mut self.jira;
            // Pages are reported through the hub as they come, each with the calls made so far.
            let counters = jira.counters_handle();
            let stop = self.shutdown.clone();
            let sleep = move |wait: Duration| {
                net::sleep_unless(wait, &|| {
                    alive();
                    stop.load(Ordering::SeqCst)
                })
            };
            let mut executor = Executor {
                jira,
                settings: &self.settings,
                page_size: self.page_size,
                max_retries: self.max_retries,
                search_lag: self.search_lag,
                agent: &self.name,
                write_limit: self.request_timeout,
                claimed: self
                    .claimed
                    .as_ref()
                    .map(|(created_at, at)| (created_at.as_str(), *at)),
                sleep: &sleep,
            };
            let taken = || failure.lock().ok().and_then(|mut slot| slot.take());
            let mut on_page = |page: jira_api::SearchPage| -> Result<(), JiraError> {
                if let Some(error) = taken() {
                    return Err(error);
                }
                let count = page.issues.len() as u64;
                let spent = counters.take();
                let result = CommandResult {
                    command_id: command.id,
                    delivery: command.delivery,
                    status: ResultStatus::Progress,
                    result: None,
                    error: None,
                    jira_calls: spent.calls,
                    rate_limited: spent.rate_limited,
                    finished_at: None,
                    page: Some(Page {
                        start_at,
                        total: page.total,
                        issues: page.issues,
                    }),
                    not_before_seconds: None,
                };
                if pages.send(result).is_err() {
                    // The reporter stopped: its reason is in `failure`.
                    return Err(taken().unwrap_or(JiraError::Stopped));
                }
                start_at += count;
                Ok(())
            };
            let outcome = executor.execute(command, &mut on_page);
            // Every page reaches the hub before the command's own result.
            drop(pages);
            let _ = reporter.join();
            match taken() {
                Some(JiraError::Stopped) => Outcome::Stopped,
                Some(error) if matches!(outcome, Outcome::Done(_)) => {
                    Outcome::Failed(error.to_string())
                }
                _ => outcome,
            }
        });
        let spent = self.jira.take_counters();
        let mut not_before_seconds = None;
        let (status, result, error) = match outcome {
            Outcome::Done(value) => (ResultStatus::Done, Some(value), None),
            Outcome::Released(message) => {
                tracing::warn!(command = command.id, reason = %message, grace_seconds = self.release_grace.as_secs(), "a write's answer was lost: the command goes back to the hub, not written again now");
                not_before_seconds = Some(
                    self.release_grace
                        .as_secs()
                        .clamp(1, u64::from(crate::protocol::MAX_NOT_BEFORE_SECONDS))
                        as u32,
                );
                (ResultStatus::Released, None, Some(message))
            }
            Outcome::Failed(message) => {
                tracing::warn!(command = command.id, error = %message, "command failed");
                (ResultStatus::Failed, None, Some(message))
            }
            Outcome::Stopped => {
                tracing::info!(
                    command = command.id,
                    "stopping: the command is left for the hub to hand out again"
                );
                return;
            }
        };
        let finished_at = crate::domain::time::format_utc(time::OffsetDateTime::now_utc());
        let report = CommandResult {
            command_id: command.id,
            delivery: command.delivery,
            status,
            result,
            error,
            jira_calls: spent.calls,
            rate_limited: spent.rate_limited,
            finished_at: (status != ResultStatus::Released).then_some(finished_at),
            page: None,
            not_before_seconds,
        };
        match self.hub.report(vec![report]) {
            Ok(answer) => {
                for ignored in &answer.ignored {
                    tracing::info!(command = ignored.command_id, reason = %ignored.reason, "the hub ignored a result");
                }
                tracing::info!(command = command.id, ?status, "reported");
            }
            Err(error) => {
                tracing::warn!(command = command.id, %error, "the report was not acknowledged");
                self.last_error = Some(error.to_string());
            }
        }
    }
}

/// Reports one refresh page, split into smaller reports when the hub will not take it whole
/// (larger than its `max_report_bytes`, or refused as too large): each half goes with its own
/// `start_at`, the first carrying the page's call counts. A single issue too large for the hub
/// fails the refresh with its size. Returns the hub's reason when it ignored the page.
fn report_page(
    hub: &HubLink,
    result: CommandResult,
    limit: Option<u64>,
) -> Result<Option<String>, LinkError> {
    let command_id = result.command_id;
    let mut pending = vec![result];
    while let Some(result) = pending.pop() {
        match hub.report_within(vec![result], limit) {
            Ok(answer) => {
                if let Some(ignored) = answer.ignored.iter().find(|i| i.command_id == command_id) {
                    return Ok(Some(ignored.reason.clone()));
                }
            }
            Err((LinkError::TooLarge { bytes, limit }, mut back)) => {
                let Some(mut first) = back.pop() else {
                    return Err(LinkError::TooLarge { bytes, limit });
                };
                let Some(page) = first.page.as_mut() else {
                    return Err(LinkError::TooLarge { bytes, limit });
                };
                if page.issues.len() <= 1 {
                    let key = page
                        .issues
                        .first()
                        .and_then(|raw| jira_api::issue_head(raw).ok())
                        .map(|head| head.key)
                        .unwrap_or_default();
                    return Err(LinkError::Other(format!(
                        "задача {key} одна занимает {bytes} байт, больше, чем хаб принимает ({limit})"
                    )));
                }
                tracing::info!(
                    bytes,
                    %limit,
                    issues = page.issues.len(),
                    "a refresh page is larger than the hub takes: it goes in two halves"
                );
                let rest = page.issues.split_off(page.issues.len() / 2);
                let second_page = Page {
                    start_at: page.start_at + page.issues.len() as u64,
                    total: page.total,
                    issues: rest,
                };
                let second = CommandResult {
                    page: Some(second_page),
                    jira_calls: 0,
                    rate_limited: 0,
                    ..first.clone_without_page()
                };
                // The first half goes first: `pending` is a stack.
                pending.push(second);
                pending.push(first);
            }
            Err((error, _)) => return Err(error),
        }
    }
    Ok(None)
}

trait WithoutPage {
    fn clone_without_page(&self) -> CommandResult;
}

impl WithoutPage for CommandResult {
    /// The result's other members, with no page (cheap: a page is the bulk).
    fn clone_without_page(&self) -> CommandResult {
        CommandResult {
            command_id: self.command_id,
            delivery: self.delivery,
            status: self.status,
            result: self.result.clone(),
            error: self.error.clone(),
            jira_calls: self.jira_calls,
            rate_limited: self.rate_limited,
            finished_at: self.finished_at.clone(),
            page: None,
            not_before_seconds: self.not_before_seconds,
        }
    }
}
