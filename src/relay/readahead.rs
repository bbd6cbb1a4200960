//! Reading ahead: while the relay applies one large request, a second thread opens, reads and
//! decodes the next one of the pass and maps its refresh pages, so that during a stream of pages
//! the relay's own thread spends its time in the database.
//!
//! Nothing here decides or changes anything: the relay takes what was read ahead as if it had
//! read the file itself at that moment (the same `open`, the same limit, the same token check),
//! and reads for itself every file that was not read ahead. Only files from [`READ_AHEAD_FROM`]
//! to [`READ_AHEAD_UP_TO`] bytes are read ahead (a claim or a heartbeat costs less than the
//! hand-over; a larger file held decoded and mapped beside the one being applied would cost
//! several times its size in memory), at most the pass's reading budget, and at most one file
//! waits finished.

use super::decide::{FileFacts, NameVerdict, classify_name};
use super::fsio::{open_request, read_limited};
use crate::domain::settings::Settings;
use crate::protocol::{AgentRequest, DecodeError, Received, TokenCheck};
use crate::service::{Premapped, premap};
use crate::shutdown::Shutdown;
use std::path::Path;
use std::sync::mpsc::SyncSender;

/// Files at least this large are read ahead...
pub(super) const READ_AHEAD_FROM: u64 = 64 * 1024;
/// ...up to this size (a refresh page of 5,000 issues, the agent's largest, is about 13 MiB).
pub(super) const READ_AHEAD_UP_TO: u64 = 16 * 1024 * 1024;

/// A file read ahead: what the relay would have found reading it itself.
pub(super) struct ReadAhead {
    /// What `fstat` of the opened file said.
    pub facts: FileFacts,
    pub bytes: Received,
    /// `bytes` decoded, with the pass's token check.
    pub decoded: Result<AgentRequest, DecodeError>,
    /// The request's refresh pages, mapped under the pass's settings.
    pub premapped: Option<Premapped>,
}

/// Whether the file listed as `name` with `facts` is one the read-ahead thread takes.
pub(super) fn wanted(name: &str, facts: &FileFacts, max_file_bytes: u64) -> bool {
    facts.regular
        && (READ_AHEAD_FROM..=READ_AHEAD_UP_TO.min(max_file_bytes)).contains(&facts.len)
        && matches!(classify_name(name), NameVerdict::Request { .. })
}

/// What the read-ahead thread needs of the pass.
pub(super) struct Plan<'a> {
    pub inbox: &'a Path,
    /// The wanted files, in the order the relay handles them.
    pub files: Vec<(&'a str, FileFacts)>,
    pub token: TokenCheck<'a>,
    pub settings: &'a Settings,
    pub max_file_bytes: u64,
    /// The pass's reading budget, spent as the relay spends it.
    pub budget: u64,
    pub shutdown: &'a Shutdown,
}

/// The thread's loop: one message per wanted file, in order, `None` for a file it did not read
/// (gone, swapped for a link, past the budget). It stops when the relay stops listening.
pub(super) fn run(plan: Plan<'_>, out: SyncSender<Option<ReadAhead>>) {
    let full = plan.budget;
    let mut budget = plan.budget;
    for (name, listed) in &plan.files {
        if plan.shutdown.is_triggered() {
            return;
        }
        // The relay's rule: a pass reads at most its budget, but always at least one file.
        let read = if listed.len > budget && budget < full {
            None
        } else {
            // A file whose reading panics is left to the relay, as one it reads itself: the
            // thread must not take the pass (and the relay) down with it.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read_one(&plan, name)))
                .ok()
                .flatten()
        };
        if let Some(ahead) = &read {
            budget = budget.saturating_sub(ahead.bytes.bytes().len() as u64);
        }
        if out.send(read).is_err() {
            return;
        }
    }
}

fn read_one(plan: &Plan<'_>, name: &str) -> Option<ReadAhead> {
    let (mut file, facts) = open_request(&plan.inbox.join(name)).ok()?;
    if !facts.regular || facts.len > plan.max_file_bytes {
        return None;
    }
    let bytes =
        Received::from(read_limited(&mut file, plan.max_file_bytes + 1, facts.len, &|| {}).ok()?);
    drop(file);
    let decoded = bytes.decode(plan.token);
    let premapped = decoded
        .as_ref()
        .ok()
        .and_then(|request| premap(request, plan.settings));
    Some(ReadAhead {
        facts,
        bytes,
        decoded,
        premapped,
    })
}
