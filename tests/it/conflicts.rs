//! A change made in Jira after an edit was enqueued is never silently overwritten. The
//! real agent loop against the simulated Jira (both deployments) and the real hub served over
//! HTTP in this process (the harness of `agent_waits`): a base recorded at enqueue from the
//! mirror, one read right before the write, the three-way decision per field, and the operator's
//! answers («Записать поверх», «Оставить как в Jira», a plain retry).

use crate::agent_waits::{Hub, run_agent};
use crate::support::*;
use jira_hub::domain::command::{BatchStatus, CommandStatus};
use jira_hub::service::CommandView;
use jira_hub::sim::jira::{FakeJira, Mode, PROJECT};
use serde_json::{Value, json};

/// The fake Jira, the hub with a mirror of the fake's project, and the agent's config.
pub(crate) struct Stage {
    pub(crate) fake: FakeJira,
    pub(crate) hub: Hub,
    pub(crate) config: String,
}

fn priority(id: &str, name: &str) -> Value {
    json!({"id": id, "name": name})
}

impl Stage {
    /// `issues`: the `fields` of each issue seeded in Jira before the mirror's refresh.
    pub(crate) fn start(mode: Mode, issues: &[Value]) -> (Stage, Vec<String>) {
        Stage::start_with(mode, issues, json!({}))
    }

    /// As [`Stage::start`], with these settings besides the stage's own (`field_ids`).
    pub(crate) fn start_with(mode: Mode, issues: &[Value], more: Value) -> (Stage, Vec<String>) {
        let fake = FakeJira::start(mode);
        let keys = issues
            .iter()
            .map(|fields| {
                let mut fields = fields.clone();
                fields["issuetype"] = json!({"id": "10002", "name": "Задача"});
                fields["labels"] = json!(["AWPCA"]);
                fake.seed_issue(PROJECT, fields)
            })
            .collect();
        let mut settings = json!({"pacing": {"min_interval_ms": 0, "max_commands_per_claim": 50},
                   "priority_map": {"high": "Высокий", "medium": "Средний", "low": "Низкий"}});
        for (name, value) in more.as_object().into_iter().flatten() {
            settings[name] = value.clone();
        }
        let hub = Hub::start(settings, json!([]));
        let config = hub.agent_config(&fake.url(), json!({}));
        let stage = Stage { fake, hub, config };
        stage.enqueue(
            json!([{"type": "refresh", "params": {"jql": format!("project = {PROJECT}")}}]),
        );
        stage.run();
        (stage, keys)
    }

    pub(crate) fn enqueue(&self, commands: Value) -> i64 {
        self.hub
            .read()
            .enqueue_batch(&batch(
                json!({"title": "правки", "author": "ivanov", "commands": commands}),
            ))
            .unwrap()
            .id
    }

    /// One claim of the agent, its commands run and reported.
    pub(crate) fn run(&self) {
        run_agent(&self.hub, &self.config, None, 1);
    }

    pub(crate) fn command(&self, id: i64) -> CommandView {
        self.hub
            .commands()
            .into_iter()
            .find(|c| c.id == id)
            .unwrap()
    }

    pub(crate) fn jira(&self, key: &str) -> Value {
        self.fake.issue(key).unwrap()["fields"].clone()
    }

    /// The agent's reads and writes of one issue (`GET`/`PUT /rest/api/2/issue/KEY`).
    pub(crate) fn calls_on(&self, key: &str) -> (usize, usize) {
        let path = format!("/rest/api/2/issue/{key}");
        let seen = self.fake.requests();
        let of = |method: &str| {
            seen.iter()
                .filter(|s| s.method == method && s.path == path)
                .count()
        };
        (of("GET"), of("PUT"))
    }
}

pub(crate) fn edit(key: &str, fields: Value) -> Value {
    let mut params = json!({"issue_type": "task", "key": key});
    for (k, v) in fields.as_object().unwrap() {
        params[k] = v.clone();
    }
    json!({"type": "ensure_issue", "params": params})
}

pub(crate) fn seeded() -> Value {
    json!({"summary": "Старое", "priority": priority("3", "Средний"), "duedate": "2026-04-01"})
}

