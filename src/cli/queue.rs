//! The queue from the command line: `batches list|show|cancel`, `commands failed|retry`, and
//! `refresh [--project L] [--since-last] [--wait]` with a progress bar fed by the pages as the
//! agent sends them. The same service calls as the HTTP API and the web console.

use super::{Outcome, open_existing_hub, open_read_only_hub};
use crate::domain::command::{BatchStatus, CommandStatus, RunStatus};
use crate::domain::time::shown_utc;
use crate::relay::inspect::escape_for_terminal;
use crate::service::{
    AgentView, BatchView, CommandView, HubConnection, RefreshSince, ServiceError, SyncRunView,
};
use anyhow::Context;
use std::path::Path;
use std::time::Duration;
use time::OffsetDateTime;

/// `batches list`: one page, newest first, filtered by project and status.
pub(crate) fn list_batches(
    db: &Path,
    project: Option<&str>,
    status: Option<&str>,
    before: Option<i64>,
    limit: i64,
    json: bool,
) -> anyhow::Result<Outcome> {
    let status = status
        .map(|s| {
            s.parse::<BatchStatus>().map_err(|_| {
                anyhow::anyhow!(
                    "--status: неизвестный статус пакета «{}»: ожидается queued, running, cancelled или completed",
                    escape_for_terminal(s)
                )
            })
        })
        .transpose()?;
    let mut hub = open_read_only_hub(db)?;
    let batches = hub.batch_page(project, before, Some(limit))?;
    if json {
        let shown: Vec<_> = batches
            .iter()
            .filter(|b| status.is_none_or(|s| b.status == s))
            .collect();
        super::print_json(&shown)?;
        return Ok(Outcome::Success);
    }
    outln!("id\tstatus\tcreated_at\tproject\tcommands\ttitle");
    for batch in batches
        .iter()
        .filter(|b| status.is_none_or(|s| b.status == s))
    {
        outln!(
            "{}\t{}\t{}\t{}\t{}\t{}",
            batch.id,
            batch.status,
            shown_utc(batch.created_at.at()),
            batch.project.as_deref().unwrap_or("-"),
            counters_text(&batch.counters),
            escape_for_terminal(&batch.title)
        );
    }
    Ok(Outcome::Success)
}

/// `batches show ID`: the batch and every command with its status, deliveries, who claimed it,
/// its result or error, and its earlier attempts.
pub(crate) fn show_batch(db: &Path, id: i64, json: bool) -> anyhow::Result<Outcome> {
    let mut hub = open_read_only_hub(db)?;
    let batch = hub.batch(id)?;
    if json {
        super::print_json(&batch)?;
    } else {
        print_batch(&batch)?;
    }
    Ok(Outcome::Success)
}

/// `batches cancel ID`.
pub(crate) fn cancel_batch(db: &Path, id: i64) -> anyhow::Result<Outcome> {
    let mut hub = open_existing_hub(db)?;
    print_batch(&hub.cancel_batch(id)?)?;
    Ok(Outcome::Success)
}

/// `batches prune [--export FILE] [--dry-run]`.
pub(crate) fn prune_batches(
    db: &Path,
    export: Option<&Path>,
    dry_run: bool,
) -> anyhow::Result<Outcome> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut hub = open_existing_hub(db)?;
    let mut file = export
        .map(|path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(path)
                .map(|file| std::io::BufWriter::new(Synced(file)))
                .with_context(|| format!("не удалось открыть файл выгрузки {}", path.display()))
        })
        .transpose()?;
    let pruned =
        hub.prune_finished_now(file.as_mut().map(|f| f as &mut dyn std::io::Write), dry_run)?;
    outln!(
        "{} {}: {}, {}",
        if dry_run { "would prune" } else { "pruned" },
        crate::domain::words::count_en(pruned.batches, "batch"),
        crate::domain::words::count_en(pruned.commands, "command"),
        crate::domain::words::count_en(pruned.attempts, "earlier attempt"),
    );
    if let Some(path) = export {
        outln!("exported to {}", path.display());
    }
    Ok(Outcome::Success)
}

/// A file whose flush syncs it: the export is on disk before the rows it holds are deleted.
struct Synced(std::fs::File);

impl std::io::Write for Synced {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.sync_data()
    }
}

/// `refresh confirm RUN`: a held full refresh's removals are applied.
pub(crate) fn confirm_refresh(db: &Path, run: i64) -> anyhow::Result<Outcome> {
    let mut hub = open_existing_hub(db)?;
    let confirmed = hub.confirm_run(run, "CLI")?;
    outln!(
        "refresh run {}: {} removed from the mirror",
        confirmed.run_id,
        crate::domain::words::count_en(confirmed.removed as u64, "issue")
    );
    Ok(Outcome::Success)
}

