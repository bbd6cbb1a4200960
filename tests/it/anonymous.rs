//! Strangers on the HTTP port against the real daemon over real sockets: nothing anonymous holds a
//! connection (a deadline per request, a cap of its own, the newest winning), whoever shows a
//! valid token is served, the right client token always signs in while wrong ones are delayed
//! per address, each wrong guess is counted when its form is read, and the DNS-rebinding check
//! holds for every request without a valid token. Waits are bounded polls, never timing
//! assertions; the figures printed are for reading.

use crate::support::*;
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Which of `streams` the hub has closed, as of now.
fn closed(streams: &mut [TcpStream]) -> Vec<bool> {
    let mut seen = Vec::new();
    streams
        .iter_mut()
        .map(|stream| closed_by_hub(stream, &mut seen))
        .collect()
}

/// A connection to `address` from the loopback address `from` (Linux answers on all of
/// 127.0.0.0/8), so that the hub sees distinct clients.
fn connect_from(from: [u8; 4], address: &str) -> TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let to: std::net::SocketAddr = address.parse().unwrap();
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind((std::net::Ipv4Addr::from(from), 0).into())
            .unwrap();
        socket.connect(to).await.unwrap().into_std().unwrap()
    });
    stream.set_nonblocking(false).unwrap();
    stream
}

/// Reads one answer to its end (the requests say `Connection: close`): status and text, or
/// `None` when the connection ended without one or nothing came within `within`.
fn answer(mut stream: TcpStream, within: Duration) -> Option<(u16, String)> {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, text))
}

/// Sends a whole request on a new connection and reads its answer.
fn request(
    stream: TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Option<(u16, String)> {
    let mut stream = stream;
    let mut text = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    stream.write_all(text.as_bytes()).ok()?;
    answer(stream, Duration::from_secs(30))
}

/// A sign-in form posted from `from` with `token`: the status.
fn sign_in(address: &str, from: [u8; 4], token: &str) -> u16 {
    let body = format!("token={token}");
    let answer = request(
        connect_from(from, address),
        "POST",
        "/ui/sign-in",
        &[
            ("Host", address),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        &body,
    );
    answer.map_or(0, |(status, _)| status)
}

/// The headers of a sign-in whose form is `length` bytes long, on a new connection.
fn sign_in_headers(address: &str, length: usize) -> TcpStream {
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "POST /ui/sign-in HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {length}\r\n\r\n"
    )
    .unwrap();
    stream
}

fn claim_body(agent: &str) -> String {
    json!({"kind": "claim", "id": format!("{agent}-1"), "agent": agent,
           "sent_at": "2026-11-29T10:00:00Z", "agent_version": "1.4.0",
           "settings_version": 0, "max_commands": 1})
    .to_string()
}

/// The hub's tokens (client, agent) with a daemon on a fresh database.
fn hub_with(dir: &TestDir, extra: &[&str]) -> (Daemon, String, String) {
    let (hub, _relay, agent) = relay_hub(dir);
    let client = hub.tokens().unwrap().unwrap().client;
    drop(hub);
    (Daemon::start(&dir.db(), extra), client, agent)
}

/// 300 slow anonymous sign-ins (headers sent, the form never or a byte of
/// it) against the default caps: at most the anonymous cap of them is held, and `/health`, an
/// agent's claim and a client's request are answered while they are.
#[test]
fn slow_anonymous_sign_ins_leave_health_agents_and_clients_answered() {
    let dir = TestDir::new();
    // The slow ones' own deadline far away: they are held for the whole test.
    let (daemon, client, agent) = hub_with(&dir, &["--http-anonymous-timeout-seconds", "600"]);
    let address = daemon.address.clone();
    let mut slow: Vec<TcpStream> = (0..300)
        .map(|n| {
            let mut stream = sign_in_headers(&address, 100);
            if n % 2 == 0 {
                stream.write_all(b"tok").unwrap();
            }
            stream
        })
        .collect();
    // The default caps are 256 connections, 192 of them anonymous: the oldest 108 made room.
    wait_until_closed(&mut slow, 300 - 192, Duration::from_secs(30));

    let started = Instant::now();
    let health = request(
        TcpStream::connect(&address).unwrap(),
        "GET",
        "/health",
        &[("Host", &address)],
        "",
    );
    let health_after = started.elapsed();
    let started = Instant::now();
    let claim = request(
        TcpStream::connect(&address).unwrap(),
        "POST",
        "/agent/claim",
        &[
            ("Host", &address),
            ("Authorization", &format!("Bearer {agent}")),
            ("Content-Type", "application/json"),
        ],
        &claim_body("slow-test"),
    );
    let claim_after = started.elapsed();
    let started = Instant::now();
    let projects = request(
        TcpStream::connect(&address).unwrap(),
        "GET",
        "/projects",
        &[
            ("Host", &address),
            ("Authorization", &format!("Bearer {client}")),
        ],
        "",
    );
    let client_after = started.elapsed();
    println!(
        "answered under 300 slow sign-ins: /health {health_after:?}, claim {claim_after:?}, \
         client {client_after:?}"
    );
    assert_eq!(health.map(|a| a.0), Some(200), "/health");
    let (status, text) = claim.expect("the claim answered");
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"kind\":\"claim\""), "{text}");
    let (status, text) = projects.expect("the client answered");
    assert_eq!(status, 200, "{text}");
    // The slow ones were held all the while: each answer took the place of one of them at most.
    let held = closed(&mut slow).iter().filter(|c| !**c).count();
    assert!(
        (192 - 3..=192).contains(&held),
        "{held} slow sign-ins held, expected the anonymous cap less the three answered"
    );
}

