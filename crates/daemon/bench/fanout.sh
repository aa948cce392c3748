#!/usr/bin/env bash
# Fan-out benchmark of the embedded AEP endpoint: one emitter -> 10 SSE subscribers.
# Hooks/s and hook-to-delivery latency (p50/p99), collector Events/s, and the daemon's peak RSS
# as traffic doubles (memory is bounded by the replay buffer, AEP_BUFFER=1000 here).
# Targets: >= 20,000 Events/s, p99 <= 5 ms.
#
# Usage: crates/daemon/bench/fanout.sh [HOOKS]   (default 20000)
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
exec cargo bench -q -p aep-cline --bench fanout -- "${1:-20000}"
