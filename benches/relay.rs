//! The file relay with the real daemon (`cargo bench --bench relay`):
//!
//! - claim round trip: a claim file written into `inbox/` as the agent writes it (a `.`-name,
//!   fsync, rename, fsync of the folder) until its answer is read from `outbox/`, p50 and p99,
//!   with change notifications and with polling only (100 ms interval); with notifications,
//!   beside the floor measured in the same run, in blocks of 25 in turn with the round trips
//!   (which go back to back, as an agent sends them). The floor is what an exactly-once round
//!   trip must do, done directly: the same atomic write of the claim, one durable commit of an
//!   answer the size of a claim's (WAL, `synchronous=FULL`), one atomic write of it into
//!   `outbox/` as the hub writes answers, and the same read of it;
//! - throughput: 10,000 commands claimed 100 at a time and reported through the relay, beside the
//!   same workload through the service called directly, measured in the same run.
//!
//! `BENCH_RELAY_COMMANDS` and `BENCH_RELAY_TRIPS` change the sizes; `BENCH_DAEMON_EXE` runs another
//! build of the hub instead of this one; `BENCH_BASELINE_EXE` measures the round trips of another
//! build (e.g. the previous main's) first, on a database it made itself, against a floor of its
//! own in the same run.

mod common;
#[path = "support/relay.rs"]
mod support;

use common::size;
use jira_hub::protocol::{AgentAnswer, decode_value};
use jira_hub::service::{BatchRequest, HubConnection};
use serde_json::{Value, json};
use std::io::Write;
use std::time::{Duration, Instant};
use support::{
    Error, claim, drop_file, drop_file_synced, setup, setup_by, start, start_exe, wait_for,
};

fn main() -> Result<(), Error> {
    let trips = size("BENCH_RELAY_TRIPS", 200);
    let commands = size("BENCH_RELAY_COMMANDS", 10_000);
    let this = support::daemon_exe();
    if let Some(baseline) = std::env::var_os("BENCH_BASELINE_EXE") {
        println!("baseline build (BENCH_BASELINE_EXE):");
        trips_against_floor(std::path::Path::new(&baseline), trips)?;
        println!("this build:");
    }
    trips_against_floor(&this, trips)?;
    let polling = round_trips(
        &this,
        trips / 4,
        &["--relay-no-notify", "--relay-poll-ms", "100"],
        None,
    )?;
    report("claim round trip, polling 100 ms", &polling);

    let direct = throughput_direct(commands)?;
    let relay = throughput_relay(commands)?;
    println!("throughput, service called directly: {direct:>8.0} commands/s");
    println!("throughput, through the relay:       {relay:>8.0} commands/s");
    println!("relay / direct = {:.2} (target >= 0.50)", relay / direct);

    let (file_bytes, peak_bytes, idle_bytes) = large_report(size("BENCH_RELAY_REPORT_MB", 100))?;
    println!(
        "report file of {:.0} MiB: daemon peak RSS {:.0} MiB (idle {:.0} MiB), {:.2}x the file",
        file_bytes as f64 / 1048576.0,
        peak_bytes as f64 / 1048576.0,
        idle_bytes as f64 / 1048576.0,
        peak_bytes as f64 / file_bytes as f64
    );
    Ok(())
}

/// Round trips through `exe` with notifications, beside the floor measured in turn with them.
fn trips_against_floor(exe: &std::path::Path, trips: usize) -> Result<(), Error> {
    let mut floor = Floor::new()?;
    let notify = round_trips(exe, trips, &[], Some(&mut floor))?;
    let trip_p50 = report("claim round trip, notifications", &notify);
    let floor_p50 = report("floor: 2 atomic writes + commit", &floor.times);
    println!(
        "round trip p50 / floor p50 = {:.2} (target <= 1.50)",
        trip_p50 / floor_p50
    );
    Ok(())
}

/// The daemon's peak resident memory (VmHWM) and current (VmRSS), in bytes.
fn memory_of(pid: u32) -> Result<(u64, u64), Error> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64, Error> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .ok_or("no such field")?;
        Ok(line
            .split_whitespace()
            .nth(1)
            .ok_or("no value")?
            .parse::<u64>()?
            * 1024)
    };
    Ok((field("VmHWM:")?, field("VmRSS:")?))
}

