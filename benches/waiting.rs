//! Thousands of waiting agents (`cargo bench --bench waiting`), against the release
//! binary serving a relay folder and HTTP:
//!
//! 1. 2,000 claims over HTTP (`wait_seconds` 900, one connection each) and 2,000 claim files in
//!    the relay's `inbox/`, every one of a distinct agent name, all with nothing to hand out;
//! 2. held for 60 s: the hub's CPU share (`/proc/<pid>/stat`), its peak resident memory (VmRSS,
//!    sampled every 100 ms), the growth of its WAL, whether any claim was answered meanwhile
//!    (a 503 to a claim below the connection cap is a failure), and every second how long
//!    `GET /health` and an agent's heartbeat take on a new connection;
//! 3. then one command enqueued (`POST /batches`): how long until a waiting agent has it (an
//!    HTTP claim's answer or a relay answer file carrying it);
//! 4. then every claim goes away (connections closed, files taken back) and, 20 s later, the
//!    hub's resident memory.
//!
//! Targets: CPU < 5 % of a core, peak RSS < 200 MB and < 64 MB after, WAL growth < 4 MB, no 503,
//! `/health` and the heartbeat within 100 ms, the command at an agent within 100 ms.
//!
//! The hub runs with `--http-max-connections 4096`: the default cap (256) is below 2,000
//! connections, and a claim beyond the cap is not "below the cap". `BENCH_WAITING_HTTP`,
//! `BENCH_WAITING_RELAY` (default 2000 each) and `BENCH_WAITING_SECONDS` (default 60) change the
//! sizes; `BENCH_DAEMON_EXE` runs another build of the hub (a baseline) instead of this one. The
//! bench and the hub need a descriptor each per connection: `ulimit -n` of at least 4,200 (the
//! bench fails naming the connect error otherwise).

mod common;
#[path = "support/relay.rs"]
#[allow(dead_code)] // the daemon is started here with its own flags
mod relay_support;

use common::{clock_ticks, cpu_ticks, size, status_kib, wal_bytes};
use relay_support::{Error, drop_file, setup};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MAX_CONNECTIONS: u32 = 4096;