/// A summary changed by a person after the enqueue stops the edit: nothing is written (not the
/// priority beside it either), the command fails with the three values and who changed it, and
/// the next refresh brings Jira's values into the mirror.
#[test]
fn a_summary_changed_in_jira_after_the_enqueue_is_not_overwritten_nor_the_field_beside_it() {
    for mode in [Mode::DataCenter, Mode::Cloud] {
        let (stage, keys) = Stage::start(mode, &[seeded()]);
        let key = &keys[0];
        let batch = stage.enqueue(json!([edit(
            key,
            json!({"summary": "Наше", "priority": "high"})
        )]));
        let view = stage.hub.read().batch(batch).unwrap();
        let id = view.commands[0].id;
        assert_eq!(
            view.commands[0].params["base"]["fields"],
            json!({"summary": "Старое", "priority": {"id": "3", "name": "Средний"}}),
            "{mode:?}: the base is the mirror's"
        );
        stage
            .fake
            .change_issue(key, json!({"summary": "Их"}), "Мария");
        stage.run();

        let command = stage.command(id);
        assert_eq!(command.status, CommandStatus::Failed, "{mode:?}");
        let conflict = &command.result.as_ref().unwrap()["conflict"];
        let fields = conflict["fields"].as_array().unwrap();
        assert_eq!(fields.len(), 1, "{mode:?}: {conflict}");
        assert_eq!(
            (
                &fields[0]["field"],
                &fields[0]["base"],
                &fields[0]["jira"],
                &fields[0]["wanted"]
            ),
            (
                &json!("summary"),
                &json!("Старое"),
                &json!("Их"),
                &json!("Наше")
            ),
            "{mode:?}"
        );
        assert_eq!(
            fields[0]["changed_by"], "Мария",
            "{mode:?}: the changelog's author"
        );
        let error = command.error.unwrap();
        for words in [
            "было «Старое»",
            "в Jira сейчас «Их»",
            "хотели записать «Наше»",
        ] {
            assert!(error.contains(words), "{mode:?}: {error}");
        }
        let jira = stage.jira(key);
        assert_eq!(jira["summary"], "Их", "{mode:?}");
        assert_eq!(
            jira["priority"]["name"], "Средний",
            "{mode:?}: nothing is written"
        );
        assert_eq!(stage.calls_on(key).1, 0, "{mode:?}: no PUT");
        assert_eq!(stage.hub.read().batch(batch).unwrap().conflicts, 1);

        // The next refresh: the mirror takes Jira's values, never ours.
        stage.enqueue(
            json!([{"type": "refresh", "params": {"jql": format!("project = {PROJECT}")}}]),
        );
        stage.run();
        let mirrored = stage.hub.read().issue(key).unwrap().issue;
        assert_eq!(
            (mirrored.summary.as_str(), mirrored.priority.as_deref()),
            ("Их", Some("Средний")),
            "{mode:?}"
        );
    }
}

