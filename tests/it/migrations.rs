//! The data-model scenarios of «Схема базы хаба»: first start, migrations from v1, v2 and v3 with
//! their backups, concurrent openers, a live WAL, a failed migration, permissions.

use crate::support::*;
use rusqlite::Connection;
use std::os::unix::fs::PermissionsExt;

const TABLES: [&str; 11] = [
    "setting",
    "issue",
    "issue_link",
    "issue_comment",
    "issue_note",
    "batch",
    "command",
    "sync_run",
    "agent_status",
    "project",
    "agent_request",
];

fn assert_v4_shape(conn: &Connection) {
    assert_eq!(setting(conn, "schema_version").as_deref(), Some("4"));
    for table in TABLES {
        let found = count(
            conn,
            &format!(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '{table}'"
            ),
        );
        assert_eq!(found, 1, "table {table}");
    }
    for index in [
        "issue_epic_key",
        "issue_link_target",
        "issue_note_issue",
        "command_status",
        "issue_comment_issue",
        "batch_project",
        "command_batch_status",
        "sync_run_command",
        "issue_jira_id",
    ] {
        let found = count(
            conn,
            &format!(
                "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = '{index}'"
            ),
        );
        assert_eq!(found, 1, "index {index}");
    }
    let columns = |table: &str| -> Vec<String> {
        let mut statement = conn
            .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
            .unwrap();
        statement
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert!(columns("command").contains(&"deliveries".to_string()));
    assert!(columns("batch").contains(&"project".to_string()));
    assert_eq!(
        columns("project"),
        ["label", "name", "board_id", "board_type", "created_at"]
    );
    let journal: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(journal, "wal");
}

/// «Первый запуск»: the file is created with every table and index, version 4, folder 0700.
#[test]
fn first_start_creates_the_database() {
    let dir = TestDir::new();
    let out = run_ok(&dir.db(), &["migrate"]);
    assert!(
        out.stdout.contains("new database created at schema v4"),
        "{out:?}"
    );
    let conn = Connection::open(dir.db()).unwrap();
    assert_v4_shape(&conn);
    assert_eq!(
        setting(&conn, "closed_statuses").as_deref(),
        Some("[\"Готово\",\"Снято\"]")
    );
    assert!(setting(&conn, "base_jql").is_none() && setting(&conn, "board_id").is_none());
    assert_eq!(mode(&dir.path().join("data")), 0o700);
    assert_eq!(mode(&dir.path().join("data/backups")), 0o700);
    assert!(dir.backups().is_empty(), "no backup of a new database");
    // A new database is made with 32 KiB pages (an issue row is about 4 KiB).
    assert_eq!(count(&conn, "PRAGMA page_size"), 32768);

    let again = run_ok(&dir.db(), &["migrate"]);
    let current = format!(
        "schema v4r{}: up to date",
        jira_hub::service::SCHEMA_REVISION
    );
    assert!(again.stdout.contains(&current), "{again:?}");
}

/// «Миграция базы v1».
#[test]
fn migrates_v1_with_deliveries_and_a_backup() {
    let dir = TestDir::new();
    drop(build_db(&dir.db(), 1, COMMON_ROWS));
    let out = run_ok(&dir.db(), &["migrate"]);
    assert!(out.stdout.contains("schema v1 -> v4"), "{out:?}");

    let backups = dir.backups();
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert!(backups[0].ends_with("-schema-v1.sqlite"), "{backups:?}");
    assert!(out.stdout.contains(&backups[0]));
    let backup = Connection::open(dir.backup_path(&backups[0])).unwrap();
    assert_eq!(setting(&backup, "schema_version").as_deref(), Some("1"));
    assert_eq!(count(&backup, "SELECT count(*) FROM issue"), 2);
    assert_eq!(count(&backup, "SELECT count(*) FROM issue_note"), 2);
    assert_eq!(mode(&dir.backup_path(&backups[0])), 0o600);

    let conn = Connection::open(dir.db()).unwrap();
    assert_v4_shape(&conn);
    assert_eq!(
        count(&conn, "PRAGMA page_size"),
        4096,
        "a migrated database keeps the page size it was made with"
    );
    let deliveries: Vec<(String, i64)> = conn
        .prepare("SELECT status, deliveries FROM command ORDER BY seq")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        deliveries,
        [
            ("done".to_string(), 0),
            ("claimed".to_string(), 1),
            ("queued".to_string(), 0)
        ]
    );
    assert_eq!(count(&conn, "SELECT count(*) FROM issue_comment"), 0);
    assert_eq!(count(&conn, "SELECT count(*) FROM issue"), 2);
    assert_eq!(count(&conn, "SELECT count(*) FROM issue_link"), 1);
    assert_eq!(count(&conn, "SELECT count(*) FROM issue_note"), 2);
    assert_eq!(
        count(&conn, "SELECT count(*) FROM batch WHERE project IS NULL"),
        1
    );
}

