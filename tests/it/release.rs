//! A command the agent gives back (`released`: a write's answer
//! was lost and the write may still be running in Jira) is queued again with its delivery count,
//! not handed out before its grace, and told how long ago it was given back; it fails once it
//! used its deliveries. The report is decoded strictly. Time moves on a `ManualClock`.

use crate::support::*;
use jira_hub::domain::command::CommandStatus;
use serde_json::json;
use time::Duration;

fn one_create() -> jira_hub::service::BatchRequest {
    batch(json!({"title": "t", "author": "a", "commands": [
        {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Одна"}},
        {"type": "comment", "params": {"key": {"$result": "key"}, "body": "к ней"}, "depends_on": 1}]}))
}

fn released(command_id: i64, delivery: u32, grace: u32) -> serde_json::Value {
    json!([{"command_id": command_id, "delivery": delivery, "status": "released",
            "not_before_seconds": grace, "jira_calls": 1,
            "error": "ответ Jira на запись потерян (HTTP 504)"}])
}

#[test]
fn a_released_command_waits_out_its_grace_and_comes_back_with_its_count() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(
        &mut hub,
        json!({"pacing": {"claim_timeout_seconds": 600, "max_deliveries": 3}}),
    );
    let agent = Agent::new("agent-1");
    let view = hub.enqueue_batch(&one_create()).unwrap();
    let first = agent.claim(&mut hub, 10);
    assert_eq!(first.commands.len(), 1);
    let id = first.commands[0].id;
    assert_eq!(first.commands[0].released_seconds_ago, None);

    let answer = agent.report(&mut hub, released(id, 1, 180));
    assert_eq!(answer.accepted, vec![id], "{answer:?}");
    let command = hub.batch(view.id).unwrap().commands[0].clone();
    assert_eq!(command.status, CommandStatus::Queued);
    assert_eq!(command.deliveries, 1, "the count goes on");
    assert_eq!(
        command.error.as_deref(),
        Some("ответ Jira на запись потерян (HTTP 504)"),
        "the reason is kept for people"
    );
    assert_eq!(
        command.not_before.map(|t| t.to_string()).as_deref(),
        Some("2026-11-29T10:03:00.000000Z")
    );

    // Not to the same agent in its next claim, nor to anyone before the grace ends.
    assert!(agent.claim(&mut hub, 10).commands.is_empty());
    assert!(
        Agent::new("agent-2")
            .claim(&mut hub, 10)
            .commands
            .is_empty()
    );
    clock.advance(Duration::seconds(179));
    assert!(agent.claim(&mut hub, 10).commands.is_empty());
    clock.advance(Duration::seconds(2));
    let again = agent.claim(&mut hub, 10);
    assert_eq!(again.commands.len(), 1);
    assert_eq!(again.commands[0].delivery, 2);
    assert_eq!(again.commands[0].released_seconds_ago, Some(181));
    assert_eq!(
        hub.batch(view.id).unwrap().commands[0].not_before,
        None,
        "claimed: no wait shown"
    );

    // Done on the second delivery; the reason goes with the outcome.
    let answer = agent.report(
        &mut hub,
        json!([{"command_id": id, "delivery": 2, "status": "done",
                "result": {"key": "AURORA-7", "created": false}}]),
    );
    assert_eq!(answer.accepted, vec![id]);
    let command = hub.batch(view.id).unwrap().commands[0].clone();
    assert_eq!(command.status, CommandStatus::Done);
    assert_eq!(command.error, None);
}

#[test]
fn a_command_given_back_after_its_last_delivery_fails() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(
        &mut hub,
        json!({"pacing": {"claim_timeout_seconds": 600, "max_deliveries": 2}}),
    );
    let agent = Agent::new("agent-1");
    let view = hub.enqueue_batch(&one_create()).unwrap();
    let id = agent.claim(&mut hub, 10).commands[0].id;
    agent.report(&mut hub, released(id, 1, 60));
    clock.advance(Duration::seconds(61));
    assert_eq!(agent.claim(&mut hub, 10).commands[0].delivery, 2);
    agent.report(&mut hub, released(id, 2, 60));
    let view = hub.batch(view.id).unwrap();
    assert_eq!(view.commands[0].status, CommandStatus::Failed);
    let error = view.commands[0].error.clone().unwrap();
    assert!(
        error.contains("HTTP 504") && error.contains("2 выдач"),
        "{error}"
    );
    assert_eq!(
        view.commands[1].status,
        CommandStatus::Skipped,
        "its dependent"
    );
}

