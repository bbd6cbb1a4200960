//! The agent's messages (system.md §6): claim, report, heartbeat and their answers. One set of
//! wire types for both transports; the relay adds a `token` field, HTTP carries it in a header.
//!
//! Decoding is strict where it matters (a known `kind`, every required field, an `id` of
//! `[A-Za-z0-9_-]{1,64}`, a time in `sent_at`) and tolerant of fields it does not know, so that a
//! newer agent can talk to this hub. Errors name the field.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::sync::Arc;

/// The kinds of request an agent sends.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::Display,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Kind {
    Claim,
    Report,
    Heartbeat,
}

impl Kind {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    /// The kind of this exact (lowercase) name.
    pub(crate) fn parse(text: &str) -> Option<Kind> {
        text.parse().ok()
    }
}

/// What every request carries. `Debug` hides the token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Envelope {
    /// The sender's unique id of this request; a request seen again gets the same answer.
    pub id: String,
    /// The agent instance's name, as shown in `agent_status`.
    pub agent: String,
    /// When the agent sent it (its own clock; only shown, never trusted for ordering).
    pub sent_at: String,
    /// The agent token, over the relay only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

impl std::fmt::Debug for Envelope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Envelope")
            .field("id", &self.id)
            .field("agent", &self.agent)
            .field("sent_at", &self.sent_at)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ClaimRequest {
    #[serde(flatten)]
    pub envelope: Envelope,
    pub agent_version: String,
    /// The settings version the agent holds; the answer carries the settings when it is older.
    pub settings_version: i64,
    /// How many commands the agent takes at most; the hub caps it by `pacing.max_commands_per_claim`.
    pub max_commands: u32,
    /// How long the hub may hold the answer while it has nothing to hand out, in seconds
    /// (0 to [`MAX_CLAIM_WAIT_SECONDS`]; 0, the default, answers at once). The answer comes as
    /// soon as a command may be handed out, or empty when the wait ends. A hub that does not
    /// know it answers at once.
    #[serde(default)]
    pub wait_seconds: u32,
    /// What the agent is: its protocol revision, what it can honour, its build ([`Peer`]).
    /// Absent from the previous release's agents (revision 1, no capabilities).
    #[serde(flatten)]
    pub peer: Peer,
}

/// The protocol revision this build speaks. Revision 1 is the previous release's, which sent
/// no revision at all: a message without `protocol` is of revision 1.
pub const PROTOCOL_REVISION: u32 = 2;

/// An agent capability: it reads an edit's `params.base` right before writing and writes only
/// the fields that still hold it (else it reports the conflict). Without it an edit with a base
/// is never handed to the agent: it would write blindly over a person's change.
pub const CAP_EDIT_BASE: &str = "edit_base";
/// An agent capability: it reads `previous_release` and fails a command whose same Jira path is
/// refused twice in a row (a give-back is never repeated for ever).
pub const CAP_PREVIOUS_RELEASE: &str = "previous_release";
/// A hub capability (claim answer): it hands `previous_release` to each delivery after a
/// give-back and bounds give-backs itself. An agent under a hub without it bounds them itself.
pub const HUB_CAP_BOUNDED_GIVE_BACKS: &str = "bounded_give_backs";

/// What this agent build can honour, as it says in every claim and heartbeat.
pub const AGENT_CAPABILITIES: [&str; 2] = [CAP_EDIT_BASE, CAP_PREVIOUS_RELEASE];
/// What this hub build does, as it says in every claim answer.
pub const HUB_CAPABILITIES: [&str; 1] = [HUB_CAP_BOUNDED_GIVE_BACKS];

/// The most capabilities a message may list, and the longest one (bytes).
pub const MAX_CAPABILITIES: usize = 64;
pub const MAX_CAPABILITY_BYTES: usize = 64;

/// The build of a side: its release (`CARGO_PKG_VERSION`) and the commit it was built from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Build {
    pub version: String,
    pub commit: String,
}

impl Build {
    /// This binary's build.
    pub fn this() -> Build {
        Build {
            version: env!("CARGO_PKG_VERSION").to_string(),
            commit: env!("JIRA_HUB_COMMIT").to_string(),
        }
    }
}

/// What a side says of itself: its protocol revision, its capabilities and its build. Every
/// member is optional on the wire: the previous release sends none of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Peer {
    /// The protocol revision it speaks (absent: 1, the previous release).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u32>,
    /// What it can honour; names it does not know are kept and ignored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// Boxed: most messages' members are small, and an answer is moved around whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<Box<Build>>,
}

impl Peer {
    /// This agent build, as its claims and heartbeats describe it.
    pub fn this_agent() -> Peer {
        Peer {
            protocol: Some(PROTOCOL_REVISION),
            capabilities: AGENT_CAPABILITIES.iter().map(|c| c.to_string()).collect(),
            build: Some(Box::new(Build::this())),
        }
    }

    /// This hub build, as its claim answers describe it.
    pub fn this_hub() -> Peer {
        Peer {
            protocol: Some(PROTOCOL_REVISION),
            capabilities: HUB_CAPABILITIES.iter().map(|c| c.to_string()).collect(),
            build: Some(Box::new(Build::this())),
        }
    }

    /// The revision it speaks: 1 when it does not say (the previous release).
    pub fn revision(&self) -> u32 {
        self.protocol.unwrap_or(1)
    }

    /// Whether it says it can do `capability`.
    pub fn can(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }

    /// Why its members are out of bounds, if they are: (field, message).
    fn invalid(&self) -> Option<(&'static str, String)> {
        if self.protocol == Some(0) {
            return Some(("protocol", "ожидалась ревизия протокола от 1".to_string()));
        }
        if self.capabilities.len() > MAX_CAPABILITIES
            || self.capabilities.iter().any(|c| {
                c.is_empty() || c.len() > MAX_CAPABILITY_BYTES || c.chars().any(char::is_control)
            })
        {
            return Some((
                "capabilities",
                format!(
                    "ожидалось до {MAX_CAPABILITIES} непустых имён до {MAX_CAPABILITY_BYTES} байт без управляющих символов"
                ),
            ));
        }
        if let Some(build) = &self.build {
            for (field, text) in [
                ("build.version", &build.version),
                ("build.commit", &build.commit),
            ] {
                if text.chars().count() > 100 || text.chars().any(char::is_control) {
                    return Some((field, "до 100 символов без управляющих".to_string()));
                }
            }
        }
        None
    }
}

/// The longest `wait_seconds` of a claim: 15 minutes.
pub const MAX_CLAIM_WAIT_SECONDS: u32 = 900;

/// The lock file the hub serving a relay folder keeps in it (host, process id, database, one
/// line each), touched every 10 s; after those lines, [`RELAY_VISIBILITY_KEY`] and how late, in
/// milliseconds, the hub sees the agent's files (absent until measured). The agent reads it to
/// tell both directions of the share in `agent --check`.
pub const RELAY_LOCK_NAME: &str = ".jira-hub-relay.lock";
/// See [`RELAY_LOCK_NAME`].
pub const RELAY_VISIBILITY_KEY: &str = "visibility_ms=";
/// The lock's line naming the file system the hub reaches the folder by (`fuse.sshfs`, `cifs`,
/// `nfs4`, `ext4`…): the mount option that removes the hub's delay is the hub's mount's.
pub const RELAY_MOUNT_KEY: &str = "mount=";

/// The hub's file system a relay lock's text names (see [`RELAY_MOUNT_KEY`]).
pub fn relay_lock_mount(text: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.trim().strip_prefix(RELAY_MOUNT_KEY))
        .map(String::from)
}

/// The delay a relay lock's text carries (see [`RELAY_LOCK_NAME`]).
pub fn relay_lock_visibility(text: &str) -> Option<std::time::Duration> {
    text.lines()
        .find_map(|line| line.trim().strip_prefix(RELAY_VISIBILITY_KEY))
        .and_then(|ms| ms.parse().ok())
        .map(std::time::Duration::from_millis)
}

