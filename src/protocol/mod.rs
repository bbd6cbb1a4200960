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

mod decode;

pub use decode::{
    AGENT_HEADER, DecodeError, agent_from_header, agent_header_value, claimed_agent, decode_value,
};
pub(crate) use decode::{Received, TokenCheck, decode_bytes, decode_request, is_valid_id};

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

#[cfg(test)]
mod tests;
