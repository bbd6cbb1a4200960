//! Operations: liveness, readiness, metrics. No token: they carry no business data.

use super::{ApiError, AppState, ErrorCode};
use crate::service::Metrics;
use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};

/// Alive: the process answers. No database.
#[utoipa::path(get, path = "/health", tag = "operations",
    responses((status = 200, description = "`{\"status\": \"ok\", \"schema_version\": 4}`", body = Object)))]
pub async fn health() -> Json<Value> {
    Json(json!({"status": "ok", "schema_version": crate::service::SCHEMA_VERSION}))
}

/// Ready: the database answers and the relay loop is alive (a relay stuck in a system call
/// makes the hub unready, as it stops the watchdog). The relay folder's state is reported; a
/// missing share, or a folder of it that is a link, does not make the hub unready: HTTP works.
#[utoipa::path(get, path = "/ready", tag = "operations",
    responses((status = 200, description = "ready", body = Object), (status = 503, description = "the database does not answer, or the relay loop is stuck", body = super::ErrorBody)))]
pub async fn ready(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let (relay_dir, silent, problem) = state
        .pool
        .run(|hub| {
            let metrics = hub.metrics();
            Ok((
                hub.settings()?.relay_dir,
                metrics.relay_silent_for(),
                metrics.relay_problem(),
            ))
        })
        .await
        .map_err(|error| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::NotReady,
                None,
                format!("база не отвечает: {}", error.message),
            )
        })?;
    if let Some(silent) = silent.filter(|s| *s > crate::relay::RELAY_STALL_LIMIT) {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NotReady,
            None,
            format!("реле не отвечает {} с", silent.as_secs()),
        ));
    }
    let relay = match (&relay_dir, &problem) {
        (None, _) => "not set",
        (Some(_), Some(_)) => "unusable",
        (Some(dir), None) if std::path::Path::new(dir).join("inbox").is_dir() => "ok",
        (Some(_), None) => "missing",
    };
    Ok(Json(
        json!({"status": "ready", "database": "ok", "relay": relay, "relay_dir": relay_dir, "relay_problem": problem}),
    ))
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: String,
}

/// Prometheus text: counters since start, and the queue and the last full refresh read now.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", content_type = "application/openmetrics-text"),
        (status = 503, description = "the database stayed locked (code `busy`)", body = super::ErrorBody)))]
pub async fn metrics(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let (status, counters) = state
        .pool
        .run(|hub| {
            let m = hub.metrics();
            let counters = [
                (
                    "jira_hub_claims",
                    "Claim requests applied",
                    Metrics::get(&m.claims),
                ),
                (
                    "jira_hub_commands_handed_out",
                    "Commands handed out by claims",
                    Metrics::get(&m.commands_handed_out),
                ),
                (
                    "jira_hub_reports",
                    "Report requests applied",
                    Metrics::get(&m.reports),
                ),
                (
                    "jira_hub_results_accepted",
                    "Report results accepted",
                    Metrics::get(&m.results_accepted),
                ),
                (
                    "jira_hub_results_ignored",
                    "Report results ignored",
                    Metrics::get(&m.results_ignored),
                ),
                (
                    "jira_hub_heartbeats",
                    "Heartbeats applied",
                    Metrics::get(&m.heartbeats),
                ),
                (
                    "jira_hub_issues_ingested",
                    "Raw Jira issues stored by refreshes",
                    Metrics::get(&m.issues_ingested),
                ),
                (
                    "jira_hub_issues_not_stored",
                    "Raw Jira issues of refresh pages left out of the mirror",
                    Metrics::get(&m.issues_not_stored),
                ),
                (
                    "jira_hub_relay_files_refused",
                    "Relay files refused into rejected/",
                    Metrics::get(&m.relay_refused),
                ),
            ];
            Ok((hub.status()?, counters))
        })
        .await?;
    let mut registry = Registry::default();
    for (name, help, value) in counters {
        registry.register(
            name,
            help,
            prometheus_client::metrics::counter::ConstCounter::new(value),
        );
    }
    let queue = Family::<StatusLabel, Gauge>::default();
    for status_name in crate::domain::command::CommandStatus::ALL {
        let count = status
            .counts
            .queue
            .iter()
            .find(|q| q.status == status_name.as_str())
            .map_or(0, |q| q.commands);
        queue
            .get_or_create(&StatusLabel {
                status: status_name.as_str().to_string(),
            })
            .set(count);
    }
    registry.register("jira_hub_commands", "Commands by status", queue);
    let age = status
        .last_full_refresh
        .as_ref()
        .and_then(|run| run.finished_at.as_ref())
        .and_then(|at| crate::domain::time::parse_utc(at.as_str()))
        .map(|at| (time::OffsetDateTime::now_utc() - at).whole_seconds());
    let age_gauge = Gauge::<i64>::default();
    age_gauge.set(age.unwrap_or(-1));
    registry.register(
        "jira_hub_last_full_refresh_age_seconds",
        "Seconds since the last full refresh finished (-1: never)",
        age_gauge,
    );
    let issues = Gauge::<i64>::default();
    issues.set(status.counts.issues);
    registry.register("jira_hub_mirror_issues", "Issues in the mirror", issues);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).map_err(|error| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            None,
            error.to_string(),
        )
    })?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    ))
}
