//! Load on the real daemon over loopback (`cargo bench --bench load`): 8 clients read project
//! slices and enqueue batches while an agent claims and reports over HTTP, for `LOAD_SECONDS`
//! (default 60). Prints requests/s and p50/p99 latency per kind; fails on any 5xx (a
//! `SQLITE_BUSY` reaching a client would be a 503).

use jira_hub::clock::SystemClock;
use jira_hub::service::HubConnection;
use serde_json::{Value, json};
use std::io::{BufRead, Read, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error + Send + Sync>;

const CLIENTS: usize = 8;

fn main() -> Result<(), Error> {
    let seconds: u64 = std::env::var("LOAD_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("data/hub.sqlite");
    let (client_token, agent_token) = prepare(&db)?;

    let mut daemon = Command::new(env!("CARGO_BIN_EXE_jira-hub"))
        .arg("--db")
        .arg(&db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let mut lines = std::io::BufReader::new(daemon.stdout.take().ok_or("stdout")?).lines();
    let first = lines.next().ok_or("no output")??;
    let address = first
        .rsplit("http://")
        .next()
        .ok_or("no address")?
        .trim()
        .to_string();
    std::thread::spawn(move || for _ in lines {});

    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut workers = Vec::new();
    for n in 0..CLIENTS {
        let (address, token) = (address.clone(), client_token.clone());
        workers.push(std::thread::spawn(move || {
            client(n, &address, &token, deadline)
        }));
    }
    {
        let (address, token) = (address.clone(), agent_token.clone());
        workers.push(std::thread::spawn(move || {
            agent(&address, &token, deadline)
        }));
    }
    let mut samples: Vec<(&'static str, u16, Duration)> = Vec::new();
    for worker in workers {
        samples.extend(worker.join().map_err(|_| "a worker panicked")??);
    }
    let _ = daemon.kill();
    let _ = daemon.wait();

    let total = samples.len();
    println!(
        "{total} requests in {seconds} s: {:.0} requests/s, {CLIENTS} clients + 1 agent",
        total as f64 / seconds as f64
    );
    let mut kinds: Vec<&str> = samples.iter().map(|s| s.0).collect();
    kinds.sort_unstable();
    kinds.dedup();
    for kind in kinds {
        let mut times: Vec<Duration> = samples
            .iter()
            .filter(|s| s.0 == kind)
            .map(|s| s.2)
            .collect();
        times.sort();
        let at =
            |q: f64| times[((times.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1000.0;
        println!(
            "{kind:<16} {:>7} requests   p50 {:>7.2} ms   p99 {:>7.2} ms",
            times.len(),
            at(0.5),
            at(0.99)
        );
    }
    let server_errors = samples.iter().filter(|s| s.1 >= 500).count();
    let other_errors = samples.iter().filter(|s| (400..500).contains(&s.1)).count();
    println!("5xx answers: {server_errors}; 4xx answers: {other_errors}");
    if server_errors > 0 || other_errors > 0 {
        return Err("the load produced error answers".into());
    }
    Ok(())
}

/// A database with a project, a mirror of 2,000 issues and tokens.
fn prepare(db: &std::path::Path) -> Result<(String, String), Error> {
    let (mut hub, _) = HubConnection::open(db, Arc::new(SystemClock))?;
    let config: Value =
        serde_json::from_str(include_str!("../admin/jira-sync/config.example.json"))?;
    hub.init_from_config(&config, false)?;
    hub.update_settings(
        json!({"auto_refresh_minutes": 0, "pacing": {"max_commands_per_claim": 100}})
            .as_object()
            .ok_or("object")?,
    )?;
    let tokens = hub.tokens()?.ok_or("no tokens")?;
    hub.enqueue_refresh(None, "load")?;
    let claim = jira_hub::protocol::decode_value(
        json!({"kind": "claim", "id": "prep", "agent": "load", "sent_at": "2026-11-29T10:00:00Z",
        "agent_version": "1", "settings_version": 0, "max_commands": 1}),
    )?;
    let jira_hub::protocol::AgentAnswer::Claim(answer) = hub.handle_agent_request(&claim)? else {
        return Err("not a claim answer".into());
    };
    let command = answer.commands.first().ok_or("no refresh")?.id;
    let issues: Vec<Value> = (1..=2000)
        .map(|n| json!({"id": n.to_string(), "key": format!("AURORA-{n}"), "fields": {
            "summary": format!("Задача {n}"), "status": {"name": "В работе"}, "issuetype": {"name": "Задача"},
            "labels": [if n % 2 == 0 { "AWPCA" } else { "OTHER" }], "created": "2026-03-05T10:15:30.000+0300",
            "issuelinks": [{"id": n.to_string(), "type": {"name": "Blocks"}, "outwardIssue": {"key": format!("AURORA-{}", n % 2000 + 1)}}]}}))
        .collect();
    let report = jira_hub::protocol::decode_value(
        json!({"kind": "report", "id": "prep-r", "agent": "load", "sent_at": "2026-11-29T10:00:00Z",
        "results": [{"command_id": command, "delivery": 1, "status": "done", "page": {"start_at": 0, "total": 2000, "issues": issues},
                     "result": {"total": 2000, "boards": []}}]}),
    )?;
    hub.handle_agent_request(&report)?;
    Ok((tokens.client, tokens.agent))
}

fn request(
    address: &str,
    method: &str,
    path: &str,
    token: &str,
    body: Option<&Value>,
) -> Result<(u16, Value), Error> {
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let body = body
        .map(serde_json::to_vec)
        .transpose()?
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: load\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(&body)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let text = String::from_utf8_lossy(&response);
    let status = text.split_whitespace().nth(1).ok_or("no status")?.parse()?;
    let payload = text.split_once("\r\n\r\n").map(|(_, p)| p).unwrap_or("");
    Ok((status, serde_json::from_str(payload).unwrap_or(Value::Null)))
}

type Samples = Vec<(&'static str, u16, Duration)>;

fn timed(
    samples: &mut Samples,
    kind: &'static str,
    call: impl FnOnce() -> Result<(u16, Value), Error>,
) -> Result<Value, Error> {
    let started = Instant::now();
    let (status, body) = call()?;
    samples.push((kind, status, started.elapsed()));
    Ok(body)
}

fn client(n: usize, address: &str, token: &str, deadline: Instant) -> Result<Samples, Error> {
    let mut samples = Vec::new();
    let mut i = 0usize;
    while Instant::now() < deadline {
        i += 1;
        if i.is_multiple_of(3) {
            let batch = json!({"title": format!("load {n}-{i}"), "author": format!("client-{n}"), "project": "AWPCA", "commands": [
                {"type": "comment", "params": {"key": "AURORA-2", "body": format!("комментарий {n}-{i}")}},
                {"type": "transition", "params": {"key": "AURORA-4", "status": "Готово"}}]});
            let view = timed(&mut samples, "POST /batches", || {
                request(address, "POST", "/batches", token, Some(&batch))
            })?;
            if let Some(id) = view["id"].as_i64() {
                timed(&mut samples, "GET /batches/id", || {
                    request(address, "GET", &format!("/batches/{id}"), token, None)
                })?;
            }
        } else {
            timed(&mut samples, "GET slice", || {
                request(address, "GET", "/projects/AWPCA/issues", token, None)
            })?;
        }
    }
    Ok(samples)
}

fn agent(address: &str, token: &str, deadline: Instant) -> Result<Samples, Error> {
    let mut samples = Vec::new();
    let mut n = 0;
    while Instant::now() < deadline {
        n += 1;
        let claim = json!({"kind": "claim", "id": format!("lc{n}"), "agent": "load-agent", "sent_at": "2026-11-29T10:00:00Z",
            "agent_version": "1", "settings_version": 0, "max_commands": 50});
        let answer = timed(&mut samples, "POST agent/claim", || {
            request(address, "POST", "/agent/claim", token, Some(&claim))
        })?;
        let commands = answer["commands"].as_array().cloned().unwrap_or_default();
        if commands.is_empty() {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        let results: Vec<Value> = commands
            .iter()
            .map(|c| json!({"command_id": c["id"], "delivery": c["delivery"], "status": "done", "result": {"ok": true}, "jira_calls": 1}))
            .collect();
        let report = json!({"kind": "report", "id": format!("lr{n}"), "agent": "load-agent", "sent_at": "2026-11-29T10:00:00Z", "results": results});
        timed(&mut samples, "POST agent/report", || {
            request(address, "POST", "/agent/report", token, Some(&report))
        })?;
    }
    Ok(samples)
}
