//! A hub at rest (`cargo bench --bench idle`), release builds, four scenarios run
//! side by side, each its own processes and temporary folder:
//!
//! - `serve` alone (relay folder watched, HTTP listening, timers on);
//! - `serve` with one idle agent through the relay folder;
//! - `serve` with one idle agent over HTTP;
//! - `jira-hub demo` left running (its hub, agent and simulated Jira; the hub is measured).
//!
//! For each hub it reads, at the start and the end of the idle interval, the CPU time
//! (`/proc/<pid>/stat`, utime + stime), the context switches (voluntary + involuntary, summed
//! over `/proc/<pid>/task/*`) and the bytes it caused to be written to storage
//! (`/proc/<pid>/io` `write_bytes`), and at the end the size of the WAL beside its database.
//! It prints the CPU share of one core, wake-ups a second, KB written a minute and the WAL size
//! against the targets: under 0.5 % of a core, at most 128 KB a minute (two commits of 32 KiB
//! pages), a WAL of at most 4 MB.
//!
//! `BENCH_IDLE_SECONDS` (default 600, the ten minutes) is the idle interval.
//! `BENCH_IDLE_BEFORE=/path/to/jira-hub` runs the same four scenarios with that binary too (an
//! earlier build, for a before/after table), all at once, so a run lasts the interval once.
//! The setup goes through each binary's own CLI (`init`, `tokens`, `settings set`), so a binary
//! of an older schema makes its own database.

mod common;
use jira_hub::sim::jira as fake_jira;

use common::{cli, clock_ticks, cpu_ticks, size, wal_bytes};
use fake_jira::{FakeJira, Mode};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// What a hub may cost at rest.
const TARGET_CPU_PERCENT: f64 = 0.5;
const TARGET_WRITE_KB_PER_MINUTE: f64 = 128.0;
const TARGET_WAL_BYTES: u64 = 4 * 1024 * 1024;

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        // SIGTERM first: the demo stops its children with it.
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        for _ in 0..50 {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What the kernel has counted of a process so far.
#[derive(Debug, Clone, Copy)]
struct Usage {
    at: Instant,
    /// utime + stime, in clock ticks.
    ticks: u64,
    /// Voluntary and involuntary context switches of its live threads.
    switches: u64,
    /// Bytes it caused to be sent to storage (`write_bytes`).
    written: u64,
}

fn usage(pid: u32) -> Result<Usage, Error> {
    let ticks = cpu_ticks(pid)?;
    let mut switches = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let Ok(status) = std::fs::read_to_string(task?.path().join("status")) else {
            continue; // the thread ended meanwhile
        };
        for line in status.lines() {
            if let Some(value) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                switches += value.trim().parse::<u64>()?;
            }
        }
    }
    let io = std::fs::read_to_string(format!("/proc/{pid}/io"))?;
    let written = io
        .lines()
        .find_map(|line| line.strip_prefix("write_bytes:"))
        .ok_or("no write_bytes in /proc/PID/io")?
        .trim()
        .parse()?;
    Ok(Usage {
        at: Instant::now(),
        ticks,
        switches,
        written,
    })
}

/// One scenario's figures.
#[derive(Debug, Clone, Copy)]
struct Figures {
    cpu_percent: f64,
    wakeups_per_second: f64,
    written_kb_per_minute: f64,
    wal_bytes: u64,
}

impl Figures {
    fn between(start: Usage, end: Usage, wal_bytes: u64) -> Figures {
        let seconds = end.at.duration_since(start.at).as_secs_f64();
        Figures {
            cpu_percent: end.ticks.saturating_sub(start.ticks) as f64 / clock_ticks() / seconds
                * 100.0,
            wakeups_per_second: end.switches.saturating_sub(start.switches) as f64 / seconds,
            written_kb_per_minute: end.written.saturating_sub(start.written) as f64
                / 1024.0
                / seconds
                * 60.0,
            wal_bytes,
        }
    }

    fn verdict(&self) -> &'static str {
        if self.cpu_percent < TARGET_CPU_PERCENT
            && self.written_kb_per_minute <= TARGET_WRITE_KB_PER_MINUTE
            && self.wal_bytes <= TARGET_WAL_BYTES
        {
            "ok"
        } else {
            "OVER"
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    Alone,
    Relay,
    Http,
    Demo,
}

impl Scenario {
    const ALL: [Scenario; 4] = [
        Scenario::Alone,
        Scenario::Relay,
        Scenario::Http,
        Scenario::Demo,
    ];

    fn label(self) -> &'static str {
        match self {
            Scenario::Alone => "serve alone",
            Scenario::Relay => "serve + idle relay agent",
            Scenario::Http => "serve + idle HTTP agent",
            Scenario::Demo => "jira-hub demo left running",
        }
    }
}

