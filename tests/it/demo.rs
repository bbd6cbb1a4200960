//! `jira-hub demo` for real: the binary with its simulated Jira, its hub and its agent, in its
//! own process group, stopped with SIGINT to the group as a terminal's Ctrl-C sends it. Every
//! wait is for an outcome and bounded; nothing asserts on how fast things went.

use crate::support::*;
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// Generous: debug builds on two cores, tests in parallel.
const WAIT: Duration = Duration::from_secs(240);
/// A small project keeps the refresh short.
const ISSUES: usize = 60;

/// A running `jira-hub demo`, in a process group of its own; killed with its group when dropped.
struct Demo {
    child: Option<Child>,
    output: PathBuf,
    dir: PathBuf,
    address: String,
}

impl Demo {
    fn start(dir: &Path, run: u32) -> Demo {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Demo::start_on(dir, "demo", &format!("127.0.0.1:{port}"), run)
    }

    /// A demo in `dir/folder` whose hub listens on `address`.
    fn start_on(dir: &Path, folder: &str, address: &str, run: u32) -> Demo {
        let address = address.to_string();
        let output = dir.join(format!("demo-output-{run}.txt"));
        let file = std::fs::File::create(&output).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_jira-hub"))
            .args(["demo", "--dir"])
            .arg(dir.join(folder))
            .args(["--listen", &address, "--issues", &ISSUES.to_string()])
            .env_remove("JIRA_HUB_DB")
            .env("RUST_LOG", "info")
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .process_group(0)
            .spawn()
            .expect("start the demo");
        Demo {
            child: Some(child),
            output,
            dir: dir.join(folder),
            address,
        }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.output).unwrap_or_default()
    }

    /// The demo's output and the tails of its children's logs, for a failure message.
    fn explain(&self) -> String {
        let tail = |name: &str| {
            let text =
                std::fs::read_to_string(self.dir.join("logs").join(name)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(30)..].join("\n")
        };
        format!(
            "demo output:\n{}\nhub.log tail:\n{}\nagent.log tail:\n{}",
            self.output(),
            tail("hub.log"),
            tail("agent.log")
        )
    }

    /// Waits until the output has a line starting with `prefix`; returns that line.
    fn wait_for(&mut self, prefix: &str) -> String {
        let started = Instant::now();
        loop {
            if let Some(line) = self.output().lines().find(|l| l.starts_with(prefix)) {
                return line.to_string();
            }
            let exited = self.child.as_mut().unwrap().try_wait().unwrap();
            assert!(
                exited.is_none() && started.elapsed() < WAIT,
                "no line `{prefix}` (demo exited: {exited:?})\n{}",
                self.explain()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn client_token(&mut self) -> String {
        let line = self.wait_for("demo: sign in with the client token: ");
        line.rsplit(' ').next().unwrap().to_string()
    }

    fn get(&mut self, path: &str) -> Value {
        let token = self.client_token();
        let (status, value) = http(&self.address, "GET", path, Some(&token), None);
        assert_eq!(status, 200, "GET {path}: {value}");
        value
    }

    /// SIGINT to the whole group, as a terminal sends Ctrl-C; waits for the demo to exit.
    fn interrupt(&mut self) -> ExitStatus {
        self.signal_group("-INT")
    }

    /// `signal` (`-INT`, `-HUP`) to the whole group, as a terminal sends it; waits for the demo
    /// to exit.
    fn signal_group(&mut self, signal: &str) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        let status = Command::new("kill")
            .args([signal, "--", &format!("-{}", child.id())])
            .status()
            .unwrap();
        assert!(status.success());
        let started = Instant::now();
        loop {
            if let Some(exit) = child.try_wait().unwrap() {
                return exit;
            }
            if started.elapsed() > WAIT {
                let _ = child.kill();
                panic!("the demo did not stop after {signal}\n{}", self.explain());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Demo {
    /// The demo's children (the hub and the agent), once both run.
    fn children(&mut self) -> Vec<u32> {
        self.wait_for("demo: sample batch ");
        let pid = self.child.as_ref().unwrap().id();
        children_of(pid)
    }

    /// Waits for the demo to exit by itself.
    fn exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        let started = Instant::now();
        loop {
            if let Some(exit) = child.try_wait().unwrap() {
                return exit;
            }
            if started.elapsed() > WAIT {
                let _ = child.kill();
                panic!("the demo went on\n{}", self.explain());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The processes whose parent is `pid` (`/proc/PID/task/*/children`).
fn children_of(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let text =
            std::fs::read_to_string(task.unwrap().path().join("children")).unwrap_or_default();
        found.extend(text.split_whitespace().map(|p| p.parse::<u32>().unwrap()));
    }
    found
}

/// Whether `pid` still runs (a zombie nobody reaped yet has ended).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // `pid (comm) S …`: the state follows the last `)`.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

/// `jira-hub ARGS` in `cwd` with `JIRA_HUB_DB` as given (unset when `None`).
fn jira_hub(cwd: &Path, db_env: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_jira-hub"));
    command
        .args(args)
        .current_dir(cwd)
        .env_remove("JIRA_HUB_DB");
    if let Some(db) = db_env {
        command.env("JIRA_HUB_DB", db);
    }
    command.output().expect("run jira-hub")
}

impl Drop for Demo {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
        }
    }
}

/// The demo's own acceptance: the sample batch completes in the simulated Jira, the full
/// refresh fills the mirror, Ctrl-C stops all three with 0; a second run on the same folder
/// continues (the first run's issues are in Jira, no second sample batch).
#[test]
fn demo_runs_the_loop_stops_on_sigint_and_continues() {
    let dir = TestDir::new();
    let mut first = Demo::start(dir.path(), 1);
    let queued = first.wait_for("demo: sample batch ");
    let id: i64 = queued["demo: sample batch ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    first.wait_for(&format!("demo: sample batch {id} completed"));
    first.wait_for("demo: mirror filled:");
    // What the demo said, seen through the hub's API on its own.
    let batch = first.get(&format!("/batches/{id}"));
    assert_eq!(batch["status"], "completed", "{batch:#}");
    for command in batch["commands"].as_array().unwrap() {
        assert!(
            command["status"] == "done" || command["status"] == "confirmed_by_state",
            "{command:#}"
        );
    }
    let runs = first.get("/sync-runs");
    let full = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|run| run["kind"] == "full" && run["status"] == "done")
        .unwrap_or_else(|| panic!("no finished full refresh: {runs:#}"))
        .clone();
    assert!(
        full["issues_seen"].as_u64().unwrap() >= ISSUES as u64 + 3,
        "{full:#}"
    );
    // The refresh queued after the batch brought the batch's issues into the mirror.
    let mirrored = first.get("/projects/AWPCA/issues");
    let summaries: Vec<&str> = mirrored
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|issue| issue["summary"].as_str())
        .collect();
    for made in [
        "Онлайн-запись к специалисту",
        "Форма записи на приём",
        "Не приходит СМС с подтверждением записи",
    ] {
        assert!(
            summaries.contains(&made),
            "{made} not in the mirror: {summaries:?}"
        );
    }

    let exit = first.interrupt();
    let output = first.output();
    assert_eq!(exit.code(), Some(0), "{}", first.explain());
    assert!(
        output.contains("demo: hub exited 0, agent exited 0, jira saved to"),
        "{output}"
    );
    let saved = std::fs::read_to_string(dir.path().join("demo/jira.json")).unwrap();
    assert!(
        saved.contains("Форма записи на приём"),
        "the batch's task is in Jira's state"
    );

    let mut second = Demo::start(dir.path(), 2);
    let jira = second.wait_for("demo: simulated Jira at ");
    assert!(
        jira.contains(&format!("{} issues, continued from", ISSUES + 3)),
        "the first run's issues and the batch's three: {jira}"
    );
    second.wait_for("demo: the sample batch was queued on an earlier run: not again");
    let batches = second.get("/batches");
    let samples = batches
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["author"] == "demo")
        .count();
    assert_eq!(samples, 1, "one sample batch: {batches:#}");
    let exit = second.interrupt();
    let output = second.output();
    assert_eq!(exit.code(), Some(0), "{}", second.explain());
    assert!(
        output.contains("demo: hub exited 0, agent exited 0, jira saved to"),
        "{output}"
    );
}

/// A child that dies early (the agent, killed) stops the demo with a non-zero exit naming it,
/// and the other child is not left behind.
#[test]
fn demo_names_the_child_that_died_and_exits_1() {
    let dir = TestDir::new();
    let mut demo = Demo::start(dir.path(), 1);
    let children = demo.children();
    assert_eq!(children.len(), 2, "{children:?}\n{}", demo.explain());
    // The agent was started second: the higher of two fresh pids, or found by its command line.
    let agent = *children
        .iter()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| String::from_utf8_lossy(&line).contains("agent"))
        })
        .unwrap();
    let killed = Command::new("kill")
        .args(["-KILL", &agent.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let exit = demo.exit();
    let text = demo.output();
    assert_eq!(exit.code(), Some(1), "{text}");
    assert!(text.contains("agent killed by signal 9"), "{text}");
    // One language a line.
    assert!(
        text.contains("агент остановился раньше времени (убит сигналом 9)"),
        "{text}"
    );
    assert!(text.contains("demo: hub exited 0"), "{text}");
    assert!(children.iter().all(|pid| !running(*pid)), "{children:?}");
}

/// A port something else listens on is refused before anything starts, in one line naming the
/// port and a free `--listen`; a second demo beside a running one names the running one's
/// folder too, and takes nothing of its hub for its own.
#[test]
fn a_second_demo_on_a_taken_port_exits_non_zero_naming_the_port() {
    let dir = TestDir::new();
    // A stranger on the port.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_jira-hub"))
        .args(["demo", "--issues", "5", "--listen", &address, "--dir"])
        .arg(dir.path().join("stranger"))
        .env_remove("JIRA_HUB_DB")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("порт {address} занят")) && stderr.contains("--listen 127.0.0.1:"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("demo: console"),
        "no console of another program's"
    );
    assert!(!dir.path().join("stranger").exists(), "nothing made");
    drop(taken);

    // A demo on the port, then a second one in another folder.
    let mut first = Demo::start(dir.path(), 1);
    first.wait_for("demo: sample batch ");
    let out = Command::new(env!("CARGO_BIN_EXE_jira-hub"))
        .args(["demo", "--issues", "5", "--listen", &first.address, "--dir"])
        .arg(dir.path().join("second"))
        .env_remove("JIRA_HUB_DB")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("порт {} занят", first.address))
            && stderr.contains(&first.dir.display().to_string())
            && stderr.contains("--listen"),
        "{stderr}"
    );
    assert!(!dir.path().join("second").exists(), "nothing made");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("sign in with"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The first one is untouched.
    let exit = first.interrupt();
    assert_eq!(exit.code(), Some(0), "{}", first.explain());
}

