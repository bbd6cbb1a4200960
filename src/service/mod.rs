//! One entry point per operation, shared by every transport (CLI now; the HTTP API and the file
//! relay call the same functions). A [`HubConnection`] owns one connection to the store and the
//! clock; its methods validate
//! with `domain`, persist with `store`, and answer with plain values or a [`ServiceError`].

mod agent;
pub(crate) use agent::Arrival;
pub use agent::{Handled, IDLE_CHECKPOINT_BYTES, MAX_UNCOUNTED_RELEASES};
pub(crate) use agent::{Premapped, premap};
mod batches;
mod budget;
mod console;
mod dependents;
pub use dependents::{ENQUEUED_AGAIN, enqueued_again};
mod edits;
mod held;
pub use held::{ConfirmedView, HeldRunView};
mod idempotency;
pub use idempotency::KeyState;
mod init;
mod metrics;
mod mirror;
mod presence;
mod retention;
pub use budget::{
    BudgetShare, DEFAULT_REPORT_BUDGET_BYTES, SMALL_REPORT_BYTES, report_budget, set_report_budget,
};
pub use presence::{PERSIST_EVERY, Presence, agent_is_silent, missed_heartbeats};
pub use retention::Pruned;
mod tokens;
mod views;
mod wait;

pub use batches::{
    BATCH_PAGE_DEFAULT, BATCH_PAGE_MAX, BatchRequest, CommandRequestBody, RefreshSince,
};
pub use console::{
    AGENT_SILENT_SECONDS, BackupFile, CommandPage, FailedBatch, HourActivity, OVERVIEW_HOURS,
    Overview, ProjectIssues, QueuedRefresh, RelayState,
};
pub use metrics::Credential;
pub use metrics::{AgentFigures, MetricsFigures, error_class};
pub(crate) use metrics::{Metrics, RELAY_STALL_LIMIT};
pub use store::{Fault, FaultSeen, StoreError};
pub(crate) use tokens::TokenRole;
pub use tokens::{Credentials, Holder};
pub use views::{
    AgentView, AttemptView, BatchSummary, BatchView, CommandView, CommentView, CountsView,
    IssueLinkView, IssueView, NoteView, ProjectView, QueueCount, RunView, SliceRow, SyncRunView,
};
pub use wait::{WAIT_RECHECK, WorkSignal};

/// The database schema version this binary runs (`GET /health` shows it).
pub const SCHEMA_VERSION: u32 = store::CURRENT_SCHEMA_VERSION;

/// How long the record of a handled agent request is kept by default: the relay's default
/// retention of its files, so that no file still in the share outlives the record of its id.
pub const REQUEST_RETENTION: std::time::Duration = std::time::Duration::from_secs(14 * 24 * 3600);

/// How long an agent not seen is kept in `agent_status` (and listed).
pub const AGENT_RETENTION: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// The revision of schema v4 this binary runs (`PRAGMA user_version`).
pub const SCHEMA_REVISION: u32 = store::CURRENT_V4_REVISION;

use crate::clock::Clock;
use crate::domain::ValidationError;
use crate::domain::jql::base_jql;
use crate::domain::project::validate_new_project;
use crate::domain::settings::{Settings, validate_update};
use crate::domain::time::Utc;
use crate::store::{self, BackupKind, OpenReport, Store};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

/// What a caller can branch on; each transport maps it in one place.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Bad input, naming the field (HTTP 422).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The request collides with what is stored (HTTP 409).
    #[error("{field}: {message}")]
    Conflict { field: String, message: String },
    /// The thing asked for does not exist (HTTP 404).
    #[error("{0}")]
    NotFound(String),
    /// The database stayed locked by another connection; nothing was written (HTTP 503: retry).
    #[error(transparent)]
    Busy(StoreError),
    /// The store failed; nothing was half-written (HTTP 500).
    #[error(transparent)]
    Internal(StoreError),
    /// The system's random source failed (a token could not be made; HTTP 500).
    #[error("не удалось получить случайные байты от системы: {0}")]
    Random(getrandom::Error),
}

impl From<StoreError> for ServiceError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Conflict { field, message } => ServiceError::Conflict { field, message },
            busy @ StoreError::Busy(_) => ServiceError::Busy(busy),
            other => ServiceError::Internal(other),
        }
    }
}

impl store::AsStoreError for ServiceError {
    fn as_store_error(&self) -> Option<&StoreError> {
        match self {
            ServiceError::Busy(error) | ServiceError::Internal(error) => Some(error),
            _ => None,
        }
    }
}

pub(crate) type Result<T, E = ServiceError> = std::result::Result<T, E>;

