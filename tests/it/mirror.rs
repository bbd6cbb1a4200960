//! Refreshes and the mirror (system.md §4), slices (data-model «Свои и соседи»), confirmation of
//! timed-out commands from the mirror, automatic refresh.

use crate::support::*;
use jira_hub::domain::command::CommandStatus;
use jira_hub::service::{HubConnection, ServiceError};
use serde_json::{Value, json};

/// Runs one refresh through the protocol: claim, the pages, done.
fn refresh(
    hub: &mut HubConnection,
    agent: &Agent,
    project: Option<&str>,
    pages: &[Vec<Value>],
    boards: Value,
) -> i64 {
    let batch = hub.enqueue_refresh(project, "ivanov").unwrap();
    let claim = agent.claim(hub, 1);
    let command = &claim.commands[0];
    assert_eq!(command.batch_id, batch.id);
    let total: usize = pages.iter().map(Vec::len).sum();
    let mut start = 0;
    for page in pages {
        let answer = agent.report(
            hub,
            json!([{"command_id": command.id, "delivery": command.delivery, "status": "progress",
            "page": {"start_at": start, "total": total, "issues": page}}]),
        );
        assert_eq!(answer.accepted, [command.id], "{answer:?}");
        start += page.len();
    }
    let answer = agent.report(
        hub,
        json!([{"command_id": command.id, "delivery": command.delivery, "status": "done",
        "result": {"total": total, "boards": boards}, "jira_calls": pages.len() + 1}]),
    );
    assert_eq!(answer.accepted, [command.id]);
    command.id
}

fn keys(rows: &[jira_hub::service::SliceRow]) -> Vec<(String, bool)> {
    rows.iter()
        .map(|r| (r.issue.key.clone(), r.neighbor))
        .collect()
}

/// «Свои и соседи».
#[test]
fn own_issues_and_neighbours() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    hub.create_project("STOCKS_DRRK", "Склады", None).unwrap();
    let agent = Agent::new("agent-1");
    let link = |id: &str, outward: &str| json!([{"id": id, "type": {"name": "Blocks"}, "outwardIssue": {"key": outward}}]);
    let inward = |id: &str, from: &str| json!([{"id": id, "type": {"name": "Blocks"}, "inwardIssue": {"key": from}}]);
    let issues = vec![
        raw_issue(
            "AURORA-1",
            "1",
            &["STOCKS_DRRK"],
            json!({"customfield_10101": "AURORA-9", "issuelinks": link("500", "AURORA-2")}),
        ),
        raw_issue(
            "AURORA-2",
            "2",
            &["AWPCA"],
            json!({"issuelinks": inward("500", "AURORA-1")}),
        ),
        raw_issue("AURORA-3", "3", &["AWPCA"], json!({})),
        raw_issue(
            "AURORA-9",
            "9",
            &["AWPCA"],
            json!({"issuetype": {"name": "Эпик"}}),
        ),
    ];
    refresh(&mut hub, &agent, None, &[issues], json!([]));
    let slice = hub.project_issues("STOCKS_DRRK").unwrap();
    assert_eq!(
        keys(&slice),
        [
            ("AURORA-1".to_string(), false),
            ("AURORA-2".to_string(), true),
            ("AURORA-9".to_string(), true)
        ]
    );
    let awpca = hub.project_issues("AWPCA").unwrap();
    assert_eq!(
        keys(&awpca),
        [
            ("AURORA-2".into(), false),
            ("AURORA-3".into(), false),
            ("AURORA-9".into(), false),
            ("AURORA-1".into(), true)
        ],
        "the flag is relative to the project asked for"
    );
    assert!(matches!(
        hub.project_issues("NOPE"),
        Err(ServiceError::NotFound(_))
    ));

    // The link, carried by both issues, is stored once.
    let issue = hub.issue("AURORA-1").unwrap();
    assert_eq!(issue.links.len(), 1);
    assert_eq!(
        (issue.links[0].direction, issue.links[0].other_key.as_str()),
        ("outward", "AURORA-2")
    );
    assert_eq!(hub.issue("AURORA-2").unwrap().links[0].direction, "inward");
}