/// The outcome an agent reports for one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ResultStatus {
    Done,
    Failed,
    Skipped,
    /// A page of a refresh; the command stays claimed. Without `page`, for any command of the
    /// current delivery: "still working", which renews its lease and changes nothing else.
    Progress,
    /// The agent gives the command back without an outcome (hub extension): a write's
    /// answer was lost and the write may still be running in Jira, so this delivery must not
    /// repeat it. The hub queues the command again, not before `not_before_seconds` from now,
    /// and the next delivery checks Jira before writing.
    Released,
}

impl ResultStatus {
    /// The status's wire word (`done`, `failed`, …), as logs print it (not Rust's
    /// `Done`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ResultStatus::Done => "done",
            ResultStatus::Failed => "failed",
            ResultStatus::Skipped => "skipped",
            ResultStatus::Progress => "progress",
            ResultStatus::Released => "released",
        }
    }
}

/// One page of a refresh: raw Jira issues as the search API returned them. Each issue stays raw
/// JSON text until it is ingested, so a report file of 100 MB never becomes a tree of values
/// several times its size.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Page {
    /// How many issues of this refresh the agent sent before this page.
    pub start_at: u64,
    /// The size of the whole result when Jira tells it; Jira Cloud's search does not (null).
    #[serde(default)]
    pub total: Option<u64>,
    /// Raw Jira issues as the search API returned them.
    #[schema(value_type = Vec<Object>)]
    pub issues: Vec<RawJson>,
}

/// A page as a report carries it, its issues borrowed from the report's text ([`Page`]'s
/// members; named `Page` in messages).
#[derive(Deserialize)]
#[serde(rename = "Page")]
struct PageText<'a> {
    start_at: u64,
    #[serde(default)]
    total: Option<u64>,
    #[serde(borrow)]
    issues: Vec<&'a RawValue>,
}

/// A JSON value as text, exactly as it came: a raw Jira issue of a [`Page`] as the search API
/// returned it, a command's `result`.
///
/// The agent owns each one it made; the hub keeps those of a report it decoded from a received
/// text (`Received`) as ranges of that one text, so that a report of 100 MiB is held once, not
/// once as the report and again as its issues.
#[derive(Clone)]
pub struct RawJson(RawText);

#[derive(Clone)]
enum RawText {
    Owned(Box<RawValue>),
    /// `range` of `text` is the issue's JSON (checked when it was made).
    Shared {
        text: Arc<String>,
        range: std::ops::Range<usize>,
    },
}

impl RawJson {
    /// The value's JSON text.
    pub fn get(&self) -> &str {
        match &self.0 {
            RawText::Owned(raw) => raw.get(),
            // Never empty: the range was checked against the text when the issue was made.
            RawText::Shared { text, range } => text.get(range.clone()).unwrap_or_default(),
        }
    }

    /// The issue `raw`, borrowed from `text`: a range of it when `raw` lies in it (no copy),
    /// else a copy.
    fn within(text: Option<&Arc<String>>, raw: &RawValue) -> RawJson {
        let slice = raw.get();
        let shared = text.and_then(|text| {
            let start = (slice.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
            let range = start..start.checked_add(slice.len())?;
            // The same bytes, not merely equal ones: `raw` was borrowed from `text`.
            text.get(range.clone())
                .is_some_and(|found| std::ptr::eq(found.as_ptr(), slice.as_ptr()))
                .then(|| RawText::Shared {
                    text: text.clone(),
                    range,
                })
        });
        RawJson(shared.unwrap_or_else(|| RawText::Owned(raw.to_owned())))
    }
}

impl RawJson {
    /// The value, parsed (`null` if it could not be, which a decoded value always can).
    pub fn value(&self) -> Value {
        serde_json::from_str(self.get()).unwrap_or(Value::Null)
    }
}

impl From<Value> for RawJson {
    fn from(value: Value) -> RawJson {
        // A value always has a text (its map keys are strings, its numbers finite).
        RawJson::from(
            serde_json::value::to_raw_value(&value).unwrap_or_else(|_| RawValue::NULL.to_owned()),
        )
    }
}

/// Two texts of one value are equal, however they are spaced.
impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get() || self.value() == other.value()
    }
}

impl From<Box<RawValue>> for RawJson {
    fn from(raw: Box<RawValue>) -> RawJson {
        RawJson(RawText::Owned(raw))
    }
}

impl std::fmt::Debug for RawJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RawJson").field(&self.get()).finish()
    }
}

impl Serialize for RawJson {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            RawText::Owned(raw) => raw.serialize(serializer),
            // Written as is: its text was JSON when it was decoded.
            RawText::Shared { .. } => serde_json::from_str::<&RawValue>(self.get())
                .map_err(serde::ser::Error::custom)?
                .serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<RawJson, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(RawJson::from)
    }
}

impl PartialEq for Page {
    fn eq(&self, other: &Self) -> bool {
        self.start_at == other.start_at
            && self.total == other.total
            && self.issues.len() == other.issues.len()
            && self
                .issues
                .iter()
                .zip(&other.issues)
                .all(|(a, b)| a.get() == b.get())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CommandResult {
    pub command_id: i64,
    /// Which delivery of the command this reports (the `delivery` of the claim answer).
    pub delivery: u32,
    pub status: ResultStatus,
    /// What the command found (`{key, created}`, `{total, boards}`), as JSON text: the hub keeps
    /// it as the report's text until the one result is applied, so that a report of many results
    /// never becomes one tree of values.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub result: Option<RawJson>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub jira_calls: u32,
    /// How many 429/503 answers Jira gave while executing it.
    #[serde(default)]
    pub rate_limited: u32,
    #[serde(default)]
    pub finished_at: Option<String>,
    #[serde(default)]
    pub page: Option<Page>,
    /// With `released` only (required there): how many seconds from now the hub must not hand
    /// the command out again (1 to 86400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before_seconds: Option<u32>,
    /// With `released` only: whether anything of this delivery reached Jira that
    /// may have been applied. `false`: nothing did (Jira was held — credentials refused, not
    /// reachable, rate limited past the lease — or the command was never started), so the hub
    /// does not count the delivery against `max_deliveries`. Absent: as `true` (older agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent: Option<bool>,
    /// With `released` only: the one Jira path that refused the delivery's
    /// credentials while `GET /rest/api/2/myself` accepted them. The hub keeps it with the
    /// give-back and hands it to the next delivery (`previous_release.refused`), so that the
    /// same refusal again fails the command whichever agent (or agent run) meets it. Absent
    /// otherwise; older hubs ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<RefusedPath>,
}

/// The longest grace a `released` result may ask for: a day.
pub const MAX_NOT_BEFORE_SECONDS: u32 = 86_400;

/// A Jira call refused for credentials on its path alone: its method and path (no query), and
/// Jira's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RefusedPath {
    pub method: String,
    pub path: String,
    pub status: u16,
}

/// The longest `refused.path` a report may carry, in bytes (Jira's paths are far shorter; the
/// bound keeps a wrong agent from parking megabytes in a command's row).
pub const MAX_REFUSED_PATH_BYTES: usize = 2048;

impl RefusedPath {
    /// Why it is not a method and path of Jira's REST API, if it is not.
    fn invalid(&self) -> Option<(&'static str, String)> {
        if self.method.is_empty()
            || self.method.len() > 16
            || !self.method.bytes().all(|b| b.is_ascii_uppercase())
        {
            return Some((
                "refused.method",
                "ожидался метод HTTP заглавными латинскими буквами (до 16)".to_string(),
            ));
        }
        if !self.path.starts_with('/')
            || self.path.len() > MAX_REFUSED_PATH_BYTES
            || self.path.contains('?')
        {
            return Some((
                "refused.path",
                format!("ожидался путь от «/» без запроса, до {MAX_REFUSED_PATH_BYTES} байт"),
            ));
        }
        None
    }