/// The hub's operations on one connection to its database (with the clock, and the pacing state
/// and counters every connection of the process shares). Each thread that serves requests holds
/// its own ([`HubConnection::connect`]); HTTP keeps several in its `HubPool`.
pub struct HubConnection {
    store: Store,
    clock: Arc<dyn Clock>,
    /// Reports in a row that brought rate limiting; sets the pause of the next claims. Shared by
    /// every `HubConnection` of one process ([`HubConnection::connect`]); a restart starts from no pause, and the
    /// agent's next 429 sets it again.
    rate_limit_streak: Arc<AtomicU32>,
    /// What this process did, for `GET /metrics`; shared like the pacing state.
    metrics: Arc<Metrics>,
    /// "A command may have become claimable", for claims that wait; shared like the metrics.
    work: Arc<WorkSignal>,
    /// Where each agent was last seen, kept in memory and written seldom; shared like the
    /// metrics.
    presence: Arc<Presence>,
    /// The tokens in force, in memory for the HTTP side; shared like the metrics.
    credentials: Arc<tokens::Credentials>,
    /// How long the record of a handled agent request is kept (at least as long as the relay
    /// keeps its files, see [`HubConnection::prune_remembered`]).
    request_retention: std::time::Duration,
    /// The database's `data_version` as this connection last saw it (the timers' sweep): a
    /// change means another connection committed, perhaps a command from another process.
    seen_data_version: Option<i64>,
    /// The `data_version` as the last idle checkpoint's look saw it.
    idle_data_version: Option<i64>,
}

/// What `jira-hub status` shows (`--json`: this, serialised).
#[derive(Debug, serde::Serialize)]
pub struct StatusReport {
    pub db_path: PathBuf,
    pub schema_version: u32,
    pub settings_version: i64,
    pub project_key: Option<String>,
    pub projects: Vec<ProjectView>,
    pub base_jql: Option<String>,
    pub counts: CountsView,
    pub last_full_refresh: Option<RunView>,
    /// The newest successful run of any kind, with its kind.
    pub last_refresh: Option<SyncRunView>,
    /// Full runs whose removals wait for a confirmation.
    pub held_runs: Vec<HeldRunView>,
    pub relay_dir: Option<String>,
    pub initialized: bool,
    /// When the newest copy in `backups/` was made; `None`: there is none.
    pub last_backup_at: Option<crate::domain::time::Utc>,
}

impl HubConnection {
    /// Opens (creating or migrating) the database at `db_path`.
    pub fn open(db_path: &Path, clock: Arc<dyn Clock>) -> Result<(HubConnection, OpenReport)> {
        let (store, report) = Store::open(db_path, clock.now())?;
        Ok((HubConnection::with_store(store, clock), report))
    }

    /// Opens (creating or migrating) the database at `db_path`, creating it also in an existing
    /// empty file (`init --use-empty-file`; any other open refuses one).
    pub(crate) fn open_also_in_empty_file(
        db_path: &Path,
        clock: Arc<dyn Clock>,
    ) -> Result<(HubConnection, OpenReport)> {
        let (store, report) =
            Store::open_with(db_path, clock.now(), store::Create::AlsoInEmptyFile)?;
        Ok((HubConnection::with_store(store, clock), report))
    }

    /// Opens (migrating) the database at `db_path`, creating it only where no hub lived: `serve`
    /// and `migrate`. A database gone from a folder with a lock file, backups or its WAL is
    /// refused rather than replaced by an empty one.
    pub(crate) fn open_guarded(
        db_path: &Path,
        clock: Arc<dyn Clock>,
    ) -> Result<(HubConnection, OpenReport)> {
        let (store, report) = Store::open_with(db_path, clock.now(), store::Create::Guarded)?;
        Ok((HubConnection::with_store(store, clock), report))
    }

    /// Opens an existing database (migrating it if needed); a missing one is an error, not a new
    /// database: a typo in `--db` must not go unnoticed.
    pub(crate) fn open_existing(
        db_path: &Path,
        clock: Arc<dyn Clock>,
    ) -> Result<(HubConnection, OpenReport)> {
        let (store, report) = Store::open_existing(db_path, clock.now())?;
        Ok((HubConnection::with_store(store, clock), report))
    }

    /// Opens an existing database for reading only (a read-only data directory, a backup file):
    /// nothing is created, migrated or written.
    pub(crate) fn open_read_only(db_path: &Path, clock: Arc<dyn Clock>) -> Result<HubConnection> {
        Ok(HubConnection::with_store(
            Store::open_read_only(db_path)?,
            clock,
        ))
    }

