//! The HTTP API (system.md §8): the axum router, built together with its OpenAPI document from
//! one list of routes (so the document cannot drift from the routes), and the one place that
//! maps errors to status codes.
//!
//! Handlers never touch SQLite on a runtime worker: they borrow a connection from [`HubPool`] on
//! a blocking thread. Client endpoints take the client token, agent endpoints the agent token,
//! both compared in constant time; the agent endpoints call the very function the relay calls.

mod agent;
mod auth;
mod batch_wait;
mod client;
mod console;
pub(crate) use console::set_served_database;
mod document;
mod failed_metric;
mod idempotency;
mod ops;
mod process_metrics;
mod server;
mod unknown_query;

pub(crate) use auth::{AgentAuth, ClientAuth, bearer_token};

use crate::service::{Fault, HubConnection, ServiceError, StoreError};
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json, Router};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Limits of the HTTP side: options of `serve`.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The largest request body; a refresh page of 1,000 issues must fit.
    pub max_body_bytes: usize,
    /// A request that takes longer is answered 408.
    pub request_timeout: Duration,
    /// Open connections at most; at the cap a new one closes the oldest idle one.
    pub max_connections: usize,
    /// Connections that have shown no valid token (or console session) at most, below
    /// `max_connections`: the rest is kept for agents and clients. At the cap a new connection
    /// closes the oldest anonymous one.
    pub max_anonymous_connections: usize,
    /// A request without a valid token must be read whole, headers and body, and answered
    /// within this time from the end of its connection's last answer (see [`ANONYMOUS_TIMEOUT`]).
    pub anonymous_timeout: Duration,
    /// A connection whose request headers take longer is closed.
    pub header_timeout: Duration,
    /// A connection with no request in hand for this long is closed.
    pub idle_timeout: Duration,
    /// Host names (lowercase, without a port) by which the hub may be reached besides IP
    /// addresses and `localhost`: a request naming any other is refused (DNS rebinding).
    pub allowed_hosts: Vec<String>,
    /// The console's public origins behind a reverse proxy (`https://hub.example.com`): a
    /// browser's `Origin` that is one of them is this site, whatever `Host` the proxy sent.
    pub public_origins: Vec<String>,
    /// A name for this run of the hub that `/ready` repeats (`instance`): `jira-hub demo` gives
    /// its hub one per run, so that it knows its own hub from another one on the same port.
    pub instance: Option<String>,
    /// A request body must be read whole within this time from its headers (408 after), the
    /// token's limits notwithstanding.
    pub body_timeout: Duration,
    /// When set, `/metrics` needs `Authorization: Bearer` with it (`--metrics-token-file`).
    pub metrics_token: Option<MetricsToken>,
}

/// The bearer token `/metrics` asks for when one is set (`--metrics-token-file`): compared in
/// constant time, never shown by `Debug`.
#[derive(Clone)]
pub struct MetricsToken(String);

impl MetricsToken {
    /// The token in `path` (its first line, trimmed); a clear error for a missing, unreadable
    /// or empty file.
    pub fn from_file(path: &std::path::Path) -> Result<MetricsToken, String> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            format!(
                "не удалось прочитать файл токена метрик {}: «{error}»",
                path.display()
            )
        })?;
        let token = text.lines().next().unwrap_or_default().trim().to_string();
        if token.is_empty() {
            return Err(format!("файл токена метрик {} пуст", path.display()));
        }
        if token.chars().any(|c| c.is_control() || c == ' ') {
            return Err(format!(
                "в файле токена метрик {} токен с пробелом или управляющим символом",
                path.display()
            ));
        }
        Ok(MetricsToken(token))
    }

    /// Whether `given` is this token (in time that depends only on the lengths).
    pub(crate) fn matches(&self, given: &str) -> bool {
        crate::domain::constant_time_eq(self.0.as_bytes(), given.as_bytes())
    }
}

impl std::fmt::Debug for MetricsToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsToken(***)")
    }
}

/// How long a request body may take to arrive whole, by default.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a connection that has shown no valid token has for each request: from the accept
/// (or its last answer) until its request's headers and body are read and it is answered. A
/// browser, `curl` or a monitor sends a request at once, so a few seconds are plenty; a stranger
/// trickling headers or a body holds a connection no longer than this. Requests with a valid
/// token keep the longer limits (`header_timeout`, `request_timeout`, a claim's wait).
pub const ANONYMOUS_TIMEOUT: Duration = Duration::from_secs(5);

