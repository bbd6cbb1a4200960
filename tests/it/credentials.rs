//! Credentials refused, by Jira or by the hub, are not hammered: the real agent loop
//! (`jira_hub::run_agent_for_test`) on the hub's `ManualClock`, days and hours of its waits
//! taking no wall time (design: docs/design/agent-credentials.md).

use crate::agent_waits::Hub;
use crate::support::*;
use jira_hub::clock::{Clock, ManualClock};
use jira_hub::domain::command::CommandStatus;
use jira_hub::sim::jira::{FakeJira, Mode, TOKEN, basic_auth_with};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Runs the agent until the clock has moved `span` past now (or the wall's `limit` passed).
fn run_for(config: &str, clock: &Arc<ManualClock>, span: Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let agent = {
        let (config, clock, stop) = (config.to_string(), clock.clone(), stop.clone());
        std::thread::spawn(move || {
            jira_hub::run_agent_for_test(&config, clock, None, stop, None).unwrap()
        })
    };
    let until = clock.monotonic() + span;
    let wall = std::time::Instant::now() + Duration::from_secs(60);
    while clock.monotonic() < until && std::time::Instant::now() < wall {
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::SeqCst);
    agent.join().unwrap();
}

/// A password rotated in Jira while the agent's secret file still holds the old one: over three
/// days and ten restarts of the agent, the old secret is sent once (one failed login, far from
/// Data Center's CAPTCHA at three); the hub shows the refusal with its time all along; the new
/// secret written into the file is taken without a restart, and works.
#[test]
fn a_rotated_password_over_three_days_and_ten_restarts_fails_one_login() {
    let fake = FakeJira::start(Mode::DataCenter);
    let hub = Hub::start(json!({"pacing": {"min_interval_ms": 0}}), json!([]));
    let secrets = TestDir::new();
    let password = secrets.path().join("jira_password");
    std::fs::write(&password, "secret\n").unwrap();
    let state = secrets.path().join("state");
    let config = hub.agent_config(
        &fake.url(),
        json!({"jira_password": null, "jira_password_file": password, "state_dir": state,
               "heartbeat_seconds": 600}),
    );
    fake.set_password("rotated");
    let old = basic_auth_with("secret");
    for restart in 0..10 {
        run_for(&config, &hub.clock, Duration::from_secs(3 * 86_400 / 10));
        assert_eq!(
            fake.refused_logins(&old),
            1,
            "after run {restart}: the old secret was sent again"
        );
        let agent = hub.read().agents().unwrap().remove(0);
        assert_eq!(agent.jira_ok, Some(false), "run {restart}: {agent:?}");
        let held = agent.jira_held.unwrap_or_default();
        assert!(
            held.contains("отвергнуты") && held.contains(" с "),
            "run {restart}: {held}"
        );
    }
    assert!(fake.failed_logins() < 3, "no CAPTCHA");
    assert!(
        !std::fs::read_to_string(state.join("refused-credentials.json"))
            .unwrap()
            .contains("secret"),
        "a fingerprint, never the secret"
    );
    // The operator writes the new password: the running agent takes it at its next probe.
    std::fs::write(&password, "rotated\n").unwrap();
    run_for(&config, &hub.clock, Duration::from_secs(600));
    let agent = hub.read().agents().unwrap().remove(0);
    assert_eq!(agent.jira_ok, Some(true), "{agent:?}");
    assert_eq!(fake.refused_logins(&old), 1);
    assert_eq!(fake.refused_logins(&basic_auth_with("rotated")), 0);
    assert!(!state.join("refused-credentials.json").exists());
}

/// A personal access token that expires between two comments of one claim, on a project whose
/// permission scheme lets anyone comment: Data Center runs the second comment as nobody and
/// answers it 201 with `X-AUSERNAME: anonymous` (the simulated Jira, as Atlassian's "Allowing
/// anonymous access to your project" describes it). The comment exists, so the command goes back
/// `sent: true` and its delivery counts, while the queue is held for the credentials; once the
/// operator gives the agent a new token, the next delivery finds the comment by its marker and
/// posts nothing. Before, the give-back said `sent: false`: the delivery was not counted, and the
/// next one, a first delivery again, posted the comment a second time.
#[test]
fn a_comment_answered_anonymously_is_counted_and_not_posted_again() {
    let fake = FakeJira::start(Mode::DataCenter);
    fake.open_to_anyone(true);
    let key = crate::agent_waits::seed(&fake);
    let hub = Hub::start(
        json!({"pacing": {"min_interval_ms": 0}}),
        json!([{"type": "comment", "params": {"key": key, "body": "первый"}},
               {"type": "comment", "params": {"key": key, "body": "второй"}}]),
    );
    let secrets = TestDir::new();
    let token = secrets.path().join("jira_token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let config = hub.agent_config(
        &fake.url(),
        json!({"jira_password": null, "jira_token_file": token, "claim_wait_seconds": 0,
               "idle_poll_ms": 5000, "state_dir": secrets.path().join("state")}),
    );
    // The agent's probe and the first comment pass; the token expires as the second arrives.
    fake.expire_token_at_write(2);
    run_for(&config, &hub.clock, Duration::from_secs(120));
    let comments = fake.comments(&key);
    assert_eq!(comments.len(), 2, "{comments:?}");
    assert!(
        comments[1]["author"].is_null(),
        "run as nobody: {comments:?}"
    );
    let commands = hub.commands();
    assert_eq!(
        (commands[0].status, commands[0].deliveries),
        (CommandStatus::Done, 1),
        "{commands:?}"
    );
    assert_eq!(
        (commands[1].status, commands[1].deliveries),
        (CommandStatus::Queued, 1),
        "the anonymous 201 may have applied the write: its delivery counts: {commands:?}"
    );
    let agent = hub.read().agents().unwrap().remove(0);
    assert_eq!(
        agent.jira_ok,
        Some(false),
        "held for the credentials: {agent:?}"
    );

    // A new token: the agent takes it from its file, and the comment is not posted again.
    fake.set_token("pat-renewed");
    std::fs::write(&token, "pat-renewed\n").unwrap();
    run_for(&config, &hub.clock, Duration::from_secs(600));
    let commands = hub.commands();
    assert_eq!(commands[1].status, CommandStatus::Done, "{commands:?}");
    assert_eq!(fake.comments(&key).len(), 2, "{:?}", fake.comments(&key));
}

/// The hub's agent token rotated while the agent still sends the old one, over the relay for an
/// hour of the clock: the agent backs off to minutes (a few dozen requests, not one every
/// `idle_poll`), and the hub keeps at most one refused file a minute in `rejected/`; every
/// request is still answered, so the agent is never left waiting.
#[test]
fn a_rotated_agent_token_over_an_hour_costs_bounded_calls_and_files() {
    let fake = FakeJira::start(Mode::DataCenter);
    let dir = TestDir::new();
    let clock = crate::support::clock();
    let (mut hub, relay, token) = crate::quiet::relay_hub_on(&dir, &clock);
    let mut worker = crate::quiet::worker(&hub);
    // Before the rotation the agent was heard with its good token, Jira up.
    drop_file(
        &relay.join("inbox"),
        "heartbeat-agent-1-before.json",
        &json!({"kind": "heartbeat", "id": "agent-1-before", "agent": "agent-1",
                "sent_at": crate::quiet::at(&clock), "token": token, "agent_version": "1.4.0",
                "jira_ok": true, "heartbeat_seconds": 60}),
    );
    assert_eq!(worker.pass().unwrap().applied, 1);
    let config = json!({
        "jira_url": fake.url(), "jira_user": "agent", "jira_password": "secret",
        "agent_token": "the-token-before-rotation", "name": "agent-1",
        "relay_dir": relay, "idle_poll_ms": 100, "claim_wait_seconds": 0,
        "answer_timeout_seconds": 5,
    })
    .to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let agent = {
        let (clock, stop) = (clock.clone(), stop.clone());
        std::thread::spawn(move || {
            jira_hub::run_agent_for_test(&config, clock, None, stop, None).unwrap()
        })
    };
    let until = clock.monotonic() + Duration::from_secs(3600);
    let mut refused = 0;
    // On the code before the backoff the agent asked every 100 ms: the loop ends at 500.
    while clock.monotonic() < until && refused < 500 {
        refused += worker.pass().unwrap().refused;
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.store(true, Ordering::SeqCst);
    agent.join().unwrap();
    // What the agent wrote before it saw the stop is answered too.
    refused += worker.pass().unwrap().refused;
    let kept = std::fs::read_dir(relay.join("rejected"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().ends_with(".error.json"))
        .count();
    assert!(
        (5..=30).contains(&refused),
        "{refused} requests refused in an hour"
    );
    assert!(
        (1..=20).contains(&kept) && kept < refused,
        "{kept} files kept in rejected/ of {refused}"
    );
    let left: Vec<String> = std::fs::read_dir(relay.join("inbox"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "every request answered: {left:?} left");
    // The console shows the agent refused by the hub, with since when, not «Jira доступна».
    let agent = hub.agents().unwrap().remove(0);
    let refused = agent.hub_refused.clone().unwrap_or_default();
    assert!(
        refused.starts_with("Хаб отвергает токен агента с "),
        "{agent:?}"
    );
}

/// Root's `agent --check` of the service runs under the service's name: its heartbeat carries the
/// check's outcome, kept as the last check, and leaves the service's own state of Jira as the
/// service reported it (refused), not painted green.
#[test]
fn a_check_beside_the_service_does_not_paint_it_green() {
    use jira_hub::protocol::decode_value;
    let dir = TestDir::new();
    let clock = crate::support::clock();
    let mut hub = ready_hub(&dir, &clock);
    let refused = "Учётные данные отвергнуты и не отправляются, пока их не заменят";
    for request in [
        json!({"kind": "claim", "id": "svc-c", "agent": "svc", "sent_at": "2026-11-29T10:00:00Z",
               "agent_version": "1.4.0", "settings_version": 0, "max_commands": 5}),
        json!({"kind": "heartbeat", "id": "svc-h", "agent": "svc",
               "sent_at": "2026-11-29T10:00:00Z", "agent_version": "1.4.0", "jira_ok": false,
               "last_error": refused, "heartbeat_seconds": 60}),
        json!({"kind": "heartbeat", "id": "check-h", "agent": "svc",
               "sent_at": "2026-11-29T10:00:01Z", "agent_version": "1.4.0", "jira_ok": true,
               "check": {"ran_at": "2026-11-29T10:00:01.000000Z", "ok": true, "lines": []}}),
    ] {
        hub.handle_agent_request(&decode_value(request).unwrap())
            .unwrap();
    }
    let agent = hub.agents().unwrap().remove(0);
    assert_eq!(agent.jira_ok, Some(false), "{agent:?}");
    assert_eq!(agent.last_error.as_deref(), Some(refused));
    assert!(
        agent.last_check.is_some(),
        "the check is kept as the last check"
    );
}