/// `kill -9` of the demo: its hub and agent stop by themselves (their parent-death signal), none
/// is left behind; the simulated Jira's state was written as it changed (not only at a clean
/// stop), so the next run continues with what the batch made.
#[test]
fn kill_9_of_the_demo_leaves_no_process_behind() {
    let dir = TestDir::new();
    let mut demo = Demo::start(dir.path(), 1);
    let children = demo.children();
    assert_eq!(children.len(), 2, "{children:?}\n{}", demo.explain());
    demo.wait_for("demo: full refresh queued");
    let state = demo.dir.join("jira.json");
    let started = Instant::now();
    while !std::fs::read_to_string(&state)
        .unwrap_or_default()
        .contains("Форма записи на приём")
    {
        assert!(
            started.elapsed() < WAIT,
            "the batch's issues never reached jira.json"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut child = demo.child.take().unwrap();
    // The demo alone, not its group: nothing else tells the children.
    child.kill().unwrap();
    let _ = child.wait();
    let started = Instant::now();
    while children.iter().any(|pid| running(*pid)) {
        assert!(
            started.elapsed() < WAIT,
            "left behind: {:?}\n{}",
            children
                .iter()
                .filter(|pid| running(**pid))
                .collect::<Vec<_>>(),
            demo.explain()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // They stopped cleanly, on the signal (the hub says so in its log).
    let hub_log = std::fs::read_to_string(demo.dir.join("logs/hub.log")).unwrap();
    assert!(hub_log.contains("stopped"), "{hub_log}");
    // The next run continues: the seeded issues and the batch's three.
    let mut second = Demo::start(dir.path(), 2);
    let jira = second.wait_for("demo: simulated Jira at ");
    assert!(
        jira.contains(&format!("{} issues, continued from", ISSUES + 3)),
        "{jira}"
    );
    second.wait_for("demo: the sample batch was queued on an earlier run: not again");
    let exit = second.interrupt();
    assert_eq!(exit.code(), Some(0), "{}", second.explain());
}

/// A terminal's hang-up (SIGHUP to the group) stops the demo as Ctrl-C does: both children
/// exit 0 and the simulated Jira's state is saved.
#[test]
fn a_hang_up_stops_the_demo_cleanly() {
    let dir = TestDir::new();
    let mut demo = Demo::start(dir.path(), 1);
    demo.wait_for("demo: sample batch ");
    let exit = demo.signal_group("-HUP");
    let output = demo.output();
    assert_eq!(exit.code(), Some(0), "{}", demo.explain());
    assert!(
        output.contains("demo: hub exited 0, agent exited 0, jira saved to"),
        "{output}"
    );
}

/// After the demo the command line works as the demo and the README print it: from the folder
/// that holds `./demo` with nothing set (it says it takes the demo's database), and anywhere
/// with the `export JIRA_HUB_DB=…` line the demo printed; and the demo's own configuration
/// passes `agent --check`, whose table comes last.
#[test]
fn after_the_demo_the_cli_and_the_preflight_work_as_printed() {
    let dir = TestDir::new();
    let mut demo = Demo::start(dir.path(), 1);
    demo.wait_for("demo: mirror filled:");
    let export = demo.wait_for("export JIRA_HUB_DB=");
    let db = export.trim_start_matches("export JIRA_HUB_DB=").to_string();
    assert_eq!(Path::new(&db), demo.dir.join("hub/hub.sqlite"));

    // As the README's quick start runs them, from the folder the demo was started in.
    for args in [
        &["status"][..],
        &["batches", "list"],
        &["tokens"],
        &["refresh", "--wait", "--timeout", "200"],
        &["batches", "show", "2"],
    ] {
        let out = jira_hub(dir.path(), None, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(
            stderr.lines().next().is_some_and(
                |line| line.contains("./demo/hub/hub.sqlite") && line.contains("JIRA_HUB_DB")
            ),
            "{args:?}: {stderr}"
        );
    }
    // The sign-in page says where the token is, as the command line finds it.
    let (status, page) = http(&demo.address, "GET", "/", None, None);
    let page = page.as_str().unwrap_or_default().to_string();
    assert_eq!(status, 401, "{page}");
    assert!(
        page.contains("<code>jira-hub tokens</code>") && page.contains("JIRA_HUB_DB"),
        "{page}"
    );
    let tokens = jira_hub(dir.path(), None, &["tokens"]);
    let client = demo.client_token();
    assert!(String::from_utf8_lossy(&tokens.stdout).contains(&client));
    // Anywhere, with the printed line; and without it nothing is guessed.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let out = jira_hub(&elsewhere, Some(&db), &["batches", "list"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Демо: онлайн-запись"),
        "{out:?}"
    );
    let out = jira_hub(&elsewhere, None, &["status"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("./data/hub.sqlite"),
        "{out:?}"
    );

    // The demo's config passes the preflight; stdout and stderr in one stream as at a
    // terminal, the table is last.
    let both = dir.path().join("check.txt");
    let file = std::fs::File::create(&both).unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_jira-hub"))
        .args(["agent", "--check", "--config"])
        .arg(demo.dir.join("agent.json"))
        .current_dir(dir.path())
        .env_remove("JIRA_HUB_DB")
        .env("RUST_LOG", "info")
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .status()
        .unwrap();
    let text = std::fs::read_to_string(&both).unwrap();
    assert_eq!(status.code(), Some(0), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let first = lines
        .iter()
        .position(|l| l.starts_with("ok ") || l.starts_with("ОШИБКА"))
        .unwrap_or_else(|| panic!("no table: {text}"));
    assert!(
        lines[first..].iter().all(|l| l.starts_with("ok ")),
        "the table is last and all ok:\n{text}"
    );
    for check in ["переход «В работе»", "поле sprint", "поле epic_link"] {
        assert!(
            lines[first..].iter().any(|l| l.contains(check)),
            "{check}: {text}"
        );
    }
    let exit = demo.interrupt();
    assert_eq!(exit.code(), Some(0), "{}", demo.explain());
}
