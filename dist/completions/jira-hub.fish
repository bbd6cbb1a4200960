# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_jira_hub_global_optspecs
    string join \n db= log-format= h/help V/version
end

function __fish_jira_hub_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_jira_hub_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_jira_hub_using_subcommand
    set -l cmd (__fish_jira_hub_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c jira-hub -n "__fish_jira_hub_needs_command" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_needs_command" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -s V -l version -d 'Print version'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "init" -d 'Create or migrate the database and import the settings of a legacy sync config'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "migrate" -d 'Create or migrate the database, print what was done, and exit'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "settings" -d 'Read or write settings, with the validation of PUT /settings'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "projects" -d 'List or add projects (Jira labels)'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "tokens" -d 'Print the agent and client tokens, or make a new one'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "status" -d 'A summary for people: schema, projects, queue, agents, last full refresh, relay folder'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "agents" -d 'The agents the hub knows (silent ones and one-off checks named as such), or forget one'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "backup" -d 'Make an online backup into backups/ now'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "restore" -d 'Put a backup in place of the database of a stopped hub (refused while a hub serves it): the copy is checked first, the current database is kept in backups/ as `<stamp>-before-restore.sqlite` with its WAL; the tokens in force stay in force (a backup from before a rotation does not bring the revoked ones back)'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "serve" -d 'Run the daemon: the HTTP API, the relay watcher (when relay_dir is set), the timers'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "batches" -d 'The queue\'s batches: list, show one with its commands, cancel'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "commands" -d 'Commands that ended failed or skipped: list them, queue them again'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "refresh" -d 'Queue a refresh of the mirror (everything, or one project) and, with --wait, follow it'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "demo" -d 'The whole loop on this machine: a simulated Jira with a team project, the hub and an agent between them through a relay folder, a sample batch and a refresh; Ctrl-C stops all three, running it again continues (everything is under --dir; it prints the line that points the other commands at its database)'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "agent" -d 'Run the agent inside Jira\'s network: claim commands from the hub, run them in Jira, report (opens no database)'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "man" -d 'Print the man page (roff), or with --dir write one page per command into a folder'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "completions" -d 'Print shell completions for bash, zsh, fish, elvish or powershell'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "relay" -d 'Look at relay files by hand'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "sim-jira" -d 'The demo\'s simulated Jira alone, until stopped (for the install test)'
complete -c jira-hub -n "__fish_jira_hub_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand init" -l config -d 'The legacy config (format: admin/jira-sync/config.example.json); `-` reads it from standard input' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand init" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand init" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand init" -l force -d 'Import over the settings an earlier init stored (tokens are kept)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand init" -l if-new -d 'Do nothing, successfully, when the database already has settings'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand init" -l use-empty-file -d 'Make the database in the existing empty file --db names (an empty file is otherwise refused by every command: it may be anyone\'s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand init" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand migrate" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand migrate" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand migrate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and not __fish_seen_subcommand_from get set help" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and not __fish_seen_subcommand_from get set help" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and not __fish_seen_subcommand_from get set help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and not __fish_seen_subcommand_from get set help" -f -a "get" -d 'Print all settings (without tokens), or one'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and not __fish_seen_subcommand_from get set help" -f -a "set" -d 'Write one setting: KEY and a JSON value (strings in quotes: \'"/srv/relay"\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and not __fish_seen_subcommand_from get set help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and __fish_seen_subcommand_from get" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and __fish_seen_subcommand_from get" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and __fish_seen_subcommand_from get" -l json -d 'Print the JSON on one line (for scripts), as `GET /settings` answers'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and __fish_seen_subcommand_from get" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and __fish_seen_subcommand_from set" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and __fish_seen_subcommand_from set" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and __fish_seen_subcommand_from set" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and __fish_seen_subcommand_from help" -f -a "get" -d 'Print all settings (without tokens), or one'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and __fish_seen_subcommand_from help" -f -a "set" -d 'Write one setting: KEY and a JSON value (strings in quotes: \'"/srv/relay"\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand settings; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and not __fish_seen_subcommand_from list add help" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and not __fish_seen_subcommand_from list add help" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and not __fish_seen_subcommand_from list add help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and not __fish_seen_subcommand_from list add help" -f -a "list" -d 'The projects in base-JQL order'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and not __fish_seen_subcommand_from list add help" -f -a "add" -d 'Create a project'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and not __fish_seen_subcommand_from list add help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and __fish_seen_subcommand_from list" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and __fish_seen_subcommand_from list" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and __fish_seen_subcommand_from add" -l board -d 'The project\'s Jira board' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and __fish_seen_subcommand_from add" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and __fish_seen_subcommand_from add" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and __fish_seen_subcommand_from help" -f -a "list" -d 'The projects in base-JQL order'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and __fish_seen_subcommand_from help" -f -a "add" -d 'Create a project'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand projects; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand tokens" -l rotate -d 'Replace this token with a new one and print both; the old one stops working at once (the agent\'s config or the clients must get the new one)' -r -f -a "agent\t'The token `jira-hub agent` presents'
client\t'The token of API clients and the web console'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand tokens" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand tokens" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand tokens" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand status" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand status" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand status" -l json -d 'Print one JSON object instead: the service\'s views (projects, runs, agents as `GET /projects`, `GET /sync-runs` and `GET /agents` show them), with `degraded`'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand status" -l check -d 'Exit 1 when the hub is degraded, saying why on stderr: the database was never initialised; no agent has been seen, or every agent is silent; an agent says Jira is failing for it; a full refresh waits for a confirmation; the newest backup is older than two days, or there is none. Exit 0 otherwise'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and not __fish_seen_subcommand_from list forget help" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and not __fish_seen_subcommand_from list forget help" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and not __fish_seen_subcommand_from list forget help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and not __fish_seen_subcommand_from list forget help" -f -a "list" -d 'Every agent, most recently seen first: live, silent (since when, heartbeats missed), or a one-off check (`agent --check` under a name that runs nothing)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and not __fish_seen_subcommand_from list forget help" -f -a "forget" -d 'Forget an agent that is silent or only ran a check (a renamed or retired agent); a live agent is refused. It shows again if it contacts the hub'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and not __fish_seen_subcommand_from list forget help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and __fish_seen_subcommand_from list" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and __fish_seen_subcommand_from list" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and __fish_seen_subcommand_from list" -l json -d 'Print a JSON array of the agents, as `GET /agents` answers'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and __fish_seen_subcommand_from forget" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and __fish_seen_subcommand_from forget" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and __fish_seen_subcommand_from forget" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and __fish_seen_subcommand_from help" -f -a "list" -d 'Every agent, most recently seen first: live, silent (since when, heartbeats missed), or a one-off check (`agent --check` under a name that runs nothing)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and __fish_seen_subcommand_from help" -f -a "forget" -d 'Forget an agent that is silent or only ran a check (a renamed or retired agent); a live agent is refused. It shows again if it contacts the hub'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agents; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand backup" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand backup" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand backup" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand restore" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand restore" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand restore" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l listen -d 'The HTTP listen address' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l relay-poll-ms -d 'How often the relay lists inbox/, in milliseconds (notifications only hurry it)' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l relay-grace-seconds -d 'How long a relay file that is not complete JSON may keep arriving before it is refused' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l relay-retention-days -d 'How long answers, archived and refused relay files are kept' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l relay-arrival-limit-seconds -d 'How long a relay file that is not complete JSON may keep changing before it is refused all the same' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l relay-max-file-mb -d 'Relay files larger than this are refused unread' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l report-budget-mb -d 'Memory for the agent\'s reports in flight, HTTP bodies and relay files together: a report waits for its size (a larger one takes all of it); an HTTP report that cannot get it within --http-timeout-seconds is answered 503 with Retry-After' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l http-max-body-mb -d 'The largest HTTP request body (a refresh page of 1,000 issues must fit)' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l http-timeout-seconds -d 'An HTTP request that takes longer is answered 408' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l http-max-connections -d 'Open HTTP connections at most; at the cap a new one closes the oldest idle one' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l http-max-anonymous-connections -d 'HTTP connections that have shown no valid token at most (default: three quarters of --http-max-connections); the rest is kept for agents and clients' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l http-anonymous-timeout-seconds -d 'A request without a valid token must be read whole and answered within this time' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l http-header-timeout-seconds -d 'A connection that has not sent its request headers within this time is closed' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l http-body-timeout-seconds -d 'A request body must arrive whole within this time from its headers (408 after)' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l metrics-token-file -d 'A file whose first line is a token that /metrics then asks for (Authorization: Bearer); without it /metrics needs no token' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l http-idle-timeout-seconds -d 'A keep-alive connection with no request for this long is closed' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l allowed-host -d 'A host name by which browsers and clients reach the hub (besides IP addresses and localhost, always accepted): a request naming another is refused, which stops DNS rebinding. Repeat it; in the environment, separate names with commas' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l public-url -d 'The console\'s public address behind a reverse proxy (`https://hub.example.com`): a form sent from it is from this site whatever Host the proxy passes on, and its host is allowed. Repeat it; in the environment, separate addresses with commas' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l init-from -d 'Initialise a new database from this legacy config first (nothing happens to one that has settings)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l default-relay-dir -d 'When relay_dir is not set, set it to this folder (made if missing)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -l relay-no-notify -d 'List inbox/ on the timer only, without change notifications'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and not __fish_seen_subcommand_from list show cancel prune help" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and not __fish_seen_subcommand_from list show cancel prune help" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and not __fish_seen_subcommand_from list show cancel prune help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and not __fish_seen_subcommand_from list show cancel prune help" -f -a "list" -d 'Batches, newest first, with their command counters'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and not __fish_seen_subcommand_from list show cancel prune help" -f -a "show" -d 'One batch with its commands: status, deliveries, who claimed them, result or error'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and not __fish_seen_subcommand_from list show cancel prune help" -f -a "cancel" -d 'Cancel a batch: its queued commands become cancelled; those already at the agent are not stopped and end as the agent reports'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and not __fish_seen_subcommand_from list show cancel prune help" -f -a "prune" -d 'Delete now the finished batches past the `retention` setting (as the daemon does every minute), with their commands and attempts; a batch with a command queued or claimed is never deleted'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and not __fish_seen_subcommand_from list show cancel prune help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from list" -l project -d 'Only this project\'s batches' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from list" -l status -d 'Only batches in this status: queued, running, cancelled or completed (among the page\'s batches)' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from list" -l limit -d 'At most this many batches, 1 to 500' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from list" -l before -d 'Only batches older than this id: the next page after a list that ended with it' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from list" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from list" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from list" -l json -d 'Print a JSON array of the batches, as `GET /batches` answers'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from show" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from show" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from show" -l json -d 'Print the batch as JSON, as `GET /batches/{id}` answers'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from cancel" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from cancel" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from cancel" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from prune" -l export -d 'Append each batch deleted (with its commands and their attempts) to this file as one JSON line, written and synced before the rows go (an audit trail; mode 0600)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from prune" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from prune" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from prune" -l dry-run -d 'Delete nothing: only count (and, with --export, write) what would be deleted'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from prune" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from help" -f -a "list" -d 'Batches, newest first, with their command counters'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from help" -f -a "show" -d 'One batch with its commands: status, deliveries, who claimed them, result or error'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from help" -f -a "cancel" -d 'Cancel a batch: its queued commands become cancelled; those already at the agent are not stopped and end as the agent reports'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from help" -f -a "prune" -d 'Delete now the finished batches past the `retention` setting (as the daemon does every minute), with their commands and attempts; a batch with a command queued or claimed is never deleted'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand batches; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and not __fish_seen_subcommand_from failed retry keep-jira enqueue-dependents help" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and not __fish_seen_subcommand_from failed retry keep-jira enqueue-dependents help" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and not __fish_seen_subcommand_from failed retry keep-jira enqueue-dependents help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and not __fish_seen_subcommand_from failed retry keep-jira enqueue-dependents help" -f -a "failed" -d 'Commands that ended failed or skipped, their batches newest first, each batch\'s commands in its order, with their errors'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and not __fish_seen_subcommand_from failed retry keep-jira enqueue-dependents help" -f -a "retry" -d 'Queue failed or skipped commands again (their earlier outcome is kept), or with --batch every failed and skipped command of a batch'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and not __fish_seen_subcommand_from failed retry keep-jira enqueue-dependents help" -f -a "keep-jira" -d 'Leave as Jira has it: an edit stopped by a conflict ends cancelled, nothing written; the commands skipped because of it stay skipped with that reason'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and not __fish_seen_subcommand_from failed retry keep-jira enqueue-dependents help" -f -a "enqueue-dependents" -d 'After keep-jira: enqueue copies of the commands skipped because of that edit as a new batch, run on the issue as Jira holds it (the skipped ones stay skipped, naming the copy)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and not __fish_seen_subcommand_from failed retry keep-jira enqueue-dependents help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from failed" -l limit -d 'At most this many' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from failed" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from failed" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from failed" -l json -d 'Print a JSON array of the commands, as `GET /commands/failed` answers'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from failed" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from retry" -l batch -d 'Retry every failed and skipped command of this batch' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from retry" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from retry" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from retry" -l overwrite -d 'An edit stopped by a conflict (a field changed in Jira since it was enqueued) writes the fields in conflict over Jira\'s values; without it every field is checked again'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from retry" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from keep-jira" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from keep-jira" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from keep-jira" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from enqueue-dependents" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from enqueue-dependents" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from enqueue-dependents" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from help" -f -a "failed" -d 'Commands that ended failed or skipped, their batches newest first, each batch\'s commands in its order, with their errors'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from help" -f -a "retry" -d 'Queue failed or skipped commands again (their earlier outcome is kept), or with --batch every failed and skipped command of a batch'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from help" -f -a "keep-jira" -d 'Leave as Jira has it: an edit stopped by a conflict ends cancelled, nothing written; the commands skipped because of it stay skipped with that reason'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from help" -f -a "enqueue-dependents" -d 'After keep-jira: enqueue copies of the commands skipped because of that edit as a new batch, run on the issue as Jira holds it (the skipped ones stay skipped, naming the copy)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand commands; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand refresh; and not __fish_seen_subcommand_from confirm help" -l project -d 'Refresh this project\'s label only (with its board); everything otherwise' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand refresh; and not __fish_seen_subcommand_from confirm help" -l timeout -d 'With --wait, give up after this many seconds (exit 1; the refresh stays queued)' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand refresh; and not __fish_seen_subcommand_from confirm help" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand refresh; and not __fish_seen_subcommand_from confirm help" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand refresh; and not __fish_seen_subcommand_from confirm help" -l since-last -d 'Only what changed since the last successful run (an incremental refresh; it never removes issues that left the scope)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand refresh; and not __fish_seen_subcommand_from confirm help" -l wait -d 'Follow the refresh with a progress bar until it ends; exit 1 when it failed. Says on stderr when no agent has been seen for a while (nobody may be there to run it)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand refresh; and not __fish_seen_subcommand_from confirm help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand refresh; and not __fish_seen_subcommand_from confirm help" -f -a "confirm" -d 'Apply the removals of a full refresh held by `prune_guard` (see `jira-hub status`)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand refresh; and not __fish_seen_subcommand_from confirm help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand refresh; and __fish_seen_subcommand_from confirm" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand refresh; and __fish_seen_subcommand_from confirm" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand refresh; and __fish_seen_subcommand_from confirm" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand refresh; and __fish_seen_subcommand_from help" -f -a "confirm" -d 'Apply the removals of a full refresh held by `prune_guard` (see `jira-hub status`)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand refresh; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand demo" -l dir -d 'The demo\'s folder: the hub\'s data (hub/), the relay folder (relay/), the agent\'s config (agent.json), the simulated Jira\'s state (jira.json) and the logs (logs/). Made on the first run; a later run continues from it' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand demo" -l listen -d 'The hub\'s HTTP address (the API, and the console at /)' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand demo" -l seed -d 'Picks the simulated team project\'s summaries, statuses, links and comments (first run only)' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand demo" -l issues -d 'How many issues the simulated Jira starts with (first run only)' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand demo" -l db -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand demo" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand demo" -l rate-limit -d 'The simulated Jira answers 429 Too Many Requests with Retry-After to requests beyond 4 a second, as Jira\'s rate limiting does; the agent waits and goes on'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand demo" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agent" -l config -d 'The agent\'s config (format: admin/agent.example.json)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agent" -l db -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agent" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agent" -l once -d 'One heartbeat, one claim, its commands executed and reported, then exit'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agent" -l check -d 'Preflight: read the hub\'s settings and Jira\'s metadata, write nothing, print one line per check (ok / ОШИБКА); exit 1 on any mismatch'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand agent" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand man" -l dir -d 'Write jira-hub.1 and a page for each subcommand (jira-hub-serve.1, …) here' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand man" -l db -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand man" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand man" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand completions" -l db -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand completions" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and not __fish_seen_subcommand_from inspect validate init help" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and not __fish_seen_subcommand_from inspect validate init help" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and not __fish_seen_subcommand_from inspect validate init help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and not __fish_seen_subcommand_from inspect validate init help" -f -a "inspect" -d 'A readable table of one relay file or a whole relay folder'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and not __fish_seen_subcommand_from inspect validate init help" -f -a "validate" -d 'Check files against the protocol; exit 1 when any is invalid'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and not __fish_seen_subcommand_from inspect validate init help" -f -a "init" -d 'Prepare a relay folder: make it (when its parent exists), its inbox/, outbox/, archive/ and rejected/, and the marker .jira-hub-relay, after which the hub makes them again if they go missing. Without the marker the hub never makes them in a plain folder: it may be the empty mount point of a share that is not mounted'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and not __fish_seen_subcommand_from inspect validate init help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and __fish_seen_subcommand_from inspect" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and __fish_seen_subcommand_from inspect" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and __fish_seen_subcommand_from inspect" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and __fish_seen_subcommand_from validate" -l db -d 'The hub\'s database; its folder is the data directory (backups/ goes there too)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and __fish_seen_subcommand_from validate" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and __fish_seen_subcommand_from validate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and __fish_seen_subcommand_from init" -l db -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and __fish_seen_subcommand_from init" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and __fish_seen_subcommand_from init" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and __fish_seen_subcommand_from help" -f -a "inspect" -d 'A readable table of one relay file or a whole relay folder'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and __fish_seen_subcommand_from help" -f -a "validate" -d 'Check files against the protocol; exit 1 when any is invalid'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and __fish_seen_subcommand_from help" -f -a "init" -d 'Prepare a relay folder: make it (when its parent exists), its inbox/, outbox/, archive/ and rejected/, and the marker .jira-hub-relay, after which the hub makes them again if they go missing. Without the marker the hub never makes them in a plain folder: it may be the empty mount point of a share that is not mounted'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand relay; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand sim-jira" -l hub-config -d 'Write the legacy sync config that matches this Jira here (for `jira-hub init --config`)' -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand sim-jira" -l issues -d 'How many issues the project starts with' -r
complete -c jira-hub -n "__fish_jira_hub_using_subcommand sim-jira" -l db -r -F
complete -c jira-hub -n "__fish_jira_hub_using_subcommand sim-jira" -l log-format -d 'How log lines are written to stderr: `auto` is `journal` under systemd (when `JOURNAL_STREAM` is set), else `plain`; `json` is one object a line for log shippers' -r -f -a "auto\t'`journal` under systemd (`JOURNAL_STREAM` set), else `plain`'
plain\t'Text with a timestamp, for a terminal or a file'
journal\t'Text with the syslog priority as `<N>` first and no timestamp (journald adds its own), so `journalctl -p warning` works'
json\t'One JSON object a line'"
complete -c jira-hub -n "__fish_jira_hub_using_subcommand sim-jira" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "init" -d 'Create or migrate the database and import the settings of a legacy sync config'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "migrate" -d 'Create or migrate the database, print what was done, and exit'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "settings" -d 'Read or write settings, with the validation of PUT /settings'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "projects" -d 'List or add projects (Jira labels)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "tokens" -d 'Print the agent and client tokens, or make a new one'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "status" -d 'A summary for people: schema, projects, queue, agents, last full refresh, relay folder'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "agents" -d 'The agents the hub knows (silent ones and one-off checks named as such), or forget one'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "backup" -d 'Make an online backup into backups/ now'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "restore" -d 'Put a backup in place of the database of a stopped hub (refused while a hub serves it): the copy is checked first, the current database is kept in backups/ as `<stamp>-before-restore.sqlite` with its WAL; the tokens in force stay in force (a backup from before a rotation does not bring the revoked ones back)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "serve" -d 'Run the daemon: the HTTP API, the relay watcher (when relay_dir is set), the timers'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "batches" -d 'The queue\'s batches: list, show one with its commands, cancel'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "commands" -d 'Commands that ended failed or skipped: list them, queue them again'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "refresh" -d 'Queue a refresh of the mirror (everything, or one project) and, with --wait, follow it'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "demo" -d 'The whole loop on this machine: a simulated Jira with a team project, the hub and an agent between them through a relay folder, a sample batch and a refresh; Ctrl-C stops all three, running it again continues (everything is under --dir; it prints the line that points the other commands at its database)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "agent" -d 'Run the agent inside Jira\'s network: claim commands from the hub, run them in Jira, report (opens no database)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "man" -d 'Print the man page (roff), or with --dir write one page per command into a folder'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "completions" -d 'Print shell completions for bash, zsh, fish, elvish or powershell'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "relay" -d 'Look at relay files by hand'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "sim-jira" -d 'The demo\'s simulated Jira alone, until stopped (for the install test)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and not __fish_seen_subcommand_from init migrate settings projects tokens status agents backup restore serve batches commands refresh demo agent man completions relay sim-jira help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from settings" -f -a "get" -d 'Print all settings (without tokens), or one'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from settings" -f -a "set" -d 'Write one setting: KEY and a JSON value (strings in quotes: \'"/srv/relay"\')'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from projects" -f -a "list" -d 'The projects in base-JQL order'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from projects" -f -a "add" -d 'Create a project'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from agents" -f -a "list" -d 'Every agent, most recently seen first: live, silent (since when, heartbeats missed), or a one-off check (`agent --check` under a name that runs nothing)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from agents" -f -a "forget" -d 'Forget an agent that is silent or only ran a check (a renamed or retired agent); a live agent is refused. It shows again if it contacts the hub'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from batches" -f -a "list" -d 'Batches, newest first, with their command counters'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from batches" -f -a "show" -d 'One batch with its commands: status, deliveries, who claimed them, result or error'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from batches" -f -a "cancel" -d 'Cancel a batch: its queued commands become cancelled; those already at the agent are not stopped and end as the agent reports'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from batches" -f -a "prune" -d 'Delete now the finished batches past the `retention` setting (as the daemon does every minute), with their commands and attempts; a batch with a command queued or claimed is never deleted'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from commands" -f -a "failed" -d 'Commands that ended failed or skipped, their batches newest first, each batch\'s commands in its order, with their errors'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from commands" -f -a "retry" -d 'Queue failed or skipped commands again (their earlier outcome is kept), or with --batch every failed and skipped command of a batch'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from commands" -f -a "keep-jira" -d 'Leave as Jira has it: an edit stopped by a conflict ends cancelled, nothing written; the commands skipped because of it stay skipped with that reason'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from commands" -f -a "enqueue-dependents" -d 'After keep-jira: enqueue copies of the commands skipped because of that edit as a new batch, run on the issue as Jira holds it (the skipped ones stay skipped, naming the copy)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from refresh" -f -a "confirm" -d 'Apply the removals of a full refresh held by `prune_guard` (see `jira-hub status`)'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from relay" -f -a "inspect" -d 'A readable table of one relay file or a whole relay folder'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from relay" -f -a "validate" -d 'Check files against the protocol; exit 1 when any is invalid'
complete -c jira-hub -n "__fish_jira_hub_using_subcommand help; and __fish_seen_subcommand_from relay" -f -a "init" -d 'Prepare a relay folder: make it (when its parent exists), its inbox/, outbox/, archive/ and rejected/, and the marker .jira-hub-relay, after which the hub makes them again if they go missing. Without the marker the hub never makes them in a plain folder: it may be the empty mount point of a share that is not mounted'
