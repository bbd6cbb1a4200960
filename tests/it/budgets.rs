//! Items 1–4 and 6: every repetition has a budget, every doubt about a write costs one
//! look, and credentials Jira refused are not sent again. The real agent loop and the real hub
//! over HTTP share one `ManualClock` ([`crate::agent_waits::Hub`]): the tests never sleep, the
//! simulated time is asserted.

use crate::agent_waits::{Hub, seed};
use crate::classify::{agent_view, all_ended, run_until};
use jira_hub::clock::Clock;
use jira_hub::domain::command::CommandStatus;
use jira_hub::sim::jira::{Endpoint, FakeJira, Fault, Mode};
use serde_json::{Value, json};
use std::time::Duration;

/// A lease of 10 s.
fn settings() -> Value {
    json!({"pacing": {"min_interval_ms": 0, "claim_timeout_seconds": 10, "max_deliveries": 3}})
}

fn comment(key: &str, body: &str) -> Value {
    json!({"type": "comment", "params": {"key": key, "body": body}})
}

/// A Cloud token whose scopes leave out one issue's comments
/// (401 «Unauthorized; scope does not match» there, `myself` 200). The command that meets it
/// fails with Jira's words within 3 leases and at most 6 POSTs to that path, after one
/// give-back; the rest of the batch completes, and Jira is shown usable.
#[test]
fn a_path_outside_a_cloud_tokens_scopes_fails_its_command_and_the_batch_completes() {
    scoped_path_ends(None);
}

/// Item 1 without the agent's memory: the scoped path's command is given back once by one run
/// of the agent, which then stops; the next delivery goes to the agent restarted (same name) or
/// to another agent. The hub hands it the previous give-back's refused path, and it fails the
/// command at once: the same bounds as without the restart.
#[test]
fn a_path_refused_again_after_a_restart_or_by_another_agent_fails_its_command() {
    for second in ["agent-1", "agent-2"] {
        scoped_path_ends(Some(second));
    }
}

/// One claim of the real agent (on the hub's clock), then it stops: a run of the agent that ends
/// between two deliveries.
fn one_claim(hub: &Hub, config: &str) {
    let mut config: Value = serde_json::from_str(config).unwrap();
    config["claim_wait_seconds"] = json!(0);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    jira_hub::run_agent_for_test(&config.to_string(), hub.clock.clone(), None, stop, Some(1))
        .unwrap();
}

/// The scoped-path scenario; `restart`: the first run of the agent stops after its first claim,
/// and an agent of this name takes the rest.
fn scoped_path_ends(restart: Option<&str>) {
    let fake = FakeJira::start(Mode::Cloud);
    let scoped = seed(&fake);
    let open = seed(&fake);
    let path = format!("/rest/api/2/issue/{scoped}/comment");
    fake.refuse_scope(&path);
    let hub = Hub::start(
        settings(),
        json!([
            comment(&scoped, "вне областей токена"),
            comment(&open, "первый"),
            comment(&open, "второй")
        ]),
    );
    let mut config = hub.agent_config(&fake.url(), json!({}));
    let from = hub.clock.monotonic();
    if let Some(name) = restart {
        one_claim(&hub, &config);
        let first = hub.commands()[0].clone();
        assert_eq!(
            (first.status, first.uncounted_releases),
            (CommandStatus::Queued, 1),
            "given back once by the first run: {first:?}"
        );
        config = hub.agent_config(&fake.url(), json!({ "name": name }));
    }
    assert!(
        run_until(&hub, &config, || all_ended(&hub)),
        "{restart:?}: never ended: {:?}",
        hub.commands()
    );
    let spent = hub.clock.monotonic() - from;
    assert!(
        spent <= Duration::from_secs(30),
        "{restart:?}: within 3 leases: {spent:?}"
    );
    let posts = fake
        .requests()
        .iter()
        .filter(|seen| seen.method == "POST" && seen.path == path)
        .count();
    assert!(
        (1..=6).contains(&posts),
        "{restart:?}: {posts} POSTs to the refused path"
    );
    let commands = hub.commands();
    assert_eq!(
        (commands[0].status, commands[0].uncounted_releases),
        (CommandStatus::Failed, 1),
        "{restart:?}: failed in the delivery after the give-back: {commands:?}"
    );
    let error = commands[0].error.as_deref().unwrap_or_default();
    assert!(
        error.contains("Unauthorized; scope does not match") && error.contains(&path),
        "{restart:?}: {error}"
    );
    assert!(
        commands[1..]
            .iter()
            .all(|c| c.status == CommandStatus::Done && c.deliveries == 1),
        "{restart:?}: {commands:?}"
    );
    assert_eq!(fake.comments(&open).len(), 2, "{restart:?}");
    assert_eq!(agent_view(&hub).jira_ok, Some(true), "{restart:?}");
}

