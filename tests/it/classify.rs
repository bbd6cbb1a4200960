//! Every row of the agent's classification of Jira's answers (docs/design/agent-and-jira.md,
//! "How the agent reads Jira's answers"), sent as recorded, with what follows from it: the
//! command's status and deliveries, the hub's view of the agent, and what Jira received.
//!
//! The real agent loop (`run_agent_for_test`) and the real hub over HTTP share one
//! `ManualClock` ([`crate::agent_waits::Hub`]); the simulated Jira stands behind a small front
//! on a port of its own that stamps every answer the way Data Center does and answers some
//! requests itself, as a real Jira (or the proxy in front of it) does. Sources of each answer
//! are beside it.

use crate::agent_waits::{Hub, seed};
use jira_hub::clock::Clock;
use jira_hub::domain::command::{CommandStatus, CommandType};
use jira_hub::sim::jira::{Broken, Endpoint, FakeJira, Fault, Mode, PROJECT};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// As many times as the test lasts.
pub(crate) const ALWAYS: usize = usize::MAX;

/// What the front does with a request a rule matches.
#[derive(Clone)]
pub(crate) enum Act {
    /// Answers itself; nothing reaches Jira.
    Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Passes it to Jira and adds these headers to Jira's answer.
    Stamp(Vec<(String, String)>),
}

#[derive(Clone)]
struct Rule {
    method: &'static str,
    /// The path without its query, exactly.
    path: String,
    act: Act,
    times: usize,
}

/// A front for the simulated Jira: answers as its rules say, passes the rest on with the
/// `stamp` headers on every answer. Records each request's method, path and status.
pub(crate) struct Front {
    pub(crate) url: String,
    rules: Arc<Mutex<Vec<Rule>>>,
    seen: Arc<Mutex<Vec<(String, String, u16)>>>,
}

/// What Data Center adds to every answer of a request authenticated by Basic auth or a token:
/// `X-Seraph-LoginReason: OK` and `X-AUSERNAME` (a recorded Jira 8.20.8 exchange; the
/// PowerShell module fixtures of Data Center `PUT` answers carry it on 204s too).
pub(crate) fn data_center_stamp() -> Vec<(String, String)> {
    vec![
        ("X-Seraph-LoginReason".into(), "OK".into()),
        ("X-AUSERNAME".into(), "agent".into()),
    ]
}

impl Front {
    pub(crate) fn start(backend: &str, stamp: Vec<(String, String)>) -> Front {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let backend = backend.trim_start_matches("http://").to_string();
        let rules: Arc<Mutex<Vec<Rule>>> = Arc::default();
        let seen: Arc<Mutex<Vec<(String, String, u16)>>> = Arc::default();
        let (r, s) = (rules.clone(), seen.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (rules, seen, backend, stamp) =
                    (r.clone(), s.clone(), backend.clone(), stamp.clone());
                std::thread::spawn(move || serve(stream, &backend, &rules, &seen, &stamp));
            }
        });
        Front { url, rules, seen }
    }

    pub(crate) fn rule(&self, method: &'static str, path: &str, act: Act, times: usize) {
        self.rules.lock().unwrap().push(Rule {
            method,
            path: path.to_string(),
            act,
            times,
        });
    }

    fn clear(&self) {
        self.rules.lock().unwrap().clear();
    }

    /// How many requests of `method` to `path` came.
    pub(crate) fn count(&self, method: &str, path: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, p, _)| m == method && p == path)
            .count()
    }

    fn writes(&self) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _, _)| m != "GET")
            .count()
    }
}

