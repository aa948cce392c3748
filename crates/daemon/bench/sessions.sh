#!/usr/bin/env bash
# Benchmarks the session registry's memory: 20,000 sessions started and ended in a row leave the
# daemon's RSS, once their grace period is over, within 10 MiB of its RSS after the first 100,
# and RSS does not grow from 10,000 to 20,000. Numbers go in docs/benchmarks.md.
#
#   crates/daemon/bench/sessions.sh [SESSIONS]      # default 20000; needs python3
#
# Each session is a real Cline 3.0.65 run's hooks (agent_start, tool_call, tool_result,
# agent_end, session_shutdown), rewritten to its own session id and posted over one keep-alive
# connection, as the shim would post them. RSS is VmRSS from /proc after the grace period
# (AEP_SESSION_GRACE=1s here) and two sweeps.
set -euo pipefail
cd "$(dirname "$0")/../../.."
N="${1:-20000}"
cargo build --release -q -p aep-cline
BIN="$PWD/target/release/aep-cline"
WORK="$(mktemp -d)"
trap 'kill $DAEMON 2>/dev/null || true; rm -rf "$WORK"' EXIT
export HOME="$WORK" AEP_LOG_DIR="$WORK/logs" AEP_CLINE_STATE_DIR="$WORK/state"

AEP_LISTEN=127.0.0.1:0 AEP_SESSION_GRACE=1s RUST_LOG=warn ${BENCH_PRELOAD:+env LD_PRELOAD=$BENCH_PRELOAD} "$BIN" daemon 2>"$WORK/daemon.log" & DAEMON=$!
for _ in $(seq 100); do [ -s "$WORK/state/daemon.json" ] && break; sleep 0.05; done

status=0
python3 - "$WORK/state/daemon.json" "$DAEMON" "$N" "$PWD/crates/cline-hooks/tests/data" <<'PY' || status=$?
import http.client, json, sys, time
discovery, pid, n, data = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3]), sys.argv[4]
host, port = discovery["url"].removeprefix("http://").rsplit(":", 1)
conn = http.client.HTTPConnection(host, int(port))
hooks = [json.load(open(f"{data}/{d}/{h}-global.json")) for d, h in [
    ("hooks-local", "agent_start"), ("hooks-local", "tool_call"), ("hooks-local", "tool_result"),
    ("hooks-local", "agent_end"), ("hooks-cancel", "session_shutdown")]]

def rss_mib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024

def live():
    conn.request("GET", "/healthz")
    return json.loads(conn.getresponse().read())["sessions"]

def run(first, last):
    for s in range(first, last):
        for i, hook in enumerate(hooks):
            hook["sessionContext"]["rootSessionId"] = f"bench-{s:06d}"
            body = json.dumps(hook)
            conn.request("POST", "/hook", body, {"Authorization": f"Bearer {discovery['token']}",
                         "Content-Type": "application/json", "X-Aep-Cline-Delivery": f"{s}-{i}"})
            r = conn.getresponse(); answer = r.read()
            assert r.status == 200, (r.status, answer)

def settled():
    time.sleep(3)  # the grace period (1 s) and two sweeps (every second)
    return rss_mib(), live()

print(f"idle: {rss_mib():.1f} MiB")
start = time.time()
run(0, 100)
after_100, live_100 = settled()
print(f"after the first 100 sessions (grace over): {after_100:.1f} MiB, {live_100} in memory")
run(100, n // 2)
after_half, live_half = settled()
print(f"after {n // 2} sessions (grace over): {after_half:.1f} MiB, {live_half} in memory")
run(n // 2, n)
elapsed = time.time() - start - 6
after_n, live_n = settled()
print(f"after {n} sessions (grace over): {after_n:.1f} MiB, {live_n} in memory; "
      f"{n * len(hooks)} hooks in {elapsed:.1f} s ({n * len(hooks) / elapsed:.0f} hooks/s)")
print(f"growth over the second half: {after_n - after_half:+.1f} MiB (target: none, within 2 MiB)")
print(f"growth over the first 100: {after_n - after_100:+.1f} MiB")
print(f"target: within 10 MiB of the level after the first 100, and no growth over the second half")
sys.exit(0 if after_n - after_100 <= 10 and after_n - after_half <= 2 and live_n == 0 else 1)
PY
grep -E "WARN|ERROR" "$WORK/daemon.log" | head -5 || true
exit $status