/// Item 1: only the same call refused again fails the command. A transition whose issue read is
/// first sent to a login page (a proxy's 302, both the read and its probe) goes back for that
/// read; the next delivery reads it and is refused on the transition's POST (a scope 401): a
/// refusal of another call, so it goes back again instead of failing; the third delivery, refused
/// on the same POST, fails with Jira's words.
#[test]
fn a_command_given_back_for_another_path_is_not_failed_early() {
    let fake = FakeJira::start(Mode::Cloud);
    let key = seed(&fake);
    let post = format!("/rest/api/2/issue/{key}/transitions");
    fake.fault(Endpoint::GetIssue, Fault::RedirectToLogin, 2);
    fake.refuse_scope(&post);
    let mut settings = settings();
    settings["transitions_map"] = json!({"В работе": {"status_id": "3"}});
    let hub = Hub::start(
        settings,
        json!([{"type": "transition", "params": {"key": key, "status": "В работе"}}]),
    );
    let config = hub.agent_config(&fake.url(), json!({}));
    assert!(
        run_until(&hub, &config, || all_ended(&hub)),
        "never ended: {:?}",
        hub.commands()
    );
    assert_eq!(
        fake.faults_pending(),
        0,
        "the read was sent to the login page twice"
    );
    let command = hub.commands()[0].clone();
    assert_eq!(
        (command.status, command.uncounted_releases),
        (CommandStatus::Failed, 2),
        "given back for the read, then for the POST, failed at the POST again: {command:?}"
    );
    let error = command.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("Unauthorized; scope does not match") && error.contains(&post),
        "{error}"
    );
    let posts = fake
        .requests()
        .iter()
        .filter(|seen| seen.method == "POST" && seen.path == post)
        .count();
    assert_eq!(posts, 2, "one POST in each of the last two deliveries");
    assert_eq!(agent_view(&hub).jira_ok, Some(true));
}

/// A proxy forwards the create and the comment, Jira applies
/// them, and the proxy answers 503 with `Retry-After` (Envoy's `UC`). Each is looked for before
/// anything is sent again: one issue, one comment, each found in its first delivery.
#[test]
fn a_create_and_a_comment_whose_503_followed_an_applied_write_exist_once() {
    for mode in [Mode::DataCenter, Mode::Cloud] {
        let fake = FakeJira::start(mode);
        let key = seed(&fake);
        for endpoint in [Endpoint::CreateIssue, Endpoint::AddComment] {
            fake.fault(endpoint, Fault::ForwardedThen503 { retry_after: 2 }, 1);
        }
        let hub = Hub::start(
            settings(),
            json!([
                {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "За прокси Envoy"}},
                comment(&key, "за прокси")
            ]),
        );
        let config = hub.agent_config(&fake.url(), json!({"search_lag_seconds": 0}));
        let from = hub.clock.monotonic();
        assert!(run_until(&hub, &config, || all_ended(&hub)), "{mode:?}");
        let spent = hub.clock.monotonic() - from;
        assert!(
            spent < Duration::from_secs(60),
            "{mode:?}: {spent:?}: {:?}",
            hub.commands()
        );
        assert_eq!(fake.faults_pending(), 0, "{mode:?}: both 503s were served");
        assert_eq!(fake.creates_of("За прокси Envoy"), 1, "{mode:?}");
        assert_eq!(fake.comments(&key).len(), 1, "{mode:?}");
        let commands = hub.commands();
        assert!(
            commands
                .iter()
                .all(|c| c.status == CommandStatus::Done && c.deliveries == 1),
            "{mode:?}: {commands:?}"
        );
        assert_eq!(commands[0].result.as_ref().unwrap()["created"], true);
    }
}

