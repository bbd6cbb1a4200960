//! Operations: liveness, readiness, metrics. No token: they carry no business data.

use super::{ApiError, AppState, ErrorCode};
use crate::service::{Credential, Fault, Metrics, MetricsFigures};
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
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

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
    // On the operations' own connection: a flood of `/ready` never takes a turn
    // agents and clients need.
    let (relay_dir, stalled, problem, missing, initialised, fault, visibility) = state
        .pool
        .run_operation(|hub| {
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
                metrics.relay_visibility(),
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
            format!("папка обмена не отвечает {} с", silent.as_secs()),
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
    // How late the relay sees the agent's files (null until measured), and the line naming the
    // mount option that removes a late delay (null when it is not late).
    if relay_dir.is_some() {
        let (seconds, told) = match visibility {
            Some((delay, told)) => (json!((delay.as_millis() as f64) / 1000.0), json!(told)),
            None => (Value::Null, Value::Null),
        };
        body["relay_visibility_seconds"] = seconds;
        body["relay_visibility"] = told;
    }
    if let Some(instance) = &state.options.instance {
        body["instance"] = json!(instance);
    }
    Ok(Json(body))
}

/// The process's metrics: the service's counters (shared by the relay, the timers and HTTP),
/// encoded at each scrape beside the snapshot of what the database holds
/// ([`HubPool::snapshot`](super::HubPool::snapshot)).
#[derive(Debug)]
pub(crate) struct Exporter {
    metrics: Arc<Metrics>,
    /// The last exposition written, in both formats, and what it was written from: a scrape
    /// that finds the same snapshot, second and counters gets it again without encoding (many
    /// scrapers of an idle hub cost a copy of a reference each).
    /// One scrape encodes at a time (the others wait without a thread, and mostly get its text).
    last: tokio::sync::Mutex<Option<Written>>,
}

/// An exposition and what it was written from.
#[derive(Debug)]
struct Written {
    figures: Arc<MetricsFigures>,
    second: i64,
    live: Vec<u64>,
    openmetrics: axum::body::Bytes,
    prometheus: axum::body::Bytes,
}

impl Exporter {
    pub(crate) fn new(metrics: Arc<Metrics>) -> Self {
        Exporter {
            metrics,
            last: tokio::sync::Mutex::new(None),
        }
    }

    /// The exposition in `format` of the counters now and of `figures`, ages counted to `now`:
    /// the last one written when it was written from the same.
    async fn exposition(
        &self,
        figures: Arc<MetricsFigures>,
        now: time::OffsetDateTime,
        format: Exposition,
    ) -> Result<axum::body::Bytes, std::fmt::Error> {
        let pick = |written: &Written| match format {
            Exposition::OpenMetrics => written.openmetrics.clone(),
            Exposition::Prometheus => written.prometheus.clone(),
        };
        let mut last = self.last.lock().await;
        let live = live_values(&self.metrics);
        let second = now.unix_timestamp();
        if let Some(written) = last.as_ref()
            && Arc::ptr_eq(&written.figures, &figures)
            && written.second == second
            && written.live == live
        {
            return Ok(pick(written));
        }
        let openmetrics = self.encode(figures.clone(), now)?;
        let written = Written {
            figures,
            second,
            live,
            prometheus: prometheus_text(&openmetrics).into(),
            openmetrics: openmetrics.into(),
        };
        let bytes = pick(&written);
        *last = Some(written);
        Ok(bytes)
    }

    /// The exposition of the counters now and of `figures`, ages counted to `now`.
    fn encode(
        &self,
        figures: Arc<MetricsFigures>,
        now: time::OffsetDateTime,
    ) -> Result<String, std::fmt::Error> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(HubCollector {
            metrics: self.metrics.clone(),
            figures: figures.clone(),
            now,
        }));
        let failed = figures
            .queue
            .iter()
            .find(|(status, _)| *status == "failed")
            .map_or(0, |(_, count)| *count);
        registry.register_collector(Box::new(super::failed_metric::FailedCollector((
            figures.failed_conflicts,
            failed - figures.failed_conflicts,
        ))));
        registry.register_collector(Box::new(super::process_metrics::ProcessFigures::now()));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry)?;
        Ok(text)
    }
}