/// A report of one refresh page of `megabytes` MiB through the daemon; returns the file size,
/// the daemon's peak RSS, and its RSS before the file.
fn large_report(megabytes: usize) -> Result<(u64, u64, u64), Error> {
    let mut setup = setup()?;
    setup.hub.enqueue_refresh(None, "bench")?;
    let daemon = start(&setup.db, &[])?;
    let inbox = setup.relay.join("inbox");
    let outbox = setup.relay.join("outbox");
    while !inbox.is_dir() {
        std::thread::sleep(Duration::from_millis(5));
    }
    drop_file(&inbox, "claim-big.json", &claim("big", &setup.token, 1))?;
    let answer = wait_for(&outbox.join("claim-big.json"))?;
    let command = answer["commands"][0]["id"]
        .as_i64()
        .ok_or("no refresh handed out")?;
    let (_, idle) = memory_of(daemon.0.id())?;

    // Written piece by piece, so that the bench itself never holds 100 MB of values.
    let path = setup.relay.join("inbox/.report-big.json");
    {
        use std::io::Write;
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
        write!(
            file,
            r#"{{"kind":"report","id":"big","agent":"bench","sent_at":"2026-11-29T10:00:00Z","token":"{}","results":[{{"command_id":{command},"delivery":1,"status":"progress","page":{{"start_at":0,"total":0,"issues":["#,
            setup.token
        )?;
        let mut written = 0;
        let mut n = 0;
        while written < megabytes * 1024 * 1024 {
            let issue = json!({"id": n.to_string(), "key": format!("AURORA-{n}"), "fields": {
                "summary": format!("Задача {n}"), "status": {"name": "Открыт"}, "issuetype": {"name": "Задача"},
                "labels": ["AWPCA"], "created": "2026-03-05T10:15:30.000+0300",
                "description": "Описание задачи, достаточно длинное. ".repeat(60)}});
            let text = serde_json::to_string(&issue)?;
            if n > 0 {
                file.write_all(b",")?;
            }
            file.write_all(text.as_bytes())?;
            written += text.len() + 1;
            n += 1;
        }
        write!(file, "]}}}}]}}")?;
        file.flush()?;
    }
    let file_bytes = std::fs::metadata(&path)?.len();
    std::fs::rename(&path, inbox.join("report-big.json"))?;
    let answer = wait_for(&outbox.join("report-big.json"))?;
    assert_eq!(answer["accepted"], json!([command]), "{answer}");
    let (peak, _) = memory_of(daemon.0.id())?;
    Ok((file_bytes, peak, idle))
}