/// A wrong password on Data Center. The agent sends it at most
/// 3 times in an hour of simulated time (never reaching DC's CAPTCHA after 3 failed logins), the
/// hub shows «Учётные данные отвергнуты, агент ждёт новых» since when, and the right password
/// written to the agent's password file is taken without a restart.
#[test]
fn a_wrong_password_costs_at_most_three_requests_in_an_hour() {
    let fake = FakeJira::start(Mode::DataCenter);
    let key = seed(&fake);
    let secrets = crate::support::TestDir::new();
    let password_file = secrets.path().join("jira-password");
    std::fs::write(&password_file, "wrong\n").unwrap();
    let hub = Hub::start(settings(), json!([comment(&key, "после смены пароля")]));
    let mut config: Value =
        serde_json::from_str(&hub.agent_config(&fake.url(), json!({}))).unwrap();
    config.as_object_mut().unwrap().remove("jira_password");
    config["jira_password_file"] = json!(password_file);
    let config = config.to_string();
    let from = hub.clock.monotonic();
    assert!(run_until(&hub, &config, || {
        hub.clock.monotonic() > from + Duration::from_secs(3600)
            && agent_view(&hub).jira_held.as_deref().is_some_and(|held| {
                held.starts_with("Учётные данные отвергнуты, агент ждёт новых")
                    && held.contains(" с ")
            })
    }));
    // The label is the agent's own class of the refusal: a matter of credentials.
    let metrics = hub.metrics();
    assert!(
        metrics
            .contains("jira_hub_agent_jira_held_seconds{agent=\"agent-1\",reason=\"credentials\"}"),
        "{metrics}"
    );
    let sent = fake.requests().len();
    assert!((1..=3).contains(&sent), "{sent} requests in an hour");
    assert!(fake.failed_logins() < 3, "no CAPTCHA");
    let commands = hub.commands();
    assert_eq!(
        (commands[0].status, commands[0].deliveries),
        (CommandStatus::Queued, 0)
    );
    // A person writes the right password: taken at the next look at the source.
    std::fs::write(&password_file, "secret\n").unwrap();
    assert!(run_until(&hub, &config, || all_ended(&hub)));
    assert_eq!(hub.commands()[0].status, CommandStatus::Done);
    assert_eq!(fake.comments(&key).len(), 1);
    assert_eq!(agent_view(&hub).jira_ok, Some(true));
}

/// A give-back after a call to Jira that sent nothing: the agent ran the command and met a
/// refusal.
fn given_back_uncounted(command_id: i64, delivery: u32) -> Value {
    given_back_after(command_id, delivery, 1, 1)
}

/// `released`, `sent: false`, after `calls` calls to Jira, asking for `grace` seconds.
fn given_back_after(command_id: i64, delivery: u32, calls: u32, grace: u32) -> Value {
    json!([{"command_id": command_id, "delivery": delivery, "status": "released",
            "not_before_seconds": grace, "sent": false, "jira_calls": calls,
            "error": "Jira отказала в доступе к POST /rest/api/2/issue/AURORA-1/comment (HTTP 401)"}])
}

fn one_comment() -> jira_hub::service::BatchRequest {
    crate::support::batch(
        json!({"title": "t", "author": "a", "commands": [comment("AURORA-1", "x")]}),
    )
}

