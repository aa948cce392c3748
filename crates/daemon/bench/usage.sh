#!/usr/bin/env bash
# Speed and memory of `aep-cline usage session --json` over a synthetic Cline 3.x store, beside
# ccusage 20.0.24 (`ccusage claude session --json --offline`) over a Claude Code history with the
# same model calls, in the same hyperfine run. Targets (issue 12): under 1 s for 10,000 sessions
# and about 500,000 model calls on this 2-core machine, at least 10x faster than ccusage, memory
# independent of history size. Numbers go in docs/benchmarks.md.
#
#   crates/daemon/bench/usage.sh [SESSIONS] [CALLS]    # default 10000 500000
#
# Needs python3, npm, hyperfine and /usr/bin/time (installed with apt-get when run as root).
# The histories are written by synth_history.py into $BENCH_DIR (default /tmp/aep-cline-usage-bench)
# and kept there for the next run with the same sizes. Before timing, both tools' totals are
# checked against the generator's: ccusage reports zeros, without an error, for files it does
# not recognise, so a run that did not count the history would otherwise look fast.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROOT="$PWD"
SESSIONS="${1:-10000}"
CALLS="${2:-500000}"
WORK="${BENCH_DIR:-/tmp/aep-cline-usage-bench}"
SMALL_SESSIONS=$((SESSIONS / 10)) SMALL_CALLS=$((CALLS / 10))

need() {
    command -v "$1" >/dev/null && return
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get install -y "$2" >/dev/null
    else
        echo "usage.sh: $1 is missing; install the $2 package (apt-get install -y $2)" >&2
        exit 1
    fi
}
need hyperfine hyperfine
need npm npm
[ -x /usr/bin/time ] || need /usr/bin/time time

echo "building aep-cline (release)..."
BIN="$(bash tools/release.sh)"

# ccusage 20.0.24 from npm, into target/ (its native linux binary comes as an optional
# dependency; 20.0.26 ships none, so the version is pinned).
CCUSAGE="$ROOT/target/ccusage/node_modules/.bin/ccusage"
if [ ! -x "$CCUSAGE" ] || [ "$("$CCUSAGE" --version 2>/dev/null)" != "ccusage 20.0.24" ]; then
    echo "installing ccusage 20.0.24 into target/ccusage..."
    mkdir -p "$ROOT/target/ccusage"
    npm install --prefix "$ROOT/target/ccusage" --no-audit --no-fund --silent ccusage@20.0.24
fi

# Writes (once) the Cline store and the Claude history of $1 sessions and $2 calls.
histories() {
    local dir="$WORK/$1x$2"
    for kind in cline claude; do
        if [ ! -s "$dir/$kind/totals.json" ]; then
            echo "generating the $kind history: $1 sessions, $2 model calls..." >&2
            rm -rf "$dir/$kind"
            python3 "$ROOT/crates/daemon/bench/synth_history.py" "$kind" "$dir/$kind" \
                --sessions "$1" --calls "$2" >/dev/null
        fi
    done
    echo "$dir"
}

# Fails unless ccusage's and aep-cline's totals are the generator's.
check() {
    local dir="$1"
    CLAUDE_CONFIG_DIR="$dir/claude" "$CCUSAGE" claude session --json --offline >"$dir/ccusage.json"
    "$BIN" usage session --json --cline-dir "$dir/cline" >"$dir/aep-cline.json"
    python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
want = json.load(open(f"{d}/claude/totals.json"))["tokens"]
got = json.load(open(f"{d}/ccusage.json"))["totals"]
cc = (got["inputTokens"], got["cacheReadTokens"], got["cacheCreationTokens"], got["outputTokens"])
exp = (want["fresh_input"], want["cache_read_tokens"], want["cache_write_tokens"], want["output_tokens"])
assert cc == exp, f"ccusage counted {cc}, the Claude history holds {exp}: it did not read the history"
want = json.load(open(f"{d}/cline/totals.json"))
out = json.load(open(f"{d}/aep-cline.json"))
tokens = out["totals"]["tokens"]
ours = (tokens["uncached_input"], tokens["cache_read"], tokens["cache_write"], tokens["output"], out["totals"]["model_calls"])
exp = (want["tokens"]["uncached_input"], want["tokens"]["cache_read_tokens"],
       want["tokens"]["cache_write_tokens"], want["tokens"]["output_tokens"], want["model_calls"])
assert ours == exp, f"aep-cline counted {ours}, the Cline store holds {exp}"
assert not out["problems"], out["problems"]
print(f"totals check: ccusage and aep-cline both count all {want['model_calls']} model calls")
PY
}

