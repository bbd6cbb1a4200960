//! The service core against plain SQLite, measured in one run (`cargo bench --bench service`):
//!
//! - ingest: 20,000 raw Jira issues (with links and comments) reported in pages of 1,000 through
//!   `HubConnection::handle_agent_request`, against plain rusqlite inserts of the same, already mapped, rows
//!   (one transaction per page, same database settings). Issues/s and peak RSS, each scenario
//!   in a child process of its own so that the RSS is its own.
//! - commands: 10,000 commands claimed and reported in groups of 100 through the service, against
//!   one claim-and-report transaction pair per group with no logic.
//!
//! Three rounds with the scenarios interleaved; medians are compared. `BENCH_ISSUES` and
//! `BENCH_COMMANDS` change the sizes.

mod common;

use common::size;

use jira_hub::clock::SystemClock;
use jira_hub::jira::map_issue;
use jira_hub::protocol::{AgentAnswer, AgentRequest, decode_value};
use jira_hub::service::{BatchRequest, HubConnection};
use rusqlite::{Connection, params};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

#[path = "support/issues.rs"]
mod issues;
use issues::{field_ids, raw_issue};

const PAGE: usize = 1000;
const GROUP: usize = 100;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(position) = args.iter().position(|a| a == "--child") {
        let scenario = args.get(position + 1).ok_or("--child needs a scenario")?;
        let dir = args.get(position + 2).ok_or("--child needs a folder")?;
        return child(scenario, Path::new(dir));
    }
    let issues = size("BENCH_ISSUES", 20_000);
    let commands = size("BENCH_COMMANDS", 10_000);
    println!(
        "ingest of {issues} issues in pages of {PAGE}; {commands} commands in groups of {GROUP}"
    );
    // Three rounds, scenarios interleaved, medians compared: the machine is shared and noisy.
    let scenarios = [
        "ingest-plain",
        "ingest-hub",
        "commands-plain",
        "commands-hub",
    ];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); scenarios.len()];
    let mut peaks: Vec<u64> = vec![0; scenarios.len()];
    for _round in 0..3 {
        for (i, scenario) in scenarios.iter().enumerate() {
            let dir = tempfile::tempdir()?;
            let output = Command::new(std::env::current_exe()?)
                .args(["--child", scenario])
                .arg(dir.path())
                .output()?;
            if !output.status.success() {
                return Err(format!(
                    "{scenario} failed: {}",
                    String::from_utf8_lossy(&output.stderr)
                )
                .into());
            }
            let line = String::from_utf8(output.stdout)?;
            let mut parts = line.split_whitespace();
            rates[i].push(parts.next().ok_or("no rate")?.parse()?);
            peaks[i] = peaks[i].max(parts.next().ok_or("no rss")?.parse()?);
        }
    }
    let medians: Vec<f64> = rates
        .iter_mut()
        .map(|r| {
            r.sort_by(f64::total_cmp);
            r[r.len() / 2]
        })
        .collect();
    for (i, scenario) in scenarios.iter().enumerate() {
        let runs: Vec<String> = rates[i].iter().map(|r| format!("{r:.0}")).collect();
        println!(
            "{scenario:<15} median {:>8.0} /s  runs {runs:?}  peak RSS {:>6.1} MiB",
            medians[i],
            peaks[i] as f64 / 1024.0
        );
    }
    println!(
        "ingest:   hub / plain inserts = {:.2} (target >= 0.50)",
        medians[1] / medians[0]
    );
    println!(
        "commands: hub / plain claim+report = {:.2}",
        medians[3] / medians[2]
    );
    Ok(())
}

