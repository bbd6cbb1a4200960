//! `jira-hub status`: what an operator wants to see first, in plain text.

use super::Outcome;
use super::open_read_only_hub;
use crate::relay::describe_relay_dir;
use crate::relay::inspect::escape_for_terminal;
use std::path::Path;

pub(crate) fn status(db: &Path) -> anyhow::Result<Outcome> {
    let hub = open_read_only_hub(db)?;
    let status = hub.status()?;
    outln!(
        "database:     {} (schema v{})",
        status.db_path.display(),
        status.schema_version
    );
    if !status.initialized {
        outln!(
            "              not initialised: run {} --db {} init --config FILE",
            crate::program(),
            status.db_path.display()
        );
    }
    outln!(
        "settings:     version {}, Jira project {}",
        status.settings_version,
        status.project_key.as_deref().unwrap_or("(not set)")
    );
    outln!("projects:     {}", status.projects.len());
    for project in &status.projects {
        outln!(
            "  {:<20} {}{}",
            project.label,
            project.name,
            project
                .board_id
                .map(|b| format!(" (board {b})"))
                .unwrap_or_default()
        );
    }
    outln!(
        "base JQL:     {}",
        status.base_jql.as_deref().unwrap_or("(none: no projects)")
    );
    outln!(
        "mirror:       {}, {}",
        crate::domain::words::count_en(status.counts.issues.max(0) as u64, "issue"),
        crate::domain::words::count_en(status.counts.notes.max(0) as u64, "note")
    );
    let queue: Vec<String> = status
        .counts
        .queue
        .iter()
        .map(|q| format!("{} {}", q.status, q.commands))
        .collect();
    outln!(
        "queue:        {}; {}",
        crate::domain::words::count_en(status.counts.batches.max(0) as u64, "batch"),
        if queue.is_empty() {
            "no commands".to_string()
        } else {
            queue.join(", ")
        }
    );
    match &status.last_full_refresh {
        Some(run) => outln!(
            "full refresh: {} ({})",
            run.finished_at.as_ref().unwrap_or(&run.started_at),
            crate::domain::words::count_en(run.issues_seen.max(0) as u64, "issue")
        ),
        None => outln!("full refresh: never"),
    }
    if let Some(run) = &status.last_refresh {
        outln!(
            "last refresh: {} ({}, {}, {} changed)",
            run.run.finished_at.as_ref().unwrap_or(&run.run.started_at),
            run.kind,
            crate::domain::words::count_en(run.run.issues_seen.max(0) as u64, "issue"),
            run.run.issues_changed
        );
    }
    for held in &status.held_runs {
        outln!(
            "held:         refresh run {} would remove {}; confirm with `jira-hub refresh confirm {}`",
            held.run_id,
            crate::domain::words::count_en(held.would_remove.max(0) as u64, "issue"),
            held.run_id
        );
    }
    if status.counts.agents.is_empty() {
        outln!("agents:       none seen");
    }
    for agent in &status.counts.agents {
        // What agents sent is shown, never obeyed: control characters are escaped.
        let line = format!(
            "{} {} last seen {}{}",
            agent.agent,
            agent.version.as_deref().unwrap_or("?"),
            agent.last_seen_at,
            match agent.jira_ok {
                Some(true) => ", Jira ok".to_string(),
                Some(false) => format!(
                    ", Jira failing: {}",
                    agent.last_error.as_deref().unwrap_or("?")
                ),
                None => String::new(),
            }
        );
        outln!("agent:        {}", escape_for_terminal(&line));
    }
    outln!(
        "relay:        {}",
        describe_relay_dir(status.relay_dir.as_deref())
    );
    Ok(Outcome::Success)
}
