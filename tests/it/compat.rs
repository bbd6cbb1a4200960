//! The protocol across releases: this hub with the previous release's agent messages, this agent
//! with the previous release's hub answers, each read from the golden files of
//! `tests/fixtures/protocol/` (captured from the real binaries, see the README there). For each
//! pair: what works, what is withheld and how it shows. An edit with a base is never executed
//! unchecked.

use crate::agent_waits::{Hub, seed};
use crate::classify::{all_ended, run_until};
use crate::conflicts::{Stage, edit, seeded};
use crate::support::*;
use jira_hub::domain::command::CommandStatus;
use jira_hub::protocol::{AgentAnswer, AgentRequest, ClaimAnswer, Peer, decode_value};
use jira_hub::sim::jira::{FakeJira, Mode};
use serde_json::{Value, json};

/// The previous release (commit 2f1650c, 0.1.0) and this one.
const PREVIOUS: &str = "0.1.0";
const THIS: &str = "0.2.0";

fn golden(release: &str, name: &str) -> Value {
    let path = fixtures().join("protocol").join(release).join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// A golden request as a new one of the same agent: a fresh id, no token (HTTP carries it in a
/// header), this moment.
fn resent(mut request: Value, id: &str) -> Value {
    request["id"] = json!(id);
    request.as_object_mut().unwrap().remove("token");
    request
}

/// Every request the previous release's agent sends is read by this hub; it says nothing of
/// itself, so the hub takes it for revision 1 with no capability. This agent's requests say
/// revision 2, `edit_base` and its build.
#[test]
fn this_hub_reads_the_requests_of_both_releases_and_tells_them_apart() {
    for (release, revision, checks_bases) in [(PREVIOUS, 1, false), (THIS, 2, true)] {
        for name in ["claim.json", "heartbeat.json", "report.json"] {
            let request = golden(release, name);
            let decoded = decode_value(request.clone())
                .unwrap_or_else(|e| panic!("{release} {name}: refused: {e}"));
            let peer = match &decoded {
                AgentRequest::Claim(claim) => &claim.peer,
                AgentRequest::Heartbeat(heartbeat) => &heartbeat.peer,
                AgentRequest::Report(report) => {
                    assert!(!report.results.is_empty(), "{release} {name}");
                    continue;
                }
            };
            assert_eq!(peer.revision(), revision, "{release} {name}");
            assert_eq!(
                peer.can(jira_hub::protocol::CAP_EDIT_BASE),
                checks_bases,
                "{release} {name}"
            );
            assert_eq!(
                peer.build.as_ref().map(|b| b.version.as_str()),
                (release == THIS).then_some(THIS),
                "{release} {name}"
            );
        }
    }
}

/// This agent reads every answer of both hubs. The previous hub's claim answer says nothing of
/// itself: no `bounded_give_backs`, so the agent bounds its give-backs itself; and it carries no
/// `previous_release`. This hub's says revision 2 and its build.
#[test]
fn this_agent_reads_the_answers_of_both_hubs() {
    for release in [PREVIOUS, THIS] {
        let claim: ClaimAnswer = serde_json::from_value(golden(release, "claim-answer.json"))
            .unwrap_or_else(|e| panic!("{release}: {e}"));
        let types: std::collections::BTreeSet<&str> = claim
            .commands
            .iter()
            .map(|c| c.command_type.as_str())
            .collect();
        assert!(!types.is_empty(), "{release}: commands handed out");
        let bounds = claim
            .hub
            .can(jira_hub::protocol::HUB_CAP_BOUNDED_GIVE_BACKS);
        assert_eq!(bounds, release == THIS, "{release}: {:?}", claim.hub);
        if release == PREVIOUS {
            assert_eq!(*claim.hub, Peer::default(), "the previous hub says nothing");
        }
        for name in ["report-answer.json", "heartbeat-answer.json"] {
            let answer: AgentAnswer = serde_json::from_value(golden(release, name))
                .unwrap_or_else(|e| panic!("{release} {name}: {e}"));
            assert!(!matches!(answer, AgentAnswer::Claim(_)), "{release} {name}");
        }
    }
}

/// The previous release's agent claims (its golden claim, sent again over HTTP): it gets the
/// comment but never the edit with a base, which waits — «ждёт агента, который проверяет
/// конфликты» in `GET /commands/{id}` and the console, `jira_hub_commands_withheld` in
/// `/metrics` (the console's words: `console::an_edit_withheld_from_an_older_agent_says_so…`),
/// and the agent shown with its version and protocol 1. Then this release's agent
/// claims it and writes only after reading Jira's value: the check ran.
#[test]
fn an_edit_with_a_base_waits_for_an_agent_that_checks_bases() {
    let (stage, keys) = Stage::start(Mode::DataCenter, &[seeded()]);
    let key = &keys[0];
    let batch = stage.enqueue(json!([edit(key, json!({"summary": "Наше"}))]));
    let other = stage.enqueue(json!([
        {"type": "comment", "params": {"key": key, "body": "старому агенту можно"}}
    ]));
    let hub = &stage.hub;
    let commands = hub.commands();
    let edit_id = commands.iter().find(|c| c.batch_id == batch).unwrap().id;
    let comment_id = commands.iter().find(|c| c.batch_id == other).unwrap().id;
    assert!(
        jira_hub::domain::edit::has_base(
            &commands.iter().find(|c| c.id == edit_id).unwrap().params
        ),
        "the mirror gave the edit a base"
    );

    let old = resent(golden(PREVIOUS, "claim.json"), "old-claim-1");
    let (status, answer) = http(
        &hub.address,
        "POST",
        "/agent/claim",
        Some(&hub.agent_token),
        Some(&old),
    );
    assert_eq!(status, 200, "{answer}");
    let handed: Vec<i64> = answer["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_i64().unwrap())
        .collect();
    assert_eq!(handed, vec![comment_id], "only the comment: {answer}");
    assert_eq!(
        answer["protocol"],
        json!(2),
        "the hub says what it is: {answer}"
    );

    let (_, view) = http(
        &hub.address,
        "GET",
        &format!("/commands/{edit_id}"),
        Some(&hub.client_token),
        None,
    );
    assert_eq!(view["status"], "queued", "{view}");
    assert_eq!(
        view["waiting"], "ждёт агента, который проверяет конфликты",
        "{view}"
    );
    let metrics = || {
        let (_, text) = http(
            &hub.address,
            "GET",
            "/metrics",
            Some(&hub.client_token),
            None,
        );
        text.as_str().unwrap().to_string()
    };
    let before = metrics();
    assert!(before.contains("jira_hub_commands_withheld 1"), "{before}");
    let old_agent = old["agent"].as_str().unwrap();
    assert!(
        before.contains(&format!(
            "jira_hub_agent_info{{agent=\"{old_agent}\",version=\"0.1.0\",commit=\"?\",protocol=\"1\"}} 1"
        )),
        "{before}"
    );
    assert_eq!(stage.calls_on(key), (0, 0), "nothing read or written yet");

    // This release's agent: the edit, checked before it is written.
    stage.run();
    let done = stage.command(edit_id);
    assert_eq!(done.status, CommandStatus::Done, "{done:?}");
    assert!(done.waiting.is_none(), "{done:?}");
    let (reads, writes) = stage.calls_on(key);
    assert!(
        reads >= 1 && writes == 1,
        "read before the write: {reads} {writes}"
    );
    assert_eq!(stage.jira(key)["summary"], "Наше");
    let after = metrics();
    assert!(after.contains("jira_hub_commands_withheld 0"), "{after}");
}

/// A comment on `key` run by this agent under the previous hub's answers (a lease of 10 s) until
/// it ends; the hub and the command, which must have failed.
fn failed_under_previous_hub(
    fake: &FakeJira,
    key: &str,
    body: &str,
) -> (Hub, jira_hub::service::CommandView) {
    let hub = Hub::start_with(
        json!({"pacing": {"min_interval_ms": 0, "claim_timeout_seconds": 10, "max_deliveries": 3}}),
        json!([{"type": "comment", "params": {"key": key, "body": body}}]),
        as_previous_hub,
    );
    let config = hub.agent_config(&fake.url(), json!({}));
    assert!(
        run_until(&hub, &config, || all_ended(&hub)),
        "never ended: {:?}",
        hub.commands()
    );
    let command = hub.commands()[0].clone();
    assert_eq!(command.status, CommandStatus::Failed, "{command:?}");
    (hub, command)
}

/// Members of a claim answer the previous hub sends (2f1650c's `ClaimAnswer` and
/// `ClaimedCommand`, as its golden answer shows): everything else this hub adds is dropped.
const PREVIOUS_ANSWER: &[&str] = &[
    "kind",
    "request_id",
    "created_at",
    "settings_version",
    "settings",
    "pause_seconds",
    "commands",
    "max_report_bytes",
    "lease_seconds",
];
const PREVIOUS_COMMAND: &[&str] = &[
    "id",
    "batch_id",
    "seq",
    "type",
    "params",
    "delivery",
    "enqueued_at",
    "released_seconds_ago",
];

/// This hub's claim answers in the previous hub's form: no revision, no capability, no build,
/// no `previous_release`.
fn as_previous_hub(router: axum::Router) -> axum::Router {
    router.layer(axum::middleware::from_fn(
        |request: axum::extract::Request, next: axum::middleware::Next| async move {
            let claim = request.uri().path() == "/agent/claim";
            let response = next.run(request).await;
            if !claim {
                return response;
            }
            let (mut parts, body) = response.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
            let mut answer: Value = serde_json::from_slice(&bytes).unwrap();
            if let Some(object) = answer.as_object_mut() {
                object.retain(|name, _| PREVIOUS_ANSWER.contains(&name.as_str()));
            }
            for command in answer["commands"].as_array_mut().into_iter().flatten() {
                if let Some(object) = command.as_object_mut() {
                    object.retain(|name, _| PREVIOUS_COMMAND.contains(&name.as_str()));
                }
            }
            parts.headers.remove(axum::http::header::CONTENT_LENGTH);
            axum::response::Response::from_parts(
                parts,
                axum::body::Body::from(serde_json::to_vec(&answer).unwrap()),
            )
        },
    ))
}

/// The previous hub's golden claim answer has no member the stand-in above keeps out.
#[test]
fn the_previous_hubs_answer_has_only_the_members_its_stand_in_keeps() {
    let answer = golden(PREVIOUS, "claim-answer.json");
    for name in answer.as_object().unwrap().keys() {
        assert!(PREVIOUS_ANSWER.contains(&name.as_str()), "{name}");
    }
    for command in answer["commands"].as_array().unwrap() {
        for name in command.as_object().unwrap().keys() {
            assert!(PREVIOUS_COMMAND.contains(&name.as_str()), "{name}");
        }
    }
}

/// This agent under a hub that does not bound give-backs (the previous hub's answers: no
/// `previous_release`): a path refused while the credentials work goes back once, and the same
/// path refused again fails the command with Jira's words — the agent's own memory stands in for
/// `previous_release`. Before, it went
/// back every 1–2 s for ever.
#[test]
fn under_a_hub_that_does_not_bound_give_backs_the_agent_bounds_them() {
    let fake = FakeJira::start(Mode::Cloud);
    let scoped = seed(&fake);
    let path = format!("/rest/api/2/issue/{scoped}/comment");
    fake.refuse_scope(&path);
    let (hub, command) = failed_under_previous_hub(&fake, &scoped, "вне областей токена");
    assert_eq!(
        command.uncounted_releases, 1,
        "failed by the agent at its second refusal, not by the hub's budget: {command:?}"
    );
    let error = command.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("второй раз подряд") && error.contains(&path),
        "{error}"
    );
    let posts = fake
        .requests()
        .iter()
        .filter(|seen| seen.method == "POST" && seen.path == path)
        .count();
    assert_eq!(posts, 2, "one POST in each delivery");
    let conn = rusqlite::Connection::open(hub.dir.db()).unwrap();
    let said: i64 = count(
        &conn,
        "SELECT count(*) FROM agent_request WHERE kind = 'heartbeat'",
    );
    assert!(said >= 1, "a heartbeat was sent");
}

/// The agent's own bound in number: under a hub that does not bound give-backs, a comment whose
/// every delivery meets a `Retry-After` longer than the lease goes back 5 times and fails at the
/// 6th with the last reason and the agent's bound named — well before the hub's own budget of
/// uncounted give-backs, which the previous hub did not have.
#[test]
fn under_a_hub_that_does_not_bound_give_backs_a_command_goes_back_at_most_5_times() {
    let fake = FakeJira::start(Mode::DataCenter);
    let key = seed(&fake);
    fake.fault(
        jira_hub::sim::jira::Endpoint::AddComment,
        jira_hub::sim::jira::Fault::TooManyRequests {
            retry_after: Some(240),
            html: false,
        },
        50,
    );
    let (_hub, command) = failed_under_previous_hub(&fake, &key, "после паузы");
    let error = command.error.as_deref().unwrap_or_default();
    assert!(error.contains("предел агента (5 раз, 3600 с)"), "{error}");
    assert_eq!(command.uncounted_releases, 5, "{command:?}");
}
