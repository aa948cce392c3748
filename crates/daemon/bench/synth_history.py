#!/usr/bin/env python3
"""Synthetic agent histories for the usage benchmark: a Cline 3.x store and a Claude Code history
with the same model calls, and their known totals.

    synth_history.py cline  OUT [--sessions N] [--calls N] [--seed S]   # OUT is a CLINE_DIR
    synth_history.py claude OUT [--sessions N] [--calls N] [--seed S]   # OUT is a CLAUDE_CONFIG_DIR

Both print the totals as one JSON object on stdout (also written to OUT/totals.json): sessions,
subagents, running sessions, model calls, the token classes, and the same per model.

The Cline store is in Cline 3.0.65's exact format, as a real run left it (see
crates/cline-usage/tests/data/captured/ and the subagent run described in docs/benchmarks.md):
`data/sessions/<id>/<id>.json` (the manifest, with `metadata.usage` / `aggregateUsage`: the lead's
own calls, never the subagents'), `data/sessions/<id>/<id>.messages.json` (every assistant message
with `modelInfo` and `metrics`), a subagent's messages in `data/sessions/<root>/<agentId>.messages.json`
with no manifest of its own, and `data/db/sessions.db` (SQLite, WAL) with one row per session,
subagents included (`is_subagent`, `parent_session_id`, `parent_agent_id`, `agent_id`), the
manifest's metadata in `metadata_json` (a subagent's row carries no usage, as in Cline).
Cline's `inputTokens` counts the cache reads (not the writes): uncached input is
`inputTokens - cacheReadTokens + cacheWriteTokens`.

The Claude Code history is what Claude Code writes and ccusage reads:
`projects/<cwd with / as ->/<session uuid>.jsonl`, a user line and an assistant line per model
call, the assistant's `message.usage` {input_tokens (uncached), cache_creation_input_tokens,
cache_read_input_tokens, output_tokens}, `message.id` and `requestId` unique per call (ccusage
counts a pair once). Subagent calls are sidechain lines (`isSidechain: true`) of the same file.
Every call is a Claude model there (ccusage prices only those offline); the token classes are the
same as the Cline store's, call for call.

Deterministic for a seed; stdlib only.
"""

import argparse
import datetime as dt
import json
import os
import pathlib
import random
import sqlite3
import string
import sys
import uuid

# (Cline provider, model id, the Claude model the same call is in the Claude history)
MODELS = [
    ("anthropic", "claude-sonnet-4-5-20250929", "claude-sonnet-4-5-20250929"),
    ("openrouter", "anthropic/claude-sonnet-4.5", "claude-sonnet-4-5-20250929"),
    ("bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5-20250929"),
    ("anthropic", "claude-opus-4-5-20251101", "claude-opus-4-5-20251101"),
    ("openai-native", "gpt-5", "claude-opus-4-5-20251101"),
    ("gemini", "gemini-2.5-pro", "claude-sonnet-4-5-20250929"),
    ("deepseek", "deepseek-chat", "claude-haiku-4-5-20251001"),
    ("xai", "grok-code-fast-1", "claude-haiku-4-5-20251001"),
    ("anthropic", "claude-haiku-4-5-20251001", "claude-haiku-4-5-20251001"),
    ("openai-compatible", "fake-model", "claude-haiku-4-5-20251001"),  # no price: "no price"
]
WEIGHTS = [30, 15, 8, 8, 10, 8, 6, 5, 8, 2]
PROJECTS = [f"/home/dev/src/project-{i:02d}" for i in range(24)]
START = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc)
SPAN_S = 180 * 86400
WORDS = ("the tests pass now so let me read the file and run the build again before I change "
         "anything else in this module because the error says the type does not match").split()

