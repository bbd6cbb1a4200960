//! What the operator reads in the console and the CLI is true and in one
//! language (charts keep an hour's peak, times in one form, keys as links, Jira's refusals name
//! their key, link names with their direction, Russian sentences as Russian is written).

use crate::support::*;
use serde_json::json;
use time::Duration;

fn comments(n: usize) -> jira_hub::service::BatchRequest {
    let commands: Vec<_> = (1..=n)
        .map(|i| json!({"type": "comment", "params": {"key": format!("AURORA-{i}"), "body": "x"}}))
        .collect();
    batch(json!({"title": "t", "author": "a", "commands": commands}))
}

/// A hub without automatic refreshes, its clock, and an agent to claim and report.
fn quiet_hub() -> (
    TestDir,
    std::sync::Arc<jira_hub::clock::ManualClock>,
    jira_hub::service::HubConnection,
    Agent,
) {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, json!({"auto_refresh_minutes": 0}));
    (dir, clock, hub, Agent::new("agent-1"))
}

/// The queue-depth chart plots each hour's peak: a batch of three enqueued and done within an
/// hour shows 3 in that hour once the queue drained (before, the hour's end: 0), and a batch
/// still open shows in the hours since.
#[test]
fn the_queue_chart_keeps_an_hours_peak() {
    let (_dir, clock, mut hub, agent) = quiet_hub();
    clock.advance(Duration::minutes(5));
    hub.enqueue_batch(&comments(3)).unwrap();
    clock.advance(Duration::minutes(5));
    let ids = claimed(&agent, &mut hub, 3);
    clock.advance(Duration::minutes(10));
    let results: Vec<_> = ids
        .iter()
        .map(|id| json!({"command_id": id, "delivery": 1, "status": "done", "result": {}}))
        .collect();
    agent.report(&mut hub, json!(results));
    clock.advance(Duration::hours(2));
    hub.enqueue_batch(&comments(2)).unwrap();
    clock.advance(Duration::minutes(10));
    let overview = hub.overview().unwrap();
    let depth: Vec<(u8, i64)> = overview.hours[overview.hours.len() - 3..]
        .iter()
        .map(|h| (h.start.hour(), h.queue_depth))
        .collect();
    assert_eq!(depth, [(10, 3), (11, 0), (12, 2)]);
}

/// «Ошибки» and `commands failed` read a batch's failures in the batch's order, oldest first
/// (the newest failures still pick which batches come first).
#[test]
fn failed_commands_are_listed_in_their_batchs_order() {
    let (_dir, clock, mut hub, agent) = quiet_hub();
    hub.enqueue_batch(&comments(3)).unwrap();
    let ids = claimed(&agent, &mut hub, 3);
    // Reported newest-last in reverse: the third fails first, the first last.
    for id in ids.iter().rev() {
        clock.advance(Duration::seconds(1));
        agent.report(
            &mut hub,
            json!([{"command_id": id, "delivery": 1, "status": "failed", "error": "нет"}]),
        );
    }
    let seqs: Vec<i64> = hub
        .failed_commands(100)
        .unwrap()
        .iter()
        .map(|c| c.seq)
        .collect();
    assert_eq!(seqs, [1, 2, 3]);
    let batches = hub.failed_by_batch(100).unwrap();
    let seqs: Vec<i64> = batches[0].commands.iter().map(|c| c.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
}

/// Claims `n` commands; their ids.
fn claimed(agent: &Agent, hub: &mut jira_hub::service::HubConnection, n: usize) -> Vec<i64> {
    let ids: Vec<i64> = agent
        .claim(hub, n as u32)
        .commands
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids.len(), n);
    ids
}

/// `serve` on a port another program holds makes nothing (no database, no data folder) and names
/// a free `--listen`, the OS's words quoted after ours.
#[test]
fn serve_on_a_busy_port_makes_nothing_and_suggests_a_free_one() {
    let dir = TestDir::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let db = dir.path().join("data").join("hub.sqlite");
    let out = run(&db, &["serve", "--listen", &address]);
    assert_ne!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains(&format!(
            "Порт {address} занят другой программой; укажите свободный адрес: --listen 127.0.0.1:"
        )),
        "{out:?}"
    );
    assert!(
        out.stderr
            .contains(": «Address already in use (os error 98)»"),
        "{out:?}"
    );
    assert!(!dir.path().join("data").exists(), "nothing made: {out:?}");
}

/// `status` on a backup file says that the relay folder's counts are the live folder's (a
/// backup keeps the folder's name, not its files); on the live database it does not. Its
/// `backup:` line names the newest file of the folder it lies in.
#[test]
fn status_on_a_backup_says_the_relay_counts_are_the_live_folders() {
    let dir = TestDir::new();
    let db = dir.db();
    run_ok(
        &db,
        &["init", "--config", example_config().to_str().unwrap()],
    );
    let relay = dir.path().join("relay");
    run_ok(&db, &["relay", "init", relay.to_str().unwrap()]);
    run_ok(
        &db,
        &["settings", "set", "relay_dir", &json!(relay).to_string()],
    );
    let live = run_ok(&db, &["status"]).stdout;
    assert!(!live.contains("this is a backup"), "{live}");
    run_ok(&db, &["backup"]);
    let backup = std::fs::read_dir(db.parent().unwrap().join("backups"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sqlite"))
        .unwrap();
    let status = run_ok(&backup, &["status"]).stdout;
    assert!(
        status.contains("(this is a backup: the relay counts are the live folder's now"),
        "{status}"
    );
    // Its fellows are the files beside it (this one among them), not a `backups/backups/`.
    let line = status
        .lines()
        .find(|l| l.starts_with("backup:"))
        .unwrap_or_default();
    assert!(!line.contains("none"), "{status}");
}

/// The sign-in page of a hub run by `serve` names this hub's database in the command that
/// prints the client token, not `jira-hub demo`.
#[test]
fn the_production_sign_in_page_names_this_hubs_database() {
    let dir = TestDir::new();
    let db = dir.db();
    run_ok(
        &db,
        &["init", "--config", example_config().to_str().unwrap()],
    );
    let daemon = Daemon::start(&db, &[]);
    let (status, page) = http(&daemon.address, "GET", "/", None, None);
    assert_eq!(status, 401);
    let page = page.as_str().unwrap();
    assert!(
        page.contains(&format!(
            "<code>jira-hub --db {} tokens</code>",
            db.display()
        )),
        "{page}"
    );
    assert!(!page.contains("jira-hub demo"), "{page}");
}
