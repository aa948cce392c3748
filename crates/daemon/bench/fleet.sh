#!/usr/bin/env bash
# The fleet simulation (numbers go in docs/benchmarks.md, "Fleet: JetStream"):
#
# 1. N daemons (each its own HOME, state folder, log folder and loopback port), all publishing
#    to one nats-server with JetStream (file storage, a temporary store), fed by
#    examples/fleet_load.rs through POST /hook (what the shim sends: one hook at a time per
#    connection, several sessions per connection). Reports per N: hooks/s, Events stored in
#    JetStream per second end to end, p50/p99 latency from a hook's send to its Event's
#    delivery from the stream (after the server's publish ack), and each daemon's memory.
# 2. The sink alone: one daemon restarted against an empty server with 100% of its logs
#    unconfirmed (the marks say nothing was acked) resends them from the logs: how fast
#    JetStream takes them (publish + ack, pipelined), without the hook path in front.
#
#   crates/daemon/bench/fleet.sh              # N = 1 10 100, 10 s each
#   crates/daemon/bench/fleet.sh 1 10         # chosen N
#   FLEET_SECONDS=20 FLEET_CONNECTIONS=16 crates/daemon/bench/fleet.sh 1
#   AEP_CLINE_BIN=... FLEET_LOAD=... crates/daemon/bench/fleet.sh   # other builds, no cargo
# Needs nats-server (Debian's package) and python3. Loopback only; every run is bounded.
set -euo pipefail
cd "$(dirname "$0")/../../.."
TARGET="${CARGO_TARGET_DIR:-$PWD/target}/release"
if [ -z "${AEP_CLINE_BIN:-}" ]; then
  cargo build --release -q -p aep-cline --bin aep-cline --example fleet_load
fi
BIN="${AEP_CLINE_BIN:-$TARGET/aep-cline}"
LOAD="${FLEET_LOAD:-$TARGET/examples/fleet_load}"
SECS="${FLEET_SECONDS:-10}"
ulimit -n "$(ulimit -Hn)"
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rss() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }
hwm() { awk '/^VmHWM/{print $2}' "/proc/$1/status"; }

start_nats() { # $1 store dir; prints the port
  local port; port="$(free_port)"
  nats-server -js -a 127.0.0.1 -p "$port" -sd "$1" >/dev/null 2>&1 &
  PIDS+=($!); NATS_PID=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
  NATS_PORT=$port
}

start_daemon() { # $1 folder, $2 nats url; sets DAEMON_PID
  mkdir -p "$1"
  rm -f "$1/state/daemon.json"
  HOME="$1" AEP_LOG_DIR="$1/logs" AEP_CLINE_STATE_DIR="$1/state" AEP_LISTEN=127.0.0.1:0 \
    AEP_NATS_URL="$2" RUST_LOG=warn "$BIN" daemon 2>>"$1/daemon.err" &
  DAEMON_PID=$!; PIDS+=($DAEMON_PID)
}

wait_discovery() { # $1 folder; prints "url token"
  for _ in $(seq 400); do
    [ -s "$1/state/daemon.json" ] && break; sleep 0.05
  done
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["url"], d["token"])' "$1/state/daemon.json"
}

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), nats-server $(nats-server --version | awk '{print $2}')"
start_nats "$WORK/js"
URL="nats://127.0.0.1:$NATS_PORT"
for N in "${@:-1 10 100}"; do
  case "$N" in 1) C=${FLEET_CONNECTIONS:-16};; 10) C=${FLEET_CONNECTIONS:-4};; *) C=${FLEET_CONNECTIONS:-1};; esac
  : >"$WORK/daemons-$N"
  DPIDS=()
  for i in $(seq "$N"); do
    start_daemon "$WORK/n$N/d$i" "$URL"; DPIDS+=($DAEMON_PID)
  done
  for i in $(seq "$N"); do wait_discovery "$WORK/n$N/d$i" >>"$WORK/daemons-$N"; done
  idle=0; for p in "${DPIDS[@]}"; do idle=$((idle + $(rss "$p"))); done
  RESULT="$("$LOAD" --daemons "$WORK/daemons-$N" --nats "$URL" --seconds "$SECS" --connections "$C" --sessions 4 --label "n$N")"
  sum=0; max=0; peak=0
  for p in "${DPIDS[@]}"; do r=$(rss "$p"); h=$(hwm "$p"); sum=$((sum + r)); [ "$r" -gt "$max" ] && max=$r; [ "$h" -gt "$peak" ] && peak=$h; done
  health="$(curl -s "$(head -1 "$WORK/daemons-$N" | cut -d' ' -f1)/healthz" | python3 -c 'import json,sys; n=json.load(sys.stdin)["nats"]; print("pending", n["pending"], "from_log", n["from_log"], "resends", n["resends"], "retries", n["retries"])')"
  echo "N=$N connections/daemon=$C $RESULT"
  echo "N=$N rss per daemon: idle $((idle / N)) KiB, after $((sum / N)) KiB avg, $max KiB max, peak (VmHWM) $peak KiB; nats-server rss $(rss "$NATS_PID") KiB; first daemon: $health; load $(cut -d' ' -f1-3 /proc/loadavg)"
  for p in "${DPIDS[@]}"; do kill -TERM "$p"; done
  for p in "${DPIDS[@]}"; do wait "$p" 2>/dev/null || true; done
done

# 2. The sink alone: the N=1 daemon's logs (or the first N's), all unconfirmed, to a new server.
FIRST="${1:-1}"
D="$WORK/n$FIRST/d1"
start_nats "$WORK/js-backlog"
URL2="nats://127.0.0.1:$NATS_PORT"
TOTAL=$(cat "$D"/logs/cline/*.jsonl | wc -l)
python3 - "$D/logs/cline" "$URL2 AEP" <<'PY'
import json, os, sys, urllib.parse
d, target = sys.argv[1], sys.argv[2]
sessions = {}
for name in os.listdir(d):
    if name.endswith(".jsonl"):
        sessions[urllib.parse.unquote(name[:-6])] = {"first": {"epoch": 0, "seq": 0}}
json.dump({"nats": target, "sessions": sessions}, open(os.path.join(d, ".nats.json"), "w"))
PY
start_daemon "$D" "$URL2"
BACKLOG="$("$LOAD" --daemons /dev/null --nats "$URL2" --backlog "$TOTAL" --seconds 120)"
echo "backlog: $TOTAL Events resent from the logs of one daemon: $BACKLOG; daemon rss $(rss "$DAEMON_PID") KiB, peak $(hwm "$DAEMON_PID") KiB"
