//! A hub and an agent at rest (`cargo bench --bench idle`), both release builds:
//!
//! - the real `serve` with a relay folder (watched), HTTP listening and its timers on, idle;
//! - then the real `jira-hub agent` pointed at it through the relay, then over HTTP, each idle
//!   (the simulated Jira answers its heartbeats' `serverInfo`).
//!
//! For each process it reads the CPU time (`/proc/<pid>/stat`, utime + stime) and the context
//! switches (voluntary + involuntary, summed over `/proc/<pid>/task/*`: a thread that ended in
//! between takes its own away, so the count errs low by those) at the start and the end of the
//! idle interval, and prints the CPU share of one core and the wake-ups per second against the
//! target (under 1% of a core each). Then, while the agent idles, it enqueues a one-command
//! batch (`POST /batches`) a few times and measures how long the command takes to reach Jira
//! through the agent (the simulated Jira's first request for the issue, on the same clock), and
//! how long the hub took to hand it out (the command's `claimed_at` less its batch's
//! `created_at`, the hub's clock); medians are printed.
//!
//! `BENCH_IDLE_SECONDS` (default 60) is the idle interval; `BENCH_IDLE_SAMPLES` (default 5) the
//! latency samples per transport.

mod common;
use jira_hub::sim::jira as fake_jira;

use common::size;
use fake_jira::{FakeJira, Mode, PROJECT};
use jira_hub::clock::SystemClock;
use jira_hub::service::HubConnection;
use serde_json::{Value, json};
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

type Error = Box<dyn std::error::Error>;

const LABEL: &str = "AWPCA";
/// What each process may cost at rest: a share of one core, in percent.
const TARGET_CPU_PERCENT: f64 = 1.0;

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
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
}

fn usage(pid: u32) -> Result<Usage, Error> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name is in parentheses and may hold spaces: fields count after its `)`.
    let after = stat.rsplit_once(')').ok_or("no ) in stat")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat; `after` starts at field 3.
    let ticks = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
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
    Ok(Usage {
        at: Instant::now(),
        ticks,
        switches,
    })
}

/// Prints the CPU share and the wake-ups per second between two readings.
fn print_usage(label: &str, start: Usage, end: Usage) -> f64 {
    let ticks_per_second = clock_ticks();
    let seconds = end.at.duration_since(start.at).as_secs_f64();
    let cpu = (end.ticks.saturating_sub(start.ticks)) as f64 / ticks_per_second / seconds * 100.0;
    let wakeups = end.switches.saturating_sub(start.switches) as f64 / seconds;
    let verdict = if cpu < TARGET_CPU_PERCENT {
        "ok"
    } else {
        "OVER"
    };
    println!(
        "{label:<44} CPU {cpu:>7.3}% of a core   {wakeups:>9.1} wake-ups/s   over {seconds:.0} s (target < {TARGET_CPU_PERCENT}%: {verdict})"
    );
    cpu
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux when it cannot be asked).
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|ticks| *ticks > 0.0)
        .unwrap_or(100.0)
}

