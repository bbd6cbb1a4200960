//! The database changing under a running hub, and a database gone between two starts: the hub keeps running, says what is wrong, loses nothing it acknowledged, and
//! recovers by itself when the cause goes away.

use crate::support::*;

/// The quick start's first run on a fresh clone makes `./data/`; a database deleted since is not
/// replaced by an empty one on the next start: `serve` and `migrate` refuse, naming the lock file
/// and the newest backup, and create nothing; `init` is the explicit way to start anew.
#[test]
fn a_database_gone_between_two_starts_is_not_silently_made_anew() {
    let dir = TestDir::new();
    let config = example_config();
    let config = config.to_str().unwrap();
    let relay = dir.path().join("relay");
    let relay_arg = relay.display().to_string();
    let quick_start = [
        "--init-from",
        config,
        "--default-relay-dir",
        relay_arg.as_str(),
    ];
    assert!(!dir.db().parent().unwrap().exists());
    let daemon = Daemon::start(&dir.db(), &quick_start);
    let (status, _) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(status, 200);
    drop(daemon);
    run_ok(&dir.db(), &["backup"]);
    std::fs::remove_file(dir.db()).unwrap();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", dir.db().display()));
    }
    let newest = dir.backups().into_iter().max().unwrap();
    for args in [
        &["serve", "--listen", "127.0.0.1:0"][..],
        &["serve", "--listen", "127.0.0.1:0", "--init-from", config],
        &["migrate"],
    ] {
        let out = run(&dir.db(), args);
        assert_eq!(out.code, 1, "{args:?}: {out:?}");
        assert!(
            out.stderr.contains("новая пустая база не создаётся")
                && out.stderr.contains("jira-hub.lock")
                && dir.backups().iter().any(|name| out
                    .stderr
                    .contains(&format!("restore {}", dir.backup_path(name).display()))),
            "{args:?}: {out:?}"
        );
        assert!(!dir.db().exists(), "{args:?} made a database");
    }
    // Restored with the command the refusal names, it serves again.
    let restored = run_ok(
        &dir.db(),
        &["restore", dir.backup_path(&newest).to_str().unwrap()],
    );
    assert!(
        restored
            .stdout
            .contains("previous: (no database was at the path)"),
        "{restored:?}"
    );
    let daemon = Daemon::start(&dir.db(), &quick_start);
    let (status, body) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(status, 200, "{body}");
    drop(daemon);
}

