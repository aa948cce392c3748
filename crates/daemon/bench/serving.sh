#!/usr/bin/env bash
# Serving benchmarks of the embedded endpoint (numbers go in docs/benchmarks.md):
#
# 1. replay from the logs: a 100,000-Event session log on disk, the daemon freshly started
#    (nothing in memory): `GET /stream?live=0&from=all` over SSE, a resume from the middle, and
#    `aep-cline tail --json --replay` over the WebSocket; time to the first Event, Events/s,
#    and the daemon's RSS before and at its peak (the replay is streamed, not held);
# 2. memory under a flood of large Events: 200 unauthenticated 3 MiB Events POSTed by 4
#    clients at once (600 MiB), default AEP_BUFFER_BYTES (64 MiB): the daemon's peak RSS;
# 3. connections at the cap (AEP_MAX_CONNECTIONS=512, 64 kept for hooks): 448 observers
#    (open SSE subscribers) plus 1,500 idle sockets, then 200 hooks, one connection each as the
#    shim makes them: how many were taken, their latency, and what the idle sockets got.
#
#   crates/daemon/bench/serving.sh            # needs python3; builds the release binary
#   AEP_CLINE_BIN=path/to/aep-cline crates/daemon/bench/serving.sh   # another build
set -euo pipefail
cd "$(dirname "$0")/../../.."
if [ -z "${AEP_CLINE_BIN:-}" ]; then
  cargo build --release -q -p aep-cline
  AEP_CLINE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/aep-cline"
fi
ulimit -n "$(ulimit -Hn)"
WORK="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), open-file limit $(ulimit -n)"

python3 - "$AEP_CLINE_BIN" "$WORK" "$PWD/crates/cline-hooks/tests/data" <<'PY'
import atexit, http.client, json, os, socket, subprocess, sys, threading, time

BIN, WORK, DATA = sys.argv[1], sys.argv[2], sys.argv[3]
N = 100_000


def start(name, env=None):
    home = f"{WORK}/{name}"
    os.makedirs(f"{home}/logs/cline", exist_ok=True)
    environ = dict(os.environ, HOME=home, AEP_LOG_DIR=f"{home}/logs", AEP_CLINE_STATE_DIR=f"{home}/state",
                   AEP_LISTEN="127.0.0.1:0", RUST_LOG="warn", **(env or {}))
    return home, environ


def launch(home, environ):
    proc = subprocess.Popen([BIN, "daemon"], env=environ, stdout=subprocess.DEVNULL,
                            stderr=open(f"{home}/daemon.log", "w"))
    atexit.register(proc.kill)
    for _ in range(400):
        try:
            d = json.load(open(f"{home}/state/daemon.json"))
            if d["pid"] == proc.pid:
                host, port = d["url"].removeprefix("http://").rsplit(":", 1)
                return proc, host, int(port), d["token"]
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise SystemExit("the daemon did not start: " + open(f"{home}/daemon.log").read())