/// The default share of the connections that anonymous ones may take: three quarters.
pub fn default_anonymous_connections(max_connections: usize) -> usize {
    (max_connections * 3 / 4).max(1)
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            max_body_bytes: 64 * 1024 * 1024,
            request_timeout: Duration::from_secs(60),
            max_connections: 256,
            max_anonymous_connections: default_anonymous_connections(256),
            anonymous_timeout: ANONYMOUS_TIMEOUT,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            allowed_hosts: Vec::new(),
            public_origins: Vec::new(),
            instance: None,
            body_timeout: BODY_TIMEOUT,
            metrics_token: None,
        }
    }
}

/// `https://Hub.Example.com:443/` → `https://hub.example.com`: an origin as a browser's
/// `Origin` header writes it (lowercase, no default port, no path). Refuses anything that is not
/// `http(s)://host[:port]`.
pub fn parse_origin(text: &str) -> Result<String, String> {
    let lower = text.trim().trim_end_matches('/').to_ascii_lowercase();
    let (scheme, rest) = lower
        .split_once("://")
        .filter(|(scheme, _)| *scheme == "http" || *scheme == "https")
        .ok_or_else(|| format!("{text}: ожидается адрес вида https://hub.example.com"))?;
    if rest.is_empty() || rest.contains(['/', '?', '#', '@', ' ']) {
        return Err(format!(
            "{text}: ожидается адрес вида https://hub.example.com (без пути)"
        ));
    }
    let rest = match (scheme, rest.rsplit_once(':')) {
        ("https", Some((host, "443"))) | ("http", Some((host, "80"))) => host,
        _ => rest,
    };
    Ok(format!("{scheme}://{rest}"))
}

