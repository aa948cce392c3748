#!/usr/bin/env bash
# The fleet console's first paint at scale (numbers go in docs/benchmarks.md, "Fleet console"):
# a fresh nats-server stream filled as the daemons' sinks fill it (fleet_console_pub.py), a
# release `aep-cline fleet serve` that catches up with all of it at start, then its page in
# headless Chromium through the one-time link and reloaded twice, until the first rows are drawn.
# The test harness (tests/fleet_scale.rs, a debug build) only fills the stream and drives the
# browser.
#
#   crates/daemon/bench/fleet_page.sh                  # 10,000 sessions, 1,000,000 Events, 200 hosts
#   crates/daemon/bench/fleet_page.sh 1000 50000
# Needs nats-server, chromium and chromium-driver (Debian's packages) and python3.
set -euo pipefail
cd "$(dirname "$0")/../../.."
SESSIONS="${1:-10000}" EVENTS="${2:-1000000}"
cargo build --release -q -p aep-cline
uptime
AEP_BENCH_BIN="$PWD/target/release/aep-cline" AEP_BENCH_SESSIONS="$SESSIONS" AEP_BENCH_EVENTS="$EVENTS" \
  cargo test -q -p aep-cline --test serving fleet_scale:: -- --nocapture 2>&1 |
  grep -E "sessions, [0-9]+ events|test result|panicked"
