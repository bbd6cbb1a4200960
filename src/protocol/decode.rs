//! Decoding what an agent sends: the envelope, its peer and token, each request's members
//! checked against what the protocol allows, results bounded; errors that say what is wrong.

use super::{
    AgentRequest, CheckReport, ClaimRequest, CommandResult, HeartbeatRequest, Kind,
    MAX_CHECK_BYTES, MAX_CLAIM_WAIT_SECONDS, MAX_HEARTBEAT_SECONDS, MAX_NOT_BEFORE_SECONDS, Page,
    PageText, Peer, RawJson, RefusedPath, ReportRequest, ResultStatus,
};
use serde_json::Value;
use serde_json::value::RawValue;
use std::sync::Arc;

/// Why a request could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The text ends early: it may still be arriving.
    #[error("{0}")]
    Incomplete(String),
    /// Not JSON, or JSON that is not an object: growing the text cannot cure it.
    #[error("{0}")]
    NotJson(String),
    /// The relay file's token is missing or wrong (checked before anything else is read).
    #[error("token: неверный или отсутствующий токен агента")]
    BadToken,
    #[error("kind: {}", self.message())]
    UnknownKind(String),
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

impl DecodeError {
    /// The field at fault, for error answers.
    pub(crate) fn field(&self) -> &str {
        match self {
            DecodeError::Incomplete(_) | DecodeError::NotJson(_) => "",
            DecodeError::BadToken => "token",
            DecodeError::UnknownKind(_) => "kind",
            DecodeError::Invalid { field, .. } => field,
        }
    }

    /// What is wrong, without the field (which [`DecodeError::field`] names).
    pub(crate) fn message(&self) -> String {
        match self {
            DecodeError::Incomplete(message) | DecodeError::NotJson(message) => message.clone(),
            DecodeError::BadToken => "неверный или отсутствующий токен агента".to_string(),
            DecodeError::UnknownKind(kind) => {
                format!("неизвестный вид запроса {kind:?}; допустимы claim, report, heartbeat")
            }
            DecodeError::Invalid { message, .. } => message.clone(),
        }
    }

    fn invalid(field: &str, message: impl Into<String>) -> Self {
        DecodeError::Invalid {
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// Whether `id` is a valid request id: `[A-Za-z0-9_-]{1,64}`.
pub(crate) fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Decodes a request from its JSON text (an HTTP body: the token is in a header).
pub(crate) fn decode_request(bytes: &[u8]) -> Result<AgentRequest, DecodeError> {
    decode_bytes(bytes, TokenCheck::Skip)
}

/// How the body's `token` is checked while decoding.
#[derive(Clone, Copy)]
pub(crate) enum TokenCheck<'a> {
    /// A relay file: the token must equal this agent token (`None`: the hub has none yet, so
    /// nothing is authentic). It is checked before anything but the top-level members is read.
    Expect(Option<&'a str>),
    /// HTTP (the header carries it) or an operator's look (`relay inspect`).
    Skip,
}

/// The members each kind of request reads; any other member is skipped unread (a newer agent may
/// send more), so an unknown member of any size costs nothing but its bytes.
fn known_members(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Claim => &[
            "kind",
            "id",
            "agent",
            "sent_at",
            "token",
            "agent_version",
            "settings_version",
            "max_commands",
            "wait_seconds",
            "protocol",
            "capabilities",
            "build",
        ],
        Kind::Report => &["kind", "id", "agent", "sent_at", "token"],
        Kind::Heartbeat => &[
            "kind",
            "id",
            "agent",
            "sent_at",
            "token",
            "agent_version",
            "jira_ok",
            "last_error",
            "check",
            "heartbeat_seconds",
            "protocol",
            "capabilities",
            "build",
            "own_give_back_bound",
            "jira_held_class",
        ],
    }
}

/// The largest `capabilities`, `build` or `own_give_back_bound` member, in bytes (its bounds are
/// far smaller: 64 names of 64 bytes).
const MAX_PEER_MEMBER_BYTES: usize = 16 * 1024;

/// The largest `result` of one command result: results are small objects (`{key, created}`,
/// `{total, boards}`); issue pages travel as raw text in `page`.
const MAX_RESULT_BYTES: usize = 1024 * 1024;

/// A request's bytes as received (an HTTP body, a relay file), read once into one buffer. When
/// they are UTF-8, as JSON must be, the raw issues decoded from them are ranges of that buffer
/// (no issue is copied), and the buffer lives as long as they do.
pub(crate) struct Received(std::result::Result<Arc<String>, Vec<u8>>);

impl From<Vec<u8>> for Received {
    fn from(bytes: Vec<u8>) -> Received {
        // No copy either way: the vector becomes the string, or stays as it is.
        Received(
            String::from_utf8(bytes)
                .map(Arc::new)
                .map_err(std::string::FromUtf8Error::into_bytes),
        )
    }
}

impl Received {
    pub(crate) fn bytes(&self) -> &[u8] {
        match &self.0 {
            Ok(text) => text.as_bytes(),
            Err(bytes) => bytes,
        }
    }

    /// [`decode_bytes`] of these bytes, the issues of its pages ranges of them.
    pub(crate) fn decode(&self, token: TokenCheck<'_>) -> Result<AgentRequest, DecodeError> {
        match &self.0 {
            Ok(text) => decode_text(text, Some(text), token),
            Err(bytes) => decode_bytes(bytes, token),
        }
    }
}

/// Decodes a request from the bytes of a relay file or an HTTP body.
///
/// Memory stays a small multiple of the input: the top level is read as borrowed raw members,
/// the token (for a relay file) is checked first, then only the members the kind knows are
/// parsed, and a report's pages keep their issues as raw JSON text. A UTF-8 byte-order mark
/// (Windows PowerShell writes one) is ignored. [`DecodeError::Incomplete`] is the one error that
/// growing the text could cure.
pub(crate) fn decode_bytes(
    bytes: &[u8],
    token: TokenCheck<'_>,
) -> Result<AgentRequest, DecodeError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => decode_text(text, None, token),
        // JSON is UTF-8: reading it as bytes says where and why it is not (or that it ends
        // early, cut inside a character).
        Err(_) => Err(
            match serde_json::from_slice::<std::collections::BTreeMap<String, &RawValue>>(
                bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes),
            ) {
                Err(error) => top_level_error(&error),
                Ok(_) => DecodeError::NotJson("не UTF-8".to_string()),
            },
        ),
    }
}