/// Prints p50 and p99 of `times`; returns the p50 in ms.
fn report(label: &str, times: &[Duration]) -> f64 {
    let mut sorted = times.to_vec();
    sorted.sort();
    let at =
        |q: f64| sorted[((sorted.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1000.0;
    println!(
        "{label:<34} p50 {:>7.2} ms   p99 {:>7.2} ms   ({} trips)",
        at(0.5),
        at(0.99),
        sorted.len()
    );
    at(0.5)
}

/// Round trips in a block between two blocks of floor trips.
const FLOOR_BLOCK: usize = 25;

/// The floor of a round trip: what an exactly-once round trip must do at the least. The agent's
/// atomic write of its claim, and on another thread an ideal hub that sees the claim within
/// 50 µs of its rename (it looks that often) and does only what it must: one durable commit of
/// an answer the size of a claim's, then one atomic write of the answer into `outbox/`, as the
/// hub writes answers (`relay::fsio::write_new`: a `.`-name, fsync, rename, fsync of the folder);
/// then the agent's read of it. The two sides overlap as they do with the real hub (the ideal
/// hub commits while the agent still syncs `inbox/`): done one after the other, the same work
/// took 20 ms a trip here against 8 ms for the real round trip, as each fsync waits for the file
/// system's journal.
struct Floor {
    dir: tempfile::TempDir,
    token: String,
    names: Option<std::sync::mpsc::SyncSender<String>>,
    hub: Option<std::thread::JoinHandle<Result<(), String>>>,
    times: Vec<Duration>,
}

impl Floor {
    fn new() -> Result<Floor, Error> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("inbox"))?;
        std::fs::create_dir(dir.path().join("outbox"))?;
        let conn = rusqlite::Connection::open(dir.path().join("floor.sqlite"))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.execute_batch("CREATE TABLE answer (id TEXT PRIMARY KEY, body TEXT NOT NULL)")?;
        // In the state a running hub's WAL is in: written once over (8 MiB, unsynced), then
        // checkpointed, so that commits overwrite its blocks from the start rather than grow
        // the file (a WAL that grows makes every fsync commit the file system's journal too:
        // 3 ms a commit against 0.2 ms on this machine). The hub's own WAL reaches that state
        // after its first few megabytes.
        conn.pragma_update(None, "synchronous", "OFF")?;
        let filler = "y".repeat(64 * 1024);
        for n in 0..128 {
            conn.execute(
                "INSERT INTO answer (id, body) VALUES (?1, ?2)",
                [format!("filler-{n}"), filler.clone()],
            )?;
        }
        conn.execute("DELETE FROM answer", [])?;
        conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(()))?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        let (names, expected) = std::sync::mpsc::sync_channel::<String>(1);
        let (inbox, outbox) = (dir.path().join("inbox"), dir.path().join("outbox"));
        let hub = std::thread::spawn(move || -> Result<(), String> {
            let mut conn = conn;
            let body = serde_json::to_string(&"x".repeat(1300)).map_err(|e| e.to_string())?;
            for name in expected {
                while !inbox.join(&name).exists() {
                    std::thread::sleep(Duration::from_micros(50));
                }
                let io = |e: std::io::Error| e.to_string();
                let sql = |e: rusqlite::Error| e.to_string();
                let tx = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(sql)?;
                tx.execute(
                    "INSERT INTO answer (id, body) VALUES (?1, ?2)",
                    [name.as_str(), body.as_str()],
                )
                .map_err(sql)?;
                tx.commit().map_err(sql)?;
                let temp = outbox.join(format!(".{name}.tmp"));
                let mut file = std::fs::File::create_new(&temp).map_err(io)?;
                file.write_all(body.as_bytes()).map_err(io)?;
                file.sync_all().map_err(io)?;
                drop(file);
                std::fs::rename(&temp, outbox.join(&name)).map_err(io)?;
                std::fs::File::open(&outbox)
                    .and_then(|d| d.sync_all())
                    .map_err(io)?;
            }
            Ok(())
        });
        Ok(Floor {
            dir,
            token: "0".repeat(64),
            names: Some(names),
            hub: Some(hub),
            times: Vec::new(),
        })
    }

    /// One floor trip, timed as the round trips are: from the claim's write to its answer read.
    fn trip(&mut self, n: usize) -> Result<(), Error> {
        let inbox = self.dir.path().join("inbox");
        let outbox = self.dir.path().join("outbox");
        let name = format!("claim-f{n}.json");
        self.names
            .as_ref()
            .ok_or("the floor's hub has stopped")?
            .send(name.clone())?;
        let started = Instant::now();
        drop_file_synced(&inbox, &name, &claim(&format!("f{n}"), &self.token, 0))?;
        wait_for(&outbox.join(&name))?;
        self.times.push(started.elapsed());
        std::fs::remove_file(outbox.join(&name))?;
        std::fs::remove_file(inbox.join(&name))?;
        Ok(())
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        self.names = None;
        if let Some(hub) = self.hub.take()
            && let Ok(Err(error)) = hub.join()
        {
            eprintln!("the floor's hub failed: {error}");
        }
    }
}