/// `commands failed`: what ended failed or skipped, newest first.
pub(crate) fn failed_commands(db: &Path, limit: i64, json: bool) -> anyhow::Result<Outcome> {
    let mut hub = open_read_only_hub(db)?;
    let commands = hub.failed_commands(limit)?;
    if json {
        super::print_json(&commands)?;
        return Ok(Outcome::Success);
    }
    if commands.is_empty() {
        outln!("no failed or skipped commands");
    }
    for command in &commands {
        print_command(command)?;
    }
    Ok(Outcome::Success)
}

/// `commands retry ID…` or `commands retry --batch B`: queued again, history kept. Every id is
/// tried; the exit is 1 when any was refused.
pub(crate) fn retry(
    db: &Path,
    ids: &[i64],
    batch: Option<i64>,
    overwrite: bool,
) -> anyhow::Result<Outcome> {
    let mut hub = open_existing_hub(db)?;
    if let Some(batch) = batch {
        let view = hub.retry_failed(batch)?;
        print_batch(&view)?;
        return Ok(Outcome::Success);
    }
    each_command(ids, "не повторено", |id| {
        let command = if overwrite {
            hub.retry_overwriting(id)?
        } else {
            hub.retry_command(id)?
        };
        Ok(format!(
            "batch {}, command {} (id {id}): queued again (attempt {}){}",
            command.batch_id,
            command.seq,
            command.attempts.len() + 1,
            if overwrite {
                ", overwriting Jira's values"
            } else {
                ""
            }
        ))
    })
}

/// `commands keep-jira ID…`: each edit stopped by a conflict ends cancelled.
pub(crate) fn keep_jira(db: &Path, ids: &[i64]) -> anyhow::Result<Outcome> {
    let mut hub = open_existing_hub(db)?;
    each_command(ids, "не оставлено как в Jira", |id| {
        let command = hub.keep_jira(id, "cli")?;
        Ok(format!(
            "batch {}, command {} (id {id}): cancelled, left as Jira has it",
            command.batch_id, command.seq
        ))
    })
}

/// `commands enqueue-dependents ID…`: the skipped dependents of each edit left as Jira has it,
/// enqueued again as a new batch.
pub(crate) fn enqueue_dependents(db: &Path, ids: &[i64]) -> anyhow::Result<Outcome> {
    let mut hub = open_existing_hub(db)?;
    each_command(
        ids,
        "зависящие не поставлены снова у",
        |id| {
            let batch = hub.enqueue_dependents_again(id, "cli")?;
            Ok(format!(
                "command {id}: its skipped dependents were enqueued as batch {} ({} commands)",
                batch.id,
                batch.commands.len()
            ))
        },
    )
}