    /// Whether a refusal is of the same call: the same method on the same path.
    pub fn same_call(&self, other: &RefusedPath) -> bool {
        self.method == other.method && self.path == other.path
    }
}

/// The delivery before this one ended in a give-back (`released`): its reason and, when it was
/// one path's refusal, that path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PreviousRelease {
    /// The agent's reason, as the hub keeps it.
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<RefusedPath>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReportRequest {
    #[serde(flatten)]
    pub envelope: Envelope,
    pub results: Vec<CommandResult>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HeartbeatRequest {
    #[serde(flatten)]
    pub envelope: Envelope,
    pub agent_version: String,
    pub jira_ok: bool,
    #[serde(default)]
    pub last_error: Option<String>,
    /// Hub extension: the preflight `jira-hub agent --check` ran, sent with one
    /// heartbeat. Absent otherwise; the hub keeps the last one per agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckReport>,
    /// Hub extension: how often the agent sends a heartbeat, in seconds (1 to
    /// [`MAX_HEARTBEAT_SECONDS`]). The hub flags the agent silent once two such periods pass
    /// without a request of its own; without it, after the hub's fixed threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_seconds: Option<u32>,
    /// Hub extension: while Jira is held for the agent (`jira_ok` false), the class of why, as
    /// the agent sorted Jira's answer (`credentials`, `unreachable`, `probe`): the `reason`
    /// label of the hub's `jira_hub_agent_jira_held_seconds`. A class the hub does not know
    /// reads as `other`; without it (an older agent) the hub sorts `last_error`'s words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jira_held_class: Option<String>,
    /// What the agent is (as in a claim). Absent from the previous release's agents.
    #[serde(flatten)]
    pub peer: Peer,
    /// Set while the agent bounds its give-backs itself, because the hub it meets does not
    /// (it sends no `previous_release`: the previous release). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_give_back_bound: Option<GiveBackBound>,
}

/// How an agent bounds the give-backs of one command itself: at most `count` give-backs, and
/// none once `seconds` have passed since its first one; past either the command fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct GiveBackBound {
    pub count: u32,
    pub seconds: u64,
}

/// The longest heartbeat period an agent may announce: a day (the agent's own bound).
pub const MAX_HEARTBEAT_SECONDS: u32 = 86_400;

/// The most lines a preflight report carries, and the longest name and detail of one line (in
/// characters): the agent cuts its report to these, the hub refuses more.
pub const MAX_CHECK_LINES: usize = 100;
pub const MAX_CHECK_NAME_CHARS: usize = 100;
pub const MAX_CHECK_DETAIL_CHARS: usize = 500;
/// The largest `check` member in bytes (its lines at their bounds, four bytes a character).
const MAX_CHECK_BYTES: usize = 320 * 1024;

/// A preflight's outcome (`jira-hub agent --check`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CheckReport {
    /// When it ran (UTC, RFC 3339).
    pub ran_at: String,
    /// Whether every check passed.
    pub ok: bool,
    pub lines: Vec<CheckLine>,
}

/// One check of a preflight: its name, whether it passed, what it found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CheckLine {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

impl CheckReport {
    /// Why the report is over its bounds, if it is.
    pub fn oversize(&self) -> Option<String> {
        if self.lines.len() > MAX_CHECK_LINES {
            return Some(format!(
                "check: {} строк, больше {MAX_CHECK_LINES}",
                self.lines.len()
            ));
        }
        if self.ran_at.chars().count() > 64 {
            return Some("check.ran_at: слишком длинно".into());
        }
        self.lines.iter().enumerate().find_map(|(i, line)| {
            if line.name.chars().count() > MAX_CHECK_NAME_CHARS {
                Some(format!(
                    "check.lines[{i}].name: больше {MAX_CHECK_NAME_CHARS} символов"
                ))
            } else if line.detail.chars().count() > MAX_CHECK_DETAIL_CHARS {
                Some(format!(
                    "check.lines[{i}].detail: больше {MAX_CHECK_DETAIL_CHARS} символов"
                ))
            } else {
                None
            }
        })
    }
}

/// A decoded request.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentRequest {
    Claim(ClaimRequest),
    Report(ReportRequest),
    Heartbeat(HeartbeatRequest),
}

impl AgentRequest {
    pub(crate) fn kind(&self) -> Kind {
        match self {
            AgentRequest::Claim(_) => Kind::Claim,
            AgentRequest::Report(_) => Kind::Report,
            AgentRequest::Heartbeat(_) => Kind::Heartbeat,
        }
    }

    pub(crate) fn envelope(&self) -> &Envelope {
        match self {
            AgentRequest::Claim(r) => &r.envelope,
            AgentRequest::Report(r) => &r.envelope,
            AgentRequest::Heartbeat(r) => &r.envelope,
        }
    }
}

