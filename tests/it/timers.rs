//! The daemon's timers on tokio's clock: with time paused, hours pass at once, and what the
//! timers do shows in the database.

use crate::support::*;
use jira_hub::daemon::{TimerPeriods, run_timers};
use jira_hub::domain::command::CommandStatus;
use jira_hub::shutdown::Shutdown;
use serde_json::json;
use std::time::Duration;

#[tokio::test(start_paused = true)]
async fn timers_sweep_claims_and_enqueue_refreshes_without_waiting() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(
        &mut hub,
        json!({"auto_refresh_minutes": 0, "pacing": {"claim_timeout_seconds": 60}}),
    );
    let batch_id = hub
        .enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
            {"type": "comment", "params": {"key": "AURORA-1", "body": "x"}}]})))
        .unwrap()
        .id;
    let agent = Agent::new("agent-1");
    assert_eq!(agent.claim(&mut hub, 1).commands.len(), 1);
    let refreshes = || {
        let conn = rusqlite::Connection::open(dir.db()).unwrap();
        count(&conn, "SELECT count(*) FROM command WHERE type = 'refresh'")
    };

    let shutdown = Shutdown::new();
    let every = TimerPeriods {
        claim_sweep: Duration::from_secs(5),
        auto_refresh: Duration::from_secs(30),
        backup_check: Duration::from_secs(3600),
        watchdog: None,
    };
    let started = std::time::Instant::now();
    let timers = tokio::spawn(run_timers(hub.connect().unwrap(), every, shutdown.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let status = |hub: &mut jira_hub::service::HubConnection| {
        hub.batch(batch_id).unwrap().commands[0].status
    };
    assert_eq!(status(&mut hub), CommandStatus::Claimed, "the lease runs");

    // The lease ends by the hub's clock; the next sweep (5 s of tokio's) takes the claim back.
    clock.advance(time::Duration::seconds(61));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(status(&mut hub), CommandStatus::Queued, "swept");

    // Automatic refresh switched on: the next tick of its timer enqueues one, once.
    set_settings(&mut hub, json!({"auto_refresh_minutes": 30}));
    assert_eq!(refreshes(), 0);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(refreshes(), 1, "enqueued");
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(refreshes(), 1, "one at a time");

    shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(5), timers)
        .await
        .expect("the timers stop on the signal")
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "tokio's time was not waited for: {:?}",
        started.elapsed()
    );
}

/// What the hub remembers of agents is bounded: the timer forgets the records of handled agent
/// requests once they are older than the relay's retention (14 days by default), and the agents
/// not seen for 30 days, by the hub's clock (both grew forever).
#[tokio::test(start_paused = true)]
async fn timers_forget_old_agents_and_old_agent_requests() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, json!({"auto_refresh_minutes": 0}));
    let rows = |sql: &str| {
        let conn = rusqlite::Connection::open(dir.db()).unwrap();
        count(&conn, sql)
    };
    let old = Agent::new("old-agent");
    for _ in 0..3 {
        old.claim(&mut hub, 1);
    }
    clock.advance(time::Duration::days(15));
    let new = Agent::new("new-agent");
    new.claim(&mut hub, 1);
    assert_eq!(rows("SELECT count(*) FROM agent_request"), 4);

    let shutdown = Shutdown::new();
    let every = TimerPeriods {
        claim_sweep: Duration::from_secs(3600),
        auto_refresh: Duration::from_secs(3600),
        backup_check: Duration::from_secs(60),
        watchdog: None,
    };
    let timers = tokio::spawn(run_timers(hub.connect().unwrap(), every, shutdown.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        rows("SELECT count(*) FROM agent_request WHERE agent = 'old-agent'"),
        0,
        "requests older than 14 days are forgotten"
    );
    assert_eq!(
        rows("SELECT count(*) FROM agent_request WHERE agent = 'new-agent'"),
        1
    );
    assert_eq!(
        rows("SELECT count(*) FROM agent_status"),
        2,
        "both agents are still known"
    );

    // 31 days after the old agent was last seen, 16 after the new one: the old one goes.
    clock.advance(time::Duration::days(16));
    tokio::time::sleep(Duration::from_secs(60)).await;
    let known: Vec<String> = hub.agents().unwrap().into_iter().map(|a| a.agent).collect();
    assert_eq!(known, ["new-agent"]);
    assert_eq!(rows("SELECT count(*) FROM agent_request"), 0);

    shutdown.trigger();
    timers.await.unwrap();
}
