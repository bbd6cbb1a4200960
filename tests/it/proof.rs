//! A lapsed command is confirmed by proof, never by likeness. A
//! create or a comment goes back to the queue (its next delivery reads its marker in Jira); a
//! transition is confirmed only by status id from a refresh that read Jira after the delivery; a
//! command given back in a cancelled batch is not handed out again and shows the marker to look
//! for; a command given back holds the later commands of its batch. Time moves on a `ManualClock`.

use crate::support::*;
use jira_hub::domain::command::CommandStatus;
use jira_hub::service::HubConnection;
use serde_json::{Value, json};
use time::Duration;

/// One refresh through the protocol, its pages `issues`, ended `done`.
fn refresh(hub: &mut HubConnection, agent: &Agent, issues: Vec<Value>) {
    hub.enqueue_refresh(None, "ivanov").unwrap();
    let claim = agent.claim(hub, 1);
    let command = &claim.commands[0];
    assert_eq!(command.command_type, "refresh");
    let total = issues.len();
    let answer = agent.report(
        hub,
        json!([{"command_id": command.id, "delivery": command.delivery, "status": "done",
                "page": {"start_at": 0, "total": total, "issues": issues},
                "result": {"total": total, "boards": []}}]),
    );
    assert_eq!(answer.accepted, [command.id], "{answer:?}");
}

fn start(
    settings: Value,
) -> (
    TestDir,
    std::sync::Arc<jira_hub::clock::ManualClock>,
    HubConnection,
) {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, settings);
    (dir, clock, hub)
}

fn statuses(hub: &mut HubConnection, batch: i64) -> Vec<CommandStatus> {
    hub.batch(batch)
        .unwrap()
        .commands
        .iter()
        .map(|c| c.status)
        .collect()
}

/// Twin creates, a refresh in between: the first is done as AURORA-10 and mirrored; the second's
/// lease lapses. It is not confirmed with AURORA-10 (which looks exactly like what it was to
/// make): it goes back to the queue, and ends with its own key.
#[test]
fn twin_creates_with_a_refresh_in_between_each_end_with_their_own_key() {
    let (_dir, clock, mut hub) = start(json!({"pacing": {"claim_timeout_seconds": 60}}));
    let agent = Agent::new("agent-1");
    let twin = json!({"type": "ensure_issue",
        "params": {"issue_type": "task", "summary": "Близнец", "labels": ["AWPCA"]}});
    let work = hub
        .enqueue_batch(&batch(
            json!({"title": "t", "author": "a", "commands": [twin, twin]}),
        ))
        .unwrap();
    let claim = agent.claim(&mut hub, 10);
    assert_eq!(claim.commands.len(), 2);
    let (first, second) = (claim.commands[0].id, claim.commands[1].id);
    agent.report(
        &mut hub,
        json!([{"command_id": first, "delivery": 1, "status": "done",
                "result": {"key": "AURORA-10", "created": true}}]),
    );
    clock.advance(Duration::seconds(20));
    refresh(
        &mut hub,
        &agent,
        vec![raw_issue(
            "AURORA-10",
            "10",
            &["AWPCA"],
            json!({"summary": "Близнец", "created": "2026-11-29T13:00:05.000+0300"}),
        )],
    );
    clock.advance(Duration::seconds(41));
    let expired = hub.expire_claims().unwrap();
    assert_eq!(
        (expired.confirmed_by_state, expired.requeued),
        (0, 1),
        "{expired:?}"
    );
    let again = agent.claim(&mut hub, 10);
    assert_eq!(again.commands.len(), 1);
    assert_eq!(
        (again.commands[0].id, again.commands[0].delivery),
        (second, 2)
    );
    agent.report(
        &mut hub,
        json!([{"command_id": second, "delivery": 2, "status": "done",
                "result": {"key": "AURORA-11", "created": true}}]),
    );
    let view = hub.batch(work.id).unwrap();
    let keys: Vec<Value> = view
        .commands
        .iter()
        .map(|c| c.result.as_ref().unwrap()["key"].clone())
        .collect();
    assert_eq!(keys, [json!("AURORA-10"), json!("AURORA-11")]);
}

