//! `jira-hub serve`: opens (and migrates) the store, holds the one-daemon lock, starts the relay
//! on a thread of its own, the timers as tokio tasks, and the HTTP listener; owns shutdown.
//!
//! Readiness goes to systemd (`READY=1`) only after the migration and the bind. SIGTERM and
//! SIGINT trigger the one [`Shutdown`]: the listener stops (requests in hand finish), the timers
//! end after the call in hand, the relay finishes the file in hand, and the daemon exits 0.

use crate::clock::SystemClock;
use crate::relay::{Relay, RelayOptions};
use crate::service::HubConnection;
use crate::shutdown::Shutdown;
use crate::store::{FileLock, LOCK_FILE, StoreError, data_dir_of};
use anyhow::{Context, anyhow};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the timers look whether another process wrote to the database (a quarter second:
/// a command enqueued by the CLI reaches an idle agent's waiting claim that soon).
const OTHER_WRITERS_EVERY: Duration = Duration::from_millis(250);

/// How often the timers run their tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerPeriods {
    /// Claims whose lease ended go back to the queue (or fail, or are confirmed by state).
    pub claim_sweep: Duration,
    /// A full refresh is enqueued when `auto_refresh_minutes` says one is due.
    pub auto_refresh: Duration,
    /// The daily backup is made when the last one is a day old.
    pub backup_check: Duration,
    /// systemd's watchdog is fed (half its `WATCHDOG_USEC`), when it watches.
    pub watchdog: Option<Duration>,
}

impl TimerPeriods {
    /// The daemon's periods, the watchdog's from systemd's environment.
    pub(crate) fn from_environment() -> Self {
        let mut watchdog_usec = 0;
        let watchdog = sd_notify::watchdog_enabled(false, &mut watchdog_usec)
            .then(|| Duration::from_micros(watchdog_usec / 2));
        TimerPeriods {
            watchdog,
            ..TimerPeriods::default()
        }
    }
}

impl Default for TimerPeriods {
    fn default() -> Self {
        TimerPeriods {
            claim_sweep: Duration::from_secs(5),
            auto_refresh: Duration::from_secs(30),
            backup_check: Duration::from_secs(60),
            watchdog: None,
        }
    }
}

/// Why `serve` did not run; the CLI maps it to the exit code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    /// The database is one this binary cannot run (not SQLite, a newer schema).
    #[error("{0}")]
    Unrunnable(String),
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

#[derive(Debug, Clone)]
pub(crate) struct ServeOptions {
    pub listen: String,
    pub relay: RelayOptions,
    /// Initialise a new database from this legacy config (as `init --if-new`).
    pub init_from: Option<PathBuf>,
    /// Set `relay_dir` to this folder (created) when the setting is empty.
    pub default_relay_dir: Option<PathBuf>,
    pub http: crate::http::HttpOptions,
}

pub(crate) fn serve(db: &Path, options: ServeOptions) -> Result<(), ServeError> {
    // The port first: a busy one makes nothing (no database, no data folder) and says which
    // free `--listen` would do, as the demo does.
    let listener = std::net::TcpListener::bind(&options.listen).map_err(|error| {
        anyhow!(
            "{}: «{error}»",
            crate::instance::busy_port_words(&options.listen, &error)
        )
    })?;
    // The path is checked (and a new database made) before anything else changes in its folder:
    // a `--db` that is not a hub's database leaves that folder as it was.
    let (mut hub, report) = match HubConnection::open_guarded(db, Arc::new(SystemClock)) {
        Ok(opened) => opened,
        Err(crate::service::ServiceError::Internal(StoreError::Incompatible(why))) => {
            return Err(ServeError::Unrunnable(format!(
                "не удалось открыть базу {}: {why}",
                db.display()
            )));
        }
        Err(error) => {
            return Err(error)
                .with_context(|| format!("не удалось открыть базу {}", db.display()))
                .map_err(ServeError::from);
        }
    };
    let Some(lock) =
        crate::store::lock_data_folder(&data_dir_of(db)).map_err(anyhow::Error::from)?
    else {
        return Err(anyhow!(
            "на базе {} уже работает другой jira-hub serve (он держит {})",
            db.display(),
            data_dir_of(db).join(LOCK_FILE).display()
        )
        .into());
    };
    // The file itself, so that the same database reached through another name (a hard link,
    // whose folder has a lock file of its own) is never served twice.
    match crate::store::lock_database_file(db) {
        Ok(FileLock::Held) => {}
        Ok(FileLock::HeldElsewhere) => {
            return Err(anyhow!(
                "на базе {} уже работает другой jira-hub serve: её файл заблокирован другим процессом (та же база под другим именем — жёсткая или символьная ссылка?)",
                db.display()
            )
            .into());
        }
        Ok(FileLock::Skipped(why)) => tracing::warn!("{why}"),
        Err(error) => {
            return Err(anyhow::Error::from(error).into());
        }
    }
    // Locked: this process is the file's only hub. Its mark goes into the header before any
    // other connection opens.
    hub.claim_database()
        .with_context(|| format!("не удалось пометить базу {}", db.display()))?;
    if let Some(backup) = &report.backup {
        tracing::info!(from = %report.old_schema, to = %report.new_schema, backup = %backup.display(), "database migrated at start");
    }
    prepare(&mut hub, &options)?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(BLOCKING_THREADS)
        .enable_all()
        .build()
        .context("не удалось запустить асинхронную среду исполнения")?;
    let result = runtime.block_on(run(hub, options, db, listener));
    drop(lock);
    Ok(result?)
}

