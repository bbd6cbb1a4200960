//! Queue and mirror rules an audit found broken: a cancelled batch never goes back to
//! Jira, ignored results change nothing, times are the hub's UTC, the lease is not the delivery
//! time, one automatic refresh at a time, `bug` by id alone, and a run's fullness fixed at start.

use crate::support::*;
use jira_hub::domain::command::{BatchStatus, CommandStatus};
use jira_hub::domain::time::Utc;
use serde_json::json;
use time::Duration;

fn one_transition() -> jira_hub::service::BatchRequest {
    batch(json!({"title": "t", "author": "a", "commands": [
        {"type": "transition", "params": {"key": "AURORA-1", "status": "Готово"}},
        {"type": "comment", "params": {"key": "AURORA-1", "body": "готово"}, "depends_on": 1}]}))
}

/// 1. A command claimed before its batch was cancelled, whose report never comes, is cancelled at
///    its timeout: it is never handed out again.
#[test]
fn a_cancelled_batch_never_sends_its_timed_out_command_again() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(
        &mut hub,
        json!({"pacing": {"claim_timeout_seconds": 60, "max_deliveries": 3}}),
    );
    let agent = Agent::new("agent-1");
    let view = hub.enqueue_batch(&one_transition()).unwrap();
    assert_eq!(agent.claim(&mut hub, 1).commands.len(), 1);
    hub.cancel_batch(view.id).unwrap();

    clock.advance(Duration::seconds(61));
    let expired = hub.expire_claims().unwrap();
    assert_eq!(expired.cancelled, 1, "{expired:?}");
    assert_eq!(expired.requeued, 0);
    assert!(
        agent.claim(&mut hub, 10).commands.is_empty(),
        "nothing goes to Jira"
    );
    let view = hub.batch(view.id).unwrap();
    assert_eq!(view.commands[0].status, CommandStatus::Cancelled);
    assert_eq!(view.commands[0].deliveries, 1);
    assert_eq!(view.commands[1].status, CommandStatus::Cancelled);
    assert_eq!(view.status, BatchStatus::Cancelled);

    // The claim's own sweep does the same when it comes before the timer.
    let view = hub.enqueue_batch(&one_transition()).unwrap();
    agent.claim(&mut hub, 1);
    hub.cancel_batch(view.id).unwrap();
    clock.advance(Duration::seconds(61));
    assert!(agent.claim(&mut hub, 10).commands.is_empty());
    assert_eq!(
        hub.batch(view.id).unwrap().commands[0].status,
        CommandStatus::Cancelled
    );
}

/// 2. An ignored result (a page for a command that is not a refresh) adds nothing to the
///    command's counts; nor does a progress without a page (a lease kept alive).
#[test]
fn an_ignored_result_changes_nothing() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let view = hub.enqueue_batch(&one_transition()).unwrap();
    let id = agent.claim(&mut hub, 1).commands[0].id;
    let answer = agent.report(
        &mut hub,
        json!([
            {"command_id": id, "delivery": 1, "status": "progress", "jira_calls": 7, "rate_limited": 2,
             "page": {"start_at": 0, "total": 0, "issues": []}},
            {"command_id": id, "delivery": 1, "status": "progress", "jira_calls": 5, "rate_limited": 1}
        ]),
    );
    assert_eq!(
        answer.accepted,
        [id],
        "the page-less progress keeps the lease"
    );
    assert_eq!(answer.ignored.len(), 1);
    let command = &hub.batch(view.id).unwrap().commands[0];
    assert_eq!((command.jira_calls, command.rate_limited), (0, 0));
    assert_eq!(command.status, CommandStatus::Claimed);
}

/// 2b. A progress without a page keeps any command's lease: the claim says
///     how long a lease lasts, a keep-alive renews it and changes nothing else, and only the
///     current delivery keeps one: an agent whose delivery was superseded is told it lost it.
#[test]
fn a_progress_without_a_page_keeps_the_lease_of_the_current_delivery() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, json!({"pacing": {"claim_timeout_seconds": 60}}));
    let agent = Agent::new("agent-1");
    let view = hub.enqueue_batch(&one_transition()).unwrap();
    let answer = agent.claim(&mut hub, 1);
    assert_eq!(answer.lease_seconds, Some(60));
    let id = answer.commands[0].id;
    for _ in 0..3 {
        clock.advance(Duration::seconds(50));
        let answer = agent.report(
            &mut hub,
            json!([{"command_id": id, "delivery": 1, "status": "progress"}]),
        );
        assert_eq!(answer.accepted, [id]);
    }
    assert_eq!(hub.expire_claims().unwrap(), Default::default());
    let command = &hub.batch(view.id).unwrap().commands[0];
    assert_eq!(command.status, CommandStatus::Claimed);
    assert_eq!(command.deliveries, 1);
    assert!(command.result.is_none() && command.error.is_none());
    // Silence past the lease: handed out again; the first delivery's keep-alive is refused.
    clock.advance(Duration::seconds(61));
    hub.expire_claims().unwrap();
    assert_eq!(agent.claim(&mut hub, 1).commands[0].delivery, 2);
    let late = agent.report(
        &mut hub,
        json!([{"command_id": id, "delivery": 1, "status": "progress"}]),
    );
    assert!(late.accepted.is_empty());
    assert!(late.ignored[0].reason.contains("потеряна"), "{late:?}");
}

