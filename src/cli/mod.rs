//! The command line (system.md §2): clap definitions and one function per subcommand. Only
//! `init`, `migrate` and `serve` create or migrate a database (`open_hub`); the other commands
//! open an existing one (`open_existing_hub`), read-only when they only read (`open_read_only_hub`).
//! Output for people goes to stdout; refusals come back as errors that `main` prints in one line.

mod admin;
mod agent;
mod demo;
/// The demo's sample batch, which `tests/it/calls.rs` measures in calls to Jira.
pub use demo::sample_batch;
mod examples;
mod projects;
mod queue;
mod relay;
mod settings;
mod simjira;
mod status;

use crate::clock::SystemClock;
use crate::service::{HubConnection, ServiceError};
use crate::store::StoreError;
use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use demo::DemoArgs;

// The schema in VERSION is written out (concat! takes literals): this fails the build when the
// schema moves on and VERSION does not.
const _: () = assert!(
    crate::store::CURRENT_SCHEMA_VERSION == 4 && crate::store::CURRENT_V4_REVISION == 19,
    "update VERSION's schema"
);

/// `--version`: the release, the commit it was built from, and the database schema it runs.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("JIRA_HUB_COMMIT"),
    ", database schema v4 revision 19)"
);

#[derive(Debug, Parser)]
#[command(
    name = "jira-hub",
    version = VERSION,
    about = "The hub between a team and its Jira behind an air gap"
)]
pub struct Cli {
    /// The hub's database; its folder is the data directory (backups/ goes there too).
    #[arg(
        long,
        global = true,
        env = "JIRA_HUB_DB",
        default_value = DEFAULT_DB
    )]
    pub db: PathBuf,

    /// How log lines are written to stderr: `auto` is `journal` under systemd (when
    /// `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers.
    #[arg(
        long,
        global = true,
        env = "JIRA_HUB_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Auto
    )]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,

    /// Whether `db` is the default (neither `--db` nor `JIRA_HUB_DB` was given) for a command that
    /// opens an existing database: then it looks for the demo's when there is no
    /// `./data/hub.sqlite` (`resolve_db`).
    #[arg(skip)]
    pub db_defaulted: bool,
}

/// The name of this run of the hub, which `/ready` repeats (`HttpOptions::instance`).
const INSTANCE_ENV: &str = "JIRA_HUB_INSTANCE";

/// The default `--db`.
const DEFAULT_DB: &str = "./data/hub.sqlite";
/// The database `jira-hub demo` makes with its default `--dir`.
const DEMO_DB: &str = "./demo/hub/hub.sqlite";

/// The commands that open no database, as paths of subcommand names: `--db` is hidden from
/// their help, man pages and completions (it stays accepted, and ignored, as a global option
/// given before the command is).
const WITHOUT_DB: &[&[&str]] = &[
    &["demo"],
    &["agent"],
    &["man"],
    &["completions"],
    &["relay", "init"],
    &["sim-jira"],
];

/// The commands that make a database where they are told (never the demo's).
const MAKE_DB: &[&[&str]] = &[&["init"], &["migrate"], &["serve"]];

