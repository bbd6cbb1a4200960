//! `jira-hub status`: what an operator wants to see first, in plain text.

use super::Outcome;
use super::{open_existing_hub, open_read_only_hub};
use crate::domain::time::shown_utc;
use crate::domain::words::count_en;
use crate::relay::describe_relay_dir;
use crate::relay::inspect::escape_for_terminal;
use crate::service::{AgentView, StatusReport};
use std::path::Path;
use time::OffsetDateTime;

/// The newest backup may be this old before the hub counts as degraded: the daemon makes one a
/// day, so two days is one missed.
const BACKUP_TOO_OLD: time::Duration = time::Duration::days(2);

/// Why the hub is degraded, as `status --check` judges from its database at `now` (empty: it
/// is not). What the database cannot tell (whether the daemon runs, answers `/ready`, can write)
/// is `/ready`'s and `/metrics`' to say.
pub(crate) fn degraded(status: &StatusReport, now: OffsetDateTime) -> Vec<String> {
    let mut why = Vec::new();
    if !status.initialized {
        why.push("the database was never initialised (no tokens)".to_string());
    }
    let agents: Vec<&AgentView> = status
        .counts
        .agents
        .iter()
        .filter(|agent| !agent.check_only)
        .collect();
    if agents.is_empty() {
        why.push("no agent has been seen".to_string());
    } else if agents.iter().all(|agent| agent.silent) {
        why.push(format!(
            "every agent is silent ({})",
            agents
                .iter()
                .map(|agent| format!(
                    "{} since {}",
                    agent.agent,
                    shown_utc(agent.last_seen_at.at())
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for agent in agents.iter().filter(|agent| !agent.silent) {
        if agent.jira_ok == Some(false) {
            why.push(format!(
                "agent {} says Jira is failing: {}",
                agent.agent,
                agent
                    .jira_held
                    .as_deref()
                    .or(agent.last_error.as_deref())
                    .unwrap_or("?")
            ));
        }
    }
    for held in &status.held_runs {
        why.push(format!(
            "full refresh run {} waits for a confirmation (it would remove {})",
            held.run_id,
            count_en(held.would_remove.max(0) as u64, "issue")
        ));
    }
    match &status.last_backup_at {
        None => why.push("there is no backup in backups/".to_string()),
        Some(at) if now - at.at() > BACKUP_TOO_OLD => why.push(format!(
            "the newest backup is from {}, more than two days ago",
            shown_utc(at.at())
        )),
        Some(_) => {}
    }
    why.into_iter()
        .map(|line| escape_for_terminal(&line))
        .collect()
}

pub(crate) fn status(db: &Path, json: bool, check: bool) -> anyhow::Result<Outcome> {
    let hub = open_read_only_hub(db)?;
    let status = hub.status()?;
    let why = degraded(&status, hub.now_utc());
    let outcome = if check && !why.is_empty() {
        Outcome::Negative
    } else {
        Outcome::Success
    };
    if json {
        let mut shown = serde_json::to_value(&status)?;
        shown["degraded"] = serde_json::json!(why);
        super::print_json(&shown)?;
        return Ok(outcome);
    }
    if check {
        use std::io::Write as _;
        let mut stderr = std::io::stderr().lock();
        for line in &why {
            let _ = writeln!(stderr, "degraded: {line}");
        }
    }
    // The schema as `migrate` names it (`v4r18`), so that the two agree.
    outln!(
        "database:     {} (schema v{}r{})",
        status.db_path.display(),
        status.schema_version,
        crate::service::SCHEMA_REVISION
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
            shown_utc(run.finished_at.as_ref().unwrap_or(&run.started_at).at()),
            crate::domain::words::count_en(run.issues_seen.max(0) as u64, "issue")
        ),
        None => outln!("full refresh: never"),
    }
    if let Some(run) = &status.last_refresh {
        outln!(
            "last refresh: {} ({}, {}, {} changed)",
            shown_utc(
                run.run
                    .finished_at
                    .as_ref()
                    .unwrap_or(&run.run.started_at)
                    .at()
            ),
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
    let now = hub.now_utc();
    for agent in &status.counts.agents {
        outln!("agent:        {}", agent_line(agent, now));
    }
    outln!(
        "relay:        {}",
        describe_relay_dir(status.relay_dir.as_deref())
    );
    // A backup keeps the relay folder's name, not its files: the counts above are the live
    // folder's now.
    if status.relay_dir.is_some() && crate::store::is_in_backups(db) {
        outln!(
            "              (this is a backup: the relay counts are the live folder's now, not as they were when it was made)"
        );
    }
    outln!(
        "backup:       {}",
        status
            .last_backup_at
            .as_ref()
            .map_or("none".to_string(), |at| shown_utc(at.at()))
    );
    Ok(outcome)
}

/// One agent as `status` and `agents list` show it, judged by the hub's one silence rule at
/// `now`: a silent agent says since when and how many heartbeats it missed, never «Jira ok»
/// (what it last said of Jira is no longer known); an agent that only ran `agent --check` is a
/// check. What agents sent is shown, never obeyed: control characters are escaped.
pub(crate) fn agent_line(agent: &AgentView, now: OffsetDateTime) -> String {
    let seen = shown_utc(agent.last_seen_at.at());
    let line = if agent.check_only {
        format!(
            "{} {} ran a check (agent --check) at {seen}{}",
            agent.agent,
            agent.version.as_deref().unwrap_or("?"),
            match &agent.last_check {
                Some(check) if check.ok => ": all passed".to_string(),
                Some(check) => format!(
                    ": {} failed",
                    count_en(check.lines.iter().filter(|l| !l.ok).count() as u64, "check")
                ),
                None => String::new(),
            }
        )
    } else if agent.silent {
        format!(
            "{} {} silent since {seen} ({}); Jira's state unknown",
            agent.agent,
            agent.version.as_deref().unwrap_or("?"),
            silence_words(agent, now)
        )
    } else {
        format!(
            "{} {} last seen {seen}{}",
            agent.agent,
            agent.version.as_deref().unwrap_or("?"),
            match agent.jira_ok {
                Some(true) => ", Jira ok".to_string(),
                Some(false) => format!(
                    ", Jira failing: {}",
                    agent
                        .jira_held
                        .as_deref()
                        .or(agent.last_error.as_deref())
                        .unwrap_or("?")
                ),
                None => String::new(),
            }
        )
    };
    escape_for_terminal(&line)
}

/// How long a silent agent has been silent, and what it missed: `2 min; 4 heartbeats missed,
/// one every 30 s` (`no request for 20 min` for one that never told its period).
pub(crate) fn silence_words(agent: &AgentView, now: OffsetDateTime) -> String {
    let ago = match (now - agent.last_seen_at.at()).whole_seconds().max(0) {
        s @ ..120 => format!("{s} s"),
        s @ ..7200 => format!("{} min", s / 60),
        s @ ..172_800 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        s => format!("{} days {} h", s / 86_400, s % 86_400 / 3600),
    };
    match agent.heartbeat_seconds {
        Some(period) => format!(
            "{ago}; {} missed, one every {period} s",
            count_en(crate::service::missed_heartbeats(agent, now), "heartbeat")
        ),
        None => format!(
            "{ago}; no request within {} min",
            agent.silent_after_seconds / 60
        ),
    }
}

/// `agents list`: every agent the hub knows, as `status` lists them.
pub(crate) fn list_agents(db: &Path, json: bool) -> anyhow::Result<Outcome> {
    let mut hub = open_read_only_hub(db)?;
    let agents = hub.agents()?;
    if json {
        super::print_json(&agents)?;
        return Ok(Outcome::Success);
    }
    let now = hub.now_utc();
    if agents.is_empty() {
        outln!("Агент ещё не обращался к хабу.");
    }
    for agent in &agents {
        outln!("{}", agent_line(agent, now));
    }
    Ok(Outcome::Success)
}

/// `agents forget NAME`: forgets a silent agent, or one that only ran a check.
pub(crate) fn forget_agent(db: &Path, name: &str) -> anyhow::Result<Outcome> {
    let mut hub = open_existing_hub(db)?;
    let agent = hub.forget_agent(name)?;
    outln!(
        "Агент «{}» забыт (последний раз на связи {}); он появится снова, если обратится к хабу.",
        escape_for_terminal(&agent.agent),
        shown_utc(agent.last_seen_at.at())
    );
    Ok(Outcome::Success)
}
