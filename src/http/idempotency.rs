//! `Idempotency-Key` on the client's POSTs (IETF draft-ietf-httpapi-idempotency-key-header-07,
//! <https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/>): a request sent
//! again with the key of an answered one, with the same method, path and body, is answered what
//! the first was answered (its status and body: the same batch id) and does nothing; with another
//! request under that key it is 422, and while the first still runs, 409 (the draft's §2.7 asks
//! for exactly these). A key is the client's: it is stored with a digest of the client token it
//! came with, so another credential's keys are never seen.
//!
//! The key's row is reserved in the database before the request runs and holds the answer once
//! it is answered; the request and the recording of its answer run in a task of their own, so
//! a client that hangs up, or the request's time limit, cannot leave a request done and its key
//! unanswered. Only the outcomes of the operation itself are kept (2xx, 404, 409, 422); a
//! request refused before it ran (400, 401, 403, 413, 415) or cut by the database (5xx) frees
//! its key, so that it may be sent again as it was.

use super::{ApiError, AppState, ErrorCode, bearer_token, read_body};
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The header's name.
pub(crate) const HEADER: &str = "Idempotency-Key";

/// The longest key (a UUID is 36 characters; the draft sets no limit).
pub(crate) const MAX_KEY_LENGTH: usize = 255;

/// The keys whose request runs now in this process (credential, key).
#[derive(Default)]
pub(crate) struct InFlight(Mutex<HashSet<(String, String)>>);

/// A key taken by a running request, given back when it ends.
struct Taken {
    pool: Arc<super::HubPool>,
    entry: (String, String),
}

impl Drop for Taken {
    fn drop(&mut self) {
        self.pool
            .keys_in_flight
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.entry);
    }
}

/// The middleware: every POST but the agent's, when it carries the header and the client token.
pub(crate) async fn keep(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST
        || request.uri().path().starts_with("/agent/")
        || !request.headers().contains_key(HEADER)
    {
        return next.run(request).await;
    }
    // Keys belong to the client token; without it the request goes on to be refused as it is.
    let Some(token) =
        bearer_token(request.headers()).filter(|token| state.pool.credentials.holder(token).client)
    else {
        return next.run(request).await;
    };
    keyed(state, token, request, next)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn keyed(
    state: AppState,
    token: String,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let key = parse_key(request.headers())?;
    let credential = digest(&[token.as_bytes()]);
    let pool = state.pool.clone();
    let taken = take(&pool, &credential, &key)?;
    let (parts, body) = request.into_parts();
    let mut reading = Request::new(body);
    *reading.headers_mut() = parts.headers.clone();
    let bytes = read_body(reading, state.options.max_body_bytes).await?;
    let target = parts
        .uri
        .path_and_query()
        .map_or(parts.uri.path(), |p| p.as_str())
        .to_string();
    let fingerprint = digest(&[parts.method.as_str().as_bytes(), target.as_bytes(), &bytes]);
    let request = Request::from_parts(parts, Body::from(bytes));
    let (first, second, print) = (credential.clone(), key.clone(), fingerprint.clone());
    let state_now = pool
        .run(move |hub| hub.reserve_key(&first, &second, &print))
        .await?;
    match state_now {
        crate::service::KeyState::Run => {}
        crate::service::KeyState::Answered { status, answer } => {
            return Ok(replay(status, answer));
        }
        crate::service::KeyState::OtherRequest => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::Invalid,
                Some(HEADER),
                "этот Idempotency-Key уже дан другому запросу (другой путь или тело): для нового запроса нужен новый ключ",
            ));
        }
        crate::service::KeyState::Unanswered => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::Conflict,
                Some(HEADER),
                "запрос с этим Idempotency-Key прервала остановка хаба, выполнен ли он — неизвестно: проверьте (GET /batches) и для нового запроса дайте новый ключ",
            ));
        }
    }
    // The request and the keeping of its answer run to their end whatever happens to this
    // connection (the key stays taken until then).
    let task = tokio::spawn(async move {
        let _taken = taken;
        let path = request.uri().path().to_string();
        let response = next.run(request).await;
        let (parts, body) = response.into_parts();
        let answer = match axum::body::to_bytes(body, usize::MAX).await {
            Ok(answer) => answer,
            Err(error) => {
                let _ = pool.run(move |hub| hub.free_key(&credential, &key)).await;
                return ApiError::internal(format!("an answer could not be read: {error}"))
                    .into_response();
            }
        };
        let status = parts.status;
        let kept = if kept(status) {
            let batch = batch_named(&path, status, &answer);
            let stored = answer.to_vec();
            pool.run(move |hub| hub.answer_key(&credential, &key, status.as_u16(), &stored, batch))
                .await
        } else {
            pool.run(move |hub| hub.free_key(&credential, &key)).await
        };
        if let Err(error) = kept {
            tracing::warn!(message = %error.message, "the answer under an Idempotency-Key was not kept");
        }
        Response::from_parts(parts, Body::from(answer))
    });
    task.await
        .map_err(|error| ApiError::internal(format!("a request task failed: {error}")))
}

/// Takes `key` of `credential` for this request: 409 while another request holds it.
fn take(pool: &Arc<super::HubPool>, credential: &str, key: &str) -> Result<Taken, ApiError> {
    let entry = (credential.to_string(), key.to_string());
    let fresh = pool
        .keys_in_flight
        .0
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(entry.clone());
    if !fresh {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::Conflict,
            Some(HEADER),
            "запрос с этим Idempotency-Key ещё выполняется: дождитесь его ответа",
        ));
    }
    Ok(Taken {
        pool: pool.clone(),
        entry,
    })
}

