//! Long chains of dependent commands: a batch of 10,000 commands (the
//! batch's limit), each depending on the one before, whose head fails over HTTP, in a relay
//! file or by a claim timeout. Every dependent is skipped in the same transaction, the hub
//! keeps serving, and retrying the head queues the whole chain again.

use crate::support::*;
use jira_hub::daemon::{TimerPeriods, run_timers};
use jira_hub::domain::command::CommandStatus;
use jira_hub::shutdown::Shutdown;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const CHAIN: usize = 10_000;
const WAIT: Duration = Duration::from_secs(60);

/// A batch of `CHAIN` comments, each depending on the one before.
fn chain() -> jira_hub::service::BatchRequest {
    let commands: Vec<Value> = (1..=CHAIN)
        .map(|seq| {
            let mut command =
                json!({"type": "comment", "params": {"key": "AURORA-1", "body": format!("шаг {seq}")}});
            if seq > 1 {
                command["depends_on"] = json!(seq - 1);
            }
            command
        })
        .collect();
    batch(json!({"title": "цепочка", "author": "a", "commands": commands}))
}

/// How many commands of the database are in each status.
fn statuses(db: &Path) -> std::collections::BTreeMap<String, i64> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut statement = conn
        .prepare("SELECT status, count(*) FROM command GROUP BY status")
        .unwrap();
    statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn all_but_head_skipped(db: &Path, head: &str) {
    let expected: std::collections::BTreeMap<String, i64> = [
        (head.to_string(), 1),
        ("skipped".to_string(), CHAIN as i64 - 1),
    ]
    .into();
    assert_eq!(statuses(db), expected);
    // Each names its own dependency.
    let conn = rusqlite::Connection::open(db).unwrap();
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM command c JOIN command d ON d.id = c.depends_on
             WHERE c.status = 'skipped' AND c.error LIKE 'Команда ' || d.seq || ' этого пакета, от которой зависит эта,%'"
        ),
        CHAIN as i64 - 1
    );
}

#[test]
fn a_chain_whose_head_fails_over_http_is_skipped_and_the_daemon_serves() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, json!({"auto_refresh_minutes": 0}));
    let tokens = hub.tokens().unwrap().unwrap();
    let head = hub.enqueue_batch(&chain()).unwrap().commands[0].id;
    drop(hub);
    let daemon = Daemon::start(&dir.db(), &[]);
    let envelope = |kind: &str, id: &str| json!({"kind": kind, "id": id, "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z"});
    let mut claim = envelope("claim", "c1");
    claim["agent_version"] = json!("1.4.0");
    claim["settings_version"] = json!(0);
    claim["max_commands"] = json!(10);
    let (status, answer) = http(
        &daemon.address,
        "POST",
        "/agent/claim",
        Some(&tokens.agent),
        Some(&claim),
    );
    assert_eq!(status, 200, "{answer}");
    let commands = answer["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "only the head is ready");
    assert_eq!(commands[0]["id"], head);
    let mut report = envelope("report", "r1");
    report["results"] = json!([{"command_id": head, "delivery": 1, "status": "failed",
        "error": "Jira ответила 400"}]);
    let (status, answer) = http(
        &daemon.address,
        "POST",
        "/agent/report",
        Some(&tokens.agent),
        Some(&report),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["accepted"], json!([head]));
    all_but_head_skipped(&dir.db(), "failed");
    assert_eq!(
        http(&daemon.address, "GET", "/health", None, None).0,
        200,
        "the daemon still serves"
    );

    // Retrying the head queues the whole chain again, in one go.
    let (status, answer) = http(
        &daemon.address,
        "POST",
        &format!("/commands/{head}/retry"),
        Some(&tokens.client),
        None,
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        statuses(&dir.db()),
        [("queued".to_string(), CHAIN as i64)].into()
    );
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    assert_eq!(
        count(&conn, "SELECT count(*) FROM command_attempt"),
        CHAIN as i64,
        "every command keeps its earlier outcome"
    );
}

#[test]
fn a_chain_whose_head_fails_in_a_relay_file_is_skipped_and_the_relay_goes_on() {
    let dir = TestDir::new();
    let (mut hub, relay, token) = relay_hub(&dir);
    let head = hub.enqueue_batch(&chain()).unwrap().commands[0].id;
    drop(hub);
    let daemon = Daemon::start(&dir.db(), &[]);
    let inbox = relay.join("inbox");
    drop_file(&inbox, "claim-c1.json", &claim_file("c1", &token, 10));
    let answer = wait_for_json(&relay.join("outbox/claim-c1.json"), WAIT);
    assert_eq!(answer["commands"].as_array().unwrap().len(), 1);
    drop_file(
        &inbox,
        "report-r1.json",
        &report_file(
            "r1",
            &token,
            json!([{"command_id": head, "delivery": 1, "status": "failed", "error": "нет"}]),
        ),
    );
    let answer = wait_for_json(&relay.join("outbox/report-r1.json"), WAIT);
    assert_eq!(answer["accepted"], json!([head]));
    all_but_head_skipped(&dir.db(), "failed");
    // The relay takes the next file, and HTTP answers.
    drop_file(&inbox, "claim-c2.json", &claim_file("c2", &token, 10));
    let answer = wait_for_json(&relay.join("outbox/claim-c2.json"), WAIT);
    assert_eq!(answer["commands"], json!([]));
    assert_eq!(http(&daemon.address, "GET", "/health", None, None).0, 200);
}

#[tokio::test(start_paused = true)]
async fn a_chain_whose_head_times_out_is_skipped_by_the_timer_and_the_hub_serves() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(
        &mut hub,
        json!({"auto_refresh_minutes": 0,
            "pacing": {"claim_timeout_seconds": 60, "max_deliveries": 1}}),
    );
    let head = hub.enqueue_batch(&chain()).unwrap().commands[0].id;
    let agent = Agent::new("agent-1");
    let claimed = agent.claim(&mut hub, 10).commands;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, head);

    let shutdown = Shutdown::new();
    let every = TimerPeriods {
        claim_sweep: Duration::from_secs(5),
        auto_refresh: Duration::from_secs(3600),
        backup_check: Duration::from_secs(3600),
        watchdog: None,
    };
    let timers = tokio::spawn(run_timers(hub.connect().unwrap(), every, shutdown.clone()));
    clock.advance(time::Duration::seconds(61));
    // Sweeps run on the blocking pool; wait (tokio's paused time) until one has ended the head.
    let mut swept = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_secs(5)).await;
        if statuses(&dir.db()).get("failed") == Some(&1) {
            swept = true;
            break;
        }
    }
    assert!(
        swept,
        "the sweep failed the head: {:?}",
        statuses(&dir.db())
    );
    all_but_head_skipped(&dir.db(), "failed");
    // The hub goes on: a claim finds nothing, the timers stop on the signal.
    assert!(agent.claim(&mut hub, 10).commands.is_empty());
    shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(5), timers)
        .await
        .expect("the timers stop")
        .unwrap();
    let view = hub.retry_command(head).unwrap();
    assert_eq!(view.status, CommandStatus::Queued);
    assert_eq!(
        statuses(&dir.db()),
        [("queued".to_string(), CHAIN as i64)].into()
    );
}
