#!/usr/bin/env bash
# CI for the operator's chores: the sqlite3 program, which the test of a copy put back over the
# live database uses to make one the way SQLite documents (`sqlite3 hub.sqlite ".backup …"`);
# without it that test says it is skipped. Idempotent; as root on a fresh Debian machine.
set -euo pipefail
if ! command -v sqlite3 >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq sqlite3
fi
