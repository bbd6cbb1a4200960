//! Which hub serves a relay folder: a lock file `.jira-hub-relay.lock` in the
//! folder names the hub (host, process id, database) and is touched every
//! [`HEARTBEAT`]; another hub that finds it fresh (touched within [`STALE_AFTER`]) leaves the
//! folder alone and says who has it. A file with a heartbeat, not `flock`: the relay folder is
//! a network share (NFS, SMB), where `flock` is emulated with byte-range locks, or local only to
//! one client, and a lock held by a hub on another machine may never be seen; a file and its
//! modification time are seen by every client of the share. A hub that dies leaves the file, stale
//! after a minute; a hub that stops removes it.

use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::sharefs;

/// The lock file's name in the relay folder.
pub(crate) const LOCK_NAME: &str = crate::protocol::RELAY_LOCK_NAME;
/// How often the owner touches it.
const HEARTBEAT: Duration = Duration::from_secs(10);
/// A lock not touched for this long belongs to a hub that is gone (six heartbeats: a share's
/// attribute cache, 3 to 60 s on NFS, must not make a live hub look dead).
const STALE_AFTER: Duration = Duration::from_secs(90);
/// The most a lock may hold: three short lines. A bigger file (a sparse file of gigabytes planted
/// in its place) is not a lock and is never read.
const LOCK_MAX_BYTES: u64 = 4096;

/// Why this hub does not serve a relay folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Another hub's fresh lock is there: who (its name, process and database).
    Held(String),
    /// This hub could not write its own lock there: the error.
    Unwritable(String),
}

/// This hub as the lock names it.
pub(crate) struct Owner {
    /// The lock's text: three lines, the host, the process id, the database.
    me: String,
    host: String,
    database: String,
    /// The folder this hub holds, and when (on this hub's clock) it last touched the lock.
    held: Option<(PathBuf, SystemTime)>,
    /// A line published after the three (the delay this hub measured: see [`published_delay`]).
    extra: String,
    /// The last file this hub wrote in the share: its clock then, and the file server's (the
    /// file's modification time).
    clock: Option<(SystemTime, SystemTime)>,
    /// The folder another hub holds, when this hub last looked (on its own clock), and who: a
    /// hub standing by looks again after a heartbeat, not on every pass.
    refused: Option<(PathBuf, SystemTime, String)>,
}

/// What the lock's name holds, read as the share's hostile ground demands.
enum Seen {
    Missing,
    /// Something that is not a lock: a link, a FIFO, a device, a huge or unreadable file.
    Unusable(String),
    Lock {
        text: String,
        /// The file server's time of its last write.
        modified: SystemTime,
    },
}