/// «Миграция базы v2».
#[test]
fn migrates_v2() {
    let dir = TestDir::new();
    drop(build_db(
        &dir.db(),
        2,
        &format!("{COMMON_ROWS} UPDATE command SET deliveries = 2 WHERE seq = 2;"),
    ));
    run_ok(&dir.db(), &["migrate"]);
    let backups = dir.backups();
    assert_eq!(backups.len(), 1);
    assert!(backups[0].ends_with("-schema-v2.sqlite"));
    let conn = Connection::open(dir.db()).unwrap();
    assert_v4_shape(&conn);
    assert_eq!(count(&conn, "SELECT count(*) FROM issue_comment"), 0);
    assert_eq!(count(&conn, "SELECT count(*) FROM issue_link"), 1);
    assert_eq!(count(&conn, "SELECT count(*) FROM issue_note"), 2);
    // A v2 hub counted its deliveries: they are kept, not recounted.
    assert_eq!(
        count(&conn, "SELECT deliveries FROM command WHERE seq = 2"),
        2
    );
}

const V3_RUNS: &str = "
INSERT INTO sync_run (query, started_at, finished_at, status, issues_seen)
VALUES ('project = AURORA AND labels = AWPCA', '2026-01-04T00:00:00Z', '2026-01-04T00:05:00Z', 'done', 2),
       ('project = AURORA AND key = AURORA-1', '2026-01-05T00:00:00Z', '2026-01-05T00:01:00Z', 'done', 1);
INSERT INTO batch (title, author, created_at) VALUES ('refresh', 'hub', '2026-01-06T00:00:00Z');
INSERT INTO command (batch_id, seq, type, params, status) VALUES
  (2, 1, 'refresh', '{\"jql\":\"project = AURORA AND labels = AWPCA\",\"boards\":[4216]}', 'queued');
INSERT INTO batch (title, author, created_at) VALUES ('refresh', 'hub', '2026-01-06T00:00:00Z');
INSERT INTO command (batch_id, seq, type, params, status, deliveries) VALUES
  (3, 1, 'refresh', '{\"jql\":\"project = AURORA AND labels = AWPCA\"}', 'claimed', 1);
INSERT INTO batch (title, author, created_at) VALUES ('refresh', 'hub', '2026-01-06T00:00:00Z');
INSERT INTO command (batch_id, seq, type, params, status) VALUES
  (4, 1, 'refresh', '{\"jql\":\"project = AURORA AND labels = AWPCA\"}', 'done');
INSERT INTO issue_comment (id, issue_key, author, body, created) VALUES ('777', 'AURORA-1', 'ivanov', 'текст', '2026-03-05T10:15:30.000+0300');
";