/// 3. `finished_at` is the hub's clock in UTC; the agent's time (with its offset) is kept apart,
///    converted to UTC.
#[test]
fn finished_at_is_the_hubs_utc_time() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let view = hub.enqueue_batch(&one_transition()).unwrap();
    let id = agent.claim(&mut hub, 1).commands[0].id;
    clock.advance(Duration::seconds(5));
    // The agent's clock is an hour behind and it writes +03:00.
    agent.report(
        &mut hub,
        json!([{"command_id": id, "delivery": 1, "status": "done", "result": {"status": "Готово"},
                "finished_at": "2026-11-29T12:00:03+03:00"}]),
    );
    let command = &hub.batch(view.id).unwrap().commands[0];
    assert_eq!(
        command.claimed_at.as_ref().map(Utc::as_str),
        Some("2026-11-29T10:00:00.000000Z")
    );
    let finished = command.finished_at.as_ref().unwrap().as_str();
    assert!(finished.starts_with("2026-11-29T10:00:05"), "{finished}");
    assert!(finished.ends_with('Z'), "{finished}");
    assert!(
        command
            .agent_finished_at
            .as_ref()
            .unwrap()
            .as_str()
            .starts_with("2026-11-29T09:00:03"),
        "{command:?}"
    );
}

/// 4. Progress pages renew the lease but leave `claimed_at`, the time of the last delivery.
#[test]
fn progress_renews_the_lease_not_the_delivery_time() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, json!({"pacing": {"claim_timeout_seconds": 60}}));
    let agent = Agent::new("agent-1");
    let view = hub.enqueue_refresh(None, "ivanov").unwrap();
    let id = agent.claim(&mut hub, 1).commands[0].id;
    for start in 0..3u64 {
        clock.advance(Duration::seconds(50));
        let page = json!({"start_at": start, "total": 3, "issues": [raw_issue(&format!("AURORA-{start}"), &format!("{start}"), &["AWPCA"], json!({}))]});
        agent.report(
            &mut hub,
            json!([{"command_id": id, "delivery": 1, "status": "progress", "page": page}]),
        );
    }
    assert_eq!(hub.expire_claims().unwrap(), Default::default());
    let command = &hub.batch(view.id).unwrap().commands[0];
    assert_eq!(
        command.claimed_at.as_ref().map(Utc::as_str),
        Some("2026-11-29T10:00:00.000000Z"),
        "the delivery happened once, at the claim"
    );
    assert_eq!(command.claimed_by.as_deref(), Some("agent-1"));
    // Without further pages the lease runs out 60 s after the last one.
    clock.advance(Duration::seconds(61));
    assert_eq!(hub.expire_claims().unwrap().requeued, 1);
}

/// 5. After a project is added the base JQL changes; a full refresh still pending with the old
///    query keeps the timer from enqueuing a second one.
#[test]
fn never_two_automatic_refreshes_at_once() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, json!({"auto_refresh_minutes": 30}));
    assert!(hub.auto_refresh().unwrap().is_some());
    hub.create_project("STOCKS_DRRK", "Акции", None).unwrap();
    clock.advance(Duration::minutes(31));
    assert!(
        hub.auto_refresh().unwrap().is_none(),
        "the first is still queued"
    );
    // A project's own refresh in flight counts too.
    let agent = Agent::new("agent-1");
    let first = agent.claim(&mut hub, 1).commands[0].id;
    agent.report(
        &mut hub,
        json!([{"command_id": first, "delivery": 1, "status": "done", "result": {"total": 0, "boards": []}}]),
    );
    hub.enqueue_refresh(Some("STOCKS_DRRK"), "ivanov").unwrap();
    assert!(hub.auto_refresh().unwrap().is_none());
}

/// 6. `issue_type_bug_id` alone brings `bug` in (data model: either key).
#[test]
fn init_takes_bug_by_its_id_alone() {
    let dir = TestDir::new();
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(example_config()).unwrap()).unwrap();
    config.as_object_mut().unwrap().remove("issue_type_bug");
    let path = dir.path().join("config.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let out = run_ok(&dir.db(), &["init", "--config", path.to_str().unwrap()]);
    assert!(out.stderr.contains("issue_type_bug"), "{out:?}");
    let types = run_ok(&dir.db(), &["settings", "get", "issue_types"]);
    let types: serde_json::Value = serde_json::from_str(&types.stdout).unwrap();
    assert_eq!(types["bug"], json!({"name": "Bug", "id": "10004"}));
}

