//! `jira-hub relay inspect` and `relay validate`: what an operator sees of relay files by hand.
//! Each file is read as the protocol reads it: a request (`<kind>-<id>.json` in `inbox/`,
//! `archive/`, `rejected/`), an answer (`outbox/`), or a refusal's reason (`*.error.json`).

use super::decide::{Decision, Limits, Observation, decide};
use super::fsio::{lstat_facts, open_request, read_limited};
use crate::protocol::{
    AgentRequest, ClaimAnswer, HeartbeatAnswer, ReportAnswer, ResultStatus, TokenCheck,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What one file is and holds.
#[derive(Debug, Clone)]
pub(crate) struct FileReport {
    pub path: PathBuf,
    pub kind: String,
    pub id: String,
    pub agent: String,
    /// Since the file was last modified, by this machine's clock.
    pub age: String,
    pub carries: String,
    /// `Err(why)` when the file breaks the protocol.
    pub valid: Result<(), String>,
    /// For requests: the (kind, id) to look up in the hub's record.
    pub request_key: Option<(String, String)>,
}

/// The files under `path`: the file itself, or the relay files of a folder (a relay folder's
/// four folders, `archive/` days included), in name order.
pub(crate) fn collect(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    let meta = path.symlink_metadata()?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)?.filter_map(Result::ok) {
            let entry_path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry_path);
            } else if name.ends_with(".json") {
                files.push(entry_path);
            }
        }
    }
    files.sort();
    Ok(files)
}

fn age_of(path: &Path) -> String {
    let Ok(age) = path
        .symlink_metadata()
        .and_then(|m| m.modified())
        .map(|m| SystemTime::now().duration_since(m).unwrap_or_default())
    else {
        return "?".into();
    };
    let seconds = age.as_secs();
    match seconds {
        0..=119 => format!("{seconds}s"),
        120..=7199 => format!("{}m", seconds / 60),
        7200..=172_799 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86_400),
    }
}

/// Reads one file. `token` is how a request's token is judged: `Expect` the database's agent
/// token (as the daemon judges it, so a claim with a wrong token shows as refused), or `Skip`
/// when there is no database to ask.
pub(crate) fn inspect_file(path: &Path, token: TokenCheck<'_>) -> FileReport {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let in_outbox = path
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|p| p == "outbox");
    let mut report = FileReport {
        path: path.to_path_buf(),
        kind: "?".into(),
        id: "?".into(),
        agent: "-".into(),
        age: age_of(path),
        carries: String::new(),
        valid: Ok(()),
        request_key: None,
    };
    if let Some(original) = name.strip_suffix(".error.json") {
        report.kind = "refusal".into();
        match read_value(path) {
            Ok(value) => {
                report.carries = format!(
                    "why {original} was refused: {} {}",
                    value["code"].as_str().unwrap_or("?"),
                    value["message"].as_str().unwrap_or("")
                );
            }
            Err(error) => report.valid = Err(error),
        }
        return report;
    }
    if in_outbox {
        let Some((kind, id)) = answer_name(&name) else {
            report.valid =
                Err("имя ответа не вида <kind>-<id>.json или error-<kind>-<id>.json".into());
            return report;
        };
        report.kind = kind.to_string();
        report.id = id.to_string();
        inspect_answer(path, kind, id, &mut report);
        return report;
    }
    inspect_request(path, &name, token, &mut report);
    report
}

/// `<kind>-<id>.json` or `error-<kind>-<id>.json` of `outbox/` → (kind, id).
fn answer_name(name: &str) -> Option<(&str, &str)> {
    let stem = name.strip_suffix(".json")?;
    if let Some(rest) = stem.strip_prefix("error-") {
        // `error-<kind>-<id>`; an older hub wrote `error-<id>`.
        let id = match rest.split_once('-') {
            Some((kind, id)) if crate::protocol::Kind::parse(kind).is_some() => id,
            _ => rest,
        };
        return crate::protocol::is_valid_id(id).then_some(("error", id));
    }
    let (kind, id) = stem.split_once('-')?;
    (crate::protocol::Kind::parse(kind).is_some() && crate::protocol::is_valid_id(id))
        .then_some((kind, id))
}

