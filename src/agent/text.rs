//! Jira's words in ours: error bodies turned into a short sentence, excerpts of bodies,
//! percent-encoded user names.

use crate::agent::net::Reply;
use serde_json::Value;

/// A header value as `decodeURIComponent` reads it: each `%XX` a byte, the bytes UTF-8 (a
/// malformed escape is kept as it is; `+` stays `+`, as Jira encodes a space `%20`).
pub(crate) fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&high), Some(&low)) if hex(high).is_some() && hex(low).is_some() => {
                out.push((hex(high).unwrap_or(0) * 16 + hex(low).unwrap_or(0)) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The start of a body, as text for a message.
pub(crate) fn body_excerpt(body: &[u8]) -> String {
    short_text(&String::from_utf8_lossy(&body[..body.len().min(4096)]))
}

/// Jira's words for an error answer: `errors` as `field: message`, then `errorMessages`, joined
/// by `; `. A body that is not Jira's JSON (an HTML error page) gives the status and a short
/// text.
pub(crate) fn error_text(reply: &Reply) -> String {
    error_text_of(reply.status, &reply.body)
}

pub(crate) fn error_text_of(status: u16, body: &[u8]) -> String {
    let mut parts = Vec::new();
    let json = serde_json::from_slice::<Value>(body).ok();
    if let Some(Value::Object(object)) = &json {
        if let Some(Value::Object(errors)) = object.get("errors") {
            for (field, message) in errors {
                let message = message
                    .as_str()
                    .map(String::from)
                    .unwrap_or_else(|| message.to_string());
                parts.push(format!("{field}: {message}"));
            }
        }
        if let Some(Value::Array(messages)) = object.get("errorMessages") {
            parts.extend(messages.iter().filter_map(Value::as_str).map(String::from));
        }
        if parts.is_empty()
            && let Some(message) = object.get("message").and_then(Value::as_str)
        {
            parts.push(message.to_string());
        }
    }
    if !parts.is_empty() {
        return parts.join("; ");
    }
    if json.is_some() {
        return format!("HTTP {status}");
    }
    let text = short_text(&String::from_utf8_lossy(body));
    if text.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {text}")
    }
}

/// Text without HTML tags, whitespace collapsed, at most 200 characters.
fn short_text(body: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    let mut skip_until: Option<&str> = None;
    let lower = body.to_lowercase();
    let mut i = 0;
    let chars: Vec<(usize, char)> = body.char_indices().collect();
    while i < chars.len() {
        let (at, c) = chars[i];
        if let Some(end) = skip_until {
            if lower.get(at..).is_some_and(|rest| rest.starts_with(end)) {
                skip_until = None;
            }
            i += 1;
            continue;
        }
        if c == '<' {
            if lower.get(at..).is_some_and(|r| r.starts_with("<style")) {
                skip_until = Some("</style");
            } else if lower.get(at..).is_some_and(|r| r.starts_with("<script")) {
                skip_until = Some("</script");
            }
            in_tag = true;
        } else if c == '>' {
            in_tag = false;
            out.push(' ');
        } else if !in_tag {
            out.push(c);
        }
        i += 1;
    }
    let collapsed: Vec<&str> = out.split_whitespace().collect();
    let mut text = collapsed.join(" ");
    if text.chars().count() > 200 {
        text = text.chars().take(200).collect::<String>() + "…";
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `X-AUSERNAME` as Jira's `AccessLogFilter` writes it (`JiraUrlCodec.encode(name, true)`).
    #[test]
    fn user_names_in_headers_are_percent_decoded() {
        assert_eq!(percent_decoded("svc.jira%40corp.ru"), "svc.jira@corp.ru");
        assert_eq!(percent_decoded("CORP%5Csvc"), "CORP\\svc");
        assert_eq!(
            percent_decoded("%D1%81%D0%B5%D1%80%D0%B2%D0%B8%D1%81%20jira"),
            "сервис jira"
        );
        assert_eq!(percent_decoded("a+b%2"), "a+b%2");
    }

    #[test]
    fn errors_in_jira_words() {
        assert_eq!(
            error_text_of(
                400,
                br#"{"errorMessages":["Issue does not exist"],"errors":{"summary":"Field required"}}"#
            ),
            "summary: Field required; Issue does not exist"
        );
        assert_eq!(
            error_text_of(404, br#"{"errorMessages":[],"errors":{}}"#),
            "HTTP 404"
        );
        assert_eq!(
            error_text_of(
                429,
                b"<html><head><style>p{}</style><title>Oops</title></head><body><h1>Oops - an error has occurred</h1>\n\n</body></html>"
            ),
            "HTTP 429: Oops Oops - an error has occurred"
        );
        assert_eq!(error_text_of(502, b""), "HTTP 502");
        let long = "x".repeat(500);
        assert!(error_text_of(500, long.as_bytes()).chars().count() < 220);
        assert_eq!(
            error_text_of(401, br#"{"message":"Unauthorized"}"#),
            "Unauthorized"
        );
    }
}