#[test]
fn a_full_refresh_removes_what_left_but_keeps_notes() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let one = raw_issue(
        "AURORA-1",
        "1",
        &["AWPCA"],
        json!({"comment": {"comments": [{"id": "71", "body": "первый", "created": "2026-03-05T10:15:30.000+0300"}]}}),
    );
    let two = raw_issue(
        "AURORA-2",
        "2",
        &["AWPCA"],
        json!({"issuelinks": [{"id": "9", "type": {"name": "Blocks"}, "outwardIssue": {"key": "AURORA-1"}}]}),
    );
    refresh(
        &mut hub,
        &agent,
        None,
        &[vec![one.clone()], vec![two.clone()]],
        json!([{"id": 4216, "type": "scrum"}]),
    );
    assert_eq!(
        hub.projects().unwrap()[0].board_type.as_deref(),
        Some("scrum"),
        "board type learned from the refresh"
    );
    let note = hub.add_note("AURORA-2", "ivanov", "не забыть").unwrap();
    assert_eq!(
        hub.issue("AURORA-1").unwrap().comments[0]
            .created
            .as_deref(),
        Some("2026-03-05T10:15:30.000+0300")
    );

    clock.advance(time::Duration::minutes(5));
    refresh(&mut hub, &agent, None, &[vec![one.clone()]], json!([]));
    assert!(
        matches!(hub.issue("AURORA-2"), Err(ServiceError::NotFound(_))),
        "left the scope"
    );
    assert!(
        hub.issue("AURORA-1").unwrap().links.is_empty(),
        "its links went with it"
    );
    let runs = hub.sync_runs().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(
        runs.iter()
            .all(|r| r.full && r.run.status == jira_hub::domain::command::RunStatus::Done),
        "{runs:?}"
    );
    assert_eq!(runs[0].run.issues_seen, 1);

    clock.advance(time::Duration::minutes(5));
    refresh(&mut hub, &agent, None, &[vec![one, two]], json!([]));
    let back = hub.issue("AURORA-2").unwrap();
    assert_eq!(
        back.notes,
        [note],
        "the note shows again when the issue comes back"
    );
}

#[test]
fn a_project_refresh_is_not_full_and_removes_nothing() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    hub.create_project("STOCKS_DRRK", "Склады", Some(77))
        .unwrap();
    let agent = Agent::new("agent-1");
    refresh(
        &mut hub,
        &agent,
        None,
        &[vec![raw_issue("AURORA-1", "1", &["AWPCA"], json!({}))]],
        json!([]),
    );
    clock.advance(time::Duration::minutes(1));
    let batch = hub.enqueue_refresh(Some("STOCKS_DRRK"), "ivanov").unwrap();
    assert_eq!(
        batch.commands[0].params,
        json!({"jql": "project = AURORA AND labels in (\"STOCKS_DRRK\")", "boards": [77]})
    );
    let claim = agent.claim(&mut hub, 1);
    agent.report(&mut hub, json!([{"command_id": claim.commands[0].id, "delivery": 1, "status": "done", "result": {"total": 0, "boards": [{"id": 77, "type": "kanban"}]}}]));
    assert!(hub.issue("AURORA-1").is_ok());
    let runs = hub.sync_runs().unwrap();
    assert!(!runs[0].full && runs[1].full);
    assert_eq!(
        hub.projects().unwrap()[1].board_type.as_deref(),
        Some("kanban")
    );
}

#[test]
fn a_moved_issue_keeps_its_notes() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    refresh(
        &mut hub,
        &agent,
        None,
        &[vec![raw_issue("AURORA-1", "10001", &["AWPCA"], json!({}))]],
        json!([]),
    );
    hub.add_note("AURORA-1", "ivanov", "заметка").unwrap();
    clock.advance(time::Duration::minutes(1));
    refresh(
        &mut hub,
        &agent,
        None,
        &[vec![raw_issue("AURORA-77", "10001", &["AWPCA"], json!({}))]],
        json!([]),
    );
    assert!(matches!(
        hub.issue("AURORA-1"),
        Err(ServiceError::NotFound(_))
    ));
    let moved = hub.issue("AURORA-77").unwrap();
    assert_eq!(moved.notes.len(), 1);
    assert_eq!(moved.notes[0].issue_key, "AURORA-77");
}

#[test]
fn a_failed_refresh_closes_its_run() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    hub.enqueue_refresh(None, "ivanov").unwrap();
    let id = agent.claim(&mut hub, 1).commands[0].id;
    agent.report(
        &mut hub,
        json!([{"command_id": id, "delivery": 1, "status": "failed", "error": "JQL error"}]),
    );
    let runs = hub.sync_runs().unwrap();
    assert_eq!(
        (runs[0].run.status.as_str(), runs[0].run.error.as_deref()),
        ("failed", Some("JQL error"))
    );
}

