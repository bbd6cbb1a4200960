//! The relay loop: list `inbox/`, ask [`decide`](super::decide::decide) what each file is, and
//! carry the decision out: read it (without following links, without blocking), apply it through
//! the service and answer it, refuse it into `rejected/` with its reason, or leave it for later.
//! It also follows `relay_dir`, keeps its four folders, and prunes old files.
//!
//! Order of effects for one request: the service applies it and records its id and answer in
//! one transaction; then the answer is written; then the request leaves `inbox/`. A crash at any
//! point leaves the file in `inbox/`, and handling it again gives the recorded answer without
//! applying anything twice.
//!
//! Under [`Relay::run`] a request's answer waits for nothing but its own work: the folder syncs of
//! archive moves run on the relay's background thread, and the WAL's checkpoints run after the
//! answer is written, never inside a commit, and after a burst on a thread of their own
//! ([`checkpoint`](super::checkpoint)).

use super::background::Background;
use super::checkpoint::{Checkpoints, Thresholds};
use super::decide::{
    Decision, FileFacts, Limits, NameVerdict, Observation, Refusal, Sighting, classify_name,
    decide, decide_decoded, observe,
};
use super::fsio::{
    free_name, lstat_facts, move_into, move_into_unsynced, open_request, read_limited, remove_any,
    sync_dir, write_new,
};
use super::readahead::{self, ReadAhead};
use super::{FOLDERS, RelayOptions};
use crate::protocol::{AgentAnswer, AgentRequest, Received, TokenCheck};
use crate::service::{Arrival, Handled, HubConnection, Premapped, ServiceError, WAIT_RECHECK};
use crate::shutdown::Shutdown;
use serde_json::json;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::{Duration, Instant, SystemTime};

/// What happened to one file in one pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Applied,
    /// A claim with `wait_seconds` that has nothing to hand out yet: it stays in `inbox/`,
    /// unanswered, until work may have come (the service's work signal), its wait ends (by the
    /// hub's clock, from when the relay first saw it), or a look every
    /// [`WAIT_RECHECK`](crate::service::WAIT_RECHECK).
    Parked,
    /// Not complete yet, the store was busy, or the pass's reading budget was spent: next pass.
    Later,
    Refused(Refusal),
    /// Not a relay request, or gone.
    Skipped,
}

/// Counts of one pass over `inbox/`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PassCounts {
    pub applied: usize,
    pub refused: usize,
    pub waiting: usize,
    /// Claims waiting for work ([`Outcome::Parked`]).
    pub parked: usize,
}

/// What one pass over `inbox/` carries from file to file.
struct Pass<'a> {
    /// The relay folder.
    dir: &'a Path,
    /// The agent token request bodies must carry (`None`: the hub has none yet).
    token: Option<&'a str>,
    /// How many more bytes the pass may read.
    budget: u64,
    now: Instant,
}

/// Why a pass could not look at the folder (a file's own trouble is an [`Outcome`], not this).
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The settings could not be read.
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// A folder of the relay could not be made or listed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

/// The relay: one per daemon, on a thread of its own (the service is blocking).
pub struct Relay {
    hub: HubConnection,
    /// This hub's claim on the relay folder (its lock file).
    owner: super::owner::Owner,
    options: RelayOptions,
    shutdown: Shutdown,
    wake_tx: SyncSender<()>,
    wake_rx: Receiver<()>,
    /// What the relay remembers of each name of `inbox/`, by its own clock.
    sightings: HashMap<String, Sighting>,
    /// Claims waiting for work, by name: looked at again only when they may get an answer.
    parked: HashMap<String, Parked>,
    /// The folder in use and its watcher (kept alive while it watches).
    current: Option<(PathBuf, Option<notify::RecommendedWatcher>)>,
    /// What is wrong with the configured folder, as last logged (to log changes only).
    problem_reported: Option<String>,
    last_prune: Option<Instant>,
    /// Folder syncs off the requests' path (under [`Relay::run`] only).
    background: Option<Background>,
    /// The WAL's checkpoints (under [`Relay::run`] only: elsewhere the commits checkpoint as
    /// SQLite does by default).
    checkpoints: Option<Checkpoints>,
    /// The database's page size (4 KiB for a database made by SQLite's default).
    page_size: u64,
    /// Refused files that could not be moved to `rejected/` (a full disk, a name too long for
    /// its reason's file), with the size and time they had when they were counted and logged:
    /// each pass tries the move again, but the same file is counted once.
    refused_unmoved: HashMap<String, (u64, Option<std::time::SystemTime>)>,
    /// How late this hub sees the agent's files in the folder in use.
    visibility: super::visibility::Visibility,
    /// Whether the folder in use has been listed once: what its first listing finds was left
    /// while the hub was away, and says nothing of how late it sees new files.
    listed_once: bool,
    /// When the last new request was seen (the loop lists faster for a while after).
    last_request: Option<Instant>,
    /// When a file refused for its agent token was last kept in `rejected/`, by the agent its
    /// name carries ([`agent_of_name`]; the hub's clock).
    bad_token_kept: HashMap<String, time::OffsetDateTime>,
    /// Report files left for a later pass because the reports' memory budget was taken, and
    /// when that first happened (for the log, which tells a long wait).
    budget_waits: HashMap<String, Instant>,
}

