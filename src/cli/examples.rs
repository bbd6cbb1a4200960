//! Examples for every command: shown at the end of its `--help` and as the EXAMPLES section of
//! its man page (`jira-hub man --dir`, which scripts/dist.sh runs for the package).

use anyhow::Context;
use std::path::Path;

/// One example: what it does, then the command line.
type Example = (&'static str, &'static str);

/// The examples of a command, by its man page's name (`jira-hub-refresh`).
fn examples(page: &str) -> &'static [Example] {
    match page {
        "jira-hub" => &[
            (
                "Set a hub up from the legacy sync config and run it:",
                "jira-hub init --config /etc/jira-sync/config.json\njira-hub serve --listen 0.0.0.0:8740",
            ),
            (
                "What the hub is doing, on another database than ./data/hub.sqlite:",
                "jira-hub --db /var/lib/jira-hub/hub.sqlite status",
            ),
        ],
        "jira-hub-init" => &[
            (
                "Import the legacy sync config into a new database:",
                "jira-hub --db /var/lib/jira-hub/hub.sqlite init --config config.json",
            ),
            (
                "The same from a provisioning script, as the service user, doing nothing the second time:",
                "runuser -u jira-hub -- jira-hub init --config - --if-new < config.json",
            ),
        ],
        "jira-hub-migrate" => &[(
            "Bring an older database to this version's schema (a backup is made first):",
            "jira-hub --db /var/lib/jira-hub/hub.sqlite migrate",
        )],
        "jira-hub-settings" => &[(
            "Read and write settings:",
            "jira-hub settings get\njira-hub settings set auto_refresh_minutes 15",
        )],
        "jira-hub-settings-get" => &[
            ("Every setting (tokens excepted):", "jira-hub settings get"),
            ("One of them:", "jira-hub settings get relay_dir"),
        ],
        "jira-hub-settings-set" => &[
            (
                "Point the hub at the shared folder (a JSON string, so in quotes):",
                "jira-hub settings set relay_dir '\"/srv/jira-bridge\"'",
            ),
            (
                "Refresh the mirror every 15 minutes:",
                "jira-hub settings set auto_refresh_minutes 15",
            ),
        ],
        "jira-hub-projects" => &[(
            "The projects, then a new one:",
            "jira-hub projects list\njira-hub projects add STOCKS_DRRK \"Склады\" --board 4217",
        )],
        "jira-hub-projects-list" => {
            &[("The projects in base-JQL order:", "jira-hub projects list")]
        }
        "jira-hub-projects-add" => &[(
            "A project labelled AWPCA with its board:",
            "jira-hub projects add AWPCA \"Рабочее место\" --board 4216",
        )],
        "jira-hub-tokens" => &[
            ("Print both tokens:", "jira-hub tokens"),
            (
                "Replace the agent's token (then give the agent the new one):",
                "jira-hub tokens --rotate agent",
            ),
        ],
        "jira-hub-status" => &[(
            "A summary of the hub behind the installed unit:",
            "runuser -u jira-hub -- jira-hub --db /var/lib/jira-hub/hub.sqlite status",
        )],
        "jira-hub-backup" => &[(
            "A copy of the database into backups/ beside it, now:",
            "jira-hub --db /var/lib/jira-hub/hub.sqlite backup",
        )],
        "jira-hub-restore" => &[(
            "Put the newest backup in place of the database (stop the hub first):",
            "sudo systemctl stop jira-hub && sudo -u jira-hub jira-hub --db /var/lib/jira-hub/hub.sqlite restore /var/lib/jira-hub/backups/20260101-030000-periodic.sqlite && sudo systemctl start jira-hub",
        )],
        "jira-hub-serve" => &[
            (
                "A hub for a quick look (settings from the legacy config, a relay folder beside):",
                "jira-hub serve --init-from admin/jira-sync/config.example.json --default-relay-dir ./relay",
            ),
            (
                "Listening on every address, for the agent's HTTP transport:",
                "jira-hub --db /var/lib/jira-hub/hub.sqlite serve --listen 0.0.0.0:8740",
            ),
        ],
        "jira-hub-relay" => &[(
            "Look at the shared folder:",
            "jira-hub relay inspect /srv/jira-bridge",
        )],
        "jira-hub-relay-inspect" => &[
            (
                "Every file of the shared folder:",
                "jira-hub relay inspect /srv/jira-bridge",
            ),
            (
                "One request file:",
                "jira-hub relay inspect /srv/jira-bridge/inbox/claim-agent-1-0194c2.json",
            ),
        ],
        "jira-hub-relay-validate" => &[(
            "Check files written by hand or by another agent:",
            "jira-hub relay validate relay-samples/",
        )],
        "jira-hub-demo" => &[
            (
                "The whole loop on this machine (Ctrl-C stops it; running it again continues):",
                "jira-hub demo",
            ),
            (
                "Another folder and port, with Jira's rate limiting:",
                "jira-hub demo --dir /tmp/jira-demo --listen 127.0.0.1:8750 --rate-limit",
            ),
        ],
        "jira-hub-refresh-confirm" => &[(
            "See the held run and its counts, then apply its removals:",
            "jira-hub status\njira-hub refresh confirm 17",
        )],
        "jira-hub-relay-init" => &[(
            "Prepare the share's folder once it is mounted, as the hub's user (folders 2770, setgid: the share's group, jira-relay, reads and writes them):",
            "runuser -u jira-hub -- jira-hub relay init /srv/jira-bridge",
        )],
        "jira-hub-agents" => &[(
            "Which agents are about, then forget one that was renamed:",
            "jira-hub agents list\njira-hub agents forget old-name",
        )],
        "jira-hub-agents-list" => &[(
            "Every agent: live, silent (since when, heartbeats missed) or a one-off check:",
            "jira-hub agents list",
        )],
        "jira-hub-agents-forget" => &[(
            "Forget a silent agent, or a name that only ran agent --check:",
            "jira-hub agents forget old-name",
        )],
        "jira-hub-batches" => &[(
            "The newest batches, then one of them:",
            "jira-hub batches list\njira-hub batches show 42",
        )],
        "jira-hub-batches-list" => &[
            ("Every batch, newest first:", "jira-hub batches list"),
            (
                "Only one project's running batches:",
                "jira-hub batches list --project AWPCA --status running",
            ),
        ],
        "jira-hub-batches-show" => &[("Batch 42 with its commands:", "jira-hub batches show 42")],
        "jira-hub-batches-cancel" => &[(
            "Cancel batch 42 (commands already at the agent finish):",
            "jira-hub batches cancel 42",
        )],
        "jira-hub-batches-prune" => &[
            (
                "What the retention setting would delete now, written out, nothing deleted:",
                "jira-hub batches prune --dry-run --export /var/tmp/would-prune.jsonl",
            ),
            (
                "Delete now, keeping each deleted batch as a JSON line (e.g. from cron, with retention off in the daemon):",
                "jira-hub batches prune --export /var/lib/jira-hub/pruned.jsonl",
            ),
        ],
        "jira-hub-commands" => &[(
            "What failed, then queue it again:",
            "jira-hub commands failed\njira-hub commands retry --batch 42",
        )],
        "jira-hub-commands-failed" => &[(
            "The 20 newest failed or skipped commands:",
            "jira-hub commands failed --limit 20",
        )],
        "jira-hub-commands-retry" => &[
            ("Two commands again:", "jira-hub commands retry 17 18"),
            (
                "Every failed and skipped command of batch 42:",
                "jira-hub commands retry --batch 42",
            ),
            (
                "An edit stopped by a change made in Jira, written over it:",
                "jira-hub commands retry 17 --overwrite",
            ),
        ],
        "jira-hub-commands-keep-jira" => &[(
            "An edit stopped by a change made in Jira, left as Jira has it:",
            "jira-hub commands keep-jira 17",
        )],
        "jira-hub-commands-enqueue-dependents" => &[(
            "The commands skipped after edit 17 was left as Jira has it, as a new batch:",
            "jira-hub commands enqueue-dependents 17",
        )],
        "jira-hub-refresh" => &[
            ("Queue a full refresh of the mirror:", "jira-hub refresh"),
            (
                "Only what changed in one project, followed for at most 10 minutes:",
                "jira-hub refresh --project AWPCA --since-last --wait --timeout 600",
            ),
        ],
        "jira-hub-completions" => &[(
            "Completions for bash, for the current user:",
            "jira-hub completions bash > ~/.local/share/bash-completion/completions/jira-hub",
        )],
        "jira-hub-man" => &[
            (
                "The main page (on a terminal it opens in man; piped, it is roff):",
                "jira-hub man\njira-hub man > jira-hub.1",
            ),
            (
                "A page for every command:",
                "jira-hub man --dir /usr/local/share/man/man1",
            ),
        ],
        "jira-hub-agent" => &[
            (
                "The agent inside Jira's network, with its config:",
                "jira-hub agent --config /etc/jira-hub-agent/agent.json",
            ),
            (
                "One round (heartbeat, claim, run, report), to try a config:",
                "jira-hub agent --config agent.json --once",
            ),
            (
                "Before letting it write: check the hub's settings against Jira, writing nothing (exit 1 on a mismatch):",
                "jira-hub agent --config /etc/jira-hub-agent/agent.json --check",
            ),
        ],
        "jira-hub-sim-jira" => &[(
            "The simulated Jira alone, with the legacy config a hub takes for it (the install test):",
            "jira-hub sim-jira --hub-config /tmp/config.json",
        )],
        _ => &[],
    }
}