fn main() -> Result<(), Error> {
    let seconds = size("BENCH_IDLE_SECONDS", 60) as u64;
    let samples = size("BENCH_IDLE_SAMPLES", 5);
    let idle = Duration::from_secs(seconds);
    let fake = FakeJira::start(Mode::DataCenter);
    let key = fake
        .seed_issues(PROJECT, LABEL, 1)
        .pop()
        .ok_or("no issue")?;

    let dir = tempfile::tempdir()?;
    let db = dir.path().join("data/hub.sqlite");
    let (mut hub, _) = HubConnection::open(&db, Arc::new(SystemClock))?;
    let config: Value =
        serde_json::from_str(include_str!("../admin/jira-sync/config.example.json"))?;
    hub.init_from_config(&config, false)?;
    let relay = dir.path().join("relay");
    std::fs::create_dir_all(&relay)?;
    // Marked as `jira-hub relay init` marks it: the hub makes its folders only in such a folder.
    std::fs::write(relay.join(".jira-hub-relay"), b"")?;
    // The automatic refresh would give the agent work: off, its timer still runs.
    let update = json!({"relay_dir": relay.display().to_string(), "auto_refresh_minutes": 0,
        "pacing": {"min_interval_ms": 0}});
    hub.update_settings(update.as_object().ok_or("object")?)?;
    let tokens = hub.tokens()?.ok_or("no tokens")?;

    let (daemon, address) = serve(&db)?;
    let hub_pid = daemon.0.id();
    // The daemon has made its folders and settled.
    std::thread::sleep(Duration::from_secs(2));
    println!("idle for {seconds} s each (BENCH_IDLE_SECONDS)");
    let start = usage(hub_pid)?;
    std::thread::sleep(idle);
    print_usage(
        "serve alone (relay watched, HTTP, timers)",
        start,
        usage(hub_pid)?,
    );

    for transport in ["relay", "http"] {
        let mut agent_config = json!({
            "jira_url": fake.url(), "jira_user": fake_jira::USER, "jira_password": fake_jira::PASSWORD,
            "agent_token": tokens.agent, "name": format!("idle-{transport}"),
            "request_timeout_seconds": 60,
        });
        if transport == "relay" {
            agent_config["relay_dir"] = json!(relay.display().to_string());
        } else {
            agent_config["hub_url"] = json!(format!("http://{address}"));
        }
        let agent = agent(dir.path(), transport, &agent_config)?;
        // Its first heartbeat and claim (with the settings) are done.
        std::thread::sleep(Duration::from_secs(3));
        let (hub_start, agent_start) = (usage(hub_pid)?, usage(agent.0.id())?);
        std::thread::sleep(idle);
        let (hub_end, agent_end) = (usage(hub_pid)?, usage(agent.0.id())?);
        print_usage(
            &format!("agent over {transport}, idle"),
            agent_start,
            agent_end,
        );
        print_usage(
            &format!("serve, with the {transport} agent idle"),
            hub_start,
            hub_end,
        );

        let mut to_jira = Vec::new();
        let mut handed_out = Vec::new();
        for sample in 0..samples {
            // The agent is idle again (its last command reported, its next claim waiting).
            std::thread::sleep(Duration::from_millis(1500));
            let label = format!("idle {transport} {sample}");
            let (reached, claimed) =
                latency(&fake, &address, &tokens.client, &key, &mut hub, &label)?;
            to_jira.push(reached);
            handed_out.push(claimed);
        }
        println!(
            "  command enqueued while idle, over {transport}: to Jira median {:.1} ms [{}], handed out median {:.1} ms [{}]",
            common::ms(common::median(&mut to_jira)),
            common::runs(&to_jira).join(", "),
            common::ms(common::median(&mut handed_out)),
            common::runs(&handed_out).join(", "),
        );
        drop(agent);
    }
    drop(daemon);
    Ok(())
}

/// One comment enqueued through the daemon's HTTP API; returns how long until the simulated
/// Jira saw the agent's first request for the issue (the bench's clock), and how long the hub
/// took to hand the command out (its own clock).
fn latency(
    fake: &FakeJira,
    address: &str,
    client_token: &str,
    key: &str,
    hub: &mut HubConnection,
    label: &str,
) -> Result<(Duration, Duration), Error> {
    let body = json!({"title": label, "author": "bench",
        "commands": [{"type": "comment", "params": {"key": key, "body": label}}]});
    let enqueued = SystemTime::now();
    let answer = fake_jira::call(
        &format!("http://{address}"),
        "POST",
        "/batches",
        Some(&format!("Bearer {client_token}")),
        Some(&body),
        Duration::from_secs(30),
    )?;
    if answer.status != 201 {
        return Err(format!("POST /batches answered {}: {}", answer.status, answer.body).into());
    }
    let batch: Value = serde_json::from_str(&answer.body)?;
    let batch_id = batch["id"].as_i64().ok_or("no batch id")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let view = hub.batch(batch_id)?;
        if view.commands.iter().all(|c| c.status.is_terminal()) {
            let claimed = view.commands[0]
                .claimed_at
                .as_ref()
                .and_then(|at| jira_hub::domain::time::parse_utc(at.as_str()))
                .ok_or("never claimed")?;
            let created = jira_hub::domain::time::parse_utc(view.created_at.as_str())
                .ok_or("no created_at")?;
            let handed_out: Duration = (claimed - created).try_into()?;
            let reached = fake
                .requests()
                .iter()
                .filter(|seen| seen.at >= enqueued && seen.path.contains(key))
                .map(|seen| seen.at)
                .min()
                .ok_or("the agent never asked Jira about the issue")?;
            return Ok((reached.duration_since(enqueued)?, handed_out));
        }
        if Instant::now() > deadline {
            return Err(format!("the command was not done in 60 s: {view:?}").into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn serve(db: &Path) -> Result<(Process, String), Error> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_jira-hub"))
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("stdout")?;
    let mut lines = std::io::BufReader::new(stdout).lines();
    let first = lines.next().ok_or("no banner")??;
    let address = first
        .rsplit("http://")
        .next()
        .ok_or("no address in the banner")?
        .trim()
        .to_string();
    std::thread::spawn(move || for _ in lines {});
    Ok((Process(child), address))
}

fn agent(dir: &Path, transport: &str, config: &Value) -> Result<Process, Error> {
    let path = dir.join(format!("agent-{transport}.json"));
    std::fs::write(&path, serde_json::to_vec(config)?)?;
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    Ok(Process(
        Command::new(env!("CARGO_BIN_EXE_jira-hub"))
            .arg("agent")
            .arg("--config")
            .arg(&path)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?,
    ))
}
