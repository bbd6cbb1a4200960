//! Operations: liveness, readiness, metrics. No token: they carry no business data.

use super::{ApiError, AppState, ErrorCode};
use crate::service::{Fault, Metrics};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeLabelValue, EncodeMetric, LabelValueEncoder,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// Alive: the process answers. No database.
#[utoipa::path(get, path = "/health", tag = "operations",
    responses((status = 200, description = "`{\"status\": \"ok\", \"schema_version\": 4}`", body = Object)))]
pub(crate) async fn health() -> Json<Value> {
    Json(json!({"status": "ok", "schema_version": crate::service::SCHEMA_VERSION}))
}

/// Ready: the database answers, it was initialised (it has tokens), and the relay loop is alive
/// (a relay stuck in a system call makes the hub unready, as it stops the watchdog). The relay folder's state is reported; a
/// missing share, or a folder of it that is a link, does not make the hub unready: HTTP works.
#[utoipa::path(get, path = "/ready", tag = "operations",
    responses((status = 200, description = "ready", body = Object), (status = 503, description = "the database does not answer, was never initialised (no tokens), or the relay loop is stuck", body = super::ErrorBody)))]
pub(crate) async fn ready(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let (relay_dir, stalled, problem, missing, initialised, fault) = state
        .pool
        .run(|hub| {
            // While a fault is recorded, a write that changes nothing shows whether it is over.
            let _ = hub.probe_database();
            let fault = hub.database_fault();
            let metrics = hub.metrics();
            let settings = hub.settings()?;
            Ok((
                settings.relay_dir,
                metrics.relay_stalled_for(),
                metrics.relay_problem(),
                metrics
                    .relay_missing
                    .load(std::sync::atomic::Ordering::Relaxed),
                settings.tokens.is_some(),
                fault,
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
    if !initialised {
        // Every client call, sign-in and agent request is refused until `init`; it is read from
        // the database at each request, so the hub is ready as soon as `init` has run.
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NotReady,
            None,
            "база не инициализирована: токенов нет, клиенты и агент получают отказ; выполните jira-hub init --config FILE",
        ));
    }
    if let Some(seen) = fault {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NotReady,
            Some("database"),
            format!(
                "база не принимает записи ({}) с {}: {}",
                seen.fault.name(),
                crate::domain::time::format_utc(seen.since),
                seen.detail
            ),
        ));
    }
    if let Some(silent) = stalled {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NotReady,
            None,
            format!("реле не отвечает {} с", silent.as_secs()),
        ));
    }
    // As the relay found the folder on its last pass: the request itself never touches the
    // share (a hung mount would hold it).
    let relay = match (&relay_dir, &problem) {
        (None, _) => "not set",
        (Some(_), _) if missing => "missing",
        (Some(_), Some(_)) => "unusable",
        (Some(_), None) => "ok",
    };
    let mut body = json!({"status": "ready", "database": "ok", "relay": relay, "relay_dir": relay_dir, "relay_problem": problem});
    if let Some(instance) = &state.options.instance {
        body["instance"] = json!(instance);
    }
    Ok(Json(body))
}

