//! Batches, claims, reports, timeouts and pacing through the service (system.md §5, §6;
//! data-model «Пакеты и команды»).

use crate::support::*;
use jira_hub::domain::command::{BatchStatus, CommandStatus};
use jira_hub::protocol::AgentAnswer;
use jira_hub::service::ServiceError;
use serde_json::{Value, json};

fn comments(n: usize) -> Value {
    let commands: Vec<Value> =
        (1..=n).map(|i| json!({"type": "comment", "params": {"key": format!("AURORA-{i}"), "body": format!("текст {i}")}})).collect();
    json!({"title": "план", "author": "ivanov", "commands": commands})
}

fn status_of(hub: &mut jira_hub::service::HubConnection, batch: i64) -> Vec<CommandStatus> {
    hub.batch(batch)
        .unwrap()
        .commands
        .iter()
        .map(|c| c.status)
        .collect()
}

/// «Статус пакета».
#[test]
fn batch_status_follows_its_commands() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let view = hub.enqueue_batch(&batch(comments(3))).unwrap();
    assert_eq!(
        (view.status, view.status_label),
        (BatchStatus::Queued, "в очереди")
    );
    assert_eq!(
        view.estimate_seconds,
        Some(1),
        "3 calls × 300 ms, rounded up"
    );
    let claim = agent.claim(&mut hub, 2);
    assert_eq!(claim.commands.len(), 2);
    agent.report(&mut hub, json!([{"command_id": claim.commands[0].id, "delivery": 1, "status": "done", "result": {"comment_id": "1"}, "jira_calls": 1}]));
    let view = hub.batch(view.id).unwrap();
    assert_eq!(
        status_of(&mut hub, view.id),
        [
            CommandStatus::Done,
            CommandStatus::Claimed,
            CommandStatus::Queued
        ]
    );
    assert_eq!(
        (view.status, view.status_label),
        (BatchStatus::Running, "выполняется")
    );

    let claim2 = agent.claim(&mut hub, 5);
    agent.report(&mut hub, json!([
        {"command_id": claim.commands[1].id, "delivery": 1, "status": "failed", "error": "403"},
        {"command_id": claim2.commands[0].id, "delivery": 1, "status": "skipped", "error": "уже есть"}]));
    let view = hub.batch(view.id).unwrap();
    assert_eq!(
        (view.status, view.status_label),
        (BatchStatus::Completed, "завершён")
    );
    assert_eq!(
        (
            view.counters["done"],
            view.counters["failed"],
            view.counters["skipped"]
        ),
        (1, 1, 1)
    );
    assert_eq!(view.counters.values().sum::<usize>(), 3);
}

/// «Отменённый пакет с выполненной командой».
#[test]
fn a_cancelled_batch_keeps_what_its_claimed_command_reports() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let view = hub.enqueue_batch(&batch(comments(3))).unwrap();
    let first = agent.claim(&mut hub, 1);
    agent.report(&mut hub, json!([{"command_id": first.commands[0].id, "delivery": 1, "status": "done", "result": {}}]));
    let second = agent.claim(&mut hub, 1);
    let cancelled = hub.cancel_batch(view.id).unwrap();
    assert!(cancelled.cancelled_at.is_some());
    assert_eq!(
        cancelled.status,
        BatchStatus::Running,
        "a claimed command is still out"
    );
    assert!(
        agent.claim(&mut hub, 10).commands.is_empty(),
        "nothing of a cancelled batch is handed out"
    );
    let answer = agent.report(&mut hub, json!([{"command_id": second.commands[0].id, "delivery": 1, "status": "done", "result": {}}]));
    assert_eq!(answer.accepted, [second.commands[0].id]);
    let view = hub.batch(view.id).unwrap();
    assert_eq!(
        (view.status, view.status_label),
        (BatchStatus::Cancelled, "отменён")
    );
    assert_eq!((view.counters["done"], view.counters["cancelled"]), (2, 1));
    assert!(
        hub.cancel_batch(view.id).is_ok(),
        "cancelling again changes nothing"
    );

    let done = hub.enqueue_batch(&batch(comments(1))).unwrap();
    let claim = agent.claim(&mut hub, 1);
    agent.report(
        &mut hub,
        json!([{"command_id": claim.commands[0].id, "delivery": 1, "status": "done"}]),
    );
    assert!(matches!(
        hub.cancel_batch(done.id),
        Err(ServiceError::Conflict { .. })
    ));
    assert!(matches!(
        hub.cancel_batch(9999),
        Err(ServiceError::NotFound(_))
    ));
}

