//! `jira-hub agent --check`: the real hub daemon, the real agent binary, the
//! simulated Jira (`src/sim/jira.rs`). A matching config passes every check; one wrong value of
//! each kind fails the run (exit 1) and is named; Jira is only read.

use crate::support::*;
use jira_hub::sim::jira::{FakeJira, Mode, PROJECT};
use serde_json::{Value, json};

/// The settings that match the simulated Jira (its link types, its statuses by id).
fn matching() -> Value {
    json!({
        "link_types": {"blocks": "Blocker", "relates": "Related", "duplicates": "Duplicate"},
        "transitions_map": {"В работе": {"status_id": "3"}, "Готово": {"status_id": "10001"},
                            "Снято": {"status_id": "10002"}},
    })
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    /// Every request the simulated Jira saw.
    methods: Vec<(String, String)>,
    /// When each of them arrived.
    at: Vec<std::time::SystemTime>,
    /// `GET /agents` after the run.
    agents: Value,
}

/// A hub (example config, then `settings`, then the legacy `board_id` when given), its daemon,
/// a simulated Jira with one task and one bug (after `prepare`), and `jira-hub agent --check`.
fn check(mode: Mode, settings: Value, board: Option<i64>, prepare: impl Fn(&FakeJira)) -> Run {
    let dir = TestDir::new();
    let (mut hub, _relay, agent_token) = relay_hub(&dir);
    set_settings(&mut hub, matching());
    set_settings(&mut hub, settings);
    let client_token = hub.tokens().unwrap().unwrap().client;
    drop(hub);
    if let Some(board) = board {
        // The legacy board of a v3 database (never written by the hub itself).
        let conn = rusqlite::Connection::open(dir.db()).unwrap();
        conn.execute(
            "INSERT OR REPLACE INTO setting (key, value) VALUES ('board_id', ?1)",
            [board.to_string()],
        )
        .unwrap();
    }
    let daemon = Daemon::start(&dir.db(), &[]);
    let fake = FakeJira::start(mode);
    fake.seed_issue(
        PROJECT,
        json!({"summary": "задача", "issuetype": {"id": "10002", "name": "Задача"}}),
    );
    fake.seed_issue(
        PROJECT,
        json!({"summary": "ошибка", "issuetype": {"id": "10004", "name": "Ошибка"}}),
    );
    prepare(&fake);
    let config = json!({
        "jira_url": fake.url(), "jira_user": "agent", "jira_password": "secret",
        "agent_token": agent_token, "name": "agent-1",
        "hub_url": format!("http://{}", daemon.address),
        "answer_timeout_seconds": 5, "request_timeout_seconds": 5,
    });
    let out = run_check(&dir, &config);
    let seen = fake.requests();
    let at = seen.iter().map(|seen| seen.at).collect();
    let methods = seen
        .into_iter()
        .map(|seen| (seen.method, seen.path))
        .collect();
    let (status, agents) = http(&daemon.address, "GET", "/agents", Some(&client_token), None);
    assert_eq!(status, 200, "{agents}");
    drop(daemon);
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        methods,
        at,
        agents,
    }
}

/// The last check the hub keeps for `agent-1`.
fn last_check(run: &Run) -> &Value {
    let agent = run
        .agents
        .as_array()
        .and_then(|a| a.iter().find(|a| a["agent"] == "agent-1"))
        .unwrap_or_else(|| panic!("agent-1 in {}", run.agents));
    &agent["last_check"]
}

fn failing(run: &Run) -> Vec<&str> {
    run.stdout
        .lines()
        .filter(|l| l.starts_with("ОШИБКА"))
        .collect()
}