/// The counters of what the process did, each with its name and help.
fn counters(m: &Metrics) -> [(&'static str, &'static str, &std::sync::atomic::AtomicU64); 11] {
    [
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
    ]
}

/// What retention removed since the start: finished batches, their
/// commands and attempts, and records of handled agent requests.
fn retention_counters(m: &Metrics) -> [(&'static str, &'static str, &AtomicU64); 4] {
    [
        (
            "jira_hub_pruned_batches",
            "Finished batches deleted past their retention",
            &m.pruned_batches,
        ),
        (
            "jira_hub_pruned_commands",
            "Commands of those batches deleted",
            &m.pruned_commands,
        ),
        (
            "jira_hub_pruned_attempts",
            "Earlier attempts of those commands deleted",
            &m.pruned_attempts,
        ),
        (
            "jira_hub_pruned_agent_requests",
            "Records of handled agent requests forgotten past their retention",
            &m.pruned_agent_requests,
        ),
    ]
}

/// What changes the exposition besides the snapshot and the second: every counter and gauge the
/// collector reads live.
fn live_values(m: &Metrics) -> Vec<u64> {
    let mut values: Vec<u64> = counters(m)
        .iter()
        .chain(retention_counters(m).iter())
        .map(|(_, _, counter)| Metrics::get(counter))
        .collect();
    let totals = m.tallies.totals();
    values.extend(totals.finished.values());
    values.extend([totals.jira_calls, totals.rate_limited]);
    values.extend(Credential::ALL.map(|credential| m.auth_failures(credential)));
    values.extend([
        crate::logging::lines_dropped(),
        Metrics::get(&m.claims_waiting_http),
        Metrics::get(&m.claims_waiting_relay),
        m.relay_files_waiting
            .load(std::sync::atomic::Ordering::Relaxed),
        crate::service::report_budget().waiting(),
        crate::service::report_budget().free_bytes(),
    ]);
    values
}

#[derive(Debug)]
struct HubCollector {
    metrics: Arc<Metrics>,
    figures: Arc<MetricsFigures>,
    now: time::OffsetDateTime,
}