impl Owner {
    pub(crate) fn new(database: &Path) -> Owner {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "?".into());
        let database = database.display().to_string();
        Owner {
            me: format!("{host}\n{}\n{database}\n", std::process::id()),
            host,
            database,
            held: None,
            refused: None,
            extra: String::new(),
            clock: None,
        }
    }

    /// Takes (or keeps) `dir` for this hub: [`Refused::Held`] with the other hub's name when a
    /// fresh lock of another names it, [`Refused::Unwritable`] when this hub cannot write its own
    /// lock there (a read-only share, a full disk, a dropped mount). `now` is this hub's clock,
    /// used only to space its own heartbeats: whether another's lock is fresh is judged on the
    /// file server's clock.
    pub(crate) fn claim(&mut self, dir: &Path, now: SystemTime) -> Result<(), Refused> {
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
        if let Some((refused, looked, other)) = &self.refused
            && refused == dir
            && now.duration_since(*looked).unwrap_or_default() < HEARTBEAT
        {
            return Err(Refused::Held(other.clone()));
        }
        self.refused = None;
        // Ours already: its own bytes are written again in place, so that the file server sets
        // its modification time (its clock, whoever wrote) with no new inode and no folder
        // change (the budget at rest: a rewrite every 10 s was 47 KB a minute of data
        // and metadata).
        let text = format!("{}{}", self.me, self.extra);
        if let Ok(Some(server)) = heartbeat(&lock, &self.me, &text) {
            self.clock = Some((SystemTime::now(), server));
            self.held = Some((dir.to_path_buf(), now));
            return Ok(());
        }
        let seen = look(&lock);
        // Missing, stale, another's or not a lock: this hub's text is written whole as a new file
        // under a name nobody can guess, whose modification time is the file server's "now";
        // the lock seen is judged against it, and replaced by a rename when it is not fresh.
        let temp = sharefs::temp_name(dir, LOCK_NAME);
        let written_at = SystemTime::now();
        let server_now = write_probe(&temp, &text).map_err(|error| {
            let _ = std::fs::remove_file(&temp);
            Refused::Unwritable(error.to_string())
        })?;
        self.clock = Some((written_at, server_now));
        match &seen {
            Seen::Lock { text, modified }
                if fresh(server_now, *modified) && self.other_alive(text.trim()) =>
            {
                let _ = std::fs::remove_file(&temp);
                self.held = None;
                let mut lines = text.trim().lines();
                let other = format!(
                    "{}, pid {}, база {}",
                    lines.next().unwrap_or("?"),
                    lines.next().unwrap_or("?"),
                    lines.next().unwrap_or("?")
                );
                self.refused = Some((dir.to_path_buf(), now, other.clone()));
                return Err(Refused::Held(other));
            }
            Seen::Unusable(why) => tracing::warn!(
                lock = %lock.display(),
                why = %why,
                "the relay folder's lock was not a lock file (planted?); replaced with this hub's"
            ),
            Seen::Missing | Seen::Lock { .. } => {}
        }
        std::fs::rename(&temp, &lock).map_err(|error| {
            let _ = std::fs::remove_file(&temp);
            Refused::Unwritable(error.to_string())
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

    /// The hub's clock and the file server's at this hub's last write in the share.
    pub(crate) fn clock(&self) -> Option<(SystemTime, SystemTime)> {
        self.clock
    }

    /// What the lock carries after the hub's name from the next heartbeat on: the delay this hub
    /// measured (`None`: not measured), for `status` and the agent to read in the share.
    pub(crate) fn publish(&mut self, delay: Option<Duration>, fstype: Option<&str>) {
        self.extra = delay
            .map(|delay| format!("{DELAY_KEY}{}\n", delay.as_millis()))
            .unwrap_or_default();
        if let Some(fstype) = fstype.filter(|t| !t.is_empty() && !t.contains(char::is_whitespace)) {
            self.extra
                .push_str(&format!("{}{fstype}\n", crate::protocol::RELAY_MOUNT_KEY));
        }
    }

    /// The folder is left (another one set, or the hub stops): its lock goes, if it is ours.
    pub(crate) fn release(&mut self) {
        self.refused = None;
        if let Some((dir, _)) = self.held.take() {
            let lock = dir.join(LOCK_NAME);
            if matches!(look(&lock), Seen::Lock { text, .. } if same_hub(&text, &self.me)) {
                let _ = std::fs::remove_file(lock);
            }
        }
    }
}

/// The line of the lock that carries the delay the hub measured, in milliseconds.
const DELAY_KEY: &str = crate::protocol::RELAY_VISIBILITY_KEY;

/// Whether a lock's text names the hub `me` names (its first three lines).
fn same_hub(text: &str, me: &str) -> bool {
    text.lines().take(3).eq(me.lines().take(3))
}

/// The delay at which the hub serving `dir` sees the agent's files, as it published it in its
/// lock (read as every lock is: no link, no FIFO, a few lines at most).
pub(crate) fn published_delay(dir: &Path) -> Option<Duration> {
    let Seen::Lock { text, .. } = look(&dir.join(LOCK_NAME)) else {
        return None;
    };
    crate::protocol::relay_lock_visibility(&text)
}

/// Reads the lock without following a link, without blocking, regular files of a few lines only.
fn look(lock: &Path) -> Seen {
    let read = sharefs::open_regular(lock, false, LOCK_MAX_BYTES).and_then(|(mut file, meta)| {
        let bytes = sharefs::read_limited(&mut file, LOCK_MAX_BYTES, meta.len(), &|| {})?;
        Ok((bytes, meta.modified()?))
    });
    match read {
        Ok((bytes, modified)) => Seen::Lock {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            modified,
        },
        Err(error) if error.kind() == ErrorKind::NotFound => Seen::Missing,
        Err(error) => Seen::Unusable(error.to_string()),
    }
}

/// The owner's heartbeat: when the lock is a regular file naming this hub (`me`), `text` is
/// written at its start (the same bytes as a rule; the file server sets its modification time).
/// Returns that time, or `None` when the lock is not ours.
fn heartbeat(lock: &Path, me: &str, text: &str) -> std::io::Result<Option<SystemTime>> {
    let (mut file, meta) = sharefs::open_regular(lock, true, LOCK_MAX_BYTES)?;
    let bytes = sharefs::read_limited(&mut file, LOCK_MAX_BYTES, meta.len(), &|| {})?;
    if !same_hub(&String::from_utf8_lossy(&bytes), me) {
        return Ok(None);
    }
    file.write_all_at(text.as_bytes(), 0)?;
    if bytes.len() != text.len() {
        file.set_len(text.len() as u64)?;
    }
    Ok(Some(file.metadata()?.modified()?))
}

/// Writes `text` as the new file `temp` and returns its modification time: the file server's clock
/// at that write.
fn write_probe(temp: &Path, text: &str) -> std::io::Result<SystemTime> {
    let mut file = sharefs::create_new(temp, super::fsio::RELAY_FILE_MODE)?;
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    file.metadata()?.modified()
}

/// Whether a lock last written at `modified` is fresh at `server_now`, both on the file server's
/// clock. A time ahead of the server's (a lock touched by a client that set it itself) is as far
/// from fresh as the same time behind.
fn fresh(server_now: SystemTime, modified: SystemTime) -> bool {
    let apart = server_now
        .duration_since(modified)
        .unwrap_or_else(|ahead| ahead.duration());
    apart < STALE_AFTER
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
        std::fs::remove_file(&lock).unwrap();
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
        // The delay the hub measured rides on the heartbeat, for `status` and the agent.
        owner.publish(Some(Duration::from_millis(20_100)), Some("fuse.sshfs"));
        owner.claim(dir.path(), start + 3 * HEARTBEAT).unwrap();
        assert_eq!(
            published_delay(dir.path()),
            Some(Duration::from_millis(20_100))
        );
        owner.publish(None, None);
        owner.claim(dir.path(), start + 4 * HEARTBEAT).unwrap();
        assert_eq!(published_delay(dir.path()), None);
        assert!(owner.clock().is_some());
        owner.release();
        assert!(!lock.exists());
    }
    /// The database of a hub, elsewhere than the share, as a test's victim.
    fn victim() -> (tempfile::TempDir, PathBuf, Vec<u8>) {
        let home = tempfile::tempdir().unwrap();
        let database = home.path().join("hub.sqlite");
        let bytes = b"SQLite format 3\0 everything since the last backup".to_vec();
        std::fs::write(&database, &bytes).unwrap();
        (home, database, bytes)
    }

    #[test]
    fn a_link_planted_at_the_locks_temporary_name_never_truncates_the_database() {
        let (_home, database, bytes) = victim();
        let share = tempfile::tempdir().unwrap();
        // The name the heartbeat used to write through, the process id being printed in the lock.
        let planted = share
            .path()
            .join(format!("{LOCK_NAME}.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&database, &planted).unwrap();
        let mut owner = Owner::new(&database);
        owner.claim(share.path(), SystemTime::now()).unwrap();
        assert_eq!(
            std::fs::read(&database).unwrap(),
            bytes,
            "the database was written"
        );
        let lock = share.path().join(LOCK_NAME);
        assert!(lock.symlink_metadata().unwrap().is_file());
        assert_eq!(
            std::fs::read_to_string(&lock).unwrap().trim(),
            owner.me.trim()
        );
        // The lock itself made a link to the database: the heartbeat does not write through it
        // (nor touch its time), it replaces the link with a lock.
        std::fs::remove_file(&lock).unwrap();
        std::os::unix::fs::symlink(&database, &lock).unwrap();
        let before = std::fs::metadata(&database).unwrap().modified().unwrap();
        owner
            .claim(share.path(), SystemTime::now() + 2 * HEARTBEAT)
            .unwrap();
        assert_eq!(std::fs::read(&database).unwrap(), bytes);
        assert_eq!(
            std::fs::metadata(&database).unwrap().modified().unwrap(),
            before
        );
        assert!(
            lock.symlink_metadata().unwrap().is_file(),
            "the link was replaced"
        );
        assert!(
            planted.symlink_metadata().is_ok(),
            "the planted link left as it was"
        );
    }

    #[test]
    fn a_fifo_a_dev_zero_link_or_a_huge_sparse_file_as_the_lock_is_replaced_unread() {
        let (_home, database, _) = victim();
        let share = tempfile::tempdir().unwrap();
        let lock = share.path().join(LOCK_NAME);
        let mut owner = Owner::new(&database);
        let plant: [(&str, &dyn Fn()); 3] = [
            ("a FIFO", &|| {
                rustix::fs::mkfifoat(
                    rustix::fs::CWD,
                    &lock,
                    rustix::fs::Mode::from_raw_mode(0o666),
                )
                .unwrap()
            }),
            ("a link to /dev/zero", &|| {
                std::os::unix::fs::symlink("/dev/zero", &lock).unwrap()
            }),
            ("a sparse 20 GB file", &|| {
                std::fs::File::create(&lock)
                    .unwrap()
                    .set_len(20 << 30)
                    .unwrap()
            }),
        ];
        for (round, (what, plant)) in plant.iter().enumerate() {
            let _ = std::fs::remove_file(&lock);
            plant();
            let now = SystemTime::now() + (round as u32 + 1) * 2 * HEARTBEAT;
            owner
                .claim(share.path(), now)
                .unwrap_or_else(|e| panic!("{what}: {e:?}"));
            let meta = lock.symlink_metadata().unwrap();
            assert!(meta.is_file() && meta.len() < 4096, "{what} left in place");
            assert_eq!(
                std::fs::read_to_string(&lock).unwrap().trim(),
                owner.me.trim(),
                "{what}"
            );
        }
    }

    /// A folder this hub cannot write its lock into (here: gone, as under a dropped mount; a
    /// read-only share or a full disk fail the same write) is said to be that, not another hub's.
    #[test]
    fn a_lock_that_cannot_be_written_is_not_another_hubs() {
        let share = tempfile::tempdir().unwrap();
        let mut owner = Owner::new(Path::new("/var/lib/jira-hub/hub.sqlite"));
        let error = owner
            .claim(&share.path().join("gone"), SystemTime::now())
            .unwrap_err();
        assert!(
            matches!(&error, Refused::Unwritable(why) if why.contains("No such file")),
            "{error:?}"
        );
    }

    #[test]
    fn freshness_is_judged_on_the_file_servers_clock_not_the_hubs() {
        let share = tempfile::tempdir().unwrap();
        let mut first = Owner::new(Path::new("/var/lib/jira-hub/first.sqlite"));
        first.claim(share.path(), SystemTime::now()).unwrap();
        // A second hub whose clock is 200 s ahead of the file server's, or behind it: the lock
        // just written is fresh all the same, and the folder stays the first hub's.
        for skew in [Duration::from_secs(200), Duration::from_secs(0)] {
            let mut second = Owner::new(Path::new("/var/lib/jira-hub/second.sqlite"));
            let ahead = SystemTime::now() + skew;
            let error = second.claim(share.path(), ahead).unwrap_err();
            assert!(
                matches!(&error, Refused::Held(other) if other.contains("first.sqlite")),
                "{error:?}"
            );
            let mut behind = Owner::new(Path::new("/var/lib/jira-hub/third.sqlite"));
            let error = behind
                .claim(share.path(), SystemTime::now() - skew)
                .unwrap_err();
            assert!(
                matches!(&error, Refused::Held(other) if other.contains("first.sqlite")),
                "{error:?}"
            );
        }
        // Stale by the file server's clock (last written two minutes ago there) is stale, however
        // far behind the second hub's clock is.
        let lock = share.path().join(LOCK_NAME);
        std::fs::File::options()
            .write(true)
            .open(&lock)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(120))
            .unwrap();
        let mut second = Owner::new(Path::new("/var/lib/jira-hub/second.sqlite"));
        second
            .claim(share.path(), SystemTime::now() - Duration::from_secs(200))
            .unwrap();
        assert!(
            std::fs::read_to_string(&lock)
                .unwrap()
                .contains("second.sqlite")
        );
    }
}