#[test]
fn a_matching_config_passes_every_check_and_only_reads_jira() {
    let run = check(Mode::DataCenter, json!({}), Some(4216), |_| {});
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(failing(&run).is_empty(), "{}", run.stdout);
    for name in [
        "настройки хаба",
        "проект",
        "права",
        "тип задачи task",
        "тип задачи epic",
        "тип задачи bug",
        "поле epic_link",
        "поле sprint",
        "поле plan_start",
        "переход «В работе»",
        "тип связи blocks",
        "приоритет highest",
        "доска",
        "часы",
        "ограничения частоты",
    ] {
        assert!(
            run.stdout
                .lines()
                .any(|l| l.starts_with("ok") && l.contains(name)),
            "no ok line for {name}:\n{}",
            run.stdout
        );
    }
    assert!(
        run.stdout.contains("4216: «AURORA board», тип scrum"),
        "{}",
        run.stdout
    );
    // The create screens of the types and the edit screens of the task and the bug were read.
    for path in [
        "/rest/api/2/issue/createmeta/AURORA/issuetypes/10004",
        "/rest/api/2/issue/AURORA-1/editmeta",
        "/rest/api/2/issue/AURORA-2/editmeta",
    ] {
        assert!(
            run.methods.iter().any(|(_, p)| p == path),
            "{path}: {:?}",
            run.methods
        );
    }
    let writes: Vec<_> = run.methods.iter().filter(|(m, _)| m != "GET").collect();
    assert!(writes.is_empty(), "--check wrote to Jira: {writes:?}");
    // The hub keeps the outcome for the agent.
    let check = last_check(&run);
    assert_eq!(check["ok"], json!(true), "{}\n{}", run.agents, run.stderr);
    assert_eq!(
        check["lines"].as_array().map(Vec::len),
        Some(run.stdout.lines().count()),
        "{check}"
    );
    assert!(
        check["ran_at"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{check}"
    );
}

#[test]
fn on_cloud_the_epic_goes_through_parent() {
    let run = check(Mode::Cloud, json!({}), None, |_| {});
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let epic = run
        .stdout
        .lines()
        .find(|l| l.contains("поле epic_link"))
        .expect("the epic line");
    assert!(epic.starts_with("ok") && epic.contains("parent"), "{epic}");
    assert!(
        run.methods.iter().all(|(m, _)| m == "GET"),
        "{:?}",
        run.methods
    );
}

/// On Cloud the priorities are those the project's create screens offer
/// (`GET /priority` and `GET /priority/search` are both deprecated in Atlassian's description of
/// December 2025), and the create screens are read 200 fields a page at most.
#[test]
fn on_cloud_priorities_come_from_the_create_screens() {
    let run = check(
        Mode::Cloud,
        json!({"priority_map": {"high": "Высокий", "highest": "Критический"}}),
        None,
        |_| {},
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let line = |name: &str| {
        run.stdout
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no line {name}:\n{}", run.stdout))
    };
    assert!(line("приоритет high").starts_with("ok"), "{}", run.stdout);
    let highest = line("приоритет highest");
    assert!(
        highest.starts_with("ОШИБКА") && highest.contains("«Критический»"),
        "{highest}"
    );
    assert!(
        !run.methods
            .iter()
            .any(|(_, path)| path.contains("/priority")),
        "{:?}",
        run.methods
    );
}

#[test]
fn each_wrong_value_fails_the_check_and_is_named() {
    let types = |bug_id: &str| {
        json!({"issue_types": {"task": {"name": "Задача", "id": "10002"},
                               "epic": {"name": "Эпик", "id": "10000"},
                               "bug": {"name": "Ошибка", "id": bug_id}}})
    };
    // (what, settings, legacy board, withheld permission, the value a failing line names)
    type Case<'a> = (&'a str, Value, Option<i64>, Option<&'a str>, &'a str);
    let cases: Vec<Case> = vec![
        ("issue type id", types("99999"), None, None, "99999"),
        (
            "field id",
            json!({"field_ids": {"epic_link": "customfield_10101", "sprint": "customfield_99999",
                                 "plan_start": "customfield_12001", "plan_end": "customfield_12002"}}),
            None,
            None,
            "customfield_99999",
        ),
        (
            "transition target",
            json!({"transitions_map": {"Отложено": {"status_id": "10099"}}}),
            None,
            None,
            "10099",
        ),
        (
            "a transition id another workflow gives another meaning",
            json!({"transitions_map": {"В работе": "11"}}),
            None,
            None,
            "ведёт в «Снято»",
        ),
        (
            "link type",
            json!({"link_types": {"blocks": "Blocks"}}),
            None,
            None,
            "«Blocks»",
        ),
        (
            "priority",
            json!({"priority_map": {"highest": "Критический"}}),
            None,
            None,
            "«Критический»",
        ),
        ("board", json!({}), Some(9999), None, "9999"),
        (
            "project key",
            json!({"project_key": "NOPE"}),
            None,
            None,
            "NOPE",
        ),
        (
            "permission",
            json!({}),
            None,
            Some("LINK_ISSUES"),
            "LINK_ISSUES",
        ),
    ];
    for (what, settings, board, withheld, named) in cases {
        let run = check(Mode::DataCenter, settings, board, |fake| {
            if let Some(permission) = withheld {
                fake.withhold_permission(permission);
            }
        });
        assert_eq!(run.code, 1, "{what}: {}\n{}", run.stdout, run.stderr);
        let failing = failing(&run);
        assert!(
            failing.iter().any(|l| l.contains(named)),
            "{what}: no failing line names {named}:\n{}",
            run.stdout
        );
        assert!(
            run.methods.iter().all(|(m, _)| m == "GET"),
            "{what}: {:?}",
            run.methods
        );
        let check = last_check(&run);
        assert_eq!(check["ok"], json!(false), "{what}: {}", run.agents);
        assert!(
            check["lines"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l["ok"] == json!(false) && l["detail"].as_str().unwrap().contains(named)),
            "{what}: the hub's last check does not name {named}: {check}"
        );
    }
}

#[test]
fn a_clock_far_from_jiras_fails_the_check() {
    let run = check(Mode::DataCenter, json!({}), None, |fake| {
        fake.set_clock_skew_ms(10 * 60 * 1000);
    });
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let clock = failing(&run)
        .into_iter()
        .find(|l| l.contains("часы"))
        .unwrap_or_else(|| panic!("no failing clock line:\n{}", run.stdout));
    assert!(clock.contains("впереди часов агента на 6"), "{clock}");
}

/// Each field is checked for what the agent does with it. A Data Center whose
/// screens lack Sprint passes (the agent adds issues to sprints through the agile API and only
/// reads the field); a field it writes (the plan start) off the screens still fails, named.
#[test]
fn a_field_the_agent_only_reads_needs_no_screen() {
    use jira_hub::sim::jira::{PLAN_START_FIELD, SPRINT_FIELD};
    let run = check(Mode::DataCenter, json!({}), Some(4216), |fake| {
        fake.take_off_screens(SPRINT_FIELD)
    });
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with("ok ") && l.contains("поле sprint") && l.contains(SPRINT_FIELD)),
        "{}",
        run.stdout
    );
    let run = check(Mode::DataCenter, json!({}), Some(4216), |fake| {
        fake.take_off_screens(PLAN_START_FIELD)
    });
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        failing(&run)
            .iter()
            .any(|l| l.contains("поле plan_start") && l.contains(PLAN_START_FIELD)),
        "{}",
        run.stdout
    );
}

