#!/usr/bin/env bash
# Benchmarks the hub tap: from a hub's `approval.requested` frame to the `attention.requested`
# Event appended to the session log and published (target: p99 <= 5 ms). In process, release
# build, over a loopback WebSocket from the stub hub that replays the real hub's frames.
#
#   crates/daemon/bench/hub.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
cargo test --release -q -p aep-cline --bin aep-cline hub::tests::bench_approval_to_attention \
  -- --ignored --nocapture 2>&1 | grep 'attention.requested appended'
