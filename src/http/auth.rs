//! Who may call: the token a request carries (`Authorization: Bearer`), checked in memory, and
//! the agent a refused agent request names in its header.

use super::{ApiError, AppState, ErrorCode, grant_trust_as, kind_of_holder, unknown_query};
use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;

/// Which token a request must carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Client,
    Agent,
}

/// The token of `Authorization: Bearer <token>`, if the header has one.
pub(crate) fn bearer_token(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            // The scheme is case-insensitive (RFC 9110 §11.1): `bearer x` and `BEARER x` work.
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(token)
        })
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// [`check_token`], a refusal for want of a valid token counted by credential and summed up
/// in the log ([`crate::service::Metrics::bearer_failed`]).
async fn authorize(parts: &Parts, state: &AppState, role: Role) -> Result<(), ApiError> {
    let checked = check_token(parts, state, role);
    if let Err(error) = &checked
        && error.status == StatusCode::UNAUTHORIZED
    {
        // Refused before its body is read: the agent's name comes from its header, the only
        // place it can (a stranger can name any agent; see `Presence::token_refused`).
        if role == Role::Agent
            && let Some(agent) = parts
                .headers
                .get(crate::protocol::AGENT_HEADER)
                .and_then(|value| crate::protocol::agent_from_header(value.as_bytes()))
        {
            state.pool.note_token_refused(&agent);
        }
        state.pool.metrics().bearer_failed(
            match role {
                Role::Client => crate::service::Credential::Client,
                Role::Agent => crate::service::Credential::Agent,
            },
            state.pool.now_utc(),
        );
    }
    checked?;
    // A query where the operation takes none, refused once the token passed.
    match parts.extensions.get::<unknown_query::UnknownQuery>() {
        Some(refused) => Err(refused.refusal()),
        None => Ok(()),
    }
}

fn check_token(parts: &Parts, state: &AppState, role: Role) -> Result<(), ApiError> {
    let Some(token) = bearer_token(&parts.headers) else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            None,
            "нужен заголовок Authorization: Bearer <токен>",
        ));
    };
    // In memory, without a turn at the database.
    let holder = state.pool.credentials.holder(&token);
    let crate::service::Holder {
        client,
        agent,
        initialised,
    } = holder;
    if client || agent {
        // A valid token, even the other side's: whoever sent it is no stranger.
        grant_trust_as(&parts.extensions, kind_of_holder(&holder));
    }
    if !initialised {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            None,
            "у хаба нет токенов: база не инициализирована (jira-hub init --config FILE)",
        ));
    }
    match (role, client, agent) {
        (Role::Client, true, _) | (Role::Agent, _, true) => Ok(()),
        (Role::Client, false, true) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            None,
            "токен агента не даёт доступа к этому ресурсу",
        )),
        (Role::Agent, true, false) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            None,
            "токен клиента не даёт доступа к ресурсам агента",
        )),
        _ => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            None,
            "неверный токен",
        )),
    }
}

/// A request carrying the client token.
pub(crate) struct ClientAuth;

impl FromRequestParts<AppState> for ClientAuth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        authorize(parts, state, Role::Client)
            .await
            .map(|()| ClientAuth)
    }
}

/// A request carrying the agent token.
pub(crate) struct AgentAuth;

impl FromRequestParts<AppState> for AgentAuth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        authorize(parts, state, Role::Agent)
            .await
            .map(|()| AgentAuth)
    }
}