/// Runs `action` on each command id and prints the line it answers; a refusal (no such command,
/// a conflict) is told on stderr and the others go on; the exit says how many were refused.
fn each_command(
    ids: &[i64],
    refused_words: &str,
    mut action: impl FnMut(i64) -> Result<String, ServiceError>,
) -> anyhow::Result<Outcome> {
    let mut refused = 0;
    for &id in ids {
        match action(id) {
            Ok(line) => outln!("{line}"),
            Err(error @ (ServiceError::NotFound(_) | ServiceError::Conflict { .. })) => {
                refused += 1;
                // The hub's reason alone: its field name (`command`) is for programs.
                let reason = match &error {
                    ServiceError::Conflict { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                eprintln!("jira-hub: команда с id {id}: {reason}");
            }
            Err(error) => return Err(error.into()),
        }
    }
    if refused > 0 {
        anyhow::bail!("{refused_words} команд: {refused} из {}", ids.len());
    }
    Ok(Outcome::Success)
}

/// `refresh`: enqueues a refresh of everything (the base JQL) or of one project, or follows the
/// one of the same scope already queued or claimed; with `wait`, follows it until it ends, a
/// progress bar on a terminal (plain lines otherwise), and exits 1 when it failed or when
/// `timeout` passed first (the refresh stays queued).
pub(crate) fn refresh(
    db: &Path,
    project: Option<&str>,
    since_last: bool,
    wait: bool,
    timeout: Option<u64>,
) -> anyhow::Result<Outcome> {
    let mut hub = open_existing_hub(db)?;
    let since = if since_last {
        RefreshSince::Last
    } else {
        RefreshSince::Full
    };
    let (batch, new) = hub.request_refresh(project, "cli", since)?;
    let command = batch
        .commands
        .first()
        .context("пакет обновления без команды")?;
    let jql = command
        .params
        .get("jql")
        .and_then(|j| j.as_str())
        .unwrap_or("?");
    if new {
        outln!("batch {}: refresh queued ({jql})", batch.id);
    } else {
        outln!(
            "batch {}: a refresh of the same scope is already {} ({jql}); no other queued",
            batch.id,
            command.status.as_str()
        );
    }
    if !wait {
        return Ok(Outcome::Success);
    }
    follow_refresh(&mut hub, batch.id, command.id, timeout)
}

/// Why nobody may be running the refresh: no agent has ever contacted the hub, or every agent
/// is silent (no request of its own for two of its heartbeat periods, or 20 minutes for an
/// agent that never told its period). `None` while an agent is about.
fn no_agent_warning(agents: &[AgentView], now: OffsetDateTime) -> Option<String> {
    // An agent that only ran `agent --check` runs nothing: it is no agent to wait for.
    let workers: Vec<&AgentView> = agents.iter().filter(|a| !a.check_only).collect();
    if workers.is_empty() {
        return Some(
            "no agent has contacted this hub yet: the refresh waits until one claims it \
             (Ctrl-C stops waiting; the refresh stays queued)"
                .to_string(),
        );
    }
    let about: Vec<&AgentView> = workers.iter().copied().filter(|a| !a.silent).collect();
    if about.is_empty() {
        let silent: Vec<String> = workers.iter().map(|a| silence(a, now)).collect();
        return Some(format!(
            "every agent is silent ({}): the refresh waits until one claims it \
             (Ctrl-C stops waiting; the refresh stays queued)",
            silent.join("; ")
        ));
    }
    // Agents about, but Jira held for every one of them: say why.
    if about.iter().all(|a| a.jira_held.is_some()) {
        let words: Vec<String> = about
            .iter()
            .filter_map(|a| Some(format!("{}: {}", a.agent, a.jira_held.as_deref()?)))
            .collect();
        return Some(format!(
            "{}; the refresh waits until Jira takes the agent again \
             (Ctrl-C stops waiting; the refresh stays queued)",
            crate::relay::inspect::escape_for_terminal(&words.join("; "))
        ));
    }
    None
}

/// `agent-1 silent since 2026-12-01 15:00:00 UTC (2 min; 4 heartbeats missed, one every 30 s)`.
fn silence(agent: &AgentView, now: OffsetDateTime) -> String {
    format!(
        "{} silent since {} ({})",
        escape_for_terminal(&agent.agent),
        shown_utc(agent.last_seen_at.at()),
        super::status::silence_words(agent, now)
    )
}

/// Polls the database (the daemon and the agent do the work) until the refresh command ends, or
/// `timeout` seconds pass. Says once, on stderr, when no agent is about to run it.
fn follow_refresh(
    hub: &mut HubConnection,
    batch_id: i64,
    command_id: i64,
    timeout: Option<u64>,
) -> anyhow::Result<Outcome> {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {elapsed_precise} {wide_bar} {msg}")
            .context("шаблон индикатора")?,
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let plain = bar.is_hidden();
    let started = std::time::Instant::now();
    let mut warned = false;
    let mut last_line = String::new();
    let command = loop {
        let batch = hub.batch(batch_id)?;
        let command = batch
            .commands
            .into_iter()
            .find(|c| c.id == command_id)
            .context("команда обновления пропала из пакета")?;
        let agents = hub.agents()?;
        let now = hub.now_utc();
        if !warned
            && command.status == CommandStatus::Queued
            && let Some(warning) = no_agent_warning(&agents, now)
        {
            bar.suspend(|| eprintln!("jira-hub: warning: {warning}"));
            warned = true;
        }
        let run = hub.run_of_command(command_id)?;
        let line = progress_line(&command, run.as_ref(), &agents, now);
        if let Some(run) = run.as_ref().filter(|r| r.run.status == RunStatus::Running)
            && let Some(total) = run.run.total
        {
            bar.set_length(total.max(0) as u64);
            bar.set_position(run.run.issues_seen.max(0) as u64);
        }
        bar.set_message(line.clone());
        if plain && line != last_line {
            eprintln!("{line}");
        }
        last_line = line;
        if command.status.is_terminal() {
            break command;
        }
        if let Some(limit) = timeout
            && started.elapsed() >= Duration::from_secs(limit)
        {
            bar.finish_and_clear();
            anyhow::bail!(
                "обновление (пакет {batch_id}) не закончилось за {limit} с (--timeout), статус «{}»; оно остаётся в очереди",
                command.status.label()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    bar.finish_and_clear();
    let run = hub.run_of_command(command_id)?;
    outln!("{}", outcome_line(&command, run.as_ref()));
    Ok(match command.status {
        CommandStatus::Done | CommandStatus::ConfirmedByState => Outcome::Success,
        _ => Outcome::Negative,
    })
}

/// What the refresh is doing now; an agent it waits for that is silent is named, with since when.
fn progress_line(
    command: &CommandView,
    run: Option<&SyncRunView>,
    agents: &[AgentView],
    now: OffsetDateTime,
) -> String {
    let holder = command
        .claimed_by
        .as_deref()
        .and_then(|name| agents.iter().find(|a| a.agent == name))
        .filter(|a| a.silent);
    match (command.status, run) {
        (CommandStatus::Queued, _)
            if agents.iter().any(|a| a.silent)
                && agents.iter().all(|a| a.silent || a.check_only) =>
        {
            let silent: Vec<String> = agents
                .iter()
                .filter(|a| a.silent)
                .map(|a| silence(a, now))
                .collect();
            format!("queued, no agent about: {}", silent.join("; "))
        }
        (CommandStatus::Queued, _) => "queued, waiting for the agent".to_string(),
        (CommandStatus::Claimed, _) if let Some(agent) = holder => {
            format!("claimed by {}", silence(agent, now))
        }
        (CommandStatus::Claimed, None) => format!(
            "claimed by {}, no page yet",
            command
                .claimed_by
                .as_deref()
                .map_or("?".into(), escape_for_terminal)
        ),
        (_, Some(run)) => format!(
            "{}, {}{}",
            crate::domain::words::count_en(run.run.pages.max(0) as u64, "page"),
            crate::domain::words::count_en(run.run.issues_seen.max(0) as u64, "issue"),
            run.run
                .total
                .map(|t| format!(" of {t}"))
                .unwrap_or_default()
        ),
        (status, None) => status.as_str().to_string(),
    }
}

fn outcome_line(command: &CommandView, run: Option<&SyncRunView>) -> String {
    let mut line = format!(
        "batch {}: refresh {}",
        command.batch_id,
        command.status.as_str()
    );
    if let Some(run) = run {
        line.push_str(&format!(
            " (run {}, {}, {}, {} seen, {} changed",
            run.run.id,
            run.kind.as_str(),
            crate::domain::words::count_en(run.run.pages.max(0) as u64, "page"),
            crate::domain::words::count_en(run.run.issues_seen.max(0) as u64, "issue"),
            run.run.issues_changed
        ));
        if let Some(finished) = &run.run.finished_at {
            // Tenths of a second: a quick refresh is not "0 s".
            let millis = (finished.at() - run.run.started_at.at()).whole_milliseconds();
            line.push_str(&format!(", {:.1} s", millis.max(0) as f64 / 1000.0));
        }
        line.push(')');
    }
    if let Some(error) = &command.error {
        line.push_str(&format!(": {}", escape_for_terminal(error)));
    }
    line
}

fn counters_text(counters: &std::collections::BTreeMap<&'static str, usize>) -> String {
    let parts: Vec<String> = counters
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(status, n)| format!("{status} {n}"))
        .collect();
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

fn print_batch(batch: &BatchView) -> std::io::Result<()> {
    outln!(
        "batch {}: {} ({}), {}",
        batch.id,
        escape_for_terminal(&batch.title),
        batch.status,
        counters_text(&batch.counters)
    );
    outln!(
        "  author {}, project {}, created {}{}",
        escape_for_terminal(&batch.author),
        batch.project.as_deref().unwrap_or("-"),
        shown_utc(batch.created_at.at()),
        batch
            .cancelled_at
            .as_ref()
            .map(|c| format!(", cancelled {}", shown_utc(c.at())))
            .unwrap_or_default()
    );
    for command in &batch.commands {
        print_command(command)?;
    }
    Ok(())
}

fn print_command(command: &CommandView) -> std::io::Result<()> {
    outln!(
        "  batch {}, command {} (id {}) {}: {}, deliveries {}, claimed by {}",
        command.batch_id,
        command.seq,
        command.id,
        command.command_type.as_str(),
        command.status.as_str(),
        command.deliveries,
        command
            .claimed_by
            .as_deref()
            .map_or("-".into(), escape_for_terminal)
    );
    if let Some(error) = &command.error {
        outln!("      error: {}", escape_for_terminal(error));
    }
    if let Some(result) = &command.result {
        outln!("      result: {}", escape_for_terminal(&result.to_string()));
    }
    if let Some(marker) = &command.may_exist_in_jira {
        outln!(
            "      may exist in Jira: look for the entity property jira-hub {}",
            escape_for_terminal(&marker.to_string())
        );
    }
    for (n, attempt) in command.attempts.iter().enumerate() {
        outln!(
            "      attempt {}: {}, deliveries {}, retried {}{}",
            n + 1,
            attempt.status.as_str(),
            attempt.deliveries,
            shown_utc(attempt.retried_at.at()),
            attempt
                .error
                .as_ref()
                .map(|e| format!(": {}", escape_for_terminal(e)))
                .unwrap_or_default()
        );
    }
    Ok(())
}