/// A claim left waiting in `inbox/`, and when to look at it again.
#[derive(Debug, Clone)]
struct Parked {
    /// Its agent, and its hold on the agent's name ([`WorkSignal::hold`](crate::service::WorkSignal)):
    /// a newer claim of the agent takes it, and this one is answered at once.
    agent: String,
    holder: u64,
    /// The work signal's generation before it was last looked at: a newer one may bring work.
    generation: u64,
    /// Its wait's end, or the next safety look ([`WAIT_RECHECK`]), whichever comes first.
    next_look: Instant,
    /// The file as it was then: a file that changed is read again at once.
    len: u64,
    modified: Option<SystemTime>,
}

/// How long the relay waits at most, in one pass, for a large report file's share of the reports'
/// memory budget before it leaves the file for a later pass: the files behind it wait no longer.
const BUDGET_PATIENCE: Duration = Duration::from_secs(1);

/// What a request writes to the WAL besides its own size: about this many pages (its command
/// rows, its record, their indexes).
const REQUEST_WAL_PAGES: u64 = 4;

impl Relay {
    pub fn new(hub: HubConnection, options: RelayOptions, shutdown: Shutdown) -> Self {
        let (wake_tx, wake_rx) = sync_channel(1);
        // Work that may have become claimable wakes the loop for its waiting claims.
        hub.work_signal().subscribe(wake_tx.clone());
        let owner = super::owner::Owner::new(hub.database_path());
        Relay {
            hub,
            options,
            shutdown,
            wake_tx,
            wake_rx,
            sightings: HashMap::new(),
            parked: HashMap::new(),
            current: None,
            problem_reported: None,
            last_prune: None,
            owner,
            background: None,
            checkpoints: None,
            page_size: 4096,
            refused_unmoved: HashMap::new(),
            visibility: super::visibility::Visibility::default(),
            listed_once: false,
            last_request: None,
            bad_token_kept: HashMap::new(),
            budget_waits: HashMap::new(),
        }
    }

    /// A handle that wakes the loop (the daemon wakes it when the stop is triggered).
    pub(crate) fn waker(&self) -> SyncSender<()> {
        self.wake_tx.clone()
    }

    /// Runs until shutdown: a pass over the folder, then a wait for a notification or the
    /// poll interval. The file in hand is always finished before stopping.
    pub(crate) fn run(mut self) {
        self.background = self.start_background();
        match self.hub.page_size() {
            Ok(size) => self.page_size = size,
            Err(error) => tracing::warn!(%error, "the database's page size could not be read"),
        }
        while !self.shutdown.is_triggered() {
            self.hub.metrics().relay_beat();
            match self.pass() {
                Ok(counts) if counts != PassCounts::default() => tracing::debug!(
                    applied = counts.applied,
                    refused = counts.refused,
                    waiting = counts.waiting,
                    parked = counts.parked,
                    "relay pass"
                ),
                Ok(_) => {}
                Err(error) => tracing::error!(%error, "relay pass failed; retrying"),
            }
            self.hub.metrics().relay_beat();
            let _ = self
                .wake_rx
                .recv_timeout(self.poll_interval(Instant::now()));
        }
        if let Some(background) = self.background.take() {
            background.finish();
        }
        if let Some(checkpoints) = self.checkpoints.take() {
            checkpoints.finish();
        }
        self.owner.release();
        tracing::info!("relay stopped");
    }

    /// How long the loop waits for a notification before listing `inbox/` again: the poll
    /// interval at rest, a tenth of it (at least 10 ms) while requests come.
    fn poll_interval(&self, now: Instant) -> Duration {
        let busy = self.last_request.is_some_and(|at| {
            now.saturating_duration_since(at) < super::BUSY_INTERVALS * self.options.poll_interval
        });
        if busy {
            (self.options.poll_interval / 10).max(Duration::from_millis(10))
        } else {
            self.options.poll_interval
        }
    }

    /// The background thread; the relay's own commits then leave checkpoints to
    /// [`Relay::note_applied`]. Without it everything is done in line, as in [`Relay::pass`].
    fn start_background(&mut self) -> Option<Background> {
        match Background::start() {
            Ok(background) => {
                match self.hub.defer_checkpoints() {
                    Ok(()) => self.checkpoints = Some(self.start_checkpoints()),
                    Err(error) => {
                        tracing::warn!(%error, "checkpoints stay in the relay's commits");
                    }
                }
                Some(background)
            }
            Err(error) => {
                tracing::warn!(%error, "no background thread for the relay: archive syncs and checkpoints stay in line");
                None
            }
        }
    }

    /// The relay's checkpoints, those after a burst on a thread with a connection of its own (in
    /// line when either cannot be had).
    fn start_checkpoints(&self) -> Checkpoints {
        let thresholds = Thresholds::default();
        let started = self
            .hub
            .connect()
            .map_err(|error| error.to_string())
            .and_then(|hub| {
                Checkpoints::with_thread(thresholds, move || {
                    let started = Instant::now();
                    checkpoint(&hub);
                    tracing::debug!(
                        ms = started.elapsed().as_millis() as u64,
                        "the WAL was copied into the database file after a burst"
                    );
                })
                .map_err(|error| error.to_string())
            });
        started.unwrap_or_else(|error| {
            tracing::warn!(%error, "no checkpoint thread for the relay: its checkpoints stay in line");
            Checkpoints::in_line(thresholds)
        })
    }

    /// Counts what an applied request wrote to the WAL (about its own size, and a few pages),
    /// after it was answered: see [`Checkpoints::applied`].
    fn note_applied(&mut self, bytes: u64) {
        let hub = &self.hub;
        if let Some(checkpoints) = &mut self.checkpoints {
            checkpoints.applied(REQUEST_WAL_PAGES * self.page_size + bytes, &mut || {
                checkpoint(hub)
            });
        }
    }