/// The host part of a `Host` header (or of an origin's authority): lowercase, without its port
/// or a final dot; an IPv6 literal without its brackets.
pub(crate) fn host_name(authority: &str) -> Option<String> {
    let authority = authority.trim();
    let name = if let Some(rest) = authority.strip_prefix('[') {
        rest.split_once(']')?.0
    } else {
        match authority.rsplit_once(':') {
            Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
            _ => authority,
        }
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    (!name.is_empty()).then_some(name)
}

/// Whether a request naming `host` may be served: an IP address (a page of another site can
/// only reach one under its own name, so DNS rebinding always brings a name), `localhost` and
/// its subdomains (RFC 6761: always the loopback), an allowed host, or the host of a public
/// origin.
fn host_allowed(host: &str, options: &HttpOptions) -> bool {
    host.parse::<std::net::IpAddr>().is_ok()
        || host == "localhost"
        || host.ends_with(".localhost")
        || options.allowed_hosts.iter().any(|allowed| allowed == host)
        || options
            .public_origins
            .iter()
            .filter_map(|origin| origin.split_once("://"))
            .filter_map(|(_, authority)| host_name(authority))
            .any(|public| public == host)
}

/// Refuses (403) a request whose `Host` names the hub by a name it was not given (DNS
/// rebinding: a page of another site resolving its own name to the hub's address, to read what
/// needs no token: `/metrics`, `/ready`, `/openapi.json`, the console). A request that carries a
/// *valid* token passes, whatever name it used: such a page cannot know a token (so agents and
/// clients reach the hub by any name); an `Authorization` header that is empty or wrong does
/// not. `/health` passes too, for load balancers; it carries nothing. A request without `Host`
/// (HTTP/1.0, a test) passes: a browser always sends one.
async fn host_guard(
    State(state): State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if request.uri().path() != "/health"
        && let Some(value) = request.headers().get(axum::http::header::HOST)
    {
        let host = value.to_str().ok().and_then(host_name);
        if !host
            .as_deref()
            .is_some_and(|host| host_allowed(host, &state.options))
        {
            // The token is checked in memory: no turn at the database.
            let holder =
                bearer_token(request.headers()).map(|token| state.pool.credentials.holder(&token));
            // The metrics token is as good for `/metrics`: a page of another site cannot know it.
            let metrics_token = request.uri().path() == "/metrics"
                && state.options.metrics_token.as_ref().is_some_and(|token| {
                    bearer_token(request.headers()).is_some_and(|given| token.matches(&given))
                });
            if let Some(holder) = holder.filter(|h| h.client || h.agent) {
                grant_trust_as(request.extensions(), kind_of_holder(&holder));
            } else if metrics_token {
                grant_trust_as(request.extensions(), server::Kind::Metrics);
            } else {
                let shown = host.unwrap_or_else(|| "?".into());
                tracing::debug!(host = %shown, "a request naming an unknown host refused");
                return ApiError::new(
                    StatusCode::FORBIDDEN,
                    ErrorCode::Forbidden,
                    Some("Host"),
                    format!(
                        "хаб не знает имени «{shown}»: обращайтесь по IP-адресу или localhost, либо запустите его с --allowed-host {shown}"
                    ),
                )
                .into_response();
            }
        }
    }
    next.run(request).await
}

/// Says that the request carried a valid credential (a token, a console session): it and its
/// connection get the longer limits of `server.rs`. Nothing happens to a request made without a
/// connection (the tests' router).
pub(crate) fn grant_trust(extensions: &axum::http::Extensions) {
    grant_trust_as(extensions, server::Kind::Client);
}

/// [`grant_trust`] for a credential of `kind`.
fn grant_trust_as(extensions: &axum::http::Extensions, kind: server::Kind) {
    if let Some(trust) = extensions.get::<server::Trust>() {
        trust.grant(kind);
    }
}

/// The kind of a valid token.
fn kind_of_holder(holder: &crate::service::Holder) -> server::Kind {
    if holder.agent {
        server::Kind::Agent
    } else {
        server::Kind::Client
    }
}

/// Answers not to keep: `Cache-Control: no-store` unless the route said otherwise (the console's
/// script and style, the slice with its ETag).
async fn no_store(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let mut response = next.run(request).await;
    response
        .headers_mut()
        .entry(axum::http::header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

/// How many requests use the database at once (each on a blocking thread, with a connection and
/// its page cache): the others wait for a turn without a thread, so a burst of 2,000 claims
/// costs 2,000 small futures, not 2,000 threads and connections.
const POOL_CONNECTIONS: usize = 16;

/// How often the pool's watcher looks whether another connection committed (and then reads the
/// tokens again): a rotation by the CLI is in force within this.
const CREDENTIALS_EVERY: Duration = Duration::from_millis(250);

/// The `/metrics` snapshot is taken again at most once per this many times what taking it last
/// cost: whatever scrapes it, and however often, the snapshot costs at most about 1/21 of a
/// core.
const SNAPSHOT_COST_SHARE: u32 = 20;

/// A scrape waits this long at most for a snapshot due soon; past it the last one is served.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(1);

/// Several [`HubConnection`]s, lent to one request at a time on a
/// blocking thread.
pub struct HubPool {
    /// Turns at the database: at most [`POOL_CONNECTIONS`] at once.
    turns: Arc<tokio::sync::Semaphore>,
    /// Makes new connections when every idle one is lent.
    base: Mutex<HubConnection>,
    idle: Mutex<Vec<HubConnection>>,
    /// The counters every connection of the process shares, for `/metrics`.
    metrics: Arc<crate::service::Metrics>,
    /// The agents as every connection of the process sees them.
    presence: Arc<crate::service::Presence>,
    /// What waiting claims wait on (shared by every connection of the process).
    work: Arc<crate::service::WorkSignal>,
    /// The tokens in force, in memory: checked without a turn.
    pub(crate) credentials: Arc<crate::service::Credentials>,
    /// The operations' own share of the database (`/metrics`, `/ready`): one connection, one
    /// at a time, never one of the [`POOL_CONNECTIONS`] turns agents and clients need.
    operations: Operations,
    /// Ends the watcher thread when the pool goes.
    _watcher: Option<std::sync::mpsc::Sender<()>>,
    /// The hub's clock.
    clock: Arc<dyn crate::clock::Clock>,
    /// Clients waiting for a batch to change (`GET /batches/{id}?wait_seconds=N`).
    pub(crate) batch_waits: batch_wait::BatchWaits,
    /// The `Idempotency-Key`s whose request runs now.
    keys_in_flight: idempotency::InFlight,
}

/// The operations' share: its connection, its turn, and the `/metrics` snapshot.
struct Operations {
    turn: Arc<tokio::sync::Semaphore>,
    hub: Arc<Mutex<Option<HubConnection>>>,
    /// Taken one at a time: when the last was started and what it cost.
    taking: tokio::sync::Mutex<(Option<tokio::time::Instant>, Duration)>,
    snapshot: Mutex<Option<Arc<crate::service::MetricsFigures>>>,
}

impl HubPool {
    pub fn new(hub: HubConnection) -> Self {
        if let Err(error) = hub.reload_credentials() {
            tracing::warn!(%error, "the tokens could not be read; read again on the next change");
        }
        let watcher = match hub.connect() {
            Ok(watching) => watch_credentials(watching),
            Err(error) => {
                tracing::warn!(%error, "no connection to watch for rotated tokens");
                None
            }
        };
        HubPool {
            turns: Arc::new(tokio::sync::Semaphore::new(POOL_CONNECTIONS)),
            metrics: hub.shared_metrics(),
            presence: hub.shared_presence(),
            work: hub.work_signal(),
            credentials: hub.credentials(),
            operations: Operations {
                turn: Arc::new(tokio::sync::Semaphore::new(1)),
                hub: Arc::new(Mutex::new(None)),
                taking: tokio::sync::Mutex::new((None, Duration::ZERO)),
                snapshot: Mutex::new(None),
            },
            _watcher: watcher,
            clock: hub.clock(),
            batch_waits: batch_wait::BatchWaits::default(),
            keys_in_flight: idempotency::InFlight::default(),
            base: Mutex::new(hub),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// The process's counters (shared by every connection).
    pub(crate) fn metrics(&self) -> Arc<crate::service::Metrics> {
        self.metrics.clone()
    }

    /// A request in `agent`'s name was refused for its agent token (the name is the request's
    /// own word): the views show the agent refused by the hub until a request of it is taken.
    pub(crate) fn note_token_refused(&self, agent: &str) {
        self.presence.token_refused(agent, self.clock.now());
    }

    /// The signal of work that may have become claimable.
    pub(crate) fn work_signal(&self) -> Arc<crate::service::WorkSignal> {
        self.work.clone()
    }

    /// The hub's time now.
    pub(crate) fn now_utc(&self) -> time::OffsetDateTime {
        self.clock.now()
    }

    /// Runs `work` with a connection, on a blocking thread.
    pub(crate) async fn run<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&mut HubConnection) -> Result<T, ServiceError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let pool = self.clone();
        on_turn(&self.turns, move || {
            let mut hub = pool.checkout()?;
            let result = work(&mut hub);
            pool.checkin(hub);
            result.map_err(ApiError::from)
        })
        .await
    }

    /// Runs `work` on the operations' own connection (one at a time, on a blocking thread):
    /// `/ready` and the `/metrics` snapshot, whoever asks, never take a turn of [`run`](Self::run).
    pub(crate) async fn run_operation<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&mut HubConnection) -> Result<T, ServiceError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let pool = self.clone();
        on_turn(&self.operations.turn, move || {
            let mut slot = pool
                .operations
                .hub
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if slot.is_none() {
                *slot = Some(pool.checkout()?);
            }
            let Some(hub) = slot.as_mut() else {
                return Err(ApiError::internal("no connection for operations".into()));
            };
            work(hub).map_err(ApiError::from)
        })
        .await
    }

    /// The `/metrics` snapshot: taken again on the operations' connection when the last one was
    /// started before this scrape asked, at most once per [`SNAPSHOT_COST_SHARE`] times its
    /// cost (a scrape waits up to [`SNAPSHOT_WAIT`] for it, or gets the last one). Scrapes that
    /// come while one is taken wait for it and share it.
    pub(crate) async fn snapshot(
        self: &Arc<Self>,
    ) -> Result<Arc<crate::service::MetricsFigures>, ApiError> {
        let asked = tokio::time::Instant::now();
        let mut taking = self.operations.taking.lock().await;
        let last = self
            .operations
            .snapshot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (started, cost) = *taking;
        if let (Some(last), Some(started)) = (&last, started) {
            if started >= asked {
                return Ok(last.clone());
            }
            let due = started + cost * SNAPSHOT_COST_SHARE;
            let now = tokio::time::Instant::now();
            if due > now {
                if due - now > SNAPSHOT_WAIT {
                    return Ok(last.clone());
                }
                tokio::time::sleep_until(due).await;
            }
        }
        let started = tokio::time::Instant::now();
        let previous = last.clone();
        // What taking it cost is timed where it is taken: the wait for a thread and for the
        // operations' turn is no cost of the snapshot's (under load it made every scrape stale).
        let taken = self
            .run_operation(move |hub| {
                let at = std::time::Instant::now();
                let figures = hub.metrics_figures(previous.as_deref())?;
                Ok((figures, at.elapsed()))
            })
            .await;
        *taking = (
            Some(started),
            taken.as_ref().map_or(Duration::ZERO, |(_, cost)| *cost),
        );
        match taken.map(|(figures, _)| figures) {
            Ok(figures) => {
                let figures = Arc::new(figures);
                *self
                    .operations
                    .snapshot
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = Some(figures.clone());
                Ok(figures)
            }
            // The database does not answer: the last snapshot, if there is one.
            Err(error) => last.ok_or(error),
        }
    }

    fn checkout(&self) -> Result<HubConnection, ApiError> {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match idle {
            Some(hub) => Ok(hub),
            None => self
                .base
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .connect()
                .map_err(ApiError::from),
        }
    }

    fn checkin(&self, hub: HubConnection) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < POOL_CONNECTIONS {
            idle.push(hub);
        }
    }
}