/// The man page's name of a command: `jira-hub`, `jira-hub-batches-list`.
fn page_name(path: &[&str]) -> String {
    path.join("-")
}

/// `command` and its subcommands, each with its examples at the end of its `--help`.
pub(crate) fn with_examples(command: clap::Command) -> clap::Command {
    fn add(command: clap::Command, path: &mut Vec<String>) -> clap::Command {
        let names: Vec<&str> = path.iter().map(String::as_str).collect();
        let list = examples(&page_name(&names));
        let mut command = if list.is_empty() {
            command
        } else {
            let mut text = String::from("Examples:");
            for (what, line) in list {
                text.push_str(&format!("\n  {what}"));
                for line in line.lines() {
                    text.push_str(&format!("\n    {line}"));
                }
            }
            command.after_help(text)
        };
        let subcommands: Vec<String> = command
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        for name in subcommands {
            path.push(name.clone());
            command = command.mut_subcommand(&name, |sub| add(sub, path));
            path.pop();
        }
        command
    }
    let root = command.get_name().to_string();
    add(command, &mut vec![root])
}

/// Escapes text for a roff line: backslashes, hyphens (minus signs in commands), a leading dot
/// or quote.
fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

/// The EXAMPLES section of a page, in roff.
fn examples_section(list: &[Example]) -> String {
    let mut out = String::from(".SH EXAMPLES\n");
    for (what, lines) in list {
        out.push_str(&format!(".PP\n{}\n.PP\n.RS 4\n.nf\n", roff(what)));
        for line in lines.lines() {
            out.push_str(&roff(line));
            out.push('\n');
        }
        out.push_str(".fi\n.RE\n");
    }
    out
}