#[test]
fn only_the_delivery_in_hand_can_be_given_back() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(
        &mut hub,
        json!({"pacing": {"claim_timeout_seconds": 60, "max_deliveries": 5}}),
    );
    let agent = Agent::new("agent-1");
    let view = hub.enqueue_batch(&one_create()).unwrap();
    let id = agent.claim(&mut hub, 10).commands[0].id;
    // The lease ends; another agent gets delivery 2; the first one's late release is ignored.
    clock.advance(Duration::seconds(61));
    let other = Agent::new("agent-2");
    assert_eq!(other.claim(&mut hub, 10).commands[0].delivery, 2);
    let answer = agent.report(&mut hub, released(id, 1, 180));
    assert!(answer.accepted.is_empty(), "{answer:?}");
    assert_eq!(answer.ignored.len(), 1);
    let command = hub.batch(view.id).unwrap().commands[0].clone();
    assert_eq!(command.status, CommandStatus::Claimed);
    assert_eq!(command.claimed_by.as_deref(), Some("agent-2"));
    assert_eq!(command.jira_calls, 0, "an ignored result counts nothing");
}

#[test]
fn a_release_is_decoded_strictly() {
    let agent = Agent::new("agent-1");
    let decode = |results: serde_json::Value| {
        let mut value = json!({"kind": "report", "id": "r-1", "agent": agent.name,
                               "sent_at": "2026-11-29T10:00:00Z"});
        value["results"] = results;
        jira_hub::protocol::decode_value(value)
    };
    assert!(decode(released(1, 1, 180)).is_ok());
    let missing = decode(
        json!([{"command_id": 1, "delivery": 1, "status": "released",
                                 "error": "потерян"}]),
    )
    .unwrap_err();
    assert_eq!(
        missing.to_string(),
        "results[0].not_before_seconds: обязательно при статусе released"
    );
    let zero = decode(released(1, 1, 0)).unwrap_err();
    assert!(
        zero.to_string()
            .starts_with("results[0].not_before_seconds: ожидалось от 1 до 86400"),
        "{zero}"
    );
    let no_reason = decode(
        json!([{"command_id": 1, "delivery": 1, "status": "released",
                                   "not_before_seconds": 5}]),
    )
    .unwrap_err();
    assert_eq!(
        no_reason.to_string(),
        "results[0].error: при статусе released нужна причина"
    );
    let stray = decode(json!([{"command_id": 1, "delivery": 1, "status": "done",
                               "not_before_seconds": 5}]))
    .unwrap_err();
    assert_eq!(
        stray.to_string(),
        "results[0].not_before_seconds: бывает только при статусе released"
    );
    // The refused call goes with `released` only, as a method and a path.
    let with_refused = |refused: serde_json::Value| {
        let mut results = released(1, 1, 5);
        results[0]["sent"] = json!(false);
        results[0]["refused"] = refused;
        decode(results)
    };
    assert!(
        with_refused(json!({"method": "GET", "path": "/rest/agile/1.0/board", "status": 302}))
            .is_ok()
    );
    let query = with_refused(json!({"method": "GET", "path": "/rest/api/2/search?jql=x",
                                    "status": 401}))
    .unwrap_err();
    assert!(
        query
            .to_string()
            .starts_with("results[0].refused.path: ожидался путь"),
        "{query}"
    );
    let method = with_refused(json!({"method": "get", "path": "/x", "status": 401})).unwrap_err();
    assert!(
        method.to_string().starts_with("results[0].refused.method:"),
        "{method}"
    );
    let long = "/a".repeat(1025);
    assert!(with_refused(json!({"method": "GET", "path": long, "status": 401})).is_err());
    let stray_refused = decode(json!([{"command_id": 1, "delivery": 1, "status": "failed",
        "error": "нет", "refused": {"method": "GET", "path": "/x", "status": 401}}]))
    .unwrap_err();
    assert_eq!(
        stray_refused.to_string(),
        "results[0].refused: бывает только при статусе released"
    );
}