    fn with_store(mut store: Store, clock: Arc<dyn Clock>) -> HubConnection {
        let work: Arc<WorkSignal> = Arc::default();
        // Every commit that changes a batch (of this connection or those made from it) wakes
        // whoever waits for one (`GET /batches/{id}?wait_seconds=N`).
        let told = Arc::downgrade(&work);
        store.set_batch_listener(Arc::new(move || {
            if let Some(work) = told.upgrade() {
                work.batches_changed();
            }
        }));
        HubConnection {
            metrics: Arc::new(Metrics::with_tallies(store.tallies())),
            store,
            clock,
            rate_limit_streak: Arc::new(AtomicU32::new(0)),
            work,
            presence: Arc::default(),
            credentials: Arc::default(),
            request_retention: REQUEST_RETENTION,
            seen_data_version: None,
            idle_data_version: None,
        }
    }

    /// Another connection to the same database, sharing the clock and the pacing state: one per
    /// thread that serves requests.
    pub fn connect(&self) -> Result<HubConnection> {
        let store = self.store.reconnect(self.clock.now())?;
        Ok(HubConnection {
            store,
            clock: self.clock.clone(),
            rate_limit_streak: self.rate_limit_streak.clone(),
            metrics: self.metrics.clone(),
            work: self.work.clone(),
            presence: self.presence.clone(),
            credentials: self.credentials.clone(),
            request_retention: self.request_retention,
            seen_data_version: None,
            idle_data_version: None,
        })
    }

    /// Commits on this connection leave the WAL's checkpoints to [`HubConnection::checkpoint`]
    /// (the relay runs them between requests, so that no commit waits for one).
    pub(crate) fn defer_checkpoints(&mut self) -> Result<()> {
        Ok(self.store.defer_checkpoints()?)
    }

    /// The database's page size in bytes (what one WAL frame holds).
    pub(crate) fn page_size(&self) -> Result<u64> {
        Ok(self.store.page_size()?)
    }

    /// Rows this connection has changed so far (see [`crate::store`]): the relay compares it
    /// around a request to know whether the request wrote to the WAL at all.
    pub(crate) fn rows_changed(&self) -> u64 {
        self.store.total_changes()
    }

    /// Copies the WAL into the database file as far as readers allow, waiting for nobody.
    pub(crate) fn checkpoint(&self) -> Result<()> {
        Ok(self.store.checkpoint()?)
    }

    /// The database file this connection serves.
    pub(crate) fn database_path(&self) -> &Path {
        self.store.path()
    }

    /// Marks the database file as this daemon's, so that a copy written over it in place is
    /// found before a write is acknowledged above it (see `store::Store::claim_content`).
    pub(crate) fn claim_database(&mut self) -> Result<()> {
        Ok(self.store.claim_content()?)
    }

    /// What is wrong with the database file, if anything: the fault the last write met (no
    /// write succeeded since), or the file at the path not being the one the hub opened.
    pub fn database_fault(&self) -> Option<store::FaultSeen> {
        self.store.health()
    }

    /// Looks whether the file at the path is still the one opened and, while a fault is
    /// recorded, tries a write that changes nothing, so the hub finds out by itself that the
    /// cause is gone (the timers call it).
    pub fn probe_database(&mut self) -> Result<()> {
        // A file replaced or deleted is found at rest too (a `stat`), so that its old journal is
        // moved aside before anything can stop the hub.
        self.store.health();
        Ok(self.store.probe_write()?)
    }

    /// The hub refused a request in `agent`'s name for its agent token: the views show the agent
    /// as refused by the hub until a request of it is taken.
    pub fn note_token_refused(&self, agent: &str) {
        self.presence.token_refused(agent, self.clock.now());
    }

    /// The process's counters.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The agents' latest acts as this process saw them, to keep (the HTTP server notes there
    /// an agent it refused for its token without a connection).
    pub(crate) fn shared_presence(&self) -> Arc<Presence> {
        self.presence.clone()
    }

    /// The process's counters, to keep (an exporter registered once reads them at every scrape).
    pub(crate) fn shared_metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// The process's signal of work that may have become claimable (claims wait on it).
    pub fn work_signal(&self) -> Arc<WorkSignal> {
        self.work.clone()
    }

    /// Keeps the records of handled agent requests this long (the daemon passes the relay's
    /// retention; never less than a day).
    pub fn set_request_retention(&mut self, retention: std::time::Duration) {
        self.request_retention = retention.max(std::time::Duration::from_secs(24 * 3600));
    }

    /// The hub's clock (the relay names archive days by it).
    pub(crate) fn now_utc(&self) -> time::OffsetDateTime {
        self.clock.now()
    }

    /// The clock itself, for what keeps time without a connection (the HTTP pool).
    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    /// When a request (`kind`, `id`) was applied, if it was.
    pub(crate) fn request_handled_at(&mut self, kind: &str, id: &str) -> Result<Option<String>> {
        Ok(self.store.read(|tx| tx.request_received_at(kind, id))?)
    }

    /// Agents read from the database with what this process saw of them since, each judged
    /// silent or not now (see [`Presence::judge`]).
    pub(crate) fn judged(&self, agents: Vec<AgentView>) -> Vec<AgentView> {
        self.presence.judge(
            agents,
            self.clock.now(),
            usize::try_from(store::AGENTS_LISTED).unwrap_or(100),
        )
    }

