//! Every file of `relay-samples/` is valid, and every request sample, run through the real
//! daemon, gets the answer of its kind.

use crate::support::*;
use jira_hub::domain::command::CommandStatus;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

fn samples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("relay-samples")
}

#[test]
fn the_samples_are_valid() {
    let out = run(
        &TestDir::new().db(),
        &["relay", "validate", samples().to_str().unwrap()],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("7 files, 0 invalid"), "{out:?}");

    let dir = TestDir::new();
    let bad = dir.path().join("claim-x.json");
    std::fs::write(&bad, r#"{"kind": "claim", "id": "y"}"#).unwrap();
    let out = run(&dir.db(), &["relay", "validate", bad.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("INVALID"), "{out:?}");
    // JSON that ends early: said in one Russian word.
    let cut = dir.path().join("claim-cut.json");
    std::fs::write(&cut, r#"{"kind": "claim", "id": "cut""#).unwrap();
    let out = run(&dir.db(), &["relay", "validate", cut.to_str().unwrap()]);
    assert!(
        out.stdout
            .contains("неполный JSON: файл, возможно, ещё пишется"),
        "{out:?}"
    );
}

#[test]
fn every_request_sample_goes_through_the_daemon() {
    let dir = TestDir::new();
    let (mut hub, relay, token) = relay_hub(&dir);
    // Commands 1 and 2, as the samples expect: a refresh and an issue to create.
    hub.enqueue_refresh(None, "ivanov").unwrap();
    hub.enqueue_batch(&batch(json!({"title": "план", "author": "ivanov", "commands": [
        {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Сверить остатки", "priority": "high"}}]})))
        .unwrap();
    let _daemon = Daemon::start(&dir.db(), &[]);
    let mut names: Vec<String> = std::fs::read_dir(samples().join("inbox"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort_by_key(|n| n.rsplit('-').next().map(String::from));
    for name in names {
        let text = std::fs::read_to_string(samples().join("inbox").join(&name)).unwrap();
        let request: Value =
            serde_json::from_str(&text.replace("REPLACE-WITH-AGENT-TOKEN", &token)).unwrap();
        drop_file(&relay.join("inbox"), &name, &request);
        let answer = wait_for_json(&relay.join("outbox").join(&name), Duration::from_secs(20));
        let sample: Value = serde_json::from_str(
            &std::fs::read_to_string(samples().join("outbox").join(&name)).unwrap(),
        )
        .unwrap();
        assert_eq!(answer["kind"], sample["kind"], "{name}");
        assert_eq!(answer["request_id"], sample["request_id"], "{name}");
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            keys(&answer),
            keys(&sample),
            "{name}: the sample answer has the real shape"
        );
        if name.starts_with("report") {
            assert_eq!(answer["accepted"], json!([1, 1, 2]), "{answer}");
        }
        if name.starts_with("claim") {
            assert_eq!(answer["commands"].as_array().unwrap().len(), 2);
        }
    }
    let issue = hub.issue("AURORA-17").unwrap();
    assert_eq!(issue.issue.sprint.as_deref(), Some("Спринт 41"));
    assert_eq!(issue.comments.len(), 1);
    assert_eq!(
        hub.projects().unwrap()[0].board_type.as_deref(),
        Some("scrum")
    );
    let second = hub
        .batches(None)
        .unwrap()
        .into_iter()
        .find(|b| b.commands[0].command_type == jira_hub::domain::command::CommandType::EnsureIssue)
        .unwrap();
    assert_eq!(second.commands[0].status, CommandStatus::Failed);
    let inspect = run(&dir.db(), &["relay", "inspect", relay.to_str().unwrap()]);
    assert_eq!(inspect.code, 0);
    assert!(inspect.stdout.contains("applied 20"), "{}", inspect.stdout);
}

/// The first `sh` block after `heading` in a Markdown file.
pub fn shell_block(markdown: &str, heading: &str) -> String {
    let after = &markdown[markdown.find(heading).expect("heading")..];
    let start = after.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let end = after[start..].find("```").expect("end of block");
    after[start..start + end].to_string()
}

/// A checkout as the walk-through expects it in `dir`: `relay-samples/`, the example config and
/// the binary as `target/release/jira-hub`; returns its root, database and relay folder.
fn checkout(dir: &TestDir) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let root = dir.path().join("checkout");
    std::fs::create_dir_all(root.join("target/release")).unwrap();
    std::fs::create_dir_all(root.join("admin")).unwrap();
    let repository = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::os::unix::fs::symlink(samples(), root.join("relay-samples")).unwrap();
    std::os::unix::fs::symlink(
        repository.join("admin/jira-sync"),
        root.join("admin/jira-sync"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_jira-hub"),
        root.join("target/release/jira-hub"),
    )
    .unwrap();
    let db = root.join("data/hub.sqlite");
    let relay = root.join("relay");
    (root, db, relay)
}

/// The walk-through with no hub running: its wait gives up with a message saying what to look
/// at, instead of waiting forever (`sleep` is a stand-in that returns at once).
#[test]
fn the_walk_through_gives_up_with_a_message() {
    let dir = TestDir::new();
    let (root, db, relay) = checkout(&dir);
    run_ok(
        &db,
        &["init", "--config", example_config().to_str().unwrap()],
    );
    let setting = format!("\"{}\"", relay.display());
    run_ok(&db, &["settings", "set", "relay_dir", &setting]);
    for folder in ["inbox", "outbox"] {
        std::fs::create_dir_all(relay.join(folder)).unwrap();
    }
    let shims = dir.path().join("shims");
    std::fs::create_dir_all(&shims).unwrap();
    std::fs::write(shims.join("sleep"), "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(
        shims.join("sleep"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let readme = std::fs::read_to_string(samples().join("README.md")).unwrap();
    let block = shell_block(&readme, "## A round trip by hand");
    let path = format!("{}:{}", shims.display(), std::env::var("PATH").unwrap());
    let out = std::process::Command::new("timeout")
        .args(["120", "bash", "-euo", "pipefail", "-c", &block])
        .current_dir(&root)
        .env_remove("JIRA_HUB_DB")
        .env("PATH", path)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "no answer within 30 s: is the hub running (serve) with relay_dir {}?",
            relay.display()
        )),
        "{out:?}"
    );
}

/// The walk-through of `relay-samples/README.md`, typed literally from the repository root, with
/// the quick start's hub running: the claim gets its answer and `relay inspect` shows it.
#[test]
fn the_walk_through_works_as_written() {
    let dir = TestDir::new();
    let (root, db, relay) = checkout(&dir);
    // The quick start, with this checkout's paths.
    let _daemon = Daemon::start(
        &db,
        &[
            "--init-from",
            root.join("admin/jira-sync/config.example.json")
                .to_str()
                .unwrap(),
            "--default-relay-dir",
            relay.to_str().unwrap(),
        ],
    );
    let readme = std::fs::read_to_string(samples().join("README.md")).unwrap();
    let block = shell_block(&readme, "## A round trip by hand");
    let out = std::process::Command::new("timeout")
        .args(["120", "bash", "-euo", "pipefail", "-c", &block])
        .current_dir(&root)
        .env_remove("JIRA_HUB_DB")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("claim-5c1c9a2e-agent1-0001.json"),
        "{stdout}"
    );
    let answer = wait_for_json(
        &relay.join("outbox/claim-5c1c9a2e-agent1-0001.json"),
        Duration::from_secs(20),
    );
    assert_eq!(answer["commands"][0]["type"], "refresh", "{answer}");
}
