#!/usr/bin/env bash
# Peak RSS of the daemon for a 250 MiB hostile relay file (just under the 256 MiB default limit):
# a wrong token, then the right one, each file with a huge unknown array member.

set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
B="$REPO/target/release/jira-hub"
[ -x "$B" ] || (cd "$REPO" && cargo build --release)
T=$(mktemp -d); cd $T
$B --db $T/data/hub.sqlite serve --listen 127.0.0.1:0 --init-from "$REPO/admin/jira-sync/config.example.json" --default-relay-dir $T/relay > serve.log 2>&1 &
PID=$!
sleep 2
TOKEN=$($B --db $T/data/hub.sqlite tokens | awk '/^agent/ {print $2}')
hwm() { awk '/VmHWM/ {print $2}' /proc/$PID/status; }
echo "baseline VmHWM: $(hwm) kB"
for tok in wrong $TOKEN; do
python3 - "$T/relay/inbox/.big" "$tok" <<'PY'
import sys
path, tok = sys.argv[1], sys.argv[2]
with open(path, 'w') as f:
    f.write('{"kind": "report", "id": "big%s", "agent": "a", "sent_at": "2026-11-29T10:00:00Z", "token": "%s", "x": [' % (len(tok), tok))
    chunk = '{"a":[1,2,3,{"b":"cccccccc"}]},' * 10000
    size = 0
    while size < 250*1024*1024:
        f.write(chunk); size += len(chunk)
    f.write('0], "results": []}')
PY
  name="report-big${#tok}.json"
  SIZE=$(stat -c %s $T/relay/inbox/.big)
  mv $T/relay/inbox/.big $T/relay/inbox/$name
  while [ ! -e "$T/relay/outbox/$name" ] && [ ! -e "$T/relay/rejected/$name.error.json" ]; do sleep 0.2; done
  cat $T/relay/rejected/$name.error.json 2>/dev/null | grep code || true; echo "token=${tok:0:5}… file $((SIZE/1024/1024)) MiB -> VmHWM $(hwm) kB; $(ls $T/relay/outbox/ | head -3 | tr '\n' ' ')"
done
kill $PID; wait $PID || true
rm -rf $T
