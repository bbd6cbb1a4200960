//! One truth about an agent everywhere. The hub (its memory), another process
//! reading the database (`jira-hub status`, `refresh --wait`), `GET /agents`, `/metrics` and the
//! console judge silence by one rule at the same moment; an agent that only ran `agent --check`
//! is a check, never a silent agent; an operator forgets an agent from the console or the CLI.

use crate::quiet::send;
use crate::support::*;
use axum::http::Method;
use jira_hub::protocol::{AgentRequest, decode_value};
use jira_hub::service::HubConnection;
use serde_json::json;
use std::sync::Arc;

fn heartbeat(id: &str, agent: &str, period: u32) -> AgentRequest {
    decode_value(json!({"kind": "heartbeat", "id": id, "agent": agent,
        "sent_at": "2026-11-29T10:00:00Z", "agent_version": "1.4.0", "jira_ok": true,
        "heartbeat_seconds": period}))
    .unwrap()
}

fn silent(hub: &mut HubConnection, agent: &str) -> bool {
    hub.agents()
        .unwrap()
        .into_iter()
        .find(|a| a.agent == agent)
        .unwrap_or_else(|| panic!("{agent} not listed"))
        .silent
}

/// The daemon's connection (its memory, flushed every second here as its timers do every
/// quarter second) and another process's (the CLI's: the database only) agree second by second:
/// while the agent heartbeats every 10 s it is never silent in either, and once it stops both
/// call it silent at the same second, 20 s after its last heartbeat. Before, the CLI allowed a
/// minute more (the time written once a minute), so it said «Jira ok» for a minute longer.
#[test]
fn the_hub_and_another_process_call_an_agent_silent_at_the_same_second() {
    let dir = TestDir::new();
    let clock = clock();
    let mut daemon = ready_hub(&dir, &clock);
    let mut cli = open_hub(&dir, &clock);
    let mut n = 0;
    let mut silent_from = None;
    for second in 0..=150 {
        if second <= 75 && second % 10 == 0 {
            n += 1;
            daemon
                .handle_agent_request(&heartbeat(&format!("h{n}"), "steady", 10))
                .unwrap();
        }
        daemon.flush_presence().unwrap();
        let (by_memory, by_database) = (silent(&mut daemon, "steady"), silent(&mut cli, "steady"));
        assert_eq!(
            by_memory, by_database,
            "second {second}: the hub says silent={by_memory}, the database says {by_database}"
        );
        if by_memory && silent_from.is_none() {
            silent_from = Some(second);
        }
        clock.advance(time::Duration::seconds(1));
    }
    assert_eq!(
        silent_from,
        Some(91),
        "last heartbeat at 70 s, silent after 20 s more"
    );
}

/// The written time moves no more often than it must: at most once a heartbeat period for an
/// agent that heartbeats more often than once a minute (its time must be in the database before
/// two periods pass), once a minute otherwise; never on every request.
#[test]
fn the_time_is_written_before_silence_not_on_every_request() {
    for (period, heartbeats_every, most) in [(30, 30, 21), (60, 60, 11), (60, 5, 11)] {
        let dir = TestDir::new();
        let clock = clock();
        let mut daemon = ready_hub(&dir, &clock);
        let conn = rusqlite::Connection::open(dir.db()).unwrap();
        let written = || -> String {
            conn.query_row(
                "SELECT last_seen_at FROM agent_status WHERE agent = 'paced'",
                [],
                |row| row.get(0),
            )
            .unwrap()
        };
        let mut writes = 0;
        let mut n = 0;
        let mut last = String::new();
        for second in 0..600 {
            if second % heartbeats_every == 0 {
                n += 1;
                daemon
                    .handle_agent_request(&heartbeat(&format!("h{n}"), "paced", period))
                    .unwrap();
            }
            daemon.flush_presence().unwrap();
            let now = written();
            if now != last {
                writes += 1;
                last = now;
            }
            clock.advance(time::Duration::seconds(1));
        }
        assert!(
            (most - 3..=most).contains(&writes),
            "period {period} s: {writes} writes in 10 minutes"
        );
    }
}

