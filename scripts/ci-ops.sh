#!/usr/bin/env bash
# CI for the operators' side: installs promtool (Debian's `prometheus` package carries it; the
# service it also installs is neither started here nor needed) and checks the example alert rules
# the package ships. With promtool on PATH, the test `operations::a_live_hub_has_every_series_the_rules_name_and_the_cli_answers_as_the_api`
# runs `promtool check rules` too instead of saying it is skipped. Idempotent; runs as root or
# with sudo on a fresh Debian machine.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v promtool >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus
fi
promtool --version | head -1
promtool check rules dist/prometheus/jira-hub.rules.yml
