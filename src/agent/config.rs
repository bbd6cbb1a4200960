//! The agent's configuration: the JSON file given to `jira-hub agent --config FILE`, the secrets
//! that may come from the environment, from files or from systemd credentials, the defaults of
//! every tunable, and [`Secret`], the newtype that keeps credentials out of logs and `Debug`.
//!
//! Unknown keys are ignored (with one warning listing them) so that the legacy sync tool's config
//! (`admin/jira-sync/config.example.json`) loads as it is. Every refusal names the key at fault.

use serde_json::{Map, Value};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A credential. Its `Debug` and `Display` never show the value; [`Secret::expose`] does, for
/// the one place that puts it on the wire.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(String);

impl Secret {
    pub(crate) fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// How the agent logs in to Jira.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JiraAuth {
    /// `jira_user` + `jira_password` (Jira Cloud takes an API token as the password).
    Basic { user: String, password: Secret },
    /// `jira_token`: a Data Center personal access token, sent as `Authorization: Bearer`.
    Bearer(Secret),
}

/// How the agent reaches the hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HubTransport {
    /// The shared folder (system.md §7), as the agent sees it.
    Relay(PathBuf),
    /// The hub's HTTP API, e.g. `https://hub.example.org:8740`.
    Http(String),
}

/// Which Jira the agent talks to; `Auto` asks `serverInfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeploymentSetting {
    Auto,
    Server,
    Cloud,
}

/// The agent's whole configuration, validated, defaults filled in.
#[derive(Debug, Clone)]
pub(crate) struct AgentConfig {
    /// Jira's base URL, without a trailing `/`.
    pub jira_url: String,
    pub jira_auth: JiraAuth,
    pub transport: HubTransport,
    pub agent_token: Secret,
    /// The agent instance's name (default: the host name).
    pub name: String,
    /// An extra PEM bundle of trusted roots, added to the system's.
    pub ca_file: Option<PathBuf>,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub heartbeat: Duration,
    /// How long to wait before the next claim when the queue was empty.
    pub idle_poll: Duration,
    /// Relay: a request with no answer after this long is written again when it left `inbox/`.
    pub answer_timeout: Duration,
    /// How long the hub may hold a claim while it has no work (`wait_seconds`): an idle agent
    /// makes a few claims an hour, and a command enqueued meanwhile reaches it at once. 0: the
    /// hub answers at once and the agent claims every `idle_poll`.
    pub claim_wait: Duration,
    pub max_commands: u32,
    pub page_size: u32,
    pub max_retries: u32,
    /// Cloud's search is eventually consistent: how long a duplicate check keeps looking for a
    /// create of this process that timed out. `None`: 60 s on Cloud, 0 on Server/DC.
    pub search_lag: Option<Duration>,
    pub deployment: DeploymentSetting,
    /// How long the hub keeps a command the agent gave back (a write's answer was lost) before
    /// handing it out again: longer than any server or proxy time limit plus Cloud's search lag.
    pub release_grace: Duration,
    /// `--once` or `--check`: a run beside the agent that may be running under the same name.
    /// Never read from the file.
    pub one_shot: bool,
    /// `--check`: how long a request waits for the hub's answer before it is given up
    /// ([`super::transport::LinkError::NoAnswer`]); `None`: as long as it takes. Never read
    /// from the file.
    pub hub_answer_limit: Option<Duration>,
    /// The agent's state folder (`state_dir`, else systemd's `$STATE_DIRECTORY`, else
    /// [`SERVICE_STATE_DIR`] when it exists): where a refused secret's fingerprint is kept.
    pub state_dir: Option<PathBuf>,
    /// Whether a secret came from systemd's `$CREDENTIALS_DIRECTORY`: copied at the service's
    /// start (`LoadCredential=`), a changed file in `/etc/credstore` reaches it only after a
    /// restart.
    pub systemd_credentials: bool,
    /// Where each secret came from (its key → the source in words, never the value), for the
    /// start-up log.
    pub secret_sources: Vec<(&'static str, String)>,
}

/// The environment the loader reads: variables and the systemd credentials folder. Tests pass
/// their own.
pub(crate) struct Environment<'a> {
    pub var: &'a dyn Fn(&str) -> Option<String>,
}