/// «Конфиг без ключей ошибки»: enqueueing a bug without a bug type is refused, nothing stored.
#[test]
fn validation_refuses_the_whole_batch() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = open_hub(&dir, &clock);
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(example_config()).unwrap()).unwrap();
    config
        .as_object_mut()
        .unwrap()
        .retain(|k, _| !k.starts_with("issue_type_bug"));
    hub.init_from_config(&config, false).unwrap();
    let request = batch(json!({"title": "t", "author": "a", "commands": [
        {"type": "comment", "params": {"key": "AURORA-1", "body": "ok"}},
        {"type": "ensure_issue", "params": {"issue_type": "bug", "summary": "Ошибка"}}]}));
    let Err(ServiceError::Invalid(error)) = hub.enqueue_batch(&request) else {
        panic!("bug must be refused")
    };
    assert_eq!(error.field, "commands[2].params.issue_type");
    assert!(hub.batches(None).unwrap().is_empty(), "nothing stored");
    for (body, field) in [
        (
            json!({"title": " ", "author": "a", "commands": []}),
            "title",
        ),
        (
            json!({"title": "t", "author": "a", "commands": []}),
            "commands",
        ),
        (
            json!({"title": "t", "author": "a", "project": "NOPE", "commands": [{"type": "comment", "params": {"key": "AURORA-1", "body": "x"}}]}),
            "project",
        ),
    ] {
        match hub.enqueue_batch(&batch(body)) {
            Err(ServiceError::Invalid(e)) => assert_eq!(e.field, field),
            other => panic!("{field}: {other:?}"),
        }
    }
}

#[test]
fn a_project_batch_carries_its_label_and_board() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    hub.create_project("STOCKS_DRRK", "Склады", Some(77))
        .unwrap();
    let view = hub
        .enqueue_batch(&batch(
            json!({"title": "t", "author": "a", "project": "STOCKS_DRRK", "commands": [
            {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Новая"}}]}),
        ))
        .unwrap();
    assert_eq!(view.project.as_deref(), Some("STOCKS_DRRK"));
    assert_eq!(view.commands[0].params["labels"], json!(["STOCKS_DRRK"]));
    assert_eq!(view.commands[0].params["board_id"], json!(77));
    assert_eq!(hub.batches(Some("STOCKS_DRRK")).unwrap().len(), 1);
    assert_eq!(hub.batches(Some("AWPCA")).unwrap().len(), 0);
}

#[test]
fn dependencies_gate_and_substitute_results() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let view = hub
        .enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
            {"type": "ensure_issue", "params": {"issue_type": "epic", "summary": "Эпик"}},
            {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Задача", "epic_key": {"$result": "key"}}, "depends_on": 1},
            {"type": "comment", "params": {"key": {"$result": "key"}, "body": "готово"}, "depends_on": 2},
            {"type": "comment", "params": {"key": "AURORA-5", "body": "независимая"}}]})))
        .unwrap();
    let claim = agent.claim(&mut hub, 10);
    let ids: Vec<i64> = claim.commands.iter().map(|c| c.id).collect();
    assert_eq!(
        ids,
        [view.commands[0].id, view.commands[3].id],
        "only commands whose dependency is done"
    );
    agent.report(&mut hub, json!([{"command_id": ids[0], "delivery": 1, "status": "done", "result": {"key": "AURORA-17", "created": true}}]));
    let claim = agent.claim(&mut hub, 10);
    assert_eq!(claim.commands.len(), 1);
    assert_eq!(claim.commands[0].params["epic_key"], json!("AURORA-17"));
    let stored = hub.batch(view.id).unwrap();
    assert_eq!(
        stored.commands[1].params["epic_key"],
        json!({"$result": "key"}),
        "stored as enqueued"
    );
    agent.report(&mut hub, json!([{"command_id": claim.commands[0].id, "delivery": 1, "status": "failed", "error": "нет прав"}]));
    let stored = hub.batch(view.id).unwrap();
    assert_eq!(stored.commands[2].status, CommandStatus::Skipped);
    assert!(
        stored.commands[2]
            .error
            .as_deref()
            .unwrap()
            .contains("со статусом «ошибка»"),
        "{:?}",
        stored.commands[2].error
    );
}

