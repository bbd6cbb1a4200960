//! The file relay (system.md §7): the shared folder through which the agent and the hub exchange
//! the protocol's messages when there is no network between them.
//!
//! ```text
//! inbox/     agent → hub   <kind>-<id>.json
//! outbox/    hub → agent   <kind>-<id>.json answers, error-<kind>-<id>.json for refused requests
//! archive/   applied requests, by day
//! rejected/  refused requests, each beside <name>.error.json
//! ```
//!
//! The relay only finds files, decodes them, calls the service and writes answers: every rule of
//! the protocol lives in `service`, shared with the HTTP API. `relay_dir` itself is never
//! created (an unmounted share must not turn into a local folder nobody reads).

mod background;
mod checkpoint;
pub(crate) mod decide;
mod fsio;
pub(crate) mod inspect;
mod owner;
mod readahead;
mod visibility;
mod watch;
mod worker;

pub use worker::{Outcome, PassCounts, Relay, RelayError, error_answer_name};

use crate::sharefs;
use std::path::Path;
use std::time::Duration;

/// The four folders the relay keeps inside `relay_dir`.
pub(crate) const FOLDERS: [&str; 4] = ["inbox", "outbox", "archive", "rejected"];

/// The file that marks a folder the hub set up as a relay folder (`jira-hub relay init`, the
/// quick start's `--default-relay-dir`, or a freshly mounted empty share): only there does the
/// relay make its four folders again when they are missing.
pub(crate) const MARKER: &str = ".jira-hub-relay";

/// Whether the relay may make its missing folders in `dir`: the folder carries the marker, or is
/// a mount point (its device differs from its parent's: a share is mounted there, so the folders
/// land on the share). An empty folder that is not a mount point may be where a share is
/// mounted when it is up: the folders would go to the local disk, where the agent never looks.
pub(crate) fn may_make_folders(dir: &Path) -> bool {
    has_marker(dir) || is_mount_point(dir)
}

/// Whether `dir` carries the marker: a file of its own, read with `symlink_metadata`, never
/// followed (a link, dangling or not, is no marker: it may point anywhere).
fn has_marker(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join(MARKER)).is_ok_and(|meta| meta.file_type().is_file())
}

/// Whether `dir` is a mount point: its device differs from its parent's (or it is `/`).
pub(crate) fn is_mount_point(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(own) = std::fs::metadata(dir) else {
        return false;
    };
    match std::fs::metadata(dir.join("..")) {
        Ok(parent) => parent.dev() != own.dev() || parent.ino() == own.ino(),
        Err(_) => false,
    }
}

/// `jira-hub relay init DIR` and the quick start: makes `dir` (when its parent exists), its four
/// folders and the marker. Returns what was made. Nothing is made through a link: a folder or
/// the marker that is one (dangling or not) is refused, naming it, before anything is made, and
/// each is created without following one (`mkdir`, `O_CREAT | O_EXCL`), so a link planted
/// meanwhile fails the call rather than sending a file where it points.
pub(crate) fn init_folder(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut wanted = Vec::new();
    for name in FOLDERS.into_iter().chain([MARKER]) {
        let path = dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => wanted.push(path),
            Err(error) => return Err(error),
            Ok(meta) if name == MARKER && meta.file_type().is_file() => {}
            Ok(meta) if name != MARKER && meta.file_type().is_dir() => {}
            Ok(meta) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!(
                        "{} — {}, а не {}: через неё хаб ничего не создаёт; уберите её",
                        path.display(),
                        if meta.file_type().is_symlink() {
                            "ссылка"
                        } else {
                            "не то"
                        },
                        if name == MARKER {
                            "файл"
                        } else {
                            "папка"
                        }
                    ),
                ));
            }
        }
    }
    let mut made = Vec::new();
    if !dir.is_dir() {
        std::fs::create_dir(dir)?;
        set_shared_mode(dir)?;
        made.push(dir.to_path_buf());
    }
    for path in wanted {
        if path.ends_with(MARKER) {
            use std::io::Write;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)?
                .write_all(b"This folder is a jira-hub relay folder: the hub makes inbox/, outbox/, archive/ and rejected/ here when they are missing.\n")?;
        } else {
            std::fs::create_dir(&path)?;
            set_shared_mode(&path)?;
        }
        made.push(path);
    }
    Ok(made)
}

/// The mode of the relay's folders: the share's group reads and writes them (the hub and the
/// agent run as two users of that group), setgid so that every file made in them keeps that
/// group, nothing for others.
pub(crate) const FOLDER_MODE: u32 = 0o2770;

/// Gives a folder the relay made [`FOLDER_MODE`], whatever the umask of the process that made it
/// (0077 under the hub's unit, 0022 in a root shell): `mkdir` takes the umask off, `chmod` does
/// not. The kernel drops the setgid bit of a chmod by an owner outside the folder's group; the
/// caller reads the mode back to say so.
pub(crate) fn set_shared_mode(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(FOLDER_MODE))
}

