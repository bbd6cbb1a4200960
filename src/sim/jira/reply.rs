//! Requests as the handlers read them and replies as Jira shapes them (its error bodies, agile
//! paging, parameter errors).

use axum::body::Bytes;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub(super) enum Body {
    Json(Value),
    Html(String),
    /// JSON text cut short, served as `application/json`.
    Cut(String),
    Empty,
}

pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) headers: Vec<(&'static str, String)>,
    pub(super) body: Body,
}

impl Reply {
    pub(super) fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Body::Json(body),
        }
    }

    pub(super) fn empty(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Body::Empty,
        }
    }

    /// Jira's error body: `{"errorMessages": [message], "errors": {}}`.
    pub(super) fn error(status: u16, message: &str) -> Reply {
        Reply::json(status, json!({"errorMessages": [message], "errors": {}}))
    }

    /// Jira's field error body: `{"errorMessages": [], "errors": {field: message}}`.
    pub(super) fn field_error(field: &str, message: &str) -> Reply {
        Reply::json(
            400,
            json!({"errorMessages": [], "errors": {field: message}}),
        )
    }

    pub(super) fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = match self.body {
            Body::Json(value) => (
                status,
                [("content-type", "application/json;charset=UTF-8")],
                value.to_string(),
            )
                .into_response(),
            Body::Html(text) => {
                (status, [("content-type", "text/html;charset=UTF-8")], text).into_response()
            }
            Body::Cut(text) => (
                status,
                [("content-type", "application/json;charset=UTF-8")],
                text,
            )
                .into_response(),
            Body::Empty => status.into_response(),
        };
        for (name, value) in self.headers {
            if let Ok(value) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(name, value);
            }
        }
        response
    }
}

pub(super) struct Request {
    pub(super) method: Method,
    pub(super) segments: Vec<String>,
    pub(super) query: Vec<(String, String)>,
    pub(super) body: Bytes,
}

impl Request {
    pub(super) fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

pub(super) fn decode_segment(segment: &str) -> String {
    percent_decode(segment, false)
}

/// `%XX` decoding; `+` is a space in query strings.
pub(super) fn percent_decode(text: &str, plus_is_space: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                    }
                    Err(_) => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(super) fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k, true), percent_decode(v, true))
        })
        .collect()
}

/// Agile paging: `{maxResults, startAt, total, isLast, values}`.
pub(super) fn paged(request: &Request, values: Vec<Value>, default_max: usize) -> Reply {
    let start_at: usize = request
        .param("startAt")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let max: usize = request
        .param("maxResults")
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_max)
        .clamp(1, 50);
    let total = values.len();
    let page: Vec<Value> = values.into_iter().skip(start_at).take(max).collect();
    let is_last = start_at + page.len() >= total;
    Reply::json(
        200,
        json!({"maxResults": max, "startAt": start_at, "total": total, "isLast": is_last, "values": page}),
    )
}

pub(super) fn number_param(
    value: Option<&str>,
    default: usize,
    name: &str,
) -> Result<usize, Reply> {
    match value {
        None | Some("") => Ok(default),
        Some(text) => text.parse().map_err(|_| {
            Reply::error(
                400,
                &format!("The value '{text}' is not valid for the parameter '{name}'."),
            )
        }),
    }
}