/// The command line's definition: the derived one with `--db` hidden where it is ignored. The
/// parser, `--help`, the man pages and the completions all come from it.
pub fn command() -> clap::Command {
    fn hide_db(command: clap::Command, path: &[&str]) -> clap::Command {
        match path {
            // An argument of the same id in a subcommand stops the global one from being
            // propagated into it; its value still reaches `Cli::db`.
            [] => command.arg(
                clap::Arg::new("db")
                    .long("db")
                    .value_parser(clap::value_parser!(PathBuf))
                    .hide(true),
            ),
            [first, rest @ ..] => command.mut_subcommand(*first, |sub| hide_db(sub, rest)),
        }
    }
    WITHOUT_DB
        .iter()
        .fold(Cli::command(), |command, path| hide_db(command, path))
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create or migrate the database and import the settings of a legacy sync config.
    Init {
        /// The legacy config (format: admin/jira-sync/config.example.json); `-` reads it from
        /// standard input.
        #[arg(long)]
        config: PathBuf,
        /// Import over the settings an earlier init stored (tokens are kept).
        #[arg(long, conflicts_with = "if_new")]
        force: bool,
        /// Do nothing, successfully, when the database already has settings.
        #[arg(long)]
        if_new: bool,
        /// Make the database in the existing empty file --db names (an empty file is otherwise
        /// refused by every command: it may be anyone's).
        #[arg(long)]
        use_empty_file: bool,
    },
    /// Create or migrate the database, print what was done, and exit.
    Migrate,
    /// Read or write settings, with the validation of PUT /settings.
    #[command(subcommand)]
    Settings(SettingsCommand),
    /// List or add projects (Jira labels).
    #[command(subcommand)]
    Projects(ProjectsCommand),
    /// Print the agent and client tokens, or make a new one.
    Tokens {
        /// Replace this token with a new one and print both; the old one stops working at once
        /// (the agent's config or the clients must get the new one).
        #[arg(long, value_enum)]
        rotate: Option<RotateWhich>,
    },
    /// A summary for people: schema, projects, queue, agents, last full refresh, relay folder.
    Status {
        /// Print one JSON object instead: the service's views (projects, runs, agents as
        /// `GET /projects`, `GET /sync-runs` and `GET /agents` show them), with `degraded`.
        #[arg(long)]
        json: bool,
        /// Exit 1 when the hub is degraded, saying why on stderr: the database was never
        /// initialised; no agent has been seen, or every agent is silent; an agent says Jira is
        /// failing for it; a full refresh waits for a confirmation; the newest backup is older
        /// than two days, or there is none. Exit 0 otherwise.
        #[arg(long)]
        check: bool,
    },
    /// The agents the hub knows (silent ones and one-off checks named as such), or forget one.
    #[command(subcommand)]
    Agents(AgentsCommand),
    /// Make an online backup into backups/ now.
    Backup,
    /// Put a backup in place of the database of a stopped hub (refused while a hub serves it):
    /// the copy is checked first, the current database is kept in backups/ as
    /// `<stamp>-before-restore.sqlite` with its WAL; the tokens in force stay in force (a backup
    /// from before a rotation does not bring the revoked ones back).
    Restore {
        /// The copy to put in place (a file of backups/, or any copy of a hub's database).
        backup: PathBuf,
    },
    /// Run the daemon: the HTTP API, the relay watcher (when relay_dir is set), the timers.
    Serve(ServeArgs),
    /// Look at relay files by hand.
    #[command(subcommand)]
    Relay(RelayCommand),
    /// The queue's batches: list, show one with its commands, cancel.
    #[command(subcommand)]
    Batches(BatchesCommand),
    /// Commands that ended failed or skipped: list them, queue them again.
    #[command(subcommand)]
    Commands(CommandsCommand),
    /// Queue a refresh of the mirror (everything, or one project) and, with --wait, follow it.
    Refresh {
        /// Refresh this project's label only (with its board); everything otherwise.
        #[arg(long)]
        project: Option<String>,
        /// Only what changed since the last successful run (an incremental refresh; it never
        /// removes issues that left the scope).
        #[arg(long)]
        since_last: bool,
        /// Follow the refresh with a progress bar until it ends; exit 1 when it failed. Says on
        /// stderr when no agent has been seen for a while (nobody may be there to run it).
        #[arg(long)]
        wait: bool,
        /// With --wait, give up after this many seconds (exit 1; the refresh stays queued).
        #[arg(long, requires = "wait", value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
        timeout: Option<u64>,
        #[command(subcommand)]
        action: Option<RefreshCommand>,
    },
    /// Print shell completions for bash, zsh, fish, elvish or powershell.
    Completions {
        /// The shell to write completions for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or with --dir write one page per command into a folder.
    Man {
        /// Write jira-hub.1 and a page for each subcommand (jira-hub-serve.1, …) here.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Run the agent inside Jira's network: claim commands from the hub, run them in Jira,
    /// report (opens no database).
    Agent {
        /// The agent's config (format: admin/agent.example.json).
        #[arg(long)]
        config: PathBuf,
        /// One heartbeat, one claim, its commands executed and reported, then exit.
        #[arg(long)]
        once: bool,
        /// Preflight: read the hub's settings and Jira's metadata, write nothing, print one line
        /// per check (ok / ОШИБКА); exit 1 on any mismatch.
        #[arg(long, conflicts_with = "once")]
        check: bool,
    },
    /// The whole loop on this machine: a simulated Jira with a team project, the hub and an
    /// agent between them through a relay folder, a sample batch and a refresh; Ctrl-C stops
    /// all three, running it again continues (everything is under --dir; it prints the line
    /// that points the other commands at its database).
    Demo(DemoArgs),
    /// The demo's simulated Jira alone, until stopped (for the install test).
    #[command(hide = true)]
    SimJira(simjira::SimJiraArgs),
}

/// Every option can also come from the environment (`JIRA_HUB_<OPTION>`), so a unit can keep
/// them in an `EnvironmentFile=`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The HTTP listen address.
    #[arg(long, env = "JIRA_HUB_LISTEN", default_value = "127.0.0.1:8740")]
    pub listen: String,
    /// How often the relay lists inbox/, in milliseconds (notifications only hurry it).
    #[arg(long, env = "JIRA_HUB_RELAY_POLL_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=600_000))]
    pub relay_poll_ms: u64,
    /// How long a relay file that is not complete JSON may keep arriving before it is refused.
    #[arg(long, env = "JIRA_HUB_RELAY_GRACE_SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub relay_grace_seconds: u64,
    /// How long answers, archived and refused relay files are kept.
    #[arg(long, env = "JIRA_HUB_RELAY_RETENTION_DAYS", default_value_t = 14, value_parser = clap::value_parser!(u64).range(1..=3650))]
    pub relay_retention_days: u64,
    /// How long a relay file that is not complete JSON may keep changing before it is refused
    /// all the same.
    #[arg(long, env = "JIRA_HUB_RELAY_ARRIVAL_LIMIT_SECONDS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub relay_arrival_limit_seconds: u64,
    /// Relay files larger than this are refused unread.
    #[arg(long, env = "JIRA_HUB_RELAY_MAX_FILE_MB", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=16_384))]
    pub relay_max_file_mb: u64,
    /// List inbox/ on the timer only, without change notifications.
    #[arg(long, env = "JIRA_HUB_RELAY_NO_NOTIFY")]
    pub relay_no_notify: bool,
    /// Memory for the agent's reports in flight, HTTP bodies and relay files together: a report
    /// waits for its size (a larger one takes all of it); an HTTP report that cannot get it
    /// within --http-timeout-seconds is answered 503 with Retry-After.
    #[arg(long, env = "JIRA_HUB_REPORT_BUDGET_MB", default_value_t = 128, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub report_budget_mb: u64,
    /// The largest HTTP request body (a refresh page of 1,000 issues must fit).
    #[arg(long, env = "JIRA_HUB_HTTP_MAX_BODY_MB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub http_max_body_mb: u64,
    /// An HTTP request that takes longer is answered 408.
    #[arg(long, env = "JIRA_HUB_HTTP_TIMEOUT_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub http_timeout_seconds: u64,
    /// Open HTTP connections at most; at the cap a new one closes the oldest idle one.
    #[arg(long, env = "JIRA_HUB_HTTP_MAX_CONNECTIONS", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub http_max_connections: u64,
    /// HTTP connections that have shown no valid token at most (default: three quarters of
    /// --http-max-connections); the rest is kept for agents and clients.
    #[arg(long, env = "JIRA_HUB_HTTP_MAX_ANONYMOUS_CONNECTIONS", value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub http_max_anonymous_connections: Option<u64>,
    /// A request without a valid token must be read whole and answered within this time.
    #[arg(long, env = "JIRA_HUB_HTTP_ANONYMOUS_TIMEOUT_SECONDS", default_value_t = crate::http::ANONYMOUS_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub http_anonymous_timeout_seconds: u64,
    /// A connection that has not sent its request headers within this time is closed.
    #[arg(long, env = "JIRA_HUB_HTTP_HEADER_TIMEOUT_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub http_header_timeout_seconds: u64,
    /// A request body must arrive whole within this time from its headers (408 after).
    #[arg(long, env = "JIRA_HUB_HTTP_BODY_TIMEOUT_SECONDS", default_value_t = crate::http::BODY_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub http_body_timeout_seconds: u64,
    /// A file whose first line is a token that /metrics then asks for (Authorization: Bearer);
    /// without it /metrics needs no token.
    #[arg(long, env = "JIRA_HUB_METRICS_TOKEN_FILE", value_name = "FILE", value_parser = parse_metrics_token_file)]
    pub metrics_token_file: Option<crate::http::MetricsToken>,
    /// A keep-alive connection with no request for this long is closed.
    #[arg(long, env = "JIRA_HUB_HTTP_IDLE_TIMEOUT_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub http_idle_timeout_seconds: u64,
    /// A host name by which browsers and clients reach the hub (besides IP addresses and
    /// localhost, always accepted): a request naming another is refused, which stops DNS
    /// rebinding. Repeat it; in the environment, separate names with commas.
    #[arg(long = "allowed-host", env = "JIRA_HUB_ALLOWED_HOSTS", value_delimiter = ',', value_parser = parse_allowed_host)]
    pub allowed_hosts: Vec<String>,
    /// The console's public address behind a reverse proxy (`https://hub.example.com`): a form
    /// sent from it is from this site whatever Host the proxy passes on, and its host is
    /// allowed. Repeat it; in the environment, separate addresses with commas.
    #[arg(long = "public-url", env = "JIRA_HUB_PUBLIC_URL", value_delimiter = ',', value_parser = crate::http::parse_origin)]
    pub public_urls: Vec<String>,
    /// Initialise a new database from this legacy config first (nothing happens to one that has settings).
    #[arg(long, env = "JIRA_HUB_INIT_FROM")]
    pub init_from: Option<PathBuf>,
    /// When relay_dir is not set, set it to this folder (made if missing).
    #[arg(long, env = "JIRA_HUB_DEFAULT_RELAY_DIR")]
    pub default_relay_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum RelayCommand {
    /// A readable table of one relay file or a whole relay folder.
    Inspect {
        /// A relay file, or a relay folder (its inbox/, outbox/, archive/ and rejected/).
        path: PathBuf,
    },
    /// Check files against the protocol; exit 1 when any is invalid.
    Validate {
        /// A relay file, or a folder whose relay files are checked.
        path: PathBuf,
    },
    /// Prepare a relay folder: make it (when its parent exists), its inbox/, outbox/, archive/ and
    /// rejected/, and the marker .jira-hub-relay, after which the hub makes them again if they go
    /// missing. Without the marker the hub never makes them in a plain folder: it may be the
    /// empty mount point of a share that is not mounted.
    Init {
        /// The relay folder to prepare.
        path: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum BatchesCommand {
    /// Batches, newest first, with their command counters.
    List {
        /// Only this project's batches.
        #[arg(long)]
        project: Option<String>,
        /// Only batches in this status: queued, running, cancelled or completed (among the
        /// page's batches).
        #[arg(long)]
        status: Option<String>,
        /// At most this many batches, 1 to 500.
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// Only batches older than this id: the next page after a list that ended with it.
        #[arg(long)]
        before: Option<i64>,
        /// Print a JSON array of the batches, as `GET /batches` answers.
        #[arg(long)]
        json: bool,
    },
    /// One batch with its commands: status, deliveries, who claimed them, result or error.
    Show {
        /// The batch's id (the first column of `batches list`).
        id: i64,
        /// Print the batch as JSON, as `GET /batches/{id}` answers.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a batch: its queued commands become cancelled; those already at the agent are not
    /// stopped and end as the agent reports.
    Cancel {
        /// The batch's id (the first column of `batches list`).
        id: i64,
    },
    /// Delete now the finished batches past the `retention` setting (as the daemon does every
    /// minute), with their commands and attempts; a batch with a command queued or claimed is
    /// never deleted.
    Prune {
        /// Append each batch deleted (with its commands and their attempts) to this file as one
        /// JSON line, written and synced before the rows go (an audit trail; mode 0600).
        #[arg(long, value_name = "FILE")]
        export: Option<PathBuf>,
        /// Delete nothing: only count (and, with --export, write) what would be deleted.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// Every agent, most recently seen first: live, silent (since when, heartbeats missed), or
    /// a one-off check (`agent --check` under a name that runs nothing).
    List {
        /// Print a JSON array of the agents, as `GET /agents` answers.
        #[arg(long)]
        json: bool,
    },
    /// Forget an agent that is silent or only ran a check (a renamed or retired agent); a live
    /// agent is refused. It shows again if it contacts the hub.
    Forget {
        /// The agent's name, as `agents list` and `status` show it.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum RefreshCommand {
    /// Apply the removals of a full refresh held by `prune_guard` (see `jira-hub status`).
    Confirm {
        /// The held sync run's id.
        run: i64,
    },
}

#[derive(Debug, Subcommand)]
pub enum CommandsCommand {
    /// Commands that ended failed or skipped, their batches newest first, each batch's commands in its order, with their errors.
    Failed {
        /// At most this many.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=100_000))]
        limit: i64,
        /// Print a JSON array of the commands, as `GET /commands/failed` answers.
        #[arg(long)]
        json: bool,
    },
    /// Queue failed or skipped commands again (their earlier outcome is kept), or with --batch
    /// every failed and skipped command of a batch.
    Retry {
        /// The commands' ids (the `#` numbers of `commands failed` and `batches show`).
        #[arg(required_unless_present = "batch", conflicts_with = "batch")]
        ids: Vec<i64>,
        /// Retry every failed and skipped command of this batch.
        #[arg(long)]
        batch: Option<i64>,
        /// An edit stopped by a conflict (a field changed in Jira since it was enqueued) writes
        /// the fields in conflict over Jira's values; without it every field is checked again.
        #[arg(long, conflicts_with = "batch")]
        overwrite: bool,
    },
    /// Leave as Jira has it: an edit stopped by a conflict ends cancelled, nothing written; the
    /// commands skipped because of it stay skipped with that reason.
    KeepJira {
        /// The commands' ids.
        #[arg(required = true)]
        ids: Vec<i64>,
    },
    /// After keep-jira: enqueue copies of the commands skipped because of that edit as a new
    /// batch, run on the issue as Jira holds it (the skipped ones stay skipped, naming the copy).
    EnqueueDependents {
        /// The ids of edits left as Jira has them.
        #[arg(required = true)]
        ids: Vec<i64>,
    },
}

#[derive(Debug, Subcommand)]
pub enum SettingsCommand {
    /// Print all settings (without tokens), or one.
    Get {
        /// The setting to print (`relay_dir`, `pacing`, …); all of them when absent.
        key: Option<String>,
        /// Print the JSON on one line (for scripts), as `GET /settings` answers.
        #[arg(long)]
        json: bool,
    },
    /// Write one setting: KEY and a JSON value (strings in quotes: '"/srv/relay"').
    Set {
        /// The setting to write (`settings get` lists them).
        key: String,
        /// Its new value as JSON: a string in double quotes, a number, an object.
        #[arg(allow_hyphen_values = true)]
        json: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ProjectsCommand {
    /// The projects in base-JQL order.
    List,
    /// Create a project.
    Add {
        /// The Jira label of the project's issues (letters, digits, `_`, `-`; unique whatever
        /// the case).
        label: String,
        /// The project's name, for people.
        name: String,
        /// The project's Jira board.
        #[arg(long, allow_negative_numbers = true)]
        board: Option<i64>,
    },
}

/// The shape of log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// `journal` under systemd (`JOURNAL_STREAM` set), else `plain`.
    Auto,
    /// Text with a timestamp, for a terminal or a file.
    Plain,
    /// Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so
    /// `journalctl -p warning` works.
    Journal,
    /// One JSON object a line.
    Json,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RotateWhich {
    /// The token `jira-hub agent` presents.
    Agent,
    /// The token of API clients and the web console.
    Client,
}

/// Prints `value` as one line of JSON on stdout (`--json`).
fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string(value)?);
    Ok(())
}

/// How a command that ran ended; `main` turns it into the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done (exit 0).
    Success,
    /// It ran and its answer is no, already printed (`relay validate` found invalid files):
    /// exit 1, like a refusal.
    Negative,
}

/// Why a command failed; `main` turns it into the exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The database is one this binary cannot run (not SQLite, a newer schema): exit 3, which
    /// systemd is told not to restart.
    #[error("{0}")]
    Unrunnable(String),
    /// A runtime error or a refusal (exit 1), with its causes.
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

/// The command line parsed from the process's arguments, with each command's examples in its
/// `--help`; exits as clap does on a usage error or `--help`.
pub fn parse() -> Cli {
    use clap::FromArgMatches as _;
    let matches = examples::with_examples(command()).get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    let mut path = Vec::new();
    let mut at = &matches;
    while let Some((name, sub)) = at.subcommand() {
        path.push(name);
        at = sub;
    }
    let opens_existing = !WITHOUT_DB
        .iter()
        .chain(MAKE_DB)
        .any(|listed| *listed == path.as_slice());
    cli.db_defaulted = opens_existing
        && matches.value_source("db") == Some(clap::parser::ValueSource::DefaultValue);
    cli
}

/// The database a command that opens an existing one uses: `--db` (or `JIRA_HUB_DB`) when
/// given; by default `./data/hub.sqlite`, or, when that does not exist and `./demo/hub/hub.sqlite`
/// does (the quick start's `jira-hub demo` was run here), the demo's, said on stderr in one line.
fn resolve_db(db: &Path, defaulted: bool) -> PathBuf {
    let demo = Path::new(DEMO_DB);
    if defaulted && db == Path::new(DEFAULT_DB) && !db.exists() && demo.is_file() {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr().lock(),
            "jira-hub: {DEFAULT_DB} нет, беру базу демо {DEMO_DB} (другую выбирают --db или JIRA_HUB_DB)"
        );
        return demo.to_path_buf();
    }
    db.to_path_buf()
}

/// Runs one parsed command.
pub fn run(cli: Cli) -> Result<Outcome, CliError> {
    if matches!(cli.command, Command::Serve(_) | Command::Agent { .. }) {
        // Started by `jira-hub demo`: die with it.
        demo::die_with_demo()?;
    }
    let cli = Cli {
        db: resolve_db(&cli.db, cli.db_defaulted),
        ..cli
    };
    Ok(match cli.command {
        Command::Init {
            config,
            force,
            if_new,
            use_empty_file,
        } => admin::init(&cli.db, &config, force, if_new, use_empty_file)?,
        Command::Migrate => {
            as_the_data_owner(&cli.db)?;
            admin::migrate(&cli.db)?
        }
        Command::Settings(SettingsCommand::Get { key, json }) => {
            settings::get(&cli.db, key.as_deref(), json)?
        }
        Command::Settings(SettingsCommand::Set { key, json }) => {
            settings::set(&cli.db, &key, &json)?
        }
        Command::Projects(ProjectsCommand::List) => projects::list(&cli.db)?,
        Command::Projects(ProjectsCommand::Add { label, name, board }) => {
            projects::add(&cli.db, &label, &name, board)?
        }
        Command::Tokens { rotate } => {
            if rotate.is_some() {
                as_the_data_owner(&cli.db)?;
            }
            admin::tokens(&cli.db, rotate)?
        }
        Command::Status { json, check } => status::status(&cli.db, json, check)?,
        Command::Agents(AgentsCommand::List { json }) => status::list_agents(&cli.db, json)?,
        Command::Agents(AgentsCommand::Forget { name }) => status::forget_agent(&cli.db, &name)?,
        Command::Backup => {
            as_the_data_owner(&cli.db)?;
            admin::backup(&cli.db)?
        }
        Command::Restore { backup } => {
            as_the_data_owner(&cli.db)?;
            admin::restore(&cli.db, &backup)?
        }
        Command::Serve(args) => {
            crate::service::set_report_budget(args.report_budget_mb * 1024 * 1024);
            match crate::daemon::serve(&cli.db, args.into_options()) {
                Ok(()) => Outcome::Success,
                Err(crate::daemon::ServeError::Unrunnable(why)) => {
                    return Err(CliError::Unrunnable(why));
                }
                Err(crate::daemon::ServeError::Failed(error)) => return Err(error.into()),
            }
        }
        Command::Relay(RelayCommand::Inspect { path }) => relay::inspect(&cli.db, &path)?,
        Command::Relay(RelayCommand::Validate { path }) => relay::validate(&cli.db, &path)?,
        Command::Relay(RelayCommand::Init { path }) => relay::init(&path)?,
        Command::Batches(BatchesCommand::List {
            project,
            status,
            limit,
            before,
            json,
        }) => queue::list_batches(
            &cli.db,
            project.as_deref(),
            status.as_deref(),
            before,
            limit,
            json,
        )?,
        Command::Batches(BatchesCommand::Show { id, json }) => {
            queue::show_batch(&cli.db, id, json)?
        }
        Command::Batches(BatchesCommand::Cancel { id }) => queue::cancel_batch(&cli.db, id)?,
        Command::Batches(BatchesCommand::Prune { export, dry_run }) => {
            as_the_data_owner(&cli.db)?;
            queue::prune_batches(&cli.db, export.as_deref(), dry_run)?
        }
        Command::Commands(CommandsCommand::Failed { limit, json }) => {
            queue::failed_commands(&cli.db, limit, json)?
        }
        Command::Commands(CommandsCommand::Retry {
            ids,
            batch,
            overwrite,
        }) => queue::retry(&cli.db, &ids, batch, overwrite)?,
        Command::Commands(CommandsCommand::KeepJira { ids }) => queue::keep_jira(&cli.db, &ids)?,
        Command::Commands(CommandsCommand::EnqueueDependents { ids }) => {
            queue::enqueue_dependents(&cli.db, &ids)?
        }
        Command::Refresh {
            action: Some(RefreshCommand::Confirm { run }),
            ..
        } => queue::confirm_refresh(&cli.db, run)?,
        Command::Refresh {
            project,
            since_last,
            wait,
            timeout,
            action: None,
        } => queue::refresh(&cli.db, project.as_deref(), since_last, wait, timeout)?,
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command(), "jira-hub", &mut script);
            let mut script = String::from_utf8(script).context("completions")?;
            if shell == clap_complete::Shell::Bash {
                // clap_complete spells a hyphenated binary's subcommand states two ways (the
                // dispatch loop `jira__hub__subcmd__refresh`, the case arms
                // `jira__subcmd__hub__subcmd__refresh`), so nothing past the first word would
                // complete: clap-rs/clap#6421. The arms take the loop's spelling.
                script = script.replace("jira__subcmd__hub", "jira__hub");
            }
            std::io::Write::write_all(&mut std::io::stdout().lock(), script.as_bytes())
                .context("stdout")?;
            Outcome::Success
        }
        Command::Man { dir } => man(dir.as_deref())?,
        Command::Agent {
            config,
            once,
            check,
        } => agent::agent(&config, once, check)?,
        Command::Demo(args) => demo::demo(args)?,
        Command::SimJira(args) => simjira::sim_jira(args)?,
    })
}

impl ServeArgs {
    fn into_options(self) -> crate::daemon::ServeOptions {
        use std::time::Duration;
        crate::daemon::ServeOptions {
            listen: self.listen,
            relay: crate::relay::RelayOptions {
                poll_interval: Duration::from_millis(self.relay_poll_ms),
                grace: Duration::from_secs(self.relay_grace_seconds),
                retention: Duration::from_secs(self.relay_retention_days * 24 * 3600),
                max_file_bytes: self.relay_max_file_mb * 1024 * 1024,
                arrival_limit: Duration::from_secs(self.relay_arrival_limit_seconds),
                notify: !self.relay_no_notify,
                ..crate::relay::RelayOptions::default()
            },
            init_from: self.init_from,
            default_relay_dir: self.default_relay_dir,
            http: crate::http::HttpOptions {
                max_body_bytes: (self.http_max_body_mb * 1024 * 1024) as usize,
                request_timeout: Duration::from_secs(self.http_timeout_seconds),
                max_connections: self.http_max_connections as usize,
                max_anonymous_connections: self.http_max_anonymous_connections.map_or_else(
                    || {
                        crate::http::default_anonymous_connections(
                            self.http_max_connections as usize,
                        )
                    },
                    |n| n as usize,
                ),
                anonymous_timeout: Duration::from_secs(self.http_anonymous_timeout_seconds),
                header_timeout: Duration::from_secs(self.http_header_timeout_seconds),
                idle_timeout: Duration::from_secs(self.http_idle_timeout_seconds),
                allowed_hosts: self.allowed_hosts,
                public_origins: self.public_urls,
                // Set by `jira-hub demo` for its hub only (no option: nothing for people).
                instance: std::env::var(INSTANCE_ENV).ok(),
                body_timeout: Duration::from_secs(self.http_body_timeout_seconds),
                metrics_token: self.metrics_token_file,
            },
        }
    }
}

/// `--metrics-token-file`: the token in the file, read when the hub starts.
fn parse_metrics_token_file(text: &str) -> Result<crate::http::MetricsToken, String> {
    crate::http::MetricsToken::from_file(std::path::Path::new(text))
}

/// `--allowed-host`: a host name as `Host` carries it, kept lowercase without a final dot.
fn parse_allowed_host(text: &str) -> Result<String, String> {
    let name = text.trim().trim_end_matches('.').to_ascii_lowercase();
    let valid = !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if valid {
        Ok(name)
    } else {
        Err(format!(
            "{text}: ожидается имя хоста (hub.example.com), без схемы и порта"
        ))
    }
}

/// `man`: the pages come from the same definitions as the parser. Their version is the release
/// alone (not the commit), so pages made from two commits of one release are the same.
fn man(dir: Option<&Path>) -> anyhow::Result<Outcome> {
    let command = command().version(env!("CARGO_PKG_VERSION"));
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("не удалось создать папку {}", dir.display()))?;
            examples::man_pages(command, dir)
                .with_context(|| format!("не удалось записать страницы в {}", dir.display()))?;
        }
        None => {
            let page = examples::main_page(command)?;
            // On a terminal the page is read, so it opens in man (`man -l -` reads roff from
            // its standard input); piped or redirected, it is the roff itself.
            if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                return show_in_man(&page);
            }
            std::io::Write::write_all(&mut std::io::stdout().lock(), page.as_bytes())?;
        }
    }
    Ok(Outcome::Success)
}