/// The most threads the runtime runs blocking work on: the HTTP pool's turns at the database
/// (16), the timers, and room to spare. Without a cap a burst of 2,000 claims grew the pool to
/// 100 threads (a thread finishing one look is not yet idle when the next look is spawned), each
/// with its allocator cache, kept alive for as long as some work comes every 10 s.
const BLOCKING_THREADS: usize = 24;

/// `--init-from` and `--default-relay-dir`: what the quick start needs on a fresh clone.
fn prepare(hub: &mut HubConnection, options: &ServeOptions) -> anyhow::Result<()> {
    if let Some(config_path) = &options.init_from
        && hub.tokens()?.is_none()
    {
        let text = std::fs::read_to_string(config_path)
            .with_context(|| format!("не удалось прочитать конфиг {}", config_path.display()))?;
        let config: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("конфиг {} — не JSON", config_path.display()))?;
        hub.init_from_config(&config, false)?;
        tracing::info!(config = %config_path.display(), "new database initialised from the config");
    }
    if let Some(relay) = &options.default_relay_dir
        && hub.settings()?.relay_dir.is_none()
    {
        std::fs::create_dir_all(relay)
            .with_context(|| format!("не удалось создать {}", relay.display()))?;
        // Asked for by the operator: the folder is marked, its four folders made.
        crate::relay::init_folder(relay)
            .with_context(|| format!("не удалось подготовить папку обмена {}", relay.display()))?;
        let absolute = std::fs::canonicalize(relay)?;
        let mut update = serde_json::Map::new();
        update.insert(
            "relay_dir".into(),
            serde_json::Value::String(absolute.display().to_string()),
        );
        hub.update_settings(&update)?;
    }
    Ok(())
}

