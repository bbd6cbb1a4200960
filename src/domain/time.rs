//! How the hub writes times: ISO-8601 in UTC with microseconds, so that rows created in the same
//! second still sort in creation order (project order in the base JQL depends on it).
//!
//! [`Utc`] is such a time as rows and views carry it: typed for comparisons, shown as the text
//! it was stored with.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;

/// `2026-11-29T19:43:09.123456Z`: the form of every `*_at` column the hub writes.
pub(crate) fn format_utc(at: OffsetDateTime) -> String {
    let format =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");
    at.to_offset(time::UtcOffset::UTC)
        .format(&format)
        .unwrap_or_else(|_| at.unix_timestamp().to_string())
}

/// `2026-11-29 19:43:09 UTC`: a time as the CLI shows it to people (the stored text keeps its
/// microseconds for sorting; nobody reads them).
pub(crate) fn shown_utc(at: OffsetDateTime) -> String {
    let format = format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC");
    at.to_offset(time::UtcOffset::UTC)
        .format(&format)
        .unwrap_or_else(|_| at.unix_timestamp().to_string())
}

/// A UTC time the hub stored (a `*_at` column): compared as a time, serialized and shown as its
/// stored text, so a time an older version wrote without microseconds reads back as it was.
/// Times the hub writes now are `format_utc`'s form.
#[derive(Debug, Clone)]
pub struct Utc {
    at: OffsetDateTime,
    text: String,
}

impl Utc {
    /// A time now being written: its text is [`format_utc`]'s.
    pub(crate) fn new(at: OffsetDateTime) -> Utc {
        Utc {
            text: format_utc(at),
            at: at.to_offset(time::UtcOffset::UTC),
        }
    }

    /// A stored time (any RFC 3339 form), keeping its text.
    pub(crate) fn parse(text: &str) -> Option<Utc> {
        Some(Utc {
            at: parse_utc(text)?.to_offset(time::UtcOffset::UTC),
            text: text.to_string(),
        })
    }

    /// A stored text that is not a time (edited by hand), read anyway: it keeps its text and
    /// counts as the Unix epoch, the earliest time (a lease of such a claim is over).
    pub(crate) fn not_a_time(text: String) -> Utc {
        Utc {
            at: OffsetDateTime::UNIX_EPOCH,
            text,
        }
    }

    pub(crate) fn at(&self) -> OffsetDateTime {
        self.at
    }

    /// The text as stored (and shown).
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl PartialEq for Utc {
    fn eq(&self, other: &Utc) -> bool {
        self.at == other.at
    }
}

impl Eq for Utc {}

impl PartialOrd for Utc {
    fn partial_cmp(&self, other: &Utc) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Utc {
    fn cmp(&self, other: &Utc) -> std::cmp::Ordering {
        self.at.cmp(&other.at)
    }
}

impl std::fmt::Display for Utc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl serde::Serialize for Utc {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

/// `20261129-194309`: the stamp in backup file names.
pub(crate) fn backup_stamp(at: OffsetDateTime) -> String {
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

    #[test]
    fn a_stored_time_shows_as_stored() {
        let old = Utc::parse("2026-01-04T00:05:00Z").unwrap();
        assert_eq!(old.to_string(), "2026-01-04T00:05:00Z");
        assert_eq!(serde_json::to_value(&old).unwrap(), "2026-01-04T00:05:00Z");
        let new = Utc::new(datetime!(2026-01-04 03:05:00 +03:00));
        assert_eq!(new.as_str(), "2026-01-04T00:05:00.000000Z");
        assert_eq!(old, new);
        let bad = Utc::not_a_time("вчера".into());
        assert_eq!(bad.as_str(), "вчера");
        assert!(bad < old);
        assert!(Utc::parse("вчера").is_none());
    }
}
