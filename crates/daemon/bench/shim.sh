#!/usr/bin/env bash
# Benchmarks the hook shim and the daemon's memory (numbers go in docs/benchmarks.md).
#
#   crates/daemon/bench/shim.sh            # needs hyperfine and /usr/bin/time (Debian packages)
#
# 1. Shim wall time per firing (hyperfine, shell start-up subtracted) with a live daemon, next
#    to a minimal Node.js shim doing the same POST, and with a dead daemon (spooling).
# 2. Shim peak RSS (/usr/bin/time -v).
# 3. Daemon RSS idle and with 1,000 live sessions (VmRSS from /proc).
# 4. Shim wall time against a dead daemon, and against a hung one (SIGSTOP): p99 and max, the
#    spool write included (target: every firing within 250 ms).
set -euo pipefail
cd "$(dirname "$0")/../../.."
[ -x /usr/bin/time ] || { echo "install GNU time (apt-get install time)" >&2; exit 2; }
# hyperfine with --input (1.16+) runs the shim with no shell in between; Debian's is older.
HF=hyperfine
if ! { command -v hyperfine >/dev/null && hyperfine --help | grep -q -- '--input'; }; then
  [ -x target/tools/bin/hyperfine ] || cargo install -q hyperfine@1.20.0 --locked --root target/tools
  HF=target/tools/bin/hyperfine
fi

BIN="$(bash tools/release.sh)"   # as it ships: static on Linux
PAYLOAD="$PWD/crates/cline-hooks/tests/data/hooks-local/tool_call-global.json"
WORK="$(mktemp -d)"
trap 'kill $DAEMON 2>/dev/null || true; rm -rf "$WORK"' EXIT
export HOME="$WORK" AEP_LOG_DIR="$WORK/logs" AEP_CLINE_STATE_DIR="$WORK/state"

AEP_LISTEN=127.0.0.1:0 RUST_LOG=warn "$BIN" daemon & DAEMON=$!
for _ in $(seq 100); do [ -s "$WORK/state/daemon.json" ] && break; sleep 0.05; done
IDLE=$(awk '/VmRSS/ {print $2}' /proc/$DAEMON/status)  # before any hook: truly idle
URL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$WORK/state/daemon.json")
TOKEN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$WORK/state/daemon.json")

# The same POST in Node.js, as small as it gets: the baseline a hand-written hook would be.
cat > "$WORK/shim.js" <<JS
const http = require('http');
const chunks = [];
process.stdin.on('data', c => chunks.push(c)).on('end', () => {
  const body = Buffer.concat(chunks);
  const req = http.request('$URL/hook', {method: 'POST', timeout: 250, headers: {
    'content-type': 'application/json', 'content-length': body.length, authorization: 'Bearer $TOKEN'}},
    res => { res.resume(); res.on('end', () => process.exit(0)); });
  req.on('error', () => process.exit(0)); req.on('timeout', () => { req.destroy(); process.exit(0); });
  req.end(body);
});
JS

echo "== shim wall time per firing, live daemon"
# /bin/true is the floor: what starting any process costs on this machine right now.
"$HF" -N --warmup 20 --runs 500 --input "$PAYLOAD" --export-json "$WORK/live.json" \
  "$BIN hook" "node $WORK/shim.js" "/bin/true"
python3 - "$WORK/live.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print(f"{r['command'].split('/')[-1]:>20}: median {r['median']*1000:.2f} ms, mean {r['mean']*1000:.2f} ms")
PY

echo "== shim peak RSS, live daemon"
/usr/bin/time -v "$BIN" hook < "$PAYLOAD" 2>&1 >/dev/null | grep 'Maximum resident'
/usr/bin/time -v node "$WORK/shim.js" < "$PAYLOAD" 2>&1 >/dev/null | grep 'Maximum resident'

echo "== daemon RSS"
after_shim=$(awk '/VmRSS/ {print $2}' /proc/$DAEMON/status)
for i in $(seq 1000); do
  printf '{"hookName":"agent_start","taskId":"bench_%04d","agent_id":"a","parent_agent_id":null}\n' "$i"
done > "$WORK/starts.ndjson"
while IFS= read -r line; do printf '%s' "$line" | "$BIN" hook; done < "$WORK/starts.ndjson"
loaded=$(awk '/VmRSS/ {print $2}' /proc/$DAEMON/status)
healthz=$(python3 -c 'import sys,urllib.request; print(urllib.request.urlopen(sys.argv[1]+"/healthz").read().decode())' "$URL")
echo "idle: ${IDLE} kB; after the shim runs (one session, ~1,000 Events): ${after_shim} kB;"
echo "with 1000 more live sessions: ${loaded} kB; healthz: $healthz"

echo "== shim wall time, dead daemon (the discovery file names a port nobody listens on)"
kill -TERM $DAEMON; wait $DAEMON || true
python3 - "$WORK/state/daemon.json" "$URL" "$TOKEN" <<'PY'
import json, socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
json.dump({"url": f"http://127.0.0.1:{port}", "token": sys.argv[3], "pid": 0, "version": "bench"}, open(sys.argv[1], "w"))
PY
"$HF" -N --warmup 5 --runs 200 --input "$PAYLOAD" "$BIN hook"
echo "spooled: $(ls "$WORK/state/spool" | wc -l) files"

echo "== shim wall time, hung daemon (SIGSTOP): the whole firing, spool write included"
AEP_LISTEN=127.0.0.1:0 RUST_LOG=error "$BIN" daemon & HUNG=$!
for _ in $(seq 100); do [ -s "$WORK/state/daemon.json" ] && grep -q "\"pid\": $HUNG" "$WORK/state/daemon.json" && break; sleep 0.05; done
kill -STOP $HUNG
"$HF" -N --warmup 3 --runs 100 --input "$PAYLOAD" --export-json "$WORK/hung.json" "$BIN hook"
python3 - "$WORK/hung.json" <<'PY'
import json, sys
t = sorted(json.load(open(sys.argv[1]))["results"][0]["times"])
p99 = t[min(len(t) - 1, int(len(t) * 0.99))]
print(f"hung daemon: median {t[len(t)//2]*1000:.0f} ms, p99 {p99*1000:.0f} ms, max {t[-1]*1000:.0f} ms (target: max <= 250 ms)")
PY
kill -KILL $HUNG 2>/dev/null || true
