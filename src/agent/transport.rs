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
    ClaimAnswer, ClaimRequest, CommandResult, Envelope, HeartbeatAnswer, HeartbeatRequest, Kind,
    ReportAnswer, ReportRequest,
};
use serde::Serialize;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The agent's version, sent in claims and heartbeats.
pub(crate) const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// How often the relay's outbox is looked at while an answer is awaited.
const OUTBOX_POLL: Duration = Duration::from_millis(50);

/// The mode of the files the agent writes into the share: the hub reads them as another user of
/// the share's group.
const RELAY_FILE_MODE: u32 = 0o660;

/// The hub, as the agent reaches it.
pub(crate) struct HubLink {
    way: Way,
    name: String,
    token: Secret,
    answer_timeout: Duration,
    waits: Arc<Waits>,
}

enum Way {
    Relay(PathBuf),
    Http { client: Client, url: String },
}

/// A refusal or failure of a request, for the log.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LinkError {
    #[error("the hub refused the {kind} request: {message}")]
    Refused { kind: Kind, message: String },
    #[error("the agent is stopping")]
    Stopped,
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
        HubLink {
            way,
            name: config.name.clone(),
            token: config.agent_token.clone(),
            answer_timeout: config.answer_timeout,
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
    ) -> Result<(), LinkError> {
        let id = new_id(&self.name);
        let request = HeartbeatRequest {
            envelope: self.envelope(&id),
            agent_version: AGENT_VERSION.to_string(),
            jira_ok,
            last_error,
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
        let id = new_id(&self.name);
        let request = ClaimRequest {
            envelope: self.envelope(&id),
            agent_version: AGENT_VERSION.to_string(),
            settings_version,
            max_commands,
        };
        let bytes = self.exchange(Kind::Claim, &id, &request, false)?;
        decode(Kind::Claim, &bytes)
    }

    /// Sends results. While the agent stops, it still waits (a bounded time) for the answer.
    pub(crate) fn report(&self, results: Vec<CommandResult>) -> Result<ReportAnswer, LinkError> {
        let id = new_id(&self.name);
        let request = ReportRequest {
            envelope: self.envelope(&id),
            results,
        };
        let bytes = self.exchange(Kind::Report, &id, &request, true)?;
        decode(Kind::Report, &bytes)
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
        let bytes = serde_json::to_vec(&Outgoing { kind, body })
            .map_err(|e| LinkError::Other(e.to_string()))?;
        // Once stopping, a patient request gets this long more.
        let grace = self.answer_timeout.min(Duration::from_secs(30));
        let mut stopped_at: Option<Instant> = None;
        let give_up = |stopped_at: &mut Option<Instant>| -> bool {
            if !self.stopping() {
                return false;
            }
            if !patient {
                return true;
            }
            let since = *stopped_at.get_or_insert_with(Instant::now);
            since.elapsed() >= grace
        };
        match &self.way {
            Way::Relay(dir) => {
                self.relay_exchange(dir, kind, id, &bytes, &mut || give_up(&mut stopped_at))
            }
            Way::Http { client, url } => {
                self.http_exchange(client, url, kind, &bytes, &mut || give_up(&mut stopped_at))
            }
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
                    Ok(()) => written_at = Some(Instant::now()),
                    Err(error) => {
                        if !warned {
                            tracing::warn!(folder = %inbox.display(), %error, "cannot write into the relay's inbox (is the share mounted?); retrying");
                            warned = true;
                        }
                        if give_up() {
                            return Err(LinkError::Stopped);
                        }
                        self.waits.sleep_through(Duration::from_secs(1));
                        continue;
                    }
                }
            }
            if let Some(answer) = take_answer(&outbox, &name)? {
                return Ok(answer);
            }
            for error_name in &error_names {
                if let Some(refusal) = take_answer(&outbox, error_name)? {
                    return Err(LinkError::Refused {
                        kind,
                        message: refusal_message(&refusal),
                    });
                }
            }
            if give_up() {
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
        let mut attempt = 0u32;
        loop {
            self.waits.alive();
            let failure = match client.send("POST", &target, &authorization, Some(bytes)) {
                Ok(reply) if (200..300).contains(&reply.status) => return Ok(reply.body),
                Ok(reply) if reply.status >= 500 || reply.status == 408 || reply.status == 429 => {
                    format!("HTTP {}", reply.status)
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
            let wait = super::jira_api::backoff(attempt.min(5));
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

/// Reads and deletes `dir/name` when it is there and complete JSON.
fn take_answer(dir: &Path, name: &str) -> Result<Option<Vec<u8>>, LinkError> {
    let path = dir.join(name);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
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
    Ok(Some(bytes))
}

/// Writes `dir/name` safely: a `.`-name in the same folder, synced, renamed, the folder synced.
/// An existing file of that name is left as it is (the same request, already there).
pub(crate) fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let target = dir.join(name);
    if target.exists() {
        return Ok(());
    }
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.set_permissions(std::fs::Permissions::from_mode(RELAY_FILE_MODE))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, &target)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// A new request id: the agent's name made safe, a dash, 32 random hex digits; at most 64
/// characters of `[A-Za-z0-9_-]`.
pub(crate) fn new_id(name: &str) -> String {
    let mut prefix: String = name
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
        prefix.push_str("agent");
    }
    let mut random = [0u8; 16];
    if getrandom::fill(&mut random).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        random = (nanos ^ u128::from(std::process::id())).to_le_bytes();
    }
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}-{hex}")
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
        assert_ne!(new_id("a"), new_id("a"));
    }

    #[test]
    fn a_report_is_written_as_the_hub_reads_it() {
        let issues =
            vec![RawValue::from_string(r#"{"id":"1","key":"A-1","fields":{}}"#.into()).unwrap()];
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
            take_answer(dir.path(), "claim-x.json").unwrap().unwrap(),
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
    fn refusals_in_the_hubs_words() {
        assert_eq!(
            refusal_message(br#"{"kind":"error","error":{"code":"token","field":"token","message":"bad token"}}"#),
            "token: bad token"
        );
        assert_eq!(refusal_message(b"nope"), "nope");
    }
}