/// Runs one scenario and prints `<rate per second> <peak RSS in KiB>`.
fn child(scenario: &str, dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let db = dir.join("data").join("hub.sqlite");
    let (mut hub, _) = HubConnection::open(&db, Arc::new(SystemClock))?;
    let config: Value =
        serde_json::from_str(include_str!("../admin/jira-sync/config.example.json"))?;
    hub.init_from_config(&config, false)?;
    let rate = match scenario {
        "ingest-plain" => ingest_plain(&db, size("BENCH_ISSUES", 20_000))?,
        "ingest-hub" => ingest_hub(&mut hub, size("BENCH_ISSUES", 20_000))?,
        "commands-plain" => commands_plain(&mut hub, &db, size("BENCH_COMMANDS", 10_000))?,
        "commands-hub" => commands_hub(&mut hub, size("BENCH_COMMANDS", 10_000))?,
        other => return Err(format!("unknown scenario {other}").into()),
    };
    println!("{rate} {}", peak_rss_kib()?);
    Ok(())
}

fn peak_rss_kib() -> Result<u64, Box<dyn std::error::Error>> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .ok_or("no VmHWM")?;
    Ok(line.split_whitespace().nth(1).ok_or("no value")?.parse()?)
}

fn request(kind: &str, id: usize, body: Value) -> Result<AgentRequest, Box<dyn std::error::Error>> {
    let mut value = json!({"kind": kind, "id": format!("{kind}-{id}"), "agent": "bench", "sent_at": "2026-11-29T10:00:00Z"});
    for (k, v) in body.as_object().ok_or("body")? {
        value[k] = v.clone();
    }
    Ok(decode_value(value)?)
}

fn ingest_hub(hub: &mut HubConnection, issues: usize) -> Result<f64, Box<dyn std::error::Error>> {
    hub.enqueue_refresh(None, "bench")?;
    let AgentAnswer::Claim(claim) = hub.handle_agent_request(&request(
        "claim",
        0,
        json!({"agent_version": "1", "settings_version": 0, "max_commands": 1}),
    )?)?
    else {
        return Err("not a claim answer".into());
    };
    let command = claim.commands.first().ok_or("no refresh handed out")?.id;
    // Pages arrive one request at a time, decoded by the transport: only the service is timed
    // (mapping the raw issues and storing them), as only the inserts are in the baseline.
    let mut elapsed = std::time::Duration::ZERO;
    for (page, start) in (0..issues).step_by(PAGE).enumerate() {
        let raw: Vec<Value> = (start..(start + PAGE).min(issues)).map(raw_issue).collect();
        let report = request(
            "report",
            page,
            json!({"results": [{"command_id": command, "delivery": 1, "status": "progress",
            "page": {"start_at": start, "total": issues, "issues": raw}}]}),
        )?;
        let timer = Instant::now();
        hub.handle_agent_request(&report)?;
        elapsed += timer.elapsed();
    }
    Ok(issues as f64 / elapsed.as_secs_f64())
}

fn ingest_plain(db: &Path, issues: usize) -> Result<f64, Box<dyn std::error::Error>> {
    let mut conn = Connection::open(db)?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    let ids = field_ids();
    let mut elapsed = std::time::Duration::ZERO;
    for start in (0..issues).step_by(PAGE) {
        // The baseline gets its rows already mapped: only the inserts are timed.
        let mapped: Vec<_> = (start..(start + PAGE).min(issues))
            .map(|n| map_issue(&raw_issue(n), &ids, &["Эпик"]))
            .collect::<Result<_, _>>()?;
        let timer = Instant::now();
        let tx = conn.transaction()?;
        {
            let mut issue = tx.prepare(
                "INSERT OR REPLACE INTO issue (key, jira_id, issue_type, summary, description, status, priority, assignee, reporter,
                 labels, epic_key, sprint, duedate, plan_start, plan_end, created_at, updated_at, synced_at, fields)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
            )?;
            let mut link = tx.prepare(
                "INSERT OR IGNORE INTO issue_link (jira_id, source_key, target_key, link_type) VALUES (?1, ?2, ?3, ?4)",
            )?;
            let mut comment = tx.prepare(
                "INSERT OR REPLACE INTO issue_comment (id, issue_key, author, body, created, updated) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            for m in &mapped {
                issue.execute(params![
                    m.mirrored.key,
                    m.mirrored.jira_id,
                    m.mirrored.issue_type,
                    m.mirrored.summary,
                    m.mirrored.description,
                    m.mirrored.status,
                    m.mirrored.priority,
                    m.mirrored.assignee,
                    m.mirrored.reporter,
                    json!(m.mirrored.labels).to_string(),
                    m.mirrored.epic_key,
                    m.mirrored.sprint,
                    m.mirrored.duedate,
                    m.mirrored.plan_start,
                    m.mirrored.plan_end,
                    m.mirrored.created_at,
                    m.mirrored.updated_at,
                    "2026-11-29T10:00:00Z",
                    m.fields_json
                ])?;
                for l in m.links.iter().flatten() {
                    link.execute(params![l.jira_id, l.source_key, l.target_key, l.link_type])?;
                }
                for c in m.comments.iter().flatten() {
                    comment.execute(params![
                        c.id,
                        m.mirrored.key,
                        c.author,
                        c.body,
                        c.created,
                        c.updated
                    ])?;
                }
            }
        }
        tx.commit()?;
        elapsed += timer.elapsed();
    }
    Ok(issues as f64 / elapsed.as_secs_f64())
}