/// «Миграция базы v3» and «refresh в очереди при миграции».
#[test]
fn migrates_v3_into_projects() {
    let dir = TestDir::new();
    drop(build_db(
        &dir.db(),
        3,
        &format!("{}{COMMON_ROWS}{V3_RUNS}", v3_settings_sql()),
    ));
    run_ok(&dir.db(), &["migrate"]);
    let backups = dir.backups();
    assert_eq!(backups.len(), 1);
    assert!(backups[0].ends_with("-schema-v3.sqlite"));

    let conn = Connection::open(dir.db()).unwrap();
    assert_v4_shape(&conn);
    let project: (String, String, Option<i64>, Option<String>) = conn
        .query_row(
            "SELECT label, name, board_id, board_type FROM project",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
        .unwrap();
    assert_eq!(project, ("AWPCA".into(), "АРМ КА".into(), Some(4216), None));
    assert_eq!(count(&conn, "SELECT count(*) FROM project"), 1);
    assert_eq!(
        setting(&conn, "base_jql").as_deref(),
        Some("\"project = AURORA AND labels = AWPCA\"")
    );
    assert_eq!(setting(&conn, "board_id").as_deref(), Some("4216"));

    let new_jql = "project = AURORA AND labels in (\"AWPCA\")";
    let queries: Vec<String> = conn
        .prepare("SELECT query FROM sync_run ORDER BY id")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(queries, [new_jql, "project = AURORA AND key = AURORA-1"]);

    let jql_of = |batch: i64| -> serde_json::Value {
        let params: String = conn
            .query_row(
                "SELECT params FROM command WHERE batch_id = ?1",
                [batch],
                |row| row.get(0),
            )
            .unwrap();
        serde_json::from_str::<serde_json::Value>(&params).unwrap()
    };
    assert_eq!(
        jql_of(2),
        serde_json::json!({"jql": new_jql, "boards": [4216]})
    );
    assert_eq!(jql_of(3)["jql"], new_jql);
    assert_eq!(
        jql_of(4)["jql"],
        "project = AURORA AND labels = AWPCA",
        "done commands are history"
    );

    assert_eq!(count(&conn, "SELECT count(*) FROM issue"), 2);
    assert_eq!(count(&conn, "SELECT count(*) FROM issue_note"), 2);
    assert_eq!(count(&conn, "SELECT count(*) FROM issue_comment"), 1);
    assert_eq!(count(&conn, "SELECT count(*) FROM batch"), 4);

    // The computed base JQL is what clients see.
    let out = run_ok(&dir.db(), &["settings", "get", "base_jql"]);
    assert_eq!(out.stdout.trim(), serde_json::to_string(new_jql).unwrap());
}

#[test]
fn v3_with_several_labels_gives_the_board_to_nobody() {
    let dir = TestDir::new();
    let settings = v3_settings_sql().replace(
        "project = AURORA AND labels = AWPCA",
        "project = AURORA AND labels in (STOCKS_DRRK, \\\"AWPCA\\\")",
    );
    drop(build_db(&dir.db(), 3, &settings));
    let out = run_ok(&dir.db(), &["migrate"]);
    assert!(
        out.stdout.contains("board_id 4216 was given to no project"),
        "{out:?}"
    );
    let conn = Connection::open(dir.db()).unwrap();
    let projects: Vec<(String, String, Option<i64>)> = conn
        .prepare("SELECT label, name, board_id FROM project ORDER BY created_at, label")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        projects,
        [
            ("STOCKS_DRRK".into(), "STOCKS_DRRK".into(), None),
            ("AWPCA".into(), "АРМ КА".into(), None)
        ]
    );
    let out = run_ok(&dir.db(), &["settings", "get", "base_jql"]);
    assert!(
        out.stdout
            .contains(r#"labels in (\"STOCKS_DRRK\", \"AWPCA\")"#),
        "{out:?}"
    );
}

#[test]
fn v3_with_an_unparsable_base_jql_gives_no_projects_and_a_warning() {
    let dir = TestDir::new();
    let settings = v3_settings_sql().replace(
        "project = AURORA AND labels = AWPCA",
        "project = AURORA AND (labels = A OR labels = B)",
    );
    drop(build_db(
        &dir.db(),
        3,
        &format!("{settings}{COMMON_ROWS}{V3_RUNS}"),
    ));
    let out = run_ok(&dir.db(), &["migrate"]);
    assert!(
        out.stdout.contains("could not be parsed")
            && out.stdout.contains("(labels = A OR labels = B)"),
        "the warning quotes the old value: {out:?}"
    );
    let conn = Connection::open(dir.db()).unwrap();
    assert_eq!(count(&conn, "SELECT count(*) FROM project"), 0);
    assert_eq!(setting(&conn, "schema_version").as_deref(), Some("4"));
}

/// «Два соединения к базе v1», with processes started together: one migration, one backup.
#[test]
fn concurrent_processes_migrate_once() {
    for _round in 0..3 {
        let dir = TestDir::new();
        drop(build_db(&dir.db(), 1, COMMON_ROWS));
        let children: Vec<_> = (0..8)
            .map(|_| {
                hub_command(&dir.db(), &["migrate"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut backups_reported = 0;
        for child in children {
            let output = child.wait_with_output().unwrap();
            assert!(output.status.success(), "{output:?}");
            if String::from_utf8_lossy(&output.stdout).contains("-schema-v1.sqlite") {
                backups_reported += 1;
            }
        }
        let backups = dir.backups();
        assert_eq!(backups.len(), 1, "{backups:?}");
        assert!(backups[0].ends_with("-schema-v1.sqlite"));
        assert_eq!(
            backups_reported, 1,
            "exactly one process migrated and backed up"
        );
        let conn = Connection::open(dir.db()).unwrap();
        assert_v4_shape(&conn);
        assert_eq!(
            count(&conn, "SELECT deliveries FROM command WHERE seq = 2"),
            1
        );
        let backup = Connection::open(dir.backup_path(&backups[0])).unwrap();
        assert_eq!(setting(&backup, "schema_version").as_deref(), Some("1"));
    }
}

/// The backup holds rows that are only in the WAL of a running old hub.
#[test]
fn backup_holds_rows_still_in_the_wal() {
    let dir = TestDir::new();
    let old_hub = build_db(&dir.db(), 1, "PRAGMA wal_autocheckpoint = 0;");
    old_hub
        .pragma_update(None, "wal_autocheckpoint", 0)
        .unwrap();
    old_hub.execute_batch(COMMON_ROWS).unwrap();
    old_hub
        .execute_batch(
            "WITH RECURSIVE n(i) AS (SELECT 100 UNION ALL SELECT i + 1 FROM n WHERE i < 1099)
             INSERT INTO issue (key, issue_type, summary, status, synced_at)
             SELECT 'AURORA-' || i, 'Задача', 'задача ' || i, 'Открыт', '2026-01-01T00:00:00Z' FROM n;",
        )
        .unwrap();
    let wal = dir.db().with_extension("sqlite-wal");
    assert!(
        std::fs::metadata(&wal).unwrap().len() > 0,
        "the rows are in the WAL"
    );
    assert_eq!(count(&old_hub, "SELECT count(*) FROM issue"), 1002);

    run_ok(&dir.db(), &["migrate"]);

    let backups = dir.backups();
    assert_eq!(backups.len(), 1);
    let backup = Connection::open(dir.backup_path(&backups[0])).unwrap();
    assert_eq!(count(&backup, "SELECT count(*) FROM issue"), 1002);
    assert_eq!(count(&backup, "SELECT count(*) FROM command"), 3);
    assert_eq!(setting(&backup, "schema_version").as_deref(), Some("1"));
    // The old hub's connection still works after the migration.
    assert_eq!(count(&old_hub, "SELECT count(*) FROM issue"), 1002);
    drop(old_hub);
}

/// A step that fails leaves the database at its old version, whole, and usable by the old hub.
#[test]
fn a_failed_migration_leaves_the_old_version() {
    let dir = TestDir::new();
    // Someone created a table named project by hand: the v3→v4 step will fail on it, after the
    // v1→v2 and v2→v3 steps have run in the same transaction.
    drop(build_db(
        &dir.db(),
        1,
        &format!("{COMMON_ROWS} CREATE TABLE project (x TEXT);"),
    ));
    let before = snapshot_v1(&dir.db());
    let out = run(&dir.db(), &["migrate"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("со схемы v3 на v4 не удалась")
            && out.stderr.contains("осталась на v3")
            && out.stderr.contains("table project already exists"),
        "{out:?}"
    );
    let conn = Connection::open(dir.db()).unwrap();
    assert_eq!(setting(&conn, "schema_version").as_deref(), Some("1"));
    let columns = count(
        &conn,
        "SELECT count(*) FROM pragma_table_info('command') WHERE name = 'deliveries'",
    );
    assert_eq!(columns, 0, "the v1→v2 step was rolled back too");
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM sqlite_master WHERE name = 'issue_comment'"
        ),
        0
    );
    assert_eq!(snapshot_v1(&dir.db()), before);
    assert!(
        dir.backups().is_empty(),
        "no backup of a migration that did not happen: {:?}",
        dir.backups()
    );
    // The old hub can still write.
    conn.execute("UPDATE command SET status = 'done' WHERE seq = 2", [])
        .unwrap();
}

fn snapshot_v1(db: &std::path::Path) -> Vec<String> {
    let conn = Connection::open(db).unwrap();
    let mut statement = conn
        .prepare("SELECT issue.key || command.status || command.params FROM issue, command ORDER BY issue.key, command.id")
        .unwrap();
    statement
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn refuses_newer_and_foreign_databases() {
    let dir = TestDir::new();
    let conn = build_db(
        &dir.db(),
        1,
        "UPDATE setting SET value = '9' WHERE key = 'schema_version';",
    );
    drop(conn);
    let out = run(&dir.db(), &["migrate"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("схемы v9, новее, чем знает этот jira-hub"),
        "{out:?}"
    );

    let foreign = dir.path().join("other/foreign.sqlite");
    std::fs::create_dir_all(foreign.parent().unwrap()).unwrap();
    Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t (x);")
        .unwrap();
    let out = run(&foreign, &["migrate"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("не jira-hub"), "{out:?}");
}

/// «Открытый каталог данных».
#[test]
fn an_open_data_directory_is_narrowed_at_start() {
    let dir = TestDir::new();
    drop(build_db(&dir.db(), 3, &v3_settings_sql()));
    run_ok(&dir.db(), &["migrate"]);
    for folder in ["data", "data/backups"] {
        std::fs::set_permissions(
            dir.path().join(folder),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    run_ok(&dir.db(), &["migrate"]);
    assert_eq!(mode(&dir.path().join("data")), 0o700);
    assert_eq!(mode(&dir.path().join("data/backups")), 0o700);
}

/// A shared sticky folder (like /tmp) is not narrowed: the hub warns and goes on.
#[test]
fn a_shared_sticky_folder_is_left_alone_with_a_warning() {
    let dir = TestDir::new();
    let shared_dir = dir.path().join("shared");
    std::fs::create_dir(&shared_dir).unwrap();
    std::fs::set_permissions(&shared_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let out = run_ok(&shared_dir.join("hub.sqlite"), &["migrate"]);
    assert!(out.stdout.contains("is a shared folder"), "{out:?}");
    assert_eq!(mode(&shared_dir), 0o1777);
    assert_eq!(mode(&shared_dir.join("backups")), 0o700);
}

/// The disk fills while the backup is written (here: the file-size limit kills the process, as
/// a full disk would stop it): the database stays at its old version, whole; the next start
/// migrates, with one backup.
#[test]
fn a_migration_stopped_by_a_full_disk_leaves_the_old_version() {
    let dir = TestDir::new();
    let conn = build_db(&dir.db(), 1, COMMON_ROWS);
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 100 UNION ALL SELECT i + 1 FROM n WHERE i < 2099)
         INSERT INTO issue (key, issue_type, summary, status, fields, synced_at)
         SELECT 'AURORA-' || i, 'Задача', 'задача ' || i, 'Открыт', printf('%.500c', 'x'), '2026-01-01T00:00:00Z' FROM n;
         PRAGMA wal_checkpoint(TRUNCATE);",
    )
    .unwrap();
    drop(conn);
    let size = std::fs::metadata(dir.db()).unwrap().len();
    let limit_kib = size / 1024 / 2;
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -f {limit_kib}; exec \"$0\" --db \"$1\" migrate"
        ))
        .arg(env!("CARGO_BIN_EXE_jira-hub"))
        .arg(dir.db())
        .env("RUST_LOG", "off")
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(
        !status.success(),
        "the write limit stopped the migration: {status:?}"
    );
    let conn = Connection::open(dir.db()).unwrap();
    assert_eq!(setting(&conn, "schema_version").as_deref(), Some("1"));
    assert_eq!(count(&conn, "SELECT count(*) FROM issue"), 2002);
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM pragma_table_info('command') WHERE name = 'deliveries'"
        ),
        0
    );
    drop(conn);
    let left = dir.backups();
    assert!(
        !left.is_empty() && left.iter().all(|n| n.starts_with('.')),
        "only a half-written backup: {left:?}"
    );

    run_ok(&dir.db(), &["migrate"]);
    assert_eq!(
        dir.backups().len(),
        1,
        "one backup, the stale half-written one gone: {:?}",
        dir.backups()
    );
    let conn = Connection::open(dir.db()).unwrap();
    assert_v4_shape(&conn);
    assert_eq!(count(&conn, "SELECT count(*) FROM issue"), 2002);
}

/// A database of the first v4 release (revision 0 of v4, as the previous hub made it) gets the
/// additive revision 1: a backup first, the lease of a claimed command in its own column, runs
/// marked full when their query is the base JQL, the version still 4; then revision 2: the
/// runs' kinds and scopes, the issues' `mirror_changed_at`; then revision 3: the index of queued
/// commands; then revision 4: the attempts of retried commands and the runs' progress; then
/// revision 5: the index of finished commands; then revision 6: two unread indexes dropped;
/// then revision 7: `command.not_before` (a command its agent gave back).
#[test]
fn a_first_release_v4_database_gets_revision_1() {
    let dir = TestDir::new();
    let v4 = include_str!("../../src/store/sql/v4.sql");
    drop(build_db(
        &dir.db(),
        3,
        &format!(
            "{}{COMMON_ROWS}{v4}
             UPDATE setting SET value = '4' WHERE key = 'schema_version';
             INSERT INTO project (label, name, created_at) VALUES ('AWPCA', 'АРМ КА', '2026-01-01T00:00:00Z');
             UPDATE command SET claimed_at = '2026-01-03T00:00:01Z', deliveries = 1 WHERE status = 'claimed';
             INSERT INTO sync_run (query, started_at, status) VALUES
               ('project = AURORA AND labels in (\"AWPCA\")', '2026-01-04T00:00:00Z', 'done'),
               ('project = AURORA AND key = AURORA-1', '2026-01-05T00:00:00Z', 'done');",
            v3_settings_sql()
        ),
    ));
    let out = run_ok(&dir.db(), &["migrate"]);
    assert!(out.stdout.contains("schema-v4"), "{out:?}");
    assert_eq!(dir.backups().len(), 1);

    let conn = Connection::open(dir.db()).unwrap();
    assert_v4_shape(&conn);
    let revision: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(revision, i64::from(jira_hub::service::SCHEMA_REVISION));
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM pragma_table_info('command') WHERE name = 'not_before'"
        ),
        1,
        "revision 7's column"
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM sqlite_master WHERE type = 'index'
             AND name IN ('issue_link_jira_id', 'issue_mirror_changed_at')"
        ),
        0,
        "revision 6 dropped them"
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'command_queued'"
        ),
        1,
        "revision 3's index"
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'command_finished'"
        ),
        1,
        "revision 5's index"
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM sync_run WHERE pages = 0 AND total IS NULL"
        ),
        2,
        "revision 4: old runs have no progress recorded"
    );
    assert_eq!(count(&conn, "SELECT count(*) FROM command_attempt"), 0);
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM command WHERE status = 'claimed' AND lease_at = claimed_at"
        ),
        1
    );
    let full: Vec<i64> = conn
        .prepare("SELECT full FROM sync_run ORDER BY id")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(full, [1, 0]);
    let kinds: Vec<(String, bool)> = conn
        .prepare("SELECT kind, scope = query FROM sync_run ORDER BY id")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        kinds,
        [("full".to_string(), true), ("partial".to_string(), true)]
    );
    // Rows already there are not rewritten: NULL, read as their synced_at.
    let issues = count(&conn, "SELECT count(*) FROM issue");
    assert!(issues > 0);
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM issue WHERE mirror_changed_at IS NULL"
        ),
        issues
    );
    drop(conn);
    let mut hub = open_hub(&dir, &clock());
    let slice = hub.project_issues("AWPCA").unwrap();
    assert_eq!(slice.len(), 2);
    assert!(
        slice
            .iter()
            .all(|row| row.mirror_changed_at.as_ref() == Some(&row.synced_at)),
        "{slice:?}"
    );
    drop(hub);

    // Opening again migrates nothing.
    run_ok(&dir.db(), &["migrate"]);
    assert_eq!(dir.backups().len(), 1);
}

