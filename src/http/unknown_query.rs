//! A query parameter sent to an operation that takes none is refused, as one a route with a
//! query does not know is ([`ApiQuery`](super::ApiQuery)): 422 naming it, never ignored (a
//! client that thinks it filters would get everything). Which operations take no query is read
//! from the served document, so a route and its declaration cannot drift apart; a path is
//! matched to its operation's template as the router does (the most literal segments win:
//! `/commands/failed` over `/commands/{id}`). An operation that needs a token refuses it only
//! after the token was checked (401 and 403 first, as on the routes with a query); the others at
//! once.

use super::{ApiError, ErrorCode};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// The document's operations by method: each one's path template (its segments) and, when it
/// takes no query parameter, whether it needs a token (`None`: it takes a query).
#[derive(Debug, Default)]
pub(crate) struct WithoutQuery(HashMap<Method, Vec<Template>>);

/// A path template's segments, and `Some(needs_token)` when its operation takes no query.
type Template = (Vec<String>, Option<bool>);

impl WithoutQuery {
    /// The operation `path` is routed to, if any: `Some(needs_token)` when it takes no query.
    fn without_query(&self, method: &Method, path: &str) -> Option<bool> {
        let wanted: Vec<&str> = path.trim_matches('/').split('/').collect();
        let mut best: Option<(usize, Option<bool>)> = None;
        for (template, needs_token) in self.0.get(method).into_iter().flatten() {
            if template.len() != wanted.len() {
                continue;
            }
            let mut literal = 0;
            let fits = template.iter().zip(&wanted).all(|(t, w)| {
                if t.starts_with('{') {
                    !w.is_empty()
                } else {
                    literal += 1;
                    t == w
                }
            });
            if fits && best.is_none_or(|(l, _)| literal > l) {
                best = Some((literal, *needs_token));
            }
        }
        best.and_then(|(_, needs_token)| needs_token)
    }

    /// From the finished document.
    pub(crate) fn of(document: &Value) -> WithoutQuery {
        let mut operations = HashMap::new();
        for (path, item) in document["paths"].as_object().into_iter().flatten() {
            for (method, operation) in item.as_object().into_iter().flatten() {
                let Ok(method) = Method::from_bytes(method.to_ascii_uppercase().as_bytes()) else {
                    continue;
                };
                let takes_query = operation["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["in"] == "query");
                let needs_token = operation["security"].as_array().is_some_and(|s| {
                    !s.is_empty() && !s.iter().any(|r| r == &serde_json::json!({}))
                });
                let segments = path
                    .trim_matches('/')
                    .split('/')
                    .map(str::to_string)
                    .collect();
                operations
                    .entry(method)
                    .or_insert_with(Vec::new)
                    .push((segments, (!takes_query).then_some(needs_token)));
            }
        }
        WithoutQuery(operations)
    }
}

/// The refusal of a query parameter, kept for the token's check to answer after it passed.
#[derive(Debug, Clone)]
pub(crate) struct UnknownQuery(String);

impl UnknownQuery {
    pub(crate) fn refusal(&self) -> ApiError {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::Invalid,
            Some(self.0.as_str()),
            format!(
                "неизвестный параметр запроса «{}»; этот адрес параметров запроса не принимает",
                self.0
            ),
        )
    }
}

/// The first parameter's name of a query, decoded (as given when it does not decode).
fn first_name(query: &str) -> Option<String> {
    let decoded: Option<Vec<(String, String)>> = serde_urlencoded::from_str(query).ok();
    match decoded {
        Some(pairs) => pairs.into_iter().next().map(|(name, _)| name),
        None => query
            .split('&')
            .map(|pair| pair.split_once('=').map_or(pair, |(name, _)| name))
            .find(|name| !name.is_empty())
            .map(str::to_string),
    }
}

/// The route layer: refuses (or marks, for the token's check) a query sent where none is taken.
pub(crate) async fn refuse(
    State(operations): State<Arc<WithoutQuery>>,
    mut request: Request,
    next: axum::middleware::Next,
) -> Response {
    let needs_token = operations.without_query(request.method(), request.uri().path());
    if let Some(needs_token) = needs_token
        && let Some(name) = request.uri().query().and_then(first_name)
    {
        let refused = UnknownQuery(name);
        if !needs_token {
            return refused.refusal().into_response();
        }
        request.extensions_mut().insert(refused);
    }
    next.run(request).await
}