    /// The time now, as the store writes it.
    fn now(&self) -> Utc {
        Utc::new(self.clock.now())
    }

    /// All settings, typed, defaults filled in; stored values that no longer validate are logged.
    pub fn settings(&self) -> Result<Settings> {
        let (settings, warnings) = Settings::from_stored(&self.store.settings_raw()?);
        // Settings are read on every relay pass and HTTP request: a bad stored value is told
        // once per process (and again if it changes), not on every read.
        if !warnings.is_empty()
            && let Ok(mut told) = self.metrics.settings_warnings_told.lock()
        {
            for warning in warnings {
                if told.insert(warning.clone()) {
                    tracing::warn!("{warning}");
                }
            }
        }
        Ok(settings)
    }

    /// The base JQL computed from the projects (data-model «Проекты»), `None` without projects.
    pub fn base_jql(&self) -> Result<Option<String>> {
        let settings = self.settings()?;
        Ok(self.base_jql_for(&settings)?)
    }

    fn base_jql_for(&self, settings: &Settings) -> Result<Option<String>, StoreError> {
        let projects = self.store.projects()?;
        Ok(base_jql(
            settings.project_key.as_deref(),
            projects.iter().map(|p| p.label.as_str()),
        ))
    }

    /// `GET /settings`: every setting but the tokens, with the computed `base_jql`.
    pub fn settings_view(&self) -> Result<Value> {
        let settings = self.settings()?;
        let jql = self.base_jql_for(&settings)?;
        Ok(settings.public_view(jql.as_deref()))
    }

    /// `PUT /settings`: validates every key first; one bad key and nothing is written and
    /// `settings_version` stays. Returns the new public view.
    pub fn update_settings(&mut self, update: &Map<String, Value>) -> Result<Value> {
        let values = validate_update(update)?;
        if !values.is_empty() {
            let version = self.store.write_settings(&values)?;
            let keys: Vec<&str> = values.iter().map(|(k, _)| k.as_str()).collect();
            tracing::info!(?keys, settings_version = version, "settings changed");
            // Waiting claims answer with the new settings (and a pacing change may free work).
            self.work.bump();
        }
        self.settings_view()
    }

    /// The settings a claim answer carries when the agent's version is older.
    pub fn agent_settings(&self) -> Result<(i64, Value)> {
        let settings = self.settings()?;
        Ok((settings.settings_version, settings.agent_view()))
    }

    pub fn projects(&self) -> Result<Vec<ProjectView>> {
        Ok(self
            .store
            .projects()?
            .into_iter()
            .map(ProjectView::from)
            .collect())
    }

    /// `POST /projects`: validates, then creates unless the label exists case-insensitively.
    pub fn create_project(
        &mut self,
        label: &str,
        name: &str,
        board_id: Option<i64>,
    ) -> Result<ProjectView> {
        let project = validate_new_project(label, name, board_id)?;
        let created = self.store.insert_project(&project, &self.now())?;
        tracing::info!(label = %created.label, "project created");
        Ok(created.into())
    }

    /// The daemon's daily backup, when due; keeps the newest `backup_keep`.
    pub fn periodic_backup(&self) -> Result<Option<PathBuf>> {
        let keep = self.settings()?.backup_keep as usize;
        Ok(self
            .store
            .periodic_backup(self.clock.now(), time::Duration::hours(24), keep)?)
    }

    /// An online backup into `backups/` now.
    pub(crate) fn backup_now(&self) -> Result<PathBuf> {
        Ok(self
            .store
            .backup_now(BackupKind::Manual, self.clock.now())?)
    }

    pub fn status(&self) -> Result<StatusReport> {
        let settings = self.settings()?;
        let base_jql = self.base_jql_for(&settings)?;
        let last_full_refresh = self
            .store
            .last_full_run()?
            .map(|run| SyncRunView::from(run).run);
        let last_refresh = self.store.last_done_run()?.map(SyncRunView::from);
        Ok(StatusReport {
            db_path: self.store.path().to_path_buf(),
            schema_version: SCHEMA_VERSION,
            settings_version: settings.settings_version,
            initialized: settings.tokens.is_some(),
            project_key: settings.project_key,
            projects: self.projects()?,
            base_jql,
            counts: {
                let mut counts = CountsView::from(self.store.status_counts()?);
                counts.agents = self.judged(counts.agents);
                counts
            },
            last_full_refresh,
            last_refresh,
            held_runs: self.held_runs()?,
            relay_dir: settings.relay_dir,
            last_backup_at: self
                .store
                .newest_backup_at()
                .map(crate::domain::time::Utc::new),
        })
    }
}