/// A recurring comment: the mirror holds a week-old comment with the same text. A new comment
/// whose lease lapses is not confirmed by it.
#[test]
fn an_old_look_alike_comment_does_not_confirm_a_new_one() {
    let (_dir, clock, mut hub) = start(json!({"pacing": {"claim_timeout_seconds": 60}}));
    let agent = Agent::new("agent-1");
    let text = "Перенесено в следующий спринт";
    refresh(
        &mut hub,
        &agent,
        vec![raw_issue(
            "AURORA-1",
            "1",
            &["AWPCA"],
            json!({"comment": {"comments": [{"id": "5", "body": text,
                "created": "2026-11-22T10:00:00.000+0300"}]}}),
        )],
    );
    let work = hub
        .enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
            {"type": "comment", "params": {"key": "AURORA-1", "body": text}}]})))
        .unwrap();
    assert_eq!(agent.claim(&mut hub, 10).commands.len(), 1);
    clock.advance(Duration::seconds(20));
    // A refresh after the delivery still shows only the old comment.
    refresh(
        &mut hub,
        &agent,
        vec![raw_issue(
            "AURORA-1",
            "1",
            &["AWPCA"],
            json!({"comment": {"comments": [{"id": "5", "body": text,
                "created": "2026-11-22T10:00:00.000+0300"}]}}),
        )],
    );
    clock.advance(Duration::seconds(41));
    let expired = hub.expire_claims().unwrap();
    assert_eq!(expired.confirmed_by_state, 0, "{expired:?}");
    assert_eq!(statuses(&mut hub, work.id), [CommandStatus::Queued]);
    let again = agent.claim(&mut hub, 10);
    assert_eq!(again.commands[0].delivery, 2, "its next delivery decides");
}

/// A transition is confirmed only by status id, from a refresh that read Jira after the command
/// was handed out: a mirror read before (however it looks), or a status of the same name and
/// another id, proves nothing.
#[test]
fn a_transition_is_not_confirmed_by_a_stale_mirror() {
    let (_dir, clock, mut hub) = start(json!({"pacing": {"claim_timeout_seconds": 60},
        "transitions_map": {"Готово": {"status_id": "10001"}}}));
    let agent = Agent::new("agent-1");
    let done = |id: &str| {
        vec![raw_issue(
            "AURORA-1",
            "1",
            &["AWPCA"],
            json!({"status": {"id": id, "name": "Готово"}}),
        )]
    };
    // The mirror already shows the target status, read before the command is handed out.
    refresh(&mut hub, &agent, done("10001"));
    clock.advance(Duration::seconds(1));
    let work = hub
        .enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
            {"type": "transition", "params": {"key": "AURORA-1", "status": "Готово"}}]})))
        .unwrap();
    assert_eq!(agent.claim(&mut hub, 10).commands.len(), 1);
    clock.advance(Duration::seconds(61));
    let expired = hub.expire_claims().unwrap();
    assert_eq!((expired.confirmed_by_state, expired.requeued), (0, 1));

    // Delivered again; a refresh after it shows a status of that name but another id.
    clock.advance(Duration::seconds(1));
    assert_eq!(agent.claim(&mut hub, 10).commands[0].delivery, 2);
    clock.advance(Duration::seconds(5));
    refresh(&mut hub, &agent, done("10099"));
    clock.advance(Duration::seconds(61));
    let expired = hub.expire_claims().unwrap();
    assert_eq!((expired.confirmed_by_state, expired.requeued), (0, 1));

    // Delivered a third time; a refresh after it shows the target's id: confirmed.
    clock.advance(Duration::seconds(1));
    assert_eq!(agent.claim(&mut hub, 10).commands[0].delivery, 3);
    clock.advance(Duration::seconds(5));
    refresh(&mut hub, &agent, done("10001"));
    clock.advance(Duration::seconds(61));
    let expired = hub.expire_claims().unwrap();
    assert_eq!(expired.confirmed_by_state, 1, "{expired:?}");
    let view = hub.batch(work.id).unwrap();
    assert_eq!(view.commands[0].status, CommandStatus::ConfirmedByState);
    assert_eq!(view.commands[0].result, Some(json!({"status": "Готово"})));
}

