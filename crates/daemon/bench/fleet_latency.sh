#!/usr/bin/env bash
# Live latency from a hook posted to a daemon until a console run sees its Event (numbers go
# in docs/benchmarks.md, "Fleet console"): one daemon publishing to a fresh nats-server
# (JetStream, file storage, loopback); HOOKS times, a hook of a new session is posted to the
# daemon (`POST /hook`, as the shim does) and `aep-cline fleet sessions --json` is run again and
# again until it lists that session. Each run is a whole console (connect, read the stream, fold,
# print), so this is the latency a person re-running the console sees, not a following console's
# (`fleet serve`). Prints p50, p99 and max over the hooks.
#
#   crates/daemon/bench/fleet_latency.sh        # 50 hooks
#   crates/daemon/bench/fleet_latency.sh 100
#   AEP_CLINE_BIN=target/debug/aep-cline crates/daemon/bench/fleet_latency.sh   # another build, no cargo
# Needs nats-server (Debian's package), python3 and curl.
set -euo pipefail
HOOKS="${1:-50}"
# BIN, WORK, PIDS (stopped on exit), a fresh nats-server and AEP_NATS_URL.
source "$(dirname "$0")/fleet_setup.sh"
mkdir -p "$WORK/d/state"
HOME="$WORK/d" AEP_LOG_DIR="$WORK/d/logs" AEP_CLINE_STATE_DIR="$WORK/d/state" AEP_LISTEN=127.0.0.1:0 \
  AEP_HOST=bench-host RUST_LOG=warn "$BIN" daemon 2>>"$WORK/daemon.err" &
PIDS+=($!)
for _ in $(seq 400); do [ -s "$WORK/d/state/daemon.json" ] && break; sleep 0.05; done
python3 - "$BIN" "$WORK/d/state/daemon.json" "$HOOKS" <<'PY'
import json, subprocess, sys, time, urllib.request
bin_, discovery, hooks = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = json.load(open(discovery))
def hook(session, n):
    body = json.dumps({"hookName": "some_future_hook", "taskId": "t",
                       "sessionContext": {"rootSessionId": session}, "n": n}).encode()
    req = urllib.request.Request(d["url"] + "/hook", body, {"Authorization": "Bearer " + d["token"]})
    assert urllib.request.urlopen(req).status == 200
def sessions():
    out = subprocess.run([bin_, "fleet", "sessions", "--json", "--all"], capture_output=True, check=True).stdout
    return {s["session"] for s in json.loads(out or b"[]")}
got, runs = [], 0
for i in range(hooks):
    session = f"1796007203184_l{i:04d}"
    t0 = time.monotonic()
    hook(session, i)
    while session not in sessions():
        runs += 1
        if time.monotonic() - t0 > 60:
            sys.exit(f"hook {i}: its session was not listed within 60 s")
    runs += 1
    got.append((time.monotonic() - t0) * 1000)
got.sort()
pick = lambda q: got[min(len(got) - 1, int(q * len(got)))]
print(f"{hooks} hooks: hook -> `fleet sessions --json` lists it: p50 {pick(0.5):.0f} ms, "
      f"p99 {pick(0.99):.0f} ms, max {got[-1]:.0f} ms ({runs} console runs)")
PY
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
