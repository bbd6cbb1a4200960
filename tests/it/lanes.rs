//! Each credential in its own lane, and small files never behind big ones, against the real
//! daemon on port 0 and the real relay folder, each attack in miniature through the existing
//! limits: the metrics token's slow sign-ins leave the client its places; large reports holding
//! the reports' memory budget leave relay heartbeats and small HTTP reports answered, and say so
//! in `/metrics` and the log; a report that waits for the budget has its whole body time from its
//! turn. No timed assertion beyond generous bounds.

use crate::support::*;
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Opens a connection and sends a request's headers and the start of a body that never comes
/// whole.
fn stalled(address: &str, head: &str, length: usize) -> TcpStream {
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "{head}Host: {address}\r\nContent-Length: {length}\r\n\r\n{{"
    )
    .unwrap();
    stream
}

/// The agent's report head over HTTP.
fn report_head(agent: &str) -> String {
    format!(
        "POST /agent/report HTTP/1.1\r\nAuthorization: Bearer {agent}\r\nContent-Type: application/json\r\n"
    )
}

/// A report with no results, padded to about `pad` bytes.
fn padded_report(id: &str, pad: usize) -> String {
    json!({"kind": "report", "id": id, "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
           "results": [], "pad": "x".repeat(pad)})
    .to_string()
}

/// The daemon's arguments for a budget of 1 MiB, bodies of at most 2 MiB, and the given body
/// and request time limits (seconds).
fn small_budget<'a>(body_seconds: &'a str, request_seconds: &'a str) -> [&'a str; 8] {
    [
        "--report-budget-mb",
        "1",
        "--http-max-body-mb",
        "2",
        "--http-body-timeout-seconds",
        body_seconds,
        "--http-timeout-seconds",
        request_seconds,
    ]
}

/// The value of the gauge `name` in `/metrics`, if shown.
fn gauge(address: &str, name: &str) -> Option<u64> {
    let (status, text) = http(address, "GET", "/metrics", None, None);
    assert_eq!(status, 200, "{text}");
    text.as_str()?
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.trim().parse().ok())
}

