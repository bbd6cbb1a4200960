//! `relay inspect PATH`, `relay validate PATH` and `relay init DIR`.

use super::Outcome;
use super::open_read_only_hub;
use crate::protocol::TokenCheck;
use crate::relay::inspect::{collect, escape_for_terminal, format_table, inspect_file};
use crate::service::HubConnection;
use anyhow::Context;
use std::path::Path;

/// `relay init DIR`: the relay folder made ready, saying what was made.
pub(crate) fn init(path: &Path) -> anyhow::Result<Outcome> {
    let made = crate::relay::init_folder(path)
        .with_context(|| format!("не удалось подготовить папку реле {}", path.display()))?;
    if made.is_empty() {
        outln!("{}: already a relay folder; nothing made", path.display());
    }
    for made in made {
        outln!("made {}", made.display());
    }
    Ok(Outcome::Success)
}

pub(crate) fn inspect(db: &Path, path: &Path) -> anyhow::Result<Outcome> {
    let files =
        collect(path).with_context(|| format!("не удалось прочитать {}", path.display()))?;
    // Whether the hub applied a request, and whether its token is the hub's, come from its
    // database, when there is one; the folder can be inspected without it (on the agent's side
    // of the share, say).
    let mut hub = if db.is_file() {
        Some(open_read_only_hub(db)?)
    } else {
        eprintln!(
            "jira-hub: базы {} нет: токены не проверены, применены ли запросы, не показано (укажите --db)",
            db.display()
        );
        None
    };
    let agent_token = agent_token(hub.as_ref())?;
    let mut rows = Vec::new();
    for file in &files {
        let report = inspect_file(file, token_check(agent_token.as_ref()));
        let applied = match (&mut hub, &report.request_key) {
            (Some(hub), Some((kind, id))) => Some(match hub.request_handled_at(kind, id)? {
                Some(at) => format!("applied {at}"),
                // A claim in inbox/ the hub has not answered is one waiting for work (the hub
                // holds it until a command or its wait ends), not a file the hub passed over.
                None if report.kind == "claim"
                    && report.valid.is_ok()
                    && file
                        .parent()
                        .and_then(Path::file_name)
                        .is_some_and(|p| p == "inbox") =>
                {
                    "waiting claim, not answered yet".to_string()
                }
                None => "not applied".to_string(),
            }),
            _ => None,
        };
        rows.push((report, applied));
    }
    if files.is_empty() {
        eprintln!("jira-hub: в {} нет файлов реле", path.display());
    }
    let base = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(path)
    };
    out!("{}", format_table(&rows, base));
    Ok(Outcome::Success)
}

/// The agent token of the hub's database (`None` inside: the hub has none, so no request is
/// authentic); `None` outside when there is no database.
fn agent_token(hub: Option<&HubConnection>) -> anyhow::Result<Option<Option<String>>> {
    Ok(match hub {
        Some(hub) => Some(hub.tokens()?.map(|tokens| tokens.agent)),
        None => None,
    })
}

fn token_check(agent_token: Option<&Option<String>>) -> TokenCheck<'_> {
    match agent_token {
        Some(token) => TokenCheck::Expect(token.as_deref()),
        None => TokenCheck::Skip,
    }
}

pub(crate) fn validate(db: &Path, path: &Path) -> anyhow::Result<Outcome> {
    let files =
        collect(path).with_context(|| format!("не удалось прочитать {}", path.display()))?;
    // The token is judged as the hub judges it when its database is at hand.
    let hub = if db.is_file() {
        Some(open_read_only_hub(db)?)
    } else {
        None
    };
    let agent_token = agent_token(hub.as_ref())?;
    let mut invalid = 0;
    for file in &files {
        let report = inspect_file(file, token_check(agent_token.as_ref()));
        match &report.valid {
            Ok(()) => outln!(
                "ok       {}",
                escape_for_terminal(&file.display().to_string())
            ),
            Err(why) => {
                invalid += 1;
                outln!(
                    "INVALID  {}: {}",
                    escape_for_terminal(&file.display().to_string()),
                    escape_for_terminal(why)
                );
            }
        }
    }
    outln!(
        "{}, {} invalid",
        crate::domain::words::count_en(files.len() as u64, "file"),
        invalid
    );
    Ok(if invalid == 0 {
        Outcome::Success
    } else {
        Outcome::Negative
    })
}
