//! End to end: the real hub daemon, the real agent binary (`jira-hub agent`), the simulated Jira
//! (`src/sim/jira.rs`), over the file relay and over HTTP. Every wait is bounded; nothing asserts on
//! how fast things went.

use crate::support::*;
use jira_hub::sim::jira::{
    Broken, Change, EPIC_LINK_FIELD, Endpoint, FakeJira, Fault, Mode, PROJECT,
};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

/// Generous: debug builds on two cores, tests in parallel.
const WAIT: Duration = Duration::from_secs(150);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    Relay,
    Http,
}

/// A running `jira-hub agent`, killed (SIGKILL) when dropped.
pub(crate) struct AgentProcess(std::process::Child);

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Hub daemon + fake Jira + agent, in one temp dir.
pub(crate) struct Stack {
    pub(crate) dir: TestDir,
    daemon: Daemon,
    client_token: String,
    pub(crate) fake: FakeJira,
    pub(crate) config: PathBuf,
    log: PathBuf,
    agent: Option<AgentProcess>,
}

/// The fake's workflow and link types on the hub; fast pacing, at most `per_claim` commands a
/// claim, claim timeouts of `claim_timeout` seconds, short backoff.
pub(crate) fn set_fake_settings(
    hub: &mut jira_hub::service::HubConnection,
    per_claim: u32,
    claim_timeout: u32,
) {
    set_settings(
        hub,
        json!({
            "transitions_map": {"В работе": "11", "Готово": "21", "Снято": "31"},
            "link_types": {"blocks": "Blocker", "relates": "Related", "duplicates": "Duplicate"},
            "pacing": {"min_interval_ms": 0, "max_commands_per_claim": per_claim,
                       "claim_timeout_seconds": claim_timeout, "max_deliveries": 10,
                       "backoff_initial_seconds": 1, "backoff_max_seconds": 2},
        }),
    );
}

impl Stack {
    pub(crate) fn start(mode: Mode, transport: Transport) -> Stack {
        Stack::start_with(mode, transport, &[], json!({}))
    }

