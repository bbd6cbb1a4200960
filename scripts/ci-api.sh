#!/usr/bin/env bash
# CI: the served OpenAPI document checked with tools made elsewhere, at pinned versions:
# openapi-spec-validator validates it, openapi-python-client generates a Python client and
# openapi-typescript TypeScript types (compiled with tsc --strict); then each runs its walk
# (tests/clients/walk.py, walk.ts) against a live hub: `jira-hub demo` (the simulated Jira, the
# hub and a real agent) on free ports. Prints the count of operations each generator produced.
# Idempotent; needs python3 (venv) and Node 18+ with npm, installed when missing (Debian).
set -euo pipefail
cd "$(dirname "$0")/.."

SPEC_VALIDATOR=0.9.0
PYTHON_CLIENT=0.29.1
OPENAPI_TYPESCRIPT=7.13.0
TYPESCRIPT=5.9.3

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if ! command -v python3 >/dev/null || ! python3 -c 'import venv, ensurepip' 2>/dev/null || ! command -v npm >/dev/null; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3 python3-venv nodejs npm
fi

work="$(mktemp -d)"
hub_pid=""
cleanup() {
  if [ -n "$hub_pid" ]; then kill "$hub_pid" 2>/dev/null || true; wait "$hub_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The pinned tools, installed once into a cache of their versions (a run after the first installs
# nothing); a half-made cache (no `ready` mark) is made again.
tools="${JIRA_HUB_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jira-hub-ci-api}/$SPEC_VALIDATOR-$PYTHON_CLIENT-$OPENAPI_TYPESCRIPT-$TYPESCRIPT"
if [ ! -f "$tools/ready" ]; then
  rm -rf "$tools"
  mkdir -p "$tools/npm"
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install -q "openapi-spec-validator==$SPEC_VALIDATOR" "openapi-python-client==$PYTHON_CLIENT"
  (cd "$tools/npm" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund \
    "openapi-typescript@$OPENAPI_TYPESCRIPT" "typescript@$TYPESCRIPT")
  touch "$tools/ready"
fi
mkdir -p "$work/npm"
ln -s "$tools/venv" "$work/venv"
ln -s "$tools/npm/node_modules" "$work/npm/node_modules"

# The hub as a user runs it: the demo, on free ports, its own folder.
cargo build --locked --quiet
target="${CARGO_TARGET_DIR:-target}"
"$target/debug/jira-hub" demo --dir "$work/demo" --listen 127.0.0.1:0 >"$work/demo.out" 2>"$work/demo.err" &
hub_pid=$!
for _ in $(seq 1 120); do
  grep -q '^demo: API: ' "$work/demo.out" 2>/dev/null && break
  sleep 1
done
url="$(sed -n 's/^demo: API: \(http:[^ ]*\).*/\1/p' "$work/demo.out")"
token="$(sed -n 's/^demo: sign in with the client token: //p' "$work/demo.out")"
if [ -z "$url" ] || [ -z "$token" ]; then
  echo "ci-api: the demo did not start" >&2; cat "$work/demo.out" "$work/demo.err" >&2; exit 1
fi
curl -fsS "$url/openapi.json" -o "$work/openapi.json"

echo "ci-api: openapi-spec-validator $SPEC_VALIDATOR"
"$work/venv/bin/openapi-spec-validator" "$work/openapi.json"

echo "ci-api: openapi-python-client $PYTHON_CLIENT"
"$work/venv/bin/openapi-python-client" generate --path "$work/openapi.json" \
  --output-path "$work/python/jira_hub_client" --meta none --overwrite 2>&1 | grep -v 'ruff is not in PATH' || true
python_operations="$(find "$work/python/jira_hub_client/api" -name '*.py' ! -name '__init__.py' | wc -l)"
echo "ci-api: the Python client has $python_operations operations"

echo "ci-api: openapi-typescript $OPENAPI_TYPESCRIPT, tsc $TYPESCRIPT --strict"
cp tests/clients/walk.ts tests/clients/tsconfig.json "$work/npm/"
"$work/npm/node_modules/.bin/openapi-typescript" "$work/openapi.json" -o "$work/npm/api.d.ts"
typescript_operations="$(node -e '
  const text = require("fs").readFileSync(process.argv[1], "utf8");
  const block = text.slice(text.indexOf("export interface operations"));
  console.log((block.match(/^    [A-Za-z_][A-Za-z0-9_]*: \{$/gm) || []).length);' "$work/npm/api.d.ts")"
echo "ci-api: the TypeScript types have $typescript_operations operations"
(cd "$work/npm" && node_modules/.bin/tsc -p tsconfig.json)

expected="$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(sum(1 for p in d["paths"].values() for m in p if m in ("get", "put", "post", "delete", "patch")))' "$work/openapi.json")"
if [ "$python_operations" != "$expected" ] || [ "$typescript_operations" != "$expected" ]; then
  echo "ci-api: the document has $expected operations; Python $python_operations, TypeScript $typescript_operations" >&2
  exit 1
fi

echo "ci-api: the Python walk"
"$work/venv/bin/python" tests/clients/walk.py "$work/python" "$url" "$token"
echo "ci-api: the TypeScript walk"
node "$work/npm/out/walk.js" "$url" "$token"
echo "ci-api: ok ($expected operations, both generators, both walks)"
