//! The agent endpoints: the same messages as the relay files (with `kind`, without `token`),
//! handed to the same service function.

use super::{AgentAuth, ApiBytes, ApiError, AppState, ErrorCode};
use crate::protocol::{
    AgentAnswer, AgentRequest, ClaimAnswer, ClaimRequest, HeartbeatAnswer, HeartbeatRequest, Kind,
    Received, ReportAnswer, ReportRequest, TokenCheck, decode_request,
};
use crate::service::{Arrival, Handled, WAIT_RECHECK, WorkSignal};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use std::sync::Arc;
use std::time::Duration;

/// How long a report waits at most for its share of the reports' memory budget: half the request
/// time (the request's time limit adds it, so the report keeps the whole request time from its
/// turn).
pub(super) fn budget_patience(request_timeout: Duration) -> Duration {
    request_timeout / 2
}

/// Decodes the body as the relay decodes a file, checks its kind, applies it.
async fn handle(
    state: AppState,
    body: axum::body::Bytes,
    expected: Kind,
) -> Result<Json<AgentAnswer>, ApiError> {
    let decoded = decode_request(&body);
    // The body shares hyper's read buffer: let it go now, so that a claim that waits keeps no
    // buffer of its request (and hyper reuses its own rather than take another).
    drop(body);
    answer(state, decoded, expected).await
}

/// Checks a decoded request's kind, applies it.
async fn answer(
    state: AppState,
    decoded: Result<AgentRequest, crate::protocol::DecodeError>,
    expected: Kind,
) -> Result<Json<AgentAnswer>, ApiError> {
    let request = decoded.map_err(|error| match error {
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
    let wait = match &request {
        AgentRequest::Claim(claim) if claim.wait_seconds > 0 => {
            Duration::from_secs(u64::from(claim.wait_seconds))
        }
        _ => {
            let answer = state
                .pool
                .run(move |hub| hub.handle_agent_request(&request))
                .await?;
            return Ok(Json(with_report_limit(&state, answer)));
        }
    };
    wait_for_work(&state, Arc::new(request), wait).await
}

/// A claim's answer says the largest report this transport takes: the body limit.
fn with_report_limit(state: &AppState, mut answer: AgentAnswer) -> AgentAnswer {
    if let AgentAnswer::Claim(claim) = &mut answer {
        claim.max_report_bytes = Some(state.options.max_body_bytes as u64);
    }
    answer
}

/// A claim that may wait: held (no blocking thread kept, no connection lent) until it hands out
/// something, work may have come (the service's work signal), a newer claim of the same agent
/// came (it answers this one at once), a look every [`WAIT_RECHECK`], or the wait's end, when
/// it is answered as usual, possibly empty. The daemon's stop answers it at once. Looking again
/// reads the database only when the signal moved past a look that found nothing.
async fn wait_for_work(
    state: &AppState,
    request: Arc<AgentRequest>,
    wait: Duration,
) -> Result<Json<AgentAnswer>, ApiError> {
    let deadline = tokio::time::Instant::now() + wait;
    let signal = state.pool.work_signal();
    let mut counted: Option<Counted> = None;
    let mut held: Option<Held> = None;
    let mut arrival = Arrival::Live;
    loop {
        // Armed before the look, so that work coming during it is not missed.
        let notified = signal.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        let may_wait =
            tokio::time::Instant::now() < deadline && held.as_ref().is_none_or(|held| held.holds());
        let looked = request.clone();
        let answer = if may_wait && arrival == Arrival::Again && signal.idle_at(signal.generation())
        {
            // Nothing claimable since the last look: no connection, no thread.
            Handled::Waiting
        } else {
            state
                .pool
                .run(move |hub| hub.handle_or_wait(&looked, None, may_wait, arrival))
                .await?
        };
        arrival = Arrival::Again;
        match answer {
            Handled::Answered(answer) => return Ok(Json(with_report_limit(state, answer))),
            Handled::Waiting => {
                counted.get_or_insert_with(|| Counted::new(state.pool.metrics()));
                if held.is_none() {
                    let holder = Held::new(&signal, request.envelope());
                    let holds = holder.holds();
                    held = Some(holder);
                    if !holds {
                        // A newer claim of this agent waits already: this one answers now.
                        continue;
                    }
                }
            }
        }
        let wake = held.as_ref().map(|held| held.wake.clone());
        let next = deadline.min(tokio::time::Instant::now() + WAIT_RECHECK);
        tokio::select! {
            () = notified => {}
            () = tokio::time::sleep_until(next) => {}
            () = async {
                match &wake {
                    Some(wake) => wake.notified().await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    }
}

/// The agent's name held by a waiting claim, given back when it is answered or dropped (the
/// agent went away).
struct Held {
    signal: Arc<WorkSignal>,
    agent: String,
    id: u64,
    wake: Arc<tokio::sync::Notify>,
}

impl Held {
    fn new(signal: &Arc<WorkSignal>, envelope: &crate::protocol::Envelope) -> Held {
        let wake = Arc::new(tokio::sync::Notify::new());
        // The decoder checked the time; one it could not read counts as the oldest.
        let sent_at = crate::domain::time::parse_utc(&envelope.sent_at)
            .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
        let id = signal.hold(&envelope.agent, sent_at, Some(wake.clone()));
        Held {
            signal: signal.clone(),
            agent: envelope.agent.clone(),
            id,
            wake,
        }
    }

    fn holds(&self) -> bool {
        self.signal.holds(&self.agent, self.id)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.signal.release(&self.agent, self.id);
    }
}

/// One claim counted in `jira_hub_claims_waiting` while it is held (also when the agent goes
/// away and the request is dropped).
struct Counted(Arc<crate::service::Metrics>);

impl Counted {
    fn new(metrics: Arc<crate::service::Metrics>) -> Self {
        crate::service::Metrics::add(&metrics.claims_waiting_http, 1);
        Counted(metrics)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0
            .claims_waiting_http
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Hands out commands (system.md §6). With `wait_seconds`, a claim that has nothing to hand
/// out is answered when a command may be handed out, or empty when the wait ends.
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
    request: axum::extract::Request,
) -> Result<Json<AgentAnswer>, axum::response::Response> {
    use axum::response::IntoResponse;
    // The body's share of the reports' memory budget before a byte of it is read: its
    // announced length, or the body limit when it does not say (chunked).
    let announced = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(state.options.max_body_bytes as u64, |len| {
            len.min(state.options.max_body_bytes as u64)
        });
    let budget = crate::service::report_budget();
    // A report under the small-file size has its share at once: it never waits behind large ones.
    let Some(_share) = budget
        .take(announced, budget_patience(state.options.request_timeout))
        .await
    else {
        let mut response = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Busy,
            None,
            format!(
                "хаб занят другими отчётами (их память ограничена {} МиБ): повторите позже",
                budget.bytes() / (1024 * 1024)
            ),
        )
        .into_response();
        response.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("5"),
        );
        return Err(response);
    };
    // Its turn: the body deadline counts from now, not from the headers (a body left unread
    // while the report waited is not late).
    super::server::begin_body_turn(request.extensions());
    // One buffer of the announced size, which the decoded report's issues are ranges of.
    let body = Received::from(
        super::read_body(request, state.options.max_body_bytes)
            .await
            .map_err(IntoResponse::into_response)?,
    );
    let decoded = body.decode(TokenCheck::Skip);
    drop(body);
    answer(state, decoded, Kind::Report)
        .await
        .map_err(IntoResponse::into_response)
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
