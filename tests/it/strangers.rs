//! 2 and 6 against the real daemon over real sockets: nothing anonymous costs
//! more than a constant (`/metrics` from a snapshot on a hub of 300,000 commands, its own share
//! of the database, tokens checked in memory and a rotation by the CLI picked up), no
//! credential takes every connection (the agent token's slow bodies and waiting claims leave
//! `/health` and the client answered; a body has its own deadline), an optional metrics token,
//! and sign-in failures logged as a summary. Waits are bounded polls; the latency bound is the
//! issue's own (< 1 s), far above what the hub takes.

use crate::support::*;
#[path = "../../benches/common/scrapers.rs"]
mod scrapers;
use scrapers::{add_done_commands, read_answer};
use serde_json::json;
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Sends one request on a new connection and reads its status line; how long it took.
fn timed(address: &str, head: &str, body: &str) -> (u16, Duration) {
    let started = Instant::now();
    let stream = send_raw(address, head, body);
    let status = read_answer(&mut BufReader::new(stream)).unwrap_or(0);
    (status, started.elapsed())
}

/// A claim of the agent `name` that waits up to `wait_seconds` for work (an agent whose
/// settings are older is answered at once, with them: `settings_version` is the hub's).
fn claim_of(name: &str, wait_seconds: u32, settings_version: i64) -> String {
    json!({"kind": "claim", "id": format!("{name}-{}", rand_suffix()), "agent": name,
           "sent_at": "2026-11-29T10:00:00Z", "agent_version": "1.4.0",
           "settings_version": settings_version, "max_commands": 1, "wait_seconds": wait_seconds})
    .to_string()
}

/// A claim of the agent `name` that is answered at once.
fn claim(name: &str) -> String {
    claim_of(name, 0, 0)
}

/// A request id of its own for each claim.
fn rand_suffix() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::SeqCst)
}

fn claim_head(agent: &str) -> String {
    format!(
        "POST /agent/claim HTTP/1.1\r\nAuthorization: Bearer {agent}\r\nContent-Type: application/json\r\n"
    )
}

fn client_head(client: &str) -> String {
    format!("GET /projects HTTP/1.1\r\nAuthorization: Bearer {client}\r\n")
}

/// A hub of `commands` commands (one queued, the rest done long ago), written in one statement,
/// and its client and agent tokens.
fn hub_of(dir: &TestDir, commands: u32) -> (String, String) {
    let (mut hub, _relay, agent) = relay_hub(dir);
    hub.enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
        {"type": "comment", "params": {"key": "AURORA-5", "body": "первая"}}]})))
        .unwrap();
    let client = hub.tokens().unwrap().unwrap().client;
    drop(hub);
    add_done_commands(&dir.db(), commands).unwrap();
    (client, agent)
}

/// 100 anonymous keep-alive `/metrics` clients (and 150 idle connections)
/// on a hub of 300,000 commands leave every agent and client request answered in under a
/// second, and the scrapers are answered too.
#[test]
fn anonymous_metrics_clients_leave_agents_and_clients_answered() {
    let dir = TestDir::new();
    let (client, agent) = hub_of(&dir, 300_000);
    let daemon = Daemon::start(&dir.db(), &[]);
    let address = daemon.address.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let scraped = Arc::new(AtomicUsize::new(0));
    let scrapers: Vec<_> = (0..100)
        .map(|_| {
            let (address, stop, scraped) = (address.clone(), stop.clone(), scraped.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let Ok(stream) = TcpStream::connect(&address) else {
                        continue;
                    };
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut writer = stream.try_clone().unwrap();
                    let mut reader = BufReader::new(stream);
                    while !stop.load(Ordering::SeqCst) {
                        let sent =
                            write!(writer, "GET /metrics HTTP/1.1\r\nHost: {address}\r\n\r\n");
                        match sent.ok().and_then(|()| read_answer(&mut reader)) {
                            Some(200) => {
                                scraped.fetch_add(1, Ordering::SeqCst);
                            }
                            _ => break,
                        }
                    }
                }
            })
        })
        .collect();
    let idle: Vec<TcpStream> = (0..150)
        .filter_map(|_| TcpStream::connect(&address).ok())
        .collect();
    // The scrapers at work before the probes.
    let started = Instant::now();
    while scraped.load(Ordering::SeqCst) < 200 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the scrapers were not answered"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut slowest = Duration::ZERO;
    for n in 0..10 {
        let (status, took) = timed(&address, &claim_head(&agent), &claim(&format!("a{n}")));
        assert_eq!(status, 200, "claim {n}");
        slowest = slowest.max(took);
        let (status, took) = timed(&address, &client_head(&client), "");
        assert_eq!(status, 200, "client {n}");
        slowest = slowest.max(took);
    }
    let during = scraped.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    for scraper in scrapers {
        scraper.join().unwrap();
    }
    drop(idle);
    println!(
        "20 agent and client requests under 100 scrapers: slowest {slowest:?}; {during} scrapes answered"
    );
    assert!(
        slowest < Duration::from_secs(1),
        "an agent or client request took {slowest:?}"
    );
}

