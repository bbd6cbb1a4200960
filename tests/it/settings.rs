//! The data-model scenarios of «Настройки» through the service (the HTTP API and the CLI call the
//! same functions), and the CLI's `settings` commands.

use crate::support::*;
use jira_hub::service::ServiceError;
use serde_json::{Map, Value, json};

fn update(pairs: Value) -> Map<String, Value> {
    pairs.as_object().unwrap().clone()
}

fn initialized(dir: &TestDir) {
    run_ok(
        &dir.db(),
        &["init", "--config", example_config().to_str().unwrap()],
    );
}

/// «Правка настроек поднимает версию»: the agent gets the new version and settings.
#[test]
fn a_change_of_pacing_bumps_the_version_for_the_agent() {
    let dir = TestDir::new();
    initialized(&dir);
    let clock = clock();
    let mut hub = open_hub(&dir, &clock);
    let (before, _) = hub.agent_settings().unwrap();
    let view = hub
        .update_settings(&update(json!({"pacing": {"min_interval_ms": 1000}})))
        .unwrap();
    assert_eq!(view["settings_version"], json!(before + 1));
    assert_eq!(view["pacing"]["min_interval_ms"], json!(1000));
    assert_eq!(
        view["pacing"]["max_deliveries"],
        json!(3),
        "missing members take defaults"
    );
    let (after, agent) = hub.agent_settings().unwrap();
    assert_eq!(after, before + 1);
    assert_eq!(agent["pacing"]["min_interval_ms"], json!(1000));
}

/// «Неверный relay_dir».
#[test]
fn a_relative_relay_dir_is_refused_and_nothing_changes() {
    let dir = TestDir::new();
    initialized(&dir);
    let before = snapshot(&dir.db());
    let mut hub = open_hub(&dir, &clock());
    let error = hub
        .update_settings(&update(
            json!({"backup_keep": 5, "relay_dir": "rshb/jira-bridge"}),
        ))
        .unwrap_err();
    let ServiceError::Invalid(error) = error else {
        panic!("{error:?}")
    };
    assert_eq!(error.field, "relay_dir");
    assert_eq!(
        snapshot(&dir.db()),
        before,
        "all or nothing: backup_keep is not written either"
    );

    for bad in [json!(17), json!(["/a"]), json!("")] {
        assert!(
            hub.update_settings(&update(json!({"relay_dir": bad})))
                .is_err()
        );
    }
    assert_eq!(snapshot(&dir.db()), before);
    let view = hub
        .update_settings(&update(json!({"relay_dir": "/srv/jira-bridge"})))
        .unwrap();
    assert_eq!(view["relay_dir"], json!("/srv/jira-bridge"));
}

/// «Закрытые статусы по умолчанию», on a database that never had the key.
#[test]
fn closed_statuses_appear_with_their_default() {
    let dir = TestDir::new();
    drop(build_db(&dir.db(), 3, &v3_settings_sql()));
    let hub = open_hub(&dir, &clock());
    let view = hub.settings_view().unwrap();
    assert_eq!(view["closed_statuses"], json!(["Готово", "Снято"]));
    let (_, agent) = hub.agent_settings().unwrap();
    assert!(agent.get("closed_statuses").is_none());
    assert!(agent.get("relay_dir").is_none());
    assert!(agent.get("tokens").is_none());
    assert_eq!(
        agent["board_id"],
        json!(4216),
        "the legacy board reaches the agent"
    );
    assert!(view.get("board_id").is_none());
    assert!(view.get("tokens").is_none());
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    assert_eq!(
        setting(&conn, "closed_statuses").as_deref(),
        Some("[\"Готово\",\"Снято\"]")
    );

    // Removed by hand from a v4 database: back at the next start.
    conn.execute("DELETE FROM setting WHERE key = 'closed_statuses'", [])
        .unwrap();
    drop(hub);
    let hub = open_hub(&dir, &clock());
    assert_eq!(
        hub.settings_view().unwrap()["closed_statuses"],
        json!(["Готово", "Снято"])
    );
    assert!(setting(&conn, "closed_statuses").is_some());
    let error = open_hub(&dir, &clock())
        .update_settings(&update(json!({"closed_statuses": "Готово"})))
        .unwrap_err();
    assert!(
        matches!(error, ServiceError::Invalid(ref e) if e.field == "closed_statuses"),
        "{error:?}"
    );
}

