//! Which hub serves a relay folder (issue 30, item 6): a lock file `.jira-hub-relay.lock` in the
//! folder names the hub (host, process id, database) and is touched every
//! [`HEARTBEAT`]; another hub that finds it fresh (touched within [`STALE_AFTER`]) leaves the
//! folder alone and says who has it. A file with a heartbeat, not `flock`: the relay folder is
//! a network share (NFS, SMB), where `flock` is emulated with byte-range locks, or local only to
//! one client, and a lock held by a hub on another machine may never be seen; a file and its
//! modification time are seen by every client of the share. A hub that dies leaves the file, stale
//! after a minute; a hub that stops removes it.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The lock file's name in the relay folder.
pub(crate) const LOCK_NAME: &str = ".jira-hub-relay.lock";
/// How often the owner touches it.
const HEARTBEAT: Duration = Duration::from_secs(10);
/// A lock not touched for this long belongs to a hub that is gone (six heartbeats: a share's
/// attribute cache, 3 to 60 s on NFS, must not make a live hub look dead).
const STALE_AFTER: Duration = Duration::from_secs(90);

/// This hub as the lock names it.
pub(crate) struct Owner {
    /// The lock's text: three lines, the host, the process id, the database.
    me: String,
    host: String,
    database: String,
    /// The folder this hub holds, and when it last touched the lock.
    held: Option<(PathBuf, SystemTime)>,
}

impl Owner {
    pub(crate) fn new(database: &Path) -> Owner {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "?".into());
        let database = database.display().to_string();
        Owner {
            me: format!("{host}\n{}\n{database}", std::process::id()),
            host,
            database,
            held: None,
        }
    }

    /// Takes (or keeps) `dir` for this hub: `Err` with the other hub's name when a fresh lock
    /// of another names it.
    pub(crate) fn claim(&mut self, dir: &Path, now: SystemTime) -> Result<(), String> {
        if self.held.as_ref().is_some_and(|(held, _)| held != dir) {
            self.release();
        }
        let lock = dir.join(LOCK_NAME);
        if let Some((held, touched)) = &self.held
            && held == dir
            && now.duration_since(*touched).unwrap_or_default() < HEARTBEAT
        {
            return Ok(());
        }
        if let Ok(text) = std::fs::read_to_string(&lock) {
            let fresh = std::fs::metadata(&lock)
                .and_then(|m| m.modified())
                .is_ok_and(|at| now.duration_since(at).unwrap_or_default() < STALE_AFTER);
            if fresh && self.other_alive(text.trim()) {
                self.held = None;
                let mut lines = text.trim().lines();
                let (host, pid, database) = (
                    lines.next().unwrap_or("?"),
                    lines.next().unwrap_or("?"),
                    lines.next().unwrap_or("?"),
                );
                return Err(format!("{host}, pid {pid}, база {database}"));
            }
        }
        // Ours, missing or stale: written whole under a temporary name, then renamed over (its
        // modification time is the heartbeat).
        let temp = dir.join(format!("{LOCK_NAME}.{}.tmp", std::process::id()));
        std::fs::write(&temp, format!("{}\n", self.me))
            .and_then(|()| std::fs::rename(&temp, &lock))
            .map_err(|error| {
                let _ = std::fs::remove_file(&temp);
                format!("не удалось записать {}: «{error}»", lock.display())
            })?;
        self.held = Some((dir.to_path_buf(), now));
        Ok(())
    }

    /// Whether the lock's text names another hub that may be alive. This hub's own database on
    /// this host is this hub whatever the process id (a restart after a crash: the database's
    /// own lock lets one hub serve it); another process of this host is alive while
    /// `/proc/<pid>` exists; a hub of another host is taken as alive (its heartbeat says).
    fn other_alive(&self, text: &str) -> bool {
        let mut lines = text.lines();
        let (host, pid, database) = (lines.next(), lines.next(), lines.next());
        if host != Some(self.host.as_str()) {
            return true;
        }
        if database == Some(self.database.as_str()) {
            return false;
        }
        pid.and_then(|pid| pid.trim().parse::<u32>().ok())
            .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists())
    }

    /// The folder is left (another one set, or the hub stops): its lock goes, if it is ours.
    pub(crate) fn release(&mut self) {
        if let Some((dir, _)) = self.held.take() {
            let lock = dir.join(LOCK_NAME);
            if std::fs::read_to_string(&lock).is_ok_and(|text| text.trim() == self.me.trim()) {
                let _ = std::fs::remove_file(lock);
            }
        }
    }
}
