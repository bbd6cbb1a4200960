//! The console's overview on a large database, measured in one run (`cargo bench --bench
//! console`): 100,000 commands in 1,000 batches (most finished over the last four days, some
//! failed, queued, claimed or cancelled, some rate limited), 50,000 issues and 300 sync runs,
//! written with SQL straight into a hub's database. Then, eleven times each, medians compared:
//!
//! - the overview end to end: `GET /` through the real router (`oneshot`) with the session
//!   cookie, the page read whole;
//! - its data alone: `HubConnection::overview` called directly;
//! - baselines: `GET /health` through the same router, and `SELECT count(*) FROM command` on a
//!   connection of its own.
//!
//! The target is 100 ms for the page. `BENCH_CONSOLE_COMMANDS` and `BENCH_CONSOLE_ISSUES`
//! change the sizes.

mod common;

use common::{median, ms, runs, size};

use axum::body::Body;
use axum::http::Request;
use jira_hub::clock::SystemClock;
use jira_hub::http::{AppState, HttpOptions, HubPool, router};
use jira_hub::service::HubConnection;
use rusqlite::{Connection, params};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use time::OffsetDateTime;
use time::macros::format_description;
use tower::ServiceExt;

type Error = Box<dyn std::error::Error>;

const RUNS: usize = 11;
const BATCH: usize = 100;

fn stamp(at: OffsetDateTime) -> Result<String, Error> {
    Ok(at.format(&format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z"
    ))?)
}

/// Commands, batches, issues and runs, written in one transaction.
fn fill(db: &std::path::Path, commands: usize, issues: usize) -> Result<(), Error> {
    let mut conn = Connection::open(db)?;
    let tx = conn.transaction()?;
    let now = OffsetDateTime::now_utc();
    let span = 4 * 24 * 3600;
    {
        let mut batch = tx.prepare(
            "INSERT INTO batch (id, title, author, created_at, project) VALUES (?1, ?2, 'bench', ?3, 'AWPCA')",
        )?;
        let mut command = tx.prepare(
            "INSERT INTO command (batch_id, seq, type, params, status, claimed_at, finished_at, error,
                 jira_calls, rate_limited, pause_seconds, claimed_by, deliveries)
             VALUES (?1, ?2, 'comment', ?3, ?4, ?5, ?6, ?7, 1, ?8, ?9, ?10, ?11)",
        )?;
        let batches = commands.div_ceil(BATCH);
        for b in 0..batches {
            // Batches spread over the last four days, oldest first.
            let created = now - Duration::from_secs((span - span * b / batches.max(1)) as u64);
            batch.execute(params![b as i64 + 1, format!("Пакет {b}"), stamp(created)?])?;
            for seq in 0..BATCH.min(commands - b * BATCH) {
                let n = b * BATCH + seq;
                let status = match n % 100 {
                    0..=2 if b + 3 >= batches => "queued",
                    3 if b + 1 == batches => "claimed",
                    4..=6 => "failed",
                    7 => "cancelled",
                    _ => "done",
                };
                let finished = matches!(status, "done" | "failed" | "cancelled")
                    .then(|| created + Duration::from_secs(60 + (seq as u64) * 30));
                let finished = finished.filter(|at| *at < now).or(if status == "done" {
                    Some(now)
                } else {
                    None
                });
                command.execute(params![
                    b as i64 + 1,
                    seq as i64 + 1,
                    format!(
                        r#"{{"key":"AURORA-{}","body":"Комментарий {n}"}}"#,
                        n % 5000 + 1
                    ),
                    status,
                    finished
                        .map(|at| stamp(at - Duration::from_secs(20)))
                        .transpose()?,
                    finished.map(stamp).transpose()?,
                    (status == "failed").then_some("Jira ответила 500"),
                    i64::from(n.is_multiple_of(37)),
                    if n.is_multiple_of(37) { 30 } else { 0 },
                    (status != "queued").then_some("agent-1"),
                    i64::from(status != "queued"),
                ])?;
            }
        }
        let mut issue = tx.prepare(
            "INSERT INTO issue (key, jira_id, issue_type, summary, status, labels, fields, synced_at, mirror_changed_at)
             VALUES (?1, ?2, 'Задача', ?3, 'В работе', ?4, '{}', ?5, ?5)",
        )?;
        let synced = stamp(now)?;
        for n in 1..=issues {
            let labels = if n % 10 == 0 {
                r#"["OTHER"]"#
            } else {
                r#"["AWPCA","backend"]"#
            };
            issue.execute(params![
                format!("AURORA-{n}"),
                n.to_string(),
                format!("Задача номер {n}"),
                labels,
                synced
            ])?;
        }
        let mut run = tx.prepare(
            "INSERT INTO sync_run (query, started_at, finished_at, status, issues_seen, issues_changed, full, kind, scope, pages, total)
             VALUES ('project = AURORA AND labels in (AWPCA)', ?1, ?2, ?3, 50000, 120, 1, 'full', '', 50, 50000)",
        )?;
        for r in 0..300u64 {
            let started = now - Duration::from_secs(span as u64 - r * 1100);
            let finished = started + Duration::from_secs(200 + r % 7 * 40);
            run.execute(params![
                stamp(started)?,
                stamp(finished)?,
                if r % 29 == 0 { "failed" } else { "done" }
            ])?;
        }
    }
    tx.commit()?;
    Ok(())
}