/// Claim round trips through the daemon; with `floor`, a floor trip after each.
fn round_trips(
    exe: &std::path::Path,
    trips: usize,
    extra: &[&str],
    mut floor: Option<&mut Floor>,
) -> Result<Vec<Duration>, Error> {
    let setup = setup_by(exe, false)?;
    let _daemon = start_exe(exe, &setup.db, extra)?;
    let inbox = setup.relay.join("inbox");
    let outbox = setup.relay.join("outbox");
    while !inbox.is_dir() {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut times = Vec::with_capacity(trips);
    for n in 0..trips + 5 {
        let name = format!("claim-t{n}.json");
        let started = Instant::now();
        drop_file_synced(&inbox, &name, &claim(&format!("t{n}"), &setup.token, 0))?;
        wait_for(&outbox.join(&name))?;
        if n >= 5 {
            times.push(started.elapsed());
        }
        std::fs::remove_file(outbox.join(&name))?;
        // Blocks of back-to-back round trips (each claim dropped as soon as the answer before it
        // came, as an agent does), each followed, once the daemon is idle, by as many floor trips.
        if let Some(floor) = floor.as_deref_mut()
            && (n + 1) % FLOOR_BLOCK == 0
        {
            std::thread::sleep(Duration::from_millis(20));
            for f in 0..FLOOR_BLOCK {
                floor.trip(n * FLOOR_BLOCK + f)?;
            }
        }
    }
    Ok(times)
}

fn enqueue(hub: &mut HubConnection, commands: usize) -> Result<(), Error> {
    for batch in 0..commands.div_ceil(100) {
        let list: Vec<Value> = (0..100.min(commands - batch * 100))
            .map(|i| json!({"type": "comment", "params": {"key": format!("AURORA-{}", i + 1), "body": "текст"}}))
            .collect();
        let request: BatchRequest =
            serde_json::from_value(json!({"title": "bench", "author": "bench", "commands": list}))?;
        hub.enqueue_batch(&request)?;
    }
    Ok(())
}

fn results(commands: &[Value]) -> Value {
    Value::Array(
        commands
            .iter()
            .map(|c| json!({"command_id": c["id"], "delivery": c["delivery"], "status": "done", "result": {"comment_id": "1"}, "jira_calls": 1}))
            .collect(),
    )
}

fn throughput_relay(commands: usize) -> Result<f64, Error> {
    let mut setup = setup()?;
    enqueue(&mut setup.hub, commands)?;
    let _daemon = start(&setup.db, &[])?;
    let inbox = setup.relay.join("inbox");
    let outbox = setup.relay.join("outbox");
    while !inbox.is_dir() {
        std::thread::sleep(Duration::from_millis(5));
    }
    let started = Instant::now();
    let mut done = 0;
    for n in 0.. {
        let name = format!("claim-c{n}.json");
        drop_file(&inbox, &name, &claim(&format!("c{n}"), &setup.token, 100))?;
        let answer = wait_for(&outbox.join(&name))?;
        let handed = answer["commands"].as_array().ok_or("commands")?.clone();
        if handed.is_empty() {
            break;
        }
        let name = format!("report-r{n}.json");
        let report = json!({"kind": "report", "id": format!("r{n}"), "agent": "bench", "sent_at": "2026-11-29T10:00:00Z",
            "token": setup.token, "results": results(&handed)});
        drop_file(&inbox, &name, &report)?;
        wait_for(&outbox.join(&name))?;
        done += handed.len();
    }
    assert_eq!(done, commands);
    Ok(commands as f64 / started.elapsed().as_secs_f64())
}

fn throughput_direct(commands: usize) -> Result<f64, Error> {
    let mut setup = setup()?;
    enqueue(&mut setup.hub, commands)?;
    let started = Instant::now();
    let mut done = 0;
    for n in 0.. {
        let AgentAnswer::Claim(answer) = setup.hub.handle_agent_request(&decode_value(claim(
            &format!("c{n}"),
            &setup.token,
            100,
        ))?)?
        else {
            return Err("not a claim answer".into());
        };
        if answer.commands.is_empty() {
            break;
        }
        let handed: Vec<Value> = answer
            .commands
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?;
        let report = json!({"kind": "report", "id": format!("r{n}"), "agent": "bench", "sent_at": "2026-11-29T10:00:00Z",
            "results": results(&handed)});
        setup.hub.handle_agent_request(&decode_value(report)?)?;
        done += handed.len();
    }
    assert_eq!(done, commands);
    Ok(commands as f64 / started.elapsed().as_secs_f64())
}