impl Environment<'_> {
    fn get(&self, name: &str) -> Option<String> {
        (self.var)(name).filter(|v| !v.is_empty())
    }
}

/// Keys of the legacy sync config that the agent does not use; they are ignored silently.
const LEGACY_KEYS: [&str; 20] = [
    "project_key",
    "base_jql",
    "board_id",
    "issue_type_task",
    "issue_type_task_id",
    "issue_type_epic",
    "issue_type_epic_id",
    "issue_type_bug",
    "issue_type_bug_id",
    "field_ids",
    "priority_map",
    "link_types",
    "transitions_map",
    "pacing",
    "backup_keep",
    "auto_refresh_minutes",
    "sync_interval_seconds",
    "log_file",
    "closed_statuses",
    "jira_login",
];

const KNOWN_KEYS: [&str; 28] = [
    "jira_url",
    "jira_user",
    "jira_password",
    "jira_password_file",
    "jira_token",
    "jira_token_file",
    "agent_token",
    "agent_token_file",
    "relay_dir",
    "hub_url",
    "name",
    "ca_file",
    "connect_timeout_seconds",
    "request_timeout_seconds",
    "heartbeat_seconds",
    "idle_poll_ms",
    "answer_timeout_seconds",
    "claim_wait_seconds",
    "max_commands",
    "page_size",
    "max_retries",
    "search_lag_seconds",
    "deployment",
    "release_grace_seconds",
    "state_dir",
    "$comment",
    "_comment",
    "comment",
];

/// The default grace of a command given back after a lost answer: 180 s. A proxy in front of
/// Jira commonly cuts a request at 60 s (nginx's `proxy_read_timeout` default; Atlassian's
/// reverse-proxy guides use 60 s and more) while Jira goes on with listeners, post-functions and
/// indexing; the agent's own request timeout is 60 s by default; Cloud's search then lags
/// behind writes by up to a minute. 60 + 60 + 60 s: the earlier write has ended and shows in a
/// search by the time the next delivery looks.
pub(crate) const DEFAULT_RELEASE_GRACE_SECONDS: u64 = 180;

/// A refusal of the config: which key and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub(crate) struct ConfigError {
    pub key: String,
    pub message: String,
}

fn refuse(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.to_string(),
        message: message.into(),
    }
}

impl AgentConfig {
    /// Reads and validates the config file, taking secrets from the process's environment and
    /// from `$CREDENTIALS_DIRECTORY`. Warns when the file holds a secret and others may read it.
    pub(crate) fn load(path: &Path) -> anyhow::Result<AgentConfig> {
        let text = std::fs::read_to_string(path).map_err(|e| unreadable(path, &e))?;
        let var = |name: &str| std::env::var(name).ok();
        let config = Self::from_text_at(&text, &Environment { var: &var }, Some(path))
            .map_err(|e| anyhow::anyhow!("config {}: {e}", path.display()))?;
        warn_if_secret_is_readable(path, &text);
        Ok(config)
    }

    /// Parses and validates a config's text (not the service's config: the machine's credential
    /// store is never read).
    pub(crate) fn from_text(text: &str, env: &Environment<'_>) -> Result<AgentConfig, ConfigError> {
        Self::from_text_at(text, env, None)
    }

