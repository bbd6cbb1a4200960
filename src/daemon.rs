//! `jira-hub serve`: opens (and migrates) the store, holds the one-daemon lock, starts the relay
//! on a thread of its own, the timers on another, and the HTTP listener on tokio; owns shutdown.
//!
//! Readiness goes to systemd (`READY=1`) only after the migration and the bind. SIGTERM and
//! SIGINT stop the listener (requests in hand finish), let the relay finish the file in hand,
//! and exit 0.

use crate::clock::SystemClock;
use crate::relay::{Relay, RelayOptions};
use crate::service::Hub;
use crate::store::{StoreError, data_dir_of};
use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Exit status for a configuration the daemon cannot run with (systemd must not restart it).
pub const EXIT_CONFIGURATION: u8 = 3;

/// How often the timers run their tasks.
const CLAIM_SWEEP_EVERY: Duration = Duration::from_secs(5);
const AUTO_REFRESH_EVERY: Duration = Duration::from_secs(30);
const BACKUP_CHECK_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub listen: String,
    pub relay: RelayOptions,
    /// Initialise a new database from this legacy config (as `init --if-new`).
    pub init_from: Option<PathBuf>,
    /// Set `relay_dir` to this folder (created) when the setting is empty.
    pub default_relay_dir: Option<PathBuf>,
    pub http: crate::http::HttpOptions,
}

pub fn serve(db: &Path, options: ServeOptions) -> anyhow::Result<ExitCode> {
    let data_dir = data_dir_of(db);
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("не удалось создать {}", data_dir.display()))?;
    let lock_path = data_dir.join("jira-hub.lock");
    let lock = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .with_context(|| format!("не удалось открыть файл блокировки {}", lock_path.display()))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "на базе {} уже работает другой jira-hub serve (он держит {})",
            db.display(),
            lock_path.display()
        ),
        Err(std::fs::TryLockError::Error(error)) => {
            return Err(error)
                .with_context(|| format!("не удалось заблокировать {}", lock_path.display()));
        }
    }

    let (mut hub, report) = match Hub::open(db, Arc::new(SystemClock)) {
        Ok(opened) => opened,
        Err(crate::service::ServiceError::Internal(StoreError::Incompatible(why))) => {
            eprintln!("jira-hub: {why}");
            return Ok(ExitCode::from(EXIT_CONFIGURATION));
        }
        Err(error) => {
            return Err(error).with_context(|| format!("не удалось открыть базу {}", db.display()));
        }
    };
    if let Some(backup) = &report.backup {
        tracing::info!(from = report.old_version, backup = %backup.display(), "database migrated at start");
    }
    prepare(&mut hub, &options)?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("не удалось запустить асинхронную среду исполнения")?;
    let result = runtime.block_on(run(hub, options, db));
    drop(lock);
    result
}

/// `--init-from` and `--default-relay-dir`: what the quick start needs on a fresh clone.
fn prepare(hub: &mut Hub, options: &ServeOptions) -> anyhow::Result<()> {
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

async fn run(hub: Hub, options: ServeOptions, db: &Path) -> anyhow::Result<ExitCode> {
    // Handlers first: a signal that comes as soon as the daemon says it is ready must stop it
    // cleanly, not kill it.
    let signals = Signals::install();
    let listener = tokio::net::TcpListener::bind(&options.listen)
        .await
        .with_context(|| format!("не удалось слушать {}", options.listen))?;
    let address = listener.local_addr()?;
    let shutdown = Arc::new(AtomicBool::new(false));

    let relay = Relay::new(hub.connect()?, options.relay.clone(), shutdown.clone());
    let relay_waker = relay.waker();
    let relay_thread = std::thread::Builder::new()
        .name("relay".into())
        .spawn(move || relay.run())?;
    let timers_hub = hub.connect()?;
    let timers_shutdown = shutdown.clone();
    let timers_thread = std::thread::Builder::new()
        .name("timers".into())
        .spawn(move || timers(timers_hub, timers_shutdown))?;

    let settings = hub.settings()?;
    outln!("jira-hub serving http://{address}");
    outln!("database:  {}", db.display());
    outln!(
        "relay_dir: {}",
        settings
            .relay_dir
            .as_deref()
            .unwrap_or("(not set: the agent can only use HTTP)")
    );
    outln!("tokens:    jira-hub --db {} tokens", db.display());
    tracing::info!(%address, "listening");
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);

    let stop = {
        let shutdown = shutdown.clone();
        async move {
            signals.wait().await;
            tracing::info!("stopping");
            let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
            shutdown.store(true, Ordering::SeqCst);
            let _ = relay_waker.try_send(());
        }
    };
    let state = crate::http::AppState {
        pool: Arc::new(crate::http::HubPool::new(hub.connect()?)),
        options: options.http.clone(),
    };
    crate::http::serve(listener, state, stop)
        .await
        .context("HTTP-сервер остановился с ошибкой")?;
    shutdown.store(true, Ordering::SeqCst);
    tokio::task::spawn_blocking(move || {
        let _ = relay_thread.join();
        let _ = timers_thread.join();
    })
    .await?;
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM and SIGINT, listened for from the start.
struct Signals {
    terminate: Option<tokio::signal::unix::Signal>,
    interrupt: Option<tokio::signal::unix::Signal>,
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
        }
    }
}

/// The periodic work: claim timeouts, automatic refresh, the daily backup, the watchdog.
fn timers(mut hub: Hub, shutdown: Arc<AtomicBool>) {
    let mut watchdog_usec = 0;
    let watchdog = sd_notify::watchdog_enabled(false, &mut watchdog_usec)
        .then(|| Duration::from_micros(watchdog_usec / 2));
    let mut last: [Option<Instant>; 4] = [None; 4];
    let due = |slot: &mut Option<Instant>, every: Duration| {
        let now = Instant::now();
        if slot.is_none_or(|at| now.duration_since(at) >= every) {
            *slot = Some(now);
            true
        } else {
            false
        }
    };
    while !shutdown.load(Ordering::SeqCst) {
        if due(&mut last[0], CLAIM_SWEEP_EVERY)
            && let Err(error) = hub.expire_claims()
        {
            tracing::error!(%error, "claim timeout sweep failed");
        }
        if due(&mut last[1], AUTO_REFRESH_EVERY)
            && let Err(error) = hub.auto_refresh()
        {
            tracing::error!(%error, "automatic refresh failed");
        }
        if due(&mut last[2], BACKUP_CHECK_EVERY) {
            match hub.periodic_backup() {
                Ok(Some(path)) => tracing::info!(backup = %path.display(), "periodic backup made"),
                Ok(None) => {}
                Err(error) => tracing::error!(%error, "periodic backup failed"),
            }
        }
        if let Some(every) = watchdog
            && due(&mut last[3], every)
        {
            // The relay runs on a thread of its own: a relay stuck in a system call must not be
            // hidden by this thread's pings. Without them systemd restarts the daemon.
            match hub.metrics().relay_stalled_for() {
                Some(silent) => {
                    tracing::error!(
                        silent_seconds = silent.as_secs(),
                        "the relay loop is stuck; the watchdog is no longer fed"
                    );
                }
                _ => {
                    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Watchdog]);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