/// Runs `work` on a blocking thread once `turns` gives a turn. The turn goes with the blocking
/// work: a request dropped meanwhile keeps it until the work ends.
async fn on_turn<T: Send + 'static>(
    turns: &Arc<tokio::sync::Semaphore>,
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let turn = turns
        .clone()
        .acquire_owned()
        .await
        .map_err(|error| ApiError::internal(format!("the pool is closed: {error}")))?;
    tokio::task::spawn_blocking(move || {
        let _turn = turn;
        work()
    })
    .await
    .map_err(|error| ApiError::internal(format!("a request task failed: {error}")))?
}

/// A thread that reads the tokens again whenever another connection committed (looked at every
/// [`CREDENTIALS_EVERY`]: `PRAGMA data_version`, a read of shared memory), so that a rotation or
/// an `init` by the CLI is in force within a quarter of a second without a request paying for
/// it. It ends when the pool drops the returned sender.
fn watch_credentials(hub: HubConnection) -> Option<std::sync::mpsc::Sender<()>> {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("tokens".into())
        .spawn(move || {
            let mut seen = hub.data_version().ok();
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(CREDENTIALS_EVERY)
            {
                let Ok(version) = hub.data_version() else {
                    continue;
                };
                if seen != Some(version) {
                    match hub.reload_credentials() {
                        Ok(_) => seen = Some(version),
                        Err(error) => {
                            tracing::debug!(%error, "the tokens could not be read; tried again")
                        }
                    }
                }
            }
        });
    match spawned {
        Ok(_) => Some(stop),
        Err(error) => {
            tracing::warn!(%error, "no thread to watch for rotated tokens");
            None
        }
    }
}

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub pool: Arc<HubPool>,
    pub options: HttpOptions,
}

