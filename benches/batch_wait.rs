//! 1,000 clients waiting for a batch (`cargo bench --bench batch_wait`), against the hub's binary
//! serving HTTP:
//!
//! 1. the baseline: 1,000 keep-alive connections, each having read the batch once (`GET
//!    /batches/{id}`, its `ETag` kept), then idle for the hold: the hub's CPU share and resident
//!    memory (VmRSS, sampled every 100 ms) with that many connections open and nothing asked;
//! 2. the same 1,000 connections each sending `GET /batches/{id}?wait_seconds=60` with
//!    `If-None-Match: <ETag>`, held for the same time: CPU and memory while they wait;
//! 3. then the batch changes (`POST /batches/{id}/cancel`): how long until each waiting client
//!    has the new batch (200 with another `ETag`), its median, 99th percentile and last;
//! 4. beside it, what polling costs for the same news: the 1,000 clients asking once a second
//!    (`If-None-Match`, 304 while nothing changed) for the hold: CPU and memory.
//!
//! `BENCH_BATCH_WAITERS` (default 1000) and `BENCH_BATCH_WAIT_SECONDS` (default 20, the hold of
//! each phase) change the sizes; `BENCH_DAEMON_EXE` runs another build of the hub. The hub runs
//! with `--http-max-connections 4096` (the default cap, 256, is below 1,000 connections) and
//! `--http-header-timeout-seconds 120` (an idle kept-alive connection is closed at the header
//! timeout, 10 s by default, hyper's timer running from its last answer); the
//! bench and the hub need a descriptor per connection (`ulimit -n` of at least 2,100).

mod common;
#[path = "support/relay.rs"]
#[allow(dead_code)] // only its setup is used here
mod relay_support;

use common::{clock_ticks, cpu_ticks, size, status_kib};
use relay_support::setup;
use serde_json::json;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// What fails the bench (sendable: the clients are tasks of their own).
type Error = Box<dyn std::error::Error + Send + Sync>;

struct Daemon(std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What the hub cost over one phase.
struct Cost {
    cpu_percent: f64,
    peak_rss: u64,
}

fn main() -> Result<(), Error> {
    let clients = size("BENCH_BATCH_WAITERS", 1000);
    let hold = Duration::from_secs(size("BENCH_BATCH_WAIT_SECONDS", 20) as u64);
    let setup = setup().map_err(|e| e.to_string())?;
    let token = setup.hub.tokens()?.ok_or("no tokens")?.client;
    let (child, address) = common::spawn_serve(
        &relay_support::daemon_exe(),
        &setup.db,
        // hyper's header read timer runs on a kept-alive connection from the end of its last
        // answer, so an idle one is closed at `--http-header-timeout-seconds` (10): the idle
        // baseline holds longer than that.
        &[
            "--http-max-connections",
            "4096",
            "--http-header-timeout-seconds",
            "120",
        ],
    )
    .map_err(|e| e.to_string())?;
    let daemon = Daemon(child);
    let pid = daemon.0.id();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let body = json!({"title": "waited for", "author": "bench",
        "commands": [{"type": "comment", "params": {"key": "AURORA-1", "body": "bench"}}]})
    .to_string();
    let mut connection = runtime.block_on(TcpStream::connect(&address))?;
    let (status, _, created) =
        runtime.block_on(exchange(&mut connection, &post("/batches", &token, &body)))?;
    if status != 201 {
        return Err(format!("POST /batches answered {status}: {created}").into());
    }
    let id = serde_json::from_str::<serde_json::Value>(&created)?["id"]
        .as_i64()
        .ok_or("no batch id")?;
    let path = format!("/batches/{id}");
    let rss_start = rss(pid)?;

    // 1. The baseline: every connection has read the batch once, then idles.
    let mut connections = Vec::with_capacity(clients);
    let mut etag = String::new();
    for _ in 0..clients {
        let mut stream = runtime.block_on(TcpStream::connect(&address))?;
        let (status, headers, _) =
            runtime.block_on(exchange(&mut stream, &get(&path, &token, None)))?;
        if status != 200 {
            return Err(format!("GET {path} answered {status}").into());
        }
        etag = header(&headers, "etag").ok_or("no ETag")?;
        connections.push(stream);
    }
    println!(
        "{clients} keep-alive connections of one client each, batch {id}; each phase held {} s",
        hold.as_secs()
    );
    let idle = measure(pid, hold)?;

    // 2. Each connection waits for a change.
    let request = get(&format!("{path}?wait_seconds=60"), &token, Some(&etag));
    let mut waiting = Vec::with_capacity(clients);
    for mut stream in connections {
        let request = request.clone();
        waiting.push(runtime.spawn(async move {
            stream.write_all(request.as_bytes()).await?;
            let answer = read_answer(&mut stream).await;
            Ok::<_, Error>((answer?, Instant::now()))
        }));
    }
    // Until every request is read and held (nothing answers them while the batch is as it is).
    std::thread::sleep(Duration::from_secs(2));
    let held = measure(pid, hold)?;
    let early = waiting.iter().filter(|task| task.is_finished()).count();

    // 3. The change.
    let changed = Instant::now();
    let mut other = runtime.block_on(TcpStream::connect(&address))?;
    let (status, _, _) = runtime.block_on(exchange(
        &mut other,
        &post(&format!("{path}/cancel"), &token, ""),
    ))?;
    if status != 200 {
        return Err(format!("the cancel answered {status}").into());
    }
    let cancel_took = changed.elapsed();
    let mut reached = Vec::with_capacity(clients);
    for task in waiting {
        let ((status, headers, _), at) = runtime.block_on(task)??;
        if status != 200 || header(&headers, "etag").as_deref() == Some(etag.as_str()) {
            return Err(format!("a waiting client got {status} after the change").into());
        }
        reached.push(at.saturating_duration_since(changed));
    }
    reached.sort();
    let (first, p50, p99, last) = (
        reached[0],
        reached[reached.len() / 2],
        reached[reached.len() * 99 / 100],
        reached[reached.len() - 1],
    );

    // 4. Polling once a second instead, on new keep-alive connections.
    let (_, headers, _) = runtime.block_on(exchange(&mut other, &get(&path, &token, None)))?;
    let etag = header(&headers, "etag").ok_or("no ETag")?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut pollers = Vec::with_capacity(clients);
    for n in 0..clients {
        let (address, request, stop) = (
            address.clone(),
            get(&path, &token, Some(&etag)),
            stop.clone(),
        );
        pollers.push(runtime.spawn(async move {
            let mut stream = TcpStream::connect(&address).await?;
            // Spread over the second, as independent clients are.
            tokio::time::sleep(Duration::from_millis((n % 1000) as u64)).await;
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                tick.tick().await;
                let (status, _, _) = exchange(&mut stream, &request).await?;
                if status != 304 {
                    return Err::<(), Error>(format!("a poll answered {status}").into());
                }
            }
            Ok(())
        }));
    }
    std::thread::sleep(Duration::from_secs(2));
    let polling = measure(pid, hold)?;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for poller in pollers {
        runtime.block_on(poller)??;
    }

    let mb = |bytes: u64| bytes as f64 / 1024.0 / 1024.0;
    println!("hub RSS at start (no client) {:>8.1} MB", mb(rss_start));
    for (name, cost) in [
        ("idle keep-alive (baseline)", &idle),
        ("waiting (wait_seconds=60)", &held),
        ("polling once a second", &polling),
    ] {
        println!(
            "{name:<28} CPU {:>6.2} % of a core, peak RSS {:>6.1} MB",
            cost.cpu_percent,
            mb(cost.peak_rss)
        );
    }
    println!(
        "waiting vs baseline          CPU {:+.2} points, RSS {:+.1} MB ({:.1} KB a waiting client)",
        held.cpu_percent - idle.cpu_percent,
        mb(held.peak_rss) - mb(idle.peak_rss),
        (held.peak_rss as f64 - idle.peak_rss as f64) / 1024.0 / clients as f64
    );
    println!("answered before the change   {early:>8} (expected 0)");
    println!(
        "change to each waiting client: first {:.1} ms, median {:.1} ms, p99 {:.1} ms, last {:.1} ms (of {clients}; the change itself, POST .../cancel answered, {:.1} ms; a poller once a second: 500 ms on average, 1,000 at worst)",
        common::ms(first),
        common::ms(p50),
        common::ms(p99),
        common::ms(last),
        common::ms(cancel_took)
    );
    drop(daemon);
    drop(setup);
    if early > 0 {
        return Err(format!("{early} waiting reads were answered before the change").into());
    }
    Ok(())
}

