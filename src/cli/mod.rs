//! The command line (system.md §2): clap definitions and one function per subcommand. Every
//! subcommand opens the database through [`open_hub`], which creates or migrates it first.
//! Output for people goes to stdout; refusals come back as errors that `main` prints in one line.

mod admin;
mod projects;
mod settings;
mod status;

use crate::clock::SystemClock;
use crate::service::Hub;
use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Debug, Parser)]
#[command(
    name = "jira-hub",
    version,
    about = "The hub between a team and its Jira behind an air gap"
)]
pub struct Cli {
    /// The hub's database; its folder is the data directory (backups/ goes there too).
    #[arg(
        long,
        global = true,
        env = "JIRA_HUB_DB",
        default_value = "./data/hub.sqlite"
    )]
    pub db: PathBuf,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create or migrate the database and import the settings of a legacy sync config.
    Init {
        /// The legacy config (format: admin/jira-sync/config.example.json).
        #[arg(long)]
        config: PathBuf,
        /// Import over the settings an earlier init stored (tokens are kept).
        #[arg(long, conflicts_with = "if_new")]
        force: bool,
        /// Do nothing, successfully, when the database already has settings.
        #[arg(long)]
        if_new: bool,
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
        #[arg(long, value_enum)]
        rotate: Option<RotateWhich>,
    },
    /// A summary for people: schema, projects, queue, agents, last full refresh, relay folder.
    Status,
    /// Make an online backup into backups/ now.
    Backup,
}

#[derive(Debug, Subcommand)]
pub enum SettingsCommand {
    /// Print all settings (without tokens), or one.
    Get { key: Option<String> },
    /// Write one setting: KEY and a JSON value (strings in quotes: '"/srv/relay"').
    Set {
        key: String,
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
        label: String,
        name: String,
        /// The project's Jira board.
        #[arg(long, allow_negative_numbers = true)]
        board: Option<i64>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RotateWhich {
    Agent,
    Client,
}

/// Runs one parsed command.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Init {
            config,
            force,
            if_new,
        } => admin::init(&cli.db, &config, force, if_new),
        Command::Migrate => admin::migrate(&cli.db),
        Command::Settings(SettingsCommand::Get { key }) => settings::get(&cli.db, key.as_deref()),
        Command::Settings(SettingsCommand::Set { key, json }) => {
            settings::set(&cli.db, &key, &json)
        }
        Command::Projects(ProjectsCommand::List) => projects::list(&cli.db),
        Command::Projects(ProjectsCommand::Add { label, name, board }) => {
            projects::add(&cli.db, &label, &name, board)
        }
        Command::Tokens { rotate } => admin::tokens(&cli.db, rotate),
        Command::Status => status::status(&cli.db),
        Command::Backup => admin::backup(&cli.db),
    }
}

/// Opens the hub's database (creating or migrating it).
fn open_hub(db: &Path) -> anyhow::Result<(Hub, crate::store::OpenReport)> {
    Hub::open(db, Arc::new(SystemClock))
        .with_context(|| format!("cannot open the database {}", db.display()))
}