fn serve(
    stream: TcpStream,
    backend: &str,
    rules: &Mutex<Vec<Rule>>,
    seen: &Mutex<Vec<(String, String, u16)>>,
    stamp: &[(String, String)],
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() || line.is_empty() {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let path = target.split('?').next().unwrap_or("").to_string();
    let mut head = Vec::new();
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
            break;
        }
        let lower = header.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if !lower.starts_with("connection:") {
            head.push(header);
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let act = {
        let mut rules = rules.lock().unwrap();
        rules
            .iter_mut()
            .find(|r| r.times > 0 && r.method == method && r.path == path)
            .map(|r| {
                if r.times != ALWAYS {
                    r.times -= 1;
                }
                r.act.clone()
            })
    };
    let (status, answer) = match act {
        Some(Act::Answer {
            status,
            headers,
            body,
        }) => {
            let mut text = format!("HTTP/1.1 {status} X\r\n");
            for (name, value) in stamp.iter().chain(&headers) {
                text.push_str(&format!("{name}: {value}\r\n"));
            }
            text.push_str(&format!(
                "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ));
            (status, text.into_bytes())
        }
        other => {
            let mut extra = stamp.to_vec();
            if let Some(Act::Stamp(headers)) = other {
                // The rule's value replaces the stamp's (one `X-Seraph-LoginReason`).
                extra
                    .retain(|(name, _)| !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)));
                extra.extend(headers);
            }
            let mut upstream = TcpStream::connect(backend).unwrap();
            let mut request = line.clone().into_bytes();
            for header in &head {
                request.extend_from_slice(header.as_bytes());
            }
            request.extend_from_slice(b"Connection: close\r\n\r\n");
            request.extend_from_slice(&body);
            upstream.write_all(&request).unwrap();
            let mut answer = Vec::new();
            let _ = upstream.read_to_end(&mut answer);
            let Some(end) = answer.windows(2).position(|w| w == b"\r\n") else {
                return;
            };
            let status = String::from_utf8_lossy(&answer[..end])
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let mut stamped = answer[..end + 2].to_vec();
            for (name, value) in &extra {
                stamped.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
            }
            stamped.extend_from_slice(&answer[end + 2..]);
            (status, stamped)
        }
    };
    seen.lock().unwrap().push((method, path, status));
    let mut stream = stream;
    let _ = stream.write_all(&answer);
}

pub(crate) fn answer(status: u16, headers: &[(&str, &str)], body: &str) -> Act {
    let mut headers: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    if !body.is_empty() {
        headers.push((
            "Content-Type".into(),
            "application/json;charset=UTF-8".into(),
        ));
    }
    Act::Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

/// A Data Center 403 about one issue: Jira's `ErrorCollection` in the account's language, with
/// the login it took (`X-Seraph-LoginReason: OK`, from the stamp).
pub(crate) fn forbidden_comment() -> Act {
    answer(
        403,
        &[],
        r#"{"errorMessages":["У вас нет прав на добавление комментариев к этой задаче."],"errors":{}}"#,
    )
}

/// Cloud's 401 to a call that needs a user, its token revoked (ServiceNow KB2942093).
pub(crate) fn unauthorized() -> Act {
    answer(
        401,
        &[],
        r#"{"errorMessages":["Client must be authenticated to access this resource."],"errors":{}}"#,
    )
}

/// Data Center's CAPTCHA lockout (the recorded 8.20.8 answer).
fn captcha() -> Act {
    answer(
        403,
        &[
            ("X-Seraph-LoginReason", "AUTHENTICATED_FAILED"),
            (
                "X-Authentication-Denied-Reason",
                "CAPTCHA_CHALLENGE; login-url=http://jira.example.com/login.jsp",
            ),
        ],
        "",
    )
}

/// A Data Center 9.x API call sent to the login page (302 to `/login.jsp`).
fn to_login() -> Act {
    answer(
        302,
        &[(
            "Location",
            "http://jira.example.com/login.jsp?os_destination=%2Frest%2Fapi%2F2%2Fmyself",
        )],
        "",
    )
}

fn settings() -> Value {
    // A lease of 10 s and two deliveries: what the issue tried the revoked token with.
    json!({"pacing": {"min_interval_ms": 0, "claim_timeout_seconds": 10, "max_deliveries": 2}})
}

fn comment(key: &str, body: &str) -> Value {
    json!({"type": "comment", "params": {"key": key, "body": body}})
}

fn comment_path(key: &str) -> String {
    format!("/rest/api/2/issue/{key}/comment")
}

/// Runs the agent (in a thread, on the hub's clock) until `done` says so, at most a minute of
/// wall time; returns whether it did.
pub(crate) fn run_until(hub: &Hub, config: &str, done: impl Fn() -> bool) -> bool {
    // Claims answered at once: the hub's timers (which wake claims held for work) do not run
    // here, and the agent's idle polls move the clock.
    let mut config: Value = serde_json::from_str(config).unwrap();
    config["claim_wait_seconds"] = json!(0);
    let config = config.to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let agent = {
        let (clock, stop, config) = (hub.clock.clone(), stop.clone(), config.to_string());
        std::thread::spawn(move || {
            jira_hub::run_agent_for_test(&config, clock, None, stop, None).unwrap()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut reached = false;
    while Instant::now() < deadline {
        if done() {
            reached = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::SeqCst);
    agent.join().unwrap();
    reached
}

pub(crate) fn agent_view(hub: &Hub) -> jira_hub::service::AgentView {
    hub.read().agents().unwrap().into_iter().next().unwrap()
}

pub(crate) fn all_ended(hub: &Hub) -> bool {
    hub.commands().iter().all(|c| c.status.is_terminal())
}

/// Held, the hub showing why with «с <time>», and the clock past a few leases.
fn held_for_a_while(hub: &Hub, words: &str, from: Duration) -> bool {
    hub.clock.monotonic() > from + Duration::from_secs(60)
        && hub.read().agents().unwrap().iter().any(|a| {
            a.jira_held
                .as_deref()
                .is_some_and(|h| h.contains(words) && h.contains(" с "))
        })
}

/// Rows "credentials or access refused for the agent" and "unreachable": the queue is held,
/// the command given back at once and not counted, nothing written, the hub shows why.
#[test]
fn credentials_refused_in_every_recorded_form_hold_the_queue_and_spend_no_delivery() {
    type Setup = fn(&Front, &str);
    let rows: Vec<(&str, Setup, &str)> = vec![
        (
            "401 on the write, and on the probe",
            |front, key| {
                front.rule("POST", &comment_path(key), unauthorized(), ALWAYS);
                front.rule("GET", "/rest/api/2/myself", unauthorized(), ALWAYS);
            },
            "(HTTP 401)",
        ),
        (
            "a CAPTCHA lockout (403 with AUTHENTICATED_FAILED and X-Authentication-Denied-Reason)",
            |front, key| {
                front.rule("POST", &comment_path(key), captcha(), ALWAYS);
                front.rule("GET", "/rest/api/2/myself", captcha(), ALWAYS);
            },
            "CAPTCHA_CHALLENGE",
        ),
        (
            "a 302 to the login page",
            |front, key| {
                front.rule("POST", &comment_path(key), to_login(), ALWAYS);
                front.rule("GET", "/rest/api/2/myself", to_login(), ALWAYS);
            },
            "login.jsp",
        ),
        (
            "a 200 whose X-Seraph-LoginReason says the login failed",
            |front, _| {
                let failed = vec![(
                    "X-Seraph-LoginReason".to_string(),
                    "AUTHENTICATED_FAILED".to_string(),
                )];
                front.rule(
                    "GET",
                    "/rest/api/2/serverInfo",
                    Act::Stamp(failed.clone()),
                    ALWAYS,
                );
                front.rule("GET", "/rest/api/2/myself", Act::Stamp(failed), ALWAYS);
            },
            "AUTHENTICATED_FAILED",
        ),
    ];
    for (row, setup, words) in rows {
        let fake = FakeJira::start(Mode::DataCenter);
        let key = seed(&fake);
        let front = Front::start(&fake.url(), data_center_stamp());
        setup(&front, &key);
        let hub = Hub::start(settings(), json!([comment(&key, "первый")]));
        let config = hub.agent_config(&front.url, json!({}));
        let from = hub.clock.monotonic();
        assert!(
            run_until(&hub, &config, || held_for_a_while(&hub, words, from)),
            "{row}: {:?}",
            hub.read().agents().unwrap()
        );
        let commands = hub.commands();
        assert_eq!(commands[0].status, CommandStatus::Queued, "{row}");
        assert_eq!(
            commands[0].deliveries, 0,
            "{row}: no delivery spent: {commands:?}"
        );
        let agent = agent_view(&hub);
        assert_eq!(agent.jira_ok, Some(false), "{row}");
        assert!(agent.jira_down_since.is_some(), "{row}");
        assert!(fake.comments(&key).is_empty(), "{row}");
        assert!(
            front.count("POST", &comment_path(&key)) <= 1,
            "{row}: never repeated while held"
        );
        if ["CAPTCHA_CHALLENGE", "AUTHENTICATED_FAILED"].contains(&words) {
            // Jira's login refused the credentials themselves: one login refused (the run's
            // first `myself`, which asks who the agent is, or the write), then they are not sent
            // again unless they change; the hub says so.
            assert!(
                front.count("GET", "/rest/api/2/myself") + front.count("POST", &comment_path(&key))
                    <= 1,
                "{row}: refused credentials are not sent again"
            );
            assert!(
                agent.jira_held.as_deref().is_some_and(
                    |held| held.starts_with("Учётные данные отвергнуты, агент ждёт новых")
                ),
                "{row}: {:?}",
                agent.jira_held
            );
        } else {
            assert!(
                front.count("GET", "/rest/api/2/myself") >= 2,
                "{row}: recovery is probed with an authenticated call"
            );
        }
        // Jira takes the agent again: the probe succeeds, the command runs, its first delivery.
        front.clear();
        assert!(run_until(&hub, &config, || all_ended(&hub)), "{row}");
        let commands = hub.commands();
        assert_eq!(commands[0].status, CommandStatus::Done, "{row}");
        assert_eq!(commands[0].deliveries, 1, "{row}");
        assert_eq!(fake.comments(&key).len(), 1, "{row}");
        let agent = agent_view(&hub);
        assert_eq!(
            (agent.jira_ok, agent.jira_held),
            (Some(true), None),
            "{row}"
        );
    }
}

/// A held agent whose probe (`GET myself`) then meets a rate limit stays down: held wins over
/// the pause. Before, the pause's branch (and a probe answered 429) reported `jira_ok: true`, so
/// the console showed «Jira доступна» while nothing was claimed. The 429 with `Retry-After` is
/// Data Center's rate-limit answer (Atlassian, "Improving instance stability with rate
/// limiting": 429 Too Many Requests, `Retry-After`).
#[test]
fn a_held_agent_that_meets_a_rate_limit_is_still_down() {
    let fake = FakeJira::start(Mode::DataCenter);
    let key = seed(&fake);
    let front = Front::start(&fake.url(), data_center_stamp());
    front.rule("POST", &comment_path(&key), to_login(), ALWAYS);
    // The run's first `myself` and the command's probe of its credentials are sent to the
    // login page (held); every later probe meets the rate limit.
    front.rule("GET", "/rest/api/2/myself", to_login(), 2);
    front.rule(
        "GET",
        "/rest/api/2/myself",
        answer(
            429,
            &[("Retry-After", "600")],
            r#"{"errorMessages":["Rate limit exceeded."]}"#,
        ),
        ALWAYS,
    );
    let hub = Hub::start(settings(), json!([comment(&key, "первый")]));
    let config = hub.agent_config(&front.url, json!({}));
    let limited = || {
        hub.read().agents().unwrap().iter().any(|a| {
            a.last_error
                .as_deref()
                .is_some_and(|e| e.contains("ограничивает частоту"))
        })
    };
    assert!(
        run_until(&hub, &config, || limited()
            && front.count("GET", "/rest/api/2/myself") >= 3),
        "{:?}",
        hub.read().agents().unwrap()
    );
    let agent = agent_view(&hub);
    assert_eq!(agent.jira_ok, Some(false), "{agent:?}");
    assert!(agent.jira_held.is_some(), "{agent:?}");
    let error = agent.last_error.clone().unwrap_or_default();
    assert!(
        error.contains("login.jsp") && error.contains("ограничивает частоту"),
        "why it is held, and the pause: {error}"
    );
    assert_eq!(hub.commands()[0].deliveries, 0);
    assert!(fake.comments(&key).is_empty());
}

/// Row "unreachable": a connection refused holds the queue the same way.
#[test]
fn an_unreachable_jira_holds_the_queue_and_the_hub_says_since_when() {
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let hub = Hub::start(settings(), json!([comment("AURORA-1", "x")]));
    let from = hub.clock.monotonic();
    let config = hub.agent_config(&closed, json!({}));
    assert!(run_until(&hub, &config, || held_for_a_while(
        &hub,
        "соединение отвергнуто",
        from
    )));
    let commands = hub.commands();
    assert_eq!(
        (commands[0].status, commands[0].deliveries),
        (CommandStatus::Queued, 0)
    );
}

/// The must-show scenario: a revoked Cloud token (`serverInfo` 200 with
/// `X-Seraph-LoginReason: AUTHENTICATED_FAILED`, every other call 401) spends no delivery over
/// several leases, nothing reaches Jira, and the hub shows the 401 with since when.
#[test]
fn a_revoked_cloud_token_spends_no_delivery_over_several_leases_and_the_hub_shows_the_401() {
    let fake = FakeJira::start(Mode::Cloud);
    let key = seed(&fake);
    let front = Front::start(&fake.url(), Vec::new());
    front.rule(
        "GET",
        "/rest/api/2/serverInfo",
        Act::Stamp(vec![(
            "X-Seraph-LoginReason".into(),
            "AUTHENTICATED_FAILED".into(),
        )]),
        ALWAYS,
    );
    front.rule("GET", "/rest/api/2/myself", unauthorized(), ALWAYS);
    for method in ["POST", "PUT"] {
        front.rule(method, &comment_path(&key), unauthorized(), ALWAYS);
    }
    let hub = Hub::start(
        settings(),
        json!([
            comment(&key, "один"),
            comment(&key, "два"),
            comment(&key, "три")
        ]),
    );
    let config = hub.agent_config(&front.url, json!({}));
    let from = hub.clock.monotonic();
    // Six leases of 10 s at least.
    assert!(run_until(&hub, &config, || hub.clock.monotonic()
        > from + Duration::from_secs(60)
        && held_for_a_while(
            &hub,
            // A 401 on `myself` without Seraph's `OK` is Jira's login refusing the token: held
            // as refused credentials, not sent again by this run.
            "Учётные данные отвергнуты, агент ждёт новых",
            from
        )));
    let commands = hub.commands();
    assert!(
        commands
            .iter()
            .all(|c| c.status == CommandStatus::Queued && c.deliveries == 0),
        "{commands:?}"
    );
    assert_eq!(front.writes(), 0, "nothing was sent to Jira to write");
    let agent = agent_view(&hub);
    assert_eq!(agent.jira_ok, Some(false));
    front.clear();
    assert!(run_until(&hub, &config, || all_ended(&hub)));
    assert!(
        hub.commands()
            .iter()
            .all(|c| c.status == CommandStatus::Done && c.deliveries == 1),
        "{:?}",
        hub.commands()
    );
    assert_eq!(fake.comments(&key).len(), 3);
}

/// Credentials lost in the middle of a claim: the command that met the 401 and the rest of the
/// claim go back at once, uncounted; the one done before stays done.
#[test]
fn credentials_lost_mid_claim_give_back_the_rest_at_once_uncounted() {
    let fake = FakeJira::start(Mode::DataCenter);
    let keys: Vec<String> = (0..3).map(|_| seed(&fake)).collect();
    let front = Front::start(&fake.url(), data_center_stamp());
    front.rule("POST", &comment_path(&keys[1]), unauthorized(), ALWAYS);
    front.rule("GET", "/rest/api/2/myself", unauthorized(), ALWAYS);
    let hub = Hub::start(
        settings(),
        json!(keys.iter().map(|k| comment(k, "текст")).collect::<Vec<_>>()),
    );
    let config = hub.agent_config(&front.url, json!({}));
    let from = hub.clock.monotonic();
    assert!(run_until(&hub, &config, || held_for_a_while(
        &hub,
        "(HTTP 401)",
        from
    )));
    let commands = hub.commands();
    assert_eq!(
        (commands[0].status, commands[0].deliveries),
        (CommandStatus::Done, 1)
    );
    for command in &commands[1..] {
        assert_eq!(
            (command.status, command.deliveries),
            (CommandStatus::Queued, 0),
            "{commands:?}"
        );
        assert!(
            command
                .error
                .as_deref()
                .is_some_and(|e| e.contains("HTTP 401")),
            "{command:?}"
        );
    }
    assert_eq!(front.count("POST", &comment_path(&keys[2])), 0);
    front.clear();
    assert!(run_until(&hub, &config, || all_ended(&hub)));
    for (command, key) in hub.commands().iter().zip(&keys) {
        assert_eq!(
            (command.status, command.deliveries),
            (CommandStatus::Done, 1)
        );
        assert_eq!(fake.comments(key).len(), 1);
    }
}

/// The must-show scenario: a comment Jira refuses (Data Center's 403 with
/// `X-Seraph-LoginReason: OK`) fails at once with Jira's words naming the key, and the next
/// command of the claim runs; the agent stays up.
#[test]
fn a_refused_comment_fails_at_once_with_jiras_words_while_the_next_command_runs() {
    let fake = FakeJira::start(Mode::DataCenter);
    let (refused, fine) = (seed(&fake), seed(&fake));
    let front = Front::start(&fake.url(), data_center_stamp());
    front.rule("POST", &comment_path(&refused), forbidden_comment(), ALWAYS);
    let hub = Hub::start(
        settings(),
        json!([comment(&refused, "нельзя"), comment(&fine, "можно")]),
    );
    let config = hub.agent_config(&front.url, json!({}));
    assert!(run_until(&hub, &config, || all_ended(&hub)));
    let commands = hub.commands();
    assert_eq!(
        (commands[0].status, commands[0].deliveries),
        (CommandStatus::Failed, 1)
    );
    let error = commands[0].error.clone().unwrap_or_default();
    assert!(
        error.contains(&refused) && error.contains("нет прав на добавление комментариев"),
        "{error}"
    );
    assert_eq!(
        (commands[1].status, commands[1].deliveries),
        (CommandStatus::Done, 1)
    );
    assert_eq!(front.count("POST", &comment_path(&refused)), 1);
    assert!(fake.comments(&refused).is_empty());
    assert_eq!(fake.comments(&fine).len(), 1);
    let agent = agent_view(&hub);
    assert_eq!((agent.jira_ok, agent.jira_held), (Some(true), None));
}

/// The must-show scenario: a board read refused (403 to a user without a Jira Software licence:
/// «Returned if the user does not have valid license», DC agile REST reference) lets the refresh
/// ingest every page and end `done`, with the refusal as a warning in its result.
#[test]
fn a_refused_board_read_lets_the_refresh_end_done_with_a_warning() {
    let fake = FakeJira::start(Mode::DataCenter);
    fake.seed_issues(PROJECT, "AWPCA", 7);
    let front = Front::start(&fake.url(), data_center_stamp());
    front.rule(
        "GET",
        "/rest/agile/1.0/board/77",
        answer(
            403,
            &[],
            r#"{"errorMessages":["У пользователя нет действующей лицензии Jira Software."],"errors":{}}"#,
        ),
        ALWAYS,
    );
    let hub = Hub::start(
        settings(),
        json!([{"type": "refresh", "params": {"jql": format!("project = {PROJECT}"), "boards": [77]}}]),
    );
    let config = hub.agent_config(&front.url, json!({}));
    assert!(run_until(&hub, &config, || all_ended(&hub)));
    let commands = hub.commands();
    assert_eq!(
        (commands[0].status, commands[0].deliveries),
        (CommandStatus::Done, 1),
        "{commands:?}"
    );
    let result = commands[0].result.clone().unwrap_or_default();
    assert_eq!(result["total"], 7, "{result}");
    let warning = result["warnings"][0].as_str().unwrap_or_default();
    assert!(
        warning.contains("доска 77") && warning.contains("403"),
        "{result}"
    );
    let run = hub.read().run_of_command(commands[0].id).unwrap().unwrap();
    assert_eq!(run.run.status, jira_hub::domain::command::RunStatus::Done);
    assert_eq!(run.run.issues_seen, 7);
    assert_eq!(front.count("GET", "/rest/agile/1.0/board/77"), 1);
    let agent = agent_view(&hub);
    assert_eq!((agent.jira_ok, agent.jira_held), (Some(true), None));
}

/// The other rows, one comment (or edit, or refresh) each: done, refused (400, 404), throttled
/// (429, 503 with `Retry-After`), ambiguous (a proxy's 504 after Jira wrote it; a comment 2xx
/// without `id`; an SSO page with 200 on an edit), broken (a search page that is not JSON, one
/// whose `total` contradicts its empty `issues`).
#[test]
fn the_other_rows_end_as_the_table_says() {
    struct Row {
        name: &'static str,
        command: fn(&str) -> Value,
        setup: fn(&Front, &FakeJira, &str),
        status: CommandStatus,
        deliveries: u32,
        /// Comments on the issue at the end.
        comments: usize,
        /// Requests of the command's write (POST comment, PUT issue) Jira received.
        writes: usize,
    }
    fn put_labels(key: &str) -> Value {
        json!({"type": "ensure_issue", "params": {"key": key, "issue_type": "task", "summary": "Задача", "labels": ["новая"]}})
    }
    fn refresh(_: &str) -> Value {
        json!({"type": "refresh", "params": {"jql": format!("project = {PROJECT}"), "boards": []}})
    }
    fn a_comment(key: &str) -> Value {
        comment(key, "текст")
    }
    let rows = vec![
        Row {
            name: "done: a 201 with id (and X-Seraph-LoginReason: OK)",
            command: a_comment,
            setup: |_, _, _| {},
            status: CommandStatus::Done,
            deliveries: 1,
            comments: 1,
            writes: 1,
        },
        Row {
            name: "refused: 400 about a field",
            command: a_comment,
            setup: |front, _, key| {
                front.rule(
                    "POST",
                    &comment_path(key),
                    answer(
                        400,
                        &[],
                        r#"{"errorMessages":[],"errors":{"comment":"Комментарий не может быть пустым."}}"#,
                    ),
                    ALWAYS,
                )
            },
            status: CommandStatus::Failed,
            deliveries: 1,
            comments: 0,
            writes: 1,
        },
        Row {
            name: "refused: 404 (no such issue, or no permission to see it)",
            command: |_| comment(&format!("{PROJECT}-999"), "текст"),
            setup: |_, _, _| {},
            status: CommandStatus::Failed,
            deliveries: 1,
            comments: 0,
            writes: 0,
        },
        Row {
            name: "throttled: 429 with Retry-After",
            command: a_comment,
            setup: |front, _, key| {
                front.rule(
                    "POST",
                    &comment_path(key),
                    answer(
                        429,
                        &[("Retry-After", "3")],
                        r#"{"errorMessages":["Rate limit exceeded."]}"#,
                    ),
                    1,
                )
            },
            status: CommandStatus::Done,
            deliveries: 1,
            comments: 1,
            writes: 2,
        },
        Row {
            name: "throttled: 503 with Retry-After",
            command: a_comment,
            setup: |front, _, key| {
                front.rule(
                    "POST",
                    &comment_path(key),
                    answer(503, &[("Retry-After", "3")], ""),
                    1,
                )
            },
            status: CommandStatus::Done,
            // A write answered 503 is never sent again in its delivery: given back, the next
            // delivery looks, finds nothing and posts it (docs/design/agent-exactly-once.md).
            deliveries: 2,
            comments: 1,
            writes: 2,
        },
        Row {
            name: "ambiguous: a proxy's 504 while Jira wrote it",
            command: a_comment,
            setup: |_, fake, _| {
                fake.fault(
                    Endpoint::AddComment,
                    Fault::ProxyTimeout {
                        apply_after: Duration::ZERO,
                    },
                    1,
                )
            },
            // Released never: the agent looks for its marker within the grace,
            // finds the comment Jira wrote behind the 504, and reports it in this delivery.
            status: CommandStatus::Done,
            deliveries: 1,
            comments: 1,
            writes: 1,
        },
        Row {
            name: "ambiguous: a comment 201 without id",
            command: a_comment,
            setup: |front, _, key| {
                front.rule(
                    "POST",
                    &comment_path(key),
                    answer(
                        201,
                        &[],
                        r#"{"self":"http://jira/rest/api/2/issue/1/comment"}"#,
                    ),
                    1,
                )
            },
            status: CommandStatus::Done,
            deliveries: 2,
            comments: 1,
            writes: 2,
        },
        Row {
            name: "ambiguous: an edit answered by an SSO page with 200",
            command: put_labels,
            setup: |_, fake, _| fake.fault(Endpoint::EditIssue, Fault::Broken(Broken::Html), 1),
            status: CommandStatus::Done,
            deliveries: 2,
            comments: 0,
            writes: 2,
        },
        Row {
            name: "broken: a search page that is not JSON",
            command: refresh,
            setup: |_, fake, _| fake.fault(Endpoint::Search, Fault::Broken(Broken::Html), 1),
            status: CommandStatus::Failed,
            deliveries: 1,
            comments: 0,
            writes: 0,
        },
        Row {
            name: "broken: total contradicts an empty page",
            command: refresh,
            setup: |front, _, _| {
                front.rule(
                    "GET",
                    "/rest/api/2/search",
                    answer(
                        200,
                        &[],
                        r#"{"startAt":0,"maxResults":50,"total":5,"issues":[]}"#,
                    ),
                    ALWAYS,
                )
            },
            status: CommandStatus::Failed,
            deliveries: 1,
            comments: 0,
            writes: 0,
        },
    ];
    for row in rows {
        let fake = FakeJira::start(Mode::DataCenter);
        let key = seed(&fake);
        let front = Front::start(&fake.url(), data_center_stamp());
        (row.setup)(&front, &fake, &key);
        let hub = Hub::start(settings(), json!([(row.command)(&key)]));
        let config = hub.agent_config(&front.url, json!({"release_grace_seconds": 3}));
        assert!(run_until(&hub, &config, || all_ended(&hub)), "{}", row.name);
        let commands = hub.commands();
        let command = &commands[0];
        assert_eq!(
            (command.status, command.deliveries),
            (row.status, row.deliveries),
            "{}: {command:?}",
            row.name
        );
        if row.status == CommandStatus::Failed && command.command_type == CommandType::Comment {
            let error = command.error.clone().unwrap_or_default();
            let named = command.params["key"].as_str().unwrap_or_default();
            assert!(error.contains(named), "{}: {error}", row.name);
        }
        if command.command_type == CommandType::Comment && row.status == CommandStatus::Done {
            assert!(
                command
                    .result
                    .as_ref()
                    .is_some_and(|r| !r["comment_id"].is_null()),
                "{}: {command:?}",
                row.name
            );
        }
        assert_eq!(fake.comments(&key).len(), row.comments, "{}", row.name);
        let writes = front.count("POST", &comment_path(&key))
            + front.count("PUT", &format!("/rest/api/2/issue/{key}"));
        assert_eq!(writes, row.writes, "{}", row.name);
        if command.command_type == CommandType::EnsureIssue {
            assert!(fake.labels_of(&key).contains(&"новая".to_string()));
        }
        let agent = agent_view(&hub);
        assert_eq!(
            (agent.jira_ok, agent.jira_held),
            (Some(true), None),
            "{}",
            row.name
        );
    }
}

/// The hub keeps the agent's reason and since when (the first heartbeat that said it; a new
/// reason starts anew; Jira answering again clears it) and shows them in `GET /agents` and
/// `/metrics`.
#[tokio::test]
async fn the_hub_shows_why_jira_is_held_and_since_when() {
    use axum::http::Method;
    let api = crate::http::api();
    let heartbeat = |id: &str, ok: bool, error: Option<&str>| {
        json!({"kind": "heartbeat", "id": id, "agent": "agent-h", "sent_at": "2026-11-29T10:00:00Z",
               "agent_version": "1", "jira_ok": ok, "last_error": error})
    };
    let reason = "Jira не принимает учётные данные агента (HTTP 401)";
    let (status, _) = api
        .agent("/agent/heartbeat", heartbeat("h1", false, Some(reason)))
        .await;
    assert_eq!(status, 200);
    let (_, agents) = api.client(Method::GET, "/agents", None).await;
    let since = agents[0]["jira_down_since"].as_str().unwrap().to_string();
    let held = agents[0]["jira_held"].as_str().unwrap().to_string();
    let clock = &since[11..16];
    assert_eq!(held, format!("{reason} с {clock} UTC"), "{agents}");
    let (_, metrics) = api.call(Method::GET, "/metrics", None, None).await;
    let metrics = metrics.as_str().unwrap().to_string();
    // The label is the class of the reason, a bounded word: never the agent's free text.
    assert!(
        metrics
            .contains("jira_hub_agent_jira_held_seconds{agent=\"agent-h\",reason=\"credentials\"}"),
        "{metrics}"
    );
    assert!(!metrics.contains(reason), "{metrics}");
    // The same reason again keeps its time; another is shown; Jira up clears it.
    api.agent("/agent/heartbeat", heartbeat("h2", false, Some(reason)))
        .await;
    let (_, agents) = api.client(Method::GET, "/agents", None).await;
    assert_eq!(agents[0]["jira_down_since"], since.as_str());
    api.agent(
        "/agent/heartbeat",
        heartbeat(
            "h3",
            false,
            Some("Jira недоступна: нет соединения: соединение отвергнуто"),
        ),
    )
    .await;
    let (_, agents) = api.client(Method::GET, "/agents", None).await;
    assert!(
        agents[0]["jira_held"]
            .as_str()
            .is_some_and(|h| h.starts_with("Jira недоступна: нет соединения")),
        "{agents}"
    );
    api.agent("/agent/heartbeat", heartbeat("h4", true, None))
        .await;
    let (_, agents) = api.client(Method::GET, "/agents", None).await;
    assert!(agents[0].get("jira_held").is_none(), "{agents}");
    assert!(agents[0].get("jira_down_since").is_none(), "{agents}");
    let (_, metrics) = api.call(Method::GET, "/metrics", None, None).await;
    assert!(
        !metrics
            .as_str()
            .unwrap()
            .contains("jira_hub_agent_jira_held_seconds"),
        "{metrics}"
    );
}
