//! A report's memory, `cargo bench --bench report`: one refresh report of
//! `BENCH_REPORT_MB` MiB (100) of raw Jira issues, sent to the real daemon over HTTP and as a
//! relay file. For each, what it raised the daemon's peak resident memory by (VmHWM, reset to
//! VmRSS with `clear_refs` just before the report), as a multiple of the report's size (target
//! <= 1.5), and how long the daemon took to answer it.
//!
//! `BENCH_BASELINE_EXE` measures another build of the hub (say the previous main's release
//! binary) the same way in the same run, first.

mod common;
#[path = "support/relay.rs"]
#[allow(dead_code)] // its daemon is started here with the address it listens on
mod support;

use common::{size, spawn_serve, status_kib};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};
use support::{Error, claim, drop_file, setup};

fn main() -> Result<(), Error> {
    let megabytes = size("BENCH_REPORT_MB", 100);
    let issues = issues(megabytes << 20)?;
    let mut builds = Vec::new();
    if let Some(baseline) = std::env::var_os("BENCH_BASELINE_EXE") {
        builds.push(("baseline", std::path::PathBuf::from(baseline)));
    }
    builds.push(("this build", env!("CARGO_BIN_EXE_jira-hub").into()));
    for (name, exe) in &builds {
        for (transport, measured) in [
            ("HTTP", over_http(exe, &issues)?),
            ("relay", as_relay_file(exe, &issues)?),
        ] {
            println!(
                "{name:<10} {transport:<5} report of {:.0} MiB: peak +{:.0} MiB over {:.0} MiB before, {:.2}x the report (target <= 1.50), answered in {:.1} s",
                measured.bytes as f64 / 1048576.0,
                measured.grew_kib as f64 / 1024.0,
                measured.before_kib as f64 / 1024.0,
                measured.grew_kib as f64 * 1024.0 / measured.bytes as f64,
                measured.took.as_secs_f64()
            );
        }
    }
    Ok(())
}

/// What one report cost the daemon.
struct Measured {
    bytes: usize,
    before_kib: u64,
    grew_kib: u64,
    took: Duration,
}

/// The page's issues, comma-separated, at least `bytes` of them: raw issues as Jira's search
/// returns them, each a little different.
fn issues(bytes: usize) -> Result<Vec<u8>, Error> {
    let mut text = Vec::with_capacity(bytes + (1 << 20));
    let mut n = 0;
    while text.len() < bytes {
        if n > 0 {
            text.push(b',');
        }
        serde_json::to_writer(
            &mut text,
            &json!({"id": (10_000 + n).to_string(), "key": format!("AURORA-{n}"), "fields": {
                "summary": format!("Задача {n}"), "status": {"name": "Открыт"},
                "issuetype": {"name": "Задача"}, "labels": ["AWPCA"], "issuelinks": [],
                "created": "2026-03-05T10:15:30.000+0300", "updated": "2026-03-06T10:15:30.000+0300",
                "priority": {"name": "Средний"},
                "assignee": {"displayName": "Иванов Иван", "name": "ivanov"},
                "description": format!("Описание задачи {n}, достаточно длинное. ").repeat(40),
                "comment": {"total": 1, "comments": [{"id": n.to_string(),
                    "author": {"displayName": "Петров"}, "body": "Комментарий к задаче. ".repeat(10),
                    "created": "2026-03-05T10:15:30.000+0300"}]}}}),
        )?;
        n += 1;
    }
    Ok(text)
}

/// What goes before and after the issues in a report: its envelope, then one progress result of
/// `command` whose page holds them.
fn report(envelope: &str, command: i64) -> (String, &'static [u8]) {
    let head = format!(
        r#"{{{envelope},"results":[{{"command_id":{command},"delivery":1,"status":"progress","page":{{"start_at":0,"total":null,"issues":["#
    );
    (head, b"]}}]}")
}

/// The daemon's resident memory now, in KiB, its peak reset to it.
fn reset_peak(pid: u32) -> Result<u64, Error> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")?;
    Ok(status_kib(pid, "VmRSS:")?)
}

fn serve(exe: &Path, db: &Path) -> Result<(std::process::Child, String), Error> {
    spawn_serve(
        exe,
        db,
        &[
            "--http-max-body-mb",
            "512",
            "--relay-max-file-mb",
            "512",
            "--report-budget-mb",
            "512",
            "--http-timeout-seconds",
            "600",
            "--http-body-timeout-seconds",
            "600",
        ],
    )
    .map_err(|e| e.to_string().into())
}

