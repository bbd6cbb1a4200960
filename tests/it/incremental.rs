//! Incremental refresh: the automatic refresh asks Jira only for what changed
//! (`AND updated >= <epoch ms>`) between full ones every `full_refresh_hours`; only a full run
//! prunes; runs say their kind; a slice answers only the rows changed since a time.

use crate::support::*;
use jira_hub::clock::Clock;
use jira_hub::domain::command::RunKind;
use jira_hub::service::{HubConnection, RefreshSince, ServiceError};
use serde_json::{Value, json};
use std::sync::Arc;
use time::{Duration, OffsetDateTime};

const BASE: &str = "project = AURORA AND labels in (\"AWPCA\")";

fn ms(at: OffsetDateTime) -> i64 {
    (at.unix_timestamp_nanos() / 1_000_000) as i64
}

/// Claims the one queued refresh, reports `issues` as its only page and done; returns its JQL.
fn run_queued(hub: &mut HubConnection, agent: &Agent, issues: &[Value]) -> String {
    let claim = agent.claim(hub, 1);
    let command = &claim.commands[0];
    assert_eq!(command.command_type, "refresh");
    let answer = agent.report(
        hub,
        json!([{"command_id": command.id, "delivery": command.delivery, "status": "done",
                "page": {"start_at": 0, "total": issues.len(), "issues": issues},
                "result": {"total": issues.len(), "boards": []}}]),
    );
    assert_eq!(answer.accepted, [command.id], "{answer:?}");
    command.params["jql"].as_str().unwrap().to_string()
}

fn issue(key: &str, id: &str, summary: &str) -> Value {
    raw_issue(key, id, &["AWPCA"], json!({"summary": summary}))
}

fn slice_keys(hub: &mut HubConnection, since: Option<&str>) -> Vec<String> {
    hub.project_issues_since("AWPCA", since)
        .unwrap()
        .into_iter()
        .map(|r| r.issue.key)
        .collect()
}

fn hub_at(dir: &TestDir, clock: &Arc<jira_hub::clock::ManualClock>) -> HubConnection {
    let mut hub = ready_hub(dir, clock);
    set_settings(
        &mut hub,
        json!({"auto_refresh_minutes": 30, "full_refresh_hours": 2}),
    );
    hub
}

/// An incremental run returns only what changed, so it never removes an issue it did not see;
/// a full run still removes the issues that left the scope.
#[test]
fn incremental_runs_never_prune_and_full_runs_do() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = hub_at(&dir, &clock);
    let agent = Agent::new("agent-1");
    hub.enqueue_refresh(None, "ivanov").unwrap();
    let full_start = clock.now();
    assert_eq!(
        run_queued(
            &mut hub,
            &agent,
            &[issue("AURORA-1", "1", "a"), issue("AURORA-2", "2", "b")]
        ),
        BASE
    );
    let run = &hub.sync_runs().unwrap()[0];
    assert_eq!((run.kind, run.full), (RunKind::Full, true));

    clock.advance(Duration::minutes(1));
    hub.enqueue_refresh_of(None, "ivanov", RefreshSince::Last)
        .unwrap();
    let jql = run_queued(&mut hub, &agent, &[issue("AURORA-1", "1", "a2")]);
    assert_eq!(
        jql,
        format!(
            "{BASE} AND updated >= {}",
            ms(full_start - Duration::minutes(10))
        )
    );
    let run = &hub.sync_runs().unwrap()[0];
    assert_eq!((run.kind, run.full), (RunKind::Incremental, false));
    assert_eq!(
        slice_keys(&mut hub, None),
        ["AURORA-1", "AURORA-2"],
        "an incremental run never prunes"
    );

    clock.advance(Duration::minutes(1));
    hub.enqueue_refresh(None, "ivanov").unwrap();
    assert_eq!(
        run_queued(&mut hub, &agent, &[issue("AURORA-1", "1", "a2")]),
        BASE
    );
    assert_eq!(
        slice_keys(&mut hub, None),
        ["AURORA-1"],
        "a full run removes what left the scope"
    );
    let status = hub.status().unwrap();
    assert_eq!(status.last_refresh.map(|r| r.kind), Some(RunKind::Full));
}

