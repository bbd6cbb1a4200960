//! Calls to Jira's minimum where safety allows, measured through the simulated
//! Jira's request log, and a transition that collides with another one.
//!
//! Counted: every request the agent sends to Jira during the work item, except the heartbeat's
//! probe (`serverInfo`, `myself`), which runs on its own clock whatever the work.

use crate::agent_e2e::{Stack, Transport};
use jira_hub::sim::jira::{Endpoint, Mode, PROJECT};
use serde_json::{Value, json};

/// The requests of the work item that `run` makes the agent do.
fn calls_of(stack: &Stack, run: impl FnOnce(&Stack) -> Value) -> (usize, Value) {
    let work = |stack: &Stack| {
        stack
            .fake
            .requests()
            .iter()
            .filter(|s| !matches!(s.endpoint, Endpoint::ServerInfo | Endpoint::Myself))
            .count()
    };
    let before = work(stack);
    let view = run(stack);
    (work(stack) - before, view)
}

/// `settings` and a `transitions_map` by target status, through the hub's API.
fn put_settings(stack: &Stack, mut settings: Value) {
    settings["transitions_map"] =
        json!({"В работе": {"status_id": "3"}, "Готово": {"status_id": "10001"}});
    let (status, view) = stack.client("PUT", "/settings", Some(settings));
    assert_eq!(status, 200, "{view}");
}

fn batch_of(stack: &Stack, commands: Value) -> Value {
    run_batch(
        stack,
        json!({"title": "замер", "author": "ivanov", "project": "AWPCA", "commands": commands}),
    )
}

/// Enqueues `batch`, waits for it, and checks that every command ended well.
pub(crate) fn run_batch(stack: &Stack, batch: Value) -> Value {
    let id = stack.enqueue(batch);
    let view = stack.wait_completed(id);
    for command in view["commands"].as_array().unwrap() {
        assert!(
            command["status"] == "done" || command["status"] == "confirmed_by_state",
            "{command:#}"
        );
    }
    view
}

fn refresh_of(stack: &Stack, body: Value) -> Value {
    let (status, view) = stack.client("POST", "/refresh", Some(body));
    assert_eq!(status, 201, "{view}");
    stack.wait_completed(view["id"].as_i64().unwrap())
}

/// The call table of docs/design/agent-and-jira.md: the demo's sample batch (an epic, a task and a bug in it,
/// both started, the task linked and commented), a link, a transition, a full refresh and an
/// incremental one with nothing changed, on the Data Center the demo runs. Board types are read
/// once per run: the second full refresh reads none.
#[test]
fn each_work_item_costs_the_calls_of_the_table() {
    let mut stack = Stack::start(Mode::DataCenter, Transport::Http);
    put_settings(
        &stack,
        json!({
            "issue_types": {"task": {"name": "Задача", "id": "10002"},
                            "epic": {"name": "Эпик", "id": "10000"},
                            "bug": {"name": "Ошибка", "id": "10004"}},
        }),
    );
    // The board of AWPCA (the example config's legacy `board_id`).
    stack.fake.add_board(4216, "Доска команды", "scrum");
    let existing = stack.fake.seed_issues(PROJECT, "AWPCA", 3);
    let existing = existing.first().cloned().unwrap_or(format!("{PROJECT}-1"));
    stack.spawn_agent();

    let (demo, _) = calls_of(&stack, |stack| {
        run_batch(stack, jira_hub::cli::sample_batch(&existing))
    });
    let task = stack.fake.keys_with_summary("Форма записи на приём")[0].clone();
    let (link, _) = calls_of(&stack, |stack| {
        batch_of(
            stack,
            json!([{"type": "link", "params": {"from": task, "to": existing, "type": "relates"}}]),
        )
    });
    let (transition, _) = calls_of(&stack, |stack| {
        batch_of(
            stack,
            json!([{"type": "transition", "params": {"key": task, "status": "Готово"}}]),
        )
    });
    let (full, _) = calls_of(&stack, |stack| refresh_of(stack, json!({})));
    let (full_again, _) = calls_of(&stack, |stack| refresh_of(stack, json!({})));
    let (incremental, _) = calls_of(&stack, |stack| refresh_of(stack, json!({"since": "last"})));
    stack.kill_agent();
    eprintln!(
        "calls: demo batch {demo}, link {link}, transition {transition}, full refresh {full} \
         (then {full_again}), incremental refresh with nothing changed {incremental}"
    );
    // With the run's one `myself`: who the agent is, asked once, for every look's authors.
    assert!(demo <= 14, "the demo's batch: {demo} calls");
    assert_eq!(
        link, 2,
        "a link on its first delivery: the POST and one read for its id"
    );
    assert_eq!(
        transition, 3,
        "one read with its transitions, the POST, one read back"
    );
    assert_eq!(
        incremental, 1,
        "one search page, no board read, no empty probe"
    );
    assert!(
        full_again < full,
        "the boards are read once per run: {full} then {full_again}"
    );
}

