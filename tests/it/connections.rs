//! The HTTP listener of the real daemon against hostile connections, over real sockets: idle
//! connections past the cap, headers that never come, keep-alive connections left open, bodies
//! without `Content-Length`. Waits are bounded polls, never timing assertions.

use crate::support::*;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Sends raw bytes on a new connection and reads the whole answer (the hub closes after it).
fn exchange(address: &str, request: &[u8]) -> (u16, Value) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (
        status,
        serde_json::from_str(body).unwrap_or(Value::String(body.to_string())),
    )
}

/// 300 idle connections against a cap of 40: the hub keeps at most 40 open, closing the
/// oldest idle ones, and `/health` still answers.
#[test]
fn idle_connections_past_the_cap_do_not_stop_the_hub() {
    let dir = TestDir::new();
    run_ok(&dir.db(), &["migrate"]);
    let daemon = Daemon::start(
        &dir.db(),
        &[
            "--http-max-connections",
            "40",
            "--http-header-timeout-seconds",
            "600",
            "--http-idle-timeout-seconds",
            "600",
        ],
    );
    let mut idle: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(&daemon.address).unwrap())
        .collect();
    let (status, body) = http(&daemon.address, "GET", "/health", None, None);
    assert_eq!((status, &body["status"]), (200, &json!("ok")), "{body}");
    // Everything past the cap was closed (at most 40 stay, the health check's included).
    wait_until_closed(&mut idle, 300 - 40, Duration::from_secs(30));
    // And it goes on answering.
    for _ in 0..5 {
        assert_eq!(http(&daemon.address, "GET", "/health", None, None).0, 200);
    }
}

/// Headers that never come and keep-alive connections left open are closed after their
/// timeouts; a body without `Content-Length` is read (chunked) or empty (answered in the shape).
#[test]
fn silent_and_idle_connections_are_closed() {
    let dir = TestDir::new();
    let (hub, _relay, agent) = relay_hub(&dir);
    drop(hub);
    let daemon = Daemon::start(
        &dir.db(),
        &[
            "--http-header-timeout-seconds",
            "1",
            "--http-idle-timeout-seconds",
            "1",
        ],
    );
    // Nothing sent; half a request line; a whole request, then nothing more (keep-alive).
    let silent = TcpStream::connect(&daemon.address).unwrap();
    let mut partial = TcpStream::connect(&daemon.address).unwrap();
    partial
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    let mut kept = TcpStream::connect(&daemon.address).unwrap();
    kept.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut answer = [0u8; 12];
    kept.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200");
    let mut streams = [silent, partial, kept];
    wait_until_closed(&mut streams, 3, Duration::from_secs(30));

    // Chunked, no Content-Length: read whole.
    let claim =
        json!({"kind": "claim", "id": "chunked-1", "agent": "a", "sent_at": "2026-11-29T10:00:00Z",
        "agent_version": "1", "settings_version": 0, "max_commands": 1})
        .to_string();
    let request = format!(
        "POST /agent/claim HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: bearer {agent}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{claim}\r\n0\r\n\r\n",
        claim.len()
    );
    let (status, body) = exchange(&daemon.address, request.as_bytes());
    assert_eq!((status, &body["kind"]), (200, &json!("claim")), "{body}");
    // Neither length nor chunks: an empty body, refused in the shape.
    let request = format!(
        "POST /agent/claim HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer {agent}\r\nContent-Type: application/json\r\n\r\n"
    );
    let (status, body) = exchange(&daemon.address, request.as_bytes());
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "malformed", "{body}");
}
