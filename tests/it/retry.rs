//! The queue actions outside the web page: a failed or skipped command queued again with
//! its history kept (service, HTTP, CLI), who claimed a command, the progress of an open refresh
//! run, `refresh --wait`, and `/metrics` in both text formats.

use crate::http::{Api, api};
use crate::support::*;
use axum::http::{Method, StatusCode};
use jira_hub::domain::command::{BatchStatus, CommandStatus, RunStatus};
use jira_hub::service::ServiceError;
use serde_json::{Value, json};
use std::sync::Arc;

/// A transition, a comment that uses it, and an independent comment.
fn three_commands() -> jira_hub::service::BatchRequest {
    batch(json!({"title": "релиз", "author": "ivanov", "commands": [
        {"type": "transition", "params": {"key": "AURORA-1", "status": "Готово"}},
        {"type": "comment", "params": {"key": "AURORA-1", "body": "готово"}, "depends_on": 1},
        {"type": "comment", "params": {"key": "AURORA-2", "body": "другое"}}]}))
}

fn conflict_message(error: ServiceError) -> String {
    match error {
        ServiceError::Conflict { message, .. } => message,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[test]
fn a_retried_command_is_queued_again_with_its_history_and_its_skipped_dependents() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-7");
    let view = hub.enqueue_batch(&three_commands()).unwrap();
    let (first, second, third) = (
        view.commands[0].id,
        view.commands[1].id,
        view.commands[2].id,
    );
    let claimed = agent.claim(&mut hub, 10);
    assert_eq!(claimed.commands.len(), 2, "the dependent waits");
    agent.report(
        &mut hub,
        json!([
            {"command_id": first, "delivery": 1, "status": "failed", "error": "Jira: 503 Service Unavailable"},
            {"command_id": third, "delivery": 1, "status": "done", "result": {"id": "100"}}
        ]),
    );
    let view = hub.batch(view.id).unwrap();
    assert_eq!(view.commands[0].claimed_by.as_deref(), Some("agent-7"));
    assert_eq!(
        view.commands.iter().map(|c| c.status).collect::<Vec<_>>(),
        [
            CommandStatus::Failed,
            CommandStatus::Skipped,
            CommandStatus::Done
        ]
    );
    assert_eq!(view.status, BatchStatus::Completed);
    assert_eq!(hub.failed_commands(10).unwrap().len(), 2);

    // The dependent alone is refused: its dependency failed too; a done command is refused.
    let message = conflict_message(hub.retry_command(second).unwrap_err());
    // Named as the batch's table numbers them, statuses in Russian.
    assert!(
        message.contains(", команда 2 использует результат команды 1 со статусом «ошибка»"),
        "{message}"
    );
    let message = conflict_message(hub.retry_command(third).unwrap_err());
    assert!(
        message.contains(", команда 3: статус «выполнена»"),
        "{message}"
    );
    assert!(
        !message.contains("done") && !message.contains("failed"),
        "{message}"
    );
    assert!(matches!(
        hub.retry_command(9999),
        Err(ServiceError::NotFound(_))
    ));

    clock.advance(time::Duration::seconds(30));
    let retried = hub.retry_command(first).unwrap();
    assert_eq!(retried.status, CommandStatus::Queued);
    assert_eq!(retried.deliveries, 1, "the delivery count goes on");
    assert_eq!(
        (retried.error.as_deref(), retried.finished_at.as_ref()),
        (None, None)
    );
    assert_eq!(retried.attempts.len(), 1);
    let attempt = &retried.attempts[0];
    assert_eq!(attempt.status, CommandStatus::Failed);
    assert_eq!(attempt.deliveries, 1);
    assert_eq!(attempt.claimed_by.as_deref(), Some("agent-7"));
    assert_eq!(
        attempt.error.as_deref(),
        Some("Jira: 503 Service Unavailable")
    );
    assert!(attempt.finished_at.is_some());
    let view = hub.batch(view.id).unwrap();
    assert_eq!(
        view.status,
        BatchStatus::Running,
        "the batch's status follows"
    );
    assert_eq!(view.commands[1].status, CommandStatus::Queued);
    assert_eq!(view.commands[1].attempts[0].status, CommandStatus::Skipped);
    assert!(hub.failed_commands(10).unwrap().is_empty());

    // Delivered again (delivery 2), by another agent; a late report of delivery 1 is ignored.
    let other = Agent::new("agent-8");
    let claimed = other.claim(&mut hub, 10);
    assert_eq!(claimed.commands.len(), 1);
    assert_eq!(
        (claimed.commands[0].id, claimed.commands[0].delivery),
        (first, 2)
    );
    let late = agent.report(
        &mut hub,
        json!([{"command_id": first, "delivery": 1, "status": "done", "result": {}}]),
    );
    assert!(late.accepted.is_empty(), "{late:?}");
    other.report(
        &mut hub,
        json!([{"command_id": first, "delivery": 2, "status": "done", "result": {}}]),
    );
    let claimed = other.claim(&mut hub, 10);
    assert_eq!(claimed.commands[0].id, second);
    other.report(
        &mut hub,
        json!([{"command_id": second, "delivery": 1, "status": "done", "result": {}}]),
    );
    let view = hub.batch(view.id).unwrap();
    assert_eq!(view.status, BatchStatus::Completed);
    assert_eq!(view.commands[0].claimed_by.as_deref(), Some("agent-8"));
    assert_eq!(view.commands[0].attempts.len(), 1, "the history stays");
    assert_eq!(view.counters["done"], 3);
}

#[test]
fn retry_failed_takes_a_whole_batch_and_refuses_what_it_cannot() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let view = hub.enqueue_batch(&three_commands()).unwrap();
    let message = conflict_message(hub.retry_failed(view.id).unwrap_err());
    assert!(message.contains("нет команд"), "{message}");
    let ids = claim_ids(&agent, &mut hub);
    agent.report(
        &mut hub,
        json!(ids.iter().map(|id| json!({"command_id": id, "delivery": 1, "status": "failed", "error": "нет прав"})).collect::<Vec<_>>()),
    );
    let retried = hub.retry_failed(view.id).unwrap();
    assert_eq!(retried.status, BatchStatus::Queued);
    assert!(retried.commands.iter().all(|c| c.attempts.len() == 1));
    assert_eq!(retried.counters["queued"], 3);

    // A cancelled batch's commands are not retried.
    let ids = claim_ids(&agent, &mut hub);
    agent.report(
        &mut hub,
        json!([{"command_id": ids[0], "delivery": 2, "status": "failed", "error": "снова"}]),
    );
    // The list of failed commands carries each one's earlier attempts.
    let failed = hub.failed_commands(100).unwrap();
    let again = failed.iter().find(|c| c.id == ids[0]).unwrap();
    assert_eq!(again.error.as_deref(), Some("снова"));
    assert_eq!(again.attempts.len(), 1, "{again:?}");
    assert_eq!(again.attempts[0].error.as_deref(), Some("нет прав"));
    assert_eq!(again.attempts[0].deliveries, 1);
    hub.cancel_batch(view.id).unwrap();
    let message = conflict_message(hub.retry_failed(view.id).unwrap_err());
    assert!(message.contains("отменён"), "{message}");
    let message = conflict_message(hub.retry_command(ids[0]).unwrap_err());
    assert!(message.contains("отменён"), "{message}");
    assert!(matches!(
        hub.retry_failed(9999),
        Err(ServiceError::NotFound(_))
    ));
}