/// A field Jira already holds at the wanted value is no conflict and is not written again; the
/// field beside it, unchanged since the base, is written: one read and one write.
#[test]
fn a_field_jira_already_holds_at_the_wanted_value_is_no_conflict() {
    let (stage, keys) = Stage::start(Mode::DataCenter, &[seeded()]);
    let key = &keys[0];
    let batch = stage.enqueue(json!([edit(
        key,
        json!({"summary": "Наше", "priority": "high"})
    )]));
    let id = stage.hub.read().batch(batch).unwrap().commands[0].id;
    stage
        .fake
        .change_issue(key, json!({"summary": "Наше"}), "Мария");
    stage.run();
    let command = stage.command(id);
    assert_eq!(command.status, CommandStatus::Done, "{:?}", command.error);
    let jira = stage.jira(key);
    assert_eq!(
        (jira["summary"].as_str(), jira["priority"]["name"].as_str()),
        (Some("Наше"), Some("Высокий"))
    );
    assert_eq!(stage.calls_on(key), (1, 1), "one read, one write");
    let histories = stage.fake.histories(key);
    let ours = histories.last().unwrap();
    let changed: Vec<&str> = ours["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["field"].as_str().unwrap())
        .collect();
    assert_eq!(changed, ["priority"], "the summary was not sent again");
}

/// Data Center user names are case-insensitive and Jira gives back the name as stored: an
/// assignee written `PETROV` reads back `petrov` (the simulated Jira does so), and an edit that
/// wants `PETROV` where a person already set `Petrov` finds its value there: done, nothing
/// written. Before, the names were compared by their text and the edit stopped on a conflict
/// with its own value.
#[test]
fn a_data_center_user_named_in_another_case_is_the_same_user() {
    let (stage, keys) = Stage::start(
        Mode::DataCenter,
        &[json!({"summary": "Кому", "assignee": {"name": "ivanov", "key": "ivanov"}})],
    );
    let key = &keys[0];
    stage.fake.add_user("petrov");
    stage.fake.add_user("ivanov");
    let batch = stage.enqueue(json!([edit(
        key,
        json!({"summary": "Кому", "assignee": "PETROV"})
    )]));
    let id = stage.hub.read().batch(batch).unwrap().commands[0].id;
    stage
        .fake
        .change_issue(key, json!({"assignee": {"name": "Petrov"}}), "Мария");
    assert_eq!(stage.jira(key)["assignee"]["name"], "petrov", "as stored");
    stage.run();
    let command = stage.command(id);
    assert_eq!(command.status, CommandStatus::Done, "{:?}", command.error);
    assert_eq!(stage.calls_on(key), (1, 0), "one read, nothing to write");
    // The agent's own write in another case reads back as stored, and is no conflict after.
    let batch = stage.enqueue(json!([edit(
        key,
        json!({"summary": "Кому", "assignee": "IVANOV"})
    )]));
    let id = stage.hub.read().batch(batch).unwrap().commands[0].id;
    stage.run();
    assert_eq!(stage.command(id).status, CommandStatus::Done);
    assert_eq!(stage.jira(key)["assignee"]["name"], "ivanov");
}

/// Cloud gives a description back re-rendered (wiki → ADF → wiki): a base and a value that differ
/// only so are the same, on both sides of the decision.
#[test]
fn a_description_equal_after_clouds_adf_round_trip_is_no_conflict() {
    let old = "Первая строка  \r\n\r\n\r\nВторая  ";
    let (stage, keys) = Stage::start(
        Mode::Cloud,
        &[
            json!({"summary": "Одна", "description": old}),
            json!({"summary": "Другая", "description": "Было"}),
        ],
    );
    // A person saves the first description again in Cloud's editor: it comes back re-rendered.
    let batch = stage.enqueue(json!([
        edit(
            &keys[0],
            json!({"summary": "Одна", "description": "Новое описание"})
        ),
        edit(
            &keys[1],
            json!({"summary": "Другая", "description": "Текст  \r\n\r\n\r\nещё"})
        ),
    ]));
    stage
        .fake
        .change_issue(&keys[0], json!({"description": old}), "Мария");
    stage
        .fake
        .change_issue(&keys[1], json!({"description": "Текст\n\nещё"}), "Мария");
    assert_eq!(
        stage.jira(&keys[0])["description"],
        "Первая строка\n\nВторая"
    );
    stage.run();
    let view = stage.hub.read().batch(batch).unwrap();
    for command in &view.commands {
        assert_eq!(command.status, CommandStatus::Done, "{:?}", command.error);
    }
    assert_eq!(stage.jira(&keys[0])["description"], "Новое описание");
    assert_eq!(
        stage.calls_on(&keys[1]),
        (1, 0),
        "equal to the wanted one: nothing to write"
    );
}

/// «Записать поверх» (a retry that overwrites), then «Оставить как в Jira» on another conflict
/// with its dependent skipped, then a plain retry after the person put the old value back.
#[test]
fn the_operators_answers_overwrite_keep_and_a_plain_retry() {
    let (stage, keys) = Stage::start(Mode::DataCenter, &[seeded(), seeded(), seeded()]);
    let batch = stage.enqueue(json!([
        edit(&keys[0], json!({"summary": "Наше", "priority": "high"})),
        edit(&keys[1], json!({"summary": "Наше"})),
        {"type": "comment", "params": {"key": keys[1], "body": "после правки"}, "depends_on": 2},
        edit(&keys[2], json!({"summary": "Наше"})),
    ]));
    for key in &keys {
        stage
            .fake
            .change_issue(key, json!({"summary": "Их"}), "Мария");
    }
    stage.run();
    let view = stage.hub.read().batch(batch).unwrap();
    let ids: Vec<i64> = view.commands.iter().map(|c| c.id).collect();
    assert_eq!(
        view.commands.iter().map(|c| c.status).collect::<Vec<_>>(),
        [
            CommandStatus::Failed,
            CommandStatus::Failed,
            CommandStatus::Skipped,
            CommandStatus::Failed
        ]
    );
    assert_eq!(view.conflicts, 3);

    // «Записать поверх»: the summary in conflict is written over Jira's, the rest checked again.
    let retried = stage.hub.read().retry_overwriting(ids[0]).unwrap();
    assert_eq!(retried.params["overwrite"], json!(["summary"]));
    // «Оставить как в Jira»: cancelled by the operator, the dependent stays skipped with the reason.
    let kept = stage.hub.read().keep_jira(ids[1], "console").unwrap();
    assert_eq!(kept.status, CommandStatus::Cancelled);
    assert!(
        kept.error
            .as_deref()
            .unwrap()
            .contains("Оставлено как в Jira"),
        "{:?}",
        kept.error
    );
    // A plain retry after the person put the old value back: checked again, and written.
    stage
        .fake
        .change_issue(&keys[2], json!({"summary": "Старое"}), "Мария");
    stage.hub.read().retry_command(ids[3]).unwrap();
    stage.run();

    let view = stage.hub.read().batch(batch).unwrap();
    let statuses: Vec<CommandStatus> = view.commands.iter().map(|c| c.status).collect();
    assert_eq!(
        statuses,
        [
            CommandStatus::Done,
            CommandStatus::Cancelled,
            CommandStatus::Skipped,
            CommandStatus::Done
        ]
    );
    assert!(
        view.commands[2]
            .error
            .as_deref()
            .unwrap()
            .contains("оставил как в Jira"),
        "{:?}",
        view.commands[2].error
    );
    assert_eq!(view.status, BatchStatus::Completed);
    assert_eq!(view.conflicts, 0);
    assert_eq!(stage.jira(&keys[0])["summary"], "Наше");
    assert_eq!(stage.jira(&keys[0])["priority"]["name"], "Высокий");
    assert_eq!(
        stage.jira(&keys[1])["summary"],
        "Их",
        "left as it is in Jira"
    );
    assert_eq!(stage.jira(&keys[2])["summary"], "Наше");
    // A plain retry of a command that was never in conflict cannot overwrite.
    assert!(stage.hub.read().retry_overwriting(ids[3]).is_err());
}

/// A batch of 20 edits while an Automation rule changes 5 of those issues' priorities between
/// the claim and the writes: 15 done, 5 conflicts, the rule's 5 priorities intact; each edit
/// took one read and (when written) one write.
#[test]
fn twenty_edits_while_a_rule_changes_five_priorities_on_both_deployments() {
    for mode in [Mode::DataCenter, Mode::Cloud] {
        let issues: Vec<Value> = (0..20).map(|_| seeded()).collect();
        let (stage, keys) = Stage::start(mode, &issues);
        let commands: Vec<Value> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| {
                edit(
                    key,
                    json!({"summary": format!("Правка {i}"), "priority": "high"}),
                )
            })
            .collect();
        let batch = stage.enqueue(json!(commands));
        let ruled: Vec<&String> = keys.iter().skip(2).step_by(4).collect();
        assert_eq!(ruled.len(), 5);
        for (i, key) in ruled.iter().enumerate() {
            // After the claim, between the agent's calls: the rule acts on the i-th before the
            // agent reaches it (two calls per edit before it).
            stage.fake.change_issue_after(
                1 + 8 * i,
                key,
                json!({"priority": {"name": "Низкий"}}),
                "Automation for Jira",
            );
        }
        stage.run();
        let view = stage.hub.read().batch(batch).unwrap();
        assert_eq!(view.counters["done"], 15, "{mode:?}");
        assert_eq!(view.counters["failed"], 5, "{mode:?}");
        assert_eq!(view.conflicts, 5, "{mode:?}");
        for (key, command) in keys.iter().zip(&view.commands) {
            let jira = stage.jira(key);
            if ruled.contains(&key) {
                assert_eq!(command.status, CommandStatus::Failed, "{mode:?} {key}");
                let field = &command.result.as_ref().unwrap()["conflict"]["fields"][0];
                assert_eq!(
                    (&field["field"], &field["changed_by"]),
                    (&json!("priority"), &json!("Automation for Jira")),
                    "{mode:?}"
                );
                assert_eq!(
                    jira["priority"]["name"], "Низкий",
                    "{mode:?}: the rule's priority"
                );
                assert_eq!(jira["summary"], "Старое", "{mode:?}");
                // The fields' read, then (a field differs) Data Center's changelog on the same
                // path; Cloud's paged changelog has a path of its own.
                let reads = if mode == Mode::DataCenter { 2 } else { 1 };
                assert_eq!(stage.calls_on(key), (reads, 0), "{mode:?}");
            } else {
                assert_eq!(
                    command.status,
                    CommandStatus::Done,
                    "{mode:?} {:?}",
                    command.error
                );
                assert_eq!(jira["priority"]["name"], "Высокий", "{mode:?}");
                assert_eq!(stage.calls_on(key), (1, 1), "{mode:?}: two calls per edit");
            }
        }
    }
}

