# Sourced by the fleet console benchmarks (fleet_console.sh, fleet_live.sh, fleet_latency.sh): builds the release
# binary unless AEP_CLINE_BIN names one (BIN), makes a scratch directory (WORK), starts a fresh
# nats-server with JetStream on file storage on a free loopback port (PORT, AEP_NATS_URL
# exported); whatever is added to PIDS is stopped, and WORK removed, on exit.
# Needs nats-server (Debian's package) and python3.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
if [ -z "${AEP_CLINE_BIN:-}" ]; then
  cargo build --release -q -p aep-cline --bin aep-cline
fi
BIN="${AEP_CLINE_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/aep-cline}"
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
nats-server -js -a 127.0.0.1 -p "$PORT" -sd "$WORK/js" >/dev/null 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
export AEP_NATS_URL="nats://127.0.0.1:$PORT"