/// The timer's refresh: the first is full (no successful run yet), the next ones incremental
/// from the start of the last successful run less the overlap, and full again once
/// `full_refresh_hours` have passed since the last full run started. An issue updated in Jira
/// while a run was paging is caught by the next run: its bound is before that run's start.
#[test]
fn the_automatic_refresh_is_incremental_between_full_ones() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = hub_at(&dir, &clock);
    let agent = Agent::new("agent-1");

    assert!(hub.auto_refresh().unwrap().is_some());
    let first_start = clock.now();
    assert_eq!(
        run_queued(&mut hub, &agent, &[issue("AURORA-1", "1", "a")]),
        BASE,
        "the first automatic refresh is full"
    );

    let mut previous_start = first_start;
    for round in 1..4 {
        clock.advance(Duration::minutes(30));
        assert!(hub.auto_refresh().unwrap().is_some(), "round {round}");
        let start = clock.now();
        // Claimed now: the run starts now; an issue updated in Jira a second later, after the
        // search passed it, is not in this run.
        let jql = run_queued(&mut hub, &agent, &[]);
        let bound = ms(previous_start - Duration::minutes(10));
        assert_eq!(
            jql,
            format!("{BASE} AND updated >= {bound}"),
            "round {round}"
        );
        assert!(bound < ms(previous_start));
        let run = &hub.sync_runs().unwrap()[0];
        assert_eq!(run.kind, RunKind::Incremental);
        previous_start = start;
        let updated_meanwhile = ms(start + Duration::seconds(1));
        // The next run's bound is before this run's start, so the issue updated during it is
        // asked for again.
        let next_bound = ms(start - Duration::minutes(10));
        assert!(next_bound < ms(start) && next_bound < updated_meanwhile);
    }
    // 2 hours after the full run started (four periods of 30 minutes): full again.
    clock.advance(Duration::minutes(30));
    assert_eq!(clock.now() - first_start, Duration::hours(2));
    assert!(hub.auto_refresh().unwrap().is_some());
    // (The issue is still in Jira: a full run that found none of a project's issues would be
    // held for an operator.)
    assert_eq!(
        run_queued(&mut hub, &agent, &[issue("AURORA-1", "1", "a")]),
        BASE
    );
    assert_eq!(hub.sync_runs().unwrap()[0].kind, RunKind::Full);
    // And incremental from that one.
    let full_start = clock.now();
    clock.advance(Duration::minutes(30));
    hub.auto_refresh().unwrap().unwrap();
    assert_eq!(
        run_queued(&mut hub, &agent, &[]),
        format!(
            "{BASE} AND updated >= {}",
            ms(full_start - Duration::minutes(10))
        )
    );
}

/// A failed run is not a successful one: the next incremental bound stays at the last good run.
/// A new project makes the base JQL new: the next automatic refresh is full.
#[test]
fn failed_runs_and_new_projects() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = hub_at(&dir, &clock);
    let agent = Agent::new("agent-1");
    hub.auto_refresh().unwrap().unwrap();
    let good_start = clock.now();
    run_queued(&mut hub, &agent, &[]);

    clock.advance(Duration::minutes(30));
    hub.auto_refresh().unwrap().unwrap();
    let id = agent.claim(&mut hub, 1).commands[0].id;
    agent.report(
        &mut hub,
        json!([{"command_id": id, "delivery": 1, "status": "failed", "error": "Jira недоступна"}]),
    );
    clock.advance(Duration::minutes(30));
    hub.auto_refresh().unwrap().unwrap();
    assert_eq!(
        run_queued(&mut hub, &agent, &[]),
        format!(
            "{BASE} AND updated >= {}",
            ms(good_start - Duration::minutes(10))
        )
    );

    hub.create_project("STOCKS_DRRK", "Акции", None).unwrap();
    clock.advance(Duration::minutes(30));
    hub.auto_refresh().unwrap().unwrap();
    let jql = run_queued(&mut hub, &agent, &[]);
    assert!(!jql.contains("updated"), "{jql}");
    assert_eq!(hub.sync_runs().unwrap()[0].kind, RunKind::Full);
}

