//! Test helpers: temp dirs, the real binary, old-version databases built from the SQL history in
//! `tests/fixtures/history/`.

use jira_hub::clock::ManualClock;
use jira_hub::service::HubConnection;
use rusqlite::Connection;
use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub mod faultfs;

/// A temp dir that holds one hub: `data/hub.sqlite` by default.
pub struct TestDir {
    dir: tempfile::TempDir,
}

impl TestDir {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// On a memory filesystem when the machine has one (`/dev/shm`): for tests that make
    /// thousands of transactions, each synced.
    pub fn in_memory_fs() -> Self {
        let shm = Path::new("/dev/shm");
        match tempfile::tempdir_in(shm) {
            Ok(dir) if shm.is_dir() => Self { dir },
            _ => Self::new(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn db(&self) -> PathBuf {
        self.path().join("data").join("hub.sqlite")
    }

    pub fn backups(&self) -> Vec<String> {
        let dir = self.path().join("data").join("backups");
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    pub fn backup_path(&self, name: &str) -> PathBuf {
        self.path().join("data").join("backups").join(name)
    }
}

/// What a run of the binary gave.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn hub_command(db: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_jira-hub"));
    command
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("JIRA_HUB_DB")
        .env("RUST_LOG", "warn");
    command
}

pub fn run(db: &Path, args: &[&str]) -> Output {
    let output = hub_command(db, args).output().expect("run jira-hub");
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs and expects success.
pub fn run_ok(db: &Path, args: &[&str]) -> Output {
    let output = run(db, args);
    assert_eq!(output.code, 0, "jira-hub {args:?} failed: {output:?}");
    output
}

/// The old schemas and Jira responses the tests read, kept in the repository
/// (`tests/fixtures/`, with their sources and licences).
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

pub fn example_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("admin/jira-sync/config.example.json")
}

/// The SQL that builds a database of schema `version` (1..=3), from the history files.
pub fn history_sql(version: u32) -> String {
    let history = fixtures().join("history");
    (1..=version)
        .map(|v| {
            std::fs::read_to_string(history.join(format!("schema-v{v}.sql"))).expect("history sql")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn v3_settings_sql() -> String {
    std::fs::read_to_string(fixtures().join("history/settings-v3.example.sql"))
        .expect("settings sql")
}

/// Builds an old-version database at `db` and runs `extra` on it; returns the open connection.
pub fn build_db(db: &Path, version: u32, extra: &str) -> Connection {
    std::fs::create_dir_all(db.parent().expect("parent")).expect("data dir");
    let conn = Connection::open(db).expect("open");
    conn.execute_batch(&history_sql(version)).expect("history");
    conn.execute_batch(extra).expect("extra sql");
    conn
}

/// Some rows every old version can hold: issues, a link, notes, a batch with three commands.
pub const COMMON_ROWS: &str = "
INSERT INTO issue (key, jira_id, issue_type, summary, status, labels, synced_at)
VALUES ('AURORA-1', '10001', 'Задача', 'Первая', 'Открыт', '[\"AWPCA\"]', '2026-01-01T00:00:00Z'),
       ('AURORA-2', '10002', 'Эпик', 'Вторая', 'В работе', '[\"AWPCA\"]', '2026-01-01T00:00:00Z');
INSERT INTO issue_link (jira_id, source_key, target_key, link_type) VALUES ('5001', 'AURORA-1', 'AURORA-2', 'Blocks');
INSERT INTO issue_note (issue_key, author, body, created_at) VALUES
  ('AURORA-1', 'ivanov', 'заметка один', '2026-01-02T00:00:00Z'),
  ('AURORA-9', 'petrov', 'заметка о задаче вне зеркала', '2026-01-02T00:00:00Z');
INSERT INTO batch (title, author, created_at) VALUES ('план', 'ivanov', '2026-01-03T00:00:00Z');
INSERT INTO command (batch_id, seq, type, params, status) VALUES
  (1, 1, 'comment', '{\"key\":\"AURORA-1\",\"body\":\"x\"}', 'done'),
  (1, 2, 'transition', '{\"key\":\"AURORA-1\",\"status\":\"Готово\"}', 'claimed'),
  (1, 3, 'comment', '{\"key\":\"AURORA-2\",\"body\":\"y\"}', 'queued');
";

pub fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |row| row.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

pub fn setting(conn: &Connection, key: &str) -> Option<String> {
    conn.query_row("SELECT value FROM setting WHERE key = ?1", [key], |row| {
        row.get(0)
    })
    .ok()
}

pub fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o7777
}

pub fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(
        time::macros::datetime!(2026-11-29 10:00:00 UTC),
    ))
}

/// A hub on a new database in `dir`, on a clock the test controls.
pub fn open_hub(dir: &TestDir, clock: &Arc<ManualClock>) -> HubConnection {
    HubConnection::open(&dir.db(), clock.clone())
        .expect("open hub")
        .0
}

/// Every row of `setting` and `project`, to show that a refused request changed nothing.
pub fn snapshot(db: &Path) -> Vec<String> {
    let conn = Connection::open(db).expect("open");
    let mut rows = Vec::new();
    for sql in [
        "SELECT key || '=' || value FROM setting ORDER BY key",
        "SELECT label || '|' || name || '|' || ifnull(board_id, '') || '|' || created_at FROM project ORDER BY label",
    ] {
        let mut statement = conn.prepare(sql).expect("prepare");
        rows.extend(
            statement
                .query_map([], |row| row.get::<_, String>(0))
                .expect("query")
                .map(Result::unwrap),
        );
    }
    rows
}

/// Writes settings through the service (as `PUT /settings` would); panics on a refusal.
pub fn set_settings(hub: &mut HubConnection, settings: serde_json::Value) {
    hub.update_settings(settings.as_object().expect("an object"))
        .expect("settings");
}

/// [`drop_file`] as a share whose client caches its listing shows it: the file appears `late`
/// after the file server wrote it (its mtime).
pub fn drop_file_late(
    dir: &Path,
    name: &str,
    value: &serde_json::Value,
    late: std::time::Duration,
) {
    let temp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&temp, serde_json::to_vec(value).expect("json")).expect("write");
    std::fs::File::options()
        .write(true)
        .open(&temp)
        .and_then(|file| file.set_modified(std::time::SystemTime::now() - late))
        .expect("mtime");
    std::fs::rename(&temp, dir.join(name)).expect("rename");
}

/// A hub initialised from the example config, with a clock the test moves.
pub fn ready_hub(dir: &TestDir, clock: &Arc<ManualClock>) -> HubConnection {
    let mut hub = open_hub(dir, clock);
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(example_config()).expect("config"))
            .expect("json");
    hub.init_from_config(&config, false).expect("init");
    hub
}

/// Builds the agent's messages with fresh ids.
pub struct Agent {
    pub name: String,
    next: std::cell::Cell<u64>,
}

impl Agent {
    pub fn new(name: &str) -> Self {
        Agent {
            name: name.to_string(),
            next: std::cell::Cell::new(1),
        }
    }

