//! The agent endpoints: the same messages as the relay files (with `kind`, without `token`),
//! handed to the same service function.

use super::{AgentAuth, ApiBytes, ApiError, AppState, ErrorCode};
use crate::protocol::{
    AgentAnswer, ClaimAnswer, ClaimRequest, HeartbeatAnswer, HeartbeatRequest, Kind, ReportAnswer,
    ReportRequest, decode_request,
};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

/// Decodes the body as the relay decodes a file, checks its kind, applies it.
async fn handle(
    state: AppState,
    body: axum::body::Bytes,
    expected: Kind,
) -> Result<Json<AgentAnswer>, ApiError> {
    let request = decode_request(&body).map_err(|error| match error {
        crate::protocol::DecodeError::NotJson(message)
        | crate::protocol::DecodeError::Incomplete(message) => {
            ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::Malformed, None, message)
        }
        // The header carries the token over HTTP; decoding never checks one here.
        crate::protocol::DecodeError::BadToken => ApiError::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            Some("token"),
            "неверный токен",
        ),
        crate::protocol::DecodeError::Invalid { field, message } => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::Invalid,
            Some(field.as_str()).filter(|f| !f.is_empty()),
            message,
        ),
        other @ crate::protocol::DecodeError::UnknownKind(_) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::Invalid,
            Some("kind"),
            other.message(),
        ),
    })?;
    if request.kind() != expected {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::Invalid,
            Some("kind"),
            format!(
                "запрос вида {} прислан в конечную точку {expected}",
                request.kind()
            ),
        ));
    }
    let mut answer = state
        .pool
        .run(move |hub| hub.handle_agent_request(&request))
        .await?;
    // The largest report this transport takes: the body limit (issue 19).
    if let AgentAnswer::Claim(claim) = &mut answer {
        claim.max_report_bytes = Some(state.options.max_body_bytes as u64);
    }
    Ok(Json(answer))
}

/// Hands out commands (system.md §6).
#[utoipa::path(post, path = "/agent/claim", tag = "agent", request_body = ClaimRequest,
    security(("agent_token" = [])),
    responses((status = 200, body = ClaimAnswer), (status = 401, body = super::ErrorBody), (status = 422, body = super::ErrorBody)))]
pub(crate) async fn claim(
    _: AgentAuth,
    State(state): State<AppState>,
    ApiBytes(body): ApiBytes,
) -> Result<Json<AgentAnswer>, ApiError> {
    handle(state, body, Kind::Claim).await
}

/// Takes results: done, failed, skipped, or a `progress` page of a refresh.
#[utoipa::path(post, path = "/agent/report", tag = "agent", request_body = ReportRequest,
    security(("agent_token" = [])),
    responses((status = 200, body = ReportAnswer), (status = 401, body = super::ErrorBody), (status = 422, body = super::ErrorBody)))]
pub(crate) async fn report(
    _: AgentAuth,
    State(state): State<AppState>,
    ApiBytes(body): ApiBytes,
) -> Result<Json<AgentAnswer>, ApiError> {
    handle(state, body, Kind::Report).await
}

/// The agent is alive; whether Jira answers it.
#[utoipa::path(post, path = "/agent/heartbeat", tag = "agent", request_body = HeartbeatRequest,
    security(("agent_token" = [])),
    responses((status = 200, body = HeartbeatAnswer), (status = 401, body = super::ErrorBody)))]
pub(crate) async fn heartbeat(
    _: AgentAuth,
    State(state): State<AppState>,
    ApiBytes(body): ApiBytes,
) -> Result<Json<AgentAnswer>, ApiError> {
    handle(state, body, Kind::Heartbeat).await
}