/// Runs `chattr` (`+i`/`-i`: immutable, which stops root too); `false` when this machine cannot
/// (not root, or a file system without the flag), for the test to skip visibly.
fn chattr(flag: &str, path: &std::path::Path) -> bool {
    std::process::Command::new("chattr")
        .arg(flag)
        .arg(path)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// A hub initialised from the example config; its client token.
fn initialised(dir: &TestDir) -> String {
    let hub = ready_hub(dir, &clock());
    let token = hub.tokens().unwrap().unwrap().client;
    drop(hub);
    token
}

fn post_batch(address: &str, token: &str, title: &str) -> (u16, serde_json::Value) {
    http(
        address,
        "POST",
        "/batches",
        Some(token),
        Some(
            &serde_json::json!({"title": title, "author": "ivanov", "commands": [
            {"type": "comment", "params": {"key": "AURORA-1", "body": "x".repeat(2000)}}]}),
        ),
    )
}

/// `count` batches «до копии N», a backup taken by `jira-hub backup` while the hub serves, then
/// `count` batches «после копии N» that the backup does not hold: the backup's path.
fn writes_around_a_backup(
    dir: &TestDir,
    address: &str,
    token: &str,
    count: usize,
) -> std::path::PathBuf {
    for i in 0..count {
        let (status, body) = post_batch(address, token, &format!("до копии {i}"));
        assert_eq!(status, 201, "{body}");
    }
    let backup = std::path::PathBuf::from(run_ok(&dir.db(), &["backup"]).stdout.trim());
    for i in 0..count {
        let (status, body) = post_batch(address, token, &format!("после копии {i}"));
        assert_eq!(status, 201, "{body}");
    }
    backup
}

fn batch_titles(db: &std::path::Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut statement = conn.prepare("SELECT title FROM batch ORDER BY id").unwrap();
    statement
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A second daemon on the same database file reached through a hard link (another folder,
/// another folder lock) is refused: the file itself is locked.
#[test]
fn a_database_reached_through_a_hard_link_is_served_once() {
    let dir = TestDir::new();
    initialised(&dir);
    let _first = Daemon::start(&dir.db(), &[]);
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let link = other.join("hub.sqlite");
    std::fs::hard_link(dir.db(), &link).unwrap();
    let second = run(&link, &["serve", "--listen", "127.0.0.1:0"]);
    assert_eq!(second.code, 1, "{second:?}");
    assert!(
        second.stderr.contains("уже работает другой jira-hub serve")
            && second.stderr.contains("жёсткая или символьная ссылка"),
        "{second:?}"
    );
}

/// The database file renamed away under the daemon: writes are refused (503
/// `database_unavailable`, nothing acknowledged), `/ready` is 503 naming it; renamed back,
/// everything works again by itself. Deleted: the same, and nothing answered 201 is lost.
#[test]
fn a_database_moved_or_deleted_under_the_daemon_takes_no_writes() {
    let dir = TestDir::new();
    let token = initialised(&dir);
    let daemon = Daemon::start(&dir.db(), &[]);
    let (status, body) = post_batch(&daemon.address, &token, "до");
    assert_eq!(status, 201, "{body}");
    let aside = dir.path().join("data/hub.sqlite.aside");
    std::fs::rename(dir.db(), &aside).unwrap();
    let (status, body) = post_batch(&daemon.address, &token, "пока файла нет");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "database_unavailable", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("удалён или заменён"),
        "{body}"
    );
    let (status, ready) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(status, 503, "{ready}");
    assert!(
        ready["error"]["message"]
            .as_str()
            .unwrap()
            .contains("moved"),
        "{ready}"
    );
    let (_, metrics) = http(&daemon.address, "GET", "/metrics", None, None);
    let metrics = metrics
        .as_str()
        .map(String::from)
        .unwrap_or_else(|| metrics.to_string());
    assert!(
        metrics.contains("jira_hub_database_fault{fault=\"moved\"} 1"),
        "{metrics}"
    );
    std::fs::rename(&aside, dir.db()).unwrap();
    let (status, ready) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(status, 200, "{ready}");
    let (status, body) = post_batch(&daemon.address, &token, "после");
    assert_eq!(status, 201, "{body}");

    std::fs::remove_file(dir.db()).unwrap();
    let (status, body) = post_batch(&daemon.address, &token, "в удалённый файл");
    assert_eq!(status, 503, "{body}");
    let (status, _) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(status, 503);
    drop(daemon);
    assert!(!dir.db().exists(), "no database made in its place");
    // What the deleted file held, every acknowledged write included, was copied when the hub
    // found it gone.
    let rescued: Vec<String> = dir
        .backups()
        .into_iter()
        .filter(|name| name.contains("-rescued") && name.ends_with(".sqlite"))
        .collect();
    assert_eq!(rescued.len(), 2, "one copy per loss: {rescued:?}");
    // The second copy (the same second gets `-2`) holds what was written after the file came back.
    let titles: Vec<String> = rescued
        .iter()
        .flat_map(|name| batch_titles(&dir.backup_path(name)))
        .collect();
    assert!(
        titles.iter().any(|t| t == "до") && titles.iter().any(|t| t == "после"),
        "{titles:?}"
    );
    assert!(
        !titles
            .iter()
            .any(|t| t.starts_with("пока") || t.starts_with("в удал"))
    );
}

/// A connection opened while the database file could not be written is read-only for good in
/// SQLite: the hub replaces it before its next write, so once the file is writable again every
/// connection writes (before, half the HTTP pool answered 500 until a restart).
#[test]
fn a_connection_opened_while_the_file_was_read_only_writes_once_it_is_writable() {
    let dir = TestDir::new();
    let hub = ready_hub(&dir, &clock());
    if !chattr("+i", &dir.db()) {
        eprintln!(
            "SKIPPED: chattr +i is not possible here (needs root and a file system with the flag)"
        );
        return;
    }
    let opened = hub.connect();
    assert!(chattr("-i", &dir.db()));
    let mut second = opened.expect("a read-only connection opens");
    second
        .enqueue_batch(&batch(serde_json::json!({"title": "после", "author": "a",
            "commands": [{"type": "comment", "params": {"key": "AURORA-1", "body": "x"}}]})))
        .expect("the file is writable again");
    assert_eq!(batch_titles(&dir.db()), ["после"]);
}

/// The database file and its WAL made immutable under the daemon (read-only even for root):
/// writes are 503 `database_unavailable` with nothing acknowledged, `/ready` and `/metrics` say
/// so; made writable again, the hub finds out by itself and every write succeeds.
#[test]
fn a_database_made_read_only_and_back_under_the_daemon() {
    let dir = TestDir::new();
    let token = initialised(&dir);
    let daemon = Daemon::start(&dir.db(), &[]);
    let (status, body) = post_batch(&daemon.address, &token, "до");
    assert_eq!(status, 201, "{body}");
    let wal = std::path::PathBuf::from(format!("{}-wal", dir.db().display()));
    if !chattr("+i", &dir.db()) {
        eprintln!(
            "SKIPPED: chattr +i is not possible here (needs root and a file system with the flag)"
        );
        return;
    }
    assert!(chattr("+i", &wal));
    let refused = post_batch(&daemon.address, &token, "пока только чтение");
    let ready = http(&daemon.address, "GET", "/ready", None, None);
    let (_, metrics) = http(&daemon.address, "GET", "/metrics", None, None);
    assert!(chattr("-i", &dir.db()) && chattr("-i", &wal));
    assert_eq!(refused.0, 503, "{}", refused.1);
    assert_eq!(refused.1["error"]["code"], "database_unavailable");
    assert_eq!(ready.0, 503, "{}", ready.1);
    let metrics = metrics
        .as_str()
        .map(String::from)
        .unwrap_or_else(|| metrics.to_string());
    assert!(
        metrics.contains("jira_hub_database_fault{fault=\"io_error\"} 1")
            || metrics.contains("jira_hub_database_fault{fault=\"read_only\"} 1"),
        "{metrics}"
    );
    let (status, ready) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(status, 200, "{ready}");
    for i in 0..20 {
        let (status, body) = post_batch(&daemon.address, &token, &format!("после {i}"));
        assert_eq!(status, 201, "{i}: {body}");
    }
    drop(daemon);
    let titles = batch_titles(&dir.db());
    assert_eq!(
        titles.iter().filter(|t| t.starts_with("после")).count(),
        20,
        "{titles:?}"
    );
    assert!(titles.iter().any(|t| t == "до"), "{titles:?}");
    assert!(!titles.iter().any(|t| t == "пока только чтение"));
}

/// A full disk under the daemon (an 8 MiB tmpfs over the data folder, in a mount namespace of
/// its own): writes are 507 `disk_full` with nothing acknowledged, `/ready` says so; space freed,
/// the hub finds out by itself and writes again. Skipped, saying why, where mount namespaces are
/// not allowed.
#[test]
fn a_full_disk_under_the_daemon() {
    use std::io::BufRead;
    let dir = TestDir::new();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let control = dir.path();
    let script = r#"
        mount -t tmpfs -o size=8m tmpfs "$1" || exit 97
        "$0" --db "$1/hub.sqlite" init --config "$3" > "$2/init.out" 2>&1 || exit 98
        "$0" --db "$1/hub.sqlite" serve --listen 127.0.0.1:0 &
        echo $! > "$2/serve.pid"
        while [ ! -e "$2/fill" ]; do sleep 0.02; done
        dd if=/dev/zero of="$1/filler" bs=4096 2>/dev/null
        touch "$2/filled"
        while [ ! -e "$2/free" ]; do sleep 0.02; done
        rm "$1/filler"
        touch "$2/freed"
        wait
    "#;
    let mut child = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", script])
        .arg(env!("CARGO_BIN_EXE_jira-hub"))
        .arg(&data)
        .arg(control)
        .arg(example_config())
        .env_remove("JIRA_HUB_DB")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let Ok(child) = child.as_mut() else {
        eprintln!("SKIPPED: unshare cannot run here");
        return;
    };
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let Some(address) = first
        .rsplit("http://")
        .next()
        .filter(|a| a.starts_with("127."))
    else {
        let status = child.wait().unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        eprintln!(
            "SKIPPED: no tmpfs in a mount namespace here ({status}; unshare -m and mount need CAP_SYS_ADMIN): {stderr}"
        );
        return;
    };
    let address = address.trim().to_string();
    std::thread::spawn(move || for _ in lines {});
    let init = std::fs::read_to_string(control.join("init.out")).unwrap();
    let token = init
        .lines()
        .find_map(|line| line.strip_prefix("client token:"))
        .unwrap()
        .trim()
        .to_string();
    let serve_pid = std::fs::read_to_string(control.join("serve.pid")).unwrap();
    let stop = || {
        let _ = std::process::Command::new("kill")
            .arg(serve_pid.trim())
            .status();
    };
    let (status, body) = post_batch(&address, &token, "до");
    assert_eq!(status, 201, "{body}");
    std::fs::write(control.join("fill"), "").unwrap();
    let wait_for = |name: &str| {
        let started = std::time::Instant::now();
        while !control.join(name).exists() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "{name}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    };
    wait_for("filled");
    let mut accepted = 0;
    let full = (0..400).find_map(|i| {
        let (status, body) = post_batch(&address, &token, &format!("полный диск {i}"));
        if status == 201 {
            accepted += 1;
            None
        } else {
            Some((status, body))
        }
    });
    let Some((status, body)) = full else {
        stop();
        panic!("400 batches fitted on a full 8 MiB disk");
    };
    let ready = http(&address, "GET", "/ready", None, None);
    // Not ready while the disk stays full, past the timers' claim sweep (every 5 s), whose
    // transaction that changed nothing made it say ready.
    let while_full: Vec<u16> = (0..14)
        .map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(500));
            http(&address, "GET", "/ready", None, None).0
        })
        .collect();
    std::fs::write(control.join("free"), "").unwrap();
    wait_for("freed");
    assert!(
        while_full.iter().all(|status| *status == 503),
        "ready while the disk was full: {while_full:?}"
    );
    assert_eq!(status, 507, "{body}");
    assert_eq!(body["error"]["code"], "disk_full", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("нет места"),
        "{body}"
    );
    assert_eq!(ready.0, 503, "{}", ready.1);
    assert!(
        ready.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("disk_full"),
        "{}",
        ready.1
    );
    let (status, ready) = http(&address, "GET", "/ready", None, None);
    assert_eq!(status, 200, "{ready}");
    let (status, body) = post_batch(&address, &token, "после");
    assert_eq!(status, 201, "{body}");
    let (status, batches) = http(&address, "GET", "/batches?limit=500", Some(&token), None);
    stop();
    let _ = child.wait();
    assert_eq!(status, 200, "{batches}");
    let text = batches.to_string();
    assert!(text.contains("после") && text.contains("\"до\""), "{text}");
    for i in 0..accepted {
        assert!(
            text.contains(&format!("полный диск {i}\"")),
            "acknowledged batch {i} lost"
        );
    }
}

