//! An HTTP agent refused for its token, over a real socket: the hub checks the token before it
//! reads a body, so the agent's name comes from the header it names itself in, and the console
//! and `GET /agents` show the agent refused by the hub rather than what it last said of Jira.

use crate::agent_waits::Hub;
use crate::support::*;
use jira_hub::sim::jira::{FakeJira, Mode};
use serde_json::{Value, json};
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The agent's name: not ASCII, so the header must carry it encoded.
const NAME: &str = "Агент склада №2";

fn agent_of(hub: &Hub) -> Value {
    let (status, agents) = http(
        &hub.address,
        "GET",
        "/agents",
        Some(&hub.client_token),
        None,
    );
    assert_eq!(status, 200, "{agents}");
    agents
        .as_array()
        .and_then(|agents| agents.iter().find(|a| a["agent"] == NAME))
        .cloned()
        .unwrap_or_else(|| panic!("{NAME} not listed: {agents}"))
}

/// One request on a new connection; the whole answer as text.
fn exchange(address: &str, head: &str, body: &str) -> String {
    let mut stream = send_raw(address, head, body);
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// The console's overview page, signed in with the client token.
fn overview(hub: &Hub) -> String {
    let form = serde_urlencoded::to_string([("token", hub.client_token.as_str())]).unwrap();
    let signed = exchange(
        &hub.address,
        "POST /ui/sign-in HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n",
        &form,
    );
    let cookie = signed
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("set-cookie").then(|| {
                value
                    .trim()
                    .split(';')
                    .next()
                    .unwrap_or_default()
                    .to_string()
            })
        })
        .unwrap_or_else(|| panic!("no cookie: {signed}"));
    let page = exchange(
        &hub.address,
        &format!("GET / HTTP/1.1\r\nCookie: {cookie}\r\n"),
        "",
    );
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    page
}

/// Heard with its good token and Jira up, then run with a token the hub no longer takes (it was
/// rotated): `GET /agents` and the console say the hub refuses its token, not «Jira доступна»;
/// its next request the hub takes clears that. A header that is not an allowed name marks
/// nothing.
#[test]
fn an_http_agent_with_a_rotated_token_shows_refused_by_the_hub() {
    let fake = FakeJira::start(Mode::DataCenter);
    let hub = Hub::start(json!({}), json!([]));
    let heartbeat = |id: &str| {
        json!({"kind": "heartbeat", "id": id, "agent": NAME,
               "sent_at": crate::quiet::at(&hub.clock), "agent_version": "1.4.0",
               "jira_ok": true, "heartbeat_seconds": 60})
    };
    let (status, body) = http(
        &hub.address,
        "POST",
        "/agent/heartbeat",
        Some(&hub.agent_token),
        Some(&heartbeat("before")),
    );
    assert_eq!(status, 200, "{body}");
    let before = agent_of(&hub);
    assert_eq!(
        (&before["jira_ok"], &before["hub_refused"]),
        (&json!(true), &Value::Null)
    );
    assert!(overview(&hub).contains("Jira доступна"));

    // A stranger's wrong token with a header that names no allowed agent: nothing marked.
    for value in ["%ZZ", "%0A", "%20"] {
        let answer = exchange(
            &hub.address,
            &format!(
                "POST /agent/heartbeat HTTP/1.1\r\nAuthorization: Bearer wrong\r\nX-Jira-Hub-Agent: {value}\r\n"
            ),
            "{}",
        );
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    }
    assert_eq!(agent_of(&hub)["hub_refused"], Value::Null);

    let config = hub.agent_config(
        &fake.url(),
        json!({"agent_token": "the-token-before-rotation", "name": NAME,
               "claim_wait_seconds": 0}),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let agent = {
        let (clock, stop) = (hub.clock.clone(), stop.clone());
        std::thread::spawn(move || {
            jira_hub::run_agent_for_test(&config, clock, None, stop, None).unwrap()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut refused = Value::Null;
    while Instant::now() < deadline && refused.is_null() {
        std::thread::sleep(Duration::from_millis(50));
        refused = agent_of(&hub)["hub_refused"].clone();
    }
    stop.store(true, Ordering::SeqCst);
    agent.join().unwrap();
    assert!(
        refused
            .as_str()
            .is_some_and(|r| r.starts_with("Хаб отвергает токен агента с ")),
        "{:?}",
        agent_of(&hub)
    );
    let page = overview(&hub);
    assert!(page.contains("Хаб отвергает токен агента"), "{page}");
    assert!(!page.contains("Jira доступна"), "{page}");

    // Its token put right: the next request the hub takes clears the mark.
    hub.clock.advance(time::Duration::seconds(1));
    let (status, body) = http(
        &hub.address,
        "POST",
        "/agent/heartbeat",
        Some(&hub.agent_token),
        Some(&heartbeat("after")),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(agent_of(&hub)["hub_refused"], Value::Null);
}