/// The error body: `{"error": {"code", "field", "message"}}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong, for programs; the status says the same more coarsely.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: not JSON, a bad path or query parameter, a body not read whole.
    Malformed,
    /// 422: JSON of the wrong shape, or a value the hub refuses (the field named).
    Invalid,
    /// 401: no token, or an unknown one.
    Unauthorized,
    /// 403: the other side's token.
    Forbidden,
    NotFound,
    Conflict,
    MethodNotAllowed,
    UnsupportedMediaType,
    /// 413: the body is over `--http-max-body-mb`.
    TooLarge,
    /// 408: the request took longer than `--http-timeout-seconds`.
    Timeout,
    /// 503: the database stayed locked; retry.
    Busy,
    /// 503 of `/ready`: the database does not answer, or cannot be written.
    NotReady,
    /// 507: no room on the database's disk; nothing was written, retry later.
    DiskFull,
    /// 503: the database file cannot be written now (read-only, an I/O error) or is no longer
    /// the file the hub opened; nothing was written.
    DatabaseUnavailable,
    /// 500: a fault of the hub, details in its log.
    Internal,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorDetail {
    pub code: ErrorCode,
    /// The field at fault, when there is one.
    pub field: Option<String>,
    /// For people, in Russian where the spec quotes it.
    pub message: String,
}

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub field: Option<String>,
    pub message: String,
}

impl ApiError {
    pub(crate) fn new(
        status: StatusCode,
        code: ErrorCode,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        ApiError {
            status,
            code,
            field: field.map(String::from),
            message: message.into(),
        }
    }

    fn internal(detail: String) -> Self {
        tracing::error!(%detail, "internal error");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            None,
            "внутренняя ошибка хаба, подробности в журнале",
        )
    }
}