# Cline 3.0.65's `sessions` table, as captured (crates/cline-usage/tests/data/captured/sessions.db.schema.sql).
SCHEMA = """
CREATE TABLE sessions (
		session_id TEXT PRIMARY KEY,
		source TEXT NOT NULL,
		pid INTEGER NOT NULL,
		started_at TEXT NOT NULL,
		ended_at TEXT,
		exit_code INTEGER,
		status TEXT NOT NULL,
		status_lock INTEGER NOT NULL DEFAULT 0,
		interactive INTEGER NOT NULL,
		provider TEXT NOT NULL,
		model TEXT NOT NULL,
		cwd TEXT NOT NULL,
		workspace_root TEXT NOT NULL,
		team_name TEXT,
		enable_tools INTEGER NOT NULL,
		enable_spawn INTEGER NOT NULL,
		enable_teams INTEGER NOT NULL,
		parent_session_id TEXT,
		parent_agent_id TEXT,
		agent_id TEXT,
		conversation_id TEXT,
		is_subagent INTEGER NOT NULL DEFAULT 0,
		prompt TEXT,
		metadata_json TEXT,
		transcript_path TEXT NOT NULL DEFAULT '',
		hook_path TEXT NOT NULL,
		messages_path TEXT,
		updated_at TEXT NOT NULL
	);
CREATE TABLE subagent_spawn_queue (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		root_session_id TEXT NOT NULL,
		parent_agent_id TEXT NOT NULL,
		task TEXT,
		system_prompt TEXT,
		created_at TEXT NOT NULL,
		consumed_at TEXT
	);
"""
SYSTEM_PROMPT = ("You are Cline, an AI coding agent. Your primary goal is to assist users with various "
                 "coding tasks by leveraging your knowledge and the tools at your disposal. ") * 27


def iso(ms):
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def rand_id(rng, n):
    return "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(n))


def text(rng, words):
    return " ".join(rng.choice(WORDS) for _ in range(words))


class Call:
    """One model call: who made it, when, with which model, and its token classes."""

    __slots__ = ("model", "ms", "fresh", "read", "write", "out", "sub")

    def __init__(self, model, ms, fresh, read, write, out, sub):
        self.model, self.ms, self.fresh, self.read, self.write, self.out, self.sub = model, ms, fresh, read, write, out, sub


class Session:
    __slots__ = ("id", "ms", "cwd", "model", "calls", "sub_agent", "running", "prompt")


def plan(sessions, calls, seed):
    """The sessions and their calls: about `calls` calls over `sessions` sessions, one in ten
    sessions with a subagent, one in twenty switching model, the last three still running."""
    rng = random.Random(seed)
    mean = calls / sessions
    starts = sorted(rng.randrange(SPAN_S * 1000) for _ in range(sessions))
    out = []
    budget = calls
    for i, off in enumerate(starts):
        s = Session()
        s.ms = int(START.timestamp() * 1000) + off
        s.id = f"{s.ms}_{rand_id(rng, 5)}"
        s.cwd = rng.choice(PROJECTS)
        s.model = rng.choices(range(len(MODELS)), WEIGHTS)[0]
        s.prompt = text(rng, 8)
        left = sessions - i
        n = budget if left == 1 else max(1, min(budget - (left - 1), int(rng.uniform(0.2, 1.8) * mean)))
        if i % 10 == 3 and left > 1:  # a session with a subagent needs a few calls
            n = max(n, min(4, budget - (left - 1)))
        budget -= n
        s.sub_agent = f"agent_{s.ms + 1500}_{rand_id(rng, 6)}" if i % 10 == 3 and n >= 4 else None
        s.running = i >= sessions - 3
        switch = rng.randrange(1, n) if i % 20 == 7 and n >= 2 else None
        model = s.model
        t = s.ms + 400
        s.calls = []
        sub_calls = n // 4 if s.sub_agent else 0
        for k in range(n):
            if switch is not None and k == switch:
                model = (model + 1) % len(MODELS)
            t += rng.randrange(800, 9000)
            context = 2000 + 600 * k
            read = int(context * rng.uniform(0.6, 0.95)) if k else 0
            write = rng.randrange(0, 1500) if rng.random() < 0.4 else 0
            fresh = rng.randrange(50, 4000)
            # The subagent's calls happen while the lead waits on spawn_agent, before its last call.
            sub = n - 1 - sub_calls <= k < n - 1
            s.calls.append(Call(model, t, fresh, read, write, rng.randrange(20, 1200), sub))
        out.append(s)
    return out


def add(totals, key, c):
    t = totals.setdefault(key, {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0,
                                "cache_write_tokens": 0, "fresh_input": 0, "uncached_input": 0,
                                "cached_input": 0})
    t["calls"] += 1
    t["input_tokens"] += c.fresh + c.read  # Cline's inputTokens: cache reads included
    t["output_tokens"] += c.out
    t["cache_read_tokens"] += c.read
    t["cache_write_tokens"] += c.write
    t["fresh_input"] += c.fresh  # Claude's input_tokens: neither cache reads nor writes
    t["uncached_input"] += c.fresh + c.write
    t["cached_input"] += c.read