/// The man page of `command` named `name`, as clap_mangen makes it, with the examples as an
/// EXAMPLES section (clap_mangen would put the `--help` text under EXTRA, filled into one
/// paragraph).
fn man_page(command: clap::Command, name: &str) -> anyhow::Result<(String, String)> {
    let man = clap_mangen::Man::new(command);
    let mut page = Vec::new();
    man.render(&mut page).context("render")?;
    let mut page = String::from_utf8(page).context("render")?;
    let extra = page
        .find(".SH EXTRA\n")
        .with_context(|| format!("{name}: no examples"))?;
    let end = page[extra + 1..]
        .find("\n.SH ")
        .map_or(page.len(), |at| extra + 1 + at + 1);
    page.replace_range(extra..end, &examples_section(examples(name)));
    Ok((man.get_filename(), page))
}

/// The command line prepared as the pages show it.
fn for_pages(command: clap::Command) -> clap::Command {
    let mut command = with_examples(command).disable_help_subcommand(true);
    command.build();
    command
}

/// The main page, `jira-hub(1)`.
pub(crate) fn main_page(command: clap::Command) -> anyhow::Result<String> {
    let command = for_pages(command);
    let name = command.get_name().to_string();
    Ok(man_page(command, &name)?.1)
}

/// One man page per command into `dir`: `jira-hub.1`, `jira-hub-serve.1`, …
pub(crate) fn man_pages(command: clap::Command, dir: &Path) -> anyhow::Result<()> {
    fn write(command: clap::Command, path: &mut Vec<String>, dir: &Path) -> anyhow::Result<()> {
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            path.push(sub.get_name().to_string());
            write(sub.clone(), path, dir)?;
            path.pop();
        }
        let names: Vec<&str> = path.iter().map(String::as_str).collect();
        let (file, page) = man_page(command, &page_name(&names))?;
        let file = dir.join(file);
        std::fs::write(&file, page).with_context(|| format!("{}", file.display()))?;
        Ok(())
    }
    let command = for_pages(command);
    let root = command.get_name().to_string();
    write(command, &mut vec![root], dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command has examples, and every argument a description.
    #[test]
    fn every_command_has_examples_and_every_argument_a_description() {
        fn check(command: &clap::Command, path: &mut Vec<String>, missing: &mut Vec<String>) {
            let names: Vec<&str> = path.iter().map(String::as_str).collect();
            let name = page_name(&names);
            if examples(&name).is_empty() {
                missing.push(format!("{name}: no examples"));
            }
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if arg.is_hide_set() || id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{name}: {id} has no description"));
                }
                for value in arg.get_possible_values() {
                    if value.get_help().is_none() && !value.is_hide_set() {
                        // clap_complete's shells carry no descriptions of their own.
                        if id != "shell" {
                            missing.push(format!("{name}: {id}={} undescribed", value.get_name()));
                        }
                    }
                }
            }
            for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
                path.push(sub.get_name().to_string());
                check(sub, path, missing);
                path.pop();
            }
        }
        let mut command = crate::cli::command();
        command.build();
        let mut missing = Vec::new();
        check(&command, &mut vec!["jira-hub".to_string()], &mut missing);
        assert_eq!(missing, Vec::<String>::new());
    }

    #[test]
    fn examples_are_escaped_for_roff() {
        let section = examples_section(&[("Try it:", "jira-hub refresh --wait\n.hidden")]);
        assert_eq!(
            section,
            ".SH EXAMPLES\n.PP\nTry it:\n.PP\n.RS 4\n.nf\njira\\-hub refresh \\-\\-wait\n\\&.hidden\n.fi\n.RE\n"
        );
    }
}
