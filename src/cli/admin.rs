//! `init`, `migrate`, `tokens`, `backup`: setting a hub up and looking after its files.

use super::Outcome;
use super::{
    RotateWhich, open_existing_hub, open_hub, open_hub_also_in_empty_file, open_read_only_hub,
};
use crate::service::{ServiceError, TokenRole};
use crate::store::data_dir_of;
use anyhow::{Context, bail};
use std::path::Path;

pub(crate) fn init(
    db: &Path,
    config_path: &Path,
    force: bool,
    if_new: bool,
    use_empty_file: bool,
) -> anyhow::Result<Outcome> {
    // `-` reads standard input: the service user may not be allowed to open the operator's file.
    let text = if config_path == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
            .context("не удалось прочитать конфиг со стандартного ввода")?
    } else {
        std::fs::read_to_string(config_path)
            .with_context(|| format!("не удалось прочитать конфиг {}", config_path.display()))?
    };
    let config: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("конфиг {} — не JSON", config_path.display()))?;
    let (mut hub, _) = if use_empty_file {
        open_hub_also_in_empty_file(db)?
    } else {
        open_hub(db)?
    };
    let report = match hub.init_from_config(&config, force) {
        Err(ServiceError::Conflict { field, .. }) if if_new && field == "settings" => {
            outln!("{} already has settings; nothing changed", db.display());
            return Ok(Outcome::Success);
        }
        result => result?,
    };
    let settings = hub.settings()?;
    outln!("database:    {}", db.display());
    outln!("data folder: {}", data_dir_of(db).display());
    outln!("backups:     {}", data_dir_of(db).join("backups").display());
    outln!(
        "relay_dir:   {}",
        settings.relay_dir.as_deref().map_or_else(
            || {
                format!(
                    "(not set: {} settings set relay_dir '\"/path\"')",
                    crate::program()
                )
            },
            str::to_string,
        )
    );
    outln!("imported:    {}", report.imported_keys.join(", "));
    if !report.ignored_keys.is_empty() {
        outln!(
            "not imported: {} (Jira credentials are never stored)",
            report.ignored_keys.join(", ")
        );
    }
    for warning in &report.warnings {
        outln!("warning:     {warning}");
    }
    outln!(
        "projects:    {}",
        if report.created_projects.is_empty() {
            "none created".to_string()
        } else {
            report.created_projects.join(", ")
        }
    );
    outln!("settings_version: {}", report.settings_version);
    outln!("agent token:  {}", report.tokens.agent);
    outln!("client token: {}", report.tokens.client);
    Ok(Outcome::Success)
}

pub(crate) fn migrate(db: &Path) -> anyhow::Result<Outcome> {
    let (_, report) = super::open_guarded_hub(db)?;
    let migrated = report.old_schema != report.new_schema;
    if report.old_version == 0 {
        outln!("new database created at schema {}", report.new_schema);
    } else if migrated {
        outln!("schema {} -> {}", report.old_schema, report.new_schema);
    } else {
        outln!("schema {}: up to date", report.new_schema);
    }
    match &report.backup {
        Some(backup) => outln!("backup: {}", backup.display()),
        None if report.old_version != 0 && migrated => {
            outln!("backup: made by the process that migrated first")
        }
        None => {}
    }
    for warning in &report.warnings {
        outln!("warning: {warning}");
    }
    Ok(Outcome::Success)
}

pub(crate) fn tokens(db: &Path, rotate: Option<RotateWhich>) -> anyhow::Result<Outcome> {
    let tokens = match rotate {
        Some(which) => open_existing_hub(db)?.rotate_token(match which {
            RotateWhich::Agent => TokenRole::Agent,
            RotateWhich::Client => TokenRole::Client,
        })?,
        None => match open_read_only_hub(db)?.tokens()? {
            Some(tokens) => tokens,
            None => bail!(
                "в базе ещё нет токенов: сначала выполните {} init --config FILE",
                crate::program()
            ),
        },
    };
    outln!("agent:  {}", tokens.agent);
    outln!("client: {}", tokens.client);
    match rotate {
        // The agent reads its credentials once, at start (systemd copies them for the unit when
        // it starts, `LoadCredential=`): the file alone changes nothing until the restart.
        Some(RotateWhich::Agent) => {
            outln!(
                "next:   the old agent token is refused from now on. On the agent's machine, as root:"
            );
            outln!(
                "        (umask 077 && head -n 1 > /etc/credstore/jira-hub-agent.agent_token)   # paste the new agent token, then Enter"
            );
            outln!(
                "        systemctl restart jira-hub-agent   # the unit reads its credentials only when it starts"
            );
        }
        Some(RotateWhich::Client) => {
            outln!(
                "next:   the old client token is refused from now on, and the console's sign-ins made with it end: give the new one to the team"
            );
        }
        None => {}
    }
    Ok(Outcome::Success)
}

pub(crate) fn backup(db: &Path) -> anyhow::Result<Outcome> {
    let hub = open_existing_hub(db)?;
    let path = hub.backup_now()?;
    outln!("{}", path.display());
    Ok(Outcome::Success)
}

pub(crate) fn restore(db: &Path, backup: &Path) -> anyhow::Result<Outcome> {
    let restored = crate::store::restore(db, backup, time::OffsetDateTime::now_utc())?;
    outln!("restored: {}", backup.display());
    outln!("database: {}", db.display());
    match &restored.kept {
        Some(kept) => outln!("previous: {}", kept.display()),
        None => outln!("previous: (no database was at the path)"),
    }
    outln!(
        "schema:   v{} revision {}{}",
        restored.version,
        restored.revision,
        if restored.migrates {
            " (migrated when the hub starts)"
        } else {
            ""
        }
    );
    match &restored.tokens {
        crate::store::RestoredTokens::Kept => {
            outln!("tokens:   kept as they were (the copy's own are not put back)")
        }
        crate::store::RestoredTokens::Copy(why) => outln!(
            "tokens:   the copy's own ({why}): rotate both (jira-hub tokens --rotate client, --rotate agent) if they were rotated since"
        ),
    }
    Ok(Outcome::Success)
}
