#!/usr/bin/env bash
# The dashboard's first paint at scale (numbers go in docs/benchmarks.md, "Dashboard"): a release
# daemon over SESSIONS session logs of 100 Events each (10,000 and 1,000,000 by default), read
# into its view at start; then the page, loaded three times in headless Chromium through the
# one-time link (the redirect included), until its first 100 rows are drawn. The test harness
# (tests/dashboard_scale.rs, a debug build) only writes the logs and drives the browser; the
# daemon, the shim and the commands are the release binary.
#
#   crates/daemon/bench/dashboard.sh            # 10,000 sessions, 1,000,000 Events
#   crates/daemon/bench/dashboard.sh 1000       # 1,000 sessions, 100,000 Events
# Needs chromium and chromium-driver (Debian's packages; .ci/run installs them).
set -euo pipefail
cd "$(dirname "$0")/../../.."
SESSIONS="${1:-10000}"
cargo build --release -q -p aep-cline
uptime
AEP_BENCH_BIN="$PWD/target/release/aep-cline" AEP_BENCH_SESSIONS="$SESSIONS" \
  cargo test -q -p aep-cline --test serving dashboard_scale:: -- --nocapture 2>&1 |
  grep -E "sessions, [0-9]+ events|test result|panicked"