#[test]
fn claims_go_oldest_batch_first_capped_by_pacing() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, json!({"pacing": {"max_commands_per_claim": 3}}));
    let agent = Agent::new("agent-1");
    let first = hub.enqueue_batch(&batch(comments(2))).unwrap();
    clock.advance(time::Duration::seconds(1));
    let second = hub.enqueue_batch(&batch(comments(2))).unwrap();
    let claim = agent.claim(&mut hub, 50);
    let order: Vec<(i64, i64)> = claim.commands.iter().map(|c| (c.batch_id, c.seq)).collect();
    assert_eq!(order, [(first.id, 1), (first.id, 2), (second.id, 1)]);
    assert!(claim.commands.iter().all(|c| c.delivery == 1));
    let claim = agent.claim(&mut hub, 0);
    assert!(claim.commands.is_empty());
}

#[test]
fn settings_reach_the_agent_only_when_its_version_differs() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let version = hub.settings().unwrap().settings_version;
    let answer = |hub: &mut jira_hub::service::HubConnection, v| match hub
        .handle_agent_request(&agent.claim_request(1, v))
        .unwrap()
    {
        AgentAnswer::Claim(c) => c,
        other => panic!("{other:?}"),
    };
    let fresh = answer(&mut hub, version);
    assert!(fresh.settings.is_none());
    set_settings(&mut hub, json!({"pacing": {"min_interval_ms": 1000}}));
    let stale = answer(&mut hub, version);
    assert_eq!(stale.settings_version, version + 1);
    let settings = stale.settings.unwrap();
    assert_eq!(settings["pacing"]["min_interval_ms"], json!(1000));
    assert!(
        settings.get("tokens").is_none()
            && settings.get("relay_dir").is_none()
            && settings.get("closed_statuses").is_none()
    );
}

