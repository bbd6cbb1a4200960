//! A report's memory: one large refresh report, over HTTP and as a relay
//! file, raises the real daemon's peak resident memory (VmHWM) by at most 1.5 times its size
//! over what the daemon held just before it.

use crate::support::*;
use serde_json::json;
use std::io::{Read, Write};
use std::time::Duration;

/// The report's size. The issue's figure is 100 MiB (`cargo bench --bench relay` measures that
/// in a release build); a debug build parses 48 MiB in a few seconds, and the copies this test
/// catches are proportional to the size.
const REPORT_BYTES: usize = 64 << 20;

/// The most a report may raise the daemon's peak, as a multiple of its size.
const MAX_PEAK_RATIO: f64 = 1.5;

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The daemon's resident memory now, its peak reset to it (`clear_refs` 5, Linux 4.0+; the
/// test's own child, so it may): what the report's peak is measured from.
fn reset_peak(pid: u32) -> u64 {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset VmHWM");
    let rss = status_kib(pid, "VmRSS:");
    assert!(
        status_kib(pid, "VmHWM:") <= rss + 1024,
        "VmHWM not reset to VmRSS"
    );
    rss
}

/// A report of one refresh page of at least `bytes`, `head` and `tail` around its issues: raw
/// issues as Jira's search returns them (a long description, links, comments), each a little
/// different.
fn page_report(head: &str, bytes: usize) -> Vec<u8> {
    let mut text = Vec::with_capacity(bytes + (1 << 20));
    text.extend_from_slice(head.as_bytes());
    let mut n = 0;
    while text.len() < bytes {
        if n > 0 {
            text.push(b',');
        }
        let issue = raw_issue(
            &format!("AURORA-{n}"),
            &(10_000 + n).to_string(),
            &["AWPCA"],
            json!({
                "description": format!("Описание задачи {n}, достаточно длинное. ").repeat(40),
                "priority": {"name": "Средний"},
                "assignee": {"displayName": "Иванов Иван", "name": "ivanov"},
                "comment": {"comments": [
                    {"id": n.to_string(), "author": {"displayName": "Петров"},
                     "body": "Комментарий к задаче. ".repeat(10),
                     "created": "2026-03-05T10:15:30.000+0300"}
                ], "total": 1},
            }),
        );
        serde_json::to_writer(&mut text, &issue).unwrap();
        n += 1;
    }
    text.extend_from_slice(b"]}}]}");
    text
}

/// The head of a report of `command`'s one page, its envelope as given.
fn head(envelope: &str, command: i64) -> String {
    format!(
        r#"{{{envelope}, "results": [{{"command_id": {command}, "delivery": 1, "status": "progress", "page": {{"start_at": 0, "total": null, "issues": ["#
    )
}

fn mirrored(db: &std::path::Path) -> i64 {
    count(
        &rusqlite::Connection::open(db).unwrap(),
        "SELECT count(*) FROM issue",
    )
}

/// Posts `body` to `/agent/report` with the agent token; the whole answer.
fn post_report(address: &str, token: &str, body: &[u8]) -> String {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(300)))
        .unwrap();
    write!(
        stream,
        "POST /agent/report HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.write_all(body).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// Prints and checks what the report raised the peak by.
fn check_peak(path: &str, pid: u32, before_kib: u64, report: usize) {
    let grew = status_kib(pid, "VmHWM:").saturating_sub(before_kib) as f64 * 1024.0;
    let ratio = grew / report as f64;
    println!(
        "{path}: a report of {:.1} MiB raised the daemon's peak by {:.1} MiB, {ratio:.2}x its size",
        report as f64 / 1048576.0,
        grew / 1048576.0
    );
    assert!(
        ratio <= MAX_PEAK_RATIO,
        "{path}: the peak grew {ratio:.2}x the report's size (at most {MAX_PEAK_RATIO})"
    );
}

/// A refresh page of 48 MiB posted to `/agent/report`: the body, its decoding and the mirror's
/// writes raise the daemon's peak by at most 1.5 times the body.
#[test]
fn a_large_report_over_http_peaks_at_most_one_and_a_half_times_its_size() {
    let dir = TestDir::new();
    let mut hub = ready_hub(&dir, &clock());
    set_settings(&mut hub, json!({"auto_refresh_minutes": 0}));
    hub.enqueue_refresh(None, "ivanov").unwrap();
    let token = hub.tokens().unwrap().unwrap().agent;
    drop(hub);
    let daemon = Daemon::start(
        &dir.db(),
        &[
            "--http-max-body-mb",
            "128",
            "--http-timeout-seconds",
            "300",
            "--http-body-timeout-seconds",
            "300",
        ],
    );
    let (status, claimed) = http(
        &daemon.address,
        "POST",
        "/agent/claim",
        Some(&token),
        Some(&json!({"kind": "claim", "id": "c1", "agent": "agent-1",
            "sent_at": "2026-11-29T10:00:00Z", "agent_version": "1", "settings_version": 0,
            "max_commands": 1})),
    );
    assert_eq!(status, 200, "{claimed}");
    let command = claimed["commands"][0]["id"].as_i64().expect("a refresh");
    let body = page_report(
        &head(
            r#""kind": "report", "id": "big", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z""#,
            command,
        ),
        REPORT_BYTES,
    );
    let pid = daemon.child_id();
    let before = reset_peak(pid);
    let answer = post_report(&daemon.address, &token, &body);
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains(&format!("\"accepted\":[{command}]")),
        "{}",
        &answer[..answer.len().min(600)]
    );
    check_peak("HTTP", pid, before, body.len());
    assert!(mirrored(&dir.db()) > 10_000, "the issues were stored");
}