/// The preflight calls Jira at the hub's pacing (`pacing.min_interval_ms`), which
/// comes with the settings, not at the client's cautious 300 ms before it has any: 15 to 30
/// reads took 5 s on the demo (50 ms pacing), now about one.
#[test]
fn the_check_calls_jira_at_the_hubs_pacing() {
    let pacing = json!({"pacing": {"min_interval_ms": 20, "max_commands_per_claim": 50,
        "claim_timeout_seconds": 900, "max_deliveries": 3, "backoff_initial_seconds": 5,
        "backoff_max_seconds": 300}});
    let started = std::time::Instant::now();
    let run = check(Mode::DataCenter, pacing, Some(4216), |_| {});
    let took = started.elapsed();
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let times = &run.at;
    assert!(times.len() >= 10, "{} Jira calls", times.len());
    let span = times
        .last()
        .unwrap()
        .duration_since(times[0])
        .unwrap_or_default();
    let gaps: Vec<std::time::Duration> = times
        .windows(2)
        .map(|w| w[1].duration_since(w[0]).unwrap_or_default())
        .collect();
    // At 300 ms between calls the span would be at least this; at 20 ms it is far below.
    let at_300_ms = std::time::Duration::from_millis(300) * (times.len() as u32 - 1);
    eprintln!(
        "preflight: {} Jira calls in {:.2} s (the whole run with its hub {:.2} s; at 300 ms pacing at least {:.1} s)",
        times.len(),
        span.as_secs_f64(),
        took.as_secs_f64(),
        at_300_ms.as_secs_f64()
    );
    assert!(span < at_300_ms / 2, "span {span:?}, gaps {gaps:?}");
    // The hub's pacing is kept: no two calls closer than its 20 ms (less a clock's grain).
    assert!(
        gaps.iter()
            .all(|gap| *gap >= std::time::Duration::from_millis(15)),
        "{gaps:?}"
    );
}

