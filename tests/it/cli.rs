//! The command line as an operator meets it: `init`, `tokens`, `status`, `backup`, exit codes,
//! `--db` and `JIRA_HUB_DB`.

use crate::support::*;
use rusqlite::Connection;
use serde_json::Value;

fn config_without_bug(dir: &TestDir) -> std::path::PathBuf {
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(example_config()).unwrap()).unwrap();
    let map = config.as_object_mut().unwrap();
    map.remove("issue_type_bug");
    map.remove("issue_type_bug_id");
    let path = dir.path().join("no-bug.json");
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
    path
}

fn tokens_of(db: &std::path::Path) -> (String, String) {
    let out = run_ok(db, &["tokens"]);
    let mut lines = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().last().unwrap().to_string());
    (lines.next().unwrap(), lines.next().unwrap())
}

#[test]
fn init_imports_the_example_config() {
    let dir = TestDir::new();
    let out = run_ok(
        &dir.db(),
        &["init", "--config", example_config().to_str().unwrap()],
    );
    assert!(out.stdout.contains("projects:    AWPCA"), "{out:?}");
    assert!(
        out.stdout.contains("jira_password"),
        "says what it left out: {out:?}"
    );
    let conn = Connection::open(dir.db()).unwrap();
    assert_eq!(setting(&conn, "project_key").as_deref(), Some("\"AURORA\""));
    let issue_types: Value = serde_json::from_str(&setting(&conn, "issue_types").unwrap()).unwrap();
    assert_eq!(issue_types["bug"]["name"], "Ошибка");
    assert_eq!(issue_types["task"]["id"], "10002");
    assert!(
        setting(&conn, "base_jql").is_none(),
        "a new database has no base_jql key"
    );
    assert!(setting(&conn, "board_id").is_none());
    assert_eq!(
        count(&conn, "SELECT board_id FROM project WHERE label = 'AWPCA'"),
        4216
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM setting WHERE key LIKE 'jira%' OR key IN ('sync_interval_seconds', 'log_file')"
        ),
        0
    );
    drop(conn);
    // Not one byte of the credentials anywhere in the database or its WAL.
    for file in ["hub.sqlite", "hub.sqlite-wal"] {
        let bytes = std::fs::read(dir.path().join("data").join(file)).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains("change-me") && !text.contains("svc-jira-sync"),
            "{file}"
        );
    }
    let (agent, client) = tokens_of(&dir.db());
    assert_eq!(agent.len(), 64);
    assert_ne!(agent, client);
    assert!(out.stdout.contains(&agent) && out.stdout.contains(&client));
}

/// «Конфиг без ключей ошибки»: no bug type at all.
#[test]
fn init_without_bug_keys_has_no_bug_type() {
    let dir = TestDir::new();
    run_ok(
        &dir.db(),
        &[
            "init",
            "--config",
            config_without_bug(&dir).to_str().unwrap(),
        ],
    );
    let out = run_ok(&dir.db(), &["settings", "get", "issue_types"]);
    let issue_types: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        issue_types.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["task", "epic"]
    );
}

#[test]
fn init_refuses_a_second_time_unless_forced() {
    let dir = TestDir::new();
    let config = example_config();
    let config = config.to_str().unwrap();
    run_ok(&dir.db(), &["init", "--config", config]);
    let tokens = tokens_of(&dir.db());
    let before = snapshot(&dir.db());

    let out = run(&dir.db(), &["init", "--config", config]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("уже есть настройки") && out.stderr.contains("--force"),
        "{out:?}"
    );
    assert_eq!(snapshot(&dir.db()), before, "nothing changed");

    let out = run_ok(&dir.db(), &["init", "--if-new", "--config", config]);
    assert!(out.stdout.contains("nothing changed"));
    assert_eq!(snapshot(&dir.db()), before);

    run_ok(&dir.db(), &["settings", "set", "backup_keep", "3"]);
    run_ok(&dir.db(), &["init", "--force", "--config", config]);
    let out = run_ok(&dir.db(), &["settings", "get", "backup_keep"]);
    assert_eq!(out.stdout.trim(), "14", "the config's value is back");
    assert_eq!(
        tokens_of(&dir.db()),
        tokens,
        "tokens survive a forced re-import"
    );
    let conn = Connection::open(dir.db()).unwrap();
    assert_eq!(count(&conn, "SELECT count(*) FROM project"), 1);
    assert_eq!(setting(&conn, "settings_version").as_deref(), Some("3"));
}

#[test]
fn init_refuses_a_bad_config_and_stores_nothing() {
    let dir = TestDir::new();
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(example_config()).unwrap()).unwrap();
    config["pacing"]["max_deliveries"] = Value::from(0);
    let path = dir.path().join("bad.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let out = run(&dir.db(), &["init", "--config", path.to_str().unwrap()]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.starts_with("jira-hub: pacing.max_deliveries: "),
        "{out:?}"
    );
    let conn = Connection::open(dir.db()).unwrap();
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM setting WHERE key IN ('tokens', 'project_key')"
        ),
        0
    );
    assert_eq!(count(&conn, "SELECT count(*) FROM project"), 0);

    std::fs::write(&path, "{ not json").unwrap();
    let out = run(&dir.db(), &["init", "--config", path.to_str().unwrap()]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("не JSON"), "{out:?}");
    let out = run(&dir.db(), &["init", "--config", "/nonexistent/config.json"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("не удалось прочитать конфиг"),
        "{out:?}"
    );
}