/// The largest request `relay inspect` reads (the daemon's default limit).
const INSPECT_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// Reads a small JSON file of the hub's (an answer, a reason) the safe way: no link followed, no
/// FIFO waited on, at most the inspect limit.
fn read_value(path: &Path) -> Result<Value, String> {
    let (mut file, facts) = open_request(path).map_err(|e| e.to_string())?;
    if !facts.regular {
        return Err("не обычный файл (ссылка, папка, канал или устройство)".into());
    }
    let bytes =
        read_limited(&mut file, INSPECT_MAX_BYTES, facts.len, &|| {}).map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| crate::domain::json::plain_error(&e).to_string())
}

/// A request, judged by the daemon's own decision function (with the hub's agent token when
/// there is a database, and without the relay's memory of when the file was first seen).
fn inspect_request(path: &Path, name: &str, token: TokenCheck<'_>, report: &mut FileReport) {
    let limits = Limits {
        max_file_bytes: INSPECT_MAX_BYTES,
        grace: std::time::Duration::MAX,
        arrival_limit: std::time::Duration::MAX,
    };
    let mut observation = Observation {
        name,
        facts: lstat_facts(path),
        bytes: None,
        sighting: None,
        now: std::time::Instant::now(),
        token,
    };
    let bytes;
    let mut decision = decide(&observation, &limits);
    if decision == Decision::Read {
        match open_request(path) {
            Ok((mut file, facts)) => {
                observation.facts = Some(facts);
                bytes = if facts.regular {
                    read_limited(&mut file, INSPECT_MAX_BYTES + 1, facts.len, &|| {})
                        .unwrap_or_default()
                } else {
                    Vec::new()
                };
                if facts.regular {
                    observation.bytes = Some(&bytes);
                }
                decision = decide(&observation, &limits);
            }
            Err(error) => {
                report.valid = Err(error.to_string());
                return;
            }
        }
    }
    let request = match decision {
        Decision::Apply(request) => request,
        Decision::Refuse(refusal) => {
            report.valid = Err(match refusal.field {
                Some(field) => format!("{field}: {}", refusal.message),
                None => refusal.message,
            });
            return;
        }
        Decision::Wait | Decision::Read => {
            report.valid = Err("неполный JSON: файл, возможно, ещё пишется".into());
            return;
        }
        Decision::Skip => {
            report.valid = Err("не файл папки обмена".into());
            return;
        }
    };
    let envelope = request.envelope();
    report.kind = request.kind().to_string();
    report.id = envelope.id.clone();
    report.agent = envelope.agent.clone();
    report.request_key = Some((request.kind().to_string(), envelope.id.clone()));
    if envelope.token.is_none() {
        report.valid = Err("token: нет токена агента".into());
    }
    report.carries = match request.as_ref() {
        AgentRequest::Claim(claim) => {
            format!(
                "up to {}, agent {} has settings v{}",
                crate::domain::words::count_en(u64::from(claim.max_commands), "command"),
                claim.agent_version,
                claim.settings_version
            )
        }
        AgentRequest::Report(r) => {
            let count = |s: ResultStatus| r.results.iter().filter(|x| x.status == s).count();
            let issues: usize = r
                .results
                .iter()
                .filter_map(|x| x.page.as_ref())
                .map(|p| p.issues.len())
                .sum();
            let released = match count(ResultStatus::Released) {
                0 => String::new(),
                n => format!(", released {n}"),
            };
            format!(
                "{}: done {}, failed {}, skipped {}, progress {} ({}){released}",
                crate::domain::words::count_en(r.results.len() as u64, "result"),
                count(ResultStatus::Done),
                count(ResultStatus::Failed),
                count(ResultStatus::Skipped),
                count(ResultStatus::Progress),
                crate::domain::words::count_en(issues as u64, "issue")
            )
        }
        AgentRequest::Heartbeat(h) => match (&h.jira_ok, &h.last_error) {
            (true, _) => format!("agent {}, Jira ok", h.agent_version),
            (false, error) => format!(
                "agent {}, Jira failing: {}",
                h.agent_version,
                error.as_deref().unwrap_or("?")
            ),
        },
    };
}

