//! The relay loop: find request files in `inbox/`, decide whether each is complete, refused or to
//! be applied, call the service, write the answer to `outbox/`, move the request to `archive/`
//! (or `rejected/` with its reason beside it), prune old files.
//!
//! Order of effects for one request: the service applies it and records its id and answer in
//! one transaction; then the answer is written; then the request leaves `inbox/`. A crash at any
//! point leaves the file in `inbox/`, and handling it again gives the recorded answer without
//! applying anything twice.

use super::fsio::{free_name, move_into, sync_dir, write_new};
use super::{FOLDERS, RelayOptions, parse_file_name};
use crate::protocol::{AgentAnswer, DecodeError, Kind, decode_reader};
use crate::service::{Hub, ServiceError};
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::{Instant, SystemTime};

/// Why a file was refused, for `<name>.error.json` and the `error-<id>.json` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: &'static str,
    pub field: Option<String>,
    pub message: String,
}

impl Refusal {
    fn new(code: &'static str, field: Option<&str>, message: impl Into<String>) -> Self {
        Refusal {
            code,
            field: field.map(String::from),
            message: message.into(),
        }
    }
}

/// What happened to one file in one pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Applied,
    /// Not complete yet (not JSON, within the grace period), or the store was busy: next pass.
    Later,
    Refused(Refusal),
}

/// Counts of one pass over `inbox/`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PassCounts {
    pub applied: usize,
    pub refused: usize,
    pub waiting: usize,
}

/// When a file was first seen (by the hub's own monotonic clock) and how it looked then.
struct FirstSeen {
    at: Instant,
    len: u64,
    modified: Option<SystemTime>,
}

/// The relay: one per daemon, on a thread of its own (the service is blocking).
pub struct Relay {
    hub: Hub,
    options: RelayOptions,
    shutdown: Arc<AtomicBool>,
    wake_tx: SyncSender<()>,
    wake_rx: Receiver<()>,
    first_seen: HashMap<String, FirstSeen>,
    /// The folder in use and its watcher (kept alive while it watches).
    current: Option<(PathBuf, Option<notify::RecommendedWatcher>)>,
    /// Whether the configured folder was missing at the last look (to log changes only).
    missing_reported: Option<String>,
    last_prune: Option<Instant>,
}

impl Relay {
    pub fn new(hub: Hub, options: RelayOptions, shutdown: Arc<AtomicBool>) -> Self {
        let (wake_tx, wake_rx) = sync_channel(1);
        Relay {
            hub,
            options,
            shutdown,
            wake_tx,
            wake_rx,
            first_seen: HashMap::new(),
            current: None,
            missing_reported: None,
            last_prune: None,
        }
    }

    /// A handle that wakes the loop (on shutdown, say).
    pub fn waker(&self) -> SyncSender<()> {
        self.wake_tx.clone()
    }

    /// Runs until shutdown: a pass over the folder, then a wait for a notification or the
    /// poll interval. The file in hand is always finished before stopping.
    pub fn run(mut self) {
        while !self.shutdown.load(Ordering::SeqCst) {
            if let Err(error) = self.pass() {
                tracing::error!(error = %format!("{error:#}"), "relay pass failed; retrying");
            }
            let _ = self.wake_rx.recv_timeout(self.options.poll_interval);
        }
        tracing::info!("relay stopped");
    }

    /// One pass: follow `relay_dir`, make the folders, handle what is in `inbox/`, prune.
    pub fn pass(&mut self) -> anyhow::Result<PassCounts> {
        let Some(dir) = self.relay_dir()? else {
            return Ok(PassCounts::default());
        };
        let mut counts = PassCounts::default();
        let inbox = dir.join("inbox");
        for name in list_candidates(&inbox)? {
            if self.shutdown.load(Ordering::SeqCst) {
                break;
            }
            match self.handle_file(&dir, &name) {
                Outcome::Applied => counts.applied += 1,
                Outcome::Later => counts.waiting += 1,
                Outcome::Refused(refusal) => {
                    counts.refused += 1;
                    if let Err(error) = self.refuse(&dir, &name, &refusal) {
                        tracing::error!(file = %name, %error, "cannot move a refused file to rejected/");
                    }
                }
            }
        }
        self.first_seen
            .retain(|name, _| inbox.join(name).symlink_metadata().is_ok());
        if self
            .last_prune
            .is_none_or(|at| at.elapsed() >= self.options.prune_every)
        {
            self.last_prune = Some(Instant::now());
            if let Err(error) = prune(&dir, self.options.retention) {
                tracing::warn!(%error, "relay pruning failed");
            }
        }
        Ok(counts)
    }