    fn id(&self) -> String {
        let n = self.next.get();
        self.next.set(n + 1);
        format!("{}-{n}", self.name)
    }

    fn envelope(&self, kind: &str) -> serde_json::Value {
        serde_json::json!({"kind": kind, "id": self.id(), "agent": self.name, "sent_at": "2026-11-29T10:00:00Z"})
    }

    pub fn claim_request(
        &self,
        max_commands: u32,
        settings_version: i64,
    ) -> jira_hub::protocol::AgentRequest {
        let mut value = self.envelope("claim");
        value["agent_version"] = "1.4.0".into();
        value["settings_version"] = settings_version.into();
        value["max_commands"] = max_commands.into();
        // This release's agent: it checks an edit's base before writing.
        value["protocol"] = jira_hub::protocol::PROTOCOL_REVISION.into();
        value["capabilities"] = serde_json::json!(jira_hub::protocol::AGENT_CAPABILITIES);
        jira_hub::protocol::decode_value(value).expect("claim")
    }

    pub fn report_request(&self, results: serde_json::Value) -> jira_hub::protocol::AgentRequest {
        let mut value = self.envelope("report");
        value["results"] = results;
        jira_hub::protocol::decode_value(value).expect("report")
    }

    pub fn claim(
        &self,
        hub: &mut HubConnection,
        max_commands: u32,
    ) -> jira_hub::protocol::ClaimAnswer {
        match hub
            .handle_agent_request(&self.claim_request(max_commands, 0))
            .expect("claim")
        {
            jira_hub::protocol::AgentAnswer::Claim(answer) => answer,
            other => panic!("{other:?}"),
        }
    }