    /// Parses and validates the text of the config file at `path`: the service's own config
    /// ([`SERVICE_CONFIG`]) may fall back on the machine's credential store.
    pub(crate) fn from_text_at(
        text: &str,
        env: &Environment<'_>,
        path: Option<&Path>,
    ) -> Result<AgentConfig, ConfigError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| refuse("(file)", format!("not valid JSON: {e}")))?;
        let Value::Object(map) = value else {
            return Err(refuse("(file)", "expected a JSON object"));
        };
        let unknown: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !KNOWN_KEYS.contains(k) && !LEGACY_KEYS.contains(k))
            .collect();
        if !unknown.is_empty() {
            tracing::warn!(keys = %unknown.join(", "), "unknown config keys are ignored");
        }
        let service = path.is_some_and(is_service_config);
        Self::from_map(&map, env, service)
    }

    fn from_map(
        map: &Map<String, Value>,
        env: &Environment<'_>,
        service: bool,
    ) -> Result<AgentConfig, ConfigError> {
        let jira_url = url(map, "jira_url")?.ok_or_else(|| {
            refuse(
                "jira_url",
                "required (Jira's base URL, e.g. https://jira.example.org)",
            )
        })?;
        let credentials = env.get("CREDENTIALS_DIRECTORY").map(PathBuf::from);
        let sources = std::cell::RefCell::new(Vec::new());
        let secret = |key: &'static str, env_var: &str, file_key: &str, credential: &str| {
            let found = find_secret(
                map,
                env,
                (
                    &credential_files(credentials.as_deref(), credential, service),
                    if credentials.is_some() {
                        SYSTEMD_CREDENTIAL
                    } else {
                        "хранилище учётных данных"
                    },
                ),
                key,
                env_var,
                file_key,
            )?;
            Ok::<_, ConfigError>(found.map(|(secret, source)| {
                sources.borrow_mut().push((key, source));
                secret
            }))
        };
        let jira_token = secret(
            "jira_token",
            "JIRA_HUB_AGENT_JIRA_TOKEN",
            "jira_token_file",
            "jira_token",
        )?;
        let user = string(map, "jira_user")?.or(string(map, "jira_login")?);
        let jira_auth = match jira_token {
            Some(token) => JiraAuth::Bearer(token),
            None => {
                let user = user.ok_or_else(|| {
                    refuse(
                        "jira_user",
                        "required, with jira_password (or set jira_token)",
                    )
                })?;
                let password = secret(
                    "jira_password",
                    "JIRA_HUB_AGENT_JIRA_PASSWORD",
                    "jira_password_file",
                    "jira_password",
                )?
                .ok_or_else(|| {
                    refuse(
                        "jira_password",
                        "required with jira_user (or jira_password_file, $JIRA_HUB_AGENT_JIRA_PASSWORD, the credential jira_password: /etc/credstore/jira-hub-agent.jira_password); a personal access token goes in jira_token (/etc/credstore/jira-hub-agent.jira_token)",
                    )
                })?;
                JiraAuth::Basic { user, password }
            }
        };
        let relay_dir = string(map, "relay_dir")?.or_else(|| env.get("JIRA_HUB_AGENT_RELAY_DIR"));
        let hub_url = match url(map, "hub_url")? {
            Some(u) => Some(u),
            None => env.get("JIRA_HUB_AGENT_HUB_URL"),
        };
        let transport = match (relay_dir, hub_url) {
            (Some(_), Some(_)) => {
                return Err(refuse("hub_url", "give relay_dir or hub_url, not both"));
            }
            (Some(dir), None) => HubTransport::Relay(PathBuf::from(dir)),
            (None, Some(url)) => HubTransport::Http(url.trim_end_matches('/').to_string()),
            (None, None) => {
                return Err(refuse(
                    "relay_dir",
                    "required: the shared folder (relay_dir) or the hub's URL (hub_url)",
                ));
            }
        };
        let agent_token = secret(
            "agent_token",
            "JIRA_HUB_AGENT_TOKEN",
            "agent_token_file",
            "agent_token",
        )?
        .ok_or_else(|| {
            refuse(
                "agent_token",
                "required (or agent_token_file, $JIRA_HUB_AGENT_TOKEN, the credential agent_token: /etc/credstore/jira-hub-agent.agent_token): `jira-hub tokens` prints it",
            )
        })?;
        let name = match string(map, "name")? {
            Some(name) => name,
            None => {
                hostname().ok_or_else(|| refuse("name", "required: the host name is unknown"))?
            }
        };
        if name.trim().is_empty() || name.chars().count() > 100 {
            return Err(refuse("name", "expected 1 to 100 characters"));
        }
        let deployment = match string(map, "deployment")?.as_deref() {
            None | Some("auto") => DeploymentSetting::Auto,
            Some("server") | Some("datacenter") | Some("dc") => DeploymentSetting::Server,
            Some("cloud") => DeploymentSetting::Cloud,
            Some(other) => {
                return Err(refuse(
                    "deployment",
                    format!("unknown {other:?}; expected \"auto\", \"server\" or \"cloud\""),
                ));
            }
        };
        let state_dir = string(map, "state_dir")?
            .or_else(|| env.get("STATE_DIRECTORY"))
            .map(PathBuf::from)
            .or_else(|| {
                let service = Path::new(SERVICE_STATE_DIR);
                service.is_dir().then(|| service.to_path_buf())
            });
        let secret_sources = sources.into_inner();
        let systemd_credentials = secret_sources
            .iter()
            .any(|(_, source)| source.starts_with(SYSTEMD_CREDENTIAL));
        let secs = |key: &str, default: u64, min: u64, max: u64| -> Result<Duration, ConfigError> {
            Ok(Duration::from_secs(
                integer(map, key, min, max)?.unwrap_or(default),
            ))
        };
        Ok(AgentConfig {
            jira_url: jira_url.trim_end_matches('/').to_string(),
            jira_auth,
            transport,
            agent_token,
            name,
            ca_file: string(map, "ca_file")?.map(PathBuf::from),
            connect_timeout: secs("connect_timeout_seconds", 10, 1, 3600)?,
            request_timeout: request_timeout(map, env)?,
            heartbeat: secs("heartbeat_seconds", 60, 1, 86_400)?,
            idle_poll: Duration::from_millis(
                integer(map, "idle_poll_ms", 10, 3_600_000)?.unwrap_or(2000),
            ),
            answer_timeout: secs("answer_timeout_seconds", 60, 1, 86_400)?,
            claim_wait: secs(
                "claim_wait_seconds",
                600,
                0,
                u64::from(crate::protocol::MAX_CLAIM_WAIT_SECONDS),
            )?,
            max_commands: integer(map, "max_commands", 1, 1000)?.unwrap_or(20) as u32,
            page_size: integer(map, "page_size", 1, 5000)?.unwrap_or(1000) as u32,
            max_retries: integer(map, "max_retries", 0, 100)?.unwrap_or(5) as u32,
            search_lag: integer(map, "search_lag_seconds", 0, 3600)?.map(Duration::from_secs),
            deployment,
            release_grace: secs(
                "release_grace_seconds",
                DEFAULT_RELEASE_GRACE_SECONDS,
                1,
                u64::from(crate::protocol::MAX_NOT_BEFORE_SECONDS),
            )?,
            one_shot: false,
            hub_answer_limit: None,
            state_dir,
            systemd_credentials,
            secret_sources,
        })
    }

    /// The Jira base URL and the transport, for the start-up log line (no secrets).
    pub(crate) fn describe(&self) -> String {
        let transport = match &self.transport {
            HubTransport::Relay(dir) => format!("relay {}", dir.display()),
            HubTransport::Http(url) => format!("hub {url}"),
        };
        format!(
            "agent {} → Jira {} via {transport}",
            self.name, self.jira_url
        )
    }
}