impl Collector for HubCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let m = &self.metrics;
        let counters = counters(m);
        let dropped = ConstCounter::new(crate::logging::lines_dropped());
        let metric = encoder.encode_descriptor(
            "jira_hub_log_lines_dropped",
            "Log lines stderr could not take (a full disk, a closed pipe), dropped",
            None,
            dropped.metric_type(),
        )?;
        dropped.encode(metric)?;
        for (name, help, value) in counters.into_iter().chain(retention_counters(m)) {
            let counter = ConstCounter::new(Metrics::get(value));
            let metric = encoder.encode_descriptor(name, help, None, counter.metric_type())?;
            counter.encode(metric)?;
        }
        encode_outcomes(&mut encoder, m)?;
        let figures = &self.figures;
        let age = |at: &crate::domain::time::Utc| (self.now - at.at()).whole_seconds().max(0);
        // Timestamps, not ages (Prometheus, "Instrumentation", "Timestamps, not time since"):
        // `time() - x` is the age whenever the rule is evaluated, however stale the scrape.
        encode_gauge(
            &mut encoder,
            "jira_hub_last_backup_timestamp_seconds",
            "When the newest copy in backups/ was made, in seconds since the Unix epoch (0: there is none)",
            figures.last_backup_at.map_or(0, |at| at.unix_timestamp()),
        )?;
        encode_gauge(
            &mut encoder,
            "jira_hub_database_size_bytes",
            "Bytes the database file and its WAL take",
            i64::try_from(figures.database_bytes).unwrap_or(i64::MAX),
        )?;
        if let Some(finished) = &figures.last_full_refresh_at {
            encode_gauge(
                &mut encoder,
                "jira_hub_last_full_refresh_timestamp_seconds",
                "When the last full refresh finished, in seconds since the Unix epoch (no sample: never)",
                finished.at().unix_timestamp(),
            )?;
        }
        if !figures.agents.is_empty() {
            let seen = Family::<AgentLabel, Gauge>::default();
            for agent in &figures.agents {
                seen.get_or_create(&AgentLabel {
                    agent: LabelText(agent.agent.clone()),
                })
                .set(agent.last_seen_at.at().unix_timestamp());
            }
            let metric = encoder.encode_descriptor(
                "jira_hub_agent_last_seen_timestamp_seconds",
                "When each agent was last seen, in seconds since the Unix epoch",
                None,
                seen.metric_type(),
            )?;
            seen.encode(metric)?;
        }
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
        for fault in [
            Fault::Full,
            Fault::ReadOnly,
            Fault::Io,
            Fault::Moved,
            Fault::Overwritten,
        ] {
            faults
                .get_or_create(&FaultLabel {
                    fault: fault.name().to_string(),
                })
                .set(i64::from(figures.database_fault == Some(fault)));
        }
        let metric = encoder.encode_descriptor(
            "jira_hub_database_fault",
            "1 for what keeps the database from being written now (a full disk, a read-only or moved file, an I/O error), until a write succeeds",
            None,
            faults.metric_type(),
        )?;
        faults.encode(metric)?;
        if let Some(finished) = &figures.last_full_refresh_at {
            encode_gauge(
                &mut encoder,
                "jira_hub_last_full_refresh_age_seconds",
                "Seconds since the last full refresh finished (no sample: never)",
                age(finished),
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
            figures.oldest_queued_since.as_ref().map_or(0, age),
        )?;
        encode_gauge(
            &mut encoder,
            "jira_hub_commands_given_back_uncounted",
            "Commands not ended that their agent gave back with nothing sent to Jira (deliveries not counted)",
            figures.uncounted_commands,
        )?;
        encode_gauge(
            &mut encoder,
            "jira_hub_uncounted_releases",
            "Uncounted give-backs in a row, summed over those commands (each fails after its budget)",
            figures.uncounted_releases,
        )?;
        encode_gauge(
            &mut encoder,
            "jira_hub_oldest_uncounted_release_age_seconds",
            "Seconds since the oldest run of uncounted give-backs began (0: none; a command fails after an hour)",
            figures.oldest_uncounted_since.as_ref().map_or(0, age),
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
        let budget = crate::service::report_budget();
        encode_gauge(
            &mut encoder,
            "jira_hub_reports_waiting_for_budget",
            "Agent reports (HTTP bodies and relay files of 64 KiB and more) waiting now for their share of the reports' memory budget (--report-budget-mb)",
            i64::try_from(budget.waiting()).unwrap_or(i64::MAX),
        )?;
        encode_gauge(
            &mut encoder,
            "jira_hub_report_budget_free_bytes",
            "Bytes of the reports' memory budget not held by reports in flight",
            i64::try_from(budget.free_bytes()).unwrap_or(i64::MAX),
        )?;
        if let Some((delay, _)) = m.relay_visibility() {
            let gauge = ConstGauge::new(delay.as_secs_f64());
            let metric = encoder.encode_descriptor(
                "jira_hub_relay_visibility_seconds",
                "How late the relay sees the agent's files: the median over its recent requests of first listed minus written, both on the file server's clock (absent until measured)",
                None,
                gauge.metric_type(),
            )?;
            gauge.encode(metric)?;
        }
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
        for agent in &figures.agents {
            agents
                .get_or_create(&AgentLabel {
                    agent: LabelText(agent.agent.clone()),
                })
                .set(age(&agent.last_seen_at));
        }
        let metric = encoder.encode_descriptor(
            "jira_hub_agent_last_seen_age_seconds",
            "Seconds since each agent was last seen",
            None,
            agents.metric_type(),
        )?;
        agents.encode(metric)?;
        // Only while some agent is held: a family without a sample trips OpenMetrics parsers.
        if figures.agents.iter().any(|agent| agent.jira_held.is_some()) {
            let held = Family::<HeldLabel, Gauge>::default();
            for agent in &figures.agents {
                let Some((class, since)) = &agent.jira_held else {
                    continue;
                };
                held.get_or_create(&HeldLabel {
                    agent: LabelText(agent.agent.clone()),
                    reason: class,
                })
                .set(age(since));
            }
            let metric = encoder.encode_descriptor(
                "jira_hub_agent_jira_held_seconds",
                "Seconds since each agent has said Jira is held for it, with the class of its reason (credentials, unreachable, rate_limited, probe, other)",
                None,
                held.metric_type(),
            )?;
            held.encode(metric)?;
        }
        // Only while some agent is listed: a family without a sample trips OpenMetrics parsers.
        if !figures.agents.is_empty() {
            let silent = Family::<AgentLabel, Gauge>::default();
            for agent in &figures.agents {
                silent
                    .get_or_create(&AgentLabel {
                        agent: LabelText(agent.agent.clone()),
                    })
                    .set(i64::from(agent.silent));
            }
            let metric = encoder.encode_descriptor(
                "jira_hub_agent_silent",
                "1 when the agent sent nothing of its own for two of its heartbeat periods (20 minutes when it never told its period)",
                None,
                silent.metric_type(),
            )?;
            silent.encode(metric)?;
        }
        encode_gauge(
            &mut encoder,
            "jira_hub_commands_withheld",
            "Queued commands no agent seen so far can honour: an edit with a base waits for an agent that checks conflicts (protocol capability edit_base)",
            figures.withheld_commands,
        )?;
        // Only while some agent is listed: a family without a sample trips OpenMetrics parsers.
        if !figures.agents.is_empty() {
            let info = Family::<AgentInfoLabel, Gauge>::default();
            for agent in &figures.agents {
                info.get_or_create(&AgentInfoLabel {
                    agent: LabelText(agent.agent.clone()),
                    version: LabelText(agent.version.clone()),
                    commit: LabelText(agent.commit.clone()),
                    protocol: LabelText(agent.protocol.to_string()),
                })
                .set(1);
            }
            let metric = encoder.encode_descriptor(
                "jira_hub_agent_info",
                "Each agent's release, commit and protocol revision as it last said (1 always; commit \"?\" and protocol 1: the previous release, which says neither)",
                None,
                info.metric_type(),
            )?;
            info.encode(metric)?;
        }
        let build = Info::new(BuildLabels {
            version: env!("CARGO_PKG_VERSION"),
            commit: env!("JIRA_HUB_COMMIT"),
            protocol: crate::protocol::PROTOCOL_REVISION,
            schema: format!(
                "v{}r{}",
                crate::service::SCHEMA_VERSION,
                crate::service::SCHEMA_REVISION
            ),
        });
        let metric = encoder.encode_descriptor(
            "jira_hub_build",
            "The running build: release, commit, agent protocol revision, database schema",
            None,
            build.metric_type(),
        )?;
        build.encode(metric)?;
        Ok(())
    }
}