#[test]
fn reports_are_idempotent_and_late_reports_count() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(
        &mut hub,
        json!({"pacing": {"claim_timeout_seconds": 60, "max_deliveries": 3}}),
    );
    let agent = Agent::new("agent-1");
    let view = hub.enqueue_batch(&batch(comments(1))).unwrap();
    let id = agent.claim(&mut hub, 1).commands[0].id;
    clock.advance(time::Duration::seconds(61));
    assert_eq!(hub.expire_claims().unwrap().requeued, 1);
    assert_eq!(status_of(&mut hub, view.id), [CommandStatus::Queued]);
    // The first delivery did happen: its late report is taken.
    let answer = agent.report(&mut hub, json!([{"command_id": id, "delivery": 1, "status": "done", "result": {"comment_id": "9"}, "jira_calls": 2}]));
    assert_eq!(answer.accepted, [id]);
    // Reported again: ignored, said so, nothing changes.
    let again = agent.report(&mut hub, json!([{"command_id": id, "delivery": 1, "status": "failed", "error": "x", "jira_calls": 5}]));
    assert!(again.accepted.is_empty());
    assert!(
        again.ignored[0].reason.contains("«выполнена»"),
        "{:?}",
        again.ignored
    );
    let command = &hub.batch(view.id).unwrap().commands[0];
    assert_eq!(
        (command.status, command.jira_calls, command.deliveries),
        (CommandStatus::Done, 2, 1)
    );
    // Unknown command, a delivery that never was.
    let odd = agent.report(
        &mut hub,
        json!([{"command_id": 424242, "delivery": 1, "status": "done"}]),
    );
    assert_eq!(odd.ignored.len(), 1);
    let other = hub.enqueue_batch(&batch(comments(1))).unwrap();
    let other_id = other.commands[0].id;
    let never = agent.report(
        &mut hub,
        json!([{"command_id": other_id, "delivery": 1, "status": "done"}]),
    );
    assert!(
        never.ignored[0].reason.contains("выдачи 1"),
        "{:?}",
        never.ignored
    );

    // The same request id again gets the same answer and changes nothing.
    let request =
        agent.report_request(json!([{"command_id": other_id, "delivery": 1, "status": "done"}]));
    let first = hub.handle_agent_request(&request).unwrap();
    agent.claim(&mut hub, 1);
    let second = hub.handle_agent_request(&request).unwrap();
    assert_eq!(first, second);
    assert_eq!(
        status_of(&mut hub, other.id),
        [CommandStatus::Claimed],
        "the replay did not apply the result"
    );
}

#[test]
fn errors_are_cut_to_1500_characters() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let view = hub.enqueue_batch(&batch(comments(1))).unwrap();
    let id = agent.claim(&mut hub, 1).commands[0].id;
    let error = "ошибка ".repeat(400);
    agent.report(
        &mut hub,
        json!([{"command_id": id, "delivery": 1, "status": "failed", "error": error}]),
    );
    let stored = hub.batch(view.id).unwrap().commands[0]
        .error
        .clone()
        .unwrap();
    assert_eq!(stored.chars().count(), 1500);
    assert!(error.starts_with(&stored));
}

#[test]
fn timeouts_requeue_then_fail_after_max_deliveries() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(
        &mut hub,
        json!({"pacing": {"claim_timeout_seconds": 60, "max_deliveries": 2}}),
    );
    let agent = Agent::new("agent-1");
    let view = hub
        .enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
            {"type": "transition", "params": {"key": "AURORA-1", "status": "Готово"}},
            {"type": "comment", "params": {"key": {"$result": "key"}, "body": "x"}, "depends_on": 1}]})))
        .unwrap();
    assert_eq!(agent.claim(&mut hub, 5).commands[0].delivery, 1);
    clock.advance(time::Duration::seconds(59));
    assert_eq!(hub.expire_claims().unwrap(), Default::default(), "not yet");
    clock.advance(time::Duration::seconds(1));
    let claim = agent.claim(&mut hub, 5);
    assert_eq!(
        claim.commands[0].delivery, 2,
        "the claim itself takes back what timed out"
    );
    clock.advance(time::Duration::seconds(60));
    let expired = hub.expire_claims().unwrap();
    assert_eq!(expired.failed, 1);
    let view = hub.batch(view.id).unwrap();
    assert_eq!(view.commands[0].status, CommandStatus::Failed);
    assert_eq!(view.commands[0].deliveries, 2);
    assert_eq!(view.commands[1].status, CommandStatus::Skipped);
    assert_eq!(view.status, BatchStatus::Completed);
}

#[test]
fn a_lease_is_renewed_by_progress() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, json!({"pacing": {"claim_timeout_seconds": 60}}));
    let agent = Agent::new("agent-1");
    hub.enqueue_refresh(None, "ivanov").unwrap();
    let id = agent.claim(&mut hub, 1).commands[0].id;
    for start in 0..3 {
        clock.advance(time::Duration::seconds(50));
        let page = json!({"start_at": start, "total": 3, "issues": [raw_issue(&format!("AURORA-{start}"), &format!("{start}"), &["AWPCA"], json!({}))]});
        let answer = agent.report(
            &mut hub,
            json!([{"command_id": id, "delivery": 1, "status": "progress", "page": page}]),
        );
        assert_eq!(answer.accepted, [id]);
        assert_eq!(
            hub.expire_claims().unwrap(),
            Default::default(),
            "still leased after {start}"
        );
    }
}

