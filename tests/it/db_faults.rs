//! The database changing under a running hub, and a database gone between two starts (issue 18,
//! item 5): the hub keeps running, says what is wrong, loses nothing it acknowledged, and
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
                    .contains(&format!("cp {}", dir.backup_path(name).display()))),
            "{args:?}: {out:?}"
        );
        assert!(!dir.db().exists(), "{args:?} made a database");
    }
    // Restored, it serves again.
    std::fs::copy(dir.backup_path(&newest), dir.db()).unwrap();
    let daemon = Daemon::start(&dir.db(), &quick_start);
    let (status, body) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(status, 200, "{body}");
    drop(daemon);
}
