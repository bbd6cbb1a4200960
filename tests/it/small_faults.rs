//! The smaller faults of the process: a failing log sink, an empty `--db` file, a relay
//! marker that is a link, `agent --check`/`--once` beside a running agent of the same name.

use crate::support::*;

/// `serve` with stderr on `/dev/full` (every write fails with `ENOSPC`, a real failing sink):
/// it starts, answers, takes writes that log, counts the log lines it could not write in
/// `/metrics`, and stops on SIGTERM with exit 0. Before, the first log line panicked the main
/// thread (exit 101), and any later one its thread.
#[test]
fn a_failing_log_sink_neither_panics_nor_stops_the_daemon() {
    use std::io::BufRead;
    let dir = TestDir::new();
    let hub = ready_hub(&dir, &clock());
    let token = hub.tokens().unwrap().unwrap().client;
    drop(hub);
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let mut child = hub_command(&dir.db(), &["serve", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(full)
        .spawn()
        .expect("start serve");
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    std::thread::spawn(move || for _ in lines {});
    let Some(address) = first
        .rsplit("http://")
        .next()
        .map(str::trim)
        .filter(|a| a.starts_with("127."))
    else {
        let _ = child.kill();
        panic!("serve did not start: {first:?}, {:?}", child.wait());
    };
    let dropped = |address: &str| -> u64 {
        let (status, metrics) = http(address, "GET", "/metrics", None, None);
        assert_eq!(status, 200);
        let text = metrics
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| metrics.to_string());
        text.lines()
            .find_map(|line| line.strip_prefix("jira_hub_log_lines_dropped_total "))
            .unwrap_or_else(|| panic!("no counter: {text}"))
            .trim()
            .parse()
            .unwrap()
    };
    let before = dropped(address);
    assert!(before >= 1, "the start's own lines: {before}");
    // Each enqueued batch logs a line at info.
    for i in 0..20 {
        let (status, body) = http(
            address,
            "POST",
            "/batches",
            Some(&token),
            Some(
                &serde_json::json!({"title": format!("журнал {i}"), "author": "a",
                "commands": [{"type": "comment", "params": {"key": "AURORA-1", "body": "x"}}]}),
            ),
        );
        assert_eq!(status, 201, "{i}: {body}");
    }
    assert!(
        dropped(address) >= before + 20,
        "each line dropped is counted"
    );
    let (status, _) = http(address, "GET", "/health", None, None);
    assert_eq!(status, 200);
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert_eq!(exit.code(), Some(0), "{exit:?}");
}

/// An empty file given as `--db` (`/etc` holds such files) is refused by every command, naming
/// the path and what to do, and nothing changes: the file stays empty, its folder keeps its mode,
/// no `backups/` or journal appears. `init --use-empty-file` is the explicit way to make the
/// database there. Before, any command turned the file into a hub database and set its folder
/// to 0700.
#[test]
fn an_empty_file_given_as_db_is_refused_unless_init_is_asked_to_use_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TestDir::new();
    let etc = dir.path().join("etc");
    std::fs::create_dir(&etc).unwrap();
    std::fs::set_permissions(&etc, std::fs::Permissions::from_mode(0o755)).unwrap();
    let empty = etc.join("hosts.allow");
    std::fs::write(&empty, "").unwrap();
    let config = example_config();
    let config = config.to_str().unwrap();
    for args in [
        &["init", "--config", config][..],
        &["migrate"],
        &["status"],
        &["tokens"],
        &["serve", "--listen", "127.0.0.1:0"],
    ] {
        let out = run(&empty, args);
        assert_ne!(out.code, 0, "{args:?}: {out:?}");
        assert!(
            out.stderr.starts_with("jira-hub: ")
                && out
                    .stderr
                    .contains(&format!("{} — пустой файл", empty.display()))
                && out.stderr.contains("--use-empty-file"),
            "{args:?}: {out:?}"
        );
        assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0, "{args:?}");
        assert_eq!(
            mode(&etc) & 0o777,
            0o755,
            "{args:?} changed the folder's mode"
        );
        let names: Vec<_> = std::fs::read_dir(&etc)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["hosts.allow"], "{args:?}");
    }
    let out = run_ok(&empty, &["init", "--config", config, "--use-empty-file"]);
    assert!(out.stdout.contains("client"), "{out:?}");
    assert!(std::fs::metadata(&empty).unwrap().len() > 0);
    run_ok(&empty, &["status"]);
}

/// `relay init` on a folder whose marker `.jira-hub-relay` is a dangling link (as root, the
/// file was made wherever it pointed): refused, naming the link, and nothing is made, neither
/// where it points nor the relay's folders.
#[test]
fn relay_init_makes_nothing_through_a_link() {
    let dir = TestDir::new();
    let relay = dir.path().join("relay");
    std::fs::create_dir(&relay).unwrap();
    let planted = dir.path().join("planted");
    std::os::unix::fs::symlink(&planted, relay.join(".jira-hub-relay")).unwrap();
    let out = run(&dir.db(), &["relay", "init", relay.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains(&format!(
            "{} — ссылка",
            relay.join(".jira-hub-relay").display()
        )),
        "{out:?}"
    );
    assert!(
        std::fs::symlink_metadata(&planted).is_err(),
        "made through the link"
    );
    assert_eq!(
        std::fs::read_dir(&relay).unwrap().count(),
        1,
        "nothing made"
    );
    // The link gone, the folder is made as usual.
    std::fs::remove_file(relay.join(".jira-hub-relay")).unwrap();
    let out = run_ok(&dir.db(), &["relay", "init", relay.to_str().unwrap()]);
    assert!(out.stdout.contains(".jira-hub-relay"), "{out:?}");
}