/// What `/metrics` reads from the database at each scrape, kept for the collector.
#[derive(Debug, Default, Clone)]
struct Figures {
    /// Commands by status.
    queue: Vec<(&'static str, i64)>,
    /// Seconds since the last full refresh finished; `None`: never (no sample is written then).
    last_full_refresh_age: Option<i64>,
    mirror_issues: i64,
    /// Full refreshes held by `prune_guard`, and the issues they would remove (issue 19).
    held_runs: i64,
    issues_awaiting_removal: i64,
    /// Seconds the oldest queued command has waited; 0 when nothing is queued.
    oldest_queued_age: i64,
    /// Each agent with the seconds since it was last seen.
    agents_last_seen_age: Vec<(String, i64)>,
    /// Each agent Jira is held for (issue 24 §2), its reason and the seconds since.
    agents_jira_held: Vec<(String, String, i64)>,
    /// Each agent, and whether it is silent (two heartbeat periods without a request of its own).
    agents_silent: Vec<(String, bool)>,
    /// What is wrong with the database file (`disk_full`, `read_only`, `io_error`, `moved`).
    database_fault: Option<&'static str>,
}

/// The process's metrics registry, built once with the router: one collector that reads the
/// service's counters (shared by the relay, the timers and HTTP) and the figures the handler last
/// read from the database.
#[derive(Debug)]
pub(crate) struct Exporter {
    registry: Registry,
    figures: Arc<Mutex<Figures>>,
    failed: super::failed_metric::FailedByCause,
}

impl Exporter {
    pub(crate) fn new(metrics: Arc<Metrics>) -> Self {
        let figures = Arc::new(Mutex::new(Figures::default()));
        let mut registry = Registry::default();
        registry.register_collector(Box::new(HubCollector {
            metrics,
            figures: figures.clone(),
        }));
        let failed = super::failed_metric::FailedByCause::default();
        registry.register_collector(Box::new(super::failed_metric::FailedCollector(
            failed.clone(),
        )));
        Exporter {
            registry,
            figures,
            failed,
        }
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
            (
                "jira_hub_relay_passes",
                "Passes of the relay over inbox/ (each lists the folder once)",
                &m.relay_passes,
            ),
            (
                "jira_hub_refresh_pages",
                "Refresh pages applied to the mirror",
                &m.refresh_pages,
            ),
        ];
        let dropped = ConstCounter::new(crate::logging::lines_dropped());
        let metric = encoder.encode_descriptor(
            "jira_hub_log_lines_dropped",
            "Log lines stderr could not take (a full disk, a closed pipe), dropped",
            None,
            dropped.metric_type(),
        )?;
        dropped.encode(metric)?;
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
        let faults = Family::<FaultLabel, Gauge>::default();
        for fault in [Fault::Full, Fault::ReadOnly, Fault::Io, Fault::Moved] {
            faults
                .get_or_create(&FaultLabel {
                    fault: fault.name().to_string(),
                })
                .set(i64::from(figures.database_fault == Some(fault.name())));
        }
        let metric = encoder.encode_descriptor(
            "jira_hub_database_fault",
            "1 for what keeps the database from being written now (a full disk, a read-only or moved file, an I/O error), until a write succeeds",
            None,
            faults.metric_type(),
        )?;
        faults.encode(metric)?;
        if let Some(age) = figures.last_full_refresh_age {
            encode_gauge(
                &mut encoder,
                "jira_hub_last_full_refresh_age_seconds",
                "Seconds since the last full refresh finished (no sample: never)",
                age,
            )?;
        }
        encode_gauge(
            &mut encoder,
            "jira_hub_mirror_issues",
            "Issues in the mirror",
            figures.mirror_issues,
        )?;
        encode_gauge(
            &mut encoder,
            "jira_hub_sync_runs_held",
            "Full refreshes whose removals wait for a confirmation (prune_guard)",
            figures.held_runs,
        )?;
        encode_gauge(
            &mut encoder,
            "jira_hub_issues_awaiting_removal",
            "Issues held full refreshes would remove once confirmed",
            figures.issues_awaiting_removal,
        )?;
        encode_gauge(
            &mut encoder,
            "jira_hub_oldest_queued_age_seconds",
            "Seconds the oldest queued command has waited (0: nothing queued)",
            figures.oldest_queued_age,
        )?;
        encode_gauge(
            &mut encoder,
            "jira_hub_claims_waiting",
            "Claims held while they wait for work (over HTTP now, and parked in the relay's inbox/ after its last pass)",
            i64::try_from(
                Metrics::get(&m.claims_waiting_http) + Metrics::get(&m.claims_waiting_relay),
            )
            .unwrap_or(i64::MAX),
        )?;
        encode_gauge(
            &mut encoder,
            "jira_hub_relay_files_waiting",
            "Request files left in the relay's inbox/ after its last pass",
            i64::try_from(
                m.relay_files_waiting
                    .load(std::sync::atomic::Ordering::Relaxed),
            )
            .unwrap_or(i64::MAX),
        )?;
        let agents = Family::<AgentLabel, Gauge>::default();
        for (agent, age) in &figures.agents_last_seen_age {
            agents
                .get_or_create(&AgentLabel {
                    agent: LabelText(agent.clone()),
                })
                .set(*age);
        }
        let metric = encoder.encode_descriptor(
            "jira_hub_agent_last_seen_age_seconds",
            "Seconds since each agent was last seen",
            None,
            agents.metric_type(),
        )?;
        agents.encode(metric)?;
        // Only while some agent is held: a family without a sample trips OpenMetrics parsers.
        if !figures.agents_jira_held.is_empty() {
            let held = Family::<HeldLabel, Gauge>::default();
            for (agent, reason, age) in &figures.agents_jira_held {
                held.get_or_create(&HeldLabel {
                    agent: LabelText(agent.clone()),
                    reason: LabelText(reason.clone()),
                })
                .set(*age);
            }
            let metric = encoder.encode_descriptor(
                "jira_hub_agent_jira_held_seconds",
                "Seconds since each agent has said Jira is held for it (credentials refused, not reachable), with its reason",
                None,
                held.metric_type(),
            )?;
            held.encode(metric)?;
        }
        // Only while some agent is listed: a family without a sample trips OpenMetrics parsers.
        if !figures.agents_silent.is_empty() {
            let silent = Family::<AgentLabel, Gauge>::default();
            for (agent, is_silent) in &figures.agents_silent {
                silent
                    .get_or_create(&AgentLabel {
                        agent: LabelText(agent.clone()),
                    })
                    .set(i64::from(*is_silent));
            }
            let metric = encoder.encode_descriptor(
                "jira_hub_agent_silent",
                "1 when the agent sent nothing of its own for two of its heartbeat periods (20 minutes when it never told its period)",
                None,
                silent.metric_type(),
            )?;
            silent.encode(metric)?;
        }
        let build = Info::new(BuildLabels {
            version: env!("CARGO_PKG_VERSION"),
            commit: env!("JIRA_HUB_COMMIT"),
            schema: format!(
                "v{}r{}",
                crate::service::SCHEMA_VERSION,
                crate::service::SCHEMA_REVISION
            ),
        });
        let metric = encoder.encode_descriptor(
            "jira_hub_build",
            "The running build: release, commit, database schema",
            None,
            build.metric_type(),
        )?;
        build.encode(metric)?;
        Ok(())
    }
}

