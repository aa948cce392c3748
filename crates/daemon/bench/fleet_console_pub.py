#!/usr/bin/env python3
"""Publishes N AEP Events (as the JetStream sink's structured-mode CloudEvents) from S sessions
over H hosts into stream AEP of a nats-server, speaking the NATS text protocol directly (no
client package needed), and writes machine records into the aep-cline-machines bucket.
Each session: session.started, run.started, then tool.requested / tool.finished pairs, a
run.finished with usage, and session.ended for half of them; an attention.requested stays
pending in every tenth. Used by fleet_console.sh (the stream filled at once, each session's
Events in a row) and fleet_live.sh (--live: the sessions interleaved, as a fleet sends them,
paced at --rate Events/s, 0 for as fast as it can; --tag keeps the session ids of two runs
apart; prints the count and the wall-clock times its first message left and its last reached
the server).

  fleet_console_pub.py PORT EVENTS SESSIONS HOSTS [--live] [--rate N] [--tag T]
"""
import argparse, json, socket, sys, time

ap = argparse.ArgumentParser()
for name in ("port", "total", "sessions", "hosts"):
    ap.add_argument(name, type=int)
ap.add_argument("--live", action="store_true")
ap.add_argument("--rate", type=int, default=0)
ap.add_argument("--tag", default="")
args = ap.parse_args()
port, total, sessions, hosts = args.port, args.total, args.sessions, args.hosts
sock = socket.create_connection(("127.0.0.1", port))
f = sock.makefile("rb")
f.readline()  # INFO
sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nSUB _INBOX.b 1\r\n')

def request(subject, body):
    data = json.dumps(body).encode()
    sock.sendall(b"PUB %s _INBOX.b %d\r\n%s\r\nPING\r\n" % (subject.encode(), len(data), data))
    while True:
        line = f.readline()
        if line.startswith(b"MSG"):
            n = int(line.split()[-1]); reply = f.read(n + 2)[:-2]; return json.loads(reply)
        if line.startswith(b"-ERR"):
            sys.exit(line.decode())

request("$JS.API.STREAM.CREATE.AEP", {"name": "AEP", "subjects": ["aep.>"], "storage": "file", "duplicate_window": 120_000_000_000})
request("$JS.API.STREAM.CREATE.KV_aep-cline-machines", {"name": "KV_aep-cline-machines", "subjects": ["$KV.aep-cline-machines.>"],
        "max_msgs_per_subject": 1, "storage": "file", "discard": "new", "allow_rollup_hdrs": True, "deny_delete": True,
        "allow_direct": True, "max_age": 7 * 24 * 3600 * 10**9})

now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
for h in range(hosts):
    rec = json.dumps({"host": f"host-{h:03d}", "version": "0.1.0", "time": now, "started": now, "state": "running",
                      "control": True, "sessions": {"live": 1, "running": 1, "waiting": 0}}).encode()
    sock.sendall(b"PUB $KV.aep-cline-machines.host-%03d %d\r\n%s\r\n" % (h, len(rec), rec))

per = total // sessions
def events(s):
    host, sid = f"host-{s % hosts:03d}", f"1796007203184_{args.tag}{s:05d}"
    types = ["session.started", "run.started"]
    while len(types) < per - 2:
        types += ["tool.requested", "tool.finished"]
    types = types[: per - 2] + ["run.finished", "session.ended" if s % 2 else ("attention.requested" if s % 10 == 0 else "tool.requested")]
    for seq, ty in enumerate(types):
        data = {"gen_ai.request.model": "m-1"} if ty == "run.started" else {}
        if ty == "run.finished":
            data = {"gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 80, "cost": {"total": 0.01, "currency": "USD"}}
        if ty == "session.started":
            data = {"cwd": f"/work/repo-{s % 7}"}
        ce = {"specversion": "1.0", "id": f"{sid}-{seq}", "source": f"aep://{host}/agent/cline/session/{sid}", "type": f"dev.aep.{ty}",
              "time": now, "datacontenttype": "application/json", "aepversion": "0.1", "aepagentid": "cline",
              "aepsessionid": sid, "aepsequence": seq, "aeprunid": "run-1", "data": data}
        yield f"aep.{host}.cline.{sid}", json.dumps(ce, separators=(",", ":")).encode()

def pub(subject, payload):
    return b"PUB %s %d\r\n%s\r\n" % (subject.encode(), len(payload), payload)

held = request("$JS.API.STREAM.INFO.AEP", {})["state"]["messages"]
buf, sent = [], 0
if not args.live:
    for s in range(sessions if total else 0):
        for subject, payload in events(s):
            buf.append(pub(subject, payload))
            sent += 1
        if len(buf) > 2000:
            sock.sendall(b"".join(buf)); buf = []
    sock.sendall(b"".join(buf) + b"PING\r\n")
else:
    # Every message built first, so pacing measures the console, not this script.
    streams = [events(s) for s in range(sessions)]
    while streams:
        for g in list(streams):
            m = next(g, None)
            if m is None:
                streams.remove(g)
            else:
                buf.append(pub(*m))
    sent, tick = len(buf), 0.01
    chunk = max(1, round(args.rate * tick)) if args.rate else 1000
    start, began = time.monotonic(), time.time()
    for i in range(0, sent, chunk):
        if args.rate:
            due = start + (i // chunk) * tick
            if due > time.monotonic():
                time.sleep(due - time.monotonic())
        sock.sendall(b"".join(buf[i : i + chunk]))
    sock.sendall(b"PING\r\n")
while not f.readline().startswith(b"PONG"):
    pass
last = time.time()
# Stored: the stream holds every message (core publishes are stored asynchronously).
for _ in range(600):
    if request("$JS.API.STREAM.INFO.AEP", {})["state"]["messages"] >= held + sent:
        break
    time.sleep(0.1)
else:
    sys.exit(f"the stream did not take all {sent} messages")
print(f"{sent} {began:.3f} {last:.3f}" if args.live else sent)