/// The hub's CPU share and peak resident memory over `hold`.
fn measure(pid: u32, hold: Duration) -> Result<Cost, Error> {
    let start = (Instant::now(), cpu_ticks(pid)?);
    let mut peak_rss = rss(pid)?;
    while start.0.elapsed() < hold {
        peak_rss = peak_rss.max(rss(pid)?);
        std::thread::sleep(Duration::from_millis(100));
    }
    let end = (Instant::now(), cpu_ticks(pid)?);
    Ok(Cost {
        cpu_percent: (end.1 - start.1) as f64
            / clock_ticks()
            / end.0.duration_since(start.0).as_secs_f64()
            * 100.0,
        peak_rss,
    })
}

fn post(path: &str, token: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn get(path: &str, token: &str, etag: Option<&str>) -> String {
    let condition = etag.map_or(String::new(), |etag| format!("If-None-Match: {etag}\r\n"));
    format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n{condition}\r\n"
    )
}

/// The value of a header among `headers` (lowercase names).
fn header(headers: &[(String, String)], name: &str) -> Option<String> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, value)| value.clone())
}

type Answer = (u16, Vec<(String, String)>, String);

/// One request on a kept-alive connection, and its answer.
async fn exchange(stream: &mut TcpStream, request: &str) -> Result<Answer, Error> {
    stream.write_all(request.as_bytes()).await?;
    read_answer(stream).await
}

/// One answer (status, headers, body by its `Content-Length`) off a kept-alive connection.
async fn read_answer(stream: &mut TcpStream) -> Result<Answer, Error> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status in {line:?}"))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).await?;
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let length: usize = header(&headers, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    if !reader.buffer().is_empty() {
        return Err("more than one answer came".into());
    }
    Ok((status, headers, String::from_utf8_lossy(&body).into_owned()))
}

/// The process's resident memory, in bytes.
fn rss(pid: u32) -> std::io::Result<u64> {
    Ok(status_kib(pid, "VmRSS:")? * 1024)
}