def mem(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(("VmRSS", "VmHWM")):
            out[line.split(":")[0]] = int(line.split()[1]) / 1024
    return out


def sse(host, port, query):
    """Reads GET /stream?live=0&... to its end: (Events, seconds to the first, seconds in all)."""
    s = socket.create_connection((host, port))
    s.sendall(f"GET /stream?live=0&{query} HTTP/1.0\r\nHost: {host}:{port}\r\n\r\n".encode())
    t0, first, events, tail = time.perf_counter(), None, 0, b""
    while True:
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        found = (tail + chunk).count(b"\ndata: ")
        if found and first is None:
            first = time.perf_counter() - t0
        events += found
        tail = chunk[-8:]
    return events, first, time.perf_counter() - t0


# 1. Replay from a 100,000-Event log.
home, environ = start("replay")
with open(f"{home}/logs/cline/bench.jsonl", "w") as log:
    for i in range(N):
        log.write(json.dumps({
            "aep": "0.1", "id": f"01BENCH{i:019d}", "type": "x.cline.bench.tick",
            "time": "2026-12-01T00:00:00.000Z", "source": "aep://bench/agent/cline/session/bench",
            "agent": "cline", "session": "bench", "seq": i, "capture": "metadata",
            "data": {"n": i, "tool": {"name": "read_file"}, "duration_ms": i % 997}}, separators=(",", ":")) + "\n")
size = os.path.getsize(f"{home}/logs/cline/bench.jsonl") / 1e6
proc, host, port, _ = launch(home, environ)
before = mem(proc.pid)
print(f"\n1. replay from a {N:,}-Event log ({size:.1f} MB), daemon RSS before {before['VmRSS']:.1f} MiB")
for label, query in [("SSE from=all", "from=all"),
                     ("SSE from the middle", "from=" + json.dumps([{"session": "bench", "epoch": 0, "seq": N // 2 - 1}]).replace(" ", "").replace('"', "%22"))]:
    events, first, total = sse(host, port, query)
    print(f"   {label:<22} {events:>7,} Events in {total:.2f} s ({events / total:,.0f}/s), first after {first * 1000:.1f} ms")
t0 = time.perf_counter()
tail = subprocess.Popen([BIN, "tail", "--json", "--replay", "--url", f"http://{host}:{port}"],
                        env=environ, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
lines = 0
for _ in tail.stdout:
    lines += 1
    if lines == N:
        break
total = time.perf_counter() - t0
tail.kill()
print(f"   {'WebSocket (tail)':<22} {lines:>7,} Events in {total:.2f} s ({lines / total:,.0f}/s), printed by tail --json")
after = mem(proc.pid)
print(f"   daemon RSS after {after['VmRSS']:.1f} MiB, peak {after['VmHWM']:.1f} MiB")
proc.terminate(); proc.wait()

# 2. A flood of large Events.
home, environ = start("flood")
proc, host, port, _ = launch(home, environ)
before = mem(proc.pid)
blob = "z" * (3 << 20)
sent = [0]
statuses = {}
lock = threading.Lock()


def poster(worker):
    conn = http.client.HTTPConnection(host, port, timeout=60)
    for i in range(50):
        seq = worker * 50 + i
        body = json.dumps({"aep": "0.1", "id": f"flood-{seq}", "type": "x.test.blob.sent",
                           "time": "2026-12-01T00:00:00Z", "source": "aep://bench/agent/flood/session/flood",
                           "agent": "flood", "session": f"flood-{worker}", "seq": i, "data": {"blob": blob}})
        conn.request("POST", "/events", body, {"Content-Type": "application/json", "AEP-Version": "0.1"})
        r = conn.getresponse(); r.read()
        with lock:
            statuses[r.status] = statuses.get(r.status, 0) + 1
            sent[0] += len(body)


t0 = time.perf_counter()
workers = [threading.Thread(target=poster, args=(w,)) for w in range(4)]
for w in workers: w.start()
for w in workers: w.join()
total = time.perf_counter() - t0
after = mem(proc.pid)
conn = http.client.HTTPConnection(host, port)
conn.request("GET", "/healthz")
held = json.loads(conn.getresponse().read())["endpoint"]["buffer_bytes"] / (1 << 20)
print(f"\n2. flood: {sum(statuses.values())} Events of 3 MiB from 4 clients ({sent[0] / (1 << 20):.0f} MiB) in {total:.1f} s, statuses {statuses}")
print(f"   daemon RSS before {before['VmRSS']:.1f} MiB, after {after['VmRSS']:.1f} MiB, peak {after['VmHWM']:.1f} MiB; buffer holds {held:.1f} MiB (AEP_BUFFER_BYTES 64 MiB)")
proc.terminate(); proc.wait()

# 3. Connections at the cap.
home, environ = start("cap", {"AEP_MAX_CONNECTIONS": "512", "AEP_HOOK_CONNECTIONS": "64"})
proc, host, port, token = launch(home, environ)
observers = []
for _ in range(448):
    s = socket.create_connection((host, port))
    s.sendall(f"GET /stream HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    assert s.recv(12) == b"HTTP/1.1 200"
    observers.append(s)
idle = []
t0 = time.perf_counter()
for _ in range(1500):
    try:
        idle.append(socket.create_connection((host, port), timeout=5))
    except OSError:
        break
opened_in = time.perf_counter() - t0
time.sleep(0.2)
refused_at_once = 0
for s in idle:
    s.setblocking(False)
    try:
        if s.recv(1) == b"":
            refused_at_once += 1
    except BlockingIOError:
        pass
    except OSError:
        refused_at_once += 1
payload = open(f"{DATA}/hooks-local/tool_call-global.json").read()
latencies, failures = [], 0
for i in range(200):
    body = payload.replace('"toolName"', f'"benchN":{i},"toolName"', 1)
    t0 = time.perf_counter()
    try:
        c = http.client.HTTPConnection(host, port, timeout=2)
        c.request("POST", "/hook", body, {"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        r = c.getresponse(); r.read(); c.close()
        if r.status != 200:
            failures += 1
            continue
        latencies.append((time.perf_counter() - t0) * 1000)
    except OSError:
        failures += 1
    time.sleep(0.01)
latencies.sort()
p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else float("nan")
rss = mem(proc.pid)
for s in observers + idle:
    s.close()
time.sleep(0.5)
conn = http.client.HTTPConnection(host, port, timeout=5)
conn.request("GET", "/healthz")
health = json.loads(conn.getresponse().read())["connections"]
print(f"\n3. at the cap: 448 SSE observers held, {len(idle)} idle sockets opened in {opened_in:.2f} s, {refused_at_once} of them closed at once")
print(f"   hooks: {len(latencies)} of 200 taken (new connection each), p50 {p(0.5):.2f} ms, p99 {p(0.99):.2f} ms, {failures} failed")
print(f"   daemon RSS {rss['VmRSS']:.1f} MiB; /healthz afterwards: {health}")
warned = sum("connection cap reached" in line for line in open(f"{home}/daemon.log"))
print(f"   'connection cap reached' warnings logged: {warned}")
proc.terminate(); proc.wait()
PY