/// `agent --check` under a name that runs nothing (a claim of no command, then a heartbeat with
/// its report) is a check: never silent, on `GET /agents`, `/metrics` and the console, however
/// long ago it ran; an agent that claimed work is silent as before.
#[tokio::test]
async fn a_one_off_check_is_a_check_not_a_silent_agent() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, json!({"auto_refresh_minutes": 0}));
    let tokens = hub.tokens().unwrap().unwrap();
    for (agent, max_commands) in [("probe", 0), ("worker", 5)] {
        hub.handle_agent_request(
            &decode_value(
                json!({"kind": "claim", "id": format!("{agent}-c"), "agent": agent,
                "sent_at": "2026-11-29T10:00:00Z", "agent_version": "1.4.0",
                "settings_version": 0, "max_commands": max_commands}),
            )
            .unwrap(),
        )
        .unwrap();
        hub.handle_agent_request(
            &decode_value(
                json!({"kind": "heartbeat", "id": format!("{agent}-h"), "agent": agent,
                "sent_at": "2026-11-29T10:00:00Z", "agent_version": "1.4.0", "jira_ok": true,
                "heartbeat_seconds": 30,
                "check": {"ran_at": "2026-11-29T10:00:00.123456Z", "ok": true, "lines": []}}),
            )
            .unwrap(),
        )
        .unwrap();
    }
    clock.advance(time::Duration::hours(1));
    let router = jira_hub::http::router(jira_hub::http::AppState {
        pool: Arc::new(jira_hub::http::HubPool::new(hub)),
        options: jira_hub::http::HttpOptions::default(),
    });
    let (_, agents) = send(&router, Method::GET, "/agents", &tokens.client, None).await;
    let of = |name: &str| {
        agents
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["agent"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        (
            of("probe")["check_only"].clone(),
            of("probe")["silent"].clone()
        ),
        (json!(true), json!(false))
    );
    assert_eq!(
        (
            of("worker")["check_only"].clone(),
            of("worker")["silent"].clone()
        ),
        (json!(false), json!(true))
    );
    let (_, metrics) = send(&router, Method::GET, "/metrics", &tokens.client, None).await;
    let metrics = metrics.as_str().unwrap().to_string();
    assert!(
        metrics.contains("jira_hub_agent_silent{agent=\"probe\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("jira_hub_agent_silent{agent=\"worker\"} 1"),
        "{metrics}"
    );
}

/// `jira-hub status` and `agents list` (another process, the system clock) say «silent» from
/// the second the rule says so, with the heartbeats missed counted, and never «Jira ok» beside
/// it; `agents forget` forgets a silent agent and refuses a live one.
#[test]
fn the_cli_says_silent_at_once_and_forgets_a_silent_agent() {
    let dir = TestDir::new();
    run_ok(
        &dir.db(),
        &["init", "--config", example_config().to_str().unwrap()],
    );
    let mut hub = HubConnection::open(&dir.db(), Arc::new(jira_hub::clock::SystemClock))
        .unwrap()
        .0;
    hub.handle_agent_request(&heartbeat("q1", "quick", 1))
        .unwrap();
    hub.handle_agent_request(&heartbeat("s1", "slow", 3600))
        .unwrap();
    let refused = run(&dir.db(), &["agents", "forget", "slow"]);
    assert_ne!(refused.code, 0);
    assert!(
        refused
            .stderr
            .contains("Агент «slow» на связи: забыть можно молчащего агента"),
        "{}",
        refused.stderr
    );
    std::thread::sleep(std::time::Duration::from_millis(3100));
    let status = run_ok(&dir.db(), &["status"]).stdout;
    let quick = status
        .lines()
        .find(|l| l.contains("quick"))
        .unwrap_or_else(|| panic!("{status}"));
    assert!(quick.contains("quick 1.4.0 silent since "), "{quick}");
    assert!(
        quick.contains(" 3 heartbeats missed, one every 1 s"),
        "{quick}"
    );
    assert!(!quick.contains("Jira ok"), "{quick}");
    let since = &quick[quick.find("since ").unwrap() + 6..quick.find(" UTC (").unwrap()];
    assert_eq!(
        since.len(),
        "2026-12-01 23:01:58".len(),
        "no microseconds: {quick}"
    );
    let slow = status.lines().find(|l| l.contains("slow")).unwrap();
    assert!(slow.contains("slow 1.4.0 last seen "), "{slow}");
    assert!(slow.ends_with(", Jira ok"), "{slow}");
    let forgot = run_ok(&dir.db(), &["agents", "forget", "quick"]).stdout;
    assert!(forgot.starts_with("Агент «quick» забыт"), "{forgot}");
    let list = run_ok(&dir.db(), &["agents", "list"]).stdout;
    assert!(!list.contains("quick"), "{list}");
    assert!(list.contains("slow"), "{list}");
    let unknown = run(&dir.db(), &["agents", "forget", "nobody"]);
    assert!(
        unknown.stderr.contains("Агента «nobody» хаб не знает"),
        "{}",
        unknown.stderr
    );
}