/// An open run shows its pages, issues so far and Jira's total while the agent pages.
#[test]
fn an_open_refresh_run_shows_its_progress() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    hub.enqueue_refresh(None, "ivanov").unwrap();
    let command = agent.claim(&mut hub, 1).commands.remove(0);
    let run = hub.run_of_command(command.id).unwrap().unwrap();
    assert_eq!(
        (run.run.status, run.run.pages, run.run.total),
        (RunStatus::Running, 0, None),
        "the claim started the run"
    );
    let page = |start: u64, keys: &[&str]| {
        json!({"start_at": start, "total": 5, "issues": keys.iter().enumerate()
            .map(|(n, key)| raw_issue(key, &(100 + start + n as u64).to_string(), &["AWPCA"], json!({})))
            .collect::<Vec<_>>()})
    };
    agent.report(
        &mut hub,
        json!([{"command_id": command.id, "delivery": 1, "status": "progress", "page": page(0, &["AURORA-1", "AURORA-2"])}]),
    );
    let run = hub.run_of_command(command.id).unwrap().unwrap();
    assert_eq!(
        (
            run.run.status,
            run.run.pages,
            run.run.issues_seen,
            run.run.total
        ),
        (RunStatus::Running, 1, 2, Some(5))
    );
    agent.report(
        &mut hub,
        json!([{"command_id": command.id, "delivery": 1, "status": "progress", "page": page(2, &["AURORA-3", "AURORA-4"])}]),
    );
    let runs = hub.sync_runs().unwrap();
    assert_eq!(
        (
            runs[0].run.pages,
            runs[0].run.issues_seen,
            runs[0].run.total
        ),
        (2, 4, Some(5))
    );
}

