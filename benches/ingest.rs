//! A refresh's pages ingested through the relay by the real daemon (`cargo bench --bench ingest`),
//! against a plain Python ingest of the same files, measured in the same run.
//!
//! - hub: 20,000 raw Jira issues (the generator of `benches/service.rs`: custom fields, a sprint,
//!   a description, two links and two comments each) in 20 report files of 1,000 (progress
//!   results of one claimed refresh), renamed into `inbox/` of `jira-hub serve` (the release
//!   binary) at once; timed from the first rename to the last answer in `outbox/` (an answer is
//!   written after its page's transaction is committed). The copy of the WAL into the database
//!   file that follows a burst (about 130 ms here, on the relay's checkpoint thread once the
//!   inbox is drained) is not in that time; `BENCH_INGEST_ISSUES=60000` makes a stream long enough
//!   for the relay's in-line checkpoints (every 64 MiB of requests) to be in it.
//! - baseline: `benches/ingest_baseline.py` over the same files: `json.load` of each, the mirror's
//!   columns taken from each issue, `sqlite3` `executemany` upserts into tables shaped like the
//!   hub's (`issue` with its indexes, `issue_link`, `issue_comment`), WAL and
//!   `synchronous=FULL`, one transaction per page. Skipped, saying so, without `python3`.
//!
//! - memory: the daemon's peak resident memory (`VmHWM`) once the last page is answered.
//!
//! Five rounds, hub and baseline in turn (the machine is shared); medians are compared.
//! `BENCH_INGEST_ISSUES`, `BENCH_INGEST_PAGE` and `BENCH_INGEST_ROUNDS` change the sizes.
//! `BENCH_BASELINE_EXE` (another build of the hub, e.g. the previous main's release binary) runs
//! in every round too, just before this build, on a database it made itself: its figures and this
//! build's are printed side by side, each against the same Python runs.

mod common;
#[path = "support/issues.rs"]
mod issues;
#[path = "support/relay.rs"]
mod support;

use common::{size, status_kib};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Error, claim, drop_file, setup_by, start_exe, wait_for};

/// A build of the hub that the bench runs: its rates and peaks, round by round.
struct Side {
    label: &'static str,
    exe: PathBuf,
    rates: Vec<f64>,
    peaks_kib: Vec<u64>,
}

fn main() -> Result<(), Error> {
    let issues = size("BENCH_INGEST_ISSUES", 20_000);
    let page = size("BENCH_INGEST_PAGE", 1000).max(1);
    let rounds = size("BENCH_INGEST_ROUNDS", 5).max(1);
    let python = python3();
    println!(
        "refresh ingest of {issues} issues in pages of {page}, through the relay; {rounds} rounds"
    );
    let mut sides = Vec::new();
    if let Some(exe) = std::env::var_os("BENCH_BASELINE_EXE") {
        sides.push(Side::new("baseline build (BENCH_BASELINE_EXE)", exe.into()));
    }
    sides.push(Side::new("this build", support::daemon_exe()));
    let mut python_rates = Vec::new();
    for _ in 0..rounds {
        let mut last = None;
        for side in &mut sides {
            let round = hub_round(&side.exe, issues, page)?;
            side.rates.push(issues as f64 / round.elapsed.as_secs_f64());
            side.peaks_kib.push(round.peak_kib);
            last = Some(round);
        }
        if let (Some(python), Some(round)) = (&python, &last) {
            python_rates.push(python_round(python, &round.pages, issues)?);
        }
    }
    let baseline = python.is_some().then(|| median(&mut python_rates));
    for side in &mut sides {
        let hub = median(&mut side.rates);
        let mut peaks = side.peaks_kib.clone();
        peaks.sort_unstable();
        println!(
            "{}: {hub:>8.0} issues/s  runs {:?}; peak RSS median {:.1} MiB, runs {:?} MiB",
            side.label,
            rounded(&side.rates),
            peaks[peaks.len() / 2] as f64 / 1024.0,
            side.peaks_kib
                .iter()
                .map(|kib| (*kib as f64 / 1024.0).round() as u64)
                .collect::<Vec<_>>()
        );
        if let Some(baseline) = baseline {
            let ratios: Vec<String> = side
                .rates
                .iter()
                .zip(&python_rates)
                .map(|(hub, python)| format!("{:.2}", hub / python))
                .collect();
            println!(
                "  hub / python = {:.2} (target >= 3 at <= 96 MB peak); per round {ratios:?}",
                hub / baseline
            );
        }
    }
    match baseline {
        Some(baseline) => println!(
            "python json + sqlite3 (baseline):  {baseline:>8.0} issues/s  runs {:?}",
            rounded(&python_rates)
        ),
        None => println!("python baseline: skipped (no python3 on PATH)"),
    }
    Ok(())
}

impl Side {
    fn new(label: &'static str, exe: PathBuf) -> Side {
        Side {
            label,
            exe,
            rates: Vec::new(),
            peaks_kib: Vec::new(),
        }
    }
}

fn median(rates: &mut [f64]) -> f64 {
    let mut sorted = rates.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
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
    /// The daemon's peak resident memory, in KiB.
    peak_kib: u64,
    pages: Vec<PathBuf>,
    _setup: support::CliSetup,
}

fn hub_round(exe: &Path, issues: usize, page_size: usize) -> Result<HubRound, Error> {
    let setup = setup_by(exe, true)?;
    let daemon = start_exe(exe, &setup.db, &[])?;
    let inbox = setup.relay.join("inbox");
    let outbox = setup.relay.join("outbox");
    wait_until(&inbox, Path::is_dir)?;
    // The refresh is claimed through the relay, as the agent does; the daemon's first pass is
    // over once the claim is answered.
    drop_file(&inbox, "claim-c0.json", &claim("c0", &setup.token, 1))?;
    let answer = wait_for(&outbox.join("claim-c0.json"))?;
    let command = &answer["commands"][0];
    let (Some(command_id), Some(delivery)) = (command["id"].as_i64(), command["delivery"].as_i64())
    else {
        return Err(format!("no refresh handed out: {answer}").into());
    };

    // The pages are written before they are handed over: only the hub's work is timed.
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

    let started = Instant::now();
    for name in &names {
        std::fs::rename(staged.join(name), inbox.join(name))?;
    }
    for name in &names {
        wait_until(&outbox.join(name), Path::exists)?;
    }
    let elapsed = started.elapsed();
    let peak_kib = status_kib(daemon.0.id(), "VmHWM:")?;
    for name in &names {
        let answer = wait_for(&outbox.join(name))?;
        if answer["accepted"] != json!([command_id]) {
            return Err(format!("{name} was not accepted: {answer}").into());
        }
    }
    drop(daemon);
    let stored: i64 = rusqlite::Connection::open(&setup.db)?.query_row(
        "SELECT count(*) FROM issue",
        [],
        |row| row.get(0),
    )?;
    if stored != issues as i64 {
        return Err(format!("the mirror holds {stored} issues, not {issues}").into());
    }
    Ok(HubRound {
        elapsed,
        peak_kib,
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
