//! What happens to one file of `inbox/`, decided by a pure function of its name, its metadata,
//! the bytes read, what the relay remembers of it and the time now. The worker only carries the
//! decision out (reads, refuses, applies), and `relay inspect` asks the same function, so the
//! daemon and the operator's tool cannot disagree about a file.
//!
//! Nothing here touches the disk or the clock: the worker passes `fstat` facts of a file it
//! opened without following links and without blocking, and instants of its monotonic clock.

use crate::protocol::{AgentRequest, DecodeError, Kind, TokenCheck, decode_bytes, is_valid_id};
use std::time::{Duration, Instant, SystemTime};

/// Why a file was refused, for `<name>.error.json` and the `error-<name>` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: &'static str,
    pub field: Option<String>,
    pub message: String,
}

impl Refusal {
    pub(crate) fn new(code: &'static str, field: Option<&str>, message: impl Into<String>) -> Self {
        Refusal {
            code,
            field: field.map(String::from),
            message: message.into(),
        }
    }
}

/// What a name says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NameVerdict<'a> {
    /// Clearly not a relay request (a dot file, `.nfs…`, another extension): left alone.
    NotOurs,
    /// `<kind>-<id>.json` of a known kind.
    Request { kind: Kind, id: &'a str },
    /// Ours by its look, but not valid: refused with the reason.
    Refuse(Refusal),
}

const KINDS: [Kind; 3] = [Kind::Claim, Kind::Report, Kind::Heartbeat];

/// Classifies a name of `inbox/`. A name that ends in `.json` (any case) and starts with a known
/// kind (any case) is ours: valid, or refused with its reason, never left in `inbox/` forever.
/// `<lowercase letters>-<id>.json` is a request of an unknown kind, refused too.
pub(crate) fn classify_name(name: &str) -> NameVerdict<'_> {
    if name.starts_with('.') || name.len() < ".json".len() {
        return NameVerdict::NotOurs;
    }
    let (stem, extension) = name.split_at(name.len() - ".json".len());
    if !extension.eq_ignore_ascii_case(".json") {
        return NameVerdict::NotOurs;
    }
    let bad_name =
        |message: String| NameVerdict::Refuse(Refusal::new("bad_name", Some("name"), message));
    for kind in KINDS {
        let word = kind.as_str();
        let Some(head) = stem.get(..word.len()) else {
            continue;
        };
        if !head.eq_ignore_ascii_case(word) {
            continue;
        }
        if head != word || extension != ".json" {
            return bad_name(format!(
                "имя пишется строчными: {word}-<id>.json, а не {name}"
            ));
        }
        let Some(id) = stem[word.len()..].strip_prefix('-') else {
            return bad_name(format!("имя должно быть вида {word}-<id>.json"));
        };
        if !is_valid_id(id) {
            return bad_name(
                "id в имени — от 1 до 64 символов из A-Z, a-z, 0-9, - и _".to_string(),
            );
        }
        return NameVerdict::Request { kind, id };
    }
    if let Some((kind, id)) = stem.split_once('-')
        && !kind.is_empty()
        && kind.bytes().all(|b| b.is_ascii_lowercase())
        && is_valid_id(id)
    {
        return NameVerdict::Refuse(Refusal::new(
            "unknown_kind",
            Some("kind"),
            format!("неизвестный вид запроса «{kind}»; допустимы claim, report, heartbeat"),
        ));
    }
    NameVerdict::NotOurs
}

/// What `fstat` of the opened file (or `lstat` of the name) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileFacts {
    /// A regular file (not a link, folder, FIFO, socket or device).
    pub regular: bool,
    pub len: u64,
    pub modified: Option<SystemTime>,
}

/// What the relay remembers of a name between passes, by its own monotonic clock (never by
/// mtime: copies keep old mtimes and clocks differ across the air gap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sighting {
    pub first_seen: Instant,
    /// When its size or modification time last changed: the grace period counts from here.
    pub last_change: Instant,
    pub len: u64,
    pub modified: Option<SystemTime>,
    /// It was read as it is now and was not complete: no need to read it again until it changes.
    pub read_incomplete: bool,
}

/// The sighting after looking at a file now.
pub(crate) fn observe(previous: Option<Sighting>, facts: &FileFacts, now: Instant) -> Sighting {
    match previous {
        Some(seen) if seen.len == facts.len && seen.modified == facts.modified => seen,
        Some(seen) => Sighting {
            last_change: now,
            len: facts.len,
            modified: facts.modified,
            read_incomplete: false,
            ..seen
        },
        None => Sighting {
            first_seen: now,
            last_change: now,
            len: facts.len,
            modified: facts.modified,
            read_incomplete: false,
        },
    }
}

