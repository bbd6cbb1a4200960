//! A refresh's pages ingested through the relay by the real daemon (`cargo bench --bench ingest`),
//! against a plain Python ingest of the same files, measured in the same run.
//!
//! - hub: 20,000 raw Jira issues (the generator of `benches/service.rs`: custom fields, a sprint,
//!   a description, two links and two comments each) in 20 report files of 1,000 (progress
//!   results of one claimed refresh), renamed into `inbox/` of `jira-hub serve` (the release
//!   binary) at once; timed from the first rename to the last answer in `outbox/` (an answer is
//!   written after its page's transaction is committed).
//! - baseline: `benches/ingest_baseline.py` over the same files: `json.load` of each, the mirror's
//!   columns taken from each issue, `sqlite3` `executemany` upserts into tables shaped like the
//!   hub's (`issue` with its indexes, `issue_link`, `issue_comment`), WAL and
//!   `synchronous=FULL`, one transaction per page. Skipped, saying so, without `python3`.
//!
//! Five rounds, hub and baseline in turn (the machine is shared); medians are compared.
//! `BENCH_INGEST_ISSUES`, `BENCH_INGEST_PAGE` and `BENCH_INGEST_ROUNDS` change the sizes.

mod common;
#[path = "support/issues.rs"]
mod issues;
#[path = "support/relay.rs"]
mod support;

use common::size;
use jira_hub::protocol::{AgentAnswer, decode_value};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Error, claim, setup, start, wait_for};

fn main() -> Result<(), Error> {
    let issues = size("BENCH_INGEST_ISSUES", 20_000);
    let page = size("BENCH_INGEST_PAGE", 1000).max(1);
    let rounds = size("BENCH_INGEST_ROUNDS", 5).max(1);
    let python = python3();
    println!(
        "refresh ingest of {issues} issues in pages of {page}, through the relay; {rounds} rounds"
    );
    let mut hub_rates = Vec::new();
    let mut python_rates = Vec::new();
    for _ in 0..rounds {
        let round = hub_round(issues, page)?;
        hub_rates.push(issues as f64 / round.elapsed.as_secs_f64());
        if let Some(python) = &python {
            python_rates.push(python_round(python, &round.pages, issues)?);
        }
    }
    let hub = median(&mut hub_rates);
    println!(
        "hub (jira-hub serve, relay):       {hub:>8.0} issues/s  runs {:?}",
        rounded(&hub_rates)
    );
    if python.is_none() {
        println!("python baseline: skipped (no python3 on PATH)");
        return Ok(());
    }
    let baseline = median(&mut python_rates);
    println!(
        "python json + sqlite3 (baseline):  {baseline:>8.0} issues/s  runs {:?}",
        rounded(&python_rates)
    );
    println!(
        "hub / python = {:.2} (target >= 3, stretch 5)",
        hub / baseline
    );
    Ok(())
}

fn median(rates: &mut [f64]) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

fn rounded(rates: &[f64]) -> Vec<u64> {
    rates.iter().map(|r| r.round() as u64).collect()
}

/// `python3`, when it runs.
fn python3() -> Option<PathBuf> {
    let ok = Command::new("python3")
        .arg("-c")
        .arg("import json, sqlite3")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then(|| PathBuf::from("python3"))
}

/// One hub round: its page files are kept (hard links) for the baseline.
struct HubRound {
    elapsed: Duration,
    pages: Vec<PathBuf>,
    _setup: support::Setup,
}

