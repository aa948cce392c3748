#!/usr/bin/env bash
# What OTLP's spans and metrics cost per hook (#33): bench/load.sh's 200 sessions through the
# real shim at a fixed rate, three times in one run: OTLP off, the logs alone
# (AEP_OTLP_TRACES=0 AEP_OTLP_METRICS=0), and logs, traces and metrics (with the metrics sent
# every second, 60 times the default). The collector is a null one on 127.0.0.1 (it reads each
# body and answers 200), so what is measured is the daemon's side: its CPU per firing, the
# shim's wall time, and whether every Event still lands. Numbers go in docs/benchmarks.md.
#
#   crates/daemon/bench/otlp_cost.sh [RATE] [SECONDS] [SESSIONS]     # default 400 20 200
set -euo pipefail
cd "$(dirname "$0")/../../.."
RATE="${1:-400}" SECONDS_="${2:-20}" SESSIONS="${3:-200}"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
python3 - "$PORT" <<'PY' & COLLECTOR=$!
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200); self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
trap 'kill $COLLECTOR 2>/dev/null || true' EXIT
sleep 0.5
echo "== OTLP off"
bash crates/daemon/bench/load.sh "$RATE" "$SECONDS_" "$SESSIONS"
echo "== OTLP logs only"
AEP_OTLP_ENDPOINT="http://127.0.0.1:$PORT" AEP_OTLP_TRACES=0 AEP_OTLP_METRICS=0 \
  bash crates/daemon/bench/load.sh "$RATE" "$SECONDS_" "$SESSIONS"
echo "== OTLP logs, traces and metrics (every 1s)"
AEP_OTLP_ENDPOINT="http://127.0.0.1:$PORT" AEP_OTLP_METRICS_INTERVAL=1s \
  bash crates/daemon/bench/load.sh "$RATE" "$SECONDS_" "$SESSIONS"