/// «refresh в очереди при миграции»: the rewritten refresh counts as full when it completes.
#[test]
fn a_migrated_queued_refresh_is_full() {
    let dir = TestDir::new();
    drop(build_db(&dir.db(), 3, &format!(
        "{}{COMMON_ROWS}
         INSERT INTO batch (title, author, created_at) VALUES ('refresh', 'hub', '2026-01-06T00:00:00Z');
         INSERT INTO command (batch_id, seq, type, params, status) VALUES
           (2, 1, 'refresh', '{{\"jql\":\"project = AURORA AND labels = AWPCA\",\"boards\":[4216]}}', 'queued');",
        v3_settings_sql()
    )));
    let clock = clock();
    let mut hub = open_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let claim = agent.claim(&mut hub, 5);
    let refresh_command = claim
        .commands
        .iter()
        .find(|c| c.command_type == "refresh")
        .unwrap();
    assert_eq!(
        refresh_command.params["jql"],
        "project = AURORA AND labels in (\"AWPCA\")"
    );
    agent.report(&mut hub, json!([{"command_id": refresh_command.id, "delivery": 1, "status": "done",
        "page": {"start_at": 0, "total": 1, "issues": [raw_issue("AURORA-1", "10001", &["AWPCA"], json!({}))]},
        "result": {"total": 1, "boards": [{"id": 4216, "type": "scrum"}]}}]));
    let runs = hub.sync_runs().unwrap();
    assert!(runs[0].full, "{runs:?}");
    assert!(
        matches!(hub.issue("AURORA-2"), Err(ServiceError::NotFound(_))),
        "a full run prunes"
    );
    assert_eq!(
        hub.issue("AURORA-1").unwrap().notes.len(),
        1,
        "migrated notes are kept"
    );
}

/// A timed-out command is confirmed from the mirror only by proof. A transition by
/// its target status id in a row a refresh read after the delivery; a link because Jira keeps one
/// per (type, inward, outward). A create or a comment that merely looks done, or an edit whose
/// fields differ, goes back to the queue: its next delivery decides by the marker.
#[test]
fn timed_out_commands_are_confirmed_from_the_mirror_only_by_proof() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(
        &mut hub,
        json!({"pacing": {"claim_timeout_seconds": 60},
               "transitions_map": {"Готово": {"status_id": "10001"}}}),
    );
    let agent = Agent::new("agent-1");
    let work = hub
        .enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
            {"type": "transition", "params": {"key": "AURORA-1", "status": "Готово"}},
            {"type": "link", "params": {"from": "AURORA-1", "to": "AURORA-2", "type": "blocks"}},
            {"type": "comment", "params": {"key": "AURORA-1", "body": "сделано"}},
            {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Новая", "labels": ["AWPCA"], "priority": "high"}},
            {"type": "ensure_issue", "params": {"issue_type": "task", "key": "AURORA-2", "summary": "Другое название"}},
            {"type": "comment", "params": {"key": {"$result": "key"}, "body": "к новой"}, "depends_on": 4}]})))
        .unwrap();
    assert_eq!(agent.claim(&mut hub, 10).commands.len(), 5);
    // The agent did the work but its reports were lost; a refresh shows what looks like it.
    clock.advance(time::Duration::seconds(30));
    let effects = vec![
        raw_issue(
            "AURORA-1",
            "1",
            &["AWPCA"],
            json!({"status": {"id": "10001", "name": "Готово"},
            "issuelinks": [{"id": "31", "type": {"name": "Blocks"}, "outwardIssue": {"key": "AURORA-2"}}],
            "comment": {"comments": [{"id": "5", "body": "сделано"}]}}),
        ),
        raw_issue(
            "AURORA-2",
            "2",
            &["AWPCA"],
            json!({
            "issuelinks": [{"id": "31", "type": {"name": "Blocks"}, "inwardIssue": {"key": "AURORA-1"}}]}),
        ),
        raw_issue(
            "AURORA-3",
            "3",
            &["AWPCA"],
            json!({"summary": "Новая", "priority": {"name": "Высокий"}, "created": "2026-11-29T13:00:05.000+0300"}),
        ),
    ];
    let batch_id = hub.enqueue_refresh(None, "ivanov").unwrap().id;
    let claim = agent.claim(&mut hub, 1);
    assert_eq!(claim.commands[0].batch_id, batch_id);
    agent.report(&mut hub, json!([{"command_id": claim.commands[0].id, "delivery": 1, "status": "done",
        "page": {"start_at": 0, "total": 3, "issues": effects}, "result": {"total": 3, "boards": []}}]));
    clock.advance(time::Duration::seconds(31));
    let expired = hub.expire_claims().unwrap();
    assert_eq!(
        (expired.confirmed_by_state, expired.requeued),
        (2, 3),
        "{expired:?}"
    );
    let view = hub.batch(work.id).unwrap();
    let statuses: Vec<CommandStatus> = view.commands.iter().map(|c| c.status).collect();
    use CommandStatus::*;
    assert_eq!(
        statuses,
        [
            ConfirmedByState,
            ConfirmedByState,
            Queued,
            Queued,
            Queued,
            Queued
        ]
    );
    assert_eq!(view.commands[0].result, Some(json!({"status": "Готово"})));
    // The create goes out again (its next delivery reads the marker before it writes); its
    // dependent waits for it.
    let next = agent.claim(&mut hub, 10);
    let ids: Vec<i64> = next.commands.iter().map(|c| c.id).collect();
    assert!(ids.contains(&view.commands[3].id), "{ids:?}");
    assert!(!ids.contains(&view.commands[5].id), "{ids:?}");
}

