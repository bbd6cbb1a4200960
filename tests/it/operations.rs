//! What operators alert on and script with: the counters of outcomes and refusals, the backup,
//! database and `process_*` series of `/metrics`, the example alert rules against a live hub's
//! `/metrics` (and `promtool check rules` where promtool is installed), the CLI's `--json` and
//! `status --check`, and no banner on a stdout that is the journal.

use crate::http::api;
use crate::support::*;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

async fn metrics_text(api: &crate::http::Api) -> String {
    let (status, _, text) = api.get_accepting("/metrics", None).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    text
}

/// The value of the one sample written exactly as `series` (name and labels).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

#[tokio::test]
async fn metrics_count_outcomes_jira_calls_refusals_and_show_the_process() {
    let api = api();
    let before = metrics_text(&api).await;
    // Every final status and type from the first scrape, at zero.
    for series in [
        "jira_hub_commands_finished_total{status=\"done\",type=\"ensure_issue\"}",
        "jira_hub_commands_finished_total{status=\"failed\",type=\"comment\"}",
        "jira_hub_commands_finished_total{status=\"cancelled\",type=\"refresh\"}",
        "jira_hub_jira_calls_total",
        "jira_hub_jira_rate_limited_total",
        "jira_hub_auth_failures_total{credential=\"client\"}",
        "jira_hub_auth_failures_total{credential=\"console\"}",
    ] {
        assert_eq!(sample(&before, series), Some(0.0), "{series} in {before}");
    }

    // One command done by the agent (3 calls to Jira, one of them answered 429), one cancelled
    // with its batch.
    let new_issue = json!({"title": "t", "author": "a", "project": "AWPCA", "commands": [
        {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Новая"}}]});
    let (status, _) = api
        .client(Method::POST, "/batches", Some(new_issue.clone()))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, claim) = api
        .agent("/agent/claim", json!({"kind": "claim", "id": "c1", "agent": "agent-h", "sent_at": "2026-11-29T10:00:00Z",
            "agent_version": "1.4.0", "settings_version": 0, "max_commands": 10}))
        .await;
    let command = claim["commands"][0]["id"].clone();
    let (status, report) = api
        .agent("/agent/report", json!({"kind": "report", "id": "r1", "agent": "agent-h", "sent_at": "2026-11-29T10:00:00Z", "results": [
            {"command_id": command, "delivery": 1, "status": "done", "result": {"key": "AURORA-5", "created": true},
             "jira_calls": 3, "rate_limited": 1}]}))
        .await;
    assert_eq!(
        (status, report["accepted"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(1)),
        "{report}"
    );
    let (_, second) = api.client(Method::POST, "/batches", Some(new_issue)).await;
    let (status, _) = api
        .client(
            Method::POST,
            &format!("/batches/{}/cancel", second["id"]),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    // Wrong tokens: five on the client's API, two on the agent's, none logged one by one.
    for _ in 0..5 {
        let (status, _) = api
            .call(Method::GET, "/batches", Some("not-the-token"), None)
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    for token in [Some("not-the-token"), None] {
        let (status, _) = api
            .call(Method::POST, "/agent/heartbeat", token, Some(json!({})))
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }

    let after = metrics_text(&api).await;
    for (series, value) in [
        (
            "jira_hub_commands_finished_total{status=\"done\",type=\"ensure_issue\"}",
            1.0,
        ),
        (
            "jira_hub_commands_finished_total{status=\"cancelled\",type=\"ensure_issue\"}",
            1.0,
        ),
        (
            "jira_hub_commands_finished_total{status=\"failed\",type=\"ensure_issue\"}",
            0.0,
        ),
        ("jira_hub_jira_calls_total", 3.0),
        ("jira_hub_jira_rate_limited_total", 1.0),
        ("jira_hub_auth_failures_total{credential=\"client\"}", 5.0),
        ("jira_hub_auth_failures_total{credential=\"agent\"}", 2.0),
        ("jira_hub_auth_failures_total{credential=\"metrics\"}", 0.0),
    ] {
        assert_eq!(sample(&after, series), Some(value), "{series} in {after}");
    }
    // The database's bytes; no backup yet is 0 (an alert on its age fires).
    assert!(
        sample(&after, "jira_hub_database_size_bytes").is_some_and(|b| b > 4096.0),
        "{after}"
    );
    assert_eq!(
        sample(&after, "jira_hub_last_backup_timestamp_seconds"),
        Some(0.0),
        "{after}"
    );
    if std::path::Path::new("/proc/self/stat").exists() {
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
        ] {
            assert!(sample(&after, name).is_some(), "{name} in {after}");
        }
        let started = sample(&after, "process_start_time_seconds").unwrap();
        let now = time::OffsetDateTime::now_utc().unix_timestamp() as f64;
        assert!(
            started <= now + 1.0 && started > now - 86_400.0,
            "{started}"
        );
    } else {
        println!("skipped the process_* series: no /proc on this machine");
    }
    // Both formats still parse.
    openmetrics_parser::prometheus::parse_prometheus(&after).expect("Prometheus text parses");
    let (_, _, openmetrics) = api
        .get_accepting(
            "/metrics",
            Some("application/openmetrics-text; version=1.0.0"),
        )
        .await;
    openmetrics_parser::openmetrics::parse_openmetrics(&openmetrics).expect("OpenMetrics parses");
}

/// The series names an expression of the rules file uses (`jira_hub_*` and `process_*`; `up`
/// is Prometheus' own).
fn series_named(rules: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    for line in rules.lines() {
        let code = line.split('#').next().unwrap_or_default();
        let mut word = String::new();
        for c in code.chars().chain(std::iter::once(' ')) {
            if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                word.push(c);
                continue;
            }
            if (word.starts_with("jira_hub_") || word.starts_with("process_"))
                && !matches!(c, '=' | '~')
            {
                names.insert(std::mem::take(&mut word));
            }
            word.clear();
        }
    }
    names
}

/// A hub as it runs: the daemon, an agent that did a full refresh and then says Jira refuses
/// its credentials, a failed command, a wrong token; the example rules name only series its
/// `/metrics` has, and the CLI's `--json` answers are the HTTP API's.
#[test]
fn a_live_hub_has_every_series_the_rules_name_and_the_cli_answers_as_the_api() {
    let dir = TestDir::new();
    let (hub, _relay, agent_token) = relay_hub(&dir);
    let client_token = hub.tokens().unwrap().unwrap().client;
    drop(hub);
    let log = dir.path().join("serve.log");
    let daemon = Daemon::start_logging_to(&dir.db(), &[], &log);
    let address = daemon.address.clone();
    let client = |method: &str, path: &str, body: Option<Value>| {
        http(&address, method, path, Some(&client_token), body.as_ref())
    };
    let agent =
        |path: &str, body: Value| http(&address, "POST", path, Some(&agent_token), Some(&body));
    let envelope = |kind: &str, id: &str| json!({"kind": kind, "id": id, "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z"});

    // A full refresh, done.
    let (status, refresh) = client("POST", "/refresh", None);
    assert_eq!(status, 201, "{refresh}");
    let mut claim = envelope("claim", "c1");
    claim["agent_version"] = "1.4.0".into();
    claim["settings_version"] = 0.into();
    claim["max_commands"] = 10.into();
    let (_, claimed) = agent("/agent/claim", claim);
    let command = claimed["commands"][0]["id"].clone();
    assert!(command.is_i64(), "{claimed}");
    let mut report = envelope("report", "r1");
    report["results"] = json!([
        {"command_id": command, "delivery": 1, "status": "progress", "page": {"start_at": 0, "total": 0, "issues": []}},
        {"command_id": command, "delivery": 1, "status": "done", "result": {"total": 0, "boards": []}, "jira_calls": 2}]);
    let (status, answer) = agent("/agent/report", report);
    assert_eq!(status, 200, "{answer}");
    // A command that failed.
    let (status, batch) = client(
        "POST",
        "/batches",
        Some(json!({"title": "t", "author": "a", "commands": [
            {"type": "comment", "params": {"key": "AURORA-1", "body": "x"}}]})),
    );
    assert_eq!(status, 201, "{batch}");
    let mut claim = envelope("claim", "c2");
    claim["agent_version"] = "1.4.0".into();
    claim["settings_version"] = 0.into();
    claim["max_commands"] = 10.into();
    let (_, claimed) = agent("/agent/claim", claim);
    let command = claimed["commands"][0]["id"].clone();
    let mut report = envelope("report", "r2");
    report["results"] = json!([
        {"command_id": command, "delivery": 1, "status": "failed", "error": "Jira: задачи AURORA-1 нет", "jira_calls": 1}]);
    assert_eq!(agent("/agent/report", report).0, 200);
    // The agent says Jira refuses its credentials.
    let mut heartbeat = envelope("heartbeat", "h1");
    heartbeat["agent_version"] = "1.4.0".into();
    heartbeat["jira_ok"] = false.into();
    heartbeat["last_error"] = "Jira не принимает учётные данные агента (HTTP 401)".into();
    heartbeat["heartbeat_seconds"] = 30.into();
    assert_eq!(agent("/agent/heartbeat", heartbeat).0, 200);
    // A burst of wrong tokens: counted, summed up in the log, not a line each.
    for _ in 0..30 {
        assert_eq!(
            http(&address, "GET", "/batches", Some("wrong"), None).0,
            401
        );
    }

    let (status, metrics) = http(&address, "GET", "/metrics", None, None);
    assert_eq!(status, 200);
    let metrics = metrics.as_str().unwrap().to_string();
    let rules_path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/prometheus/jira-hub.rules.yml");
    let rules = std::fs::read_to_string(&rules_path).unwrap();
    let named = series_named(&rules);
    assert!(named.len() >= 10, "{named:?}");
    let missing: Vec<&String> = named
        .iter()
        .filter(|name| {
            !metrics.lines().any(|line| {
                line.strip_prefix(name.as_str())
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "the rules name {missing:?}, not in {metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "jira_hub_auth_failures_total{credential=\"client\"}"
        ),
        Some(30.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "jira_hub_commands_finished_total{status=\"failed\",type=\"comment\"}"
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(sample(&metrics, "jira_hub_jira_calls_total"), Some(3.0));
    // The daemon made its daily backup on start: a timestamp of now, not an age.
    let backup = sample(&metrics, "jira_hub_last_backup_timestamp_seconds").unwrap();
    let now = time::OffsetDateTime::now_utc().unix_timestamp() as f64;
    assert!(
        (now - 600.0..=now + 1.0).contains(&backup),
        "{backup} {now}"
    );
    let summaries = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|line| line.contains("missing or wrong bearer token"))
        .count();
    assert_eq!(summaries, 1, "{}", std::fs::read_to_string(&log).unwrap());

    match std::process::Command::new("promtool")
        .args(["check", "rules"])
        .arg(&rules_path)
        .output()
    {
        Ok(out) => {
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            println!("promtool check rules: {said}");
            assert!(out.status.success(), "{said}");
        }
        Err(_) => println!("skipped `promtool check rules`: promtool is not installed"),
    }

    // The CLI's --json: the HTTP API's answers, read from the same database.
    let db = dir.db();
    let cli_json = |args: &[&str]| -> Value {
        let out = run_ok(&db, args);
        assert_eq!(out.stdout.lines().count(), 1, "{args:?}: {}", out.stdout);
        serde_json::from_str(&out.stdout).unwrap()
    };
    assert_eq!(
        cli_json(&["batches", "list", "--json"]),
        client("GET", "/batches", None).1
    );
    let id = batch["id"].as_i64().unwrap().to_string();
    assert_eq!(
        cli_json(&["batches", "show", &id, "--json"]),
        client("GET", &format!("/batches/{id}"), None).1
    );
    let failed = cli_json(&["commands", "failed", "--json"]);
    assert_eq!(failed, client("GET", "/commands/failed", None).1);
    assert_eq!(failed[0]["status"], "failed", "{failed}");
    assert_eq!(
        cli_json(&["settings", "get", "--json"]),
        client("GET", "/settings", None).1
    );
    // The agent's state reaches the database within the presence's flush.
    let started = std::time::Instant::now();
    let agents = loop {
        let agents = cli_json(&["agents", "list", "--json"]);
        if agents[0]["jira_ok"] == false || started.elapsed() > std::time::Duration::from_secs(20) {
            break agents;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let api_agents = client("GET", "/agents", None).1;
    assert_eq!(
        (agents[0]["agent"].clone(), agents[0]["jira_held"].clone()),
        (
            api_agents[0]["agent"].clone(),
            api_agents[0]["jira_held"].clone()
        ),
        "{agents} {api_agents}"
    );
    let status = cli_json(&["status", "--json"]);
    assert_eq!(
        status["counts"]["agents"][0]["agent"], "agent-1",
        "{status}"
    );
    let degraded: Vec<&str> = status["degraded"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(degraded.len(), 1, "{status}");
    assert!(
        degraded[0].starts_with("agent agent-1 says Jira is failing"),
        "{status}"
    );

    // --check: degraded while Jira is held for the agent, healthy once it answers again.
    let checked = run(&db, &["status", "--check"]);
    assert_eq!(checked.code, 1, "{checked:?}");
    assert!(
        checked
            .stderr
            .contains("degraded: agent agent-1 says Jira is failing"),
        "{checked:?}"
    );
    let mut heartbeat = envelope("heartbeat", "h2");
    heartbeat["agent_version"] = "1.4.0".into();
    heartbeat["jira_ok"] = true.into();
    heartbeat["heartbeat_seconds"] = 30.into();
    assert_eq!(agent("/agent/heartbeat", heartbeat).0, 200);
    let started = std::time::Instant::now();
    let checked = loop {
        let checked = run(&db, &["status", "--check"]);
        if checked.code == 0 || started.elapsed() > std::time::Duration::from_secs(20) {
            break checked;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(checked.code, 0, "{checked:?}");
    assert!(!checked.stderr.contains("degraded"), "{checked:?}");
}

/// `status --check` on a database nobody serves: no agent, no backup.
#[test]
fn status_check_says_why_a_new_hub_is_degraded() {
    let dir = TestDir::new();
    let clock = clock();
    drop(ready_hub(&dir, &clock));
    let out = run(&dir.db(), &["status", "--check"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("degraded: no agent has been seen")
            && out
                .stderr
                .contains("degraded: there is no backup in backups/"),
        "{out:?}"
    );
    // Without --check the summary is shown and the exit is 0.
    let out = run_ok(&dir.db(), &["status"]);
    assert!(out.stdout.contains("backup:       none"), "{out:?}");
    run_ok(&dir.db(), &["backup"]);
    let out = run(&dir.db(), &["status", "--check"]);
    assert!(!out.stderr.contains("backup"), "{out:?}");
}

/// Under systemd stdout is the journal (`JOURNAL_STREAM` names it): no banner there, the
/// `listening` line of the log says where the hub listens.
#[test]
fn no_banner_on_a_stdout_that_is_the_journal() {
    use std::io::{BufRead, Read};
    use std::os::unix::fs::MetadataExt;
    let dir = TestDir::new();
    let clock = clock();
    drop(ready_hub(&dir, &clock));
    let stdout_path = dir.path().join("stdout");
    let stdout = std::fs::File::create(&stdout_path).unwrap();
    let meta = stdout.metadata().unwrap();
    let mut child = hub_command(&dir.db(), &["serve", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))
        .stdout(stdout)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap_or(0) > 0 {
        seen.push_str(&line);
        if line.contains("listening") {
            break;
        }
        line.clear();
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = stderr.read_to_string(&mut seen);
    assert!(seen.contains("listening"), "{seen}");
    // The journal's form: the priority first.
    assert!(seen.lines().any(|l| l.starts_with("<6>")), "{seen}");
    assert_eq!(std::fs::read_to_string(&stdout_path).unwrap(), "", "{seen}");
}

/// The `reason` label of a held agent is the agent's own class (its heartbeat's
/// `jira_held_class`), whatever its words; an older agent's words are sorted, its refused login
/// («Учётные данные отвергнуты…») included; a class the hub does not know is `other`.
#[tokio::test]
async fn the_held_reason_label_is_the_agents_own_class() {
    let api = api();
    let heartbeat = |id: &str, ok: bool, error: Option<&str>, class: Option<&str>| {
        let mut body = json!({"kind": "heartbeat", "id": id, "agent": "agent-h", "sent_at": "2026-11-29T10:00:00Z",
               "agent_version": "1", "jira_ok": ok, "last_error": error});
        if let Some(class) = class {
            body["jira_held_class"] = class.into();
        }
        body
    };
    let label = |reason: &str| {
        format!("jira_hub_agent_jira_held_seconds{{agent=\"agent-h\",reason=\"{reason}\"}}")
    };
    let refused = "Учётные данные отвергнуты, агент ждёт новых: Jira не принимает учётные данные агента (HTTP 401, X-Seraph-LoginReason: AUTHENTICATED_FAILED)";
    // An older agent: no class, its words sorted.
    let (status, _) = api
        .agent(
            "/agent/heartbeat",
            heartbeat("h1", false, Some(refused), None),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let text = metrics_text(&api).await;
    assert!(text.contains(&label("credentials")), "{text}");
    // This agent: its class, whatever the words say.
    api.agent(
        "/agent/heartbeat",
        heartbeat("h2", false, Some("Jira: что-то новое"), Some("unreachable")),
    )
    .await;
    let text = metrics_text(&api).await;
    assert!(text.contains(&label("unreachable")), "{text}");
    assert!(!text.contains("что-то новое"), "{text}");
    // A class from a newer agent the hub does not know: a bounded word all the same.
    api.agent(
        "/agent/heartbeat",
        heartbeat("h3", false, Some(refused), Some("quota_exceeded")),
    )
    .await;
    let text = metrics_text(&api).await;
    assert!(text.contains(&label("other")), "{text}");
    // Jira answers again: no held series, and the class is forgotten.
    api.agent("/agent/heartbeat", heartbeat("h4", true, None, None))
        .await;
    let text = metrics_text(&api).await;
    assert!(!text.contains("jira_hub_agent_jira_held_seconds"), "{text}");
    api.agent(
        "/agent/heartbeat",
        heartbeat("h5", false, Some("serverInfo: HTTP 500"), None),
    )
    .await;
    let text = metrics_text(&api).await;
    assert!(text.contains(&label("probe")), "{text}");
}
