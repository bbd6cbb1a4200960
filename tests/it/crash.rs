//! kill -9 at random moments of a claim/report workload through the relay loses no request and
//! applies none twice: every command ends done, delivered once, and the sum of `jira_calls` is
//! exact. CI runs a short form; `scripts/crash-test.sh` runs the long one (50 kills or more):
//! `JIRA_HUB_CRASH_KILLS=50 cargo test --release --test it crash -- --nocapture`.

use crate::support::*;
use jira_hub::domain::command::CommandStatus;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A small deterministic generator for the kill times (no dependency for ten lines).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

#[test]
fn kill_9_loses_nothing_and_applies_nothing_twice() {
    let kills: usize = std::env::var("JIRA_HUB_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let mut commands_total: usize = 20;
    let dir = TestDir::new();
    let (mut hub, relay, token) = relay_hub(&dir);
    for chunk in 0..commands_total.div_ceil(10) {
        let list: Vec<Value> = (0..10.min(commands_total - chunk * 10))
            .map(|i| json!({"type": "comment", "params": {"key": format!("AURORA-{}", i + 1), "body": "x"}}))
            .collect();
        hub.enqueue_batch(&batch(
            json!({"title": "crash", "author": "test", "commands": list}),
        ))
        .unwrap();
    }
    let daemon = Arc::new(Mutex::new(Some(Daemon::start(&dir.db(), &[]))));
    let finished = Arc::new(AtomicBool::new(false));
    let kills_done = Arc::new(std::sync::atomic::AtomicUsize::new(0));

    let killer = {
        let daemon = daemon.clone();
        let finished = finished.clone();
        let kills_done = kills_done.clone();
        let db = dir.db();
        std::thread::spawn(move || {
            let seed = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(7);
            let mut random = Lcg(seed);
            let mut done = 0;
            while done < kills && !finished.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10 + random.next(150)));
                let mut slot = daemon.lock().unwrap();
                if let Some(mut running) = slot.take() {
                    running.signal("KILL");
                    running.wait();
                }
                *slot = Some(Daemon::start(&db, &[]));
                done += 1;
                kills_done.store(done, Ordering::SeqCst);
            }
            done
        })
    };

    // The agent: claim, report everything done with one Jira call, delete the answers it read.
    let inbox = relay.join("inbox");
    let outbox = relay.join("outbox");
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut reported = 0;
    for n in 0.. {
        assert!(Instant::now() < deadline, "the workload did not finish");
        let id = format!("c{n}");
        drop_file(
            &inbox,
            &format!("claim-{id}.json"),
            &claim_file(&id, &token, 7),
        );
        let answer = wait_for_json(
            &outbox.join(format!("claim-{id}.json")),
            Duration::from_secs(60),
        );
        std::fs::remove_file(outbox.join(format!("claim-{id}.json"))).unwrap();
        let commands = answer["commands"].as_array().unwrap().clone();
        if commands.is_empty() {
            if reported == commands_total && kills_done.load(Ordering::SeqCst) >= kills {
                break;
            }
            if reported == commands_total {
                // The killer is not done: more work, so that every kill lands in the middle of it.
                let list: Vec<Value> =
                    (0..10).map(|i| json!({"type": "comment", "params": {"key": format!("AURORA-{}", i + 1), "body": "x"}})).collect();
                hub.enqueue_batch(&batch(
                    json!({"title": "crash", "author": "test", "commands": list}),
                ))
                .unwrap();
                commands_total += 10;
            }
            continue;
        }
        let results: Vec<Value> = commands
            .iter()
            .map(|c| json!({"command_id": c["id"], "delivery": c["delivery"], "status": "done", "result": {"comment_id": "1"}, "jira_calls": 1}))
            .collect();
        let id = format!("r{n}");
        drop_file(
            &inbox,
            &format!("report-{id}.json"),
            &report_file(&id, &token, json!(results)),
        );
        let answer = wait_for_json(
            &outbox.join(format!("report-{id}.json")),
            Duration::from_secs(60),
        );
        std::fs::remove_file(outbox.join(format!("report-{id}.json"))).unwrap();
        assert!(answer["ignored"].as_array().unwrap().is_empty(), "{answer}");
        reported += answer["accepted"].as_array().unwrap().len();
    }
    finished.store(true, Ordering::SeqCst);
    let killed = killer.join().unwrap();
    assert_eq!(killed, kills, "every kill happened during the workload");
    // The answer to the last claim comes before its file moves to the archive: let the move
    // happen before the daemon is killed (bounded).
    let settled = Instant::now() + Duration::from_secs(30);
    while Instant::now() < settled
        && std::fs::read_dir(&inbox)
            .unwrap()
            .filter_map(Result::ok)
            .any(|e| !e.file_name().to_string_lossy().starts_with('.'))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(daemon);

    let batches = hub.batches(None).unwrap();
    let commands: Vec<_> = batches.iter().flat_map(|b| b.commands.iter()).collect();
    assert_eq!(commands.len(), commands_total);
    assert!(
        commands.iter().all(|c| c.status == CommandStatus::Done),
        "every command ends done"
    );
    assert!(
        commands.iter().all(|c| c.deliveries == 1),
        "no command was handed out twice"
    );
    let jira_calls: i64 = commands.iter().map(|c| c.jira_calls).sum();
    assert_eq!(
        jira_calls, commands_total as i64,
        "no report was applied twice or lost"
    );
    assert!(
        std::fs::read_dir(&inbox)
            .unwrap()
            .filter_map(Result::ok)
            .all(|e| e.file_name().to_string_lossy().starts_with('.'))
    );
    println!("{killed} kills, {commands_total} commands, {jira_calls} Jira calls");
}