fn over_http(exe: &Path, issues: &[u8]) -> Result<Measured, Error> {
    let mut setup = setup()?;
    setup.hub.enqueue_refresh(None, "bench")?;
    let (child, address) = serve(exe, &setup.db)?;
    let daemon = support::Daemon(child);
    let pid = daemon.0.id();
    let post = |path: &str, head: &str, body: &[u8], tail: &[u8]| -> Result<String, Error> {
        let mut stream = std::net::TcpStream::connect(&address)?;
        stream.set_read_timeout(Some(Duration::from_secs(600)))?;
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{head}",
            setup.token,
            head.len() + body.len() + tail.len()
        )?;
        stream.write_all(body)?;
        stream.write_all(tail)?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        Ok(answer)
    };
    let mut claimed = claim("c1", &setup.token, 1);
    claimed.as_object_mut().ok_or("object")?.remove("token");
    let answer = post("/agent/claim", &claimed.to_string(), b"", b"")?;
    let command = command_of(answer.split_once("\r\n\r\n").ok_or("no body")?.1)?;
    let (head, tail) = report(
        r#""kind":"report","id":"big","agent":"bench","sent_at":"2026-11-29T10:00:00Z""#,
        command,
    );
    let bytes = head.len() + issues.len() + tail.len();
    let before_kib = reset_peak(pid)?;
    let started = Instant::now();
    let answer = post("/agent/report", &head, issues, tail)?;
    let took = started.elapsed();
    if !answer.starts_with("HTTP/1.1 200") || !answer.contains(&format!("[{command}]")) {
        return Err(format!("not accepted: {}", &answer[..answer.len().min(400)]).into());
    }
    Ok(Measured {
        bytes,
        before_kib,
        grew_kib: status_kib(pid, "VmHWM:")?.saturating_sub(before_kib),
        took,
    })
}

fn as_relay_file(exe: &Path, issues: &[u8]) -> Result<Measured, Error> {
    let mut setup = setup()?;
    setup.hub.enqueue_refresh(None, "bench")?;
    let (child, _) = serve(exe, &setup.db)?;
    let daemon = support::Daemon(child);
    let pid = daemon.0.id();
    let (inbox, outbox) = (setup.relay.join("inbox"), setup.relay.join("outbox"));
    let started = Instant::now();
    while !inbox.is_dir() && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(5));
    }
    drop_file(&inbox, "claim-c1.json", &claim("c1", &setup.token, 1))?;
    let command = command_of(&wait_for(&outbox.join("claim-c1.json"))?)?;
    let (head, tail) = report(
        &format!(
            r#""kind":"report","id":"big","agent":"bench","sent_at":"2026-11-29T10:00:00Z","token":"{}""#,
            setup.token
        ),
        command,
    );
    let hidden = inbox.join(".report-big.json");
    {
        let mut file = std::fs::File::create(&hidden)?;
        file.write_all(head.as_bytes())?;
        file.write_all(issues)?;
        file.write_all(tail)?;
    }
    let bytes = std::fs::metadata(&hidden)?.len() as usize;
    let before_kib = reset_peak(pid)?;
    let started = Instant::now();
    std::fs::rename(&hidden, inbox.join("report-big.json"))?;
    let answer: Value = serde_json::from_str(&wait_for(&outbox.join("report-big.json"))?)?;
    let took = started.elapsed();
    if answer.get("accepted") != Some(&json!([command])) {
        return Err(format!("not accepted: {answer}").into());
    }
    Ok(Measured {
        bytes,
        before_kib,
        grew_kib: status_kib(pid, "VmHWM:")?.saturating_sub(before_kib),
        took,
    })
}

/// The id of the one command a claim answer hands out.
fn command_of(answer: &str) -> Result<i64, Error> {
    let answer: Value = serde_json::from_str(answer)?;
    answer["commands"][0]["id"]
        .as_i64()
        .ok_or_else(|| format!("no refresh handed out: {answer}").into())
}

/// The text of `path` once it is there (at most 10 minutes).
fn wait_for(path: &Path) -> Result<String, Error> {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && serde_json::from_str::<Value>(&text).is_ok()
        {
            return Ok(text);
        }
        if started.elapsed() > Duration::from_secs(600) {
            return Err(format!("{} never came", path.display()).into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