#[test]
fn pacing_backs_off_and_resets() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(
        &mut hub,
        json!({"pacing": {"backoff_initial_seconds": 5, "backoff_max_seconds": 12}}),
    );
    let agent = Agent::new("agent-1");
    hub.enqueue_batch(&batch(comments(10))).unwrap();
    let mut pauses = Vec::new();
    for limited in [1, 1, 2, 1, 0] {
        let claim = agent.claim(&mut hub, 1);
        pauses.push(claim.pause_seconds);
        let id = claim.commands[0].id;
        agent.report(&mut hub, json!([{"command_id": id, "delivery": 1, "status": "done", "rate_limited": limited, "jira_calls": 1 + limited}]));
    }
    pauses.push(agent.claim(&mut hub, 1).pause_seconds);
    assert_eq!(pauses, [0, 5, 10, 12, 12, 0]);
    let view = hub.batches(None).unwrap().remove(0);
    assert_eq!(
        view.commands[1].pause_seconds, 5,
        "the pause is written on the commands it came with"
    );
    assert_eq!(view.commands[2].rate_limited, 2);
}

#[test]
fn agents_and_heartbeats() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let heartbeat = jira_hub::protocol::decode_value(json!({"kind": "heartbeat", "id": "h1", "agent": "agent-7",
        "sent_at": "2026-11-29T10:00:00Z", "agent_version": "2.0.0", "jira_ok": false, "last_error": "401 Unauthorized"}))
    .unwrap();
    let answer = hub.handle_agent_request(&heartbeat).unwrap();
    assert_eq!(
        answer.to_json(),
        json!({"kind": "heartbeat", "request_id": "h1"})
    );
    let agents = hub.agents().unwrap();
    assert_eq!(agents[0].agent, "agent-7");
    assert_eq!(agents[0].jira_ok, Some(false));
    assert_eq!(agents[0].last_error.as_deref(), Some("401 Unauthorized"));
}

/// Two connections claiming at the same moment never get the same command.
#[test]
fn concurrent_claims_never_share_a_command() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    for _ in 0..10 {
        hub.enqueue_batch(&batch(comments(20))).unwrap();
    }
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let mut hub = hub.connect().unwrap();
            std::thread::spawn(move || {
                let agent = Agent::new(&format!("agent-{t}"));
                let mut got = Vec::new();
                loop {
                    let claim = agent.claim(&mut hub, 7);
                    if claim.commands.is_empty() {
                        break got;
                    }
                    got.extend(claim.commands.iter().map(|c| c.id));
                }
            })
        })
        .collect();
    let mut all: Vec<i64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), total, "a command was handed to two claims");
    assert_eq!(total, 200);
}

