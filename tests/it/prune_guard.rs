//! The mirror is never emptied by one wrong full refresh: a full run that
//! would remove more of a project's mirror than `prune_guard` allows (default: more than 20%
//! and at least 50 issues) ends `held`; `status`, `/metrics` and the console show it; an operator
//! confirms it (CLI, API, console); another run never does, and a run that would
//! remove all of a project's issues is held whatever the guard's numbers.

use crate::support::*;
use jira_hub::domain::command::RunStatus;
use jira_hub::service::HubConnection;
use serde_json::{Value, json};

fn issues(range: std::ops::RangeInclusive<u32>) -> Vec<Value> {
    range
        .map(|n| {
            raw_issue(
                &format!("AURORA-{n}"),
                &n.to_string(),
                &["AWPCA"],
                json!({}),
            )
        })
        .collect()
}

/// Enqueues a full refresh, claims it, reports `issues` as its page and done; returns the run's
/// id and status.
fn full_run(
    hub: &mut HubConnection,
    agent: &Agent,
    clock: &std::sync::Arc<jira_hub::clock::ManualClock>,
    issues: &[Value],
) -> (i64, RunStatus) {
    clock.advance(time::Duration::minutes(1));
    hub.enqueue_refresh(None, "ivanov").unwrap();
    let claim = agent.claim(hub, 1);
    let command = &claim.commands[0];
    let answer = agent.report(
        hub,
        json!([{"command_id": command.id, "delivery": command.delivery, "status": "done",
                "page": {"start_at": 0, "total": issues.len(), "issues": issues},
                "result": {"total": issues.len(), "boards": []}}]),
    );
    assert_eq!(answer.accepted, [command.id], "{answer:?}");
    let run = hub.sync_runs().unwrap()[0].clone();
    (run.run.id, run.run.status)
}

fn metrics_text(address: &str) -> String {
    match http(address, "GET", "/metrics", None, None) {
        (200, Value::String(text)) => text,
        other => panic!("/metrics: {other:?}"),
    }
}

fn mirrored(hub: &mut HubConnection) -> usize {
    hub.project_issues_since("AWPCA", None).unwrap().len()
}

#[test]
fn a_full_run_that_would_empty_the_mirror_waits_for_a_confirmation() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    assert_eq!(
        full_run(&mut hub, &agent, &clock, &issues(1..=100)).1,
        RunStatus::Done
    );
    assert_eq!(mirrored(&mut hub), 100);

    // A run that comes back with 40 of 100 (a Jira answer gone wrong, a permission lost): held.
    let (held, status) = full_run(&mut hub, &agent, &clock, &issues(1..=40));
    assert_eq!(status, RunStatus::Held);
    assert_eq!(mirrored(&mut hub), 100, "nothing removed by itself");
    let report = hub.status().unwrap();
    assert_eq!(report.held_runs.len(), 1);
    assert_eq!(report.held_runs[0].run_id, held);
    assert_eq!(report.held_runs[0].would_remove, 60);
    let error = hub.sync_runs().unwrap()[0].run.error.clone().unwrap();
    assert!(
        error.contains("AWPCA: 60 из 100") && error.contains("confirm"),
        "{error}"
    );

    // The next full run misses the same 60: the same answer twice proves nothing.
    // It is held in its turn, supersedes the first, and nothing is removed.
    let (again, status) = full_run(&mut hub, &agent, &clock, &issues(1..=40));
    assert_eq!(status, RunStatus::Held);
    assert_eq!(mirrored(&mut hub), 100);
    let runs = hub.sync_runs().unwrap();
    let held_now = runs.iter().find(|r| r.run.id == held).unwrap();
    assert_eq!(held_now.run.status, RunStatus::Failed, "superseded");
    let report = hub.status().unwrap();
    assert_eq!(report.held_runs.len(), 1);
    assert_eq!(report.held_runs[0].run_id, again);

    // Back to 100; a run of 40 is held again; a run that disagrees (41) supersedes it and is
    // held in its turn.
    assert_eq!(
        full_run(&mut hub, &agent, &clock, &issues(1..=100)).1,
        RunStatus::Done
    );
    let (first, _) = full_run(&mut hub, &agent, &clock, &issues(1..=40));
    let (second, status) = full_run(&mut hub, &agent, &clock, &issues(1..=41));
    assert_eq!(status, RunStatus::Held);
    let runs = hub.sync_runs().unwrap();
    assert_eq!(
        runs.iter().find(|r| r.run.id == first).unwrap().run.status,
        RunStatus::Failed,
        "superseded"
    );
    assert_eq!(mirrored(&mut hub), 100);

    // The operator's word: the API, with /metrics and the console showing it before.
    drop(hub);
    let daemon = Daemon::start(&dir.db(), &[]);
    let metrics = metrics_text(&daemon.address);
    assert!(metrics.contains("jira_hub_sync_runs_held 1"), "{metrics}");
    assert!(
        metrics.contains("jira_hub_issues_awaiting_removal 59"),
        "{metrics}"
    );
    let token = {
        let hub = open_hub(&dir, &clock);
        hub.tokens().unwrap().unwrap().client
    };
    let (status, body) = http(
        &daemon.address,
        "POST",
        &format!("/sync-runs/{first}/confirm"),
        Some(&token),
        None,
    );
    assert_eq!(status, 409, "a superseded run is not confirmed: {body}");
    let (status, body) = http(
        &daemon.address,
        "POST",
        &format!("/sync-runs/{second}/confirm"),
        Some(&token),
        None,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"run_id": second, "removed": 59}));
    let (status, _) = http(
        &daemon.address,
        "POST",
        &format!("/sync-runs/{second}/confirm"),
        Some(&token),
        None,
    );
    assert_eq!(status, 409, "confirmed once");
    let (status, _) = http(
        &daemon.address,
        "POST",
        "/sync-runs/99999/confirm",
        Some(&token),
        None,
    );
    assert_eq!(status, 404);
    let metrics = metrics_text(&daemon.address);
    assert!(metrics.contains("jira_hub_sync_runs_held 0"), "{metrics}");
    drop(daemon);

    // The CLI: status names the held run, `refresh confirm` applies it.
    let mut hub = open_hub(&dir, &clock);
    assert_eq!(mirrored(&mut hub), 41);
    assert_eq!(
        full_run(&mut hub, &agent, &clock, &issues(1..=100)).1,
        RunStatus::Done
    );
    let (held, _) = full_run(&mut hub, &agent, &clock, &issues(1..=10));
    drop(hub);
    let status = run_ok(&dir.db(), &["status"]).stdout;
    assert!(
        status.contains(&format!("refresh run {held} would remove 90 issues")),
        "{status}"
    );
    let out = run_ok(&dir.db(), &["refresh", "confirm", &held.to_string()]);
    let out = out.stdout;
    assert!(out.contains("90 issues removed"), "{out}");
    let refused = run(&dir.db(), &["refresh", "confirm", &held.to_string()]);
    assert_ne!(refused.code, 0, "confirmed once: {}", refused.stderr);
    let mut hub = open_hub(&dir, &clock);
    assert_eq!(mirrored(&mut hub), 10);
}