def summary(sessions, model_name):
    totals, by_model = {}, {}
    for s in sessions:
        for c in s.calls:
            add(totals, "all", c)
            add(by_model, model_name(c.model), c)
    return {
        "sessions": len(sessions),
        "subagents": sum(1 for s in sessions if s.sub_agent),
        "running": sum(1 for s in sessions if s.running),
        "model_calls": totals["all"]["calls"],
        "tokens": totals["all"],
        "by_model": dict(sorted(by_model.items())),
    }


def metrics(c):
    return {"inputTokens": c.fresh + c.read, "outputTokens": c.out, "cacheReadTokens": c.read, "cacheWriteTokens": c.write}


def usage_of(calls):
    u = {"inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0, "cacheWriteTokens": 0}
    for c in calls:
        for k, v in metrics(c).items():
            u[k] += v
    u["totalCost"] = 0
    return u


def cline_messages(rng, calls, first_prompt):
    msgs = [{"id": str(uuid.UUID(int=rng.getrandbits(128), version=4)), "role": "user",
             "content": [{"type": "text", "text": f"<user_input mode=\"act\">{first_prompt}</user_input>"}],
             "ts": calls[0].ms - 300}]
    for k, c in enumerate(calls):
        provider, model, _ = MODELS[c.model]
        call_id = "call_" + rand_id(rng, 10)
        last = k == len(calls) - 1
        content = [{"type": "text", "text": text(rng, 30)}]
        if not last:
            content.append({"type": "tool_use", "id": call_id, "name": "run_commands",
                            "input": {"commands": [f"cargo test -p crate-{k % 7}"]}})
        msgs.append({"id": "msg_" + rand_id(rng, 8), "role": "assistant", "content": content, "ts": c.ms,
                     "modelInfo": {"id": model, "provider": provider}, "metrics": metrics(c)})
        if not last:
            msgs.append({"id": "msg_" + rand_id(rng, 8), "role": "user", "ts": c.ms + 200, "content": [
                {"type": "tool_result", "tool_use_id": call_id, "name": "run_commands",
                 "content": [{"query": f"cargo test -p crate-{k % 7}", "result": text(rng, 80), "success": True}]}]})
    return msgs


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)


def cline(out, sessions, seed):
    rng = random.Random(seed + 1)
    data = out / "data"
    (data / "db").mkdir(parents=True, exist_ok=True)
    (data / "sessions").mkdir(parents=True, exist_ok=True)
    dbp = data / "db" / "sessions.db"
    for suffix in ("", "-wal", "-shm"):
        pathlib.Path(str(dbp) + suffix).unlink(missing_ok=True)
    db = sqlite3.connect(dbp)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(SCHEMA)
    rows = []
    for s in sessions:
        provider, model, _ = MODELS[s.model]
        folder = data / "sessions" / s.id
        folder.mkdir(exist_ok=True)
        lead = [c for c in s.calls if not c.sub]
        sub = [c for c in s.calls if c.sub]
        end_ms = s.calls[-1].ms + 300
        messages_path = str(folder / f"{s.id}.messages.json")
        meta = {"sessionHistoryOrigin": {"mode": "user", "version": "3.0.65"}, "title": s.prompt,
                "totalCost": 0, "aggregatedAgentsCost": 0, "usage": usage_of(lead), "aggregateUsage": usage_of(lead)}
        manifest = {"version": 1, "session_id": s.id, "source": "cli", "pid": 20000 + rng.randrange(40000),
                    "started_at": iso(s.ms), "ended_at": None if s.running else iso(end_ms),
                    "exit_code": None if s.running else 0, "status": "running" if s.running else "completed",
                    "interactive": False, "provider": provider, "model": model, "cwd": s.cwd,
                    "workspace_root": s.cwd, "team_name": f"team-{rand_id(rng, 5)}", "enable_tools": True,
                    "enable_spawn": True, "enable_teams": True, "prompt": s.prompt, "metadata": meta,
                    "messages_path": messages_path}
        if s.running:
            del manifest["ended_at"], manifest["exit_code"]
        write_json(folder / f"{s.id}.json", manifest)
        lead_msgs = cline_messages(rng, lead, s.prompt)
        write_json(folder / f"{s.id}.messages.json", {
            "version": 1, "updated_at": iso(end_ms), "agent": "lead", "sessionId": s.id,
            "origin": {"source": "cli", "mode": "user", "sessionId": s.id, "version": "3.0.65"},
            "messages": lead_msgs, "system_prompt": SYSTEM_PROMPT})
        rows.append((s.id, "cli", manifest["pid"], iso(s.ms), manifest.get("ended_at"), manifest.get("exit_code"),
                     manifest["status"], 2, 0, provider, model, s.cwd, s.cwd, manifest["team_name"], 1, 1, 1,
                     None, None, None, None, 0, s.prompt, json.dumps(meta, separators=(",", ":")), "", "",
                     messages_path, iso(end_ms)))
        if sub:
            sid = f"{s.id}__{s.sub_agent}"
            sub_path = str(folder / f"{s.sub_agent}.messages.json")
            task = text(rng, 6)
            write_json(sub_path, {
                "version": 1, "updated_at": iso(sub[-1].ms + 100), "agent": "subagent", "sessionId": sid,
                "taskType": "subagent_task",
                "origin": {"source": "cli", "mode": "subagent", "sessionId": sid, "parentThreadId": s.id,
                           "subagent": s.sub_agent, "version": "3.0.65"},
                "messages": cline_messages(rng, sub, task)})
            sub_meta = {"sessionHistoryOrigin": {"mode": "subagent", "version": "3.0.65"}, "title": task}
            rows.append((sid, "cli", manifest["pid"], iso(sub[0].ms - 300), iso(sub[-1].ms + 100), 0, "completed", 3,
                         0, provider, model, s.cwd, s.cwd, manifest["team_name"], 1, 1, 1, s.id,
                         f"agent_{s.ms + 200}_{rand_id(rng, 6)}", s.sub_agent, f"conv_{s.ms + 1501}_{rand_id(rng, 7)}",
                         1, task, json.dumps(sub_meta, separators=(",", ":")), "", "", sub_path,
                         iso(sub[-1].ms + 100)))
    db.executemany(f"INSERT INTO sessions VALUES ({','.join('?' * 28)})", rows)
    db.commit()
    db.close()
    return summary(sessions, lambda m: f"{MODELS[m][0]}/{MODELS[m][1]}")