/// The agent token (in every relay file on the share) sends 150 slow bodies
/// and 150 claims that wait, under distinct names: it gets at most half the connections, the
/// rest are answered 503 at once, and `/health` and the client are answered meanwhile.
#[test]
fn the_agent_tokens_slow_bodies_and_waiting_claims_leave_health_and_the_client_answered() {
    let dir = TestDir::new();
    // Nothing queued: every claim waits.
    let (hub, _relay, agent) = relay_hub(&dir);
    let client = hub.tokens().unwrap().unwrap().client;
    let version = hub.agent_settings().unwrap().0;
    drop(hub);
    let daemon = Daemon::start(&dir.db(), &[]);
    let address = daemon.address.clone();
    let mut held: Vec<TcpStream> = Vec::new();
    for n in 0..300 {
        let mut stream = TcpStream::connect(&address).unwrap();
        if n % 2 == 0 {
            // A body that never comes whole.
            write!(
                stream,
                "{}Host: {address}\r\nContent-Length: 1000\r\n\r\n{{\"kind\"",
                claim_head(&agent)
            )
            .unwrap();
        } else {
            // A claim that waits for work, each under a name of its own.
            let body = claim_of(&format!("waiting-{n}"), 600, version);
            write!(
                stream,
                "{}Host: {address}\r\nContent-Length: {}\r\n\r\n{body}",
                claim_head(&agent),
                body.len()
            )
            .unwrap();
        }
        held.push(stream);
    }
    // Those past the agent's cap (half the 256 connections) are answered 503 and closed.
    wait_until_closed(&mut held, 300 - 128, Duration::from_secs(30));
    let (health, health_took) = timed(&address, "GET /health HTTP/1.1\r\n", "");
    let (projects, client_took) = timed(&address, &client_head(&client), "");
    println!("under 300 agent requests: /health {health_took:?}, client {client_took:?}");
    assert_eq!(health, 200, "/health");
    assert_eq!(projects, 200, "the client");
    // The agent's own new request is refused at once, not held.
    let (status, _) = timed(
        &address,
        &claim_head(&agent),
        &claim_of("late", 600, version),
    );
    assert_eq!(status, 503);
    let still = held
        .iter_mut()
        .map(|stream| closed_by_hub(stream, &mut Vec::new()))
        .filter(|closed| !closed)
        .count();
    assert!(
        still <= 128,
        "{still} agent requests held, over half the connections"
    );
}