fn hub_round(issues: usize, page_size: usize) -> Result<HubRound, Error> {
    let mut setup = setup()?;
    setup.hub.enqueue_refresh(None, "bench")?;
    let AgentAnswer::Claim(answer) =
        setup
            .hub
            .handle_agent_request(&decode_value(claim("c0", &setup.token, 1))?)?
    else {
        return Err("not a claim answer".into());
    };
    let command = answer.commands.first().ok_or("no refresh handed out")?;
    let (command_id, delivery) = (command.id, command.delivery);

    // The pages are written before the daemon starts: only the hub's work is timed.
    let staged = setup.dir.path().join("pages");
    let kept = setup.dir.path().join("baseline");
    std::fs::create_dir_all(&staged)?;
    std::fs::create_dir_all(&kept)?;
    let mut names = Vec::new();
    let mut pages = Vec::new();
    for (page, first) in (0..issues).step_by(page_size).enumerate() {
        let raw: Vec<serde_json::Value> = (first..(first + page_size).min(issues))
            .map(issues::raw_issue)
            .collect();
        let report = json!({"kind": "report", "id": format!("p{page}"), "agent": "bench",
            "sent_at": "2026-11-29T10:00:00Z", "token": setup.token,
            "results": [{"command_id": command_id, "delivery": delivery, "status": "progress",
                "jira_calls": 1, "page": {"start_at": first, "total": issues, "issues": raw}}]});
        let name = format!("report-p{page}.json");
        let mut file = std::fs::File::create(staged.join(&name))?;
        file.write_all(&serde_json::to_vec(&report)?)?;
        std::fs::hard_link(staged.join(&name), kept.join(&name))?;
        pages.push(kept.join(&name));
        names.push(name);
    }

    let _daemon = start(&setup.db, &[])?;
    let inbox = setup.relay.join("inbox");
    let outbox = setup.relay.join("outbox");
    wait_until(&inbox, Path::is_dir)?;
    // The daemon's first pass is over once a heartbeat is answered.
    support::drop_file(
        &inbox,
        "heartbeat-h0.json",
        &json!({"kind": "heartbeat", "id": "h0", "agent": "bench", "sent_at": "2026-11-29T10:00:00Z",
            "token": setup.token, "agent_version": "1", "jira_ok": true}),
    )?;
    wait_for(&outbox.join("heartbeat-h0.json"))?;

    let started = Instant::now();
    for name in &names {
        std::fs::rename(staged.join(name), inbox.join(name))?;
    }
    for name in &names {
        wait_until(&outbox.join(name), Path::exists)?;
    }
    let elapsed = started.elapsed();
    for name in &names {
        let answer = wait_for(&outbox.join(name))?;
        if answer["accepted"] != json!([command_id]) {
            return Err(format!("{name} was not accepted: {answer}").into());
        }
    }
    let stored = setup.hub.status()?.counts.issues;
    if stored != issues as i64 {
        return Err(format!("the mirror holds {stored} issues, not {issues}").into());
    }
    Ok(HubRound {
        elapsed,
        pages,
        _setup: setup,
    })
}

/// The baseline over the same files, into a database of its own; issues/s.
fn python_round(python: &Path, pages: &[PathBuf], issues: usize) -> Result<f64, Error> {
    let dir = tempfile::tempdir()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/ingest_baseline.py");
    let output = Command::new(python)
        .arg(script)
        .arg(dir.path().join("baseline.sqlite"))
        .args(pages)
        .output()?;
    if !output.status.success() {
        return Err(format!(
            "the baseline failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let text = String::from_utf8(output.stdout)?;
    let mut parts = text.split_whitespace();
    let count: usize = parts.next().ok_or("no count")?.parse()?;
    let seconds: f64 = parts.next().ok_or("no time")?.parse()?;
    if count != issues {
        return Err(format!("the baseline stored {count} issues, not {issues}").into());
    }
    Ok(count as f64 / seconds)
}

/// Waits until `ready` says yes of `path` (answers appear whole, by rename).
fn wait_until(path: &Path, ready: fn(&Path) -> bool) -> Result<(), Error> {
    let started = Instant::now();
    while !ready(path) {
        if started.elapsed() > Duration::from_secs(300) {
            return Err(format!("{} never came", path.display()).into());
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    Ok(())
}