/// Every table's row count, and SQLite's own verdict on the file.
fn table_counts(db: &std::path::Path) -> (Vec<(String, i64)>, String) {
    let conn = rusqlite::Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let counts = tables
        .into_iter()
        .map(|table| {
            let n = count(&conn, &format!("SELECT count(*) FROM \"{table}\""));
            (table, n)
        })
        .collect();
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    (counts, integrity)
}

/// How a database file is put back under a serving hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PutBack {
    /// A copy renamed over the file the hub has open.
    RenamedOver,
    /// The file deleted first (the hub finds it gone), then a copy put in its place.
    DeletedThenCopied,
    /// A copy renamed over the file, and the hub stopped at once: nothing was written or asked
    /// since (the hub finds it as it stops).
    RenamedOverAtStop,
}

/// A database replaced by a backup while the hub serves (renamed over it, or the file deleted
/// and the backup copied in): the hub takes no write, and its old WAL never meets the new file,
/// neither while it runs nor when it stops (SIGTERM, or killed), so the restarted hub serves the
/// backup exactly as it was put: every table's row count, `PRAGMA integrity_check` ok. The old
/// WAL and shm are found beside the rescue copy. Before, the old WAL left beside the new file
/// was replayed into it on the next start (a restored 300,001 commands became 31).
#[test]
fn a_database_replaced_by_a_backup_under_the_daemon_is_served_as_it_was_put() {
    for (put_back, stop) in [
        (PutBack::RenamedOver, "TERM"),
        (PutBack::RenamedOver, "KILL"),
        (PutBack::DeletedThenCopied, "TERM"),
        (PutBack::DeletedThenCopied, "KILL"),
        (PutBack::RenamedOverAtStop, "TERM"),
    ] {
        let case = format!("{put_back:?}, SIG{stop}");
        let dir = TestDir::new();
        let token = initialised(&dir);
        let mut daemon = Daemon::start(&dir.db(), &[]);
        // A backup made while the hub serves; the hub goes on writing: its WAL holds pages the
        // backup does not.
        let backup = writes_around_a_backup(&dir, &daemon.address, &token, 30);
        let (expected, integrity) = table_counts(&backup);
        assert_eq!(integrity, "ok", "{case}");
        let staged = dir.path().join("data/restore.tmp");
        std::fs::copy(&backup, &staged).unwrap();
        match put_back {
            PutBack::RenamedOver | PutBack::RenamedOverAtStop => {
                std::fs::rename(&staged, dir.db()).unwrap()
            }
            PutBack::DeletedThenCopied => {
                std::fs::remove_file(dir.db()).unwrap();
                let (status, body) = post_batch(&daemon.address, &token, "в удалённый файл");
                assert_eq!(status, 503, "{case}: {body}");
                std::fs::rename(&staged, dir.db()).unwrap();
            }
        }
        for i in 0..5 {
            if put_back == PutBack::RenamedOverAtStop {
                break;
            }
            let (status, body) = post_batch(&daemon.address, &token, &format!("в замену {i}"));
            assert_eq!(status, 503, "{case}: {body}");
            assert_eq!(
                body["error"]["code"], "database_unavailable",
                "{case}: {body}"
            );
        }
        if put_back != PutBack::RenamedOverAtStop {
            let (status, _) = http(&daemon.address, "GET", "/ready", None, None);
            assert_eq!(status, 503, "{case}");
        }
        daemon.signal(stop);
        let exit = daemon.wait();
        if stop == "TERM" {
            assert!(exit.success(), "{case}: {exit:?}");
        }
        drop(daemon);
        for suffix in ["-wal", "-shm"] {
            assert!(
                !std::path::Path::new(&format!("{}{suffix}", dir.db().display())).exists(),
                "{case}: the old {suffix} is left beside the new file"
            );
        }
        // The file as the restart finds it (no journal beside it to replay): the backup's.
        let (found, integrity) = table_counts(&dir.db());
        assert_eq!(integrity, "ok", "{case}");
        assert_eq!(
            found, expected,
            "{case}: the backup's rows as they were put"
        );
        let daemon = Daemon::start(&dir.db(), &[]);
        let (status, ready) = http(&daemon.address, "GET", "/ready", None, None);
        assert_eq!(status, 200, "{case}: {ready}");
        let (status, batches) = http(
            &daemon.address,
            "GET",
            "/batches?limit=500",
            Some(&token),
            None,
        );
        assert_eq!(status, 200, "{case}: {batches}");
        let titles: Vec<&str> = batches
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|b| b["title"].as_str())
            .collect();
        assert!(
            titles.contains(&"до копии 29")
                && !titles
                    .iter()
                    .any(|t| t.starts_with("после копии") || t.starts_with("в замену")),
            "{case}: {titles:?}"
        );
        drop(daemon);
        let (_, integrity) = table_counts(&dir.db());
        assert_eq!(integrity, "ok", "{case}: after serving it");
        // What the replaced file held is kept: the rescue copy, its old WAL and shm beside it.
        let backups = dir.backups();
        let rescued = backups
            .iter()
            .find(|name| name.contains("-rescued") && name.ends_with(".sqlite"))
            .unwrap_or_else(|| panic!("{case}: no rescue copy in {backups:?}"));
        let titles = batch_titles(&dir.backup_path(rescued));
        assert!(
            titles.iter().any(|t| t == "после копии 29"),
            "{case}: {titles:?}"
        );
    }
}