fn enqueue(hub: &mut HubConnection, commands: usize) -> Result<(), Box<dyn std::error::Error>> {
    for batch in 0..commands.div_ceil(GROUP) {
        let list: Vec<Value> = (0..GROUP.min(commands - batch * GROUP))
            .map(|i| json!({"type": "comment", "params": {"key": format!("AURORA-{}", i + 1), "body": "текст"}}))
            .collect();
        let request: BatchRequest =
            serde_json::from_value(json!({"title": "bench", "author": "bench", "commands": list}))?;
        hub.enqueue_batch(&request)?;
    }
    Ok(())
}

fn commands_hub(
    hub: &mut HubConnection,
    commands: usize,
) -> Result<f64, Box<dyn std::error::Error>> {
    enqueue(hub, commands)?;
    let started = Instant::now();
    let mut done = 0;
    for group in 0.. {
        let claim = request(
            "claim",
            group,
            json!({"agent_version": "1", "settings_version": 0, "max_commands": GROUP}),
        )?;
        let AgentAnswer::Claim(answer) = hub.handle_agent_request(&claim)? else {
            return Err("not a claim answer".into());
        };
        if answer.commands.is_empty() {
            break;
        }
        let results: Vec<Value> = answer
            .commands
            .iter()
            .map(|c| json!({"command_id": c.id, "delivery": c.delivery, "status": "done", "result": {"comment_id": "1"}, "jira_calls": 1}))
            .collect();
        done += results.len();
        hub.handle_agent_request(&request("report", group, json!({"results": results}))?)?;
    }
    assert_eq!(done, commands);
    Ok(commands as f64 / started.elapsed().as_secs_f64())
}

fn commands_plain(
    hub: &mut HubConnection,
    db: &Path,
    commands: usize,
) -> Result<f64, Box<dyn std::error::Error>> {
    enqueue(hub, commands)?;
    let mut conn = Connection::open(db)?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    let started = Instant::now();
    loop {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let ids: Vec<i64> = tx
            .prepare(
                "SELECT id FROM command WHERE status = 'queued' ORDER BY batch_id, seq LIMIT ?1",
            )?
            .query_map([GROUP], |row| row.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for id in &ids {
            tx.execute(
                "UPDATE command SET status = 'claimed', deliveries = deliveries + 1 WHERE id = ?1",
                [id],
            )?;
        }
        tx.commit()?;
        if ids.is_empty() {
            break;
        }
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for id in &ids {
            tx.execute("UPDATE command SET status = 'done', result = '{\"comment_id\":\"1\"}' WHERE id = ?1", [id])?;
        }
        tx.commit()?;
    }
    Ok(commands as f64 / started.elapsed().as_secs_f64())
}