def claude(out, sessions, seed):
    rng = random.Random(seed + 2)
    version = "2.0.46"
    for s in sessions:
        folder = out / "projects" / s.cwd.replace("/", "-")
        folder.mkdir(parents=True, exist_ok=True)
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        parent = None
        lines = []
        for k, c in enumerate(s.calls):
            common = {"isSidechain": c.sub, "userType": "external", "cwd": s.cwd, "sessionId": sid,
                      "version": version, "gitBranch": "main"}
            u = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            prompt = s.prompt if k == 0 else text(rng, 80)
            lines.append({"parentUuid": parent, **common, "type": "user",
                          "message": {"role": "user", "content": prompt}, "uuid": u, "timestamp": iso(c.ms - 300)})
            a = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            lines.append({"parentUuid": u, **common, "message": {
                "model": MODELS[c.model][2], "id": "msg_01" + rand_id(rng, 22), "type": "message", "role": "assistant",
                "content": [{"type": "text", "text": text(rng, 30)}], "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": c.fresh, "cache_creation_input_tokens": c.write,
                          "cache_read_input_tokens": c.read, "output_tokens": c.out, "service_tier": "standard"}},
                "requestId": "req_011C" + rand_id(rng, 20), "type": "assistant", "uuid": a, "timestamp": iso(c.ms)})
            parent = a
        with open(folder / f"{sid}.jsonl", "w") as f:
            for line in lines:
                f.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")
    return summary(sessions, lambda m: MODELS[m][2])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=["cline", "claude"])
    ap.add_argument("out", type=pathlib.Path, help="the CLINE_DIR (cline) or CLAUDE_CONFIG_DIR (claude) to write")
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=500_000, help="model calls in all (at least one per session)")
    ap.add_argument("--seed", type=int, default=12)
    args = ap.parse_args()
    if args.sessions < 1 or args.calls < args.sessions:
        sys.exit("--sessions must be at least 1 and --calls at least --sessions")
    args.out.mkdir(parents=True, exist_ok=True)
    sessions = plan(args.sessions, args.calls, args.seed)
    totals = (cline if args.kind == "cline" else claude)(args.out, sessions, args.seed)
    text_out = json.dumps(totals, indent=2)
    (args.out / "totals.json").write_text(text_out + "\n")
    print(text_out)


if __name__ == "__main__":
    main()
