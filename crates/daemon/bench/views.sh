#!/usr/bin/env bash
# `aep-cline sessions` at scale (#34): 10,000 session logs holding 1,000,000 Events (100 each:
# a run of 24 tool calls with an approval, the shape of a real session's log), then hyperfine:
# a whole read (`--no-cache`, what every run did before the index), the first run with the index
# (reads everything and keeps the index), and runs with the index warm, unchanged and after 100
# sessions grew, and `approvals`. Prints wall times and their ratios to the whole read; numbers go in
# docs/benchmarks.md.
#
#   crates/daemon/bench/views.sh [SESSIONS] [EVENTS_PER_SESSION]     # default 10000 100
set -euo pipefail
cd "$(dirname "$0")/../../.."
N="${1:-10000}" PER="${2:-100}"
command -v hyperfine >/dev/null || { echo "needs hyperfine" >&2; exit 2; }
cargo build --release -q -p aep-cline
BIN="$PWD/target/release/aep-cline"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export HOME="$WORK" AEP_LOG_DIR="$WORK/logs" AEP_CLINE_STATE_DIR="$WORK/state" XDG_CACHE_HOME="$WORK/cache"
mkdir -p "$WORK/logs/cline"
python3 - "$WORK/logs/cline" "$N" "$PER" <<'PY'
import json, sys
out, n, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def ev(s, seq, ty, t, run=None, **data):
    e = {"aep": "0.1", "id": f"{s}-{seq}", "type": ty, "time": f"2026-12-01T10:{t // 60 % 60:02d}:{t % 60:02d}.000Z",
         "source": "aep://bench/cline", "agent": "cline", "session": s, "seq": seq, "capture": "metadata", "data": data}
    if run: e["run"] = run
    return json.dumps(e, separators=(",", ":"))
for i in range(n):
    s = f"17960{i:08d}_bench"
    lines = [ev(s, 0, "session.started", 0, client={"name": "cline"}, **{"gen_ai.request.model": "fake-model"}),
             ev(s, 1, "run.started", 1, "r1", trigger="user")]
    seq, t = 2, 2
    while seq < per - 4:
        lines.append(ev(s, seq, "tool.requested", t, "r1", tool={"name": "execute_command"})); seq += 1
        lines.append(ev(s, seq, "tool.completed", t, "r1", tool={"name": "execute_command"}, duration_ms=40)); seq += 1
        t += 1
    lines.append(ev(s, seq, "attention.requested", t, "r1", kind="approval")); seq += 1
    lines.append(ev(s, seq, "attention.resolved", t, "r1", resolution="auto")); seq += 1
    lines.append(ev(s, seq, "run.finished", t, "r1", duration_ms=1000, **{"gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 45})); seq += 1
    lines.append(ev(s, seq, "session.ended", t, reason="completed"))
    with open(f"{out}/{s}.jsonl", "w") as f:
        f.write("\n".join(lines) + "\n")
PY
echo "logs: $(ls "$WORK/logs/cline" | wc -l) sessions, $(cat "$WORK/logs/cline"/*.jsonl | wc -l) Events, $(du -sh "$WORK/logs" | cut -f1)"
grow() { python3 - "$WORK/logs/cline" <<'PY'
import glob, json, sys
for p in sorted(glob.glob(sys.argv[1] + "/*.jsonl"))[:100]:
    last = json.loads(open(p).read().splitlines()[-1])
    last["seq"] += 1; last["id"] += "x"; last["type"] = "x.cline.notification.sent"
    open(p, "a").write(json.dumps(last) + "\n")
PY
}
export -f grow; export WORK
hyperfine -N --warmup 1 --runs 5 --export-json "$WORK/whole.json" "$BIN sessions --all --json --no-cache" >/dev/null
hyperfine -N --runs 1 --export-json "$WORK/first.json" "$BIN sessions --all --json" >/dev/null
hyperfine -N --warmup 1 --runs 10 --export-json "$WORK/warm.json" "$BIN sessions --all --json" >/dev/null
hyperfine --shell=bash --runs 5 --prepare grow --export-json "$WORK/grown.json" "$BIN sessions --all --json" >/dev/null
hyperfine -N --warmup 1 --runs 10 --export-json "$WORK/table.json" "$BIN sessions" >/dev/null
hyperfine -N --warmup 1 --runs 10 --export-json "$WORK/approvals.json" "$BIN approvals --json" >/dev/null
[ "$("$BIN" sessions --all --json)" = "$("$BIN" sessions --all --json --no-cache)" ] && same=yes || same=NO
python3 - "$WORK" "$same" <<'PY'
import json, sys
w = sys.argv[1]
m = lambda k: json.load(open(f"{w}/{k}.json"))["results"][0]["median"] * 1000
whole = m("whole")
for k, what in [("whole", "whole read (--no-cache)"), ("first", "first run, building the index"),
                ("warm", "index warm, nothing changed"), ("grown", "index warm, 100 sessions grew"),
                ("table", "`sessions` (the table, index warm)"),
                ("approvals", "`approvals --json` (index warm)")]:
    print(f"{what:40s} {m(k):8.1f} ms   {m(k) / whole:5.2f}x the whole read")
print(f"index answer identical to the whole read: {sys.argv[2]}")
PY
du -h "$WORK/cache/aep-cline"/sessions-index-* | sed 's/^/index size: /'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