fn string(map: &Map<String, Value>, key: &str) -> Result<Option<String>, ConfigError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(refuse(key, "expected a string")),
    }
}

fn url(map: &Map<String, Value>, key: &str) -> Result<Option<String>, ConfigError> {
    let Some(value) = string(map, key)? else {
        return Ok(None);
    };
    let value = value.trim().to_string();
    if !(value.starts_with("http://") || value.starts_with("https://")) || value.contains(' ') {
        return Err(refuse(key, "expected an http:// or https:// URL"));
    }
    Ok(Some(value))
}

/// The longest `request_timeout_seconds`: half the `WatchdogSec=180` of the shipped unit. A
/// call to Jira or the hub blocks the agent's one thread (ureq), and no watchdog ping goes out
/// meanwhile; systemd kills a service whose pings stop for `WatchdogSec` (systemd.service(5):
/// "the service … must call sd_notify(3) regularly with WATCHDOG=1"), so a longer timeout could
/// get a healthy agent killed in the middle of a write.
pub(crate) const MAX_REQUEST_TIMEOUT_SECONDS: u64 = 90;

/// `request_timeout_seconds`, checked against the watchdog: at most
/// [`MAX_REQUEST_TIMEOUT_SECONDS`], and at most half of the watchdog systemd runs this process
/// under (`WATCHDOG_USEC`, set when the unit has `WatchdogSec=`; sd_watchdog_enabled(3)).
fn request_timeout(
    map: &Map<String, Value>,
    env: &Environment<'_>,
) -> Result<Duration, ConfigError> {
    const KEY: &str = "request_timeout_seconds";
    let timeout = Duration::from_secs(integer(map, KEY, 1, 3600)?.unwrap_or(60));
    let watchdog = env
        .get("WATCHDOG_USEC")
        .and_then(|usec| usec.trim().parse::<u64>().ok())
        .filter(|usec| *usec > 0)
        .map(Duration::from_micros);
    let (allowed, why) = match watchdog {
        Some(watchdog) => (
            (watchdog / 2).min(Duration::from_secs(MAX_REQUEST_TIMEOUT_SECONDS)),
            format!(
                "systemd's watchdog of this service is {} s (WatchdogSec)",
                watchdog.as_secs()
            ),
        ),
        None => (
            Duration::from_secs(MAX_REQUEST_TIMEOUT_SECONDS),
            "the shipped unit's watchdog is 180 s (WatchdogSec)".to_string(),
        ),
    };
    if timeout > allowed {
        return Err(refuse(
            KEY,
            format!(
                "{} s is more than the watchdog allows: {why}, and a call to Jira blocks the agent without feeding it; at most {} s (half of it)",
                timeout.as_secs(),
                allowed.as_secs()
            ),
        ));
    }
    Ok(timeout)
}