    /// A pass left nothing waiting: see [`Checkpoints::idle`].
    fn note_idle(&mut self) {
        let hub = &self.hub;
        if let Some(checkpoints) = &mut self.checkpoints {
            checkpoints.idle(&mut || checkpoint(hub));
        }
    }

    fn limits(&self) -> Limits {
        Limits {
            max_file_bytes: self.options.max_file_bytes,
            grace: self.options.grace,
            arrival_limit: self.options.arrival_limit,
        }
    }

    /// One pass now, by the monotonic clock.
    pub fn pass(&mut self) -> Result<PassCounts, RelayError> {
        self.pass_at(Instant::now())
    }

    /// One pass at the instant `now` (tests pass their own, so grace periods need no waiting):
    /// follow `relay_dir`, make the folders, handle what is in `inbox/` (small files first,
    /// within a reading budget), prune.
    pub fn pass_at(&mut self, now: Instant) -> Result<PassCounts, RelayError> {
        // One read of the settings a pass: the folder to use and the token to check.
        let settings = self.hub.settings()?;
        let Some(dir) = self.relay_dir(settings.relay_dir.as_ref().map(PathBuf::from))? else {
            self.hub
                .metrics()
                .relay_files_waiting
                .store(0, std::sync::atomic::Ordering::Relaxed);
            return Ok(PassCounts::default());
        };
        let agent_token = settings.tokens.as_ref().map(|t| t.agent.clone());
        let mut counts = PassCounts::default();
        let inbox = dir.join("inbox");
        crate::service::Metrics::add(&self.hub.metrics().relay_passes, 1);
        let mut candidates = list_candidates(&inbox).map_err(|source| RelayError::Io {
            context: format!("cannot list {}", inbox.display()),
            source,
        })?;
        // Small requests overtake big ones: a heartbeat never waits behind a large report.
        candidates.sort_by(|a, b| a.1.len.cmp(&b.1.len).then_with(|| a.0.cmp(&b.0)));
        // The file server's clock as the hub's last write there showed it.
        if let Some((local, server)) = self.owner.clock() {
            self.visibility.learn_clock(local, server);
        }
        let mut pass = Pass {
            dir: &dir,
            token: agent_token.as_deref(),
            budget: self.options.read_budget_bytes,
            now,
        };
        // The large files after the first are read ahead while the relay applies the one before.
        let max_file_bytes = self.options.max_file_bytes;
        let wanted: Vec<(&str, FileFacts)> = candidates
            .iter()
            .filter(|(name, facts)| readahead::wanted(name, facts, max_file_bytes))
            .map(|(name, facts)| (name.as_str(), *facts))
            .skip(1)
            .collect();
        let mut ahead_names: VecDeque<&str> = wanted.iter().map(|(name, _)| *name).collect();
        let shutdown = self.shutdown.clone();
        std::thread::scope(|scope| {
            let (sender, ahead) = sync_channel(1);
            if !wanted.is_empty() {
                let plan = readahead::Plan {
                    inbox: &inbox,
                    files: wanted,
                    token: TokenCheck::Expect(agent_token.as_deref()),
                    settings: &settings,
                    max_file_bytes,
                    budget: pass.budget,
                    shutdown: &shutdown,
                };
                let spawned = std::thread::Builder::new()
                    .name("relay-read".into())
                    .spawn_scoped(scope, move || readahead::run(plan, sender));
                if let Err(error) = spawned {
                    // The relay reads every file itself.
                    tracing::warn!(%error, "no thread to read ahead; the relay reads each file itself");
                }
            }
            for (name, facts) in &candidates {
                if self.shutdown.is_triggered() {
                    break;
                }
                self.hub.metrics().relay_beat();
                let read_ahead = if ahead_names.front() == Some(&name.as_str()) {
                    ahead_names.pop_front();
                    ahead.recv().ok().flatten()
                } else {
                    None
                };
                let changed_before = self.hub.rows_changed();
                match self.handle_file(&mut pass, name, *facts, read_ahead) {
                    Outcome::Applied => {
                        counts.applied += 1;
                        // A heartbeat that changes nothing, an empty claim answer: nothing went
                        // to the WAL, so nothing brings the next checkpoint nearer (at rest, a
                        // checkpoint every 32 such exchanges wrote pages no request had changed).
                        if self.hub.rows_changed() != changed_before {
                            self.note_applied(facts.len);
                        }
                    }
                    Outcome::Later => counts.waiting += 1,
                    Outcome::Parked => counts.parked += 1,
                    Outcome::Skipped => {}
                    Outcome::Refused(refusal) => {
                        // A file refused before whose move failed is the same refusal: counted
                        // and logged once, its move retried.
                        let identity = (facts.len, facts.modified);
                        let counted = self.refused_unmoved.get(name) == Some(&identity);
                        if !counted {
                            counts.refused += 1;
                        }
                        match self.refuse(&dir, name, &refusal, !counted) {
                            Ok(()) => {
                                if self.refused_unmoved.remove(name).is_some() {
                                    tracing::info!(file = %escape(name), "a refused file was moved to rejected/ at last");
                                }
                            }
                            Err(error) => {
                                if !counted {
                                    tracing::error!(file = %escape(name), %error, "cannot move a refused file to rejected/; it stays in inbox/ and is moved when it can be");
                                }
                                self.refused_unmoved.insert(name.clone(), identity);
                            }
                        }
                    }
                }
            }
            // The reading thread stops at its next file once nobody listens.
            drop(ahead);
        });
        if counts.waiting == 0 && !self.shutdown.is_triggered() {
            self.note_idle();
        }
        self.listed_once = true;
        self.show_visibility(&dir);
        // A refused file taken out of inbox/ by hand is forgotten; one put back is new.
        self.refused_unmoved
            .retain(|name, _| candidates.iter().any(|(listed, _)| listed == name));
        self.budget_waits
            .retain(|name, _| candidates.iter().any(|(listed, _)| listed == name));
        // A claim waiting for work is not a file waiting to be handled.
        let handled = counts.applied + counts.refused + counts.parked;
        self.hub
            .metrics()
            .claims_waiting_relay
            .store(counts.parked as u64, std::sync::atomic::Ordering::Relaxed);
        self.hub.metrics().relay_files_waiting.store(
            (candidates.len() as u64).saturating_sub(handled as u64),
            std::sync::atomic::Ordering::Relaxed,
        );
        self.sightings
            .retain(|name, _| candidates.iter().any(|(listed, _)| listed == name));
        let sightings = &self.sightings;
        let signal = self.hub.work_signal();
        self.parked.retain(|name, parked| {
            let listed = sightings.contains_key(name);
            if !listed {
                // Its file is gone (taken back by its agent): the name is free again.
                signal.release(&parked.agent, parked.holder);
            }
            listed
        });
        if self
            .last_prune
            .is_none_or(|at| now.saturating_duration_since(at) >= self.options.prune_every)
        {
            self.last_prune = Some(now);
            prune(&dir, self.options.retention, self.hub.now_utc(), &|| {
                self.hub.metrics().relay_beat()
            });
        }
        Ok(counts)
    }