    /// The relay folder to use now, with its four folders made, or `None` when there is none
    /// (not set, or missing: an unmounted share is never created).
    fn relay_dir(&mut self) -> anyhow::Result<Option<PathBuf>> {
        let configured = self.hub.settings()?.relay_dir.map(PathBuf::from);
        let Some(dir) = configured else {
            self.current = None;
            return Ok(None);
        };
        if !dir.is_dir() {
            let shown = dir.display().to_string();
            if self.missing_reported.as_deref() != Some(shown.as_str()) {
                tracing::warn!(relay_dir = %shown, "the relay folder is missing (is the share mounted?); retrying");
                self.missing_reported = Some(shown);
            }
            self.current = None;
            return Ok(None);
        }
        if self.missing_reported.take().is_some() {
            tracing::info!(relay_dir = %dir.display(), "the relay folder is back");
        }
        for folder in FOLDERS {
            let path = dir.join(folder);
            if !path.is_dir() {
                std::fs::create_dir(&path)
                    .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
            }
        }
        if self
            .current
            .as_ref()
            .is_none_or(|(current, _)| *current != dir)
        {
            tracing::info!(relay_dir = %dir.display(), "relay folder in use");
            let watcher = if self.options.notify {
                super::watch::watch_inbox(&dir.join("inbox"), self.wake_tx.clone())
            } else {
                None
            };
            self.current = Some((dir.clone(), watcher));
            self.first_seen.clear();
        }
        Ok(Some(dir))
    }

    /// Decides and, when it can, applies one file of `inbox/`.
    fn handle_file(&mut self, dir: &Path, name: &str) -> Outcome {
        let Some((kind_text, id)) = parse_file_name(name) else {
            return Outcome::Later;
        };
        let path = dir.join("inbox").join(name);
        let meta = match path.symlink_metadata() {
            Ok(meta) => meta,
            Err(_) => return Outcome::Later,
        };
        if meta.file_type().is_symlink() || !meta.is_file() {
            return Outcome::Refused(Refusal::new(
                "not_regular_file",
                None,
                "не обычный файл (ссылка, папка или устройство)",
            ));
        }
        let Some(kind) = Kind::parse(kind_text) else {
            return Outcome::Refused(Refusal::new(
                "unknown_kind",
                Some("kind"),
                format!(
                    "неизвестный вид запроса «{kind_text}»; допустимы claim, report, heartbeat"
                ),
            ));
        };
        if meta.len() > self.options.max_file_bytes {
            return Outcome::Refused(Refusal::new(
                "too_large",
                None,
                format!(
                    "файл {} байт больше предела {} байт",
                    meta.len(),
                    self.options.max_file_bytes
                ),
            ));
        }
        let decoded = std::fs::File::open(&path)
            .map_err(|e| DecodeError::NotJson(e.to_string()))
            .and_then(decode_reader);
        let request = match decoded {
            Ok(request) => request,
            Err(DecodeError::NotJson(error)) => {
                // It may still be arriving: wait, by the hub's own clock, until it stops changing
                // for the grace period.
                let now = Instant::now();
                let modified = meta.modified().ok();
                let seen = self
                    .first_seen
                    .entry(name.to_string())
                    .or_insert(FirstSeen {
                        at: now,
                        len: meta.len(),
                        modified,
                    });
                if seen.len != meta.len() || seen.modified != modified {
                    *seen = FirstSeen {
                        at: now,
                        len: meta.len(),
                        modified,
                    };
                }
                if seen.at.elapsed() < self.options.grace {
                    return Outcome::Later;
                }
                return Outcome::Refused(Refusal::new(
                    "not_json",
                    None,
                    format!(
                        "не JSON и за {} с не дописан: {error}",
                        self.options.grace.as_secs()
                    ),
                ));
            }
            Err(error) => {
                return Outcome::Refused(Refusal::new(
                    "invalid",
                    Some(error.field()).filter(|f| !f.is_empty()),
                    error.message(),
                ));
            }
        };
        if request.kind() != kind {
            return Outcome::Refused(Refusal::new(
                "kind_mismatch",
                Some("kind"),
                format!("в имени файла {kind}, в теле {}", request.kind()),
            ));
        }
        if request.envelope().id != id {
            return Outcome::Refused(Refusal::new(
                "id_mismatch",
                Some("id"),
                "id в теле не совпадает с именем файла",
            ));
        }
        match self
            .hub
            .agent_token_matches(request.envelope().token.as_deref())
        {
            Ok(true) => {}
            Ok(false) => {
                return Outcome::Refused(Refusal::new(
                    "bad_token",
                    Some("token"),
                    "неверный или отсутствующий токен агента",
                ));
            }
            Err(error) => {
                tracing::error!(%error, "cannot read the agent token; the file waits");
                return Outcome::Later;
            }
        }
        let answer = match self.hub.handle_agent_request(&request) {
            Ok(answer) => answer,
            Err(ServiceError::Internal(error)) => {
                tracing::error!(file = %name, %error, "the request could not be applied now; it stays in inbox/");
                return Outcome::Later;
            }
            Err(error) => {
                return Outcome::Refused(Refusal::new("refused", None, error.to_string()));
            }
        };
        match deliver(dir, name, &path, &answer, self.hub.now_utc()) {
            Ok(()) => {
                self.first_seen.remove(name);
                Outcome::Applied
            }
            Err(error) => {
                tracing::error!(file = %name, %error, "the answer could not be written; the request stays in inbox/ and is answered again");
                Outcome::Later
            }
        }
    }

