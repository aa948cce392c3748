#!/usr/bin/env python3
# The scripted model the project's Cline 2.18 captures were made with, unchanged but for this
# line and the `edit` scenario (the capture crates/cline-stream/tests/data/cline2/e-edit): the
# scripted model crates/daemon/tests/e2e_cline2.rs runs the real 2.18 against.
"""Scripted fake OpenAI-compatible model for Cline CLI 2.x (stdlib only).

Cline 2.18 with the `openai` (OpenAI-compatible) provider sends NO `tools` array: its tools are
described in the system prompt and called with XML tags in the assistant text
(<execute_command><command>..</command></execute_command>, <read_file>, <write_to_file>,
<attempt_completion>, ...).  This server answers with a scripted sequence of such assistant
turns, chosen by FAKE_SCENARIO; the turn index is the number of assistant messages already in
the request (so Cline's own retries/feedback don't confuse it).

  FAKE_SCENARIO = cmd      : reasoning + text + execute_command `echo hi`, then attempt_completion
                  files    : read_file input.txt, write_to_file output.txt, attempt_completion
                  edit     : replace_in_file input.txt, read_file missing.txt (fails),
                             list_code_definition_names ., list_files ., search_files `line`,
                             attempt_completion
                  cmdfail  : execute_command `ls /nonexistent-aep-dir && echo unreachable`, then
                             attempt_completion
                  error    : every POST /chat/completions answers HTTP $FAKE_ERROR_STATUS (default
                             500) with an OpenAI-style error body (429 adds Retry-After: 1)
  FAKE_LOG   : request log (JSONL, one line per request: ts, path, body)
  A prompt line "CMD:<shell>" overrides the command of scenarios cmd/cmdfail.

Usage per turn n (0-based): prompt_tokens 1000+100n, completion_tokens 50+n,
prompt_tokens_details.cached_tokens 800, prompt_cache_miss_tokens 200 (Cline's OpenAI handler
maps the last one to cacheWriteTokens).

  python3 fake_cline2.py PORT
"""
import json, os, re, sys, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 19501
LOG = os.environ.get("FAKE_LOG", "fake-requests.jsonl")
SCENARIO = os.environ.get("FAKE_SCENARIO", "cmd")
ERROR_STATUS = int(os.environ.get("FAKE_ERROR_STATUS", "500"))
MODEL = "fake-model"


def text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def complete(result):
    return f"<attempt_completion>\n<result>\n{result}\n</result>\n</attempt_completion>"


def script(scenario, cmd):
    """list of (reasoning, text) assistant turns"""
    if scenario == "cmd":
        return [("The user wants me to run a shell command.",
                 f"I'll run the command.\n\n<execute_command>\n<command>{cmd or 'echo hi'}</command>\n"
                 "<requires_approval>false</requires_approval>\n</execute_command>"),
                ("", "The command succeeded.\n\n" + complete("The command printed hi."))]
    if scenario == "files":
        return [("I should read the input file first.",
                 "Reading the input file.\n\n<read_file>\n<path>input.txt</path>\n</read_file>"),
                ("", "Now writing the output file.\n\n<write_to_file>\n<path>output.txt</path>\n"
                     "<content>\nHELLO FROM INPUT\n</content>\n</write_to_file>"),
                ("", complete("Read input.txt and wrote output.txt."))]
    if scenario == "edit":
        return [("", "Editing the input file.\n\n<replace_in_file>\n<path>input.txt</path>\n<diff>\n"
                     "------- SEARCH\ninput line one\n=======\ninput line ONE\n+++++++ REPLACE\n</diff>\n"
                     "</replace_in_file>"),
                ("", "Reading a file that is not there.\n\n<read_file>\n<path>missing.txt</path>\n</read_file>"),
                ("", "Listing the definitions.\n\n<list_code_definition_names>\n<path>.</path>\n"
                     "</list_code_definition_names>"),
                ("", "Listing the files.\n\n<list_files>\n<path>.</path>\n</list_files>"),
                ("", "Searching the files.\n\n<search_files>\n<path>.</path>\n<regex>line</regex>\n"
                     "</search_files>"),
                ("", complete("Edited input.txt."))]
    if scenario == "cmdfail":
        return [("", f"Running a command that will fail.\n\n<execute_command>\n<command>"
                     f"{cmd or 'ls /nonexistent-aep-dir && echo unreachable'}</command>\n"
                     "<requires_approval>false</requires_approval>\n</execute_command>"),
                ("", "The command failed.\n\n" + complete("The command failed: the directory does not exist."))]
    raise SystemExit("unknown scenario " + scenario)


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        sys.stderr.write("[fake] " + (fmt % a) + "\n")

    def _json(self, code, obj, headers=()):
        b = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(b)

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            return self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "fake"}]})
        self._json(404, {"error": {"message": "not found"}})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw or b"{}")
        except Exception:
            body = {"_raw": raw.decode("utf-8", "replace")}
        with open(LOG, "a") as f:
            f.write(json.dumps({"ts": time.time(), "path": self.path, "body": body}) + "\n")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            return self._json(404, {"error": {"message": "only /chat/completions"}})
        if SCENARIO == "error":
            hdrs = [("Retry-After", "1")] if ERROR_STATUS == 429 else []
            msg = "Rate limit reached for fake-model" if ERROR_STATUS == 429 else "The server had an error while processing your request"
            return self._json(ERROR_STATUS, {"error": {"message": msg, "type": "server_error" if ERROR_STATUS >= 500 else "rate_limit_error",
                                                       "code": str(ERROR_STATUS)}}, hdrs)

        msgs = body.get("messages", [])
        turn = sum(1 for m in msgs if m.get("role") == "assistant")
        cmd = None
        for m in msgs:
            if m.get("role") == "user":
                mm = re.search(r"CMD:(.+)", text_of(m.get("content")))
                if mm:
                    cmd = mm.group(1).strip()
                    break
        turns = script(SCENARIO, cmd)
        reasoning, text = turns[turn] if turn < len(turns) else ("", complete("Nothing more to do."))
        cid = "chatcmpl-" + uuid.uuid4().hex[:12]
        usage = {"prompt_tokens": 1000 + 100 * turn, "completion_tokens": 50 + turn,
                 "total_tokens": 1050 + 101 * turn, "prompt_tokens_details": {"cached_tokens": 800},
                 "prompt_cache_miss_tokens": 200}
        if not body.get("stream"):
            return self._json(200, {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": MODEL,
                                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                 "finish_reason": "stop"}], "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()

        def ev(obj):
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()

        base = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": MODEL}
        ev({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
        for w in re.findall(r"\S+\s*", reasoning):
            ev({**base, "choices": [{"index": 0, "delta": {"reasoning_content": w}, "finish_reason": None}]})
        for i in range(0, len(text), 16):
            ev({**base, "choices": [{"index": 0, "delta": {"content": text[i:i + 16]}, "finish_reason": None}]})
        ev({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        ev({**base, "choices": [], "usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


if __name__ == "__main__":
    srv = ThreadingHTTPServer(("127.0.0.1", PORT), H)
    sys.stderr.write(f"[fake] scenario={SCENARIO} listening on http://127.0.0.1:{PORT}/v1 log={LOG}\n")
    srv.serve_forever()
