//! The file relay with the real daemon and a real folder (system.md §7).

use crate::support::*;
use jira_hub::domain::command::CommandStatus;
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

#[test]
fn claim_and_report_round_trip() {
    let dir = TestDir::new();
    let (mut hub, relay, token) = relay_hub(&dir);
    let batch = hub
        .enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
        {"type": "comment", "params": {"key": "AURORA-1", "body": "один"}},
        {"type": "comment", "params": {"key": "AURORA-2", "body": "два"}}]})))
        .unwrap();
    let _daemon = Daemon::start(&dir.db(), &[]);
    drop_file(
        &relay.join("inbox"),
        "claim-c1.json",
        &claim_file("c1", &token, 10),
    );
    let answer = wait_for_json(&relay.join("outbox/claim-c1.json"), WAIT);
    assert_eq!(answer["request_id"], "c1");
    let commands = answer["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 2);
    let results: Vec<_> = commands
        .iter()
        .map(|c| json!({"command_id": c["id"], "delivery": c["delivery"], "status": "done", "result": {"comment_id": "7"}, "jira_calls": 1}))
        .collect();
    drop_file(
        &relay.join("inbox"),
        "report-r1.json",
        &report_file("r1", &token, json!(results)),
    );
    let answer = wait_for_json(&relay.join("outbox/report-r1.json"), WAIT);
    assert_eq!(answer["accepted"].as_array().unwrap().len(), 2);
    let view = hub.batch(batch.id).unwrap();
    assert!(
        view.commands
            .iter()
            .all(|c| c.status == CommandStatus::Done)
    );
    // The answer is written before the request leaves inbox/ (so a crash between the two
    // re-answers from the record): wait for the move.
    let started = std::time::Instant::now();
    while std::fs::read_dir(relay.join("inbox"))
        .unwrap()
        .next()
        .is_some()
    {
        assert!(started.elapsed() < WAIT, "inbox is not emptied");
        std::thread::sleep(Duration::from_millis(10));
    }
    let days: Vec<_> = std::fs::read_dir(relay.join("archive"))
        .unwrap()
        .filter_map(Result::ok)
        .collect();
    assert_eq!(days.len(), 1);
    assert!(
        days[0].path().join("claim-c1.json").exists()
            && days[0].path().join("report-r1.json").exists()
    );

    // The same request file again: the same answer, nothing applied twice.
    std::fs::remove_file(relay.join("outbox/claim-c1.json")).unwrap();
    drop_file(
        &relay.join("inbox"),
        "claim-c1.json",
        &claim_file("c1", &token, 10),
    );
    let again = wait_for_json(&relay.join("outbox/claim-c1.json"), WAIT);
    assert_eq!(
        again["commands"].as_array().unwrap().len(),
        2,
        "the recorded answer"
    );
    assert!(
        hub.batch(batch.id)
            .unwrap()
            .commands
            .iter()
            .all(|c| c.deliveries == 1)
    );
}

#[test]
fn files_left_while_the_hub_was_down_are_processed() {
    let dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&dir);
    for folder in ["inbox", "outbox", "archive", "rejected"] {
        std::fs::create_dir_all(relay.join(folder)).unwrap();
    }
    drop_file(
        &relay.join("inbox"),
        "claim-early.json",
        &claim_file("early", &token, 1),
    );
    drop_file(
        &relay.join("inbox"),
        "heartbeat-h1.json",
        &json!({"kind": "heartbeat", "id": "h1", "agent": "agent-1",
        "sent_at": "2026-11-29T10:00:00Z", "token": token, "agent_version": "1.4.0", "jira_ok": true}),
    );
    let _daemon = Daemon::start(&dir.db(), &["--relay-no-notify"]);
    assert_eq!(
        wait_for_json(&relay.join("outbox/claim-early.json"), WAIT)["kind"],
        "claim"
    );
    assert_eq!(
        wait_for_json(&relay.join("outbox/heartbeat-h1.json"), WAIT),
        json!({"kind": "heartbeat", "request_id": "h1"})
    );
}

/// A relay worker on the test's database with the given grace, driven pass by pass at instants
/// the test chooses (no daemon, no waiting).
fn worker(hub: &jira_hub::service::HubConnection, grace: Duration) -> jira_hub::relay::Relay {
    jira_hub::relay::Relay::new(
        hub.connect().unwrap(),
        jira_hub::relay::RelayOptions {
            grace,
            notify: false,
            ..jira_hub::relay::RelayOptions::default()
        },
        jira_hub::shutdown::Shutdown::new(),
    )
}

/// A copy tool writes in place: the first half, a pause, the rest. It waits while it may still
/// be arriving and is answered, not refused; one that stops arriving is refused at the grace.
/// The worker's clock is the test's: the grace passes without waiting for it.
#[test]
fn a_file_written_in_two_halves_is_answered() {
    use std::io::Write;
    let dir = TestDir::new();
    let (hub, relay, token) = relay_hub(&dir);
    let mut worker = worker(&hub, Duration::from_secs(10));
    let text = serde_json::to_string(&claim_file("halves", &token, 1)).unwrap();
    let (first, second) = text.split_at(text.len() / 2);
    let mut file = std::fs::File::create(relay.join("inbox/claim-halves.json")).unwrap();
    file.write_all(first.as_bytes()).unwrap();
    file.sync_all().unwrap();
    let stalled = text[..text.len() / 2].replace("halves", "stalled");
    std::fs::write(relay.join("inbox/claim-stalled.json"), &stalled).unwrap();

    let t0 = std::time::Instant::now();
    let waiting =
        |counts: jira_hub::relay::PassCounts| (counts.applied, counts.refused, counts.waiting);
    assert_eq!(waiting(worker.pass_at(t0).unwrap()), (0, 0, 2));
    assert_eq!(
        waiting(worker.pass_at(t0 + Duration::from_secs(9)).unwrap()),
        (0, 0, 2),
        "within the grace both wait"
    );
    assert!(!relay.join("rejected/claim-halves.json").exists());
    file.write_all(second.as_bytes()).unwrap();
    drop(file);
    assert_eq!(
        waiting(worker.pass_at(t0 + Duration::from_secs(10)).unwrap()),
        (1, 1, 0),
        "the completed file is applied; the stalled one refused at the grace"
    );
    assert_eq!(
        read_json(&relay.join("outbox/claim-halves.json"))["request_id"],
        "halves"
    );
    let reason = read_json(&relay.join("rejected/claim-stalled.json.error.json"));
    assert_eq!(reason["code"], "not_json", "{reason}");
}

