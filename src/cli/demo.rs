//! `jira-hub demo`: the whole loop on one machine, in one process group under one folder. This
//! process runs the simulated Jira (`crate::sim`) on a loopback port and starts two children of
//! the same executable: `serve` (the hub) and `agent` (which talks to the hub through the relay
//! folder). It queues a sample batch and a full refresh through the hub's HTTP API on the first
//! run and prints their progress; Ctrl-C (or a terminal's hang-up, or SIGTERM) stops all three,
//! and the simulated Jira's state is kept in `DIR/jira.json`, written after each change, so that
//! the next run continues where this one stopped.
//!
//! Its own hub: the port is tried before anything starts (a taken one is refused in one line
//! with the way out), and the hub is given a name for this run (`JIRA_HUB_INSTANCE`, repeated by
//! `/ready`), so a hub of someone else's that answers on the address is never taken for it.
//! Its children die with it: each sets a parent-death signal on itself ([`die_with_demo`]), so
//! even `kill -9` of the demo leaves no hub or agent behind.

use super::Outcome;
use crate::domain::words::count_en;
use crate::domain::words::shell_word;
use crate::instance::{INSTANCE_PREFIX, free_port_beside};
use crate::sim::jira::{self as sim, FakeJira, Mode, PROJECT};
use anyhow::{Context, bail};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The hub's projects in the demo: the labels of the simulated team project's issues.
pub(crate) const LABELS: &[&str] = &["AWPCA", "AWPCB"];

/// The simulated Jira's state is written once its writes have paused this long (a burst of
/// them, one command's create, link and comment, is one write of the file)…
const SAVE_QUIET: Duration = Duration::from_millis(300);
/// …or, while they go on without a pause, this long after the first one not yet written.
const SAVE_AT_MOST: Duration = Duration::from_secs(2);
/// The variable by which the demo gives its children its process id (see [`die_with_demo`]).
const PARENT_ENV: &str = "JIRA_HUB_DEMO_PARENT";
/// How often the hub's API is asked for progress.
const POLL_EVERY: Duration = Duration::from_secs(1);
/// How long a child may take to stop after SIGINT before it is killed (and reported failed).
const STOP_LIMIT: Duration = Duration::from_secs(60);
/// How long the hub may take to answer `/ready` after it was started.
const READY_LIMIT: Duration = Duration::from_secs(120);
/// With `--rate-limit`: requests per second the simulated Jira answers before it answers 429
/// with `Retry-After` (its `rate_limit`); the demo's agent is paced faster than this. Jira Data
/// Center's rate limiting (8.6 and later) answers 429 with `retry-after` and `X-RateLimit-*`
/// headers once a user's token bucket is empty ("Improving instance stability with rate
/// limiting", confluence.atlassian.com/adminjiraserver/improving-instance-stability-with-rate-limiting-983794911.html;
/// the headers: ".../adjusting-your-code-for-rate-limiting-987143384.html").
const RATE_LIMIT_PER_SECOND: u32 = 4;

/// The demo's options (`jira-hub demo --help`).
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// The demo's folder: the hub's data (hub/), the relay folder (relay/), the agent's config
    /// (agent.json), the simulated Jira's state (jira.json) and the logs (logs/). Made on the
    /// first run; a later run continues from it.
    #[arg(long, default_value = "./demo")]
    pub dir: PathBuf,
    /// The hub's HTTP address (the API, and the console at /).
    #[arg(long, default_value = "127.0.0.1:8740")]
    pub listen: String,
    /// The simulated Jira answers 429 Too Many Requests with Retry-After to requests beyond 4 a
    /// second, as Jira's rate limiting does; the agent waits and goes on.
    #[arg(long)]
    pub rate_limit: bool,
    /// Picks the simulated team project's summaries, statuses, links and comments (first run
    /// only).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How many issues the simulated Jira starts with (first run only).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=20_000))]
    pub issues: u64,
}