/// A database of a newer revision of v4 is refused like a newer schema.
#[test]
fn a_newer_v4_revision_is_refused() {
    let dir = TestDir::new();
    run_ok(&dir.db(), &["migrate"]);
    Connection::open(dir.db())
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let out = run(&dir.db(), &["migrate"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("ревизии 99"), "{out:?}");
}

/// A v4 database built from the data model's text alone (`schema-v4-datamodel.sql`: none of the
/// hub's own tables, columns or indexes), whatever number its header holds.
fn datamodel_v4(db: &std::path::Path, header: u32) {
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let conn = Connection::open(db).unwrap();
    conn.execute_batch(
        &std::fs::read_to_string(fixtures().join("history/schema-v4-datamodel.sql")).unwrap(),
    )
    .unwrap();
    conn.pragma_update(None, "user_version", header).unwrap();
}

const DATAMODEL_AGENT_TOKEN: &str = "a3f1c2e4b5d6978812345678abcdef01";

/// Another implementation's v4 database gets the hub's additions by what it lacks, not by its
/// header's number: with 0, a number of this hub's revisions, the current one or a larger one,
/// `migrate` backs it up and makes every table, column and index a new database has.
#[test]
fn a_v4_database_of_the_data_model_gets_what_it_lacks_whatever_its_header_says() {
    for header in [0, 2, 6, 99] {
        let dir = TestDir::new();
        datamodel_v4(&dir.db(), header);
        let out = run_ok(&dir.db(), &["migrate"]);
        assert!(out.stdout.contains("schema-v4"), "{header}: {out:?}");
        assert_eq!(dir.backups().len(), 1, "{header}");
        let conn = Connection::open(dir.db()).unwrap();
        assert_v4_shape(&conn);
        for (what, sql) in [
            (
                "agent_request",
                "SELECT count(*) FROM sqlite_master WHERE name = 'agent_request'",
            ),
            (
                "command_attempt",
                "SELECT count(*) FROM sqlite_master WHERE name = 'command_attempt'",
            ),
            (
                "lease_at",
                "SELECT count(*) FROM pragma_table_info('command') WHERE name = 'lease_at'",
            ),
            (
                "kind",
                "SELECT count(*) FROM pragma_table_info('sync_run') WHERE name = 'kind'",
            ),
            (
                "command_queued",
                "SELECT count(*) FROM sqlite_master WHERE name = 'command_queued'",
            ),
            (
                "last_check",
                "SELECT count(*) FROM pragma_table_info('agent_status') WHERE name = 'last_check'",
            ),
            (
                "sync_run.batch_id",
                "SELECT count(*) FROM pragma_table_info('sync_run') WHERE name = 'batch_id'",
            ),
            (
                "agent_status.jira_down_since",
                "SELECT count(*) FROM pragma_table_info('agent_status') WHERE name = 'jira_down_since'",
            ),
            (
                "heartbeat_seconds",
                "SELECT count(*) FROM pragma_table_info('agent_status') WHERE name = 'heartbeat_seconds'",
            ),
        ] {
            assert_eq!(count(&conn, sql), 1, "header {header}: {what}");
        }
        let revision: i64 = conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .unwrap();
        assert_eq!(
            revision,
            i64::from(jira_hub::service::SCHEMA_REVISION),
            "header {header}"
        );
        assert_eq!(
            count(
                &conn,
                "SELECT count(*) FROM command WHERE status = 'queued'"
            ),
            2
        );
        drop(conn);
        // Opening again changes nothing.
        run_ok(&dir.db(), &["migrate"]);
        assert_eq!(dir.backups().len(), 1, "{header}");
        run_ok(&dir.db(), &["status"]);
    }
}

/// A v1 database whose header holds a number (another tool's, or this hub's revision count):
/// below v4 the number means nothing, every revision is applied after the steps.
#[test]
fn an_old_database_with_a_number_in_its_header_gets_every_revision() {
    for header in [3, 6, 99] {
        let dir = TestDir::new();
        let conn = build_db(&dir.db(), 1, COMMON_ROWS);
        conn.pragma_update(None, "user_version", header).unwrap();
        drop(conn);
        run_ok(&dir.db(), &["migrate"]);
        let conn = Connection::open(dir.db()).unwrap();
        assert_v4_shape(&conn);
        assert_eq!(
            count(
                &conn,
                "SELECT count(*) FROM pragma_table_info('command') WHERE name = 'lease_at'"
            ),
            1,
            "header {header}"
        );
        assert_eq!(
            count(
                &conn,
                "SELECT count(*) FROM sqlite_master WHERE name IN ('command_queued', 'command_finished', 'agent_request')"
            ),
            3,
            "header {header}"
        );
        drop(conn);
        let mut hub = open_hub(&dir, &clock());
        hub.expire_claims().unwrap();
    }
}

/// The data model's v4 database serves claims, reports and heartbeats over HTTP and over the
/// relay once the daemon opened it.
#[test]
fn a_v4_database_of_the_data_model_serves_both_transports() {
    let dir = TestDir::new();
    datamodel_v4(&dir.db(), 6);
    let relay = dir.path().join("relay");
    for folder in ["inbox", "outbox", "archive", "rejected"] {
        std::fs::create_dir_all(relay.join(folder)).unwrap();
    }
    Connection::open(dir.db())
        .unwrap()
        .execute(
            "UPDATE setting SET value = ?1 WHERE key = 'relay_dir'",
            [serde_json::to_string(&relay.display().to_string()).unwrap()],
        )
        .unwrap();
    let daemon = Daemon::start(&dir.db(), &[]);
    let token = Some(DATAMODEL_AGENT_TOKEN);
    // HTTP: a claim hands out the first command, a report finishes it, a heartbeat is taken.
    let (status, claim) = http(
        &daemon.address,
        "POST",
        "/agent/claim",
        token,
        Some(
            &serde_json::json!({"kind": "claim", "id": "hc1", "agent": "agent-h",
            "sent_at": "2026-11-29T10:00:00Z", "agent_version": "1.4.0",
            "settings_version": 0, "max_commands": 1}),
        ),
    );
    assert_eq!(status, 200, "{claim}");
    let commands = claim["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "{claim}");
    let (status, report) = http(
        &daemon.address,
        "POST",
        "/agent/report",
        token,
        Some(
            &serde_json::json!({"kind": "report", "id": "hr1", "agent": "agent-h",
            "sent_at": "2026-11-29T10:00:00Z", "results": [{"command_id": commands[0]["id"],
            "delivery": commands[0]["delivery"], "status": "done", "result": {"comment_id": "7"},
            "jira_calls": 1}]}),
        ),
    );
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["accepted"].as_array().unwrap().len(), 1, "{report}");
    let (status, beat) = http(
        &daemon.address,
        "POST",
        "/agent/heartbeat",
        token,
        Some(
            &serde_json::json!({"kind": "heartbeat", "id": "hh1", "agent": "agent-h",
            "sent_at": "2026-11-29T10:00:00Z", "agent_version": "1.4.0", "jira_ok": true}),
        ),
    );
    assert_eq!(status, 200, "{beat}");

    // The relay: the same three, as files.
    let wait = std::time::Duration::from_secs(20);
    drop_file(
        &relay.join("inbox"),
        "claim-rc1.json",
        &claim_file("rc1", DATAMODEL_AGENT_TOKEN, 1),
    );
    let claim = wait_for_json(&relay.join("outbox/claim-rc1.json"), wait);
    let commands = claim["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "{claim}");
    drop_file(
        &relay.join("inbox"),
        "report-rr1.json",
        &report_file(
            "rr1",
            DATAMODEL_AGENT_TOKEN,
            serde_json::json!([{"command_id": commands[0]["id"], "delivery": commands[0]["delivery"],
                "status": "done", "result": {"comment_id": "8"}, "jira_calls": 1}]),
        ),
    );
    let report = wait_for_json(&relay.join("outbox/report-rr1.json"), wait);
    assert_eq!(report["accepted"].as_array().unwrap().len(), 1, "{report}");
    drop_file(
        &relay.join("inbox"),
        "heartbeat-rh1.json",
        &serde_json::json!({"kind": "heartbeat", "id": "rh1", "agent": "agent-1",
            "sent_at": "2026-11-29T10:00:00Z", "token": DATAMODEL_AGENT_TOKEN,
            "agent_version": "1.4.0", "jira_ok": true}),
    );
    assert_eq!(
        wait_for_json(&relay.join("outbox/heartbeat-rh1.json"), wait),
        serde_json::json!({"kind": "heartbeat", "request_id": "rh1"})
    );
    drop(daemon);
    let conn = Connection::open(dir.db()).unwrap();
    assert_eq!(
        count(&conn, "SELECT count(*) FROM command WHERE status = 'done'"),
        2
    );
    assert_eq!(count(&conn, "SELECT count(*) FROM agent_request"), 6);
}

/// The hub's own database whose header lost its number (another tool reset `user_version`):
/// every revision runs again, idempotently: nothing is made twice and no backfill rewrites what
/// the hub wrote since (an incremental run stays incremental, a renewed lease stays renewed).
#[test]
fn revisions_run_again_on_a_header_reset_change_no_row() {
    let dir = TestDir::new();
    drop(open_hub(&dir, &clock()));
    let conn = Connection::open(dir.db()).unwrap();
    conn.execute_batch(
        "INSERT INTO sync_run (query, started_at, status, full, kind, scope)
           VALUES ('project = AURORA AND updated >= 1', '2026-01-04T00:00:00Z', 'done', 0, 'incremental', 'project = AURORA');
         INSERT INTO batch (title, author, created_at) VALUES ('план', 'ivanov', '2026-01-03T00:00:00Z');
         INSERT INTO command (batch_id, seq, type, params, status, claimed_at, lease_at, deliveries)
           VALUES (1, 1, 'comment', '{\"key\":\"AURORA-1\",\"body\":\"x\"}', 'claimed',
                   '2026-01-03T00:00:01Z', '2026-01-03T00:09:00Z', 1);
         PRAGMA user_version = 0;",
    )
    .unwrap();
    drop(conn);
    run_ok(&dir.db(), &["migrate"]);
    let conn = Connection::open(dir.db()).unwrap();
    assert_v4_shape(&conn);
    let revision: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(revision, i64::from(jira_hub::service::SCHEMA_REVISION));
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM sync_run WHERE kind = 'incremental' AND scope = 'project = AURORA'"
        ),
        1
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM command WHERE lease_at = '2026-01-03T00:09:00Z'"
        ),
        1
    );
}

