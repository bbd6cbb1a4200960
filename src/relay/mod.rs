//! The file relay (system.md §7): the shared folder through which the agent and the hub exchange
//! the protocol's messages when there is no network between them.
//!
//! ```text
//! inbox/     agent → hub   <kind>-<id>.json
//! outbox/    hub → agent   <kind>-<id>.json answers, error-<id>.json for refused requests
//! archive/   applied requests, by day
//! rejected/  refused requests, each beside <name>.error.json
//! ```
//!
//! The relay only finds files, decodes them, calls the service and writes answers: every rule of
//! the protocol lives in `service`, shared with the HTTP API. `relay_dir` itself is never
//! created (an unmounted share must not turn into a local folder nobody reads).

mod fsio;
pub mod inspect;
mod watch;
mod worker;

pub use worker::{Outcome, PassCounts, Refusal, Relay};

use std::path::Path;
use std::time::Duration;

/// The four folders the relay keeps inside `relay_dir`.
pub const FOLDERS: [&str; 4] = ["inbox", "outbox", "archive", "rejected"];

/// The relay's timings and limits: options of `serve`, not settings.
#[derive(Debug, Clone)]
pub struct RelayOptions {
    /// How often `inbox/` is listed, notifications or not.
    pub poll_interval: Duration,
    /// How long a file that is not (yet) JSON may keep arriving before it is refused.
    pub grace: Duration,
    /// How long answers, archived and refused files are kept.
    pub retention: Duration,
    /// How often old files are pruned.
    pub prune_every: Duration,
    /// Files larger than this are refused without being read.
    pub max_file_bytes: u64,
    /// Whether change notifications are used as a hint.
    pub notify: bool,
}

impl Default for RelayOptions {
    fn default() -> Self {
        RelayOptions {
            poll_interval: Duration::from_secs(1),
            grace: Duration::from_secs(30),
            retention: Duration::from_secs(14 * 24 * 3600),
            prune_every: Duration::from_secs(3600),
            max_file_bytes: 256 * 1024 * 1024,
            notify: true,
        }
    }
}

/// `<kind>-<id>.json` → (kind, id); `None` for any other name (skipped, never refused).
pub fn parse_file_name(name: &str) -> Option<(&str, &str)> {
    let stem = name.strip_suffix(".json")?;
    let (kind, id) = stem.split_once('-')?;
    let kind_ok = !kind.is_empty() && kind.bytes().all(|b| b.is_ascii_lowercase());
    (kind_ok && crate::protocol::is_valid_id(id)).then_some((kind, id))
}

/// A one-line, human description of the relay folder for `jira-hub status`.
pub fn describe_relay_dir(relay_dir: Option<&str>) -> String {
    let Some(dir) = relay_dir else {
        return "not set (relay_dir is null): the agent can only use the HTTP API".to_string();
    };
    let path = Path::new(dir);
    match std::fs::metadata(path) {
        Err(error) => format!("{dir}: missing ({error}); is the share mounted?"),
        Ok(meta) if !meta.is_dir() => format!("{dir}: not a folder"),
        Ok(_) => {
            let counts: Vec<String> = FOLDERS
                .iter()
                .map(|folder| match std::fs::read_dir(path.join(folder)) {
                    Ok(entries) => {
                        let files = entries
                            .filter_map(Result::ok)
                            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                            .count();
                        format!("{folder} {files}")
                    }
                    Err(_) => format!("{folder} absent"),
                })
                .collect();
            format!("{dir}: {}", counts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names() {
        assert_eq!(
            parse_file_name("claim-5c1c-a_1.json"),
            Some(("claim", "5c1c-a_1"))
        );
        assert_eq!(parse_file_name("report-1.json"), Some(("report", "1")));
        assert_eq!(
            parse_file_name("launch-1.json"),
            Some(("launch", "1")),
            "an unknown kind is refused later"
        );
        for skipped in [
            "claim-1.json.tmp",
            ".claim-1.json",
            "claim.json",
            "claim-.json",
            "README.md",
            ".nfs0001",
            "Claim-1.json",
            "claim-a b.json",
        ] {
            assert_eq!(parse_file_name(skipped), None, "{skipped}");
        }
    }
}
