#!/usr/bin/env bash
# The long form of the crash test: kill -9 the daemon at random moments of a claim/report
# workload through the relay, KILLS times (default 50), then check that no request was lost and
# none applied twice. CI runs the short form as part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
JIRA_HUB_CRASH_KILLS="${1:-50}" cargo test --release --test it crash -- --nocapture