/// Whether an answer of `status` is the operation's own outcome, kept under its key.
fn kept(status: StatusCode) -> bool {
    status.is_success()
        || matches!(
            status,
            StatusCode::NOT_FOUND | StatusCode::CONFLICT | StatusCode::UNPROCESSABLE_ENTITY
        )
}

/// The batch a successful answer names (a batch's `id`, a command's `batch_id`): its key goes
/// with it when retention prunes it.
fn batch_named(path: &str, status: StatusCode, answer: &[u8]) -> Option<i64> {
    if !status.is_success() {
        return None;
    }
    let member = if path == "/batches" || path == "/refresh" || path.starts_with("/batches/") {
        "id"
    } else if path.starts_with("/commands/") {
        "batch_id"
    } else {
        return None;
    };
    serde_json::from_slice::<serde_json::Value>(answer)
        .ok()?
        .get(member)?
        .as_i64()
}

/// The first answer again.
fn replay(status: u16, answer: Vec<u8>) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let mut response = (status, Bytes::from(answer)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The key of the header: a Structured Field string (RFC 8941 §3.3.3, as the draft defines it:
/// `Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"`), or the same characters without
/// the quotes (as many clients send it); 1 to [`MAX_KEY_LENGTH`] visible ASCII characters.
fn parse_key(headers: &axum::http::HeaderMap) -> Result<String, ApiError> {
    let malformed = |message: &str| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::Malformed,
            Some(HEADER),
            message.to_string(),
        )
    };
    let mut values = headers.get_all(HEADER).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(malformed("заголовок Idempotency-Key повторяется"));
    };
    let text = value
        .to_str()
        .map_err(|_| malformed("в Idempotency-Key не ASCII"))?
        .trim();
    let key = match text.strip_prefix('"') {
        Some(quoted) => {
            let mut key = String::new();
            let mut chars = quoted.chars();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(c @ ('"' | '\\')) => key.push(c),
                        _ => {
                            return Err(malformed(
                                "в строке Idempotency-Key неверное экранирование",
                            ));
                        }
                    },
                    Some(c) => key.push(c),
                    None => return Err(malformed("строка Idempotency-Key не закрыта кавычкой")),
                }
            }
            if chars.next().is_some() {
                return Err(malformed("после строки Idempotency-Key лишние символы"));
            }
            key
        }
        None => text.to_string(),
    };
    if key.is_empty() || key.len() > MAX_KEY_LENGTH {
        return Err(malformed(&format!(
            "Idempotency-Key: ожидается от 1 до {MAX_KEY_LENGTH} символов"
        )));
    }
    if !key.chars().all(|c| c.is_ascii_graphic() || c == ' ') || key.trim() != key {
        return Err(malformed(
            "Idempotency-Key: ожидаются видимые символы ASCII (например, UUID)",
        ));
    }
    Ok(key)
}

/// A SHA-256 digest of `parts` (each with its length first, so that no two lists of parts give
/// the same input), as hex.
fn digest(parts: &[&[u8]]) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for part in parts {
        context.update(&(part.len() as u64).to_be_bytes());
        context.update(part);
    }
    context
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_of(values: &[&str]) -> Result<String, String> {
        let mut headers = axum::http::HeaderMap::new();
        for value in values {
            headers.append(HEADER, HeaderValue::from_str(value).unwrap());
        }
        parse_key(&headers).map_err(|e| e.message)
    }

    #[test]
    fn a_key_is_a_structured_string_or_its_bare_text() {
        assert_eq!(key_of(&["\"abc-1\""]).unwrap(), "abc-1");
        assert_eq!(key_of(&["abc-1"]).unwrap(), "abc-1");
        assert_eq!(key_of(&["\"a\\\"b\""]).unwrap(), "a\"b");
        assert!(key_of(&["\"abc"]).unwrap_err().contains("не закрыта"));
        assert!(key_of(&["\"a\"b"]).unwrap_err().contains("лишние"));
        assert!(key_of(&["\"\""]).unwrap_err().contains("от 1 до 255"));
        assert!(key_of(&["a", "b"]).unwrap_err().contains("повторяется"));
        assert!(
            key_of(&[&"x".repeat(256)])
                .unwrap_err()
                .contains("от 1 до 255")
        );
    }

    #[test]
    fn a_digest_tells_the_parts_apart() {
        assert_ne!(digest(&[b"ab", b"c"]), digest(&[b"a", b"bc"]));
        assert_eq!(digest(&[b"ab"]).len(), 64);
    }

    #[test]
    fn the_batch_an_answer_names() {
        let ok = StatusCode::CREATED;
        assert_eq!(batch_named("/batches", ok, br#"{"id": 7}"#), Some(7));
        assert_eq!(
            batch_named(
                "/commands/3/retry",
                StatusCode::OK,
                br#"{"id": 3, "batch_id": 9}"#
            ),
            Some(9)
        );
        assert_eq!(batch_named("/projects", ok, br#"{"id": 7}"#), None);
        assert_eq!(
            batch_named(
                "/batches",
                StatusCode::UNPROCESSABLE_ENTITY,
                br#"{"id": 7}"#
            ),
            None
        );
    }
}
