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
        .find(|b| b.commands[0].command_type == "ensure_issue")
        .unwrap();
    assert_eq!(second.commands[0].status, CommandStatus::Failed);
    let inspect = run(&dir.db(), &["relay", "inspect", relay.to_str().unwrap()]);
    assert_eq!(inspect.code, 0);
    assert!(inspect.stdout.contains("applied 20"), "{}", inspect.stdout);
}