/// A command given back (`released`) after its batch was cancelled is not handed out again, and
/// a create that may exist in Jira shows the marker to look for.
#[test]
fn a_released_command_of_a_cancelled_batch_is_not_delivered_again_and_is_flagged() {
    let (dir, clock, mut hub) = start(json!({"pacing": {"claim_timeout_seconds": 600}}));
    let agent = Agent::new("agent-1");
    let work = hub
        .enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
            {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Одна"}},
            {"type": "transition", "params": {"key": "AURORA-1", "status": "Готово"}}]})))
        .unwrap();
    let claim = agent.claim(&mut hub, 1);
    let id = claim.commands[0].id;
    hub.cancel_batch(work.id).unwrap();
    let answer = agent.report(
        &mut hub,
        json!([{"command_id": id, "delivery": 1, "status": "released", "not_before_seconds": 30,
                "error": "ответ Jira на запись потерян (HTTP 504)"}]),
    );
    assert_eq!(answer.accepted, [id], "{answer:?}");
    clock.advance(Duration::seconds(31));
    assert!(agent.claim(&mut hub, 10).commands.is_empty());
    let view = hub.batch(work.id).unwrap();
    assert_eq!(view.commands[0].status, CommandStatus::Cancelled);
    assert_eq!(
        view.commands[0].may_exist_in_jira,
        Some(json!({"property": "jira-hub", "command": id, "batch": work.id}))
    );
    assert_eq!(
        view.commands[1].may_exist_in_jira, None,
        "never handed out: nothing of it in Jira"
    );
    // The HTTP/JSON view carries it, and so does `batches show`.
    let text = serde_json::to_value(&view).unwrap();
    assert_eq!(text["commands"][0]["may_exist_in_jira"]["command"], id);
    drop(hub);
    let shown = run_ok(&dir.db(), &["batches", "show", &work.id.to_string()]).stdout;
    assert!(
        shown.contains("may exist in Jira: look for the entity property jira-hub")
            && shown.contains(&format!("\"command\":{id}")),
        "{shown}"
    );
}

/// A command given back waits out its grace, and the later commands of its batch wait with it:
/// they never overtake it (other batches go on).
#[test]
fn a_released_command_is_not_overtaken_by_the_rest_of_its_batch() {
    let (_dir, clock, mut hub) = start(json!({"pacing": {"claim_timeout_seconds": 600}}));
    let agent = Agent::new("agent-1");
    let work = hub
        .enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
            {"type": "comment", "params": {"key": "AURORA-1", "body": "первый"}},
            {"type": "comment", "params": {"key": "AURORA-1", "body": "второй"}}]})))
        .unwrap();
    let other = hub
        .enqueue_batch(&batch(json!({"title": "t2", "author": "a", "commands": [
            {"type": "comment", "params": {"key": "AURORA-2", "body": "другой"}}]})))
        .unwrap();
    let first = agent.claim(&mut hub, 1).commands[0].id;
    agent.report(
        &mut hub,
        json!([{"command_id": first, "delivery": 1, "status": "released", "not_before_seconds": 60,
                "error": "ответ Jira на запись потерян (HTTP 504)"}]),
    );
    let claim = agent.claim(&mut hub, 10);
    let batches: Vec<i64> = claim.commands.iter().map(|c| c.batch_id).collect();
    assert_eq!(
        batches,
        [other.id],
        "the second comment waits for the first"
    );
    clock.advance(Duration::seconds(61));
    let claim = agent.claim(&mut hub, 10);
    let seqs: Vec<(i64, i64)> = claim.commands.iter().map(|c| (c.batch_id, c.seq)).collect();
    assert_eq!(seqs, [(work.id, 1), (work.id, 2)]);
}

