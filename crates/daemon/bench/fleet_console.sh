#!/usr/bin/env bash
# The fleet console's catch-up (numbers go in docs/benchmarks.md, "Fleet console"):
# fleet_console_pub.py publishes EVENTS Events from SESSIONS sessions over HOSTS machines into
# a fresh nats-server stream (JetStream, file storage, loopback), then `aep-cline fleet
# sessions --json` and `fleet usage host --json` read the whole stream (an ordered consumer
# from the first message) and fold it; each is timed with /usr/bin/time -v (wall time → Events/s,
# maximum RSS). Live latency hook → console: fleet_latency.sh.
#
#   crates/daemon/bench/fleet_console.sh                 # 100,000 Events, 2,000 sessions, 50 hosts
#   crates/daemon/bench/fleet_console.sh 200000 4000 100
#   AEP_CLINE_BIN=target/debug/aep-cline crates/daemon/bench/fleet_console.sh   # another build, no cargo
# Needs nats-server (Debian's package) and python3.
set -euo pipefail
cd "$(dirname "$0")/../../.."
EVENTS="${1:-100000}" SESSIONS="${2:-2000}" HOSTS="${3:-50}"
if [ -z "${AEP_CLINE_BIN:-}" ]; then
  cargo build --release -q -p aep-cline --bin aep-cline
fi
BIN="${AEP_CLINE_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/aep-cline}"
WORK="$(mktemp -d)"
SERVER=""
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
nats-server -js -a 127.0.0.1 -p "$PORT" -sd "$WORK/js" >/dev/null 2>&1 &
SERVER=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
SENT="$(python3 crates/daemon/bench/fleet_console_pub.py "$PORT" "$EVENTS" "$SESSIONS" "$HOSTS")"
export AEP_NATS_URL="nats://127.0.0.1:$PORT"
echo "published $SENT Events from $SESSIONS sessions on $HOSTS hosts into $AEP_NATS_URL"
for cmd in "sessions --json --all" "usage host --json" "machines --json"; do
  # shellcheck disable=SC2086
  /usr/bin/time -v "$BIN" fleet $cmd >"$WORK/out.json" 2>"$WORK/time.txt"
  wall="$(awk -F': ' '/Elapsed \(wall clock\)/{print $2}' "$WORK/time.txt")"
  rss="$(awk -F': ' '/Maximum resident/{print $2}' "$WORK/time.txt")"
  secs="$(python3 -c "p='$wall'.split(':'); print(sum(float(x)*60**i for i,x in enumerate(reversed(p))))")"
  rate="$(python3 -c "print(round($SENT/$secs))")"
  echo "fleet $cmd: ${secs}s for $SENT Events = $rate Events/s; max RSS $((rss / 1024)) MiB; output $(wc -c <"$WORK/out.json") bytes"
done