/// The relay's timings and limits: options of `serve`, not settings.
#[derive(Debug, Clone)]
pub struct RelayOptions {
    /// How often `inbox/` is listed at rest, notifications or not. While requests come (one in
    /// the last ten intervals) it is listed ten times as often: on a network share no
    /// notification ever comes, and an agent's exchange of many requests would wait a whole
    /// interval on each.
    pub poll_interval: Duration,
    /// How long a file that is not (yet) JSON may keep arriving before it is refused.
    pub grace: Duration,
    /// How long answers, archived and refused files are kept.
    pub retention: Duration,
    /// How often old files are pruned.
    pub prune_every: Duration,
    /// Files larger than this are refused without being read.
    pub max_file_bytes: u64,
    /// How long a file that is not complete JSON may keep changing before it is refused all the
    /// same (its mtime touched forever must not keep it waiting forever).
    pub arrival_limit: Duration,
    /// How many bytes one pass reads at most (at least one file is always read), so that big
    /// files cannot hold up a pass; small files are read first.
    pub read_budget_bytes: u64,
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
            arrival_limit: Duration::from_secs(600),
            read_budget_bytes: 64 * 1024 * 1024,
            notify: true,
        }
    }
}

/// For how many poll intervals after the last new request the relay keeps listing `inbox/` at
/// its busy pace (ten: 10 s at the default interval).
pub(crate) const BUSY_INTERVALS: u32 = 10;

/// A one-line, human description of the relay folder for `jira-hub status`.
pub(crate) fn describe_relay_dir(relay_dir: Option<&str>) -> String {
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
                .map(|folder| match path.join(folder).symlink_metadata() {
                    Ok(meta) if !meta.file_type().is_dir() => {
                        format!("{folder} NOT A REAL FOLDER (a link or a file: the relay will not use it)")
                    }
                    _ => match relay_files(&path.join(folder)) {
                        Ok(files) if *folder == "inbox" => {
                            // As the console counts them: a claim waiting for work is not a
                            // file waiting to be handled.
                            let claims = files.iter().filter(|name| name.starts_with("claim-")).count();
                            format!(
                                "inbox {} to handle + {} {} waiting for work",
                                files.len() - claims,
                                claims,
                                if claims == 1 { "claim" } else { "claims" }
                            )
                        }
                        Ok(files) => format!("{folder} {}", files.len()),
                        Err(_) => format!("{folder} absent"),
                    },
                })
                .collect();
            // How late the hub serving the folder sees the agent's files, as its lock says.
            let delay = match owner::published_delay(path) {
                Some(delay) if delay > visibility::LATE => format!(
                    "; the hub sees the agent's files {:.1} s late: {}",
                    delay.as_secs_f64(),
                    sharefs::cache_advice(path)
                ),
                Some(delay) => format!(
                    "; the hub sees the agent's files {:.1} s after they are written",
                    delay.as_secs_f64()
                ),
                None => String::new(),
            };
            format!("{dir}: {}{delay}", counts.join(", "))
        }
    }
}

/// The names of the files in a relay folder, those in its subfolders (`archive/`'s days) too;
/// hidden ones (a writer's temporary file) are not counted.
fn relay_files(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    let mut first = true;
    while let Some(folder) = stack.pop() {
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(error) if first => return Err(error),
            Err(_) => continue,
        };
        first = false;
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => stack.push(entry.path()),
                Ok(kind) if kind.is_file() => files.push(name),
                _ => {}
            }
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc` is a mount point wherever Linux runs; a folder made in the temp folder is not.
    #[test]
    fn a_mount_point_is_told_by_its_device() {
        assert!(is_mount_point(Path::new("/proc")));
        assert!(is_mount_point(Path::new("/")));
        let dir = std::env::temp_dir().join(format!("jira-hub-mnt-{}", std::process::id()));
        let _ = std::fs::create_dir(&dir);
        assert!(!is_mount_point(&dir));
        assert!(!may_make_folders(&dir));
        std::fs::write(dir.join(MARKER), "").unwrap();
        assert!(may_make_folders(&dir));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A marker that is a link, dangling or to a real file, is no marker, and making the relay
    /// folder never writes through it (nor makes a folder through a link): refused, naming it,
    /// with nothing made. Before, a dangling link was followed and a file made where it pointed.
    #[test]
    fn a_marker_that_is_a_link_is_never_followed() {
        let base = std::env::temp_dir().join(format!("jira-hub-marker-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("relay");
        std::fs::create_dir_all(&dir).unwrap();
        let elsewhere = base.join("elsewhere");
        std::os::unix::fs::symlink(&elsewhere, dir.join(MARKER)).unwrap();
        assert!(!may_make_folders(&dir), "a dangling link");
        let error = init_folder(&dir).expect_err("a dangling link");
        assert!(error.to_string().contains("ссылка"), "{error}");
        assert!(
            std::fs::symlink_metadata(&elsewhere).is_err(),
            "made through the link"
        );
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "nothing made");
        std::fs::write(&elsewhere, "").unwrap();
        assert!(!may_make_folders(&dir), "a link to a file");
        init_folder(&dir).expect_err("a link to a file");
        // A folder that is a link: nothing made through it either.
        std::fs::remove_file(dir.join(MARKER)).unwrap();
        let outside = base.join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("inbox")).unwrap();
        init_folder(&dir).expect_err("inbox is a link");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        assert!(std::fs::symlink_metadata(dir.join(MARKER)).is_err());
        std::fs::remove_file(dir.join("inbox")).unwrap();
        let made = init_folder(&dir).expect("a real folder");
        assert_eq!(made.len(), 5, "{made:?}");
        assert!(may_make_folders(&dir));
        let _ = std::fs::remove_dir_all(&base);
    }
}