#[test]
fn tokens_rotate_one_at_a_time() {
    let dir = TestDir::new();
    let out = run(&dir.db(), &["tokens"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("базы данных нет"), "{out:?}");
    run_ok(&dir.db(), &["migrate"]);
    let out = run(&dir.db(), &["tokens"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("jira-hub init"), "{out:?}");
    run_ok(
        &dir.db(),
        &["init", "--config", example_config().to_str().unwrap()],
    );
    let (agent, client) = tokens_of(&dir.db());
    run_ok(&dir.db(), &["tokens", "--rotate", "agent"]);
    let (agent2, client2) = tokens_of(&dir.db());
    assert_ne!(agent, agent2);
    assert_eq!(client, client2);
    run_ok(&dir.db(), &["tokens", "--rotate", "client"]);
    let (agent3, client3) = tokens_of(&dir.db());
    assert_eq!(agent2, agent3);
    assert_ne!(client2, client3);
}

#[test]
fn status_and_backup() {
    let dir = TestDir::new();
    drop(build_db(
        &dir.db(),
        3,
        &format!("{}{COMMON_ROWS}", v3_settings_sql()),
    ));
    let conn = Connection::open(dir.db()).unwrap();
    conn.execute_batch(
        "INSERT INTO sync_run (query, started_at, finished_at, status, issues_seen)
         VALUES ('project = AURORA AND labels = AWPCA', '2026-01-04T00:00:00Z', '2026-01-04T00:05:00Z', 'done', 2);
         INSERT INTO agent_status (agent, version, last_seen_at, jira_ok) VALUES ('agent-1', '1.4.0', '2026-01-05T00:00:00Z', 1);",
    )
    .unwrap();
    drop(conn);
    let relay = dir.path().join("relay");
    run_ok(
        &dir.db(),
        &[
            "settings",
            "set",
            "relay_dir",
            &format!("\"{}\"", relay.display()),
        ],
    );
    let out = run_ok(&dir.db(), &["status"]);
    let schema = format!("(schema v4r{})", jira_hub::service::SCHEMA_REVISION);
    for expected in [
        schema.as_str(),
        "AWPCA                АРМ КА (board 4216)",
        "base JQL:     project = AURORA AND labels in (\"AWPCA\")",
        "mirror:       2 issues, 2 notes",
        "claimed 1, done 1, queued 1",
        "full refresh: 2026-01-04 00:05:00 UTC (2 issues)",
        "agent-1 1.4.0",
        "missing",
    ] {
        assert!(
            out.stdout.contains(expected),
            "{expected:?} in {}",
            out.stdout
        );
    }
    assert!(!relay.exists(), "status never creates the relay folder");
    std::fs::create_dir_all(relay.join("inbox")).unwrap();
    std::fs::write(relay.join("inbox/claim-1.json"), "{}").unwrap();
    let out = run_ok(&dir.db(), &["status"]);
    // A claim waiting for work is not a file waiting to be handled (the console's count).
    assert!(
        out.stdout
            .contains("inbox 0 to handle + 1 claim waiting for work, outbox absent"),
        "{}",
        out.stdout
    );
    // The archive counts its files, not its day folders.
    for day in ["2026-11-29", "2026-11-30"] {
        std::fs::create_dir_all(relay.join("archive").join(day)).unwrap();
        for n in 0..3 {
            std::fs::write(relay.join(format!("archive/{day}/report-{n}.json")), "{}").unwrap();
        }
    }
    std::fs::write(relay.join("inbox/report-2.json"), "{}").unwrap();
    let out = run_ok(&dir.db(), &["status"]);
    assert!(
        out.stdout
            .contains("inbox 1 to handle + 1 claim waiting for work, outbox absent, archive 6,"),
        "{}",
        out.stdout
    );

    let out = run_ok(&dir.db(), &["backup"]);
    let path = std::path::PathBuf::from(out.stdout.trim());
    assert!(
        path.to_string_lossy().ends_with("-manual.sqlite"),
        "{out:?}"
    );
    let backup = Connection::open(&path).unwrap();
    assert_eq!(count(&backup, "SELECT count(*) FROM issue"), 2);
    assert_eq!(setting(&backup, "schema_version").as_deref(), Some("4"));
    // A second backup in the same second does not overwrite the first.
    let second = run_ok(&dir.db(), &["backup"]);
    assert_ne!(second.stdout, out.stdout);
}

#[test]
fn usage_errors_exit_2_and_the_db_comes_from_the_environment() {
    let dir = TestDir::new();
    let out = run(&dir.db(), &["projects", "add", "ONLY_LABEL"]);
    assert_eq!(out.code, 2, "{out:?}");
    let out = run(&dir.db(), &["tokens", "--rotate", "nobody"]);
    assert_eq!(out.code, 2, "{out:?}");

    let db = dir.path().join("env-data/hub.sqlite");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_jira-hub"))
        .arg("migrate")
        .env("JIRA_HUB_DB", &db)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(db.exists());
}

/// The daemon's daily backup: made when the newest is a day old, the newest `backup_keep` kept,
/// migration backups never pruned.
#[test]
fn periodic_backups_keep_backup_keep() {
    let dir = TestDir::new();
    drop(build_db(&dir.db(), 3, &v3_settings_sql()));
    let clock = clock();
    let mut hub = open_hub(&dir, &clock);
    hub.update_settings(serde_json::json!({"backup_keep": 2}).as_object().unwrap())
        .unwrap();
    assert!(hub.periodic_backup().unwrap().is_some(), "none yet: due");
    clock.advance(time::Duration::hours(23));
    assert!(hub.periodic_backup().unwrap().is_none(), "not a day old");
    for _ in 0..3 {
        clock.advance(time::Duration::hours(24));
        let made = hub.periodic_backup().unwrap().unwrap();
        assert_eq!(
            count(
                &Connection::open(&made).unwrap(),
                "SELECT count(*) FROM project"
            ),
            1
        );
    }
    let backups = dir.backups();
    let periodic: Vec<_> = backups
        .iter()
        .filter(|n| n.ends_with("-periodic.sqlite"))
        .collect();
    assert_eq!(periodic.len(), 2, "{backups:?}");
    assert!(
        periodic[1].starts_with("20261203-"),
        "the newest are kept: {backups:?}"
    );
    assert_eq!(
        backups
            .iter()
            .filter(|n| n.ends_with("-schema-v3.sqlite"))
            .count(),
        1,
        "the migration backup stays"
    );
}

/// Only `init`, `migrate` and `serve` create a database: every other command, reading or
/// writing, says there is none and leaves no file behind (a typo in `--db` must show).
#[test]
fn commands_other_than_init_migrate_serve_never_create_a_database() {
    let dir = TestDir::new();
    let db = dir.path().join("typo/hub.sqlite");
    for args in [
        &["status"][..],
        &["settings", "get"],
        &["settings", "get", "project_key"],
        &["settings", "set", "backup_keep", "3"],
        &["projects", "list"],
        &["projects", "add", "AWPCA", "АРМ КА"],
        &["tokens"],
        &["tokens", "--rotate", "agent"],
        &["backup"],
    ] {
        let out = run(&db, args);
        assert_eq!(out.code, 1, "{args:?}: {out:?}");
        assert!(
            out.stderr.contains("базы данных нет") && out.stderr.contains("typo/hub.sqlite"),
            "{args:?}: {out:?}"
        );
        assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {out:?}");
        assert!(!dir.path().join("typo").exists(), "{args:?} created it");
    }
}

/// Read commands open the database read-only: they work on a backup file, change nothing in it,
/// and (when the tests can drop root) on a data directory the reader cannot write.
#[test]
fn read_commands_work_on_a_backup_and_a_read_only_folder() {
    let dir = TestDir::new();
    run_ok(
        &dir.db(),
        &["init", "--config", example_config().to_str().unwrap()],
    );
    let backup = run_ok(&dir.db(), &["backup"]).stdout.trim().to_string();
    run_ok(&dir.db(), &["settings", "set", "backup_keep", "3"]);
    let before = std::fs::read(&backup).unwrap();
    let out = run_ok(
        std::path::Path::new(&backup),
        &["settings", "get", "backup_keep"],
    );
    assert_eq!(out.stdout.trim(), "14", "the backup's own value");
    run_ok(std::path::Path::new(&backup), &["status"]);
    run_ok(std::path::Path::new(&backup), &["projects", "list"]);
    assert_eq!(std::fs::read(&backup).unwrap(), before, "unchanged");
    let backups = std::path::Path::new(&backup).parent().unwrap();
    assert!(
        std::fs::read_dir(backups).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with("-shm")),
        "no -shm left beside the backup"
    );

    // A data directory nobody but root may write, read as another user.
    let is_root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let setpriv = std::path::Path::new("/usr/bin/setpriv");
    if !is_root || !setpriv.exists() {
        eprintln!("skipped: the read-only folder check needs root and setpriv to drop privileges");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let shared = tempfile::Builder::new()
        .prefix("ro-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = shared.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let db = data.join("hub.sqlite");
    std::fs::copy(&backup, &db).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o555)).unwrap();
    let as_nobody = |args: &[&str]| {
        let out = std::process::Command::new(setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_jira-hub"))
            .arg("--db")
            .arg(&db)
            .args(args)
            .env_remove("JIRA_HUB_DB")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = as_nobody(&["status"]);
    assert_eq!(code, Some(0), "{stdout} {stderr}");
    assert!(stdout.contains("AURORA"), "{stdout}");
    let (code, stdout, _) = as_nobody(&["settings", "get", "project_key"]);
    assert_eq!((code, stdout.trim()), (Some(0), "\"AURORA\""));
    let (code, _, stderr) = as_nobody(&["settings", "set", "backup_keep", "5"]);
    assert_eq!(code, Some(1), "a write is refused: {stderr}");
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A file that is not SQLite is a database this binary cannot run: `serve` exits 3, which the
/// unit does not restart.
#[test]
fn serve_on_a_file_that_is_not_sqlite_exits_3() {
    let dir = TestDir::new();
    std::fs::create_dir_all(dir.db().parent().unwrap()).unwrap();
    std::fs::write(
        dir.db(),
        "this is not a database, it is a note\n".repeat(200),
    )
    .unwrap();
    let out = run(&dir.db(), &["serve", "--listen", "127.0.0.1:0"]);
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("не база данных SQLite"), "{out:?}");
    let out = run(&dir.db(), &["status"]);
    assert_eq!(out.code, 1, "{out:?}");
}

/// `jira-hub status | head -1`: the reader goes away, the command ends quietly, no panic.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    let dir = TestDir::new();
    run_ok(
        &dir.db(),
        &["init", "--config", example_config().to_str().unwrap()],
    );
    for args in [&["status"][..], &["settings", "get"], &["tokens"]] {
        let mut child = hub_command(&dir.db(), args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    }
}

/// An error's causes are said once, on one line.
#[test]
fn error_causes_are_not_repeated() {
    let dir = TestDir::new();
    let folder = dir.path().join("a-folder");
    std::fs::create_dir(&folder).unwrap();
    let out = run(&folder, &["migrate"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{out:?}");
    assert_eq!(
        out.stderr.matches("не файл базы данных").count(),
        1,
        "{out:?}"
    );
}

/// `settings get nosuch` and `settings set nosuch 1` say the same thing, in Russian.
#[test]
fn an_unknown_setting_is_named_the_same_way_by_get_and_set() {
    let dir = TestDir::new();
    run_ok(&dir.db(), &["migrate"]);
    let get = run(&dir.db(), &["settings", "get", "nosuch"]);
    let set = run(&dir.db(), &["settings", "set", "nosuch", "1"]);
    assert_eq!((get.code, set.code), (1, 1));
    assert_eq!(get.stderr, set.stderr);
    assert_eq!(get.stderr.trim(), "jira-hub: nosuch: неизвестная настройка");
}

/// The README's service steps 2–3 on this machine, into a scratch root: the user and its 0700
/// data folder exist before `init` runs as that user, and `init --config -` reads a config the
/// user could not open itself.
#[test]
fn the_service_steps_prepare_the_folder_before_init() {
    let tools = [
        "/usr/bin/systemd-sysusers",
        "/usr/bin/systemd-tmpfiles",
        "/usr/bin/setpriv",
    ];
    let is_root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !is_root || tools.iter().any(|t| !std::path::Path::new(t).exists()) {
        eprintln!("skipped: needs root, systemd-sysusers, systemd-tmpfiles and setpriv");
        return;
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let root = tempfile::Builder::new()
        .prefix("svc-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    let repository = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let arg_root = format!("--root={}", root.path().display());
    let status = std::process::Command::new(tools[0])
        .arg(&arg_root)
        .arg(repository.join("systemd/jira-hub.sysusers"))
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let status = std::process::Command::new(tools[1])
        .arg(&arg_root)
        .arg("--create")
        .arg(repository.join("systemd/jira-hub.tmpfiles"))
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let passwd = std::fs::read_to_string(root.path().join("etc/passwd")).unwrap();
    let user = passwd
        .lines()
        .find(|l| l.starts_with("jira-hub:"))
        .expect("the user");
    let uid: u32 = user.split(':').nth(2).unwrap().parse().unwrap();
    let data = root.path().join("var/lib/jira-hub");
    let meta = std::fs::metadata(&data).unwrap();
    assert_eq!((meta.mode() & 0o7777, meta.uid()), (0o700, uid));
    // The README's Prometheus step writes the metrics token into /etc/jira-hub: the package
    // makes it, root's, readable by the service's group (before, the step failed: no folder).
    let etc = std::fs::metadata(root.path().join("etc/jira-hub")).unwrap();
    assert_eq!(
        (etc.mode() & 0o7777, etc.uid(), etc.gid()),
        (0o750, 0, meta.gid())
    );

    // The config stays root's own; init reads it from standard input as the service user.
    let config = root.path().join("config.json");
    std::fs::copy(example_config(), &config).unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    let db = data.join("hub.sqlite");
    let out = std::process::Command::new(tools[2])
        .args([
            format!("--reuid={uid}"),
            format!("--regid={uid}"),
            "--clear-groups".into(),
        ])
        .arg(env!("CARGO_BIN_EXE_jira-hub"))
        .args(["init", "--config", "-"])
        .env("JIRA_HUB_DB", &db)
        .stdin(std::fs::File::open(&config).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::metadata(&db).unwrap().uid(), uid);
    let out = run_ok(&db, &["settings", "get", "project_key"]);
    assert_eq!(out.stdout.trim(), "\"AURORA\"");
}

/// The README's restore: the daemon stopped, the current files moved aside with their WAL, the
/// backup copied in; the daemon starts on the backup's state (a migration backup is migrated
/// again).
#[test]
fn restoring_a_backup_as_the_readme_says() {
    let dir = TestDir::new();
    run_ok(
        &dir.db(),
        &["init", "--config", example_config().to_str().unwrap()],
    );
    run_ok(&dir.db(), &["projects", "add", "BEFORE", "До копии"]);
    let backup = run_ok(&dir.db(), &["backup"]).stdout.trim().to_string();
    run_ok(&dir.db(), &["projects", "add", "AFTER", "После копии"]);
    {
        // A running daemon leaves a WAL behind when it is killed.
        let mut daemon = Daemon::start(&dir.db(), &[]);
        daemon.signal("KILL");
        daemon.wait();
    }
    let data = dir.path().join("data");
    let replaced = data.join("replaced");
    std::fs::create_dir(&replaced).unwrap();
    for name in ["hub.sqlite", "hub.sqlite-wal", "hub.sqlite-shm"] {
        if data.join(name).exists() {
            std::fs::rename(data.join(name), replaced.join(name)).unwrap();
        }
    }
    std::fs::copy(&backup, dir.db()).unwrap();
    let daemon = Daemon::start(&dir.db(), &[]);
    drop(daemon);
    let projects = run_ok(&dir.db(), &["projects", "list"]).stdout;
    assert!(
        projects.contains("BEFORE") && !projects.contains("AFTER"),
        "{projects}"
    );
    let old = run_ok(&replaced.join("hub.sqlite"), &["projects", "list"]).stdout;
    assert!(old.contains("AFTER"), "the replaced state is kept: {old}");

    // A migration backup (old schema) is migrated again when the daemon starts on it.
    let dir = TestDir::new();
    drop(build_db(&dir.db(), 3, &v3_settings_sql()));
    run_ok(&dir.db(), &["migrate"]);
    let migration_backup = dir.backup_path(&dir.backups()[0]);
    std::fs::remove_file(dir.db()).unwrap();
    std::fs::copy(&migration_backup, dir.db()).unwrap();
    let out = run(&dir.db(), &["status"]);
    assert_eq!(
        out.code, 1,
        "read-only status asks for a migration: {out:?}"
    );
    assert!(
        out.stderr.contains(&format!(
            "выполните {} --db {} migrate",
            env!("CARGO_BIN_EXE_jira-hub"),
            dir.db().display()
        )),
        "{out:?}"
    );
    drop(Daemon::start(&dir.db(), &[]));
    assert!(run_ok(&dir.db(), &["status"]).stdout.contains("AWPCA"));
}

/// Every `serve` option can come from the environment (`JIRA_HUB_<OPTION>`), for a unit's
/// `EnvironmentFile=`: an out-of-range value from there is refused like one on the command line.
#[test]
fn serve_options_come_from_the_environment() {
    let dir = TestDir::new();
    let out = hub_command(&dir.db(), &["serve", "--listen", "127.0.0.1:0"])
        .env("JIRA_HUB_RELAY_POLL_MS", "5")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("relay-poll-ms"), "{stderr}");
    let out = hub_command(&dir.db(), &["--version"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("commit ") && stdout.contains("schema v4"),
        "{stdout}"
    );
}

/// Under systemd (`JOURNAL_STREAM` set) each log line starts with its syslog priority and has no
/// timestamp of its own, so `journalctl -p warning` works; `--log-format json` writes one object
/// a line.
#[test]
fn log_lines_for_journald_and_for_shippers() {
    let dir = TestDir::new();
    run_ok(&dir.db(), &["migrate"]);
    let out = hub_command(&dir.db(), &["settings", "set", "backup_keep", "3"])
        .env("RUST_LOG", "info")
        .env("JOURNAL_STREAM", "8:12345")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("settings changed"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.starts_with("<6>jira_hub::service: "), "{line}");
    assert!(
        !line.contains("2026-") && !line.contains('\u{1b}'),
        "{line}"
    );

    let out = hub_command(
        &dir.db(),
        &[
            "--log-format",
            "json",
            "settings",
            "set",
            "backup_keep",
            "4",
        ],
    )
    .env("RUST_LOG", "info")
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("settings changed"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let value: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(value["level"], "INFO", "{line}");
    // The message at the top level, as log shippers read it (not under `fields`).
    assert_eq!(value["message"], "settings changed", "{line}");
    assert!(value.get("fields").is_none(), "{line}");
}

/// `dist/` holds the completions and man pages the Debian package installs; they are what the
/// binary makes from its CLI definitions now (`scripts/dist.sh` regenerates them).
#[test]
fn completions_and_man_pages_in_dist_are_current() {
    let dir = TestDir::new();
    let dist = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("dist");
    let stale = "dist/ is stale: run scripts/dist.sh and commit dist/";
    for (shell, file) in [
        ("bash", "jira-hub.bash"),
        ("zsh", "_jira-hub"),
        ("fish", "jira-hub.fish"),
    ] {
        let out = run_ok(&dir.db(), &["completions", shell]);
        let committed = std::fs::read_to_string(dist.join("completions").join(file)).unwrap();
        assert!(out.stdout == committed, "{shell}: {stale}");
    }
    let pages = dir.path().join("man");
    run_ok(&dir.db(), &["man", "--dir", pages.to_str().unwrap()]);
    let list = |folder: &std::path::Path| {
        let mut names: Vec<String> = std::fs::read_dir(folder)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    let made = list(&pages);
    assert_eq!(made, list(&dist.join("man")), "{stale}");
    assert!(made.contains(&"jira-hub-refresh.1".to_string()), "{made:?}");
    for name in &made {
        assert!(
            std::fs::read(pages.join(name)).unwrap()
                == std::fs::read(dist.join("man").join(name)).unwrap(),
            "{name}: {stale}"
        );
    }
    for unit in ["jira-hub.service", "jira-hub-agent.service"] {
        let source = std::fs::read_to_string(dist.join("../systemd").join(unit)).unwrap();
        let packaged = std::fs::read_to_string(dist.join("systemd").join(unit)).unwrap();
        assert!(
            packaged == source.replace("/usr/local/bin/jira-hub", "/usr/bin/jira-hub"),
            "{unit}: {stale}"
        );
        assert!(packaged.contains("ExecStart=/usr/bin/jira-hub "), "{unit}");
    }
    let page = run_ok(&dir.db(), &["man"]).stdout;
    assert!(
        page.starts_with(".ie") || page.contains(".TH jira-hub 1"),
        "{page}"
    );

    // The bash completion completes subcommands and their options.
    if std::process::Command::new("bash")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skipped the bash completion check: bash is not installed");
        return;
    }
    let complete = |words: &str| {
        let script = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
             COMP_LINE=\"{words}\"; COMP_POINT=${{#COMP_LINE}}; \
             _jira__hub jira-hub \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             echo \"${{COMPREPLY[@]}}\"",
            dist.join("completions/jira-hub.bash").display()
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &script])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let subcommands = complete("jira-hub ba");
    assert!(
        subcommands.contains("batches") && subcommands.contains("backup"),
        "{subcommands}"
    );
    assert!(complete("jira-hub refresh --w").contains("--wait"));
}

/// A folder's mode, mtime and entries (each with its mode, size and mtime), to show that a
/// command left it exactly as it was.
fn folder_state(dir: &std::path::Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let describe = |path: &std::path::Path| {
        let meta = std::fs::symlink_metadata(path).unwrap();
        format!(
            "{} mode {:o} size {} mtime {}.{}",
            path.display(),
            meta.mode(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec()
        )
    };
    let mut state = vec![describe(dir)];
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    state.extend(entries.iter().map(|p| describe(p)));
    state
}

/// «A wrong `--db` changes a folder that is not the hub's»: every command that takes
/// `--db`, given a file that is not a hub's database (a text file, an SQLite file of another
/// program, a folder), refuses it and leaves its folder's mode, mtime and entries as they were:
/// no chmod 0700, no `backups/`, no lock file, no `-wal`.
#[test]
fn a_wrong_db_leaves_its_folder_as_it_was() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TestDir::new();
    let notes_dir = dir.path().join("notes");
    std::fs::create_dir(&notes_dir).unwrap();
    std::fs::set_permissions(&notes_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let notes = notes_dir.join("notes.txt");
    std::fs::write(&notes, "купить молока\n".repeat(100)).unwrap();
    let other = notes_dir.join("other.sqlite");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    let folder = notes_dir.join("folder");
    std::fs::create_dir(&folder).unwrap();
    // Entries' mtimes in the past, so a touch would show.
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for path in [&notes, &other, &folder, &notes_dir] {
        std::fs::File::open(path)
            .unwrap()
            .set_modified(old)
            .unwrap_or(());
    }
    let config = example_config();
    let config = config.to_str().unwrap();
    let commands: [&[&str]; 11] = [
        &["serve", "--listen", "127.0.0.1:0"],
        &["migrate"],
        &["init", "--config", config],
        &["status"],
        &["settings", "get"],
        &["projects", "list"],
        &["tokens"],
        &["tokens", "--rotate", "agent"],
        &["backup"],
        &["batches", "list"],
        &["commands", "failed"],
    ];
    for db in [&notes, &other, &folder] {
        for args in commands {
            let before = folder_state(&notes_dir);
            let out = run(db, args);
            assert_ne!(out.code, 0, "{} {args:?}: {out:?}", db.display());
            assert!(
                out.stderr.contains(&db.display().to_string()),
                "{} {args:?} names the file: {out:?}",
                db.display()
            );
            assert_eq!(
                folder_state(&notes_dir),
                before,
                "{} {args:?} changed the folder: {out:?}",
                db.display()
            );
        }
    }
}

/// `init` (and `migrate`, `serve`) make the data folder itself when its parent exists (the quick
/// start's `./data`), saying so, but never a missing path to it.
#[test]
fn a_db_in_a_missing_tree_is_refused_naming_the_folder() {
    let dir = TestDir::new();
    let config = example_config();
    let config = config.to_str().unwrap();
    let deep = dir.path().join("srv/jira-hub/data/hub.sqlite");
    for args in [
        &["init", "--config", config][..],
        &["migrate"],
        &["serve", "--listen", "127.0.0.1:0"],
    ] {
        let out = run(&deep, args);
        assert_ne!(out.code, 0, "{args:?}: {out:?}");
        assert!(
            out.stderr
                .contains(&dir.path().join("srv/jira-hub").display().to_string())
                && out.stderr.contains("нет"),
            "{args:?}: {out:?}"
        );
        assert!(
            !dir.path().join("srv").exists(),
            "{args:?} made the tree: {out:?}"
        );
    }
    let out = hub_command(&dir.db(), &["init", "--config", config])
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("created the data folder")
            && stderr.contains(&dir.path().join("data").display().to_string()),
        "{stderr}"
    );
}
/// `serve` on a database nobody initialised starts (the operator may run `init` now), but says
/// so: the banner, a 503 from `/ready`, a 401 naming the cause; `init` on the running hub makes
/// it ready at once.
#[test]
fn serve_on_a_database_never_initialised_says_so_and_recovers_after_init() {
    let dir = TestDir::new();
    let daemon = Daemon::start(&dir.db(), &[]);
    let (status, body) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(status, 503, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("не инициализирована"),
        "{body}"
    );
    let (status, body) = http(&daemon.address, "GET", "/batches", Some("guess"), None);
    assert_eq!(status, 401, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("нет токенов"),
        "{body}"
    );
    assert_eq!(http(&daemon.address, "GET", "/health", None, None).0, 200);

    run_ok(
        &dir.db(),
        &["init", "--config", example_config().to_str().unwrap()],
    );
    let (_, client) = tokens_of(&dir.db());
    let (status, body) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(status, 200, "{body}");
    // The hub keeps its tokens in memory and reads them again once another process committed
    // (looked at every quarter second): the new tokens are in force within seconds.
    let initialised = std::time::Instant::now();
    loop {
        let (status, body) = http(&daemon.address, "GET", "/batches", Some(&client), None);
        if status == 200 {
            break;
        }
        assert_eq!(status, 401, "{body}");
        assert!(
            initialised.elapsed() < std::time::Duration::from_secs(5),
            "the tokens made by init were not taken: {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn the_banner_of_serve_says_when_there_are_no_tokens() {
    use std::io::BufRead;
    let dir = TestDir::new();
    let mut child = hub_command(&dir.db(), &["serve", "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let banner: Vec<String> = std::io::BufReader::new(stdout)
        .lines()
        .take(4)
        .map(Result::unwrap)
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        banner[3].contains("NONE") && banner[3].contains("init --config"),
        "{banner:?}"
    );
}

/// `relay inspect` of a path that is not there is an error naming it; with the hub's database it
/// judges a request's token as the daemon does (a wrong one is not "valid"), and so does
/// `relay validate`.
#[test]
fn relay_inspect_names_a_missing_path_and_judges_tokens_as_the_hub_does() {
    let dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&dir);
    let out = run(&dir.db(), &["relay", "inspect", "/nonexistent-relay-path"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("/nonexistent-relay-path"), "{out:?}");

    drop_file(
        &relay.join("inbox"),
        "claim-wrong.json",
        &claim_file("wrong", "not-the-token", 1),
    );
    drop_file(
        &relay.join("inbox"),
        "claim-right.json",
        &claim_file("right", &token, 1),
    );
    let out = run_ok(
        &dir.db(),
        &["relay", "inspect", relay.join("inbox").to_str().unwrap()],
    );
    let line = |name: &str| {
        out.stdout
            .lines()
            .find(|line| line.contains(name))
            .unwrap_or_else(|| panic!("{name}: {}", out.stdout))
            .to_string()
    };
    assert!(line("claim-wrong").contains("INVALID"), "{}", out.stdout);
    assert!(line("claim-wrong").contains("токен"), "{}", out.stdout);
    assert!(!line("claim-right").contains("INVALID"), "{}", out.stdout);
    // English nouns agree with their numbers: not "1 commands".
    assert!(
        line("claim-right").contains("up to 1 command,"),
        "{}",
        out.stdout
    );
    // The agent's claim the hub has not answered waits for work: not "not applied".
    assert!(
        line("claim-right").contains("waiting claim, not answered yet")
            && !line("claim-right").contains("not applied"),
        "{}",
        out.stdout
    );
    let out = run(
        &dir.db(),
        &["relay", "validate", relay.join("inbox").to_str().unwrap()],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("2 files, 1 invalid"), "{out:?}");

    // An empty folder: said, not an empty table alone.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = run_ok(&dir.db(), &["relay", "inspect", empty.to_str().unwrap()]);
    assert!(out.stderr.contains("нет файлов папки обмена"), "{out:?}");
}

/// `serve --allowed-host` and `--public-url` (or their environment variables) name the hosts the
/// console and `/metrics` answer to besides IP addresses and localhost; a bad URL is a usage
/// error.
#[test]
fn serve_answers_to_the_hosts_it_was_given() {
    use std::io::{Read, Write};
    let dir = TestDir::new();
    run_ok(
        &dir.db(),
        &["init", "--config", example_config().to_str().unwrap()],
    );
    let out = run(
        &dir.db(),
        &["serve", "--public-url", "ftp://hub.example.com"],
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("https://hub.example.com"), "{out:?}");

    let daemon = Daemon::start(
        &dir.db(),
        &[
            "--allowed-host",
            "hub.example.com",
            "--public-url",
            "https://console.example.com",
        ],
    );
    let status = |host: &str| {
        let mut stream = std::net::TcpStream::connect(&daemon.address).unwrap();
        write!(
            stream,
            "GET /metrics HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer.split_whitespace().nth(1).unwrap().to_string()
    };
    assert_eq!(status("hub.example.com"), "200");
    assert_eq!(status("console.example.com"), "200");
    assert_eq!(status(&daemon.address), "200");
    assert_eq!(status("evil.example"), "403");
}
/// A command other than `serve` and `agent` answers on stdout and logs nothing on stderr unless
/// something went wrong (`RUST_LOG` still turns the log up); hints name the program as it was
/// started: its path when run by one (a clone's `target/…/jira-hub`), else `jira-hub`.
#[test]
fn commands_answer_on_stdout_log_only_warnings_and_hint_the_program_as_started() {
    let dir = TestDir::new();
    let db = dir.db();
    let quiet = |args: &[&str]| {
        let output = hub_command(&db, args)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}: {output:?}");
        (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (stdout, stderr) = quiet(&["migrate"]);
    assert!(!stdout.is_empty());
    assert_eq!(stderr, "", "migrate logged at info");
    let (stdout, stderr) = quiet(&["status"]);
    assert_eq!(stderr, "");
    let binary = env!("CARGO_BIN_EXE_jira-hub");
    assert!(
        stdout.contains(&format!(
            "not initialised: run {binary} --db {} init --config FILE",
            db.display()
        )),
        "{stdout}"
    );
    let config = example_config();
    let (stdout, stderr) = quiet(&["init", "--config", config.to_str().unwrap()]);
    assert!(stdout.contains("imported:"), "{stdout}");
    assert_eq!(stderr, "", "init logged at info");
    let (_, stderr) = quiet(&["refresh"]);
    assert_eq!(stderr, "", "refresh logged at info");
    // RUST_LOG turns it up.
    let output = hub_command(&db, &["refresh"])
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("INFO"),
        "{output:?}"
    );

    // Found in PATH: the hint says `jira-hub`.
    let bin_dir = std::path::Path::new(binary).parent().unwrap();
    let output = std::process::Command::new("jira-hub")
        .env("PATH", bin_dir)
        .env_remove("RUST_LOG")
        .args(["--db", db.to_str().unwrap(), "settings", "get", "tokens"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "jira-hub: tokens: токены показывает jira-hub tokens",
        "{output:?}"
    );
    let output = run(&db, &["settings", "get", "tokens"]);
    assert!(
        output
            .stderr
            .contains(&format!("токены показывает {binary} tokens")),
        "{output:?}"
    );
}

/// `demo --help` puts the console at `/`; the commands that open no database
/// do not list `--db` (still accepted before them, and ignored), the others do.
#[test]
fn help_lists_db_only_where_it_is_used_and_puts_the_console_at_the_root() {
    let help = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_jira-hub"))
            .args(args)
            .arg("--help")
            .env_remove("JIRA_HUB_DB")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let demo = help(&["demo"]);
    assert!(demo.contains("the console at /)"), "{demo}");
    assert!(!demo.contains("/ui/"), "{demo}");
    for args in [
        &["demo"][..],
        &["agent"],
        &["man"],
        &["completions"],
        &["relay", "init"],
    ] {
        let text = help(args);
        assert!(!text.contains("--db"), "{args:?} lists --db:\n{text}");
    }
    for args in [
        &["status"][..],
        &["batches", "list"],
        &["tokens"],
        &["refresh"],
        &["serve"],
    ] {
        let text = help(args);
        assert!(
            text.contains("--db <DB>"),
            "{args:?} does not list --db:\n{text}"
        );
    }
    // Given anyway, before the command, it is accepted and ignored.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jira-hub"))
        .args(["--db", "/nonexistent/hub.sqlite", "man"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// `tokens --rotate agent` says what to do next on the agent's side (the credstore file, and
/// the restart the unit needs: it reads its credentials only at start), and the README's
/// chores are typed as the service's user with `runuser`, never `sudo`, with the rotation of
/// each credential in one place.
#[test]
fn a_rotation_says_what_to_do_next_and_the_readme_runs_chores_as_the_service() {
    let dir = TestDir::new();
    run_ok(
        &dir.db(),
        &["init", "--config", example_config().to_str().unwrap()],
    );
    let out = run_ok(&dir.db(), &["tokens", "--rotate", "agent"]);
    assert!(
        out.stdout
            .contains("/etc/credstore/jira-hub-agent.agent_token")
            && out.stdout.contains("systemctl restart jira-hub-agent"),
        "{out:?}"
    );
    let out = run_ok(&dir.db(), &["tokens", "--rotate", "client"]);
    assert!(out.stdout.contains("next:"), "{out:?}");
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .unwrap();
    assert!(
        !readme
            .lines()
            .any(|line| line.trim_start().starts_with("sudo ")),
        "a README line runs sudo"
    );
    assert!(readme.contains(
        "runuser -u jira-hub -- jira-hub --db /var/lib/jira-hub/hub.sqlite restore \"$B\""
    ));
    assert!(
        readme.contains("tokens --rotate agent") && readme.contains("### Rotating a credential")
    );
}

/// A chore run by root in a data folder the service's user owns is refused, naming the user and
/// the `runuser` line to type, and makes nothing: before, `backup` as root left a root-owned
/// 0600 copy the service could not read back, and `restore` a root-owned `hub.sqlite` the
/// service could not start on. Skipped, saying so, when not run as root.
#[test]
fn chores_as_root_in_the_services_folder_are_refused_naming_the_user() {
    use std::os::unix::fs::MetadataExt;
    let dir = TestDir::new();
    run_ok(
        &dir.db(),
        &["init", "--config", example_config().to_str().unwrap()],
    );
    let data = dir.db().parent().unwrap().to_path_buf();
    if std::fs::metadata(&data).unwrap().uid() != 0 {
        eprintln!("SKIPPED: not run as root");
        return;
    }
    let backup = std::path::PathBuf::from(run_ok(&dir.db(), &["backup"]).stdout.trim());
    let owned = std::process::Command::new("chown")
        .args(["-R", "65534"])
        .arg(&data)
        .status()
        .unwrap();
    assert!(owned.success());
    let before = dir.backups();
    for args in [
        &["backup"][..],
        &["restore", backup.to_str().unwrap()],
        &["migrate"],
        &["batches", "prune"],
        &["tokens", "--rotate", "agent"],
    ] {
        let out = run(&dir.db(), args);
        assert_eq!(out.code, 1, "{args:?}: {out:?}");
        assert!(
            out.stderr.contains("runuser -u nobody -- ")
                && out
                    .stderr
                    .contains(&format!("jira-hub --db {} ", dir.db().display()))
                && out.stderr.contains("ничего не сделано"),
            "{args:?}: {out:?}"
        );
    }
    assert_eq!(dir.backups(), before, "a refused chore made a file");
    // Reading is anyone's: the tokens are printed.
    run_ok(&dir.db(), &["tokens"]);
}

/// An open the kernel refuses for permissions says so: EACCES, the file, its owner, the user we
/// are and the `runuser` line. Before, the service's user read «ошибка ввода-вывода базы, запись
/// не сделана» (SQLite's `SQLITE_CANTOPEN`) for a root-owned 0600 backup it was to restore, and
/// the hub, `backup`, `migrate` and `status` said the same of a root-owned `hub.sqlite`. Needs
/// root and setpriv to act as another user: skipped, saying so, otherwise.
#[test]
fn opens_refused_for_permissions_name_the_file_its_owner_and_the_user() {
    use std::os::unix::fs::PermissionsExt;
    let setpriv = std::path::Path::new("/usr/bin/setpriv");
    if !runs_as_root() || !setpriv.exists() {
        eprintln!("skipped: the permission check needs root and setpriv to act as another user");
        return;
    }
    let dir = TestDir::new();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    run_ok(
        &dir.db(),
        &["init", "--config", example_config().to_str().unwrap()],
    );
    // `backup` as root: a root-owned 0600 copy, then the folder is the service's (nobody's).
    let backup = std::path::PathBuf::from(run_ok(&dir.db(), &["backup"]).stdout.trim());
    let data = dir.db().parent().unwrap().to_path_buf();
    let chown = |args: &[&str], path: &std::path::Path| {
        assert!(
            std::process::Command::new("chown")
                .args(args)
                .arg(path)
                .status()
                .unwrap()
                .success()
        )
    };
    chown(&["-R", "65534:65534"], &data);
    chown(&["0:0"], &backup);
    let as_nobody = |args: &[&str]| {
        let out = std::process::Command::new(setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_jira-hub"))
            .arg("--db")
            .arg(dir.db())
            .args(args)
            .env_remove("JIRA_HUB_DB")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let names = |stderr: &str, file: &std::path::Path, owner: &str| {
        stderr.contains("EACCES")
            && stderr.contains(&file.display().to_string())
            && stderr.contains(&format!("владелец {owner}"))
            && stderr.contains("от пользователя nobody")
            && stderr.contains(&format!("runuser -u {owner} -- "))
            && !stderr.contains("ошибка ввода-вывода")
    };
    let before = dir.backups();
    let (code, stderr) = as_nobody(&["restore", backup.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(names(&stderr, &backup, "root"), "{stderr}");
    assert_eq!(dir.backups(), before, "a refused restore changed backups/");

    // `restore` as root left a root-owned database in the service's folder.
    chown(&["0:0"], &dir.db());
    std::fs::set_permissions(dir.db(), std::fs::Permissions::from_mode(0o600)).unwrap();
    for args in [
        &["status"][..],
        &["backup"],
        &["migrate"],
        &["serve", "--listen", "127.0.0.1:0"],
    ] {
        let (code, stderr) = as_nobody(args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(names(&stderr, &dir.db(), "root"), "{args:?}: {stderr}");
    }
    assert_eq!(dir.backups(), before, "a refused chore made a file");
}

fn runs_as_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
