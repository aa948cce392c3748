#!/usr/bin/env bash
# Benchmarks the OTLP exporter through a collector outage: N sessions' hooks (6 Events each) are
# posted while the collector is down, the daemon's RSS is read as the backlog grows (it must
# stay bounded: the outbox holds AEP_OTLP_OUTBOX=1000 Events, the rest waits in the logs; what
# still grows is one small entry per session carried), then a
# collector comes up and the time to drain the backlog is measured, with every Event counted
# once by a collector that decodes with the official Python bindings (PyPI opentelemetry-proto).
# Numbers go in docs/benchmarks.md.
#
#   crates/daemon/bench/otlp.sh [SESSIONS]      # default 5000; BENCH_BIN=target/debug/aep-cline skips the release build
set -euo pipefail
cd "$(dirname "$0")/../../.."
N="${1:-5000}"
if [ -z "${BENCH_BIN:-}" ]; then
  cargo build --release -q -p aep-cline
  BIN="$PWD/target/release/aep-cline"
else
  BIN="$(realpath "$BENCH_BIN")"
fi
PY="$(bash .ci/install-otlp-proto.sh)"
WORK="$(mktemp -d)"
trap 'kill $DAEMON $COLLECTOR 2>/dev/null || true; rm -rf "$WORK"' EXIT
export HOME="$WORK" AEP_LOG_DIR="$WORK/logs" AEP_CLINE_STATE_DIR="$WORK/state"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
COLLECTOR=

AEP_LISTEN=127.0.0.1:0 AEP_SESSION_GRACE=1s AEP_OTLP_ENDPOINT="http://127.0.0.1:$PORT" AEP_OTLP_OUTBOX=1000 RUST_LOG=error \
  "$BIN" daemon 2>"$WORK/daemon.log" & DAEMON=$!
for _ in $(seq 100); do [ -s "$WORK/state/daemon.json" ] && break; sleep 0.05; done

# The collector: counts records and distinct aep.event_ids (run once the backlog is built).
cat >"$WORK/collector.py" <<'PY'
import gzip, http.server, json, sys
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
seen, records = set(), [0]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["content-length"]))
        if self.path != "/v1/logs":  # the spans and metrics: taken, not counted here
            self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
            return
        req = ExportLogsServiceRequest(); req.ParseFromString(gzip.decompress(body))
        for rl in req.resource_logs:
            for sl in rl.scope_logs:
                for r in sl.log_records:
                    records[0] += 1
                    seen.add(next(a.value.string_value for a in r.attributes if a.key == "aep.event_id"))
        out = ExportLogsServiceResponse().SerializeToString()
        self.send_response(200); self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(out))); self.end_headers(); self.wfile.write(out)
        with open(sys.argv[2], "w") as f: json.dump({"records": records[0], "distinct": len(seen)}, f)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY

status=0
python3 - "$WORK/state/daemon.json" "$DAEMON" "$N" "$PWD/crates/cline-hooks/tests/data" "$PY" "$WORK" "$PORT" <<'PY' || status=$?
import http.client, json, subprocess, sys, time
discovery, pid, n, data, py, work, port = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
host, dport = discovery["url"].removeprefix("http://").rsplit(":", 1)
conn = http.client.HTTPConnection(host, int(dport))
hooks = [json.load(open(f"{data}/{d}/{h}-global.json")) for d, h in [
    ("hooks-local", "agent_start"), ("hooks-local", "tool_call"), ("hooks-local", "tool_result"),
    ("hooks-local", "agent_end"), ("hooks-cancel", "session_shutdown")]]

def rss_mib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024

def otlp():
    conn.request("GET", "/healthz")
    return json.loads(conn.getresponse().read())["otlp"]

def run(first, last):
    for s in range(first, last):
        for i, hook in enumerate(hooks):
            hook["sessionContext"]["rootSessionId"] = f"bench-{s:06d}"
            conn.request("POST", "/hook", json.dumps(hook), {"Authorization": f"Bearer {discovery['token']}",
                         "Content-Type": "application/json", "X-Aep-Cline-Delivery": f"{s}-{i}"})
            r = conn.getresponse(); answer = r.read()
            assert r.status == 200, (r.status, answer)

print(f"idle: {rss_mib():.1f} MiB")
run(0, n // 10)
time.sleep(2)
tenth = rss_mib()
print(f"collector down, {n // 10} sessions: {tenth:.1f} MiB, pending {otlp()['pending']}")
run(n // 10, n)
time.sleep(3)
full = rss_mib()
o = otlp()
total, waiting = o["pending"], o
print(f"collector down, {n} sessions: {full:.1f} MiB, pending {total}, outbox {o['outbox']}")
collector = subprocess.Popen([py, f"{work}/collector.py", port, f"{work}/count.json"])
start = time.time()
while True:
    o = otlp()
    if o["pending"] == 0:
        break
    if time.time() - start > 600:
        sys.exit(f"not drained after 600 s: {o}")
    time.sleep(0.2)
drained = time.time() - start
time.sleep(1)
count = json.load(open(f"{work}/count.json"))
collector.terminate()
print(f"collector up: {total} Events drained in {drained:.1f} s ({total / drained:.0f} Events/s), "
      f"{count['records']} records, {count['distinct']} distinct, RSS {rss_mib():.1f} MiB")
grown = full - tenth
print(f"growth from {n // 10} to {n} sessions while down: {grown:+.1f} MiB, "
      f"{grown * 1024 / (n - n // 10):.1f} KiB per session (the Events waiting grew tenfold, the outbox stayed at its bound)")
logged = n * 6
print(f"logged {logged} Events; the collector saw {count['distinct']} of them (target: all, none twice)")
sys.exit(0 if count["distinct"] == logged == count["records"] and waiting["outbox"] <= 1000 else 1)
PY
grep -E "ERROR" "$WORK/daemon.log" | head -5 || true
exit $status
