//! How the hub writes times: ISO-8601 in UTC with microseconds, so that rows created in the same
//! second still sort in creation order (project order in the base JQL depends on it).

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;

/// `2026-11-29T19:43:09.123456Z`: the form of every `*_at` column the hub writes.
pub fn format_utc(at: OffsetDateTime) -> String {
    let format =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");
    at.to_offset(time::UtcOffset::UTC)
        .format(&format)
        .unwrap_or_else(|_| at.unix_timestamp().to_string())
}

/// `20261129-194309`: the stamp in backup file names.
pub fn backup_stamp(at: OffsetDateTime) -> String {
    let format = format_description!("[year][month][day]-[hour][minute][second]");
    at.to_offset(time::UtcOffset::UTC)
        .format(&format)
        .unwrap_or_else(|_| at.unix_timestamp().to_string())
}

/// Reads a time the hub wrote (any RFC 3339 form).
pub fn parse_utc(text: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text, &Rfc3339).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn formats_in_utc_with_microseconds() {
        let at = datetime!(2026-03-05 10:15:30.000_123 +03:00);
        assert_eq!(format_utc(at), "2026-03-05T07:15:30.000123Z");
        assert_eq!(backup_stamp(at), "20260305-071530");
        assert_eq!(parse_utc(&format_utc(at)), Some(at));
    }
}