/// A claim with `wait_seconds` that has nothing to hand out is parked: it stays in `inbox/`,
/// unanswered, while other files (a heartbeat, another agent's claim) are answered; the agent
/// is seen at once. A batch enqueued gives it its answer at the next pass; another parked claim
/// is answered empty when its wait ends by the relay's clock (the test's instants).
#[test]
fn a_waiting_claim_is_parked_until_work_comes_or_its_wait_ends() {
    let dir = TestDir::new();
    let (mut hub, relay, token) = relay_hub(&dir);
    let version = hub.settings().unwrap().settings_version;
    let mut worker = worker(&hub, Duration::from_secs(10));
    let (inbox, outbox) = (relay.join("inbox"), relay.join("outbox"));
    let waiting_claim = |id: &str, agent: &str| {
        let mut claim = claim_file(id, &token, 5);
        claim["agent"] = json!(agent);
        claim["settings_version"] = json!(version);
        claim["wait_seconds"] = json!(600);
        claim
    };
    drop_file(&inbox, "claim-w1.json", &waiting_claim("w1", "agent-w"));
    let t0 = std::time::Instant::now();
    let counts = worker.pass_at(t0).unwrap();
    assert_eq!((counts.applied, counts.parked, counts.waiting), (0, 1, 0));
    assert!(inbox.join("claim-w1.json").exists(), "it stays in inbox/");
    assert!(!outbox.join("claim-w1.json").exists(), "unanswered");
    let seen: Vec<String> = hub.agents().unwrap().into_iter().map(|a| a.agent).collect();
    assert_eq!(
        seen,
        ["agent-w"],
        "the waiting agent is seen when its claim arrives"
    );
    let parked = |hub: &jira_hub::service::HubConnection| {
        hub.metrics()
            .claims_waiting_relay
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    assert_eq!(parked(&hub), 1, "/metrics counts it waiting");

    // Meanwhile other files pass: a heartbeat, and a claim that does not wait.
    drop_file(
        &inbox,
        "heartbeat-h1.json",
        &json!({"kind": "heartbeat", "id": "h1", "agent": "agent-w", "sent_at": "2026-11-29T10:00:00Z",
            "token": token, "agent_version": "1.4.0", "jira_ok": true}),
    );
    let mut at_once = claim_file("now1", &token, 5);
    at_once["settings_version"] = json!(version);
    drop_file(&inbox, "claim-now1.json", &at_once);
    let counts = worker.pass_at(t0 + Duration::from_secs(1)).unwrap();
    assert_eq!((counts.applied, counts.parked), (2, 1));
    assert_eq!(
        read_json(&outbox.join("heartbeat-h1.json"))["request_id"],
        "h1"
    );
    assert_eq!(
        read_json(&outbox.join("claim-now1.json"))["commands"],
        json!([])
    );
    assert!(!outbox.join("claim-w1.json").exists());

    // Work comes: the parked claim takes it at the next pass.
    let batch = hub
        .enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
            {"type": "comment", "params": {"key": "AURORA-1", "body": "x"}}]})))
        .unwrap();
    let counts = worker.pass_at(t0 + Duration::from_secs(2)).unwrap();
    assert_eq!((counts.applied, counts.parked), (1, 0));
    let answer = read_json(&outbox.join("claim-w1.json"));
    assert_eq!(
        answer["commands"][0]["batch_id"],
        json!(batch.id),
        "{answer}"
    );
    assert!(!inbox.join("claim-w1.json").exists(), "archived");
    assert_eq!(parked(&hub), 0);
    assert_eq!(
        hub.batch(batch.id).unwrap().commands[0].status,
        CommandStatus::Claimed
    );

    // Nothing more comes: another waiting claim is answered empty when its wait ends.
    drop_file(&inbox, "claim-w2.json", &waiting_claim("w2", "agent-w"));
    let t1 = t0 + Duration::from_secs(3);
    assert_eq!(worker.pass_at(t1).unwrap().parked, 1);
    assert_eq!(
        worker
            .pass_at(t1 + Duration::from_secs(599))
            .unwrap()
            .parked,
        1,
        "still within its wait"
    );
    let counts = worker.pass_at(t1 + Duration::from_secs(600)).unwrap();
    assert_eq!((counts.applied, counts.parked), (1, 0));
    let answer = read_json(&outbox.join("claim-w2.json"));
    assert_eq!(answer["commands"], json!([]), "{answer}");
}

/// Large reports after the first are read, decoded and mapped ahead on a second thread while the
/// relay applies the one before: a pass takes them exactly as it takes files it reads itself,
/// refusals and incomplete files included, and in the same order.
#[test]
fn large_reports_read_ahead_are_taken_as_if_read_in_turn() {
    let dir = TestDir::new();
    let (mut hub, relay, token) = relay_hub(&dir);
    hub.enqueue_refresh(None, "ivanov").unwrap();
    let claimed = Agent::new("agent-1").claim(&mut hub, 1);
    let (command, delivery) = (claimed.commands[0].id, claimed.commands[0].delivery);
    // Pages of 40 issues with long descriptions: each file is well over the read-ahead size.
    let page = |n: usize, id: &str, token: &str| {
        let issues: Vec<_> = (0..40)
            .map(|i| {
                let key = format!("AURORA-{}", n * 40 + i + 1);
                raw_issue(&key, &format!("{}", 50_000 + n * 40 + i), &["AWPCA"],
                    json!({"description": "Описание задачи. ".repeat(60), "customfield_10101": "AURORA-9000"}))
            })
            .collect();
        report_file(
            id,
            token,
            json!([{"command_id": command, "delivery": delivery, "status": "progress",
            "jira_calls": 1, "page": {"start_at": n * 40, "total": 120, "issues": issues}}]),
        )
    };
    let inbox = relay.join("inbox");
    for n in 0..3 {
        drop_file(
            &inbox,
            &format!("report-p{n}.json"),
            &page(n, &format!("p{n}"), &token),
        );
    }
    drop_file(
        &inbox,
        "report-badtoken.json",
        &page(3, "badtoken", "wrong-token"),
    );
    drop_file(&inbox, "report-mismatch.json", &page(4, "other", &token));
    let cut = serde_json::to_string(&page(5, "cut", &token)).unwrap();
    std::fs::write(inbox.join("report-cut.json"), &cut[..cut.len() - 10]).unwrap();
    for name in ["report-p0.json", "report-cut.json"] {
        assert!(std::fs::metadata(inbox.join(name)).unwrap().len() > 64 * 1024);
    }

    let mut worker = worker(&hub, Duration::from_secs(10));
    let t0 = std::time::Instant::now();
    let counts = worker.pass_at(t0).unwrap();
    assert_eq!(
        (counts.applied, counts.refused, counts.waiting),
        (3, 2, 1),
        "three pages applied, two refused, the cut file waits"
    );
    for n in 0..3 {
        let answer = read_json(&relay.join(format!("outbox/report-p{n}.json")));
        assert_eq!(answer["accepted"], json!([command]), "{answer}");
    }
    for (name, code) in [
        ("report-badtoken.json", "bad_token"),
        ("report-mismatch.json", "id_mismatch"),
    ] {
        let reason = read_json(&relay.join(format!("rejected/{name}.error.json")));
        assert_eq!(reason["code"], code, "{name}: {reason}");
    }
    assert_eq!(hub.status().unwrap().counts.issues, 120);
    let stored = hub.issue("AURORA-77").unwrap().issue;
    assert_eq!(stored.epic_key.as_deref(), Some("AURORA-9000"));
    assert_eq!(
        stored.description.as_deref(),
        Some("Описание задачи. ".repeat(60).as_str())
    );
    let run = hub.sync_runs().unwrap().remove(0);
    assert_eq!((run.run.pages, run.run.issues_seen), (3, 120), "{run:?}");

    let counts = worker.pass_at(t0 + Duration::from_secs(10)).unwrap();
    assert_eq!((counts.applied, counts.refused, counts.waiting), (0, 1, 0));
    let reason = read_json(&relay.join("rejected/report-cut.json.error.json"));
    assert_eq!(reason["code"], "not_json", "{reason}");
}