/// The relay's limits (options of `serve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Larger files are refused unread.
    pub max_file_bytes: u64,
    /// How long an incomplete file may stay unchanged before it is refused.
    pub grace: Duration,
    /// How long an incomplete file may keep changing before it is refused all the same (a file
    /// whose mtime is touched forever must not wait forever).
    pub arrival_limit: Duration,
}

/// Everything the decision depends on.
#[derive(Clone, Copy)]
pub(crate) struct Observation<'a> {
    pub name: &'a str,
    /// `None`: the file is gone.
    pub facts: Option<FileFacts>,
    /// The file's bytes, once read.
    pub bytes: Option<&'a [u8]>,
    /// What the relay remembers (`None` for a one-off look, as `relay inspect` has).
    pub sighting: Option<Sighting>,
    pub now: Instant,
    /// How the body's token is checked.
    pub token: TokenCheck<'a>,
}

/// What to do with a file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    /// Not a relay request, or gone: nothing to do.
    Skip,
    /// Read its bytes and decide again.
    Read,
    /// Not complete yet: look again later.
    Wait,
    Refuse(Refusal),
    /// A valid, authentic request of the kind and id its name says.
    Apply(Box<AgentRequest>),
}

/// Decides what happens to one file.
pub(crate) fn decide(observation: &Observation<'_>, limits: &Limits) -> Decision {
    decide_decoded(observation, limits, None)
}

/// [`decide`], with the observation's bytes already decoded (read ahead on another thread, with
/// the same token check): `decoded` must be `decode_bytes` of `observation.bytes`.
pub(crate) fn decide_decoded(
    observation: &Observation<'_>,
    limits: &Limits,
    decoded: Option<Result<AgentRequest, DecodeError>>,
) -> Decision {
    let (kind, id) = match classify_name(observation.name) {
        NameVerdict::NotOurs => return Decision::Skip,
        NameVerdict::Refuse(refusal) => return Decision::Refuse(refusal),
        NameVerdict::Request { kind, id } => (kind, id),
    };
    let Some(facts) = observation.facts else {
        return Decision::Skip;
    };
    if !facts.regular {
        return Decision::Refuse(Refusal::new(
            "not_regular_file",
            None,
            "не обычный файл (ссылка, папка, канал или устройство)",
        ));
    }
    if facts.len > limits.max_file_bytes {
        return Decision::Refuse(Refusal::new(
            "too_large",
            None,
            format!(
                "файл {} байт больше предела {} байт",
                facts.len, limits.max_file_bytes
            ),
        ));
    }
    let Some(bytes) = observation.bytes else {
        return match observation.sighting {
            Some(seen) if seen.read_incomplete && seen.len == facts.len => {
                incomplete(observation, limits, "JSON оборван")
            }
            _ => Decision::Read,
        };
    };
    match decoded.unwrap_or_else(|| decode_bytes(bytes, observation.token)) {
        Ok(request) if request.kind() != kind => Decision::Refuse(Refusal::new(
            "kind_mismatch",
            Some("kind"),
            format!("в имени файла {kind}, в теле {}", request.kind()),
        )),
        Ok(request) if request.envelope().id != id => Decision::Refuse(Refusal::new(
            "id_mismatch",
            Some("id"),
            "id в теле не совпадает с именем файла",
        )),
        Ok(request) => Decision::Apply(Box::new(request)),
        Err(DecodeError::Incomplete(message)) => incomplete(observation, limits, &message),
        // A region of zero bytes is what a copy that sized the file first has not written yet.
        Err(DecodeError::NotJson(message)) if bytes.contains(&0) => {
            incomplete(observation, limits, &message)
        }
        Err(DecodeError::NotJson(message)) => {
            Decision::Refuse(Refusal::new("not_json", None, message))
        }
        Err(DecodeError::BadToken) => Decision::Refuse(Refusal::new(
            "bad_token",
            Some("token"),
            "неверный или отсутствующий токен агента",
        )),
        Err(error) => Decision::Refuse(Refusal::new(
            "invalid",
            Some(error.field()).filter(|f| !f.is_empty()),
            error.message(),
        )),
    }
}

