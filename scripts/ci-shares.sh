#!/usr/bin/env bash
# CI: the relay over real network-filesystem clients (scripts/shares-env.sh: SFTP by openssh-server
# and SMB by Samba on 127.0.0.1 in a network namespace of their own, mounted with sshfs and
# rclone's smb backend). For each share and direction the hub serves the folder and
# `agent --check` runs against it twice; the log gives how late each side saw the other's files
# and how long the check took. Asserted: a hub reading through sshfs's default cache is told
# late with `dir_cache=no` named; with that cache off, and over SMB, no delay is over the bound.
# Skipped (and says so) when not root or without /dev/fuse.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" != "--inside" ]; then
  if [ "$(id -u)" -ne 0 ] || [ ! -e /dev/fuse ]; then
    echo "ci-shares: skipped (needs root and /dev/fuse for the namespace and the FUSE mounts)"
    exit 0
  fi
  cargo build --locked --bin jira-hub
  export JIRA_HUB_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/jira-hub"
  export JIRA_HUB_EXAMPLE="$PWD/admin/jira-sync/config.example.json"
  exec scripts/shares-env.sh "$PWD/scripts/ci-shares.sh" --inside
fi

B=/run/jira-hub-shares
work=$(mktemp -d)
failed=0
# case: label, the hub's folder, the agent's folder, what the hub's delay must be (late|bounded)
check_case() {
  local label=$1 hubdir=$2 agentdir=$3 expect=$4 server=$5
  find "$server" -mindepth 1 -delete 2>/dev/null || true
  local db="$work/$label/hub.sqlite"
  mkdir -p "$work/$label"
  "$JIRA_HUB_BIN" serve --db "$db" --listen 127.0.0.1:0 --relay-no-notify \
    --init-from "$JIRA_HUB_EXAMPLE" --default-relay-dir "$hubdir" >"$work/$label/hub.log" 2>&1 &
  local hub=$!
  local token=""
  for _ in $(seq 100); do
    token=$("$JIRA_HUB_BIN" tokens --db "$db" 2>/dev/null | awk '/agent/ {print $NF}' | head -1) || true
    [ -n "$token" ] && [ -d "$agentdir/inbox" ] && break
    sleep 0.2
  done
  printf '{"jira_url": "http://127.0.0.1:9", "jira_user": "a", "jira_password": "p", "agent_token": "%s", "name": "ci", "relay_dir": "%s"}\n' \
    "$token" "$agentdir" >"$work/$label/agent.json"
  chmod 600 "$work/$label/agent.json"
  local line="" started took
  # The hub's figure reaches its lock with its next heartbeat (10 s): a second check reads it.
  for n in 1 2; do
    started=$(date +%s%N)
    line=$("$JIRA_HUB_BIN" agent --check --config "$work/$label/agent.json" 2>/dev/null |
      grep -E "папка обмена: /" || true)
    took=$(( ($(date +%s%N) - started) / 1000000 ))
    echo "ci-shares: $label check $n (${took} ms): ${line:-no share line}"
    [ "$n" = 1 ] && sleep 11
  done
  kill "$hub" 2>/dev/null || true
  wait "$hub" 2>/dev/null || true
  case "$expect" in
    late)
      if [[ "$line" != *"файлы агента хабу — через "* || "$line" != *"dir_cache=no"* ]]; then
        echo "ci-shares: $label: the hub's delay was not told with its option" >&2; failed=1
      fi ;;
    bounded)
      if [[ -z "$line" || "$line" == ОШИБКА* ]]; then
        echo "ci-shares: $label: a delay over the bound (or no share line)" >&2; failed=1
      fi ;;
  esac
}
check_case sftp-hub-cached "$B/mnt/sftp-cached" "$B/srv/sftp" late "$B/srv/sftp"
check_case sftp-agent-cached "$B/srv/sftp" "$B/mnt/sftp-cached" bounded "$B/srv/sftp"
check_case sftp-both-nocache "$B/mnt/sftp" "$B/mnt/sftp" bounded "$B/srv/sftp"
check_case smb-hub-mounted "$B/mnt/smb" "$B/srv/smb" bounded "$B/srv/smb"
check_case smb-agent-mounted "$B/srv/smb" "$B/mnt/smb" bounded "$B/srv/smb"
rm -rf "$work"
exit "$failed"
