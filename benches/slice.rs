//! `GET /projects/{label}/issues` on a large mirror, measured in one run (`cargo bench --bench
//! slice`): 20,000 own issues (label `AWPCA`, two links and an epic each) and 1,000 neighbours
//! (another label, linked to own issues), refreshed through the service. Then, five times each,
//! medians compared:
//!
//! - end to end: the real router (`oneshot`), the body read whole; the router writes the body
//!   straight from the stored rows (`HubConnection::project_issues_json`);
//! - the stages of that body: `project_issues_json` called directly (SQL and JSON writing in one
//!   pass), and the `ETag`'s hash of it;
//! - the baseline, the path the router took before, in the same run: `HubConnection::project_issues`
//!   (the query and the rows and views it maps: "SQL + rows") and `serde_json::to_vec` of those
//!   rows ("serialization").
//!
//! The end-to-end body and the direct JSON are checked byte for byte against the serialized rows.
//! `BENCH_SLICE_ISSUES` changes the size.

mod common;

use common::{median, ms, runs, size};

use axum::body::Body;
use axum::http::Request;
use jira_hub::clock::SystemClock;
use jira_hub::http::{AppState, HttpOptions, HubPool, router};
use jira_hub::protocol::{AgentAnswer, AgentRequest, decode_value};
use jira_hub::service::HubConnection;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Instant;
use tower::ServiceExt;

type Error = Box<dyn std::error::Error>;

const PAGE: usize = 1000;
const RUNS: usize = 9;

fn main() -> Result<(), Error> {
    let own = size("BENCH_SLICE_ISSUES", 20_000);
    let neighbours = own / 20;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("data").join("hub.sqlite");
    let (mut hub, _) = HubConnection::open(&db, Arc::new(SystemClock))?;
    let config: Value =
        serde_json::from_str(include_str!("../admin/jira-sync/config.example.json"))?;
    hub.init_from_config(&config, false)?;
    let timer = Instant::now();
    ingest(&mut hub, own, neighbours)?;
    println!(
        "mirror of {own} own issues and {neighbours} neighbours ingested in {:.1} s",
        timer.elapsed().as_secs_f64()
    );
    let token = hub.tokens()?.ok_or("no tokens")?.client;
    let mut direct = hub.connect()?;
    let app = router(AppState {
        pool: Arc::new(HubPool::new(hub)),
        options: HttpOptions::default(),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;

    let mut end_to_end = Vec::new();
    let mut sql = Vec::new();
    let mut serialization = Vec::new();
    let mut direct_json = Vec::new();
    let mut hashing = Vec::new();
    let mut body_len = 0;
    let mut rows_len = 0;
    for _ in 0..RUNS {
        let timer = Instant::now();
        let body = runtime.block_on(async {
            let request = Request::get("/projects/AWPCA/issues")
                .header("Authorization", format!("Bearer {token}"))
                .body(Body::empty())?;
            let response = app.clone().oneshot(request).await?;
            if !response.status().is_success() {
                return Err(format!("status {}", response.status()).into());
            }
            Ok::<_, Error>(axum::body::to_bytes(response.into_body(), usize::MAX).await?)
        })?;
        end_to_end.push(timer.elapsed());

        // The stages of the router's path on a thread of their own, as the router runs it (on
        // tokio's blocking pool), not amid the baseline's allocations on this one.
        let (written, took) = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let timer = Instant::now();
                    let written = direct.project_issues_json("AWPCA", None);
                    (written, timer.elapsed())
                })
                .join()
        })
        .map_err(|_| "the direct JSON thread panicked")?;
        let written = written?;
        direct_json.push(took);
        let timer = Instant::now();
        std::hint::black_box(xxhash_rust::xxh3::xxh3_128(&written));
        hashing.push(timer.elapsed());

        let timer = Instant::now();
        let rows = direct.project_issues("AWPCA")?;
        sql.push(timer.elapsed());
        let timer = Instant::now();
        let json = serde_json::to_vec(&rows)?;
        serialization.push(timer.elapsed());
        if json != body {
            return Err("the router's body differs from the serialized rows".into());
        }
        if written != json {
            return Err("the written JSON differs from the serialized rows".into());
        }
        body_len = body.len();
        rows_len = rows.len();
    }
    let sql_runs = sql.clone();
    let direct_runs = direct_json.clone();
    let serialization_runs = serialization.clone();
    let hashing_runs = hashing.clone();
    let (e2e, sql, ser, written, hash) = (
        median(&mut end_to_end),
        median(&mut sql),
        median(&mut serialization),
        median(&mut direct_json),
        median(&mut hashing),
    );
    println!(
        "GET /projects/AWPCA/issues: {rows_len} rows, {:.1} MiB of JSON",
        body_len as f64 / 1048576.0
    );
    println!(
        "end to end (router) median {:>7.1} ms  runs {:?}",
        ms(e2e),
        runs(&end_to_end)
    );
    println!(
        "  SQL + JSON written median {:>7.1} ms  runs {:?}  ({:.0}% of end to end)",
        ms(written),
        runs(&direct_runs),
        100.0 * written.as_secs_f64() / e2e.as_secs_f64()
    );
    println!(
        "  ETag (XXH3-128)    median {:>7.1} ms  runs {:?}",
        ms(hash),
        runs(&hashing_runs)
    );
    println!("baseline, the rows and serde path, same run:");
    println!(
        "SQL + rows          median {:>7.1} ms  runs {:?}",
        ms(sql),
        runs(&sql_runs)
    );
    println!(
        "serialization       median {:>7.1} ms  runs {:?}",
        ms(ser),
        runs(&serialization_runs)
    );
    println!(
        "rows + serialization {:>6.1} ms;  SQL + JSON written / (rows + serialization) = {:.2}",
        ms(sql + ser),
        written.as_secs_f64() / (sql + ser).as_secs_f64()
    );
    println!(
        "end to end / target 100 ms = {:.2} (target <= 1.00)",
        ms(e2e) / 100.0
    );
    Ok(())
}