fn integer(
    map: &Map<String, Value>,
    key: &str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, ConfigError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_u64() {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(refuse(
                key,
                format!("expected an integer from {min} to {max}"),
            )),
        },
    }
}

/// Where systemd keeps credentials on disk for `LoadCredential=ID:NAME` (systemd.exec(5)), in
/// its order: the shipped unit loads `jira_password` from `jira-hub-agent.jira_password` there.
const CREDENTIAL_STORES: [&str; 3] = ["/etc/credstore", "/run/credstore", "/usr/lib/credstore"];

/// The config the shipped unit runs (`systemd/jira-hub-agent.service`, `ExecStart=`): the only
/// one whose secrets may come from the machine's credential store without systemd.
pub(crate) const SERVICE_CONFIG: &str = "/etc/jira-hub-agent/agent.json";

/// The state folder the shipped unit gives the agent (`StateDirectory=jira-hub-agent`), taken by
/// a run without `$STATE_DIRECTORY` (root's `--check`) when it exists.
pub(crate) const SERVICE_STATE_DIR: &str = "/var/lib/jira-hub-agent";

/// How a secret from `$CREDENTIALS_DIRECTORY` is named in the start-up log.
const SYSTEMD_CREDENTIAL: &str = "учётные данные systemd";

/// Whether `path` is the service's own config (the same file, however it is named).
fn is_service_config(path: &Path) -> bool {
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    path == Path::new(SERVICE_CONFIG)
        || canonical(path).is_some_and(|p| Some(p) == canonical(Path::new(SERVICE_CONFIG)))
}

/// The files a credential may be read from, after the environment, the `*_file` key and the
/// config's own value: `$CREDENTIALS_DIRECTORY/<id>` under systemd (the unit loaded it); without
/// it, the machine's credential store (`jira-hub-agent.<id>`, the file the unit loads it from)
/// only for the service's own config (`service`), so that root's `agent --check` of the service
/// reads the secrets the service gets, and no other agent (a second one, the demo, a test) ever
/// takes the service's secrets.
fn credential_files(credentials: Option<&Path>, credential: &str, service: bool) -> Vec<PathBuf> {
    match credentials {
        Some(dir) => vec![dir.join(credential)],
        None if service => CREDENTIAL_STORES
            .iter()
            .map(|store| Path::new(store).join(format!("jira-hub-agent.{credential}")))
            .collect(),
        None => Vec::new(),
    }
}

/// A secret and where it came from, looked up in order: the environment variable, the `*_file`
/// key, the value in the config itself, then the credential store (the first of
/// `credential_files` that can be read and is not empty): what the agent was given always wins
/// over what the machine holds. A file's content is trimmed of its final newline.
fn find_secret(
    map: &Map<String, Value>,
    env: &Environment<'_>,
    (credential_files, store): (&[PathBuf], &str),
    key: &str,
    env_var: &str,
    file_key: &str,
) -> Result<Option<(Secret, String)>, ConfigError> {
    if let Some(value) = env.get(env_var) {
        return Ok(Some((Secret::new(value), format!("переменная {env_var}"))));
    }
    if let Some(file) = string(map, file_key)? {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| refuse(file_key, format!("cannot read {file}: {e}")))?;
        let text = text.trim_end_matches(['\n', '\r']).to_string();
        if text.is_empty() {
            return Err(refuse(file_key, format!("{file} is empty")));
        }
        return Ok(Some((Secret::new(text), format!("{file_key} {file}"))));
    }
    if let Some(value) = string(map, key)? {
        return Ok(Some((Secret::new(value), "конфигурация".to_string())));
    }
    for path in credential_files {
        if let Ok(text) = std::fs::read_to_string(path) {
            let text = text.trim_end_matches(['\n', '\r']).to_string();
            if !text.is_empty() {
                return Ok(Some((
                    Secret::new(text),
                    format!("{store} {}", path.display()),
                )));
            }
        }
    }
    Ok(None)
}