/// Item 1, the hub's side: give-backs with nothing sent spend no delivery, so they have a budget
/// of their own: after `MAX_UNCOUNTED_RELEASES` in a row the command fails with the last reason,
/// and so does one given back uncounted for more than an hour. Both are shown meanwhile.
#[test]
fn uncounted_give_backs_have_a_count_and_an_age() {
    use crate::support::{Agent, clock, ready_hub};
    let dir = crate::support::TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let by_count = hub.enqueue_batch(&one_comment()).unwrap();
    let limit = jira_hub::service::MAX_UNCOUNTED_RELEASES;
    for n in 1..=limit {
        clock.advance(time::Duration::seconds(2));
        let claimed = agent.claim(&mut hub, 10);
        assert_eq!(claimed.commands.len(), 1, "give-back {n}");
        let id = claimed.commands[0].id;
        agent.report(
            &mut hub,
            given_back_uncounted(id, claimed.commands[0].delivery),
        );
        let command = hub.batch(by_count.id).unwrap().commands[0].clone();
        if n < limit {
            assert_eq!(
                (
                    command.status,
                    command.deliveries,
                    command.uncounted_releases
                ),
                (CommandStatus::Queued, 0, n),
                "{command:?}"
            );
            assert!(command.uncounted_since.is_some());
        } else {
            assert_eq!(command.status, CommandStatus::Failed, "{command:?}");
            let error = command.error.unwrap();
            assert!(
                error.starts_with("Jira отказала в доступе") && error.contains("20 раз подряд"),
                "{error}"
            );
        }
    }
    // By age: a slow run, the agent asking for 5 minutes each time and the command handed out
    // again as soon as they pass: the 13th give-back, an hour after the first, fails it.
    let by_age = hub.enqueue_batch(&one_comment()).unwrap();
    for n in 0..13 {
        let claimed = agent.claim(&mut hub, 10);
        assert_eq!(claimed.commands.len(), 1, "give-back {n}");
        let command = &claimed.commands[0];
        agent.report(
            &mut hub,
            given_back_after(command.id, command.delivery, 1, 300),
        );
        clock.advance(time::Duration::seconds(300));
    }
    let command = hub.batch(by_age.id).unwrap().commands[0].clone();
    assert_eq!(command.status, CommandStatus::Failed, "{command:?}");
    assert!(command.error.unwrap().contains("13 раз подряд за 60 мин"));
}

/// Budgets count what they mean, an outage: a claim of five comments, the first of which met
/// Jira's 503, then given back unstarted (no Jira call: the agent held) every three minutes for
/// 90 minutes. The agent recovers; the first command meets one more 503 and then runs: every
/// command is done, none failed. Before, the unstarted give-backs spent the uncounted budget
/// (20 in a row) and the hour ran from the first give-back.
#[test]
fn an_outage_of_ninety_minutes_fails_no_command() {
    use crate::support::{Agent, clock, ready_hub};
    let dir = crate::support::TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let comments: Vec<Value> = (0..5)
        .map(|n| comment("AURORA-1", &format!("x{n}")))
        .collect();
    let batch = hub
        .enqueue_batch(&crate::support::batch(
            json!({"title": "t", "author": "a", "commands": comments}),
        ))
        .unwrap();
    let give_back =
        |agent: &Agent, hub: &mut jira_hub::service::HubConnection, first_calls: u32| {
            let claimed = agent.claim(hub, 10);
            assert_eq!(claimed.commands.len(), 5);
            let results: Vec<Value> = claimed
                .commands
                .iter()
                .enumerate()
                .map(|(n, c)| {
                    let calls = if n == 0 { first_calls } else { 0 };
                    given_back_after(c.id, c.delivery, calls, 10)[0].clone()
                })
                .collect();
            agent.report(hub, Value::Array(results));
        };
    give_back(&agent, &mut hub, 1);
    for _ in 0..30 {
        clock.advance(time::Duration::minutes(3));
        give_back(&agent, &mut hub, 0);
    }
    clock.advance(time::Duration::minutes(3));
    give_back(&agent, &mut hub, 1);
    let first = hub.batch(batch.id).unwrap().commands[0].clone();
    assert_eq!(
        (first.status, first.uncounted_releases),
        (CommandStatus::Queued, 2),
        "{first:?}"
    );
    clock.advance(time::Duration::seconds(11));
    let claimed = agent.claim(&mut hub, 10);
    assert_eq!(claimed.commands.len(), 5);
    let done: Vec<Value> = claimed
        .commands
        .iter()
        .map(|c| {
            json!({"command_id": c.id, "delivery": c.delivery, "status": "done",
                        "result": {"comment_id": c.id.to_string()}, "jira_calls": 1})
        })
        .collect();
    agent.report(&mut hub, Value::Array(done));
    let commands = hub.batch(batch.id).unwrap().commands;
    assert!(
        commands.iter().all(|c| c.status == CommandStatus::Done),
        "{commands:?}"
    );
}

