#!/usr/bin/env bash
# Benchmarks the shim's spool path (numbers go in docs/benchmarks.md, "Spool").
#
#   crates/daemon/bench/spool.sh [RUNS]     # RUNS firings per point, default 200
#
# 1. The shim's wall time per firing with no daemon (every firing is spooled), p50 and max, with
#    0, 10,000, 50,000 and 100,000 hooks already spooled (written directly in the spool's
#    `.firing` format, ledger included, as a shim would have left them). Target: <= 250 ms.
# 2. What an fsync of the spool file before its rename would add (same size, same folder).
# 3. A 24 MiB body with the daemon up: the shim's time, and where it goes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
RUNS="${1:-200}"
cargo build --release -q -p aep-cline
BIN="$PWD/target/release/aep-cline"
PAYLOAD="$PWD/crates/cline-hooks/tests/data/hooks-local/tool_call-global.json"
WORK="$(mktemp -d)"
DAEMON=
trap '[ -n "$DAEMON" ] && kill $DAEMON 2>/dev/null && wait $DAEMON 2>/dev/null; rm -rf "$WORK"' EXIT
export HOME="$WORK" AEP_LOG_DIR="$WORK/logs" AEP_CLINE_STATE_DIR="$WORK/state"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"

# Writes N spooled hooks (one session) directly in the spool's format, ledger included.
spooled() {
  rm -rf "$WORK/state" "$WORK/logs"
  python3 - "$PAYLOAD" "$WORK/state" "$1" <<'PY'
import json, os, sys
payload, state, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
spool = os.path.join(state, "spool")
os.makedirs(spool, mode=0o700)
body = open(payload, "rb").read()
boot = open("/proc/sys/kernel/random/boot_id").read().strip().replace("-", "")
total = 0
for i in range(n):
    head = json.dumps({"delivery": f"{i:032x}", "fired": 1796007203000000000 + i, "parent": 1}).encode() + b"\n"
    with open(os.path.join(spool, f"{boot}-{i:020}-{1:010}-{i:032x}.firing"), "wb") as f:
        f.write(head + body)
    total += len(head) + len(body)
with open(os.path.join(spool, "ledger"), "w") as f:
    f.write(f"{total}\n")
PY
}

echo "== shim wall time per firing, no daemon, by hooks already spooled"
for N in 0 10000 50000 100000; do
  spooled "$N"
  python3 - "$BIN" "$PAYLOAD" "$WORK/state" "$N" "$RUNS" <<'PY'
import os, subprocess, sys, time
bin_, payload, state, n, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
body = open(payload, "rb").read()
times = []
for i in range(runs):
    # Each firing is another payload (its delivery id is the payload's hash).
    data = body.replace(b'"hookName"', b'"run":%d,"hookName"' % i, 1)
    t = time.perf_counter()
    subprocess.run([bin_, "hook"], input=data, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    times.append((time.perf_counter() - t) * 1000)
times.sort()
files = sum(1 for e in os.scandir(os.path.join(state, "spool")) if e.name.endswith(".firing"))
print(f"{n:>7} spooled: p50 {times[len(times)//2]:6.2f} ms, max {times[-1]:6.2f} ms ({runs} firings; {files} files after)")
PY
done

echo "== the daemon's start-up drain of 10,000 spooled hooks (before it binds its port)"
spooled 10000
t0=$(date +%s%N)
AEP_LISTEN=127.0.0.1:0 RUST_LOG=warn "$BIN" daemon 2>"$WORK/daemon.log" & DAEMON=$!
for _ in $(seq 6000); do [ -s "$WORK/state/daemon.json" ] && break; sleep 0.05; done
t1=$(date +%s%N)
left=$(find "$WORK/state/spool" -maxdepth 1 -name '*.firing' | wc -l)
echo "ready after $(( (t1 - t0) / 1000000 )) ms; $left spool files left"
kill $DAEMON; wait $DAEMON 2>/dev/null || true; DAEMON=

echo "== fsync of a spool file before its rename (same size, same folder)"
python3 - "$PAYLOAD" "$WORK/state/spool" "$RUNS" <<'PY'
import os, sys, time
body, spool, runs = open(sys.argv[1], "rb").read(), sys.argv[2], int(sys.argv[3])
for sync in (False, True):
    times = []
    for i in range(runs):
        tmp, final = os.path.join(spool, f".bench{i}.tmp"), os.path.join(spool, f"bench{i}.x")
        t = time.perf_counter()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, body)
        if sync:
            os.fsync(fd)
        os.close(fd)
        os.rename(tmp, final)
        times.append((time.perf_counter() - t) * 1000)
        os.unlink(final)
    times.sort()
    print(f"write+rename{' +fsync' if sync else '       '}: p50 {times[len(times)//2]:6.3f} ms, p99 {times[int(len(times)*.99)]:6.3f} ms, max {times[-1]:6.3f} ms")
PY

BIG="$PWD/crates/cline-hooks/tests/data/hooks-local/tool_result-global.json"
big() {
  python3 - "$BIN" "$BIG" <<'PY'
import json, subprocess, sys, time
bin_, payload = sys.argv[1:3]
p = json.load(open(payload))
for i in range(5):
    # Output with quotes and newlines, as a tool's output has: what JSON escaping would cost.
    p["bench"] = ('line "%d" of output\n' % i) * (24 * 1024 * 1024 // 20)
    data = json.dumps(p).encode()
    t = time.perf_counter()
    out = subprocess.run([bin_, "hook"], input=data, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
    ms = (time.perf_counter() - t) * 1000
    how = "spooled" if b"spooled" in out.stderr else "taken live" if not out.stderr else out.stderr.decode()[:120]
    print(f"{len(data)/1048576:.1f} MiB body: {ms:6.1f} ms ({how})")
PY
}
echo "== a 24 MiB body, no daemon (read, hash, spool write)"
rm -rf "$WORK/state" "$WORK/logs"
big
echo "== a 24 MiB body with the daemon up"
rm -rf "$WORK/state" "$WORK/logs"
AEP_LISTEN=127.0.0.1:0 RUST_LOG=warn "$BIN" daemon 2>"$WORK/daemon.log" & DAEMON=$!
for _ in $(seq 200); do [ -s "$WORK/state/daemon.json" ] && break; sleep 0.05; done
big