/// A command as a claim hands it out, with `$result` references already substituted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ClaimedCommand {
    pub id: i64,
    pub batch_id: i64,
    pub seq: i64,
    #[serde(rename = "type")]
    pub command_type: String,
    #[schema(value_type = Object)]
    pub params: Value,
    pub delivery: u32,
    /// When the command's batch was enqueued (UTC RFC 3339), when the hub says: the agent's
    /// duplicate search for a create looks back from there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enqueued_at: Option<String>,
    /// When the previous delivery was given back by its agent (`released`): how many seconds
    /// ago, on the hub's clock. The agent knows then how long Jira has had to finish (and index)
    /// a write that delivery may have left running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_seconds_ago: Option<u64>,
    /// When the previous delivery was given back (`released`): why, and the path that was
    /// refused when that was the reason. The agent keeps no count of its own: an agent
    /// restarted, or another one, decides from this. Absent otherwise, and
    /// from older hubs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_release: Option<PreviousRelease>,
    /// When the command's earlier deliveries ended at the latest: how many seconds ago, on the
    /// hub's clock (the previous delivery's last sign of life, or the end of the attempt before
    /// a retry). With `enqueued_at` it bounds the agent's look for what they may have made: a
    /// «повторить» two weeks later reads the issues of those days, not everything since.
    /// Absent on a first delivery, and from older hubs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier_ended_seconds_ago: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ClaimAnswer {
    pub kind: Kind,
    pub request_id: String,
    pub created_at: String,
    pub settings_version: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub settings: Option<Value>,
    pub pause_seconds: u32,
    pub commands: Vec<ClaimedCommand>,
    /// The largest report the hub takes over the transport that answered, in bytes: the HTTP
    /// request body limit (`--http-max-body-mb`) or the relay's file limit
    /// (`--relay-max-file-mb`). The agent splits a refresh page into smaller reports to fit.
    /// Absent from older hubs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_report_bytes: Option<u64>,
    /// How long the commands handed out stay the agent's without a word from it
    /// (`pacing.claim_timeout_seconds`): a result of any status renews a command's lease, and a
    /// `progress` without `page` does nothing else. Absent from older hubs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_seconds: Option<u32>,
    /// What the hub is: its revision, capabilities (`bounded_give_backs`) and build. Absent
    /// from the previous release's hub. Boxed: an answer is moved around whole.
    #[serde(flatten)]
    pub hub: Box<Peer>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Ignored {
    pub command_id: i64,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReportAnswer {
    pub kind: Kind,
    pub request_id: String,
    pub accepted: Vec<i64>,
    pub ignored: Vec<Ignored>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HeartbeatAnswer {
    pub kind: Kind,
    pub request_id: String,
}

/// An answer, as written to `outbox/` or an HTTP body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AgentAnswer {
    Claim(ClaimAnswer),
    Report(ReportAnswer),
    Heartbeat(HeartbeatAnswer),
}

impl AgentAnswer {
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Why a request could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The text ends early: it may still be arriving.
    #[error("{0}")]
    Incomplete(String),
    /// Not JSON, or JSON that is not an object: growing the text cannot cure it.
    #[error("{0}")]
    NotJson(String),
    /// The relay file's token is missing or wrong (checked before anything else is read).
    #[error("token: неверный или отсутствующий токен агента")]
    BadToken,
    #[error("kind: {}", self.message())]
    UnknownKind(String),
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

impl DecodeError {
    /// The field at fault, for error answers.
    pub(crate) fn field(&self) -> &str {
        match self {
            DecodeError::Incomplete(_) | DecodeError::NotJson(_) => "",
            DecodeError::BadToken => "token",
            DecodeError::UnknownKind(_) => "kind",
            DecodeError::Invalid { field, .. } => field,
        }
    }

    /// What is wrong, without the field (which [`DecodeError::field`] names).
    pub(crate) fn message(&self) -> String {
        match self {
            DecodeError::Incomplete(message) | DecodeError::NotJson(message) => message.clone(),
            DecodeError::BadToken => "неверный или отсутствующий токен агента".to_string(),
            DecodeError::UnknownKind(kind) => {
                format!("неизвестный вид запроса {kind:?}; допустимы claim, report, heartbeat")
            }
            DecodeError::Invalid { message, .. } => message.clone(),
        }
    }

    fn invalid(field: &str, message: impl Into<String>) -> Self {
        DecodeError::Invalid {
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// Whether `id` is a valid request id: `[A-Za-z0-9_-]{1,64}`.
pub(crate) fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Decodes a request from its JSON text (an HTTP body: the token is in a header).
pub(crate) fn decode_request(bytes: &[u8]) -> Result<AgentRequest, DecodeError> {
    decode_bytes(bytes, TokenCheck::Skip)
}

/// How the body's `token` is checked while decoding.
#[derive(Clone, Copy)]
pub(crate) enum TokenCheck<'a> {
    /// A relay file: the token must equal this agent token (`None`: the hub has none yet, so
    /// nothing is authentic). It is checked before anything but the top-level members is read.
    Expect(Option<&'a str>),
    /// HTTP (the header carries it) or an operator's look (`relay inspect`).
    Skip,
}

/// The members each kind of request reads; any other member is skipped unread (a newer agent may
/// send more), so an unknown member of any size costs nothing but its bytes.
fn known_members(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Claim => &[
            "kind",
            "id",
            "agent",
            "sent_at",
            "token",
            "agent_version",
            "settings_version",
            "max_commands",
            "wait_seconds",
            "protocol",
            "capabilities",
            "build",
        ],
        Kind::Report => &["kind", "id", "agent", "sent_at", "token"],
        Kind::Heartbeat => &[
            "kind",
            "id",
            "agent",
            "sent_at",
            "token",
            "agent_version",
            "jira_ok",
            "last_error",
            "check",
            "heartbeat_seconds",
            "protocol",
            "capabilities",
            "build",
            "own_give_back_bound",
            "jira_held_class",
        ],
    }
}

/// The largest `capabilities`, `build` or `own_give_back_bound` member, in bytes (its bounds are
/// far smaller: 64 names of 64 bytes).
const MAX_PEER_MEMBER_BYTES: usize = 16 * 1024;

/// The largest `result` of one command result: results are small objects (`{key, created}`,
/// `{total, boards}`); issue pages travel as raw text in `page`.
const MAX_RESULT_BYTES: usize = 1024 * 1024;

/// A request's bytes as received (an HTTP body, a relay file), read once into one buffer. When
/// they are UTF-8, as JSON must be, the raw issues decoded from them are ranges of that buffer
/// (no issue is copied), and the buffer lives as long as they do.
pub(crate) struct Received(std::result::Result<Arc<String>, Vec<u8>>);

impl From<Vec<u8>> for Received {
    fn from(bytes: Vec<u8>) -> Received {
        // No copy either way: the vector becomes the string, or stays as it is.
        Received(
            String::from_utf8(bytes)
                .map(Arc::new)
                .map_err(std::string::FromUtf8Error::into_bytes),
        )
    }
}

impl Received {
    pub(crate) fn bytes(&self) -> &[u8] {
        match &self.0 {
            Ok(text) => text.as_bytes(),
            Err(bytes) => bytes,
        }
    }

    /// [`decode_bytes`] of these bytes, the issues of its pages ranges of them.
    pub(crate) fn decode(&self, token: TokenCheck<'_>) -> Result<AgentRequest, DecodeError> {
        match &self.0 {
            Ok(text) => decode_text(text, Some(text), token),
            Err(bytes) => decode_bytes(bytes, token),
        }
    }
}

/// Decodes a request from the bytes of a relay file or an HTTP body.
///
/// Memory stays a small multiple of the input: the top level is read as borrowed raw members,
/// the token (for a relay file) is checked first, then only the members the kind knows are
/// parsed, and a report's pages keep their issues as raw JSON text. A UTF-8 byte-order mark
/// (Windows PowerShell writes one) is ignored. [`DecodeError::Incomplete`] is the one error that
/// growing the text could cure.
pub(crate) fn decode_bytes(
    bytes: &[u8],
    token: TokenCheck<'_>,
) -> Result<AgentRequest, DecodeError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => decode_text(text, None, token),
        // JSON is UTF-8: reading it as bytes says where and why it is not (or that it ends
        // early, cut inside a character).
        Err(_) => Err(
            match serde_json::from_slice::<std::collections::BTreeMap<String, &RawValue>>(
                bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes),
            ) {
                Err(error) => top_level_error(&error),
                Ok(_) => DecodeError::NotJson("не UTF-8".to_string()),
            },
        ),
    }
}

/// Why the text is not a JSON object.
fn top_level_error(e: &serde_json::Error) -> DecodeError {
    let error = crate::domain::json::plain_error(e);
    match e.classify() {
        serde_json::error::Category::Eof => DecodeError::Incomplete(error.message),
        serde_json::error::Category::Data => {
            DecodeError::NotJson("запрос — не JSON-объект".to_string())
        }
        _ => DecodeError::NotJson(error.message),
    }
}

/// The agent a request names (its `agent` member, 1 to 100 characters), read without trusting
/// the request: for showing whose requests were refused.
pub fn claimed_agent(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Named {
        agent: String,
    }
    serde_json::from_slice::<Named>(bytes)
        .ok()
        .map(|named| named.agent)
        .filter(|agent| !agent.trim().is_empty() && agent.chars().count() <= 100)
}

/// [`decode_bytes`] of a text; its pages' issues are ranges of `shared` when `text` is it.
fn decode_text(
    text: &str,
    shared: Option<&Arc<String>>,
    token: TokenCheck<'_>,
) -> Result<AgentRequest, DecodeError> {
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let top: std::collections::BTreeMap<String, &RawValue> =
        serde_json::from_str(text).map_err(|e| top_level_error(&e))?;
    if let TokenCheck::Expect(expected) = token {
        let given = match top.get("token") {
            Some(raw) => serde_json::from_str::<String>(raw.get()).ok(),
            None => None,
        };
        let authentic = matches!((expected, given.as_deref()),
            (Some(expected), Some(given)) if crate::domain::constant_time_eq(expected.as_bytes(), given.as_bytes()));
        if !authentic {
            return Err(DecodeError::BadToken);
        }
    }
    let kind = match top.get("kind") {
        None => return Err(DecodeError::invalid("kind", MISSING)),
        Some(raw) => match serde_json::from_str::<String>(raw.get()) {
            Ok(kind) => Kind::parse(&kind).ok_or(DecodeError::UnknownKind(kind))?,
            Err(_) => return Err(DecodeError::UnknownKind(short(raw.get()))),
        },
    };
    let mut light = serde_json::Map::new();
    for &member in known_members(kind) {
        let Some(raw) = top.get(member) else {
            continue;
        };
        // A heartbeat's `check` and what a side says of itself (`capabilities`,
        // `build`, `own_give_back_bound`) are containers, refused unread beyond their bound.
        let bound = match member {
            "check" if raw.get().starts_with('{') => Some(MAX_CHECK_BYTES),
            "capabilities" | "build" | "own_give_back_bound" => Some(MAX_PEER_MEMBER_BYTES),
            _ => None,
        };
        if let Some(bound) = bound
            && raw.get().starts_with(['{', '['])
        {
            if raw.get().len() > bound {
                return Err(DecodeError::invalid(member, format!("больше {bound} байт")));
            }
            let value = serde_json::from_str(raw.get()).map_err(|e| DecodeError::Invalid {
                field: member.to_string(),
                message: crate::domain::json::plain_error(&e).message,
            })?;
            light.insert(member.to_string(), value);
            continue;
        }
        // The envelope's members are scalars: a container is the wrong type, refused unread.
        let value = if raw.get().starts_with(['[', '{']) {
            return Err(DecodeError::invalid(
                member,
                "неверный тип: ожидалось простое значение, а не массив или объект",
            ));
        } else {
            serde_json::from_str(raw.get()).map_err(|e| DecodeError::Invalid {
                field: member.to_string(),
                message: crate::domain::json::plain_error(&e).message,
            })?
        };
        light.insert(member.to_string(), value);
    }
    check_envelope(&light)?;
    let request = match kind {
        Kind::Report => {
            let results = top
                .get("results")
                .ok_or_else(|| DecodeError::invalid("results", MISSING))?;
            AgentRequest::Report(ReportRequest {
                envelope: typed(Value::Object(light))?,
                results: decode_results(results, shared)?,
            })
        }
        _ => build(kind, Value::Object(light))?,
    };
    check_request(request)
}

/// A report's results, each checked for the size of its `result` before it is parsed; the issues
/// of their pages are ranges of `shared` when the results are a part of it.
fn decode_results(
    results: &RawValue,
    shared: Option<&Arc<String>>,
) -> Result<Vec<CommandResult>, DecodeError> {
    let at = |i: usize, field: &str| format!("results[{i}]{field}");
    let items: Vec<&RawValue> =
        serde_json::from_str(results.get()).map_err(|e| DecodeError::Invalid {
            field: "results".into(),
            message: crate::domain::json::plain_error(&e).message,
        })?;
    let mut decoded = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let members =
            serde_json::from_str::<std::collections::BTreeMap<String, &RawValue>>(item.get()).ok();
        if members
            .as_ref()
            .and_then(|members| members.get("result"))
            .is_some_and(|r| r.get().len() > MAX_RESULT_BYTES)
        {
            return Err(DecodeError::invalid(
                &at(i, ".result"),
                format!("больше {MAX_RESULT_BYTES} байт"),
            ));
        }
        let invalid = |e: crate::domain::json::JsonError, under: &str| {
            let field = match (under, e.field.as_str()) {
                ("", "") => String::new(),
                ("", field) | (field, "") => format!(".{field}"),
                (under, field) => format!(".{under}.{field}"),
            };
            DecodeError::Invalid {
                field: at(i, &field),
                message: e.message,
            }
        };
        // The page and the result are kept as text (borrowed), the rest of the result read with
        // `null` in their places, so that nothing of them is copied or becomes a tree of values.
        let taken = |name: &str| {
            members
                .as_ref()
                .and_then(|members| members.get(name).copied())
                .filter(|raw| raw.get() != "null")
        };
        let (page, found) = (taken("page"), taken("result"));
        let mut rest = String::new();
        let mut from = 0;
        let mut cuts: Vec<&RawValue> = page.into_iter().chain(found).collect();
        cuts.sort_by_key(|raw| raw.get().as_ptr() as usize);
        for cut in &cuts {
            let start = cut.get().as_ptr() as usize - item.get().as_ptr() as usize;
            rest.push_str(item.get().get(from..start).unwrap_or_default());
            rest.push_str("null");
            from = start + cut.get().len();
        }
        rest.push_str(item.get().get(from..).unwrap_or_default());
        let mut result: CommandResult =
            crate::domain::json::from_str(&rest).map_err(|e| invalid(e, ""))?;
        result.result = found.map(|raw| RawJson::within(shared, raw));
        let page = page
            .map(|page| crate::domain::json::from_str::<PageText<'_>>(page.get()))
            .transpose()
            .map_err(|e| invalid(e, "page"))?;
        if let Some(page) = page {
            result.page = Some(Page {
                start_at: page.start_at,
                total: page.total,
                issues: page
                    .issues
                    .into_iter()
                    .map(|raw| RawJson::within(shared, raw))
                    .collect(),
            });
        }
        check_release(&result).map_err(|(field, message)| {
            DecodeError::invalid(&at(i, &format!(".{field}")), message)
        })?;
        decoded.push(result);
    }
    Ok(decoded)
}

/// `not_before_seconds` goes with `released` and nothing else; `released` says why (`error`).
fn check_release(result: &CommandResult) -> Result<(), (&'static str, String)> {
    match (result.status, result.not_before_seconds) {
        (ResultStatus::Released, None) => Err((
            "not_before_seconds",
            "обязательно при статусе released".to_string(),
        )),
        (ResultStatus::Released, Some(seconds))
            if seconds == 0 || seconds > MAX_NOT_BEFORE_SECONDS =>
        {
            Err((
                "not_before_seconds",
                format!("ожидалось от 1 до {MAX_NOT_BEFORE_SECONDS} секунд"),
            ))
        }
        (ResultStatus::Released, Some(_))
            if result.error.as_deref().is_none_or(|e| e.trim().is_empty()) =>
        {
            Err(("error", "при статусе released нужна причина".to_string()))
        }
        (ResultStatus::Released, Some(_)) if result.page.is_some() => {
            Err(("page", "у released не бывает page".to_string()))
        }
        (status, Some(_)) if status != ResultStatus::Released => Err((
            "not_before_seconds",
            "бывает только при статусе released".to_string(),
        )),
        (status, _) if status != ResultStatus::Released && result.sent.is_some() => {
            Err(("sent", "бывает только при статусе released".to_string()))
        }
        (status, _) if status != ResultStatus::Released && result.refused.is_some() => {
            Err(("refused", "бывает только при статусе released".to_string()))
        }
        _ => result
            .refused
            .as_ref()
            .and_then(RefusedPath::invalid)
            .map_or(Ok(()), Err),
    }
}

/// The start of a raw value, for a message.
fn short(raw: &str) -> String {
    raw.chars().take(40).collect()
}

/// Decodes a request from parsed JSON (tests, benchmarks, tools that build requests as values),
/// through the one decoder every transport uses.
pub fn decode_value(value: Value) -> Result<AgentRequest, DecodeError> {
    let bytes = serde_json::to_vec(&value).map_err(|e| DecodeError::NotJson(e.to_string()))?;
    decode_bytes(&bytes, TokenCheck::Skip)
}

fn build(kind: Kind, mut value: Value) -> Result<AgentRequest, DecodeError> {
    // What the agent says of itself is read on its own: a flattened member's error would lose
    // its name.
    let peer = peer_of(&mut value)?;
    Ok(match kind {
        Kind::Claim => {
            let mut claim: ClaimRequest = typed(value)?;
            claim.peer = peer;
            AgentRequest::Claim(claim)
        }
        Kind::Report => AgentRequest::Report(typed(value)?),
        Kind::Heartbeat => {
            let mut heartbeat: HeartbeatRequest = typed(value)?;
            heartbeat.peer = peer;
            if let Some(why) = heartbeat.check.as_ref().and_then(CheckReport::oversize) {
                return Err(DecodeError::invalid("check", why));
            }
            AgentRequest::Heartbeat(heartbeat)
        }
    })
}

/// Takes [`Peer`]'s members out of a request's members and reads them.
fn peer_of(value: &mut Value) -> Result<Peer, DecodeError> {
    let mut members = serde_json::Map::new();
    if let Some(object) = value.as_object_mut() {
        for name in ["protocol", "capabilities", "build"] {
            if let Some(member) = object.remove(name) {
                members.insert(name.to_string(), member);
            }
        }
    }
    typed(Value::Object(members))
}

/// The kind, and that `id`, `agent` and `sent_at` are strings.
fn check_envelope(object: &serde_json::Map<String, Value>) -> Result<Kind, DecodeError> {
    let kind = match object.get("kind") {
        None => return Err(DecodeError::invalid("kind", MISSING)),
        Some(Value::String(kind)) => {
            Kind::parse(kind).ok_or_else(|| DecodeError::UnknownKind(kind.clone()))?
        }
        Some(other) => return Err(DecodeError::UnknownKind(other.to_string())),
    };
    for field in ["id", "agent", "sent_at"] {
        match object.get(field) {
            Some(Value::String(_)) => {}
            Some(_) => return Err(DecodeError::invalid(field, "ожидалась строка")),
            None => return Err(DecodeError::invalid(field, MISSING)),
        }
    }
    Ok(kind)
}

/// The envelope's values: the id's alphabet, the agent's name, the time.
fn check_request(request: AgentRequest) -> Result<AgentRequest, DecodeError> {
    let envelope = request.envelope();
    if !is_valid_id(&envelope.id) {
        return Err(DecodeError::invalid(
            "id",
            "ожидалось от 1 до 64 символов из A-Z, a-z, 0-9, - и _",
        ));
    }
    let version = match &request {
        AgentRequest::Claim(claim) => Some(&claim.agent_version),
        AgentRequest::Heartbeat(heartbeat) => Some(&heartbeat.agent_version),
        AgentRequest::Report(_) => None,
    };
    if version.is_some_and(|v| v.chars().any(char::is_control) || v.chars().count() > 100) {
        return Err(DecodeError::invalid(
            "agent_version",
            "версия агента — до 100 символов без управляющих",
        ));
    }
    let peer = match &request {
        AgentRequest::Claim(claim) => Some(&claim.peer),
        AgentRequest::Heartbeat(heartbeat) => Some(&heartbeat.peer),
        AgentRequest::Report(_) => None,
    };
    if let Some((field, message)) = peer.and_then(Peer::invalid) {
        return Err(DecodeError::invalid(field, message));
    }
    if let AgentRequest::Claim(claim) = &request
        && claim.wait_seconds > MAX_CLAIM_WAIT_SECONDS
    {
        return Err(DecodeError::invalid(
            "wait_seconds",
            format!("ожидалось целое число секунд от 0 до {MAX_CLAIM_WAIT_SECONDS}"),
        ));
    }
    if let AgentRequest::Heartbeat(heartbeat) = &request
        && heartbeat
            .heartbeat_seconds
            .is_some_and(|s| s == 0 || s > MAX_HEARTBEAT_SECONDS)
    {
        return Err(DecodeError::invalid(
            "heartbeat_seconds",
            format!("ожидалось целое число секунд от 1 до {MAX_HEARTBEAT_SECONDS}"),
        ));
    }
    if envelope.agent.chars().any(char::is_control) {
        return Err(DecodeError::invalid(
            "agent",
            "имя агента не может содержать управляющие символы",
        ));
    }
    if envelope.agent.chars().any(is_invisible_format) {
        return Err(DecodeError::invalid(
            "agent",
            "имя агента не может содержать невидимые символы (нулевой ширины, направления письма, разрывы строк)",
        ));
    }
    if envelope.agent.trim().is_empty() || envelope.agent.chars().count() > 100 {
        return Err(DecodeError::invalid(
            "agent",
            "ожидалось имя от 1 до 100 символов",
        ));
    }
    if crate::domain::time::parse_utc(&envelope.sent_at).is_none() {
        return Err(DecodeError::invalid(
            "sent_at",
            "ожидалось время ISO-8601 со смещением",
        ));
    }
    Ok(request)
}

/// Characters that print nothing or reorder what follows (Unicode format characters and the
/// line and paragraph separators): an agent's name with them would show as another name.
fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// What a missing required member is called.
const MISSING: &str = "обязательное поле отсутствует";

fn typed<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, DecodeError> {
    crate::domain::json::from_value(value).map_err(|error| DecodeError::Invalid {
        field: if error.field.is_empty() {
            "body".into()
        } else {
            error.field
        },
        message: error.message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_status_is_logged_in_its_wire_word() {
        for status in [
            ResultStatus::Done,
            ResultStatus::Failed,
            ResultStatus::Skipped,
            ResultStatus::Progress,
            ResultStatus::Released,
        ] {
            assert_eq!(json!(status), json!(status.as_str()));
        }
    }
    use serde_json::json;

    #[test]
    fn kind_names_are_lowercase_and_exact() {
        for (kind, name) in [
            (Kind::Claim, "claim"),
            (Kind::Report, "report"),
            (Kind::Heartbeat, "heartbeat"),
        ] {
            assert_eq!((kind.as_str(), kind.to_string()), (name, name.to_string()));
            assert_eq!(json!(kind), json!(name));
            assert_eq!(Kind::parse(name), Some(kind));
        }
        assert_eq!(Kind::parse("Claim"), None);
        assert_eq!(Kind::parse("claims"), None);
    }

    fn claim() -> Value {
        json!({"kind": "claim", "id": "5c1c-a_1", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
               "token": "t", "agent_version": "1.4.0", "settings_version": 11, "max_commands": 20})
    }

    fn error_field(value: Value) -> String {
        decode_value(value).unwrap_err().field().to_string()
    }

    #[test]
    fn decodes_the_three_kinds() {
        let AgentRequest::Claim(c) = decode_value(claim()).unwrap() else {
            panic!()
        };
        assert_eq!((c.max_commands, c.settings_version), (20, 11));
        assert_eq!(c.wait_seconds, 0, "no wait unless asked");
        let mut waiting = claim();
        waiting["wait_seconds"] = json!(900);
        let AgentRequest::Claim(c) = decode_value(waiting).unwrap() else {
            panic!()
        };
        assert_eq!(c.wait_seconds, 900);
        assert_eq!(c.envelope.token.as_deref(), Some("t"));
        let report = json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00+03:00",
            "results": [
                {"command_id": 42, "delivery": 1, "status": "done", "result": {"key": "AURORA-17", "created": true}, "jira_calls": 3, "rate_limited": 0, "finished_at": "2026-11-29T10:00:00Z"},
                {"command_id": 43, "delivery": 1, "status": "progress", "page": {"start_at": 0, "total": 5234, "issues": []}},
                {"command_id": 44, "delivery": 2, "status": "failed", "error": "boom", "jira_calls": 1, "rate_limited": 1}]});
        let AgentRequest::Report(r) = decode_value(report).unwrap() else {
            panic!()
        };
        assert_eq!(r.results.len(), 3);
        assert_eq!(r.results[1].status, ResultStatus::Progress);
        assert_eq!(r.results[1].page.as_ref().unwrap().total, Some(5234));
        let heartbeat = json!({"kind": "heartbeat", "id": "h", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
            "agent_version": "1.4.0", "jira_ok": false, "last_error": "401", "future_field": 1});
        assert!(matches!(
            decode_value(heartbeat).unwrap(),
            AgentRequest::Heartbeat(_)
        ));
    }

    #[test]
    fn a_heartbeat_announces_a_bounded_period() {
        let heartbeat = |period: Value| {
            json!({"kind": "heartbeat", "id": "h", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
                   "agent_version": "1.4.0", "jira_ok": true, "heartbeat_seconds": period})
        };
        let AgentRequest::Heartbeat(h) = decode_value(heartbeat(json!(10))).unwrap() else {
            panic!("a heartbeat")
        };
        assert_eq!(h.heartbeat_seconds, Some(10));
        for bad in [json!(0), json!(86_401), json!(-1), json!("60"), json!(1.5)] {
            assert_eq!(
                error_field(heartbeat(bad.clone())),
                "heartbeat_seconds",
                "{bad}"
            );
        }
        let mut without = heartbeat(json!(1));
        without.as_object_mut().unwrap().remove("heartbeat_seconds");
        let AgentRequest::Heartbeat(h) = decode_value(without).unwrap() else {
            panic!("a heartbeat")
        };
        assert_eq!(h.heartbeat_seconds, None, "an older agent tells no period");
    }

    #[test]
    fn a_heartbeat_carries_a_bounded_check() {
        let heartbeat = |check: Value| {
            json!({"kind": "heartbeat", "id": "h", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
                   "agent_version": "1.4.0", "jira_ok": true, "check": check})
        };
        let line = json!({"name": "проект", "ok": false, "detail": "проекта NOPE нет"});
        let AgentRequest::Heartbeat(h) = decode_value(heartbeat(
            json!({"ran_at": "2026-11-30T19:00:00Z", "ok": false, "lines": [line]}),
        ))
        .unwrap() else {
            panic!("a heartbeat")
        };
        let check = h.check.unwrap();
        assert_eq!((check.ok, check.lines.len()), (false, 1));
        assert_eq!(check.lines[0].detail, "проекта NOPE нет");
        let many = vec![line.clone(); MAX_CHECK_LINES + 1];
        assert_eq!(
            error_field(heartbeat(
                json!({"ran_at": "2026-11-30T19:00:00Z", "ok": false, "lines": many})
            )),
            "check"
        );
        let long =
            json!({"name": "x", "ok": true, "detail": "д".repeat(MAX_CHECK_DETAIL_CHARS + 1)});
        assert_eq!(
            error_field(heartbeat(
                json!({"ran_at": "2026-11-30T19:00:00Z", "ok": true, "lines": [long]})
            )),
            "check"
        );
        // A newer agent's member of a line is ignored; a wrong type, or a check that is not an
        // object, is refused naming it.
        let newer = json!({"name": "x", "ok": true, "detail": "", "extra": {"nested": [1]}});
        let AgentRequest::Heartbeat(h) = decode_value(heartbeat(
            json!({"ran_at": "2026-11-30T19:00:00Z", "ok": true, "lines": [newer], "more": 1}),
        ))
        .unwrap() else {
            panic!("a heartbeat")
        };
        assert_eq!(h.check.unwrap().lines[0].name, "x");
        let wrong = json!({"name": "x", "ok": "yes", "detail": ""});
        assert!(
            error_field(heartbeat(
                json!({"ran_at": "2026-11-30T19:00:00Z", "ok": true, "lines": [wrong]})
            ))
            .starts_with("check")
        );
        assert_eq!(error_field(heartbeat(json!([1]))), "check");
    }

    #[test]
    fn a_claim_says_what_its_agent_is_and_the_previous_release_says_nothing() {
        // The previous release's claim: revision 1, no capability, no build.
        let AgentRequest::Claim(old) = decode_value(claim()).unwrap() else {
            panic!("a claim")
        };
        assert_eq!(old.peer, Peer::default());
        assert_eq!(old.peer.revision(), 1);
        assert!(!old.peer.can(CAP_EDIT_BASE));
        // This release's, with a future agent's capability and build member beside.
        let mut new = claim();
        new["protocol"] = json!(2);
        new["capabilities"] = json!(["edit_base", "previous_release", "telepathy"]);
        new["build"] = json!({"version": "0.2.0", "commit": "abc123", "compiler": "rustc 9"});
        let AgentRequest::Claim(c) = decode_value(new.clone()).unwrap() else {
            panic!("a claim")
        };
        assert_eq!(c.peer.revision(), 2);
        assert!(c.peer.can(CAP_EDIT_BASE) && c.peer.can("telepathy"));
        assert_eq!(c.peer.build.as_ref().unwrap().commit, "abc123");
        // Written back, the agent's own claim reads the same.
        let text = serde_json::to_value(&c).unwrap();
        assert_eq!(text["capabilities"], new["capabilities"]);
        assert_eq!(text["protocol"], json!(2));
        // Really wrong: refused naming the member.
        for (member, value, field) in [
            ("capabilities", json!("edit_base"), "capabilities"),
            ("capabilities", json!([1]), "capabilities"),
            ("capabilities", json!(vec!["x"; 65]), "capabilities"),
            ("capabilities", json!([""]), "capabilities"),
            ("protocol", json!("2"), "protocol"),
            ("protocol", json!(0), "protocol"),
            ("build", json!({"version": "0.2.0"}), "build"),
            (
                "build",
                json!({"version": "0.2.0", "commit": "a\u{7}"}),
                "build.commit",
            ),
        ] {
            let mut bad = claim();
            bad[member] = value.clone();
            let got = error_field(bad);
            assert!(
                got.starts_with(field),
                "{member} = {value}: refused as {got}"
            );
        }
    }

    #[test]
    fn a_give_back_with_a_newer_agents_member_in_refused_is_read() {
        let report = json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
            "future": {"x": 1},
            "results": [{"command_id": 7, "delivery": 1, "status": "released", "error": "403",
                "not_before_seconds": 5, "sent": false, "also_future": [1],
                "refused": {"method": "GET", "path": "/rest/agile/1.0/board/1", "status": 401, "scope": "read:jira-work"}}]});
        let AgentRequest::Report(r) = decode_value(report).unwrap() else {
            panic!("a report")
        };
        assert_eq!(r.results[0].refused.as_ref().unwrap().status, 401);
        // A wrong type inside is still refused, naming it.
        let wrong = json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
            "results": [{"command_id": 7, "delivery": 1, "status": "released", "error": "403",
                "not_before_seconds": 5, "refused": {"method": "GET", "path": "/x", "status": "401"}}]});
        assert!(error_field(wrong).starts_with("results[0]"));
    }

    #[test]
    fn a_heartbeat_says_when_the_agent_bounds_its_give_backs_itself() {
        let mut heartbeat = json!({"kind": "heartbeat", "id": "h", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
            "agent_version": "0.2.0", "jira_ok": true, "protocol": 2, "capabilities": ["edit_base"],
            "own_give_back_bound": {"count": 5, "seconds": 3600}});
        let AgentRequest::Heartbeat(h) = decode_value(heartbeat.clone()).unwrap() else {
            panic!("a heartbeat")
        };
        assert_eq!(
            h.own_give_back_bound,
            Some(GiveBackBound {
                count: 5,
                seconds: 3600
            })
        );
        heartbeat["own_give_back_bound"] = json!(5);
        assert_eq!(error_field(heartbeat), "own_give_back_bound");
    }

    #[test]
    fn reading_a_file_gives_what_parsing_a_value_gives() {
        let report = json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z", "token": "t",
            "results": [{"command_id": 43, "delivery": 1, "status": "progress",
                "page": {"start_at": 0, "total": 2, "issues": [{"key": "A-1", "fields": {}}, {"key": "A-2", "fields": {"x": [1]}}]}}]});
        let text = serde_json::to_vec(&report).unwrap();
        let from_file = decode_request(&text).unwrap();
        assert_eq!(from_file, decode_value(report).unwrap());
        let AgentRequest::Report(r) = from_file else {
            panic!()
        };
        assert_eq!(
            r.results[0].page.as_ref().unwrap().issues[1].get(),
            r#"{"key":"A-2","fields":{"x":[1]}}"#
        );
        assert_eq!(r.envelope.token.as_deref(), Some("t"));
        for (bad, field) in [
            (
                json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z"}),
                "results",
            ),
            (
                json!({"kind": "report", "id": "r 1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z", "results": []}),
                "id",
            ),
            (
                json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z", "results": [{"command_id": 1}]}),
                "results[0].delivery",
            ),
        ] {
            assert_eq!(
                decode_request(&serde_json::to_vec(&bad).unwrap())
                    .unwrap_err()
                    .field(),
                field
            );
        }
        assert!(matches!(
            decode_request(b"[1, 2]"),
            Err(DecodeError::NotJson(_))
        ));
        assert!(matches!(
            decode_request(b"{\"kind\": \"claim\""),
            Err(DecodeError::Incomplete(_))
        ));
    }

    /// A report decoded from the one buffer it was received in keeps each issue of its pages as
    /// a range of that buffer, and decodes to what the bytes decode to.
    #[test]
    fn a_received_reports_issues_are_ranges_of_its_buffer() {
        let report = json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z", "token": "t",
            "results": [
                {"command_id": 42, "delivery": 1, "status": "done", "result": {"key": "A-1"}},
                {"command_id": 43, "delivery": 1, "status": "progress",
                 "page": {"start_at": 0, "total": 2, "issues": [{"key": "A-1", "fields": {"summary": "Задача"}}, {"key": "A-2", "fields": {"x": [1]}}]}},
                {"command_id": 44, "delivery": 1, "status": "progress", "page": null}]});
        let mut text = b"\xEF\xBB\xBF".to_vec();
        text.extend(serde_json::to_vec(&report).unwrap());
        let received = Received::from(text.clone());
        let decoded = received.decode(TokenCheck::Expect(Some("t"))).unwrap();
        assert_eq!(
            decoded,
            decode_bytes(&text, TokenCheck::Expect(Some("t"))).unwrap()
        );
        let AgentRequest::Report(r) = decoded else {
            panic!("a report")
        };
        let buffer = received.bytes().as_ptr_range();
        let issues = &r.results[1].page.as_ref().unwrap().issues;
        assert_eq!(
            issues[0].get(),
            serde_json::to_string(&report["results"][1]["page"]["issues"][0]).unwrap()
        );
        for issue in issues {
            assert!(
                buffer.contains(&issue.get().as_ptr()),
                "{issue:?} was copied"
            );
        }
        let found = r.results[0].result.as_ref().unwrap();
        assert_eq!(found.value(), json!({"key": "A-1"}));
        assert!(
            buffer.contains(&found.get().as_ptr()),
            "{found:?} was copied"
        );
        assert_eq!(r.results[2].page, None);
        // The issues outlive the buffer's other owner, and serialize as they came.
        drop(received);
        assert_eq!(
            serde_json::to_value(&r.results[1]).unwrap()["page"],
            report["results"][1]["page"]
        );
    }

    /// A page read on its own is refused as it was when the whole result was read at once: the
    /// field by its path, the words the same, from a buffer or from bytes.
    #[test]
    fn a_bad_page_is_named_as_before() {
        let with = |result: &str| {
            format!(
                r#"{{"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z", "results": [{result}]}}"#
            )
        };
        for (result, field, message) in [
            (
                r#"{"command_id": 1, "delivery": 1, "status": "progress", "page": 5}"#,
                "results[0].page",
                "неверный тип",
            ),
            (
                r#"{"command_id": 1, "delivery": 1, "status": "progress", "page": {"issues": []}}"#,
                "results[0].page.start_at",
                "обязательное поле отсутствует",
            ),
            (
                r#"{"command_id": 1, "delivery": 1, "status": "progress", "page": {"start_at": 0, "issues": {}}}"#,
                "results[0].page.issues",
                "неверный тип",
            ),
            (
                r#"{"command_id": 1, "delivery": 1, "status": "progress", "page": {"start_at": 0, "issues": []}, "page": {"start_at": 0, "issues": []}}"#,
                "results[0].page",
                "поле повторяется",
            ),
            (
                r#"{"command_id": "x", "delivery": 1, "status": "progress", "page": {"start_at": 0, "issues": []}}"#,
                "results[0].command_id",
                "неверный тип",
            ),
            (
                r#"{"delivery": 1, "status": "progress", "page": {"start_at": 0, "issues": []}}"#,
                "results[0].command_id",
                "обязательное поле отсутствует",
            ),
        ] {
            let text = with(result);
            let from_bytes = decode_bytes(text.as_bytes(), TokenCheck::Skip).unwrap_err();
            let from_buffer = Received::from(text.into_bytes())
                .decode(TokenCheck::Skip)
                .unwrap_err();
            assert_eq!(from_bytes, from_buffer, "{result}");
            assert_eq!(from_bytes.field(), field, "{result}: {from_bytes:?}");
            assert!(
                from_bytes.message().contains(message),
                "{result}: {from_bytes:?}"
            );
        }
        // Not UTF-8: refused as not JSON, or as cut short when cut inside a character.
        let mut broken =
            with(r#"{"command_id": 1, "delivery": 1, "status": "done", "error": "я"}"#)
                .into_bytes();
        let at = broken.len() - 10;
        broken[at] = 0xFF;
        assert!(matches!(
            Received::from(broken).decode(TokenCheck::Skip),
            Err(DecodeError::NotJson(_))
        ));
        let cut = r#"{"kind": "report", "id": "r1", "error": "я"#.as_bytes();
        assert!(matches!(
            Received::from(cut[..cut.len() - 1].to_vec()).decode(TokenCheck::Skip),
            Err(DecodeError::Incomplete(_))
        ));
    }

    #[test]
    fn a_cloud_page_has_no_total_and_a_claim_may_say_when_it_was_enqueued() {
        for page in [
            json!({"start_at": 100, "total": null, "issues": []}),
            json!({"start_at": 100, "issues": []}),
        ] {
            let report = json!({"kind": "report", "id": "r1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
                "results": [{"command_id": 43, "delivery": 1, "status": "progress", "page": page}]});
            let AgentRequest::Report(r) =
                decode_request(&serde_json::to_vec(&report).unwrap()).unwrap()
            else {
                panic!()
            };
            assert_eq!(r.results[0].page.as_ref().unwrap().total, None);
        }
        let command: ClaimedCommand =
            serde_json::from_value(json!({"id": 1, "batch_id": 1, "seq": 1,
            "type": "comment", "params": {}, "delivery": 1, "enqueued_at": "2026-11-29T10:00:00Z"}))
            .unwrap();
        assert_eq!(command.enqueued_at.as_deref(), Some("2026-11-29T10:00:00Z"));
        let older: ClaimedCommand = serde_json::from_value(
            json!({"id": 1, "batch_id": 1, "seq": 1, "type": "comment", "params": {}, "delivery": 1}),
        )
        .unwrap();
        assert_eq!(older.enqueued_at, None);
        assert!(
            !serde_json::to_string(&older)
                .unwrap()
                .contains("enqueued_at")
        );
    }

    #[test]
    fn refusals_name_the_field() {
        let mut unknown = claim();
        unknown["kind"] = json!("claims");
        assert_eq!(
            decode_value(unknown).unwrap_err(),
            DecodeError::UnknownKind("claims".into())
        );
        for (field, value) in [
            ("id", json!("has space")),
            ("id", json!("x".repeat(65))),
            ("id", json!("")),
            ("id", json!("ид")),
            ("id", json!(7)),
            ("agent", json!("")),
            ("sent_at", json!("yesterday")),
            ("wait_seconds", json!(901)),
            ("wait_seconds", json!(-1)),
            ("wait_seconds", json!("600")),
        ] {
            let mut bad = claim();
            bad[field] = value;
            assert_eq!(error_field(bad), field);
        }
        for field in [
            "kind",
            "id",
            "agent",
            "sent_at",
            "max_commands",
            "agent_version",
        ] {
            let mut bad = claim();
            bad.as_object_mut().unwrap().remove(field);
            assert_eq!(error_field(bad), field, "missing {field}");
        }
        assert!(matches!(
            decode_request(b"{not json"),
            Err(DecodeError::NotJson(_))
        ));
        assert!(is_valid_id(&"a".repeat(64)));
    }

    #[test]
    fn debug_never_shows_the_token() {
        let AgentRequest::Claim(request) = decode_value(claim()).unwrap() else {
            panic!()
        };
        let shown = format!("{request:?}");
        assert!(!shown.contains("\"t\""), "{shown}");
        assert!(shown.contains("***"), "{shown}");
        let tokens = crate::domain::settings::Tokens {
            agent: "agent-secret".into(),
            client: "client-secret".into(),
        };
        assert!(!format!("{tokens:?}").contains("secret"));
    }
}