/// The one mapping of service errors to statuses.
impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> Self {
        match error {
            ServiceError::Invalid(e) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::Invalid,
                Some(&e.field),
                e.message,
            ),
            ServiceError::Conflict { field, message } => ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::Conflict,
                Some(&field),
                message,
            ),
            ServiceError::NotFound(message) => {
                ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, None, message)
            }
            ServiceError::Busy(error) => {
                tracing::warn!(%error, "database busy");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    ErrorCode::Busy,
                    None,
                    "база занята, повторите запрос",
                )
            }
            ServiceError::Internal(error @ StoreError::Unavailable { fault, .. }) => {
                tracing::warn!(%error, "a write was refused");
                let (status, code) = match fault {
                    Fault::Full => (StatusCode::INSUFFICIENT_STORAGE, ErrorCode::DiskFull),
                    _ => (
                        StatusCode::SERVICE_UNAVAILABLE,
                        ErrorCode::DatabaseUnavailable,
                    ),
                };
                ApiError::new(status, code, None, error.to_string())
            }
            ServiceError::Internal(error) => ApiError::internal(error.to_string()),
            error @ ServiceError::Random(_) => ApiError::internal(error.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                field: self.field,
                message: self.message,
            },
        };
        (self.status, Json(body)).into_response()
    }
}

/// What a body that could not be read is answered: 413 over the limit, 400 otherwise.
fn body_rejection(rejection: axum::extract::rejection::BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        body_too_large()
    } else {
        body_unread(&rejection)
    }
}

/// A body over `--http-max-body-mb`: 413.
fn body_too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::TooLarge,
        None,
        "тело запроса больше предела",
    )
}

/// A body that stopped coming: 408 past its deadline, 400 otherwise.
fn body_unread(failure: &(dyn std::error::Error + 'static)) -> ApiError {
    let mut source = Some(failure);
    while let Some(error) = source {
        if let Some(timed_out) = error.downcast_ref::<server::BodyTimedOut>() {
            return ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                ErrorCode::Timeout,
                None,
                format!(
                    "тело запроса не пришло целиком за {} с",
                    timed_out.0.as_secs()
                ),
            );
        }
        source = error.source();
    }
    ApiError::new(
        StatusCode::BAD_REQUEST,
        ErrorCode::Malformed,
        None,
        "тело запроса не прочитано целиком",
    )
}

/// A JSON decoding error as an answer: 400 not JSON, 422 JSON of the wrong shape.
fn json_rejection(error: crate::domain::json::JsonError) -> ApiError {
    let (status, code) = if error.syntax {
        (StatusCode::BAD_REQUEST, ErrorCode::Malformed)
    } else {
        (StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::Invalid)
    };
    ApiError::new(
        status,
        code,
        Some(error.field.as_str()).filter(|f| !f.is_empty()),
        error.message,
    )
}

/// Decodes a JSON body already read; a refusal names the field, in Russian (400 for what is not
/// JSON, 422 for JSON of the wrong shape).
pub(crate) fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Every body is a JSON object: an array would fill a structure's fields by position.
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::Invalid,
            None,
            "тело запроса — JSON-массив; ожидается объект",
        ));
    }
    crate::domain::json::from_slice(bytes).map_err(json_rejection)
}

/// A raw body (the agent endpoints, `/refresh`) whose rejections come back in the error shape:
/// axum's own 413 of [`axum::extract::DefaultBodyLimit`] is plain text.
pub(crate) struct ApiBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBytes {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        Bytes::from_request(request, state)
            .await
            .map(ApiBytes)
            .map_err(body_rejection)
    }
}

/// A body read into one buffer made at once for the length its request announces (at most
/// `limit`, `--http-max-body-mb`), each frame hyper hands over copied into it as it comes: never
/// collected in pieces and copied again whole, so that a report of 100 MiB costs 100 MiB.
/// Refused as [`ApiBytes`] refuses: 413 past `limit` (announced or sent), 408 past
/// the body's deadline, 400 otherwise.
pub(crate) async fn read_body(request: Request, limit: usize) -> Result<Vec<u8>, ApiError> {
    use hyper::body::Body as _;
    let announced = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|length| length > limit as u64) {
        return Err(body_too_large());
    }
    let mut body = request.into_body();
    let mut bytes = Vec::with_capacity(announced.map_or(0, |length| length as usize));
    while let Some(frame) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
    {
        let frame = frame.map_err(|error| body_unread(&error))?;
        if let Ok(data) = frame.into_data() {
            if bytes.len().saturating_add(data.len()) > limit {
                return Err(body_too_large());
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes)
}

/// A JSON body whose rejections come back in the error shape: 400 malformed JSON, 415 not
/// `application/json`, 413 too large, 422 JSON of the wrong shape.
pub(crate) struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = request
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().to_ascii_lowercase())
            .is_some_and(|v| v == "application/json" || v.ends_with("+json"));
        if !is_json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorCode::UnsupportedMediaType,
                None,
                "нужен Content-Type: application/json",
            ));
        }
        let ApiBytes(bytes) = ApiBytes::from_request(request, state).await?;
        decode_json(&bytes).map(ApiJson)
    }
}