/// A burst of refresh pages: `pages` of `size.0` issues whose descriptions repeat a sentence
/// `size.1` times, keys from `first`, dropped at once into the inbox of the daemon's relay, and
/// answered.
fn burst(
    relay: &std::path::Path,
    (token, command, delivery): (&str, i64, u32),
    first: usize,
    pages: usize,
    size: (usize, usize),
) {
    let inbox = relay.join("inbox");
    let (per_page, repeat) = size;
    for n in 0..pages {
        let issues: Vec<_> = (0..per_page)
            .map(|i| {
                let number = first + n * per_page + i;
                raw_issue(
                    &format!("AURORA-{}", number + 1),
                    &format!("{}", 70_000 + number),
                    &["AWPCA"],
                    json!({"description": "Длинное описание задачи. ".repeat(repeat)}),
                )
            })
            .collect();
        let report = report_file(
            &format!("p{first}-{n}"),
            token,
            json!([{"command_id": command,
            "delivery": delivery, "status": "progress", "jira_calls": 1,
            "page": {"start_at": first + n * per_page, "total": first + pages * per_page,
                "issues": issues}}]),
        );
        drop_file(&inbox, &format!("report-p{first}-{n}.json"), &report);
    }
    for n in 0..pages {
        let answer = wait_for_json(
            &relay.join(format!("outbox/report-p{first}-{n}.json")),
            WAIT,
        );
        assert_eq!(answer["accepted"], json!([command]), "{answer}");
    }
}

