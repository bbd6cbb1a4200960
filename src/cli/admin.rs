//! `init`, `migrate`, `tokens`, `backup`: setting a hub up and looking after its files.

use super::{RotateWhich, open_hub};
use crate::service::{ServiceError, TokenRole};
use crate::store::data_dir_of;
use anyhow::{Context, bail};
use std::path::Path;
use std::process::ExitCode;

pub fn init(db: &Path, config_path: &Path, force: bool, if_new: bool) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(config_path)
        .with_context(|| format!("cannot read the config {}", config_path.display()))?;
    let config: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("the config {} is not valid JSON", config_path.display()))?;
    let (mut hub, _) = open_hub(db)?;
    let report = match hub.init_from_config(&config, force) {
        Err(ServiceError::Conflict { field, .. }) if if_new && field == "settings" => {
            println!("{} already has settings; nothing changed", db.display());
            return Ok(ExitCode::SUCCESS);
        }
        result => result?,
    };
    let settings = hub.settings()?;
    println!("database:    {}", db.display());
    println!("data folder: {}", data_dir_of(db).display());
    println!("backups:     {}", data_dir_of(db).join("backups").display());
    println!(
        "relay_dir:   {}",
        settings
            .relay_dir
            .as_deref()
            .unwrap_or("(not set: jira-hub settings set relay_dir '\"/path\"')")
    );
    println!("imported:    {}", report.imported_keys.join(", "));
    if !report.ignored_keys.is_empty() {
        println!(
            "not imported: {} (Jira credentials are never stored)",
            report.ignored_keys.join(", ")
        );
    }
    for warning in &report.warnings {
        println!("warning:     {warning}");
    }
    println!(
        "projects:    {}",
        if report.created_projects.is_empty() {
            "none created".to_string()
        } else {
            report.created_projects.join(", ")
        }
    );
    println!("settings_version: {}", report.settings_version);
    println!("agent token:  {}", report.tokens.agent);
    println!("client token: {}", report.tokens.client);
    Ok(ExitCode::SUCCESS)
}

pub fn migrate(db: &Path) -> anyhow::Result<ExitCode> {
    let (_, report) = open_hub(db)?;
    if report.old_version == report.new_version {
        println!("schema v{}: up to date", report.new_version);
    } else if report.old_version == 0 {
        println!("new database created at schema v{}", report.new_version);
    } else {
        println!("schema v{} -> v{}", report.old_version, report.new_version);
    }
    match &report.backup {
        Some(backup) => println!("backup: {}", backup.display()),
        None if report.old_version != 0 && report.old_version != report.new_version => {
            println!("backup: made by the process that migrated first")
        }
        None => {}
    }
    for warning in &report.warnings {
        println!("warning: {warning}");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn tokens(db: &Path, rotate: Option<RotateWhich>) -> anyhow::Result<ExitCode> {
    let (mut hub, _) = open_hub(db)?;
    let tokens = match rotate {
        Some(which) => hub.rotate_token(match which {
            RotateWhich::Agent => TokenRole::Agent,
            RotateWhich::Client => TokenRole::Client,
        })?,
        None => match hub.tokens()? {
            Some(tokens) => tokens,
            None => bail!("the database has no tokens yet: run jira-hub init --config FILE first"),
        },
    };
    println!("agent:  {}", tokens.agent);
    println!("client: {}", tokens.client);
    Ok(ExitCode::SUCCESS)
}

pub fn backup(db: &Path) -> anyhow::Result<ExitCode> {
    let (hub, _) = open_hub(db)?;
    let path = hub.backup_now()?;
    println!("{}", path.display());
    Ok(ExitCode::SUCCESS)
}