/// A body has its own read deadline, whatever the token: one that stops coming is answered 408
/// once it passes, and the place it held is given back.
#[test]
fn a_body_that_stops_coming_is_answered_408_at_its_deadline() {
    let dir = TestDir::new();
    let (_client, agent) = hub_of(&dir, 1);
    let daemon = Daemon::start(&dir.db(), &["--http-body-timeout-seconds", "1"]);
    let mut stream = TcpStream::connect(&daemon.address).unwrap();
    write!(
        stream,
        "{}Host: {}\r\nContent-Length: 1000\r\n\r\n{{\"kind\"",
        claim_head(&agent),
        daemon.address
    )
    .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let started = Instant::now();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.contains("тело запроса не пришло целиком за 1 с"),
        "{answer}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}

/// Tokens are checked in memory: a rotation by the CLI while the hub runs is in force within
/// seconds (the old token refused, the new one served), with no request paying for the look.
#[test]
fn a_token_rotated_by_the_cli_is_in_force_within_seconds() {
    let dir = TestDir::new();
    let (_client, agent) = hub_of(&dir, 1);
    let daemon = Daemon::start(&dir.db(), &[]);
    let address = daemon.address.clone();
    assert_eq!(http(&address, "GET", "/agents", Some(&agent), None).0, 403);
    run_ok(&dir.db(), &["tokens", "--rotate", "agent"]);
    let (reader, _) =
        jira_hub::service::HubConnection::open(&dir.db(), Arc::new(jira_hub::clock::SystemClock))
            .unwrap();
    let fresh = reader.tokens().unwrap().unwrap().agent;
    drop(reader);
    assert_ne!(fresh, agent);
    let started = Instant::now();
    loop {
        let old = http(&address, "GET", "/agents", Some(&agent), None).0;
        let new = http(&address, "GET", "/agents", Some(&fresh), None).0;
        if (old, new) == (401, 403) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the rotation was not in force: {old}, {new}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `--metrics-token-file`: `/metrics` needs that token (401 with `WWW-Authenticate` otherwise,
/// the client's and agent's tokens included); `/health` and `/ready` need none. A file that
/// cannot be read stops the start with its name.
#[test]
fn a_metrics_token_guards_metrics() {
    let dir = TestDir::new();
    let (client, _agent) = hub_of(&dir, 1);
    let file = dir.path().join("metrics.token");
    std::fs::write(&file, "s3cret-scrape\n").unwrap();
    let daemon = Daemon::start(&dir.db(), &["--metrics-token-file", file.to_str().unwrap()]);
    let address = daemon.address.clone();
    let (status, body) = http(&address, "GET", "/metrics", None, None);
    assert_eq!(status, 401, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--metrics-token-file")
    );
    assert_eq!(
        http(&address, "GET", "/metrics", Some("wrong"), None).0,
        401
    );
    assert_eq!(
        http(&address, "GET", "/metrics", Some(&client), None).0,
        401
    );
    let (status, text) = http(&address, "GET", "/metrics", Some("s3cret-scrape"), None);
    assert_eq!(status, 200);
    assert!(
        text.as_str().unwrap().contains("jira_hub_commands"),
        "{text}"
    );
    assert_eq!(http(&address, "GET", "/health", None, None).0, 200);
    assert_eq!(http(&address, "GET", "/ready", None, None).0, 200);
    drop(daemon);

    let missing = dir.path().join("absent.token");
    let out = run(
        &dir.db(),
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics-token-file",
            missing.to_str().unwrap(),
        ],
    );
    assert_ne!(out.code, 0, "{out:?}");
    assert!(
        out.stderr
            .contains("не удалось прочитать файл токена метрик")
            && out.stderr.contains("absent.token"),
        "{out:?}"
    );
}

/// An agent's free-text reason is never a label of `/metrics`, only its class.
#[test]
fn metrics_labels_are_bounded_words() {
    let dir = TestDir::new();
    let (_client, agent) = hub_of(&dir, 1);
    let daemon = Daemon::start(&dir.db(), &[]);
    let address = daemon.address.clone();
    for (name, reason) in [
        (
            "free",
            "anything at all 7f3a9c: a text no dashboard should get as a series",
        ),
        ("held", "Jira недоступна: нет соединения"),
    ] {
        let heartbeat = json!({"kind": "heartbeat", "id": format!("h-{name}"), "agent": name,
            "sent_at": "2026-11-29T10:00:00Z", "agent_version": "1", "jira_ok": false,
            "last_error": reason});
        assert_eq!(
            http(
                &address,
                "POST",
                "/agent/heartbeat",
                Some(&agent),
                Some(&heartbeat)
            )
            .0,
            200
        );
    }
    let (_, text) = http(&address, "GET", "/metrics", None, None);
    let text = text.as_str().unwrap().to_string();
    assert!(
        text.contains("jira_hub_agent_jira_held_seconds{agent=\"free\",reason=\"other\"}"),
        "{text}"
    );
    assert!(
        text.contains("jira_hub_agent_jira_held_seconds{agent=\"held\",reason=\"unreachable\"}"),
        "{text}"
    );
    assert!(!text.contains("7f3a9c"), "{text}");
}

/// Wrong sign-ins from 120 rotating addresses are logged as a summary (at most
/// one line a minute), not a line per guess.
#[test]
fn wrong_sign_ins_from_rotating_addresses_are_logged_as_a_summary() {
    let dir = TestDir::new();
    let (_client, _agent) = hub_of(&dir, 1);
    let log = dir.path().join("serve.log");
    let daemon = Daemon::start_logging_to(&dir.db(), &[], &log);
    let address = daemon.address.clone();
    let to: std::net::SocketAddr = address.parse().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for n in 0..120u8 {
        let stream = runtime.block_on(async {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket
                .bind((std::net::Ipv4Addr::new(127, 0, 1, n), 0).into())
                .unwrap();
            socket.connect(to).await.unwrap().into_std().unwrap()
        });
        stream.set_nonblocking(false).unwrap();
        let form = "token=wrong";
        let (status, _) = {
            let mut stream = stream;
            write!(
                stream,
                "POST /ui/sign-in HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\
                 Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
                form.len()
            )
            .unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(30)))
                .unwrap();
            (read_answer(&mut BufReader::new(stream)).unwrap_or(0), ())
        };
        assert_eq!(status, 401, "guess {n}");
    }
    drop(daemon);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines = text
        .lines()
        .filter(|line| line.contains("failed console sign-ins"))
        .count();
    assert!(
        (1..=2).contains(&lines),
        "{lines} lines about failed sign-ins:\n{text}"
    );
}
