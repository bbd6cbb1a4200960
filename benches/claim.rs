//! Claim and report against a deep queue, measured in one run (`cargo bench --bench claim`):
//! the same work (claim up to 50 commands, report them done) with 100 commands queued and with
//! 100,000 queued, each in a database of its own. After each claim a batch of as many commands is
//! enqueued (not timed), so the depth stays put. Three rounds alternate the two depths; the
//! median rates are compared.
//!
//! `BENCH_CLAIM_DEEP` and `BENCH_CLAIM_ROUNDS` (claims per depth and round) change the sizes.

mod common;

use common::size;

use jira_hub::clock::SystemClock;
use jira_hub::protocol::{AgentAnswer, AgentRequest, decode_value};
use jira_hub::service::{BatchRequest, HubConnection};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error>;

const CLAIM: usize = 50;
const BATCH: usize = 100;

struct Queue {
    hub: HubConnection,
    depth: usize,
    next_request: usize,
    _dir: tempfile::TempDir,
}

fn main() -> Result<(), Error> {
    let deep = size("BENCH_CLAIM_DEEP", 100_000);
    let claims = size("BENCH_CLAIM_ROUNDS", 40);
    let timer = Instant::now();
    let mut queues = [queue(100)?, queue(deep)?];
    println!(
        "queues of 100 and {deep} commands made in {:.1} s; {claims} claims of {CLAIM} per depth and round",
        timer.elapsed().as_secs_f64()
    );
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(), Vec::new()];
    for _round in 0..3 {
        for (i, queue) in queues.iter_mut().enumerate() {
            rates[i].push(claim_and_report(queue, claims)?);
        }
    }
    let medians: Vec<f64> = rates
        .iter_mut()
        .map(|r| {
            r.sort_by(f64::total_cmp);
            r[r.len() / 2]
        })
        .collect();
    for (i, queue) in queues.iter().enumerate() {
        let runs: Vec<String> = rates[i].iter().map(|r| format!("{r:.0}")).collect();
        println!(
            "{:>7} queued: median {:>7.0} commands/s  runs {runs:?}",
            queue.depth, medians[i]
        );
    }
    println!(
        "claim+report: {deep} queued / 100 queued = {:.2} (target >= 0.80)",
        medians[1] / medians[0]
    );
    Ok(())
}

fn queue(depth: usize) -> Result<Queue, Error> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("data").join("hub.sqlite");
    let (mut hub, _) = HubConnection::open(&db, Arc::new(SystemClock))?;
    let config: Value =
        serde_json::from_str(include_str!("../admin/jira-sync/config.example.json"))?;
    hub.init_from_config(&config, false)?;
    let mut left = depth;
    while left > 0 {
        let n = left.min(BATCH);
        enqueue(&mut hub, n)?;
        left -= n;
    }
    Ok(Queue {
        hub,
        depth,
        next_request: 0,
        _dir: dir,
    })
}

fn enqueue(hub: &mut HubConnection, n: usize) -> Result<(), Error> {
    let list: Vec<Value> = (0..n)
        .map(|i| json!({"type": "comment", "params": {"key": format!("AURORA-{}", i + 1), "body": "текст"}}))
        .collect();
    let request: BatchRequest =
        serde_json::from_value(json!({"title": "bench", "author": "bench", "commands": list}))?;
    hub.enqueue_batch(&request)?;
    Ok(())
}

fn request(queue: &mut Queue, kind: &str, body: Value) -> Result<AgentRequest, Error> {
    queue.next_request += 1;
    let mut value = json!({"kind": kind, "id": format!("{kind}-{}", queue.next_request),
        "agent": "bench", "sent_at": "2026-11-29T10:00:00Z"});
    for (k, v) in body.as_object().ok_or("body")? {
        value[k] = v.clone();
    }
    Ok(decode_value(value)?)
}

/// `claims` claims of up to `CLAIM` commands, each reported done; returns commands per second of
/// the timed part (the claim and the report).
fn claim_and_report(queue: &mut Queue, claims: usize) -> Result<f64, Error> {
    let mut elapsed = Duration::ZERO;
    let mut done = 0;
    for _ in 0..claims {
        let claim = request(
            queue,
            "claim",
            json!({"agent_version": "1", "settings_version": 0, "max_commands": CLAIM}),
        )?;
        let timer = Instant::now();
        let AgentAnswer::Claim(answer) = queue.hub.handle_agent_request(&claim)? else {
            return Err("not a claim answer".into());
        };
        elapsed += timer.elapsed();
        if answer.commands.is_empty() {
            return Err("the queue ran dry".into());
        }
        let results: Vec<Value> = answer
            .commands
            .iter()
            .map(|c| {
                json!({"command_id": c.id, "delivery": c.delivery, "status": "done",
                "result": {"comment_id": "1"}, "jira_calls": 1})
            })
            .collect();
        let report = request(queue, "report", json!({"results": results}))?;
        let timer = Instant::now();
        queue.hub.handle_agent_request(&report)?;
        elapsed += timer.elapsed();
        done += answer.commands.len();
        enqueue(&mut queue.hub, answer.commands.len())?;
    }
    Ok(done as f64 / elapsed.as_secs_f64())
}