/// The age runs over consecutive give-backs: a command given back after a Jira call, then left
/// in the queue for 90 minutes (no agent claimed: down or held), is given back once more and
/// stays queued; its count goes on (2).
#[test]
fn a_command_left_in_the_queue_starts_its_uncounted_age_afresh() {
    use crate::support::{Agent, clock, ready_hub};
    let dir = crate::support::TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let batch = hub.enqueue_batch(&one_comment()).unwrap();
    for wait in [0, 90 * 60] {
        clock.advance(time::Duration::seconds(wait));
        let claimed = agent.claim(&mut hub, 10);
        let command = &claimed.commands[0];
        agent.report(&mut hub, given_back_uncounted(command.id, command.delivery));
    }
    let command = hub.batch(batch.id).unwrap().commands[0].clone();
    assert_eq!(
        (command.status, command.uncounted_releases),
        (CommandStatus::Queued, 2),
        "{command:?}"
    );
    // The run's age starts at the second give-back, not the first.
    let since = time::OffsetDateTime::parse(
        command.uncounted_since.unwrap().as_str(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert_eq!(since, clock.now());
}

/// The budget in `GET /commands/{id}` and `/metrics`.
#[tokio::test]
async fn uncounted_give_backs_are_shown_in_the_api_and_the_metrics() {
    use crate::support::{Agent, clock, open_hub};
    let api = crate::http::api();
    let clock = clock();
    let mut hub = open_hub(&api.dir, &clock);
    hub.enqueue_batch(&one_comment()).unwrap();
    let agent = Agent::new("agent-1");
    for _ in 0..2 {
        clock.advance(time::Duration::seconds(2));
        let claimed = agent.claim(&mut hub, 10);
        let command = &claimed.commands[0];
        agent.report(&mut hub, given_back_uncounted(command.id, command.delivery));
    }
    let id = hub.batches(None).unwrap()[0].id;
    let command_id = hub.batch(id).unwrap().commands[0].id;
    let (_, view) = api
        .client(
            axum::http::Method::GET,
            &format!("/commands/{command_id}"),
            None,
        )
        .await;
    assert_eq!(view["uncounted_releases"], 2, "{view}");
    assert!(view["uncounted_since"].is_string(), "{view}");
    let (_, _, text) = api.get_accepting("/metrics", None).await;
    assert!(
        text.contains("jira_hub_commands_given_back_uncounted 1")
            && text.contains("jira_hub_uncounted_releases 2")
            && text.contains("jira_hub_oldest_uncounted_release_age_seconds "),
        "{text}"
    );
}

/// Item 3's target: a create whose answer is lost, on Data Center, in a project where the agent
/// made 300 issues of its own minutes before (each marked for another command), costs at most 4
/// Jira calls: the POST, one search newest first from the POST's time, one marker read. Before,
/// the look re-read every candidate's marker from 15 minutes before the batch, oldest first.
#[test]
fn a_lost_create_among_300_own_issues_costs_at_most_four_calls() {
    let fake = FakeJira::start(Mode::DataCenter);
    for n in 0..300 {
        let created = jira_hub::sim::jira::call(
            &fake.url(),
            "POST",
            "/rest/api/2/issue",
            Some(&jira_hub::sim::jira::basic_auth()),
            Some(&json!({
                "fields": {"project": {"key": "AURORA"}, "issuetype": {"name": "Задача"},
                           "summary": format!("Своя {n}")},
                "properties": [{"key": "jira-hub", "value": {"command": 10_000 + n, "batch": 99}}]
            })),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(created.status, 201);
    }
    fake.fault(Endpoint::CreateIssue, Fault::DropAfterApply, 1);
    let hub = Hub::start(
        settings(),
        json!([{"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Потерянный ответ"}}]),
    );
    let config = hub.agent_config(&fake.url(), json!({}));
    let from = hub.clock.monotonic();
    assert!(run_until(&hub, &config, || all_ended(&hub)));
    assert!(hub.clock.monotonic() - from < Duration::from_secs(60));
    let command = &hub.commands()[0];
    assert_eq!(
        (command.status, command.deliveries),
        (CommandStatus::Done, 1),
        "{command:?}"
    );
    assert_eq!(fake.creates_of("Потерянный ответ"), 1);
    assert!(
        command.jira_calls <= 4,
        "{} calls: {:?}",
        command.jira_calls,
        fake.requests()
            .iter()
            .skip(300)
            .map(|s| format!("{} {}", s.method, s.path))
            .collect::<Vec<_>>()
    );
}

/// Item 3: while a lost write is looked for (here a comment whose connection dropped, never
/// applied, looked for through a 30 s grace), the rest of the claim is kept leased with it: the
/// next command is neither lapsed nor given back, and runs in the same claim.
#[test]
fn the_rest_of_a_claim_stays_leased_through_a_long_look() {
    let fake = FakeJira::start(Mode::DataCenter);
    let key = seed(&fake);
    fake.fault(Endpoint::AddComment, Fault::DropBeforeApply, 1);
    let hub = Hub::start(
        settings(),
        json!([
            comment(&key, "потерянный ответ"),
            comment(&key, "следующий")
        ]),
    );
    let config = hub.agent_config(&fake.url(), json!({"release_grace_seconds": 30}));
    assert!(run_until(&hub, &config, || all_ended(&hub)));
    let commands = hub.commands();
    assert_eq!(
        (commands[0].status, commands[0].deliveries),
        (CommandStatus::Done, 2),
        "{commands:?}"
    );
    assert_eq!(
        (
            commands[1].status,
            commands[1].deliveries,
            commands[1].uncounted_releases
        ),
        (CommandStatus::Done, 1, 0),
        "{commands:?}"
    );
    assert_eq!(fake.comments(&key).len(), 2);
}

/// Item 3 of the leftovers: a board read that Jira refuses for
/// credentials on that path alone — Data Center 9.x without Jira Software answers `/rest/agile/…`
/// with a 302 to `login.jsp` although the credentials work; a Cloud token without Jira
/// Software's scopes gets 401 «Unauthorized; scope does not match» there (docs/jira-field-notes.md,
/// "Credentials and scopes") — is about the board, as a 403 for a missing Jira Software licence
/// is: the refresh that read every issue ends `done` with the board as a warning, in one
/// delivery, nothing held. Before, it went back as one path's refusal, read the whole project
/// again, and failed.
#[test]
fn a_board_path_unknown_to_jira_lets_the_refresh_end_done_with_a_warning() {
    for (mode, status, words) in [
        (Mode::DataCenter, "HTTP 302", "login.jsp"),
        (Mode::Cloud, "HTTP 401", "scope does not match"),
    ] {
        let fake = FakeJira::start(mode);
        fake.seed_issues(jira_hub::sim::jira::PROJECT, "AWPCA", 7);
        match mode {
            Mode::DataCenter => fake.without_jira_software(),
            Mode::Cloud => fake.refuse_scope("/rest/agile/"),
        }
        let hub = Hub::start(
            settings(),
            json!([{"type": "refresh", "params": {
                "jql": format!("project = {}", jira_hub::sim::jira::PROJECT), "boards": [77]}}]),
        );
        let config = hub.agent_config(&fake.url(), json!({}));
        assert!(run_until(&hub, &config, || all_ended(&hub)), "{mode:?}");
        let command = hub.commands()[0].clone();
        assert_eq!(
            (
                command.status,
                command.deliveries,
                command.uncounted_releases
            ),
            (CommandStatus::Done, 1, 0),
            "{mode:?}: {command:?}"
        );
        let result = command.result.clone().unwrap_or_default();
        assert_eq!(result["total"], 7, "{mode:?}: {result}");
        let warning = result["warnings"][0].as_str().unwrap_or_default();
        assert!(
            warning.contains("доска 77") && warning.contains(status) && warning.contains(words),
            "{mode:?}: {result}"
        );
        let searches = fake
            .requests()
            .iter()
            .filter(|seen| matches!(seen.endpoint, Endpoint::Search | Endpoint::SearchJql))
            .count();
        assert_eq!(searches, 1, "{mode:?}: the project is read once");
        let agent = agent_view(&hub);
        assert_eq!(
            (agent.jira_ok, agent.jira_held),
            (Some(true), None),
            "{mode:?}"
        );
    }
}