    /// [`Stack::start`] with more options of `serve` and more keys of the agent's config.
    pub(crate) fn start_with(
        mode: Mode,
        transport: Transport,
        serve: &[&str],
        agent: Value,
    ) -> Stack {
        let dir = TestDir::in_memory_fs();
        let (mut hub, relay, agent_token) = relay_hub(&dir);
        set_fake_settings(&mut hub, 50, 10);
        let client_token = hub.tokens().unwrap().unwrap().client;
        drop(hub);
        let daemon = Daemon::start(&dir.db(), serve);
        let fake = FakeJira::start(mode);
        let mut config = json!({
            "jira_url": fake.url(), "jira_user": "agent", "jira_password": "secret",
            "agent_token": agent_token, "name": "agent-1", "idle_poll_ms": 100,
            "answer_timeout_seconds": 5, "request_timeout_seconds": 2, "search_lag_seconds": 3,
            // A write whose answer was lost goes back to the hub for this long: longer
            // than the fake's slowest write below (1.5 s), short enough for a test.
            "release_grace_seconds": 3,
        });
        for (key, value) in agent.as_object().into_iter().flatten() {
            config[key] = value.clone();
        }
        match transport {
            Transport::Relay => config["relay_dir"] = relay.display().to_string().into(),
            Transport::Http => config["hub_url"] = format!("http://{}", daemon.address).into(),
        }
        let path = dir.path().join("agent.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let log = dir.path().join("agent.log");
        Stack {
            dir,
            daemon,
            client_token,
            fake,
            config: path,
            log,
            agent: None,
        }
    }

    pub(crate) fn spawn_agent(&mut self) -> u32 {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_jira-hub"))
            .arg("agent")
            .arg("--config")
            .arg(&self.config)
            .current_dir(self.dir.path())
            .env_remove("JIRA_HUB_DB")
            .env("RUST_LOG", "info")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start the agent");
        let pid = child.id();
        self.agent = Some(AgentProcess(child));
        pid
    }

    /// Changes one key of the agent's config (before the agent is started).
    fn set_agent_config(&self, key: &str, value: Value) {
        let mut config: Value =
            serde_json::from_slice(&std::fs::read(&self.config).unwrap()).unwrap();
        config[key] = value;
        std::fs::write(&self.config, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    }

    /// Another agent process on the same hub and transport, under its own name (its config is
    /// the stack's with `name` changed); killed (SIGKILL) when the returned value is dropped.
    fn spawn_named_agent(&self, name: &str) -> AgentProcess {
        let mut config: Value =
            serde_json::from_slice(&std::fs::read(&self.config).unwrap()).unwrap();
        config["name"] = name.into();
        let path = self.dir.path().join(format!("agent-{name}.json"));
        std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_jira-hub"))
            .arg("agent")
            .arg("--config")
            .arg(&path)
            .current_dir(self.dir.path())
            .env_remove("JIRA_HUB_DB")
            .env("RUST_LOG", "info")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start the agent");
        AgentProcess(child)
    }

    /// `kill -9`: no chance to finish anything.
    pub(crate) fn kill_agent(&mut self) {
        self.agent = None;
    }

    pub(crate) fn client(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        http(
            &self.daemon.address,
            method,
            path,
            Some(&self.client_token),
            body.as_ref(),
        )
    }

    pub(crate) fn enqueue(&self, batch: Value) -> i64 {
        let (status, view) = self.client("POST", "/batches", Some(batch));
        assert_eq!(status, 201, "{view}");
        view["id"].as_i64().unwrap()
    }

    pub(crate) fn refresh(&self) -> i64 {
        let (status, view) = self.client("POST", "/refresh", Some(json!({})));
        assert_eq!(status, 201, "{view}");
        view["id"].as_i64().unwrap()
    }

    fn batch(&self, id: i64) -> Value {
        let (status, view) = self.client("GET", &format!("/batches/{id}"), None);
        assert_eq!(status, 200, "{view}");
        view
    }

    /// Waits until the batch is `completed`; panics with the batch and the agent's log if not.
    pub(crate) fn wait_completed(&self, id: i64) -> Value {
        self.wait_completed_within(id, WAIT)
    }

    /// [`Stack::wait_completed`] with a bound of its own (a refresh of 25,000 issues in a debug
    /// build on two busy cores needs more than [`WAIT`]).
    pub(crate) fn wait_completed_within(&self, id: i64, bound: Duration) -> Value {
        let started = Instant::now();
        loop {
            let view = self.batch(id);
            if view["status"] == "completed" {
                return view;
            }
            if started.elapsed() > bound || view["status"] == "cancelled" {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                let tail: String = log
                    .lines()
                    .rev()
                    .take(40)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n");
                panic!("batch {id} did not complete: {view:#}\nagent log tail:\n{tail}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub(crate) fn mirror(&self, label: &str) -> Vec<Value> {
        let (status, issues) = self.client("GET", &format!("/projects/{label}/issues"), None);
        assert_eq!(status, 200, "{issues}");
        issues.as_array().unwrap().clone()
    }
}

/// Epic → task in it → transition → link → comment, each step on the result of the one before.
pub(crate) fn plan(tag: &str) -> Value {
    json!({"title": format!("план {tag}"), "author": "ivanov", "project": "AWPCA", "commands": [
        {"type": "ensure_issue", "params": {"issue_type": "epic", "summary": format!("Эпик {tag}")}},
        {"type": "ensure_issue", "params": {"issue_type": "task", "summary": format!("Задача {tag}"),
            "description": "сделать и проверить", "epic_key": {"$result": "key"}}, "depends_on": 1},
        {"type": "transition", "params": {"key": {"$result": "key"}, "status": "В работе"}, "depends_on": 2},
        {"type": "link", "params": {"from": {"$result": "key"}, "to": format!("{PROJECT}-1"), "type": "blocks"}, "depends_on": 2},
        {"type": "comment", "params": {"key": {"$result": "key"}, "body": format!("Комментарий {tag}")}, "depends_on": 2},
    ]})
}

/// Every effect of [`plan`] is in Jira exactly once; returns (epic, task).
pub(crate) fn assert_landed_once(fake: &FakeJira, tag: &str, view: &Value) -> (String, String) {
    for command in view["commands"].as_array().unwrap() {
        assert!(
            command["status"] == "done" || command["status"] == "confirmed_by_state",
            "{command:#}"
        );
    }
    let epics = fake.keys_with_summary(&format!("Эпик {tag}"));
    let tasks = fake.keys_with_summary(&format!("Задача {tag}"));
    assert_eq!(epics.len(), 1, "one epic: {epics:?}");
    assert_eq!(tasks.len(), 1, "one task: {tasks:?}");
    let (epic, task) = (epics[0].clone(), tasks[0].clone());
    let issue = fake.issue(&task).unwrap();
    assert_eq!(issue["fields"]["issuetype"]["name"], "Задача");
    assert_eq!(
        fake.issue(&epic).unwrap()["fields"]["issuetype"]["name"],
        "Эпик"
    );
    assert_eq!(
        issue["fields"][EPIC_LINK_FIELD],
        epic.as_str(),
        "in its epic"
    );
    assert!(
        issue["fields"]["labels"]
            .as_array()
            .unwrap()
            .contains(&json!("AWPCA")),
        "the project's label: {}",
        issue["fields"]["labels"]
    );
    assert_eq!(fake.status_of(&task).unwrap(), "В работе");
    let links: Vec<_> = fake
        .links()
        .into_iter()
        .filter(|l| l.source == task || l.target == task)
        .collect();
    assert_eq!(links.len(), 1, "one link: {links:?}");
    assert_eq!(
        (
            links[0].type_name.as_str(),
            links[0].source.as_str(),
            links[0].target.as_str()
        ),
        ("Blocker", task.as_str(), format!("{PROJECT}-1").as_str()),
        "the task blocks {PROJECT}-1, not the other way round"
    );
    let comments = fake.comments(&task);
    assert_eq!(comments.len(), 1, "one comment: {comments:?}");
    assert_eq!(comments[0]["body"], format!("Комментарий {tag}").as_str());
    (epic, task)
}

fn batch_lands_and_refresh_mirrors(transport: Transport) {
    let mut stack = Stack::start(Mode::DataCenter, transport);
    stack.fake.seed_issues(PROJECT, "AWPCA", 1);
    stack.spawn_agent();
    let tag = format!("{transport:?}");
    let id = stack.enqueue(plan(&tag));
    let view = stack.wait_completed(id);
    let (epic, task) = assert_landed_once(&stack.fake, &tag, &view);
    assert_eq!(view["commands"][1]["result"]["created"], true);

    let refresh = stack.refresh();
    stack.wait_completed(refresh);
    let mirror = stack.mirror("AWPCA");
    let mut keys: Vec<&str> = mirror.iter().map(|i| i["key"].as_str().unwrap()).collect();
    keys.sort();
    let mut expected = vec![format!("{PROJECT}-1"), epic, task.clone()];
    expected.sort();
    assert_eq!(keys, expected);
    let (_, issue) = stack.client("GET", &format!("/issues/{task}"), None);
    assert_eq!(issue["status"], "В работе", "{issue:#}");
}

#[test]
fn a_batch_lands_once_and_a_refresh_mirrors_it_over_the_relay() {
    batch_lands_and_refresh_mirrors(Transport::Relay);
}

#[test]
fn a_batch_lands_once_and_a_refresh_mirrors_it_over_http() {
    batch_lands_and_refresh_mirrors(Transport::Http);
}

/// A small xorshift, seeded from the clock and printed, so that a failure can be replayed.
struct Random(u64);

impl Random {
    fn new() -> Random {
        let seed = std::env::var("E2E_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("E2E_SEED={seed}");
        Random(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn killed_agents_and_dropped_connections_leave_every_effect_once() {
    let mut stack = Stack::start(Mode::DataCenter, Transport::Relay);
    stack.fake.seed_issues(PROJECT, "AWPCA", 1);
    // Every write is applied and then its answer lost, once each.
    stack
        .fake
        .fault(Endpoint::CreateIssue, Fault::DropAfterApply, 2);
    stack
        .fake
        .fault(Endpoint::DoTransition, Fault::DropAfterApply, 1);
    stack
        .fake
        .fault(Endpoint::CreateLink, Fault::DropAfterApply, 1);
    stack
        .fake
        .fault(Endpoint::AddComment, Fault::DropAfterApply, 1);
    stack.fake.set_latency(Duration::from_millis(100));
    let id = stack.enqueue(plan("chaos"));
    let mut random = Random::new();
    // Each Jira call takes 100 ms, so the batch takes seconds: kills land at its start, amid its
    // writes (applied, unanswered), or after.
    let mut kills_mid_batch = 0;
    for _ in 0..5 {
        stack.spawn_agent();
        std::thread::sleep(Duration::from_millis(200 + random.below(1800)));
        stack.kill_agent();
        if stack.batch(id)["status"] == "completed" {
            break;
        }
        kills_mid_batch += 1;
    }
    eprintln!("{kills_mid_batch} kills before the batch completed");
    stack.spawn_agent();
    let view = stack.wait_completed(id);
    assert_landed_once(&stack.fake, "chaos", &view);
    assert_eq!(stack.fake.faults_pending(), 0, "every fault was served");
}

/// Counts the mirror of AWPCA after a full refresh of `n` issues.
fn refresh_all(stack: &Stack, n: usize) -> Value {
    let id = stack.refresh();
    let view = stack.wait_completed_within(id, 4 * WAIT);
    let command = view["commands"][0].clone();
    assert_eq!(command["status"], "done", "{command:#}");
    let mirror = stack.mirror("AWPCA");
    assert_eq!(mirror.len(), n, "the whole project reached the mirror");
    assert!(mirror.iter().all(|i| i["neighbor"] == false));
    let mut keys: Vec<&str> = mirror.iter().map(|i| i["key"].as_str().unwrap()).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), n, "no issue twice");
    command
}

#[test]
fn a_data_center_refresh_of_25000_pages_past_the_10000_window() {
    let mut stack = Stack::start(Mode::DataCenter, Transport::Relay);
    stack.fake.seed_issues(PROJECT, "AWPCA", 25_000);
    stack.spawn_agent();
    refresh_all(&stack, 25_000);
    let searches = stack.fake.calls(Endpoint::Search);
    assert!(searches >= 25, "pages of at most 1000: {searches}");
}

/// Cloud (token paging, no total) under a rate limit (3 requests/s, and the first searches
/// answered 429 with and without `Retry-After`, JSON and HTML): nothing lost, the rate limiting
/// recorded on the command; then the pause the hub hands out after a rate-limited report is
/// honoured: no Jira call inside it.
#[test]
fn a_rate_limited_cloud_refresh_of_25000_loses_nothing_and_honours_the_pause() {
    let mut stack = Stack::start(Mode::Cloud, Transport::Relay);
    stack.fake.seed_issues(PROJECT, "AWPCA", 25_000);
    stack.fake.rate_limit(Some(3));
    stack.fake.fault(
        Endpoint::SearchJql,
        Fault::TooManyRequests {
            retry_after: Some(1),
            html: false,
        },
        1,
    );
    stack.fake.fault(
        Endpoint::SearchJql,
        Fault::TooManyRequests {
            retry_after: None,
            html: true,
        },
        1,
    );
    stack.spawn_agent();
    let command = refresh_all(&stack, 25_000);
    assert!(
        command["rate_limited"].as_i64().unwrap() >= 2,
        "rate limiting is recorded on the command: {command:#}"
    );

    // A rate-limited report makes the hub hand out a pause with the next claim: the command that
    // comes with it must not reach Jira before the pause is over.
    stack.fake.fault(
        Endpoint::AddComment,
        Fault::TooManyRequests {
            retry_after: Some(1),
            html: false,
        },
        1,
    );
    let comment = |body: &str| {
        json!({"title": body, "author": "ivanov", "commands": [
            {"type": "comment", "params": {"key": format!("{PROJECT}-1"), "body": body}}]})
    };
    let first = stack.wait_completed(stack.enqueue(comment("первый")));
    assert!(
        first["commands"][0]["rate_limited"].as_i64().unwrap() > 0,
        "{first:#}"
    );
    let view = stack.wait_completed(stack.enqueue(comment("после паузы")));
    let command = &view["commands"][0];
    assert_eq!(command["status"], "done", "{command:#}");
    let pause = command["pause_seconds"].as_i64().unwrap();
    assert!(pause > 0, "a pause was handed out with it: {command:#}");
    let claimed_at: SystemTime =
        jira_hub::domain::time::parse_utc(command["claimed_at"].as_str().unwrap())
            .unwrap()
            .into();
    let until = claimed_at + Duration::from_secs(pause as u64);
    let inside: Vec<_> = stack
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.at > claimed_at && r.at < until)
        .collect();
    assert!(
        inside.is_empty(),
        "Jira calls during the {pause} s pause handed out at {}: {inside:?}",
        command["claimed_at"]
    );
    let after: Vec<_> = stack
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.at >= until)
        .collect();
    assert!(!after.is_empty(), "the comment went out after the pause");
    assert_eq!(stack.fake.comments(&format!("{PROJECT}-1")).len(), 2);
}

/// SIGTERM in the middle of a batch: the agent finishes the Jira call in hand, reports it, and
/// exits 0. Every comment that reached Jira is `done` in the hub; the rest are still claimed
/// (handed out again when their lease ends), none was made twice.
#[test]
fn sigterm_finishes_the_call_in_hand_reports_and_exits_0() {
    let mut stack = Stack::start(Mode::DataCenter, Transport::Relay);
    let key = stack.fake.seed_issue(
        PROJECT,
        json!({"summary": "Куда комментировать", "labels": ["AWPCA"]}),
    );
    // Each Jira call takes a while, so the signal lands amid the batch.
    stack.fake.set_latency(Duration::from_millis(300));
    let commands: Vec<Value> = (1..=8)
        .map(|n| json!({"type": "comment", "params": {"key": key, "body": format!("Комментарий {n}")}}))
        .collect();
    let id =
        stack.enqueue(json!({"title": "комментарии", "author": "ivanov", "commands": commands}));
    let pid = stack.spawn_agent();
    let started = Instant::now();
    while stack.fake.comments(&key).is_empty() {
        assert!(started.elapsed() < WAIT, "no comment reached Jira");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut agent = stack.agent.take().unwrap();
    let started = Instant::now();
    let exit = loop {
        if let Some(exit) = agent.0.try_wait().unwrap() {
            break exit;
        }
        assert!(started.elapsed() < WAIT, "the agent did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(exit.code(), Some(0), "SIGTERM is a clean stop");
    let in_jira = stack.fake.comments(&key).len();
    assert!(
        in_jira < 8,
        "the signal came amid the batch ({in_jira} comments)"
    );
    let view = stack.batch(id);
    let done = view["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "done")
        .count();
    assert_eq!(done, in_jira, "every call made was reported: {view:#}");
    // Another agent later finishes the rest, still once each.
    stack.spawn_agent();
    stack.wait_completed(id);
    let bodies: Vec<String> = stack
        .fake
        .comments(&key)
        .iter()
        .map(|c| c["body"].as_str().unwrap().to_string())
        .collect();
    let mut unique = bodies.clone();
    unique.sort();
    unique.dedup();
    assert_eq!((bodies.len(), unique.len()), (8, 8), "{bodies:?}");
}

// ---- The agent is safe to point at a production Jira -------------------------------

fn one_command(title: &str, command: Value) -> Value {
    json!({"title": title, "author": "ivanov", "project": "AWPCA", "commands": [command]})
}

/// The key a command's result names.
fn result_key(view: &Value, index: usize) -> String {
    view["commands"][index]["result"]["key"]
        .as_str()
        .unwrap_or_else(|| panic!("no key: {view:#}"))
        .to_string()
}

/// Item 1: an edit adds its labels and removes none; the issue keeps the labels of other teams
/// and projects (today's `PUT fields.labels` replaced them).
#[test]
fn an_edit_adds_labels_and_never_removes_one() {
    let mut stack = Stack::start(Mode::DataCenter, Transport::Http);
    let key = stack.fake.seed_issue(
        PROJECT,
        json!({"summary": "Общая задача", "issuetype": {"id": "10002", "name": "Задача"},
               "labels": ["OTHER_TEAM", "STOCKS"]}),
    );
    stack.spawn_agent();
    let id = stack.enqueue(one_command(
        "правка",
        json!({"type": "ensure_issue", "params": {"key": key, "issue_type": "task",
               "summary": "Общая задача", "labels": ["сроки"]}}),
    ));
    let view = stack.wait_completed(id);
    assert_eq!(view["commands"][0]["status"], "done", "{view:#}");
    let labels = stack.fake.labels_of(&key);
    for label in ["OTHER_TEAM", "STOCKS", "сроки", "AWPCA"] {
        assert!(labels.contains(&label.to_string()), "{label} in {labels:?}");
    }
}

/// Item 2: a create whose answer was lost never takes the issue another command made with the
/// same summary and labels (today it did, and handed that key to its dependents).
#[test]
fn a_lost_create_never_takes_the_issue_of_another_command() {
    let mut stack = Stack::start(Mode::DataCenter, Transport::Http);
    stack.spawn_agent();
    let twin =
        json!({"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Близнец"}});
    let first = stack.enqueue(one_command("первый", twin.clone()));
    let first_key = result_key(&stack.wait_completed(first), 0);
    // The second create never reaches Jira, and its answer is lost.
    stack
        .fake
        .fault(Endpoint::CreateIssue, Fault::DropBeforeApply, 1);
    let second = stack.enqueue(one_command("второй", twin));
    let view = stack.wait_completed(second);
    let key = result_key(&view, 0);
    assert_ne!(key, first_key, "the second command has an issue of its own");
    assert_eq!(view["commands"][0]["result"]["created"], true);
    let mut keys = stack.fake.keys_with_summary("Близнец");
    keys.sort();
    let mut expected = vec![first_key, key.clone()];
    expected.sort();
    assert_eq!(keys, expected);
    let marker = &stack.fake.issue_properties(&key)["jira-hub"];
    assert_eq!(marker["command"], view["commands"][0]["id"], "{marker}");
}

/// Item 2: Jira's clock is 40 minutes behind the hub's; a create whose answer was lost is found
/// in a window on Jira's clock (today's window on the hub's clock missed it and created again),
/// by the agent's own look after the lost answer.
#[test]
fn a_lost_create_is_found_though_jiras_clock_is_far_behind() {
    let mut stack = Stack::start(Mode::DataCenter, Transport::Http);
    stack.fake.set_clock_skew_ms(-40 * 60_000);
    stack
        .fake
        .fault(Endpoint::CreateIssue, Fault::DropAfterApply, 1);
    stack.spawn_agent();
    let id = stack.enqueue(one_command(
        "часы",
        json!({"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Отстающие часы"}}),
    ));
    let view = stack.wait_completed(id);
    let keys = stack.fake.keys_with_summary("Отстающие часы");
    assert_eq!(keys.len(), 1, "one issue: {keys:?}");
    assert_eq!(result_key(&view, 0), keys[0]);
    // Found by its marker in the same delivery (a look, not a repeat).
    assert_eq!(view["commands"][0]["result"]["created"], true);
    assert_eq!(view["commands"][0]["deliveries"], 1, "{view:#}");
}

/// Item 3: a proxy answers 504 while Jira is still creating; the agent does not create again but
/// looks for its marker until Jira has made the issue (a search a second later found
/// nothing and a second POST made a duplicate).
#[test]
fn a_create_cut_by_a_proxy_is_not_repeated_while_jira_still_works() {
    let mut stack = Stack::start(Mode::DataCenter, Transport::Relay);
    // Data Center's search does not lag (the agent's default there): nothing to wait for but
    // the write itself.
    stack.set_agent_config("search_lag_seconds", json!(0));
    stack.fake.fault(
        Endpoint::CreateIssue,
        Fault::ProxyTimeout {
            apply_after: Duration::from_millis(1500),
        },
        1,
    );
    stack.spawn_agent();
    let id = stack.enqueue(
        json!({"title": "прокси", "author": "ivanov", "project": "AWPCA",
        "commands": [
            {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "За прокси"}},
            {"type": "comment", "params": {"key": {"$result": "key"}, "body": "к задаче за прокси"},
             "depends_on": 1}]}),
    );
    let view = stack.wait_completed(id);
    stack.fake.wait_applied(WAIT);
    let keys = stack.fake.keys_with_summary("За прокси");
    assert_eq!(keys.len(), 1, "one issue: {keys:?}");
    assert_eq!(
        stack.fake.creates_of("За прокси"),
        1,
        "one POST reached Jira"
    );
    assert_eq!(result_key(&view, 0), keys[0]);
    // Not written again: the agent looked for its marker within the grace (3 s here) and found
    // the issue once Jira had made it, in the same delivery.
    assert_eq!(view["commands"][0]["deliveries"], 1, "{view:#}");
    assert_eq!(stack.fake.comments(&keys[0]).len(), 1);
    let log = std::fs::read_to_string(&stack.log).unwrap_or_default();
    assert!(
        log.contains("a lost create's marker was found"),
        "the agent found its marker"
    );
}

/// Item 11: on Cloud the epic goes through `parent` (the Epic Link field is refused there), and
/// a comment whose answer was lost is recognised in the form Cloud gives it back (wiki → ADF →
/// wiki: line endings, trailing spaces, blank lines), not posted again.
#[test]
fn cloud_is_cloud_parent_for_epics_and_comments_recognised_after_adf() {
    let mut stack = Stack::start(Mode::Cloud, Transport::Http);
    stack
        .fake
        .fault(Endpoint::AddComment, Fault::DropAfterApply, 1);
    stack.spawn_agent();
    let body = "Итог:  \r\nвсё готово\t\r\n\r\n\r\n\r\nдальше — тесты\r\n";
    let id = stack.enqueue(json!({"title": "облако", "author": "ivanov", "project": "AWPCA",
        "commands": [
            {"type": "ensure_issue", "params": {"issue_type": "epic", "summary": "Облачный эпик"}},
            {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Облачная задача",
             "epic_key": {"$result": "key"}}, "depends_on": 1},
            {"type": "comment", "params": {"key": {"$result": "key"}, "body": body}, "depends_on": 2}]}));
    let view = stack.wait_completed(id);
    let (epic, task) = (result_key(&view, 0), result_key(&view, 1));
    let issue = stack.fake.issue(&task).unwrap();
    assert_eq!(issue["fields"]["parent"]["key"], epic.as_str(), "{issue:#}");
    assert!(issue["fields"].get(EPIC_LINK_FIELD).is_none());
    let comments = stack.fake.comments(&task);
    assert_eq!(comments.len(), 1, "one comment: {comments:#?}");
    assert_eq!(
        comments[0]["body"], "Итог:\nвсё готово\n\nдальше — тесты",
        "as Cloud keeps it"
    );
    assert_eq!(
        view["commands"][2]["result"]["comment_id"],
        comments[0]["id"]
    );
}

/// The kill -9 test: two agents on one relay folder, killed at random while the
/// fake answers slowly, drops answers after applying writes and cuts creates with a proxy 504;
/// two identical creates in one batch. Every issue, comment and link exists exactly once, and
/// every create's result names the issue marked for that very command. Bounded rounds; the seed
/// is printed (`E2E_SEED=… cargo test … two_agents`) to replay a failure.
#[test]
fn two_agents_killed_at_random_amid_lost_answers_leave_every_effect_once() {
    use crate::classify::{
        ALWAYS, Front, answer, data_center_stamp, forbidden_comment, unauthorized,
    };
    let stack = Stack::start(Mode::DataCenter, Transport::Relay);
    let refused = stack.fake.seed_issues(PROJECT, "AWPCA", 1).remove(0);
    // Jira answers as Data Center does (`X-Seraph-LoginReason: OK` on every answer);
    // the agent's credentials are refused in the middle of the batches (a create and a link
    // answered 401, and the probes after them, twice); 403s on some paths (a board read without
    // a Jira Software licence, comments on one issue).
    let front = Front::start(&stack.fake.url(), data_center_stamp());
    stack.set_agent_config("jira_url", json!(front.url));
    front.rule("POST", "/rest/api/2/issue", unauthorized(), 1);
    front.rule("POST", "/rest/api/2/issueLink", unauthorized(), 1);
    front.rule("GET", "/rest/api/2/myself", unauthorized(), 2);
    front.rule(
        "POST",
        &format!("/rest/api/2/issue/{refused}/comment"),
        forbidden_comment(),
        ALWAYS,
    );
    front.rule(
        "GET",
        "/rest/agile/1.0/board/77",
        answer(
            403,
            &[],
            r#"{"errorMessages":["У пользователя нет действующей лицензии Jira Software."],"errors":{}}"#,
        ),
        ALWAYS,
    );
    stack
        .fake
        .fault(Endpoint::CreateIssue, Fault::DropAfterApply, 1);
    stack.fake.fault(
        Endpoint::CreateIssue,
        Fault::ProxyTimeout {
            apply_after: Duration::ZERO,
        },
        1,
    );
    stack.fake.fault(
        Endpoint::CreateIssue,
        Fault::ProxyTimeout {
            apply_after: Duration::from_millis(1000),
        },
        1,
    );
    stack
        .fake
        .fault(Endpoint::DoTransition, Fault::DropAfterApply, 1);
    stack
        .fake
        .fault(Endpoint::CreateLink, Fault::DropAfterApply, 1);
    stack
        .fake
        .fault(Endpoint::AddComment, Fault::DropAfterApply, 2);
    stack.fake.set_latency(Duration::from_millis(100));
    let plan_id = stack.enqueue(plan("chaos2"));
    let twins = stack.enqueue(json!({"title": "близнецы", "author": "ivanov", "project": "AWPCA",
        "commands": [
            {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Близнец chaos2"}},
            {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Близнец chaos2"}},
            {"type": "comment", "params": {"key": {"$result": "key"}, "body": "первому"}, "depends_on": 1},
            {"type": "comment", "params": {"key": {"$result": "key"}, "body": "второму"}, "depends_on": 2}]}));
    let refusals = stack.enqueue(json!({"title": "отказы", "author": "ivanov", "project": "AWPCA",
        "commands": [
            {"type": "comment", "params": {"key": refused, "body": "нельзя"}},
            {"type": "refresh", "params": {"jql": format!("project = {PROJECT}"), "boards": [77]}}]}));
    let mut random = Random::new();
    let mut agents: [Option<AgentProcess>; 2] = [None, None];
    let names = ["agent-a", "agent-b"];
    let mut kills = 0;
    for _ in 0..8 {
        let which = random.below(2) as usize;
        if agents[which].is_none() {
            agents[which] = Some(stack.spawn_named_agent(names[which]));
        }
        let other = 1 - which;
        if agents[other].is_none() && random.below(2) == 0 {
            agents[other] = Some(stack.spawn_named_agent(names[other]));
        }
        std::thread::sleep(Duration::from_millis(200 + random.below(1500)));
        if agents[which].take().is_some() {
            kills += 1;
        }
        if stack.batch(plan_id)["status"] == "completed"
            && stack.batch(twins)["status"] == "completed"
            && stack.batch(refusals)["status"] == "completed"
        {
            break;
        }
    }
    eprintln!("{kills} kills");
    for (slot, name) in agents.iter_mut().zip(names) {
        if slot.is_none() {
            *slot = Some(stack.spawn_named_agent(name));
        }
    }
    let view = stack.wait_completed(plan_id);
    stack.fake.wait_applied(WAIT);
    let (epic, task) = assert_landed_once(&stack.fake, "chaos2", &view);
    for (index, key) in [(0, &epic), (1, &task)] {
        assert_eq!(&result_key(&view, index), key);
        let marker = &stack.fake.issue_properties(key)["jira-hub"];
        assert_eq!(
            marker["command"], view["commands"][index]["id"],
            "{key} is the issue of command {index}: {marker}"
        );
    }
    let view = stack.wait_completed(twins);
    let keys = stack.fake.keys_with_summary("Близнец chaos2");
    assert_eq!(keys.len(), 2, "two twins, no more: {keys:?}");
    let (first, second) = (result_key(&view, 0), result_key(&view, 1));
    assert_ne!(first, second, "each twin command has its own issue");
    for (index, key) in [(0, &first), (1, &second)] {
        let marker = &stack.fake.issue_properties(key)["jira-hub"];
        assert_eq!(
            marker["command"], view["commands"][index]["id"],
            "{key} is the issue of command {index}: {marker}"
        );
    }
    for (key, body) in [(&first, "первому"), (&second, "второму")] {
        let comments = stack.fake.comments(key);
        assert_eq!(comments.len(), 1, "{key}: {comments:#?}");
        assert_eq!(comments[0]["body"], body);
    }
    // No command Jira would have taken failed; the one it refused failed with its words.
    for command in view["commands"].as_array().unwrap() {
        assert_eq!(command["status"], "done", "{command:#}");
    }
    let view = stack.wait_completed(refusals);
    let (comment, refresh) = (&view["commands"][0], &view["commands"][1]);
    assert_eq!(comment["status"], "failed", "{comment:#}");
    let error = comment["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&refused) && error.contains("нет прав"),
        "{error}"
    );
    assert!(stack.fake.comments(&refused).is_empty());
    assert_eq!(refresh["status"], "done", "{refresh:#}");
    assert!(
        refresh["result"]["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("доска 77")),
        "{refresh:#}"
    );
    assert!(front.count("GET", "/rest/api/2/myself") >= 2, "the probes");
    assert_eq!(stack.fake.faults_pending(), 0, "every fault was served");
}

// ---- The agent is safe to point at a production Jira (continued) ----

fn mirror_keys(stack: &Stack) -> Vec<String> {
    let mut keys: Vec<String> = stack
        .mirror("AWPCA")
        .iter()
        .filter(|i| i["neighbor"] == false)
        .map(|i| i["key"].as_str().unwrap().to_string())
        .collect();
    keys.sort_by_key(|k| k.rsplit_once('-').unwrap().1.parse::<u64>().unwrap());
    keys
}

/// Item 7: a transition is chosen among those Jira offers for the issue, by target status id;
/// the legacy transition id is not followed into another workflow's meaning; a post-function
/// that leaves the issue elsewhere fails the command.
#[test]
fn transitions_go_where_they_are_asked_to() {
    let mut stack = Stack::start(Mode::DataCenter, Transport::Relay);
    let bug = stack.fake.seed_issue(
        PROJECT,
        json!({"summary": "Ошибка в отчёте", "labels": ["AWPCA"],
               "issuetype": {"id": "10004", "name": "Ошибка"}}),
    );
    stack.spawn_agent();
    let transition = |stack: &Stack, status: &str| {
        let id = stack.enqueue(
            json!({"title": "переход", "author": "ivanov", "project": "AWPCA",
            "commands": [{"type": "transition", "params": {"key": bug, "status": status}}]}),
        );
        stack.wait_completed(id)["commands"][0].clone()
    };
    // The legacy map says "В работе" is transition 11; in the bugs' workflow 11 is "Не исправлять".
    let command = transition(&stack, "В работе");
    assert_eq!(command["status"], "failed", "{command:#}");
    let error = command["error"].as_str().unwrap();
    assert!(
        error.contains("Снято") && error.contains("status_id"),
        "{error}"
    );
    assert_eq!(
        stack.fake.status_of(&bug).unwrap(),
        "Открыта",
        "nothing moved"
    );
    // By target status id: the bugs' own transition (711) is found.
    let (status, view) = stack.client(
        "PUT",
        "/settings",
        Some(json!({"transitions_map": {"В работе": {"status_id": "3"},
                                        "Готово": {"status_id": "10001", "transition_id": "21"}}})),
    );
    assert_eq!(status, 200, "{view}");
    let command = transition(&stack, "В работе");
    assert_eq!(command["status"], "done", "{command:#}");
    assert_eq!(stack.fake.status_of(&bug).unwrap(), "В работе");
    let again = transition(&stack, "В работе");
    assert_eq!(
        again["status"], "done",
        "already there, by status id: {again:#}"
    );
    // A post-function leaves the issue in "Снято": the command says so instead of succeeding.
    stack.fake.redirect_transition("721", "Снято");
    let command = transition(&stack, "Готово");
    assert_eq!(command["status"], "failed", "{command:#}");
    let error = command["error"].as_str().unwrap();
    assert!(error.contains("721") && error.contains("Снято"), "{error}");
}

/// Item 8: Data Center paging by key survives an issue moved into the project (an old id with a
/// new high key), the page's last issue deleted and the last issue moved away mid-run.
#[test]
fn data_center_paging_is_right_for_jiras_issue_key_clause() {
    let mut stack = Stack::start_with(
        Mode::DataCenter,
        Transport::Relay,
        &[],
        json!({"page_size": 3}),
    );
    let other = stack.fake.seed_issues("OTHER", "AWPCA", 1);
    stack.fake.seed_issues(PROJECT, "AWPCA", 5);
    // OTHER-1 has the smallest id; moved in, it is AURORA-6 and ends the second page.
    assert_eq!(stack.fake.move_issue(&other[0], PROJECT), "AURORA-6");
    stack.fake.seed_issues(PROJECT, "AWPCA", 6);
    // The third page ends on AURORA-9, then it is deleted; the fourth ends on AURORA-12, then
    // it moves away.
    stack
        .fake
        .after_search(3, Change::Delete("AURORA-9".into()));
    stack
        .fake
        .after_search(4, Change::Move("AURORA-12".into(), "OTHER".into()));
    stack.spawn_agent();
    let id = stack.refresh();
    let command = stack.wait_completed(id)["commands"][0].clone();
    assert_eq!(command["status"], "done", "{command:#}");
    let expected: Vec<String> = (1..=12).map(|n| format!("AURORA-{n}")).collect();
    assert_eq!(
        mirror_keys(&stack),
        expected,
        "every issue the pages returned, once"
    );
}

/// Item 10 (agent): a 200 that is not a search answer fails the refresh; the mirror is kept.
#[test]
fn a_wrong_search_answer_fails_the_refresh_and_keeps_the_mirror() {
    let mut stack = Stack::start(Mode::DataCenter, Transport::Relay);
    stack.fake.seed_issues(PROJECT, "AWPCA", 5);
    stack.spawn_agent();
    let id = stack.refresh();
    assert_eq!(stack.wait_completed(id)["commands"][0]["status"], "done");
    assert_eq!(mirror_keys(&stack).len(), 5);
    for (broken, words) in [
        (Broken::NoIssues, "issues"),
        (Broken::Html, "не JSON"),
        (Broken::Truncated, "JSON"),
    ] {
        stack.fake.fault(Endpoint::Search, Fault::Broken(broken), 1);
        let id = stack.refresh();
        let command = stack.wait_completed(id)["commands"][0].clone();
        assert_eq!(command["status"], "failed", "{broken:?}: {command:#}");
        let error = command["error"].as_str().unwrap();
        assert!(error.contains(words), "{broken:?}: {error}");
        assert_eq!(
            mirror_keys(&stack).len(),
            5,
            "{broken:?}: the mirror is kept"
        );
    }
}

/// Seeds `n` issues of about `bytes` each (a long description).
fn seed_heavy(fake: &FakeJira, n: usize, bytes: usize) {
    let text = "Подробное описание. ".repeat(bytes / 37 + 1);
    for i in 0..n {
        fake.seed_issue(
            PROJECT,
            json!({"summary": format!("Тяжёлая задача {i}"), "description": text, "labels": ["AWPCA"],
                   "issuetype": {"id": "10002", "name": "Задача"}}),
        );
    }
}

/// Item 9: a page Jira cannot serve in time (the proxy answers 504) is asked again smaller.
#[test]
fn pages_too_large_for_jira_shrink() {
    let mut stack = Stack::start_with(
        Mode::DataCenter,
        Transport::Relay,
        &[],
        json!({"page_size": 40, "max_retries": 1}),
    );
    seed_heavy(&stack.fake, 40, 20_000);
    stack.fake.set_search_byte_limit(Some(300_000));
    stack.spawn_agent();
    let id = stack.refresh();
    let command = stack.wait_completed(id)["commands"][0].clone();
    assert_eq!(command["status"], "done", "{command:#}");
    assert_eq!(mirror_keys(&stack).len(), 40);
}

/// Item 13: over HTTP a page larger than the hub's body limit is split into reports that fit
/// (the claim answer says the limit), instead of being refused or resent forever.
#[test]
fn a_page_over_the_hubs_limit_is_split_to_fit() {
    let mut stack = Stack::start_with(
        Mode::DataCenter,
        Transport::Http,
        &["--http-max-body-mb", "1"],
        json!({}),
    );
    seed_heavy(&stack.fake, 30, 100_000);
    stack.spawn_agent();
    let id = stack.refresh();
    let command = stack.wait_completed(id)["commands"][0].clone();
    assert_eq!(command["status"], "done", "{command:#}");
    assert_eq!(mirror_keys(&stack).len(), 30);
    let (status, runs) = stack.client("GET", "/sync-runs", None);
    assert_eq!(status, 200);
    let pages = runs[0]["pages"].as_i64().unwrap_or_default();
    assert!(
        pages >= 3,
        "one Jira page went as several reports: {runs:#}"
    );
}

/// `agent --check` and `agent --once` beside a running relay agent of the same name (the host
/// name by default) leave that agent's claim waiting at the hub where it is: their requests are
/// their own (`claim-<name>-once-<hex>.json`), and they take back no claim. Before, each took the
/// waiting claim out of `inbox/` as "left by an earlier run", and the agent heard nothing for its
/// `answer_timeout`.
#[test]
fn one_shot_runs_leave_the_waiting_claim_of_the_running_agent_of_their_name() {
    let mut stack = Stack::start(Mode::DataCenter, Transport::Relay);
    stack.set_agent_config("claim_wait_seconds", json!(600));
    stack.set_agent_config("answer_timeout_seconds", json!(600));
    let config: Value = serde_json::from_slice(&std::fs::read(&stack.config).unwrap()).unwrap();
    let inbox = PathBuf::from(config["relay_dir"].as_str().unwrap()).join("inbox");
    let waiting = || -> Vec<String> {
        std::fs::read_dir(&inbox)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.starts_with("claim-agent-1-") && name.ends_with(".json"))
            .collect()
    };
    stack.spawn_agent();
    let started = Instant::now();
    let parked = loop {
        // Parked: the hub holds it (its file stays in inbox/ past the relay's passes).
        let first = waiting();
        std::thread::sleep(Duration::from_millis(300));
        if !first.is_empty() && waiting() == first {
            break first;
        }
        assert!(started.elapsed() < WAIT, "no claim parked");
    };
    for mode in ["--check", "--once"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_jira-hub"))
            .args(["agent", "--config"])
            .arg(&stack.config)
            .arg(mode)
            .current_dir(stack.dir.path())
            .env_remove("JIRA_HUB_DB")
            .output()
            .unwrap();
        assert!(out.status.code().is_some(), "{mode}: {out:?}");
        assert_eq!(
            waiting(),
            parked,
            "{mode} touched the running agent's waiting claim"
        );
    }
    // The waiting claim takes the next command at once (not after the agent's answer_timeout).
    let id = stack.enqueue(one_command(
        "рядом с --once",
        json!({"type": "comment", "params": {"key": format!("{PROJECT}-1"), "body": "рядом"}}),
    ));
    stack.wait_completed(id);
}

/// Jira's refusal of a link to an issue that does not exist names both keys.
#[test]
fn a_link_refusal_names_both_keys() {
    let mut stack = Stack::start(Mode::DataCenter, Transport::Http);
    stack.fake.seed_issues(PROJECT, "AWPCA", 1);
    stack.spawn_agent();
    let missing = format!("{PROJECT}-999");
    let id = stack.enqueue(json!({"title": "связь", "author": "ivanov", "project": "AWPCA", "commands": [
        {"type": "link", "params": {"from": format!("{PROJECT}-1"), "to": missing, "type": "blocks"}}]}));
    let view = stack.wait_completed(id);
    let command = &view["commands"][0];
    assert_eq!(command["status"], "failed", "{command:#}");
    let error = command["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!(
            "Jira отказала связать {PROJECT}-1 с {missing} (HTTP 404): «"
        )),
        "{error}"
    );
    // The log says the status in its wire word, not Rust's `Failed`.
    let started = Instant::now();
    let log = loop {
        let log = std::fs::read_to_string(&stack.log).unwrap_or_default();
        if log.contains("reported") || started.elapsed() > Duration::from_secs(10) {
            break log;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(log.contains("status=failed"), "{log}");
    assert!(!log.contains("status=Failed"), "{log}");
}
