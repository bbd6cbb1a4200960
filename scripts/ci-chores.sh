#!/usr/bin/env bash
# CI for the day-thirty part of the install test: installs the sqlite3 shell (Debian's `sqlite3`
# package), with which scripts/install-test.sh ages the finished batches past the retention and
# sets the database back to the previous schema revision before the README's upgrade steps.
# Idempotent; runs as root or with sudo on a fresh Debian machine.
set -euo pipefail

if ! command -v sqlite3 >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends sqlite3
fi
sqlite3 --version