async fn run(
    hub: HubConnection,
    options: ServeOptions,
    db: &Path,
    listener: std::net::TcpListener,
) -> anyhow::Result<()> {
    // Handlers first: a signal that comes as soon as the daemon says it is ready must stop it
    // cleanly, not kill it.
    let signals = Signals::install();
    // The sign-in page names this hub's database, unless it is a demo's (its own words).
    if !options
        .http
        .instance
        .as_deref()
        .is_some_and(crate::instance::is_demo_instance)
    {
        crate::http::set_served_database(db);
    }
    let listener = listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
        .with_context(|| format!("не удалось слушать {}", options.listen))?;
    let address = listener.local_addr()?;
    if !address.ip().is_loopback()
        && options.http.allowed_hosts.is_empty()
        && options.http.public_origins.is_empty()
    {
        // Reached by IP address or localhost it works; by a DNS name (a proxy passing the
        // browser's Host, a bookmark) it is refused until the name is given.
        tracing::warn!(
            %address,
            "listening beyond the loopback with no --allowed-host: the console, /metrics and /ready refuse requests that name the hub by a DNS name (403, against DNS rebinding) until it is given with --allowed-host or --public-url; IP addresses, localhost and requests with a token are accepted"
        );
    }
    let shutdown = Shutdown::new();

    let relay = Relay::new(hub.connect()?, options.relay.clone(), shutdown.clone());
    let relay_waker = relay.waker();
    let relay_thread = std::thread::Builder::new()
        .name("relay".into())
        .spawn(move || relay.run())?;
    // The relay thread blocks on its own channel: the stop wakes it there.
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            shutdown.triggered().await;
            let _ = relay_waker.try_send(());
        }
    });
    let mut timer_hub = hub.connect()?;
    timer_hub.set_request_retention(options.relay.retention);
    let timers = tokio::spawn(run_timers(
        timer_hub,
        TimerPeriods::from_environment(),
        shutdown.clone(),
    ));
    // Claims waiting for work are answered at once when the daemon stops.
    tokio::spawn({
        let shutdown = shutdown.clone();
        let work = hub.work_signal();
        async move {
            shutdown.triggered().await;
            work.stop();
        }
    });

    let settings = hub.settings()?;
    let tokens = if settings.tokens.is_some() {
        format!("{} --db {} tokens", crate::program(), db.display())
    } else {
        // Served anyway (the operator may run `init` now; tokens are read at each request),
        // but said loudly: every API call, sign-in and agent request is refused until then.
        tracing::warn!(
            database = %db.display(),
            "the database was never initialised: it has no tokens, so every API call, console sign-in and agent request is refused; run `{} --db {} init --config FILE` (the running hub takes the tokens at once); /ready answers 503 until then",
            crate::program(),
            db.display()
        );
        format!(
            "NONE: the database was never initialised; run {} --db {} init --config FILE",
            crate::program(),
            db.display()
        )
    };
    // The banner is for a person at a terminal; a closed stdout must not stop the daemon.
    let banner = format!(
        "jira-hub serving http://{address}\ndatabase:  {}\nrelay_dir: {}\ntokens:    {tokens}\n",
        db.display(),
        settings
            .relay_dir
            .as_deref()
            .unwrap_or("(not set: the agent can only use HTTP)"),
    );
    // Under systemd stdout goes to the journal, where the banner would be four lines without
    // a priority among the log's; what it says is in the log's `listening` line and `status`.
    if !stdout_is_journal() {
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        let _ = stdout
            .write_all(banner.as_bytes())
            .and_then(|()| stdout.flush());
    }
    tracing::info!(%address, "listening");
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);

    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            tokio::select! {
                () = signals.wait() => {
                    tracing::info!("stopping");
                    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
                    shutdown.trigger();
                }
                () = shutdown.triggered() => {}
            }
        }
    });
    let state = crate::http::AppState {
        pool: Arc::new(crate::http::HubPool::new(hub.connect()?)),
        options: options.http.clone(),
    };
    let stop = {
        let shutdown = shutdown.clone();
        async move { shutdown.triggered().await }
    };
    let served = crate::http::serve(listener, state, stop).await;
    // The server may also end on an error: everything else stops with it.
    shutdown.trigger();
    let _ = timers.await;
    let mut hub = hub;
    tokio::task::spawn_blocking(move || {
        let _ = relay_thread.join();
        // What only memory knew of the agents' last-seen times goes to the database.
        if let Err(error) = hub.flush_all_presence() {
            tracing::warn!(%error, "the agents' last-seen times could not be written at the stop");
        }
    })
    .await?;
    served.context("HTTP-сервер остановился с ошибкой")?;
    tracing::info!("stopped");
    Ok(())
}