/// Waits until the database file grew past `size` (only a checkpoint grows it).
fn wait_for_file_past(db: &std::path::Path, size: u64) {
    let started = std::time::Instant::now();
    loop {
        let now = std::fs::metadata(db).unwrap().len();
        if now > size {
            return;
        }
        assert!(
            started.elapsed() < WAIT,
            "the database file is {now} bytes, not past {size}: the WAL was not checkpointed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A relay hub whose refresh an agent claimed, and its daemon started: the relay folder, the
/// agent's token and the claimed command's id and delivery.
fn claimed_refresh_under_daemon(dir: &TestDir) -> (std::path::PathBuf, (String, i64, u32), Daemon) {
    let (mut hub, relay, token) = relay_hub(dir);
    hub.enqueue_refresh(None, "ivanov").unwrap();
    let claimed = Agent::new("agent-1").claim(&mut hub, 1);
    let (command, delivery) = (claimed.commands[0].id, claimed.commands[0].delivery);
    (
        relay,
        (token, command, delivery),
        Daemon::start(&dir.db(), &[]),
    )
}

/// The daemon's relay copies the WAL into the database file once the inbox is drained: refresh
/// pages that came in a burst are in the database file soon after their answers, not only at the
/// next 64 MiB of requests (seen by the file's size, which only a checkpoint grows).
#[test]
fn a_drained_inbox_checkpoints_the_wal() {
    let dir = TestDir::new();
    let (relay, agent, daemon) = claimed_refresh_under_daemon(&dir);
    let before = std::fs::metadata(dir.db()).unwrap().len();
    // Four pages of 400 issues, about 6 MiB: past the idle threshold, far from the stream's.
    burst(&relay, (&agent.0, agent.1, agent.2), 0, 4, (400, 80));
    wait_for_file_past(&dir.db(), before + (4 << 20));
    drop(daemon);
}

/// The copy after a burst runs on the relay's checkpoint thread, and SQLite writes the WAL from
/// its beginning again only when a transaction begins with all of it copied: a second burst like
/// the first leaves the WAL file as large as the first left it, not twice as large. Each page is
/// past the idle threshold on its own (about 4.5 MiB), so that however the relay's passes split
/// a burst, a pass's end always has the WAL copied (a pass that ends with less left over leaves it
/// in the WAL until more comes, and the next burst then goes on after it).
#[test]
fn a_second_burst_writes_the_wal_from_its_beginning_again() {
    let dir = TestDir::new();
    let (relay, agent, daemon) = claimed_refresh_under_daemon(&dir);
    let wal = std::path::PathBuf::from(format!("{}-wal", dir.db().display()));
    let before = std::fs::metadata(dir.db()).unwrap().len();
    let size = (500, 200);
    burst(&relay, (&agent.0, agent.1, agent.2), 0, 2, size);
    let first = std::fs::metadata(&wal).unwrap().len();
    wait_for_file_past(&dir.db(), before + (4 << 20));
    // The copy has ended once the file stops growing; a pass (one a second at least) then copies
    // in line whatever the thread's copy left.
    let mut copied = 0;
    while std::fs::metadata(dir.db()).unwrap().len() != copied {
        copied = std::fs::metadata(dir.db()).unwrap().len();
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_millis(1500));
    if std::fs::metadata(&wal).unwrap().len() < first {
        // The timers truncate a WAL nothing was committed to for two of their sweeps (5 s
        // apart): then the second burst starts from nothing whatever the relay did.
        eprintln!("the WAL was truncated before the second burst: this run shows nothing");
    }
    burst(&relay, (&agent.0, agent.1, agent.2), 1000, 2, size);
    let second = std::fs::metadata(&wal).unwrap().len();
    assert!(
        second < first + first / 4,
        "the WAL grew from {first} to {second} bytes over a second burst like the first"
    );
    drop(daemon);
}

fn read_json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Waits until nothing is at `path`.
fn wait_for_gone(path: &std::path::Path) {
    let started = std::time::Instant::now();
    while path.symlink_metadata().is_ok() {
        assert!(started.elapsed() < WAIT, "{} stayed", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until something (a file, a link, a folder) is at `path`.
fn wait_for_path(path: &std::path::Path) {
    let started = std::time::Instant::now();
    while path.symlink_metadata().is_err() {
        assert!(
            started.elapsed() < WAIT,
            "{} did not appear",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_for_dir(path: &std::path::Path) {
    let started = std::time::Instant::now();
    while !path.is_dir() {
        assert!(started.elapsed() < WAIT, "{} was not made", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn each_refusal_is_moved_with_its_reason() {
    let dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&dir);
    let _daemon = Daemon::start(
        &dir.db(),
        &["--relay-grace-seconds", "1", "--relay-max-file-mb", "1"],
    );
    let inbox = relay.join("inbox");
    wait_for_dir(&inbox);
    let mut wrong_id = claim_file("other", &token, 1);
    wrong_id["id"] = json!("other");
    let cases: Vec<(&str, &str)> = vec![
        ("claim-notjson.json", "not_json"),
        ("launch-1.json", "unknown_kind"),
        ("claim-badtoken.json", "bad_token"),
        ("claim-notoken.json", "bad_token"),
        ("claim-mismatch.json", "id_mismatch"),
        ("report-kind.json", "kind_mismatch"),
        ("claim-huge.json", "too_large"),
        ("claim-link.json", "not_regular_file"),
        ("claim-folder.json", "not_regular_file"),
        ("claim-nofield.json", "invalid"),
    ];
    std::fs::write(inbox.join("claim-notjson.json"), "{ this is not").unwrap();
    drop_file(
        &inbox,
        "launch-1.json",
        &json!({"kind": "launch", "id": "1"}),
    );
    drop_file(
        &inbox,
        "claim-badtoken.json",
        &claim_file("badtoken", "wrong-token", 1),
    );
    let mut no_token = claim_file("notoken", &token, 1);
    no_token.as_object_mut().unwrap().remove("token");
    drop_file(&inbox, "claim-notoken.json", &no_token);
    drop_file(&inbox, "claim-mismatch.json", &wrong_id);
    drop_file(&inbox, "report-kind.json", &claim_file("kind", &token, 1));
    std::fs::write(inbox.join("claim-huge.json"), vec![b' '; 1_500_000]).unwrap();
    let target = dir.path().join("elsewhere.json");
    std::fs::write(
        &target,
        serde_json::to_vec(&claim_file("link", &token, 1)).unwrap(),
    )
    .unwrap();
    std::os::unix::fs::symlink(&target, inbox.join("claim-link.json")).unwrap();
    std::fs::create_dir(inbox.join("claim-folder.json")).unwrap();
    let mut no_field = claim_file("nofield", &token, 1);
    no_field.as_object_mut().unwrap().remove("max_commands");
    drop_file(&inbox, "claim-nofield.json", &no_field);
    // Names outside the pattern are left alone.
    std::fs::write(inbox.join("README.txt"), "hello").unwrap();
    std::fs::write(inbox.join(".nfs000123"), "x").unwrap();

    for (name, code) in cases {
        let reason = wait_for_json(
            &relay.join("rejected").join(format!("{name}.error.json")),
            WAIT,
        );
        assert_eq!(reason["code"], code, "{name}: {reason}");
        // Reasons are for people: Russian, whatever produced them (serde included).
        let message = reason["message"].as_str().unwrap();
        assert!(
            message
                .chars()
                .any(|c| ('а'..='я').contains(&c.to_lowercase().next().unwrap())),
            "{name}: {message}"
        );
        if name == "claim-nofield.json" {
            assert_eq!(reason["field"], "max_commands", "{reason}");
            assert_eq!(message, "обязательное поле отсутствует");
        }
        wait_for_path(&relay.join("rejected").join(name));
        let answer_name = jira_hub::relay::error_answer_name(name).unwrap();
        assert_eq!(answer_name, format!("error-{name}"));
        let answer = wait_for_json(&relay.join("outbox").join(answer_name), WAIT);
        assert_eq!(
            (answer["kind"].as_str(), answer["error"]["code"].as_str()),
            (Some("error"), Some(code))
        );
    }
    assert!(inbox.join("README.txt").exists() && inbox.join(".nfs000123").exists());
    assert!(target.exists(), "the link's target is untouched");
}

#[test]
fn a_missing_relay_dir_is_never_created_and_changes_are_followed() {
    let dir = TestDir::new();
    let (mut hub, _relay, token) = relay_hub(&dir);
    let share = dir.path().join("share");
    let mut update = serde_json::Map::new();
    update.insert("relay_dir".into(), share.display().to_string().into());
    hub.update_settings(&update).unwrap();
    // The worker's pass, then the daemon's: each sees the share missing and leaves it so.
    let mut worker = worker(&hub, Duration::from_secs(30));
    assert_eq!(worker.pass().unwrap(), Default::default());
    assert!(!share.exists(), "an unmounted share is not created");
    assert!(
        hub.metrics().relay_problem().is_some(),
        "the worker reports the missing share"
    );
    let daemon = Daemon::start(&dir.db(), &[]);
    let started = std::time::Instant::now();
    loop {
        let (_, ready) = http(&daemon.address, "GET", "/ready", None, None);
        if ready["relay"] == "missing" {
            assert!(
                ready["relay_problem"].as_str().unwrap().contains("нет"),
                "{ready}"
            );
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "the daemon never saw the share missing: {ready}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!share.exists(), "an unmounted share is not created");
    // An empty folder that is not a mount point (the mount point of a share not mounted): its
    // folders are not made on the local disk; /ready says what to do.
    std::fs::create_dir(&share).unwrap();
    let started = std::time::Instant::now();
    loop {
        let (_, ready) = http(&daemon.address, "GET", "/ready", None, None);
        let problem = ready["relay_problem"].as_str().unwrap_or_default();
        if ready["relay"] == "missing" && problem.contains("jira-hub relay init") {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "the daemon never said the share is not set up: {ready}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        std::fs::read_dir(&share).unwrap().count(),
        0,
        "nothing made in an empty folder that is not a mount point"
    );
    run_ok(&dir.db(), &["relay", "init", share.to_str().unwrap()]);
    wait_for_dir(&share.join("inbox"));
    drop_file(
        &share.join("inbox"),
        "claim-s1.json",
        &claim_file("s1", &token, 1),
    );
    wait_for_json(&share.join("outbox/claim-s1.json"), WAIT);

    let moved = dir.path().join("moved");
    run_ok(&dir.db(), &["relay", "init", moved.to_str().unwrap()]);
    // A folder of a marked relay folder that goes missing is made again.
    std::fs::remove_dir(moved.join("archive")).unwrap();
    update.insert("relay_dir".into(), moved.display().to_string().into());
    hub.update_settings(&update).unwrap();
    wait_for_dir(&moved.join("archive"));
    drop_file(
        &moved.join("inbox"),
        "claim-m1.json",
        &claim_file("m1", &token, 1),
    );
    wait_for_json(&moved.join("outbox/claim-m1.json"), WAIT);
}

#[test]
fn sigterm_stops_cleanly_and_a_second_daemon_is_refused() {
    let dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&dir);
    let mut daemon = Daemon::start(&dir.db(), &[]);
    let second = run(&dir.db(), &["serve", "--listen", "127.0.0.1:0"]);
    assert_eq!(second.code, 1);
    assert!(
        second.stderr.contains("уже работает другой jira-hub serve"),
        "{second:?}"
    );
    drop_file(
        &relay.join("inbox"),
        "claim-t1.json",
        &claim_file("t1", &token, 1),
    );
    wait_for_json(&relay.join("outbox/claim-t1.json"), WAIT);
    daemon.signal("TERM");
    let status = daemon.wait();
    assert_eq!(status.code(), Some(0), "{status:?}");
    // The lock went with it: a new daemon starts.
    let mut again = Daemon::start(&dir.db(), &[]);
    again.signal("INT");
    assert_eq!(again.wait().code(), Some(0));
}

#[test]
fn health_over_a_real_socket() {
    let dir = TestDir::new();
    let (_hub, _relay, _token) = relay_hub(&dir);
    let daemon = Daemon::start(&dir.db(), &[]);
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(&daemon.address).unwrap();
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        response.ends_with(r#"{"status":"ok","schema_version":4}"#),
        "{response}"
    );
}

/// The relay's passes so far, as `/metrics` counts them.
fn relay_passes(address: &str) -> u64 {
    let (status, body) = http(address, "GET", "/metrics", None, None);
    assert_eq!(status, 200);
    let text = body.as_str().unwrap_or_default().to_string();
    text.lines()
        .find_map(|line| line.strip_prefix("jira_hub_relay_passes_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no relay passes in /metrics: {text}"))
}

/// Listing `inbox/` raises open and close events on the watched folder itself: they must not
/// wake the loop (each woke it, its listing raised the next, and an idle hub spun a
/// core). At rest the relay passes about once a poll interval (50 ms here), with notifications
/// on, and a file still wakes it.
#[test]
fn an_idle_relay_passes_no_more_than_its_timer_explains() {
    let dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&dir);
    let daemon = Daemon::start(&dir.db(), &[]);
    drop_file(
        &relay.join("inbox"),
        "claim-idle-1.json",
        &claim_file("idle-1", &token, 1),
    );
    wait_for_json(&relay.join("outbox/claim-idle-1.json"), WAIT);
    // After a request the relay lists ten times as often for ten intervals: at rest after that.
    std::thread::sleep(Duration::from_millis(10 * 50 + 100));
    let before = relay_passes(&daemon.address);
    let started = std::time::Instant::now();
    std::thread::sleep(Duration::from_secs(2));
    let passes = relay_passes(&daemon.address) - before;
    // One pass a poll interval, and one more at each end of the interval.
    let explained = (started.elapsed().as_millis() / 50) as u64 + 2;
    assert!(
        passes <= explained,
        "{passes} passes at rest where the timer explains {explained}"
    );
    drop_file(
        &relay.join("inbox"),
        "claim-idle-2.json",
        &claim_file("idle-2", &token, 1),
    );
    wait_for_json(&relay.join("outbox/claim-idle-2.json"), WAIT);
}

/// A share whose client caches its listings shows the hub the agent's files late (sshfs's default
/// cache: 20 s). Emulated by requests that appear in `inbox/` 20 s after the file server wrote
/// them (their mtime, the file server's clock). The hub measures the delay on the file server's
/// clock and says so, with the mount option that removes it, in `/ready`, `/metrics`, the console
/// and `status`; and while requests come it lists `inbox/` faster than at rest.
#[test]
fn a_share_that_shows_the_agents_files_late_is_told_with_its_delay_and_the_option() {
    let dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&dir);
    let daemon = Daemon::start(&dir.db(), &["--relay-no-notify"]);
    let inbox = relay.join("inbox");
    drop_file(&inbox, "claim-first.json", &claim_file("first", &token, 1));
    wait_for_json(&relay.join("outbox/claim-first.json"), WAIT);
    let (_, ready) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(
        ready["relay_visibility"],
        serde_json::Value::Null,
        "{ready}"
    );
    for n in 0..3 {
        let name = format!("claim-late-{n}.json");
        let claim = claim_file(&format!("late-{n}"), &token, 1);
        drop_file_late(&inbox, &name, &claim, Duration::from_secs(20));
        wait_for_json(&relay.join("outbox").join(&name), WAIT);
    }
    let (status, ready) = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(status, 200, "{ready}");
    let seconds = ready["relay_visibility_seconds"].as_f64().unwrap();
    assert!((19.0..30.0).contains(&seconds), "{ready}");
    let told = ready["relay_visibility"].as_str().unwrap();
    assert!(
        told.contains("опозданием 2") && told.contains("до 1 с"),
        "{told}"
    );
    let (_, metrics) = http(&daemon.address, "GET", "/metrics", None, None);
    let metrics = metrics.as_str().unwrap_or_default().to_string();
    let gauge: f64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("jira_hub_relay_visibility_seconds "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no visibility in /metrics: {metrics}"));
    assert!((19.0..30.0).contains(&gauge), "{gauge}");
    // `status` reads it in the lock the hub keeps in the share (its next heartbeat carries it).
    let started = std::time::Instant::now();
    loop {
        let out = run_ok(&dir.db(), &["status"]);
        let text = out.stdout;
        if text.contains("s late: ") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{text}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn set_mtime(path: &std::path::Path, at: std::time::SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(at)
        .unwrap();
}

/// Retention ages files by the hub's own records: the archive day, the `refused_at` of a
/// refusal, the hub's answers; whatever an old entry is (a FIFO, a folder, a day folder with a
/// sub-folder), it goes, and the rest of the pruning goes on.
#[test]
fn old_relay_files_are_pruned_after_the_retention() {
    let dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&dir);
    let month_ago = std::time::SystemTime::now() - Duration::from_secs(30 * 24 * 3600);
    let old_day = relay.join("archive/2026-10-01");
    std::fs::create_dir_all(old_day.join("sub/deeper")).unwrap();
    std::fs::create_dir_all(relay.join("outbox")).unwrap();
    std::fs::create_dir_all(relay.join("rejected/claim-folder.json")).unwrap();
    std::fs::write(old_day.join("claim-old.json"), "{}").unwrap();
    std::fs::write(relay.join("outbox/claim-old.json"), "{}").unwrap();
    set_mtime(&relay.join("outbox/claim-old.json"), month_ago);
    let status = std::process::Command::new("mkfifo")
        .arg(relay.join("rejected/claim-fifo.json"))
        .status()
        .unwrap();
    assert!(status.success());
    for refused in ["claim-fifo.json", "claim-folder.json"] {
        std::fs::write(
            relay.join(format!("rejected/{refused}.error.json")),
            serde_json::to_vec(&json!({"file": refused, "refused_at": "2026-10-01T00:00:00Z", "code": "not_regular_file"})).unwrap(),
        )
        .unwrap();
    }
    let fresh = relay.join("outbox/claim-fresh.json");
    std::fs::write(&fresh, "{}").unwrap();
    let _daemon = Daemon::start(&dir.db(), &["--relay-retention-days", "7"]);
    drop_file(
        &relay.join("inbox"),
        "claim-p1.json",
        &claim_file("p1", &token, 1),
    );
    wait_for_json(&relay.join("outbox/claim-p1.json"), WAIT);
    let old = [
        old_day.clone(),
        relay.join("outbox/claim-old.json"),
        relay.join("rejected/claim-fifo.json"),
        relay.join("rejected/claim-fifo.json.error.json"),
        relay.join("rejected/claim-folder.json"),
        relay.join("rejected/claim-folder.json.error.json"),
    ];
    let started = std::time::Instant::now();
    while old.iter().any(|p| p.symlink_metadata().is_ok()) {
        assert!(
            started.elapsed() < WAIT,
            "old files were not pruned: {:?}",
            old.iter()
                .filter(|p| p.symlink_metadata().is_ok())
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(fresh.exists(), "recent files stay");
}

/// Files that arrive with old mtimes (copies keep them; clocks differ across the air gap) are
/// kept for the retention from when the hub moved them: a restart does not delete the evidence.
#[test]
fn files_that_arrive_with_old_mtimes_are_kept() {
    let dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&dir);
    let month_ago = std::time::SystemTime::now() - Duration::from_secs(30 * 24 * 3600);
    let inbox = relay.join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    for (name, value) in [
        ("claim-oldvalid.json", claim_file("oldvalid", &token, 1)),
        ("claim-oldbad.json", claim_file("oldbad", "wrong-token", 1)),
    ] {
        std::fs::write(inbox.join(name), serde_json::to_vec(&value).unwrap()).unwrap();
        set_mtime(&inbox.join(name), month_ago);
    }
    {
        let _daemon = Daemon::start(&dir.db(), &["--relay-retention-days", "7"]);
        wait_for_json(&relay.join("outbox/claim-oldvalid.json"), WAIT);
        wait_for_json(&relay.join("rejected/claim-oldbad.json.error.json"), WAIT);
        wait_for_path(&relay.join("rejected/claim-oldbad.json"));
        // Answered first, archived next: the kill must come after both.
        wait_for_gone(&inbox.join("claim-oldvalid.json"));
    }
    // The next start prunes; nothing of today's goes.
    let daemon = Daemon::start(&dir.db(), &["--relay-retention-days", "7"]);
    drop_file(&inbox, "claim-later.json", &claim_file("later", &token, 1));
    wait_for_json(&relay.join("outbox/claim-later.json"), WAIT);
    wait_for_gone(&inbox.join("claim-later.json"));
    drop(daemon);
    let archived: Vec<_> = std::fs::read_dir(relay.join("archive"))
        .unwrap()
        .filter_map(Result::ok)
        .flat_map(|day| {
            std::fs::read_dir(day.path())
                .unwrap()
                .filter_map(Result::ok)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        archived.contains(&"claim-oldvalid.json".to_string()),
        "{archived:?}"
    );
    assert!(relay.join("rejected/claim-oldbad.json").exists());
    assert!(relay.join("rejected/claim-oldbad.json.error.json").exists());
}

/// The data model's scenarios in HTTP terms, against the real binary over a real socket.
#[test]
fn data_model_scenarios_over_http() {
    let dir = TestDir::new();
    let (mut hub, _relay, _token) = relay_hub(&dir);
    let tokens = hub.tokens().unwrap().unwrap();
    let daemon = Daemon::start(&dir.db(), &[]);
    let client = Some(tokens.client.as_str());
    let get = |path: &str| http(&daemon.address, "GET", path, client, None);
    let send = |method: &str, path: &str, body: serde_json::Value| {
        http(&daemon.address, method, path, client, Some(&body))
    };

    let (status, settings) = get("/settings");
    assert_eq!(status, 200);
    let version = settings["settings_version"].as_i64().unwrap();
    assert_eq!(
        settings["closed_statuses"],
        json!(["Готово", "Снято"]),
        "«Закрытые статусы по умолчанию»"
    );
    // «Правка настроек поднимает версию».
    let (status, _) = send("PUT", "/settings", json!({"pacing": {"max_deliveries": 5}}));
    assert_eq!(status, 200);
    let claim = json!({"kind": "claim", "id": "hc1", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
        "agent_version": "1.4.0", "settings_version": version, "max_commands": 1});
    let (status, answer) = http(
        &daemon.address,
        "POST",
        "/agent/claim",
        Some(&tokens.agent),
        Some(&claim),
    );
    assert_eq!(status, 200);
    assert_eq!(
        (
            answer["settings_version"].as_i64(),
            answer["settings"]["pacing"]["max_deliveries"].as_i64()
        ),
        (Some(version + 1), Some(5))
    );
    // «Неверный relay_dir», «Запись базовой JQL».
    let (status, body) = send("PUT", "/settings", json!({"relay_dir": "rshb/jira-bridge"}));
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (422, Some("relay_dir"))
    );
    let (status, body) = send("PUT", "/settings", json!({"base_jql": "project = AURORA"}));
    assert_eq!(
        (status, body["error"]["message"].as_str()),
        (422, Some("базовая JQL собирается из проектов"))
    );
    // Projects: «Метка с пробелом», «Та же метка другим регистром», «Метка — зарезервированное слово JQL»,
    // «Создание проекта не трогает версию настроек».
    assert_eq!(
        send(
            "POST",
            "/projects",
            json!({"label": "STOCKS DRRK", "name": "x"})
        )
        .1["error"]["field"],
        "label"
    );
    let (status, body) = send("POST", "/projects", json!({"label": "awpca", "name": "x"}));
    assert_eq!(
        (status, body["error"]["message"].as_str()),
        (409, Some("проект с такой меткой уже есть"))
    );
    assert_eq!(
        send(
            "POST",
            "/projects",
            json!({"label": "EMPTY", "name": "Пусто"})
        )
        .0,
        201
    );
    let (_, settings) = get("/settings");
    assert_eq!(settings["settings_version"], json!(version + 1));
    assert_eq!(
        settings["base_jql"],
        "project = AURORA AND labels in (\"AWPCA\", \"EMPTY\")"
    );
    assert!(
        !settings.to_string().contains(&tokens.client)
            && !settings.to_string().contains(&tokens.agent)
    );
    // «Статус пакета» over HTTP.
    let (status, batch) = send(
        "POST",
        "/batches",
        json!({"title": "t", "author": "a", "commands": [
        {"type": "comment", "params": {"key": "AURORA-1", "body": "x"}}]}),
    );
    assert_eq!(
        (status, batch["status_label"].as_str()),
        (201, Some("в очереди"))
    );
    hub.expire_claims().unwrap();
}

/// For the same state, a request through the relay and the same request over HTTP get the same
/// answer: two copies of one database, one served through each transport.
#[test]
fn the_relay_and_http_answer_alike() {
    let dir = TestDir::new();
    let (mut hub, relay, token) = relay_hub(&dir);
    hub.enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
        {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Новая"}},
        {"type": "comment", "params": {"key": {"$result": "key"}, "body": "x"}, "depends_on": 1}]}))).unwrap();
    let copy = run_ok(&dir.db(), &["backup"]).stdout.trim().to_string();
    let other = TestDir::new();
    std::fs::create_dir_all(other.db().parent().unwrap()).unwrap();
    std::fs::copy(&copy, other.db()).unwrap();
    let mut other_hub = jira_hub::service::HubConnection::open(
        &other.db(),
        std::sync::Arc::new(jira_hub::clock::SystemClock),
    )
    .unwrap()
    .0;
    set_settings(&mut other_hub, json!({"relay_dir": null}));
    // The copy's relay_dir was cleared (one version up): the same write here keeps the versions
    // level; relay_dir never reaches the agent.
    let same_dir = json!({"relay_dir": relay.display().to_string()});
    hub.update_settings(same_dir.as_object().unwrap()).unwrap();
    let _relay_daemon = Daemon::start(&dir.db(), &[]);
    let http_daemon = Daemon::start(&other.db(), &[]);

    let without_time = |mut v: serde_json::Value| {
        v.as_object_mut().unwrap().remove("created_at");
        v
    };
    let mut claim = claim_file("same-claim", &token, 5);
    drop_file(&relay.join("inbox"), "claim-same-claim.json", &claim);
    let by_file = wait_for_json(&relay.join("outbox/claim-same-claim.json"), WAIT);
    claim.as_object_mut().unwrap().remove("token");
    let (status, by_http) = http(
        &http_daemon.address,
        "POST",
        "/agent/claim",
        Some(&token),
        Some(&claim),
    );
    assert_eq!(status, 200);
    // Each transport says the largest report it takes: the relay's file limit,
    // HTTP's body limit; the rest is the same decision.
    assert_eq!(by_file["max_report_bytes"], json!(256 * 1024 * 1024));
    assert_eq!(by_http["max_report_bytes"], json!(64 * 1024 * 1024));
    let without_limit = |mut v: serde_json::Value| {
        v.as_object_mut().unwrap().remove("max_report_bytes");
        without_time(v)
    };
    assert_eq!(
        without_limit(by_file.clone()),
        without_limit(by_http),
        "the claim answers differ"
    );

    let command = by_file["commands"][0]["id"].clone();
    let mut report = report_file(
        "same-report",
        &token,
        json!([
        {"command_id": command, "delivery": 1, "status": "done", "result": {"key": "AURORA-50", "created": true}, "jira_calls": 2},
        {"command_id": 999, "delivery": 1, "status": "done"}]),
    );
    drop_file(&relay.join("inbox"), "report-same-report.json", &report);
    let by_file = wait_for_json(&relay.join("outbox/report-same-report.json"), WAIT);
    report.as_object_mut().unwrap().remove("token");
    let (_, by_http) = http(
        &http_daemon.address,
        "POST",
        "/agent/report",
        Some(&token),
        Some(&report),
    );
    assert_eq!(by_file, by_http);
    assert_eq!(by_file["accepted"], json!([command]));
}

/// SIGTERM while a request is in flight (its body half sent): the request is still answered,
/// then the daemon exits 0. Each step waits for a state: the handler reading the body (hyper's
/// `100 Continue`), the listener closed by the stop.
#[test]
fn a_stop_drains_requests_in_flight() {
    use std::io::{BufRead, Read, Write};
    let dir = TestDir::new();
    let (hub, _relay, _token) = relay_hub(&dir);
    let client = hub.tokens().unwrap().unwrap().client;
    let mut daemon = Daemon::start(&dir.db(), &[]);
    let body = serde_json::to_vec(&json!({"label": "DRAIN", "name": "В полёте"})).unwrap();
    let mut stream = std::net::TcpStream::connect(&daemon.address).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let head = format!(
        "POST /projects HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer {client}\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&body[..5]).unwrap();
    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 100"), "{line}");
    reader.read_line(&mut line).unwrap();
    daemon.signal("TERM");
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect(&daemon.address).is_ok() {
        assert!(
            started.elapsed() < WAIT,
            "the listener stays open after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    stream.write_all(&body[5..]).unwrap();
    let mut response = String::new();
    reader.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    assert_eq!(daemon.wait().code(), Some(0));
    assert!(hub.projects().unwrap().iter().any(|p| p.label == "DRAIN"));
}

/// A claim waiting for work over HTTP is answered (empty) as soon as the daemon is told to
/// stop, and the daemon exits cleanly: the stop does not wait for the claim's wait to end.
#[test]
fn a_stop_answers_claims_waiting_for_work() {
    let dir = TestDir::new();
    let (hub, _relay, _token) = relay_hub(&dir);
    let tokens = hub.tokens().unwrap().unwrap();
    let version = hub.settings().unwrap().settings_version;
    let mut daemon = Daemon::start(&dir.db(), &[]);
    let claim = json!({"kind": "claim", "id": "held-1", "agent": "agent-held", "sent_at": "2026-11-29T10:00:00Z",
        "agent_version": "1.4.0", "settings_version": version, "max_commands": 5, "wait_seconds": 900});
    let held = std::thread::spawn({
        let address = daemon.address.clone();
        let token = tokens.agent.clone();
        move || http(&address, "POST", "/agent/claim", Some(&token), Some(&claim))
    });
    // The claim arrived and waits: its agent is seen, its answer not given.
    let started = std::time::Instant::now();
    loop {
        let (_, agents) = http(
            &daemon.address,
            "GET",
            "/agents",
            Some(&tokens.client),
            None,
        );
        if agents.as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        assert!(started.elapsed() < WAIT, "the claim never arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !held.is_finished(),
        "nothing to hand out: the claim is held"
    );
    daemon.signal("TERM");
    let (status, answer) = held.join().unwrap();
    assert_eq!((status, &answer["commands"]), (200, &json!([])), "{answer}");
    assert_eq!(daemon.wait().code(), Some(0));
}

/// The console's view of the relay folder comes from the relay's own passes (nothing else reads
/// the share): files still waiting, refusals of the day (those `rejected/` held when the relay
/// took the folder and those it made since), the folder missing.
#[test]
fn the_relay_tells_the_console_what_waits_and_what_it_refused_today() {
    let dir = TestDir::new();
    let (mut hub, relay, token) = relay_hub(&dir);
    let earlier = relay.join("rejected/claim-old.json.error.json");
    std::fs::write(&earlier, b"{}").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&earlier)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(3 * 86_400))
        .unwrap();
    std::fs::write(relay.join("rejected/claim-today.json.error.json"), b"{}").unwrap();
    let mut worker = worker(&hub, Duration::from_secs(30));
    drop_file(
        &relay.join("inbox"),
        "claim-wrong.json",
        &claim_file("wrong", "not-the-token", 1),
    );
    std::fs::write(
        relay.join("inbox/claim-half.json"),
        b"{\"kind\": \"claim\", ",
    )
    .unwrap();
    drop_file(
        &relay.join("inbox"),
        "claim-ok.json",
        &claim_file("ok", &token, 1),
    );
    let counts = worker.pass().unwrap();
    assert_eq!((counts.applied, counts.refused, counts.waiting), (1, 1, 1));
    let jira_hub::service::RelayState::Present {
        dir: shown,
        waiting,
        claims_waiting,
        refused_today,
        ..
    } = hub.overview().unwrap().relay
    else {
        panic!("the relay folder is not shown present");
    };
    assert_eq!(
        (shown, waiting, claims_waiting, refused_today),
        (relay.display().to_string(), 1, 0, 2)
    );
    // A request the share showed 20 s after it was written: the console says how late, and what
    // to change.
    drop_file_late(
        &relay.join("inbox"),
        "claim-late.json",
        &claim_file("late", &token, 1),
        Duration::from_secs(20),
    );
    worker.pass().unwrap();
    let jira_hub::service::RelayState::Present { visibility, .. } = hub.overview().unwrap().relay
    else {
        panic!("the relay folder is not shown present");
    };
    let (delay, told) = visibility.expect("the delay measured");
    assert!(delay >= Duration::from_secs(19), "{delay:?}");
    assert!(told.is_some_and(|told| told.contains("до 1 с")));
    std::fs::rename(&relay, dir.path().join("unmounted")).unwrap();
    worker.pass().unwrap();
    assert_eq!(
        hub.overview().unwrap().relay,
        jira_hub::service::RelayState::Missing {
            dir: relay.display().to_string()
        }
    );
}

/// A refused file that cannot be moved to `rejected/` (here the folder is immutable, as a full
/// disk fails the same writes) is counted and logged once,
/// not again on every pass; its move is tried on each pass; a new file is counted anew.
#[test]
fn a_refused_file_that_cannot_be_moved_is_counted_once() {
    use std::sync::atomic::Ordering;
    let dir = TestDir::new();
    let (hub, relay, token) = relay_hub(&dir);
    let mut relay_worker = worker(&hub, Duration::from_secs(5));
    // `claim-<65 letters>.json` is ours and refused (an id over 64 characters); `rejected/`
    // takes nothing while it is immutable (`chattr +i`, which stops root too).
    let long = format!("claim-{}.json", "x".repeat(65));
    std::fs::write(relay.join("inbox").join(&long), b"{}").unwrap();
    let chattr = |flag: &str| {
        std::process::Command::new("chattr")
            .arg(flag)
            .arg(relay.join("rejected"))
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    if !chattr("+i") {
        eprintln!("skipped: chattr +i is not available here (not root, or no such flag)");
        return;
    }
    let refused = || hub.metrics().relay_refused.load(Ordering::Relaxed);
    let today = || {
        hub.metrics()
            .refused_on(time::OffsetDateTime::now_utc().date())
    };
    let start = std::time::Instant::now();
    for n in 1..=3u64 {
        let counts = relay_worker
            .pass_at(start + Duration::from_secs(n))
            .unwrap();
        assert!(
            relay.join("inbox").join(&long).exists(),
            "it could not move"
        );
        assert_eq!(counts.refused, usize::from(n == 1), "pass {n}");
        assert_eq!(refused(), 1, "pass {n}");
        assert_eq!(today(), 1, "pass {n}");
    }
    assert!(chattr("-i"));
    // Another file is refused and counted; the one that could not move goes now, counted once.
    drop_file(
        &relay.join("inbox"),
        "claim-wrong.json",
        &claim_file("wrong", "not-the-token", 1),
    );
    let counts = relay_worker
        .pass_at(start + Duration::from_secs(10))
        .unwrap();
    assert_eq!(counts.refused, 1);
    assert_eq!(refused(), 2);
    assert!(relay.join("rejected/claim-wrong.json").exists());
    assert!(relay.join("rejected").join(&long).exists());
    let _ = token;
}

/// «The share not mounted»: a `relay_dir` that is an empty folder and not a mount
/// point gets no `inbox/`, `outbox/`, … on the local disk, pass after pass, and the hub says so;
/// once the share is mounted there (its folders appear) the relay uses it by itself. A marked
/// folder (`jira-hub relay init`) gets its missing folders made again.
#[test]
fn an_empty_mount_point_gets_no_relay_folders() {
    let dir = TestDir::new();
    let (mut hub, _relay, token) = relay_hub(&dir);
    let mount_point = dir.path().join("mnt");
    std::fs::create_dir(&mount_point).unwrap();
    let mut update = serde_json::Map::new();
    update.insert("relay_dir".into(), mount_point.display().to_string().into());
    hub.update_settings(&update).unwrap();
    let mut worker = worker(&hub, Duration::from_secs(30));
    for _ in 0..3 {
        assert_eq!(worker.pass().unwrap(), Default::default());
    }
    assert_eq!(std::fs::read_dir(&mount_point).unwrap().count(), 0);
    let problem = hub.metrics().relay_problem().unwrap();
    assert!(
        problem.contains("не смонтирована") && problem.contains("jira-hub relay init"),
        "{problem}"
    );
    assert!(
        hub.metrics()
            .relay_missing
            .load(std::sync::atomic::Ordering::Relaxed)
    );
    // The share comes up with its folders: used at once.
    for folder in ["inbox", "outbox", "archive", "rejected"] {
        std::fs::create_dir(mount_point.join(folder)).unwrap();
    }
    drop_file(
        &mount_point.join("inbox"),
        "claim-m1.json",
        &claim_file("m1", &token, 1),
    );
    assert_eq!(worker.pass().unwrap().applied, 1);
    assert!(hub.metrics().relay_problem().is_none());
    // A marked folder whose outbox/ went missing gets it again.
    std::fs::write(mount_point.join(".jira-hub-relay"), "").unwrap();
    std::fs::remove_dir_all(mount_point.join("outbox")).unwrap();
    worker.pass().unwrap();
    assert!(mount_point.join("outbox").is_dir());
}

/// A marked relay folder whose missing folders cannot be made (here the folder is immutable):
/// the pass does not fail (before, an ERROR line every second while `/ready` showed the
/// previous folder's state); the folder's state says why, as the OS said it, and stays so
/// until the folders can be made.
#[test]
fn relay_folders_that_cannot_be_made_are_the_folders_state() {
    let dir = TestDir::new();
    let (mut hub, relay, _token) = relay_hub(&dir);
    let marked = dir.path().join("marked");
    std::fs::create_dir(&marked).unwrap();
    std::fs::write(marked.join(".jira-hub-relay"), b"").unwrap();
    let chattr = |flag: &str| {
        std::process::Command::new("chattr")
            .arg(flag)
            .arg(&marked)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    let mut worker = worker(&hub, Duration::from_secs(5));
    worker.pass().unwrap();
    assert_eq!(hub.metrics().relay_problem(), None, "{relay:?} is usable");
    if !chattr("+i") {
        eprintln!("skipped: chattr +i is not available here (not root, or no such flag)");
        return;
    }
    set_settings(
        &mut hub,
        serde_json::json!({"relay_dir": marked.display().to_string()}),
    );
    for _ in 0..3 {
        let passed = worker.pass();
        assert!(passed.is_ok(), "{passed:?}");
        let problem = hub.metrics().relay_problem().unwrap_or_default();
        assert!(
            problem.contains("не удалось создать папки реле")
                && problem.contains(&marked.display().to_string())
                && problem.contains("os error"),
            "{problem}"
        );
    }
    assert!(chattr("-i"));
    worker.pass().unwrap();
    assert_eq!(hub.metrics().relay_problem(), None);
    assert!(marked.join("inbox").is_dir());
}