#[test]
fn notes_need_an_issue_and_an_author() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    refresh(
        &mut hub,
        &agent,
        None,
        &[vec![raw_issue("AURORA-1", "1", &["AWPCA"], json!({}))]],
        json!([]),
    );
    assert!(matches!(
        hub.add_note("AURORA-404", "ivanov", "x"),
        Err(ServiceError::NotFound(_))
    ));
    for (author, body, field) in [(" ", "x", "author"), ("ivanov", "  ", "body")] {
        match hub.add_note("AURORA-1", author, body) {
            Err(ServiceError::Invalid(e)) => assert_eq!(e.field, field),
            other => panic!("{other:?}"),
        }
    }
    assert!(hub.issue("AURORA-1").unwrap().notes.is_empty());
}

#[test]
fn closed_statuses_mark_slice_rows() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    refresh(
        &mut hub,
        &agent,
        None,
        &[vec![
            raw_issue(
                "AURORA-1",
                "1",
                &["AWPCA"],
                json!({"status": {"name": "Готово"}}),
            ),
            raw_issue("AURORA-2", "2", &["AWPCA"], json!({})),
        ]],
        json!([]),
    );
    let closed: Vec<bool> = hub
        .project_issues("AWPCA")
        .unwrap()
        .iter()
        .map(|r| r.closed)
        .collect();
    assert_eq!(closed, [true, false]);
}

#[test]
fn auto_refresh_enqueues_when_due_and_never_twice() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, json!({"auto_refresh_minutes": 30}));
    let first = hub.auto_refresh().unwrap().expect("due: never refreshed");
    assert_eq!(
        first.commands[0].params["jql"],
        "project = AURORA AND labels in (\"AWPCA\")"
    );
    clock.advance(time::Duration::minutes(45));
    assert!(hub.auto_refresh().unwrap().is_none(), "one is still queued");
    let agent = Agent::new("agent-1");
    let id = agent.claim(&mut hub, 1).commands[0].id;
    agent.report(&mut hub, json!([{"command_id": id, "delivery": 1, "status": "done", "result": {"total": 0, "boards": []}}]));
    assert!(
        hub.auto_refresh().unwrap().is_some(),
        "45 minutes since the last one"
    );
    clock.advance(time::Duration::minutes(29));
    let id = agent.claim(&mut hub, 1).commands[0].id;
    agent.report(&mut hub, json!([{"command_id": id, "delivery": 1, "status": "done", "result": {"total": 0, "boards": []}}]));
    assert!(hub.auto_refresh().unwrap().is_none(), "only 29 minutes");
    set_settings(&mut hub, json!({"auto_refresh_minutes": 0}));
    clock.advance(time::Duration::hours(5));
    assert!(hub.auto_refresh().unwrap().is_none(), "off");
}

/// Both issues carry the same link: one row. A link type renamed in Jira (same link id): still
/// one row, with the new name. A link deleted in Jira: gone.
#[test]
fn links_are_stored_once_and_follow_jira() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let pair = |type_name: &str, linked: bool| {
        let out = if linked {
            json!([{"id": "9", "type": {"name": type_name}, "outwardIssue": {"key": "AURORA-2"}}])
        } else {
            json!([])
        };
        let inn = if linked {
            json!([{"id": "9", "type": {"name": type_name}, "inwardIssue": {"key": "AURORA-1"}}])
        } else {
            json!([])
        };
        vec![
            raw_issue("AURORA-1", "1", &["AWPCA"], json!({"issuelinks": out})),
            raw_issue("AURORA-2", "2", &["AWPCA"], json!({"issuelinks": inn})),
        ]
    };
    refresh(&mut hub, &agent, None, &[pair("Blocks", true)], json!([]));
    let links = hub.issue("AURORA-1").unwrap().links;
    assert_eq!(links.len(), 1);
    refresh(
        &mut hub,
        &agent,
        None,
        &[pair("Блокирует", true)],
        json!([]),
    );
    let links = hub.issue("AURORA-2").unwrap().links;
    assert_eq!(
        links
            .iter()
            .map(|l| l.link_type.as_str())
            .collect::<Vec<_>>(),
        ["Блокирует"]
    );
    refresh(
        &mut hub,
        &agent,
        None,
        &[pair("Блокирует", false)],
        json!([]),
    );
    assert!(hub.issue("AURORA-1").unwrap().links.is_empty());
}