/// Polls until `done` holds; panics with `what` after `within`.
fn eventually(within: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < within, "{what} within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Someone who holds the metrics token (it is in the monitoring's configuration) sends slow
/// bodies to `/ui/sign-in` with it on every connection the hub has: the token is no client's,
/// so its requests take the metrics token's lane (a sixteenth of the connections), those past
/// it are answered 503 and closed at once, and the client's requests are all answered.
#[test]
fn the_metrics_tokens_slow_sign_ins_leave_the_client_its_lane() {
    let dir = TestDir::new();
    let (hub, _relay, _agent) = relay_hub(&dir);
    let client = hub.tokens().unwrap().unwrap().client;
    drop(hub);
    let file = dir.path().join("metrics.token");
    std::fs::write(&file, "scrape-secret\n").unwrap();
    let daemon = Daemon::start(
        &dir.db(),
        &[
            "--http-max-connections",
            "32",
            "--metrics-token-file",
            file.to_str().unwrap(),
        ],
    );
    let address = daemon.address.clone();
    let head = "POST /ui/sign-in HTTP/1.1\r\nAuthorization: Bearer scrape-secret\r\nContent-Type: application/x-www-form-urlencoded\r\n";
    let mut held: Vec<TcpStream> = (0..32).map(|_| stalled(&address, head, 1000)).collect();
    // Some are past a cap whatever the lanes: the hub has looked at their headers.
    wait_until_closed(&mut held, 4, Duration::from_secs(30));
    for n in 0..10 {
        let (status, body) = http(&address, "GET", "/projects", Some(&client), None);
        assert_eq!(
            status, 200,
            "client request {n} under the metrics token's slow sign-ins: {body}"
        );
    }
    // The metrics token's lane is two places of 32: the other 30 were refused and closed.
    wait_until_closed(&mut held, 30, Duration::from_secs(30));
}

/// Four connections with the agent token announce reports as large as the whole budget and
/// send nothing, and a relay report file larger than the budget waits for it: a heartbeat
/// dropped in the relay folder and a small report over HTTP are answered all the same (a file
/// under the small-file size never waits for the budget, and the large file does not hold the
/// relay), `/metrics` shows the reports waiting, and the log says that one waited long.
#[test]
fn small_files_and_requests_never_wait_for_the_report_budget() {
    let dir = TestDir::new();
    let (_hub, relay, agent) = relay_hub(&dir);
    let log = dir.path().join("hub.log");
    let daemon = Daemon::start_logging_to(&dir.db(), &small_budget("300", "600"), &log);
    let address = daemon.address.clone();
    let _hogs: Vec<TcpStream> = (0..4)
        .map(|_| stalled(&address, &report_head(&agent), 2 * 1024 * 1024))
        .collect();
    // The hub reads their headers and hands the budget to the first; the others wait.
    eventually(
        Duration::from_secs(30),
        "the four reports holding and waiting for the budget",
        || {
            gauge(&address, "jira_hub_report_budget_free_bytes") == Some(0)
                && gauge(&address, "jira_hub_reports_waiting_for_budget")
                    .is_some_and(|waiting| waiting >= 3)
        },
    );
    let inbox = relay.join("inbox");
    // A report file larger than the budget (and than what the relay reads ahead).
    let mut big = report_file("big", &agent, json!([]));
    big["pad"] = json!("x".repeat(17 * 1024 * 1024));
    drop_file(&inbox, "report-big.json", &big);
    drop_file(
        &inbox,
        "heartbeat-h1.json",
        &json!({"kind": "heartbeat", "id": "h1", "agent": "agent-1",
            "sent_at": "2026-11-29T10:00:00Z", "token": agent, "agent_version": "1.4.0", "jira_ok": true}),
    );
    assert_eq!(
        wait_for_json(
            &relay.join("outbox/heartbeat-h1.json"),
            Duration::from_secs(15)
        ),
        json!({"kind": "heartbeat", "request_id": "h1"}),
        "the heartbeat waited behind the reports"
    );
    let started = Instant::now();
    let small = padded_report("small", 1000);
    let mut stream = TcpStream::connect(&address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "{}Host: {address}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{small}",
        report_head(&agent),
        small.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // Visible: three HTTP reports wait (the fourth holds the budget), and the relay's file.
    eventually(
        Duration::from_secs(10),
        "the waiting reports shown in /metrics",
        || {
            gauge(&address, "jira_hub_report_budget_free_bytes") == Some(0)
                && gauge(&address, "jira_hub_reports_waiting_for_budget")
                    .is_some_and(|waiting| waiting >= 3)
        },
    );
    // Logged once a report has waited long (5 s).
    eventually(Duration::from_secs(30), "the long wait logged", || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("a report waited long for the reports' memory budget")
    });
    assert!(inbox.join("report-big.json").exists(), "still waiting");
}

/// A report that waits for the budget behind a report that never comes has the whole body time
/// from its turn: its body, sent over longer than that time from its headers but within it from
/// its turn, is taken (not 408).
#[test]
fn a_report_waiting_for_the_budget_has_its_body_time_from_its_turn() {
    let dir = TestDir::new();
    let (_hub, _relay, agent) = relay_hub(&dir);
    let daemon = Daemon::start(&dir.db(), &small_budget("4", "60"));
    let address = daemon.address.clone();
    // Takes the whole budget, sends nothing: answered 408 at its body deadline (4 s).
    let _hog = stalled(&address, &report_head(&agent), 1024 * 1024);
    eventually(
        Duration::from_secs(30),
        "the budget taken by the stalled report",
        || gauge(&address, "jira_hub_report_budget_free_bytes") == Some(0),
    );
    let body = padded_report("legit", 600 * 1024);
    let mut stream = TcpStream::connect(&address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "{}Host: {address}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        report_head(&agent),
        body.len()
    )
    .unwrap();
    // A slow link: the body takes about 5.5 s, longer than 4 s from the headers, well within
    // 4 s of the turn (about 4 s after the headers).
    let pieces: Vec<&[u8]> = body.as_bytes().chunks(body.len() / 11 + 1).collect();
    for piece in pieces {
        std::thread::sleep(Duration::from_millis(500));
        if stream.write_all(piece).is_err() {
            break;
        }
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"report\""), "{answer}");
}