/// `POST /refresh {"since": "last", "project": L}`: incremental from the last successful run
/// covering the project (a run of the base JQL does); full when there is none. A project's own
/// full refresh is `partial`.
#[test]
fn a_projects_refresh_since_last() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = hub_at(&dir, &clock);
    let agent = Agent::new("agent-1");
    let project = "project = AURORA AND labels in (\"AWPCA\")";
    hub.enqueue_refresh_of(Some("AWPCA"), "ivanov", RefreshSince::Last)
        .unwrap();
    assert_eq!(run_queued(&mut hub, &agent, &[]), project);
    // The project's JQL is the base JQL here (one project): a full run.
    hub.create_project("STOCKS_DRRK", "Акции", None).unwrap();
    clock.advance(Duration::minutes(5));
    let start = clock.now();
    hub.enqueue_refresh_of(Some("STOCKS_DRRK"), "ivanov", RefreshSince::Last)
        .unwrap();
    let stocks = "project = AURORA AND labels in (\"STOCKS_DRRK\")";
    assert_eq!(run_queued(&mut hub, &agent, &[]), stocks);
    assert_eq!(hub.sync_runs().unwrap()[0].kind, RunKind::Partial);
    clock.advance(Duration::minutes(5));
    hub.enqueue_refresh_of(Some("STOCKS_DRRK"), "ivanov", RefreshSince::Last)
        .unwrap();
    assert_eq!(
        run_queued(&mut hub, &agent, &[]),
        format!(
            "{stocks} AND updated >= {}",
            ms(start - Duration::minutes(10))
        )
    );
    assert_eq!(hub.sync_runs().unwrap()[0].kind, RunKind::Incremental);
}

/// `updated_since` answers exactly the rows whose stored content changed at or after the time.
#[test]
fn updated_since_answers_the_changed_rows() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = hub_at(&dir, &clock);
    let agent = Agent::new("agent-1");
    hub.enqueue_refresh(None, "ivanov").unwrap();
    run_queued(
        &mut hub,
        &agent,
        &[
            issue("AURORA-1", "1", "a"),
            issue("AURORA-2", "2", "b"),
            issue("AURORA-3", "3", "c"),
        ],
    );
    clock.advance(Duration::minutes(5));
    let since = "2026-11-29T10:05:00Z";
    // AURORA-1 changed, AURORA-2 came again unchanged, AURORA-4 is new.
    hub.enqueue_refresh_of(None, "ivanov", RefreshSince::Last)
        .unwrap();
    run_queued(
        &mut hub,
        &agent,
        &[
            issue("AURORA-1", "1", "a2"),
            issue("AURORA-2", "2", "b"),
            issue("AURORA-4", "4", "d"),
        ],
    );
    assert_eq!(slice_keys(&mut hub, Some(since)), ["AURORA-1", "AURORA-4"]);
    assert_eq!(
        slice_keys(&mut hub, Some("2026-11-29T13:04:00+03:00")),
        ["AURORA-1", "AURORA-4"],
        "any offset, compared in UTC"
    );
    assert_eq!(
        slice_keys(&mut hub, Some("2026-11-29T10:00:00Z")).len(),
        4,
        "every row changed since the first run"
    );
    assert!(slice_keys(&mut hub, Some("2026-11-29T10:05:00.000001Z")).is_empty());
    let row = hub
        .project_issues("AWPCA")
        .unwrap()
        .into_iter()
        .find(|r| r.issue.key == "AURORA-2")
        .unwrap();
    assert_eq!(
        (
            row.synced_at.as_str(),
            row.mirror_changed_at.unwrap().as_str()
        ),
        ("2026-11-29T10:05:00.000000Z", "2026-11-29T10:00:00.000000Z")
    );
    match hub.project_issues_since("AWPCA", Some("вчера")) {
        Err(ServiceError::Invalid(error)) => assert_eq!(error.field, "updated_since"),
        other => panic!("{other:?}"),
    }
}