    pub fn report(
        &self,
        hub: &mut HubConnection,
        results: serde_json::Value,
    ) -> jira_hub::protocol::ReportAnswer {
        match hub
            .handle_agent_request(&self.report_request(results))
            .expect("report")
        {
            jira_hub::protocol::AgentAnswer::Report(answer) => answer,
            other => panic!("{other:?}"),
        }
    }
}

/// A batch request from JSON.
pub fn batch(value: serde_json::Value) -> jira_hub::service::BatchRequest {
    serde_json::from_value(value).expect("batch request")
}

/// A raw Jira issue as the search API returns it.
pub fn raw_issue(
    key: &str,
    id: &str,
    labels: &[&str],
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut fields = serde_json::json!({
        "summary": format!("Задача {key}"),
        "status": {"name": "Открыт"},
        "issuetype": {"name": "Задача"},
        "labels": labels,
        "created": "2026-03-05T10:15:30.000+0300",
        "updated": "2026-03-06T10:15:30.000+0300",
        "issuelinks": [],
    });
    if let (Some(fields), Some(extra)) = (fields.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            fields.insert(k.clone(), v.clone());
        }
    }
    serde_json::json!({"id": id, "key": key, "fields": fields})
}

/// A running `jira-hub serve`, killed when dropped.
pub struct Daemon {
    pub child: std::process::Child,
    pub address: String,
}

impl Daemon {
    /// Starts `serve` on `db` with a port of its own and the given extra arguments; waits until
    /// it listens.
    pub fn start(db: &Path, extra: &[&str]) -> Daemon {
        Daemon::start_with_log(db, extra, std::process::Stdio::null())
    }

    /// [`Daemon::start`], its log (stderr) written to `log`.
    pub fn start_logging_to(db: &Path, extra: &[&str], log: &Path) -> Daemon {
        let file = std::fs::File::create(log).expect("log file");
        Daemon::start_with_log(db, extra, file.into())
    }

    fn start_with_log(db: &Path, extra: &[&str], stderr: std::process::Stdio) -> Daemon {
        use std::io::BufRead;
        let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--relay-poll-ms", "50"];
        args.extend_from_slice(extra);
        let mut child = hub_command(db, &args)
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = std::io::BufReader::new(stdout).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let address = first
            .rsplit("http://")
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        assert!(
            address.starts_with("127.0.0.1:"),
            "serve did not start: {first:?}"
        );
        // Keep reading stdout so the daemon never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Daemon { child, address }
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success());
    }

    pub fn child_id(&self) -> u32 {
        self.child.id()
    }

    pub fn wait(&mut self) -> std::process::ExitStatus {
        self.child.wait().expect("wait")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (polling, bounded) until `path` exists; returns its JSON.
pub fn wait_for_json(path: &Path, timeout: std::time::Duration) -> serde_json::Value {
    let started = std::time::Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(value) = serde_json::from_str(&text)
        {
            return value;
        }
        assert!(
            started.elapsed() < timeout,
            "{} did not appear in {timeout:?}",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Writes a relay file the way the protocol says: a `.` name, then a rename.
pub fn drop_file(dir: &Path, name: &str, value: &serde_json::Value) {
    let temp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&temp, serde_json::to_vec(value).expect("json")).expect("write");
    std::fs::rename(&temp, dir.join(name)).expect("rename");
}

/// A hub initialised from the example config with `relay_dir` set to `<dir>/relay` (made).
pub fn relay_hub(dir: &TestDir) -> (HubConnection, PathBuf, String) {
    relay_hub_in(dir, dir.path().join("relay"))
}

/// A hub initialised from the example config with `relay_dir` set to `relay` (its folders made).
pub fn relay_hub_in(dir: &TestDir, relay: PathBuf) -> (HubConnection, PathBuf, String) {
    let clock = Arc::new(jira_hub::clock::SystemClock);
    let (mut hub, _) = HubConnection::open(&dir.db(), clock).expect("open");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(example_config()).expect("config"))
            .expect("json");
    hub.init_from_config(&config, false).expect("init");
    // A share as the agent finds it after the hub's first pass; the hub making the folders is
    // tested on its own.
    for folder in ["inbox", "outbox", "archive", "rejected"] {
        std::fs::create_dir_all(relay.join(folder)).expect("relay dir");
    }
    let mut update = serde_json::Map::new();
    update.insert("relay_dir".into(), relay.display().to_string().into());
    // The daemon's own refreshes would join the tests' claims.
    update.insert("auto_refresh_minutes".into(), 0.into());
    hub.update_settings(&update).expect("relay_dir");
    let token = hub.tokens().expect("tokens").expect("tokens").agent;
    (hub, relay, token)
}

pub fn claim_file(id: &str, token: &str, max: u32) -> serde_json::Value {
    serde_json::json!({"kind": "claim", "id": id, "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
        "token": token, "agent_version": "1.4.0", "settings_version": 0, "max_commands": max})
}

pub fn report_file(id: &str, token: &str, results: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"kind": "report", "id": id, "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
        "token": token, "results": results})
}

