#!/usr/bin/env bash
# The daemon and the shim under load (#30): 200 sessions firing the real 3.0.65 hooks through
# the real shim at a target rate (800 firings/s by default) for 30 s, then every run ended.
# Prints the rate reached, the shim's wall time per firing (p50, p99, max), how many firings
# were spooled (the daemon did not answer in time) and whether every firing's Event is in the
# logs exactly once (after the spool drained), the daemon's RSS: idle, at its peak, and 20 s
# after the sessions ended (what it gave back), and its CPU time while firing. The daemon takes
# the caller's environment (bench/otlp_cost.sh runs it with the OTLP signals on and off).
# Numbers go in docs/benchmarks.md.
#
#   crates/daemon/bench/load.sh [RATE] [SECONDS] [SESSIONS]
set -euo pipefail
cd "$(dirname "$0")/../../.."
RATE="${1:-800}" SECONDS_="${2:-30}" SESSIONS="${3:-200}"
cargo build --release -q -p aep-cline
BIN="$PWD/target/release/aep-cline"
WORK="$(mktemp -d)"
trap 'kill $DAEMON 2>/dev/null || true; rm -rf "$WORK"' EXIT
export HOME="$WORK" AEP_LOG_DIR="$WORK/logs" AEP_CLINE_STATE_DIR="$WORK/state"
AEP_LISTEN=127.0.0.1:0 RUST_LOG=warn "$BIN" daemon 2>"$WORK/daemon.err" & DAEMON=$!
for _ in $(seq 200); do [ -S "$WORK/state/daemon.sock" ] && break; sleep 0.05; done
python3 - "$BIN" "$DAEMON" "$WORK" "$RATE" "$SECONDS_" "$SESSIONS" <<'PY'
import json, os, subprocess, sys, threading, time, glob
bin_, pid, work, rate, seconds, sessions = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
data = "crates/cline-hooks/tests/data/hooks-local"
real = {h: json.load(open(f"{data}/{h}-global.json")) for h in ("agent_start", "tool_call", "tool_result", "agent_end")}
root = real["agent_start"]["sessionContext"]["rootSessionId"]

def cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
def body(hook, s, n):
    p = json.loads(json.dumps(real[hook]).replace(root, f"load{s:04d}_{root}"))
    if "tool_call" in p:
        p["tool_call"]["id"] = f"call_{s}_{n}"
    p["n"] = n  # every firing its own body, so its own delivery
    return json.dumps(p).encode()
def fire(b):
    t = time.perf_counter()
    subprocess.run([bin_, "hook"], input=b, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t

idle = rss()
for s in range(sessions):
    fire(body("agent_start", s, 0))
walls, fired, peak, lock = [], [0], [idle], threading.Lock()
stop = time.monotonic() + seconds
spool_max = [0]
def sample():
    while time.monotonic() < stop + 5:
        peak[0] = max(peak[0], rss())
        spool_max[0] = max(spool_max[0], len(glob.glob(f"{work}/state/spool/*.json")))
        time.sleep(0.25)
threading.Thread(target=sample, daemon=True).start()
def worker(w, workers):
    n = w
    interval = workers / rate
    next_at = time.monotonic()
    while time.monotonic() < stop:
        s, step = n % sessions, n // sessions
        hook = "tool_call" if step % 2 == 0 else "tool_result"
        d = fire(body(hook, s, step + 1))
        with lock:
            walls.append(d); fired[0] += 1
        n += workers
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))
workers = 24
ts = [threading.Thread(target=worker, args=(w, workers)) for w in range(workers)]
start, cpu_before = time.monotonic(), cpu()
for t in ts: t.start()
for t in ts: t.join()
took = time.monotonic() - start
cpu_load = cpu() - cpu_before
for s in range(sessions):
    fire(body("agent_end", s, 10**6))
# The spool drains within a few ticks; every firing's Event must then be in a log once.
deadline = time.monotonic() + 60
while glob.glob(f"{work}/state/spool/*.json") and time.monotonic() < deadline:
    time.sleep(0.5)
time.sleep(20)
after = rss()
tools, ids = 0, set()
for f in glob.glob(f"{work}/logs/cline/*.jsonl"):
    for line in open(f):
        e = json.loads(line)
        if e["type"] in ("tool.requested", "tool.completed"):
            tools += 1; ids.add(e["id"])
walls.sort()
q = lambda p: walls[min(len(walls) - 1, int(p * len(walls)))] * 1000
print(f"fired {fired[0]} in {took:.1f} s: {fired[0] / took:.0f}/s (target {rate}/s), {sessions} sessions, {workers} firing threads")
print(f"shim wall per firing: p50 {q(0.5):.2f} ms, p99 {q(0.99):.2f} ms, max {walls[-1] * 1000:.2f} ms")
print(f"tool Events in the logs: {tools} for {fired[0]} tool firings ({len(ids)} distinct; missing {fired[0] - tools})")
import urllib.request
url = json.load(open(f"{work}/state/daemon.json"))["url"]
outcomes = {}
for line in urllib.request.urlopen(f"{url}/metrics").read().decode().splitlines():
    if line.startswith("aep_cline_hooks_total{"):
        o = line.split('outcome="')[1].split('"')[0]
        outcomes[o] = outcomes.get(o, 0) + float(line.rsplit(" ", 1)[1])
print(f"hooks by outcome (/metrics): {dict(sorted(outcomes.items()))}; spool files seen at once: {spool_max[0]}")
print(f"daemon RSS: idle {idle} MiB, peak {peak[0]} MiB, 20 s after the runs ended {after} MiB")
print(f"daemon CPU while firing: {cpu_load:.2f} s for {fired[0]} firings ({cpu_load / max(1, fired[0]) * 1e6:.0f} us per firing)")
health = json.loads(urllib.request.urlopen(f"{url}/healthz").read())
if health.get("otlp"):
    o = health["otlp"]
    legs = {"logs": o.get("confirmed"), "traces": (o.get("traces") or {}).get("confirmed"), "metrics exports": (o.get("metrics") or {}).get("exports")}
    print(f"otlp confirmed: {legs}; pending {o.get('pending')}")
PY
echo "daemon log lines (warn and above): $(grep -c "" "$WORK/daemon.err" || true)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