struct Daemon(std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() -> Result<(), Error> {
    let http_claims = size("BENCH_WAITING_HTTP", 2000);
    let relay_claims = size("BENCH_WAITING_RELAY", 2000);
    let hold = Duration::from_secs(size("BENCH_WAITING_SECONDS", 60) as u64);
    let setup = setup()?;
    let settings_version = setup.hub.settings()?.settings_version;
    let client = setup.hub.tokens()?.ok_or("no tokens")?.client;

    // The real daemon, with room for every connection.
    let max_connections = MAX_CONNECTIONS.to_string();
    let (child, address) = common::spawn_serve(
        &relay_support::daemon_exe(),
        &setup.db,
        &["--http-max-connections", &max_connections],
    )
    .map_err(|e| e.to_string())?;
    let daemon = Daemon(child);
    let pid = daemon.0.id();
    std::thread::sleep(Duration::from_secs(2));
    let rss_start = rss(pid)?;
    let wal_start = wal_bytes(&setup.db);
    let inbox = setup.relay.join("inbox");
    let outbox = setup.relay.join("outbox");

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let now = jira_hub_time();
    // 1. The HTTP claims, each on its own connection, each of its own agent.
    let answered = Arc::new(AtomicU64::new(0));
    let busy = Arc::new(AtomicU64::new(0));
    let (got_command, mut command_seen) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let mut tasks = Vec::with_capacity(http_claims);
    for i in 0..http_claims {
        let body = json!({"kind": "claim", "id": format!("hc{i}"), "agent": format!("http-{i}"),
            "sent_at": now, "agent_version": "bench", "settings_version": settings_version,
            "max_commands": 1, "wait_seconds": 900})
        .to_string();
        let request = post("/agent/claim", &setup.token, &body);
        let (address, answered, busy, got_command) = (
            address.clone(),
            answered.clone(),
            busy.clone(),
            got_command.clone(),
        );
        tasks.push(runtime.spawn(async move {
            let Ok((status, body)) = exchange(&address, &request).await else {
                return;
            };
            answered.fetch_add(1, Ordering::SeqCst);
            if status == 503 {
                busy.fetch_add(1, Ordering::SeqCst);
            }
            if body.contains("\"commands\":[{") {
                let _ = got_command.send(Instant::now());
            }
        }));
    }
    // 2. The relay claims, each of its own agent.
    for i in 0..relay_claims {
        let claim = json!({"kind": "claim", "id": format!("rc{i}"), "agent": format!("relay-{i}"),
            "sent_at": now, "token": setup.token, "agent_version": "bench",
            "settings_version": settings_version, "max_commands": 1, "wait_seconds": 900});
        drop_file(&inbox, &format!("claim-rc{i}.json"), &claim)?;
    }
    // Every claim is waiting.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let waiting = runtime.block_on(metric(&address, &client, "jira_hub_claims_waiting"))?;
        if waiting as usize >= http_claims + relay_claims {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "only {waiting} of {} claims waiting after 120 s",
                http_claims + relay_claims
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let answered_before = answered.load(Ordering::SeqCst);
    println!(
        "{http_claims} HTTP claims and {relay_claims} relay claims waiting (distinct agents); held {} s, --http-max-connections {MAX_CONNECTIONS}",
        hold.as_secs()
    );

    // The hold.
    let start = (Instant::now(), cpu_ticks(pid)?);
    let held_from = Instant::now();
    let mut peak_rss = rss(pid)?;
    let mut worst_health = Duration::ZERO;
    let mut worst_heartbeat = Duration::ZERO;
    let mut probes = 0;
    let mut next_probe = Instant::now();
    while held_from.elapsed() < hold {
        peak_rss = peak_rss.max(rss(pid)?);
        if Instant::now() >= next_probe {
            next_probe += Duration::from_secs(1);
            probes += 1;
            let took = Instant::now();
            let (status, _) = runtime.block_on(exchange(&address, &get("/health")))?;
            worst_health = worst_health.max(took.elapsed());
            if status != 200 {
                return Err(format!("/health answered {status}").into());
            }
            let heartbeat = json!({"kind": "heartbeat", "id": format!("hb{probes}"),
                "agent": "probe", "sent_at": jira_hub_time(), "agent_version": "bench",
                "jira_ok": true, "heartbeat_seconds": 60})
            .to_string();
            let took = Instant::now();
            let (status, body) = runtime.block_on(exchange(
                &address,
                &post("/agent/heartbeat", &setup.token, &heartbeat),
            ))?;
            worst_heartbeat = worst_heartbeat.max(took.elapsed());
            if status != 200 {
                return Err(format!("the heartbeat answered {status}: {body}").into());
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let end = (Instant::now(), cpu_ticks(pid)?);
    let cpu =
        (end.1 - start.1) as f64 / clock_ticks() / end.0.duration_since(start.0).as_secs_f64()
            * 100.0;
    let wal_end = wal_bytes(&setup.db);
    let early = answered.load(Ordering::SeqCst) - answered_before;

    // 3. One command enqueued: how long until a waiting agent has it.
    let body = json!({"title": "to a waiting agent", "author": "bench",
        "commands": [{"type": "comment", "params": {"key": "AURORA-1", "body": "bench"}}]})
    .to_string();
    let enqueued = Instant::now();
    let (status, answer) =
        runtime.block_on(exchange(&address, &post("/batches", &client, &body)))?;
    if status != 201 {
        return Err(format!("POST /batches answered {status}: {answer}").into());
    }
    let reached = loop {
        if let Ok(at) = command_seen.try_recv() {
            break at;
        }
        if relay_answer_with_command(&outbox) {
            break Instant::now();
        }
        if enqueued.elapsed() > Duration::from_secs(30) {
            return Err("no waiting agent got the command in 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let to_agent = reached.saturating_duration_since(enqueued);

    // 4. Every claim goes away.
    for task in &tasks {
        task.abort();
    }
    runtime.shutdown_timeout(Duration::from_secs(5));
    for i in 0..relay_claims {
        let _ = std::fs::remove_file(inbox.join(format!("claim-rc{i}.json")));
    }
    std::thread::sleep(Duration::from_secs(20));
    let rss_after = rss(pid)?;

    let mb = |bytes: u64| bytes as f64 / 1024.0 / 1024.0;
    let verdict = |ok: bool| if ok { "ok" } else { "OVER" };
    println!(
        "hub CPU while they wait      {cpu:>8.2} % of a core          (target < 5 %: {})",
        verdict(cpu < 5.0)
    );
    println!(
        "hub RSS                      {:>8.1} MB at start, peak {:.1} MB (target < 200: {}), {:.1} MB 20 s after they left (target < 64: {})",
        mb(rss_start),
        mb(peak_rss),
        verdict(mb(peak_rss) < 200.0),
        mb(rss_after),
        verdict(mb(rss_after) < 64.0)
    );
    println!(
        "WAL                          {:>8.1} MB at start, {:.1} MB at the end: growth {:.1} MB (target < 4: {})",
        mb(wal_start),
        mb(wal_end),
        mb(wal_end.saturating_sub(wal_start)),
        verdict(wal_end.saturating_sub(wal_start) < 4 * 1024 * 1024)
    );
    println!(
        "claims answered while held   {early:>8} ({} of them 503)      (target 0 503: {})",
        busy.load(Ordering::SeqCst),
        verdict(busy.load(Ordering::SeqCst) == 0)
    );
    println!(
        "/health, heartbeat           {:>8.1} ms, {:.1} ms worst of {probes} each (target < 100: {})",
        common::ms(worst_health),
        common::ms(worst_heartbeat),
        verdict(
            worst_health < Duration::from_millis(100)
                && worst_heartbeat < Duration::from_millis(100)
        )
    );
    println!(
        "command to a waiting agent   {:>8.1} ms                     (target < 100: {})",
        common::ms(to_agent),
        verdict(to_agent < Duration::from_millis(100))
    );
    drop(daemon);
    drop(setup);
    Ok(())
}

/// The time now as agents write `sent_at`.
fn jira_hub_time() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Whether a relay answer in `outbox` hands out a command.
fn relay_answer_with_command(outbox: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(outbox) else {
        return false;
    };
    entries.flatten().any(|entry| {
        std::fs::read_to_string(entry.path()).is_ok_and(|text| {
            serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|answer| {
                answer["commands"]
                    .as_array()
                    .is_some_and(|commands| !commands.is_empty())
            })
        })
    })
}

fn post(path: &str, token: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
}

/// One request on a new connection; the status and the body (read to the connection's end).
async fn exchange(address: &str, request: &str) -> Result<(u16, String), Error> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status in {text:?}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, body)| body.to_string());
    Ok((status, body))
}

/// A gauge of `/metrics`.
async fn metric(address: &str, token: &str, name: &str) -> Result<f64, Error> {
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    let (_, body) = exchange(address, &request).await?;
    body.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| format!("no {name} in /metrics").into())
}

/// The process's resident memory, in bytes.
fn rss(pid: u32) -> std::io::Result<u64> {
    Ok(status_kib(pid, "VmRSS:")? * 1024)
}