/// The conflict over HTTP: the base an edit gets (the mirror's, none, or the client's own), the
/// conflict counted apart in a batch and in `/metrics`, `POST /commands/{id}/retry
/// {"overwrite": true}` and `POST /commands/{id}/keep-jira`.
#[tokio::test]
async fn over_http_a_conflict_is_counted_apart_overwritten_or_left_as_in_jira() {
    use axum::http::{Method, StatusCode};
    let api = crate::http::api();
    let (status, refused) = api
        .client(
            Method::POST,
            "/batches",
            Some(json!({"title": "t", "author": "a", "commands": [
                edit("AURORA-1", json!({"summary": "Наше", "base": {"labels": "x"}}))]})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["error"]["field"], "commands[1].params.base");
    let (status, created) = api
        .client(
            Method::POST,
            "/batches",
            Some(json!({"title": "t", "author": "a", "commands": [
                edit("AURORA-1", json!({"summary": "Наше", "priority": "high"})),
                edit("AURORA-2", json!({"summary": "Наше", "base": {"summary": "Видел"}})),
                {"type": "comment", "params": {"key": "AURORA-2", "body": "после правки"}, "depends_on": 2}]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let base = &created["commands"][0]["params"]["base"];
    assert_eq!(base["from"], "none", "the mirror does not hold it: {base}");
    assert!(base["note"].as_str().unwrap().contains("без сверки"));
    assert_eq!(
        created["commands"][1]["params"]["base"],
        json!({"from": "client", "fields": {"summary": "Видел"}})
    );
    let batch = created["id"].as_i64().unwrap();
    let conflict = |id: &Value, delivery: i64| {
        json!({"kind": "report", "id": format!("r-{id}-{delivery}"), "agent": "agent-h",
               "sent_at": "2026-11-29T10:00:00Z", "results": [{"command_id": id, "delivery": delivery,
               "status": "failed", "error": "AURORA-2: конфликт", "jira_calls": 1,
               "result": {"key": "AURORA-2", "conflict": {"updated": "2026-11-29T10:00:00.000+0000",
                   "fields": [{"field": "summary", "base": "Видел", "jira": "Их", "wanted": "Наше"}]}}}]})
    };
    let claim = |id: &str| {
        json!({"kind": "claim", "id": id, "agent": "agent-h", "sent_at": "2026-11-29T10:00:00Z",
               "agent_version": "1.4.0", "settings_version": 0, "max_commands": 10,
               "protocol": 2, "capabilities": ["edit_base"]})
    };
    let (_, claimed) = api.agent("/agent/claim", claim("c-1")).await;
    let first = claimed["commands"][0]["id"].clone();
    let second = claimed["commands"][1]["id"].clone();
    let (status, _) = api
        .agent(
            "/agent/report",
            json!({"kind": "report", "id": "r-0", "agent": "agent-h",
               "sent_at": "2026-11-29T10:00:00Z", "results": [{"command_id": first, "delivery": 1,
               "status": "failed", "error": "Jira отказала (HTTP 400)", "jira_calls": 1}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = api.agent("/agent/report", conflict(&second, 1)).await;
    assert_eq!(status, StatusCode::OK);
    let (_, view) = api
        .client(Method::GET, &format!("/batches/{batch}"), None)
        .await;
    assert_eq!(
        (
            view["counters"]["failed"].as_i64(),
            view["conflicts"].as_i64()
        ),
        (Some(2), Some(1))
    );
    let (_, _, metrics) = api.get_accepting("/metrics", None).await;
    assert!(
        metrics.contains("jira_hub_commands_failed{cause=\"conflict\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("jira_hub_commands_failed{cause=\"other\"} 1"),
        "{metrics}"
    );

    // Overwrite: only an edit stopped by a conflict; a bad body names the field.
    let path = |id: &Value, action: &str| format!("/commands/{id}/{action}");
    let (status, _) = api
        .client(
            Method::POST,
            &path(&first, "retry"),
            Some(json!({"overwrite": true})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, _) = api
        .client(
            Method::POST,
            &path(&second, "retry"),
            Some(json!({"overwrite": "yes"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, retried) = api
        .client(
            Method::POST,
            &path(&second, "retry"),
            Some(json!({"overwrite": true})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{retried}");
    assert_eq!(retried["params"]["overwrite"], json!(["summary"]));
    assert_eq!(retried["status"], "queued");

    // Handed out again, in conflict again: left as it is in Jira.
    let (_, claimed) = api.agent("/agent/claim", claim("c-2")).await;
    assert_eq!(
        claimed["commands"][0]["params"]["overwrite"],
        json!(["summary"])
    );
    api.agent("/agent/report", conflict(&second, 2)).await;
    let (status, kept) = api
        .client(Method::POST, &path(&second, "keep-jira"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{kept}");
    assert_eq!(kept["status"], "cancelled");
    let (status, _) = api
        .client(Method::POST, &path(&second, "keep-jira"), None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "once only");
    // Its dependent stays skipped; enqueued again as a new batch, once.
    let (status, refused) = api
        .client(Method::POST, &path(&first, "enqueue-dependents"), None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "not a kept edit: {refused}");
    let (status, again) = api
        .client(Method::POST, &path(&second, "enqueue-dependents"), None)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_ne!(again["id"], json!(batch));
    assert_eq!(again["author"], "api");
    assert_eq!(
        again["commands"][0]["params"],
        json!({"key": "AURORA-2", "body": "после правки"})
    );
    let (status, twice) = api
        .client(Method::POST, &path(&second, "enqueue-dependents"), None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{twice}");
    let (_, _, metrics) = api.get_accepting("/metrics", None).await;
    assert!(
        metrics.contains("jira_hub_commands_failed{cause=\"conflict\"} 0"),
        "{metrics}"
    );

    // The command line: an overwrite or a «keep» of a command without a conflict is refused with
    // the hub's reason; a plain retry goes.
    let db = api.dir.db();
    let first = first.to_string();
    let out = run(&db, &["commands", "retry", &first, "--overwrite"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("записывать поверх нечего"),
        "{}",
        out.stderr
    );
    let out = run(&db, &["commands", "keep-jira", &first]);
    assert!(
        out.stderr.contains("конфликта с Jira нет"),
        "{}",
        out.stderr
    );
    let out = run_ok(&db, &["commands", "retry", &first]);
    assert!(out.stdout.contains("queued again"), "{}", out.stdout);
    let out = run(
        &db,
        &["commands", "enqueue-dependents", &second.to_string()],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("уже поставлены снова"),
        "{}",
        out.stderr
    );
}

/// After «Оставить как в Jira», the edit's dependent stays skipped, and neither retry pretends
/// otherwise: «Повторить неудачные» queued it («снова в очереди») and the claim walk skipped it
/// again within milliseconds; a retry of the dependent told the operator to retry the cancelled
/// edit first, which cannot be retried. Both now refuse, saying the dependency is cancelled and
/// what to do.
#[test]
fn retries_after_keep_jira_never_queue_what_is_skipped_again_at_once() {
    let (stage, keys) = Stage::start(Mode::DataCenter, &[seeded()]);
    let batch = stage.enqueue(json!([
        edit(&keys[0], json!({"summary": "Наше"})),
        {"type": "comment", "params": {"key": keys[0], "body": "после правки"}, "depends_on": 1},
    ]));
    stage
        .fake
        .change_issue(&keys[0], json!({"summary": "Их"}), "Мария");
    stage.run();
    let view = stage.hub.read().batch(batch).unwrap();
    let ids: Vec<i64> = view.commands.iter().map(|c| c.id).collect();
    stage.hub.read().keep_jira(ids[0], "console").unwrap();

    let batch_retry = stage.hub.read().retry_failed(batch);
    let message = format!("{:?}", batch_retry.as_ref().err());
    assert!(
        batch_retry.is_err(),
        "«Повторить неудачные» queued a command that cannot run"
    );
    assert!(message.contains("отменённых"), "{message}");
    let one_retry = stage.hub.read().retry_command(ids[1]);
    let message = format!("{:?}", one_retry.as_ref().err());
    assert!(one_retry.is_err());
    assert!(
        message.contains("отменена") && !message.contains("повторите сначала её"),
        "{message}"
    );
    let view = stage.hub.read().batch(batch).unwrap();
    assert_eq!(
        view.commands.iter().map(|c| c.status).collect::<Vec<_>>(),
        [CommandStatus::Cancelled, CommandStatus::Skipped]
    );
}

/// A sprint in an edit is checked like the other fields: the Agile API *moves* the issue (it
/// leaves its open sprint), so a person's move after the enqueue would be undone. The base is the
/// mirror's latest sprint, Jira's value now is read from the sprint field as Jira returns it
/// (Data Center's `toString` form, Cloud's objects). A person's move stops the edit with the
/// three sprint names; «Записать поверх» moves the issue anyway; an edit nobody crossed is done.
#[test]
fn a_sprint_changed_in_jira_after_the_enqueue_is_not_overwritten() {
    use jira_hub::sim::jira::SPRINT_FIELD;
    for mode in [Mode::DataCenter, Mode::Cloud] {
        let (stage, keys) = Stage::start_with(
            mode,
            &[seeded(), seeded()],
            json!({"field_ids": {"sprint": SPRINT_FIELD}}),
        );
        stage.fake.add_board(70, "Доска", "scrum");
        for (id, name, state) in [
            (71, "Спринт 1", "active"),
            (72, "Спринт 2", "future"),
            (73, "Спринт 3", "future"),
        ] {
            stage.fake.add_sprint(70, id, name, state);
        }
        for key in &keys {
            stage.fake.move_to_sprint(key, 71, "Мария");
        }
        stage.enqueue(
            json!([{"type": "refresh", "params": {"jql": format!("project = {PROJECT}")}}]),
        );
        stage.run();
        let to_sprint_2 = |key: &str| {
            edit(
                key,
                json!({"summary": "Старое", "sprint": "Спринт 2", "board_id": 70}),
            )
        };
        let batch = stage.enqueue(json!([to_sprint_2(&keys[0]), to_sprint_2(&keys[1])]));
        let view = stage.hub.read().batch(batch).unwrap();
        assert_eq!(
            view.commands[0].params["base"]["fields"]["sprint"], "Спринт 1",
            "{mode:?}: the base is the mirror's sprint"
        );
        // A person moves the first issue on: the edit would move it back.
        stage.fake.move_to_sprint(&keys[0], 73, "Пётр");
        stage.run();
        let view = stage.hub.read().batch(batch).unwrap();
        let crossed = &view.commands[0];
        assert_eq!(
            crossed.status,
            CommandStatus::Failed,
            "{mode:?}: {crossed:?}"
        );
        let conflict = &crossed.result.as_ref().unwrap()["conflict"]["fields"][0];
        assert_eq!(
            (
                &conflict["field"],
                &conflict["base"],
                &conflict["jira"],
                &conflict["wanted"]
            ),
            (
                &json!("sprint"),
                &json!("Спринт 1"),
                &json!("Спринт 3"),
                &json!("Спринт 2")
            ),
            "{mode:?}: {conflict}"
        );
        if mode == Mode::Cloud {
            // Data Center's changelog names the custom field "Sprint", not by its id: not said.
            assert_eq!(conflict["changed_by"], "Пётр", "{mode:?}: {conflict}");
        }
        assert!(
            crossed
                .error
                .as_deref()
                .unwrap_or("")
                .contains("Спринт: было «Спринт 1»"),
            "{mode:?}: {crossed:?}"
        );
        let sprint_now = |key: &str| {
            jira_hub::domain::edit::jira_value(
                "sprint",
                stage.jira(key).as_object().unwrap(),
                &[("sprint".to_string(), SPRINT_FIELD.to_string())].into(),
            )
        };
        assert_eq!(sprint_now(&keys[0]), "Спринт 3", "{mode:?}: nothing moved");
        assert_eq!(view.commands[1].status, CommandStatus::Done, "{mode:?}");
        assert_eq!(sprint_now(&keys[1]), "Спринт 2", "{mode:?}");
        // «Записать поверх»: the operator moves it anyway.
        let retried = stage.hub.read().retry_overwriting(crossed.id).unwrap();
        assert_eq!(retried.params["overwrite"], json!(["sprint"]));
        stage.run();
        assert_eq!(
            stage.command(crossed.id).status,
            CommandStatus::Done,
            "{mode:?}"
        );
        assert_eq!(sprint_now(&keys[0]), "Спринт 2", "{mode:?}");
    }
}

/// «Оставить как в Jira», then its dependents enqueued again: a chain of two comments skipped
/// because of the kept edit is copied into one new batch (the first's `$result` key is the
/// edit's issue, the second still depends on the first), both run against Jira, and the skipped
/// originals name their copies and are not copied twice.
#[test]
fn dependents_of_an_edit_kept_as_in_jira_run_as_a_new_batch() {
    let (stage, keys) = Stage::start(Mode::DataCenter, &[seeded()]);
    let key = &keys[0];
    let batch = stage.enqueue(json!([
        edit(key, json!({"summary": "Наше"})),
        {"type": "comment", "params": {"key": {"$result": "key"}, "body": "после правки"}, "depends_on": 1},
        {"type": "comment", "params": {"key": key, "body": "и ещё"}, "depends_on": 2},
    ]));
    stage
        .fake
        .change_issue(key, json!({"summary": "Их"}), "Мария");
    stage.run();
    let view = stage.hub.read().batch(batch).unwrap();
    let ids: Vec<i64> = view.commands.iter().map(|c| c.id).collect();
    assert!(
        stage
            .hub
            .read()
            .enqueue_dependents_again(ids[0], "console")
            .is_err(),
        "not kept yet"
    );
    stage.hub.read().keep_jira(ids[0], "console").unwrap();

    let again = stage
        .hub
        .read()
        .enqueue_dependents_again(ids[0], "console")
        .unwrap();
    assert_ne!(again.id, batch);
    assert_eq!(again.commands.len(), 2);
    assert_eq!(again.commands[0].params["key"], json!(key));
    assert_eq!(again.commands[0].depends_on, None);
    assert_eq!(again.commands[1].depends_on, Some(again.commands[0].id));
    let twice = stage.hub.read().enqueue_dependents_again(ids[0], "console");
    assert!(format!("{:?}", twice.err()).contains("уже поставлены снова"));

    // Two claims: the second comment waits for the first.
    run_agent(&stage.hub, &stage.config, None, 2);
    let done = stage.hub.read().batch(again.id).unwrap();
    assert_eq!(
        done.commands.iter().map(|c| c.status).collect::<Vec<_>>(),
        [CommandStatus::Done, CommandStatus::Done],
        "{:?}",
        done.commands.iter().map(|c| &c.error).collect::<Vec<_>>()
    );
    assert_eq!(stage.jira(key)["summary"], "Их", "left as it is in Jira");
    assert_eq!(stage.fake.comments(key).len(), 2);
    let old = stage.hub.read().batch(batch).unwrap();
    for (n, command) in old.commands[1..].iter().enumerate() {
        assert_eq!(command.status, CommandStatus::Skipped);
        assert!(
            command
                .error
                .as_deref()
                .is_some_and(|e| e.contains(&format!("пакет {}, команда {}", again.id, n + 1))),
            "{:?}",
            command.error
        );
    }
}