/// `/ready` (the database's fault) stays not-ready after a read-only episode until a write has
/// succeeded again: the timer's sweep, a transaction that finds nothing to do and so writes no
/// page, commits on a read-only file and must not count as one (before, it cleared the fault,
/// and `/ready` said ready seconds in while every write still failed). The probe writes a page:
/// it fails while the file is read-only and clears the fault once it is writable.
#[test]
fn a_write_that_changed_nothing_does_not_end_a_fault() {
    let dir = TestDir::new();
    let mut hub = ready_hub(&dir, &clock());
    // The timers' connection, opened while the file was writable (so it is not read-only).
    let mut timers = hub.connect().unwrap();
    let wal = std::path::PathBuf::from(format!("{}-wal", dir.db().display()));
    if !chattr("+i", &dir.db()) {
        eprintln!(
            "SKIPPED: chattr +i is not possible here (needs root and a file system with the flag)"
        );
        return;
    }
    assert!(chattr("+i", &wal));
    let refused = hub.enqueue_batch(&batch(serde_json::json!({"title": "пока только чтение",
        "author": "a", "commands": [{"type": "comment", "params": {"key": "AURORA-1", "body": "x"}}]})));
    let after_refusal = hub.database_fault();
    let sweep = timers.expire_claims();
    let after_sweep = timers.database_fault();
    let probe = hub.probe_database();
    let after_probe = hub.database_fault();
    assert!(chattr("-i", &dir.db()) && chattr("-i", &wal));
    assert!(refused.is_err(), "{refused:?}");
    assert!(after_refusal.is_some());
    assert!(sweep.is_ok(), "the sweep itself commits nothing: {sweep:?}");
    assert!(
        after_sweep.is_some(),
        "a transaction that wrote nothing ended the fault"
    );
    assert!(probe.is_err(), "the probe wrote into a read-only file");
    assert!(after_probe.is_some());
    hub.probe_database().expect("writable again");
    assert_eq!(hub.database_fault(), None);
}