    /// The relay folder to use now, with its four folders made, or `None` when there is none
    /// (not set; missing, since an unmounted share is never created; or a folder of it that is
    /// not a real folder, which is never followed).
    fn relay_dir(&mut self, configured: Option<PathBuf>) -> Result<Option<PathBuf>, RelayError> {
        let Some(dir) = configured else {
            self.current = None;
            self.owner.release();
            self.report_problem(None);
            return Ok(None);
        };
        let missing = !dir.is_dir();
        self.hub
            .metrics()
            .relay_missing
            .store(missing, std::sync::atomic::Ordering::Relaxed);
        if missing {
            self.report_problem(Some(format!(
                "папки обмена {} нет (общая папка не смонтирована?)",
                dir.display()
            )));
            self.current = None;
            return Ok(None);
        }
        let mut absent = Vec::new();
        for folder in FOLDERS {
            let path = dir.join(folder);
            match path.symlink_metadata() {
                Ok(meta) if meta.file_type().is_dir() => {}
                Ok(_) => {
                    self.report_problem(Some(format!(
                        "{} — не настоящая папка (ссылка или файл): хаб её не использует",
                        path.display()
                    )));
                    self.current = None;
                    return Ok(None);
                }
                Err(_) => absent.push(path),
            }
        }
        if !absent.is_empty() {
            if !super::may_make_folders(&dir) {
                // An empty mount point of a share that is not mounted looks just like this: the
                // folders would be made on the local disk, where the agent never looks.
                self.hub
                    .metrics()
                    .relay_missing
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                self.report_problem(Some(format!(
                    "в папке обмена {} нет {} (и метки {}): общая папка не смонтирована? Если это и есть папка обмена, подготовьте её: jira-hub relay init {}",
                    dir.display(),
                    FOLDERS
                        .iter()
                        .map(|f| format!("{f}/"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    super::MARKER,
                    dir.display()
                )));
                self.current = None;
                return Ok(None);
            }
            // A failure is this folder's state (shown by `/ready`, logged once per change), not
            // an error of the pass logged every second.
            if let Err(error) = super::init_folder(&dir) {
                self.report_problem(Some(format!(
                    "не удалось создать папки реле в {}: «{error}»",
                    dir.display()
                )));
                self.current = None;
                return Ok(None);
            }
            tracing::info!(relay_dir = %dir.display(), "the relay's missing folders were made");
        }
        if let Err(refused) = self.owner.claim(&dir, std::time::SystemTime::now()) {
            self.report_problem(Some(match refused {
                super::owner::Refused::Held(other) => format!(
                    "папку реле {} обслуживает другой хаб ({other}): этот её не трогает, пока тот работает (его файл {} обновляется каждые 10 с)",
                    dir.display(),
                    super::owner::LOCK_NAME
                ),
                super::owner::Refused::Unwritable(error) => format!(
                    "хаб не может записать свой файл {} в папку реле {}: «{error}»; пока не сможет, он папку не обслуживает (только для чтения? диск полон? общая папка отключена?)",
                    super::owner::LOCK_NAME,
                    dir.display()
                ),
            }));
            self.current = None;
            return Ok(None);
        }
        self.report_problem(None);
        if self
            .current
            .as_ref()
            .is_none_or(|(current, _)| *current != dir)
        {
            tracing::info!(relay_dir = %dir.display(), "relay folder in use");
            let watcher = if self.options.notify {
                super::watch::watch_inbox(&dir.join("inbox"), self.wake_tx.clone())
            } else {
                None
            };
            self.current = Some((dir.clone(), watcher));
            self.sightings.clear();
            self.refused_unmoved.clear();
            self.visibility.forget();
            self.listed_once = false;
            self.owner.publish(None, None);
            self.hub.metrics().set_relay_visibility(None);
            let today = self.hub.now_utc().date();
            self.hub
                .metrics()
                .set_refused_on(today, refused_on(&dir.join("rejected"), today));
        }
        Ok(Some(dir))
    }

    /// Shows how late this hub sees the agent's files (`/ready`, `/metrics`, the console, and in
    /// the lock for `status` and the agent), with the mount option that removes a late one.
    fn show_visibility(&mut self, dir: &Path) {
        let delay = self.visibility.delay();
        let shown = delay.map(|delay| {
            let told =
                (delay > super::visibility::LATE).then(|| super::visibility::tell(delay, dir));
            (delay, told)
        });
        if let Some((_, Some(told))) = &shown
            && self
                .hub
                .metrics()
                .relay_visibility()
                .and_then(|(_, t)| t)
                .is_none()
        {
            tracing::warn!(relay_dir = %dir.display(), "{told}");
        }
        let fstype = crate::sharefs::fs_type(dir);
        self.owner.publish(delay, fstype.as_deref());
        self.hub.metrics().set_relay_visibility(shown);
    }

    /// Logs a change of the folder's state, and shows it to `/ready` and the metrics.
    fn report_problem(&mut self, problem: Option<String>) {
        if problem != self.problem_reported {
            match &problem {
                Some(problem) => {
                    tracing::warn!(%problem, "the relay folder cannot be used; retrying")
                }
                None if self.problem_reported.is_some() => {
                    tracing::info!("the relay folder can be used again")
                }
                None => {}
            }
            self.problem_reported = problem.clone();
        }
        self.hub.metrics().set_relay_problem(problem);
    }

    /// Decides about one file and carries the decision out. `read_ahead`: the file as the
    /// read-ahead thread found it, taken as if read now.
    fn handle_file(
        &mut self,
        pass: &mut Pass<'_>,
        name: &str,
        listed: FileFacts,
        read_ahead: Option<ReadAhead>,
    ) -> Outcome {
        let now = pass.now;
        let path = pass.dir.join("inbox").join(name);
        let limits = self.limits();
        if !self.sightings.contains_key(name) {
            self.last_request = Some(now);
            // A new request: how long after the file server wrote it this hub lists it.
            if self.listed_once
                && let Some(modified) = listed.modified
                && let Some(delay) = self.visibility.seen(SystemTime::now(), modified)
            {
                tracing::debug!(file = %escape(name), delay_ms = delay.as_millis() as u64, "a request seen");
            }
        }
        let sighting = observe(self.sightings.get(name).copied(), &listed, now);
        self.sightings.insert(name.to_string(), sighting);
        if let Some(parked) = self.parked.get(name)
            && parked.len == listed.len
            && parked.modified == listed.modified
            && now < parked.next_look
            && self.hub.work_signal().generation() == parked.generation
            && self.hub.work_signal().holds(&parked.agent, parked.holder)
        {
            // Nothing can have changed for it: not read, not applied.
            return Outcome::Parked;
        }
        let token = TokenCheck::Expect(pass.token);
        let mut observation = Observation {
            name,
            facts: Some(listed),
            bytes: None,
            sighting: Some(sighting),
            now,
            token,
        };
        let mut share = None;
        let (decision, premapped) = match decide(&observation, &limits) {
            Decision::Read => {
                // The pass reads at most its budget, but always at least one file.
                if listed.len > pass.budget && pass.budget < self.options.read_budget_bytes {
                    return Outcome::Later;
                }
                // What `fstat` says, and the bytes when the file is one to read.
                let (facts, read) = match read_ahead {
                    Some(ahead) => (
                        ahead.facts,
                        Some((ahead.bytes, Some(ahead.decoded), ahead.premapped)),
                    ),
                    None => {
                        let (mut file, facts) = match open_request(&path) {
                            Ok(opened) => opened,
                            // Swapped for a link between the listing and the open (O_NOFOLLOW).
                            Err(error) if error.raw_os_error() == Some(libc::ELOOP) => {
                                observation.facts = lstat_facts(&path);
                                return self.outcome(
                                    decide(&observation, &limits),
                                    name,
                                    None,
                                    None,
                                    now,
                                );
                            }
                            Err(_) => return Outcome::Later,
                        };
                        if !facts.regular || facts.len > limits.max_file_bytes {
                            (facts, None)
                        } else {
                            let metrics = self.hub.metrics();
                            // Its share of the reports' memory budget (shared with HTTP), held
                            // until the file is handled: nothing for a small file; a large one
                            // waits a moment, else it is left for a later pass, so that the
                            // files behind it (claims, heartbeats) are not held.
                            let waited_before = self
                                .budget_waits
                                .get(name)
                                .map_or(Duration::ZERO, |since| now.duration_since(*since));
                            match crate::service::report_budget().take_within(
                                facts.len,
                                BUDGET_PATIENCE,
                                waited_before,
                                &|| metrics.relay_beat(),
                            ) {
                                Some(taken) => {
                                    self.budget_waits.remove(name);
                                    share = Some(taken);
                                }
                                None => {
                                    self.budget_waits.entry(name.to_string()).or_insert(now);
                                    return Outcome::Later;
                                }
                            }
                            match read_limited(
                                &mut file,
                                limits.max_file_bytes + 1,
                                facts.len,
                                &|| metrics.relay_beat(),
                            ) {
                                Ok(bytes) => (facts, Some((Received::from(bytes), None, None))),
                                Err(_) => return Outcome::Later,
                            }
                        }
                    }
                };
                let sighting = observe(Some(sighting), &facts, now);
                self.sightings.insert(name.to_string(), sighting);
                observation.facts = Some(facts);
                observation.sighting = Some(sighting);
                let Some((bytes, decoded, premapped)) = read else {
                    return self.outcome(decide(&observation, &limits), name, None, None, now);
                };
                pass.budget = pass.budget.saturating_sub(bytes.bytes().len() as u64);
                observation.bytes = Some(bytes.bytes());
                // Decoded from the one buffer read: the issues of its pages are ranges of it.
                let decoded = decoded.unwrap_or_else(|| bytes.decode(observation.token));
                let decision = decide_decoded(&observation, &limits, Some(decoded));
                if let Decision::Refuse(refusal) = &decision
                    && refusal.code == "bad_token"
                    && let Some(agent) = crate::protocol::claimed_agent(bytes.bytes())
                {
                    self.hub.note_token_refused(&agent);
                }
                if decision == Decision::Wait
                    && let Some(seen) = self.sightings.get_mut(name)
                {
                    seen.read_incomplete = true;
                }
                (decision, premapped)
            }
            other => (other, None),
        };
        let outcome = self.outcome(decision, name, Some(&path), premapped, now);
        drop(share);
        outcome
    }

    /// Carries out a decision that needs no more reading (`now`: the pass's instant).
    fn outcome(
        &mut self,
        decision: Decision,
        name: &str,
        path: Option<&Path>,
        premapped: Option<Premapped>,
        now: Instant,
    ) -> Outcome {
        match decision {
            Decision::Skip => Outcome::Skipped,
            Decision::Read | Decision::Wait => Outcome::Later,
            Decision::Refuse(refusal) => Outcome::Refused(refusal),
            Decision::Apply(request) => {
                let Some(path) = path else {
                    return Outcome::Later;
                };
                // A claim that may wait waits from when the relay first saw its file; read the
                // signal before looking, so that work coming meanwhile is looked at again.
                let generation = self.hub.work_signal().generation();
                let deadline = match request.as_ref() {
                    AgentRequest::Claim(claim) if claim.wait_seconds > 0 => {
                        self.sightings.get(name).map(|seen| {
                            seen.first_seen + Duration::from_secs(u64::from(claim.wait_seconds))
                        })
                    }
                    _ => None,
                };
                let signal = self.hub.work_signal();
                // A claim that may wait takes its agent's name first: the agent's older waiting
                // claim, on either transport, is answered at once; a claim older than the one
                // that holds the name waits no more.
                let parked = self.parked.get(name).cloned();
                let holder = match (request.as_ref(), &parked, deadline) {
                    (_, Some(parked), _) => Some((parked.agent.clone(), parked.holder)),
                    (AgentRequest::Claim(claim), None, Some(_)) => {
                        let sent_at = crate::domain::time::parse_utc(&claim.envelope.sent_at)
                            .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
                        let agent = claim.envelope.agent.clone();
                        let id = signal.hold(&agent, sent_at, None);
                        Some((agent, id))
                    }
                    _ => None,
                };
                let may_wait = deadline.is_some_and(|end| now < end)
                    && !self.shutdown.is_triggered()
                    && holder
                        .as_ref()
                        .is_some_and(|(agent, id)| signal.holds(agent, *id));
                // A file read again tells no newer liveness than its `sent_at`.
                let arrival = if parked.is_some() {
                    Arrival::Again
                } else {
                    Arrival::File
                };
                let answer = match self
                    .hub
                    .handle_or_wait(&request, premapped, may_wait, arrival)
                {
                    Ok(Handled::Answered(mut answer)) => {
                        self.parked.remove(name);
                        if let Some((agent, id)) = &holder {
                            signal.release(agent, *id);
                        }
                        // The largest report this transport takes: the file limit.
                        if let crate::protocol::AgentAnswer::Claim(claim) = &mut answer {
                            claim.max_report_bytes = Some(self.options.max_file_bytes);
                        }
                        answer
                    }
                    Ok(Handled::Waiting) => {
                        let (len, modified) = self
                            .sightings
                            .get(name)
                            .map_or((0, None), |seen| (seen.len, seen.modified));
                        let next_look =
                            deadline.map_or(now + WAIT_RECHECK, |end| end.min(now + WAIT_RECHECK));
                        let (agent, holder) = holder.unwrap_or_default();
                        self.parked.insert(
                            name.to_string(),
                            Parked {
                                agent,
                                holder,
                                generation,
                                next_look,
                                len,
                                modified,
                            },
                        );
                        return Outcome::Parked;
                    }
                    Err(
                        error @ (ServiceError::Internal(_)
                        | ServiceError::Busy(_)
                        | ServiceError::Random(_)),
                    ) => {
                        tracing::error!(file = %escape(name), %error, "the request could not be applied now; it stays in inbox/");
                        return Outcome::Later;
                    }
                    Err(error) => {
                        return Outcome::Refused(Refusal::new("refused", None, error.to_string()));
                    }
                };
                let Some(dir) = path.parent().and_then(Path::parent) else {
                    return Outcome::Later;
                };
                let background = self.background.as_ref();
                match deliver(dir, name, path, &answer, self.hub.now_utc(), background) {
                    Ok(()) => {
                        self.sightings.remove(name);
                        Outcome::Applied
                    }
                    Err(error) => {
                        tracing::error!(file = %escape(name), %error, "the answer could not be written; the request stays in inbox/ and is answered again");
                        Outcome::Later
                    }
                }
            }
        }
    }

    /// Moves a refused file to `rejected/` with its reason beside it, and answers it with
    /// `error-<name>` (unique per request file) when its name carries a valid id.
    /// `first`: the file is refused for the first time (not a move tried again): it is logged
    /// and counted.
    fn refuse(
        &mut self,
        dir: &Path,
        name: &str,
        refusal: &Refusal,
        first: bool,
    ) -> std::io::Result<()> {
        let now = crate::domain::time::format_utc(self.hub.now_utc());
        let quiet = refusal.code == "bad_token" && self.bad_token_repeated(name);
        if first && quiet {
            tracing::debug!(file = %escape(name), "relay file refused for its agent token again: answered, not kept");
        } else if first {
            tracing::warn!(file = %escape(name), code = refusal.code, reason = %refusal.message, "relay file refused");
            crate::service::Metrics::add(&self.hub.metrics().relay_refused, 1);
            self.hub
                .metrics()
                .count_refused_on(self.hub.now_utc().date(), 1);
        }
        let rejected = dir.join("rejected");
        let target = free_name(&rejected, &rejected_name(name));
        let target_name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| name.to_string());
        if !quiet {
            let reason = json!({"file": name, "refused_at": now, "code": refusal.code, "field": refusal.field, "message": refusal.message});
            write_new(
                &rejected,
                &format!("{target_name}.error.json"),
                pretty(&reason).as_bytes(),
            )?;
        }
        // An answer whose name the file system cannot hold is one nobody can be waiting for.
        if let Some(answer_name) = error_answer_name(name).filter(|n| n.len() <= NAME_MAX) {
            let id = answer_name
                .strip_prefix("error-")
                .and_then(|rest| rest.strip_suffix(".json"))
                .and_then(|stem| stem.split_once('-'))
                .map_or("", |(_, id)| id);
            let answer = json!({"kind": "error", "request_id": id, "file": name, "created_at": now,
                "error": {"code": refusal.code, "field": refusal.field, "message": refusal.message}});
            write_new(
                &dir.join("outbox"),
                &answer_name,
                pretty(&answer).as_bytes(),
            )?;
        }
        if quiet {
            std::fs::remove_file(dir.join("inbox").join(name))?;
        } else {
            move_into(&dir.join("inbox").join(name), &rejected, &target_name)?;
        }
        self.sightings.remove(name);
        Ok(())
    }

    /// Whether a file refused for its agent token comes within [`BAD_TOKEN_KEPT_EVERY`] of one
    /// of the same agent kept in `rejected/`: such a file is answered and deleted, not kept, so
    /// that an agent whose token was rotated fills `rejected/` with at most one file a minute
    /// (one example of the refusal is all an operator needs; the agent backs off on its side).
    fn bad_token_repeated(&mut self, name: &str) -> bool {
        let now = self.hub.now_utc();
        let recent = |at: &time::OffsetDateTime| now - *at < BAD_TOKEN_KEPT_EVERY;
        self.bad_token_kept.retain(|_, at| recent(at));
        let agent = agent_of_name(name);
        if self.bad_token_kept.get(agent).is_some_and(recent) {
            return true;
        }
        self.bad_token_kept.insert(agent.to_string(), now);
        false
    }
}

/// How often a file refused for its agent token is kept in `rejected/`, per agent.
const BAD_TOKEN_KEPT_EVERY: time::Duration = time::Duration::minutes(1);

/// The agent a request's file name carries: `<kind>-<agent>-<random>.json` as the agent names
/// its files (the part between the kind and the last `-`); any other name stands for itself.
fn agent_of_name(name: &str) -> &str {
    name.strip_suffix(".json")
        .and_then(|stem| stem.split_once('-'))
        .and_then(|(_, id)| id.rsplit_once('-'))
        .map_or(name, |(agent, _)| agent)
}

/// The name of the refusal answer to `inbox/<kind>-<id>.json`: `error-<kind>-<id>.json`, so two
/// refused files with one id (`claim-X`, `heartbeat-X`) get an answer each. `None` when the name
/// carries no valid id (nothing could be waiting for it).
pub fn error_answer_name(request_name: &str) -> Option<String> {
    match classify_name(request_name) {
        NameVerdict::Request { kind, id } => Some(format!("error-{kind}-{id}.json")),
        NameVerdict::Refuse(refusal) if refusal.code == "unknown_kind" => {
            Some(format!("error-{request_name}"))
        }
        _ => None,
    }
}

/// The longest file name (in bytes) of the file systems a relay folder lives on (`NAME_MAX`:
/// ext4, XFS, NFS and SMB shares all stop at 255).
const NAME_MAX: usize = 255;

/// What a name in `rejected/` must leave room for: a duplicate's `.N`, the reason's
/// `.error.json`, and the temporary name the reason is written under first
/// (`.<name>.<16 random hex digits>.tmp`, see `sharefs::temp_name`; the room kept is that of the
/// longer name it had before, so that no name already in `rejected/` changes).
const REJECTED_SUFFIXES: usize =
    ".99999".len() + ".error.json".len() + ".".len() + ".4194304-18446744073709551615.tmp".len();

/// The most of a reason in `rejected/` read when aging it: a reason is a few hundred bytes of
/// JSON, and a name planted there (a link to `/dev/zero`, a huge file) is not read whole.
const REASON_MAX_BYTES: u64 = 64 * 1024;

/// The name a refused file gets in `rejected/`: its own when it fits there with its reason's
/// `.error.json` beside it; else its first bytes, `~`, a hash of the whole name and `.json`
/// (the reason names the file as it was). Before, a file named up to the limit (a 240-character
/// id) could not have its reason written, and stayed in `inbox/` for good.
fn rejected_name(name: &str) -> String {
    if name.len() + REJECTED_SUFFIXES <= NAME_MAX {
        return name.to_string();
    }
    // FNV-1a, 64 bits: names that share their first bytes stay apart.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let mut keep = NAME_MAX - REJECTED_SUFFIXES - "~0123456789abcdef.json".len();
    while !name.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}~{hash:016x}.json", &name[..keep])
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// A name for the log, with control characters escaped.
fn escape(name: &str) -> String {
    super::inspect::escape_for_terminal(name)
}

/// A passive checkpoint on `hub`'s connection; a failure is logged, and the next one copies what
/// this one did not.
fn checkpoint(hub: &HubConnection) {
    if let Err(error) = hub.checkpoint() {
        tracing::warn!(%error, "a checkpoint of the database's WAL failed; retried later");
    }
}

/// Writes the answer (unless an earlier pass did) and archives the request under its day. The
/// answer is durable before the request leaves `inbox/`; with `background`, the move itself is
/// made durable there, after (undone by a power loss, it leaves the request in `inbox/`, answered
/// again from the record).
fn deliver(
    dir: &Path,
    name: &str,
    path: &Path,
    answer: &AgentAnswer,
    now: time::OffsetDateTime,
    background: Option<&Background>,
) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(answer).map_err(std::io::Error::other)?;
    write_new(&dir.join("outbox"), name, &text)?;
    let day = dir.join("archive").join(day_of(now.date()));
    if !day.is_dir() {
        std::fs::create_dir_all(&day)?;
        sync_dir(&dir.join("archive"))?;
    }
    match background {
        Some(background) => {
            move_into_unsynced(path, &day, name)?;
            background.sync_dir(&day);
            if let Some(inbox) = path.parent() {
                background.sync_dir(inbox);
            }
        }
        None => {
            move_into(path, &day, name)?;
        }
    }
    Ok(())
}