/// An agent's `not_before` is capped per type at the hub: a refresh never waits
/// longer than the claim timeout (it writes nothing); a write may wait up to the protocol's
/// maximum.
#[test]
fn not_before_is_capped_per_type() {
    let (_dir, _clock, mut hub) = start(json!({"pacing": {"claim_timeout_seconds": 120}}));
    let agent = Agent::new("agent-1");
    let refresh_batch = hub.enqueue_refresh(None, "ivanov").unwrap();
    let write = hub
        .enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
            {"type": "comment", "params": {"key": "AURORA-1", "body": "текст"}}]})))
        .unwrap();
    let claim = agent.claim(&mut hub, 10);
    assert_eq!(claim.commands.len(), 2);
    let results: Vec<Value> = claim
        .commands
        .iter()
        .map(|c| {
            json!({"command_id": c.id, "delivery": 1, "status": "released",
                   "not_before_seconds": 3600, "error": "Jira недоступна"})
        })
        .collect();
    agent.report(&mut hub, Value::Array(results));
    let not_before = |hub: &mut HubConnection, batch: i64| {
        hub.batch(batch).unwrap().commands[0]
            .not_before
            .clone()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        not_before(&mut hub, refresh_batch.id),
        "2026-11-29T10:02:00.000000Z",
        "the claim timeout (120 s)"
    );
    assert_eq!(
        not_before(&mut hub, write.id),
        "2026-11-29T11:00:00.000000Z",
        "an hour"
    );
}

/// The lost-answer and 503 scenarios, on both deployments: the real
/// agent loop against the simulated Jira and the hub, on one `ManualClock` (the elapsed time
/// asserted is the clock's: the agent's waits move it, no wall time passes).
mod scenarios {
    use crate::agent_waits::{Hub, run_agent};
    use jira_hub::clock::Clock;
    use jira_hub::domain::command::{CommandStatus, CommandType};
    use jira_hub::sim::jira::{
        Change, Endpoint, FakeJira, Fault, Language, Mode, PROJECT, SummaryRewrite,
    };
    use serde_json::json;
    use std::time::Duration;

    const SETTINGS: fn() -> serde_json::Value = || {
        json!({"pacing": {"min_interval_ms": 0},
               "transitions_map": {"В работе": "11", "Готово": "21", "Снято": "31"}})
    };

    /// Two identical creates whose answers are lost (the connection cut after Jira made each),
    /// and a comment whose answer is lost too: each is found by its marker at the agent's first
    /// look, within seconds of the clock; each ends `done` with its own issue or comment, in one
    /// delivery.
    fn identical_lost_creates(mode: Mode) {
        let fake = FakeJira::start(mode);
        let key = fake.seed_issue(
            PROJECT,
            json!({"summary": "Задача", "issuetype": {"id": "10002", "name": "Задача"}, "labels": ["AWPCA"]}),
        );
        let twin = json!({"type": "ensure_issue",
            "params": {"issue_type": "task", "summary": "Потерянный ответ", "labels": ["AWPCA"]}});
        let comment = json!({"type": "comment", "params": {"key": key,
                "body": "потерянный *ответ*  \n\n\n* пункт\n[ссылка|https://example.org]"}});
        // On Cloud the body comes back through wiki -> ADF -> wiki, changed beyond whitespace:
        // the marker, not the text, recognises it.
        fake.set_markup_round_trip(true);
        let hub = Hub::start(SETTINGS(), json!([twin, twin, comment]));
        fake.fault(Endpoint::CreateIssue, Fault::DropAfterApply, 2);
        fake.fault(Endpoint::AddComment, Fault::DropAfterApply, 1);
        let started = hub.clock.monotonic();
        run_agent(&hub, &hub.agent_config(&fake.url(), json!({})), None, 1);
        let elapsed = hub.clock.monotonic() - started;
        assert!(elapsed < Duration::from_secs(60), "{mode:?}: {elapsed:?}");
        let commands = hub.commands();
        let mut keys = Vec::new();
        for command in &commands {
            assert_eq!(command.status, CommandStatus::Done, "{mode:?}: {command:?}");
            assert_eq!(command.deliveries, 1, "{mode:?}: {command:?}");
            keys.push(command.result.as_ref().unwrap()["key"].clone());
        }
        assert_ne!(keys[0], keys[1], "{mode:?}: each its own issue");
        assert_eq!(fake.comments(&key).len(), 1, "{mode:?}: the comment once");
        let mut made = fake.keys_with_summary("Потерянный ответ");
        made.sort();
        assert_eq!(made.len(), 2, "{mode:?}: each effect once: {made:?}");
    }

    #[test]
    fn identical_creates_whose_answers_are_lost_end_within_a_minute_on_data_center() {
        identical_lost_creates(Mode::DataCenter);
    }

    #[test]
    fn identical_creates_whose_answers_are_lost_end_within_a_minute_on_cloud() {
        identical_lost_creates(Mode::Cloud);
    }