/// A realistic raw issue: a description, custom fields, a sprint, an epic, two links, two
/// comments.
fn raw_issue(n: usize, label: &str, links: Value) -> Value {
    let key = format!("AURORA-{n}");
    json!({"id": (100_000 + n).to_string(), "key": key, "fields": {
        "summary": format!("Задача номер {n}: подготовить отчёт по складу"),
        "description": "Описание задачи. ".repeat(20),
        "status": {"name": if n.is_multiple_of(3) { "Готово" } else { "В работе" }, "id": "3"},
        "issuetype": {"name": "Задача", "id": "10002"},
        "priority": {"name": "Средний", "id": "3"},
        "assignee": {"name": "ivanov", "displayName": "Иван Иванов"},
        "reporter": {"name": "petrov", "displayName": "Пётр Петров"},
        "labels": [label, "backend"],
        "created": "2026-03-05T10:15:30.000+0300",
        "updated": "2026-03-06T10:15:30.000+0300",
        "duedate": "2026-04-01",
        "customfield_10101": format!("AURORA-{}", n / 50 * 50 + 1),
        "customfield_10105": ["com.atlassian.greenhopper.service.sprint.Sprint@1a2b[id=5,rapidViewId=4216,state=ACTIVE,name=Sprint 5,startDate=2026-03-01T10:00:00.000+03:00,endDate=<null>,completeDate=<null>,sequence=5]"],
        "customfield_12001": "2026-03-01",
        "customfield_12002": "2026-03-31",
        "issuelinks": links,
        "comment": {"comments": [
            {"id": format!("{n}1"), "author": {"name": "ivanov"}, "body": "Первый комментарий", "created": "2026-03-05T10:15:30.000+0300"}
        ]}
    }})
}

fn request(kind: &str, id: usize, body: Value) -> Result<AgentRequest, Error> {
    let mut value = json!({"kind": kind, "id": format!("{kind}-{id}"), "agent": "bench", "sent_at": "2026-11-29T10:00:00Z"});
    for (k, v) in body.as_object().ok_or("body")? {
        value[k] = v.clone();
    }
    Ok(decode_value(value)?)
}

/// Own issues 1..=own (linked to the next one), neighbours after them (each linked to an own
/// issue, without the label), all through one refresh.
fn ingest(hub: &mut HubConnection, own: usize, neighbours: usize) -> Result<(), Error> {
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
    let total = own + neighbours;
    for (page, start) in (1..=total).step_by(PAGE).enumerate() {
        let raw: Vec<Value> = (start..(start + PAGE).min(total + 1))
            .map(|n| {
                if n <= own {
                    raw_issue(
                        n,
                        "AWPCA",
                        json!([{"id": (n * 2).to_string(), "type": {"name": "Blocks"},
                                "outwardIssue": {"key": format!("AURORA-{}", n + 1)}}]),
                    )
                } else {
                    let target = (n - own) * 17 % own + 1;
                    raw_issue(
                        n,
                        "OTHER",
                        json!([{"id": (n * 2).to_string(), "type": {"name": "Relates"},
                                "outwardIssue": {"key": format!("AURORA-{target}")}}]),
                    )
                }
            })
            .collect();
        let report = request(
            "report",
            page,
            json!({"results": [{"command_id": command, "delivery": 1, "status": "progress",
            "page": {"start_at": start - 1, "total": total, "issues": raw}}]}),
        )?;
        hub.handle_agent_request(&report)?;
    }
    Ok(())
}