fn main() -> Result<(), Error> {
    let seconds = size("BENCH_IDLE_SECONDS", 600) as u64;
    let idle = Duration::from_secs(seconds);
    let mut binaries = vec![("branch", PathBuf::from(env!("CARGO_BIN_EXE_jira-hub")))];
    if let Ok(before) = std::env::var("BENCH_IDLE_BEFORE") {
        binaries.push(("before", PathBuf::from(before)));
    }
    println!(
        "idle for {seconds} s (BENCH_IDLE_SECONDS), {} scenarios at once",
        binaries.len() * Scenario::ALL.len()
    );
    let mut runs = Vec::new();
    for (name, exe) in &binaries {
        for scenario in Scenario::ALL {
            let exe = exe.clone();
            let name = *name;
            runs.push((
                name,
                scenario,
                std::thread::spawn(move || run(&exe, scenario, idle)),
            ));
        }
    }
    println!(
        "{:<8} {:<28} {:>9} {:>12} {:>14} {:>10}  verdict (targets: < {TARGET_CPU_PERCENT} % of a core, <= {TARGET_WRITE_KB_PER_MINUTE} KB/min, WAL <= 4 MB)",
        "binary", "scenario", "CPU %", "wake-ups/s", "written KB/min", "WAL bytes"
    );
    let mut failed = false;
    for (name, scenario, run) in runs {
        match run.join().map_err(|_| "a scenario panicked")? {
            Ok(f) => println!(
                "{name:<8} {:<28} {:>9.3} {:>12.1} {:>14.1} {:>10}  {}",
                scenario.label(),
                f.cpu_percent,
                f.wakeups_per_second,
                f.written_kb_per_minute,
                f.wal_bytes,
                f.verdict()
            ),
            Err(error) => {
                failed = true;
                println!("{name:<8} {:<28} failed: {error}", scenario.label());
            }
        }
    }
    if failed {
        return Err("a scenario failed".into());
    }
    Ok(())
}

/// Sets up one scenario in a folder of its own, lets it settle, measures its hub for `idle`.
fn run(exe: &Path, scenario: Scenario, idle: Duration) -> Result<Figures, Error> {
    // On the disk, not in memory: `write_bytes` counts what reaches storage.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))?;
    if scenario == Scenario::Demo {
        return run_demo(exe, dir.path(), idle);
    }
    let fake = FakeJira::start(Mode::DataCenter);
    let db = dir.path().join("data/hub.sqlite");
    let config = dir.path().join("legacy-config.json");
    std::fs::write(
        &config,
        include_str!("../admin/jira-sync/config.example.json"),
    )?;
    cli(
        exe,
        &db,
        &["init", "--config", &config.display().to_string()],
    )?;
    let tokens = cli(exe, &db, &["tokens"])?;
    let token = |role: &str| -> Result<String, Error> {
        tokens
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{role}:")))
            .map(|t| t.trim().to_string())
            .ok_or_else(|| format!("no {role} token in: {tokens}").into())
    };
    let relay = dir.path().join("relay");
    std::fs::create_dir_all(&relay)?;
    // Marked as `jira-hub relay init` marks it: the hub makes its folders only in such a folder.
    std::fs::write(relay.join(".jira-hub-relay"), b"")?;
    cli(
        exe,
        &db,
        &[
            "settings",
            "set",
            "relay_dir",
            &json!(relay.display().to_string()).to_string(),
        ],
    )?;
    // The automatic refresh would give the agent work: off, its timer still runs.
    cli(exe, &db, &["settings", "set", "auto_refresh_minutes", "0"])?;
    let (daemon, address) = serve(exe, &db)?;
    let agent = match scenario {
        Scenario::Relay | Scenario::Http => {
            let mut config = json!({
                "jira_url": fake.url(), "jira_user": fake_jira::USER,
                "jira_password": fake_jira::PASSWORD, "agent_token": token("agent")?,
                "name": "idle-agent", "request_timeout_seconds": 60,
            });
            if scenario == Scenario::Relay {
                config["relay_dir"] = json!(relay.display().to_string());
            } else {
                config["hub_url"] = json!(format!("http://{address}"));
            }
            Some(agent(exe, dir.path(), &config)?)
        }
        _ => None,
    };
    // The daemon made its folders; the agent's first heartbeat and claim are done.
    std::thread::sleep(Duration::from_secs(5));
    let pid = daemon.0.id();
    let start = usage(pid)?;
    std::thread::sleep(idle);
    let end = usage(pid)?;
    let figures = Figures::between(start, end, wal_bytes(&db));
    drop(agent);
    drop(daemon);
    Ok(figures)
}

/// `jira-hub demo` in `dir` on a free port: it runs its sample batch and refresh, then rests;
/// its hub (the child running `serve`) is measured.
fn run_demo(exe: &Path, dir: &Path, idle: Duration) -> Result<Figures, Error> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let demo_dir = dir.join("demo");
    let demo = Process(
        Command::new(exe)
            .arg("demo")
            .arg("--dir")
            .arg(&demo_dir)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    // The sample batch and the refresh take a few seconds; then the demo rests.
    std::thread::sleep(Duration::from_secs(30));
    let hub = child_running(demo.0.id(), "serve").ok_or("the demo's hub is not running")?;
    let start = usage(hub)?;
    std::thread::sleep(idle);
    let end = usage(hub)?;
    let figures = Figures::between(start, end, wal_bytes(&demo_dir.join("hub/hub.sqlite")));
    drop(demo);
    Ok(figures)
}

/// The child of `parent` whose command line holds `word`.
fn child_running(parent: u32, word: &str) -> Option<u32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if ppid == Some(parent) && cmdline.split(|b| *b == 0).any(|arg| arg == word.as_bytes()) {
            return Some(pid);
        }
    }
    None
}

fn serve(exe: &Path, db: &Path) -> Result<(Process, String), Error> {
    let (child, address) = common::spawn_serve(exe, db, &[])?;
    Ok((Process(child), address))
}

fn agent(exe: &Path, dir: &Path, config: &serde_json::Value) -> Result<Process, Error> {
    let path = dir.join("agent.json");
    std::fs::write(&path, serde_json::to_vec(config)?)?;
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    Ok(Process(
        Command::new(exe)
            .arg("agent")
            .arg("--config")
            .arg(&path)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?,
    ))
}