/// Revision 10: a sync run knows its batch; a database of the revision before gets its runs'
/// batches filled in from their commands.
#[test]
fn sync_runs_learn_their_batch_from_their_command() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    let agent = Agent::new("agent-m");
    let batch = hub.enqueue_refresh(None, "ivanov").unwrap();
    let claim = agent.claim(&mut hub, 1);
    let command = &claim.commands[0];
    agent.report(
        &mut hub,
        serde_json::json!([{"command_id": command.id, "delivery": command.delivery,
            "status": "done", "result": {"total": 0, "boards": []}}]),
    );
    let runs = hub.sync_runs().unwrap();
    assert_eq!(runs[0].run.batch_id, Some(batch.id), "a new run knows it");
    drop(hub);
    // The revision before: no column, the version one back.
    let conn = Connection::open(dir.db()).unwrap();
    let revision: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    conn.execute_batch(&format!(
        "DROP INDEX sync_run_batch; ALTER TABLE sync_run DROP COLUMN batch_id;
         PRAGMA user_version = {};",
        revision - 1
    ))
    .unwrap();
    drop(conn);
    let mut hub = open_hub(&dir, &clock);
    let runs = hub.sync_runs().unwrap();
    assert_eq!(runs[0].run.batch_id, Some(batch.id), "backfilled");
}