/// A give-back for one refused path (`released` with
/// `refused`) is handed to the next delivery as `previous_release`, with its reason and path, so
/// that whichever agent takes it decides without a memory of its own; a give-back for another
/// reason replaces it. Over the relay (the HTTP path carries the same claim answer: see
/// `budgets::a_path_refused_again_after_a_restart_or_by_another_agent_fails_its_command`).
#[test]
fn a_refused_path_given_back_is_handed_to_the_next_delivery_over_the_relay() {
    use crate::quiet::{at, relay_hub_on, with_token, worker};
    let dir = TestDir::new();
    let clock = clock();
    let (mut hub, relay, token) = relay_hub_on(&dir, &clock);
    hub.enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
        {"type": "comment", "params": {"key": "AURORA-1", "body": "x"}}]})))
        .unwrap();
    let mut relay_worker = worker(&hub);
    let t0 = std::time::Instant::now();
    let inbox = relay.join("inbox");
    let mut pass = 0u64;
    let mut exchange = |name: &str, request: serde_json::Value| {
        drop_file(
            &inbox,
            &format!("{name}.json"),
            &with_token(request, &token),
        );
        pass += 1;
        relay_worker
            .pass_at(t0 + std::time::Duration::from_secs(pass))
            .unwrap();
        wait_for_json(
            &relay.join(format!("outbox/{name}.json")),
            std::time::Duration::from_secs(5),
        )
    };
    let claim = |id: &str, sent_at: String| {
        json!({"kind": "claim", "id": id, "agent": "agent-1", "sent_at": sent_at,
               "agent_version": "1.4.0", "settings_version": 0, "max_commands": 1})
    };
    let report = |id: &str, sent_at: String, result: serde_json::Value| {
        json!({"kind": "report", "id": id, "agent": "agent-1", "sent_at": sent_at,
               "results": [result]})
    };
    let refused = json!({"method": "POST", "path": "/rest/api/2/issue/AURORA-1/comment",
                         "status": 401});
    let first = exchange("claim-c1", claim("c1", at(&clock)));
    let command = &first["commands"][0];
    assert!(command.get("previous_release").is_none(), "{command}");
    let id = command["id"].as_i64().unwrap();
    let answer = exchange(
        "report-r1",
        report(
            "r1",
            at(&clock),
            json!({"command_id": id, "delivery": 1, "status": "released",
                   "not_before_seconds": 1, "sent": false, "refused": refused,
                   "error": "Jira отказала в доступе к POST /rest/api/2/issue/AURORA-1/comment"}),
        ),
    );
    assert_eq!(answer["accepted"], json!([id]), "{answer}");
    clock.advance(Duration::seconds(2));
    let second = exchange("claim-c2", claim("c2", at(&clock)));
    assert_eq!(
        second["commands"][0]["previous_release"],
        json!({"reason": "Jira отказала в доступе к POST /rest/api/2/issue/AURORA-1/comment",
               "refused": refused}),
        "{second}"
    );
    // Given back for another reason: the refused path is not handed on.
    exchange(
        "report-r2",
        report(
            "r2",
            at(&clock),
            json!({"command_id": id, "delivery": 1, "status": "released",
                   "not_before_seconds": 1, "sent": false,
                   "error": "до конца аренды 3 с, а команде нужно около 5 с"}),
        ),
    );
    clock.advance(Duration::seconds(2));
    let third = exchange("claim-c3", claim("c3", at(&clock)));
    assert_eq!(
        third["commands"][0]["previous_release"],
        json!({"reason": "до конца аренды 3 с, а команде нужно около 5 с"}),
        "{third}"
    );
    // A lease that lapses is no give-back: nothing is handed on.
    clock.advance(Duration::seconds(3600));
    let fourth = exchange("claim-c4", claim("c4", at(&clock)));
    let command = &fourth["commands"][0];
    assert!(command.get("previous_release").is_none(), "{command}");
}
