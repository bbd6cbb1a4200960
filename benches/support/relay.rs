//! The real daemon with a relay folder, for the benchmarks that go through the relay
//! (`benches/relay.rs`, `benches/ingest.rs`): a hub initialised from the example config, the
//! release binary serving it, and the agent's side of the folder.

use jira_hub::clock::SystemClock;
use jira_hub::service::HubConnection;
use serde_json::{Value, json};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub type Error = Box<dyn std::error::Error>;

#[allow(dead_code)] // the benches that use this build's service directly
pub struct Setup {
    /// Everything lives here; removed when the setup is dropped.
    #[allow(dead_code)] // the relay bench only keeps it alive
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
    pub relay: PathBuf,
    pub token: String,
    pub hub: HubConnection,
}

#[allow(dead_code)]
pub fn setup() -> Result<Setup, Error> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("data/hub.sqlite");
    let (mut hub, _) = HubConnection::open(&db, Arc::new(SystemClock))?;
    let config: Value =
        serde_json::from_str(include_str!("../../admin/jira-sync/config.example.json"))?;
    hub.init_from_config(&config, false)?;
    let relay = dir.path().join("relay");
    std::fs::create_dir_all(&relay)?;
    // Marked as `jira-hub relay init` marks it: the hub makes its folders only in such a folder.
    std::fs::write(relay.join(".jira-hub-relay"), b"")?;
    let update = json!({"relay_dir": relay.display().to_string(), "auto_refresh_minutes": 0,
        "pacing": {"max_commands_per_claim": 100}});
    hub.update_settings(update.as_object().ok_or("object")?)?;
    let token = hub.tokens()?.ok_or("no tokens")?.agent;
    Ok(Setup {
        dir,
        db,
        relay,
        token,
        hub,
    })
}

pub struct Daemon(pub Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[allow(dead_code)]
pub fn start(db: &Path, extra: &[&str]) -> Result<Daemon, Error> {
    start_exe(&daemon_exe(), db, extra)
}

/// `exe serve` on `db` (quiet, its stdout drained): another build of the hub as well as this one.
pub fn start_exe(exe: &Path, db: &Path, extra: &[&str]) -> Result<Daemon, Error> {
    let mut child = Command::new(exe)
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("stdout")?;
    let mut lines = std::io::BufReader::new(stdout).lines();
    lines.next();
    std::thread::spawn(move || for _ in lines {});
    Ok(Daemon(child))
}

/// The binary the daemon runs: this build's, or `BENCH_DAEMON_EXE` (another build of the hub,
/// measured by the same bench on the same machine, as a baseline).
pub fn daemon_exe() -> std::path::PathBuf {
    std::env::var_os("BENCH_DAEMON_EXE")
        .map_or_else(|| env!("CARGO_BIN_EXE_jira-hub").into(), Into::into)
}

/// A hub made by `exe`'s own commands (`init` from the example config, `settings set`, and with
/// `refresh` a queued refresh), for a bench that runs another build of the hub beside this one:
/// that build's schema may be older than this build's, so it must make its database itself.
pub struct CliSetup {
    /// Everything lives here; removed when the setup is dropped.
    #[allow(dead_code)] // kept alive by its owner
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
    pub relay: PathBuf,
    pub token: String,
    #[allow(dead_code)] // the strangers bench's client requests
    pub client_token: String,
}

#[allow(dead_code)] // not every relay bench runs another build
pub fn setup_by(exe: &Path, refresh: bool) -> Result<CliSetup, Error> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("data/hub.sqlite");
    let relay = dir.path().join("relay");
    std::fs::create_dir_all(&relay)?;
    // Marked as `jira-hub relay init` marks it: the hub makes its folders only in such a folder.
    std::fs::write(relay.join(".jira-hub-relay"), b"")?;
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("admin/jira-sync/config.example.json");
    let relay_dir = serde_json::to_string(&relay.display().to_string())?;
    let run = |args: &[&str]| crate::common::cli(exe, &db, args).map_err(|e| -> Error { e });
    run(&["init", "--config", &config.to_string_lossy()])?;
    run(&["settings", "set", "relay_dir", &relay_dir])?;
    run(&["settings", "set", "auto_refresh_minutes", "0"])?;
    run(&[
        "settings",
        "set",
        "pacing",
        r#"{"max_commands_per_claim": 100}"#,
    ])?;
    if refresh {
        run(&["refresh"])?;
    }
    let tokens = run(&["tokens"])?;
    let printed = |kind: &str| {
        tokens
            .lines()
            .find_map(|line| line.strip_prefix(kind))
            .map(|token| token.trim().to_string())
            .ok_or(format!("no {kind} token printed by `tokens`"))
    };
    Ok(CliSetup {
        token: printed("agent:")?,
        client_token: printed("client:")?,
        dir,
        db,
        relay,
    })
}

pub fn drop_file(inbox: &Path, name: &str, value: &Value) -> Result<(), Error> {
    let temp = inbox.join(format!(".{name}"));
    std::fs::write(&temp, serde_json::to_vec(value)?)?;
    std::fs::rename(&temp, inbox.join(name))?;
    Ok(())
}

/// Writes a request into `inbox/` as the agent does (`agent::transport::write_file`): a
/// `.`-name, written, synced, renamed, the folder synced: one atomic, durable file write.
#[allow(dead_code)] // the relay bench's round trips and floor
pub fn drop_file_synced(inbox: &Path, name: &str, value: &Value) -> Result<(), Error> {
    use std::io::Write;
    let temp = inbox.join(format!(".{name}.tmp"));
    let mut file = std::fs::File::create_new(&temp)?;
    file.write_all(&serde_json::to_vec(value)?)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp, inbox.join(name))?;
    std::fs::File::open(inbox)?.sync_all()?;
    Ok(())
}

/// Waits for `path` by polling its existence, then reads it.
pub fn wait_for(path: &Path) -> Result<Value, Error> {
    let started = Instant::now();
    loop {
        if path.exists()
            && let Ok(value) = serde_json::from_slice(&std::fs::read(path)?)
        {
            return Ok(value);
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err(format!("{} never came", path.display()).into());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

pub fn claim(id: &str, token: &str, max: usize) -> Value {
    json!({"kind": "claim", "id": id, "agent": "bench", "sent_at": "2026-11-29T10:00:00Z", "token": token,
           "agent_version": "1", "settings_version": 0, "max_commands": max})
}