/// Retention: a finished batch goes once it is older than its kind's days
/// (completed 30, failed or cancelled 90 by default), with its commands and their attempts; a
/// batch with a command not final stays however old; the export is one JSON line per batch,
/// written before the rows go, and a dry run deletes nothing.
#[test]
fn retention_prunes_old_finished_batches_and_nothing_else() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let finish = |hub: &mut jira_hub::service::HubConnection, status: &str| {
        let claim = agent.claim(hub, 1);
        let id = claim.commands[0].id;
        let delivery = claim.commands[0].delivery;
        agent.report(
            hub,
            json!([{"command_id": id, "delivery": delivery, "status": status, "error": "нет прав"}]),
        );
        id
    };
    let completed = hub.enqueue_batch(&batch(comments(1))).unwrap().id;
    finish(&mut hub, "done");
    let failed = hub.enqueue_batch(&batch(comments(1))).unwrap().id;
    let failed_command = finish(&mut hub, "failed");
    // Queued again by an operator and failed again: an earlier attempt to go with it.
    hub.retry_command(failed_command).unwrap();
    finish(&mut hub, "failed");
    let open = hub.enqueue_batch(&batch(comments(2))).unwrap().id;
    finish(&mut hub, "done");
    let cancelled = hub.enqueue_batch(&batch(comments(1))).unwrap().id;
    hub.cancel_batch(cancelled).unwrap();

    clock.advance(time::Duration::days(35));
    // The open batch's second command is at the agent now: not final.
    let claim = agent.claim(&mut hub, 1);
    assert_eq!(
        hub.batch(open).unwrap().commands[1].id,
        claim.commands[0].id
    );
    let young = hub.enqueue_batch(&batch(comments(1))).unwrap().id;
    finish(&mut hub, "done");

    let exists = |hub: &mut jira_hub::service::HubConnection, id: i64| hub.batch(id).is_ok();
    let mut dry = Vec::new();
    let would = hub.prune_finished_now(Some(&mut dry), true).unwrap();
    assert_eq!((would.batches, would.commands), (1, 1));
    assert!(exists(&mut hub, completed), "a dry run deletes nothing");
    let pruned = hub.prune_finished().unwrap();
    assert_eq!((pruned.batches, pruned.commands), (1, 1));
    assert!(!exists(&mut hub, completed));
    for kept in [failed, open, cancelled, young] {
        assert!(exists(&mut hub, kept), "batch {kept} pruned at 35 days");
    }
    let dry: Vec<Value> = String::from_utf8(dry)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(dry.len(), 1);
    assert_eq!(dry[0]["batch"]["id"], json!(completed));
    assert_eq!(dry[0]["commands"][0]["status"], json!("done"));
    assert_eq!(dry[0]["commands"][0]["params"]["key"], json!("AURORA-1"));

    clock.advance(time::Duration::days(65));
    let mut export = Vec::new();
    let pruned = hub.prune_finished_now(Some(&mut export), false).unwrap();
    assert_eq!(
        (pruned.batches, pruned.commands, pruned.attempts),
        (3, 3, 1),
        "failed, cancelled (100 days) and young (65 days after it finished)"
    );
    let lines: Vec<Value> = String::from_utf8(export)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let ids: Vec<i64> = lines
        .iter()
        .map(|line| line["batch"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![failed, cancelled, young]);
    let attempts = &lines[0]["commands"][0]["attempts"];
    assert_eq!(attempts.as_array().unwrap().len(), 1, "{attempts}");
    assert_eq!(attempts[0]["status"], json!("failed"));
    assert_eq!(lines[1]["commands"][0]["status"], json!("cancelled"));
    assert!(
        exists(&mut hub, open),
        "a batch with a command at the agent stays"
    );
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    assert_eq!(count(&conn, "SELECT count(*) FROM command_attempt"), 0);
    assert_eq!(count(&conn, "SELECT count(*) FROM command"), 2);
    assert_eq!(
        jira_hub::service::HubConnection::metrics(&hub)
            .pruned_batches
            .load(std::sync::atomic::Ordering::Relaxed),
        4
    );
    // Off: nothing goes, however old.
    set_settings(
        &mut hub,
        json!({"retention": {"completed_days": 0, "failed_days": 0}}),
    );
    let claim = agent.claim(&mut hub, 1);
    agent.report(
        &mut hub,
        json!([{"command_id": claim.commands[0].id, "delivery": claim.commands[0].delivery, "status": "done"}]),
    );
    clock.advance(time::Duration::days(1000));
    assert_eq!(hub.prune_finished().unwrap().batches, 0);
    assert!(exists(&mut hub, open));
}