/// The legacy config the demo's hub is initialised from: `admin/jira-sync/config.example.json`
/// made to match the simulated Jira (its statuses, its link type names) and paced for a demo (no
/// pause between Jira calls beyond 50 ms, short backoff). `transitions_map` names each target
/// status by its id, the form the README prefers: the tasks' and the bugs' workflows give the
/// same transition id different meanings (`11` starts a task and drops a bug), so the agent
/// finds the transition to the status in each issue's own workflow.
pub(super) fn legacy_config() -> Value {
    let status = |name: &str| {
        let (id, _) = sim::STATUSES
            .iter()
            .find(|(_, status)| *status == name)
            .expect("a status of the simulated Jira");
        json!({"status_id": id})
    };
    json!({
        "project_key": PROJECT,
        "base_jql": format!("project = {PROJECT} AND labels = {}", LABELS[0]),
        "board_id": 4216,
        "issue_type_task": "Задача",
        "issue_type_task_id": "10002",
        "issue_type_epic": "Эпик",
        "issue_type_epic_id": "10000",
        "issue_type_bug": "Ошибка",
        "issue_type_bug_id": "10004",
        "field_ids": {
            "epic_link": sim::EPIC_LINK_FIELD,
            "sprint": sim::SPRINT_FIELD,
            "plan_start": "customfield_12001",
            "plan_end": "customfield_12002"
        },
        "priority_map": {"highest": "Блокирующий", "high": "Высокий", "medium": "Средний", "low": "Низкий"},
        "link_types": {"blocks": "Blocker", "relates": "Related", "duplicates": "Duplicate"},
        "transitions_map": {
            "В работе": status("В работе"), "Готово": status("Готово"), "Снято": status("Снято")
        },
        "pacing": {
            "min_interval_ms": 50,
            "max_commands_per_claim": 50,
            "claim_timeout_seconds": 60,
            "max_deliveries": 5,
            "backoff_initial_seconds": 1,
            "backoff_max_seconds": 10
        },
        "backup_keep": 3,
        "auto_refresh_minutes": 30
    })
}

/// The sample batch's title: the demo queues it when the hub has no batch of this title.
const SAMPLE_TITLE: &str = "Демо: онлайн-запись к специалисту";

/// The sample batch: an epic, a task and a bug in it, the task and the bug started (each in its
/// own workflow), the task linked and commented, each step on the result of the one it depends
/// on. `existing` is an issue of the seeded
/// project that the task blocks.
pub fn sample_batch(existing: &str) -> Value {
    json!({"title": SAMPLE_TITLE, "author": "demo", "project": LABELS[0],
        "commands": [
        {"type": "ensure_issue", "params": {"issue_type": "epic", "summary": "Онлайн-запись к специалисту",
            "description": "Клиент сам выбирает время приёма на сайте."}},
        {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Форма записи на приём",
            "description": "Выбор специалиста, даты и времени; подтверждение по СМС.",
            "epic_key": {"$result": "key"}}, "depends_on": 1},
        {"type": "ensure_issue", "params": {"issue_type": "bug", "summary": "Не приходит СМС с подтверждением записи",
            "epic_key": {"$result": "key"}}, "depends_on": 1},
        {"type": "transition", "params": {"key": {"$result": "key"}, "status": "В работе"}, "depends_on": 2},
        {"type": "transition", "params": {"key": {"$result": "key"}, "status": "В работе"}, "depends_on": 3},
        {"type": "link", "params": {"from": {"$result": "key"}, "to": existing, "type": "blocks"}, "depends_on": 2},
        {"type": "comment", "params": {"key": {"$result": "key"}, "body": "Макет формы согласован с регистратурой, начинаем."},
            "depends_on": 2},
    ]})
}

/// A child process of the demo, with its name and log.
struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
    exit: Option<ExitStatus>,
}