#[test]
fn small_removals_and_the_guard_setting() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    full_run(&mut hub, &agent, &clock, &issues(1..=100));
    // 49 missing is under `min_issues` (50): applied at once.
    assert_eq!(
        full_run(&mut hub, &agent, &clock, &issues(1..=51)).1,
        RunStatus::Done
    );
    assert_eq!(mirrored(&mut hub), 51);
    // A stricter guard holds even a few.
    set_settings(
        &mut hub,
        json!({"prune_guard": {"max_percent": 5, "min_issues": 3}}),
    );
    assert_eq!(
        full_run(&mut hub, &agent, &clock, &issues(1..=45)).1,
        RunStatus::Held
    );
    let settings = hub.settings_view().unwrap();
    assert_eq!(
        settings["prune_guard"],
        json!({"max_percent": 5, "min_issues": 3})
    );
    for (bad, field) in [
        (json!({"max_percent": 101}), "prune_guard.max_percent"),
        (json!({"min_issues": -1}), "prune_guard.min_issues"),
        (json!({"share": 0.2}), "prune_guard.share"),
        (json!(20), "prune_guard"),
    ] {
        let error = hub
            .update_settings(json!({"prune_guard": bad}).as_object().unwrap())
            .unwrap_err();
        assert!(
            error.to_string().contains(field) || format!("{error:?}").contains(field),
            "{bad}: {error}"
        );
    }
}

/// A full run that would remove every issue of a project is held even when the
/// numbers are under the guard (a lost permission answers an empty search), and the same empty
/// answer again does not confirm it: only an operator does.
#[test]
fn a_run_that_would_empty_a_project_waits_for_an_operator_whatever_the_guard() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    full_run(&mut hub, &agent, &clock, &issues(1..=10));
    assert_eq!(mirrored(&mut hub), 10);
    let (first, status) = full_run(&mut hub, &agent, &clock, &[]);
    assert_eq!(status, RunStatus::Held, "10 of 10 is under min_issues (50)");
    let (second, status) = full_run(&mut hub, &agent, &clock, &[]);
    assert_eq!(status, RunStatus::Held, "twice in a row is no proof");
    assert_eq!(mirrored(&mut hub), 10);
    let report = hub.status().unwrap();
    assert_eq!(report.held_runs.len(), 1);
    assert_eq!(report.held_runs[0].run_id, second);
    assert_ne!(first, second);
    drop(hub);
    run_ok(&dir.db(), &["refresh", "confirm", &second.to_string()]);
    let mut hub = open_hub(&dir, &clock);
    assert_eq!(mirrored(&mut hub), 0, "the operator's word removes them");
}
