//! Helpers of the agent's unit tests: a Jira of canned answers on a loopback port, a client
//! pointed at it with an injected clock, commands as the hub delivers them.

use super::answer::Need;
use super::commands::{AgentSettings, Executor, Outcome};
use super::jira_api::{Jira, JiraError};
use super::net::Reply;
use crate::protocol::ClaimedCommand;
use serde_json::{Value, json};
use std::time::Duration;

/// A Jira of canned answers on a loopback port, for the checks before a repeated write:
/// `answer(method, path, nth call of that path)` gives status and body. Records what it saw.
pub(super) struct Canned {
    pub(super) url: String,
    pub(super) seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Each request's query, in order.
    pub(super) queries: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

pub(super) fn canned(answer: fn(&str, &str, usize) -> (u16, Value)) -> Canned {
    serve(move |method, path, nth| {
        let (status, value) = answer(method, path, nth);
        (status, Vec::new(), value)
    })
}

/// [`canned`] with the answer's extra headers (`name: value` lines).
pub(super) fn serve(
    answer: impl Fn(&str, &str, usize) -> (u16, Vec<String>, Value) + Send + 'static,
) -> Canned {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let queries = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let query_log = queries.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let mut parts = line.split_whitespace();
            let method = parts.next().unwrap_or("").to_string();
            let target = parts.next().unwrap_or("").to_string();
            let mut length = 0usize;
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                    break;
                }
                if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let path = target.split('?').next().unwrap_or("").to_string();
            query_log.lock().unwrap().push(
                target
                    .split_once('?')
                    .map(|(_, q)| q)
                    .unwrap_or("")
                    .to_string(),
            );
            let nth = {
                let mut log = log.lock().unwrap();
                log.push(format!("{method} {path}"));
                log.iter()
                    .filter(|l| **l == format!("{method} {path}"))
                    .count()
            };
            let (status, headers, value) = answer(&method, &path, nth);
            let text = value.to_string();
            let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            );
        }
    });
    Canned { url, seen, queries }
}

pub(super) fn jira_at(url: &str) -> Jira {
    jira_on(
        url,
        std::sync::Arc::new(crate::clock::ManualClock::new(
            time::OffsetDateTime::now_utc(),
        )),
    )
}

/// A Jira client at `url` whose waits run on `clock` (a test's own: they take no wall time).
pub(super) fn jira_on(url: &str, clock: std::sync::Arc<crate::clock::ManualClock>) -> Jira {
    let text = json!({"jira_url": url, "jira_user": "agent", "jira_password": "secret",
        "agent_token": "t", "hub_url": "http://127.0.0.1:1", "name": "agent-1",
        "search_lag_seconds": 60})
    .to_string();
    let no_env = |_: &str| None;
    let config = crate::agent::config::AgentConfig::from_text(
        &text,
        &crate::agent::config::Environment { var: &no_env },
    )
    .unwrap();
    let client = crate::agent::net::Client::new(&config).unwrap();
    let mut jira = Jira::new(
        client,
        url,
        crate::agent::config::Secret::new(crate::agent::net::basic_auth("agent", "secret")),
        config.deployment,
        0,
        std::sync::Arc::new(crate::agent::wait::Waits::new(
            clock,
            std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
            crate::agent::wait::Notifier::Systemd,
        )),
    );
    jira.set_min_interval(Duration::ZERO);
    jira
}

/// Each request (method and path) with the time of the agent's clock it came at.
pub(super) type Timed = std::sync::Arc<std::sync::Mutex<Vec<(String, Duration)>>>;
/// Status, extra headers and body for the nth request of a method and path.
pub(super) type HeadedAnswer = fn(&str, &str, usize) -> (u16, Vec<String>, Value);

/// A Jira whose answers `answer` gives, noting each request with the time of the agent's
/// clock it came at; the client on that clock.
pub(super) fn timed(
    answer: HeadedAnswer,
) -> (
    Canned,
    Jira,
    std::sync::Arc<crate::clock::ManualClock>,
    Timed,
) {
    use crate::clock::Clock;
    let clock = std::sync::Arc::new(crate::clock::ManualClock::new(
        time::OffsetDateTime::now_utc(),
    ));
    let times = Timed::default();
    let (at, noted) = (clock.clone(), times.clone());
    let server = serve(move |method, path, nth| {
        noted
            .lock()
            .unwrap()
            .push((format!("{method} {path}"), at.monotonic()));
        answer(method, path, nth)
    });
    let jira = jira_on(&server.url, clock.clone());
    (server, jira, clock, times)
}

pub(super) fn post_comment(jira: &mut Jira) -> Result<Reply, JiraError> {
    jira.write_expecting(
        "POST",
        "/rest/api/2/issue/AURORA-1/comment",
        &json!({"body": "x"}),
        Need::Member("id"),
    )
}

pub(super) fn first_delivery(command_type: &str, params: Value) -> ClaimedCommand {
    serde_json::from_value(
        json!({"id": 7, "batch_id": 2, "seq": 1, "type": command_type,
        "params": params, "delivery": 1, "enqueued_at": "2026-11-29T10:00:00Z"}),
    )
    .unwrap()
}

pub(super) fn mine() -> Value {
    json!({"key": "jira-hub", "value": {"command": 7, "batch": 2,
           "enqueued_at": "2026-11-29T10:00:00Z"}})
}

pub(super) fn aurora_settings() -> AgentSettings {
    AgentSettings::from_value(&json!({"project_key": "AURORA",
        "issue_types": {"task": {"name": "Задача", "id": "10002"}, "epic": {"name": "Эпик"}}}))
}

/// Runs `command` against `jira` with a recording sleep; returns the outcome and the waits.
pub(super) fn run_recorded(jira: &mut Jira, command: &ClaimedCommand) -> (Outcome, Vec<Duration>) {
    let settings = aurora_settings();
    let slept = std::cell::RefCell::new(Vec::<Duration>::new());
    let sleep = |d: Duration| {
        slept.borrow_mut().push(d);
        true
    };
    let mut executor = Executor {
        jira,
        settings: &settings,
        page_size: 100,
        search_lag: None,
        agent: "agent-1",
        write_limit: Duration::from_secs(60),
        grace: Duration::from_secs(180),
        claimed: Some(("2026-11-29T10:05:00Z", std::time::Instant::now())),
        sleep: &sleep,
    };
    let outcome = executor.execute(command, &mut |_| Ok(()));
    (outcome, slept.into_inner())
}

/// The host's clocks for a test of Jira's clock: the real monotonic clock, and a wall clock the
/// test steps (NTP, an operator's `date`) without moving the monotonic one.
pub(super) struct SteppedWall {
    step: std::sync::Mutex<time::Duration>,
}

impl SteppedWall {
    pub(super) fn new() -> std::sync::Arc<SteppedWall> {
        std::sync::Arc::new(SteppedWall {
            step: std::sync::Mutex::new(time::Duration::ZERO),
        })
    }

    /// Steps the wall clock by `by` (back when negative).
    pub(super) fn step(&self, by: time::Duration) {
        *self.step.lock().unwrap() += by;
    }
}

impl crate::clock::Clock for SteppedWall {
    fn now(&self) -> time::OffsetDateTime {
        time::OffsetDateTime::now_utc() + *self.step.lock().unwrap()
    }

    fn monotonic(&self) -> Duration {
        crate::clock::SystemClock.monotonic()
    }
}