/// The layout the shipped unit expects (README, "The agent → As a Debian service"), which the
/// messages about the config's file name.
pub(crate) const CONFIG_LAYOUT: &str = "владелец root, группа jira-hub-agent, режим 0640, в папке /etc/jira-hub-agent (root:jira-hub-agent, 0750); секреты — в /etc/credstore (README, «The agent → As a Debian service»)";

/// «cannot read the config», for an operator: the path, what the system said, and the layout.
fn unreadable(path: &Path, error: &std::io::Error) -> anyhow::Error {
    let (what, advice) = match error.kind() {
        std::io::ErrorKind::NotFound => ("Нет файла конфигурации агента", String::new()),
        std::io::ErrorKind::PermissionDenied => (
            "Нет доступа на чтение к конфигурации агента",
            format!(". Пользователь службы должен её читать: {CONFIG_LAYOUT}"),
        ),
        _ => ("Не удалось прочитать конфигурацию агента", String::new()),
    };
    anyhow::anyhow!("{what} {}: «{error}»{advice}", path.display())
}

/// The secrets a config may hold inline (rather than in a credential, a file or the
/// environment).
const INLINE_SECRETS: [&str; 3] = ["jira_password", "jira_token", "agent_token"];

/// Warns when the config holds a secret inline and a user other than the agent's may read it:
/// others, or a group the agent does not run as. Readable by the agent's own group (the
/// shipped layout: root:jira-hub-agent 0640) is no leak; a config without secrets (they are in
/// systemd credentials) may be read by anyone.
fn warn_if_secret_is_readable(path: &Path, text: &str) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let inline: Vec<&str> = INLINE_SECRETS
        .into_iter()
        .filter(|key| {
            map.get(*key)
                .and_then(Value::as_str)
                .is_some_and(|v| !v.trim().is_empty())
        })
        .collect();
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    let mode = meta.permissions().mode() & 0o777;
    let foreign_group = mode & 0o040 != 0 && meta.gid() != rustix::process::getegid().as_raw();
    if !inline.is_empty() && (mode & 0o004 != 0 || foreign_group) {
        tracing::warn!(
            file = %path.display(),
            mode = format!("{mode:o}"),
            keys = %inline.join(", "),
            "В конфигурации агента есть секреты, а читать её могут другие пользователи: перенесите секреты в учётные данные systemd (/etc/credstore) или закройте файл: {CONFIG_LAYOUT}"
        );
    }
}