/// Why the text is not a JSON object.
fn top_level_error(e: &serde_json::Error) -> DecodeError {
    let error = crate::domain::json::plain_error(e);
    match e.classify() {
        serde_json::error::Category::Eof => DecodeError::Incomplete(error.message),
        serde_json::error::Category::Data => {
            DecodeError::NotJson("запрос — не JSON-объект".to_string())
        }
        _ => DecodeError::NotJson(error.message),
    }
}

/// The agent a request names (its `agent` member, 1 to 100 characters), read without trusting
/// the request: for showing whose requests were refused.
pub fn claimed_agent(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Named {
        agent: String,
    }
    serde_json::from_slice::<Named>(bytes)
        .ok()
        .map(|named| named.agent)
        .filter(|agent| !agent.trim().is_empty() && agent.chars().count() <= 100)
}

/// The header in which an agent names itself on every HTTP request, so that the hub can tell
/// whose request it refused before reading its body: the name percent-encoded as UTF-8 (every
/// byte but RFC 3986's unreserved characters), since a header is ASCII and a name need not be.
pub const AGENT_HEADER: &str = "X-Jira-Hub-Agent";

/// [`AGENT_HEADER`]'s value for the agent `name`.
pub fn agent_header_value(name: &str) -> String {
    let mut out = String::with_capacity(name.len() * 3);
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The agent an [`AGENT_HEADER`] names: `None` unless it is percent-encoded UTF-8 (a `%` always
/// followed by two hex digits, no byte outside visible ASCII) of a name the protocol allows.
/// Read without trusting it, as [`claimed_agent`].
pub fn agent_from_header(value: &[u8]) -> Option<String> {
    let mut bytes = Vec::with_capacity(value.len());
    let mut rest = value;
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else if byte.is_ascii_graphic() {
            bytes.push(byte);
            rest = tail;
        } else {
            return None;
        }
    }
    String::from_utf8(bytes)
        .ok()
        .filter(|name| agent_name_allowed(name))
}

/// The protocol's rule for an agent's name: 1 to 100 characters, not all blank, no control or
/// invisible formatting characters.
fn agent_name_allowed(name: &str) -> bool {
    !name.trim().is_empty()
        && name.chars().count() <= 100
        && !name
            .chars()
            .any(|c| c.is_control() || is_invisible_format(c))
}

/// [`decode_bytes`] of a text; its pages' issues are ranges of `shared` when `text` is it.
fn decode_text(
    text: &str,
    shared: Option<&Arc<String>>,
    token: TokenCheck<'_>,
) -> Result<AgentRequest, DecodeError> {
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let top: std::collections::BTreeMap<String, &RawValue> =
        serde_json::from_str(text).map_err(|e| top_level_error(&e))?;
    if let TokenCheck::Expect(expected) = token {
        let given = match top.get("token") {
            Some(raw) => serde_json::from_str::<String>(raw.get()).ok(),
            None => None,
        };
        let authentic = matches!((expected, given.as_deref()),
            (Some(expected), Some(given)) if crate::domain::constant_time_eq(expected.as_bytes(), given.as_bytes()));
        if !authentic {
            return Err(DecodeError::BadToken);
        }
    }
    let kind = match top.get("kind") {
        None => return Err(DecodeError::invalid("kind", MISSING)),
        Some(raw) => match serde_json::from_str::<String>(raw.get()) {
            Ok(kind) => Kind::parse(&kind).ok_or(DecodeError::UnknownKind(kind))?,
            Err(_) => return Err(DecodeError::UnknownKind(short(raw.get()))),
        },
    };
    let mut light = serde_json::Map::new();
    for &member in known_members(kind) {
        let Some(raw) = top.get(member) else {
            continue;
        };
        // A heartbeat's `check` and what a side says of itself (`capabilities`,
        // `build`, `own_give_back_bound`) are containers, refused unread beyond their bound.
        let bound = match member {
            "check" if raw.get().starts_with('{') => Some(MAX_CHECK_BYTES),
            "capabilities" | "build" | "own_give_back_bound" => Some(MAX_PEER_MEMBER_BYTES),
            _ => None,
        };
        if let Some(bound) = bound
            && raw.get().starts_with(['{', '['])
        {
            if raw.get().len() > bound {
                return Err(DecodeError::invalid(member, format!("больше {bound} байт")));
            }
            let value = serde_json::from_str(raw.get()).map_err(|e| DecodeError::Invalid {
                field: member.to_string(),
                message: crate::domain::json::plain_error(&e).message,
            })?;
            light.insert(member.to_string(), value);
            continue;
        }
        // The envelope's members are scalars: a container is the wrong type, refused unread.
        let value = if raw.get().starts_with(['[', '{']) {
            return Err(DecodeError::invalid(
                member,
                "неверный тип: ожидалось простое значение, а не массив или объект",
            ));
        } else {
            serde_json::from_str(raw.get()).map_err(|e| DecodeError::Invalid {
                field: member.to_string(),
                message: crate::domain::json::plain_error(&e).message,
            })?
        };
        light.insert(member.to_string(), value);
    }
    check_envelope(&light)?;
    let request = match kind {
        Kind::Report => {
            let results = top
                .get("results")
                .ok_or_else(|| DecodeError::invalid("results", MISSING))?;
            AgentRequest::Report(ReportRequest {
                envelope: typed(Value::Object(light))?,
                results: decode_results(results, shared)?,
            })
        }
        _ => build(kind, Value::Object(light))?,
    };
    check_request(request)
}

/// A report's results, each checked for the size of its `result` before it is parsed; the issues
/// of their pages are ranges of `shared` when the results are a part of it.
fn decode_results(
    results: &RawValue,
    shared: Option<&Arc<String>>,
) -> Result<Vec<CommandResult>, DecodeError> {
    let at = |i: usize, field: &str| format!("results[{i}]{field}");
    let items: Vec<&RawValue> =
        serde_json::from_str(results.get()).map_err(|e| DecodeError::Invalid {
            field: "results".into(),
            message: crate::domain::json::plain_error(&e).message,
        })?;
    let mut decoded = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let members =
            serde_json::from_str::<std::collections::BTreeMap<String, &RawValue>>(item.get()).ok();
        if members
            .as_ref()
            .and_then(|members| members.get("result"))
            .is_some_and(|r| r.get().len() > MAX_RESULT_BYTES)
        {
            return Err(DecodeError::invalid(
                &at(i, ".result"),
                format!("больше {MAX_RESULT_BYTES} байт"),
            ));
        }
        let invalid = |e: crate::domain::json::JsonError, under: &str| {
            let field = match (under, e.field.as_str()) {
                ("", "") => String::new(),
                ("", field) | (field, "") => format!(".{field}"),
                (under, field) => format!(".{under}.{field}"),
            };
            DecodeError::Invalid {
                field: at(i, &field),
                message: e.message,
            }
        };
        // The page and the result are kept as text (borrowed), the rest of the result read with
        // `null` in their places, so that nothing of them is copied or becomes a tree of values.
        let taken = |name: &str| {
            members
                .as_ref()
                .and_then(|members| members.get(name).copied())
                .filter(|raw| raw.get() != "null")
        };
        let (page, found) = (taken("page"), taken("result"));
        let mut rest = String::new();
        let mut from = 0;
        let mut cuts: Vec<&RawValue> = page.into_iter().chain(found).collect();
        cuts.sort_by_key(|raw| raw.get().as_ptr() as usize);
        for cut in &cuts {
            let start = cut.get().as_ptr() as usize - item.get().as_ptr() as usize;
            rest.push_str(item.get().get(from..start).unwrap_or_default());
            rest.push_str("null");
            from = start + cut.get().len();
        }
        rest.push_str(item.get().get(from..).unwrap_or_default());
        let mut result: CommandResult =
            crate::domain::json::from_str(&rest).map_err(|e| invalid(e, ""))?;
        result.result = found.map(|raw| RawJson::within(shared, raw));
        let page = page
            .map(|page| crate::domain::json::from_str::<PageText<'_>>(page.get()))
            .transpose()
            .map_err(|e| invalid(e, "page"))?;
        if let Some(page) = page {
            result.page = Some(Page {
                start_at: page.start_at,
                total: page.total,
                issues: page
                    .issues
                    .into_iter()
                    .map(|raw| RawJson::within(shared, raw))
                    .collect(),
            });
        }
        check_release(&result).map_err(|(field, message)| {
            DecodeError::invalid(&at(i, &format!(".{field}")), message)
        })?;
        decoded.push(result);
    }
    Ok(decoded)
}

/// `not_before_seconds` goes with `released` and nothing else; `released` says why (`error`).
fn check_release(result: &CommandResult) -> Result<(), (&'static str, String)> {
    match (result.status, result.not_before_seconds) {
        (ResultStatus::Released, None) => Err((
            "not_before_seconds",
            "обязательно при статусе released".to_string(),
        )),
        (ResultStatus::Released, Some(seconds))
            if seconds == 0 || seconds > MAX_NOT_BEFORE_SECONDS =>
        {
            Err((
                "not_before_seconds",
                format!("ожидалось от 1 до {MAX_NOT_BEFORE_SECONDS} секунд"),
            ))
        }
        (ResultStatus::Released, Some(_))
            if result.error.as_deref().is_none_or(|e| e.trim().is_empty()) =>
        {
            Err(("error", "при статусе released нужна причина".to_string()))
        }
        (ResultStatus::Released, Some(_)) if result.page.is_some() => {
            Err(("page", "у released не бывает page".to_string()))
        }
        (status, Some(_)) if status != ResultStatus::Released => Err((
            "not_before_seconds",
            "бывает только при статусе released".to_string(),
        )),
        (status, _) if status != ResultStatus::Released && result.sent.is_some() => {
            Err(("sent", "бывает только при статусе released".to_string()))
        }
        (status, _) if status != ResultStatus::Released && result.refused.is_some() => {
            Err(("refused", "бывает только при статусе released".to_string()))
        }
        _ => result
            .refused
            .as_ref()
            .and_then(RefusedPath::invalid)
            .map_or(Ok(()), Err),
    }
}

/// The start of a raw value, for a message.
fn short(raw: &str) -> String {
    raw.chars().take(40).collect()
}

/// Decodes a request from parsed JSON (tests, benchmarks, tools that build requests as values),
/// through the one decoder every transport uses.
pub fn decode_value(value: Value) -> Result<AgentRequest, DecodeError> {
    let bytes = serde_json::to_vec(&value).map_err(|e| DecodeError::NotJson(e.to_string()))?;
    decode_bytes(&bytes, TokenCheck::Skip)
}

pub(super) fn build(kind: Kind, mut value: Value) -> Result<AgentRequest, DecodeError> {
    // What the agent says of itself is read on its own: a flattened member's error would lose
    // its name.
    let peer = peer_of(&mut value)?;
    Ok(match kind {
        Kind::Claim => {
            let mut claim: ClaimRequest = typed(value)?;
            claim.peer = peer;
            AgentRequest::Claim(claim)
        }
        Kind::Report => AgentRequest::Report(typed(value)?),
        Kind::Heartbeat => {
            let mut heartbeat: HeartbeatRequest = typed(value)?;
            heartbeat.peer = peer;
            if let Some(why) = heartbeat.check.as_ref().and_then(CheckReport::oversize) {
                return Err(DecodeError::invalid("check", why));
            }
            AgentRequest::Heartbeat(heartbeat)
        }
    })
}

/// Takes [`Peer`]'s members out of a request's members and reads them.
fn peer_of(value: &mut Value) -> Result<Peer, DecodeError> {
    let mut members = serde_json::Map::new();
    if let Some(object) = value.as_object_mut() {
        for name in ["protocol", "capabilities", "build"] {
            if let Some(member) = object.remove(name) {
                members.insert(name.to_string(), member);
            }
        }
    }
    typed(Value::Object(members))
}

/// The kind, and that `id`, `agent` and `sent_at` are strings.
fn check_envelope(object: &serde_json::Map<String, Value>) -> Result<Kind, DecodeError> {
    let kind = match object.get("kind") {
        None => return Err(DecodeError::invalid("kind", MISSING)),
        Some(Value::String(kind)) => {
            Kind::parse(kind).ok_or_else(|| DecodeError::UnknownKind(kind.clone()))?
        }
        Some(other) => return Err(DecodeError::UnknownKind(other.to_string())),
    };
    for field in ["id", "agent", "sent_at"] {
        match object.get(field) {
            Some(Value::String(_)) => {}
            Some(_) => return Err(DecodeError::invalid(field, "ожидалась строка")),
            None => return Err(DecodeError::invalid(field, MISSING)),
        }
    }
    Ok(kind)
}

/// The envelope's values: the id's alphabet, the agent's name, the time.
fn check_request(request: AgentRequest) -> Result<AgentRequest, DecodeError> {
    let envelope = request.envelope();
    if !is_valid_id(&envelope.id) {
        return Err(DecodeError::invalid(
            "id",
            "ожидалось от 1 до 64 символов из A-Z, a-z, 0-9, - и _",
        ));
    }
    let version = match &request {
        AgentRequest::Claim(claim) => Some(&claim.agent_version),
        AgentRequest::Heartbeat(heartbeat) => Some(&heartbeat.agent_version),
        AgentRequest::Report(_) => None,
    };
    if version.is_some_and(|v| v.chars().any(char::is_control) || v.chars().count() > 100) {
        return Err(DecodeError::invalid(
            "agent_version",
            "версия агента — до 100 символов без управляющих",
        ));
    }
    let peer = match &request {
        AgentRequest::Claim(claim) => Some(&claim.peer),
        AgentRequest::Heartbeat(heartbeat) => Some(&heartbeat.peer),
        AgentRequest::Report(_) => None,
    };
    if let Some((field, message)) = peer.and_then(Peer::invalid) {
        return Err(DecodeError::invalid(field, message));
    }
    if let AgentRequest::Claim(claim) = &request
        && claim.wait_seconds > MAX_CLAIM_WAIT_SECONDS
    {
        return Err(DecodeError::invalid(
            "wait_seconds",
            format!("ожидалось целое число секунд от 0 до {MAX_CLAIM_WAIT_SECONDS}"),
        ));
    }
    if let AgentRequest::Heartbeat(heartbeat) = &request
        && heartbeat
            .heartbeat_seconds
            .is_some_and(|s| s == 0 || s > MAX_HEARTBEAT_SECONDS)
    {
        return Err(DecodeError::invalid(
            "heartbeat_seconds",
            format!("ожидалось целое число секунд от 1 до {MAX_HEARTBEAT_SECONDS}"),
        ));
    }
    if envelope.agent.chars().any(char::is_control) {
        return Err(DecodeError::invalid(
            "agent",
            "имя агента не может содержать управляющие символы",
        ));
    }
    if envelope.agent.chars().any(is_invisible_format) {
        return Err(DecodeError::invalid(
            "agent",
            "имя агента не может содержать невидимые символы (нулевой ширины, направления письма, разрывы строк)",
        ));
    }
    if envelope.agent.trim().is_empty() || envelope.agent.chars().count() > 100 {
        return Err(DecodeError::invalid(
            "agent",
            "ожидалось имя от 1 до 100 символов",
        ));
    }
    if crate::domain::time::parse_utc(&envelope.sent_at).is_none() {
        return Err(DecodeError::invalid(
            "sent_at",
            "ожидалось время ISO-8601 со смещением",
        ));
    }
    Ok(request)
}

/// Characters that print nothing or reorder what follows (Unicode format characters and the
/// line and paragraph separators): an agent's name with them would show as another name.
fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// What a missing required member is called.
const MISSING: &str = "обязательное поле отсутствует";

fn typed<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, DecodeError> {
    crate::domain::json::from_value(value).map_err(|error| DecodeError::Invalid {
        field: if error.field.is_empty() {
            "body".into()
        } else {
            error.field
        },
        message: error.message,
    })
}
