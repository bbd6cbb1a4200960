//! How late the hub sees the agent's files: a network share's client caches a folder's listing
//! and its files' attributes (sshfs 20 s by default, NFS `acdirmin` 30 s to `acdirmax` 60 s,
//! CIFS `actimeo` 1 s, rclone `--dir-cache-time` 5 min), so a file the agent wrote there may be
//! listed by the hub long after it was written, and nothing else says so.
//!
//! Measured in the exchange itself, on the file server's clock only: a request's modification
//! time is the file server's time of its last write; the hub's own writes there (the lock's
//! heartbeat) tell how far the file server's clock is from the hub's, so the moment the hub first
//! lists a request is put on the file server's clock too. The delay is what lies between. Clocks
//! of the two machines never meet: only the file server's, twice.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

/// How many recent requests the delay is the median of: one odd request (a file copied in with
/// an old mtime by hand) does not make a share look slow, a slow share shows within a few.
const SAMPLES: usize = 9;
/// A request older than this when first listed was not written by an agent just now (a copy
/// that kept its mtime, a file left while the hub was down): it says nothing of the share.
const NOT_A_DELAY: Duration = Duration::from_secs(600);
/// Above this the share is named late: the hub's own listing interval (1 s) and the file
/// server's one-second mtimes (SFTP's times are whole seconds) stay below it.
pub(crate) const LATE: Duration = Duration::from_secs(2);

/// The delay measured so far, and how far the file server's clock is from the hub's.
#[derive(Debug, Default)]
pub(crate) struct Visibility {
    /// The file server's clock minus the hub's, in milliseconds, as last measured.
    offset_ms: Option<i128>,
    samples: VecDeque<Duration>,
}

impl Visibility {
    /// A file this hub wrote at `local` (its clock) got `server` as its modification time.
    pub(crate) fn learn_clock(&mut self, local: SystemTime, server: SystemTime) {
        self.offset_ms = Some(millis(server) - millis(local));
    }

    /// A request first listed at `local` (the hub's clock), last written at `modified` (the file
    /// server's clock). Returns the delay when it counts as one.
    pub(crate) fn seen(&mut self, local: SystemTime, modified: SystemTime) -> Option<Duration> {
        let offset = self.offset_ms?;
        let late_ms = millis(local) + offset - millis(modified);
        let delay = Duration::from_millis(u64::try_from(late_ms.max(0)).unwrap_or(u64::MAX));
        if delay > NOT_A_DELAY {
            return None;
        }
        if self.samples.len() == SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back(delay);
        Some(delay)
    }

    /// The median delay of the recent requests, once there is one.
    pub(crate) fn delay(&self) -> Option<Duration> {
        let mut sorted: Vec<Duration> = self.samples.iter().copied().collect();
        sorted.sort();
        sorted.get(sorted.len() / 2).copied()
    }

    /// A folder changed: what was measured belongs to the old one.
    pub(crate) fn forget(&mut self) {
        *self = Visibility::default();
    }
}

fn millis(at: SystemTime) -> i128 {
    match at.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(after) => after.as_millis() as i128,
        Err(before) => -(before.duration().as_millis() as i128),
    }
}

/// The one line shown beside a late delay: how late, and the mount option that removes it for
/// the file system `dir` is on.
pub(crate) fn tell(delay: Duration, dir: &std::path::Path) -> String {
    format!(
        "хаб видит файлы агента с опозданием {:.1} с: {}",
        delay.as_secs_f64(),
        crate::sharefs::cache_advice(dir)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_is_taken_on_the_file_servers_clock_whatever_the_hubs() {
        let server = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        // The hub's clock 200 s ahead of the file server's.
        let skew = Duration::from_secs(200);
        let mut seen = Visibility::default();
        assert_eq!(
            seen.seen(server + skew, server),
            None,
            "no clock learnt yet"
        );
        seen.learn_clock(server + skew, server);
        // A request written at the file server's `t`, listed by the hub 20 s later.
        for n in 0..5 {
            let t = server + Duration::from_secs(30 * n);
            let delay = seen.seen(t + Duration::from_secs(20) + skew, t);
            assert_eq!(delay, Some(Duration::from_secs(20)));
        }
        assert_eq!(seen.delay(), Some(Duration::from_secs(20)));
        // A copy that kept an hour-old mtime is no delay of the share.
        assert_eq!(
            seen.seen(server + skew, server - Duration::from_secs(3600)),
            None
        );
        // A fast share shows within a few requests.
        for _ in 0..5 {
            seen.seen(server + skew + Duration::from_millis(300), server);
        }
        assert_eq!(seen.delay(), Some(Duration::from_millis(300)));
        seen.forget();
        assert_eq!(seen.delay(), None);
    }
}
