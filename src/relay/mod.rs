//! The file relay: the shared folder through which the agent and the hub exchange messages
//! (system.md §7). So far this module only describes the state of the folder for `status`; it
//! never creates `relay_dir` itself (an unmounted share must not turn into a local folder).

use std::path::Path;

/// The four folders the relay keeps inside `relay_dir`.
pub const FOLDERS: [&str; 4] = ["inbox", "outbox", "archive", "rejected"];

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