impl Process {
    /// Starts `jira-hub ARGS` with `envs`, its output into `log`; it dies with this process
    /// (the child sets its parent-death signal: [`die_with_demo`]).
    fn spawn(
        name: &'static str,
        args: &[&std::ffi::OsStr],
        envs: &[(&str, OsString)],
        log: &Path,
    ) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("не удалось узнать путь к программе")?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("не удалось открыть журнал {}", log.display()))?;
        let child = Command::new(exe)
            .args(args)
            .env_remove("JIRA_HUB_DB")
            .env(PARENT_ENV, std::process::id().to_string())
            .envs(envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("не удалось запустить {name}"))?;
        Ok(Process {
            name,
            child,
            log: log.to_path_buf(),
            exit: None,
        })
    }

    /// Whether it has exited (remembering how).
    fn exited(&mut self) -> bool {
        if self.exit.is_none()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.exit = Some(status);
        }
        self.exit.is_some()
    }

    fn interrupt(&mut self) {
        if self.exited() {
            return;
        }
        let pid = i32::try_from(self.child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
        }
    }

    /// Waits for it to exit, killing it after [`STOP_LIMIT`].
    fn wait(&mut self) {
        let started = Instant::now();
        while !self.exited() {
            if started.elapsed() > STOP_LIMIT {
                let _ = self.child.kill();
                self.exit = self.child.wait().ok();
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `hub exited 0`, `agent exited 1`, `agent killed by signal 9`.
    fn outcome(&self) -> String {
        match self.exit {
            Some(status) => match (
                status.code(),
                std::os::unix::process::ExitStatusExt::signal(&status),
            ) {
                (Some(code), _) => format!("{} exited {code}", self.name),
                (None, Some(signal)) => format!("{} killed by signal {signal}", self.name),
                (None, None) => format!("{} ended", self.name),
            },
            None => format!("{} did not stop", self.name),
        }
    }

    /// How it ended, in Russian, for a Russian line (one language a line): `код выхода 1`,
    /// `убит сигналом 9`.
    fn outcome_words(&self) -> String {
        match self.exit {
            Some(status) => match (
                status.code(),
                std::os::unix::process::ExitStatusExt::signal(&status),
            ) {
                (Some(code), _) => format!("код выхода {code}"),
                (None, Some(signal)) => format!("убит сигналом {signal}"),
                (None, None) => "завершился".to_string(),
            },
            None => "не остановился".to_string(),
        }
    }

    /// Exited 0, or, when the demo was told to stop, ended by the stop signal itself (one that
    /// came before the child was up to catch it: Ctrl-C right after the start).
    fn succeeded(&self, stopping: bool) -> bool {
        self.exit.is_some_and(|status| {
            status.success()
                || (stopping
                    && std::os::unix::process::ExitStatusExt::signal(&status).is_some_and(
                        |signal| {
                            [
                                signal_hook::consts::SIGINT,
                                signal_hook::consts::SIGTERM,
                                signal_hook::consts::SIGHUP,
                            ]
                            .contains(&signal)
                        },
                    ))
        })
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if !self.exited() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The hub's HTTP API, as a client sees it.
struct Api {
    address: String,
    auth: String,
}

impl Api {
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> anyhow::Result<(u16, Value)> {
        let answer = sim::call(
            &self.address,
            method,
            path,
            Some(&self.auth),
            body,
            Duration::from_secs(30),
        )
        .with_context(|| format!("хаб не ответил на {method} {path}"))?;
        Ok((answer.status, answer.json()))
    }

    fn get(&self, path: &str) -> anyhow::Result<Value> {
        match self.call("GET", path, None)? {
            (200, value) => Ok(value),
            (status, value) => bail!("GET {path}: хаб ответил {status}: {value}"),
        }
    }

    fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        match self.call("POST", path, Some(body))? {
            (200 | 201, value) => Ok(value),
            (status, value) => bail!("POST {path}: хаб ответил {status}: {value}"),
        }
    }
}

/// What the demo follows and has already said.
struct Progress {
    started: Instant,
    batch: Option<i64>,
    batch_said: String,
    batch_done: bool,
    /// The refresh command queued once the batch completed (so that the mirror shows what the
    /// batch made), whose run the demo follows.
    refresh: Option<i64>,
    refresh_said: String,
    refresh_done: bool,
}

impl Progress {
    fn poll(&mut self, api: &Api) -> anyhow::Result<()> {
        if let Some(id) = self.batch.filter(|_| !self.batch_done) {
            let view = api.get(&format!("/batches/{id}"))?;
            let counters = &view["counters"];
            let count = |name: &str| counters[name].as_u64().unwrap_or(0);
            let total = view["commands"].as_array().map_or(0, Vec::len);
            let finished = count("done") + count("confirmed_by_state");
            let failed = count("failed") + count("skipped");
            let line = format!(
                "demo: batch {id}: {finished} of {total} done, {failed} failed, status {}",
                view["status"].as_str().unwrap_or("?")
            );
            if line != self.batch_said {
                outln!("{line}");
                self.batch_said = line;
            }
            if view["status"] == "completed" || view["status"] == "cancelled" {
                self.batch_done = true;
                let limited: u64 = view["commands"].as_array().map_or(0, |all| {
                    all.iter().filter_map(|c| c["rate_limited"].as_u64()).sum()
                });
                outln!(
                    "demo: sample batch {id} {} after {:.1} s: {finished} done, {failed} failed, \
                     {} 429 (rate limited) waited out",
                    view["status"].as_str().unwrap_or("?"),
                    self.started.elapsed().as_secs_f64(),
                    count_en(limited, "answer")
                );
                let refresh = api.post("/refresh", &json!({}))?;
                self.refresh = refresh["commands"][0]["id"].as_i64();
                outln!(
                    "demo: full refresh queued (batch {}): the mirror takes in what the batch made",
                    refresh["id"]
                );
            }
        }
        if let Some(command) = self.refresh.filter(|_| !self.refresh_done) {
            let runs = api.get("/sync-runs")?;
            let run = runs
                .as_array()
                .and_then(|runs| runs.iter().find(|run| run["command_id"] == command));
            if let Some(run) = run {
                let seen = run["issues_seen"].as_u64().unwrap_or(0);
                let status = run["status"].as_str().unwrap_or("?");
                // A refresh is named by its batch, as everywhere.
                let line = format!(
                    "demo: full refresh (batch {}, run {}): {status}, {} seen",
                    run["batch_id"],
                    run["id"],
                    count_en(seen, "issue")
                );
                if line != self.refresh_said {
                    outln!("{line}");
                    self.refresh_said = line;
                }
                if status == "done" {
                    self.refresh_done = true;
                    outln!(
                        "demo: mirror filled: {} after {:.1} s",
                        count_en(seen, "issue"),
                        self.started.elapsed().as_secs_f64()
                    );
                } else if status == "failed" {
                    self.refresh_done = true;
                    outln!(
                        "demo: the full refresh failed: {} (the agent's log says more)",
                        run["error"]
                    );
                }
            }
        }
        Ok(())
    }
}

pub(crate) fn demo(mut args: DemoArgs) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    // Port 0 ("any free port"): the demo must know its hub's port to reach it, so it takes a free
    // one now and passes that on.
    args.listen = with_free_port(&args.listen);
    let dir = std::path::absolute(&args.dir)
        .with_context(|| format!("неверная папка {}", args.dir.display()))?;
    // The hub's port, tried before anything starts or is made: a taken one is refused in one
    // line (naming the demo that has it, when one has).
    check_port(&args.listen)?;
    let hub_dir = dir.join("hub");
    let relay_dir = dir.join("relay");
    let logs = dir.join("logs");
    for folder in [&dir, &hub_dir, &relay_dir, &logs] {
        std::fs::create_dir_all(folder)
            .with_context(|| format!("не удалось создать папку {}", folder.display()))?;
    }
    // The relay folder as `jira-hub relay init` prepares it: its four folders and the marker, so
    // the hub keeps them (it makes none in an unmarked folder, which may be an unmounted share).
    crate::relay::init_folder(&relay_dir).with_context(|| {
        format!(
            "не удалось подготовить папку обмена {}",
            relay_dir.display()
        )
    })?;
    // One demo per folder: a second one would run a second Jira over the same state file.
    let lock_path = dir.join("demo.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("не удалось открыть {}", lock_path.display()))?;
    if rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        bail!(
            "в папке {} уже запущено демо: остановите его (Ctrl-C) или укажите другую папку (--dir)",
            dir.display()
        );
    }
    let db = hub_dir.join("hub.sqlite");
    let state_file = dir.join("jira.json");

    // The simulated Jira, in this process: its state from the last run, or a new team project.
    let jira = FakeJira::start(Mode::DataCenter);
    if state_file.exists() {
        jira.load_state(&state_file)
            .map_err(|why| anyhow::anyhow!("не удалось загрузить состояние Jira: {why}"))?;
        outln!(
            "demo: simulated Jira at {}: {}, continued from {}",
            jira.url(),
            count_en(jira.issue_count() as u64, "issue"),
            state_file.display()
        );
    } else {
        let keys = jira.seed_demo_project(PROJECT, LABELS, args.issues as usize, args.seed);
        jira.save_state(&state_file)
            .with_context(|| format!("не удалось записать {}", state_file.display()))?;
        outln!(
            "demo: simulated Jira at {}: project {PROJECT} with {} (labels {})",
            jira.url(),
            count_en(keys.len() as u64, "issue"),
            LABELS.join(", ")
        );
    }
    if args.rate_limit {
        jira.rate_limit(Some(RATE_LIMIT_PER_SECOND));
        outln!(
            "demo: the simulated Jira answers 429 with Retry-After beyond {RATE_LIMIT_PER_SECOND} requests a second"
        );
    }

    // The hub's database, initialised from the embedded legacy config on the first run.
    let tokens = {
        let (mut hub, _) = super::open_hub(&db)?;
        if hub.tokens()?.is_none() || hub.settings()?.relay_dir.is_none() {
            let config = legacy_config();
            let config_file = hub_dir.join("demo-config.json");
            std::fs::write(&config_file, serde_json::to_vec_pretty(&config)?)
                .with_context(|| format!("не удалось записать {}", config_file.display()))?;
            hub.init_from_config(&config, true)?;
            // The legacy config names one project (so that its board goes to it); the second
            // is the support team's, on the kanban board.
            if !hub.projects()?.iter().any(|p| p.label == LABELS[1]) {
                hub.create_project(LABELS[1], "Поддержка", Some(4217))?;
            }
            let mut update = serde_json::Map::new();
            update.insert("relay_dir".into(), relay_dir.display().to_string().into());
            hub.update_settings(&update)?;
            outln!("demo: hub initialised from {}", config_file.display());
        }
        hub.tokens()?
            .context("в базе демо нет токенов: удалите папку демо и запустите снова")?
    };

    // The agent's config: this run's Jira address (its port changes), the relay folder. A
    // heartbeat every 60 s, the agent's default: each heartbeat, and the waiting claim it ends,
    // is an exchange of files (an answer written and synced, a request archived), about 9 KB
    // written by the hub, and the hub writes the agent's last-seen time once a period (a commit
    // of one 32 KiB page: the database's view of a live agent must not look silent to another
    // process, see `service::presence`). At 10 s the demo left running wrote 150–230 KB a
    // minute, at 30 s 158 KB (measured with `strace` and `/proc/PID/io`: two last-seen commits
    // a minute, each a WAL frame and its share of the wal-index), over the earlier budget of 128. Work still
    // reaches the agent at once (the hub answers its waiting claim); it is flagged silent after
    // two periods, 2 minutes.
    let agent_config = dir.join("agent.json");
    let config = json!({
        "jira_url": jira.url(), "jira_user": sim::USER, "jira_password": sim::PASSWORD,
        "relay_dir": relay_dir.display().to_string(), "agent_token": tokens.agent,
        "name": "demo-agent", "idle_poll_ms": 200, "heartbeat_seconds": 60,
    });
    write_private(&agent_config, &serde_json::to_vec_pretty(&config)?)?;

    // A terminal's hang-up (SIGHUP) stops the demo as its Ctrl-C does.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    // This run's name for its hub, which `/ready` repeats: any other hub is not ours.
    let instance = format!("{INSTANCE_PREFIX}{}:{}", nonce()?, dir.display());

    let hub_log = logs.join("hub.log");
    let agent_log = logs.join("agent.log");
    let mut hub = Process::spawn(
        "hub",
        &[
            "--log-format".as_ref(),
            "plain".as_ref(),
            "--db".as_ref(),
            db.as_os_str(),
            "serve".as_ref(),
            "--listen".as_ref(),
            args.listen.as_ref(),
        ],
        &[(super::INSTANCE_ENV, OsString::from(&instance))],
        &hub_log,
    )?;
    let api = Api {
        address: format!("http://{}", reachable(&args.listen)),
        auth: format!("Bearer {}", tokens.client),
    };
    // Ready: the hub answers (or it died, or a signal came).
    let waited = Instant::now();
    loop {
        if stop.load(Ordering::SeqCst) || hub.exited() {
            break;
        }
        match api.call("GET", "/ready", None) {
            Ok((200, body)) if body["instance"] == instance.as_str() => break,
            Ok((200, _)) => {
                // Someone else's hub took the port after it was tried: ours cannot listen.
                hub.interrupt();
                hub.wait();
                bail!(
                    "порт {} занят: на {} отвечает чужой хаб, не запущенный этим демо; запустите демо с другим адресом (--listen {})",
                    args.listen,
                    api.address,
                    free_port_beside(&args.listen)
                );
            }
            _ => {}
        }
        if waited.elapsed() > READY_LIMIT {
            hub.interrupt();
            hub.wait();
            bail!(
                "хаб не ответил на {}/ready за {} с; журнал: {}",
                api.address,
                READY_LIMIT.as_secs(),
                hub_log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut agent = if hub.exited() || stop.load(Ordering::SeqCst) {
        None
    } else {
        Some(Process::spawn(
            "agent",
            &[
                "--log-format".as_ref(),
                "plain".as_ref(),
                "agent".as_ref(),
                "--config".as_ref(),
                agent_config.as_os_str(),
            ],
            &[],
            &agent_log,
        )?)
    };

    let mut progress = Progress {
        started,
        batch: None,
        batch_said: String::new(),
        batch_done: false,
        refresh: None,
        refresh_said: String::new(),
        refresh_done: false,
    };
    if agent.is_some() {
        outln!(
            "demo: console: http://{}/ (the hub answered after {:.1} s)",
            reachable(&args.listen),
            started.elapsed().as_secs_f64()
        );
        outln!("demo: sign in with the client token: {}", tokens.client);
        outln!(
            "demo: API: {} (Authorization: Bearer <client token>)",
            api.address
        );
        outln!(
            "demo: logs: {} and {}; Ctrl-C stops the demo, running it again continues",
            hub_log.display(),
            agent_log.display()
        );
        // The command line reaches this hub's database by this line (or, from the folder that
        // holds ./demo, by itself: `super::resolve_db`).
        outln!(
            "demo: the command line, in another shell (jira-hub status, batches list, tokens, refresh --wait):"
        );
        outln!(
            "export JIRA_HUB_DB={}",
            shell_word(&db.display().to_string())
        );
        // The hub queues a refresh of its own when it starts: only the sample batch counts.
        let batches = api.get("/batches?limit=500")?;
        let queued = batches
            .as_array()
            .is_some_and(|all| all.iter().any(|b| b["title"] == SAMPLE_TITLE));
        if !queued {
            let batch = api.post("/batches", &sample_batch(&format!("{PROJECT}-1")))?;
            let id = batch["id"].as_i64().context("хаб не вернул номер пакета")?;
            outln!(
                "demo: sample batch {id} queued: {}",
                count_en(
                    batch["commands"].as_array().map_or(0, Vec::len) as u64,
                    "command"
                )
            );
            progress.batch = Some(id);
        } else {
            outln!("demo: the sample batch was queued on an earlier run: not again");
            progress.batch_done = true;
            progress.refresh_done = true;
        }
    }

    // Follow the progress, watch the children, save Jira's state after its changes.
    let mut last_poll = Instant::now() - POLL_EVERY;
    let mut saver = Saver::new(jira.changes());
    let mut early: Option<&'static str> = None;
    while !stop.load(Ordering::SeqCst) {
        if hub.exited() {
            early = Some("hub");
            break;
        }
        if let Some(agent) = agent.as_mut()
            && agent.exited()
        {
            early = Some(agent.name);
            break;
        }
        if last_poll.elapsed() >= POLL_EVERY {
            last_poll = Instant::now();
            if let Err(error) = progress.poll(&api) {
                tracing::warn!("demo: {error:#}");
            }
        }
        if saver.due(jira.changes(), Instant::now()) {
            // The count before the write: a change made during it is written next time.
            let changes = jira.changes();
            match jira.save_state(&state_file) {
                Ok(()) => saver.saved(changes),
                Err(error) => tracing::warn!(
                    "demo: не удалось записать {}: {error}",
                    state_file.display()
                ),
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    // Stop: a terminal's Ctrl-C reached the whole group already; SIGTERM to this process, or a
    // child that died, did not, so each child still running gets SIGINT (a second one is
    // harmless: both stop on the first).
    if let Some(agent) = agent.as_mut() {
        agent.interrupt();
    }
    hub.interrupt();
    if let Some(agent) = agent.as_mut() {
        agent.wait();
    }
    hub.wait();
    let saved = jira.save_state(&state_file);
    drop(jira);
    let mut report: Vec<String> = vec![hub.outcome()];
    report.extend(agent.as_ref().map(Process::outcome));
    report.push(match &saved {
        Ok(()) => format!("jira saved to {}", state_file.display()),
        Err(error) => format!("jira not saved to {}: {error}", state_file.display()),
    });
    // After a terminal's hang-up stdout and stderr may be gone: what is said now cannot fail.
    say(&format!("demo: {}", report.join(", ")));
    let children: Vec<&Process> = std::iter::once(&hub).chain(agent.as_ref()).collect();
    let stopping = stop.load(Ordering::SeqCst);
    let failed: Vec<&&Process> = children.iter().filter(|p| !p.succeeded(stopping)).collect();
    if let Some(name) = early {
        let process = children.iter().find(|p| p.name == name);
        if let Some(process) = process {
            let _ = writeln!(
                std::io::stderr().lock(),
                "{} log ({}):\n{}",
                process.name,
                process.log.display(),
                process.log_tail()
            );
        }
        let who = match name {
            "hub" => "хаб",
            "agent" => "агент",
            other => other,
        };
        bail!(
            "{who} остановился раньше времени ({}); журнал: {}",
            process.map_or_else(String::new, |p| p.outcome_words()),
            process.map_or_else(String::new, |p| p.log.display().to_string())
        );
    }
    if !failed.is_empty() {
        let names: Vec<String> = failed.iter().map(|p| p.outcome()).collect();
        bail!("демо остановлено с ошибкой: {}", names.join(", "));
    }
    saved.with_context(|| format!("не удалось записать {}", state_file.display()))?;
    drop(lock);
    Ok(Outcome::Success)
}

/// When the simulated Jira's state is written: after its writes pause for [`SAVE_QUIET`], or
/// [`SAVE_AT_MOST`] after the first unwritten one while they go on. After a failed write
/// (a full disk) it is tried again at the same pace, never in a tight loop.
#[derive(Debug)]
struct Saver {
    /// The change count the file holds.
    written: u64,
    /// The last count seen, and when it was first seen.
    seen: u64,
    seen_at: Option<Instant>,
    /// When the first change not yet written was seen.
    pending_since: Option<Instant>,
}

impl Saver {
    fn new(written: u64) -> Saver {
        Saver {
            written,
            seen: written,
            seen_at: None,
            pending_since: None,
        }
    }

    /// Whether to write now, `changes` being Jira's count at `now`.
    fn due(&mut self, changes: u64, now: Instant) -> bool {
        if changes == self.written {
            self.pending_since = None;
            return false;
        }
        if changes != self.seen || self.seen_at.is_none() {
            self.seen = changes;
            self.seen_at = Some(now);
        }
        let pending = *self.pending_since.get_or_insert(now);
        let quiet = self.seen_at.is_some_and(|at| now - at >= SAVE_QUIET);
        if quiet || now - pending >= SAVE_AT_MOST {
            // The next try waits its turn again, whether this one succeeds or not.
            self.pending_since = Some(now);
            self.seen_at = Some(now);
            return true;
        }
        false
    }

    /// The file now holds `changes`.
    fn saved(&mut self, changes: u64) {
        self.written = changes;
        if changes == self.seen {
            self.pending_since = None;
        }
    }
}

/// 16 random hex digits: this run's part of its hub's name.
fn nonce() -> anyhow::Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|error| anyhow::anyhow!("нет случайных чисел: {error}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The folder of the demo whose hub is named `instance`.
fn demo_folder(instance: &str) -> Option<&str> {
    let rest = instance.strip_prefix(INSTANCE_PREFIX)?;
    rest.split_once(':').map(|(_, folder)| folder)
}

/// Refuses an address something else listens on, in one line with the way out: the other
/// demo's folder when its hub is a demo's (its `/ready` names it), and a free `--listen`.
fn check_port(listen: &str) -> anyhow::Result<()> {
    let error = match std::net::TcpListener::bind(listen) {
        Ok(_) => return Ok(()),
        Err(error) => error,
    };
    let free = free_port_beside(listen);
    if error.kind() != std::io::ErrorKind::AddrInUse {
        bail!("Демо не может слушать {listen}; укажите другой адрес: --listen {free}: «{error}»");
    }
    let other = sim::call(
        &format!("http://{}", reachable(listen)),
        "GET",
        "/ready",
        None,
        None,
        Duration::from_secs(5),
    )
    .ok()
    .and_then(|answer| answer.json()["instance"].as_str().map(String::from));
    match other.as_deref().and_then(demo_folder) {
        Some(folder) => bail!(
            "порт {listen} занят: там уже работает демо из папки {folder} (его консоль http://{}/, \
             его база {}); остановите его (Ctrl-C) или запустите это демо с другим адресом: --listen {free}",
            reachable(listen),
            Path::new(folder).join("hub").join("hub.sqlite").display()
        ),
        None => bail!(
            "порт {listen} занят другой программой: запустите демо с другим адресом (--listen {free}) или остановите её"
        ),
    }
}

/// `listen` as given, or, when it asks for port 0, with a port the system has free now.
fn with_free_port(listen: &str) -> String {
    match listen.parse::<std::net::SocketAddr>() {
        Ok(address) if address.port() == 0 => std::net::TcpListener::bind(address)
            .and_then(|taken| taken.local_addr())
            .map_or_else(|_| listen.to_string(), |free| free.to_string()),
        _ => listen.to_string(),
    }
}

/// A line on stdout that cannot fail the demo (after a hang-up the terminal is gone).
fn say(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

/// In the hub and the agent the demo started (`JIRA_HUB_DEMO_PARENT` is its process id): the
/// process asks the kernel for SIGTERM when the demo dies, however it dies (`kill -9`
/// included), and stops cleanly on it. Called first thing on the main thread: the signal is
/// sent when the *thread* that spawned the child exits (prctl(2), PR_SET_PDEATHSIG), and the
/// demo spawns its children from its main thread, which lives as long as the demo. A demo that
/// died before the signal was set is seen by the parent id that is no longer its own.
pub(crate) fn die_with_demo() -> anyhow::Result<()> {
    let Some(value) = std::env::var_os(PARENT_ENV) else {
        return Ok(());
    };
    let parent: i32 = value
        .to_str()
        .and_then(|text| text.parse().ok())
        .with_context(|| format!("{PARENT_ENV}: ожидается номер процесса демо"))?;
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))
        .context("не удалось попросить сигнал о завершении демо (PR_SET_PDEATHSIG)")?;
    let now = rustix::process::getppid().map(rustix::process::Pid::as_raw_nonzero);
    if now.map(|pid| pid.get()) != Some(parent) {
        bail!("демо (процесс {parent}) уже завершилось: его хаб и агент не запускаются без него");
    }
    Ok(())
}

/// The address this machine reaches a listener on: `0.0.0.0:8740` is reached at `127.0.0.1`.
fn reachable(listen: &str) -> String {
    if let Some(port) = listen.strip_prefix("0.0.0.0:") {
        format!("127.0.0.1:{port}")
    } else if let Some(port) = listen.strip_prefix("[::]:") {
        format!("[::1]:{port}")
    } else {
        listen.to_string()
    }
}

/// Writes a file only its owner may read (the agent's config holds its token and Jira's
/// password).
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("не удалось записать {}", path.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("не удалось записать {}", path.display()))?;
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--listen 127.0.0.1:0` is a real, free port the demo can reach its hub on; any other
    /// address is kept as it was given.
    #[test]
    fn port_zero_becomes_a_free_port() {
        let chosen = with_free_port("127.0.0.1:0");
        let address: std::net::SocketAddr = chosen.parse().expect("an address");
        assert_eq!(address.ip().to_string(), "127.0.0.1");
        assert_ne!(address.port(), 0, "{chosen}");
        std::net::TcpListener::bind(address).expect("the port is free");
        assert_eq!(with_free_port("127.0.0.1:8740"), "127.0.0.1:8740");
        assert_eq!(with_free_port("localhost:0"), "localhost:0");
    }

    /// A burst of Jira's writes (one command's create, link, comment) is one write of the file,
    /// made once they pause; writes that never pause are written every [`SAVE_AT_MOST`]; no
    /// change, no write; a failed write is tried again at the same pace.
    #[test]
    fn the_state_is_written_after_each_burst_of_changes_once() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut saver = Saver::new(0);
        assert!(!saver.due(0, at(0)));
        assert!(!saver.due(0, at(5_000)), "no change, no write");
        // A burst: three writes 100 ms apart, then quiet.
        let mut writes = Vec::new();
        for (ms, changes) in [(5_100, 1), (5_200, 2), (5_300, 3), (5_400, 3), (5_500, 3)] {
            if saver.due(changes, at(ms)) {
                writes.push(ms);
                saver.saved(changes);
            }
        }
        assert!(writes.is_empty(), "not within the burst: {writes:?}");
        for ms in (5_600..7_000).step_by(100) {
            if saver.due(3, at(ms)) {
                writes.push(ms);
                saver.saved(3);
            }
        }
        assert_eq!(
            writes,
            vec![5_600],
            "one write, 300 ms after the last change"
        );
        // Writes every 100 ms for 5 s: written every 2 s meanwhile, then once at the end.
        let mut writes = Vec::new();
        let mut changes = 3;
        for ms in (10_000..15_000).step_by(100) {
            changes += 1;
            if saver.due(changes, at(ms)) {
                writes.push(ms);
                saver.saved(changes);
            }
        }
        // (the first unwritten change at 10 000, then at 12 100)
        assert_eq!(writes, vec![12_000, 14_100], "{writes:?}");
        for ms in (15_000..16_000).step_by(100) {
            if saver.due(changes, at(ms)) {
                writes.push(ms);
                saver.saved(changes);
            }
        }
        assert_eq!(writes, vec![12_000, 14_100, 15_200], "{writes:?}");
        // A failing write (a full disk) is tried again every 300 ms, not at each tick.
        let mut tries = Vec::new();
        changes += 1;
        for ms in (20_000..21_000).step_by(100) {
            if saver.due(changes, at(ms)) {
                tries.push(ms);
            }
        }
        assert_eq!(tries, vec![20_300, 20_600, 20_900], "{tries:?}");
    }

    #[test]
    fn a_path_is_one_shell_word_and_an_instance_names_its_folder() {
        assert_eq!(
            shell_word("/home/you/demo/hub/hub.sqlite"),
            "/home/you/demo/hub/hub.sqlite"
        );
        assert_eq!(
            shell_word("/tmp/my demo/hub.sqlite"),
            "'/tmp/my demo/hub.sqlite'"
        );
        assert_eq!(shell_word("/tmp/it's"), "'/tmp/it'\\''s'");
        assert_eq!(
            demo_folder("demo:0a1b:/home/you/demo"),
            Some("/home/you/demo")
        );
        assert_eq!(demo_folder("demo:0a1b:/a:b"), Some("/a:b"));
        assert_eq!(demo_folder("something else"), None);
    }
}
