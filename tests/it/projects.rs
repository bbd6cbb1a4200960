//! The data-model scenarios of «Проекты»: labels, names, boards, uniqueness, the base JQL.

use crate::support::*;
use jira_hub::service::{HubConnection, ServiceError};
use serde_json::json;

fn hub_with_key(
    dir: &TestDir,
    clock: &std::sync::Arc<jira_hub::clock::ManualClock>,
) -> HubConnection {
    let mut hub = open_hub(dir, clock);
    set_settings(&mut hub, json!({"project_key": "AURORA"}));
    hub
}

fn field_of(result: Result<jira_hub::service::ProjectView, ServiceError>) -> String {
    match result {
        Err(ServiceError::Invalid(e)) => e.field,
        other => panic!("expected a validation error, got {other:?}"),
    }
}

/// «Базовая JQL из двух проектов» and «Создание проекта не трогает версию настроек».
#[test]
fn base_jql_from_two_projects_in_creation_order() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = hub_with_key(&dir, &clock);
    assert_eq!(hub.base_jql().unwrap(), None, "no projects, no base JQL");
    let version = hub.settings_view().unwrap()["settings_version"].clone();
    hub.create_project("STOCKS_DRRK", "Склады", None).unwrap();
    clock.advance(time::Duration::seconds(1));
    hub.create_project("AWPCA", "АРМ КА", Some(4216)).unwrap();
    // Created later, sorted later, although its label sorts first.
    assert_eq!(
        hub.base_jql().unwrap().as_deref(),
        Some("project = AURORA AND labels in (\"STOCKS_DRRK\", \"AWPCA\")")
    );
    let view = hub.settings_view().unwrap();
    assert_eq!(
        view["settings_version"], version,
        "projects never bump settings_version"
    );
    assert_eq!(
        view["base_jql"],
        json!("project = AURORA AND labels in (\"STOCKS_DRRK\", \"AWPCA\")")
    );
}

/// Created in the same microsecond: ordered by label, the same way every time.
#[test]
fn same_time_projects_are_ordered_by_label() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = hub_with_key(&dir, &clock);
    hub.create_project("STOCKS_DRRK", "Склады", None).unwrap();
    hub.create_project("AWPCA", "АРМ КА", None).unwrap();
    assert_eq!(
        hub.base_jql().unwrap().as_deref(),
        Some("project = AURORA AND labels in (\"AWPCA\", \"STOCKS_DRRK\")")
    );
}

/// «Метка с пробелом», «Метка с обратной косой чертой или управляющим символом».
#[test]
fn bad_labels_are_refused_naming_the_field() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = hub_with_key(&dir, &clock);
    for label in [
        "STOCKS DRRK",
        "A\\B",
        "A\nB",
        "A\tB",
        "A\u{0}B",
        "",
        "A,B",
        "A\"B",
        "A(B)",
        &"L".repeat(101),
    ] {
        assert_eq!(
            field_of(hub.create_project(label, "Имя", None)),
            "label",
            "{label:?}"
        );
    }
    assert_eq!(field_of(hub.create_project("OK", "   ", None)), "name");
    assert_eq!(
        field_of(hub.create_project("OK", &"ы".repeat(101), None)),
        "name"
    );
    assert_eq!(
        field_of(hub.create_project("OK", "Имя", Some(0))),
        "board_id"
    );
    assert!(hub.projects().unwrap().is_empty(), "no project was created");
    let project = hub
        .create_project("OK", &format!("  {}  ", "ы".repeat(100)), Some(1))
        .unwrap();
    assert_eq!(
        project.name.chars().count(),
        100,
        "trimmed, counted in characters"
    );
}

/// «Метка — зарезервированное слово JQL».
#[test]
fn a_reserved_word_label_stays_a_label() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = hub_with_key(&dir, &clock);
    hub.create_project("EMPTY", "Пусто", None).unwrap();
    assert_eq!(
        hub.base_jql().unwrap().as_deref(),
        Some("project = AURORA AND labels in (\"EMPTY\")")
    );
}

/// «Та же метка другим регистром», for Latin and Cyrillic labels.
#[test]
fn labels_are_unique_case_insensitively() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = hub_with_key(&dir, &clock);
    hub.create_project("AWPCA", "АРМ КА", None).unwrap();
    hub.create_project("Склад", "Склад", None).unwrap();
    for duplicate in ["awpca", "AwPcA", "СКЛАД", "склад"] {
        match hub.create_project(duplicate, "Другой", None) {
            Err(ServiceError::Conflict { field, message }) => {
                assert_eq!(field, "label");
                assert_eq!(message, "проект с такой меткой уже есть");
            }
            other => panic!("{duplicate}: {other:?}"),
        }
    }
    assert_eq!(hub.projects().unwrap().len(), 2);
}

#[test]
fn cli_projects_add_and_list() {
    let dir = TestDir::new();
    run_ok(&dir.db(), &["migrate"]);
    run_ok(&dir.db(), &["settings", "set", "project_key", "\"AURORA\""]);
    let out = run_ok(
        &dir.db(),
        &["projects", "add", "AWPCA", "АРМ КА", "--board", "4216"],
    );
    assert!(
        out.stdout
            .contains("base JQL: project = AURORA AND labels in (\"AWPCA\")"),
        "{out:?}"
    );
    let before = snapshot(&dir.db());
    let out = run(&dir.db(), &["projects", "add", "awpca", "Другой"]);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr.trim(),
        "jira-hub: label: проект с такой меткой уже есть"
    );
    let out = run(&dir.db(), &["projects", "add", "STOCKS DRRK", "Склады"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.starts_with("jira-hub: label: "), "{out:?}");
    let out = run(&dir.db(), &["projects", "add", "X", "Имя", "--board", "-3"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.starts_with("jira-hub: board_id: "), "{out:?}");
    assert_eq!(snapshot(&dir.db()), before);
    let list = run_ok(&dir.db(), &["projects", "list"]);
    assert_eq!(list.stdout.lines().count(), 1);
    assert!(
        list.stdout.starts_with("AWPCA\tАРМ КА\tboard 4216\t-\t"),
        "{list:?}"
    );
}
