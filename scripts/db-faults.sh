#!/usr/bin/env bash
# The database faults of issue 18 (item 5) against the real daemon: a file made read-only and
# back (chattr +i, which stops root too), moved and deleted under it, a full disk (a 4 MiB tmpfs
# in a mount namespace of its own), a second daemon through a hard link, a database lost between
# two starts. They run in `cargo test` too; this shows which of them this machine could not run
# (no root, no chattr, no mount namespaces), instead of letting a skip pass unseen.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
cargo test --test it db_faults -- --nocapture --test-threads=1 2>&1 | tee "$out" | grep -E '^test |SKIPPED|test result'
if grep -q SKIPPED "$out"; then
  echo "db-faults: some faults could not be made on this machine (see SKIPPED above)"
else
  echo "db-faults: every fault was made and the hub recovered from each"
fi