/// A path parameter whose rejection comes back in the error shape, the parameter named.
pub(crate) struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        use axum::extract::path::ErrorKind;
        use axum::extract::rejection::PathRejection;
        // A route's only parameter, to name when the error itself names none.
        let only_key = axum::extract::RawPathParams::from_request_parts(parts, state)
            .await
            .ok()
            .and_then(|params| {
                let keys: Vec<String> = params.iter().map(|(k, _)| k.to_string()).collect();
                (keys.len() == 1).then(|| keys[0].clone())
            });
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(PathRejection::FailedToDeserializePathParams(error)) => {
                let (field, message) = match error.into_kind() {
                    ErrorKind::ParseErrorAtKey {
                        key,
                        value,
                        expected_type,
                    } => (
                        Some(key),
                        format!(
                            "«{value}» — не {}",
                            crate::domain::json::type_words(expected_type)
                        ),
                    ),
                    ErrorKind::ParseError {
                        value,
                        expected_type,
                    } => (
                        only_key,
                        format!(
                            "«{value}» — не {}",
                            crate::domain::json::type_words(expected_type)
                        ),
                    ),
                    _ => (None, "неверный параметр пути".to_string()),
                };
                Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    ErrorCode::Malformed,
                    field.as_deref(),
                    message,
                ))
            }
            Err(_) => Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::Malformed,
                None,
                "неверный параметр пути",
            )),
        }
    }
}

/// A query string whose rejection comes back in the error shape, the parameter named.
pub(crate) struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        serde_urlencoded::from_str(query).map(ApiQuery).map_err(
            |error: serde_urlencoded::de::Error| {
                let text = error.to_string();
                let (field, message) = crate::domain::json::data_reason(&text);
                // A parameter the route does not know is refused, not ignored (a filter a client
                // misspelt would answer everything): 422 naming it and the ones it knows.
                if text.starts_with("unknown field") {
                    let known = text
                        .split_once("expected ")
                        .map(|(_, known)| known.replace('`', ""))
                        .unwrap_or_else(|| "никаких".into());
                    return ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        ErrorCode::Invalid,
                        Some(field.as_str()),
                        format!("неизвестный параметр запроса «{field}»; допустимы: {known}"),
                    );
                }
                let message = if message.starts_with("поле повторяется") {
                    "параметр повторяется".to_string()
                } else {
                    message
                };
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    ErrorCode::Malformed,
                    Some(field.as_str()).filter(|f| !f.is_empty()),
                    message,
                )
            },
        )
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "jira-hub", description = "The hub between a team and its Jira behind an air gap (system.md §8)."),
    modifiers(&BearerTokens),
    components(schemas(ErrorBody, ErrorDetail, ErrorCode))
)]
struct ApiDoc;

/// Declares the bearer tokens in the document.
struct BearerTokens;

impl utoipa::Modify for BearerTokens {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        for name in ["client_token", "agent_token"] {
            components.add_security_scheme(
                name,
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
            );
        }
    }
}

/// Every route with its document, from one list.
fn api() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(ops::health))
        .routes(routes!(ops::ready))
        .routes(routes!(ops::metrics))
        .routes(routes!(client::get_settings, client::put_settings))
        .routes(routes!(client::list_projects, client::create_project))
        .routes(routes!(client::project_issues))
        .routes(routes!(client::get_issue))
        .routes(routes!(client::add_note))
        .routes(routes!(client::list_batches, client::create_batch))
        .routes(routes!(client::get_batch))
        .routes(routes!(client::cancel_batch))
        .routes(routes!(client::retry_failed))
        .routes(routes!(client::retry_command))
        .routes(routes!(client::keep_jira))
        .routes(routes!(client::enqueue_dependents))
        .routes(routes!(client::failed_commands))
        .routes(routes!(client::command))
        .routes(routes!(client::refresh))
        .routes(routes!(client::sync_runs))
        .routes(routes!(client::confirm_sync_run))
        .routes(routes!(client::agents))
        .routes(routes!(agent::claim))
        .routes(routes!(agent::report))
        .routes(routes!(agent::heartbeat))
        .split_for_parts()
}

/// Serves the router on `listener` until `shutdown` completes, then finishes the requests in
/// hand (the daemon owns the listener and the shutdown future). Connections are capped and timed
/// out as [`HttpOptions`] says (see `server.rs`).
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let options = state.options.clone();
    let credentials = state.pool.credentials.clone();
    server::serve(listener, router(state), options, credentials, shutdown).await
}