    /// Moves a refused file to `rejected/` with its reason beside it, and answers
    /// `error-<id>.json` when the name gives the id.
    fn refuse(&mut self, dir: &Path, name: &str, refusal: &Refusal) -> std::io::Result<()> {
        let now = crate::domain::time::format_utc(self.hub.now_utc());
        tracing::warn!(file = %name, code = refusal.code, reason = %refusal.message, "relay file refused");
        crate::service::Metrics::add(&self.hub.metrics().relay_refused, 1);
        let rejected = dir.join("rejected");
        let target = free_name(&rejected, name);
        let target_name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| name.to_string());
        let reason = json!({"file": name, "refused_at": now, "code": refusal.code, "field": refusal.field, "message": refusal.message});
        write_new(
            &rejected,
            &format!("{target_name}.error.json"),
            pretty(&reason).as_bytes(),
        )?;
        if let Some((_, id)) = parse_file_name(name) {
            let answer = json!({"kind": "error", "request_id": id, "file": name, "created_at": now,
                "error": {"code": refusal.code, "field": refusal.field, "message": refusal.message}});
            write_new(
                &dir.join("outbox"),
                &format!("error-{id}.json"),
                pretty(&answer).as_bytes(),
            )?;
        }
        move_into(&dir.join("inbox").join(name), &rejected, &target_name)?;
        self.first_seen.remove(name);
        Ok(())
    }
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// Writes the answer (unless an earlier pass did) and archives the request under its day.
fn deliver(
    dir: &Path,
    name: &str,
    path: &Path,
    answer: &AgentAnswer,
    now: time::OffsetDateTime,
) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(answer).map_err(std::io::Error::other)?;
    write_new(&dir.join("outbox"), name, &text)?;
    let day = dir.join("archive").join(day_of(now));
    if !day.is_dir() {
        std::fs::create_dir_all(&day)?;
        sync_dir(&dir.join("archive"))?;
    }
    move_into(path, &day, name)?;
    Ok(())
}

fn day_of(now: time::OffsetDateTime) -> String {
    let date = now.date();
    format!(
        "{:04}-{:02}-{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    )
}

/// The names in `inbox/` worth a look: not hidden, of the `<kind>-<id>.json` pattern, oldest
/// name order (the agent's ids usually sort by time).
fn list_candidates(inbox: &Path) -> std::io::Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(inbox)?
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| !name.starts_with('.') && parse_file_name(name).is_some())
        .collect();
    names.sort();
    Ok(names)
}

/// Removes answers, archived and refused files older than `retention`.
fn prune(dir: &Path, retention: std::time::Duration) -> std::io::Result<()> {
    let old = |path: &Path| {
        path.symlink_metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|modified| modified.elapsed().is_ok_and(|age| age > retention))
    };
    for folder in ["outbox", "rejected"] {
        for entry in std::fs::read_dir(dir.join(folder))?.filter_map(Result::ok) {
            let path = entry.path();
            if path.is_file() && old(&path) {
                std::fs::remove_file(&path)?;
            }
        }
    }
    for entry in std::fs::read_dir(dir.join("archive"))?.filter_map(Result::ok) {
        let day = entry.path();
        if !day.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&day)?.filter_map(Result::ok) {
            if old(&file.path()) {
                std::fs::remove_file(file.path())?;
            }
        }
        if std::fs::read_dir(&day)?.next().is_none() {
            std::fs::remove_dir(&day)?;
        }
    }
    Ok(())
}