/// `cp backup hub.sqlite` while the hub serves it: the same file (device and inode), its
/// content written over in place, the hub's WAL still beside it. Before, the hub went on
/// acknowledging writes into that WAL, above pages of another database, and lost them
/// (50 batches answered 201 after the copy, gone). Now the hub finds the copy by the mark it wrote
/// into the header at start: at rest (`/ready`, the timers) or at the next write, whichever comes
/// first; every write after the copy is refused, `/ready` says why, and the restart serves the
/// copy exactly as it was put (the old WAL moved aside, never checkpointed into it).
#[test]
fn a_copy_written_over_the_live_database_in_place_is_found_and_takes_no_write() {
    use std::os::unix::fs::MetadataExt;
    for look_first in [true, false] {
        let case = if look_first {
            "/ready first"
        } else {
            "a write first"
        };
        let dir = TestDir::new();
        let token = initialised(&dir);
        let mut daemon = Daemon::start(&dir.db(), &[]);
        let backup = writes_around_a_backup(&dir, &daemon.address, &token, 20);
        let (expected, integrity) = table_counts(&backup);
        assert_eq!(integrity, "ok", "{case}");
        let inode = std::fs::metadata(dir.db()).unwrap().ino();
        let copied = std::process::Command::new("cp")
            .arg(&backup)
            .arg(dir.db())
            .status()
            .unwrap();
        assert!(copied.success());
        assert_eq!(
            std::fs::metadata(dir.db()).unwrap().ino(),
            inode,
            "cp writes in place"
        );
        let ready = || {
            let (status, ready) = http(&daemon.address, "GET", "/ready", None, None);
            assert_eq!(status, 503, "{case}: {ready}");
            let message = ready["error"]["message"].as_str().unwrap().to_string();
            assert!(
                message.contains("overwritten") && message.contains("перезаписан"),
                "{case}: {ready}"
            );
        };
        if look_first {
            ready();
        }
        let mut acknowledged = Vec::new();
        for i in 0..10 {
            let title = format!("после cp {i}");
            let (status, body) = post_batch(&daemon.address, &token, &title);
            if status == 201 {
                acknowledged.push(title);
            } else {
                assert_eq!(status, 503, "{case}: {body}");
                assert_eq!(
                    body["error"]["code"], "database_unavailable",
                    "{case}: {body}"
                );
                assert!(
                    body["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("перезаписан на месте"),
                    "{case}: {body}"
                );
            }
        }
        assert!(
            acknowledged.is_empty(),
            "{case}: acknowledged after the copy: {acknowledged:?}"
        );
        ready();
        daemon.signal("TERM");
        assert!(daemon.wait().success(), "{case}");
        drop(daemon);
        for suffix in ["-wal", "-shm"] {
            assert!(
                !std::path::Path::new(&format!("{}{suffix}", dir.db().display())).exists(),
                "{case}: the old {suffix} is left beside the copy"
            );
        }
        assert!(
            dir.backups()
                .iter()
                .any(|name| name.ends_with("-overwritten.old-wal")),
            "{case}: {:?}",
            dir.backups()
        );
        let (found, integrity) = table_counts(&dir.db());
        assert_eq!(integrity, "ok", "{case}");
        assert_eq!(found, expected, "{case}: the copy's rows as they were put");
        let daemon = Daemon::start(&dir.db(), &[]);
        let (status, ready) = http(&daemon.address, "GET", "/ready", None, None);
        assert_eq!(status, 200, "{case}: {ready}");
        let (status, body) = post_batch(&daemon.address, &token, "после перезапуска");
        assert_eq!(status, 201, "{case}: {body}");
        drop(daemon);
        let titles = batch_titles(&dir.db());
        assert!(
            titles.iter().any(|t| t == "до копии 19")
                && titles.iter().any(|t| t == "после перезапуска")
                && !titles.iter().any(|t| t.starts_with("после копии")),
            "{case}: {titles:?}"
        );
    }
}

/// `jira-hub restore` under a serving hub is refused, naming why, and changes nothing.
#[test]
fn restore_is_refused_while_a_hub_serves_the_database() {
    let dir = TestDir::new();
    let token = initialised(&dir);
    let daemon = Daemon::start(&dir.db(), &[]);
    let backup = writes_around_a_backup(&dir, &daemon.address, &token, 1);
    let backup = backup.to_str().unwrap();
    let before = std::fs::read_dir(dir.path().join("data")).unwrap().count();
    let out = run(&dir.db(), &["restore", backup]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("работает jira-hub serve")
            && out.stderr.contains("jira-hub.lock")
            && out.stderr.contains("остановите хаб"),
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path().join("data")).unwrap().count(),
        before,
        "nothing made or moved in the data folder"
    );
    assert!(!dir.backups().iter().any(|n| n.contains("before-restore")));
    let (status, body) = post_batch(&daemon.address, &token, "после отказа");
    assert_eq!(status, 201, "{body}");
    let (status, ready) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(status, 200, "{ready}");
}

