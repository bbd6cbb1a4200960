//! Jira's clock and its time formats (Moscow, +03:00), with a configurable skew.

use super::*;
use std::time::{SystemTime, UNIX_EPOCH};

/// Jira's offset: Moscow, +03:00.
pub(super) const OFFSET_SECONDS: i64 = 3 * 3600;

pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub(super) fn civil(ms: i64) -> (i64, u32, u32, u32, u32, u32, u32) {
    let local = ms + OFFSET_SECONDS * 1000;
    let millis = local.rem_euclid(1000) as u32;
    let seconds = local.div_euclid(1000);
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400) as u32;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        month,
        day,
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        millis,
    )
}

/// REST v2: `2026-03-05T10:15:30.000+0300`.
pub fn jira_time(ms: i64) -> String {
    let (y, mo, d, h, mi, s, ms) = civil(ms);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}+0300")
}

/// Agile: `2026-03-05T10:15:30.000+03:00`.
pub fn agile_time(ms: i64) -> String {
    let (y, mo, d, h, mi, s, ms) = civil(ms);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}+03:00")
}

impl StateInner {
    /// Now on Jira's clock (the host's plus the configured skew).
    pub(super) fn jira_now_ms(&self) -> i64 {
        now_ms() + self.skew_ms
    }
}

impl FakeJira {
    /// Jira's clock runs this many milliseconds ahead of the host's (behind when negative):
    /// `serverInfo.serverTime`, the times of new issues and comments, and so `created` in JQL.
    pub fn set_clock_skew_ms(&self, skew_ms: i64) {
        lock(&self.state).skew_ms = skew_ms;
    }
}