/// A file that is not complete JSON yet waits, unless it has stopped changing for the grace
/// period or has been arriving for longer than the arrival limit.
fn incomplete(observation: &Observation<'_>, limits: &Limits, why: &str) -> Decision {
    let Some(seen) = observation.sighting else {
        return Decision::Wait;
    };
    let now = observation.now;
    if now.saturating_duration_since(seen.first_seen) >= limits.arrival_limit {
        return Decision::Refuse(Refusal::new(
            "not_json",
            None,
            format!(
                "не дописан и за {} с: {why}",
                limits.arrival_limit.as_secs()
            ),
        ));
    }
    if now.saturating_duration_since(seen.last_change) >= limits.grace {
        return Decision::Refuse(Refusal::new(
            "not_json",
            None,
            format!(
                "не JSON и за {} с не дописан: {why}",
                limits.grace.as_secs()
            ),
        ));
    }
    Decision::Wait
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LIMITS: Limits = Limits {
        max_file_bytes: 1000,
        grace: Duration::from_secs(30),
        arrival_limit: Duration::from_secs(600),
    };

    fn file(len: usize) -> FileFacts {
        FileFacts {
            regular: true,
            len: len as u64,
            modified: None,
        }
    }

    fn claim(id: &str, token: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({"kind": "claim", "id": id, "agent": "agent-1",
            "sent_at": "2026-11-29T10:00:00Z", "token": token, "agent_version": "1",
            "settings_version": 0, "max_commands": 5}))
        .unwrap()
    }

    /// Decides with the bytes, a sighting made at `t0`, and the time `t0 + after`.
    fn check(name: &str, bytes: &[u8], after: u64) -> Decision {
        let t0 = Instant::now();
        let facts = file(bytes.len());
        let sighting = observe(None, &facts, t0);
        decide(
            &Observation {
                name,
                facts: Some(facts),
                bytes: Some(bytes),
                sighting: Some(sighting),
                now: t0 + Duration::from_secs(after),
                token: TokenCheck::Expect(Some("secret")),
            },
            &LIMITS,
        )
    }

    fn code(decision: &Decision) -> &str {
        match decision {
            Decision::Refuse(refusal) => refusal.code,
            Decision::Apply(_) => "apply",
            Decision::Wait => "wait",
            Decision::Read => "read",
            Decision::Skip => "skip",
        }
    }

    #[test]
    fn names() {
        for (name, verdict) in [
            ("claim-5c1c-a_1.json", "request"),
            ("heartbeat-1.json", "request"),
            (".claim-1.json", "skip"),
            (".nfs000123", "skip"),
            ("README.txt", "skip"),
            ("claim-1.json.tmp", "skip"),
            ("notes.json", "skip"),
            ("CLAIM-x.json", "bad_name"),
            ("claim-x.JSON", "bad_name"),
            ("claim.json", "bad_name"),
            ("claim-.json", "bad_name"),
            ("claim-ид.json", "bad_name"),
            (&format!("claim-{}.json", "x".repeat(65)), "bad_name"),
            ("report-a b.json", "bad_name"),
            ("launch-1.json", "unknown_kind"),
        ] {
            let got = match classify_name(name) {
                NameVerdict::NotOurs => "skip",
                NameVerdict::Request { .. } => "request",
                NameVerdict::Refuse(refusal) => refusal.code,
            };
            assert_eq!(got, verdict, "{name}");
        }
    }

    #[test]
    fn complete_files() {
        assert_eq!(
            code(&check("claim-c1.json", &claim("c1", "secret"), 0)),
            "apply"
        );
        let mut with_bom = b"\xEF\xBB\xBF".to_vec();
        with_bom.extend(claim("c1", "secret"));
        assert_eq!(
            code(&check("claim-c1.json", &with_bom, 0)),
            "apply",
            "a BOM is fine"
        );
        assert_eq!(
            code(&check("claim-c1.json", &claim("c1", "wrong"), 0)),
            "bad_token"
        );
        assert_eq!(
            code(&check("claim-c2.json", &claim("c1", "secret"), 0)),
            "id_mismatch"
        );
        assert_eq!(
            code(&check("report-c1.json", &claim("c1", "secret"), 0)),
            "kind_mismatch"
        );
    }

    /// What growing cannot cure is refused at once; what may still be arriving waits for the
    /// grace period, by the relay's own clock.
    #[test]
    fn broken_now_or_incomplete_later() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let deep_member = format!(
            r#"{{"token": "secret", "kind": "claim", "x": {}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        for broken in [
            &b"[1,2]"[..],
            b"null",
            b"42",
            b"\"text\"",
            deep.as_bytes(),
            deep_member.as_bytes(),
            br#"{"token": "secret", "kind": "claim", "id": "\udc00"}"#,
            br#"{"kind": "claim"} trailing"#,
            b"{oops",
        ] {
            let decision = check("claim-c1.json", broken, 0);
            assert!(
                matches!(decision, Decision::Refuse(_)),
                "refused at once: {} -> {decision:?}",
                String::from_utf8_lossy(broken)
            );
        }
        let half = &claim("c1", "secret")[..40];
        assert_eq!(code(&check("claim-c1.json", half, 0)), "wait");
        assert_eq!(code(&check("claim-c1.json", half, 29)), "wait");
        assert_eq!(code(&check("claim-c1.json", half, 30)), "not_json");
        // A file sized first and filled later: zeros where the copy has not written yet.
        let mut sized = claim("c1", "secret")[..40].to_vec();
        sized.resize(200, 0);
        assert_eq!(code(&check("claim-c1.json", &sized, 0)), "wait");
        assert_eq!(code(&check("claim-c1.json", &sized, 31)), "not_json");
    }

    /// An unchanged incomplete file is not read again; a file that keeps changing is refused at
    /// the arrival limit all the same.
    #[test]
    fn sightings() {
        let t0 = Instant::now();
        let facts = file(40);
        let mut seen = observe(None, &facts, t0);
        seen.read_incomplete = true;
        let look = |seen: Sighting, facts: FileFacts, after: u64| {
            decide(
                &Observation {
                    name: "claim-c1.json",
                    facts: Some(facts),
                    bytes: None,
                    sighting: Some(seen),
                    now: t0 + Duration::from_secs(after),
                    token: TokenCheck::Skip,
                },
                &LIMITS,
            )
        };
        assert_eq!(look(seen, facts, 10), Decision::Wait, "no new read");
        assert_eq!(code(&look(seen, facts, 30)), "not_json");
        let grown = file(41);
        let after_growth = observe(Some(seen), &grown, t0 + Duration::from_secs(20));
        assert_eq!(
            look(after_growth, grown, 21),
            Decision::Read,
            "changed: read again"
        );

        // Touched every few seconds for longer than the arrival limit.
        let mut touched = observe(None, &facts, t0);
        for second in (5..=600).step_by(5) {
            let facts = FileFacts {
                modified: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(second)),
                ..facts
            };
            touched = observe(Some(touched), &facts, t0 + Duration::from_secs(second));
        }
        let half = &claim("c1", "secret")[..40];
        let decision = decide(
            &Observation {
                name: "claim-c1.json",
                facts: Some(file(40)),
                bytes: Some(half),
                sighting: Some(touched),
                now: t0 + Duration::from_secs(600),
                token: TokenCheck::Skip,
            },
            &LIMITS,
        );
        assert_eq!(code(&decision), "not_json");
    }

    #[test]
    fn file_types_and_sizes() {
        let t0 = Instant::now();
        let fifo = FileFacts {
            regular: false,
            len: 0,
            modified: None,
        };
        let decision = decide(
            &Observation {
                name: "claim-c1.json",
                facts: Some(fifo),
                bytes: None,
                sighting: None,
                now: t0,
                token: TokenCheck::Skip,
            },
            &LIMITS,
        );
        assert_eq!(code(&decision), "not_regular_file");
        let decision = decide(
            &Observation {
                name: "claim-c1.json",
                facts: Some(file(1001)),
                bytes: None,
                sighting: None,
                now: t0,
                token: TokenCheck::Skip,
            },
            &LIMITS,
        );
        assert_eq!(code(&decision), "too_large");
    }

    /// Nothing but the top level is read before the token is checked: a wrong token with a
    /// large member is refused as a bad token, not as anything found inside.
    #[test]
    fn the_token_comes_first() {
        let mut value: serde_json::Value = serde_json::from_slice(&claim("c1", "wrong")).unwrap();
        value["max_commands"] = json!("not a number");
        value["extra"] = json!(vec![json!({"a": [1, 2, 3]}); 100]);
        let bytes = serde_json::to_vec(&value).unwrap();
        let decision = decide(
            &Observation {
                name: "claim-c1.json",
                facts: Some(file(bytes.len())),
                bytes: Some(&bytes),
                sighting: None,
                now: Instant::now(),
                token: TokenCheck::Expect(Some("secret")),
            },
            &Limits {
                max_file_bytes: 1 << 20,
                ..LIMITS
            },
        );
        assert_eq!(code(&decision), "bad_token");
    }
}
