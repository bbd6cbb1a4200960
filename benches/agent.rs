//! The agent end to end (`cargo bench --bench agent`): a full refresh of 25,000 issues from the
//! simulated Jira (Data Center mode) through the real agent and the file relay into the real
//! hub daemon, both release builds, measured against the fake's own page rate read directly in
//! the same run (a plain loop of the same search pages: the baseline).
//!
//! Prints issues/s end to end and for the baseline, their ratio, the share of the end-to-end time
//! spent outside the fake (agent + relay + hub; target <= 50%), and the agent's peak RSS (VmHWM,
//! target < 100 MB). `BENCH_AGENT_ISSUES` changes the size.
//!
//! Then, the same agent still running: a create whose answer is lost (the fake applies it and
//! drops the connection) in a project where the agent made 300 issues of its own just before;
//! prints the Jira calls that command cost (target <= 4; 12 before on an
//! empty project, and a marker read per candidate).
//!
//! First, in this process (the hub on a manual clock, the real agent loop): «повторить» on a
//! create that failed two weeks ago (its issue made, its answer lost), after 5,000 issues of the
//! agent's own account since; prints what the create check read and the delivery's Jira calls
//! (`BENCH_AGENT_PART=retry` stops there).

use jira_hub::sim::jira as fake_jira;

use fake_jira::{FakeJira, Mode, PROJECT};
use jira_hub::clock::SystemClock;
use jira_hub::domain::command::BatchStatus;
use jira_hub::service::HubConnection;
use serde_json::{Value, json};
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error>;

