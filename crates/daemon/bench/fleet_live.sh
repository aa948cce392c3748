#!/usr/bin/env bash
# `aep-cline fleet serve` following the stream live (numbers go in docs/benchmarks.md, "Fleet
# console"): a fresh nats-server (fleet_setup.sh), the stream created (PRELOAD Events already in
# it, default none) and the console started; then fleet_console_pub.py --live publishes EVENTS
# Events from SESSIONS sessions over HOSTS machines, the sessions interleaved, first paced at
# RATE Events/s, then again (new sessions) as fast as it can. Meanwhile the console's
# /api/position (stream's last sequence - the last one it folded in: "behind") is read every
# 100 ms. Per phase: the rate published, the largest lag seen, the time from the last message
# reaching the server until the console has folded in everything (behind 0), the console's CPU
# time, and its resident memory (VmHWM, VmRSS from /proc). Then the size of the checkpoint it
# wrote, and a console start (`fleet sessions`) from it against one replaying the stream.
#
#   crates/daemon/bench/fleet_live.sh                        # 100,000 Events, 2,000 sessions, 50 hosts, 20,000/s
#   crates/daemon/bench/fleet_live.sh 200000 4000 100 40000
#   PRELOAD=100000 crates/daemon/bench/fleet_live.sh          # the console first catches up on 100,000
#   AEP_CLINE_BIN=target/debug/aep-cline crates/daemon/bench/fleet_live.sh   # another build, no cargo
# Needs nats-server (Debian's package) and python3.
set -euo pipefail
EVENTS="${1:-100000}" SESSIONS="${2:-2000}" HOSTS="${3:-50}" RATE="${4:-20000}" PRELOAD="${PRELOAD:-0}"
. "$(dirname "$0")/fleet_setup.sh"
PUB=crates/daemon/bench/fleet_console_pub.py
python3 "$PUB" "$PORT" "$PRELOAD" "$SESSIONS" "$HOSTS" --tag p >/dev/null
CPORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$BIN" fleet serve --listen "127.0.0.1:$CPORT" >"$WORK/link" 2>"$WORK/console.err" &
CONSOLE=$!
PIDS+=("$CONSOLE")
for _ in $(seq 600); do [ -s "$WORK/link" ] && break; sleep 0.1; done
[ -s "$WORK/link" ] || { cat "$WORK/console.err"; exit 1; }
echo "console caught up on $PRELOAD Events; publishing $EVENTS Events from $SESSIONS sessions on $HOSTS hosts, twice"
BIN="$BIN" python3 - "$PUB" "$PORT" "$EVENTS" "$SESSIONS" "$HOSTS" "$RATE" "$CONSOLE" "$(cat "$WORK/link")" <<'PY'
import http.client, json, os, subprocess, sys, threading, time, urllib.parse
pub, port, events, sessions, hosts, rate, pid, link = sys.argv[1:9]
u = urllib.parse.urlsplit(link.strip())
conn = http.client.HTTPConnection(u.netloc, timeout=30)
conn.request("GET", f"{u.path}?{u.query}")
r = conn.getresponse(); r.read()
cookie = r.getheader("set-cookie").split(";")[0]
def position():
    conn.request("GET", "/api/position", headers={"Cookie": cookie})
    r = conn.getresponse(); body = r.read()
    assert r.status == 200, body
    return json.loads(body)
def cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
def mem(key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key):
            return int(line.split()[1]) // 1024
for phase, (tag, pace) in enumerate([("l", rate), ("f", "0")]):
    start, cpu0 = position(), cpu()
    p = subprocess.Popen(["python3", pub, port, events, sessions, hosts, "--live", "--rate", pace, "--tag", tag],
                         stdout=subprocess.PIPE, text=True)
    worst = 0
    while p.poll() is None:
        worst = max(worst, position()["behind"])
        time.sleep(0.1)
    if p.returncode:
        sys.exit(f"the publisher failed ({p.returncode})")
    sent, began, last = p.stdout.read().split()
    sent, began, last = int(sent), float(began), float(last)
    target = start["stream_last"] + sent
    while True:
        now = position()
        worst = max(worst, now["behind"])
        if now["applied"] >= target and now["behind"] == 0:
            done = time.time()
            break
        if time.time() - last > 120:
            sys.exit(f"the console did not catch up within 120 s: {now}")
        time.sleep(0.01)
    asked = f"paced at {int(pace):,}/s" if int(pace) else "as fast as it can"
    print(f"{asked}: published {sent:,} Events in {last - began:.2f} s ({sent / (last - began):,.0f}/s); "
          f"largest lag seen {worst:,} Events; all folded in {max(0.0, done - last) * 1000:.0f} ms after the last "
          f"reached the server; console CPU {cpu() - cpu0:.2f} s ({(cpu() - cpu0) / max(done - began, 1e-9) * 100:.0f}% of a core); "
          f"RSS now {mem('VmRSS')} MiB, peak {mem('VmHWM')} MiB")
p = position()
print(f"console: applied {p['applied']:,} of {p['stream_last']:,}, {p['counts']['events']:,} Events folded, "
      f"{p['counts']['duplicates']} duplicates, {p['counts']['malformed']} malformed")
# The checkpoint it writes (every 5 s when its view moved), and a console start from it, then
# (the checkpoint purged; the serving console's view no longer moves, so it writes none) by replay.
import socket
nats = socket.create_connection(("127.0.0.1", int(port)))
reader = nats.makefile("rb"); reader.readline()
nats.sendall(b'CONNECT {"verbose":false}\r\nSUB _INBOX.c 1\r\n')
def js(api):
    nats.sendall(b"PUB $JS.API.%s _INBOX.c 2\r\n{}\r\n" % api.encode())
    while not (line := reader.readline()).startswith(b"MSG"):
        pass
    return json.loads(reader.read(int(line.split()[-1]) + 2)[:-2])
time.sleep(11)
kv = js("STREAM.INFO.KV_aep-cline-fleet")["state"]
def start():
    t = time.monotonic()
    out = subprocess.run([os.environ["BIN"], "fleet", "sessions", "--json", "--all"],
                         capture_output=True, check=True)
    return time.monotonic() - t, len(json.loads(out.stdout))
(ck, n1), _ = start(), js("STREAM.PURGE.KV_aep-cline-fleet")
rp, n2 = start()
print(f"checkpoint: {kv['bytes']:,} bytes (gzipped, with the KV headers); `fleet sessions --json --all` from it "
      f"{ck:.2f} s ({n1:,} sessions), by replaying {p['stream_last']:,} Events {rp:.2f} s ({n2:,} sessions)")
PY
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