/// The slice's body is written straight from the stored rows: the same bytes as `serde_json` of
/// the slice's rows, whatever the rows hold (escapes, nulls, a time that is not one, a key that
/// sorts before its prefix, a row revision 2 left without `mirror_changed_at`), filtered or not.
#[test]
fn the_slice_json_is_the_rows_serialized() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    hub.create_project("STOCKS_DRRK", "Склады", None).unwrap();
    let agent = Agent::new("agent-1");
    let issues = vec![
        raw_issue(
            "AURORA-1",
            "1",
            &["AWPCA"],
            json!({"summary": "кавычки \" и \\ и\nперевод\u{1}строки 😀", "customfield_10101": "AURORA-7"}),
        ),
        raw_issue(
            "AURORA-2",
            "2",
            &["STOCKS_DRRK"],
            json!({"issuelinks": [{"id": "9", "type": {"name": "Blocks"}, "outwardIssue": {"key": "AURORA-1"}}]}),
        ),
        raw_issue(
            "AURORA-7",
            "7",
            &["STOCKS_DRRK"],
            json!({"status": {"name": "Готово"}}),
        ),
    ];
    refresh(&mut hub, &agent, None, &[issues], json!([]));
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    conn.execute_batch(
        r#"INSERT INTO issue (key, issue_type, summary, status, labels, created_at, synced_at)
           VALUES ('A', 'Задача', 'короткий ключ', 'Готово', '[ "x\"y", "AWPCA" ]', 'вчера', '2026-01-01T00:00:00Z'),
                  ('A!', 'Задача', 'ключ длиннее', 'Открыт', '["AWPCA"]', NULL, '2026-01-02T00:00:00Z'),
                  ('A"q', 'Задача', 'ключ с кавычкой', 'Открыт', '["\u0041WPCA"]', NULL, '2026-01-02T00:00:00Z'),
                  ('B', 'Задача', 'метки не список', 'Открыт', '{"a": "AWPCA"}', NULL, '2026-01-03T00:00:00Z');"#,
    )
    .unwrap();
    drop(conn);
    for (label, since) in [
        ("AWPCA", None),
        ("AWPCA", Some("2026-01-02T00:00:00Z")),
        ("AWPCA", Some("2030-01-01T00:00:00Z")),
        ("STOCKS_DRRK", None),
        ("STOCKS_DRRK", Some("2026-01-01T00:00:00Z")),
    ] {
        let rows = hub.project_issues_since(label, since).unwrap();
        let json = hub.project_issues_json(label, since).unwrap();
        assert_eq!(
            String::from_utf8(json).unwrap(),
            serde_json::to_string(&rows).unwrap(),
            "{label} {since:?}"
        );
    }
    let rows = hub.project_issues("AWPCA").unwrap();
    let keys: Vec<&str> = rows.iter().map(|r| r.issue.key.as_str()).collect();
    assert_eq!(
        keys,
        ["A", "A!", "A\"q", "AURORA-1", "B", "AURORA-2", "AURORA-7"]
    );
    assert!(matches!(
        hub.project_issues_json("NOPE", None),
        Err(ServiceError::NotFound(_))
    ));
}

/// A large page is mapped on a second thread while it is stored: every issue lands, in the
/// page's order (a key sent twice keeps its later version), and one that cannot be mapped is
/// skipped without stopping the rest.
#[test]
fn a_large_page_is_stored_whole_and_in_order() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-1");
    let mut page: Vec<Value> = (1..=300)
        .map(|n| {
            raw_issue(
                &format!("AURORA-{n}"),
                &n.to_string(),
                &["AWPCA"],
                json!({}),
            )
        })
        .collect();
    page[150] = json!({"id": "9999", "fields": {}});
    page.push(raw_issue(
        "AURORA-7",
        "7",
        &["AWPCA"],
        json!({"summary": "вторая версия"}),
    ));
    refresh(&mut hub, &agent, None, &[page], json!([]));
    assert_eq!(hub.status().unwrap().counts.issues, 299);
    let seventh = hub.issue("AURORA-7").unwrap();
    assert_eq!(seventh.issue.summary, "вторая версия");
    assert_eq!(
        hub.metrics()
            .issues_not_stored
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}