/// On a stopped hub, `restore` checks the copy (a damaged or foreign file is refused and nothing
/// changes), keeps the current database with everything its WAL held in `backups/`, and puts the
/// copy in place with no journal of the old file beside it: the hub starts on the copy.
#[test]
fn restore_puts_a_backup_in_place_of_a_stopped_hubs_database() {
    let dir = TestDir::new();
    let token = initialised(&dir);
    let mut daemon = Daemon::start(&dir.db(), &[]);
    let backup = writes_around_a_backup(&dir, &daemon.address, &token, 10);
    let (expected, _) = table_counts(&backup);
    let backup = backup.to_str().unwrap();
    // Killed: what it wrote last is in its WAL only, which must go with the file kept.
    daemon.signal("KILL");
    daemon.wait();
    drop(daemon);
    assert!(
        std::fs::metadata(format!("{}-wal", dir.db().display())).is_ok_and(|m| m.len() > 0),
        "the killed hub left its WAL"
    );

    // Refused copies: not SQLite, a damaged one, a foreign SQLite database; nothing changes.
    let garbage = dir.path().join("garbage.sqlite");
    std::fs::write(&garbage, vec![7u8; 65536]).unwrap();
    let damaged = dir.path().join("damaged.sqlite");
    std::fs::copy(backup, &damaged).unwrap();
    {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&damaged)
            .unwrap();
        let page = 32 * 1024;
        let pages = file.metadata().unwrap().len() / page;
        for n in 2..pages {
            // The b-tree page header: a page type no page has.
            file.write_all_at(&[0xA5; 8], n * page).unwrap();
        }
    }
    let foreign = dir.path().join("foreign.sqlite");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    let db_bytes = std::fs::read(dir.db()).unwrap();
    for (copy, words) in [
        (&garbage, "не база SQLite"),
        (&damaged, ""),
        (&foreign, "не jira-hub"),
    ] {
        let out = run(&dir.db(), &["restore", copy.to_str().unwrap()]);
        assert_eq!(out.code, 1, "{copy:?}: {out:?}");
        assert!(
            out.stderr.contains("не годится для восстановления") && out.stderr.contains(words),
            "{copy:?}: {out:?}"
        );
        assert_eq!(std::fs::read(dir.db()).unwrap(), db_bytes, "{copy:?}");
    }
    assert!(!dir.backups().iter().any(|n| n.contains("before-restore")));

    let out = run_ok(&dir.db(), &["restore", backup]);
    let kept = dir
        .backups()
        .into_iter()
        .find(|name| name.ends_with("-before-restore.sqlite"))
        .unwrap_or_else(|| panic!("{:?}", dir.backups()));
    assert!(
        out.stdout
            .contains(&format!("previous: {}", dir.backup_path(&kept).display())),
        "{out:?}"
    );
    for suffix in ["-wal", "-shm"] {
        assert!(
            !std::path::Path::new(&format!("{}{suffix}", dir.db().display())).exists(),
            "an old {suffix} beside the restored file"
        );
    }
    let (found, integrity) = table_counts(&dir.db());
    assert_eq!(integrity, "ok");
    // The copy's rows as they were, but for the highest ids the replaced file had issued.
    let without_ids = |counts: Vec<(String, i64)>| -> Vec<(String, i64)> {
        counts
            .into_iter()
            .filter(|(t, _)| t != "id_issued")
            .collect()
    };
    assert_eq!(
        without_ids(found),
        without_ids(expected),
        "the copy's rows as they were"
    );
    // The kept database holds every acknowledged write, its WAL's included.
    let kept_titles = batch_titles(&dir.backup_path(&kept));
    assert!(
        kept_titles.iter().any(|t| t == "после копии 9"),
        "{kept_titles:?}"
    );
    let daemon = Daemon::start(&dir.db(), &[]);
    let (status, ready) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(status, 200, "{ready}");
    drop(daemon);
    let titles = batch_titles(&dir.db());
    assert!(
        titles.iter().any(|t| t == "до копии 9") && !titles.iter().any(|t| t.starts_with("после")),
        "{titles:?}"
    );
}