/// An anonymous connection over its deadline is closed, whatever it withholds: nothing sent,
/// half the headers, the headers without their form, a form a byte at a time, a keep-alive
/// after its answer.
/// A connection that showed the agent token keeps the longer limits: its keep-alive outlives
/// the anonymous ones, and its body may come slowly.
#[test]
fn anonymous_connections_over_their_deadline_are_closed() {
    let dir = TestDir::new();
    let (daemon, _client, agent) = hub_with(
        &dir,
        &[
            "--http-anonymous-timeout-seconds",
            "1",
            "--http-header-timeout-seconds",
            "600",
            "--http-idle-timeout-seconds",
            "600",
            "--http-timeout-seconds",
            "600",
        ],
    );
    let address = daemon.address.clone();
    let silent = TcpStream::connect(&address).unwrap();
    let mut partial = TcpStream::connect(&address).unwrap();
    partial
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    let formless = sign_in_headers(&address, 100);
    let trickled = sign_in_headers(&address, 1000);
    let mut kept = TcpStream::connect(&address).unwrap();
    kept.write_all(format!("GET /health HTTP/1.1\r\nHost: {address}\r\n\r\n").as_bytes())
        .unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut status = [0u8; 12];
    kept.read_exact(&mut status).unwrap();
    assert_eq!(&status, b"HTTP/1.1 200");
    // The agent's keep-alive connection, after an answered claim.
    let mut agent_kept = TcpStream::connect(&address).unwrap();
    let body = claim_body("kept");
    write!(
        agent_kept,
        "POST /agent/claim HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {agent}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    agent_kept
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    agent_kept.read_exact(&mut status).unwrap();
    assert_eq!(&status, b"HTTP/1.1 200");

    // A byte of the form every 200 ms, until the hub closes the connection.
    let trickler = {
        let mut trickled = trickled.try_clone().unwrap();
        std::thread::spawn(move || {
            for _ in 0..300 {
                if trickled.write_all(b"t").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    // The agent's body, slowly too: over twice the anonymous deadline.
    let slow_agent = {
        let address = address.clone();
        let agent = agent.clone();
        std::thread::spawn(move || {
            let mut stream = TcpStream::connect(&address).unwrap();
            let body = claim_body("slow-body");
            write!(
                stream,
                "POST /agent/claim HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\
                 Authorization: Bearer {agent}\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n",
                body.len()
            )
            .unwrap();
            let (first, rest) = body.split_at(body.len() / 2);
            stream.write_all(first.as_bytes()).unwrap();
            std::thread::sleep(Duration::from_millis(2500));
            stream.write_all(rest.as_bytes()).unwrap();
            answer(stream, Duration::from_secs(30))
        })
    };

    let mut streams = [silent, partial, formless, trickled, kept];
    wait_until_closed(&mut streams, 5, Duration::from_secs(30));
    trickler.join().unwrap();

    let (status, text) = slow_agent.join().unwrap().expect("the slow agent answered");
    assert_eq!(status, 200, "{text}");
    // The agent's keep-alive connection is still open.
    let mut seen = Vec::new();
    assert!(
        !closed_by_hub(&mut agent_kept, &mut seen),
        "the agent's connection was closed"
    );
}

/// A request without the token whose form never comes is answered 408 at its deadline.
#[test]
fn an_anonymous_request_waiting_for_its_body_is_answered_408() {
    let dir = TestDir::new();
    let (daemon, _client, _agent) = hub_with(&dir, &["--http-anonymous-timeout-seconds", "1"]);
    let stream = sign_in_headers(&daemon.address, 100);
    let (status, text) = answer(stream, Duration::from_secs(30)).expect("an answer");
    assert_eq!(status, 408, "{text}");
    assert!(text.contains("без действительного токена"), "{text}");
}

/// The right token signs in while 60 wrong ones a minute arrive from 12
/// addresses, and from an address whose wrong guesses are being delayed.
#[test]
fn the_right_token_signs_in_while_wrong_ones_arrive_from_many_addresses() {
    let dir = TestDir::new();
    let (daemon, client, _agent) = hub_with(&dir, &[]);
    let address = daemon.address.clone();
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for round in 0..5 {
        for n in 0..12u8 {
            *statuses
                .entry(sign_in(&address, [127, 0, 0, 10 + n], "wrong"))
                .or_default() += 1;
        }
        // The operator, from an address of their own, in the middle of it.
        if round == 2 {
            assert_eq!(sign_in(&address, [127, 0, 0, 2], &client), 303);
        }
    }
    assert_eq!(statuses, [(401, 60)].into(), "five each: answered at once");
    // One address past its free guesses is delayed (429), and signs in with the right token.
    for _ in 0..10 {
        *statuses
            .entry(sign_in(&address, [127, 0, 0, 10], "wrong"))
            .or_default() += 1;
    }
    assert!(statuses.get(&429).is_some_and(|n| *n >= 8), "{statuses:?}");
    assert_eq!(sign_in(&address, [127, 0, 0, 10], &client), 303);
    assert_eq!(sign_in(&address, [127, 0, 0, 3], &client), 303);
}

/// 200 sign-ins from one address send their headers first and their forms later: each wrong
/// guess is counted when its form is read, so only the free ones are answered 401, the rest 429;
/// the right token still signs in.
#[test]
fn wrong_guesses_sent_headers_first_are_each_counted() {
    let dir = TestDir::new();
    let (daemon, client, _agent) = hub_with(&dir, &["--http-max-connections", "1024"]);
    let address = daemon.address.clone();
    let form = "token=wrong";
    let mut streams: Vec<TcpStream> = (0..200)
        .map(|_| sign_in_headers(&address, form.len()))
        .collect();
    // Every connection accepted (the loop accepts in order) before any form is sent.
    assert_eq!(
        request(
            TcpStream::connect(&address).unwrap(),
            "GET",
            "/health",
            &[("Host", &address)],
            ""
        )
        .map(|a| a.0),
        Some(200)
    );
    for stream in &mut streams {
        stream.write_all(form.as_bytes()).unwrap();
    }
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for stream in streams {
        let status = answer(stream, Duration::from_secs(30)).map_or(0, |a| a.0);
        *statuses.entry(status).or_default() += 1;
    }
    let answered_401 = statuses.get(&401).copied().unwrap_or(0);
    assert!(answered_401 <= 6, "{statuses:?}");
    assert_eq!(
        statuses.get(&429).copied(),
        Some(200 - answered_401),
        "{statuses:?}"
    );
    assert_eq!(sign_in(&address, [127, 0, 0, 1], &client), 303);
}

/// The DNS-rebinding check holds for every request not authenticated by a valid token: with
/// `Host: evil.example`, no `Authorization`, an empty one or a wrong token get no `/metrics`,
/// `/ready` or `/openapi.json`; the valid token passes.
#[test]
fn an_unknown_host_needs_a_valid_token() {
    let dir = TestDir::new();
    let (daemon, client, agent) = hub_with(&dir, &[]);
    let address = daemon.address.clone();
    let get = |path: &str, authorization: Option<&str>| {
        let mut headers = vec![("Host", "evil.example")];
        if let Some(value) = authorization {
            headers.push(("Authorization", value));
        }
        request(
            TcpStream::connect(&address).unwrap(),
            "GET",
            path,
            &headers,
            "",
        )
        .map_or(0, |a| a.0)
    };
    for path in ["/metrics", "/ready", "/openapi.json"] {
        for authorization in [
            None,
            Some(""),
            Some("Bearer"),
            Some("Bearer wrong"),
            Some("Basic Zm9vOmJhcg=="),
        ] {
            assert_eq!(
                get(path, authorization),
                403,
                "{path} with {authorization:?}"
            );
        }
        assert_eq!(get(path, Some(&format!("Bearer {client}"))), 200, "{path}");
        assert_eq!(get(path, Some(&format!("Bearer {agent}"))), 200, "{path}");
    }
    assert_eq!(get("/health", None), 200);
}