/// A second connection to the API's database, for the agent's side.
fn agent_side(api: &Api) -> jira_hub::service::HubConnection {
    open_hub(&api.dir, &clock())
}

async fn client_post(api: &Api, path: &str) -> (StatusCode, Value) {
    api.client(Method::POST, path, None).await
}

/// Claims up to ten commands; their ids.
fn claim_ids(agent: &Agent, hub: &mut jira_hub::service::HubConnection) -> Vec<i64> {
    agent.claim(hub, 10).commands.iter().map(|c| c.id).collect()
}

#[tokio::test]
async fn the_api_retries_a_command_and_a_batch_and_lists_the_failed() {
    let api = api();
    let mut hub = agent_side(&api);
    let agent = Agent::new("agent-h");
    let view = hub.enqueue_batch(&three_commands()).unwrap();
    let first = view.commands[0].id;
    agent.claim(&mut hub, 10);
    agent.report(
        &mut hub,
        json!([{"command_id": first, "delivery": 1, "status": "failed", "error": "Jira: 400 нет такого статуса"},
               {"command_id": view.commands[2].id, "delivery": 1, "status": "done", "result": {}}]),
    );
    for path in [
        format!("/commands/{first}/retry"),
        format!("/batches/{}/retry-failed", view.id),
    ] {
        let (status, _) = api.call(Method::POST, &path, None, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
    }
    assert_eq!(
        hub.batch(view.id).unwrap().commands[0].status,
        CommandStatus::Failed,
        "a request without the token changed nothing"
    );
    let (status, failed) = api.client(Method::GET, "/commands/failed", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        failed
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["status"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["failed", "skipped"]
    );

    let (status, command) = client_post(&api, &format!("/commands/{first}/retry")).await;
    assert_eq!(status, StatusCode::OK, "{command}");
    assert_eq!(command["status"], "queued");
    assert_eq!(command["deliveries"], 1);
    assert_eq!(
        command["attempts"][0]["error"],
        "Jira: 400 нет такого статуса"
    );
    assert_eq!(command["attempts"][0]["claimed_by"], "agent-h");
    let (status, body) = client_post(&api, &format!("/commands/{first}/retry")).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "conflict");
    let (status, body) = client_post(&api, &format!("/batches/{}/retry-failed", view.id)).await;
    assert_eq!(status, StatusCode::CONFLICT, "nothing failed now: {body}");
    let (status, _) = client_post(&api, "/batches/9999/retry-failed").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = client_post(&api, "/commands/9999/retry").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let claimed = agent.claim(&mut hub, 10);
    let results: Vec<Value> = claimed
        .commands
        .iter()
        .map(|c| json!({"command_id": c.id, "delivery": c.delivery, "status": "failed", "error": "снова"}))
        .collect();
    agent.report(&mut hub, json!(results));
    let (status, batch) = client_post(&api, &format!("/batches/{}/retry-failed", view.id)).await;
    assert_eq!(status, StatusCode::OK, "{batch}");
    assert_eq!(batch["status"], "running");
    assert_eq!(batch["counters"]["queued"], 2);
    assert_eq!(
        batch["commands"][0]["attempts"].as_array().unwrap().len(),
        2
    );
}

/// `/metrics` speaks Prometheus text unless OpenMetrics is preferred; "never" has no sample
/// rather than -1; the build, the queue's oldest age and the agents' last-seen ages are there.
#[tokio::test]
async fn metrics_negotiate_their_format_and_carry_the_operators_figures() {
    let api = api();
    let (_, content_type, text) = api.get_accepting("/metrics", None).await;
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    assert!(!text.contains(" -1"), "{text}");
    assert!(
        !text.contains("jira_hub_last_full_refresh_age_seconds"),
        "{text}"
    );
    assert!(!text.contains("# EOF"), "{text}");
    assert!(
        text.contains("# TYPE jira_hub_claims_total counter\njira_hub_claims_total 0"),
        "{text}"
    );
    assert!(text.contains("# TYPE jira_hub_build_info gauge"), "{text}");
    assert!(
        text.contains(&format!(
            "jira_hub_build_info{{version=\"{}\"",
            env!("CARGO_PKG_VERSION")
        )) && text.contains(&format!(
            "schema=\"v4r{}\"}} 1",
            jira_hub::service::SCHEMA_REVISION
        )),
        "{text}"
    );
    assert!(
        text.contains("jira_hub_oldest_queued_age_seconds 0"),
        "{text}"
    );
    assert!(text.contains("jira_hub_relay_files_waiting 0"), "{text}");

    let mut hub = agent_side(&api);
    hub.enqueue_batch(&three_commands()).unwrap();
    Agent::new("agent-m").claim(&mut hub, 1);
    let (_, _, text) = api.get_accepting("/metrics", None).await;
    assert!(
        text.contains("jira_hub_agent_last_seen_age_seconds{agent=\"agent-m\"}"),
        "{text}"
    );
    assert!(
        text.contains("jira_hub_oldest_queued_age_seconds "),
        "{text}"
    );

    for accept in [
        "application/openmetrics-text; version=1.0.0",
        // Prometheus's own scrape header prefers OpenMetrics.
        "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
    ] {
        let (_, content_type, text) = api.get_accepting("/metrics", Some(accept)).await;
        assert!(
            content_type.starts_with("application/openmetrics-text; version=1.0.0"),
            "{accept}: {content_type}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(
            text.contains("# TYPE jira_hub_claims counter\njira_hub_claims_total 0"),
            "{text}"
        );
        assert!(text.contains("# TYPE jira_hub_build info"), "{text}");
    }
    for accept in [
        "text/plain; version=0.0.4",
        "text/plain;version=0.0.4;q=1,application/openmetrics-text;q=0.5",
        "*/*",
    ] {
        let (_, content_type, _) = api.get_accepting("/metrics", Some(accept)).await;
        assert!(
            content_type.starts_with("text/plain; version=0.0.4"),
            "{accept}: {content_type}"
        );
    }
}

/// The CLI: batches list/show/cancel, commands failed/retry, refresh --wait following a run
/// that an agent (here: the service on another connection) pages through.
#[test]
fn the_cli_lists_shows_retries_and_follows_a_refresh() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-c");
    let view = hub.enqueue_batch(&three_commands()).unwrap();
    let first = view.commands[0].id;
    agent.claim(&mut hub, 10);
    agent.report(
        &mut hub,
        json!([{"command_id": first, "delivery": 1, "status": "failed", "error": "Jira: 403 нет прав"}]),
    );
    let db = dir.db();
    let out = run_ok(&db, &["batches", "list"]);
    assert!(
        out.stdout.contains("релиз") && out.stdout.contains("failed 1"),
        "{out:?}"
    );
    // Times as every command shows them to people: `2026-11-29 10:00:00 UTC`, not the stored text.
    let created = out.stdout.lines().nth(1).and_then(|l| l.split('\t').nth(2));
    assert!(
        created.is_some_and(|c| c.ends_with(" UTC") && c.chars().nth(10) == Some(' ')),
        "{out:?}"
    );
    let out = run_ok(&db, &["batches", "list", "--status", "completed"]);
    assert!(!out.stdout.contains("релиз"), "{out:?}");
    let out = run(&db, &["batches", "list", "--status", "завершён"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("--status"), "{out:?}");
    let out = run_ok(&db, &["batches", "show", &view.id.to_string()]);
    assert!(
        out.stdout.contains("claimed by agent-c") && out.stdout.contains("Jira: 403 нет прав"),
        "{out:?}"
    );
    let out = run_ok(&db, &["commands", "failed"]);
    assert!(
        out.stdout
            .contains(&format!("batch {}, command 1 (id {first})", view.id)),
        "{out:?}"
    );

    let out = run(&db, &["commands", "retry", &first.to_string(), "9999"]);
    assert_eq!(out.code, 1, "one of two refused: {out:?}");
    assert!(
        out.stdout
            .contains(&format!("command 1 (id {first}): queued again (attempt 2")),
        "{out:?}"
    );
    assert!(out.stderr.contains("Команды 9999 нет"), "{out:?}");
    // One language a line: the hub's reason, not its field name for programs.
    let out = run(&db, &["commands", "retry", &first.to_string()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains(&format!("команда с id {first}: "))
            && !out.stderr.contains(": command:"),
        "{out:?}"
    );
    let out = run_ok(&db, &["batches", "show", &view.id.to_string()]);
    assert!(
        out.stdout.contains("attempt 1: failed, deliveries 1"),
        "{out:?}"
    );
    let out = run_ok(&db, &["batches", "cancel", &view.id.to_string()]);
    assert!(out.stdout.contains("cancelled"), "{out:?}");

    // refresh --wait: the agent pages through it on another connection while the CLI follows.
    let agent_db = db.clone();
    let worker = std::thread::spawn(move || {
        let agent = Agent::new("agent-r");
        let mut hub = jira_hub::service::HubConnection::open(
            &agent_db,
            Arc::new(jira_hub::clock::SystemClock),
        )
        .unwrap()
        .0;
        let command = loop {
            if let Some(command) = agent.claim(&mut hub, 1).commands.pop() {
                break command;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        for (n, key) in ["AURORA-1", "AURORA-2", "AURORA-3"].iter().enumerate() {
            agent.report(
                &mut hub,
                json!([{"command_id": command.id, "delivery": 1, "status": "progress",
                        "page": {"start_at": n, "total": 3, "issues": [raw_issue(key, &(200 + n).to_string(), &["AWPCA"], json!({}))]}}]),
            );
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        agent.report(
            &mut hub,
            json!([{"command_id": command.id, "delivery": 1, "status": "done", "result": {}}]),
        );
    });
    let out = run_ok(&db, &["refresh", "--wait"]);
    worker.join().unwrap();
    assert!(
        out.stdout.contains(": refresh ") && out.stdout.contains(" queued ("),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains("done (run 1, full, 3 pages, 3 issues seen"),
        "{out:?}"
    );
    assert!(
        out.stderr.contains("of 3"),
        "progress lines without a terminal: {out:?}"
    );
}

/// Asking for a refresh while one of the same scope (query and boards) is queued or claimed
/// answers that one (200, nothing enqueued); a pending full one stands for an incremental one;
/// once the pending one's batch is cancelled, a new one is enqueued (201). The
/// OpenAPI document says so.
#[tokio::test]
async fn a_pending_refresh_of_the_same_scope_is_reused() {
    let api = api();
    let (status, first) = api.client(Method::POST, "/refresh", None).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (status, again) = api.client(Method::POST, "/refresh", None).await;
    assert_eq!((status, &again["id"]), (StatusCode::OK, &first["id"]));
    let (status, since) = api
        .client(Method::POST, "/refresh", Some(json!({"since": "last"})))
        .await;
    assert_eq!((status, &since["id"]), (StatusCode::OK, &first["id"]));
    // With one project, its refresh is the same query and boards as the base JQL's.
    let (status, project) = api
        .client(Method::POST, "/refresh", Some(json!({"project": "AWPCA"})))
        .await;
    assert_eq!((status, &project["id"]), (StatusCode::OK, &first["id"]));
    // Claimed is still pending.
    let (_, claim) = api
        .agent(
            "/agent/claim",
            json!({"kind": "claim", "id": "c1", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
                   "agent_version": "1.4.0", "settings_version": 0, "max_commands": 1}),
        )
        .await;
    assert_eq!(claim["commands"][0]["batch_id"], first["id"], "{claim}");
    let (status, again) = api.client(Method::POST, "/refresh", None).await;
    assert_eq!((status, &again["id"]), (StatusCode::OK, &first["id"]));
    let id = first["id"].as_i64().unwrap();
    api.client(Method::POST, &format!("/batches/{id}/cancel"), None)
        .await;
    let (status, fresh) = api.client(Method::POST, "/refresh", None).await;
    assert_eq!(status, StatusCode::CREATED, "{fresh}");
    assert_ne!(fresh["id"], first["id"]);

    let (_, document) = api.client(Method::GET, "/openapi.json", None).await;
    let responses = &document["paths"]["/refresh"]["post"]["responses"];
    assert!(
        responses["200"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("already queued or claimed")),
        "{responses}"
    );
}

/// `refresh --wait` with no agent about says so once on stderr (never, or since when), keeps
/// waiting, and gives up at `--timeout` with the refresh left queued; asking again follows the
/// pending refresh instead of queueing another.
#[test]
fn refresh_wait_says_when_no_agent_is_about() {
    let dir = TestDir::new();
    let clock = clock();
    drop(ready_hub(&dir, &clock));
    let db = dir.db();
    let out = run(&db, &["refresh", "--wait", "--timeout", "1"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("batch 1: refresh queued ("), "{out:?}");
    assert_eq!(
        out.stderr
            .matches("warning: no agent has contacted this hub yet")
            .count(),
        1,
        "{out:?}"
    );
    assert!(
        out.stderr
            .contains("обновление (пакет 1) не закончилось за 1 с (--timeout)")
            && out.stderr.contains("остаётся в очереди"),
        "{out:?}"
    );

    // An agent seen a day ago (the test's clock), not since.
    let mut hub = open_hub(&dir, &clock);
    let heartbeat = jira_hub::protocol::decode_value(
        json!({"kind": "heartbeat", "id": "h1", "agent": "agent-7",
        "sent_at": "2026-11-29T10:00:00Z", "agent_version": "2.0.0", "jira_ok": true}),
    )
    .unwrap();
    hub.handle_agent_request(&heartbeat).unwrap();
    drop(hub);
    let out = run(&db, &["refresh", "--wait", "--timeout", "1"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout
            .contains("batch 1: a refresh of the same scope is already queued"),
        "{out:?}"
    );
    assert!(
        out.stderr.contains(
            "warning: every agent is silent (agent-7 silent since 2026-11-29 10:00:00 UTC ("
        ),
        "{out:?}"
    );
    let mut hub = open_hub(&dir, &clock);
    assert!(
        matches!(hub.batch(2), Err(ServiceError::NotFound(_))),
        "one refresh batch only"
    );
}

/// The README's `POST /batches` example is accepted as written, and its `depends_on` (a
/// position when sent) comes back as the id of that command.
#[tokio::test]
async fn the_readmes_batch_example_is_accepted() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let end = readme
        .find("}' http://127.0.0.1:8740/batches")
        .expect("the example");
    let start = readme[..end].rfind("-d '").expect("its body") + 4;
    let body: Value = serde_json::from_str(&readme[start..=end]).unwrap();
    let api = api();
    // Sent twice, so that ids and positions differ in the second answer.
    api.client(Method::POST, "/batches", Some(body.clone()))
        .await;
    let (status, view) = api.client(Method::POST, "/batches", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{view}");
    assert_eq!(view["commands"][1]["seq"], 2);
    assert_eq!(view["commands"][0]["id"], 3, "{view}");
    assert_eq!(view["commands"][1]["depends_on"], view["commands"][0]["id"]);
    assert_eq!(
        view["commands"][1]["params"]["key"],
        json!({"$result": "key"})
    );
}

/// Log lines carry plain values, not Rust's `Debug` (`project=Some("AWPCA")`).
#[test]
fn log_lines_carry_plain_values() {
    let dir = TestDir::new();
    let clock = clock();
    drop(ready_hub(&dir, &clock));
    let output = hub_command(&dir.db(), &["refresh", "--project", "AWPCA"])
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let log = String::from_utf8_lossy(&output.stderr);
    let line = log
        .lines()
        .find(|line| line.contains("batch enqueued"))
        .unwrap_or_else(|| panic!("no enqueue line: {log}"));
    assert!(
        line.contains("project=AWPCA") && !line.contains("Some("),
        "{line}"
    );
}