/// The time limits of a request, for [`time_limit`].
#[derive(Clone, Copy)]
struct TimeLimits {
    request: Duration,
    anonymous: Duration,
}

/// Answers 408 in the error shape when a request takes longer than the limit (the body read
/// included: extractors run inside). A claim may wait for work up to
/// [`MAX_CLAIM_WAIT_SECONDS`](crate::protocol::MAX_CLAIM_WAIT_SECONDS) more (its body is read
/// only once the agent token was checked), and a report the time it may wait for its share of
/// the reports' memory budget. A request that has not shown a valid credential by
/// its anonymous deadline ([`ANONYMOUS_TIMEOUT`]) is answered 408 then, and its connection
/// closed; one that has goes on to the longer limit.
async fn time_limit(
    axum::extract::State(limits): axum::extract::State<TimeLimits>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    let started = tokio::time::Instant::now();
    let limit = if request.uri().path() == "/agent/claim" {
        limits.request + Duration::from_secs(u64::from(crate::protocol::MAX_CLAIM_WAIT_SECONDS))
    } else if request.uri().path() == "/agent/report" {
        // It may wait for its share of the report budget first: the whole time from its turn.
        limits.request + agent::budget_patience(limits.request)
    } else if request.method() == axum::http::Method::GET
        && request.uri().path().starts_with("/batches/")
    {
        // A read of a batch may wait for it to change (`wait_seconds`).
        limits.request + Duration::from_secs(u64::from(batch_wait::MAX_BATCH_WAIT_SECONDS))
    } else {
        limits.request
    };
    let trust = request.extensions().get::<server::Trust>().cloned();
    let answer = next.run(request);
    let mut answer = std::pin::pin!(answer);
    if let Some(trust) = trust
        && limits.anonymous < limit
    {
        match tokio::time::timeout(limits.anonymous, answer.as_mut()).await {
            Ok(response) => return response,
            Err(_) if !trust.granted() => {
                tracing::debug!("a request without a valid token took too long");
                let mut response = ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    ErrorCode::Timeout,
                    None,
                    format!(
                        "запрос без действительного токена не уложился в {} с",
                        limits.anonymous.as_secs()
                    ),
                )
                .into_response();
                // Its body may be unread: the connection ends with this answer.
                response.headers_mut().insert(
                    axum::http::header::CONNECTION,
                    HeaderValue::from_static("close"),
                );
                return response;
            }
            Err(_) => {}
        }
    }
    match tokio::time::timeout_at(started + limit, answer).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            ErrorCode::Timeout,
            None,
            "запрос не уложился в отведённое время",
        )
        .into_response(),
    }
}

/// The router, separate from the listener so that tests drive it without a socket.
pub fn router(state: AppState) -> Router {
    let (routes, document) = api();
    let document = document::finish(document);
    let without_query = Arc::new(unknown_query::WithoutQuery::of(&document));
    // Written once: a request for it costs a copy of a reference, whoever asks.
    let document = Bytes::from(serde_json::to_vec(&document).unwrap_or_default());
    routes
        .route_layer(axum::middleware::from_fn_with_state(
            without_query,
            unknown_query::refuse,
        ))
        .merge(console::routes())
        .route(
            "/openapi.json",
            axum::routing::get(move || {
                let document = document.clone();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            HeaderValue::from_static("application/json"),
                        )],
                        document,
                    )
                }
            }),
        )
        .fallback(|headers: axum::http::HeaderMap| async move {
            // A browser (it asks for HTML) gets the console's page, a client the JSON error.
            if console::wants_html(&headers) {
                return console::missing_page(None);
            }
            ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::NotFound,
                None,
                "нет такого ресурса",
            )
            .into_response()
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                ErrorCode::MethodNotAllowed,
                None,
                "этот метод здесь не поддерживается",
            )
        })
        .layer(axum::extract::DefaultBodyLimit::max(
            state.options.max_body_bytes,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            idempotency::keep,
        ))
        .layer(Extension(Arc::new(ops::Exporter::new(
            state.pool.metrics(),
        ))))
        .layer(axum::middleware::from_fn_with_state(
            TimeLimits {
                request: state.options.request_timeout,
                anonymous: state.options.anonymous_timeout,
            },
            time_limit,
        ))
        .layer(axum::middleware::from_fn(no_store))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            host_guard,
        ))
        .with_state(state)
}
