//! Where the log goes: stderr, through a writer that never fails. A log line that cannot be
//! written (stderr on a full disk, a closed pipe, `EPIPE`, `ENOSPC`) is dropped and counted
//! ([`lines_dropped`], `jira_hub_log_lines_dropped_total` in `/metrics`), never an error:
//! `tracing-subscriber` reports a failed write with `eprintln!`, which panics when stderr itself
//! fails, so every log line panicked its thread (the relay's died, SIGTERM went unanswered).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Log lines this process could not write since it started.
pub fn lines_dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// The log's writer: stderr, each line written whole or dropped and counted.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Stderr {
    type Writer = Stderr;

    fn make_writer(&'a self) -> Self::Writer {
        Stderr
    }
}

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    /// `tracing-subscriber` writes each formatted line with one call.
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let mut stderr = std::io::stderr().lock();
        if stderr.write_all(buf).and_then(|()| stderr.flush()).is_err() {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Says `line` on stderr, as [`Stderr`] writes a log line (`main`'s last word on an error).
pub fn say(line: &str) {
    let _ = Stderr.write_all(format!("{line}\n").as_bytes());
}
