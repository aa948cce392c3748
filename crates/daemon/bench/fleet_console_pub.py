#!/usr/bin/env python3
"""Publishes N AEP Events (as the JetStream sink's structured-mode CloudEvents) from S sessions
over H hosts into stream AEP of a nats-server, speaking the NATS text protocol directly (no
client package needed), and writes machine records into the aep-cline-machines bucket.
Each session: session.started, run.started, then tool.requested / tool.finished pairs, a
run.finished with usage, and session.ended for half of them; an attention.requested stays
pending in every tenth. Used by fleet_console.sh.

  fleet_console_pub.py PORT EVENTS SESSIONS HOSTS
"""
import json, socket, sys, time

port, total, sessions, hosts = (int(a) for a in sys.argv[1:5])
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
    host, sid = f"host-{s % hosts:03d}", f"1796007203184_{s:05d}"
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
        yield f"aep.cline.{sid}", json.dumps(ce, separators=(",", ":")).encode()

buf, sent = [], 0
for s in range(sessions):
    for subject, payload in events(s):
        buf.append(b"PUB %s %d\r\n%s\r\n" % (subject.encode(), len(payload), payload))
        sent += 1
    if len(buf) > 2000:
        sock.sendall(b"".join(buf)); buf = []
sock.sendall(b"".join(buf) + b"PING\r\n")
while not f.readline().startswith(b"PONG"):
    pass
# Stored: the stream holds every message (core publishes are stored asynchronously).
for _ in range(600):
    if request("$JS.API.STREAM.INFO.AEP", {})["state"]["messages"] >= sent:
        break
    time.sleep(0.1)
else:
    sys.exit(f"the stream did not take all {sent} messages")
print(sent)