fn main() -> Result<(), Error> {
    let commands = size("BENCH_CONSOLE_COMMANDS", 100_000);
    let issues = size("BENCH_CONSOLE_ISSUES", 50_000);
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("data").join("hub.sqlite");
    let (mut hub, _) = HubConnection::open(&db, Arc::new(SystemClock))?;
    let config: Value =
        serde_json::from_str(include_str!("../admin/jira-sync/config.example.json"))?;
    hub.init_from_config(&config, false)?;
    let timer = Instant::now();
    fill(&db, commands, issues)?;
    println!(
        "{commands} commands, {issues} issues and 300 sync runs written in {:.1} s",
        timer.elapsed().as_secs_f64()
    );
    let token = hub.tokens()?.ok_or("no tokens")?.client;
    let mut direct = hub.connect()?;
    let counter = Connection::open(&db)?;
    let app = router(AppState {
        pool: Arc::new(HubPool::new(hub)),
        options: HttpOptions::default(),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // A session as a browser gets it: the sign-in's cookie.
    let cookie = runtime.block_on(async {
        let request = Request::post("/ui/sign-in")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(Body::from(format!("token={token}")))?;
        let response = app.clone().oneshot(request).await?;
        let cookie = response
            .headers()
            .get("set-cookie")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(';').next())
            .and_then(|pair| pair.split_once('='))
            .map(|(_, id)| id.to_string())
            .ok_or("the sign-in set no cookie")?;
        Ok::<_, Error>(cookie)
    })?;
    let get = |path: &'static str| -> Result<(Duration, usize), Error> {
        let timer = Instant::now();
        let body = runtime.block_on(async {
            let request = Request::get(path)
                .header("Cookie", format!("jira_hub_session={cookie}"))
                .body(Body::empty())?;
            let response = app.clone().oneshot(request).await?;
            if !response.status().is_success() {
                return Err(format!("{path}: status {}", response.status()).into());
            }
            Ok::<_, Error>(axum::body::to_bytes(response.into_body(), usize::MAX).await?)
        })?;
        Ok((timer.elapsed(), body.len()))
    };
    // One of each first, so that every run finds the pages in SQLite's cache.
    let (_, page_bytes) = get("/")?;
    direct.overview()?;

    let mut page = Vec::new();
    let mut data = Vec::new();
    let mut health = Vec::new();
    let mut count = Vec::new();
    for _ in 0..RUNS {
        page.push(get("/")?.0);
        let timer = Instant::now();
        let overview = direct.overview()?;
        data.push(timer.elapsed());
        if overview.queue.iter().map(|q| q.commands).sum::<i64>() != commands as i64 {
            return Err("the overview does not count every command".into());
        }
        health.push(get("/health")?.0);
        let timer = Instant::now();
        let n: i64 = counter.query_row("SELECT count(*) FROM command", [], |row| row.get(0))?;
        count.push(timer.elapsed());
        if n != commands as i64 {
            return Err("the table does not hold every command".into());
        }
    }
    let page_runs = runs(&page);
    let (page, data, health, count) = (
        median(&mut page),
        median(&mut data),
        median(&mut health),
        median(&mut count),
    );
    println!(
        "GET / (overview, {:.0} KiB of HTML)  median {:>6.1} ms  runs {page_runs:?}",
        page_bytes as f64 / 1024.0,
        ms(page)
    );
    println!(
        "HubConnection::overview             median {:>6.1} ms  ({:.0}% of the page)",
        ms(data),
        100.0 * data.as_secs_f64() / page.as_secs_f64()
    );
    println!(
        "baseline GET /health                median {:>6.1} ms",
        ms(health)
    );
    println!(
        "baseline SELECT count(*) FROM command median {:>4.1} ms  (the page = {:.1} counts)",
        ms(count),
        page.as_secs_f64() / count.as_secs_f64().max(1e-9)
    );
    println!(
        "overview / target 100 ms = {:.2} (target <= 1.00)",
        ms(page) / 100.0
    );
    Ok(())
}