/// SIGTERM, SIGINT and SIGHUP (a terminal's hang-up stops the hub as cleanly as its Ctrl-C),
/// listened for from the start.
struct Signals {
    terminate: Option<tokio::signal::unix::Signal>,
    interrupt: Option<tokio::signal::unix::Signal>,
    hangup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn install() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        let listen = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(stream) => Some(stream),
            Err(error) => {
                tracing::warn!(%error, "cannot listen for {name}");
                None
            }
        };
        Signals {
            terminate: listen(SignalKind::terminate(), "SIGTERM"),
            interrupt: listen(SignalKind::interrupt(), "SIGINT"),
            hangup: listen(SignalKind::hangup(), "SIGHUP"),
        }
    }

    async fn wait(mut self) {
        async fn next(stream: &mut Option<tokio::signal::unix::Signal>) {
            match stream {
                Some(stream) => {
                    stream.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            _ = next(&mut self.terminate) => {}
            _ = next(&mut self.interrupt) => {}
            _ = next(&mut self.hangup) => {}
        }
    }
}

/// The periodic work until `shutdown`: claim timeouts, automatic refresh, the daily backup (and,
/// on its tick, forgetting agents and agent requests past their retention), the watchdog, each a task on its `tokio::time::interval`, each hub call on the blocking pool (one
/// at a time: they share `hub`). Time is tokio's, so a test with paused time runs them at once.
/// Whether stdout is connected to the journal: systemd sets `JOURNAL_STREAM` to the device and
/// inode (`dev:ino`) of the stream it connects a service's stdout or stderr to, for it to be
/// compared with `fstat` of the descriptor (systemd.exec(5), "$JOURNAL_STREAM"); a program run
/// from a shell that inherited the variable, its stdout a terminal, is not.
fn stdout_is_journal() -> bool {
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((device, inode)) = stream.to_str().and_then(|s| s.split_once(':')) else {
        return false;
    };
    let (Ok(device), Ok(inode)) = (device.parse::<u64>(), inode.parse::<u64>()) else {
        return false;
    };
    // `st_dev`'s and `st_ino`'s widths differ between architectures.
    #[allow(clippy::useless_conversion)]
    rustix::fs::fstat(std::io::stdout())
        .is_ok_and(|stat| u64::from(stat.st_dev) == device && u64::from(stat.st_ino) == inode)
}

pub async fn run_timers(hub: HubConnection, every: TimerPeriods, shutdown: Shutdown) {
    let hub = Arc::new(Mutex::new(hub));
    let sweep = repeat(&hub, every.claim_sweep, &shutdown, |hub| {
        // While the database cannot be written, a write that changes nothing shows when it can
        // again (so `/ready` and `/metrics` clear without waiting for a request).
        let _ = hub.probe_database();
        if let Err(error) = hub.expire_claims() {
            tracing::error!(%error, "claim timeout sweep failed");
        }
        // At rest the WAL is emptied: the file beside the database stays small.
        if let Err(error) = hub.checkpoint_when_idle() {
            tracing::debug!(%error, "the idle checkpoint failed; tried again on the next sweep");
        }
    });
    // A command enqueued by another process (the CLI) wakes the claims waiting for work.
    let writers = repeat(&hub, OTHER_WRITERS_EVERY, &shutdown, |hub| {
        if let Err(error) = hub.notice_other_writers() {
            tracing::debug!(%error, "looking for other writers failed; looked at again");
        }
        // The agents' last-seen times kept in memory: a change of status at once, a moved
        // time once a minute (the timers' own commit moves no `data_version` of theirs).
        if let Err(error) = hub.flush_presence() {
            tracing::warn!(%error, "writing the agents' last-seen times failed; tried again");
        }
        // The end of a burst of wrong tokens is told without waiting for one more.
        hub.metrics().flush_bearer_failures(hub.now_utc());
    });
    let refresh = repeat(&hub, every.auto_refresh, &shutdown, |hub| {
        if let Err(error) = hub.auto_refresh() {
            tracing::error!(%error, "automatic refresh failed");
        }
    });
    let backup = repeat(&hub, every.backup_check, &shutdown, |hub| {
        match hub.periodic_backup() {
            Ok(Some(path)) => tracing::info!(backup = %path.display(), "periodic backup made"),
            Ok(None) => {}
            Err(error) => tracing::error!(%error, "periodic backup failed"),
        }
        // What the hub remembers of agents is bounded too: on the same minute's tick.
        if let Err(error) = hub.prune_remembered() {
            tracing::error!(%error, "pruning old agents and agent requests failed; retried on the next tick");
        }
        // Finished batches past their retention, in small transactions.
        if let Err(error) = hub.prune_finished() {
            tracing::error!(%error, "pruning finished batches failed; retried on the next tick");
        }
    });
    let watchdog = async {
        if let Some(period) = every.watchdog {
            repeat(&hub, period, &shutdown, |hub| {
                if watchdog_may_ping(hub.metrics().relay_silent_for()) {
                    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Watchdog]);
                }
            })
            .await;
        }
    };
    tokio::join!(sweep, writers, refresh, backup, watchdog);
}

/// Whether the watchdog may be fed. The relay runs on a thread of its own: a relay stuck in a
/// system call must not be hidden by the timers' pings; without them systemd restarts the daemon.
pub(crate) fn watchdog_may_ping(relay_silent_for: Option<Duration>) -> bool {
    match relay_silent_for {
        Some(silent) if silent > crate::service::RELAY_STALL_LIMIT => {
            tracing::error!(
                silent_seconds = silent.as_secs(),
                "the relay loop is stuck; the watchdog is no longer fed"
            );
            false
        }
        _ => true,
    }
}

/// Runs `job` on the blocking pool at once and then every `period`, until `shutdown`; a late
/// tick is delayed, never bunched up.
async fn repeat(
    hub: &Arc<Mutex<HubConnection>>,
    period: Duration,
    shutdown: &Shutdown,
    job: fn(&mut HubConnection),
) {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = shutdown.triggered() => break,
            _ = interval.tick() => {}
        }
        let hub = hub.clone();
        let ran = tokio::task::spawn_blocking(move || {
            // A job that panicked poisons nothing the next one relies on: the store is
            // transactional.
            let mut hub = hub
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            job(&mut hub);
        })
        .await;
        if let Err(error) = ran {
            tracing::error!(%error, "a timer task failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_relay_stops_the_watchdog() {
        assert!(watchdog_may_ping(None));
        assert!(watchdog_may_ping(Some(crate::service::RELAY_STALL_LIMIT)));
        assert!(!watchdog_may_ping(Some(
            crate::service::RELAY_STALL_LIMIT + Duration::from_secs(1)
        )));
    }
}