/// One request on a new connection (read timeout 30 s): `head` (its request line and headers,
/// each ending in CRLF), then `Host`, `Connection: close`, `Content-Length` and `body`. The
/// stream, for the caller to read the answer.
pub fn send_raw(address: &str, head: &str, body: &str) -> std::net::TcpStream {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .expect("timeout");
    write!(
        stream,
        "{head}Host: {address}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    stream
}

/// A minimal HTTP/1.1 client for tests against the real daemon: one request per connection.
pub fn http(
    address: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&serde_json::Value>,
) -> (u16, serde_json::Value) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .expect("timeout");
    let body = body
        .map(|b| serde_json::to_vec(b).expect("json"))
        .unwrap_or_default();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(token) = token {
        request.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if !body.is_empty() {
        request.push_str("Content-Type: application/json\r\n");
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).expect("write");
    stream.write_all(&body).expect("write body");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("read");
    let text = String::from_utf8_lossy(&response);
    let status: u16 = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    let (head, payload) = text.split_once("\r\n\r\n").expect("head");
    // Bodies may come chunked.
    let payload = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = payload;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if size == 0 {
                break;
            }
            out.push_str(&after[..size]);
            rest = &after[size + 2..];
        }
        out
    } else {
        payload.to_string()
    };
    (
        status,
        serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload)),
    )
}

/// The HTTP router over a hub initialised from the example config, without automatic refreshes:
/// the router, the client and agent tokens, and the folder that holds the database.
pub fn test_router(
    options: jira_hub::http::HttpOptions,
) -> (axum::Router, String, String, TestDir) {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, serde_json::json!({"auto_refresh_minutes": 0}));
    let tokens = hub.tokens().expect("tokens").expect("tokens");
    let state = jira_hub::http::AppState {
        pool: Arc::new(jira_hub::http::HubPool::new(hub)),
        options,
    };
    (
        jira_hub::http::router(state),
        tokens.client,
        tokens.agent,
        dir,
    )
}

/// Whether the daemon has closed `stream` (end of file or a reset), looking for a moment only;
/// what it answered before closing is added to `seen`.
pub fn closed_by_hub(stream: &mut TcpStream, seen: &mut Vec<u8>) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_millis(5)))
        .unwrap();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(n) => seen.extend_from_slice(&buffer[..n]),
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
}

/// Polls until at least `count` of `streams` are closed by the hub; panics after `within`.
pub fn wait_until_closed(streams: &mut [TcpStream], count: usize, within: Duration) {
    let started = Instant::now();
    let mut done = vec![false; streams.len()];
    loop {
        let mut seen = Vec::new();
        for (stream, done) in streams.iter_mut().zip(done.iter_mut()) {
            if !*done {
                *done = closed_by_hub(stream, &mut seen);
            }
        }
        let n = done.iter().filter(|c| **c).count();
        if n >= count {
            return;
        }
        assert!(
            started.elapsed() < within,
            "only {n} of {} connections closed in {within:?}, expected {count}",
            streams.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