fn inspect_answer(path: &Path, kind: &str, id: &str, report: &mut FileReport) {
    let value = match read_value(path) {
        Ok(value) => value,
        Err(error) => {
            report.valid = Err(error);
            return;
        }
    };
    if value["request_id"].as_str() != Some(id) {
        report.valid = Err("request_id не совпадает с именем файла".into());
    }
    let typed = match kind {
        "claim" => serde_json::from_value::<ClaimAnswer>(value.clone()).map(|a| {
            format!(
                "answer: {}, pause {} s{}",
                crate::domain::words::count_en(a.commands.len() as u64, "command"),
                a.pause_seconds,
                if a.settings.is_some() {
                    ", new settings"
                } else {
                    ""
                }
            )
        }),
        "report" => serde_json::from_value::<ReportAnswer>(value.clone()).map(|a| {
            format!(
                "answer: accepted {}, ignored {}",
                a.accepted.len(),
                a.ignored.len()
            )
        }),
        "heartbeat" => serde_json::from_value::<HeartbeatAnswer>(value.clone())
            .map(|_| "answer: acknowledged".to_string()),
        "error" => Ok(format!(
            "refusal: {} {}",
            value["error"]["code"].as_str().unwrap_or("?"),
            value["error"]["message"].as_str().unwrap_or("")
        )),
        other => {
            report.valid = Err(format!("неизвестный вид {other}"));
            return;
        }
    };
    match typed {
        Ok(carries) => report.carries = carries,
        Err(error) => report.valid = Err(crate::domain::json::plain_error(&error).to_string()),
    }
}

/// The table `relay inspect` prints: one row a file, columns padded to line up (the last
/// column, what the file carries, runs to the end of the line).
pub(crate) fn format_table(reports: &[(FileReport, Option<String>)], base: &Path) -> String {
    let mut rows: Vec<[String; 8]> = vec![
        [
            "FILE", "KIND", "ID", "AGENT", "AGE", "VALID", "APPLIED", "CARRIES",
        ]
        .map(String::from),
    ];
    for (report, applied) in reports {
        let shown = report.path.strip_prefix(base).unwrap_or(&report.path);
        let shown = if shown.as_os_str().is_empty() {
            report.path.as_path()
        } else {
            shown
        };
        // Whatever the share holds is shown, never obeyed: control characters are escaped.
        rows.push(
            [
                shown.display().to_string(),
                report.kind.clone(),
                report.id.clone(),
                report.agent.clone(),
                report.age.clone(),
                match &report.valid {
                    Ok(()) => "valid".to_string(),
                    Err(why) => format!("INVALID: {why}"),
                },
                applied.clone().unwrap_or_else(|| "-".into()),
                report.carries.clone(),
            ]
            .map(|cell| escape_for_terminal(&cell)),
        );
    }
    let widths: Vec<usize> = (0..7)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        for (c, cell) in row.iter().enumerate() {
            if c < 7 {
                out.push_str(&format!("{cell:<width$}  ", width = widths[c]));
            } else {
                out.push_str(cell);
            }
        }
        out.push('\n');
    }
    out
}

/// Text from the share made safe for a terminal: control characters (escape sequences, carriage
/// returns, NUL) and the invisible direction marks that reorder text are shown as `\u{…}`.
pub(crate) fn escape_for_terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let invisible = matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}');
        if c.is_control() || invisible {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(escape_for_terminal("plain текст"), "plain текст");
        assert_eq!(escape_for_terminal("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(escape_for_terminal("x\ny\0"), "x\\u{a}y\\u{0}");
        assert_eq!(escape_for_terminal("\u{202E}evil"), "\\u{202e}evil");
    }
}