/// Tokens are credentials, not data: a backup made before `tokens --rotate` holds the tokens
/// that were revoked, and `restore` keeps those in force in the replaced database instead of
/// bringing the revoked ones back (before, the old client token was answered again and the new
/// one refused).
#[test]
fn restore_keeps_the_tokens_in_force_not_the_backups() {
    let dir = TestDir::new();
    let old_client = initialised(&dir);
    let backup = std::path::PathBuf::from(run_ok(&dir.db(), &["backup"]).stdout.trim());
    run_ok(&dir.db(), &["tokens", "--rotate", "client"]);
    run_ok(&dir.db(), &["tokens", "--rotate", "agent"]);
    let rotated = run_ok(&dir.db(), &["tokens"]).stdout;
    assert!(!rotated.contains(&old_client), "{rotated}");

    let out = run_ok(&dir.db(), &["restore", backup.to_str().unwrap()]);
    assert!(out.stdout.contains("tokens:   kept"), "{out:?}");
    assert_eq!(run_ok(&dir.db(), &["tokens"]).stdout, rotated);
    let client = rotated
        .lines()
        .find(|l| l.starts_with("client"))
        .and_then(|l| l.split_whitespace().last())
        .unwrap()
        .to_string();
    let daemon = Daemon::start(&dir.db(), &[]);
    let (status, _) = http(&daemon.address, "GET", "/batches", Some(&old_client), None);
    assert_eq!(
        status, 401,
        "the revoked token is refused after the restore"
    );
    let (status, body) = http(&daemon.address, "GET", "/batches", Some(&client), None);
    assert_eq!(status, 200, "{body}");
    drop(daemon);

    // With no database at the path, the copy's own tokens, and restore says so.
    std::fs::remove_file(dir.db()).unwrap();
    let out = run_ok(&dir.db(), &["restore", backup.to_str().unwrap()]);
    assert!(
        out.stdout
            .contains("tokens:   the copy's own (на месте базы не было)"),
        "{out:?}"
    );
    assert!(run_ok(&dir.db(), &["tokens"]).stdout.contains(&old_client));
}