peak_rss() { # peak RSS in MiB of the command "$@"
    /usr/bin/time -v "$@" 2>&1 >/dev/null | awk '/Maximum resident set size/ {printf "%.1f", $6 / 1024}'
}

big="$(histories "$SESSIONS" "$CALLS" | tail -1)"
small="$(histories "$SMALL_SESSIONS" "$SMALL_CALLS" | tail -1)"
check "$small"
check "$big"
du -sh "$big/cline" "$big/claude"

echo
echo "== time: $SESSIONS sessions, $CALLS model calls (warm page cache) =="
# A first run reads every file (`--no-cache`: what a run does with no index of what it read);
# a repeat run over the unchanged store answers from the index, kept in a cache folder of the
# benchmark's own.
export XDG_CACHE_HOME="$WORK/cache"
rm -rf "$XDG_CACHE_HOME"
"$BIN" usage session --json --cline-dir "$big/cline" >/dev/null
# A real first run also builds the index (its --prepare removes the index first); the warm run
# after it finds the index that run left. A floor: coreutils `cat` of every file of the Cline
# store to /dev/null on two processes (this machine's cores), in two even halves: the bytes read
# with read(2) and nothing else (cat also maps a fresh 128 KiB buffer per file, so a reader that
# keeps its buffer reads a little faster).
files="$(find "$big/cline/data" -type f | wc -l)"
floor="cd $big/cline && find data -type f -print0 | xargs -0 -P2 -n $(((files + 1) / 2)) cat >/dev/null"
hyperfine --warmup 1 --runs "${RUNS:-5}" --export-markdown "$WORK/usage.md" \
    --prepare true --prepare true --prepare "rm -rf $XDG_CACHE_HOME/aep-cline" --prepare true --prepare true \
    -n "the floor: cat of every file of the Cline store, two processes" "$floor" \
    -n "aep-cline usage session --json, reading every file (--no-cache)" "$BIN usage session --json --no-cache --cline-dir $big/cline" \
    -n "aep-cline usage session --json, first run (the index built)" "$BIN usage session --json --cline-dir $big/cline" \
    -n "aep-cline usage session --json, the index warm" "$BIN usage session --json --cline-dir $big/cline" \
    -n "ccusage claude session --json --offline" \
    "CLAUDE_CONFIG_DIR=$big/claude $CCUSAGE claude session --json --offline"

echo
echo "== peak RSS (MiB) =="
printf '%-44s %10s %10s\n' "" "$SMALL_CALLS calls" "$CALLS calls"
printf '%-44s %10s %10s\n' "aep-cline usage session --json --no-cache" \
    "$(peak_rss "$BIN" usage session --json --no-cache --cline-dir "$small/cline")" \
    "$(peak_rss "$BIN" usage session --json --no-cache --cline-dir "$big/cline")"
printf '%-44s %10s %10s\n' "ccusage claude session --json --offline" \
    "$(CLAUDE_CONFIG_DIR=$small/claude peak_rss "$CCUSAGE" claude session --json --offline)" \
    "$(CLAUDE_CONFIG_DIR=$big/claude peak_rss "$CCUSAGE" claude session --json --offline)"
