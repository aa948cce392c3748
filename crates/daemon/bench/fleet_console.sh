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
EVENTS="${1:-100000}" SESSIONS="${2:-2000}" HOSTS="${3:-50}"
. "$(dirname "$0")/fleet_setup.sh"
SENT="$(python3 crates/daemon/bench/fleet_console_pub.py "$PORT" "$EVENTS" "$SESSIONS" "$HOSTS")"
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