fn encode_gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), std::fmt::Error> {
    let gauge = ConstGauge::new(value);
    let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
    gauge.encode(metric)
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FaultLabel {
    fault: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentLabel {
    agent: LabelText,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HeldLabel {
    agent: LabelText,
    reason: LabelText,
}

/// A label value from outside the hub (an agent's name as stored, whatever an old version or a
/// hand let in), written escaped as both text formats require: `\\`, `\"` and `\n` (Prometheus
/// text format 0.0.4, "label_value can be any sequence of UTF-8 characters, but the backslash,
/// double-quote, and line feed characters have to be escaped as `\\`, `\"`, and `\n`";
/// OpenMetrics 1.0, ABNF `escaped-string`). prometheus-client 0.24 writes label values as they
/// are, so one agent named `agent "north"` made the whole exposition unparsable. Other control
/// characters (a carriage return ends a line for some parsers) are shown as `\u{d}`, as
/// `status` and `relay inspect` show them.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct LabelText(String);

impl EncodeLabelValue for LabelText {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c if c.is_control() => write!(encoder, "\\\\u{{{:x}}}", c as u32)?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    commit: &'static str,
    schema: String,
}

/// The two text formats a scraper may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exposition {
    /// `text/plain; version=0.0.4`: the classic Prometheus format (and what a client that states
    /// no preference gets).
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
}

impl Exposition {
    /// The format `accept` prefers, by its q-values; ties and no preference go to Prometheus text.
    fn negotiate(accept: Option<&str>) -> Exposition {
        let Some(accept) = accept else {
            return Exposition::Prometheus;
        };
        let (mut openmetrics, mut prometheus) = (0.0_f32, 0.0_f32);
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let mut quality = 1.0_f32;
            let mut version = None;
            for parameter in parts {
                let Some((key, value)) = parameter.split_once('=') else {
                    continue;
                };
                match key.trim().to_ascii_lowercase().as_str() {
                    "q" => quality = value.trim().parse().unwrap_or(0.0),
                    "version" => version = Some(value.trim().trim_matches('"').to_string()),
                    _ => {}
                }
            }
            match media.as_str() {
                "application/openmetrics-text"
                    if version.as_deref().is_none_or(|v| v.starts_with("1.0")) =>
                {
                    openmetrics = openmetrics.max(quality)
                }
                "text/plain" if version.as_deref().is_none_or(|v| v == "0.0.4") => {
                    prometheus = prometheus.max(quality)
                }
                "*/*" | "text/*" => prometheus = prometheus.max(quality),
                _ => {}
            }
        }
        if openmetrics > prometheus {
            Exposition::OpenMetrics
        } else {
            Exposition::Prometheus
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Exposition::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// The classic Prometheus text of what the OpenMetrics encoder wrote: a counter's family takes
/// its samples' `_total` name, an info family becomes a gauge named `_info`, and OpenMetrics'
/// `# UNIT` and `# EOF` lines go.
fn prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest.split_once(' ').or(Some((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                other => (name.to_string(), other),
            };
            if let Some((_, text)) = help.take() {
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Counters since start, and figures read now (the queue, its oldest command's age, the agents'
/// last-seen ages, the relay's waiting files, the last full refresh, the build). Prometheus text
/// (0.0.4) unless `Accept` prefers OpenMetrics 1.0.0.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format, or OpenMetrics when `Accept` prefers it", content_type = "text/plain"),
        (status = 503, description = "the database stayed locked (code `busy`)", body = super::ErrorBody)))]
pub(crate) async fn metrics(
    State(state): State<AppState>,
    Extension(exporter): Extension<Arc<Exporter>>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    let exposition = Exposition::negotiate(
        headers
            .get(header::ACCEPT)
            .and_then(|value| value.to_str().ok()),
    );
    let (status, fault, failed) = state
        .pool
        .run(|hub| Ok((hub.status()?, hub.database_fault(), hub.failed_by_cause()?)))
        .await?;
    let now = time::OffsetDateTime::now_utc();
    let age = |at: &crate::domain::time::Utc| (now - at.at()).whole_seconds().max(0);
    let figures = Figures {
        // The statuses the hub knows, zeros included (a label per unknown stored status would
        // be a series nobody asked for).
        queue: crate::service::QueueCount::every_status(
            status
                .counts
                .queue
                .iter()
                .map(|q| (q.status.as_str(), q.commands)),
        )
        .into_iter()
        .filter_map(|q| {
            crate::domain::command::CommandStatus::parse(&q.status)
                .map(|known| (known.as_str(), q.commands))
        })
        .collect(),
        last_full_refresh_age: status
            .last_full_refresh
            .as_ref()
            .and_then(|run| run.finished_at.as_ref())
            .map(age),
        mirror_issues: status.counts.issues,
        held_runs: status.held_runs.len() as i64,
        issues_awaiting_removal: status.held_runs.iter().map(|h| h.would_remove).sum(),
        oldest_queued_age: status.counts.oldest_queued_since.as_ref().map_or(0, age),
        agents_last_seen_age: status
            .counts
            .agents
            .iter()
            .map(|agent| (agent.agent.clone(), age(&agent.last_seen_at)))
            .collect(),
        agents_jira_held: status
            .counts
            .agents
            .iter()
            .filter_map(|agent| {
                let since = agent.jira_down_since.as_ref()?;
                let reason = agent.last_error.clone().unwrap_or_default();
                Some((agent.agent.clone(), reason, age(since)))
            })
            .collect(),
        agents_silent: status
            .counts
            .agents
            .iter()
            .map(|agent| (agent.agent.clone(), agent.silent))
            .collect(),
        database_fault: fault.map(|seen| seen.fault.name()),
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
        *exporter
            .failed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = failed;
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
    let body = match exposition {
        Exposition::OpenMetrics => text,
        Exposition::Prometheus => prometheus_text(&text),
    };
    Ok(([(header::CONTENT_TYPE, exposition.content_type())], body))
}