/// The archive folder of a day: `YYYY-MM-DD` of the hub's UTC clock when it archived.
fn day_of(date: time::Date) -> String {
    format!(
        "{:04}-{:02}-{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    )
}

/// How many refusals `rejected/` holds from `day` (UTC): the reasons the hub wrote then
/// (`<file>.error.json`), by their modification time.
fn refused_on(rejected: &Path, day: time::Date) -> u64 {
    let Ok(entries) = std::fs::read_dir(rejected) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".error.json"))
        .filter_map(|entry| entry.metadata().ok()?.modified().ok())
        .filter(|modified| time::OffsetDateTime::from(*modified).date() == day)
        .count() as u64
}

/// The entries of `inbox/` that are or look like requests, with what `lstat` says of them.
/// Names that are not UTF-8 are not ours (every relay name is ASCII).
fn list_candidates(inbox: &Path) -> std::io::Result<Vec<(String, FileFacts)>> {
    Ok(std::fs::read_dir(inbox)?
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| classify_name(name) != NameVerdict::NotOurs)
        .filter_map(|name| {
            let facts = lstat_facts(&inbox.join(&name))?;
            Some((name, facts))
        })
        .collect())
}

/// Removes answers, archived and refused files older than `retention`, aged by the hub's own
/// records, never by the agent's mtimes: `archive/<day>/` by its day, a refused file by the
/// `refused_at` of its reason, `outbox/` (written by the hub) by mtime. Whatever an entry is
/// (a file, a FIFO, a folder) it goes whole; an entry that cannot be removed is logged and the
/// rest goes on.
fn prune(dir: &Path, retention: std::time::Duration, now: time::OffsetDateTime, beat: &dyn Fn()) {
    let cutoff = now - retention;
    let remove = |path: &Path| {
        beat();
        if let Err(error) = remove_any(path) {
            tracing::warn!(path = %path.display(), %error, "an old relay file could not be pruned");
        }
    };
    // outbox/: the hub's answers.
    for entry in read_entries(&dir.join("outbox")) {
        let modified = entry
            .symlink_metadata()
            .and_then(|m| m.modified())
            .map(time::OffsetDateTime::from);
        if modified.is_ok_and(|at| at < cutoff) {
            remove(&entry);
        }
    }
    // archive/<day>/: by the day the hub archived into.
    let format = time::macros::format_description!("[year]-[month]-[day]");
    for entry in read_entries(&dir.join("archive")) {
        let day = entry
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| time::Date::parse(n, &format).ok());
        match day {
            Some(day)
                if day
                    .next_day()
                    .is_some_and(|end| end.midnight().assume_utc() < cutoff) =>
            {
                remove(&entry)
            }
            Some(_) => {}
            None => {
                tracing::debug!(path = %entry.display(), "not an archive day folder; left alone")
            }
        }
    }
    // rejected/: each refused entry beside its reason, aged by the reason's `refused_at`.
    let rejected = dir.join("rejected");
    for entry in read_entries(&rejected) {
        let Some(name) = entry.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(refused) = name.strip_suffix(".error.json") else {
            continue;
        };
        // A reason is a small JSON file; the name may have been planted (a link, a FIFO).
        let refused_at = crate::sharefs::read(&entry, REASON_MAX_BYTES)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
            .and_then(|reason| {
                reason["refused_at"]
                    .as_str()
                    .and_then(crate::domain::time::parse_utc)
            })
            .or_else(|| {
                entry
                    .symlink_metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .map(time::OffsetDateTime::from)
            });
        if refused_at.is_some_and(|at| at < cutoff) {
            remove(&rejected.join(refused));
            remove(&entry);
        }
    }
}

/// The entries of a folder, as paths; none when it cannot be read.
fn read_entries(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(Result::ok).map(|e| e.path()).collect(),
        Err(error) => {
            tracing::warn!(dir = %dir.display(), %error, "cannot list a relay folder to prune it");
            Vec::new()
        }
    }
}
