#!/usr/bin/env bash
# Regenerates dist/: the shell completions and man pages that the Debian package installs, made
# from the CLI definitions by the binary itself, and the units with the package's binary path. A test fails while dist/ is not what the code
# makes: run this and commit the result.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${JIRA_HUB_BIN:-target/debug/jira-hub}"
[ -n "${JIRA_HUB_BIN:-}" ] || cargo build --quiet
rm -rf dist/completions dist/man
mkdir -p dist/completions dist/man
"$bin" completions bash > dist/completions/jira-hub.bash
"$bin" completions zsh > dist/completions/_jira-hub
"$bin" completions fish > dist/completions/jira-hub.fish
"$bin" man --dir dist/man
# The units as the package installs them: the binary in /usr/bin, not /usr/local/bin.
rm -rf dist/systemd
mkdir -p dist/systemd
for unit in jira-hub.service jira-hub-agent.service; do
  sed 's#/usr/local/bin/jira-hub#/usr/bin/jira-hub#' "systemd/$unit" > "dist/systemd/$unit"
done
echo "dist/ regenerated: $(find dist -type f | wc -l) files"