/// Ids are never given twice: after a prune emptied the batch table the next batch, its
/// commands and their attempts get numbers past every one issued before; after a restore of a
/// backup older than the replaced file, past the batches that went with that file. Before, the
/// next batch after the prune was 1 again, and the one after the restore took the lost batch's
/// number (so «пакет N, команда M» in a marker in Jira named two pieces of work).
#[test]
fn ids_are_never_reused_across_prune_and_restore() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let mut last = (0, 0, 0);
    for _ in 0..2 {
        let made = hub.enqueue_batch(&batch(comments(2))).unwrap();
        for _ in 0..2 {
            let claim = agent.claim(&mut hub, 1);
            let command = &claim.commands[0];
            agent.report(
                &mut hub,
                json!([{"command_id": command.id, "delivery": command.delivery, "status": "failed", "error": "нет прав"}]),
            );
            hub.retry_command(command.id).unwrap();
            let claim = agent.claim(&mut hub, 1);
            let command = &claim.commands[0];
            agent.report(
                &mut hub,
                json!([{"command_id": command.id, "delivery": command.delivery, "status": "done"}]),
            );
            last.1 = command.id;
        }
        last.0 = made.id;
    }
    let attempts = |db: &std::path::Path| {
        let conn = rusqlite::Connection::open(db).unwrap();
        count(&conn, "SELECT coalesce(max(id), 0) FROM command_attempt")
    };
    last.2 = attempts(&dir.db());
    assert_eq!(last.2, 4);
    clock.advance(time::Duration::days(35));
    let pruned = hub.prune_finished_now(None, false).unwrap();
    assert_eq!(pruned.batches, 2);
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    assert_eq!(count(&conn, "SELECT count(*) FROM batch"), 0);
    drop(conn);
    let after_prune = hub.enqueue_batch(&batch(comments(1))).unwrap();
    assert!(
        after_prune.id > last.0,
        "batch {} after a prune that removed up to {}",
        after_prune.id,
        last.0
    );
    let command = after_prune.commands[0].id;
    assert!(command > last.1, "command {command} after {}", last.1);
    let claim = agent.claim(&mut hub, 1);
    agent.report(
        &mut hub,
        json!([{"command_id": command, "delivery": claim.commands[0].delivery, "status": "failed", "error": "x"}]),
    );
    hub.retry_command(command).unwrap();
    assert!(attempts(&dir.db()) > last.2, "an attempt's id was reused");

    // A backup, then a batch the backup does not hold; the backup put back in place.
    let backup = std::path::PathBuf::from(run_ok(&dir.db(), &["backup"]).stdout.trim());
    let lost = hub.enqueue_batch(&batch(comments(1))).unwrap();
    drop(hub);
    run_ok(&dir.db(), &["restore", backup.to_str().unwrap()]);
    let mut hub = open_hub(&dir, &clock);
    let after_restore = hub.enqueue_batch(&batch(comments(1))).unwrap();
    assert!(
        after_restore.id > lost.id,
        "batch {} after a restore that lost batch {}",
        after_restore.id,
        lost.id
    );
    assert!(after_restore.commands[0].id > lost.commands[0].id);
}

/// An export target that waits: its first write tells the test and waits for the go-ahead.
struct SlowTarget {
    writing: std::sync::mpsc::Sender<()>,
    go: std::sync::mpsc::Receiver<()>,
    bytes: Vec<u8>,
}

impl std::io::Write for SlowTarget {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.bytes.is_empty() {
            let _ = self.writing.send(());
            let _ = self.go.recv_timeout(std::time::Duration::from_secs(60));
        }
        self.bytes.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `batches prune --export` to a slow target holds no writer: while the export waits, another
/// connection enqueues a batch at once, and the prune then ends as usual. A target that fails
/// (a full disk) stops the prune with nothing deleted. Before, the export was written inside the
/// prune's write transaction, and every write waited for it (503 after the 5 s busy timeout).
#[test]
fn a_slow_export_target_holds_no_writer() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let old = hub.enqueue_batch(&batch(comments(1))).unwrap().id;
    let claim = agent.claim(&mut hub, 1);
    agent.report(
        &mut hub,
        json!([{"command_id": claim.commands[0].id, "delivery": claim.commands[0].delivery, "status": "done"}]),
    );
    clock.advance(time::Duration::days(35));