    /// A create, a transition and a comment, each answered 503 with `Retry-After: 3` once,
    /// nothing applied: a 503 is not proof of that, and what a look does not
    /// find is no proof of the opposite (a search may lag): none is sent again in its delivery.
    /// Each goes back to the hub, and its next delivery looks (the create's check, the comment
    /// list, the status) before it writes. Each lands once, within a minute.
    fn writes_answered_503_once(mode: Mode) {
        let fake = FakeJira::start(mode);
        let key = fake.seed_issue(
            PROJECT,
            json!({"summary": "Задача", "issuetype": {"id": "10002", "name": "Задача"}, "labels": ["AWPCA"]}),
        );
        let hub = Hub::start(
            SETTINGS(),
            json!([
                {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "  После 503 ", "labels": ["AWPCA"]}},
                {"type": "transition", "params": {"key": key, "status": "В работе"}},
                {"type": "comment", "params": {"key": key, "body": "после 503"}}
            ]),
        );
        for endpoint in [
            Endpoint::CreateIssue,
            Endpoint::DoTransition,
            Endpoint::AddComment,
        ] {
            fake.fault(endpoint, Fault::UnavailableFor(3), 1);
        }
        let started = hub.clock.monotonic();
        let config = hub.agent_config(
            &fake.url(),
            json!({"release_grace_seconds": 5, "search_lag_seconds": 0}),
        );
        assert!(
            crate::classify::run_until(&hub, &config, || crate::classify::all_ended(&hub)),
            "{mode:?}: {:?}",
            hub.commands()
        );
        let elapsed = hub.clock.monotonic() - started;
        assert!(
            elapsed >= Duration::from_secs(6) && elapsed < Duration::from_secs(60),
            "{mode:?}: waits of 3 s, one short grace: {elapsed:?}"
        );
        for command in hub.commands() {
            assert_eq!(command.status, CommandStatus::Done, "{mode:?}: {command:?}");
            assert_eq!(command.deliveries, 2, "{mode:?}: {command:?}");
        }
        // Sent trimmed (Jira stores the summary as sent).
        assert_eq!(fake.keys_with_summary("После 503").len(), 1, "{mode:?}");
        assert_eq!(
            fake.status_of(&key).as_deref(),
            Some("В работе"),
            "{mode:?}"
        );
        assert_eq!(fake.comments(&key).len(), 1, "{mode:?}");
    }

    #[test]
    fn writes_answered_503_with_retry_after_once_on_data_center() {
        writes_answered_503_once(Mode::DataCenter);
    }

    #[test]
    fn writes_answered_503_with_retry_after_once_on_cloud() {
        writes_answered_503_once(Mode::Cloud);
    }

    /// Data Center's paging by key, a query spanning projects (a label on issues of
    /// three projects). A project whose last page is full is followed by an empty page after
    /// `key > "P-n"`: that ends the project, not the search, and every project is read.
    #[test]
    fn a_label_spanning_projects_is_read_whole_on_data_center() {
        let fake = FakeJira::start(Mode::DataCenter);
        let mut seeded = fake.seed_issues(PROJECT, "AWPCA", 4);
        seeded.extend(fake.seed_issues("BOREAS", "AWPCA", 3));
        seeded.extend(fake.seed_issues("CETUS", "AWPCA", 1));
        fake.seed_issues("DRACO", "OTHER", 2);
        let hub = Hub::start(
            SETTINGS(),
            json!([{"type": "refresh", "params": {"jql": "labels = AWPCA"}}]),
        );
        run_agent(
            &hub,
            &hub.agent_config(&fake.url(), json!({"page_size": 2})),
            None,
            1,
        );
        let commands = hub.commands();
        assert_eq!(commands[0].status, CommandStatus::Done, "{commands:?}");
        let mut mirrored: Vec<String> = hub
            .read()
            .project_issues_since("AWPCA", None)
            .unwrap()
            .into_iter()
            .map(|row| row.issue.key)
            .collect();
        mirrored.sort();
        seeded.sort();
        assert_eq!(mirrored, seeded);
    }

    /// Twin creates with a refresh in between, the real agent: the first lands and a refresh
    /// mirrors it; the second's delivery lapses (its agent vanished); its next delivery reads the
    /// markers in Jira, sees the first's issue marked for the other command, and makes its own.
    #[test]
    fn twin_creates_with_a_refresh_in_between_each_end_with_their_own_key() {
        let fake = FakeJira::start(Mode::DataCenter);
        let twin = json!({"type": "ensure_issue",
            "params": {"issue_type": "task", "summary": "Близнец", "labels": ["AWPCA"]}});
        let mut settings = SETTINGS();
        settings["pacing"]["max_commands_per_claim"] = json!(1);
        settings["pacing"]["claim_timeout_seconds"] = json!(60);
        let hub = Hub::start(settings, json!([twin, twin]));
        let config = hub.agent_config(&fake.url(), json!({}));
        run_agent(&hub, &config, None, 1);
        // An agent that takes the second and is never heard of again.
        let mut ghost_hub = hub.read();
        let ghost = crate::support::Agent::new("ghost");
        assert_eq!(ghost.claim(&mut ghost_hub, 1).commands.len(), 1);
        ghost_hub.enqueue_refresh(None, "ivanov").unwrap();
        run_agent(&hub, &config, None, 1);
        assert!(
            hub.commands()
                .iter()
                .any(|c| c.command_type == CommandType::Refresh && c.status == CommandStatus::Done)
        );
        hub.clock.advance(time::Duration::seconds(61));
        run_agent(&hub, &config, None, 1);
        let creates: Vec<_> = hub
            .commands()
            .into_iter()
            .filter(|c| c.command_type == CommandType::EnsureIssue)
            .collect();
        let keys: Vec<String> = creates
            .iter()
            .map(|c| {
                assert_eq!(c.status, CommandStatus::Done, "{c:?}");
                c.result.as_ref().unwrap()["key"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(creates[1].deliveries, 2);
        assert_ne!(keys[0], keys[1]);
        let mut made = fake.keys_with_summary("Близнец");
        made.sort();
        let mut keys = keys.clone();
        keys.sort();
        assert_eq!(made, keys, "each effect once");
    }

    /// Data Center paging by key when Jira speaks Russian: the page's last issue
    /// deleted and the last issue moved away mid-run are recovered from by reading the key (the
    /// refusals' words are Russian), and every issue is read once.
    #[test]
    fn data_center_paging_recovers_from_stale_keys_in_russian() {
        let fake = FakeJira::start(Mode::DataCenter);
        fake.set_language(Language::Russian);
        fake.seed_issues(PROJECT, "AWPCA", 12);
        fake.after_search(3, Change::Delete("AURORA-9".into()));
        fake.after_search(4, Change::Move("AURORA-12".into(), "OTHER".into()));
        let hub = Hub::start(
            SETTINGS(),
            json!([{"type": "refresh", "params": {"jql": "project = AURORA"}}]),
        );
        run_agent(
            &hub,
            &hub.agent_config(&fake.url(), json!({"page_size": 3})),
            None,
            1,
        );
        let commands = hub.commands();
        assert_eq!(commands[0].status, CommandStatus::Done, "{commands:?}");
        // The deleted key is read; the moved one no longer needs to be: once the page with it
        // brought the first page's `total`, the search ends.
        assert!(fake.calls(Endpoint::GetIssue) >= 1, "the gone key was read");
        let mut mirrored: Vec<String> = hub
            .read()
            .project_issues_since("AWPCA", None)
            .unwrap()
            .into_iter()
            .map(|row| row.issue.key)
            .collect();
        mirrored.sort_by_key(|k| k[7..].parse::<u32>().unwrap_or(0));
        let expected: Vec<String> = (1..=12).map(|n| format!("AURORA-{n}")).collect();
        assert_eq!(mirrored, expected, "every issue the pages returned, once");
    }

    /// An Automation rule rewrites summaries on create; a create whose answer is
    /// lost is found by its marker all the same (Cloud: from the search answer's `properties`,
    /// no property read), and a twin's issue marked for the other command is never taken.
    fn lost_creates_under_a_rewriting_rule(mode: Mode) {
        let fake = FakeJira::start(mode);
        fake.rewrite_summaries_on_create(Some(SummaryRewrite::Prefix("[AUTO] ".into())));
        let twin = json!({"type": "ensure_issue",
            "params": {"issue_type": "task", "summary": "Переписанная", "labels": ["AWPCA"]}});
        let hub = Hub::start(SETTINGS(), json!([twin, twin]));
        fake.fault(Endpoint::CreateIssue, Fault::DropAfterApply, 2);
        let started = hub.clock.monotonic();
        run_agent(&hub, &hub.agent_config(&fake.url(), json!({})), None, 1);
        assert!(hub.clock.monotonic() - started < Duration::from_secs(60));
        let keys: Vec<String> = hub
            .commands()
            .iter()
            .map(|c| {
                assert_eq!(c.status, CommandStatus::Done, "{mode:?}: {c:?}");
                assert_eq!(c.deliveries, 1, "{mode:?}: {c:?}");
                c.result.as_ref().unwrap()["key"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_ne!(keys[0], keys[1], "{mode:?}");
        assert_eq!(
            fake.keys_with_summary("[AUTO] Переписанная").len(),
            2,
            "{mode:?}: each once"
        );
        if mode == Mode::Cloud {
            assert_eq!(
                fake.calls(Endpoint::GetIssueProperty),
                0,
                "Cloud's search brings the markers"
            );
        } else {
            assert!(fake.calls(Endpoint::GetIssueProperty) > 0);
        }
    }

    #[test]
    fn lost_creates_under_a_rewriting_rule_on_data_center() {
        lost_creates_under_a_rewriting_rule(Mode::DataCenter);
    }

    #[test]
    fn lost_creates_under_a_rewriting_rule_on_cloud() {
        lost_creates_under_a_rewriting_rule(Mode::Cloud);
    }
}

/// An edit and a link are confirmed from the mirror only by a refresh that read
/// Jira after the command was handed out, like a transition: a mirror read before shows what may
/// be someone else's doing (or this command's earlier, unconfirmed delivery), and proves nothing.
#[test]
fn an_edit_and_a_link_are_not_confirmed_by_a_stale_mirror() {
    let (_dir, clock, mut hub) = start(json!({"pacing": {"claim_timeout_seconds": 60}}));
    let agent = Agent::new("agent-1");
    let mirrored = || {
        vec![
            raw_issue(
                "AURORA-1",
                "1",
                &["AWPCA"],
                json!({"summary": "Новое имя", "issuelinks": [
                    {"id": "5", "type": {"name": "Blocks"}, "outwardIssue": {"key": "AURORA-2"}}]}),
            ),
            // Jira shows a link on both of its issues.
            raw_issue(
                "AURORA-2",
                "2",
                &["AWPCA"],
                json!({"issuelinks": [
                    {"id": "5", "type": {"name": "Blocks"}, "inwardIssue": {"key": "AURORA-1"}}]}),
            ),
        ]
    };
    // The mirror already shows both, read before the commands are handed out.
    refresh(&mut hub, &agent, mirrored());
    clock.advance(Duration::seconds(1));
    let work = hub
        .enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
            {"type": "ensure_issue", "params": {"key": "AURORA-1", "issue_type": "task", "summary": "Новое имя"}},
            {"type": "link", "params": {"from": "AURORA-1", "to": "AURORA-2", "type": "blocks"}}]})))
        .unwrap();
    assert_eq!(agent.claim(&mut hub, 10).commands.len(), 2);
    clock.advance(Duration::seconds(61));
    let expired = hub.expire_claims().unwrap();
    assert_eq!(
        (expired.confirmed_by_state, expired.requeued),
        (0, 2),
        "a stale mirror confirms nothing"
    );
    // Delivered again; a refresh after it shows the same: both confirmed.
    clock.advance(Duration::seconds(1));
    assert_eq!(agent.claim(&mut hub, 10).commands.len(), 2);
    clock.advance(Duration::seconds(5));
    refresh(&mut hub, &agent, mirrored());
    clock.advance(Duration::seconds(61));
    let expired = hub.expire_claims().unwrap();
    assert_eq!(
        expired.confirmed_by_state,
        2,
        "{expired:?} {:?}",
        hub.batch(work.id).unwrap().commands
    );
    assert_eq!(
        statuses(&mut hub, work.id),
        [
            CommandStatus::ConfirmedByState,
            CommandStatus::ConfirmedByState
        ]
    );
}