/// A copy of the running database made by any tool while the hub serves, written back over the
/// live file in place after the hub went on writing and a checkpoint reached the file: SQLite's
/// own `.backup`, `VACUUM INTO` and `cp` of the running file each carry the mark of the moment
/// they were made. Before, the mark was set once per start, so these copies carried the
/// current one and the hub acknowledged writes into a WAL above another database's pages.
#[test]
fn a_copy_by_any_tool_put_back_over_the_live_file_takes_no_write() {
    for tool in ["sqlite3 .backup", "VACUUM INTO", "cp"] {
        let dir = TestDir::new();
        let token = initialised(&dir);
        let daemon = Daemon::start(&dir.db(), &[]);
        for i in 0..5 {
            let (status, body) = post_batch(&daemon.address, &token, &format!("до копии {i}"));
            assert_eq!(status, 201, "{tool}: {body}");
        }
        let copy = dir.path().join("copy.sqlite");
        match tool {
            "sqlite3 .backup" => {
                let made = std::process::Command::new("sqlite3")
                    .arg(dir.db())
                    .arg(format!(".backup {}", copy.display()))
                    .status();
                match made {
                    Ok(status) => assert!(status.success(), "{tool}"),
                    Err(_) => {
                        eprintln!("SKIPPED ({tool}): the sqlite3 program is not installed");
                        continue;
                    }
                }
            }
            "VACUUM INTO" => {
                let conn = rusqlite::Connection::open(dir.db()).unwrap();
                conn.execute("VACUUM INTO ?1", [copy.to_str().unwrap()])
                    .unwrap();
            }
            _ => {
                std::fs::copy(dir.db(), &copy).unwrap();
            }
        }
        for i in 0..5 {
            let (status, body) = post_batch(&daemon.address, &token, &format!("после копии {i}"));
            assert_eq!(status, 201, "{tool}: {body}");
        }
        // A checkpoint reaches the file (as SQLite's automatic one does), and the hub writes on.
        let conn = rusqlite::Connection::open(dir.db()).unwrap();
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
            .unwrap();
        drop(conn);
        let (status, body) = post_batch(&daemon.address, &token, "после контрольной точки");
        assert_eq!(status, 201, "{tool}: {body}");
        let copied = std::process::Command::new("cp")
            .arg(&copy)
            .arg(dir.db())
            .status()
            .unwrap();
        assert!(copied.success(), "{tool}");
        let mut acknowledged = Vec::new();
        for i in 0..5 {
            let title = format!("после возврата копии {i}");
            let (status, body) = post_batch(&daemon.address, &token, &title);
            if status == 201 {
                acknowledged.push(title);
            } else {
                assert_eq!(status, 503, "{tool}: {body}");
                assert!(
                    body["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("перезаписан на месте"),
                    "{tool}: {body}"
                );
            }
        }
        assert!(
            acknowledged.is_empty(),
            "{tool}: acknowledged after the copy was put back: {acknowledged:?}"
        );
        let (status, ready) = http(&daemon.address, "GET", "/ready", None, None);
        assert_eq!(status, 503, "{tool}: {ready}");
    }
}

/// Only the database file made read-only under the daemon (its WAL still writable): the
/// connections opened before keep writing into the WAL, while every connection opened since is
/// read-only and refuses. A write of an old connection (the `/ready` probe's own) proves nothing
/// of the new ones, so it does not end the fault: before, the probe succeeded on the operations'
/// connection and `/ready` said 200 while the pool's new connections refused every write.
#[test]
fn ready_is_503_naming_a_read_only_database_until_a_write_proves_it_writable() {
    let dir = TestDir::new();
    let token = initialised(&dir);
    let daemon = Daemon::start(&dir.db(), &[]);
    let (status, body) = post_batch(&daemon.address, &token, "до");
    assert_eq!(status, 201, "{body}");
    let (status, body) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(status, 200, "{body}");
    if !chattr("+i", &dir.db()) {
        eprintln!(
            "SKIPPED: chattr +i is not possible here (needs root and a file system with the flag)"
        );
        return;
    }
    // Requests at once, so that the pool opens connections now (SQLite opens them read-only):
    // rounds until one of them is refused.
    let mut refused = 0;
    for round in 0..20 {
        let answers: Vec<(u16, serde_json::Value)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let (address, token) = (&daemon.address, &token);
                    scope.spawn(move || {
                        post_batch(address, token, &format!("только чтение {round}.{i}"))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (status, body) in &answers {
            assert!(*status == 201 || *status == 503, "{status} {body}");
        }
        refused += answers.iter().filter(|(status, _)| *status == 503).count();
        if refused > 0 {
            break;
        }
    }
    let ready = http(&daemon.address, "GET", "/ready", None, None);
    let ready_again = http(&daemon.address, "GET", "/ready", None, None);
    assert!(chattr("-i", &dir.db()));
    assert!(
        refused > 0,
        "no connection was opened while the file was read-only"
    );
    for (status, body) in [ready, ready_again] {
        assert_eq!(status, 503, "{body}");
        assert!(body.to_string().contains("read_only"), "{body}");
    }
    // Writable again: a write succeeds and `/ready` finds it (its probe writes through a
    // connection opened now).
    let (status, body) = post_batch(&daemon.address, &token, "после");
    assert_eq!(status, 201, "{body}");
    let (status, body) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(status, 200, "{body}");
}

/// The same at the connections' level, without timing: a connection opened after the file
/// became read-only is refused, while one opened before still writes (its descriptor is
/// writable, and SQLite hands it on to the next connection the process opens). Its probe does
/// not end the fault while the file cannot be opened for writing; once it can, it does.
#[test]
fn an_old_connections_write_does_not_end_a_read_only_fault() {
    let dir = TestDir::new();
    let hub = ready_hub(&dir, &clock());
    let mut old = hub.connect().unwrap();
    if !chattr("+i", &dir.db()) {
        eprintln!(
            "SKIPPED: chattr +i is not possible here (needs root and a file system with the flag)"
        );
        return;
    }
    let mut new = hub.connect();
    let refused = new.as_mut().map(|new| {
        new.enqueue_batch(&batch(serde_json::json!({"title": "новое соединение",
            "author": "a", "commands": [{"type": "comment", "params": {"key": "AURORA-1", "body": "x"}}]})))
    });
    let old_probe = old.probe_database();
    let after_old_probe = old.database_fault();
    assert!(chattr("-i", &dir.db()));
    assert!(
        matches!(refused, Ok(Err(_))),
        "{:?}",
        refused.map(|r| r.is_ok())
    );
    assert!(
        old_probe.is_err(),
        "the probe wrote through a descriptor opened before and ended the fault"
    );
    assert_eq!(
        after_old_probe.map(|seen| seen.fault),
        Some(jira_hub::store::Fault::ReadOnly)
    );
    old.probe_database().expect("writable again");
    assert_eq!(hub.database_fault(), None);
}

/// A `VACUUM INTO` copy made after the last checkpoint carries the newest mark the hub
/// committed (the WAL's), so the mark alone accepted it when it was put back over the live file;
/// the WAL then read on above pages laid out anew. It is a rollback-journal file (its header's
/// format bytes), which the served file never is: found, and no write is acknowledged.
#[test]
fn a_vacuum_into_copy_made_after_the_last_checkpoint_takes_no_write() {
    let dir = TestDir::new();
    let token = initialised(&dir);
    let daemon = Daemon::start(&dir.db(), &[]);
    for i in 0..5 {
        let (status, body) = post_batch(&daemon.address, &token, &format!("до копии {i}"));
        assert_eq!(status, 201, "{body}");
    }
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    for i in 0..3 {
        let (status, body) = post_batch(&daemon.address, &token, &format!("после точки {i}"));
        assert_eq!(status, 201, "{body}");
    }
    // No checkpoint since: the copy holds the newest mark, committed only in the WAL.
    let copy = dir.path().join("copy.sqlite");
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    conn.execute("VACUUM INTO ?1", [copy.to_str().unwrap()])
        .unwrap();
    drop(conn);
    let copied = std::process::Command::new("cp")
        .arg(&copy)
        .arg(dir.db())
        .status()
        .unwrap();
    assert!(copied.success());
    let mut acknowledged = Vec::new();
    for i in 0..5 {
        let title = format!("после возврата копии {i}");
        let (status, body) = post_batch(&daemon.address, &token, &title);
        if status == 201 {
            acknowledged.push(title);
        } else {
            assert_eq!(status, 503, "{body}");
            assert!(body.to_string().contains("перезаписан на месте"), "{body}");
        }
    }
    assert!(
        acknowledged.is_empty(),
        "acknowledged after the copy was put back: {acknowledged:?}"
    );
    let (status, ready) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(status, 503, "{ready}");
    assert!(ready.to_string().contains("overwritten"), "{ready}");
}