/// Opens a roff page in `man`; without `man` on this machine, prints the page and says so.
fn show_in_man(page: &str) -> anyhow::Result<Outcome> {
    use std::io::Write;
    let spawned = std::process::Command::new("man")
        .args(["-l", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => {
            eprintln!(
                "jira-hub: не удалось запустить man («{error}»): страница — ниже, в разметке roff"
            );
            std::io::stdout().lock().write_all(page.as_bytes())?;
            return Ok(Outcome::Success);
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        // man may stop reading (q pressed early): a broken pipe is no error.
        let _ = stdin.write_all(page.as_bytes());
    }
    let status = child.wait().context("man")?;
    Ok(if status.success() {
        Outcome::Success
    } else {
        Outcome::Negative
    })
}

/// Opens the hub's database, creating or migrating it: `init` and `migrate` (and `serve`).
fn open_hub(db: &Path) -> anyhow::Result<(HubConnection, crate::store::OpenReport)> {
    HubConnection::open(db, Arc::new(SystemClock))
        .with_context(|| format!("не удалось открыть базу {}", db.display()))
}

/// `open_hub`, making the database in an existing empty file too (`init --use-empty-file`).
fn open_hub_also_in_empty_file(
    db: &Path,
) -> anyhow::Result<(HubConnection, crate::store::OpenReport)> {
    HubConnection::open_also_in_empty_file(db, Arc::new(SystemClock))
        .with_context(|| format!("не удалось открыть базу {}", db.display()))
}

/// Opens the hub's database, migrating it, creating it only where no hub lived: `migrate`.
fn open_guarded_hub(db: &Path) -> anyhow::Result<(HubConnection, crate::store::OpenReport)> {
    HubConnection::open_guarded(db, Arc::new(SystemClock))
        .with_context(|| format!("не удалось открыть базу {}", db.display()))
}

/// A chore that makes or replaces files in the data folder (`backup`, `restore`, `migrate`,
/// `batches prune`, `tokens --rotate`), run by root in a folder another user owns (the
/// service's): refused, naming the user to run it as. Run as root, it would leave root-owned
/// files (a 0600 backup, a restored `hub.sqlite`) that the service cannot open, and the hub
/// would fail to start.
fn as_the_data_owner(db: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    if !rustix::process::geteuid().is_root() {
        return Ok(());
    }
    let dir = crate::store::data_dir_of(db);
    let Ok(meta) = std::fs::metadata(&dir) else {
        return Ok(());
    };
    if meta.uid() == 0 {
        return Ok(());
    }
    let user = crate::store::user_name(meta.uid()).unwrap_or_else(|| meta.uid().to_string());
    let typed: Vec<String> = std::env::args().skip(1).collect();
    anyhow::bail!(
        "команда запущена от root, а папка данных {} принадлежит пользователю {user}: сделанные ею файлы были бы root-овыми, и хаб не смог бы их открыть; ничего не сделано. Запустите её от имени {user}: runuser -u {user} -- {} {}",
        dir.display(),
        crate::program(),
        typed.join(" ")
    )
}

/// Opens an existing database to change it (migrating it if needed); never creates one.
fn open_existing_hub(db: &Path) -> anyhow::Result<HubConnection> {
    match HubConnection::open_existing(db, Arc::new(SystemClock)) {
        Ok((hub, _)) => Ok(hub),
        Err(error @ ServiceError::Internal(StoreError::Missing(_))) => Err(error.into()),
        Err(error) => {
            Err(error).with_context(|| format!("не удалось открыть базу {}", db.display()))
        }
    }
}

/// Opens an existing database for reading: works on a read-only data directory and on a backup
/// file, creates and writes nothing.
fn open_read_only_hub(db: &Path) -> anyhow::Result<HubConnection> {
    match HubConnection::open_read_only(db, Arc::new(SystemClock)) {
        Ok(hub) => Ok(hub),
        Err(error @ ServiceError::Internal(StoreError::Missing(_))) => Err(error.into()),
        Err(error) => {
            Err(error).with_context(|| format!("не удалось открыть базу {}", db.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_version_names_the_schema_this_binary_runs() {
        let schema = format!(
            "database schema v{} revision {}",
            crate::store::CURRENT_SCHEMA_VERSION,
            crate::store::CURRENT_V4_REVISION
        );
        assert!(super::VERSION.contains(&schema), "{}", super::VERSION);
        assert!(super::VERSION.contains("(commit "), "{}", super::VERSION);
    }
}
