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
        // Ours already: only its modification time is moved on (the file server's clock, as a
        // write would set it), so that a heartbeat writes no data, only an inode's time (issue
        // 23's budget at rest: a rewrite every 10 s was 47 KB a minute of data and metadata).
        if text_is_ours(&lock, &self.me) && touch(&lock).is_ok() {
            self.held = Some((dir.to_path_buf(), now));
            return Ok(());
        }
        // Missing, stale or another's: written whole under a temporary name, then renamed over
        // (its modification time is the heartbeat).
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
            if text_is_ours(&lock, &self.me) {
                let _ = std::fs::remove_file(lock);
            }
        }
    }
}

/// Whether the lock at `path` holds `me`'s text.
fn text_is_ours(path: &Path, me: &str) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| text.trim() == me.trim())
}

/// Sets the modification time of `path` to the file system's "now" (`utimensat` with
/// `UTIME_NOW`: on a network share, the server's clock, as a write would set it), leaving its
/// access time and its content alone.
fn touch(path: &Path) -> std::io::Result<()> {
    use rustix::fs::{AtFlags, CWD, Timespec, Timestamps, UTIME_NOW, UTIME_OMIT};
    let times = Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_OMIT,
        },
        last_modification: Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_NOW,
        },
    };
    rustix::fs::utimensat(CWD, path, &times, AtFlags::empty()).map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_heartbeat_moves_the_locks_time_on_without_rewriting_it() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join(LOCK_NAME);
        let mut owner = Owner::new(Path::new("/var/lib/jira-hub/hub.sqlite"));
        let start = SystemTime::now();
        owner.claim(dir.path(), start).unwrap();
        let written = std::fs::metadata(&lock).unwrap();
        // The lock as a minute old: the next heartbeat must make it fresh again.
        let old = start - Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&lock)
            .unwrap()
            .set_modified(old)
            .unwrap();
        owner.claim(dir.path(), start + HEARTBEAT).unwrap();
        let touched = std::fs::metadata(&lock).unwrap();
        assert_eq!(
            touched.ino(),
            written.ino(),
            "the lock was replaced, not touched"
        );
        assert!(touched.modified().unwrap() > old + Duration::from_secs(30));
        assert_eq!(
            std::fs::read_to_string(&lock).unwrap().trim(),
            owner.me.trim()
        );
        // Another hub's text is never touched as ours: it is written whole when stale.
        std::fs::write(&lock, "elsewhere\n1\n/other.sqlite\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&lock)
            .unwrap()
            .set_modified(old - STALE_AFTER)
            .unwrap();
        owner.claim(dir.path(), start + 2 * HEARTBEAT).unwrap();
        assert_eq!(
            std::fs::read_to_string(&lock).unwrap().trim(),
            owner.me.trim()
        );
        owner.release();
        assert!(!lock.exists());
    }
}
