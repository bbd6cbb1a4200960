//! `projects list` and `projects add LABEL NAME [--board N]`, with the rules of `POST /projects`.

use super::Outcome;
use super::{open_existing_hub, open_read_only_hub};
use crate::service::ProjectView;
use std::path::Path;

fn print_project(project: &ProjectView) -> std::io::Result<()> {
    outln!(
        "{}\t{}\tboard {}\t{}\t{}",
        project.label,
        project.name,
        project.board_id.map_or("-".to_string(), |b| b.to_string()),
        project.board_type.as_deref().unwrap_or("-"),
        project.created_at
    );
    Ok(())
}

pub(crate) fn list(db: &Path) -> anyhow::Result<Outcome> {
    let hub = open_read_only_hub(db)?;
    for project in hub.projects()? {
        print_project(&project)?;
    }
    Ok(Outcome::Success)
}

pub(crate) fn add(
    db: &Path,
    label: &str,
    name: &str,
    board: Option<i64>,
) -> anyhow::Result<Outcome> {
    let mut hub = open_existing_hub(db)?;
    let project = hub.create_project(label, name, board)?;
    print_project(&project)?;
    if let Some(jql) = hub.base_jql()? {
        outln!("base JQL: {jql}");
    }
    Ok(Outcome::Success)
}