/// The same refresh page as a relay file: reading it, decoding it and the mirror's writes raise
/// the daemon's peak by at most 1.5 times the file.
#[test]
fn a_large_relay_report_peaks_at_most_one_and_a_half_times_its_size() {
    let dir = TestDir::new();
    let (mut hub, relay, token) = relay_hub(&dir);
    hub.enqueue_refresh(None, "ivanov").unwrap();
    drop(hub);
    let daemon = Daemon::start(&dir.db(), &["--relay-grace-seconds", "1"]);
    drop_file(
        &relay.join("inbox"),
        "claim-c1.json",
        &claim_file("c1", &token, 1),
    );
    let claimed = wait_for_json(&relay.join("outbox/claim-c1.json"), Duration::from_secs(30));
    let command = claimed["commands"][0]["id"].as_i64().expect("a refresh");
    let file = page_report(
        &head(
            &format!(
                r#""kind": "report", "id": "big", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z", "token": "{token}""#
            ),
            command,
        ),
        REPORT_BYTES,
    );
    let pid = daemon.child_id();
    let hidden = relay.join("inbox/.report-big.json");
    std::fs::write(&hidden, &file).unwrap();
    let before = reset_peak(pid);
    std::fs::rename(&hidden, relay.join("inbox/report-big.json")).unwrap();
    let answer = wait_for_json(
        &relay.join("outbox/report-big.json"),
        Duration::from_secs(300),
    );
    assert_eq!(answer["accepted"], json!([command]), "{answer}");
    check_peak("relay", pid, before, file.len());
    assert!(mirrored(&dir.db()) > 10_000, "the issues were stored");
}

/// A report of 32 results, each a `result` of 1 MB made of small objects (a tree of values costs
/// about 60 times such a text: 912 MiB for 16 of them before), for commands the hub does not
/// know: each result is kept as its text, so the peak stays within 1.5 times the report.
#[test]
fn a_report_of_many_small_values_is_never_a_tree_of_them() {
    let dir = TestDir::new();
    let hub = ready_hub(&dir, &clock());
    let token = hub.tokens().unwrap().unwrap().agent;
    drop(hub);
    let daemon = Daemon::start(&dir.db(), &["--http-body-timeout-seconds", "300"]);
    let mut body = br#"{"kind": "report", "id": "dense", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z", "results": ["#.to_vec();
    for n in 0..32 {
        if n > 0 {
            body.push(b',');
        }
        body.extend_from_slice(
            format!(
                r#"{{"command_id": {}, "delivery": 1, "status": "done", "result": {{"x": ["#,
                1_000_000 + n
            )
            .as_bytes(),
        );
        let start = body.len();
        while body.len() - start < 1_000_000 {
            body.extend_from_slice(br#"{"a":1},"#);
        }
        body.extend_from_slice(b"0]}}");
    }
    body.extend_from_slice(b"]}");
    let pid = daemon.child_id();
    let before = reset_peak(pid);
    let answer = post_report(&daemon.address, &token, &body);
    assert!(
        answer.starts_with("HTTP/1.1 200")
            && answer.contains(r#""ignored":[{"command_id":1000000"#),
        "{}",
        &answer[..answer.len().min(600)]
    );
    check_peak("results", pid, before, body.len());
}

/// A report sent in chunks (no `Content-Length`) is read into the one buffer as it comes: taken
/// whole within the body limit, refused 413 past it, as one whose length says so.
#[test]
fn a_chunked_report_is_read_whole_or_refused_past_the_limit() {
    let dir = TestDir::new();
    let hub = ready_hub(&dir, &clock());
    let token = hub.tokens().unwrap().unwrap().agent;
    drop(hub);
    let daemon = Daemon::start(&dir.db(), &["--http-max-body-mb", "1"]);
    let chunked = |pad: usize| -> String {
        let body = format!(
            r#"{{"kind": "report", "id": "c{pad}", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z", "results": [], "pad": "{}"}}"#,
            "x".repeat(pad)
        );
        let mut stream = std::net::TcpStream::connect(&daemon.address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        write!(
            stream,
            "POST /agent/report HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
            daemon.address
        )
        .unwrap();
        // Pieces of 64 KiB; a refused body may be cut off, its answer is read all the same.
        let _ = body.as_bytes().chunks(64 * 1024).try_for_each(|piece| {
            write!(stream, "{:x}\r\n", piece.len())?;
            stream.write_all(piece)?;
            stream.write_all(b"\r\n")
        });
        let _ = stream.write_all(b"0\r\n\r\n");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer
    };
    let taken = chunked(900 * 1024);
    assert!(
        taken.starts_with("HTTP/1.1 200") && taken.contains(r#""accepted":[]"#),
        "{taken}"
    );
    let refused = chunked(1100 * 1024);
    assert!(
        refused.starts_with("HTTP/1.1 413") && refused.contains("тело запроса больше предела"),
        "{refused}"
    );
}