/// 7. Whether a run was full is recorded when it starts: adding a project later does not turn
///    earlier full runs into partial ones, and a run that was full at its start but no longer
///    covers the scope when it ends does not prune.
#[test]
fn a_runs_fullness_is_fixed_when_it_starts() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    hub.enqueue_refresh(None, "ivanov").unwrap();
    let id = agent.claim(&mut hub, 1).commands[0].id;
    let page = json!({"start_at": 0, "total": 1, "issues": [raw_issue("AURORA-1", "1", &["AWPCA"], json!({}))]});
    agent.report(
        &mut hub,
        json!([{"command_id": id, "delivery": 1, "status": "done", "page": page, "result": {"total": 1, "boards": []}}]),
    );
    hub.create_project("STOCKS_DRRK", "Акции", None).unwrap();
    let runs = hub.sync_runs().unwrap();
    assert!(runs[0].full, "{runs:?}");
    assert!(hub.status().unwrap().last_full_refresh.is_some());

    // A project's issue, then a full run that a new project overtakes before it ends.
    hub.enqueue_refresh(Some("STOCKS_DRRK"), "ivanov").unwrap();
    let id = agent.claim(&mut hub, 1).commands[0].id;
    let page = json!({"start_at": 0, "total": 1, "issues": [raw_issue("AURORA-2", "2", &["STOCKS_DRRK"], json!({}))]});
    agent.report(
        &mut hub,
        json!([{"command_id": id, "delivery": 1, "status": "done", "page": page, "result": {"total": 1, "boards": []}}]),
    );
    clock.advance(Duration::seconds(1));
    hub.enqueue_refresh(None, "ivanov").unwrap();
    let id = agent.claim(&mut hub, 1).commands[0].id;
    hub.create_project("THIRD", "Третий", None).unwrap();
    let page = json!({"start_at": 0, "total": 1, "issues": [raw_issue("AURORA-1", "1", &["AWPCA"], json!({}))]});
    agent.report(
        &mut hub,
        json!([{"command_id": id, "delivery": 1, "status": "done", "page": page, "result": {"total": 1, "boards": []}}]),
    );
    assert!(hub.sync_runs().unwrap()[0].full);
    assert_eq!(
        hub.project_issues("STOCKS_DRRK").unwrap().len(),
        1,
        "a run that no longer covers the scope does not prune"
    );
}

/// Claim order is the oldest batch by `created_at`, then by id, then `seq`, whatever the ids say:
/// a batch enqueued after the clock stepped back goes first, and a command put back in the queue
/// of an old batch comes before newer batches (the claim walk reads a partial index).
#[test]
fn claims_follow_batch_time_then_id_then_seq() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(
        &mut hub,
        json!({"pacing": {"claim_timeout_seconds": 60, "max_deliveries": 3}}),
    );
    let two = |title: &str| {
        batch(json!({"title": title, "author": "a", "commands": [
            {"type": "comment", "params": {"key": "AURORA-1", "body": "1"}},
            {"type": "comment", "params": {"key": "AURORA-1", "body": "2"}}]}))
    };
    let first = hub.enqueue_batch(&two("first")).unwrap().id;
    clock.advance(Duration::hours(-1));
    let stepped_back = hub.enqueue_batch(&two("stepped back")).unwrap().id;
    clock.advance(Duration::hours(2));
    let last = hub.enqueue_batch(&two("last")).unwrap().id;
    let agent = Agent::new("agent-1");
    let order = |commands: &[jira_hub::protocol::ClaimedCommand]| {
        commands
            .iter()
            .map(|c| (c.batch_id, c.seq))
            .collect::<Vec<_>>()
    };
    let claimed = agent.claim(&mut hub, 3).commands;
    assert_eq!(
        order(&claimed),
        [(stepped_back, 1), (stepped_back, 2), (first, 1)]
    );

    // The three claims time out: queued again, they keep their places before `first`'s seq 2.
    clock.advance(Duration::seconds(61));
    let claimed = agent.claim(&mut hub, 10).commands;
    assert_eq!(
        order(&claimed),
        [
            (stepped_back, 1),
            (stepped_back, 2),
            (first, 1),
            (first, 2),
            (last, 1),
            (last, 2)
        ]
    );
}

/// The reasons of ignored results are Russian throughout: statuses in words, counts in the right
/// form (`выдана 2 раза`).
#[test]
fn ignored_results_say_why_in_russian() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(
        &mut hub,
        json!({"pacing": {"claim_timeout_seconds": 60, "max_deliveries": 3}}),
    );
    let agent = Agent::new("agent-1");
    hub.enqueue_batch(&one_transition()).unwrap();
    let first = agent.claim(&mut hub, 1).commands[0].id;
    clock.advance(Duration::seconds(61));
    assert_eq!(agent.claim(&mut hub, 1).commands[0].delivery, 2);
    let answer = agent.report(
        &mut hub,
        json!([{"command_id": first, "delivery": 7, "status": "done", "result": {}}]),
    );
    let reason = format!("{answer:?}");
    assert!(
        reason.contains("выдачи 7 у этой команды не было (выдана 2 раза)"),
        "{reason}"
    );
    agent.report(
        &mut hub,
        json!([{"command_id": first, "delivery": 2, "status": "done", "result": {}}]),
    );
    let answer = agent.report(
        &mut hub,
        json!([{"command_id": first, "delivery": 2, "status": "done", "result": {}}]),
    );
    let reason = format!("{answer:?}");
    assert!(
        reason.contains("команда уже в конечном статусе «выполнена»"),
        "{reason}"
    );
}