/// The counters of outcomes: commands that reached a final status (every status and type,
/// zeros included, so that `increase()` has a series from the first scrape), Jira calls and
/// rate-limited answers the agent reported with its results, requests refused for want of a
/// valid credential.
fn encode_outcomes(encoder: &mut DescriptorEncoder, m: &Metrics) -> Result<(), std::fmt::Error> {
    use crate::domain::command::{CommandStatus, CommandType};
    let totals = m.tallies.totals();
    let finished =
        Family::<FinishedLabels, prometheus_client::metrics::counter::Counter>::default();
    let final_statuses = CommandStatus::ALL.iter().filter(|s| s.is_terminal());
    for status in final_statuses {
        for kind in <CommandType as strum::VariantArray>::VARIANTS {
            let kind: &'static str = kind.into();
            let labels = FinishedLabels {
                status: status.as_str(),
                r#type: kind,
            };
            finished.get_or_create(&labels).inc_by(
                totals
                    .finished
                    .get(&(status.as_str(), kind))
                    .copied()
                    .unwrap_or(0),
            );
        }
    }
    // A stored type the hub does not know, only when there was one.
    for ((status, kind), count) in &totals.finished {
        if *kind == "unknown" {
            finished
                .get_or_create(&FinishedLabels {
                    status,
                    r#type: kind,
                })
                .inc_by(*count);
        }
    }
    let metric = encoder.encode_descriptor(
        "jira_hub_commands_finished",
        "Commands that reached a final status since the hub started, by status and type (one that fails and is then left as Jira has it counts failed, then cancelled; a retried one counts again when it ends)",
        None,
        finished.metric_type(),
    )?;
    finished.encode(metric)?;
    for (name, help, value) in [
        (
            "jira_hub_jira_calls",
            "Jira calls the agent made for commands, as it reported them with their results, since the hub started",
            totals.jira_calls,
        ),
        (
            "jira_hub_jira_rate_limited",
            "Answers of Jira that limited the agent's rate (429, 503 with Retry-After), as it reported them with its results, since the hub started",
            totals.rate_limited,
        ),
    ] {
        let counter = ConstCounter::new(value);
        let metric = encoder.encode_descriptor(name, help, None, counter.metric_type())?;
        counter.encode(metric)?;
    }
    let failures =
        Family::<CredentialLabel, prometheus_client::metrics::counter::Counter>::default();
    for credential in Credential::ALL {
        failures
            .get_or_create(&CredentialLabel {
                credential: credential.name(),
            })
            .inc_by(m.auth_failures(credential));
    }
    let metric = encoder.encode_descriptor(
        "jira_hub_auth_failures",
        "Requests refused for a missing or wrong credential since the hub started: the client or agent token (401), the metrics token, a console sign-in",
        None,
        failures.metric_type(),
    )?;
    failures.encode(metric)
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FinishedLabels {
    status: &'static str,
    r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CredentialLabel {
    credential: &'static str,
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

/// An agent held, with the class of its reason: a bounded word, never the agent's free text
///.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HeldLabel {
    agent: LabelText,
    reason: &'static str,
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
    protocol: u32,
    schema: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentInfoLabel {
    agent: LabelText,
    version: LabelText,
    commit: LabelText,
    protocol: LabelText,
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

/// Counters since start, and the snapshot of what the database holds (the queue, its oldest
/// command's age, the agents' last-seen ages, the last full refresh), taken on the operations'
/// own connection at most once per twenty times its cost (a scrape costs about the
/// same on a hub of 300,000 commands as on a new one, and never takes a turn agents and clients
/// need). Prometheus text (0.0.4) unless `Accept` prefers OpenMetrics 1.0.0. With
/// `--metrics-token-file`, only a request with that bearer token is answered.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format, or OpenMetrics when `Accept` prefers it", content_type = "text/plain"),
        (status = 401, description = "the hub was started with `--metrics-token-file` and the request did not carry that token", body = super::ErrorBody),
        (status = 503, description = "the database stayed locked (code `busy`)", body = super::ErrorBody)))]
pub(crate) async fn metrics(
    State(state): State<AppState>,
    Extension(exporter): Extension<Arc<Exporter>>,
    headers: HeaderMap,
) -> Result<axum::response::Response, ApiError> {
    if let Some(token) = &state.options.metrics_token
        && !super::bearer_token(&headers).is_some_and(|given| token.matches(&given))
    {
        state
            .pool
            .metrics()
            .bearer_failed(crate::service::Credential::Metrics, state.pool.now_utc());
        let mut response = ApiError::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            None,
            "нужен заголовок Authorization: Bearer <токен метрик> (хаб запущен с --metrics-token-file)",
        )
        .into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            axum::http::HeaderValue::from_static("Bearer"),
        );
        return Ok(response);
    }
    let exposition = Exposition::negotiate(
        headers
            .get(header::ACCEPT)
            .and_then(|value| value.to_str().ok()),
    );
    let figures = state.pool.snapshot().await?;
    let body = exporter
        .exposition(figures, state.pool.now_utc(), exposition)
        .await
        .map_err(|error| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorCode::Internal,
                None,
                error.to_string(),
            )
        })?;
    Ok(([(header::CONTENT_TYPE, exposition.content_type())], body).into_response())
}