/// «Запись базовой JQL» (and `board_id`): 422 with the explanation, version unchanged.
#[test]
fn base_jql_and_board_id_are_read_only() {
    let dir = TestDir::new();
    initialized(&dir);
    let before = snapshot(&dir.db());
    let mut hub = open_hub(&dir, &clock());
    let Err(ServiceError::Invalid(error)) =
        hub.update_settings(&update(json!({"base_jql": "project = AURORA"})))
    else {
        panic!("base_jql must be refused");
    };
    assert_eq!(
        (error.field.as_str(), error.message.as_str()),
        ("base_jql", "базовая JQL собирается из проектов")
    );
    let Err(ServiceError::Invalid(error)) = hub.update_settings(&update(json!({"board_id": 4216})))
    else {
        panic!("board_id must be refused");
    };
    assert_eq!(error.field, "board_id");
    assert!(error.message.contains("доска задаётся у проекта"));
    for key in ["tokens", "settings_version", "schema_version", "colour"] {
        assert!(
            hub.update_settings(&update(json!({key: 1}))).is_err(),
            "{key}"
        );
    }
    assert_eq!(snapshot(&dir.db()), before);
}

/// Out-of-range values name the member at fault, through the real binary.
#[test]
fn cli_settings_set_validates_like_the_api() {
    let dir = TestDir::new();
    initialized(&dir);
    let before = snapshot(&dir.db());
    for (key, value, field) in [
        (
            "pacing",
            r#"{"max_commands_per_claim": 0}"#,
            "pacing.max_commands_per_claim",
        ),
        (
            "pacing",
            r#"{"backoff_initial_seconds": 10, "backoff_max_seconds": 5}"#,
            "pacing.backoff_max_seconds",
        ),
        ("backup_keep", "0", "backup_keep"),
        ("relay_dir", r#""rshb/jira-bridge""#, "relay_dir"),
        ("auto_refresh_minutes", "-1", "auto_refresh_minutes"),
        ("base_jql", r#""project = AURORA""#, "base_jql"),
        (
            "issue_types",
            r#"{"task": {"name": "Задача"}}"#,
            "issue_types.epic",
        ),
    ] {
        let out = run(&dir.db(), &["settings", "set", key, value]);
        assert_eq!(out.code, 1, "{key} {value}: {out:?}");
        assert!(
            out.stderr.starts_with(&format!("jira-hub: {field}: ")),
            "{out:?}"
        );
        assert_eq!(out.stderr.lines().count(), 1, "one line: {out:?}");
    }
    let out = run(&dir.db(), &["settings", "set", "relay_dir", "/srv/relay"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("не JSON"), "{out:?}");
    assert_eq!(snapshot(&dir.db()), before);

    let out = run_ok(
        &dir.db(),
        &["settings", "set", "auto_refresh_minutes", "15"],
    );
    assert!(
        out.stdout.contains("auto_refresh_minutes = 15")
            && out.stdout.contains("settings_version = 2"),
        "{out:?}"
    );
    let out = run_ok(&dir.db(), &["settings", "get", "auto_refresh_minutes"]);
    assert_eq!(out.stdout.trim(), "15");
    let all = run_ok(&dir.db(), &["settings", "get"]);
    let all: Value = serde_json::from_str(&all.stdout).unwrap();
    assert_eq!(all["settings_version"], json!(2));
    assert!(all.get("tokens").is_none());
    let tokens = run_ok(&dir.db(), &["tokens"]).stdout;
    let agent_token = tokens
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .last()
        .unwrap();
    assert!(!all.to_string().contains(agent_token));
}