/// A routine upgrade from an older revision of v4 (the hub's own database two revisions back)
/// says what happened: `status` names both revisions, `migrate` prints `v4r12 -> v4r…` with no
/// "another program" warning, and its backup's name carries the revision it was made of.
/// Before, the older revision read as a database lacking what its number says (the warning),
/// and the backup was `…-schema-v4.sqlite` whatever the revision.
#[test]
fn an_older_revision_migrates_saying_from_which() {
    let dir = TestDir::new();
    run_ok(
        &dir.db(),
        &["init", "--config", example_config().to_str().unwrap()],
    );
    // Revision 12: without what revisions 13 to 15 added.
    let conn = Connection::open(dir.db()).unwrap();
    conn.execute_batch(
        "DROP TABLE id_issued;
         ALTER TABLE command DROP COLUMN released_refusal;
         ALTER TABLE command DROP COLUMN uncounted_releases;
         ALTER TABLE command DROP COLUMN uncounted_since;
         PRAGMA user_version = 12;",
    )
    .unwrap();
    drop(conn);
    let current = format!("v4r{}", jira_hub::service::SCHEMA_REVISION);
    let status = run(&dir.db(), &["status"]);
    assert!(
        status.stderr.contains("v4r12") && status.stderr.contains(&current),
        "{status:?}"
    );
    let out = run_ok(&dir.db(), &["migrate"]);
    assert!(
        out.stdout.contains(&format!("schema v4r12 -> {current}")),
        "{out:?}"
    );
    assert!(!out.stdout.contains("warning"), "{out:?}");
    let backups = dir.backups();
    assert!(
        backups.iter().any(|name| name.contains("-schema-v4r12")),
        "{backups:?}"
    );
    let again = run_ok(&dir.db(), &["migrate"]);
    assert!(
        again
            .stdout
            .contains(&format!("schema {current}: up to date")),
        "{again:?}"
    );
    // `status` names the schema as `migrate` does.
    let status = run_ok(&dir.db(), &["status"]);
    assert!(
        status.stdout.contains(&format!("(schema {current})")),
        "{status:?}"
    );
}