    struct Full;
    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from_raw_os_error(28))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let refused = hub.prune_finished_now(Some(&mut Full), false);
    assert!(refused.is_err(), "{refused:?}");
    assert!(hub.batch(old).is_ok(), "deleted although its export failed");

    let mut writer = hub.connect().unwrap();
    let (writing_tx, writing) = std::sync::mpsc::channel();
    let (go, go_rx) = std::sync::mpsc::channel();
    let pruning = std::thread::spawn(move || {
        let mut target = SlowTarget {
            writing: writing_tx,
            go: go_rx,
            bytes: Vec::new(),
        };
        let pruned = hub.prune_finished_now(Some(&mut target), false);
        (pruned.map(|p| p.batches), target.bytes)
    });
    writing
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the export began");
    let enqueued = writer.enqueue_batch(&batch(comments(1)));
    go.send(()).unwrap();
    assert!(
        enqueued.is_ok(),
        "a write waited for the export: {enqueued:?}"
    );
    let (pruned, exported) = pruning.join().unwrap();
    assert_eq!(pruned.unwrap(), 1);
    let line: Value =
        serde_json::from_slice(exported.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(line["batch"]["id"], json!(old));
    assert!(writer.batch(old).is_err(), "the old batch is pruned");
}

/// An `Idempotency-Key`'s answer is kept as long as the batch it names, and goes with it:
/// the same key after the batch was pruned runs as a new request. Keys are each credential's
/// own, and 2,000 of them cost one row each.
#[test]
fn idempotency_keys_are_each_credentials_own_and_go_with_their_batch() {
    use jira_hub::service::KeyState;
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let id = hub.enqueue_batch(&batch(comments(1))).unwrap().id;
    assert_eq!(hub.reserve_key("a", "k", "fp").unwrap(), KeyState::Run);
    // The request runs: the same key again, before its answer, is not run twice.
    assert_eq!(
        hub.reserve_key("a", "k", "fp").unwrap(),
        KeyState::Unanswered
    );
    let answer = format!(r#"{{"id": {id}}}"#);
    hub.answer_key("a", "k", 201, answer.as_bytes(), Some(id))
        .unwrap();
    assert_eq!(
        hub.reserve_key("a", "k", "fp").unwrap(),
        KeyState::Answered {
            status: 201,
            answer: answer.clone().into_bytes()
        }
    );
    assert_eq!(
        hub.reserve_key("a", "k", "another body").unwrap(),
        KeyState::OtherRequest
    );
    // Another credential's key of the same text is another key.
    assert_eq!(
        hub.reserve_key("b", "k", "another body").unwrap(),
        KeyState::Run
    );
    // A key freed (its request did nothing) may be used again, for any request.
    hub.free_key("b", "k").unwrap();
    assert_eq!(hub.reserve_key("b", "k", "third").unwrap(), KeyState::Run);
    for n in 0..2000 {
        let key = format!("many-{n}");
        assert_eq!(hub.reserve_key("a", &key, "fp").unwrap(), KeyState::Run);
        hub.answer_key("a", &key, 201, b"{}", Some(id)).unwrap();
    }
    assert_eq!(hub.key_count().unwrap(), 2002);

    let claim = agent.claim(&mut hub, 1);
    let command = &claim.commands[0];
    agent.report(
        &mut hub,
        json!([{"command_id": command.id, "delivery": command.delivery, "status": "done"}]),
    );
    clock.advance(time::Duration::days(35));
    let pruned = hub.prune_finished().unwrap();
    assert_eq!(pruned.batches, 1);
    assert_eq!(
        hub.key_count().unwrap(),
        1,
        "the keys naming the batch went with it; the one naming none stays"
    );
    assert_eq!(
        hub.reserve_key("a", "k", "fp").unwrap(),
        KeyState::Run,
        "a key whose batch was pruned is a new request"
    );
}