/// The host name, from the kernel.
fn hostname() -> Option<String> {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn load(value: Value) -> Result<AgentConfig, ConfigError> {
        AgentConfig::from_text(&value.to_string(), &Environment { var: &no_env })
    }

    fn minimal() -> Value {
        json!({"jira_url": "http://127.0.0.1:9/", "jira_user": "agent", "jira_password": "secret",
               "relay_dir": "/tmp/x/relay", "agent_token": "tok", "name": "agent-1"})
    }

    #[test]
    fn defaults_and_the_e2e_shape() {
        let mut value = minimal();
        value["idle_poll_ms"] = json!(100);
        value["answer_timeout_seconds"] = json!(5);
        value["request_timeout_seconds"] = json!(2);
        value["search_lag_seconds"] = json!(3);
        let config = load(value).unwrap();
        assert_eq!(config.jira_url, "http://127.0.0.1:9");
        assert_eq!(config.transport, HubTransport::Relay("/tmp/x/relay".into()));
        assert_eq!(config.idle_poll, Duration::from_millis(100));
        assert_eq!(config.answer_timeout, Duration::from_secs(5));
        assert_eq!(config.request_timeout, Duration::from_secs(2));
        assert_eq!(config.search_lag, Some(Duration::from_secs(3)));
        assert_eq!(config.connect_timeout, Duration::from_secs(10));
        assert_eq!(config.heartbeat, Duration::from_secs(60));
        assert_eq!(
            (config.max_commands, config.page_size, config.max_retries),
            (20, 1000, 5)
        );
        assert_eq!(config.deployment, DeploymentSetting::Auto);
        let config = load(minimal()).unwrap();
        assert_eq!(config.search_lag, None);
        assert_eq!(config.idle_poll, Duration::from_millis(2000));
        assert_eq!(
            config.claim_wait,
            Duration::from_secs(600),
            "claims wait by default"
        );
        let mut value = minimal();
        value["claim_wait_seconds"] = json!(0);
        assert_eq!(load(value).unwrap().claim_wait, Duration::ZERO);
    }

    #[test]
    fn refusals_name_the_key() {
        for (key, value) in [
            ("jira_url", json!(null)),
            ("jira_url", json!("ftp://x")),
            ("jira_password", json!(null)),
            ("agent_token", json!(null)),
            ("relay_dir", json!(null)),
            ("idle_poll_ms", json!("fast")),
            ("max_commands", json!(0)),
            ("claim_wait_seconds", json!(901)),
            ("claim_wait_seconds", json!(-1)),
            ("deployment", json!("onprem")),
            ("name", json!(7)),
        ] {
            let mut config = minimal();
            config[key] = value;
            assert_eq!(load(config).unwrap_err().key, key);
        }
        let mut both = minimal();
        both["hub_url"] = json!("http://hub:8740");
        assert_eq!(load(both).unwrap_err().key, "hub_url");
        assert_eq!(load(json!("x")).unwrap_err().key, "(file)");
    }

    #[test]
    fn the_legacy_sync_config_loads_as_it_is() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("admin/jira-sync/config.example.json");
        let text = std::fs::read_to_string(path).unwrap();
        let env = |name: &str| match name {
            "JIRA_HUB_AGENT_RELAY_DIR" => Some("/srv/jira-bridge".to_string()),
            "JIRA_HUB_AGENT_TOKEN" => Some("from-env".to_string()),
            _ => None,
        };
        let config = AgentConfig::from_text(&text, &Environment { var: &env }).unwrap();
        assert_eq!(config.jira_url, "https://jira.example.org");
        assert_eq!(
            config.jira_auth,
            JiraAuth::Basic {
                user: "svc-jira-sync".into(),
                password: Secret::new("change-me")
            }
        );
        assert_eq!(config.agent_token.expose(), "from-env");
        // Without a transport it is refused naming the key to add.
        assert_eq!(
            AgentConfig::from_text(&text, &Environment { var: &no_env })
                .unwrap_err()
                .key,
            "relay_dir"
        );
    }

    #[test]
    fn the_shipped_example_loads_with_credentials() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("jira_password"), "pw").unwrap();
        std::fs::write(dir.path().join("agent_token"), "at").unwrap();
        let credentials = dir.path().to_string_lossy().into_owned();
        let env = move |name: &str| (name == "CREDENTIALS_DIRECTORY").then(|| credentials.clone());
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("admin/agent.example.json");
        let text = std::fs::read_to_string(path).unwrap();
        let config = AgentConfig::from_text(&text, &Environment { var: &env }).unwrap();
        assert_eq!(
            config.transport,
            HubTransport::Relay("/srv/jira-bridge".into())
        );
        assert_eq!(config.agent_token.expose(), "at");
        assert_eq!(config.name, "agent-1");
    }

    #[test]
    fn secrets_from_env_files_and_credentials_never_show() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("jira_password"), "from-credential\n").unwrap();
        std::fs::write(dir.path().join("token.txt"), "from-file\n").unwrap();
        let credentials = dir.path().to_string_lossy().into_owned();
        let env = move |name: &str| match name {
            "CREDENTIALS_DIRECTORY" => Some(credentials.clone()),
            "JIRA_HUB_AGENT_TOKEN" => Some("from-env".to_string()),
            _ => None,
        };
        let mut value = minimal();
        value["agent_token_file"] = json!(dir.path().join("token.txt"));
        let config =
            AgentConfig::from_text(&value.to_string(), &Environment { var: &env }).unwrap();
        assert_eq!(
            config.agent_token.expose(),
            "from-env",
            "the environment wins"
        );
        let JiraAuth::Basic { password, .. } = &config.jira_auth else {
            panic!()
        };
        assert_eq!(
            password.expose(),
            "secret",
            "the value the config was given beats systemd's credential"
        );
        assert_eq!(
            config.secret_sources,
            vec![
                ("jira_password", "конфигурация".to_string()),
                ("agent_token", "переменная JIRA_HUB_AGENT_TOKEN".to_string())
            ]
        );
        assert!(!config.systemd_credentials);
        let mut bare = value.clone();
        bare.as_object_mut().unwrap().remove("jira_password");
        let config = AgentConfig::from_text(&bare.to_string(), &Environment { var: &env }).unwrap();
        let JiraAuth::Basic { password, .. } = &config.jira_auth else {
            panic!()
        };
        assert_eq!(
            password.expose(),
            "from-credential",
            "the service's fallback"
        );
        assert!(config.systemd_credentials);
        assert!(
            config.secret_sources[0]
                .1
                .starts_with("учётные данные systemd"),
            "{:?}",
            config.secret_sources
        );
        let shown = format!("{config:?}");
        for secret in ["from-env", "from-credential", "secret", "tok"] {
            assert!(
                !shown.contains(&format!("\"{secret}\"")),
                "{secret} in {shown}"
            );
        }
        assert!(shown.contains("Secret(***)"));
        value.as_object_mut().unwrap().remove("agent_token_file");
        let config =
            AgentConfig::from_text(&value.to_string(), &Environment { var: &no_env }).unwrap();
        assert_eq!(config.agent_token.expose(), "tok");
        value["jira_token"] = json!("pat");
        let config =
            AgentConfig::from_text(&value.to_string(), &Environment { var: &no_env }).unwrap();
        assert_eq!(config.jira_auth, JiraAuth::Bearer(Secret::new("pat")));
        value["agent_token_file"] = json!("/nonexistent/token");
        assert_eq!(
            AgentConfig::from_text(&value.to_string(), &Environment { var: &no_env })
                .unwrap_err()
                .key,
            "agent_token_file"
        );
    }

    /// Without `$CREDENTIALS_DIRECTORY`, only the service's own config falls back on the
    /// machine's credential store: another config (a second agent, the demo, a test run as root)
    /// never takes the service's secrets, and its missing secret is named as missing.
    #[test]
    fn the_machine_store_is_the_services_fallback_only() {
        assert!(credential_files(None, "jira_password", false).is_empty());
        assert_eq!(
            credential_files(None, "jira_password", true)[0],
            Path::new("/etc/credstore/jira-hub-agent.jira_password")
        );
        assert_eq!(
            credential_files(Some(Path::new("/run/credentials/x")), "agent_token", false),
            vec![PathBuf::from("/run/credentials/x/agent_token")]
        );
        assert!(is_service_config(Path::new(SERVICE_CONFIG)));
        assert!(!is_service_config(Path::new("/tmp/agent.json")));
    }

    /// A request timeout the watchdog would not survive is refused with a clear
    /// error, against the shipped unit's watchdog and against the one systemd runs it under.
    #[test]
    fn the_request_timeout_cannot_outlast_the_watchdog() {
        let mut value = minimal();
        value["request_timeout_seconds"] = json!(90);
        assert_eq!(
            load(value.clone()).unwrap().request_timeout,
            Duration::from_secs(90)
        );
        value["request_timeout_seconds"] = json!(300);
        let error = load(value.clone()).unwrap_err().to_string();
        assert!(
            error.contains("request_timeout_seconds")
                && error.contains("300 s is more than the watchdog allows")
                && error.contains("at most 90 s"),
            "{error}"
        );
        // Under a unit with WatchdogSec=60: at most 30 s.
        let env = |name: &str| (name == "WATCHDOG_USEC").then(|| "60000000".to_string());
        value["request_timeout_seconds"] = json!(45);
        let error = AgentConfig::from_text(&value.to_string(), &Environment { var: &env })
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("60 s (WatchdogSec)") && error.contains("at most 30 s"),
            "{error}"
        );
        value["request_timeout_seconds"] = json!(30);
        assert!(AgentConfig::from_text(&value.to_string(), &Environment { var: &env }).is_ok());
    }
}
