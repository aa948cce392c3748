#!/usr/bin/env bash
# Throughput and memory of `aep-cline stream` next to `jq -c .` on the same generated stream.
#
# Generates a stream of about SIZE_MB (default 100) by repeating the real Cline 3.0.65 records
# in crates/cline-stream/tests/data, times `aep-cline stream` (release build) and `jq -c .` on it
# in the same hyperfine run, and measures peak RSS with /usr/bin/time -v at two sizes (SIZE_MB/10
# and SIZE_MB) to show that memory stays flat as the stream grows. Target: >= 5x jq.
#
# Usage: crates/cline-stream/bench/throughput.sh [SIZE_MB]   (BENCH_DIR overrides the scratch dir)
set -euo pipefail

size_mb="${1:-100}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
data="$root/crates/cline-stream/tests/data"
work="${BENCH_DIR:-${TMPDIR:-/tmp}/aep-cline-bench}"
mkdir -p "$work"

need() {
    command -v "$1" >/dev/null && return
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get install -y "$2" >/dev/null
    else
        echo "throughput.sh: $1 is missing; install the $2 package (apt-get install -y $2)" >&2
        exit 1
    fi
}
need hyperfine hyperfine
need jq jq
[ -x /usr/bin/time ] || need /usr/bin/time time

echo "building aep-cline (release)..."
(cd "$root" && cargo build --release -q -p aep-cline)
bin="$root/target/release/aep-cline"

# Writes about $2 MB of repeated real records to $1: a ~1 MB seed, then the seed repeated.
generate() {
    local out="$1" mb="$2" seed="$work/seed.jsonl"
    : >"$seed"
    while [ "$(stat -c %s "$seed")" -lt 1048576 ]; do
        cat "$data"/*.jsonl >>"$seed"
    done
    local copies=$(((mb * 1048576 + $(stat -c %s "$seed") - 1) / $(stat -c %s "$seed")))
    : >"$out"
    for _ in $(seq "$copies"); do cat "$seed"; done >"$out"
}

small_mb=$(((size_mb + 9) / 10))
big="$work/stream-${size_mb}mb.jsonl"
small="$work/stream-${small_mb}mb.jsonl"
[ -s "$big" ] || generate "$big" "$size_mb"
[ -s "$small" ] || generate "$small" "$small_mb"
printf 'stream: %s (%d bytes, %d lines)\n' "$big" "$(stat -c %s "$big")" "$(wc -l <"$big")"

hyperfine --warmup 1 --runs 5 --export-json "$work/hyperfine.json" \
    -n "aep-cline stream" "$bin stream $big" \
    -n "aep-cline stream --aep" "$bin stream --aep $big" \
    -n "jq -c ." "jq -c . $big"

jq -r --argjson bytes "$(stat -c %s "$big")" '
    (.results | map({key: .command, value: .mean}) | from_entries) as $m
    | .results[] | "\(.command): \(.mean * 1000 | floor) ms mean, \($bytes / .mean / 1048576 | floor) MiB/s, \($m["jq -c ."] / .mean * 10 | floor / 10)x jq"
' "$work/hyperfine.json"

rss_kib() { /usr/bin/time -v "$@" 2>&1 >/dev/null | awk -F': ' '/Maximum resident set size/ {print $2}'; }
for f in "$small" "$big"; do
    printf 'peak RSS on %4d MB: aep-cline stream %6d KiB, --aep %6d KiB, jq %6d KiB\n' \
        "$(($(stat -c %s "$f") / 1048576))" "$(rss_kib "$bin" stream "$f")" \
        "$(rss_kib "$bin" stream --aep "$f")" "$(rss_kib jq -c . "$f")"
done