/// Item 5: Cloud answers 409 when transitions of one issue collide. The other transition had
/// already taken the issue where it was asked to go: done, without a second POST. The other
/// had not changed the status: the transition, still offered, is sent again, done. Four in a
/// row: the command fails with Jira's words (bounded).
#[test]
fn a_409_on_a_transition_ends_done() {
    let mut stack = Stack::start(Mode::Cloud, Transport::Http);
    put_settings(&stack, json!({}));
    let keys = stack.fake.seed_issues(PROJECT, "AWPCA", 3);
    stack.spawn_agent();
    let transition = |stack: &Stack, key: &str, status: &str| {
        let id = stack.enqueue(
            json!({"title": "переход", "author": "ivanov", "project": "AWPCA",
            "commands": [{"type": "transition", "params": {"key": key, "status": status}}]}),
        );
        stack.wait_completed(id)["commands"][0].clone()
    };
    let posts = |stack: &Stack| stack.fake.calls(Endpoint::DoTransition);

    stack.fake.collide_transition(&keys[0], Some("В работе"));
    let before = posts(&stack);
    let command = transition(&stack, &keys[0], "В работе");
    assert_eq!(command["status"], "done", "{command:#}");
    assert_eq!(stack.fake.status_of(&keys[0]).unwrap(), "В работе");
    assert_eq!(posts(&stack) - before, 1, "the other transition did it");

    stack.fake.collide_transition(&keys[1], None);
    stack.fake.collide_transition(&keys[1], None);
    let before = posts(&stack);
    let command = transition(&stack, &keys[1], "В работе");
    assert_eq!(command["status"], "done", "{command:#}");
    assert_eq!(stack.fake.status_of(&keys[1]).unwrap(), "В работе");
    assert_eq!(posts(&stack) - before, 3, "sent again while still offered");

    for _ in 0..4 {
        stack.fake.collide_transition(&keys[2], None);
    }
    let command = transition(&stack, &keys[2], "В работе");
    assert_eq!(command["status"], "failed", "{command:#}");
    let error = command["error"].as_str().unwrap();
    assert!(
        error.contains("409") && error.contains("conflicting"),
        "{error}"
    );
    stack.kill_agent();
}