/// With no hub answering, `--check` says within a second or two what it waits
/// for (stderr), then ends after a bounded wait with «ОШИБКА … хаб не ответил за 15 с через
/// папку обмена …», naming the request nobody took, and exit 1; its claim is taken back. Before,
/// it printed nothing and never ended.
#[test]
fn with_no_hub_the_check_says_what_it_waits_for_and_ends() {
    use std::io::BufRead;
    let dir = TestDir::new();
    let relay = dir.path().join("relay");
    for folder in ["inbox", "outbox", "archive", "rejected"] {
        std::fs::create_dir_all(relay.join(folder)).unwrap();
    }
    let config = json!({
        "jira_url": "http://127.0.0.1:9", "jira_user": "agent", "jira_password": "secret",
        "agent_token": "t", "name": "agent-1", "relay_dir": relay.display().to_string(),
    });
    let path = dir.path().join("agent.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    let started = std::time::Instant::now();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_jira-hub"))
        .args(["agent", "--check", "--config"])
        .arg(&path)
        .env_remove("JIRA_HUB_DB")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the agent");
    let stderr = child.stderr.take().unwrap();
    let (sender, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = sender.send((started.elapsed(), line));
        }
    });
    let mut said = None;
    let mut stderr_text = String::new();
    let status = loop {
        while let Ok((at, line)) = lines.try_recv() {
            if said.is_none() && line.contains("Жду ответа хаба через папку обмена")
            {
                said = Some(at);
            }
            stderr_text.push_str(&line);
            stderr_text.push('\n');
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > std::time::Duration::from_secs(90) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("--check with no hub still runs after 90 s; stderr:\n{stderr_text}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let took = started.elapsed();
    std::thread::sleep(std::time::Duration::from_millis(100));
    while let Ok((at, line)) = lines.try_recv() {
        if said.is_none() && line.contains("Жду ответа хаба через папку обмена")
        {
            said = Some(at);
        }
        stderr_text.push_str(&line);
        stderr_text.push('\n');
    }
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    eprintln!(
        "--check without a hub: said what it waits for after {:.2} s, ended after {:.1} s",
        said.map_or(f64::NAN, |at| at.as_secs_f64()),
        took.as_secs_f64()
    );
    assert_eq!(status.code(), Some(1), "{stdout}\n{stderr_text}");
    let said = said.unwrap_or_else(|| panic!("nothing said on stderr:\n{stderr_text}"));
    assert!(said < std::time::Duration::from_secs(10), "{said:?}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("ОШИБКА"))
        .unwrap_or_else(|| panic!("no ОШИБКА line:\n{stdout}"));
    assert!(
        line.contains(&format!(
            "хаб не ответил за 15 с через папку обмена {}",
            relay.display()
        )) && line.contains("никто не забрал"),
        "{line}"
    );
    assert_eq!(
        std::fs::read_dir(relay.join("inbox")).unwrap().count(),
        0,
        "the claim was not taken back"
    );
}

/// A hub that refuses the agent's token is said in Russian, the hub's words
/// quoted after ours: one language per line.
#[test]
fn a_refusing_hub_is_said_in_one_language() {
    let dir = TestDir::new();
    let (hub, _relay, _token) = relay_hub(&dir);
    drop(hub);
    let daemon = Daemon::start(&dir.db(), &[]);
    let config = json!({
        "jira_url": "http://127.0.0.1:9", "jira_user": "agent", "jira_password": "secret",
        "agent_token": "not-the-agents-token", "name": "agent-1",
        "hub_url": format!("http://{}", daemon.address),
        "answer_timeout_seconds": 5, "request_timeout_seconds": 5,
    });
    let out = run_check(&dir, &config);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{said}");
    let line = said
        .lines()
        .find(|line| line.contains("хаб"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        line.contains("хаб отказал в запросе claim: «HTTP 401"),
        "{said}"
    );
    assert!(!line.contains("the hub refused"), "{said}");
}

/// `jira-hub agent --check` with `config` written (0600) into `dir`.
fn run_check(dir: &TestDir, config: &Value) -> std::process::Output {
    let path = dir.path().join("agent.json");
    std::fs::write(&path, serde_json::to_vec_pretty(config).unwrap()).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_jira-hub"))
        .args(["agent", "--check", "--config"])
        .arg(&path)
        .current_dir(dir.path())
        .env_remove("JIRA_HUB_DB")
        .output()
        .expect("run the agent")
}

/// `agent --check` over the relay tells the share both ways: how late the agent saw the hub's
/// answer, and how late the hub sees the agent's files (the hub's figure, from its lock in the
/// share), each late one with the mount option that removes it; and what the agent can do in
/// `inbox/` and whether it reads the hub's file. The hub here sees requests 20 s late (each
/// appears in `inbox/` 20 s after its mtime, as through sshfs's default cache).
#[test]
fn the_check_measures_the_share_both_ways_and_names_the_option() {
    let dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&dir);
    let daemon = Daemon::start(&dir.db(), &["--relay-no-notify"]);
    let inbox = relay.join("inbox");
    drop_file(&inbox, "claim-first.json", &claim_file("first", &token, 1));
    wait_for_json(
        &relay.join("outbox/claim-first.json"),
        std::time::Duration::from_secs(20),
    );
    for n in 0..3 {
        let name = format!("claim-late-{n}.json");
        let claim = claim_file(&format!("late-{n}"), &token, 1);
        drop_file_late(&inbox, &name, &claim, std::time::Duration::from_secs(20));
        wait_for_json(
            &relay.join("outbox").join(&name),
            std::time::Duration::from_secs(20),
        );
    }
    // The hub's next heartbeat carries its figure into its lock.
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(relay.join(".jira-hub-relay.lock"))
        .unwrap_or_default()
        .contains("visibility_ms=")
    {
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let out = run_check(
        &dir,
        &json!({
            "jira_url": "http://127.0.0.1:9", "jira_user": "agent", "jira_password": "secret",
            "agent_token": token, "name": "agent-1", "relay_dir": relay.display().to_string(),
        }),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = |needle: &str| {
        stdout
            .lines()
            .find(|line| line.contains("папка обмена") && line.contains(needle))
            .unwrap_or_else(|| panic!("no share line with {needle}:\n{stdout}"))
            .to_string()
    };
    let both = line("файлы агента хабу");
    assert!(both.starts_with("ОШИБКА"), "{both}");
    assert!(both.contains("хабу — через 2"), "{both}");
    assert!(both.contains("ответы хаба видны агенту через 0."), "{both}");
    assert!(
        both.contains("параметр монтирования у хаба") && both.contains("до 1 с"),
        "{both}"
    );
    assert!(line("inbox/").starts_with("ok"), "{stdout}");
    assert!(line("файл хаба").starts_with("ok"), "{stdout}");
    drop(daemon);
}