const LABEL: &str = "AWPCA";
const PAGE: usize = 1000;

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() -> Result<(), Error> {
    let (reads, calls) = retry_two_weeks_on(5_000)?;
    println!(
        "«повторить» two weeks on, 5000 of the agent's own issues since: the create check read {reads} times (search pages and markers), the delivery cost {calls} Jira calls"
    );
    if std::env::var("BENCH_AGENT_PART").as_deref() == Ok("retry") {
        return Ok(());
    }
    let n: usize = std::env::var("BENCH_AGENT_ISSUES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25_000);
    let fake = FakeJira::start(Mode::DataCenter);
    fake.seed_issues(PROJECT, LABEL, n);

    let (e2e, peak_rss, lost_create_calls) = end_to_end(&fake, n)?;
    let baseline = baseline(&fake, n)?;
    let e2e_rate = n as f64 / e2e.as_secs_f64();
    let base_rate = n as f64 / baseline.as_secs_f64();
    println!("refresh of {n} issues, Data Center fake, relay transport");
    println!(
        "  end to end (hub + agent + fake): {:>7.2} s  {e2e_rate:>8.0} issues/s",
        e2e.as_secs_f64()
    );
    println!(
        "  fake alone (same pages, direct): {:>7.2} s  {base_rate:>8.0} issues/s",
        baseline.as_secs_f64()
    );
    println!("  end to end / fake alone = {:.2}", e2e_rate / base_rate);
    let outside = 1.0 - baseline.as_secs_f64() / e2e.as_secs_f64();
    println!(
        "  time outside the fake (agent + relay + hub): {:.0}% (target <= 50%)",
        outside * 100.0
    );
    println!(
        "  agent peak RSS (VmHWM): {:.1} MB (target < 100 MB)",
        peak_rss as f64 / 1_000_000.0
    );
    println!(
        "a create whose answer is lost, after 300 issues of the agent's own: {lost_create_calls} Jira calls (target <= 4)"
    );
    Ok(())
}

/// The same pages the agent reads (keyset, 1000 a page, every field), one request each.
fn baseline(fake: &FakeJira, n: usize) -> Result<Duration, Error> {
    let auth = fake_jira::basic_auth();
    let base = format!("project = {PROJECT} AND labels in (\"{LABEL}\")");
    let started = Instant::now();
    let mut last: Option<u64> = None;
    let mut seen = 0;
    loop {
        let jql = match last {
            None => format!("{base} ORDER BY id ASC"),
            Some(id) => format!("({base}) AND id > {id} ORDER BY id ASC"),
        };
        let path = format!(
            "/rest/api/2/search?jql={}&startAt=0&maxResults={PAGE}&fields=*all",
            fake_jira::encode(&jql)
        );
        let answer = fake_jira::call(
            &fake.url(),
            "GET",
            &path,
            Some(&auth),
            None,
            Duration::from_secs(60),
        )?;
        let page: Value = serde_json::from_str(&answer.body)?;
        let issues = page["issues"].as_array().ok_or("no issues")?;
        seen += issues.len();
        if issues.len() < PAGE {
            break;
        }
        last = issues
            .last()
            .and_then(|i| i["id"].as_str())
            .and_then(|id| id.parse().ok());
    }
    if seen != n {
        return Err(format!("baseline saw {seen} of {n}").into());
    }
    Ok(started.elapsed())
}

/// Hub daemon + agent over the relay: from enqueueing the refresh to the batch completed.
fn end_to_end(fake: &FakeJira, n: usize) -> Result<(Duration, u64, i64), Error> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("data/hub.sqlite");
    let (mut hub, _) = HubConnection::open(&db, Arc::new(SystemClock))?;
    let config: Value =
        serde_json::from_str(include_str!("../admin/jira-sync/config.example.json"))?;
    hub.init_from_config(&config, false)?;
    let relay = dir.path().join("relay");
    for folder in ["inbox", "outbox", "archive", "rejected"] {
        std::fs::create_dir_all(relay.join(folder))?;
    }
    let update = json!({"relay_dir": relay.display().to_string(), "auto_refresh_minutes": 0,
        "pacing": {"min_interval_ms": 0, "claim_timeout_seconds": 60}});
    hub.update_settings(update.as_object().ok_or("object")?)?;
    let token = hub.tokens()?.ok_or("no tokens")?.agent;

    let _daemon = daemon(&db)?;
    let agent_config = dir.path().join("agent.json");
    std::fs::write(
        &agent_config,
        serde_json::to_vec(&json!({
            "jira_url": fake.url(), "jira_user": "agent", "jira_password": "secret",
            "relay_dir": relay.display().to_string(), "agent_token": token, "name": "bench",
            "idle_poll_ms": 50, "answer_timeout_seconds": 30, "request_timeout_seconds": 60,
        }))?,
    )?;
    // The agent refuses nothing but warns about a config others can read.
    std::fs::set_permissions(
        &agent_config,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )?;
    let agent = Process(
        Command::new(env!("CARGO_BIN_EXE_jira-hub"))
            .arg("agent")
            .arg("--config")
            .arg(&agent_config)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?,
    );
    // Let the agent start (and its first idle claim go) before the clock runs.
    std::thread::sleep(Duration::from_millis(500));

    let started = Instant::now();
    let batch = hub.enqueue_refresh(None, "bench")?;
    loop {
        let view = hub.batch(batch.id)?;
        if view.status == BatchStatus::Completed {
            break;
        }
        if started.elapsed() > Duration::from_secs(600) {
            return Err(format!("the refresh did not complete: {view:?}").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = started.elapsed();
    let peak = peak_rss(agent.0.id())?;
    let mirrored = hub.project_issues(LABEL)?.len();
    if mirrored != n {
        return Err(format!("the mirror has {mirrored} of {n} issues").into());
    }
    let calls = lost_create(fake, &mut hub)?;
    Ok((elapsed, peak, calls))
}

/// 300 issues made by the agent's account (each marked for another command), then one create
/// through the agent whose answer is lost: the Jira calls its command cost.
fn lost_create(fake: &FakeJira, hub: &mut HubConnection) -> Result<i64, Error> {
    own_issues(fake, 300)?;
    fake.fault(
        fake_jira::Endpoint::CreateIssue,
        fake_jira::Fault::DropAfterApply,
        1,
    );
    let request: jira_hub::service::BatchRequest = serde_json::from_value(json!({
        "title": "lost create", "author": "bench", "commands": [
            {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Потерянный ответ"}}]}))?;
    let batch = hub.enqueue_batch(&request)?;
    let started = Instant::now();
    loop {
        let view = hub.batch(batch.id)?;
        let command = &view.commands[0];
        if command.status == jira_hub::domain::command::CommandStatus::Done {
            return Ok(command.jira_calls);
        }
        if command.status.is_terminal() || started.elapsed() > Duration::from_secs(300) {
            return Err(format!("the lost create did not complete: {view:?}").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn daemon(db: &Path) -> Result<Process, Error> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_jira-hub"))
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", "127.0.0.1:0", "--relay-poll-ms", "50"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("stdout")?;
    let mut lines = std::io::BufReader::new(stdout).lines();
    lines.next();
    std::thread::spawn(move || for _ in lines {});
    Ok(Process(child))
}

/// Peak resident memory (VmHWM) of a live process, in bytes.
fn peak_rss(pid: u32) -> Result<u64, Error> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .ok_or("no VmHWM")?;
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .ok_or("VmHWM value")?
        .parse()?;
    Ok(kb * 1024)
}

/// `n` issues made by the agent's account, each marked for another command.
fn own_issues(fake: &FakeJira, n: usize) -> Result<(), Error> {
    let auth = fake_jira::basic_auth();
    for n in 0..n {
        let body = json!({
            "fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                       "summary": format!("Своя {n}")},
            "properties": [{"key": "jira-hub", "value": {"command": 1_000_000 + n, "batch": 999_999}}]
        });
        let created = fake_jira::call(
            &fake.url(),
            "POST",
            "/rest/api/2/issue",
            Some(&auth),
            Some(&body),
            Duration::from_secs(60),
        )?;
        if created.status != 201 {
            return Err(format!("seeding an own issue: HTTP {}", created.status).into());
        }
    }
    Ok(())
}

/// «повторить» two weeks on: a create applied in Jira whose answer was lost and whose look
/// failed (one delivery allowed: the command fails), then two weeks on both clocks and
/// `own` issues of the agent's account (each marked for another command), then the retry.
/// Returns the create check's reads (search pages and marker reads) and the retried
/// delivery's Jira calls.
fn retry_two_weeks_on(own: usize) -> Result<(usize, i64), Error> {
    use jira_hub::clock::{Clock, ManualClock};
    use jira_hub::domain::command::CommandStatus;
    use std::sync::atomic::AtomicBool;
    let fake = FakeJira::start(Mode::DataCenter);
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("hub.sqlite");
    let clock = Arc::new(ManualClock::new(time::OffsetDateTime::now_utc()));
    let (mut hub, _) = HubConnection::open(&db, clock.clone())?;
    let config: Value =
        serde_json::from_str(include_str!("../admin/jira-sync/config.example.json"))?;
    hub.init_from_config(&config, false)?;
    let update = json!({"auto_refresh_minutes": 0,
        "pacing": {"min_interval_ms": 0, "claim_timeout_seconds": 10, "max_deliveries": 1}});
    hub.update_settings(update.as_object().ok_or("object")?)?;
    let token = hub.tokens()?.ok_or("no tokens")?.agent;
    let request: jira_hub::service::BatchRequest = serde_json::from_value(json!({
        "title": "две недели", "author": "bench", "commands": [
            {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Две недели назад"}}]}))?;
    let batch = hub.enqueue_batch(&request)?;
    let state = jira_hub::http::AppState {
        pool: Arc::new(jira_hub::http::HubPool::new(
            HubConnection::open(&db, clock.clone())?.0,
        )),
        options: jira_hub::http::HttpOptions::default(),
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let address = listener.local_addr()?.to_string();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let _ = axum::serve(listener, jira_hub::http::router(state)).await;
        });
    });
    let agent_config = json!({
        "jira_url": fake.url(), "jira_user": "agent", "jira_password": "secret",
        "agent_token": token, "name": "bench", "hub_url": format!("http://{address}"),
        "idle_poll_ms": 100, "request_timeout_seconds": 5, "max_retries": 2,
        "release_grace_seconds": 5, "claim_wait_seconds": 0})
    .to_string();
    let run_until_ended =
        |hub: &mut HubConnection| -> Result<jira_hub::service::CommandView, Error> {
            let stop = Arc::new(AtomicBool::new(false));
            let agent = {
                let (clock, stop, config) = (clock.clone(), stop.clone(), agent_config.clone());
                std::thread::spawn(move || {
                    jira_hub::run_agent_for_test(&config, clock, None, stop, None)
                        .map_err(|e| e.to_string())
                })
            };
            let started = Instant::now();
            let command = loop {
                let command = hub.batch(batch.id)?.commands[0].clone();
                if command.status.is_terminal() || started.elapsed() > Duration::from_secs(120) {
                    break command;
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            agent.join().map_err(|_| "the agent panicked")??;
            Ok(command)
        };
    fake.fault(
        fake_jira::Endpoint::CreateIssue,
        fake_jira::Fault::DropAfterApply,
        1,
    );
    fake.fault(
        fake_jira::Endpoint::Search,
        fake_jira::Fault::Unavailable,
        3,
    );
    let failed = run_until_ended(&mut hub)?;
    if failed.status != CommandStatus::Failed {
        return Err(format!("the first delivery did not fail: {failed:?}").into());
    }
    fake.clear_faults();
    let two_weeks = 14 * 24 * 3600;
    clock.advance(time::Duration::seconds(two_weeks));
    fake.set_clock_skew_ms(two_weeks * 1000);
    own_issues(&fake, own)?;
    let seen = fake.requests().len();
    hub.retry_command(failed.id)?;
    let done = run_until_ended(&mut hub)?;
    if done.status != CommandStatus::Done || fake.creates_of("Две недели назад") != 1
    {
        return Err(format!("the retry did not find its issue: {done:?}").into());
    }
    let reads = fake
        .requests()
        .iter()
        .skip(seen)
        .filter(|s| s.path.contains("/search") || s.path.contains("/properties/"))
        .count();
    let _ = clock.monotonic();
    Ok((reads, done.jira_calls - failed.jira_calls))
}
