//! Operations: liveness, readiness, metrics. No token: they carry no business data.

use super::{ApiError, AppState, ErrorCode};
use crate::service::Metrics;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// Alive: the process answers. No database.
#[utoipa::path(get, path = "/health", tag = "operations",
    responses((status = 200, description = "`{\"status\": \"ok\", \"schema_version\": 4}`", body = Object)))]
pub(crate) async fn health() -> Json<Value> {
    Json(json!({"status": "ok", "schema_version": crate::service::SCHEMA_VERSION}))
}

/// Ready: the database answers and the relay loop is alive (a relay stuck in a system call
/// makes the hub unready, as it stops the watchdog). The relay folder's state is reported; a
/// missing share, or a folder of it that is a link, does not make the hub unready: HTTP works.
#[utoipa::path(get, path = "/ready", tag = "operations",
    responses((status = 200, description = "ready", body = Object), (status = 503, description = "the database does not answer, or the relay loop is stuck", body = super::ErrorBody)))]
pub(crate) async fn ready(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let (relay_dir, stalled, problem) = state
        .pool
        .run(|hub| {
            let metrics = hub.metrics();
            Ok((
                hub.settings()?.relay_dir,
                metrics.relay_stalled_for(),
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
    if let Some(silent) = stalled {
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

/// What `/metrics` reads from the database at each scrape, kept for the collector.
#[derive(Debug, Default, Clone)]
struct Figures {
    /// Commands by status.
    queue: Vec<(&'static str, i64)>,
    /// Seconds since the last full refresh finished; `None`: never.
    last_full_refresh_age: Option<i64>,
    mirror_issues: i64,
}

/// The process's metrics registry, built once with the router: one collector that reads the
/// service's counters (shared by the relay, the timers and HTTP) and the figures the handler last
/// read from the database.
#[derive(Debug)]
pub(crate) struct Exporter {
    registry: Registry,
    figures: Arc<Mutex<Figures>>,
}

impl Exporter {
    pub(crate) fn new(metrics: Arc<Metrics>) -> Self {
        let figures = Arc::new(Mutex::new(Figures::default()));
        let mut registry = Registry::default();
        registry.register_collector(Box::new(HubCollector {
            metrics,
            figures: figures.clone(),
        }));
        Exporter { registry, figures }
    }
}

#[derive(Debug)]
struct HubCollector {
    metrics: Arc<Metrics>,
    figures: Arc<Mutex<Figures>>,
}

impl Collector for HubCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let m = &self.metrics;
        let counters = [
            ("jira_hub_claims", "Claim requests applied", &m.claims),
            (
                "jira_hub_commands_handed_out",
                "Commands handed out by claims",
                &m.commands_handed_out,
            ),
            ("jira_hub_reports", "Report requests applied", &m.reports),
            (
                "jira_hub_results_accepted",
                "Report results accepted",
                &m.results_accepted,
            ),
            (
                "jira_hub_results_ignored",
                "Report results ignored",
                &m.results_ignored,
            ),
            ("jira_hub_heartbeats", "Heartbeats applied", &m.heartbeats),
            (
                "jira_hub_issues_ingested",
                "Raw Jira issues stored by refreshes",
                &m.issues_ingested,
            ),
            (
                "jira_hub_issues_not_stored",
                "Raw Jira issues of refresh pages left out of the mirror",
                &m.issues_not_stored,
            ),
            (
                "jira_hub_relay_files_refused",
                "Relay files refused into rejected/",
                &m.relay_refused,
            ),
        ];
        for (name, help, value) in counters {
            let counter = ConstCounter::new(Metrics::get(value));
            let metric = encoder.encode_descriptor(name, help, None, counter.metric_type())?;
            counter.encode(metric)?;
        }
        let figures = self.figures.lock().map(|f| f.clone()).unwrap_or_default();
        let queue = Family::<StatusLabel, Gauge>::default();
        for (status, count) in &figures.queue {
            queue
                .get_or_create(&StatusLabel {
                    status: (*status).to_string(),
                })
                .set(*count);
        }
        let metric = encoder.encode_descriptor(
            "jira_hub_commands",
            "Commands by status",
            None,
            queue.metric_type(),
        )?;
        queue.encode(metric)?;
        let age = Gauge::<i64>::default();
        age.set(figures.last_full_refresh_age.unwrap_or(-1));
        let metric = encoder.encode_descriptor(
            "jira_hub_last_full_refresh_age_seconds",
            "Seconds since the last full refresh finished (-1: never)",
            None,
            age.metric_type(),
        )?;
        age.encode(metric)?;
        let issues = Gauge::<i64>::default();
        issues.set(figures.mirror_issues);
        let metric = encoder.encode_descriptor(
            "jira_hub_mirror_issues",
            "Issues in the mirror",
            None,
            issues.metric_type(),
        )?;
        issues.encode(metric)?;
        Ok(())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: String,
}

/// Prometheus text: counters since start, and the queue and the last full refresh read now.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", content_type = "application/openmetrics-text"),
        (status = 503, description = "the database stayed locked (code `busy`)", body = super::ErrorBody)))]
pub(crate) async fn metrics(
    State(state): State<AppState>,
    Extension(exporter): Extension<Arc<Exporter>>,
) -> Result<impl IntoResponse, ApiError> {
    let status = state.pool.run(|hub| hub.status()).await?;
    let figures = Figures {
        queue: crate::domain::command::CommandStatus::ALL
            .iter()
            .map(|status_name| {
                let count = status
                    .counts
                    .queue
                    .iter()
                    .find(|q| q.status == status_name.as_str())
                    .map_or(0, |q| q.commands);
                (status_name.as_str(), count)
            })
            .collect(),
        last_full_refresh_age: status
            .last_full_refresh
            .as_ref()
            .and_then(|run| run.finished_at.as_ref())
            .and_then(|at| crate::domain::time::parse_utc(at.as_str()))
            .map(|at| (time::OffsetDateTime::now_utc() - at).whole_seconds()),
        mirror_issues: status.counts.issues,
    };
    let mut text = String::new();
    {
        // One scrape at a time: the figures and their encoding belong together.
        let mut slot = exporter
            .figures
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *slot = figures;
        drop(slot);
        prometheus_client::encoding::text::encode(&mut text, &exporter.registry)
    }
    .map_err(|error| {
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
