#!/usr/bin/env bash
# What the guardrails cost a hook Cline waits on (#35): the shim per `tool_call` firing against
# a live release daemon without a policy or budgets, and against one deciding every call (the
# README's policy, budgets set, so Cline's store is also read), beside `cat` (reading stdin
# and exiting: the floor), all in one hyperfine run behind the same `env`. Target: the guarded
# firing within 1.5x of the unguarded one, and the shim within 1.2x of `cat` (#34). Numbers go in
# docs/benchmarks.md.
#
#   crates/daemon/bench/guard.sh            # needs hyperfine 1.16+ (installed under target/tools)
set -euo pipefail
cd "$(dirname "$0")/../../.."
HF=hyperfine
if ! { command -v hyperfine >/dev/null && hyperfine --help | grep -q -- '--input'; }; then
  [ -x target/tools/bin/hyperfine ] || cargo install -q hyperfine@1.20.0 --locked --root target/tools
  HF=target/tools/bin/hyperfine
fi
# The binary as it ships (tools/release.sh: static on Linux), and the plain `cargo build
# --release` one beside it, to show what the static link is worth.
BIN="$(bash tools/release.sh)"
cargo build --release -q -p aep-cline
DYN="$PWD/target/release/aep-cline"
PAYLOAD="$PWD/crates/cline-hooks/tests/data/hooks-local/tool_call-global.json"
WORK="$(mktemp -d)"
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

# The README's own policy block: the rules a newcomer starts from.
python3 - README.md "$WORK/policy.toml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
block = text[text.index("### Policy (`AEP_CLINE_POLICY`)"):]
policy = re.search(r"```toml\n(.*?)```", block, re.S).group(1)
open(sys.argv[2], "w").write(policy)
PY

start() { # name, extra environment...
  local name="$1"; shift
  mkdir -p "$WORK/$name/home/.cline/data"
  env HOME="$WORK/$name/home" AEP_LOG_DIR="$WORK/$name/logs" AEP_CLINE_STATE_DIR="$WORK/$name/state" \
    AEP_LISTEN=127.0.0.1:0 RUST_LOG=warn "$@" "$BIN" daemon &
  PIDS+=($!)
  for _ in $(seq 200); do [ -S "$WORK/$name/state/daemon.sock" ] && return 0; sleep 0.05; done
  echo "the $name daemon did not start" >&2; exit 1
}
start plain
start guarded AEP_CLINE_POLICY="$WORK/policy.toml" AEP_CLINE_BUDGET=run=5,session=20,day=100

shim() { echo "env HOME=$WORK/$1/home AEP_CLINE_STATE_DIR=$WORK/$1/state ${2:-$BIN} hook"; }
# Each firing once first: the session exists, as it does for every call after a run's first.
for d in plain guarded; do $(shim $d) <"$PAYLOAD" >/dev/null; done
# The guarded shim prints nothing for this call (`echo hi` meets no rule), as for most calls.
"$HF" -N --warmup 30 --runs 600 --input "$PAYLOAD" --export-json "$WORK/guard.json" \
  -n plain "$(shim plain)" -n guarded "$(shim guarded)" -n dynamic "$(shim plain "$DYN")" -n cat "env HOME=$WORK cat"
python3 - "$WORK/guard.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
for name in ("plain", "guarded", "dynamic", "cat"):
    print(f"{name:>8}: median {r[name]['median']*1000:.2f} ms, mean {r[name]['mean']*1000:.2f} ms")
print(f"guarded / plain: {r['guarded']['median'] / r['plain']['median']:.2f}x (target <= 1.5x)")
print(f"plain / cat: {r['plain']['median'] / r['cat']['median']:.2f}x (target <= 1.2x), guarded / cat: {r['guarded']['median'] / r['cat']['median']:.2f}x, "
      f"dynamically linked / cat: {r['dynamic']['median'] / r['cat']['median']:.2f}x")
PY
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