/// Item 6: Cloud's search does not show an issue written moments ago (the simulated Jira hides
/// it for ten minutes); a full refresh names the issues the agent wrote in `reconcileIssues`, so
/// the mirror has the issue the batch just created.
#[test]
fn a_full_refresh_on_cloud_reconciles_what_the_search_lag_hides() {
    let mut stack = Stack::start(Mode::Cloud, Transport::Http);
    stack.fake.seed_issues(PROJECT, "AWPCA", 2);
    stack
        .fake
        .set_search_lag(std::time::Duration::from_secs(600));
    stack.spawn_agent();
    // Two issues: `reconcileIssues` names both, one parameter each (an exploded array).
    let view = batch_of(
        &stack,
        json!([{"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Свежая"}},
               {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Вторая"}}]),
    );
    let created: Vec<String> = (0..2)
        .map(|i| {
            view["commands"][i]["result"]["key"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    refresh_of(&stack, json!({}));
    stack.kill_agent();
    let mirror = stack.mirror("AWPCA");
    let keys: Vec<&str> = mirror.iter().filter_map(|i| i["key"].as_str()).collect();
    for key in &created {
        assert!(keys.contains(&key.as_str()), "{key} not in {keys:?}");
    }
    assert!(
        stack
            .fake
            .requests()
            .iter()
            .any(|seen| seen.endpoint == Endpoint::SearchJql
                && seen.query.matches("reconcileIssues=").count() == 2),
        "no search named both issues to reconcile"
    );
}

/// Cloud's search shows an edit minutes late (the simulated Jira matches an issue changed in the
/// last ten minutes by the `updated` it had before): an incremental refresh right after the hub's
/// own edit of a summary would not see it. The edit's conflict read gave the issue's id, so the
/// refresh names it in `reconcileIssues` and the mirror has the edited summary. Before, only
/// creates and transitions were named: the mirror kept the old summary until the lag passed and
/// another refresh ran.
#[test]
fn an_incremental_refresh_on_cloud_right_after_an_edit_has_the_edited_value() {
    let mut stack = Stack::start(Mode::Cloud, Transport::Http);
    let keys = stack.fake.seed_issues(PROJECT, "AWPCA", 2);
    stack.spawn_agent();
    refresh_of(&stack, json!({}));
    stack
        .fake
        .set_search_lag(std::time::Duration::from_secs(600));
    batch_of(
        &stack,
        json!([{"type": "ensure_issue", "params": {"key": keys[0], "issue_type": "task",
                                                   "summary": "Исправленная"}},
               {"type": "comment", "params": {"key": keys[1], "body": "Заметка"}}]),
    );
    assert_eq!(
        stack.fake.issue(&keys[0]).unwrap()["fields"]["summary"],
        "Исправленная"
    );
    let run = refresh_of(&stack, json!({"since": "last", "project": "AWPCA"}));
    stack.kill_agent();
    // The commented issue too: its id came in the comment's `self`.
    let ids: Vec<String> = keys
        .iter()
        .map(|key| {
            stack.fake.issue(key).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(
        stack
            .fake
            .requests()
            .iter()
            .any(|seen| seen.endpoint == Endpoint::SearchJql
                && seen.query.contains("updated")
                && ids
                    .iter()
                    .all(|id| seen.query.contains(&format!("reconcileIssues={id}")))),
        "the incremental search named the edited and the commented issue: {run:#}"
    );
    let mirror = stack.mirror("AWPCA");
    let edited = mirror
        .iter()
        .find(|i| i["key"] == keys[0].as_str())
        .unwrap();
    assert_eq!(edited["summary"], "Исправленная", "{edited:#}");
}

/// The call table's idle hour, measured: the real agent loop against the real hub over HTTP and
/// the simulated Jira, on one `ManualClock` that every wait of the agent goes through (its
/// heartbeat period and idle poll included), so an hour of the agent's time passes in a second
/// and nothing is scaled. 1,800 claims of an idle poll of 2 s (the defaults, with a heartbeat of
/// 60 s) are exactly one hour; every Jira request in it is counted by endpoint. Before: a
/// `serverInfo` at every heartbeat, 60. After: a good answer stands for `jira_ok` for 5 minutes,
/// so one `serverInfo` in each 5 minutes, 12.
#[test]
fn an_idle_hour_costs_the_calls_of_the_table() {
    use crate::agent_waits::Hub;
    use jira_hub::clock::Clock;
    let fake = jira_hub::sim::jira::FakeJira::start(Mode::DataCenter);
    let hub = Hub::start(
        json!({"pacing": {"min_interval_ms": 0, "claim_timeout_seconds": 60}}),
        json!([]),
    );
    let mut config: Value =
        serde_json::from_str(&hub.agent_config(&fake.url(), json!({}))).unwrap();
    for key in ["idle_poll_ms", "heartbeat_seconds"] {
        config.as_object_mut().unwrap().remove(key);
    }
    config["claim_wait_seconds"] = json!(0);
    let from = hub.clock.monotonic();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    jira_hub::run_agent_for_test(
        &config.to_string(),
        hub.clock.clone(),
        None,
        stop,
        Some(1800),
    )
    .unwrap();
    let spent = hub.clock.monotonic() - from;
    // The run's one `myself` (who the agent is) waits its pacing after the first probe.
    assert!(
        (std::time::Duration::from_secs(3598)..std::time::Duration::from_secs(3599))
            .contains(&spent),
        "1,800 claims 2 s apart: the last at 59:58, and a paced `myself`: {spent:?}"
    );
    let mut by_endpoint = std::collections::BTreeMap::<String, usize>::new();
    for seen in fake.requests() {
        *by_endpoint
            .entry(format!("{} {}", seen.method, seen.path))
            .or_default() += 1;
    }
    eprintln!("an idle hour: {by_endpoint:?}");
    assert_eq!(
        by_endpoint,
        [
            ("GET /rest/api/2/myself".to_string(), 1),
            ("GET /rest/api/2/serverInfo".to_string(), 12)
        ]
        .into(),
        "one probe in each 5 minutes, who the agent is once a run, nothing else"
    );

    // What it costs in truth: Jira stops answering 7 minutes into a new run (two probes made,
    // at 0:00 and 5:00); the hub hears it from the probe at 10:00, within 5 minutes and a
    // heartbeat of the failure.
    let fake = jira_hub::sim::jira::FakeJira::start(Mode::DataCenter);
    let hub = Hub::start(json!({"pacing": {"min_interval_ms": 0}}), json!([]));
    let mut config: Value =
        serde_json::from_str(&hub.agent_config(&fake.url(), json!({}))).unwrap();
    config.as_object_mut().unwrap().remove("idle_poll_ms");
    let config = config.to_string();
    let from = hub.clock.monotonic();
    let broke = std::sync::Mutex::new(None);
    let (probes_before, down_since) = std::thread::scope(|scope| {
        scope.spawn(|| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while std::time::Instant::now() < deadline {
                if hub.clock.monotonic() >= from + std::time::Duration::from_secs(420) {
                    let probes = fake.requests().len();
                    for endpoint in [Endpoint::ServerInfo, Endpoint::Myself] {
                        fake.fault(endpoint, jira_hub::sim::jira::Fault::DropBeforeApply, 1000);
                    }
                    *broke.lock().unwrap() = Some((hub.clock.now(), probes));
                    return;
                }
                std::thread::yield_now();
            }
        });
        let down = || {
            let agents = hub.read().agents().unwrap();
            agents.into_iter().find_map(|agent| agent.jira_down_since)
        };
        assert!(crate::classify::run_until(&hub, &config, || down().is_some()));
        let (broke_at, probes) = broke.lock().unwrap().unwrap();
        let down_at = time::OffsetDateTime::parse(
            down().unwrap().as_str(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap();
        (probes, down_at - broke_at)
    });
    eprintln!("Jira failed while idle: the hub heard it {down_since} after");
    assert_eq!(
        probes_before, 3,
        "a probe at 0:00 (with the run's one `myself`) and one at 5:00"
    );
    assert!(
        down_since <= time::Duration::seconds(300 + 60),
        "the hub heard it {down_since} after"
    );
}
